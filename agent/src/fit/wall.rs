//! A wall's width, measured between the target's two lines that bound it in the plane of a
//! face: a tray's rim, a tube's side, a frame's bar.
//!
//! A relay reader drew a tray's walls 2 mm where they are about 1.2 and 1.8 mm (static 0.79):
//! in the picture each wall is a band a few pixels wide between the part's outer edge and the
//! pocket's. The line fit places each line on its own: it moves a line by a pixel only as
//! far as the whole-pixel alignment lets it see one, and an inner line drawn a pixel or two
//! from the outline goes onto the outline's own line, the nearest. As with a plate's depth
//! ([`super::thickness`]), a width needs neither: where the model draws a line of the
//! profile and, beside it on the same face and about parallel, another edge of the model,
//! the target draws its outline line by that edge and, inward from it, the wall's other
//! line. Every pixel along the line gives one profile across both; the distance between the
//! centres of the target's two lines is the wall there. Both are drawn with one pen, so line
//! width and anti-aliasing cancel, and the wall is measured from the target's own outline,
//! so the picture's alignment cancels too.
//!
//! Which side moves: the profile's line, when it bounds material from inside (an inner loop
//! of a pad's profile, the hole of a tube; any line of a cut: a pocket's side; a line of an
//! outline inside its hull: an L's inner corner, a channel's floor). The other edge is the
//! part's outline there, which the silhouette and the line fit place; the inner line has
//! nothing else to place it. Between two such lines (a bar between two pockets) nothing
//! moves: which side is off is not known.

use freecad_bridge::command::{Extent, Extrude, Mode, Primitive, Sketch};
use freecad_bridge::state::{Frame, Point3};
use nalgebra::{Point3 as P3, Vector3};
use serde::{Deserialize, Serialize};
use views::{Camera, IdBuffers, NO_ENTITY};

use super::sketch::{Shape, numbers_of};
use super::thickness::{
    DISTINCT_PX, END_MARGIN_PX, MIN_PROFILES, ON_LINE_PX, Scale, changes_enough, drawn_near, median, nearest_alone,
    runs_across,
};
use super::{Alignment, TargetPixels};

/// An edge beside a line: its end points, its offset at the line's middle (mm), and the
/// stretch of the line it runs beside (from, to).
type Beside = ([Vector3<f64>; 2], f64, f64, f64);

/// Walls whose two lines are at most this far apart in the model's picture (pixels) move.
/// At 12 px, with line centres read from the pixels that pass the line threshold (half a
/// pixel off where a pen is drawn across a pixel boundary), relay parts' walls of 10 to 30 px
/// moved fell as often as they rose (00966577 0.599 -> 0.590). Read by their ink, an exact L
/// bracket's legs measure within 0.13 px of 22.86 and the oracle's figures hold with every
/// wall measured moving; a simulated reader's leg 0.7 px thin over 22 px moves (0.969 ->
/// 0.978) ...
pub const MAX_WALL_PX: f64 = 30.0;
/// ... and walls up to this wide are measured, in the model (a moved wall is measured again)
/// and in the target (a reader's wall may be a third of the target's).
const MAX_TARGET_WALL_PX: f64 = 30.0;
/// The target's widths along the line must agree: their median absolute deviation at most
/// this share of their median.
const MAX_SPREAD: f64 = 0.1;
/// The factor stays within this either way: a reader's wall may be a pixel where the target's
/// is four (the inner line drawn beside the outline's), but not less.
const MAX_FACTOR: f64 = 4.0;
/// A wall that changes by more than this (pixels) is moved only when the whole picture
/// agrees with the target at least as well after (the measurement's first line inward could be
/// another feature's); a smaller change the picture's whole-pixel alignment cannot see.
pub const CHECKED_PX: f64 = 1.5;
/// The model's wall is at least this wide (pixels): its inner line is not its outline's.
const MIN_MODEL_PX: f64 = 1.0;
/// An edge is the wall's other side when it runs beside at least this share of the line ...
const MIN_OVERLAP: f64 = 0.5;
/// ... and about parallel to it: the sine of the angle between them at most this (6 degrees;
/// a reader's rectangle is square, a simulated reader's corners are each a little off).
const MAX_SKEW: f64 = 0.1;
/// The profiles' moves farther than this (mm) from the straight line through them are left out
/// of a second fit (another feature's line crossing the wall).
const MOVE_OUTLIER_MM: f64 = 0.3;
/// A line whose move shows less than this (pixels per mm, across its picture) is seen edge on.
pub(super) const MIN_PX_PER_MM: f64 = 0.5;

