//! Lines the target draws that no edge of the finished model is on, beside a profile's line.
//!
//! The fit's cost is one-sided: the candidate's edges against the target's nearest lines. Two
//! sides of a bar a few pixels wide, drawn by a reader a millimetre off each, can both go
//! onto one of the bar's two lines, and the cost is then as low as it gets: nothing sees
//! that the other line is left with no edge on it. A simulated reader's test100 bar (10 mm
//! across, 8.6 px) was pinched to nothing at one corner that way (0.83; with its bottom
//! side where the target draws it, 0.94), a pallet's middle leg became a sliver (0.71 ->
//! 0.87), a shelf's plate a wedge (0.79 -> 0.87).
//!
//! At END the model holds every feature, and the target's lines should each have an edge
//! on them. Across every straight line of a profile, at each end of its extrusion where the
//! model draws it, the target's lines within [`REACH_PX`] that lie farther than [`MISS_PX`]
//! from every edge of the model are missed; where they line up along the profile's line,
//! about parallel to it, over much of its length, that line may be the one that belongs
//! there. Which line it is the rebuilt model tells ([`missed_pixels`]): the one whose move
//! leaves fewest of the target's line pixels with no edge near them.

use super::place::{OnPicture, on_picture};
use freecad_bridge::command::{Extrude, Primitive, Sketch};
use freecad_bridge::state::Frame;
use serde::{Deserialize, Serialize};
use views::{Camera, IdBuffers, NO_ENTITY};

use super::thickness::{END_MARGIN_PX, Scale, drawn_near};
use super::wall::MIN_PX_PER_MM;
use super::{Alignment, TargetPixels};

/// A target's line pixel this far (pixels) from every edge of the model is missed: the
/// model's lines and the target's differ by a pixel where both are right.
pub const MISS_PX: f64 = 2.0;
/// How far across a profile's line (pixels) a missed line may lie to be its: about two of a
/// simulated reader's millimetres at test100's scale.
pub const REACH_PX: f64 = 10.0;
/// The missed line runs about the profile line's way: at most this slope against it.
const MAX_SLOPE: f64 = 0.25;
/// A missed line's profiles lie within this of the straight line through them (pixels).
const INLIER_PX: f64 = 0.75;
/// At least this many profiles show the missed line ...
pub const MIN_SUPPORT: usize = 8;
/// ... at least this share of those where the model draws the line, and along at least this
/// share of the line's length on the picture.
const MIN_SHARE: f64 = 0.4;
const MIN_EXTENT: f64 = 0.5;

/// A profile's line with a missed line of the target beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissedLine {
    /// The primitive in the sketch.
    pub line: usize,
    /// Where the missed line lies across the model's line at its start and its end (pixels),
    /// and the move that puts the line there (mm along its left normal at each end).
    pub off_px: [f64; 2],
    pub shift: [f64; 2],
    /// Profiles that show the missed line, of those where the model draws the line.
    pub support: usize,
    pub profiles: usize,
}

/// How far each pixel of a model's picture lies from its nearest edge running each way
/// ([`views::oriented_distances`]): an edge crossing a line of the target is not on it (a
/// collapsed leg's corners send their edges along the extrusion across the target's line
/// where the leg's other side should be).
#[derive(Debug)]
pub struct EdgeDistance {
    by_direction: Vec<Vec<f32>>,
    width: u32,
    height: u32,
}

impl EdgeDistance {
    pub fn of(ids: &IdBuffers) -> EdgeDistance {
        let edges: Vec<bool> = ids.edge.iter().map(|&e| e != NO_ENTITY).collect();
        let by_direction = views::oriented_distances(&edges, ids.width, ids.height);
        EdgeDistance { by_direction, width: ids.width, height: ids.height }
    }

