//! An extrusion's depth, measured between the target's two lines that bound its side.
//!
//! Plates a few pixels thick are where readers lose most: one read 1.6 mm for a test100
//! plate of 2.05 mm (at the model's scale), mIoU 0.68, where the same program at 2.0 mm
//! scores 0.86. The line fit cannot see it: the plate's top and bottom outlines move a pixel,
//! which the moved-edges test's one-pixel neighbourhood ([`super::moved_edges`]) does not
//! count, and the picture's alignment on the target is a whole pixel, so a fit scored
//! against it chases the rounding (an exact plate preferred half a pixel thinner, then half a
//! pixel thicker, as the alignment jumped).
//!
//! A measurement does not need either. Where the model shows a side of the extrusion (both
//! copies of a profile line drawn, the sketch's and the far one), the target draws two lines
//! as well; across them, every pixel along the side gives one profile, and the distance
//! between the centres of the two lines on it is the side's width in the target. Both lines
//! are drawn by one renderer with one pen, so their width and anti-aliasing cancel. The
//! median over every profile (hundreds along a plate's long side) against the width the
//! model's own depth makes there gives the depth's factor, to a tenth of a pixel.

use freecad_bridge::command::{Extent, Extrude, Mode, Primitive, Sketch};
use freecad_bridge::state::Frame;
use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};
use views::{Camera, IdBuffers, NO_ENTITY};

use super::{Alignment, NativeLines, TargetPixels};

/// Sides whose two lines are at most this far apart (pixels) are measured. The line fit
/// cannot see a pixel's change on a thin side, and on a wider one it aligns the picture by
/// whole pixels: a relay reader's block 1.3 px too thick over 34 px was left so (0.945;
/// measured, 0.983), and a simulated reader's hexagonal prism 1.3% short over 45 px (0.978;
/// measured, 0.991). At 120 px (40 before) the oracle's figures hold on test100 and the
/// generated parts; a side longer still is more likely to have another feature's line
/// within reach of its far one.
pub const MAX_SIDE_PX: f64 = 120.0;
/// Two lines closer than this (pixels) are one line on the picture (here and in [`super::wall`]).
pub(super) const DISTINCT_PX: f64 = 2.5;
/// The line fit leaves a depth shorter than this on the picture (pixels) as it is: two
/// lines this close are at most two lines' widths apart, and the search chases their
/// anti-aliasing (a test100 plate 2.9 px thick, read right, was thinned 17%: 0.977 -> 0.843).
/// This measurement is what sizes it.
pub const MIN_FITTED_DEPTH_PX: f64 = 2.0 * DISTINCT_PX;
/// Fewer profiles than this is no measurement.
pub const MIN_PROFILES: usize = 30;
/// A depth moves only when the sides measured are this much wider or narrower (pixels, the
/// median) and by this share of their width: two renderers' lines differ by less. With the
/// line centres taken from the target's pixels that pass the line threshold, the oracle's
/// exact sides in test100 targets measured 9.26 px for 9.58 and 24.00 px for 23.24 (3.3%),
/// and an exact L bracket's leg on a generated target 22.05 px for 22.86: a pen drawn across
/// a pixel boundary darkens two pixels by half, and only one passes. Taken from every line
/// pixel's ink ([`super::NativeLines::ink`]), the leg measures 22.82 px, and the oracle's
/// exact sides and walls on test100 and the generated parts differ from the target's by
/// 0.33 px at most wherever 30 profiles or more agree (stop 58: 23.57 px for 23.24, 9.15 for
/// 8.86; one wall, 00129614's, found another line 14 px off, beyond the factor's bound):
/// 0.35 px keeps them, and the share only keeps a long side's rounding (at 3.5% a simulated
/// reader's leg 3% thin, 0.7 px, was left: 0.969; moved, 0.978). At half a pixel a relay
/// reader's plate read 1.0 mm thick for 0.81 (its sides 2.33 px in the model, 1.88 in the
/// target: 19%) was left at 0.811; moved, 0.990.
pub const MIN_CHANGE_PX: f64 = 0.35;
pub const MIN_CHANGE_SHARE: f64 = 0.01;
/// A thin side also moves for a smaller change that is a larger share of its width: the
/// oracle's exact sides under 15 px wide differed from the target's by 0.12 px at most
/// (14.16 px for 14.05), and by 1.7% of the width at most (4.70 for 4.78: 0.08 px), wherever
/// 30 profiles or more agree, on test100 and the generated parts. A simulated reader's plate
/// read 4.5% thin measured 8.12 px against 7.91 (2.6%, 0.21 px) and was left.
pub const THIN_CHANGE_PX: f64 = 0.12;
pub const THIN_CHANGE_SHARE: f64 = 0.018;
/// A depth measured across turned sides moves for a change of this share (and at least
/// [`THIN_CHANGE_PX`]): the oracle's exact discs, rings and bosses on test100 and the
/// generated parts measured within 1% there (42.50 px for 42.93), and a simulated reader's
/// disc read 3% thin measured 2.1% (0.966; moved, 0.996).
pub const CURVED_CHANGE_SHARE: f64 = 0.015;
/// The profiles' factors must agree: their median absolute deviation at most this.
const MAX_SPREAD: f64 = 0.15;
/// The factor stays within this either way (a plate read half as thick is a misreading, not a
/// measurement to trust further).
const MAX_FACTOR: f64 = 2.0;
/// How far (pixels) from where the model draws a side's line the target's may lie: a reader's
/// depth a few pixels off.
const SEEK_PX: f64 = 3.0;
/// The target's line on the sketch plane's side lies at most this far (pixels) from the
/// model's: the model's drawing is where the target's is, only its depth is in question (in
/// [`super::wall`], the outline's line by the model's edge: only the wall's inner side is).
pub(super) const ON_LINE_PX: f64 = 1.5;
/// A line is the one meant when the next nearest lies this much (pixels) farther away.
const ALONE_PX: f64 = 1.5;
/// Profiles stay this far (pixels) from a side's or a line's ends, where the corner's other
/// edges are (here and in [`super::wall`]).
pub(super) const END_MARGIN_PX: f64 = 3.0;

