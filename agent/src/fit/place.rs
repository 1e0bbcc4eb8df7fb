//! Where each straight line of a profile lies in the target, to a tenth of a pixel.
//!
//! The line fit places a line by the target's line pixels, under an alignment of the whole
//! picture by whole pixels: it leaves each line up to half a pixel off, and on thin parts
//! that is most of what is left. A simulated reader's test100 channel kept its flange's outer
//! side 0.4 px in from the target's line (the wall measurement, [`super::wall`], then moved
//! the inner side instead, the only one it may move: worse); four 3.9 mm bars, each side
//! within half a pixel, scored 0.91 where the oracle scores 1.00.
//!
//! Across a line, the target's line has a centre to a tenth of a pixel (its ink, the way
//! [`super::thickness`] reads two of them). Every line of every profile measured this way
//! gives its offset from the model's; what the lines share (a shift of the whole picture, and
//! its scale: the alignment's own rounding, and the two renderers' conventions) is fitted
//! over all of them and taken out, and what is left is where each line is off. A line moves
//! when hundreds of profiles agree it is off by more than two renderers' lines differ.

use freecad_bridge::command::{Extent, Extrude, Primitive, Sketch};
use freecad_bridge::state::Frame;
use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};
use views::{Camera, IdBuffers, NO_ENTITY};

use super::sketch::{Shape, numbers_of};
use super::thickness::{DISTINCT_PX, END_MARGIN_PX, Scale, drawn_near, median, nearest_alone, runs_across};
use super::wall::MIN_PX_PER_MM;
use super::{Alignment, TargetPixels};

/// A side moves when it is off by at least this (pixels, over its profiles, what the whole
/// picture shares taken out): the oracle's exact sides on test100 targets measure within
/// 0.05 px but for one at 0.17.
pub const MIN_OFF_PX: f64 = 0.15;
const DEPTH_FROM_COPIES: bool = true;
/// How far (pixels) from the model's line the target's may lie: the line fit leaves lines
/// within a pixel; farther, the target's line may be another's. A side or a depth found
/// farther off than this, what the whole picture shares taken out, is not moved: the
/// measurement is of lines a pixel or so off, and a move of two trades with others.
const SEEK_PX: f64 = 1.5;
/// The profiles must agree: their median absolute deviation from the median at most this
/// (pixels).
const MAX_SPREAD_PX: f64 = 0.3;
/// A line's copy (the profile at one end of its extrusion) counts in the whole picture's fit
/// with at least this many profiles.
const MIN_COPY_PROFILES: usize = 5;
/// A side moves when at least this many profiles measure it (a 3.9 mm bar's side: two
/// copies of a dozen).
pub const MIN_SIDE_PROFILES: usize = 12;
/// In the whole picture's fit, the copy farthest from it is left out while it is this far off
/// (pixels) and enough copies remain: the lines that are off are what is measured.
const SHARED_OUTLIER_PX: f64 = 0.2;
const MIN_SHARED_COPIES: usize = 5;
/// Another edge this near a line (pixels) leaves it unmeasured there ([`Drawn::crowded`]).
const CROWDED_PX: f64 = DISTINCT_PX + 0.5;
/// A line is measured where it runs across at least this many pixel columns (or rows) of the
/// target's image sideways. test100's targets draw lines one pixel wide without
/// anti-aliasing: a line's centre on one profile is a whole pixel, and only a line that
/// steps across pixels along its length has profiles that average to a finer place. An exact
/// plate's upright outline read 0.97 px off, one pixel of its image, and its slanted ones
/// within 0.05.
const MIN_CYCLES: f64 = 2.0;
/// An edge whose ends lie this near a line (pixels) is on it.
const ON_OWN_LINE_PX: f64 = 0.3;
/// Two lines of a profile meeting end to end are one side when the sine of the angle between
/// them is at most this: a side drawn in two pieces is measured as one.
const COLLINEAR_SINE: f64 = 1e-3;

/// One profile across a line: where on the picture, the line's normal there, and how far the
/// target's line lies from the model's along it (pixels).
#[derive(Debug, Clone, Copy)]
struct Profile {
    at: [f64; 2],
    normal: [f64; 2],
    off: f64,
}