    /// Whether the picture's point `p` lies farther than [`MISS_PX`] from every edge running
    /// in direction `bin` ([`views::orientation_bin`]; off the picture: no edge).
    pub fn far(&self, p: [f64; 2], bin: usize) -> bool {
        let (x, y) = (p[0].floor() as i64, p[1].floor() as i64);
        let inside = x >= 0 && y >= 0 && x < i64::from(self.width) && y < i64::from(self.height);
        !inside || f64::from(self.by_direction[bin][y as usize * self.width as usize + x as usize]) > MISS_PX
    }
}

/// How many of the target's line pixels (in the framed picture) lie farther than
/// [`MISS_PX`] from every edge of a model's picture (`edges`, lying on the target by
/// `align`) that runs their way.
pub fn missed_pixels(edges: &EdgeDistance, align: Alignment, target: &TargetPixels) -> usize {
    let size = target.size as usize;
    let c = align.centre;
    (0..size * size)
        .filter(|&i| target.line_distance[i] <= 0.0)
        .filter(|&i| {
            // The model's point under the target's pixel, and the ways the target's line runs.
            let (tx, ty) = ((i % size) as f64 + 0.5, (i / size) as f64 + 0.5);
            let p = [
                c + (tx - align.shift[0] as f64 - c) / align.scale,
                c + (ty - align.shift[1] as f64 - c) / align.scale,
            ];
            (0..views::ORIENTATION_BINS).filter(|&b| target.oriented[b][i] <= 0.0).all(|b| edges.far(p, b))
        })
        .count()
}

/// The lines of extrusion `extrude`'s profile `sketch` (as solved, on `frame`) with a missed
/// line of the target beside them, at the copy where most profiles show it, most shown
/// first. The model's picture is `ids` (through `camera`, lying on the target by `align`),
/// `edges` how far its points lie from its edges.
#[allow(clippy::too_many_arguments)]
pub fn beside(
    sketch: &Sketch,
    extrude: &Extrude,
    frame: &Frame,
    camera: &Camera,
    ids: &IdBuffers,
    edges: &EdgeDistance,
    align: Alignment,
    target: &TargetPixels,
) -> Vec<MissedLine> {
    let measuring = Scale::of(target, align);
    let unit = measuring.unit;
    let mut out: Vec<MissedLine> = Vec::new();
    for OnPicture { line: index, p0, e, u, span, px_per_mm, .. } in on_picture(sketch, extrude, frame, camera) {
        if span < 2.0 * END_MARGIN_PX + MIN_SUPPORT as f64 {
            continue;
        }
        if px_per_mm.abs() < MIN_PX_PER_MM {
            continue;
        }
        let bin = views::orientation_bin(e[0], e[1]);
        let mut profiles = 0;
        let mut missed: Vec<(f64, f64)> = Vec::new();
        let mut t = END_MARGIN_PX;
        while t <= span - END_MARGIN_PX {
            let c = [p0[0] + t * e[0], p0[1] + t * e[1]];
            t += 1.0;
            if !drawn_near(ids, c) {
                continue;
            }
            profiles += 1;
            let lines = measuring.lines_across(target, align, c, u, -REACH_PX * unit, REACH_PX * unit);
            for o in lines.into_iter().map(|o| o / unit) {
                if o.abs() > MISS_PX && edges.far([c[0] + o * u[0], c[1] + o * u[1]], bin) {
                    missed.push((t - 1.0, o));
                }
            }
        }
        let Some((a, b, support)) = straight(&missed) else { continue };
        let extent = {
            let on: Vec<f64> = missed.iter().filter(|m| (m.1 - a - b * m.0).abs() <= INLIER_PX).map(|m| m.0).collect();
            on.iter().copied().fold(f64::NEG_INFINITY, f64::max) - on.iter().copied().fold(f64::INFINITY, f64::min)
        };
        if support < MIN_SUPPORT
            || (support as f64) < MIN_SHARE * profiles as f64
            || extent < MIN_EXTENT * (span - 2.0 * END_MARGIN_PX)
            || b.abs() > MAX_SLOPE
        {
            continue;
        }
        let off_px = [a, a + b * span];
        let found = MissedLine { line: index, off_px, shift: off_px.map(|o| o / px_per_mm), support, profiles };
        match out.iter_mut().find(|m| m.line == index) {
            Some(m) if m.support < support => *m = found,
            Some(_) => {}
            None => out.push(found),
        }
    }
    out.sort_by_key(|m| std::cmp::Reverse(m.support));
    out
}

