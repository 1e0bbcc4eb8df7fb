//! Where a drawing's curves cross each other away from their ends: the reason FreeCAD gives
//! for a profile like that ("the result is not a valid solid") names no curve, and a reader
//! cannot tell which of its points to move.
//!
//! ```
//! use freecad_bridge::command::Primitive;
//! use freecad_bridge::crossing::first_crossing;
//!
//! let line = |start, end| Primitive::Line { start, end, construction: false };
//! // A bow tie: its two long sides cross halfway.
//! let bow_tie = [
//!     line([0.0, 0.0], [10.0, 1.0]),
//!     line([10.0, 1.0], [10.0, 0.0]),
//!     line([10.0, 0.0], [0.0, 1.0]),
//!     line([0.0, 1.0], [0.0, 0.0]),
//! ];
//! let crossing = first_crossing(&bow_tie).expect("the sides cross");
//! assert_eq!((crossing.first, crossing.second), (0, 2));
//! assert!((crossing.along - 0.5).abs() < 1e-9);
//! ```

use crate::command::Primitive;
use crate::geometry::{arc_angles, circumcircle, distance_2d};

/// Two curves that cross: their indices in the drawing (`first` < `second`), and how far
/// along `first` (a share of its length, from its start) they cross.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crossing {
    pub first: usize,
    pub second: usize,
    pub along: f64,
}

/// Segments per full turn of a circle or arc.
const SEGMENTS_PER_TURN: f64 = 96.0;
/// A crossing this near (a share of the drawing's size) an end of either curve is where they
/// meet, not a crossing.
const AT_END: f64 = 1e-3;

/// The first pair of curves (construction geometry left out) that cross each other away from
/// their ends; `None` when no two do.
pub fn first_crossing(primitives: &[Primitive]) -> Option<Crossing> {
    let curves: Vec<(usize, Polyline)> =
        primitives.iter().enumerate().filter_map(|(i, p)| polyline(p).map(|line| (i, line))).collect();
    let size = curves
        .iter()
        .flat_map(|(_, line)| line.points.iter())
        .fold(0.0f64, |m, p| m.max(p[0].abs()).max(p[1].abs()))
        .max(1e-9);
    let near_an_end = |p: [f64; 2], ends: &[[f64; 2]]| ends.iter().any(|&e| distance_2d(p, e) <= AT_END * size);
    for (a, (i, Polyline { points: first, ends: first_ends })) in curves.iter().enumerate() {
        for (j, Polyline { points: second, ends: second_ends }) in &curves[a + 1..] {
            let mut walked = 0.0;
            for s in first.windows(2) {
                for t in second.windows(2) {
                    if let Some((u, p)) = segments_cross(s[0], s[1], t[0], t[1])
                        && !near_an_end(p, first_ends)
                        && !near_an_end(p, second_ends)
                    {
                        let length: f64 = first.windows(2).map(|w| distance_2d(w[0], w[1])).sum();
                        let along = (walked + u * distance_2d(s[0], s[1])) / length.max(1e-300);
                        return Some(Crossing { first: *i, second: *j, along });
                    }
                }
                walked += distance_2d(s[0], s[1]);
            }
        }
    }
    None
}

/// The points along a curve, as this module walks it (an arc or circle at 96 segments a
/// turn); `None` for construction geometry and for an arc through three points on a line.
pub fn curve_points(primitive: &Primitive) -> Option<Vec<[f64; 2]>> {
    polyline(primitive).map(|line| line.points)
}

/// A curve as points along it, and its own ends (none for a circle).
struct Polyline {
    points: Vec<[f64; 2]>,
    ends: Vec<[f64; 2]>,
}

/// `None` for construction geometry and for an arc through three points on a line.
fn polyline(primitive: &Primitive) -> Option<Polyline> {
    let around = |center: [f64; 2], radius: f64, from: f64, sweep: f64| -> Vec<[f64; 2]> {
        let n = ((sweep.abs() / std::f64::consts::TAU * SEGMENTS_PER_TURN).ceil() as usize).max(2);
        (0..=n)
            .map(|k| {
                let a = from + sweep * k as f64 / n as f64;
                [center[0] + radius * a.cos(), center[1] + radius * a.sin()]
            })
            .collect()
    };
    match *primitive {
        Primitive::Line { start, end, construction: false } => {
            Some(Polyline { points: vec![start, end], ends: vec![start, end] })
        }
        Primitive::Arc { start, mid, end, construction: false } => {
            let (center, radius) = circumcircle(start, mid, end)?;
            let (from, sweep) = arc_angles(start, mid, end, center);
            let mut points = around(center, radius, from, sweep);
            // The drawn ends exactly, not their rounding through the angles.
            let last = points.len() - 1;
            (points[0], points[last]) = (start, end);
            Some(Polyline { points, ends: vec![start, end] })
        }
        Primitive::CenterArc { center, radius, start_angle, end_angle, construction: false } => {
            let (from, to) = (start_angle.to_radians(), end_angle.to_radians());
            let sweep = (to - from).rem_euclid(std::f64::consts::TAU);
            let points = around(center, radius, from, sweep);
            let ends = vec![points[0], points[points.len() - 1]];
            Some(Polyline { points, ends })
        }
        Primitive::Circle { center, radius, construction: false } => {
            Some(Polyline { points: around(center, radius, 0.0, std::f64::consts::TAU), ends: Vec::new() })
        }
        _ => None,
    }
}

