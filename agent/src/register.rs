//! Image registration (Reg) and the sphere S_t.
//!
//! The target image is one picture of the part: its foreground (pixels unlike the
//! background) gives where the part is and how big it looks. S_t is the target part's
//! bounding sphere carried into model space: its radius is fixed by the configuration (one
//! image gives no absolute size), and its centre is refitted after every accepted step, so
//! that the current model, seen through the registered camera, lies where the target shows
//! the part. Renders framed on S_t then line up with the target pixel for pixel, and the
//! target is shown to the model at each view's framing ([`Target::framed`]): its circle
//! where the view draws S_t, so both are at one scale.

use image::RgbImage;
use nalgebra::Vector3;
use serde::{Deserialize, Serialize};
use views::{Options, Scene, TARGET_FILL};

use crate::vlm::Sphere;

/// Size of the silhouettes compared when refitting S_t.
const FIT_SIZE: u32 = 200;

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("{path}: no part found in the image: {reason}")]
    NoPart { path: String, reason: String },
}

/// The target image and where the part is in it.
#[derive(Debug, Clone)]
pub struct Target {
    pub image: RgbImage,
    /// The colour of the image's border: what lies around the part.
    pub background: [u8; 3],
    mask: Vec<bool>,
    /// Centre of the part's circumscribed circle, pixels.
    pub center_px: [f64; 2],
    /// Its radius, pixels.
    pub radius_px: f64,
}

/// The outcome of one registration, for the trace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub sphere: Sphere,
    /// Silhouette IoU between the current model and the target after the fit.
    pub overlap: f64,
    /// The shift found, in pixels of the comparison image.
    pub shift_px: [i64; 2],
}

/// A pixel's brightness (0-255), as the eye weighs its colours.
fn luma(p: &image::Rgb<u8>) -> f64 {
    0.299 * f64::from(p.0[0]) + 0.587 * f64::from(p.0[1]) + 0.114 * f64::from(p.0[2])
}

/// Darker than this (0-255) is a drawn line of the target: black edges stay under it after
/// resampling, the darkest shaded faces of test100's renders (about 100) stay above.
const LINE_LUMA: f64 = 75.0;