/// What the measurement found (the trace records it with the fit's report).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The depth that makes the sides as wide as the target draws them.
    pub depth: f64,
    /// The sides' median width in the model's picture and in the target (pixels).
    pub model_px: f64,
    pub target_px: f64,
    pub profiles: usize,
    /// The median absolute deviation of the profiles' factors.
    pub spread: f64,
    /// Measured across turned sides (circles' and arcs' copies), where the straight ones gave
    /// too few profiles.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub curved: bool,
}

impl Measured {
    /// The factor the measurement puts on the depth.
    pub fn factor(&self) -> f64 {
        self.target_px / self.model_px
    }

    /// Whether the depth should move: enough profiles, agreeing, and a change beyond what
    /// two renderers' lines differ by.
    pub fn worth_moving(&self) -> bool {
        self.profiles >= MIN_PROFILES
            && self.spread <= MAX_SPREAD
            && if self.curved {
                (self.target_px - self.model_px).abs() >= THIN_CHANGE_PX.max(CURVED_CHANGE_SHARE * self.model_px)
            } else {
                side_changes_enough(self.model_px, self.target_px)
            }
            && (1.0 / MAX_FACTOR..=MAX_FACTOR).contains(&self.factor())
    }

    /// The change [`Measured::worth_moving`] asks of these sides, in words.
    pub fn threshold(&self) -> String {
        if self.curved {
            format!("{THIN_CHANGE_PX} px and {:.1}% of the width (turned sides)", 100.0 * CURVED_CHANGE_SHARE)
        } else {
            format!(
                "{MIN_CHANGE_PX} px and {:.1}% of the width, or {THIN_CHANGE_PX} px and {:.1}%",
                100.0 * MIN_CHANGE_SHARE,
                100.0 * THIN_CHANGE_SHARE
            )
        }
    }
}