/// Where segment `a`-`b` crosses segment `c`-`d` (not along a common line): the share along
/// `a`-`b` and the point. Each segment holds its start and not its end, so a crossing at a
/// vertex inside a polyline is found once; the curves' own ends are the caller's.
fn segments_cross(a: [f64; 2], b: [f64; 2], c: [f64; 2], d: [f64; 2]) -> Option<(f64, [f64; 2])> {
    let r = [b[0] - a[0], b[1] - a[1]];
    let s = [d[0] - c[0], d[1] - c[1]];
    let denominator = r[0] * s[1] - r[1] * s[0];
    let scale = (r[0].hypot(r[1]) * s[0].hypot(s[1])).max(1e-300);
    if denominator.abs() <= 1e-12 * scale {
        return None;
    }
    let q = [c[0] - a[0], c[1] - a[1]];
    let u = (q[0] * s[1] - q[1] * s[0]) / denominator;
    let v = (q[0] * r[1] - q[1] * r[0]) / denominator;
    let inside = |x: f64| (-1e-12..1.0 - 1e-12).contains(&x);
    (inside(u) && inside(v)).then(|| (u, [a[0] + u * r[0], a[1] + u * r[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(start: [f64; 2], end: [f64; 2]) -> Primitive {
        Primitive::Line { start, end, construction: false }
    }

    fn arc(start: [f64; 2], mid: [f64; 2], end: [f64; 2]) -> Primitive {
        Primitive::Arc { start, mid, end, construction: false }
    }

    #[test]
    fn a_closed_slot_and_a_hole_inside_it_do_not_cross() {
        // A slot 100 long and 1.5 wide with round ends, tangent where the arcs meet the sides.
        let slot = vec![
            line([0.0, 0.0], [100.0, 0.0]),
            arc([100.0, 0.0], [100.75, 0.75], [100.0, 1.5]),
            line([100.0, 1.5], [0.0, 1.5]),
            arc([0.0, 1.5], [-0.75, 0.75], [0.0, 0.0]),
            Primitive::Circle { center: [50.0, 0.75], radius: 0.5, construction: false },
        ];
        assert_eq!(first_crossing(&slot), None);
    }

    #[test]
    fn a_thin_slots_sides_drawn_across_each_other_cross_and_the_place_is_told() {
        // The same slot as a reader a millimetre off at each point drew it: the upper side
        // starts below the lower one's end and ends above its start.
        let slot = vec![
            line([0.0, 0.0], [100.0, 1.0]),
            arc([100.0, 1.0], [101.0, 0.8], [100.0, 0.5]),
            line([100.0, 0.5], [0.0, 1.5]),
            arc([0.0, 1.5], [-0.75, 0.75], [0.0, 0.0]),
        ];
        let crossing = first_crossing(&slot).expect("the sides cross");
        assert_eq!((crossing.first, crossing.second), (0, 2));
        assert!((crossing.along - 0.75).abs() < 1e-6, "{crossing:?}");
    }

    #[test]
    fn a_circle_across_a_side_crosses_it_and_construction_geometry_is_left_out() {
        let square = |construction| {
            vec![
                Primitive::Line { start: [0.0, 0.0], end: [10.0, 0.0], construction },
                line([10.0, 0.0], [10.0, 10.0]),
                line([10.0, 10.0], [0.0, 10.0]),
                line([0.0, 10.0], [0.0, 0.0]),
                Primitive::Circle { center: [5.0, 0.5], radius: 1.0, construction: false },
            ]
        };
        let crossing = first_crossing(&square(false)).expect("the hole breaks through the side");
        assert_eq!((crossing.first, crossing.second), (0, 4));
        assert_eq!(first_crossing(&square(true)), None);
    }
}
