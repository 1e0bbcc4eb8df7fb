//! How a sweep carries its profile, for the picture model ([`super::sketch`]): the profile
//! as drawn at the path's start, and its copy at the path's far end.
//!
//! A pipe's profile lies at the start of its path, usually on a face the target does not
//! show (a bent pipe standing on its base plane); what the target does show is the far end,
//! where the profile's copy is an edge. A path drawn in one sketch is planar, and along a
//! planar path the sweep (PartDesign's pipe in its standard mode, OCCT's corrected Frenet
//! frame) turns the profile only about the path plane's normal, as the tangent turns: the
//! copy is the profile moved rigidly from the path's start to its end and turned by the
//! angle between the two tangents. So the profile's numbers (a bore's centre and radius)
//! can be read off the far end.

use freecad_bridge::command::{Primitive, Sketch};
use freecad_bridge::geometry::{arc_angles, circumcircle};
use freecad_bridge::state::Frame;
use nalgebra::{Unit, UnitQuaternion, Vector3};

use super::sketch::{Numbers, Shape};

/// The profile's rigid move from the path's start to its far end, in model space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Carry {
    /// The path's start (the end nearer the profile) and far end.
    pub start: [f64; 3],
    pub end: [f64; 3],
    /// The turn about the path plane's normal, made once: the search carries every sample
    /// through it at each step.
    pub turn: UnitQuaternion<f64>,
}

impl Carry {
    /// Where a point of the profile (model space) lies on the far end's copy.
    pub fn carried(&self, p: Vector3<f64>) -> Vector3<f64> {
        Vector3::from(self.end) + self.turn * (p - Vector3::from(self.start))
    }
}

/// A path primitive's two ends and the tangent at each, in the direction from the first
/// end to the second (sketch coordinates).
struct Piece {
    ends: [[f64; 2]; 2],
    tangents: [[f64; 2]; 2],
}

fn piece(primitive: &Primitive) -> Option<Piece> {
    // The tangent of a circle about `c` at `p`, turning counter-clockwise or not.
    let along = |c: [f64; 2], p: [f64; 2], ccw: bool| {
        let (dx, dy) = (p[0] - c[0], p[1] - c[1]);
        if ccw { [-dy, dx] } else { [dy, -dx] }
    };
    match *primitive {
        Primitive::Line { start, end, construction: false } => {
            let d = [end[0] - start[0], end[1] - start[1]];
            Some(Piece { ends: [start, end], tangents: [d, d] })
        }
        Primitive::Arc { start, mid, end, construction: false } => {
            let (c, _) = circumcircle(start, mid, end)?;
            let (_, sweep) = arc_angles(start, mid, end, c);
            let ccw = sweep > 0.0;
            Some(Piece { ends: [start, end], tangents: [along(c, start, ccw), along(c, end, ccw)] })
        }
        Primitive::CenterArc { center, radius, start_angle, end_angle, construction: false } => {
            let at = |a: f64| {
                let a = a.to_radians();
                [center[0] + radius * a.cos(), center[1] + radius * a.sin()]
            };
            let (a, b) = (at(start_angle), at(end_angle));
            Some(Piece { ends: [a, b], tangents: [along(center, a, true), along(center, b, true)] })
        }
        _ => None,
    }
}

