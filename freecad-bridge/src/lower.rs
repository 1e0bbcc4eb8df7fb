//! Check a command against the current model state and lower it into the worker's form.
//!
//! Everything that can be decided without FreeCAD is decided here, with errors a model can
//! act on: unknown IDs, wrong entity kinds, bad numbers, degenerate primitives. Arcs become
//! counter-clockwise centre arcs (the only kind Sketcher stores), and references become
//! Sketcher's (geometry, position) pairs.

use std::collections::HashSet;
use std::f64::consts::TAU;

use serde_json::{Value, json};

use crate::command::{
    Command, Constraint, CurveRef, EntityId, EntityKind, Extent, Plane, PointPos, PointRef, Primitive, Revolve, Sketch,
    SweepPath, body_number,
};
use crate::geometry::{circumcircle, distance_2d};
use crate::state::{EdgeKind, FaceKind, ModelState, PLANE_TYPE, SKETCH_TYPE};

/// Why a command was refused before it reached FreeCAD.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub reason: String,
    pub entity: Option<String>,
}

fn invalid(reason: impl Into<String>) -> Invalid {
    Invalid { reason: reason.into(), entity: None }
}

fn invalid_at(entity: impl ToString, reason: impl Into<String>) -> Invalid {
    Invalid { reason: reason.into(), entity: Some(entity.to_string()) }
}

/// Validate `command` against `state` and produce the worker's JSON for it.
pub fn lower(command: &Command, state: &ModelState) -> Result<Value, Invalid> {
    match command {
        Command::Sketch(s) => lower_sketch(s, state),
        Command::Extrude(e) => {
            need_sketch(&e.profile, state)?;
            check_extent(&e.extent)?;
            Ok(serde_json::to_value(command).map_err(|e| invalid(e.to_string()))?)
        }
        Command::Revolve(r) => lower_revolve(r, state),
        Command::Sweep(s) => {
            need_sketch(&s.profile, state)?;
            let path = match &s.path {
                SweepPath::Sketch(name) => {
                    need_sketch(name, state)?;
                    json!({"sketch": name})
                }
                SweepPath::Edges(edges) => {
                    if edges.is_empty() {
                        return Err(invalid("a sweep path needs at least one edge"));
                    }
                    for e in edges {
                        need_entity(e, EntityKind::Edge, state)?;
                    }
                    json!({"edges": edges})
                }
            };
            Ok(json!({"op": "sweep", "profile": s.profile, "mode": s.mode, "path": path, "frenet": s.frenet}))
        }
        Command::Loft(l) => {
            if l.profiles.len() < 2 {
                return Err(invalid(format!("a loft needs two or more sketches, got {}", l.profiles.len())));
            }
            for p in &l.profiles {
                need_sketch(p, state)?;
            }
            Ok(serde_json::to_value(command).map_err(|e| invalid(e.to_string()))?)
        }
        Command::Fillet(f) => {
            positive("fillet radius", f.radius)?;
            need_edges(&f.edges, state)?;
            Ok(serde_json::to_value(command).map_err(|e| invalid(e.to_string()))?)
        }
        Command::Chamfer(c) => {
            positive("chamfer size", c.size)?;
            need_edges(&c.edges, state)?;
            Ok(serde_json::to_value(command).map_err(|e| invalid(e.to_string()))?)
        }
        Command::Plane(p) => lower_plane(p, state),
        Command::Body(b) => {
            let n = state.body_count();
            match body_number(&b.name) {
                Some(k) if k <= n + 1 => Ok(json!({"op": "body", "name": b.name})),
                _ => Err(invalid_at(
                    &b.name,
                    format!("there is no body {}: the bodies are B1..B{n}, and the next new one is B{}", b.name, n + 1),
                )),
            }
        }
        Command::End => Ok(json!({"op": "end"})),
    }
}

fn positive(what: &str, x: f64) -> Result<(), Invalid> {
    if x.is_finite() && x > 0.0 { Ok(()) } else { Err(invalid(format!("{what} must be a positive number, got {x}"))) }
}

fn finite(what: &str, xs: &[f64]) -> Result<(), Invalid> {
    match xs.iter().find(|x| !x.is_finite()) {
        Some(x) => Err(invalid(format!("{what} must be finite, got {x}"))),
        None => Ok(()),
    }
}