/// The profiles across one line of a profile, at one of its copies, with what turns an
/// offset into a move: pixels along the normal per mm the line moves along its left normal.
#[derive(Debug, Clone)]
pub struct LineCopy {
    /// The feature's command and the line's primitive in its sketch.
    pub feature: usize,
    pub line: usize,
    px_per_mm: f64,
    /// Pixels along the normal per mm the extrusion's depth grows (0 on the sketch's plane).
    depth_px_per_mm: f64,
    profiles: Vec<Profile>,
}

/// One side of a profile (one line, or lines end to end) measured against the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// The primitives of the side, in the sketch.
    pub lines: Vec<usize>,
    /// How far the target's line lies from the model's (pixels, the median over the
    /// profiles, what the whole picture shares taken out), and the move that puts it there
    /// (mm along the first line's left normal).
    pub off_px: f64,
    pub shift: f64,
    pub profiles: usize,
    /// The profiles' median absolute deviation from `off_px` (pixels).
    pub spread: f64,
    /// Each copy's own offset and profiles (pixels; the side's lines at each end of the
    /// extrusion, in the order measured).
    pub by_copy: Vec<(f64, usize)>,
}

impl Placed {
    pub fn worth_moving(&self) -> bool {
        self.profiles >= MIN_SIDE_PROFILES
            && self.spread <= MAX_SPREAD_PX
            && (MIN_OFF_PX..=SEEK_PX).contains(&self.off_px.abs())
    }

    /// The moves for [`super::shift::shifted`]: every line of the side by the same amount,
    /// along its own left normal.
    pub fn moves(&self, sketch: &Sketch) -> Vec<(usize, [f64; 2])> {
        let normal = |k: usize| match sketch.primitives[k] {
            Primitive::Line { start, end, .. } => {
                let (du, dv) = (end[0] - start[0], end[1] - start[1]);
                let l = du.hypot(dv);
                [-dv / l, du / l]
            }
            _ => [0.0, 0.0],
        };
        let first = normal(self.lines[0]);
        self.lines
            .iter()
            .map(|&k| {
                let n = normal(k);
                let s = self.shift * (n[0] * first[0] + n[1] * first[1]).signum();
                (k, [s, s])
            })
            .collect()
    }
}

/// The model's edges on its picture, segment by segment: where another edge runs near a line.
#[derive(Debug)]
pub struct Drawn {
    segments: Vec<([f64; 2], [f64; 2])>,
}

impl Drawn {
    /// Every edge's polyline (model coordinates) through `camera`.
    pub fn of(edges: &[Vec<Point3<f64>>], camera: &Camera) -> Drawn {
        let project = |p: &Point3<f64>| camera.project(p).map(|(x, y, _)| [x, y]);
        let segments = edges
            .iter()
            .flat_map(|line| line.windows(2).filter_map(|w| Some((project(&w[0])?, project(&w[1])?))))
            .collect();
        Drawn { segments }
    }

    /// Whether an edge other than the line through `p0` along the unit `e` (and any edge on
    /// it) passes within `reach` pixels of `c`: two lines that close are one on both pictures,
    /// and the target's ink centre lies between them (an exact cut's side 0.5 px off where
    /// the far end's copy ran a pixel beside it).
    fn crowded(&self, c: [f64; 2], p0: [f64; 2], e: [f64; 2], reach: f64) -> bool {
        let off_line = |q: [f64; 2]| (e[0] * (q[1] - p0[1]) - e[1] * (q[0] - p0[0])).abs();
        self.segments.iter().any(|&(a, b)| {
            if off_line(a) <= ON_OWN_LINE_PX && off_line(b) <= ON_OWN_LINE_PX {
                return false;
            }
            let d = [b[0] - a[0], b[1] - a[1]];
            let l2 = d[0] * d[0] + d[1] * d[1];
            let t = if l2 > 0.0 { (((c[0] - a[0]) * d[0] + (c[1] - a[1]) * d[1]) / l2).clamp(0.0, 1.0) } else { 0.0 };
            (a[0] + t * d[0] - c[0]).hypot(a[1] + t * d[1] - c[1]) <= reach
        })
    }
}

