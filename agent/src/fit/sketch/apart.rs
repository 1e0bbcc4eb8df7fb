//! Walls the drawing has stay walls: two about parallel lines of the drawing, drawn side by
//! side some pixels apart (a tube's inner and outer outline, a tray's rim), are kept apart
//! on the side they were drawn: a wide wall at least [`MEASURED_PX`], a narrow one at least
//! [`KEPT_SHARE`] of its drawn width.
//!
//! The fit's cost is one-sided (the candidate's edges to the target's lines), so a wall drawn
//! thinner than the target's has its inner line pulled onto the nearest line, the outline's.
//! A wall that goes to nothing changes the part's structure (a tube becomes a sliver that
//! barely holds, or an invalid solid), and a wall the picture draws as one line is one the
//! wall measurement at END ([`crate::fit::wall`]) cannot read against the target's two lines.
//! A simulated reader's square tube (test100 00141107) had two walls pulled onto its outline
//! (IoU 0.725); kept apart, they were measured (0.863).

use freecad_bridge::geometry::distance_2d;

use super::{Numbers, Shape};

/// A wall drawn at least this wide (pixels of the outline) is kept apart; a narrower one is
/// a reader's double line, not a wall.
pub(super) const LEAST_PX: f64 = 3.0;
/// A wall may thin to this (pixels of the outline; foreshortened, about two of
/// [`crate::fit::thickness`]'s distinct lines' widths on the picture), where the measurement at
/// END still reads it ...
pub(super) const MEASURED_PX: f64 = 5.0;
/// ... and a narrower one to this share of its drawn width.
const KEPT_SHARE: f64 = 0.75;
/// Two lines are one wall's sides when the sine of the angle between them is at most this
/// (6 degrees) ...
const MAX_SKEW: f64 = 0.1;
/// ... and they run beside each other over at least this share of the longer one: a small
/// hole's side near a long bar's edge is no wall (the bar's edge held out by a hexagonal
/// hole drawn a millimetre wide left a simulated reader's bar 5% wide, 0.971 -> 0.931).
const MIN_OVERLAP: f64 = 0.5;

/// The drawing's walls: pairs of lines (their points' indices) and their sides as drawn.
#[derive(Debug, Clone)]
pub(super) struct Apart {
    /// Line `a` (two point indices), line `b`, the sign of `b`'s side of `a` as drawn, and
    /// the least width the wall keeps (model units).
    walls: Vec<([usize; 2], [usize; 2], f64, f64)>,
    /// Lines (two point indices) and the least length each keeps (model units), by the
    /// walls' rule, where a line is the bottom of a U ([`u_bottom`]): its length is the wall
    /// between the U's sides, and one gone to nothing changes the structure. A comb's leg, its two sides drawn 6 and 21 degrees off
    /// upright by a simulated reader (no wall as drawn), had both sides put on one line of
    /// the target and its foot shrunk from 4.6 mm to 0.04 (test100 00694405, 0.49 -> 0.44).
    lines: Vec<([usize; 2], f64)>,
}

impl Apart {
    /// The walls of the drawing `n` (its lines in `shapes`), `px_per_unit` pixels of the
    /// outline to its units.
    pub(super) fn of(n: &Numbers, shapes: &[(usize, Shape)], px_per_unit: f64) -> Apart {
        let (least, measured) = (LEAST_PX / px_per_unit, MEASURED_PX / px_per_unit);
        let lines: Vec<[usize; 2]> = shapes
            .iter()
            .filter_map(|(_, s)| match *s {
                Shape::Line { a, b } if a != b => Some([a, b]),
                _ => None,
            })
            .collect();
        let lines_kept = lines
            .iter()
            .filter(|&&line| u_bottom(n, &lines, line))
            .filter_map(|&[a, b]| {
                let length = distance(n, a, b);
                (length >= least).then_some(([a, b], (length * KEPT_SHARE).min(measured)))
            })
            .collect();
        let mut walls = Vec::new();
        for (i, &p) in lines.iter().enumerate() {
            for &q in &lines[i + 1..] {
                if p.iter().any(|k| q.contains(k)) {
                    continue;
                }
                let Some(side) = side_by_side(n, p, q) else { continue };
                if side.abs() >= least {
                    walls.push((p, q, side.signum(), (side.abs() * KEPT_SHARE).min(measured)));
                }
            }
        }
        Apart { walls, lines: lines_kept }
    }

    /// Whether every wall of the drawing is still at least its least width wide, on its side
    /// as drawn.
    pub(super) fn kept(&self, n: &Numbers) -> bool {
        self.walls.iter().all(|&(p, q, sign, least)| offset(n, p, q).is_some_and(|d| d * sign >= least))
            && self.lines.iter().all(|&([a, b], least)| distance(n, a, b) >= least)
    }
}