impl Target {
    /// Find the part: pixels that differ from the border's colour.
    pub fn analyse(image: RgbImage, path: &str) -> Result<Target, RegisterError> {
        let (w, h) = image.dimensions();
        if w < 16 || h < 16 {
            return Err(RegisterError::NoPart {
                path: path.into(),
                reason: format!("the image is only {w}x{h} pixels"),
            });
        }
        let mut border: Vec<[u8; 3]> = Vec::new();
        for x in 0..w {
            border.push(image.get_pixel(x, 0).0);
            border.push(image.get_pixel(x, h - 1).0);
        }
        for y in 0..h {
            border.push(image.get_pixel(0, y).0);
            border.push(image.get_pixel(w - 1, y).0);
        }
        let background: [u8; 3] = std::array::from_fn(|c| {
            let mut v: Vec<u8> = border.iter().map(|p| p[c]).collect();
            v.sort_unstable();
            v[v.len() / 2]
        });
        let mask: Vec<bool> =
            image.pixels().map(|p| (0..3).any(|c| (i32::from(p.0[c]) - i32::from(background[c])).abs() > 24)).collect();
        let count = mask.iter().filter(|m| **m).count();
        let fraction = count as f64 / mask.len() as f64;
        if fraction < 0.002 {
            return Err(RegisterError::NoPart {
                path: path.into(),
                reason: "nothing stands out from the background".into(),
            });
        }
        if fraction > 0.95 {
            return Err(RegisterError::NoPart {
                path: path.into(),
                reason: "the foreground fills the whole image; expected a part on a plain background".into(),
            });
        }
        let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
        for (i, _) in mask.iter().enumerate().filter(|(_, m)| **m) {
            let (x, y) = ((i as u32 % w) as f64, (i as u32 / w) as f64);
            lo = [lo[0].min(x), lo[1].min(y)];
            hi = [hi[0].max(x + 1.0), hi[1].max(y + 1.0)];
        }
        let center_px = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0];
        let mut radius_px: f64 = 1.0;
        for (i, _) in mask.iter().enumerate().filter(|(_, m)| **m) {
            let (x, y) = ((i as u32 % w) as f64 + 0.5, (i as u32 / w) as f64 + 0.5);
            radius_px = radius_px.max((x - center_px[0]).hypot(y - center_px[1]));
        }
        Ok(Target { image, background, mask, center_px, radius_px })
    }

    /// The target as a square view of `size` pixels framed on S_t with `fill` shows it: the
    /// circle around the part centred, its diameter `fill` of the side, the rest of the
    /// square the target's background. Views drawn with the same fill show the model at the
    /// same scale, so the two can be compared pixel for pixel.
    pub fn framed(&self, size: u32, fill: f64) -> RgbImage {
        let radius = f64::from(size) * fill / 2.0;
        let k = radius / self.radius_px;
        let (w, h) = self.image.dimensions();
        let (sw, sh) = (((f64::from(w) * k).round() as u32).max(1), ((f64::from(h) * k).round() as u32).max(1));
        // Resampled once with a filter (a large target shrinks without losing thin edges),
        // then placed so the circle's centre lands on the square's.
        let scaled = image::imageops::resize(&self.image, sw, sh, image::imageops::FilterType::Triangle);
        let mut out = RgbImage::from_pixel(size, size, image::Rgb(self.background));
        let half = f64::from(size) / 2.0;
        let x = (half - self.center_px[0] * f64::from(sw) / f64::from(w)).round() as i64;
        let y = (half - self.center_px[1] * f64::from(sh) / f64::from(h)).round() as i64;
        image::imageops::replace(&mut out, &scaled, x, y);
        out
    }

    /// The target's silhouette at the framing of [`Self::framed`]: whether each pixel of the
    /// `size` square (row by row) shows the part.
    pub fn framed_mask(&self, size: u32, fill: f64) -> Vec<bool> {
        let k = f64::from(size) * fill / 2.0 / self.radius_px;
        let half = f64::from(size) / 2.0;
        (0..size * size)
            .map(|i| {
                let (x, y) = (f64::from(i % size) + 0.5, f64::from(i / size) + 0.5);
                self.is_part((x - half) / k + self.center_px[0], (y - half) / k + self.center_px[1])
            })
            .collect()
    }

    /// The target's drawn lines at the framing of [`Self::framed`]: its dark pixels on the
    /// part (the edges a CAD render draws black; faces are lighter grey), found in the image
    /// as given and carried into the framing: a framed pixel is on a line when any line pixel
    /// of the image falls in its footprint. (Thresholding the resampled picture instead lost
    /// a third of a shrunk target's 1-pixel lines, whose darkness the filter spreads.)
    pub fn framed_lines(&self, size: u32, fill: f64) -> Vec<bool> {
        let (w, h) = self.image.dimensions();
        let line = self.line_pixels();
        let k = f64::from(size) * fill / 2.0 / self.radius_px;
        let half = f64::from(size) / 2.0;
        // The image pixels whose centres fall in the framed pixel's footprint [a, a + 1/k);
        // at least the one under its centre when the image is magnified.
        let span = |framed: u32, centre: f64, limit: u32| -> std::ops::Range<u32> {
            let from = (f64::from(framed) - half) / k + centre;
            let to = (f64::from(framed) + 1.0 - half) / k + centre;
            let (lo, hi) = ((from - 0.5).ceil(), (to - 0.5).ceil());
            let (lo, hi) = if hi > lo {
                (lo, hi)
            } else {
                let under = ((from + to) / 2.0).floor();
                (under, under + 1.0)
            };
            let clamp = |v: f64| v.clamp(0.0, f64::from(limit)) as u32;
            clamp(lo)..clamp(hi)
        };
        let columns: Vec<std::ops::Range<u32>> = (0..size).map(|x| span(x, self.center_px[0], w)).collect();
        let mut out = vec![false; (size * size) as usize];
        for y in 0..size {
            let rows = span(y, self.center_px[1], h);
            for (x, cols) in columns.iter().enumerate() {
                out[(y * size) as usize + x] =
                    rows.clone().any(|sy| cols.clone().any(|sx| line[(sy * w + sx) as usize]));
            }
        }
        out
    }

    /// The image's own pixels on a drawn line (row by row): dark pixels on the part.
    pub fn line_pixels(&self) -> Vec<bool> {
        self.image.pixels().zip(&self.mask).map(|(p, on_part)| *on_part && luma(p) < LINE_LUMA).collect()
    }

    /// The image's lines at its own resolution, placed under the framing of [`Self::framed`].
    pub fn native_lines(&self, size: u32, fill: f64) -> crate::fit::NativeLines {
        let (width, height) = self.image.dimensions();
        crate::fit::NativeLines {
            width,
            height,
            ink: self.ink(&self.line_pixels()),
            luma: self.image.pixels().map(|p| luma(p) as f32).collect(),
            paper: luma(&image::Rgb(self.background)),
            per_framed: self.radius_px / (f64::from(size) * fill / 2.0),
            centre: self.center_px,
            framed_centre: f64::from(size) / 2.0,
        }
    }

    /// How much of each pixel (row by row) a drawn line covers, for the line pixels
    /// (`lines`) and the pixels beside them: one minus its brightness over the paper's, the
    /// brightest of its four neighbours that are on no line (a pixel half covered by a line
    /// drawn across its edge is half as bright as the face or background it lies on). Pixels
    /// farther from a line have none: a face's shading is no line.
    fn ink(&self, lines: &[bool]) -> Vec<f32> {
        let (w, h) = (self.image.width() as i64, self.image.height() as i64);
        let luma_at = |x: i64, y: i64| luma(self.image.get_pixel(x as u32, y as u32));
        let inside = |x: i64, y: i64| x >= 0 && y >= 0 && x < w && y < h;
        let on_line = |x: i64, y: i64| inside(x, y) && lines[(y * w + x) as usize];
        const SIDES: [(i64, i64); 4] = [(1, 0), (-1, 0), (0, 1), (0, -1)];
        (0..w * h)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                let near_line = on_line(x, y) || SIDES.iter().any(|&(dx, dy)| on_line(x + dx, y + dy));
                if !near_line {
                    return 0.0;
                }
                let paper = SIDES
                    .iter()
                    .map(|&(dx, dy)| (x + dx, y + dy))
                    .filter(|&(nx, ny)| inside(nx, ny) && !on_line(nx, ny))
                    .map(|(nx, ny)| luma_at(nx, ny))
                    .fold(f64::NEG_INFINITY, f64::max);
                // No paper beside it (inside a thick line, or beside black): whole or none.
                if paper <= 0.0 {
                    return if on_line(x, y) { 1.0 } else { 0.0 };
                }
                (1.0 - luma_at(x, y) / paper).clamp(0.0, 1.0) as f32
            })
            .collect()
    }

    fn is_part(&self, x: f64, y: f64) -> bool {
        let (w, h) = self.image.dimensions();
        if x < 0.0 || y < 0.0 || x >= f64::from(w) || y >= f64::from(h) {
            return false;
        }
        self.mask[(y as u32 * w + x as u32) as usize]
    }

    /// The target's silhouette resampled so that its circle fills `TARGET_FILL` of a
    /// `FIT_SIZE` square, centred: the frame a `views::target` render of S_t has.
    fn silhouette(&self) -> Vec<bool> {
        let n = FIT_SIZE as usize;
        let k = f64::from(FIT_SIZE) * TARGET_FILL / 2.0 / self.radius_px;
        let half = f64::from(FIT_SIZE) / 2.0;
        (0..n * n)
            .map(|i| {
                let (x, y) = ((i % n) as f64 + 0.5, (i / n) as f64 + 0.5);
                self.is_part(self.center_px[0] + (x - half) / k, self.center_px[1] + (y - half) / k)
            })
            .collect()
    }
}

