//! A round boss's or rod's radius, measured across its outline.
//!
//! Seen along no axis of its own, a cylinder's outline is two straight lines with the
//! picture of its axis halfway between them, and in a parallel view they lie two radii apart
//! whatever the direction: the radius is a width on the picture, as a plate's thickness is
//! ([`super::thickness`]). The line fit cannot size it to better than a pixel: our renderer
//! draws no line along a turned surface's outline, so the fit sees the ends' circles alone
//! (the far one half hidden), and the picture lines up on the target by whole pixels. A
//! simulated reader's rod, its radius 1.9% large (0.8 px on each side), was left so on
//! three test100 parts (0.962 each).
//!
//! Renderers need not draw a line there either (test100's targets do not): the outline is
//! where the part meets the paper. Across it, every pixel along the side where both outline
//! lines run against the paper in the model's picture gives one profile; on the target's own
//! image, each side's edge is where the brightness is halfway between the paper's and the
//! part's just inside (anti-aliasing puts it there to a tenth of a pixel). The median of the
//! distances between the two edges, against the model's two radii on the picture, gives the
//! radius's factor.

use freecad_bridge::command::{Extrude, Mode, Primitive, Sketch};
use freecad_bridge::state::Frame;
use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};
use views::{Camera, IdBuffers, Projection};

use super::thickness::{END_MARGIN_PX, MIN_PROFILES, Scale, copies, median};
use super::{Alignment, NativeLines, TargetPixels};

/// How far (pixels of the model's picture) from the model's outline the target's line may
/// lie: a reader's radius a few pixels off.
const SEEK_PX: f64 = 3.0;
/// A side seen this near end-on is not measured: its outline lines are short, and the end's
/// circle runs along them (the sine of the angle between the axis and the line of sight).
const MIN_SIDEWAYS: f64 = 0.5;
/// Where the model's picture is checked for paper outside the outline and material inside
/// (pixels out from the outline line).
const BESIDE_PX: f64 = 2.0;
/// The profiles' factors must agree: their median absolute deviation at most this (the
/// oracle's and the simulated reader's rods and bosses on test100: 0.005 at most).
const MAX_SPREAD: f64 = 0.02;
/// A radius moves only when the outline lines are this much farther apart or nearer (pixels,
/// the median) and by this share of their distance. Against the oracle's exact rods, discs
/// and bosses on test100, the target's outline measured 0.0% to 0.8% narrower than the
/// model's (0.3% on the median, in proportion to the width: the picture's scale lines up on
/// the target in steps of 0.2%); the simulated reader's rod read 1.9% wide measured 1.87%,
/// and its boss read 2% short 1.99%.
pub const MIN_CHANGE_PX: f64 = 0.3;
pub const MIN_CHANGE_SHARE: f64 = 0.01;
/// The factor stays within this either way: a radius read twice too large is a misreading,
/// not a measurement to trust.
const MAX_FACTOR: f64 = 1.25;

/// What the measurement found for one circle of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The circle's index in the sketch's primitives.
    pub primitive: usize,
    /// The radius that puts the outline lines as far apart as the target draws them.
    pub radius: f64,
    /// The outline lines' distance in the model's picture and their median in the target
    /// (pixels of the model's picture).
    pub model_px: f64,
    pub target_px: f64,
    pub profiles: usize,
    /// The median absolute deviation of the profiles' factors.
    pub spread: f64,
}

impl Measured {
    pub fn factor(&self) -> f64 {
        self.target_px / self.model_px
    }

    /// Enough profiles, agreeing, and a change beyond what two renderers' lines differ by.
    pub fn worth_moving(&self) -> bool {
        let change = (self.target_px - self.model_px).abs();
        self.profiles >= MIN_PROFILES
            && self.spread <= MAX_SPREAD
            && change >= MIN_CHANGE_PX.max(MIN_CHANGE_SHARE * self.model_px)
            && (1.0 / MAX_FACTOR..=MAX_FACTOR).contains(&self.factor())
    }

