//! Projected geometry referencing (PGR): sketches tied to the edges and vertices they
//! follow, so they move with upstream geometry when a dimension is edited.
//!
//! The ties a model names (`concentric` with `E14`, `coincident` with `V3`...) go into the
//! sketch as constraints on Sketcher external geometry (the bridge adds the referenced
//! entities with `addExternal`). On top of those, a point the model put within a small
//! tolerance of a projected vertex snaps onto it and gets a coincident tie, and a circle or
//! arc centred within the tolerance of a projected circular edge's centre becomes
//! concentric with it.

use freecad_bridge::command::{Constraint, CurveRef, EntityId, PointPos, PointRef, Primitive};
use freecad_bridge::state::{EdgeKind, Frame};
use freecad_bridge::{ModelState, command::Sketch};
use views::SketchMeta;

/// T_t^geom,s: the projected edges of the active body (the ones a sketch may be tied to) as
/// sampled points in view coordinates, one line each, then its vertices, one point each.
pub fn projected_table(meta: &SketchMeta, state: &ModelState) -> String {
    let mut out = String::new();
    // The edges the picture shows, labelled there (a tie to one beside the grid is as good
    // as to one on it), and every edge lying in the sketch plane, listed first: a reader
    // looked for them among forty-sample edges, and one sketching on the end face of a pipe
    // it had drawn larger than S_t did not find the face's circle (the face lay outside
    // the picture).
    let mut edges: Vec<_> = meta
        .edges
        .iter()
        .filter(|e| state.in_active_body(&e.id))
        .filter(|e| e.in_plane || e.points.iter().any(|p| views::in_sketch_picture(*p)))
        .collect();
    edges.sort_by_key(|e| !e.in_plane);
    // An edge square to the plane projects onto a point (a vertex names that spot), and one
    // right below another (a plate's bottom edge under its top edge) onto the same samples:
    // a reader called such lines noise, so each projection is listed once.
    let mut drawn = std::collections::BTreeSet::new();
    for e in edges {
        let pts: Vec<String> = e.points.iter().map(|p| point(*p)).collect();
        let backwards: Vec<String> = pts.iter().rev().cloned().collect();
        if pts.windows(2).all(|w| w[0] == w[1]) || drawn.contains(&backwards) || !drawn.insert(pts.clone()) {
            continue;
        }
        out.push_str(&format!("{}{}: {}\n", e.id, if e.in_plane { " (in plane)" } else { "" }, pts.join(" ")));
    }
    // The vertices too: a reader tying a midpoint or a corner to `V3` otherwise looks its
    // position up in Stage 1's table, in other coordinates. Those in the plane first; one
    // that projects onto a point already listed (a plate's bottom corner under its top
    // corner) adds only tokens.
    let tolerance = 1e-6 * (1.0 + meta.window.size);
    let mut vertices: Vec<(&str, bool, String)> = state
        .vertices
        .iter()
        .filter(|v| state.in_active_body(&v.id))
        .map(|v| (v.id.as_str(), meta.frame.height(v.point).abs() <= tolerance, meta.world_to_view(v.point)))
        .filter(|(_, in_plane, p)| *in_plane || views::in_sketch_picture(*p))
        .map(|(id, in_plane, p)| (id, in_plane, point(p)))
        .collect();
    vertices.sort_by_key(|v| !v.1);
    let mut listed = std::collections::BTreeSet::new();
    for (id, in_plane, at) in vertices {
        if listed.insert(at.clone()) {
            out.push_str(&format!("{id}{}: {at}\n", if in_plane { " (in plane)" } else { "" }));
        }
    }
    if out.is_empty() { "(none)\n".into() } else { out }
}

/// A view point as the table writes it: `(0.1188, 0.8164)`.
fn point(p: [f64; 2]) -> String {
    format!("({:.4}, {:.4})", p[0], p[1])
}

/// What snapping added, for the trace.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Snapped {
    pub constraints: Vec<String>,
}