/// Whether `line` is the bottom of a U among `lines`: one line leaves each of its ends, both
/// to the same side of it, at least [`U_SIDE`] across it and about the same way
/// ([`U_PARALLEL`]): a leg's foot, a slot's floor, a rectangle's side. Its length is the width between the U's sides.
fn u_bottom(n: &Numbers, lines: &[[usize; 2]], [a, b]: [usize; 2]) -> bool {
    let leaving = |end: usize| -> Option<[f64; 2]> {
        let mut others = lines.iter().filter(|l| **l != [a, b] && l.contains(&end));
        let other = others.next()?;
        if others.next().is_some() {
            return None;
        }
        let far = if other[0] == end { other[1] } else { other[0] };
        let (p, q) = (n.points[end], n.points[far]);
        let length = distance(n, end, far);
        (length > 0.0).then(|| [(q[0] - p[0]) / length, (q[1] - p[1]) / length])
    };
    let length = distance(n, a, b);
    let (Some(u), Some(v)) = (leaving(a), leaving(b)) else { return false };
    if length <= 0.0 {
        return false;
    }
    let normal = [-(n.points[b][1] - n.points[a][1]) / length, (n.points[b][0] - n.points[a][0]) / length];
    let (su, sv) = (u[0] * normal[0] + u[1] * normal[1], v[0] * normal[0] + v[1] * normal[1]);
    su * sv > 0.0 && su.abs() >= U_SIDE && sv.abs() >= U_SIDE && u[0] * v[0] + u[1] * v[1] >= U_PARALLEL
}

/// See [`u_bottom`]: the sine of 30 degrees ...
const U_SIDE: f64 = 0.5;
/// ... and the U's sides run within 30 degrees of each other (the cosine): a convex hole's
/// sides, each between two turning 60 degrees, are no U (a simulated reader's hexagonal
/// holes, their sides kept, were fitted into a profile FreeCAD refused: test100 00118368).
const U_PARALLEL: f64 = 0.866;

/// The distance between points `a` and `b` of `n`.
fn distance(n: &Numbers, a: usize, b: usize) -> f64 {
    distance_2d(n.points[a], n.points[b])
}

/// The signed distance of line `q`'s middle from line `p` (positive on `p`'s left), where
/// the two are about parallel and run beside each other.
fn side_by_side(n: &Numbers, p: [usize; 2], q: [usize; 2]) -> Option<f64> {
    let (a, b) = (n.points[p[0]], n.points[p[1]]);
    let (c, d) = (n.points[q[0]], n.points[q[1]]);
    let u = [b[0] - a[0], b[1] - a[1]];
    let v = [d[0] - c[0], d[1] - c[1]];
    let (lu, lv) = (u[0].hypot(u[1]), v[0].hypot(v[1]));
    if lu <= 0.0 || lv <= 0.0 || (u[0] * v[1] - u[1] * v[0]).abs() > MAX_SKEW * lu * lv {
        return None;
    }
    // Along p: where q's ends fall, against p's own 0..lu.
    let along = |x: [f64; 2]| ((x[0] - a[0]) * u[0] + (x[1] - a[1]) * u[1]) / lu;
    let (s, t) = (along(c), along(d));
    let overlap = s.max(t).min(lu) - s.min(t).max(0.0);
    if overlap < MIN_OVERLAP * lu.max(lv) {
        return None;
    }
    offset(n, p, q)
}