fn check_extent(extent: &Extent) -> Result<(), Invalid> {
    match extent {
        Extent::OneSide { depth } | Extent::Symmetric { depth } => positive("extrusion depth", *depth),
        Extent::TwoSides { depth, depth2 } => {
            // One side may be zero, but not both; neither may be negative.
            finite("extrusion depth", &[*depth, *depth2])?;
            if *depth < 0.0 || *depth2 < 0.0 || depth + depth2 <= 0.0 {
                return Err(invalid(format!(
                    "two-sided extrusion depths must be non-negative with a positive sum, got {depth} and {depth2}"
                )));
            }
            Ok(())
        }
        Extent::ThroughAll { .. } => Ok(()),
    }
}

fn valid_name(name: &str) -> Result<(), Invalid> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 40;
    if ok {
        Ok(())
    } else {
        Err(invalid_at(name, format!("'{name}' is not a valid name (letters, digits, _; e.g. S1)")))
    }
}

fn need_new_name(name: &str, state: &ModelState) -> Result<(), Invalid> {
    valid_name(name)?;
    let reserved = ["Body", "Origin", "X_Axis", "Y_Axis", "Z_Axis", "XY_Plane", "XZ_Plane", "YZ_Plane"];
    let body_like = name.strip_prefix('B').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
    if body_like {
        return Err(invalid_at(name, format!("the name {name} is reserved for bodies; choose another")));
    }
    let clashes_with_id = name.parse::<EntityId>().is_ok() || matches!(name, "XY" | "XZ" | "YZ");
    if state.feature(name).is_some() || reserved.contains(&name) || clashes_with_id {
        return Err(invalid_at(name, format!("the name {name} is already taken; choose another")));
    }
    Ok(())
}

fn need_sketch(name: &str, state: &ModelState) -> Result<(), Invalid> {
    match state.feature(name) {
        Some(f) if f.type_id == SKETCH_TYPE => Ok(()),
        Some(f) => Err(invalid_at(name, format!("{name} is a {}, not a sketch", f.type_id))),
        None => {
            let known: Vec<&str> = state.features_of(SKETCH_TYPE).collect();
            Err(invalid_at(name, format!("unknown sketch {name}; the sketches are: {}", list_or_none(&known))))
        }
    }
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() { "none".to_string() } else { items.join(", ") }
}

fn need_entity(text: &str, kind: EntityKind, state: &ModelState) -> Result<EntityId, Invalid> {
    let id: EntityId = text.parse().map_err(|e: String| invalid_at(text, e))?;
    check_entity(id, kind, state)?;
    Ok(id)
}

fn check_entity(id: EntityId, kind: EntityKind, state: &ModelState) -> Result<(), Invalid> {
    let what = match kind {
        EntityKind::Face => "face",
        EntityKind::Edge => "edge",
        EntityKind::Vertex => "vertex",
    };
    if id.kind != kind {
        return Err(invalid_at(id, format!("{id} is not a {what}")));
    }
    let bodies = state.body_count();
    if id.body > bodies {
        return Err(invalid_at(id, format!("{id} names body {}, but the model has B1..B{bodies}", id.body_name())));
    }
    let where_ = if bodies == 1 { "the model".to_string() } else { format!("body {}", id.body_name()) };
    let n = state.count_in(id.body, kind);
    if n == 0 {
        return Err(invalid_at(id, format!("unknown {what} {id}: {where_} has no {what}s yet")));
    }
    if id.index > n {
        let (prefix, letter) = (id.prefix(), id.letter());
        return Err(invalid_at(
            id,
            format!("unknown {what} {id}: {where_} has {prefix}{letter}1..{prefix}{letter}{n}"),
        ));
    }
    Ok(())
}

fn need_edges(edges: &[String], state: &ModelState) -> Result<(), Invalid> {
    if edges.is_empty() {
        return Err(invalid("name at least one edge"));
    }
    let mut seen = HashSet::new();
    for e in edges {
        let id = need_entity(e, EntityKind::Edge, state)?;
        if !seen.insert(id) {
            return Err(invalid_at(e, format!("edge {e} is listed twice")));
        }
    }
    Ok(())
}

