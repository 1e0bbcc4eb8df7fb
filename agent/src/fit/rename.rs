//! The entities a later command names, found again after the fit moved an earlier feature.
//!
//! Faces, edges and vertices are numbered by the kernel's order, and a fitted feature can
//! change that order without changing what the part is: a flange's profile squared at END
//! renumbered the circle a later sketch is tied to (E9 became a line), and the fit was
//! dropped because the program no longer built. The fit changes numbers, never what a
//! command refers to, so a reference is carried over to the entity that is the same one in
//! the rebuilt model ([`same_entity`]: the old one unchanged under another number, else the
//! name itself while it still names one of its kind nearby, else the clearly nearest of its
//! kind facing the same way). Where none is, the reference stays as written (and the
//! program fails as it would have).

use freecad_bridge::Command;
use freecad_bridge::command::{EntityId, EntityKind, split_position};
use freecad_bridge::geometry::{dot, norm, sub};
use freecad_bridge::state::{Edge, EdgeKind, Face, FaceKind, ModelState, Point3};
use serde_json::Value;

/// Directions within this angle are the same face's or edge's, turned by the fit: the drawing
/// made regular turns a side up to [`super::regular::ANGLE_DEGREES`] (a skewed bar's side
/// face, squared, is the face a later sketch stands on).
const TURN_DEGREES: f64 = 25.0;

/// `command` (written against `old`, the model before it in the program as it was) with each
/// entity it names renamed to the same entity in `new` (the model before it in the program
/// being built). `None` when every name already holds (the common case) or the renamed
/// command does not parse.
pub(super) fn carried_over(command: &Command, old: &ModelState, new: &ModelState, reach: f64) -> Option<Command> {
    let renames: Vec<(String, String)> = command
        .references()
        .into_iter()
        .filter_map(|r| {
            let to = same_entity(old, new, &r.id, reach)?;
            (to != r.id).then_some((r.id, to))
        })
        .collect();
    if renames.is_empty() {
        return None;
    }
    let mut json = serde_json::to_value(command).ok()?;
    rename_in(&mut json, &renames);
    serde_json::from_value(json).ok()
}

/// Every string naming a renamed entity (alone or with a position: `E9.center`).
fn rename_in(value: &mut Value, renames: &[(String, String)]) {
    match value {
        Value::String(text) => {
            let (head, tail) = split_position(text);
            if let Some((_, to)) = renames.iter().find(|(from, _)| from == head) {
                *text = match tail {
                    Some(tail) => format!("{to}.{tail}"),
                    None => to.clone(),
                };
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_in(v, renames)),
        Value::Object(map) => map.values_mut().for_each(|v| rename_in(v, renames)),
        _ => {}
    }
}

/// The entity of `new` that is `id` of `old`, in turn:
/// - one where `old`'s was, unchanged (a feature the fit did not touch, renumbered): `id`
///   itself where it is one of them;
/// - `id` itself, where it still names one of the same kind within `reach` (model units),
///   a face facing the same way: a piece of a side drawn kinked by eye and made straight is
///   still the edge a later sketch was tied to, though it turned;
/// - the nearest one of the same kind facing the same way within `reach`, where it is
///   clearly the nearest (at most half as far as the next): a flange's circle, renumbered
///   when its profile was squared.
///
/// `None` when there is none or `id` is not in `old` (the name then stays).
pub(super) fn same_entity(old: &ModelState, new: &ModelState, id: &str, reach: f64) -> Option<String> {
    let entity = id.parse::<EntityId>().ok()?;
    let candidates: Vec<Candidate<'_>> = match entity.kind {
        EntityKind::Face => {
            let was = old.faces.iter().find(|f| f.id == id)?;
            // A face keeps its name only facing the same way: a plane's other side is
            // another face, one a sketch would stand on upside down.
            new.faces
                .iter()
                .map(|f| {
                    let gap = face_gap(was, f);
                    let moved = gap.map(|_| distance(was.centroid, f.centroid) + (f.area - was.area).abs());
                    Candidate { id: &f.id, gap, loose: gap, moved }
                })
                .collect()
        }
        EntityKind::Edge => {
            let was = old.edges.iter().find(|e| e.id == id)?;
            let middle = |e: &Edge| e.center.or(e.midpoint).or(e.start);
            let loose = |e: &Edge| {
                let (p, q) = (middle(was)?, middle(e)?);
                (e.kind == was.kind).then(|| distance(p, q))
            };
            let moved = |e: &Edge| loose(e).map(|d| d + (e.length - was.length).abs());
            new.edges
                .iter()
                .map(|e| Candidate { id: &e.id, gap: edge_gap(was, e), loose: loose(e), moved: moved(e) })
                .collect()
        }
        EntityKind::Vertex => {
            let was = old.vertices.iter().find(|v| v.id == id)?.point;
            new.vertices
                .iter()
                .map(|v| {
                    let d = distance(was, v.point);
                    Candidate { id: &v.id, gap: Some(d), loose: Some(d), moved: Some(d) }
                })
                .collect()
        }
    };
    let unchanged = 1e-6 * (1.0 + reach);
    let exact: Vec<&Candidate<'_>> =
        candidates.iter().filter(|c| c.gap.is_some() && c.moved.is_some_and(|d| d <= unchanged)).collect();
    if let Some(first) = exact.first() {
        return Some(if exact.iter().any(|c| c.id == id) { id } else { first.id }.to_string());
    }
    if candidates.iter().any(|c| c.id == id && c.loose.is_some_and(|d| d <= reach)) {
        return Some(id.to_string());
    }
    let mut near: Vec<(&str, f64)> =
        candidates.iter().filter_map(|c| Some((c.id, c.gap?))).filter(|(_, d)| *d <= reach).collect();
    near.sort_by(|a, b| a.1.total_cmp(&b.1));
    match near.as_slice() {
        [(_, d), (_, next), ..] if *d > 0.5 * next => None,
        [(best, _), ..] => Some(best.to_string()),
        [] => None,
    }
}