/// Measure the depth of `extrude` of `sketch` (as solved, on `frame`) against the target, where the model's picture is `ids` (through `camera`) and lies on the
/// target by `align`. `None`: no side of it at most [`MAX_SIDE_PX`] wide shows (or the extent
/// has no single depth).
pub fn measure(
    sketch: &Sketch,
    extrude: &Extrude,
    frame: &Frame,
    camera: &Camera,
    ids: &IdBuffers,
    align: Alignment,
    target: &TargetPixels,
) -> Option<Measured> {
    let seen = Seen { sketch, extrude, frame, camera, ids, align, target };
    let straight = measure_sides(&seen, false);
    // A pocket's turned side is not measured: its rim is where fillets and chamfers go, and
    // the oracle's exact recess under a fillet measured 22% wide there.
    if straight.is_some_and(|m| m.profiles >= MIN_PROFILES) || extrude.mode != Mode::Add {
        return straight;
    }
    measure_sides(&seen, true).or(straight)
}

/// What [`measure`] measures, and against what.
#[derive(Clone, Copy)]
struct Seen<'a> {
    sketch: &'a Sketch,
    extrude: &'a Extrude,
    frame: &'a Frame,
    camera: &'a Camera,
    ids: &'a IdBuffers,
    align: Alignment,
    target: &'a TargetPixels,
}