/// A sketch or plane support: base plane, planar face or construction plane.
pub fn need_support(on: &str, state: &ModelState) -> Result<(), Invalid> {
    if matches!(on, "XY" | "XZ" | "YZ") {
        return Ok(());
    }
    if let Ok(id) = on.parse::<EntityId>() {
        check_entity(id, EntityKind::Face, state)?;
        let face = state.face(id).ok_or_else(|| invalid_at(id, "face missing from the state"))?;
        if face.kind != FaceKind::Plane {
            return Err(invalid_at(
                on,
                format!("{on} is a {:?} face; sketches and planes need a planar face", face.kind).to_lowercase(),
            ));
        }
        return Ok(());
    }
    match state.feature(on) {
        Some(f) if f.type_id == PLANE_TYPE => Ok(()),
        _ => {
            let planes: Vec<&str> = state.features_of(PLANE_TYPE).collect();
            Err(invalid_at(
                on,
                format!(
                    "'{on}' is not a base plane (XY, XZ, YZ), a face ID or a construction plane (known: {})",
                    list_or_none(&planes)
                ),
            ))
        }
    }
}

fn lower_revolve(r: &Revolve, state: &ModelState) -> Result<Value, Invalid> {
    need_sketch(&r.profile, state)?;
    if !(r.angle.is_finite() && r.angle > 0.0 && r.angle <= 360.0) {
        return Err(invalid(format!("revolve angle must be in (0, 360] degrees, got {}", r.angle)));
    }
    let axis = if let Ok(id) = r.axis.parse::<EntityId>() {
        check_entity(id, EntityKind::Edge, state)?;
        if state.edge(id).map(|e| e.kind) != Some(EdgeKind::Line) {
            return Err(invalid_at(id, format!("revolve axis {id} is not a straight edge")));
        }
        id.to_string()
    } else if let Some((sketch, part)) = r.axis.split_once('.') {
        need_sketch(sketch, state)?;
        match part {
            "v_axis" => format!("{sketch}.V_Axis"),
            "h_axis" => format!("{sketch}.H_Axis"),
            _ => match part.strip_prefix('g').and_then(|d| d.parse::<usize>().ok()) {
                Some(i) => format!("{sketch}.{i}"),
                None => {
                    return Err(invalid_at(
                        &r.axis,
                        format!("'{}' is not an axis (S1.v_axis, S1.h_axis, S1.g3 or an edge E5)", r.axis),
                    ));
                }
            },
        }
    } else {
        return Err(invalid_at(
            &r.axis,
            format!("'{}' is not an axis (S1.v_axis, S1.h_axis, S1.g3 or an edge E5)", r.axis),
        ));
    };
    Ok(json!({
        "op": "revolve", "profile": r.profile, "mode": r.mode, "axis": axis,
        "angle": r.angle, "symmetric": r.symmetric, "reversed": r.reversed,
    }))
}

fn lower_plane(p: &Plane, state: &ModelState) -> Result<Value, Invalid> {
    need_new_name(&p.name, state)?;
    need_support(&p.on, state)?;
    finite("plane offset", &[p.offset])?;
    let at = p.at.unwrap_or([0.0, 0.0]);
    finite("plane origin", &at)?;
    let mut rotations = Vec::new();
    for rot in &p.rotation.0 {
        finite("plane rotation angle", &[rot.angle])?;
        if !matches!(rot.axis.as_str(), "x" | "y" | "z") {
            let id = need_entity(&rot.axis, EntityKind::Edge, state)?;
            if state.edge(id).map(|e| e.kind) != Some(EdgeKind::Line) {
                return Err(invalid_at(id, format!("rotation axis {id} is not a straight edge")));
            }
        }
        rotations.push(json!({"axis": rot.axis, "angle": rot.angle}));
    }
    Ok(json!({"op": "plane", "name": p.name, "on": p.on, "at": at, "offset": p.offset, "rotations": rotations}))
}

// ------------------------------------------------------------------------------ sketches

/// A primitive as Sketcher stores it, plus how our start/end map onto its positions.
struct Lowered {
    geometry: Value,
    /// Endpoints (start, end) in our terms, absent for circles.
    ends: Option<([f64; 2], [f64; 2])>,
    /// A three-point arc given clockwise is stored reversed: our start is Sketcher's end.
    swapped: bool,
    is_line: bool,
    is_round: bool,
    construction: bool,
}

const SKETCH_START: i64 = 1;
const SKETCH_END: i64 = 2;
const SKETCH_CENTER: i64 = 3;