/// An entity of the rebuilt model, and how far it is from being the old one: facing the
/// same way (`gap`), or of the same kind only (`loose`), and how much it changed in place
/// and size (`moved`: 0 for the old one renumbered).
struct Candidate<'a> {
    id: &'a str,
    gap: Option<f64>,
    loose: Option<f64>,
    moved: Option<f64>,
}

fn distance(a: Point3, b: Point3) -> f64 {
    norm(sub(a, b))
}

/// The distance from `p` to the segment from `s` to `t`.
fn to_segment(p: Point3, s: Point3, t: Point3) -> f64 {
    let st = sub(t, s);
    let along = (dot(sub(p, s), st) / dot(st, st).max(1e-300)).clamp(0.0, 1.0);
    distance(p, [s[0] + along * st[0], s[1] + along * st[1], s[2] + along * st[2]])
}

/// How far face `b` is from being face `a` moved: `None` for another kind, or a plane facing
/// another way, or a curved face about another axis direction; else how far its centroid
/// lies from `a`'s (and its radius from `a`'s).
fn face_gap(a: &Face, b: &Face) -> Option<f64> {
    if a.kind != b.kind {
        return None;
    }
    let parallel = |p: Option<Point3>, q: Option<Point3>, either_way: bool| match (p, q) {
        (Some(p), Some(q)) => {
            let c = dot(p, q) / (norm(p) * norm(q)).max(1e-300);
            (if either_way { c.abs() } else { c }) >= TURN_DEGREES.to_radians().cos()
        }
        (None, None) => true,
        _ => false,
    };
    if a.kind == FaceKind::Plane && !parallel(a.normal, b.normal, false) {
        return None;
    }
    if !parallel(a.axis, b.axis, true) {
        return None;
    }
    let radius = match (a.radius, b.radius) {
        (Some(r), Some(s)) => (r - s).abs(),
        _ => 0.0,
    };
    Some(distance(a.centroid, b.centroid) + radius)
}