/// Snap the sketch's points (local coordinates) to projected vertices and circle centres
/// within `tolerance` (model units), adding the ties.
pub fn snap(sketch: &mut Sketch, frame: &Frame, state: &ModelState, tolerance: f64) -> Snapped {
    let mut snapped = Snapped::default();
    if tolerance <= 0.0 {
        return snapped;
    }
    let already_tied = tied_points(&sketch.constraints);
    let in_plane = |p: [f64; 3]| frame.height(p).abs() <= 1e-6 * (1.0 + tolerance);
    // Vertices in the plane first: they are what a sketch on a face follows.
    let mut vertices: Vec<(String, [f64; 2], bool)> = state
        .vertices
        .iter()
        .filter(|v| state.in_active_body(&v.id))
        .map(|v| (v.id.clone(), frame.to_local(v.point), in_plane(v.point)))
        .collect();
    vertices.sort_by_key(|v| !v.2);
    let mut centers: Vec<(String, [f64; 2], bool)> = state
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Circle && state.in_active_body(&e.id))
        .filter_map(|e| e.center.map(|c| (e.id.clone(), frame.to_local(c), e.midpoint.is_some_and(in_plane))))
        .collect();
    centers.sort_by_key(|c| !c.2);
    let mut lines: Vec<(String, [f64; 2], [f64; 2], bool)> = state
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Line && state.in_active_body(&e.id))
        .filter_map(|e| {
            let (a, b) = (e.start?, e.end?);
            Some((e.id.clone(), frame.to_local(a), frame.to_local(b), in_plane(a) && in_plane(b)))
        })
        .filter(|(_, a, b, _)| (a[0] - b[0]).hypot(a[1] - b[1]) > tolerance)
        .collect();
    lines.sort_by_key(|l| !l.3);
    let near = |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).hypot(a[1] - b[1]) <= tolerance;
    let mut done: Vec<[f64; 2]> = Vec::new();
    let count = sketch.primitives.len();
    for i in 0..count {
        for (pos, point) in own_points(&sketch.primitives[i]) {
            let reference = PointRef::Own(i, pos);
            // Endpoints that meet are joined by auto-coincidence: tie each cluster once.
            if already_tied.contains(&reference) || done.iter().any(|d| near(*d, point)) {
                continue;
            }
            if pos != PointPos::Center
                && let Some((id, target, _)) = vertices.iter().find(|v| near(v.1, point))
            {
                move_point(&mut sketch.primitives, point, *target);
                let vertex: EntityId = id.parse().expect("state IDs parse");
                sketch.constraints.push(Constraint::Coincident { a: reference, b: PointRef::Vertex(vertex) });
                snapped.constraints.push(format!("{reference} coincident {id}"));
                done.push(*target);
                done.push(point);
                continue;
            }
            if pos != PointPos::Center
                && let Some((id, target)) =
                    lines.iter().find_map(|(id, a, b, _)| on_segment(point, *a, *b, tolerance).map(|t| (id, t)))
            {
                move_point(&mut sketch.primitives, point, target);
                let edge: EntityId = id.parse().expect("state IDs parse");
                sketch.constraints.push(Constraint::PointOnObject { point: reference, object: CurveRef::Edge(edge) });
                snapped.constraints.push(format!("{reference} on {id}"));
                done.push(target);
                done.push(point);
                continue;
            }
            if pos == PointPos::Center
                && let Some((id, target, _)) = centers.iter().find(|c| near(c.1, point))
            {
                set_center(&mut sketch.primitives[i], *target);
                let edge: EntityId = id.parse().expect("state IDs parse");
                sketch.constraints.push(Constraint::Concentric { a: CurveRef::Own(i), b: CurveRef::Edge(edge) });
                snapped.constraints.push(format!("g{i} concentric {id}"));
            }
        }
    }
    snapped
}

/// The foot of `p` on segment `a`-`b` when it lies within `tolerance` of it.
fn on_segment(p: [f64; 2], a: [f64; 2], b: [f64; 2], tolerance: f64) -> Option<[f64; 2]> {
    let d = [b[0] - a[0], b[1] - a[1]];
    let len2 = d[0] * d[0] + d[1] * d[1];
    let t = ((p[0] - a[0]) * d[0] + (p[1] - a[1]) * d[1]) / len2;
    let slack = tolerance / len2.sqrt();
    if !(-slack..=1.0 + slack).contains(&t) {
        return None;
    }
    let foot = [a[0] + t * d[0], a[1] + t * d[1]];
    ((foot[0] - p[0]).hypot(foot[1] - p[1]) <= tolerance).then_some(foot)
}

/// Own points that a model's constraint already ties to existing geometry.
fn tied_points(constraints: &[Constraint]) -> Vec<PointRef> {
    let external_point = |p: &PointRef| matches!(p, PointRef::Vertex(_) | PointRef::Edge(..));
    let external_curve = |c: &CurveRef| matches!(c, CurveRef::Edge(_));
    let mut out = Vec::new();
    for c in constraints {
        match c {
            Constraint::Coincident { a, b } | Constraint::Distance { a, b, .. } => {
                if external_point(b) {
                    out.push(*a);
                }
                if external_point(a) {
                    out.push(*b);
                }
            }
            Constraint::PointOnObject { point, object } | Constraint::DistanceToLine { point, line: object, .. }
                if external_curve(object) =>
            {
                out.push(*point)
            }
            Constraint::Midpoint { point, a, b } if external_point(a) || external_point(b) => out.push(*point),
            Constraint::Concentric { a: CurveRef::Own(i), b }
            | Constraint::Concentric { a: b, b: CurveRef::Own(i) }
                if external_curve(b) =>
            {
                out.push(PointRef::Own(*i, PointPos::Center))
            }
            _ => {}
        }
    }
    out
}

fn own_points(p: &Primitive) -> Vec<(PointPos, [f64; 2])> {
    match p {
        Primitive::Line { start, end, construction: false } => vec![(PointPos::Start, *start), (PointPos::End, *end)],
        Primitive::Arc { start, end, construction: false, .. } => {
            vec![(PointPos::Start, *start), (PointPos::End, *end)]
        }
        Primitive::Circle { center, construction: false, .. } => vec![(PointPos::Center, *center)],
        _ => Vec::new(),
    }
}

/// Move every endpoint at `from` (the whole cluster of meeting endpoints) to `to`.
fn move_point(prims: &mut [Primitive], from: [f64; 2], to: [f64; 2]) {
    let same = |p: &[f64; 2]| {
        (p[0] - from[0]).abs() <= 1e-9 * (1.0 + from[0].abs()) && (p[1] - from[1]).abs() <= 1e-9 * (1.0 + from[1].abs())
    };
    for p in prims {
        match p {
            Primitive::Line { start, end, .. } | Primitive::Arc { start, end, .. } => {
                for q in [start, end] {
                    if same(q) {
                        *q = to;
                    }
                }
            }
            _ => {}
        }
    }
}

fn set_center(p: &mut Primitive, to: [f64; 2]) {
    if let Primitive::Circle { center, .. } = p {
        *center = to;
    }
}