fn lower_primitive(i: usize, p: &Primitive) -> Result<Lowered, Invalid> {
    let label = format!("g{i}");
    let degenerate = |what: &str| invalid_at(&label, format!("primitive {label}: {what}"));
    match p {
        Primitive::Line { start, end, construction } => {
            finite(&format!("primitive {label} coordinates"), &[start[0], start[1], end[0], end[1]])?;
            if distance_2d(*start, *end) < 1e-9 {
                return Err(degenerate("a line needs two distinct points"));
            }
            Ok(Lowered {
                geometry: json!({"line": [start[0], start[1], end[0], end[1]], "construction": construction}),
                ends: Some((*start, *end)),
                swapped: false,
                is_line: true,
                is_round: false,
                construction: *construction,
            })
        }
        Primitive::Circle { center, radius, construction } => {
            finite(&format!("primitive {label} centre"), center)?;
            positive(&format!("primitive {label} radius"), *radius)?;
            Ok(Lowered {
                geometry: json!({"circle": [center[0], center[1], radius], "construction": construction}),
                ends: None,
                swapped: false,
                is_line: false,
                is_round: true,
                construction: *construction,
            })
        }
        Primitive::CenterArc { center, radius, start_angle, end_angle, construction } => {
            finite(&format!("primitive {label}"), &[center[0], center[1], *start_angle, *end_angle])?;
            positive(&format!("primitive {label} radius"), *radius)?;
            let a0 = start_angle.to_radians();
            let mut a1 = end_angle.to_radians();
            while a1 <= a0 {
                a1 += TAU;
            }
            if a1 - a0 < 1e-9 || a1 - a0 >= TAU - 1e-9 {
                return Err(degenerate("an arc must span more than 0 and less than 360 degrees (use a circle)"));
            }
            let at = |a: f64| [center[0] + radius * a.cos(), center[1] + radius * a.sin()];
            Ok(Lowered {
                geometry: json!({"arc": [center[0], center[1], radius, a0, a1], "construction": construction}),
                ends: Some((at(a0), at(a1))),
                swapped: false,
                is_line: false,
                is_round: true,
                construction: *construction,
            })
        }
        Primitive::Arc { start, mid, end, construction } => {
            finite(&format!("primitive {label} coordinates"), &[start[0], start[1], mid[0], mid[1], end[0], end[1]])?;
            let (center, radius) = circumcircle(*start, *mid, *end)
                .ok_or_else(|| degenerate("the three arc points are collinear or coincide"))?;
            let angle = |p: [f64; 2]| (p[1] - center[1]).atan2(p[0] - center[0]);
            let ccw_span = |from: f64, to: f64| (to - from).rem_euclid(TAU);
            let (a_start, a_mid, a_end) = (angle(*start), angle(*mid), angle(*end));
            // Counter-clockwise from start, do we meet mid before end?
            let counter_clockwise = ccw_span(a_start, a_mid) < ccw_span(a_start, a_end);
            let (a0, span) =
                if counter_clockwise { (a_start, ccw_span(a_start, a_end)) } else { (a_end, ccw_span(a_end, a_start)) };
            Ok(Lowered {
                geometry: json!({"arc": [center[0], center[1], radius, a0, a0 + span], "construction": construction}),
                ends: Some((*start, *end)),
                swapped: !counter_clockwise,
                is_line: false,
                is_round: true,
                construction: *construction,
            })
        }
    }
}

/// A Sketcher geometry argument: own index, external reference (resolved by the worker), axis.
fn geo_arg(r: CurveRef) -> Value {
    match r {
        CurveRef::Own(i) => json!({"geo": i}),
        CurveRef::Edge(id) => json!({"geo": id.to_string()}),
        CurveRef::HAxis => json!({"geo": -1}),
        CurveRef::VAxis => json!({"geo": -2}),
    }
}

struct SketchContext<'a> {
    prims: &'a [Lowered],
    state: &'a ModelState,
}