/// [`measure`] across the sides of the profile's lines, or with `curves`, of its circles and
/// arcs alone.
fn measure_sides(seen: &Seen<'_>, curves: bool) -> Option<Measured> {
    let Seen { sketch, extrude, frame, camera, ids, align, target } = *seen;
    // The two copies of the profile that bound the side: the sketch's and the far one (a
    // symmetric extent's are half a depth either way).
    let (depth, [near, far]) = copies(extrude)?;
    let normal = Vector3::from(frame.normal);
    let pixel = |uv: [f64; 2], along: f64| -> Option<[f64; 2]> {
        let p = Vector3::from(frame.to_global(uv[0], uv[1])) + normal * along;
        camera.project(&Point3::from(p)).map(|(x, y, _)| [x, y])
    };
    let drawn = |p: [f64; 2]| drawn_near(ids, p);
    let scale = Scale::of(target, align);
    let unit = scale.unit;
    let mut factors: Vec<f64> = Vec::new();
    let mut widths: Vec<(f64, f64)> = Vec::new();
    for primitive in &sketch.primitives {
        let Some(curve) = Curve::of(primitive).filter(|c| curves != matches!(c, Curve::Line { .. })) else { continue };
        // The curve's picture at the sketch's copy, about a pixel per step.
        let Some(rough) = curve.image_length(|uv| pixel(uv, near)) else { continue };
        // (Written so that a length that is not a number is skipped too.)
        if !(2.0 * END_MARGIN_PX + 1.0..=MAX_CURVE_PX).contains(&rough) {
            continue;
        }
        let steps = rough.ceil() as usize;
        let ends = if curve.closed() { 0.0 } else { END_MARGIN_PX / rough };
        // A circle's last step is its first.
        let last = if curve.closed() { steps - 1 } else { steps };
        for i in 0..=last {
            let s = i as f64 / steps as f64;
            if s < ends || s > 1.0 - ends {
                continue;
            }
            // The side's direction on the picture there (a line's, or a circle's tangent):
            // across it, the two copies of the curve are two parallel lines.
            let h = 0.5 / steps as f64;
            let (Some(p0), Some(p1), Some(ahead), Some(behind)) = (
                pixel(curve.at(s), near),
                pixel(curve.at(s), far),
                pixel(curve.at(s + h), near),
                pixel(curve.at(s - h), near),
            ) else {
                continue;
            };
            let along = [ahead[0] - behind[0], ahead[1] - behind[1]];
            let length = along[0].hypot(along[1]);
            if length < 1e-9 {
                continue;
            }
            let u = [-along[1] / length, along[0] / length];
            let v = [p1[0] - p0[0], p1[1] - p0[1]];
            // The side's width across its lines, signed along u: for a line, where its far
            // copy crosses the profile; a curved copy bends away from its point `p1`, and
            // crosses the profile where its picture does (measured so, the oracle's exact
            // discs came out 1.3% thick).
            let width = match curve {
                Curve::Line { .. } => v[0] * u[0] + v[1] * u[1],
                _ => {
                    let reach = (v[0].hypot(v[1]).ceil() as i64 + 2).min(steps as i64);
                    let along_copy = |k: i64| {
                        let at = s + k as f64 / steps as f64;
                        if curve.closed() { at } else { at.clamp(0.0, 1.0) }
                    };
                    let far_copy: Option<Vec<[f64; 2]>> =
                        (-reach..=reach).map(|k| pixel(curve.at(along_copy(k)), far)).collect();
                    let Some(width) = far_copy.and_then(|c| crossing(p0, u, &c, v[0] * u[0] + v[1] * u[1])) else {
                        continue;
                    };
                    width
                }
            };
            // Where the far copy is checked for being drawn: a line's own point (as before
            // curves were measured), a curve's crossing.
            let p1 = match curve {
                Curve::Line { .. } => p1,
                _ => [p0[0] + width * u[0], p0[1] + width * u[1]],
            };
            let width_units = width * unit;
            if width_units.abs() < DISTINCT_PX || width.abs() > MAX_SIDE_PX {
                continue;
            }
            // A curve's copies are parallel across the side only where the side runs along
            // the extrusion: not where the picture looks along the curve.
            if !matches!(curve, Curve::Line { .. }) && width.abs() < MIN_ACROSS * v[0].hypot(v[1]) {
                continue;
            }
            if !drawn(p0) || !drawn(p1) {
                continue;
            }
            // The target's lines across the side, and the one nearest each of the model's two:
            // within reach, with no other nearly as near (a thin bar's other side, a window's
            // edge), and not the same one. The sketch plane's line must be where the model
            // draws it (within [`ON_LINE_PX`]): elsewhere the model's drawing, not its depth,
            // is what is off.
            // How far to seek and how near the sketch plane's line must lie are a drawing's
            // error, in the model's pixels; telling two lines apart is the image's own.
            let (seek, on_line) = (SEEK_PX * unit, ON_LINE_PX * unit);
            let (lo, hi) = (width_units.min(0.0) - seek, width_units.max(0.0) + seek);
            let lines = scale.lines_across(target, align, p0, u, lo, hi);
            let nearest = |at: f64| nearest_alone(&lines, at, seek);
            let (Some(c0), Some(c1)) = (nearest(0.0), nearest(width_units)) else { continue };
            if c0.abs() > on_line || (c1 - c0).abs() < 1e-9 {
                continue;
            }
            let measured = (c1 - c0) * width.signum();
            if measured <= 0.0 {
                continue;
            }
            factors.push(measured / width_units.abs());
            widths.push((width.abs(), measured / unit));
        }
    }
    if factors.is_empty() {
        return None;
    }
    let factor = median(&mut factors.clone());
    let spread = median(&mut factors.iter().map(|f| (f - factor).abs()).collect::<Vec<_>>());
    let model_px = median(&mut widths.iter().map(|w| w.0).collect::<Vec<_>>());
    let profiles = factors.len();
    Some(Measured { depth: depth * factor, model_px, target_px: model_px * factor, profiles, spread, curved: curves })
}