    /// Why it does not move, in words.
    pub fn why_not(&self) -> String {
        format!(
            "circle {}'s outline measures {:.2} px across in the target against {:.2} px in the model over {} \
             profiles (spread {:.3}): a radius moves for a change of {MIN_CHANGE_PX} px and {:.1}% that at least \
             {MIN_PROFILES} profiles agree on",
            self.primitive,
            self.target_px,
            self.model_px,
            self.profiles,
            self.spread,
            100.0 * MIN_CHANGE_SHARE
        )
    }
}

/// Measure the radius of each circle of `sketch` (as solved, on `frame`) that `extrude` adds
/// as a round side whose outline shows against the paper, where the model's picture is `ids`
/// (through `camera`, a parallel view) and lies on the target by `align`.
pub fn measure(
    sketch: &Sketch,
    extrude: &Extrude,
    frame: &Frame,
    camera: &Camera,
    ids: &IdBuffers,
    align: Alignment,
    target: &TargetPixels,
) -> Vec<Measured> {
    let Projection::Orthographic { .. } = camera.projection else { return Vec::new() };
    if extrude.mode != Mode::Add {
        return Vec::new();
    }
    let Some((_, [near, far])) = copies(extrude) else { return Vec::new() };
    let normal = Vector3::from(frame.normal);
    let sideways = normal.cross(&Vector3::from(camera.forward));
    if sideways.norm() < MIN_SIDEWAYS {
        return Vec::new();
    }
    let across = sideways.normalize();
    let project = |p: Vector3<f64>| camera.project(&Point3::from(p)).map(|(x, y, _)| [x, y]);
    let Some(native) = target.native.as_ref().filter(|n| !n.luma.is_empty()) else { return Vec::new() };
    let unit = Scale::of(target, align).unit;
    let covered = |p: [f64; 2]| {
        let (x, y) = (p[0].floor() as i64, p[1].floor() as i64);
        x >= 0
            && y >= 0
            && (x as u32) < ids.width
            && (y as u32) < ids.height
            && ids.covered[y as usize * ids.width as usize + x as usize]
    };
    let mut found = Vec::new();
    for (k, primitive) in sketch.primitives.iter().enumerate() {
        let Primitive::Circle { center, radius, construction: false } = *primitive else { continue };
        let centre = Vector3::from(frame.to_global(center[0], center[1]));
        let outline = |t: f64, side: f64| project(centre + normal * t + across * (side * radius));
        let (Some(a), Some(b)) = (outline(near, 0.0), outline(far, 0.0)) else { continue };
        let length = (b[0] - a[0]).hypot(b[1] - a[1]);
        if !(2.0 * END_MARGIN_PX + 1.0..=10_000.0).contains(&length) {
            continue;
        }
        // Across the side, the outline lines lie two radii apart on the picture everywhere
        // along it (a parallel view): `width` pixels along `u`.
        let (Some(low), Some(high)) = (outline(near, -1.0), outline(near, 1.0)) else { continue };
        let v = [high[0] - low[0], high[1] - low[1]];
        let width = v[0].hypot(v[1]);
        if width < 1.0 {
            continue;
        }
        let u = [v[0] / width, v[1] / width];
        let steps = length.ceil() as usize;
        let mut factors = Vec::new();
        for i in 0..=steps {
            let along = i as f64 / steps as f64 * length;
            if along < END_MARGIN_PX || along > length - END_MARGIN_PX {
                continue;
            }
            let t = near + (far - near) * i as f64 / steps as f64;
            let Some(low) = outline(t, -1.0) else { continue };
            let high = [low[0] + v[0], low[1] + v[1]];
            let at = |p: [f64; 2], out: f64| [p[0] + out * u[0], p[1] + out * u[1]];
            // Both outline lines against the paper, the material between them.
            let against_paper = !covered(at(low, -BESIDE_PX))
                && covered(at(low, BESIDE_PX))
                && covered(at(high, -BESIDE_PX))
                && !covered(at(high, BESIDE_PX));
            if !against_paper {
                continue;
            }
            let width_units = width * unit;
            let (Some(in_low), Some(in_high)) =
                (edge_inward(native, align, low, u, unit), edge_inward(native, align, high, [-u[0], -u[1]], unit))
            else {
                continue;
            };
            let measured = width_units - in_low - in_high;
            if measured <= 0.0 {
                continue;
            }
            factors.push(measured / width_units);
        }
        if factors.is_empty() {
            continue;
        }
        let factor = median(&mut factors.clone());
        let spread = median(&mut factors.iter().map(|f| (f - factor).abs()).collect::<Vec<_>>());
        found.push(Measured {
            primitive: k,
            radius: radius * factor,
            model_px: width,
            target_px: width * factor,
            profiles: factors.len(),
            spread,
        });
    }
    found
}