/// How a sweep along the path sketch `path` (drawn in `path_frame`) carries a profile about
/// `profile_at` (model space): from the path's end nearer it to the other. `None` when the
/// path is not one open chain of lines and arcs (a closed path, a branch, a circle).
pub fn carry(path: &Sketch, path_frame: &Frame, profile_at: [f64; 3]) -> Option<Carry> {
    let pieces: Vec<Piece> =
        path.primitives.iter().filter(|p| !super::sketch::is_construction(p)).map(piece).collect::<Option<_>>()?;
    let scale = pieces.iter().flat_map(|p| p.ends).flatten().fold(1.0f64, |m, v| m.max(v.abs()));
    let same = |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).hypot(a[1] - b[1]) <= 1e-6 * scale;
    // The chain's two ends: points only one piece reaches, with the tangent leading away
    // from the path there (into it at one end, out of it at the other, once oriented).
    let mut ends: Vec<([f64; 2], [f64; 2])> = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        for side in 0..2 {
            let point = p.ends[side];
            let shared = pieces.iter().enumerate().any(|(j, q)| j != i && q.ends.iter().any(|e| same(*e, point)));
            if !shared {
                let t = p.tangents[side];
                // Leading out of the path: backwards at a piece's first end.
                ends.push((point, if side == 0 { [-t[0], -t[1]] } else { t }));
            }
        }
    }
    let [a, b] = ends.as_slice() else { return None };
    let global = |p: [f64; 2]| Vector3::from(path_frame.to_global(p[0], p[1]));
    let direction = |t: [f64; 2]| {
        (Vector3::from(path_frame.x_axis) * t[0] + Vector3::from(path_frame.y_axis) * t[1]).try_normalize(1e-12)
    };
    let profile = Vector3::from(profile_at);
    let (first, last) = if (global(a.0) - profile).norm() <= (global(b.0) - profile).norm() { (a, b) } else { (b, a) };
    // Into the path at its start, out of it at its end.
    let t0 = -direction(first.1)?;
    let t1 = direction(last.1)?;
    let normal = Unit::try_new(Vector3::from(path_frame.normal), 1e-12)?;
    let angle = t0.cross(&t1).dot(normal.as_ref()).atan2(t0.dot(&t1));
    let turn = UnitQuaternion::from_axis_angle(&normal, angle);
    Some(Carry { start: global(first.0).into(), end: global(last.0).into(), turn })
}

/// The profile's circles and centre arcs (`shapes` of the drawing `n`, drawn in `frame`)
/// whose centres lie within `reach` (model units) of the path's start, put on it: a pipe's
/// profile is drawn about its path, and its bore too, but read by eye a millimetre off (the
/// simulated reader's bore broke through the pipe's wall). The numbers and how many centres
/// moved; `None` when the start lies off the profile's plane by more than `reach` or no
/// centre is near it and off it.
pub(super) fn onto_path(
    n: &Numbers,
    shapes: &[(usize, Shape)],
    frame: &Frame,
    carry: &Carry,
    reach: f64,
) -> Option<(Numbers, usize)> {
    let from_origin = Vector3::from(carry.start) - Vector3::from(frame.origin);
    if from_origin.dot(&Vector3::from(frame.normal)).abs() > reach {
        return None;
    }
    let start = [from_origin.dot(&Vector3::from(frame.x_axis)), from_origin.dot(&Vector3::from(frame.y_axis))];
    let mut on_path = n.clone();
    let mut moved = 0;
    for &(_, shape) in shapes {
        let (Shape::Circle { c, .. } | Shape::CenterArc { c, .. }) = shape else { continue };
        let gap = (n.points[c][0] - start[0]).hypot(n.points[c][1] - start[1]);
        if gap <= reach && on_path.points[c] != start {
            on_path.points[c] = start;
            moved += 1;
        }
    }
    (moved > 0).then_some((on_path, moved))
}