/// One line of a profile whose wall was measured (the trace records it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The primitive's index in the sketch.
    pub line: usize,
    /// The wall's width in the model (mm, in the sketch's plane, beside the line's middle).
    pub wall: f64,
    /// How far the line's start and end move (mm) along its left normal (the direction
    /// `end - start` turned a quarter anticlockwise in the sketch's coordinates) to make the
    /// wall as wide as the target draws it: a straight line through the profiles' moves (a
    /// reader's line may be turned a little against the outline, as well as shifted).
    pub shift: [f64; 2],
    /// The wall's median width in the model's picture and in the target (pixels).
    pub model_px: f64,
    pub target_px: f64,
    pub profiles: usize,
    /// The median absolute deviation of the target's widths, over their median.
    pub spread: f64,
    /// How far the target's outline line lies from the model's edge (pixels, the median).
    pub outline_px: f64,
    /// The other lines of the profile measured with this one as one wall, on one straight
    /// line ([`pooled`]); they move together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<usize>,
}

impl Measured {
    pub fn factor(&self) -> f64 {
        self.target_px / self.model_px
    }

    /// Whether the line should move: enough profiles, agreeing, and a change beyond what two
    /// renderers' lines differ by (the same rule as a depth's, [`super::thickness`]).
    pub fn worth_moving(&self) -> bool {
        self.profiles >= MIN_PROFILES
            && self.model_px <= MAX_WALL_PX
            && self.spread <= MAX_SPREAD
            && changes_enough(self.model_px, self.target_px)
            && (1.0 / MAX_FACTOR..=MAX_FACTOR).contains(&self.factor())
    }
}