/// Luma this far (0 to 255) under the paper's is the part, not the paper's grain.
const OFF_PAPER: f64 = 16.0;
/// The part must stand this far (luma) from the paper where its outline is measured: a face
/// lit nearly as bright as the paper leaves its outline to the anti-aliasing's rounding.
const MIN_CONTRAST: f64 = 40.0;

/// Where the target's part meets the paper near the model's outline point `p` (the model's
/// picture), going `inward` (a unit vector, into the material): measuring pixels inward of
/// `p` (negative: outward), where the image's brightness is halfway between the paper's and
/// the part's just inside. `None` where no such edge lies within [`SEEK_PX`], the paper is
/// not plain outside it, or a drawn line lies across the profile.
fn edge_inward(native: &NativeLines, align: Alignment, p: [f64; 2], inward: [f64; 2], unit: f64) -> Option<f64> {
    let (x, y) = align.on_target(p[0], p[1]);
    let (x, y) = native.at(x, y);
    let seek = SEEK_PX * unit;
    let at = |r: f64| native.luma_at(x + r * inward[0], y + r * inward[1]);
    const STEP: f64 = 0.25;
    let samples: Vec<(f64, f64)> = (0..)
        .map(|i| -seek - BESIDE_PX * unit + STEP * f64::from(i))
        .take_while(|&r| r <= seek + BESIDE_PX * unit)
        .map(|r| at(r).map(|g| (r, g)))
        .collect::<Option<_>>()?;
    let lined = samples.iter().any(|&(r, _)| native.ink_at(x + r * inward[0], y + r * inward[1]) >= 0.5);
    let paper = native.paper;
    if lined || (samples.first()?.1 - paper).abs() > OFF_PAPER {
        return None;
    }
    let leaves = samples.iter().position(|&(_, g)| g < paper - OFF_PAPER)?;
    let part = at(samples[leaves].0 + 1.5 * unit.max(1.0))?;
    if paper - part < MIN_CONTRAST {
        return None;
    }
    let half = (paper + part) / 2.0;
    let k = samples.iter().position(|&(_, g)| g <= half)?;
    let ((r0, g0), (r1, g1)) = (samples[k.checked_sub(1)?], samples[k]);
    let r = r0 + (g0 - half) / (g0 - g1) * (r1 - r0);
    (r.abs() <= seek).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::sketch::tests::{SIZE, camera, pad, still, xy};
    use freecad_bridge::command::Sketch;
    use views::NO_ENTITY;

    const LENGTH: f64 = 30.0;

    fn rod(radius: f64) -> Sketch {
        let circle = Primitive::Circle { center: [0.0, 0.0], radius, construction: false };
        Sketch {
            name: "S1".into(),
            on: "XY".into(),
            primitives: vec![circle],
            constraints: Vec::new(),
            auto_coincident: true,
        }
    }

    /// How much of a point of the framed picture (pixels) the side of a rod of `radius` on XY,
    /// [`LENGTH`] long, covers, for a pixel `per` framed pixels wide: from its distance to
    /// the picture of the rod's axis (the ends' caps left out: the measurement keeps away
    /// from them).
    fn side_cover(radius: f64, x: f64, y: f64, per: f64) -> f64 {
        let cam = camera();
        let project = |z: f64| cam.project(&Point3::new(0.0, 0.0, z)).map(|(x, y, _)| [x, y]).expect("in view");
        let (a, b) = (project(0.0), project(LENGTH));
        let d = [b[0] - a[0], b[1] - a[1]];
        let length = d[0].hypot(d[1]);
        let along = ((x - a[0]) * d[0] + (y - a[1]) * d[1]) / length;
        if !(0.0..=length).contains(&along) {
            return 0.0;
        }
        let off = ((x - a[0]) * d[1] - (y - a[1]) * d[0]).abs() / length;
        let half = radius * crate::fit::sketch::pixels_per_unit(&cam);
        ((half - off) / per + 0.5).clamp(0.0, 1.0)
    }

    /// A rod drawn with radius `drawn` measured against a target image `per` times finer than
    /// the framing, of a rod of radius `actual`: grey (luma 100) on white paper, anti-aliased.
    fn measured(drawn: f64, actual: f64, per: u32) -> Vec<Measured> {
        measured_as(drawn, actual, per, Mode::Add)
    }

    /// As [`measured`], the rod's drawing extruded as `mode`.
    fn measured_as(drawn: f64, actual: f64, per: u32, mode: Mode) -> Vec<Measured> {
        let size = SIZE * per;
        let framed = |i: u32| (f64::from(i) + 0.5) / f64::from(per);
        let luma: Vec<f32> = (0..size * size)
            .map(|i| (255.0 - 155.0 * side_cover(actual, framed(i % size), framed(i / size), f64::from(per))) as f32)
            .collect();
        let native = NativeLines { luma, ..NativeLines::centred(SIZE, per, vec![0.0; (size * size) as usize]) };
        let n = (SIZE * SIZE) as usize;
        let covered: Vec<bool> = (0..SIZE * SIZE)
            .map(|i| side_cover(drawn, f64::from(i % SIZE) + 0.5, f64::from(i / SIZE) + 0.5, 1.0) >= 0.5)
            .collect();
        let ids = IdBuffers {
            width: SIZE,
            height: SIZE,
            face: covered.iter().map(|&c| if c { 0 } else { NO_ENTITY }).collect(),
            edge: vec![NO_ENTITY; n],
            covered: covered.clone(),
            seam: vec![false; n],
        };
        let target = TargetPixels::new(SIZE, covered, &vec![false; n]).with_native(native);
        let extrude = Extrude { mode, ..pad(LENGTH) };
        measure(&rod(drawn), &extrude, &xy(), &camera(), &ids, still(), &target)
    }

    #[test]
    fn a_rods_radius_read_large_is_measured_across_its_outline() {
        // A reader's 10.3 mm for a 10 mm rod (3% wide: about 1.2 px across at this framing).
        for per in [1, 2] {
            let found = measured(10.3, 10.0, per);
            let m = found.first().expect("the rod's outline shows");
            assert!(m.worth_moving(), "{m:?}");
            assert!((m.radius - 10.0).abs() < 0.05, "{m:?}");
            assert!(m.target_px < m.model_px - 0.5, "{m:?}");
        }
        // And read small.
        let m = measured(9.7, 10.0, 1)[0];
        assert!(m.worth_moving() && (m.radius - 10.0).abs() < 0.05, "{m:?}");
    }

    #[test]
    fn an_exact_rod_is_left_alone() {
        for per in [1, 2] {
            let m = measured(10.0, 10.0, per)[0];
            assert!(m.profiles >= MIN_PROFILES, "{m:?}");
            assert!(!m.worth_moving(), "{m:?}");
            assert!((m.radius - 10.0).abs() < 0.05, "{m:?}");
        }
    }

    #[test]
    fn a_cut_and_a_target_without_its_image_are_not_measured() {
        // A cut's circle is a hole: its side shows no outline against the paper.
        assert_eq!(measured_as(10.3, 10.0, 1, Mode::Add).len(), 1);
        assert!(measured_as(10.3, 10.0, 1, Mode::Cut).is_empty());
        // No image kept: no outline to measure.
        let lines = vec![false; (SIZE * SIZE) as usize];
        let ids = IdBuffers {
            width: SIZE,
            height: SIZE,
            face: vec![NO_ENTITY; lines.len()],
            edge: vec![NO_ENTITY; lines.len()],
            covered: lines.clone(),
            seam: lines.clone(),
        };
        let target = TargetPixels::new(SIZE, lines.clone(), &lines);
        assert!(measure(&rod(10.3), &pad(LENGTH), &xy(), &camera(), &ids, still(), &target).is_empty());
    }
}