/// A point to tell a path's start by: the mean of the profile's drawn points and centres
/// (model space, through the profile's frame).
pub fn profile_anchor(profile: &Sketch, frame: &Frame) -> Option<[f64; 3]> {
    let points: Vec<[f64; 2]> = profile
        .primitives
        .iter()
        .filter(|p| !super::sketch::is_construction(p))
        .flat_map(|p| match *p {
            Primitive::Line { start, end, .. } => vec![start, end],
            Primitive::Arc { start, end, .. } => vec![start, end],
            Primitive::Circle { center, .. } | Primitive::CenterArc { center, .. } => vec![center],
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let k = points.len() as f64;
    let (u, v) = points.iter().fold((0.0, 0.0), |(u, v), p| (u + p[0] / k, v + p[1] / k));
    Some(frame.to_global(u, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xz() -> Frame {
        // FreeCAD's XZ plane: sketch x along X, sketch y along Z, normal -Y.
        Frame { origin: [0.0; 3], x_axis: [1.0, 0.0, 0.0], y_axis: [0.0, 0.0, 1.0], normal: [0.0, -1.0, 0.0] }
    }

    fn bent_pipe_path(reversed: bool) -> Sketch {
        // Up 50 along Z, a quarter turn of radius 18 towards +X, then 13 along X.
        let mut json = serde_json::json!([
            {"type": "line", "start": [0.0, 0.0], "end": [0.0, 50.0]},
            {"type": "center_arc", "center": [18.0, 50.0], "radius": 18.0, "start_angle": 90.0, "end_angle": 180.0},
            {"type": "line", "start": [18.0, 68.0], "end": [31.0, 68.0]}
        ]);
        if reversed {
            json.as_array_mut().expect("a list").reverse();
        }
        serde_json::from_value(serde_json::json!({"name": "S2", "on": "XZ", "primitives": json})).expect("a sketch")
    }

    #[test]
    fn a_bent_pipes_far_end_is_its_start_turned_a_quarter_and_moved() {
        for reversed in [false, true] {
            let carry = carry(&bent_pipe_path(reversed), &xz(), [0.0, 0.0, 0.0]).expect("an open path");
            assert_eq!(carry.start, [0.0, 0.0, 0.0]);
            assert!((Vector3::from(carry.end) - Vector3::new(31.0, 0.0, 68.0)).norm() < 1e-9);
            // The profile's circle in XY about the start: its point 3 along +X ends 3 below
            // the far end (the profile's +X side faces down once the pipe runs along +X),
            // its point 3 along +Y stays 3 along +Y.
            let x = carry.carried(Vector3::new(3.0, 0.0, 0.0));
            assert!((x - Vector3::new(31.0, 0.0, 65.0)).norm() < 1e-9, "{x}");
            let y = carry.carried(Vector3::new(0.0, 3.0, 0.0));
            assert!((y - Vector3::new(31.0, 3.0, 68.0)).norm() < 1e-9, "{y}");
        }
        // A profile at the other end: the path runs the other way.
        let back = carry(&bent_pipe_path(false), &xz(), [31.0, 0.0, 68.0]).expect("an open path");
        assert!((Vector3::from(back.end)).norm() < 1e-9);
        let p = back.carried(Vector3::new(31.0, 0.0, 65.0));
        assert!((p - Vector3::new(3.0, 0.0, 0.0)).norm() < 1e-9, "{p}");
    }

    #[test]
    fn only_circles_about_the_paths_start_are_put_on_it() {
        let carry = carry(&bent_pipe_path(false), &xz(), [0.0; 3]).expect("an open path");
        let xy = Frame { origin: [0.0; 3], x_axis: [1.0, 0.0, 0.0], y_axis: [0.0, 1.0, 0.0], normal: [0.0, 0.0, 1.0] };
        // A pipe's two circles read 0.8 mm and 1.2 mm off the path, and a hole 20 mm away.
        let profile: Sketch = serde_json::from_value(serde_json::json!({"name": "S1", "on": "XY", "primitives": [
            {"type": "circle", "center": [0.8, 0.0], "radius": 6.0},
            {"type": "circle", "center": [0.0, -1.2], "radius": 2.5},
            {"type": "circle", "center": [20.0, 0.0], "radius": 1.0}]}))
        .expect("a sketch");
        let (n, shapes) = crate::fit::sketch::numbers_of(&profile);
        let (on_path, moved) = onto_path(&n, &shapes, &xy, &carry, 3.0).expect("two centres near the start");
        assert_eq!(moved, 2);
        assert_eq!(&on_path.points[..2], &[[0.0, 0.0], [0.0, 0.0]]);
        assert_eq!(on_path.points[2], [20.0, 0.0]);
        assert_eq!(on_path.radii, n.radii);
        // Already on it: nothing to do. A profile 5 mm above the path's start: not its profile.
        assert!(onto_path(&on_path, &shapes, &xy, &carry, 3.0).is_none());
        let above = Frame { origin: [0.0, 0.0, 5.0], ..xy };
        assert!(onto_path(&n, &shapes, &above, &carry, 3.0).is_none());
    }

    #[test]
    fn a_closed_path_or_a_circle_carries_nothing() {
        let square: Sketch = serde_json::from_value(serde_json::json!({"name": "S2", "on": "XZ", "primitives": [
            {"type": "line", "start": [0.0, 0.0], "end": [10.0, 0.0]},
            {"type": "line", "start": [10.0, 0.0], "end": [10.0, 10.0]},
            {"type": "line", "start": [10.0, 10.0], "end": [0.0, 10.0]},
            {"type": "line", "start": [0.0, 10.0], "end": [0.0, 0.0]}]}))
        .expect("a sketch");
        assert_eq!(carry(&square, &xz(), [0.0; 3]), None);
        let circle: Sketch = serde_json::from_value(serde_json::json!({"name": "S2", "on": "XZ", "primitives": [
            {"type": "circle", "center": [0.0, 0.0], "radius": 5.0}]}))
        .expect("a sketch");
        assert_eq!(carry(&circle, &xz(), [0.0; 3]), None);
    }
}
