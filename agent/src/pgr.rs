//! Projected geometry referencing (PGR): sketches tied to the edges and vertices they
//! follow, so they move with upstream geometry when a dimension is edited.
//!
//! The ties a model names (`concentric` with `E14`, `coincident` with `V3`...) go into the
//! sketch as constraints on Sketcher external geometry (the bridge adds the referenced
//! entities with `addExternal`). On top of those, a point the model put within a small
//! tolerance of a projected vertex snaps onto it and gets a coincident tie, one within it of
//! a projected straight edge goes onto it (point on object), a circle's centre included, and
//! a circle centred within the tolerance of a projected circular edge's centre becomes
//! concentric with it. A point the model tied itself keeps only its ties, except one it only
//! held at a distance from straight edges, which may still go onto an edge across them.

use freecad_bridge::command::{Constraint, CurveRef, EntityId, PointPos, PointRef, Primitive};
use freecad_bridge::state::{EdgeKind, Frame};
use freecad_bridge::{ModelState, command::Sketch};
use views::SketchMeta;

/// T_t^geom,s: the projected edges of the active body (the ones a sketch may be tied to) as
/// sampled points in view coordinates, one line each, then its vertices, one point each.
/// The other bodies' follow under their own heading, for placing only: the picture labels
/// them too, and a relay reader building a part's four bars as four bodies found the table
/// empty (`(none)`) under a picture that named the first bar's edges.
pub fn projected_table(meta: &SketchMeta, state: &ModelState) -> String {
    let own = entities_table(meta, state, true);
    let mut out = if own.is_empty() { "(none)\n".to_string() } else { own };
    let others = entities_table(meta, state, false);
    if !others.is_empty() {
        out.push_str("other bodies, for placing only (a sketch is tied only to its own body's geometry, and nothing snaps to them):\n");
        out.push_str(&others);
    }
    out
}