impl SketchContext<'_> {
    fn own(&self, i: usize) -> Result<&Lowered, Invalid> {
        self.prims.get(i).ok_or_else(|| {
            invalid_at(
                format!("g{i}"),
                format!("g{i} does not exist: the sketch has g0..g{}", self.prims.len().saturating_sub(1)),
            )
        })
    }

    fn curve(&self, r: CurveRef) -> Result<CurveRef, Invalid> {
        match r {
            CurveRef::Own(i) => self.own(i).map(|_| r),
            CurveRef::Edge(id) => check_entity(id, EntityKind::Edge, self.state).map(|_| r),
            CurveRef::HAxis | CurveRef::VAxis => Ok(r),
        }
    }

    fn line(&self, r: CurveRef) -> Result<CurveRef, Invalid> {
        let r = self.curve(r)?;
        let is_line = match r {
            CurveRef::Own(i) => self.own(i)?.is_line,
            CurveRef::Edge(id) => self.state.edge(id).map(|e| e.kind) == Some(EdgeKind::Line),
            CurveRef::HAxis | CurveRef::VAxis => true,
        };
        if is_line { Ok(r) } else { Err(invalid_at(r, format!("{r} is not a line"))) }
    }

    fn round(&self, r: CurveRef) -> Result<CurveRef, Invalid> {
        let r = self.curve(r)?;
        let is_round = match r {
            CurveRef::Own(i) => self.own(i)?.is_round,
            CurveRef::Edge(id) => self.state.edge(id).map(|e| e.kind) == Some(EdgeKind::Circle),
            CurveRef::HAxis | CurveRef::VAxis => false,
        };
        if is_round { Ok(r) } else { Err(invalid_at(r, format!("{r} is not a circle or arc"))) }
    }

    /// Sketcher's (geometry, position) pair for a point.
    fn point(&self, p: PointRef) -> Result<(Value, i64), Invalid> {
        let sketcher_pos = |pos: PointPos, swapped: bool| match (pos, swapped) {
            (PointPos::Start, false) | (PointPos::End, true) => SKETCH_START,
            (PointPos::End, false) | (PointPos::Start, true) => SKETCH_END,
            (PointPos::Center, _) => SKETCH_CENTER,
        };
        match p {
            PointRef::Origin => Ok((json!({"geo": -1}), SKETCH_START)),
            PointRef::Vertex(id) => {
                check_entity(id, EntityKind::Vertex, self.state)?;
                Ok((json!({"geo": id.to_string()}), SKETCH_START))
            }
            PointRef::Own(i, pos) => {
                let prim = self.own(i)?;
                if pos != PointPos::Center && prim.ends.is_none() {
                    return Err(invalid_at(p, format!("{p}: a circle has no start or end; use g{i}.center")));
                }
                if pos == PointPos::Center && prim.is_line {
                    return Err(invalid_at(p, format!("{p}: a line has no centre")));
                }
                Ok((json!({"geo": i}), sketcher_pos(pos, prim.swapped)))
            }
            PointRef::Edge(id, pos) => {
                check_entity(id, EntityKind::Edge, self.state)?;
                let edge = self.state.edge(id).ok_or_else(|| invalid_at(id, "edge missing from the state"))?;
                match (edge.kind, pos) {
                    (EdgeKind::Circle, PointPos::Center) => Ok((json!({"geo": id.to_string()}), SKETCH_CENTER)),
                    (_, PointPos::Center) => Err(invalid_at(p, format!("{p}: edge {id} is not circular"))),
                    (_, _) if edge.closed => {
                        Err(invalid_at(p, format!("{p}: edge {id} is closed and has no start or end")))
                    }
                    (_, pos) => Ok((json!({"geo": id.to_string()}), sketcher_pos(pos, false))),
                }
            }
        }
    }
}

fn constraint_json(kind: &str, args: Vec<Value>, label: String) -> Value {
    json!({"kind": kind, "args": args, "label": label})
}