/// The profiles across every straight line of extrusion `feature`'s profile `sketch` (as
/// solved, on `frame`) at each of its copies, where the model's picture `ids` (through
/// `camera`, lying on the target by `align`) draws it and no other edge of `drawn` runs near.
#[allow(clippy::too_many_arguments)]
pub fn copies(
    feature: usize,
    sketch: &Sketch,
    extrude: &Extrude,
    frame: &Frame,
    camera: &Camera,
    (ids, drawn): (&IdBuffers, &Drawn),
    align: Alignment,
    target: &TargetPixels,
) -> Vec<LineCopy> {
    let normal = Vector3::from(frame.normal);
    let project = |p: Vector3<f64>| camera.project(&Point3::from(p)).map(|(x, y, _)| [x, y]);
    let model_line =
        |x: f64, y: f64| -> f64 { super::bilinear(x, y, |i, j| f64::from(u8::from(ids.edge_at(i, j) != NO_ENTITY))) };
    let measuring = Scale::of(target, align);
    let unit = measuring.unit;
    let reach = SEEK_PX + DISTINCT_PX;
    let mut out = Vec::new();
    for OnPicture { line: index, start, along, p0, e, u, span, px_per_mm } in on_picture(sketch, extrude, frame, camera)
    {
        let at = Vector3::from(frame.to_global(start[0], start[1])) + normal * along;
        let Some(pd) = project(at + normal * depth_rate(extrude, along)) else { continue };
        if span < 2.0 * END_MARGIN_PX + 1.0 {
            continue;
        }
        // Along its length the line crosses this many of the target's pixel rows or
        // columns sideways: where few, its profiles all read the same whole pixel.
        let cycles = span * unit * e[0].abs().min(e[1].abs());
        if px_per_mm.abs() < MIN_PX_PER_MM || cycles < MIN_CYCLES {
            continue;
        }
        let mut profiles = Vec::new();
        let mut t = END_MARGIN_PX;
        while t <= span - END_MARGIN_PX {
            let c = [p0[0] + t * e[0], p0[1] + t * e[1]];
            t += 1.0;
            // The model draws this line here, and no other line within reach across it:
            // the target's line nearest is this one's.
            if !drawn_near(ids, c)
                || runs_across(model_line, c, u, -reach, reach).len() != 1
                || drawn.crowded(c, p0, e, CROWDED_PX)
            {
                continue;
            }
            let lines = measuring.lines_across(target, align, c, u, -reach * unit, reach * unit);
            if let Some(off) = nearest_alone(&lines, 0.0, SEEK_PX * unit) {
                profiles.push(Profile { at: c, normal: u, off: off / unit });
            }
        }
        if !profiles.is_empty() {
            let depth_px_per_mm = (pd[0] - p0[0]) * u[0] + (pd[1] - p0[1]) * u[1];
            out.push(LineCopy { feature, line: index, px_per_mm, depth_px_per_mm, profiles });
        }
    }
    out
}

/// One straight line of a profile at one end of its extrusion, on the model's picture.
pub(super) struct OnPicture {
    /// The primitive in the sketch, its start (sketch coordinates), and the copy (mm along the
    /// sketch's normal).
    pub(super) line: usize,
    pub(super) start: [f64; 2],
    pub(super) along: f64,
    /// Its start on the picture, the unit direction along it and the unit normal across it,
    /// its length (pixels), and pixels along that normal per mm the line moves along its left
    /// normal in the sketch.
    pub(super) p0: [f64; 2],
    pub(super) e: [f64; 2],
    pub(super) u: [f64; 2],
    pub(super) span: f64,
    pub(super) px_per_mm: f64,
}