/// The table's lines for the active body's entities (`active`) or the other bodies'.
fn entities_table(meta: &SketchMeta, state: &ModelState, active: bool) -> String {
    let mut out = String::new();
    // The edges the picture shows, labelled there (a tie to one beside the grid is as good
    // as to one on it), and every edge lying in the sketch plane, listed first: a reader
    // looked for them among forty-sample edges, and one sketching on the end face of a pipe
    // it had drawn larger than S_t did not find the face's circle (the face lay outside
    // the picture).
    let mut edges: Vec<_> = meta
        .edges
        .iter()
        .filter(|e| state.in_active_body(&e.id) == active)
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
        .filter(|v| state.in_active_body(&v.id) == active)
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
    out
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

/// Snap the sketch's points (local coordinates) to projected vertices, straight edges and
/// circle centres within `tolerance` (model units), adding the ties (module docs).
pub fn snap(sketch: &mut Sketch, frame: &Frame, state: &ModelState, tolerance: f64) -> Snapped {
    let mut snapped = Snapped::default();
    if tolerance <= 0.0 {
        return snapped;
    }
    let already_tied = tied_points(&sketch.constraints);
    let held_off = held_off_edges(&sketch.constraints);
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
            if done.iter().any(|d| near(*d, point)) {
                continue;
            }
            // A point the model tied itself is left to its ties, except one it only held at
            // a distance from straight edges: it may still go onto an edge across them (a
            // notch's centre held off the plate's side, placed on its back edge).
            let held: Vec<&EntityId> = held_off.iter().filter(|(p, _)| *p == reference).map(|(_, e)| e).collect();
            let across: Vec<[f64; 2]> = held
                .iter()
                .filter_map(|edge| lines.iter().find(|l| l.0 == edge.to_string()).map(|l| direction(l.1, l.2)))
                .collect();
            let ties = already_tied.iter().filter(|p| **p == reference).count();
            let partly = !held.is_empty() && across.len() == held.len() && held.len() == ties;
            if ties > 0 && !partly {
                continue;
            }
            let crosses = |a: [f64; 2], b: [f64; 2]| {
                let d = direction(a, b);
                across.iter().all(|u| (u[0] * d[1] - u[1] * d[0]).abs() >= ACROSS_SINE)
            };
            // A circle's centre on a projected circle's centre: the two concentric.
            if pos == PointPos::Center
                && !partly
                && let Some((id, target, _)) = centers.iter().find(|c| near(c.1, point))
            {
                set_center(&mut sketch.primitives[i], *target);
                let edge: EntityId = id.parse().expect("state IDs parse");
                sketch.constraints.push(Constraint::Concentric { a: CurveRef::Own(i), b: CurveRef::Edge(edge) });
                snapped.constraints.push(format!("g{i} concentric {id}"));
                continue;
            }
            // Any point, a circle's centre too (a notch's circle centred on a plate's edge, a
            // quarter round on its corner: a reader put one on an edge as the prompt says and,
            // untied, the cut left a sliver face 0.002 mm wide), onto a projected vertex
            // (coincident) or else onto a projected straight edge (point on it).
            let vertex = vertices.iter().find(|v| !partly && near(v.1, point));
            let (tie, said, target) = if let Some((id, target, _)) = vertex {
                let vertex: EntityId = id.parse().expect("state IDs parse");
                let tie = Constraint::Coincident { a: reference, b: PointRef::Vertex(vertex) };
                (tie, format!("{reference} coincident {id}"), *target)
            } else if let Some((id, target)) = lines
                .iter()
                .filter(|l| crosses(l.1, l.2))
                .find_map(|(id, a, b, _)| on_segment(point, *a, *b, tolerance).map(|t| (id, t)))
            {
                let edge: EntityId = id.parse().expect("state IDs parse");
                let tie = Constraint::PointOnObject { point: reference, object: CurveRef::Edge(edge) };
                (tie, format!("{reference} on {id}"), target)
            } else {
                continue;
            };
            snapped.constraints.push(said);
            sketch.constraints.push(tie);
            match pos {
                PointPos::Center => set_center(&mut sketch.primitives[i], target),
                _ => move_point(&mut sketch.primitives, point, target),
            }
            done.extend([target, point]);
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

/// How far from parallel (the sine of the angle) an edge must run to the edges a point is
/// held at a distance from before the point goes onto it: nearer parallel, the two ties
/// would fix one freedom twice.
const ACROSS_SINE: f64 = 0.17;

/// The unit direction from `a` to `b` (zero where they meet).
fn direction(a: [f64; 2], b: [f64; 2]) -> [f64; 2] {
    let (x, y) = (b[0] - a[0], b[1] - a[1]);
    let length = x.hypot(y);
    if length > 0.0 { [x / length, y / length] } else { [0.0, 0.0] }
}

/// The own points the model's constraints hold at a distance from an existing edge
/// (`distance_to_line`), with the edge.
fn held_off_edges(constraints: &[Constraint]) -> Vec<(PointRef, EntityId)> {
    constraints
        .iter()
        .filter_map(|c| match c {
            Constraint::DistanceToLine { point: point @ PointRef::Own(..), line: CurveRef::Edge(edge), .. } => {
                Some((*point, *edge))
            }
            _ => None,
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use freecad_bridge::state::{Edge, Vertex};

    /// The top face of a 40 x 30 plate at z = 6, seen from its own XY frame: corners V1
    /// (0, 0) .. V3 (40, 30), edges E1 along y = 30 (the back), E2 along x = 0 (the side).
    fn plate_top() -> (Frame, ModelState) {
        let frame =
            Frame { origin: [0.0; 3], x_axis: [1.0, 0.0, 0.0], y_axis: [0.0, 1.0, 0.0], normal: [0.0, 0.0, 1.0] };
        let line = Edge::straight;
        let mut state = ModelState::empty();
        state.edges =
            vec![line("E1", [0.0, 30.0, 6.0], [40.0, 30.0, 6.0]), line("E2", [0.0, 0.0, 6.0], [0.0, 30.0, 6.0])];
        state.vertices = vec![
            Vertex { id: "V1".into(), point: [0.0, 0.0, 6.0] },
            Vertex { id: "V3".into(), point: [40.0, 30.0, 6.0] },
        ];
        (Frame { origin: [0.0, 0.0, 6.0], ..frame }, state)
    }

    fn notch(center: [f64; 2], constraints: Vec<Constraint>) -> Sketch {
        Sketch {
            name: "S2".into(),
            on: "F6".into(),
            primitives: vec![Primitive::Circle { center, radius: 5.0, construction: false }],
            constraints,
            auto_coincident: true,
        }
    }

    fn centre(sketch: &Sketch) -> [f64; 2] {
        match sketch.primitives[0] {
            Primitive::Circle { center, .. } => center,
            _ => unreachable!(),
        }
    }

    const CENTRE: PointRef = PointRef::Own(0, PointPos::Center);

    #[test]
    fn a_circle_centred_on_a_straight_edge_is_tied_onto_it() {
        let (frame, state) = plate_top();
        let mut sketch = notch([20.0, 29.998], Vec::new());
        let snapped = snap(&mut sketch, &frame, &state, 0.2);
        assert_eq!(snapped.constraints, vec!["g0.center on E1".to_string()]);
        assert_eq!(centre(&sketch), [20.0, 30.0], "moved onto the edge");
        let e1: EntityId = "E1".parse().expect("id");
        assert_eq!(sketch.constraints, vec![Constraint::PointOnObject { point: CENTRE, object: CurveRef::Edge(e1) }]);
    }

    #[test]
    fn a_circle_centred_on_a_corner_is_made_coincident_with_it() {
        let (frame, state) = plate_top();
        let mut sketch = notch([39.9, 30.05], Vec::new());
        let snapped = snap(&mut sketch, &frame, &state, 0.2);
        assert_eq!(snapped.constraints, vec!["g0.center coincident V3".to_string()]);
        assert_eq!(centre(&sketch), [40.0, 30.0]);
    }

    #[test]
    fn a_centre_held_off_one_edge_still_goes_onto_an_edge_across_it_but_not_onto_one_along_it() {
        let (frame, state) = plate_top();
        let e2: EntityId = "E2".parse().expect("id");
        let held = || Constraint::DistanceToLine { point: CENTRE, line: CurveRef::Edge(e2), value: 20.0 };
        // Held 20 from the side E2 and placed on the back E1 (a reader's notch): onto E1.
        let mut sketch = notch([20.0, 29.998], vec![held()]);
        let snapped = snap(&mut sketch, &frame, &state, 0.2);
        assert_eq!(snapped.constraints, vec!["g0.center on E1".to_string()]);
        assert_eq!(centre(&sketch), [20.0, 30.0]);
        // Held off E2 and placed beside E2 itself: that freedom is the model's; no tie.
        let mut sketch = notch([0.1, 15.0], vec![held()]);
        assert!(snap(&mut sketch, &frame, &state, 0.2).constraints.is_empty());
        assert_eq!(sketch.constraints.len(), 1);
        // Held off E2 and placed on the corner V3: not made coincident (both freedoms).
        let mut sketch = notch([40.0, 30.0], vec![held()]);
        let snapped = snap(&mut sketch, &frame, &state, 0.2);
        assert_eq!(snapped.constraints, vec!["g0.center on E1".to_string()], "only onto the edge across");
    }

    #[test]
    fn a_centre_the_model_tied_itself_is_left_to_its_tie() {
        let (frame, state) = plate_top();
        let v3: EntityId = "V3".parse().expect("id");
        let tie = Constraint::Coincident { a: CENTRE, b: PointRef::Vertex(v3) };
        let mut sketch = notch([40.0, 29.99], vec![tie.clone()]);
        assert!(snap(&mut sketch, &frame, &state, 0.2).constraints.is_empty());
        assert_eq!(sketch.constraints, vec![tie]);
    }
}