/// Where S_t's centre came from before a refit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prior {
    /// A first guess (the origin, or the circle around the model's own outline): any shift
    /// the profiles propose may correct it.
    Guess,
    /// An earlier registration, which lined an earlier model up with the target: a jump
    /// away from it must earn it ([`placement`]).
    Registered,
}

/// Refit S_t's centre so the current model lines up with the target: the model is drawn
/// through S_t's camera and shifted, row and column profiles apart, to the offset that
/// overlaps the target's silhouette most. A model that reached past the frame was compared
/// in part, so the fit is repeated from where it moved S_t (a few rounds at most) until
/// it stays put.
pub fn refit(target: &Target, scene: &Scene, sphere: Sphere, direction: [f64; 3], prior: Prior) -> Fit {
    const ROUNDS: usize = 4;
    let mut fit = refit_once(target, scene, sphere, direction, prior);
    for _ in 1..ROUNDS {
        let next = refit_once(target, scene, fit.sphere, direction, prior);
        if next.shift_px == [0, 0] || next.overlap <= fit.overlap {
            break;
        }
        let shift_px = [fit.shift_px[0] + next.shift_px[0], fit.shift_px[1] + next.shift_px[1]];
        fit = Fit { shift_px, ..next };
    }
    fit
}

fn refit_once(target: &Target, scene: &Scene, sphere: Sphere, direction: [f64; 3], prior: Prior) -> Fit {
    let opts =
        Options { size: FIT_SIZE, direction, sphere: Some((sphere.center, sphere.radius)), ..Options::default() };
    let view = views::target(scene, &opts);
    let model: Vec<bool> = view.ids.face.iter().map(|f| *f != views::NO_ENTITY).collect();
    let goal = target.silhouette();
    let n = FIT_SIZE as usize;
    let (dx, dy) = placement(&model, &goal, n, prior);
    let o = Overlap::of(&model, &goal, n, (dx, dy));
    let union = o.model_in_frame + o.goal - o.common;
    let ppu = f64::from(FIT_SIZE) * TARGET_FILL / 2.0 / sphere.radius;
    let camera = &view.meta.camera;
    let center = Vector3::from(sphere.center) - Vector3::from(camera.right) * (dx as f64 / ppu)
        + Vector3::from(camera.up) * (dy as f64 / ppu);
    Fit {
        sphere: Sphere { center: center.into(), radius: sphere.radius },
        overlap: if union == 0 { 0.0 } else { o.common as f64 / union as f64 },
        shift_px: [dx, dy],
    }
}