/// Every straight line of extrusion `extrude`'s profile `sketch` (as solved, on `frame`) at
/// each of its copies, through `camera` (where it projects).
pub(super) fn on_picture(sketch: &Sketch, extrude: &Extrude, frame: &Frame, camera: &Camera) -> Vec<OnPicture> {
    let normal = Vector3::from(frame.normal);
    let (xa, ya) = (Vector3::from(frame.x_axis), Vector3::from(frame.y_axis));
    let project = |p: Vector3<f64>| camera.project(&Point3::from(p)).map(|(x, y, _)| [x, y]);
    let mut out = Vec::new();
    for (line, primitive) in sketch.primitives.iter().enumerate() {
        let Primitive::Line { start, end, construction: false } = *primitive else { continue };
        let (du, dv) = (end[0] - start[0], end[1] - start[1]);
        let length = du.hypot(dv);
        if length <= 0.0 {
            continue;
        }
        let n3 = (xa * -dv + ya * du) / length;
        for along in super::wall::copies(extrude) {
            let at = |p: [f64; 2]| Vector3::from(frame.to_global(p[0], p[1])) + normal * along;
            let (Some(p0), Some(p1), Some(pn)) = (project(at(start)), project(at(end)), project(at(start) + n3)) else {
                continue;
            };
            let e = [p1[0] - p0[0], p1[1] - p0[1]];
            let span = e[0].hypot(e[1]);
            if span <= 0.0 {
                continue;
            }
            let e = [e[0] / span, e[1] / span];
            let u = [-e[1], e[0]];
            let px_per_mm = (pn[0] - p0[0]) * u[0] + (pn[1] - p0[1]) * u[1];
            out.push(OnPicture { line, start, along, p0, e, u, span, px_per_mm });
        }
    }
    out
}

/// How far (mm, along the sketch's normal) the profile's copy at `along` moves per mm the
/// extrusion's depth grows: the far end of a one-sided extrusion all of it, each end of a
/// symmetric one half; the sketch's plane, and the second side of a two-sided one (its own
/// depth), none.
fn depth_rate(extrude: &Extrude, along: f64) -> f64 {
    match extrude.extent {
        Extent::OneSide { .. } | Extent::TwoSides { .. } if along != 0.0 && along.signum() == extent_sign(extrude) => {
            along.signum()
        }
        Extent::Symmetric { .. } => 0.5 * along.signum(),
        _ => 0.0,
    }
}

/// The sign along the sketch's normal of the first depth's end.
fn extent_sign(extrude: &Extrude) -> f64 {
    match extrude.extent {
        Extent::OneSide { .. } if extrude.reversed => -1.0,
        _ => 1.0,
    }
}

/// `extent` with its (first) depth grown by `change` mm.
pub fn grown(extent: &Extent, change: f64) -> Extent {
    match *extent {
        Extent::OneSide { depth } => Extent::OneSide { depth: depth + change },
        Extent::Symmetric { depth } => Extent::Symmetric { depth: depth + change },
        Extent::TwoSides { depth, depth2 } => Extent::TwoSides { depth: depth + change, depth2 },
        ref other => other.clone(),
    }
}

/// An extrusion's depth measured by where its far copies of the profile's lines lie against
/// its near ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlacedDepth {
    /// The change that puts the far copies on the target's lines (mm), and what it shows as
    /// on the picture (pixels, along the extrusion).
    pub change: f64,
    pub px: f64,
    /// The far copies' profiles.
    pub profiles: usize,
}

impl PlacedDepth {
    pub fn worth_moving(&self) -> bool {
        self.profiles >= MIN_SIDE_PROFILES && (MIN_OFF_PX..=SEEK_PX).contains(&self.px.abs()) && DEPTH_FROM_COPIES
    }
}

/// A feature's sides, and its depth where both ends' copies of a side show.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Placement {
    pub sides: Vec<Placed>,
    pub depth: Option<PlacedDepth>,
}

/// What every measured line's offset shares: a shift of the picture and a scale about its
/// centre. (How far test100's renderer draws outline lines outside their edges was fitted as
/// well, while upright lines were measured: over the oracle's parts it came to 0.12 px at
/// most, and on a lone block it traded with the depth: 2 px.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shared {
    shift: [f64; 2],
    /// Pixels per pixel from `centre`.
    scale: f64,
    centre: f64,
}