/// The lines of `sketch` that bound material from inside: every line of a cut's profile,
/// and the lines of a pad's inner loops (a loop whose box lies inside another loop's).
pub fn inner_lines(sketch: &Sketch, extrude: &Extrude) -> Vec<usize> {
    let (numbers, shapes) = numbers_of(sketch);
    let line_of = |k: usize| matches!(sketch.primitives[k], Primitive::Line { construction: false, .. });
    if extrude.mode == Mode::Cut {
        return (0..sketch.primitives.len()).filter(|&k| line_of(k)).collect();
    }
    // Loops: primitives joined by shared points (union-find over the points).
    let mut parent: Vec<usize> = (0..numbers.points.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let ends = |shape: &Shape| -> Vec<usize> {
        match *shape {
            Shape::Line { a, b } => vec![a, b],
            Shape::Arc { a, m, b } => vec![a, m, b],
            Shape::CenterArc { c, .. } | Shape::Circle { c, .. } => vec![c],
        }
    };
    for (k, shape) in &shapes {
        if super::sketch::is_construction(&sketch.primitives[*k]) {
            continue;
        }
        let e = ends(shape);
        for w in e.windows(2) {
            let (x, y) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
            parent[x] = y;
        }
    }
    // Each loop's box, from its primitives' points (a circle's from its centre and radius).
    let mut boxes: std::collections::BTreeMap<usize, [f64; 4]> = std::collections::BTreeMap::new();
    // ... and its points, for the lines of an outline that lie inside its hull.
    let mut loop_points: std::collections::BTreeMap<usize, Vec<[f64; 2]>> = std::collections::BTreeMap::new();
    let mut loop_of = vec![usize::MAX; sketch.primitives.len()];
    for (k, shape) in &shapes {
        if super::sketch::is_construction(&sketch.primitives[*k]) {
            continue;
        }
        let r = root(&mut parent, ends(shape)[0]);
        loop_of[*k] = r;
        let reach = match *shape {
            Shape::CenterArc { r, .. } | Shape::Circle { r, .. } => numbers.radii[r],
            _ => 0.0,
        };
        let b = boxes.entry(r).or_insert([f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY]);
        let points = loop_points.entry(r).or_default();
        for p in ends(shape).into_iter().map(|i| numbers.points[i]) {
            *b = [b[0].min(p[0] - reach), b[1].min(p[1] - reach), b[2].max(p[0] + reach), b[3].max(p[1] + reach)];
            points.push(p);
        }
    }
    let inside = |a: &[f64; 4], b: &[f64; 4]| a[0] > b[0] && a[1] > b[1] && a[2] < b[2] && a[3] < b[3];
    (0..sketch.primitives.len())
        .filter(|&k| line_of(k))
        .filter(|&k| {
            let own = &boxes[&loop_of[k]];
            let in_another = boxes.iter().any(|(&r, b)| r != loop_of[k] && inside(own, b));
            in_another || {
                let Primitive::Line { start, end, .. } = sketch.primitives[k] else { return false };
                inside_hull(start, end, &loop_points[&loop_of[k]])
            }
        })
        .collect()
}

/// Whether the line `start`-`end` of an outline lies inside its loop's hull (the loop's
/// `points` on both sides of it): an L's inner corner, a channel's floor. Its material is
/// bounded by the outline's line beside it, which the silhouette places, as an inner loop's
/// is by the outline around it.
fn inside_hull(start: [f64; 2], end: [f64; 2], points: &[[f64; 2]]) -> bool {
    let d = [end[0] - start[0], end[1] - start[1]];
    let length = d[0].hypot(d[1]);
    if length <= 0.0 {
        return false;
    }
    // Signed distances (model units) of the loop's points from the line.
    let side = |p: &[f64; 2]| (d[0] * (p[1] - start[1]) - d[1] * (p[0] - start[0])) / length;
    let tol = 1e-6 * points.iter().flatten().fold(1.0_f64, |m, v| m.max(v.abs()));
    points.iter().any(|p| side(p) > tol) && points.iter().any(|p| side(p) < -tol)
}

/// Where an extrusion's profile has copies: along the sketch's normal, its two ends.
pub(super) fn copies(extrude: &Extrude) -> Vec<f64> {
    match extrude.extent {
        Extent::OneSide { depth } => vec![0.0, if extrude.reversed { -depth } else { depth }],
        Extent::Symmetric { depth } => vec![-depth / 2.0, depth / 2.0],
        Extent::TwoSides { depth, depth2 } => vec![depth, -depth2],
        Extent::ThroughAll { .. } => vec![0.0],
    }
}

/// The inner lines ([`inner_lines`]) of `extrude`'s profile `sketch` (as solved, on
/// `frame`), in the model, at each end of the extrusion.
pub fn inner_segments(sketch: &Sketch, extrude: &Extrude, frame: &Frame) -> Vec<[Point3; 2]> {
    let normal = Vector3::from(frame.normal);
    let mut out = Vec::new();
    for k in inner_lines(sketch, extrude) {
        let Primitive::Line { start, end, .. } = sketch.primitives[k] else { continue };
        for along in copies(extrude) {
            let at = |p: [f64; 2]| (Vector3::from(frame.to_global(p[0], p[1])) + normal * along).into();
            out.push([at(start), at(end)]);
        }
    }
    out
}

/// Whether the edge `pq` lies on the line through `segment` (within `tol`).
fn collinear(segment: &[Point3; 2], [p, q]: [Vector3<f64>; 2], tol: f64) -> bool {
    let (a, b) = (Vector3::from(segment[0]), Vector3::from(segment[1]));
    let d = b - a;
    if d.norm() <= tol {
        return false;
    }
    let d = d.normalize();
    let off = |x: Vector3<f64>| (x - a - d * (x - a).dot(&d)).norm();
    off(p) <= tol && off(q) <= tol
}

/// Measure the walls beside the inner lines of `extrude` of `sketch` (as solved, on `frame`)
/// against the target. `edges` are the finished model's straight edges (end points); `inner`
/// the inner lines of every profile of the program, as placed ([`inner_segments`]): an edge
/// on one of them is no outline (a bar between two pockets has a pocket on either side, and
/// which is off is not known). The model's picture is `ids` (through `camera`), lying on
/// the target by `align`. One entry per line with a wall on one side only.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    sketch: &Sketch,
    extrude: &Extrude,
    frame: &Frame,
    edges: &[[Point3; 2]],
    inner: &[[Point3; 2]],
    camera: &Camera,
    ids: &IdBuffers,
    align: Alignment,
    target: &TargetPixels,
) -> Vec<Measured> {
    let copies = copies(extrude);
    let normal = Vector3::from(frame.normal);
    let (xa, ya) = (Vector3::from(frame.x_axis), Vector3::from(frame.y_axis));
    let project = |p: Vector3<f64>| camera.project(&P3::from(p)).map(|(x, y, _)| [x, y]);
    let model_line =
        |x: f64, y: f64| -> f64 { super::bilinear(x, y, |i, j| f64::from(u8::from(ids.edge_at(i, j) != NO_ENTITY))) };
    let drawn = |p: [f64; 2]| drawn_near(ids, p);
    let measuring = Scale::of(target, align);
    let scale = edges.iter().flat_map(|e| e.iter().flatten()).fold(1.0_f64, |m, v| m.max(v.abs()));
    let tol = 1e-5 * scale;
    let cross = |a: [f64; 2], b: [f64; 2]| a[0] * b[1] - a[1] * b[0];
    let mut lines = Vec::new();
    for index in inner_lines(sketch, extrude) {
        let Primitive::Line { start, end, .. } = sketch.primitives[index] else { continue };
        let (du, dv) = (end[0] - start[0], end[1] - start[1]);
        let length = du.hypot(dv);
        if length <= tol {
            continue;
        }
        let dir = (xa * du + ya * dv) / length;
        let left = [-dv / length, du / length];
        let n3 = xa * left[0] + ya * left[1];
        // Per profile: the line's move (mm along its left normal) that makes the wall as wide
        // as the target's, the model's width and the target's (pixels).
        let mut moves: Vec<(f64, f64)> = Vec::new();
        let mut widths: Vec<(f64, f64)> = Vec::new();
        let mut outline: Vec<f64> = Vec::new();
        let mut walls: Vec<f64> = Vec::new();
        let mut sides = (false, false);
        // Whether the edge beside the line runs exactly its way in the model: the reader drew
        // the wall's sides parallel, and they stay so (the line shifts, it does not turn).
        let mut parallel = true;
        for &along in &copies {
            let a = Vector3::from(frame.to_global(start[0], start[1])) + normal * along;
            // The nearest edge on the same face, about parallel and beside enough of the
            // line, on each side.
            let mut best: [Option<Beside>; 2] = [None, None];
            for e in edges {
                let (p, q) = (Vector3::from(e[0]), Vector3::from(e[1]));
                let d = q - p;
                if d.norm() <= tol || d.normalize().cross(&dir).norm() > MAX_SKEW {
                    continue;
                }
                if (p - a).dot(&normal).abs() > tol || (q - a).dot(&normal).abs() > tol {
                    continue;
                }
                let (s0, s1) = ((p - a).dot(&dir), (q - a).dot(&dir));
                let (lo, hi) = (s0.min(s1).max(0.0), s0.max(s1).min(length));
                if hi - lo < MIN_OVERLAP * length {
                    continue;
                }
                // The edge's offset beside the stretch's middle.
                let m = (lo + hi) / 2.0;
                let t = (m - s0) / (s1 - s0);
                let w = (p + d * t - a).dot(&n3);
                if w.abs() <= tol || inner.iter().any(|s| collinear(s, [p, q], tol)) {
                    continue;
                }
                let side = usize::from(w < 0.0);
                if best[side].is_none_or(|b| w.abs() < b.1.abs()) {
                    best[side] = Some(([p, q], w, lo, hi));
                }
            }
            let (Some(p0), Some(p1)) = (project(a), project(a + dir * length)) else { continue };
            let e = [p1[0] - p0[0], p1[1] - p0[1]];
            let span = e[0].hypot(e[1]);
            if span < 2.0 * END_MARGIN_PX + 1.0 {
                continue;
            }
            let e = [e[0] / span, e[1] / span];
            let u = [-e[1], e[0]];
            // Pixels along u per mm the line moves along its left normal.
            let Some(g) = project(a + n3).map(|q| (q[0] - p0[0]) * u[0] + (q[1] - p0[1]) * u[1]) else { continue };
            if g.abs() < MIN_PX_PER_MM {
                continue;
            }
            let near: Vec<_> = best
                .iter()
                .flatten()
                .filter(|b| (MIN_MODEL_PX..=MAX_TARGET_WALL_PX).contains(&(b.1 * g).abs()))
                .collect();
            let &[&([ep, eq], w, lo, hi)] = &near[..] else {
                if near.len() == 2 {
                    sides = (true, true);
                }
                continue;
            };
            if w > 0.0 {
                sides.0 = true;
            } else {
                sides.1 = true;
            }
            parallel &= (eq - ep).normalize().cross(&dir).norm() <= 1e-6;
            walls.push(w.abs());
            let (Some(pe), Some(qe)) = (project(ep), project(eq)) else { continue };
            let de = [qe[0] - pe[0], qe[1] - pe[1]];
            let mut t = lo / length * span + END_MARGIN_PX;
            while t <= hi / length * span - END_MARGIN_PX {
                let c = [p0[0] + t * e[0], p0[1] + t * e[1]];
                t += 1.0;
                // Where the edge crosses the profile (pixels along u).
                let width = cross([pe[0] - c[0], pe[1] - c[1]], de) / cross(u, de);
                let other = [c[0] + width * u[0], c[1] + width * u[1]];
                if !drawn(c) || !drawn(other) || width.abs() < MIN_MODEL_PX {
                    continue;
                }
                // The target's outline line by the model's edge, and the first line inward
                // from it: the target's wall, however far the model's inner line is from it.
                // In the target's own image where that is finer and the wall thin: how near
                // the outline's line lies and how wide a wall may be are in the model's
                // pixels, telling two lines apart is the image's own ([`Scale`]).
                let inward = -width.signum();
                let (unit, width_u) = (measuring.unit, width * measuring.unit);
                let (on_line, widest) = (ON_LINE_PX * unit, MAX_TARGET_WALL_PX * unit);
                let (from, to) = (width_u - inward * on_line, width_u + inward * (widest + on_line));
                let lines = measuring.lines_across(target, align, c, u, from.min(to), from.max(to));
                let Some(c1) = nearest_alone(&lines, width_u, on_line) else { continue };
                let Some(c0) = lines
                    .iter()
                    .copied()
                    .filter(|&l| (l - c1) * inward >= DISTINCT_PX && (l - c1) * inward <= widest)
                    .min_by(|a, b| ((a - c1) * inward).total_cmp(&((b - c1) * inward)))
                else {
                    continue;
                };
                // Back in the model's pixels.
                let (c0, c1) = (c0 / unit, c1 / unit);
                // In the model's own picture nothing lies between the edge and the line (a
                // shallow pocket's floor, another feature's edge): the target's first line
                // inward is then the line's, not another's.
                let between = runs_across(model_line, c, u, width.min(0.0), width.max(0.0));
                if between.iter().any(|&m| (m - width).abs() > 1.0 && m.abs() > 1.0) {
                    continue;
                }
                let measured = (c1 - c0).abs();
                // The model's line at 0 and the edge at `width`; the target's line is c0 - c1
                // from its edge, the model's -width.
                let along_mm = (t - 1.0) / span * length;
                moves.push((along_mm, (c0 - c1 + width) / g));
                outline.push((c1 - width) * width.signum());
                widths.push((width.abs(), measured));
            }
        }
        // A wall on both sides (here or at the other copy): which side is off is not known.
        if sides.0 && sides.1 || widths.is_empty() {
            continue;
        }
        lines.push(LineWalls {
            index,
            left,
            offset: left[0] * start[0] + left[1] * start[1],
            inward: sides.1,
            length,
            parallel,
            moves,
            widths,
            outline,
            wall: median(&mut walls),
        });
    }
    pooled(&lines)
}

