//! The drawing made regular where it is near regular: lines level or upright in the sketch's
//! frame, circles and arcs about one centre, or about the centre of a circular edge of the
//! model square to the sketch (a pin on a slot's round end, a bore through a boss), and
//! circles apart of about one radius made one (a pattern's holes).
//!
//! A reader reading corners by eye (or the simulated one, with 1% of the window's noise on
//! each point) draws a rectangle as a skewed quadrilateral and a ring's two circles about two
//! centres a millimetre apart, or a pin a millimetre off the round end it stands on (readers
//! tie it there; the simulated reader draws no ties, and its pin on a slot's end, 1.3 mm off,
//! cost test100 00152464 a tenth of its IoU). Where a face is small the target's lines hardly
//! tell: a bar's
//! 4 x 8 mm section was left 8 degrees off its axes at 0.49 px from the target's lines. Parts
//! are drawn square and concentric far more often than a few degrees or a millimetre off, so
//! the picture model's search ([`super::sketch::propose`]) tries the drawing made regular,
//! searched again keeping it so (as ties: [`super::ties::Ties::with_regular`]), and takes it
//! when the target's lines cannot tell it from the free fit ([`SLACK_PX`]). The rebuilt
//! candidate is then tested like any other fit, and the free fit is built where the regular
//! one is not taken.

use freecad_bridge::command::{Primitive, Sketch};
use freecad_bridge::geometry::{circumcircle, distance_2d};
use serde::{Deserialize, Serialize};

use super::sketch::{Numbers, Shape};

/// A line within this angle of the sketch's axes (degrees) is tried level or upright...
pub const ANGLE_DEGREES: f64 = 20.0;
/// ... where each line meeting it is near square the other way, or runs on from it within
/// this angle (degrees) near the same axis: a channel's side split in two, its middle point
/// read 1.5 mm inside, was left bent by the free fit (test100 00472674, 0.81), while a
/// hexagon's top sides, 36 degrees apart, are not squared.
pub const CONTINUING_DEGREES: f64 = 15.0;
/// ... and a line's ends, or two centres, this near (pixels of the outline) are tried square
/// or one centre.
pub const REACH_PX: f64 = 10.0;
/// The regular drawing is taken when the picture model's cost is at most this much (pixels)
/// above the free fit's.
pub const SLACK_PX: f64 = 0.1;

/// Whether a drawing made regular agrees no worse than before (`before_px` to `after_px`,
/// within [`SLACK_PX`]): at END, one the model drew off regular is kept so, though it gains
/// less than a drawing moved freely must ([`super::MIN_GAIN`]).
pub fn no_worse(before_px: f64, after_px: f64) -> bool {
    after_px <= before_px + SLACK_PX
}

/// Whether the rebuilt model of a drawing made regular agrees no worse where the picture
/// shows it: its moved edges (at least [`SEEN_PIXELS`] of them) lie no farther from the
/// target's lines, and the whole picture's no farther at all. A squared line the picture does
/// not show (no edge pixel moved) is not seen to be right: an exact drawing's line on a hidden
/// face, squared, cost test100 00773053's oracle 5% of its IoU (the whole picture 0.548 ->
/// 0.553 px). Else see [`below_a_pixel`].
pub fn seen_no_worse(moved: &super::Moved, before: &super::Agreement, after: &super::Agreement) -> bool {
    moved.pixels >= SEEN_PIXELS && no_worse(moved.before_px, moved.after_px) && after.cost() <= before.cost()
}

/// See [`seen_no_worse`].
pub const SEEN_PIXELS: usize = 40;

/// How far a fit moved a feature's numbers on the picture (pixels).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MovedPx {
    /// Its farthest point.
    pub point: f64,
    /// Its sizes' largest move (a depth, a radius).
    pub size: f64,
}