impl Shared {
    fn expected(&self, p: &Profile) -> f64 {
        let u = p.normal;
        u[0] * self.shift[0]
            + u[1] * self.shift[1]
            + self.scale * (u[0] * (p.at[0] - self.centre) + u[1] * (p.at[1] - self.centre))
    }
}

/// [`Shared`], fitted over the copies with enough profiles, the farthest left out while it is
/// far off. Each extrusion's depth is fitted with it where both ends' copies show (the far copies' offsets
/// are the depth's too: a depth read short would otherwise pass for a shift of the picture),
/// and a far copy of any other counts for nothing. `None` when too few copies, or too few
/// directions, fix it.
pub fn shared(copies: &[LineCopy], centre: f64) -> Option<Shared> {
    let counted: Vec<&LineCopy> = copies.iter().filter(|c| c.profiles.len() >= MIN_COPY_PROFILES).collect();
    let far = |c: &LineCopy| c.depth_px_per_mm.abs() >= MIN_PX_PER_MM;
    let mut deep: Vec<usize> = counted.iter().filter(|c| far(c)).map(|c| c.feature).collect();
    deep.sort_unstable();
    deep.dedup();
    deep.retain(|&f| counted.iter().any(|c| c.feature == f && !far(c)));
    // Each copy as one row: its offset, at its profiles' mean point, along its normal; the
    // scale's column in pixels at the picture's edge, as the shift's (a fair test of whether
    // the rows fix them all); its feature's depth's.
    let mut rows: Vec<(Vec<f64>, f64, f64)> = counted
        .iter()
        .filter(|c| !far(c) || deep.contains(&c.feature))
        .map(|c| {
            let n = c.profiles.len() as f64;
            let at = c.profiles.iter().fold([0.0, 0.0], |m, p| [m[0] + p.at[0] / n, m[1] + p.at[1] / n]);
            let u = c.profiles[0].normal;
            let off = middle_mean(&mut c.profiles.iter().map(|p| p.off).collect::<Vec<_>>());
            let mut a = vec![u[0], u[1], (u[0] * (at[0] - centre) + u[1] * (at[1] - centre)) / centre];
            a.extend(deep.iter().map(|&f| if f == c.feature { c.depth_px_per_mm } else { 0.0 }));
            (a, off, n.sqrt())
        })
        .collect();
    loop {
        if rows.len() < MIN_SHARED_COPIES + deep.len() {
            return None;
        }
        let columns: Vec<usize> = (0..3 + deep.len()).collect();
        let m = columns.len();
        let mut normal = nalgebra::DMatrix::<f64>::zeros(m, m);
        let mut rhs = nalgebra::DVector::<f64>::zeros(m);
        for (a, off, w) in &rows {
            let a = nalgebra::DVector::from_iterator(m, columns.iter().map(|&i| a[i]));
            normal += &a * a.transpose() * *w;
            rhs += &a * (*off * *w);
        }
        // Directions in the picture: both axes must be seen, or the shift is not fixed.
        let singular = normal.clone().singular_values();
        if singular.min() <= 1e-4 * singular.max() {
            return None;
        }
        let solution = normal.try_inverse()? * rhs;
        let mut x = vec![0.0; 3 + deep.len()];
        for (k, &i) in columns.iter().enumerate() {
            x[i] = solution[k];
        }
        let residual =
            |(a, off, _): &(Vec<f64>, f64, f64)| (off - a.iter().zip(&x).map(|(a, x)| a * x).sum::<f64>()).abs();
        let (worst, far_off) =
            rows.iter().enumerate().map(|(i, r)| (i, residual(r))).max_by(|a, b| a.1.total_cmp(&b.1)).expect("rows");
        if far_off <= SHARED_OUTLIER_PX || rows.len() <= MIN_SHARED_COPIES + deep.len() {
            return Some(Shared { shift: [x[0], x[1]], scale: x[2] / centre, centre });
        }
        rows.remove(worst);
    }
}