/// What the profiles across one inner line measured ([`measure`]), before the lines of one
/// wall are pooled ([`pooled`]).
struct LineWalls {
    index: usize,
    /// The line's left normal in the sketch, and its offset along it (mm).
    left: [f64; 2],
    offset: f64,
    /// The wall lies on the line's right (against its left normal).
    inward: bool,
    length: f64,
    parallel: bool,
    /// Per profile: (mm along the line, its move in mm along the left normal).
    moves: Vec<(f64, f64)>,
    /// Per profile: the model's width and the target's (pixels).
    widths: Vec<(f64, f64)>,
    outline: Vec<f64>,
    /// The wall's width in the model (mm, the median over the copies).
    wall: f64,
}

impl LineWalls {
    /// Whether `other` is the same wall: a line of the profile on the same straight line (a
    /// plate's underside split by the leg under it), with its wall on the same side, about
    /// as wide.
    fn same_wall(&self, other: &LineWalls) -> bool {
        let facing = self.left[0] * other.left[0] + self.left[1] * other.left[1];
        let (wall, other_wall) = (self.wall, other.wall);
        facing.abs() >= 1.0 - 1e-6
            && (self.inward == other.inward) == (facing > 0.0)
            && (self.offset - facing.signum() * other.offset).abs() <= SAME_LINE_SHARE * wall.min(other_wall)
            && (wall - other_wall).abs() <= SAME_LINE_SHARE * wall.max(other_wall)
    }
}