/// An extrusion's single depth and where its profile's two copies lie along the sketch's
/// normal (the sketch's and the far one; a symmetric extent's are half a depth either way):
/// `None` for two depths, through all, or no depth.
pub(super) fn copies(extrude: &Extrude) -> Option<(f64, [f64; 2])> {
    let (depth, copies) = match extrude.extent {
        Extent::OneSide { depth } => (depth, [0.0, if extrude.reversed { -depth } else { depth }]),
        Extent::Symmetric { depth } => (depth, [-depth / 2.0, depth / 2.0]),
        Extent::TwoSides { .. } | Extent::ThroughAll { .. } => return None,
    };
    (depth > 0.0).then_some((depth, copies))
}

/// Where the line through `p0` along the unit `u` crosses the polyline `copy` (pixels along
/// `u`), the crossing nearest `about`.
fn crossing(p0: [f64; 2], u: [f64; 2], copy: &[[f64; 2]], about: f64) -> Option<f64> {
    let cross = |a: [f64; 2], b: [f64; 2]| a[0] * b[1] - a[1] * b[0];
    copy.windows(2)
        .filter_map(|w| {
            let (a, b) = (w[0], w[1]);
            let d = [b[0] - a[0], b[1] - a[1]];
            let denom = cross(u, d);
            if denom.abs() < 1e-12 {
                return None;
            }
            let ap = [a[0] - p0[0], a[1] - p0[1]];
            // p0 + t u = a + r d
            let (t, r) = (cross(ap, d) / denom, cross(ap, u) / denom);
            (0.0..=1.0).contains(&r).then_some(t)
        })
        .min_by(|x, y| (x - about).abs().total_cmp(&(y - about).abs()))
}

/// A curve longer than this on the picture (pixels) is not measured: ten pictures across.
const MAX_CURVE_PX: f64 = 10_000.0;

/// Where a curve's side is measured: the two copies of the curve cross the profile at least
/// this share of the way they lie apart (about 30 degrees off the line of sight along the
/// curve).
const MIN_ACROSS: f64 = 0.5;

/// A profile's curve whose copies bound an extrusion's side: a line (a flat side), or a circle
/// or arc (a turned side, where the picture draws the near copy and the far one's visible
/// part).
enum Curve {
    Line { start: [f64; 2], end: [f64; 2] },
    Arc { center: [f64; 2], radius: f64, from: f64, sweep: f64 },
    Circle { center: [f64; 2], radius: f64 },
}

impl Curve {
    fn of(primitive: &Primitive) -> Option<Curve> {
        match *primitive {
            Primitive::Line { start, end, construction: false } => Some(Curve::Line { start, end }),
            Primitive::Circle { center, radius, construction: false } => Some(Curve::Circle { center, radius }),
            Primitive::CenterArc { center, radius, start_angle, end_angle, construction: false } => {
                let sweep = (end_angle - start_angle).rem_euclid(360.0).to_radians();
                Some(Curve::Arc { center, radius, from: start_angle.to_radians(), sweep })
            }
            Primitive::Arc { start, mid, end, construction: false } => {
                let (center, radius) = freecad_bridge::geometry::circumcircle(start, mid, end)?;
                let (from, sweep) = freecad_bridge::geometry::arc_angles(start, mid, end, center);
                Some(Curve::Arc { center, radius, from, sweep })
            }
            _ => None,
        }
    }

    fn closed(&self) -> bool {
        matches!(self, Curve::Circle { .. })
    }

    /// The point at `s` (0 to 1) along it, in the sketch's coordinates.
    fn at(&self, s: f64) -> [f64; 2] {
        let on_circle = |c: [f64; 2], r: f64, a: f64| [c[0] + r * a.cos(), c[1] + r * a.sin()];
        match *self {
            Curve::Line { start, end } => [start[0] + s * (end[0] - start[0]), start[1] + s * (end[1] - start[1])],
            Curve::Arc { center, radius, from, sweep } => on_circle(center, radius, from + s * sweep),
            Curve::Circle { center, radius } => on_circle(center, radius, s * std::f64::consts::TAU),
        }
    }