/// The sides of extrusion `feature`'s `sketch` measured in `copies` (every feature's), what the
/// whole picture shares (`shared`, about `centre`) taken out: one entry per side (lines end to
/// end and in line are one side).
pub fn placed(feature: usize, sketch: &Sketch, copies: &[LineCopy], shared: Shared) -> Placement {
    let (_, shapes) = numbers_of(sketch);
    let direction = |k: usize| match sketch.primitives[k] {
        Primitive::Line { start, end, .. } => {
            let (du, dv) = (end[0] - start[0], end[1] - start[1]);
            let l = du.hypot(dv);
            Some([du / l, dv / l])
        }
        _ => None,
    };
    // Sides: lines joined end to end and in line (union over shared points).
    let lines: Vec<(usize, usize, usize)> = shapes
        .iter()
        .filter_map(|&(k, s)| match s {
            Shape::Line { a, b } if direction(k).is_some() => Some((k, a, b)),
            _ => None,
        })
        .collect();
    let mut side_of: Vec<usize> = (0..sketch.primitives.len()).collect();
    fn root(side_of: &mut [usize], mut i: usize) -> usize {
        while side_of[i] != i {
            i = side_of[i];
        }
        i
    }
    for (i, &(k, a, b)) in lines.iter().enumerate() {
        for &(j, c, d) in &lines[i + 1..] {
            let shares_end = [a, b].iter().any(|p| [c, d].contains(p));
            let (Some(p), Some(q)) = (direction(k), direction(j)) else { continue };
            let in_line = (p[0] * q[1] - p[1] * q[0]).abs() <= COLLINEAR_SINE;
            if shares_end && in_line {
                let (x, y) = (root(&mut side_of, k), root(&mut side_of, j));
                side_of[x] = y;
            }
        }
    }
    let mut sides: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
    for &(k, _, _) in &lines {
        let r = root(&mut side_of, k);
        sides.entry(r).or_default().push(k);
    }
    // Each side's copies as rows of one least-squares fit: a copy's offset (the shared part
    // taken out) is its side's move along the line's normal, plus, on the far copies, the
    // depth's change along the extrusion. The depth is fitted only where some side shows both
    // ends, each over as many profiles as a side's move needs: otherwise a far copy's offset
    // is either (a scripted tube's depth was taken 0.4 mm long on two far copies of ten
    // profiles each, and the sides seen only at that end moved with it).
    struct Row {
        side: usize,
        along: f64,
        depth: f64,
        off: f64,
        weight: f64,
    }
    let sides: Vec<Vec<usize>> = sides.into_values().collect();
    let mut rows: Vec<Row> = Vec::new();
    for (i, members) in sides.iter().enumerate() {
        let first = direction(members[0]).expect("a line");
        for copy in copies.iter().filter(|c| c.feature == feature && members.contains(&c.line)) {
            let d = direction(copy.line).expect("a line");
            let sign = (d[0] * first[0] + d[1] * first[1]).signum();
            let off = middle_mean(&mut copy.profiles.iter().map(|p| p.off - shared.expected(p)).collect::<Vec<_>>());
            let weight = copy.profiles.len() as f64;
            rows.push(Row { side: i, along: copy.px_per_mm * sign, depth: copy.depth_px_per_mm, off, weight });
        }
    }
    let far = |r: &Row| r.depth.abs() >= MIN_PX_PER_MM;
    let both_ends = sides.iter().enumerate().any(|(i, _)| {
        let ends = |f: bool| rows.iter().any(|r| r.side == i && far(r) == f && r.weight >= MIN_SIDE_PROFILES as f64);
        ends(true) && ends(false)
    });
    let n = sides.len() + usize::from(both_ends);
    let mut normal = nalgebra::DMatrix::<f64>::zeros(n, n);
    let mut rhs = nalgebra::DVector::<f64>::zeros(n);
    for r in rows.iter().filter(|r| both_ends || !far(r)) {
        let mut a = nalgebra::DVector::<f64>::zeros(n);
        a[r.side] = r.along;
        if both_ends {
            a[n - 1] = r.depth;
        }
        normal += &a * a.transpose() * r.weight;
        rhs += &a * (r.off * r.weight);
    }
    // A side no copy of which counts is not fitted.
    for i in 0..n {
        if normal[(i, i)] == 0.0 {
            normal[(i, i)] = 1.0;
        }
    }
    let Some(solution) = normal.clone().try_inverse().map(|inverse| inverse * rhs) else {
        return Placement::default();
    };
    let depth_change = if both_ends { solution[n - 1] } else { 0.0 };
    let mut out = Vec::new();
    for (i, members) in sides.into_iter().enumerate() {
        let first = direction(members[0]).expect("a line");
        let shift = solution[i];
        // Every profile of the side, against the fit: how far off the target's line is left.
        let mut residuals: Vec<f64> = Vec::new();
        let mut by_copy = Vec::new();
        let (mut scale, mut counted) = (0.0, 0.0);
        for copy in copies.iter().filter(|c| c.feature == feature && members.contains(&c.line)) {
            if !both_ends && copy.depth_px_per_mm.abs() >= MIN_PX_PER_MM {
                continue;
            }
            let d = direction(copy.line).expect("a line");
            let sign = (d[0] * first[0] + d[1] * first[1]).signum();
            let fitted = copy.px_per_mm * sign * shift + copy.depth_px_per_mm * depth_change;
            let from = residuals.len();
            for p in &copy.profiles {
                residuals.push(p.off - shared.expected(p) - fitted);
            }
            let count = copy.profiles.len() as f64;
            (scale, counted) = (scale + copy.px_per_mm.abs() * count, counted + count);
            by_copy.push((middle_mean(&mut residuals[from..].to_vec()) + fitted, residuals.len() - from));
        }
        if residuals.is_empty() {
            continue;
        }
        let profiles = residuals.len();
        let spread = median(&mut residuals.iter().map(|r| r.abs()).collect::<Vec<_>>());
        out.push(Placed { lines: members, off_px: shift * scale / counted, shift, profiles, spread, by_copy });
    }
    let depth = both_ends.then(|| {
        let far_rows: Vec<&Row> = rows.iter().filter(|r| far(r)).collect();
        let weight: f64 = far_rows.iter().map(|r| r.weight).sum();
        let px = depth_change * far_rows.iter().map(|r| r.depth.abs() * r.weight).sum::<f64>() / weight;
        PlacedDepth { change: depth_change, px, profiles: weight as usize }
    });
    Placement { sides: out, depth }
}