/// `sketch` with line `line` moved along its left normal by `shift` (mm at its start and its
/// end). Where it meets another line at a good angle (at least [`MIN_CORNER_SINE`]), the corner
/// slides along that line; where the angle is narrow, the corner moves with the line and the
/// other line turns to meet it: a sliver's neighbours run the reader's noise's way, and where
/// a collapsed leg's steep foot was followed, it ran on far below the part. `None` where the
/// line meets a curve or more than one other primitive at an end.
pub fn onto(sketch: &Sketch, line: usize, shift: [f64; 2]) -> Option<Sketch> {
    let Primitive::Line { start, end, .. } = sketch.primitives[line] else { return None };
    let d = [end[0] - start[0], end[1] - start[1]];
    let length = d[0].hypot(d[1]);
    let left = [-d[1] / length, d[0] / length];
    let moved = |p: [f64; 2], s: f64| [p[0] + s * left[0], p[1] + s * left[1]];
    let (a, b) = (moved(start, shift[0]), moved(end, shift[1]));
    let e = [b[0] - a[0], b[1] - a[1]];
    let scale = sketch.primitives.iter().filter_map(line_ends).flatten().flatten().fold(1.0_f64, |m, v| m.max(v.abs()));
    let same = |p: [f64; 2], q: [f64; 2]| (p[0] - q[0]).hypot(p[1] - q[1]) <= 1e-9 * scale;
    let mut out = sketch.clone();
    for (old, new) in [(start, a), (end, b)] {
        let others: Vec<usize> = (0..sketch.primitives.len())
            .filter(|&k| k != line && !super::sketch::is_construction(&sketch.primitives[k]))
            .filter(|&k| ends(&sketch.primitives[k]).is_some_and(|[p, q]| same(p, old) || same(q, old)))
            .collect();
        let other = match others[..] {
            [] => None,
            [k] => Some(line_ends(&sketch.primitives[k])?),
            _ => return None,
        };
        let Some([p, q]) = other else {
            replace(&mut out, old, new, 1e-9 * scale);
            continue;
        };
        let f = [q[0] - p[0], q[1] - p[1]];
        let sine = (e[0] * f[1] - e[1] * f[0]).abs() / (e[0].hypot(e[1]) * f[0].hypot(f[1]));
        let corner = if sine >= MIN_CORNER_SINE {
            // Where the moved line crosses the other's.
            let det = e[0] * f[1] - e[1] * f[0];
            let t = ((p[0] - a[0]) * f[1] - (p[1] - a[1]) * f[0]) / det;
            [a[0] + t * e[0], a[1] + t * e[1]]
        } else {
            new
        };
        replace(&mut out, old, corner, 1e-9 * scale);
    }
    Some(out)
}

/// Every line's end within `tol` of `old` put at `new`.
fn replace(sketch: &mut Sketch, old: [f64; 2], new: [f64; 2], tol: f64) {
    for primitive in &mut sketch.primitives {
        if let Primitive::Line { start, end, .. } = primitive {
            for x in [start, end] {
                if (x[0] - old[0]).hypot(x[1] - old[1]) <= tol {
                    *x = new;
                }
            }
        }
    }
}

/// Corners slide along a line meeting the moved one at least this steeply (the sine of the
/// angle between them: 45 degrees).
const MIN_CORNER_SINE: f64 = 0.7;

