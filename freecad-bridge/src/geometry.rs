//! The plain geometry the bridge and the importers share: points and vectors as `[f64; 3]`
//! (what entity tables and commands carry), the circle through three points and the angles
//! of an arc. One implementation each, so a degenerate arc is degenerate everywhere.
//!
//! ```
//! use freecad_bridge::geometry::{circumcircle, cross};
//!
//! let (center, radius) = circumcircle([1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]).unwrap();
//! assert!(center[0].abs() < 1e-12 && center[1].abs() < 1e-12 && (radius - 1.0).abs() < 1e-12);
//! assert!(circumcircle([0.0, 0.0], [1.0, 1.0], [2.0, 2.0]).is_none(), "collinear");
//! assert_eq!(cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]), [0.0, 0.0, 1.0]);
//! ```

pub use crate::state::Point3;

pub fn add(a: Point3, b: Point3) -> Point3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

pub fn sub(a: Point3, b: Point3) -> Point3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub fn scale(a: Point3, s: f64) -> Point3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

pub fn dot(a: Point3, b: Point3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub fn cross(a: Point3, b: Point3) -> Point3 {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

pub fn norm(a: Point3) -> f64 {
    dot(a, a).sqrt()
}

/// `a` scaled to length 1; `None` for a zero (or not finite) vector.
pub fn unit(a: Point3) -> Option<Point3> {
    let n = norm(a);
    (n.is_finite() && n > 1e-300).then(|| scale(a, 1.0 / n))
}

/// Distance between two points of a plane.
pub fn distance_2d(a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

/// The circle through three points of a plane: centre and radius. `None` when the points
/// coincide or are collinear to within 1e-12 of their spread (squared).
pub fn circumcircle(a: [f64; 2], b: [f64; 2], c: [f64; 2]) -> Option<([f64; 2], f64)> {
    let d = 2.0 * (a[0] * (b[1] - c[1]) + b[0] * (c[1] - a[1]) + c[0] * (a[1] - b[1]));
    let spread = distance_2d(a, b).max(distance_2d(b, c)).max(distance_2d(a, c));
    if spread < 1e-12 || d.abs() < 1e-12 * spread * spread {
        return None;
    }
    let sq = |p: [f64; 2]| p[0] * p[0] + p[1] * p[1];
    let ux = (sq(a) * (b[1] - c[1]) + sq(b) * (c[1] - a[1]) + sq(c) * (a[1] - b[1])) / d;
    let uy = (sq(a) * (c[0] - b[0]) + sq(b) * (a[0] - c[0]) + sq(c) * (b[0] - a[0])) / d;
    Some(([ux, uy], distance_2d([ux, uy], a)))
}

/// Start angle and signed sweep of the arc from `a` through `m` to `b` about `center`
/// (counter-clockwise positive).
pub fn arc_angles(a: [f64; 2], m: [f64; 2], b: [f64; 2], center: [f64; 2]) -> (f64, f64) {
    use std::f64::consts::TAU;
    let angle = |p: [f64; 2]| (p[1] - center[1]).atan2(p[0] - center[0]);
    let (t0, tm, t1) = (angle(a), angle(m), angle(b));
    let ccw_end = (t1 - t0).rem_euclid(TAU);
    let ccw_mid = (tm - t0).rem_euclid(TAU);
    if ccw_mid < ccw_end { (t0, ccw_end) } else { (t0, ccw_end - TAU) }
}