/// The mean of the middle half of `values`: a line's centre is read on whole pixels of the
/// target's image, so the median of many profiles is one of a few values a quarter of a
/// pixel apart; the mean of the middle half is finer, and as deaf to another line's profiles.
fn middle_mean(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let middle = &values[n / 4..n - n / 4];
    if middle.is_empty() { median(values) } else { middle.iter().sum::<f64>() / middle.len() as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::NativeLines;
    use crate::fit::sketch::tests::{
        SIZE, TRUE, box_edges, camera, ids_of, pad, rectangle, segments, segments_at, still, xy,
    };

    /// The box's edges (corners `drawn`, 10 deep) on the test camera's picture.
    fn drawn_of(corners: [[f64; 2]; 4], depth: f64) -> Drawn {
        let edges: Vec<Vec<Point3<f64>>> =
            box_edges(corners, depth).iter().map(|(a, b)| vec![Point3::from(*a), Point3::from(*b)]).collect();
        Drawn::of(&edges, &camera())
    }

    /// A 40 x 30 x 10 box drawn with its corners `drawn`, measured against a target drawn as
    /// `TRUE` on an image of three pixels per framed pixel, every line as one ink pixel.
    fn measured(drawn: [[f64; 2]; 4]) -> Vec<Placed> {
        measured_deep(drawn, 10.0, 10.0).sides
    }

    /// As [`measured`], the box `depth` deep against a target `actual` deep.
    fn measured_deep(drawn: [[f64; 2]; 4], depth: f64, actual: f64) -> Placement {
        let size = SIZE * 3;
        let native = NativeLines::centred(
            SIZE,
            3,
            segments_at(&box_edges(TRUE, actual), size).iter().map(|&on| f32::from(u8::from(on))).collect(),
        );
        let lines = segments(&box_edges(TRUE, actual));
        let target = TargetPixels::new(SIZE, lines.clone(), &lines).with_native(native);
        let ids = ids_of(&segments(&box_edges(drawn, depth)));
        let sketch = rectangle("S1", drawn);
        let found =
            copies(1, &sketch, &pad(depth), &xy(), &camera(), (&ids, &drawn_of(drawn, depth)), still(), &target);
        let shared = shared(&found, f64::from(SIZE) / 2.0).expect("eight copies in two directions");
        placed(1, &sketch, &found, shared)
    }

    #[test]
    fn an_exact_profile_stays_where_it_is() {
        let sides = measured(TRUE);
        assert_eq!(sides.len(), 4, "{sides:?}");
        assert!(sides.iter().all(|s| !s.worth_moving() && s.off_px.abs() < 0.2), "{sides:?}");
    }

    #[test]
    fn a_side_drawn_a_third_of_a_millimetre_out_is_measured_back_to_the_targets_proportions() {
        // The right side at x = 20.35 for 20: about 0.8 px on the picture. What the whole
        // picture shares (a shift, a scale) is taken out, as the score's normalisation takes
        // it out: what is left is a box 1% too wide for its height, and the moves make it as
        // wide as the target's for its height.
        let mut drawn = TRUE;
        drawn[1][0] = 20.35;
        drawn[2][0] = 20.35;
        let sides = measured(drawn);
        let sketch = rectangle("S1", drawn);
        let moves: Vec<(usize, [f64; 2])> =
            sides.iter().filter(|s| s.worth_moving()).flat_map(|s| s.moves(&sketch)).collect();
        assert!(moves.len() >= 2, "{sides:?}");
        let moved = crate::fit::shift::shifted(&sketch, &moves).expect("lines meet lines");
        let corner = |k: usize| match moved.primitives[k] {
            Primitive::Line { start, .. } => start,
            _ => panic!("a line"),
        };
        let (width, height) = (corner(1)[0] - corner(0)[0], corner(2)[1] - corner(1)[1]);
        assert!((width / height - 40.0 / 30.0).abs() < 0.003, "{width} x {height}: {sides:?}");
    }

    #[test]
    fn a_depth_read_half_a_millimetre_short_is_measured_by_the_far_ends_lines() {
        // 10 mm deep for 10.5: the top's lines lie about 1.2 px off, the bottom's on theirs.
        let placement = measured_deep(TRUE, 10.0, 10.5);
        let depth = placement.depth.expect("both ends of a side show");
        assert!(depth.worth_moving() && (depth.change - 0.5).abs() < 0.15, "{placement:?}");
        // The sides themselves stay.
        assert!(placement.sides.iter().all(|s| !s.worth_moving()), "{placement:?}");
        // An exact depth stays.
        let exact = measured_deep(TRUE, 10.0, 10.0);
        assert!(exact.depth.is_some_and(|d| !d.worth_moving()), "{exact:?}");
    }

    #[test]
    fn a_side_drawn_in_two_pieces_is_one_side() {
        let mut sketch = rectangle("S1", TRUE);
        let Primitive::Line { start, end, .. } = sketch.primitives[1] else { panic!() };
        let mid = [start[0], 0.0];
        sketch.primitives[1] = Primitive::Line { start, end: mid, construction: false };
        sketch.primitives.push(Primitive::Line { start: mid, end, construction: false });
        let lines = segments(&box_edges(TRUE, 10.0));
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let ids = ids_of(&lines);
        let found = copies(1, &sketch, &pad(10.0), &xy(), &camera(), (&ids, &drawn_of(TRUE, 10.0)), still(), &target);
        let none = Shared { shift: [0.0; 2], scale: 0.0, centre: f64::from(SIZE) / 2.0 };
        let sides = placed(1, &sketch, &found, none).sides;
        assert_eq!(sides.len(), 4, "{sides:?}");
        assert!(sides.iter().any(|s| s.lines == vec![1, 4]), "{sides:?}");
    }
}