fn line_ends(primitive: &Primitive) -> Option<[[f64; 2]; 2]> {
    match *primitive {
        Primitive::Line { start, end, .. } => Some([start, end]),
        _ => None,
    }
}

/// A line's or a three-point arc's ends.
fn ends(primitive: &Primitive) -> Option<[[f64; 2]; 2]> {
    match *primitive {
        Primitive::Line { start, end, .. } | Primitive::Arc { start, end, .. } => Some([start, end]),
        _ => None,
    }
}

/// The straight line `off = a + b * t` through most of `points` (`(t, off)`, within
/// [`INLIER_PX`]), fitted by least squares over those: `(a, b, how many)`. Tried through every
/// pair of points at least a quarter of their extent apart along the line.
fn straight(points: &[(f64, f64)]) -> Option<(f64, f64, usize)> {
    if points.len() < 2 {
        return None;
    }
    let (lo, hi) = points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| (l.min(p.0), h.max(p.0)));
    let apart = 0.25 * (hi - lo);
    // A few hundred points are plenty: every other one past that.
    let step = points.len().div_ceil(200);
    let sample: Vec<(f64, f64)> = points.iter().copied().step_by(step).collect();
    let count = |a: f64, b: f64| points.iter().filter(|p| (p.1 - a - b * p.0).abs() <= INLIER_PX).count();
    let mut best: Option<(f64, f64, usize)> = None;
    for (i, p) in sample.iter().enumerate() {
        for q in &sample[i + 1..] {
            if (q.0 - p.0).abs() < apart.max(1.0) {
                continue;
            }
            let b = (q.1 - p.1) / (q.0 - p.0);
            if b.abs() > MAX_SLOPE {
                continue;
            }
            let a = p.1 - b * p.0;
            let n = count(a, b);
            if best.is_none_or(|x| n > x.2) {
                best = Some((a, b, n));
            }
        }
    }
    let (a, b, _) = best?;
    // Least squares over the points on it.
    let on: Vec<(f64, f64)> = points.iter().copied().filter(|p| (p.1 - a - b * p.0).abs() <= INLIER_PX).collect();
    let n = on.len() as f64;
    let (mx, my) = (on.iter().map(|p| p.0).sum::<f64>() / n, on.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = on.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = on.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 1e-9 { sxy / sxx } else { 0.0 };
    let a = my - b * mx;
    Some((a, b, count(a, b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::shift::shifted;
    use crate::fit::sketch::tests::{SIZE, camera, ids_of, pad, segments, still, xy};

    fn line(start: [f64; 2], end: [f64; 2]) -> Primitive {
        Primitive::Line { start, end, construction: false }
    }

    /// A bar 40 mm long and `top - bottom` across, its bottom side drawn from `bottom` at the
    /// left to `bottom_right` at the right.
    fn bar(bottom: f64, bottom_right: f64, top: f64) -> Sketch {
        let c = [[-20.0, bottom], [20.0, bottom_right], [20.0, top], [-20.0, top]];
        Sketch {
            name: "S1".into(),
            on: "XY".into(),
            primitives: (0..4).map(|i| line(c[i], c[(i + 1) % 4])).collect(),
            constraints: Vec::new(),
            auto_coincident: true,
        }
    }

    fn edges(sketch: &Sketch, depth: f64) -> Vec<([f64; 3], [f64; 3])> {
        let mut out = Vec::new();
        for p in &sketch.primitives {
            let Primitive::Line { start: a, end: b, .. } = *p else { continue };
            for z in [0.0, depth] {
                out.push(([a[0], a[1], z], [b[0], b[1], z]));
            }
            out.push(([a[0], a[1], 0.0], [a[0], a[1], depth]));
        }
        out
    }

    fn found(drawn: &Sketch, truth: &Sketch) -> (Vec<MissedLine>, usize, usize) {
        let lines = segments(&edges(truth, 10.0));
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let ids = ids_of(&segments(&edges(drawn, 10.0)));
        let missed = beside(drawn, &pad(10.0), &xy(), &camera(), &ids, &EdgeDistance::of(&ids), still(), &target);
        let truth_ids = ids_of(&segments(&edges(truth, 10.0)));
        (
            missed,
            missed_pixels(&EdgeDistance::of(&ids), still(), &target),
            missed_pixels(&EdgeDistance::of(&truth_ids), still(), &target),
        )
    }

    #[test]
    fn a_bars_side_pinched_onto_its_other_side_is_found_beside_the_target_s_line_and_moved_onto_it() {
        // The truth: 40 x 6 mm. Drawn: the bottom side rises from -3 at the left onto the top
        // (+3) at the right: a wedge, its bottom line missed by the model.
        let truth = bar(-3.0, -3.0, 3.0);
        let drawn = bar(-3.0, 2.6, 3.0);
        let (missed, before, exact) = found(&drawn, &truth);
        assert_eq!(exact, 0, "an exact model misses none of the target's line pixels");
        assert!(before > 0);
        let bottom = missed.iter().find(|m| m.line == 0).unwrap_or_else(|| panic!("{missed:?}"));
        let moved = shifted(&drawn, &[(0, bottom.shift)]).expect("lines");
        let Primitive::Line { start, end, .. } = moved.primitives[0] else { panic!() };
        assert!((start[1] + 3.0).abs() < 0.3 && (end[1] + 3.0).abs() < 0.3, "{start:?} {end:?} ({missed:?})");
        let (_, after, _) = found(&moved, &truth);
        assert!(after < before / 4, "missed pixels {before} -> {after}");
    }

    #[test]
    fn a_moved_lines_corner_slides_along_a_steep_neighbour_and_a_narrow_one_turns_to_it() {
        // The bottom (0) moved 2 mm down (it runs +x: down is against its left normal). Its
        // right end meets an upright side: the corner slides down it. Its left end meets a
        // line coming in at 8.5 degrees: the corner moves with the bottom, and that line turns.
        let profile = Sketch {
            name: "S1".into(),
            on: "XY".into(),
            primitives: vec![
                line([0.0, 0.0], [10.0, 0.0]),
                line([10.0, 0.0], [10.0, 10.0]),
                line([10.0, 10.0], [-20.0, 10.0]),
                line([-20.0, 10.0], [-20.0, 3.0]),
                line([-20.0, 3.0], [0.0, 0.0]),
            ],
            constraints: Vec::new(),
            auto_coincident: true,
        };
        let moved = onto(&profile, 0, [-2.0, -2.0]).expect("lines only");
        let ends = |k: usize| line_ends(&moved.primitives[k]).expect("a line");
        assert_eq!(ends(0), [[0.0, -2.0], [10.0, -2.0]]);
        assert_eq!(ends(1), [[10.0, -2.0], [10.0, 10.0]]);
        assert_eq!(ends(4), [[-20.0, 3.0], [0.0, -2.0]]);
        assert_eq!(moved.primitives[2..4], profile.primitives[2..4]);
    }

    #[test]
    fn an_exact_bar_has_no_missed_line() {
        let truth = bar(-3.0, -3.0, 3.0);
        let (missed, before, _) = found(&truth, &truth);
        assert!(missed.is_empty(), "{missed:?}");
        assert_eq!(before, 0);
    }

    #[test]
    fn a_straight_line_is_found_through_most_points_and_not_through_a_stray_few() {
        let mut points: Vec<(f64, f64)> = (0..40).map(|t| (f64::from(t), 4.0 + 0.05 * f64::from(t))).collect();
        points.extend((0..6).map(|t| (f64::from(t) * 3.0, -7.0)));
        let (a, b, n) = straight(&points).expect("a line");
        assert!((a - 4.0).abs() < 1e-6 && (b - 0.05).abs() < 1e-6 && n == 40, "{a} {b} {n}");
    }
}