/// A shift further than this (pixels of the `FIT_SIZE` comparison, either way) is a jump to
/// another place on the target, not a correction of where the model lies ...
const NEAR_PX: i64 = 6;
/// ... and a registered model that lies this share inside the target's silhouette where it
/// is has been placed there: it does not jump. Models corrected by such jumps (up to 19 px)
/// on test100, the oracle's and the simulated reader's, lay 0.74 to 0.87 inside; a relay
/// reader's top pair of four bars, 0.97 (test100 00773053).
const PLACED: f64 = 0.92;

/// Where the model's silhouette (`model`, `n` x `n`) goes on the target's (`goal`): the
/// shift that the row and column profiles, each matched on its own, propose, unless the model
/// already lies inside the target's silhouette at least as much where it is. A model of one
/// of a part's separate pieces was moved, its columns matched to one piece of the target and
/// its rows to another, to where it overlapped nothing (a relay reader's strip of two,
/// test100 00129614, 0.62 of it inside where it was), and the reader's next piece had to be
/// placed against a picture 57 px off.
///
/// From a registered S_t, a model that already lies [`PLACED`] inside the target's
/// silhouette does not jump further than [`NEAR_PX`] (from a first guess it may lie
/// anywhere). A part of like pieces shows a model of its first pieces in several places: a
/// relay reader's top pair of four bars (test100 00773053), 0.97 inside where the reader had
/// put it, lay 0.999 inside the target's bottom pair (the target's right bars stand a pixel
/// higher) and was moved 75 px onto it; the next sketch's grid moved with it, and three
/// readers in turn had to place the other bars against a picture that had jumped.
fn placement(model: &[bool], goal: &[bool], n: usize, prior: Prior) -> (i64, i64) {
    let (dx, dy) = profiles_shift(model, goal, n);
    let (here, there) = (share_inside(model, goal, n, (0, 0)), share_inside(model, goal, n, (dx, dy)));
    let jump = prior == Prior::Registered && dx.abs().max(dy.abs()) > NEAR_PX;
    tracing::debug!("registration: {here:.3} of the model inside where it is, {there:.3} at ({dx}, {dy})");
    if (dx, dy) == (0, 0) || here >= there || (jump && here >= PLACED) { (0, 0) } else { (dx, dy) }
}

/// The shift that the row and column profiles of the model's silhouette, each matched on its
/// own to the target's (both `n` x `n`), propose.
fn profiles_shift(model: &[bool], goal: &[bool], n: usize) -> (i64, i64) {
    let profile = |mask: &[bool], by_column: bool| views::profile(mask, n, n, by_column);
    let reach = (n / 2) as i64;
    let along = |by_column| views::best_shift(&profile(model, by_column), &profile(goal, by_column), reach);
    (along(true), along(false))
}