/// Whether a drawing made regular moved no edge pixel by more than a pixel, its points by at
/// most [`BELOW_POINT_PX`] (along its lines, where its corners are squared), its sizes by
/// at most [`BELOW_SIZE_PX`], and brought the whole picture strictly closer: the squaring is
/// below what the picture resolves, and a drawing read off square ([`read_off_square`],
/// never an exact one) is kept square. A simulated reader's square plate, its corners read
/// 0.6 mm off, was left skewed (test100 00828865, 0.957; squared, the whole picture 0.600 ->
/// 0.552 px). A squaring that moved a hidden size further (a foot's depth by 2.4 mm, its
/// far end behind the part: test100 00186338, 0.786 -> 0.664) is no such thing.
pub fn below_a_pixel(moved: &super::Moved, before: &super::Agreement, after: &super::Agreement, by: MovedPx) -> bool {
    moved.pixels == 0 && by.point <= BELOW_POINT_PX && by.size <= BELOW_SIZE_PX && after.cost() < before.cost()
}

/// See [`below_a_pixel`].
pub const BELOW_POINT_PX: f64 = 4.0;
/// See [`below_a_pixel`].
pub const BELOW_SIZE_PX: f64 = 1.0;

/// Two lines meeting at a corner this far off square (degrees), and within
/// [`ANGLE_DEGREES`] of it, were read by eye ...
pub const OFF_SQUARE_DEGREES: f64 = 0.5;

/// ... as some corner of `sketch` was: a drawing exact but turned in its plane's frame (the
/// oracle's rectangle on a face whose frame FreeCAD turned) has every corner square, and
/// squaring it is no reading mended but the whole drawing turned, which the target's lines
/// cannot tell from rendering differences (test100 00192544's exact block was turned and
/// deepened, 0.999 -> 0.958).
pub fn read_off_square(sketch: &Sketch) -> bool {
    let lines: Vec<([f64; 2], [f64; 2])> = sketch
        .primitives
        .iter()
        .filter_map(|p| match *p {
            Primitive::Line { start, end, construction: false } => Some((start, end)),
            _ => None,
        })
        .collect();
    let scale = lines.iter().flat_map(|(a, b)| [a, b]).flatten().fold(1.0f64, |m, v| m.max(v.abs()));
    let meet = |p: [f64; 2], q: [f64; 2]| distance_2d(p, q) <= 1e-9 * scale;
    let (near, off) = (ANGLE_DEGREES.to_radians().sin(), OFF_SQUARE_DEGREES.to_radians().sin());
    lines.iter().enumerate().any(|(i, &(a, b))| {
        lines[i + 1..].iter().any(|&(c, d)| {
            let corner = meet(a, c) || meet(a, d) || meet(b, c) || meet(b, d);
            let cos = cos_between((a, b), (c, d));
            corner && cos < near && cos > off
        })
    })
}

/// The cosine of the angle between lines `(a, b)` and `(c, d)`, either way round (0 where
/// one has no length).
fn cos_between((a, b): ([f64; 2], [f64; 2]), (c, d): ([f64; 2], [f64; 2])) -> f64 {
    let (u, v) = ([b[0] - a[0], b[1] - a[1]], [d[0] - c[0], d[1] - c[1]]);
    let lengths = u[0].hypot(u[1]) * v[0].hypot(v[1]);
    if lengths > 0.0 { (u[0] * v[0] + u[1] * v[1]).abs() / lengths } else { 0.0 }
}

/// A centre of the drawing: a circle's or centre-form arc's (a number), or a three-point
/// arc's (from its points).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Centre {
    Point(usize),
    Arc {
        a: usize,
        m: usize,
        b: usize,
    },
    /// A circular edge's centre of the model, in the sketch's coordinates.
    Fixed([f64; 2]),
}

impl Centre {
    pub(super) fn at(self, n: &Numbers) -> Option<[f64; 2]> {
        match self {
            Centre::Point(c) => Some(n.points[c]),
            Centre::Arc { a, m, b } => circumcircle(n.points[a], n.points[m], n.points[b]).map(|(c, _)| c),
            Centre::Fixed(p) => Some(p),
        }
    }
}