fn lower_sketch(s: &Sketch, state: &ModelState) -> Result<Value, Invalid> {
    need_new_name(&s.name, state)?;
    need_support(&s.on, state)?;
    if s.primitives.is_empty() {
        return Err(invalid_at(&s.name, format!("sketch {} has no primitives", s.name)));
    }
    let prims = s.primitives.iter().enumerate().map(|(i, p)| lower_primitive(i, p)).collect::<Result<Vec<_>, _>>()?;
    let cx = SketchContext { prims: &prims, state };
    let mut constraints = Vec::new();
    // Endpoint pairs the author tied explicitly; auto-coincidence must not repeat them
    // (Sketcher rejects redundant constraints).
    let mut tied: Vec<(usize, i64, usize, i64)> = Vec::new();
    for (n, c) in s.constraints.iter().enumerate() {
        let label = format!("#{n}");
        let value = |what: &str, v: f64| positive(&format!("constraint {label} {what}"), v);
        let lowered = match c {
            Constraint::Coincident { a, b } => {
                let (ga, pa) = cx.point(*a)?;
                let (gb, pb) = cx.point(*b)?;
                if let (PointRef::Own(i, _), PointRef::Own(j, _)) = (a, b) {
                    tied.push((*i, pa, *j, pb));
                }
                constraint_json("Coincident", vec![ga, pa.into(), gb, pb.into()], label)
            }
            Constraint::PointOnObject { point, object } => {
                let (g, pos) = cx.point(*point)?;
                constraint_json("PointOnObject", vec![g, pos.into(), geo_arg(cx.curve(*object)?)], label)
            }
            Constraint::Concentric { a, b } => {
                let (a, b) = (cx.round(*a)?, cx.round(*b)?);
                constraint_json(
                    "Coincident",
                    vec![geo_arg(a), SKETCH_CENTER.into(), geo_arg(b), SKETCH_CENTER.into()],
                    label,
                )
            }
            Constraint::Equal { a, b } => {
                let (a, b) = (cx.curve(*a)?, cx.curve(*b)?);
                constraint_json("Equal", vec![geo_arg(a), geo_arg(b)], label)
            }
            Constraint::Tangent { a, b } => {
                constraint_json("Tangent", vec![geo_arg(cx.curve(*a)?), geo_arg(cx.curve(*b)?)], label)
            }
            Constraint::Parallel { a, b } => {
                constraint_json("Parallel", vec![geo_arg(cx.line(*a)?), geo_arg(cx.line(*b)?)], label)
            }
            Constraint::Perpendicular { a, b } => {
                constraint_json("Perpendicular", vec![geo_arg(cx.line(*a)?), geo_arg(cx.line(*b)?)], label)
            }
            Constraint::Horizontal { line } => constraint_json("Horizontal", vec![geo_arg(cx.line(*line)?)], label),
            Constraint::Vertical { line } => constraint_json("Vertical", vec![geo_arg(cx.line(*line)?)], label),
            Constraint::Distance { a, b, value: v } => {
                value("value", *v)?;
                let (ga, pa) = cx.point(*a)?;
                let (gb, pb) = cx.point(*b)?;
                constraint_json("Distance", vec![ga, pa.into(), gb, pb.into(), (*v).into()], label)
            }
            Constraint::DistanceToLine { point, line, value: v } => {
                value("value", *v)?;
                let (g, pos) = cx.point(*point)?;
                constraint_json("Distance", vec![g, pos.into(), geo_arg(cx.line(*line)?), (*v).into()], label)
            }
            Constraint::Midpoint { point, a, b } => {
                let (ga, pa) = cx.point(*a)?;
                let (gb, pb) = cx.point(*b)?;
                let (gp, pp) = cx.point(*point)?;
                constraint_json("Symmetric", vec![ga, pa.into(), gb, pb.into(), gp, pp.into()], label)
            }
            Constraint::Length { line, value: v } => {
                value("value", *v)?;
                constraint_json("Distance", vec![geo_arg(cx.line(*line)?), (*v).into()], label)
            }
            Constraint::Radius { curve, value: v } => {
                value("value", *v)?;
                constraint_json("Radius", vec![geo_arg(cx.round(*curve)?), (*v).into()], label)
            }
        };
        constraints.push(lowered);
    }
    if s.auto_coincident {
        constraints.extend(auto_coincident(&prims, &tied));
    }
    Ok(json!({
        "op": "sketch",
        "name": s.name,
        "on": s.on,
        "geometry": prims.iter().map(|p| p.geometry.clone()).collect::<Vec<_>>(),
        "constraints": constraints,
    }))
}