/// The signed distance of line `q`'s middle from the line through `p`.
fn offset(n: &Numbers, p: [usize; 2], q: [usize; 2]) -> Option<f64> {
    let (a, b) = (n.points[p[0]], n.points[p[1]]);
    let m = [(n.points[q[0]][0] + n.points[q[1]][0]) / 2.0, (n.points[q[0]][1] + n.points[q[1]][1]) / 2.0];
    let u = [b[0] - a[0], b[1] - a[1]];
    let l = u[0].hypot(u[1]);
    (l > 0.0).then(|| (u[0] * (m[1] - a[1]) - u[1] * (m[0] - a[0])) / l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rectangle(n: &mut Numbers, shapes: &mut Vec<(usize, Shape)>, x: f64, y: f64) {
        let first = n.points.len();
        n.points.extend([[-x, -y], [x, -y], [x, y], [-x, y]]);
        for k in 0..4 {
            shapes.push((shapes.len(), Shape::Line { a: first + k, b: first + (k + 1) % 4 }));
        }
    }

    fn tube(wall: f64) -> (Numbers, Vec<(usize, Shape)>) {
        let mut n = Numbers { points: Vec::new(), radii: Vec::new(), depth_scale: 1.0 };
        let mut shapes = Vec::new();
        rectangle(&mut n, &mut shapes, 20.0, 15.0);
        rectangle(&mut n, &mut shapes, 20.0 - wall, 15.0 - wall);
        (n, shapes)
    }

    /// The tube `n` with its inner square's right side moved to `x`.
    fn right_side_at(n: &Numbers, x: f64) -> Numbers {
        let mut moved = n.clone();
        moved.points[5][0] = x;
        moved.points[6][0] = x;
        moved
    }

    #[test]
    fn a_tubes_four_walls_are_found_and_kept_from_going_to_nothing() {
        // 2 px to the unit: walls from 1.5 units are walls, and thin to 2.5 at most.
        let (n, shapes) = tube(2.0);
        let apart = Apart::of(&n, &shapes, 2.0);
        // Each side of the inner square against the outer side beside it (the opposite sides
        // are 26 and 36 apart: walls too, but never near closing).
        assert!(apart.walls.len() >= 4, "{:?}", apart.walls);
        assert!(apart.kept(&n));
        // The inner square's right side moved onto the outer one's: the wall is gone.
        assert!(!apart.kept(&right_side_at(&n, 19.9)));
        // Moved out through it: the wall is on the wrong side.
        assert!(!apart.kept(&right_side_at(&n, 21.0)));
        // Thinned by a fifth: kept; by more than a quarter: not.
        assert!(apart.kept(&right_side_at(&n, 18.4)));
        assert!(!apart.kept(&right_side_at(&n, 18.6)));
        // A wide wall thins to what the measurement still reads, and no further.
        let (n, shapes) = tube(4.0);
        let apart = Apart::of(&n, &shapes, 2.0);
        assert!(apart.kept(&right_side_at(&n, 17.4)));
        assert!(!apart.kept(&right_side_at(&n, 17.6)));
    }

    /// A comb's profile as a simulated reader drew it (test100 00694405): a bar on three legs,
    /// the middle leg's sides 6 and 21 degrees off upright.
    fn comb() -> (Numbers, Vec<(usize, Shape)>) {
        let points = vec![
            [-26.79, -2.48],
            [-25.47, 1.06],
            [-3.35, 2.76],
            [-2.63, -3.8],
            [1.92, -4.43],
            [-0.53, 1.92],
            [27.86, 2.58],
            [27.91, -1.65],
            [34.24, -1.84],
            [31.47, 5.26],
            [-31.48, 3.74],
            [-28.99, -2.99],
        ];
        let shapes = (0..12).map(|k| (k, Shape::Line { a: k, b: (k + 1) % 12 })).collect();
        (Numbers { points, radii: Vec::new(), depth_scale: 1.0 }, shapes)
    }

    #[test]
    fn a_legs_foot_keeps_its_width_though_its_sides_are_drawn_askew_and_a_hexagons_sides_may_shrink() {
        // 3.3 px to the unit: the foot, 4.6 long, keeps 3.4; the search put both sides on one
        // line of the target, the foot 0.04 long.
        let (n, shapes) = comb();
        let apart = Apart::of(&n, &shapes, 3.3);
        assert!(apart.kept(&n));
        let mut collapsed = n.clone();
        collapsed.points[3] = [-0.21, -2.36];
        collapsed.points[4] = [-0.2, -2.35];
        assert!(!apart.kept(&collapsed));
        // Thinned by a fifth: kept.
        let mut thinned = n.clone();
        thinned.points[4] = [1.0, -4.3];
        assert!(apart.kept(&thinned));
        // A hexagonal hole's sides are no U: each may shrink (a convex polygon's neighbours turn
        // 60 degrees each way).
        let hexagon: Vec<[f64; 2]> = (0..6)
            .map(|k| {
                let a = std::f64::consts::PI / 3.0 * k as f64;
                [5.0 * a.cos(), 5.0 * a.sin()]
            })
            .collect();
        let n = Numbers { points: hexagon, radii: Vec::new(), depth_scale: 1.0 };
        let shapes: Vec<(usize, Shape)> = (0..6).map(|k| (k, Shape::Line { a: k, b: (k + 1) % 6 })).collect();
        let mut shrunk = n.clone();
        shrunk.points[1] = [n.points[0][0] - 0.1, n.points[0][1] + 0.3];
        assert!(Apart::of(&n, &shapes, 3.3).kept(&shrunk));
    }

    #[test]
    fn a_wall_drawn_thinner_than_the_least_and_lines_end_to_end_are_not_walls() {
        let (n, shapes) = tube(0.8);
        let apart = Apart::of(&n, &shapes, 2.0);
        // Only the opposite sides' walls (26 and 36 wide) are walls; the 0.8 ones are not.
        for &(p, q, _, _) in &apart.walls {
            assert!(offset(&n, p, q).expect("a line").abs() > 10.0, "{:?}", apart.walls);
        }
        // Two lines end to end along one side (a split line) are not a wall either.
        let n = Numbers { points: vec![[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]], radii: Vec::new(), depth_scale: 1.0 };
        let shapes = vec![(0, Shape::Line { a: 0, b: 1 }), (1, Shape::Line { a: 1, b: 2 })];
        assert!(Apart::of(&n, &shapes, 2.0).walls.is_empty());
        // A short side of a small hole beside a long bar's edge is no wall either.
        let n = Numbers {
            points: vec![[0.0, 0.0], [100.0, 0.0], [40.0, 3.0], [44.0, 3.0]],
            radii: Vec::new(),
            depth_scale: 1.0,
        };
        let shapes = vec![(0, Shape::Line { a: 0, b: 1 }), (1, Shape::Line { a: 2, b: 3 })];
        assert!(Apart::of(&n, &shapes, 2.0).walls.is_empty());
    }
}
