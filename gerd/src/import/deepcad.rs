//! DeepCAD's JSON (Onshape sketches and extrusions, as DeepCAD and SeekCAD ship them).
//!
//! Curve points are in the sketch's 2D frame (`transform`: origin, x_axis, y_axis, z_axis);
//! an extrusion runs along the sketch's z axis, `extent_one` along it and, for two sides,
//! `extent_two` against it; a symmetric extrusion goes `extent_one` to each side (DeepCAD's
//! own reconstruction does this, and the fixture's bounding box agrees). New bodies and joins
//! add material, cuts remove it; intersections have no command and are refused.

use std::collections::HashMap;
use std::f64::consts::TAU;

use freecad_bridge::Session;
use freecad_bridge::command::Mode;
use serde::Deserialize;

use super::{Curve, Feature, Frame, ImportError, Imported, Span, V3, build, cross, dot, norm, sub, unit};

#[derive(Debug, Deserialize)]
struct Document {
    entities: HashMap<String, serde_json::Value>,
    sequence: Vec<Step>,
}

#[derive(Debug, Deserialize)]
struct Step {
    #[serde(rename = "type")]
    kind: String,
    entity: String,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct P {
    x: f64,
    y: f64,
    #[serde(default)]
    z: f64,
}

impl P {
    fn v(self) -> V3 {
        [self.x, self.y, self.z]
    }
}

#[derive(Debug, Deserialize)]
struct Transform {
    origin: P,
    x_axis: P,
    y_axis: P,
    z_axis: P,
}

#[derive(Debug, Deserialize)]
struct SketchEntity {
    transform: Transform,
    profiles: HashMap<String, Profile>,
}

#[derive(Debug, Deserialize)]
struct Profile {
    loops: Vec<Loop>,
}

#[derive(Debug, Deserialize)]
struct Loop {
    #[serde(default)]
    is_outer: bool,
    profile_curves: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum ProfileCurve {
    Line3D { start_point: P, end_point: P },
    Arc3D { start_point: P, end_point: P, center_point: P, radius: f64, start_angle: f64, end_angle: f64 },
    Circle3D { center_point: P, radius: f64 },
}

#[derive(Debug, Deserialize)]
struct ExtrudeEntity {
    extent_one: Extent,
    #[serde(default)]
    extent_two: Option<Extent>,
    extent_type: String,
    operation: String,
    #[serde(default)]
    profiles: Vec<ProfileRef>,
    #[serde(default)]
    start_extent: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Extent {
    distance: Distance,
    #[serde(default)]
    taper_angle: Option<Distance>,
}

#[derive(Debug, Deserialize)]
struct Distance {
    value: f64,
}

#[derive(Debug, Deserialize)]
struct ProfileRef {
    profile: String,
    sketch: String,
}

fn json_error(what: impl std::fmt::Display) -> ImportError {
    ImportError::DeepCadJson(what.to_string())
}

fn unsupported(construct: impl Into<String>, entity: &str) -> ImportError {
    ImportError::DeepCadUnsupported { construct: construct.into(), entity: entity.to_string() }
}

/// The unit of a DeepCAD file's lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// Metres when every length is below 1 (DeepCAD's raw files, from Onshape in SI units),
    /// else millimetres (exports such as SeekCAD's).
    Auto,
    Metres,
    Millimetres,
}

/// Import a DeepCAD JSON model: build it in `session` (which should hold an empty document)
/// and return the program in the command language. Lengths in millimetres, the unit told
/// by [`Units::Auto`].
pub fn import_deepcad(json: &str, session: &mut Session) -> Result<Imported, ImportError> {
    import_deepcad_in(json, session, Units::Auto)
}

/// [`import_deepcad`] with the file's unit given. The program is in millimetres (FreeCAD's
/// unit); the scale is in the notes, so the source's values stay recoverable.
pub fn import_deepcad_in(json: &str, session: &mut Session, units: Units) -> Result<Imported, ImportError> {
    let mut value: serde_json::Value = serde_json::from_str(json).map_err(json_error)?;
    let mut notes = Vec::new();
    let metres = match units {
        Units::Metres => true,
        Units::Millimetres => false,
        Units::Auto => {
            let mut largest: f64 = 0.0;
            visit_lengths(&mut value, &mut |x| largest = largest.max(x.abs()));
            largest > 0.0 && largest < 1.0
        }
    };
    if metres {
        visit_lengths(&mut value, &mut |x| *x *= 1000.0);
        notes.push("lengths x1000: the source is in metres, the program in millimetres (divide by 1000 for the source's values)".into());
    }
    let doc: Document = serde_json::from_value(value).map_err(json_error)?;
    let mut sketches: HashMap<&str, (Frame, SketchEntity)> = HashMap::new();
    let mut last_sketch: Option<&str> = None;
    let mut features = Vec::new();
    for step in &doc.sequence {
        let entity = doc
            .entities
            .get(&step.entity)
            .ok_or_else(|| json_error(format!("the sequence names {} which is not among the entities", step.entity)))?;
        match step.kind.as_str() {
            "Sketch" => {
                let sketch: SketchEntity = serde_json::from_value(entity.clone())
                    .map_err(|e| json_error(format!("sketch {}: {e}", step.entity)))?;
                let t = &sketch.transform;
                let (Some(x), Some(z)) = (unit(t.x_axis.v()), unit(t.z_axis.v())) else {
                    return Err(json_error(format!("sketch {}: degenerate transform", step.entity)));
                };
                // Curve points are given in x_axis / y_axis: keep y as given when it is the
                // right-handed one, refuse otherwise rather than mirror silently.
                let y = cross(z, x);
                if norm(sub(y, t.y_axis.v())) > 1e-6 || dot(x, z).abs() > 1e-6 {
                    return Err(unsupported(
                        "a sketch transform that is not an orthonormal right-handed frame",
                        &step.entity,
                    ));
                }
                let frame = Frame { origin: t.origin.v(), x_axis: x, y_axis: y, normal: z };
                sketches.insert(step.entity.as_str(), (frame, sketch));
                last_sketch = Some(step.entity.as_str());
            }
            "ExtrudeFeature" => {
                let e: ExtrudeEntity = serde_json::from_value(entity.clone())
                    .map_err(|err| json_error(format!("extrusion {}: {err}", step.entity)))?;
                // Real files hold extrusions that add nothing (no sketch yet, no profiles, zero
                // depth, empty loops): they are skipped with a note, not a reason to refuse.
                if let Some(f) = extrusion(&step.entity, &e, &sketches, last_sketch, &mut notes, features.is_empty())? {
                    features.push(f);
                }
            }
            other => return Err(unsupported(format!("feature type {other}"), &step.entity)),
        }
    }
    build(session, &features, notes, super::Placement::FacesFirst)
}

fn extrusion(
    id: &str,
    e: &ExtrudeEntity,
    sketches: &HashMap<&str, (Frame, SketchEntity)>,
    last_sketch: Option<&str>,
    notes: &mut Vec<String>,
    first: bool,
) -> Result<Option<Feature>, ImportError> {
    let skip = |notes: &mut Vec<String>, why: &str| {
        notes.push(format!("extrusion {id} skipped: {why} (it adds no geometry)"));
        Ok(None)
    };
    // An offset start: the extrusion starts on a plane parallel to the sketch's.
    let offset = match &e.start_extent {
        None => 0.0,
        Some(start) => match start.get("type").and_then(|t| t.as_str()) {
            None | Some("ProfilePlaneStartDefinition") => 0.0,
            Some("OffsetStartDefinition") => start
                .pointer("/offset/value")
                .and_then(serde_json::Value::as_f64)
                .ok_or_else(|| json_error(format!("extrusion {id}: an offset start without a value")))?,
            Some(_) => return Err(unsupported(format!("start extent {start}"), id)),
        },
    };
    let tapered = [Some(&e.extent_one), e.extent_two.as_ref()]
        .into_iter()
        .flatten()
        .any(|x| x.taper_angle.as_ref().is_some_and(|t| t.value.abs() > 1e-12));
    if tapered {
        return Err(unsupported("a tapered extrusion (no command tapers)", id));
    }
    let mode = match e.operation.as_str() {
        "NewBodyFeatureOperation" | "JoinFeatureOperation" => Mode::Add,
        "CutFeatureOperation" => Mode::Cut,
        "IntersectFeatureOperation" => return Err(unsupported("intersect operation (no command does it)", id)),
        other => return Err(unsupported(format!("operation {other}"), id)),
    };
    if first && mode == Mode::Cut {
        return Err(unsupported("a cut before any material", id));
    }
    let one = e.extent_one.distance.value;
    let span = match e.extent_type.as_str() {
        "OneSideFeatureExtentType" if one >= 0.0 => Span { forward: one, backward: 0.0 },
        "OneSideFeatureExtentType" => Span { forward: 0.0, backward: -one },
        "SymmetricFeatureExtentType" => Span { forward: one.abs(), backward: one.abs() },
        "TwoSidesFeatureExtentType" => {
            let two = e
                .extent_two
                .as_ref()
                .map(|x| x.distance.value)
                .ok_or_else(|| json_error(format!("extrusion {id}: two-sided without extent_two")))?;
            Span { forward: one, backward: two }
        }
        other => return Err(unsupported(format!("extent type {other}"), id)),
    };
    if (span.forward + span.backward).abs() <= 1e-12 {
        return skip(notes, "its depth is zero");
    }
    // Which profiles: the references, or, where the file lists none (SeekCAD's export), every
    // profile of the sketch just before the extrusion.
    let refs: Vec<(String, String)> = if e.profiles.is_empty() {
        let Some(sketch) = last_sketch else { return skip(notes, "it comes before any sketch") };
        let (_, s) = &sketches[sketch];
        let mut names: Vec<&String> = s.profiles.keys().collect();
        names.sort();
        notes.push(format!("extrusion {id} lists no profiles: using all {} of sketch {sketch}", names.len()));
        names.into_iter().map(|p| (sketch.to_string(), p.clone())).collect()
    } else {
        // Files list a profile twice now and then; it is one region.
        let mut refs: Vec<(String, String)> = Vec::new();
        for r in &e.profiles {
            let pair = (r.sketch.clone(), r.profile.clone());
            if !refs.contains(&pair) {
                refs.push(pair);
            }
        }
        if refs.len() < e.profiles.len() {
            notes.push(format!("extrusion {id} lists a profile more than once: extruded once"));
        }
        refs
    };
    let mut plane: Option<Frame> = None;
    let mut curves: Vec<Curve> = Vec::new();
    let mut loops: Vec<(bool, Vec<Curve>)> = Vec::new();
    // Each profile's loops, for extruding the profiles one by one when their merged
    // outline fails (a full circle of one profile over an arc of another).
    let mut regions: Vec<Vec<Vec<Curve>>> = Vec::new();
    for (sketch_id, profile_id) in &refs {
        let (frame, sketch) = sketches
            .get(sketch_id.as_str())
            .ok_or_else(|| json_error(format!("extrusion {id} names sketch {sketch_id}, not defined before it")))?;
        if plane.is_some_and(|p| p != *frame) {
            return Err(unsupported("one extrusion of profiles from sketches on different planes", id));
        }
        plane = Some(*frame);
        let profile = sketch.profiles.get(profile_id).ok_or_else(|| {
            json_error(format!("extrusion {id} names profile {profile_id}, not in sketch {sketch_id}"))
        })?;
        let mut region = Vec::new();
        for l in &profile.loops {
            let mut out = Vec::new();
            for c in &l.profile_curves {
                let c: ProfileCurve = serde_json::from_value(c.clone())
                    .map_err(|err| unsupported(format!("profile curve ({err})"), profile_id))?;
                let curve = curve3(&c, frame, profile_id)?;
                curves.push(curve);
                out.push(curve);
            }
            if !out.is_empty() {
                region.push(out.clone());
            }
            loops.push((l.is_outer, out));
        }
        if !region.is_empty() {
            regions.push(region);
        }
    }
    let Some(plane) = plane else { return skip(notes, "it has no profiles") };
    if loops.iter().all(|(_, l)| l.is_empty()) {
        return skip(notes, "its profiles have no curves");
    }
    // Adjacent profiles of one sketch share boundary curves; extruded together, the shared
    // curves are interior and must not reach the sketch (they would split the face). Shared
    // by geometry, not by curve id: profiles cut one sketch line into pieces that keep its id
    // (the left sides of two separate rectangles stacked on one line).
    let shared = |c: &Curve| curves.iter().filter(|other| same_curve(other, c)).count() > 1;
    let mut kept: Vec<Vec<Curve>> = Vec::new();
    let mut dropped = 0;
    // Outer loops first, as FreeCAD's face maker does not care and readers of the program do.
    loops.sort_by_key(|(outer, _)| !*outer);
    for (_, l) in &loops {
        let mut out = Vec::new();
        for c in l {
            if refs.len() > 1 && shared(c) {
                dropped += 1;
            } else {
                out.push(*c);
            }
        }
        if !out.is_empty() {
            kept.push(out);
        }
    }
    if kept.is_empty() {
        return skip(notes, "no curve of its profiles is left to sketch");
    }
    if dropped > 0 {
        notes.push(format!("extrusion {id}: dropped {dropped} curves shared by the profiles it joins"));
    }
    // A loop inside an even number of others bounds material, inside an odd number it is a
    // hole: decided from the geometry, as the kernel does, because the files' `is_outer`
    // flags are not reliable (a rectangle and a circle both flagged outer is a plate with a
    // hole). Shared curves cancel only in the union, so no check then.
    let expected_area = (dropped == 0).then(|| {
        let chains: Vec<Vec<Curve>> = loops.iter().map(|(_, l)| chained(l)).collect();
        let polygons: Vec<Vec<[f64; 2]>> = chains.iter().map(|c| super::loop_polygon(c, &plane)).collect();
        let mut disagree = false;
        let mut area = 0.0;
        for (i, chain) in chains.iter().enumerate() {
            let Some(probe) = probe_point(chain, &plane) else { continue };
            let depth = (0..polygons.len()).filter(|&j| j != i && super::point_in_polygon(probe, &polygons[j])).count();
            let outer = depth % 2 == 0;
            disagree |= outer != loops[i].0;
            let a = super::loop_area(chain, &plane).abs();
            area += if outer { a } else { -a };
        }
        if disagree {
            notes.push(format!(
                "extrusion {id}: the loops' is_outer flags disagree with their nesting; nesting decided geometrically"
            ));
        }
        area
    });
    if offset != 0.0 {
        notes.push(format!("extrusion {id}: starts {offset} from its sketch plane; sketched on that plane"));
    }
    let (plane, kept) = offset_by(plane, kept, offset);
    let label = format!("extrusion {id}");
    let parts = if regions.len() > 1 {
        let count = regions.len();
        regions
            .into_iter()
            .enumerate()
            .map(|(k, region)| Feature {
                plane,
                loops: offset_by(plane, region, offset).1,
                span,
                mode,
                label: format!("{label} (profile {} of {count})", k + 1),
                expected_area: None,
                parts: Vec::new(),
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Some(Feature { plane, loops: kept, span, mode, label, expected_area, parts }))
}

/// The plane and loops moved `offset` along the plane's normal.
fn offset_by(plane: Frame, loops: Vec<Vec<Curve>>, offset: f64) -> (Frame, Vec<Vec<Curve>>) {
    if offset == 0.0 {
        return (plane, loops);
    }
    let shift = |p: V3| super::add(p, super::scale(plane.normal, offset));
    let moved = |c: &Curve| match *c {
        Curve::Line(a, b) => Curve::Line(shift(a), shift(b)),
        Curve::Arc(a, m, b) => Curve::Arc(shift(a), shift(m), shift(b)),
        Curve::Circle { center, radius } => Curve::Circle { center: shift(center), radius },
    };
    let loops = loops.iter().map(|l| l.iter().map(moved).collect()).collect();
    (Frame { origin: shift(plane.origin), ..plane }, loops)
}

/// The curve in global coordinates.
fn curve3(c: &ProfileCurve, frame: &Frame, profile: &str) -> Result<Curve, ImportError> {
    let g = |p: P| frame.to_global(p.x, p.y);
    Ok(match c {
        ProfileCurve::Line3D { start_point, end_point } => Curve::Line(g(*start_point), g(*end_point)),
        ProfileCurve::Circle3D { center_point, radius } => Curve::Circle { center: g(*center_point), radius: *radius },
        ProfileCurve::Arc3D { start_point, end_point, center_point, radius, start_angle, end_angle } => {
            let mid = arc_mid(*start_point, *end_point, *center_point, *radius, end_angle - start_angle)
                .ok_or_else(|| unsupported("a degenerate arc", profile))?;
            Curve::Arc(g(*start_point), frame.to_global(mid[0], mid[1]), g(*end_point))
        }
    })
}

/// The midpoint of the arc from `s` to `e` about `c` whose sweep is `sweep` radians. The
/// reference vectors of DeepCAD files do not reliably give the arc's start, but the sweep
/// picks one of the two arcs between the end points unambiguously.
fn arc_mid(s: P, e: P, c: P, radius: f64, sweep: f64) -> Option<[f64; 2]> {
    let a_s = (s.y - c.y).atan2(s.x - c.x);
    let a_e = (e.y - c.y).atan2(e.x - c.x);
    let ccw = (a_e - a_s).rem_euclid(TAU);
    if radius.is_nan() || radius <= 0.0 || ccw == 0.0 {
        return None;
    }
    let sweep = sweep.abs();
    let a_m = if (ccw - sweep).abs() <= (TAU - ccw - sweep).abs() { a_s + ccw / 2.0 } else { a_s - (TAU - ccw) / 2.0 };
    Some([c.x + radius * a_m.cos(), c.y + radius * a_m.sin()])
}

fn same_curve(a: &Curve, b: &Curve) -> bool {
    let close = |p: V3, q: V3| norm(sub(p, q)) <= 1e-9 * (1.0 + norm(p));
    match (a, b) {
        (Curve::Line(a0, a1), Curve::Line(b0, b1)) => {
            (close(*a0, *b0) && close(*a1, *b1)) || (close(*a0, *b1) && close(*a1, *b0))
        }
        (Curve::Arc(a0, am, a1), Curve::Arc(b0, bm, b1)) => {
            close(*am, *bm) && ((close(*a0, *b0) && close(*a1, *b1)) || (close(*a0, *b1) && close(*a1, *b0)))
        }
        (Curve::Circle { center: ca, radius: ra }, Curve::Circle { center: cb, radius: rb }) => {
            close(*ca, *cb) && (ra - rb).abs() <= 1e-9 * ra.abs().max(1.0)
        }
        _ => false,
    }
}

/// A loop's curves in chain order, each running from the previous one's end (DeepCAD lists
/// them in any direction, and a shoelace sum over mixed directions cancels).
fn chained(curves: &[Curve]) -> Vec<Curve> {
    let ends = |c: &Curve| match *c {
        Curve::Line(a, b) | Curve::Arc(a, _, b) => Some((a, b)),
        Curve::Circle { .. } => None,
    };
    let reversed = |c: &Curve| match *c {
        Curve::Line(a, b) => Curve::Line(b, a),
        Curve::Arc(a, m, b) => Curve::Arc(b, m, a),
        circle => circle,
    };
    if curves.len() < 2 || curves.iter().any(|c| ends(c).is_none()) {
        return curves.to_vec();
    }
    let size = curves.iter().filter_map(ends).map(|(a, b)| norm(sub(a, b))).fold(0.0, f64::max);
    let tolerance = 1e-6 * size.max(1e-12);
    let mut rest: Vec<Curve> = curves[1..].to_vec();
    let mut chain = vec![curves[0]];
    while !rest.is_empty() {
        let Some((_, end)) = chain.last().and_then(ends) else { break };
        let next = rest.iter().position(|c| {
            ends(c).is_some_and(|(a, b)| norm(sub(a, end)) <= tolerance || norm(sub(b, end)) <= tolerance)
        });
        let Some(k) = next else { return curves.to_vec() };
        let c = rest.remove(k);
        let starts_here = ends(&c).is_some_and(|(a, _)| norm(sub(a, end)) <= tolerance);
        chain.push(if starts_here { c } else { reversed(&c) });
    }
    chain
}

/// A point on the loop away from its corners (the middle of its first curve), to test which
/// other loops hold it.
fn probe_point(chain: &[Curve], plane: &Frame) -> Option<[f64; 2]> {
    Some(match *chain.first()? {
        Curve::Line(a, b) => plane.to_local(std::array::from_fn(|i| (a[i] + b[i]) / 2.0)),
        Curve::Arc(_, m, _) => plane.to_local(m),
        Curve::Circle { center, radius } => {
            let c = plane.to_local(center);
            [c[0] + radius, c[1]]
        }
    })
}

/// Every length of a DeepCAD document: sketch origins, curve points, radii, extent distances.
fn visit_lengths(value: &mut serde_json::Value, f: &mut impl FnMut(&mut f64)) {
    use serde_json::Value;
    let Value::Object(map) = value else {
        if let Value::Array(items) = value {
            items.iter_mut().for_each(|v| visit_lengths(v, f));
        }
        return;
    };
    for (key, v) in map.iter_mut() {
        match key.as_str() {
            "origin" | "start_point" | "end_point" | "center_point" | "mid_point" => {
                for axis in ["x", "y", "z"] {
                    if let Some(n) = v.get_mut(axis) {
                        scale_number(n, f);
                    }
                }
            }
            "radius" => scale_number(v, f),
            "offset" => {
                if let Some(n) = v.get_mut("value") {
                    scale_number(n, f);
                }
            }
            "distance" => {
                if let Some(n) = v.get_mut("value") {
                    scale_number(n, f);
                }
            }
            _ => visit_lengths(v, f),
        }
    }
}

fn scale_number(n: &mut serde_json::Value, f: &mut impl FnMut(&mut f64)) {
    if let Some(mut x) = n.as_f64() {
        f(&mut x);
        if let Some(number) = serde_json::Number::from_f64(x) {
            *n = serde_json::Value::Number(number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_chooses_between_the_two_arcs() {
        let p = |x, y| P { x, y, z: 0.0 };
        // Quarter arc from (1,0) to (0,1) counter-clockwise: midpoint at 45 degrees.
        let m = arc_mid(p(1.0, 0.0), p(0.0, 1.0), p(0.0, 0.0), 1.0, std::f64::consts::FRAC_PI_2).expect("arc");
        assert!((m[0] - m[1]).abs() < 1e-12 && m[0] > 0.0);
        // The same end points with a three-quarter sweep: the other way round.
        let m = arc_mid(p(1.0, 0.0), p(0.0, 1.0), p(0.0, 0.0), 1.0, 1.5 * std::f64::consts::PI).expect("arc");
        assert!((m[0] - m[1]).abs() < 1e-12 && m[0] < 0.0);
    }

    #[test]
    fn malformed_json_is_named() {
        let err = serde_json::from_str::<Document>("{\"entities\": {}}").map_err(json_error).expect_err("no sequence");
        assert!(err.to_string().contains("sequence"), "{err}");
    }
}