/// Lines of one wall whose profiles are pooled lie on one straight line within this share of
/// the wall's width, and their walls are as wide within it: a plate's underside between two
/// legs and the next (a simulated reader's test100 pallet had each half of its 3.1 px top
/// measured 0.56 px thin over 21 profiles, under [`MIN_PROFILES`], and left 20% thin).
const SAME_LINE_SHARE: f64 = 0.1;

/// One [`Measured`] per line: the lines of one wall ([`LineWalls::same_wall`]) pooled, each
/// given the whole wall's width and one shift; a line on its own may turn a little as well.
fn pooled(lines: &[LineWalls]) -> Vec<Measured> {
    let mut found = Vec::new();
    let mut taken = vec![false; lines.len()];
    for first in 0..lines.len() {
        if taken[first] {
            continue;
        }
        let group: Vec<usize> =
            (first..lines.len()).filter(|&i| !taken[i] && lines[first].same_wall(&lines[i])).collect();
        group.iter().for_each(|&i| taken[i] = true);
        let lead = &lines[first];
        // Moves along the first line's left normal.
        let sign = |l: &LineWalls| (lead.left[0] * l.left[0] + lead.left[1] * l.left[1]).signum();
        let widths: Vec<(f64, f64)> = group.iter().flat_map(|&i| lines[i].widths.iter().copied()).collect();
        let target_px = median(&mut widths.iter().map(|w| w.1).collect::<Vec<_>>());
        let spread = median(&mut widths.iter().map(|w| (w.1 / target_px - 1.0).abs()).collect::<Vec<_>>());
        let model_px = median(&mut widths.iter().map(|w| w.0).collect::<Vec<_>>());
        let outline_px =
            median(&mut group.iter().flat_map(|&i| lines[i].outline.iter().copied()).collect::<Vec<_>>()).abs();
        let shared = median(
            &mut group
                .iter()
                .flat_map(|&i| lines[i].moves.iter().map(move |m| m.1 * sign(&lines[i])))
                .collect::<Vec<_>>(),
        );
        for &i in &group {
            let line = &lines[i];
            // The target's wall is one width along the line (the model's may not be, its line
            // turned a little against the outline): the spread is the target's widths' own.
            // A line parallel to its edge shifts; one drawn a little turned against it may
            // turn too, but not beyond the skew an edge may have (that is a few profiles'
            // doing, not the line's). Lines pooled shift together.
            let shift = match line_through(&line.moves, line.length) {
                [a, b] if group.len() == 1 && !line.parallel && (b - a).abs() <= MAX_SKEW * line.length => [a, b],
                _ if group.len() == 1 => {
                    let m = median(&mut line.moves.iter().map(|m| m.1).collect::<Vec<_>>());
                    [m, m]
                }
                _ => [shared * sign(line); 2],
            };
            found.push(Measured {
                line: line.index,
                wall: line.wall,
                shift,
                model_px,
                target_px,
                profiles: widths.len(),
                spread,
                outline_px,
                with: group.iter().map(|&g| lines[g].index).filter(|&g| g != line.index).collect(),
            });
        }
    }
    found.sort_by_key(|m| m.line);
    found
}