/// What to make regular.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Regular {
    /// Lines between points `a` and `b` made level (axis 0) or upright (1): `(a, b, axis)`.
    pub(super) square: Vec<(usize, usize, usize)>,
    /// Centres made one.
    pub(super) concentric: Vec<(Centre, Centre)>,
    /// Circles' radii (numbers) made one: each the search left, with one it measured.
    pub(super) equal: Vec<Equal>,
    /// How many of each the model drew off.
    made: Regularised,
}

impl Regular {
    pub(super) fn made(&self) -> Regularised {
        self.made
    }
}

/// A circle's radius number `left` (the search left it where drawn) given `radius`, circle
/// `measured`'s as the search measured it; both are held there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Equal {
    pub(super) left: usize,
    pub(super) measured: usize,
    pub(super) radius: f64,
}

/// What a fit made regular, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regularised {
    /// Lines made level or upright.
    pub squared: usize,
    /// Pairs of centres made one.
    pub concentric: usize,
    /// Circles given the radius of another.
    #[serde(default)]
    pub equal: usize,
}

impl Regularised {
    pub fn any(&self) -> bool {
        self.squared > 0 || self.concentric > 0 || self.equal > 0
    }
}

/// The fitted drawing `n`'s near-regular parts ([`ANGLE_DEGREES`], [`REACH_PX`]) over its
/// `shapes` (construction geometry left out), each centre also about the nearest of the
/// model's circle centres `fixed` (sketch coordinates), those the model drew regular (`drawn`) too, so
/// the search keeps them so (a step's drawing made regular is fitted again at END); `None`
/// when there are none. [`Regular::made`] counts the ones the model drew off.
///
/// A line is squared only where each line meeting it is near square the other way: a small
/// hexagon's side, 30 degrees off level and drawn 18 off, was made level on a simulated
/// reader's plate, while a rectangle's and a stepped profile's sides meet at right angles.
/// A curve's end is no such corner (a rounded rectangle's sides are squared), and a line
/// running on about straight ([`CONTINUING_DEGREES`]) is squared with it.
pub(super) fn find(
    drawn: &Numbers,
    n: &Numbers,
    shapes: &[(usize, Shape)],
    px_per_unit: f64,
    fixed: &[[f64; 2]],
) -> Option<Regular> {
    let scale = drawn.points.iter().flatten().fold(1.0f64, |m, v| m.max(v.abs()));
    let tiny = 1e-9 * scale;
    let reach = REACH_PX / px_per_unit;
    let slope = ANGLE_DEGREES.to_radians().tan();
    // Level (axis 0: the run along x, the rise across it) or upright, within the angle.
    let near = |a: usize, b: usize, axis: usize| {
        let (p, q) = (n.points[a], n.points[b]);
        let (run, rise) = ((q[axis] - p[axis]).abs(), (q[1 - axis] - p[1 - axis]).abs());
        (run > 0.0 && rise <= slope * run).then_some(rise)
    };
    // A line continuing another about straight on (a side split in two, one half's shared
    // end read off the line): the two are squared together.
    let continuing = CONTINUING_DEGREES.to_radians().cos();
    let runs_on = |a: usize, b: usize, c: usize, d: usize| {
        cos_between((n.points[a], n.points[b]), (n.points[c], n.points[d])) >= continuing
    };
    let lines: Vec<(usize, usize)> = shapes
        .iter()
        .filter_map(|&(_, shape)| match shape {
            Shape::Line { a, b } => Some((a, b)),
            _ => None,
        })
        .collect();
    let mut regular =
        Regular { square: Vec::new(), concentric: Vec::new(), equal: Vec::new(), made: Regularised::default() };
    for (i, &(a, b)) in lines.iter().enumerate() {
        for axis in 0..2 {
            let Some(rise) = near(a, b, axis) else { continue };
            let square_corners = lines.iter().enumerate().all(|(j, &(c, d))| {
                let meets = j != i && [c, d].iter().any(|p| *p == a || *p == b);
                !meets || near(c, d, 1 - axis).is_some() || (near(c, d, axis).is_some() && runs_on(a, b, c, d))
            });
            if square_corners && rise <= reach {
                regular.square.push((a, b, axis));
                let (p, q) = (drawn.points[a], drawn.points[b]);
                regular.made.squared += usize::from((q[1 - axis] - p[1 - axis]).abs() > tiny);
            }
        }
    }
    let centres: Vec<Centre> = shapes
        .iter()
        .filter_map(|&(_, shape)| match shape {
            Shape::Circle { c, .. } | Shape::CenterArc { c, .. } => Some(Centre::Point(c)),
            Shape::Arc { a, m, b } => Some(Centre::Arc { a, m, b }),
            Shape::Line { .. } => None,
        })
        .collect();
    let gap = |n: &Numbers, x: Centre, y: Centre| match (x.at(n), y.at(n)) {
        (Some(p), Some(q)) => (p[0] - q[0]).hypot(p[1] - q[1]),
        _ => f64::INFINITY,
    };
    for (i, &x) in centres.iter().enumerate() {
        for &y in &centres[i + 1..] {
            // One centre point already (two arcs of one circle, a circle and its arc).
            if x == y || gap(n, x, y) > reach {
                continue;
            }
            regular.concentric.push((x, y));
            regular.made.concentric += usize::from(gap(drawn, x, y) > tiny);
        }
        let nearest = fixed
            .iter()
            .map(|&p| Centre::Fixed(p))
            .min_by(|&a, &b| gap(n, x, a).total_cmp(&gap(n, x, b)))
            .filter(|&f| gap(n, x, f) <= reach);
        if let Some(f) = nearest {
            regular.concentric.push((x, f));
            regular.made.concentric += usize::from(gap(drawn, x, f) > tiny);
        }
    }
    regular.equal = equal_radii(drawn, n, shapes, &centres, reach);
    regular.made.equal = regular.equal.iter().filter(|e| (drawn.radii[e.left] - e.radius).abs() > tiny).count();
    (!regular.square.is_empty() || !regular.concentric.is_empty() || !regular.equal.is_empty()).then_some(regular)
}