/// The share of the model's pixels on the target's silhouette, the model shifted so.
fn share_inside(model: &[bool], goal: &[bool], n: usize, shift: (i64, i64)) -> f64 {
    let o = Overlap::of(model, goal, n, shift);
    if o.model == 0 { 0.0 } else { o.common as f64 / o.model as f64 }
}

/// The model's silhouette shifted by a whole number of pixels against the target's (both
/// `n` x `n`, row by row), in pixel counts.
struct Overlap {
    /// The model's pixels, ...
    model: usize,
    /// ... those still in the frame once shifted, ...
    model_in_frame: usize,
    /// ... and those that land on the target's silhouette.
    common: usize,
    /// The target's pixels.
    goal: usize,
}

impl Overlap {
    fn of(model: &[bool], goal: &[bool], n: usize, (dx, dy): (i64, i64)) -> Overlap {
        let size = n as i64;
        let mut o = Overlap { model: 0, model_in_frame: 0, common: 0, goal: goal.iter().filter(|g| **g).count() };
        for y in 0..size {
            for x in 0..size {
                if !model[(y * size + x) as usize] {
                    continue;
                }
                o.model += 1;
                let (tx, ty) = (x + dx, y + dy);
                if (0..size).contains(&tx) && (0..size).contains(&ty) {
                    o.model_in_frame += 1;
                    o.common += usize::from(goal[(ty * size + tx) as usize]);
                }
            }
        }
        o
    }
}

/// Draw S_t's outline: a dashed circle of `radius_px` around `center_px`.
pub fn draw_sphere(image: &mut RgbImage, center_px: [f64; 2], radius_px: f64) {
    let steps = (radius_px * 2.0 * std::f64::consts::PI).ceil().max(16.0) as usize;
    let (w, h) = image.dimensions();
    for k in 0..steps {
        if (k / 6) % 2 == 1 {
            continue;
        }
        let a = k as f64 / steps as f64 * std::f64::consts::TAU;
        let (x, y) = (center_px[0] + radius_px * a.cos(), center_px[1] + radius_px * a.sin());
        if x >= 0.0 && y >= 0.0 && x < f64::from(w) && y < f64::from(h) {
            image.put_pixel(x as u32, y as u32, image::Rgb([70, 110, 190]));
        }
    }
}