/// The moves at the line's start and end (`length` mm long) of the least-squares line
/// through the profiles' `(along, move)`, fitted again without the moves far from it.
fn line_through(moves: &[(f64, f64)], length: f64) -> [f64; 2] {
    let fit = |points: &[(f64, f64)]| -> (f64, f64) {
        let n = points.len() as f64;
        let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        // Profiles over a short stretch say little about a turn: a shift only.
        let slope = if sxx > 1e-9 * n * length * length && n >= 2.0 { sxy / sxx } else { 0.0 };
        (my - slope * mx, slope)
    };
    let (a, b) = fit(moves);
    let kept: Vec<(f64, f64)> =
        moves.iter().copied().filter(|p| (p.1 - (a + b * p.0)).abs() <= MOVE_OUTLIER_MM).collect();
    let (a, b) = if kept.len() >= 2 { fit(&kept) } else { (a, b) };
    [a, a + b * length]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::NativeLines;
    use crate::fit::shift::shifted;
    use crate::fit::sketch::tests::{SIZE, TRUE, camera, ids_of, pad, segments, segments_at, still, xy};

    /// A square tube's profile: the outline `TRUE` (40 x 30) and a loop `inset` mm inside it.
    fn tube(inset: f64) -> Sketch {
        let inner = TRUE.map(|[x, y]| [x - x.signum() * inset, y - y.signum() * inset]);
        let mut primitives = Vec::new();
        for corners in [TRUE, inner] {
            for i in 0..4 {
                primitives.push(Primitive::Line { start: corners[i], end: corners[(i + 1) % 4], construction: false });
            }
        }
        Sketch { name: "S1".into(), on: "XY".into(), primitives, constraints: Vec::new(), auto_coincident: true }
    }

    /// Every straight edge of the tube padded `depth` up from XY.
    fn tube_edges(inset: f64, depth: f64) -> Vec<[Point3; 2]> {
        edges_of(&tube(inset), depth)
    }

    /// Every straight edge of `sketch`'s lines padded `depth` up from XY.
    fn edges_of(sketch: &Sketch, depth: f64) -> Vec<[Point3; 2]> {
        let mut edges = Vec::new();
        for primitive in &sketch.primitives {
            let Primitive::Line { start: a, end: b, .. } = *primitive else { continue };
            for z in [0.0, depth] {
                edges.push([[a[0], a[1], z], [b[0], b[1], z]]);
            }
            edges.push([[a[0], a[1], 0.0], [a[0], a[1], depth]]);
        }
        edges
    }

    fn measured(inset: f64, actual: f64) -> Vec<Measured> {
        let lines = segments(&tube_edges(actual, 10.0).iter().map(|e| (e[0], e[1])).collect::<Vec<_>>());
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let ids = ids_of(&segments(&tube_edges(inset, 10.0).iter().map(|e| (e[0], e[1])).collect::<Vec<_>>()));
        measure(&tube(inset), &pad(10.0), &xy(), &tube_edges(inset, 10.0), &[], &camera(), &ids, still(), &target)
    }

    /// As [`measured`], against a target whose image has `per_framed` pixels per framed pixel.
    fn measured_on_image(inset: f64, actual: f64, per_framed: u32) -> Vec<Measured> {
        let edges = |inset: f64| tube_edges(inset, 10.0).iter().map(|e| (e[0], e[1])).collect::<Vec<_>>();
        let lines = segments(&edges(actual));
        let size = SIZE * per_framed;
        let native = NativeLines::centred(
            SIZE,
            per_framed,
            segments_at(&edges(actual), size).iter().map(|&on| f32::from(u8::from(on))).collect(),
        );
        let target = TargetPixels::new(SIZE, lines.clone(), &lines).with_native(native);
        let ids = ids_of(&segments(&edges(inset)));
        measure(&tube(inset), &pad(10.0), &xy(), &tube_edges(inset, 10.0), &[], &camera(), &ids, still(), &target)
    }

    #[test]
    fn a_wall_thinner_than_the_framing_resolves_is_measured_on_the_targets_image() {
        // A 0.8 mm wall is about 2 px in the framing, where its two lines are one; read 1.6 mm.
        let framed = measured(1.6, 0.8);
        assert!(framed.iter().all(|m| !m.worth_moving()), "{framed:?}");
        let found = measured_on_image(1.6, 0.8, 3);
        let moves: Vec<(usize, [f64; 2])> =
            found.iter().filter(|m| m.worth_moving()).map(|m| (m.line, m.shift)).collect();
        assert!(moves.len() >= 2, "{found:?}");
        let inner = corners(&shifted(&tube(1.6), &moves).expect("lines meet lines"), 4);
        for &(k, _) in &moves {
            let ([x, y], [_, ny]) = (inner[k - 4], inner[(k - 4 + 1) % 4]);
            let wall = if (y - ny).abs() < 1e-9 { 15.0 - y.abs() } else { 20.0 - x.abs() };
            assert!((wall - 0.8).abs() < 0.12, "line {k}: wall {wall} ({found:?})");
        }
        // An exact wall is left alone there too.
        assert!(measured_on_image(0.8, 0.8, 3).iter().all(|m| !m.worth_moving()));
    }

    fn corners(sketch: &Sketch, from: usize) -> Vec<[f64; 2]> {
        (from..from + 4)
            .map(|k| match sketch.primitives[k] {
                Primitive::Line { start, .. } => start,
                _ => panic!("a line"),
            })
            .collect()
    }

    #[test]
    fn a_tubes_wall_read_thin_is_measured_to_the_targets_and_its_inner_loop_moves() {
        // A 1.4 mm wall for a 2 mm one (the test camera: about 3.4 px for 5).
        let found = measured(1.4, 2.0);
        eprintln!("{found:#?}");
        let lines: Vec<usize> = found.iter().map(|m| m.line).collect();
        // Only the inner loop's lines move; the outline is the silhouette's.
        assert!(lines.iter().all(|&k| k >= 4) && !lines.is_empty(), "{found:?}");
        let moves: Vec<(usize, [f64; 2])> =
            found.iter().filter(|m| m.worth_moving()).map(|m| (m.line, m.shift)).collect();
        assert!(moves.len() >= 2, "{found:?}");
        let fitted = shifted(&tube(1.4), &moves).expect("lines meet lines");
        // Each moved side of the inner loop is now 2 mm inside the outline, within a third of
        // a pixel; the outline has not moved.
        assert_eq!(corners(&fitted, 0), corners(&tube(1.4), 0));
        let inner = corners(&fitted, 4);
        for &(k, _) in &moves {
            let [x, y] = inner[k - 4];
            let [nx, ny] = inner[(k - 4 + 1) % 4];
            // A side is along x or along y: its distance from the outline's side.
            let wall = if (y - ny).abs() < 1e-9 { 15.0 - y.abs() } else { 20.0 - x.abs() };
            assert!((wall - 2.0).abs() < 0.12, "line {k}: wall {wall} ({found:?})");
            let _ = nx;
        }
    }

    #[test]
    fn a_wall_drawn_in_two_pieces_is_measured_as_one_with_one_shift() {
        // The tube's inner loop with its bottom side (line 4, y = -15 + inset) in two pieces.
        let split = |inset: f64| {
            let mut sketch = tube(inset);
            let Primitive::Line { start, end, .. } = sketch.primitives[4] else { panic!("a line") };
            let middle = [start[0] + 0.3 * (end[0] - start[0]), start[1]];
            sketch.primitives[4] = Primitive::Line { start, end: middle, construction: false };
            sketch.primitives.push(Primitive::Line { start: middle, end, construction: false });
            sketch
        };
        let lines = segments(&edges_of(&split(2.0), 10.0).iter().map(|e| (e[0], e[1])).collect::<Vec<_>>());
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let drawn = split(1.4);
        let edges = edges_of(&drawn, 10.0);
        let ids = ids_of(&segments(&edges.iter().map(|e| (e[0], e[1])).collect::<Vec<_>>()));
        let found = measure(&drawn, &pad(10.0), &xy(), &edges, &[], &camera(), &ids, still(), &target);
        let piece = |k: usize| found.iter().find(|m| m.line == k).unwrap_or_else(|| panic!("line {k}: {found:?}"));
        let (a, b) = (piece(4), piece(8));
        assert_eq!((&a.with, &b.with), (&vec![8], &vec![4]), "{found:?}");
        assert_eq!((a.shift, a.profiles, a.target_px), (b.shift, b.profiles, b.target_px));
        assert!(a.worth_moving(), "{a:?}");
        // Pooled, the wall is the target's: 2 mm for 1.4 (the bottom runs +x: up is its left), within
        // a third of a pixel.
        assert!((a.shift[0] - 0.6).abs() < 0.12, "{a:?}");
    }

    #[test]
    fn an_exact_wall_is_left_alone() {
        let found = measured(2.0, 2.0);
        assert!(!found.is_empty());
        assert!(found.iter().all(|m| !m.worth_moving()), "{found:?}");
    }

    #[test]
    fn the_lines_that_bound_material_from_inside_are_a_pads_inner_loop_and_all_of_a_cuts() {
        assert_eq!(inner_lines(&tube(2.0), &pad(10.0)), vec![4, 5, 6, 7]);
        let mut cut = pad(10.0);
        cut.mode = Mode::Cut;
        assert_eq!(inner_lines(&tube(2.0), &cut), (0..8).collect::<Vec<_>>());
        // A lone outline bounds material from outside.
        let mut outline = tube(2.0);
        outline.primitives.truncate(4);
        assert!(inner_lines(&outline, &pad(10.0)).is_empty());
        // An L's lines at its inside corner bound the legs from inside; its outline's other
        // lines lie on its hull.
        let l = [[0.0, 0.0], [55.0, 0.0], [55.0, 8.0], [8.0, 8.0], [8.0, 45.0], [0.0, 45.0]];
        let mut bracket = tube(0.0);
        bracket.primitives =
            (0..6).map(|i| Primitive::Line { start: l[i], end: l[(i + 1) % 6], construction: false }).collect();
        assert_eq!(inner_lines(&bracket, &pad(10.0)), vec![2, 3]);
    }
}