    /// Its length on the picture (pixels), through `pixel`.
    fn image_length(&self, pixel: impl Fn([f64; 2]) -> Option<[f64; 2]>) -> Option<f64> {
        let n = if matches!(self, Curve::Line { .. }) { 1 } else { 64 };
        let points = (0..=n).map(|i| pixel(self.at(i as f64 / n as f64))).collect::<Option<Vec<_>>>()?;
        Some(points.windows(2).map(|w| (w[1][0] - w[0][0]).hypot(w[1][1] - w[0][1])).sum())
    }
}

/// Whether the model's picture `ids` draws an edge at `p` or a pixel around it.
pub(super) fn drawn_near(ids: &IdBuffers, p: [f64; 2]) -> bool {
    let (x, y) = (p[0].floor() as i64, p[1].floor() as i64);
    (-1..=1).any(|dy| (-1..=1).any(|dx| ids.edge_at(x + dx, y + dy) != NO_ENTITY))
}

/// Whether a width measured `target_px` against the model's `model_px` differs by more than
/// two renderers' lines do: [`MIN_CHANGE_PX`] and [`MIN_CHANGE_SHARE`] of the width.
pub(super) fn changes_enough(model_px: f64, target_px: f64) -> bool {
    (target_px - model_px).abs() >= MIN_CHANGE_PX.max(MIN_CHANGE_SHARE * model_px)
}

/// Whether an extrusion's sides measured `target_px` against the model's `model_px` differ
/// enough to move its depth: [`changes_enough`], or a thin side's [`THIN_CHANGE_PX`] and
/// [`THIN_CHANGE_SHARE`]. Not a wall's ([`super::wall`]): its inner line is measured from the
/// outline's, and the oracle's exact square tube's walls measured 6.21 px for 6.02 (3.2%).
fn side_changes_enough(model_px: f64, target_px: f64) -> bool {
    let change = (target_px - model_px).abs();
    changes_enough(model_px, target_px) || change >= THIN_CHANGE_PX.max(THIN_CHANGE_SHARE * model_px)
}

/// The target's lines crossed going from `p0` (the model's picture) along the unit `u`,
/// from `lo` to `hi` pixels: runs of line pixels, each by its centre (pixels along `u`),
/// sampled bilinearly every quarter pixel.
fn lines_across(target: &TargetPixels, align: Alignment, p0: [f64; 2], u: [f64; 2], lo: f64, hi: f64) -> Vec<f64> {
    let size = target.size as usize;
    let line = |x: f64, y: f64| -> f64 {
        let (x, y) = align.on_target(x, y);
        super::bilinear(x, y, |i, j| {
            let inside = i >= 0 && j >= 0 && (i as usize) < size && (j as usize) < size;
            f64::from(u8::from(inside && target.line_distance[j as usize * size + i as usize] == 0.0))
        })
    };
    runs_across(line, p0, u, lo, hi)
}

/// Where a side or a wall is measured: in the target's own image, by each line's ink, when
/// the target has one (the framing resamples it, and two lines a pixel apart there are one
/// line in the framing of a larger image), else in the framed picture. `unit`: the measuring
/// pixels per pixel of the model's picture.
pub(super) struct Scale<'a> {
    native: Option<&'a NativeLines>,
    pub unit: f64,
}