/// Draw S_t's outline on an orthographic view of the model.
pub fn draw_sphere_on(view: &mut views::View, sphere: Sphere) {
    let camera = &view.meta.camera;
    if let (Some((x, y, _)), views::Projection::Orthographic { pixels_per_unit }) =
        (camera.project(&nalgebra::Point3::from(sphere.center)), camera.projection)
    {
        draw_sphere(&mut view.image, [x, y], sphere.radius * pixels_per_unit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A diagonal strip `width` px thick on an `n` x `n` picture, as test100 00129614 draws
    /// its pieces.
    fn strip(n: usize, from: (i64, i64), length: i64, width: i64) -> Vec<bool> {
        let mut mask = vec![false; n * n];
        for t in 0..length {
            for w in 0..width {
                let (x, y) = (from.0 + t, from.1 - t / 2 + w);
                mask[y as usize * n + x as usize] = true;
            }
        }
        mask
    }

    #[test]
    fn a_model_of_one_piece_lying_on_it_stays_and_a_whole_model_off_by_a_little_moves() {
        let n = 100;
        let (a, b) = (strip(n, (10, 45), 30, 3), strip(n, (30, 80), 50, 6));
        let goal: Vec<bool> = a.iter().zip(&b).map(|(p, q)| *p || *q).collect();
        // The short piece drawn a little thick, 0.6 of it on the target: the profiles, each
        // matched on its own, would move it (20, 26) px, between the two pieces.
        let model = strip(n, (10, 44), 30, 5);
        assert_eq!(profiles_shift(&model, &goal, n), (20, 26));
        assert_eq!(placement(&model, &goal, n, Prior::Registered), (0, 0));
        // The whole part drawn 3 px left and 2 px up goes onto the target.
        let off: Vec<bool> = (0..n * n)
            .map(|i| {
                let (x, y) = ((i % n) as i64 + 3, (i / n) as i64 + 2);
                x < n as i64 && y < n as i64 && goal[y as usize * n + x as usize]
            })
            .collect();
        assert_eq!(placement(&off, &goal, n, Prior::Registered), (3, 2));
    }

    /// A `w` x `h` block of pixels from (`x`, `y`) on an `n` x `n` picture.
    fn block(n: usize, (x, y): (usize, usize), (w, h): (usize, usize)) -> Vec<bool> {
        (0..n * n).map(|i| (x..x + w).contains(&(i % n)) && (y..y + h).contains(&(i / n))).collect()
    }

    #[test]
    fn a_registered_piece_lying_on_the_target_does_not_jump_to_a_like_one() {
        // Two like pieces, the lower one a little longer, as a part of several bars shows
        // them.
        let n = 200;
        let (upper, lower) = (block(n, (10, 20), (40, 16)), block(n, (10, 110), (44, 16)));
        let goal: Vec<bool> = upper.iter().zip(&lower).map(|(p, q)| *p || *q).collect();
        let proposed = |model: &[bool]| profiles_shift(model, &goal, n);
        let inside = |model: &[bool], shift| share_inside(model, &goal, n, shift);
        // The upper piece read a pixel long: 0.98 of it on the target where it is, all of it
        // on the lower piece, where the profiles send it. Registered, it stays; from a first
        // guess, where it lies is no reason to keep it there.
        let placed = block(n, (10, 20), (41, 16));
        assert_eq!(proposed(&placed), (0, 90));
        assert!(inside(&placed, (0, 0)) > PLACED && inside(&placed, (0, 90)) > inside(&placed, (0, 0)));
        assert_eq!(placement(&placed, &goal, n, Prior::Registered), (0, 0));
        assert_eq!(placement(&placed, &goal, n, Prior::Guess), (0, 90));
        // Read 2 px long and 2 px thick it lies 0.85 inside: not placed, and it goes where
        // more of it is inside, as earlier models lying so far off did.
        let loose = block(n, (10, 20), (42, 18));
        let to = proposed(&loose);
        assert!(inside(&loose, (0, 0)) < PLACED && inside(&loose, to) > inside(&loose, (0, 0)), "{to:?}");
        assert_eq!(placement(&loose, &goal, n, Prior::Registered), to);
        // The lower piece drawn 30 px above it, on none of the target: it goes there.
        let off = block(n, (10, 80), (44, 16));
        assert_eq!(placement(&off, &goal, n, Prior::Registered), (0, 30));
    }

    #[test]
    fn a_blank_image_has_no_part_and_a_disc_is_found() {
        let blank = RgbImage::from_pixel(100, 100, image::Rgb([255, 255, 255]));
        let err = Target::analyse(blank, "blank.png").expect_err("nothing there");
        assert!(err.to_string().contains("blank.png"), "{err}");
        let mut disc = RgbImage::from_pixel(100, 100, image::Rgb([255, 255, 255]));
        for y in 0..100u32 {
            for x in 0..100u32 {
                if (f64::from(x) + 0.5 - 60.0).hypot(f64::from(y) + 0.5 - 40.0) < 20.0 {
                    disc.put_pixel(x, y, image::Rgb([140, 140, 138]));
                }
            }
        }
        let t = Target::analyse(disc, "disc.png").expect("a part");
        assert!((t.center_px[0] - 60.0).abs() < 1.0 && (t.center_px[1] - 40.0).abs() < 1.0);
        assert!((t.radius_px - 20.0).abs() < 1.5, "{}", t.radius_px);
    }

    /// A grey square with 1-pixel black outlines and a diagonal, `side` pixels wide.
    fn outlined_square(size: u32, side: u32) -> RgbImage {
        let (lo, hi) = ((size - side) / 2, (size + side) / 2);
        RgbImage::from_fn(size, size, |x, y| {
            let inside = (lo..hi).contains(&x) && (lo..hi).contains(&y);
            let edge = inside && (x == lo || x == hi - 1 || y == lo || y == hi - 1 || x == y);
            image::Rgb(if edge {
                [0, 0, 0]
            } else if inside {
                [170, 170, 170]
            } else {
                [255, 255, 255]
            })
        })
    }

    /// Every row and column a line crosses in the image: none may be lost in the framing.
    fn rows_and_columns_with_lines(lines: &[bool], size: u32) -> (usize, usize) {
        let n = size as usize;
        let rows = (0..n).filter(|y| (0..n).any(|x| lines[y * n + x])).count();
        let cols = (0..n).filter(|x| (0..n).any(|y| lines[y * n + x])).count();
        (rows, cols)
    }

    #[test]
    fn thin_lines_survive_the_framing_shrunk_or_magnified() {
        for (size, side) in [(900, 700), (300, 150)] {
            let target = Target::analyse(outlined_square(size, side), "square.png").expect("a part");
            let lines = target.framed_lines(500, views::TAGGED_FILL);
            let k = 500.0 * views::TAGGED_FILL / 2.0 / target.radius_px;
            let span = (f64::from(side) * k).floor() as usize;
            let (rows, cols) = rows_and_columns_with_lines(&lines, 500);
            assert!(rows >= span && cols >= span, "{side} px at {k:.2}: {rows} rows, {cols} columns, {span} expected");
            // The outline's four sides: the framed square's border rows are lines from end to end.
            let n = 500usize;
            let first = (0..n).find(|y| (0..n).any(|x| lines[y * n + x])).expect("a line");
            let across = (0..n).filter(|x| lines[first * n + x]).count();
            assert!(across + 2 >= span, "the top side: {across} of {span} pixels");
            // Faces are not lines: the line pixels are a thin share of the square.
            let share = lines.iter().filter(|l| **l).count() as f64 / (span * span) as f64;
            assert!(share < 0.05, "{share}");
        }
    }

    #[test]
    fn a_line_drawn_across_a_pixel_edge_is_found_where_it_is_drawn() {
        // A grey face from x = 40 on white. Its outline, a pen a pixel wide along x = 40,
        // darkens pixel 39 (white) and pixel 40 (grey) by half: only pixel 40 is darker than
        // the line threshold. An inner line fills column 60 (centre 60.5).
        let image = RgbImage::from_fn(100, 100, |x, y| {
            let luma = match (x, (20..80).contains(&y)) {
                (_, false) | (0..39, _) => 255,
                (39, _) => 128,
                (40, _) => 70,
                (60, _) => 0,
                (_, true) if x < 80 => 141,
                _ => 255,
            };
            image::Rgb([luma; 3])
        });
        let target = Target::analyse(image, "face.png").expect("a part");
        let native = target.native_lines(500, views::TAGGED_FILL);
        let centre = |from: u32, to: u32| {
            let row = 50 * 100;
            let ink: Vec<(f64, f64)> =
                (from..to).map(|x| (f64::from(x) + 0.5, f64::from(native.ink[row + x as usize]))).collect();
            ink.iter().map(|(x, m)| x * m).sum::<f64>() / ink.iter().map(|(_, m)| m).sum::<f64>()
        };
        assert!((centre(35, 45) - 40.0).abs() < 0.05, "{}", centre(35, 45));
        assert!((centre(55, 65) - 60.5).abs() < 0.05, "{}", centre(55, 65));
        // The face's own grey and the background carry no ink.
        assert_eq!(native.ink[50 * 100 + 50], 0.0);
        assert_eq!(native.ink[50 * 100 + 10], 0.0);
    }

    #[test]
    fn an_off_centre_target_on_a_wide_grey_canvas_is_framed_with_its_circle_centred() {
        let grey = image::Rgb([200, 200, 200]);
        let mut wide = RgbImage::from_pixel(900, 400, grey);
        for y in 0..400u32 {
            for x in 0..900u32 {
                if (f64::from(x) + 0.5 - 700.0).hypot(f64::from(y) + 0.5 - 120.0) < 60.0 {
                    wide.put_pixel(x, y, image::Rgb([120, 120, 118]));
                }
            }
        }
        let target = Target::analyse(wide, "wide.png").expect("a part");
        assert_eq!(target.background, [200, 200, 200]);
        let framed = target.framed(500, views::PREVIEW_FILL);
        assert_eq!(framed.dimensions(), (500, 500));
        assert_eq!(framed.get_pixel(2, 2), &grey, "the background fills the square");
        let again = Target::analyse(framed, "framed.png").expect("the part is still there");
        let expected = 500.0 * views::PREVIEW_FILL / 2.0;
        assert!((again.radius_px / expected - 1.0).abs() < 0.02, "{} vs {expected}", again.radius_px);
        assert!(
            (again.center_px[0] - 250.0).abs() < 2.0 && (again.center_px[1] - 250.0).abs() < 2.0,
            "{:?}",
            again.center_px
        );
    }
}