/// Circles of the drawing standing alone (no other circle's or arc's centre within `reach`:
/// not a ring's, not a counterbore's) that the search left where they were `drawn` (the
/// picture does not show them well enough to move them), each with the circle the search
/// moved (measured) whose radius in `n` lies nearest its own, within `reach`: the pairs of
/// radius numbers. A pattern's holes are drawn one size far more often than a millimetre
/// apart, and the picture hardly tells a small hole's size: a simulated reader drew a
/// flange's three holes at 0.95, 1.68 and 3.12 mm about 2.03, the first behind its boss, and
/// only the second was measured (gen-11-00010), and a plate's five 1.5 mm holes, one of them
/// at 0.16 and left so (test100 00763349). Circles the search measured keep their own
/// radius: a plate's holes of 2.47 and 3.29 mm, each measured, were made one (00852119).
/// Each pair is held at the measured radius ([`Equal`]).
fn equal_radii(drawn: &Numbers, n: &Numbers, shapes: &[(usize, Shape)], centres: &[Centre], reach: f64) -> Vec<Equal> {
    let at: Vec<[f64; 2]> = centres.iter().filter_map(|x| x.at(n)).collect();
    let alone = |c: usize| {
        let p = n.points[c];
        at.iter().filter(|q| (p[0] - q[0]).hypot(p[1] - q[1]) <= reach).count() == 1
    };
    let circles: Vec<usize> = shapes
        .iter()
        .filter_map(|&(_, shape)| match shape {
            Shape::Circle { c, r } if alone(c) => Some(r),
            _ => None,
        })
        .collect();
    let scale = drawn.radii.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let measured = |r: usize| (n.radii[r] - drawn.radii[r]).abs() > 1e-9 * scale;
    let (moved, left): (Vec<usize>, Vec<usize>) = circles.into_iter().partition(|&r| measured(r));
    left.into_iter()
        .filter_map(|r| {
            let gap = |m: &usize| (n.radii[*m] - n.radii[r]).abs();
            let nearest = moved.iter().min_by(|a, b| gap(a).total_cmp(&gap(b)))?;
            (gap(nearest) <= reach).then_some(Equal { left: r, measured: *nearest, radius: n.radii[*nearest] })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::sketch::numbers_of;
    use freecad_bridge::command::{Primitive, Sketch};

    const PX_PER_MM: f64 = 3.0;

    fn lines(corners: &[[f64; 2]]) -> Sketch {
        let k = corners.len();
        Sketch {
            name: "S1".into(),
            on: "XY".into(),
            primitives: (0..k)
                .map(|i| Primitive::Line { start: corners[i], end: corners[(i + 1) % k], construction: false })
                .collect(),
            constraints: Vec::new(),
            auto_coincident: true,
        }
    }

    fn find_in(sketch: &Sketch) -> Option<Regular> {
        let (n, shapes) = numbers_of(sketch);
        find(&n, &n, &shapes, PX_PER_MM, &[])
    }

    #[test]
    fn a_corner_read_off_square_is_told_from_an_exact_drawing_turned_in_its_frame() {
        // A rectangle read by eye: a corner 1.2 mm off over 40 mm (1.7 degrees).
        assert!(read_off_square(&lines(&[[0.0, 0.0], [40.0, 1.2], [40.0, 20.0], [0.0, 20.0]])));
        // An exact rectangle turned 5 degrees in its plane's frame: every corner square.
        let (c, s) = (5f64.to_radians().cos(), 5f64.to_radians().sin());
        let turned: Vec<[f64; 2]> = [[0.0, 0.0], [40.0, 0.0], [40.0, 20.0], [0.0, 20.0]]
            .iter()
            .map(|p| [c * p[0] - s * p[1], s * p[0] + c * p[1]])
            .collect();
        assert!(!read_off_square(&lines(&turned)));
        // A trapezoid's 60-degree corners are no square corners read off.
        assert!(!read_off_square(&lines(&[[0.0, 0.0], [40.0, 0.0], [30.0, 17.3], [10.0, 17.3]])));
    }

    #[test]
    fn a_squared_drawing_is_kept_only_where_the_picture_shows_it_no_worse() {
        let agreement = |edge_px: f64| crate::fit::Agreement { edge_px, extra: 0.0, shift: [0, 0], scale: 1.0 };
        let moved = |before_px: f64, after_px: f64, pixels: usize| crate::fit::Moved { before_px, after_px, pixels };
        // A simulated reader's plate squared: 120 edge pixels 0.9 -> 0.8 px, all 0.87 -> 0.86.
        assert!(seen_no_worse(&moved(0.9, 0.8, 120), &agreement(0.87), &agreement(0.86)));
        // The whole picture a hair worse, or the moved edges worse: dropped.
        assert!(!seen_no_worse(&moved(0.9, 0.8, 120), &agreement(0.548), &agreement(0.553)));
        assert!(!seen_no_worse(&moved(0.8, 1.0, 120), &agreement(0.87), &agreement(0.86)));
        // A line on a hidden face squared: no edge pixel moved, nothing seen (test100 00773053).
        assert!(!seen_no_worse(&moved(0.0, 0.0, 0), &agreement(0.548), &agreement(0.553)));
        let by = |point: f64, size: f64| MovedPx { point, size };
        assert!(!below_a_pixel(&moved(0.0, 0.0, 0), &agreement(0.548), &agreement(0.553), by(1.0, 0.0)));
        assert!(!below_a_pixel(&moved(0.0, 0.0, 0), &agreement(0.548), &agreement(0.548), by(1.0, 0.0)));
        // A plate's corners squared along its sides: no edge pixel moved by more than one,
        // its depth by a quarter pixel, and the whole picture closer (test100 00828865).
        assert!(below_a_pixel(&moved(0.0, 0.0, 0), &agreement(0.600), &agreement(0.552), by(2.9, 0.25)));
        // A hidden depth moved 7 px with it, or a few pixels moved, too few to see: dropped.
        assert!(!below_a_pixel(&moved(0.0, 0.0, 0), &agreement(0.766), &agreement(0.762), by(3.0, 7.2)));
        assert!(!below_a_pixel(&moved(1.0, 0.8, 12), &agreement(0.600), &agreement(0.552), by(1.0, 0.0)));
    }

    #[test]
    fn only_sides_meeting_at_right_angles_are_squared() {
        // A small hexagon, pointy side up (its slanted sides 30 degrees off level), its top
        // corner read 1.3 mm low: the two top sides run 18 degrees off level, within the
        // angle, but meet the upright sides at 108 degrees and each other at 144. The
        // upright sides meet slanted ones: not squared either.
        let mut corners: Vec<[f64; 2]> =
            (0..6).map(|k| (90.0 + 60.0 * k as f64).to_radians()).map(|a| [6.0 * a.cos(), 6.0 * a.sin()]).collect();
        corners[0][1] -= 1.3;
        assert_eq!(find_in(&lines(&corners)), None);
        // A skewed rectangle: each side, at both ends, meets one near square the other way.
        let regular = find_in(&lines(&[[-21.0, -14.0], [19.2, -15.8], [21.0, 14.5], [-19.3, 16.0]])).expect("squared");
        assert_eq!(regular.square, vec![(0, 1, 0), (1, 2, 1), (2, 3, 0), (3, 0, 1)]);
        assert_eq!(regular.made(), Regularised { squared: 4, concentric: 0, equal: 0 });
        // A channel's outer side split in two, the middle point read 1.5 mm in (the halves
        // 5 and 8 degrees off upright, 13 apart): both are squared, and the sides they meet.
        let channel = [[-12.0, -17.7], [8.6, -17.5], [7.2, 2.4], [8.9, 19.2], [-12.0, 19.2]];
        let regular = find_in(&lines(&channel)).expect("squared");
        assert_eq!(regular.square, vec![(0, 1, 0), (1, 2, 1), (2, 3, 1), (3, 4, 0), (4, 0, 1)]);
    }

    #[test]
    fn centres_a_few_pixels_apart_are_made_one_and_far_ones_are_not() {
        // A ring's circles 1 mm apart (3 px), a hole 20 mm away, and an arc about the ring's
        // centre, read 0.5 mm off.
        let sketch: Sketch = serde_json::from_value(serde_json::json!({"name": "S1", "on": "XY", "primitives": [
            {"type": "circle", "center": [0.0, 0.0], "radius": 10.0},
            {"type": "circle", "center": [1.0, 0.0], "radius": 5.0},
            {"type": "circle", "center": [20.0, 0.0], "radius": 2.0},
            {"type": "arc", "start": [0.5, -14.0], "mid": [14.5, 0.0], "end": [0.5, 14.0]}]}))
        .expect("a sketch");
        let regular = find_in(&sketch).expect("concentric");
        assert_eq!(regular.made(), Regularised { squared: 0, concentric: 3, equal: 0 });
        assert!(regular.concentric.iter().all(|(x, y)| *x != Centre::Point(2) && *y != Centre::Point(2)));
        // Drawn about one centre already: nothing to do.
        let exact: Sketch = serde_json::from_value(serde_json::json!({"name": "S1", "on": "XY", "primitives": [
            {"type": "circle", "center": [0.0, 0.0], "radius": 10.0},
            {"type": "circle", "center": [0.0, 0.0], "radius": 5.0}]}))
        .expect("a sketch");
        assert_eq!(find_in(&exact), None);
    }

    #[test]
    fn a_circle_a_few_pixels_off_a_circular_edge_of_the_model_is_put_about_its_centre() {
        // A pin drawn 1.3 mm off a slot's round end (centre (-32, 0)); a hole 20 mm away.
        let sketch: Sketch = serde_json::from_value(serde_json::json!({"name": "S2", "on": "F6", "primitives": [
            {"type": "circle", "center": [-30.8, 0.5], "radius": 7.9},
            {"type": "circle", "center": [0.0, 0.0], "radius": 2.0}]}))
        .expect("a sketch");
        let (n, shapes) = numbers_of(&sketch);
        let regular = find(&n, &n, &shapes, PX_PER_MM, &[[-32.0, 0.0], [32.0, 0.0]]).expect("concentric");
        assert_eq!(regular.concentric, vec![(Centre::Point(0), Centre::Fixed([-32.0, 0.0]))]);
        assert_eq!(regular.made(), Regularised { squared: 0, concentric: 1, equal: 0 });
        // Drawn on the centre: nothing made.
        let exact = find(&n, &n, &shapes, PX_PER_MM, &[[-30.8, 0.5]]).expect("kept");
        assert_eq!(regular.made().concentric - 1, exact.made().concentric);
    }

    #[test]
    fn a_patterns_holes_the_picture_does_not_measure_take_the_radius_of_one_it_does() {
        // A flange's three holes as a simulated reader drew them about 2.03 mm (gen-11-00010),
        // a bore at the middle, and a ring elsewhere, of the holes' size.
        let sketch: Sketch = serde_json::from_value(serde_json::json!({"name": "S3", "on": "F4", "primitives": [
            {"type": "circle", "center": [-35.8, -0.8], "radius": 0.95},
            {"type": "circle", "center": [17.3, -29.9], "radius": 3.12},
            {"type": "circle", "center": [17.2, 29.8], "radius": 1.68},
            {"type": "circle", "center": [0.0, 0.0], "radius": 12.0},
            {"type": "circle", "center": [-17.0, -29.0], "radius": 2.5},
            {"type": "circle", "center": [-17.0, -29.0], "radius": 3.0}]}))
        .expect("a sketch");
        let (drawn, shapes) = numbers_of(&sketch);
        // The search measured the third hole (1.68 -> 1.98) and the bore, and left the rest.
        let mut n = drawn.clone();
        n.radii[2] = 1.98;
        n.radii[3] = 12.2;
        let regular = find(&drawn, &n, &shapes, PX_PER_MM, &[]).expect("regular");
        // The two holes left take the measured hole's radius; the bore, 10 mm (30 px) off,
        // is no hole of theirs, and the ring's circles are no pattern's.
        let pairs: Vec<(usize, usize)> = regular.equal.iter().map(|e| (e.left, e.measured)).collect();
        assert_eq!(pairs, vec![(0, 2), (1, 2)]);
        assert!(regular.equal.iter().all(|e| e.radius == 1.98));
        assert_eq!(regular.made().equal, 2);
        let ties = crate::fit::ties::Ties::of(&sketch, &shapes, &n, None);
        let settled = ties.with_regular(&regular).settle(n.clone()).expect("settled");
        assert!(settled.radii[..3].iter().all(|r| (r - 1.98).abs() < 1e-6), "{settled:?}");
        // A move of the measured hole's radius does not take the others along: both are held
        // at its measure (test100 00763349's hole at 0.16 mm pulled the measured 1.40 to 0.78).
        let mut pulled = settled.clone();
        pulled.radii[2] = 1.2;
        let resettled = ties.with_regular(&regular).settle(pulled).expect("settled");
        assert!(resettled.radii[..3].iter().all(|r| (r - 1.98).abs() < 1e-6), "{resettled:?}");
        assert!((settled.radii[3] - 12.2).abs() < 1e-9, "{settled:?}");
        // Holes the search measured each keep their own radius (test100 00852119's 2.47 and
        // 3.29 mm were made one); where it measured none, none is given another's.
        let mut all = drawn.clone();
        all.radii[..3].copy_from_slice(&[2.47, 3.29, 2.47]);
        let regular = find(&drawn, &all, &shapes, PX_PER_MM, &[]);
        assert!(regular.as_ref().is_none_or(|r| r.equal.is_empty()), "{regular:?}");
        assert_eq!(find(&drawn, &drawn, &shapes, PX_PER_MM, &[]).map(|r| r.equal), None);
    }
}