impl<'a> Scale<'a> {
    pub fn of(target: &'a TargetPixels, align: Alignment) -> Scale<'a> {
        let native = target.native.as_ref();
        Scale { native, unit: native.map_or(1.0, |n| n.per_framed * align.scale) }
    }

    /// The target's lines crossed from `p0` (the model's picture) along the unit `u`, from
    /// `lo` to `hi` measuring pixels, by their centres in measuring pixels.
    pub fn lines_across(
        &self,
        target: &TargetPixels,
        align: Alignment,
        p0: [f64; 2],
        u: [f64; 2],
        lo: f64,
        hi: f64,
    ) -> Vec<f64> {
        match self.native {
            Some(native) => native_lines_across(native, align, p0, u, lo, hi),
            None => lines_across(target, align, p0, u, lo, hi),
        }
    }
}

/// As [`lines_across`], on the target's own image: from `p0` (the model's picture) along the
/// unit `u`, from `lo` to `hi` of the image's pixels, each pixel on a line or not (its lines
/// are a pixel wide and a pixel apart: blending neighbours would join them).
fn native_lines_across(
    native: &NativeLines,
    align: Alignment,
    p0: [f64; 2],
    u: [f64; 2],
    lo: f64,
    hi: f64,
) -> Vec<f64> {
    let (x, y) = align.on_target(p0[0], p0[1]);
    let (x, y) = native.at(x, y);
    runs_across(|x, y| native.ink_at(x, y), [x, y], u, lo, hi)
}

/// The lines of a picture (`line`: how much of a line is at a point, 0 to 1) crossed going
/// from `p0` along the unit `u`, from `lo` to `hi` pixels, each by its centre.
pub(super) fn runs_across(line: impl Fn(f64, f64) -> f64, p0: [f64; 2], u: [f64; 2], lo: f64, hi: f64) -> Vec<f64> {
    let mut lines: Vec<f64> = Vec::new();
    let (mut mass, mut moment) = (0.0, 0.0);
    let mut r = lo;
    while r <= hi + 1e-9 {
        let m = line(p0[0] + r * u[0], p0[1] + r * u[1]);
        if m >= 0.25 {
            mass += m;
            moment += m * r;
        } else if mass > 0.0 {
            lines.push(moment / mass);
            (mass, moment) = (0.0, 0.0);
        }
        r += 0.25;
    }
    if mass > 0.0 {
        lines.push(moment / mass);
    }
    lines
}

/// The line of `lines` nearest `at`, when it is within `reach` and the next nearest lies
/// [`ALONE_PX`] farther: the one meant, not one of two alike.
pub(super) fn nearest_alone(lines: &[f64], at: f64, reach: f64) -> Option<f64> {
    let mut by: Vec<(f64, f64)> = lines.iter().map(|&c| ((c - at).abs(), c)).collect();
    by.sort_by(|a, b| a.0.total_cmp(&b.0));
    let &(d, c) = by.first()?;
    let alone = by.get(1).is_none_or(|&(d2, _)| d2 - d >= ALONE_PX);
    (d <= reach && alone).then_some(c)
}

pub(super) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::NativeLines;
    use crate::fit::sketch::tests::{
        SIZE, TRUE, box_edges, camera, drawn_box, ids_of, pad, rectangle, segments_at, still, xy,
    };

    /// A 40 x 30 plate on XY, `drawn` mm thick, measured against a target drawn `actual` thick
    /// (the test camera: about 4.9 px for 2 mm).
    fn measured(drawn: f64, actual: f64) -> Measured {
        let lines = drawn_box(TRUE, actual);
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let ids = ids_of(&drawn_box(TRUE, drawn));
        measure(&rectangle("S1", TRUE), &pad(drawn), &xy(), &camera(), &ids, still(), &target).expect("sides show")
    }

    #[test]
    fn a_plate_read_thin_is_measured_to_the_targets_thickness() {
        // A reader's 1.6 mm for a 2 mm plate: the sides are a pixel narrower than the target's.
        let m = measured(1.6, 2.0);
        assert!(m.worth_moving(), "{m:?}");
        assert!((m.depth - 2.0).abs() < 0.1, "{m:?}");
        assert!(m.target_px > m.model_px + 0.5, "{m:?}");
        // And read thick.
        let m = measured(2.6, 2.0);
        assert!(m.worth_moving() && (m.depth - 2.0).abs() < 0.1, "{m:?}");
    }

    #[test]
    fn an_exact_plate_is_left_alone() {
        let m = measured(2.0, 2.0);
        assert!(!m.worth_moving(), "{m:?}");
        assert!((m.depth - 2.0).abs() < 0.1, "{m:?}");
    }