/// How far edge `b` is from being edge `a` moved: `None` for another kind, or a line running
/// another way, or a circle about another axis; else how far `a`'s middle lies from line
/// `b` (a piece of a kinked side drawn by eye is on the side made straight), or a circle's
/// centre from `a`'s and its radius from `a`'s.
fn edge_gap(a: &Edge, b: &Edge) -> Option<f64> {
    if a.kind != b.kind || a.closed != b.closed {
        return None;
    }
    let direction = |e: &Edge| match (e.kind, e.start, e.end) {
        (EdgeKind::Line, Some(s), Some(t)) => Some(sub(t, s)),
        _ => e.axis.or(e.direction),
    };
    if let (Some(p), Some(q)) = (direction(a), direction(b)) {
        let c = dot(p, q) / (norm(p) * norm(q)).max(1e-300);
        if c.abs() < TURN_DEGREES.to_radians().cos() {
            return None;
        }
    }
    let middle = |e: &Edge| e.center.or(e.midpoint).or(e.start);
    if let (EdgeKind::Line, Some(s), Some(t)) = (b.kind, b.start, b.end) {
        return Some(to_segment(middle(a)?, s, t));
    }
    let radius = match (a.radius, b.radius) {
        (Some(r), Some(s)) => (r - s).abs(),
        _ => 0.0,
    };
    Some(distance(middle(a)?, middle(b)?) + radius)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(id: &str, start: Point3, end: Point3) -> Edge {
        Edge::straight(id, start, end)
    }

    fn circle(id: &str, center: Point3, radius: f64) -> Edge {
        serde_json::from_value(json!({"id": id, "kind": "circle", "length": std::f64::consts::TAU * radius,
            "closed": true, "center": center, "radius": radius, "axis": [0.0, 0.0, 1.0], "vertices": []}))
        .expect("an edge")
    }

    fn plane(id: &str, centroid: Point3, normal: Point3) -> Face {
        serde_json::from_value(json!({"id": id, "kind": "plane", "area": 100.0, "centroid": centroid,
            "normal": normal, "edges": []}))
        .expect("a face")
    }

    fn model(faces: Vec<Face>, edges: Vec<Edge>) -> ModelState {
        ModelState { faces, edges, ..ModelState::empty() }
    }

    /// A sketch on face `on` tied concentric to edge `edge`.
    fn tied(on: &str, edge: &str) -> Command {
        serde_json::from_value(json!({"op": "sketch", "name": "S2", "on": on,
            "primitives": [{"type": "circle", "center": [0.0, 0.0], "radius": 5.0}],
            "constraints": [{"type": "concentric", "a": "g0", "b": edge}]}))
        .expect("a sketch")
    }

    #[test]
    fn a_circle_renumbered_by_the_fit_is_named_again() {
        // A flange's bolt circle E2 and its top face F1; its profile squared, the rebuilt
        // model numbers a new line E2 first, the circle (0.2 mm wider) E3, the face F2.
        let old = model(
            vec![plane("F1", [0.0, 0.0, 10.0], [0.0, 0.0, 1.0])],
            vec![line("E1", [0.0, 0.0, 0.0], [30.0, 0.0, 0.0]), circle("E2", [0.0, 0.0, 10.0], 16.0)],
        );
        let new = model(
            vec![plane("F1", [0.0, 0.0, 0.0], [0.0, 0.0, -1.0]), plane("F2", [0.0, 0.0, 10.2], [0.0, 0.0, 1.0])],
            vec![
                line("E1", [0.0, 0.0, 0.0], [30.0, 0.0, 0.0]),
                line("E2", [30.0, 0.0, 0.0], [30.0, 0.0, 10.0]),
                circle("E3", [0.0, 0.0, 10.2], 16.2),
                circle("E4", [0.0, 0.0, 0.0], 30.0),
            ],
        );
        let carried = carried_over(&tied("F1", "E2"), &old, &new, 10.0).expect("renamed");
        assert_eq!(carried, tied("F2", "E3"));
        // Where every name still holds, nothing is carried over.
        assert_eq!(carried_over(&tied("F1", "E1"), &old, &old, 10.0), None);
    }

    #[test]
    fn an_edge_unchanged_but_renumbered_is_found_and_a_turned_one_keeps_its_name() {
        let old = model(Vec::new(), vec![line("E5", [0.0, 0.0, 0.0], [0.0, 4.0, 0.0])]);
        // The same edge, now E7; E5 names another line 3 mm away.
        let new = model(
            Vec::new(),
            vec![line("E5", [3.0, 0.0, 0.0], [3.0, 4.0, 0.0]), line("E7", [0.0, 0.0, 0.0], [0.0, 4.0, 0.0])],
        );
        assert_eq!(same_entity(&old, &new, "E5", 10.0).as_deref(), Some("E7"));
        // A kinked side's piece made straight: E5 turned 40 degrees and shorter, still E5.
        let turned = model(
            Vec::new(),
            vec![line("E5", [0.0, 1.0, 0.0], [0.6, 1.7, 0.0]), line("E6", [0.4, 0.0, 0.0], [0.4, 9.0, 0.0])],
        );
        assert_eq!(same_entity(&old, &turned, "E5", 10.0).as_deref(), Some("E5"));
    }

    #[test]
    fn where_two_are_as_near_the_name_stays() {
        let old = model(Vec::new(), vec![circle("E2", [0.0, 0.0, 0.0], 5.0)]);
        // E2 is now a line; two circles 1 mm either side of the old one.
        let new = model(
            Vec::new(),
            vec![
                line("E2", [0.0, 0.0, 0.0], [9.0, 0.0, 0.0]),
                circle("E3", [1.0, 0.0, 0.0], 5.0),
                circle("E4", [-1.0, 0.0, 0.0], 5.0),
            ],
        );
        assert_eq!(same_entity(&old, &new, "E2", 10.0), None);
        assert_eq!(carried_over(&tied("XY", "E2"), &old, &new, 10.0), None);
        // Too far: no circle within reach.
        assert_eq!(same_entity(&old, &new, "E2", 0.5), None);
    }
}