/// Coincident constraints for endpoints that meet, one chain per cluster of meeting points.
fn auto_coincident(prims: &[Lowered], tied: &[(usize, i64, usize, i64)]) -> Vec<Value> {
    let mut points: Vec<(usize, i64, [f64; 2])> = Vec::new();
    let mut extent = 0.0f64;
    for (i, p) in prims.iter().enumerate() {
        if let (Some((start, end)), false) = (p.ends, p.construction) {
            let (ps, pe) = if p.swapped { (SKETCH_END, SKETCH_START) } else { (SKETCH_START, SKETCH_END) };
            points.push((i, ps, start));
            points.push((i, pe, end));
            extent = extent.max(start[0].abs()).max(start[1].abs()).max(end[0].abs()).max(end[1].abs());
        }
    }
    let tolerance = 1e-7 * extent.max(1.0);
    // Union-find over the endpoints, seeded with the author's own ties.
    let mut parent: Vec<usize> = (0..points.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let index_of = |g: usize, pos: i64| points.iter().position(|&(pg, pp, _)| pg == g && pp == pos);
    for &(i, pi, j, pj) in tied {
        if let (Some(a), Some(b)) = (index_of(i, pi), index_of(j, pj)) {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            parent[ra] = rb;
        }
    }
    let mut out = Vec::new();
    for a in 0..points.len() {
        for b in (a + 1)..points.len() {
            if points[a].0 == points[b].0 || distance_2d(points[a].2, points[b].2) > tolerance {
                continue;
            }
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            if ra != rb {
                parent[ra] = rb;
                let (ga, pa, _) = points[a];
                let (gb, pb, _) = points[b];
                out.push(constraint_json(
                    "Coincident",
                    vec![json!({"geo": ga}), pa.into(), json!({"geo": gb}), pb.into()],
                    "auto".into(),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect_sketch() -> Sketch {
        serde_json::from_value(json!({
            "name": "S1", "on": "XY",
            "primitives": [
                {"type": "line", "start": [0, 0], "end": [10, 0]},
                {"type": "line", "start": [10, 0], "end": [10, 5]},
                {"type": "line", "start": [10, 5], "end": [0, 5]},
                {"type": "line", "start": [0, 5], "end": [0, 0]}
            ]
        }))
        .expect("sketch")
    }

    #[test]
    fn closed_profiles_get_one_coincidence_per_corner() {
        let lowered = lower_sketch(&rect_sketch(), &ModelState::empty()).expect("lowered");
        assert_eq!(lowered["constraints"].as_array().map(Vec::len), Some(4));
    }

    #[test]
    fn explicit_ties_are_not_repeated() {
        let mut s = rect_sketch();
        s.constraints
            .push(Constraint::Coincident { a: "g0.end".parse().expect("ref"), b: "g1.start".parse().expect("ref") });
        let lowered = lower_sketch(&s, &ModelState::empty()).expect("lowered");
        assert_eq!(lowered["constraints"].as_array().map(Vec::len), Some(4));
    }

    #[test]
    fn clockwise_three_point_arcs_are_stored_counter_clockwise() {
        // From (1,0) through (0,-1) to (-1,0): clockwise, the lower half.
        let p = Primitive::Arc { start: [1.0, 0.0], mid: [0.0, -1.0], end: [-1.0, 0.0], construction: false };
        let l = lower_primitive(0, &p).expect("arc");
        assert!(l.swapped);
        let arc = l.geometry["arc"].as_array().expect("arc array");
        let (a0, a1) = (arc[3].as_f64().unwrap_or(0.0), arc[4].as_f64().unwrap_or(0.0));
        // Counter-clockwise from pi to 2 pi: passes through -pi/2 (= 3 pi / 2).
        assert!((a0 - std::f64::consts::PI).abs() < 1e-12, "{a0}");
        assert!((a1 - TAU).abs() < 1e-12, "{a1}");
    }

    #[test]
    fn unknown_ids_name_the_range() {
        let cmd: Command =
            serde_json::from_value(json!({"op": "fillet", "edges": ["E3"], "radius": 1.0})).expect("cmd");
        let err = lower(&cmd, &ModelState::empty()).expect_err("no edges yet");
        assert_eq!(err.entity.as_deref(), Some("E3"));
        assert!(err.reason.contains("no edges yet"), "{}", err.reason);
    }

    #[test]
    fn bad_numbers_are_refused() {
        let cmd: Command =
            serde_json::from_value(json!({"op": "chamfer", "edges": ["E1"], "size": -1.0})).expect("cmd");
        assert!(lower(&cmd, &ModelState::empty()).expect_err("negative").reason.contains("positive"));
        let cmd: Command = serde_json::from_value(json!({
            "op": "sketch", "name": "S1", "on": "XY",
            "primitives": [{"type": "arc", "start": [0, 0], "mid": [1, 1], "end": [2, 2]}]
        }))
        .expect("cmd");
        assert!(lower(&cmd, &ModelState::empty()).expect_err("collinear").reason.contains("collinear"));
    }
}