    /// A 40 x 30 plate `drawn` mm thick against a target drawn `actual` thick, whose image has
    /// `per_framed` pixels per pixel of the framing (the fit's pictures: 3 px per mm).
    fn measured_on_image(drawn: f64, actual: f64, per_framed: u32) -> Option<Measured> {
        let lines = drawn_box(TRUE, actual);
        let size = SIZE * per_framed;
        let image = segments_at(&box_edges(TRUE, actual), size);
        let native = NativeLines::centred(SIZE, per_framed, image.iter().map(|&on| f32::from(u8::from(on))).collect());
        let target = TargetPixels::new(SIZE, lines.clone(), &lines).with_native(native);
        let ids = ids_of(&drawn_box(TRUE, drawn));
        measure(&rectangle("S1", TRUE), &pad(drawn), &xy(), &camera(), &ids, still(), &target)
    }

    #[test]
    fn a_plate_thinner_than_the_framing_resolves_is_measured_on_the_targets_image() {
        // 0.6 mm is about 1.3 px in the framing: its two lines are one there. A reader read
        // 1.1 mm (as a relay reader read 1.0 for 0.545); the target's image at 3x draws the
        // side about 4 px across.
        let framed_only = measure_framed(1.1, 0.6);
        assert!(framed_only.is_none_or(|m| !m.worth_moving()), "{framed_only:?}");
        let m = measured_on_image(1.1, 0.6, 3).expect("the sides show");
        assert!(m.worth_moving(), "{m:?}");
        assert!((m.depth - 0.6).abs() < 0.08, "{m:?}");
        // An exact plate is left alone there too.
        let m = measured_on_image(0.6, 0.6, 3).expect("the sides show");
        assert!(!m.worth_moving(), "{m:?}");
        // An image no finer than the framing shows the side no better: nothing moves.
        assert!(measured_on_image(1.1, 0.6, 1).is_none_or(|m| !m.worth_moving()));
    }

    fn measure_framed(drawn: f64, actual: f64) -> Option<Measured> {
        let lines = drawn_box(TRUE, actual);
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let ids = ids_of(&drawn_box(TRUE, drawn));
        measure(&rectangle("S1", TRUE), &pad(drawn), &xy(), &camera(), &ids, still(), &target)
    }

    #[test]
    fn a_thin_side_moves_for_a_share_of_its_width_that_two_renderers_do_not_differ_by() {
        let sides = |model_px: f64, target_px: f64| Measured {
            depth: 1.0,
            model_px,
            target_px,
            profiles: 200,
            spread: 0.02,
            curved: false,
        };
        // A simulated reader's plate read 4.5% thin: its sides 2.6% narrower, 0.21 px.
        assert!(sides(7.91, 8.12).worth_moving());
        // The oracle's exact sides against test100's renderer: 1.7% but 0.08 px, 0.12 px but
        // 0.8%, and a wider side's 0.28 px (1.5%).
        assert!(!sides(4.78, 4.70).worth_moving());
        assert!(!sides(14.05, 14.16).worth_moving());
        assert!(!sides(18.12, 18.40).worth_moving());
        // Walls keep the wider rule: the oracle's exact square tube's measured 3.2% wide.
        assert!(!changes_enough(6.02, 6.21));
    }

    #[test]
    fn a_tall_blocks_depth_a_pixel_or_two_short_is_measured() {
        // Sides about 90 px across their lines: the line fit aligns the picture by whole
        // pixels there and leaves a depth 1 mm short (2.5 px, 2.7%) as it is.
        let lines = drawn_box(TRUE, 37.0);
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        let ids = ids_of(&drawn_box(TRUE, 36.0));
        let m = measure(&rectangle("S1", TRUE), &pad(36.0), &xy(), &camera(), &ids, still(), &target)
            .expect("the sides show");
        assert!(m.model_px > 40.0 && m.model_px <= MAX_SIDE_PX, "{m:?}");
        assert!(m.worth_moving() && (m.depth - 37.0).abs() < 0.3, "{m:?}");
    }
}
