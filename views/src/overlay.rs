//! Overlays of a candidate on the target at one framing: the two silhouettes (where a size
//! or a position is off shows as a coloured band), and the two pictures' lines (what an
//! outline cannot show: a wall's inner side, features on a face). Stage 3 shows both, and
//! registration lines pictures up with the same profiles.

use image::{Rgb, RgbImage};
use serde::{Deserialize, Serialize};

use crate::draw;
use crate::raster::IdBuffers;
use crate::scene::NO_ENTITY;

/// How two silhouettes of one framing agree, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Overlap {
    pub both: usize,
    /// The target shows the part, the candidate does not.
    pub target_only: usize,
    /// The candidate shows the part, the target does not.
    pub candidate_only: usize,
    /// How far the candidate was shifted (pixels, x right, y down) to line up with the target.
    pub shift_px: [i64; 2],
    /// How much further the target's silhouette reaches than the (shifted) candidate's, in
    /// pixels, on the left, right, top and bottom (negative: the candidate reaches further).
    pub reach_px: [i64; 4],
}

/// A larger alignment shift (pixels, either axis) may be no misplacement's measure: a
/// part-built model (half a bar, one disc of two) slides along the target's silhouette, and
/// relay readers saw shifts of 27 to 59 px, and IoU 0.33, where the next registration moved
/// S_t about 2 mm (one nearly rejected a disc in the right place).
const LARGE_SHIFT_PX: i64 = 12;

impl Overlap {
    pub fn iou(&self) -> f64 {
        self.both as f64 / (self.both + self.target_only + self.candidate_only).max(1) as f64
    }

    /// One sentence for a prompt; `px_per_mm` turns the outlines' differences into mm.
    pub fn describe(&self, px_per_mm: f64) -> String {
        let target = (self.both + self.target_only).max(1) as f64;
        // A pixel either way is the rasterisers' noise, not a misplacement.
        let shifted = if self.shift_px.iter().all(|d| d.abs() <= 1) {
            String::new()
        } else if self.shift_px.iter().all(|d| d.abs() <= LARGE_SHIFT_PX) {
            format!(
                " (the candidate shifted by {} px right and {} px down to line up, as registration will after the \
                 step)",
                self.shift_px[0], self.shift_px[1]
            )
        } else {
            format!(
                " (the candidate shifted by {} px right and {} px down, where it overlaps the target's silhouette \
                 most; where the candidate is only part of what the target shows, a shift this large says little \
                 about where it sits: judge that from Image 1)",
                self.shift_px[0], self.shift_px[1]
            )
        };
        format!(
            "the silhouettes overlap with IoU {:.3}{shifted}; {:.1}% of the target's silhouette is missing from \
             the candidate (red) and the candidate shows {:.1}% of the target's area outside it (blue)",
            self.iou(),
            100.0 * self.target_only as f64 / target,
            100.0 * self.candidate_only as f64 / target
        ) + &self.reach_text(px_per_mm)
    }

    /// The outlines' extremes side by side, as signed offsets, target minus candidate:
    /// `; outline offsets at the extremes, target minus candidate (+: the target reaches
    /// further that way), in the picture's plane: left +6 px (+1.8 mm), right 0 px, up -3 px
    /// (-0.9 mm), down 0 px`. Relay readers asked for numbers per side rather than words.
    fn reach_text(&self, px_per_mm: f64) -> String {
        if self.reach_px.iter().all(|d| d.abs() <= 1) {
            return "; the outlines' extremes agree within 1 px on every side".into();
        }
        let sides = ["left", "right", "up", "down"];
        let parts: Vec<String> = self
            .reach_px
            .iter()
            .zip(sides)
            .map(|(&d, side)| {
                if d == 0 {
                    format!("{side} 0 px")
                } else {
                    format!("{side} {d:+} px ({:+.1} mm)", d as f64 / px_per_mm.max(1e-9))
                }
            })
            .collect();
        format!(
            "; outline offsets at the extremes, target minus candidate (+: the target reaches further that way), in \
             the picture's plane: {}",
            parts.join(", ")
        )
    }
}

pub const OVERLAP_BOTH: Rgb<u8> = Rgb([185, 185, 185]);
pub const OVERLAP_TARGET_ONLY: Rgb<u8> = Rgb([215, 55, 55]);
pub const OVERLAP_CANDIDATE_ONLY: Rgb<u8> = Rgb([50, 90, 215]);

/// The candidate's silhouette (what `ids` shows) over the target's (`target`, one flag per
/// pixel of the same framing), the candidate first shifted to line up with the target as
/// registration will after the step (where that overlaps the target more than the candidate
/// as drawn): grey where both show the part, red where only the target does, blue where only
/// the candidate does.
pub fn silhouette_overlap(ids: &IdBuffers, target: &[bool]) -> (RgbImage, Overlap) {
    let (w, h) = (ids.width as usize, ids.height as usize);
    let candidate = silhouette(ids);
    let target: Vec<bool> = (0..w * h).map(|i| target.get(i).copied().unwrap_or(false)).collect();
    // Lined up as registration will, unless that overlaps the target no more than the
    // candidate where it is drawn: a relay reader's bar, drawn where the target has it,
    // shown 59 px off (overlapping nothing) beside a longer one, looked misplaced.
    let shifted = alignment(&candidate, &target, w, h);
    let shift = if covered_both(&candidate, &target, w, h, shifted) > covered_both(&candidate, &target, w, h, [0, 0]) {
        shifted
    } else {
        [0, 0]
    };
    let mut image = RgbImage::from_pixel(ids.width, ids.height, Rgb([255, 255, 255]));
    let mut overlap = Overlap { shift_px: shift, ..Overlap::default() };
    for y in 0..h {
        for x in 0..w {
            let (sx, sy) = (x as i64 - shift[0], y as i64 - shift[1]);
            let in_candidate = sx >= 0
                && sy >= 0
                && (sx as usize) < w
                && (sy as usize) < h
                && candidate[sy as usize * w + sx as usize];
            let color = match (in_candidate, target[y * w + x]) {
                (true, true) => {
                    overlap.both += 1;
                    OVERLAP_BOTH
                }
                (false, true) => {
                    overlap.target_only += 1;
                    OVERLAP_TARGET_ONLY
                }
                (true, false) => {
                    overlap.candidate_only += 1;
                    OVERLAP_CANDIDATE_ONLY
                }
                (false, false) => continue,
            };
            image.put_pixel(x as u32, y as u32, color);
        }
    }
    if let (Some(t), Some(c)) = (extent(&target, w), extent(&candidate, w)) {
        let (t, c) = (t.map(|v| v as i64), c.map(|v| v as i64));
        let c = [c[0] + shift[0], c[1] + shift[0], c[2] + shift[1], c[3] + shift[1]];
        overlap.reach_px = [c[0] - t[0], t[1] - c[1], c[2] - t[2], t[3] - c[3]];
    }
    overlay_legend(&mut image, OVERLAP_BOTH, &[]);
    (image, overlap)
}

/// How many pixels both silhouettes (`w` x `h`) cover, the candidate shifted by `shift`.
fn covered_both(candidate: &[bool], target: &[bool], w: usize, h: usize, shift: [i64; 2]) -> usize {
    (0..w * h)
        .filter(|&i| {
            let (sx, sy) = ((i % w) as i64 - shift[0], (i / w) as i64 - shift[1]);
            target[i]
                && sx >= 0
                && sy >= 0
                && (sx as usize) < w
                && (sy as usize) < h
                && candidate[sy as usize * w + sx as usize]
        })
        .count()
}

/// Where a picture shows the model (a face or an edge), pixel by pixel.
pub fn silhouette(ids: &IdBuffers) -> Vec<bool> {
    ids.covered.iter().zip(&ids.edge).map(|(&c, &e)| c || e != NO_ENTITY).collect()
}

/// Where a silhouette (`width` pixels a row, row by row) reaches: its leftmost and rightmost
/// columns and its top and bottom rows, inclusive. `None` for an empty one.
pub fn extent(mask: &[bool], width: usize) -> Option<[usize; 4]> {
    let width = width.max(1);
    let mut reach: Option<[usize; 4]> = None;
    for (i, _) in mask.iter().enumerate().filter(|(_, m)| **m) {
        let (x, y) = (i % width, i / width);
        reach = Some(match reach {
            None => [x, x, y, y],
            Some([l, r, t, b]) => [l.min(x), r.max(x), t.min(y), b.max(y)],
        });
    }
    reach
}

/// The corners of a silhouette's outer outline, when it is a polygon, in pixels from the
/// top-left corner (the convention of [`extent`]: the centres of its border pixels), going
/// round it. The border (the largest one) is simplified within `tolerance_px`
/// (Douglas-Peucker); each corner is where the lines fitted to its two sides' pixels meet,
/// good to a fraction of a pixel; a side shorter than [`MIN_SIDE_PX`] between its corners is
/// dropped (a corner the target's renderer rounded). `None` when there is no silhouette, or
/// it is not a polygon: more than `max_corners` are needed, or the outline simplified within
/// twice the tolerance has another number of corners (a curve's "corners" are the
/// tolerance's own: a disc of 40 px needs 14 at 1.5 px and 8 at 3). Relay readers asked for
/// the target's corner pixels: read by eye, a plate's corners were a pixel or two off, which
/// is a millimetre.
pub fn outline_corners(mask: &[bool], width: usize, tolerance_px: f64, max_corners: usize) -> Option<Vec<[f64; 2]>> {
    let border = outer_borders(mask, width).into_iter().max_by_key(Vec::len)?;
    corners_of(&border, tolerance_px, max_corners)
}

/// One separate piece of a silhouette: its extent (as [`extent`]'s) and, when its outline is
/// a polygon, its corners (as [`outline_corners`]'s).
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub extent: [usize; 4],
    pub corners: Option<Vec<[f64; 2]>>,
}

/// A piece whose border is shorter than this (pixels), or than [`MIN_PIECE_SHARE`] of the
/// largest piece's, is a speck, not a piece of the part.
pub const MIN_PIECE_BORDER_PX: usize = 24;
pub const MIN_PIECE_SHARE: f64 = 0.05;

/// Every separate piece of a silhouette, the largest (by its border's length) first. A part
/// of several bodies apart shows several: a relay reader of two strips side by side was
/// given the long one's corners and none of the short one's, and read it by eye.
pub fn silhouette_pieces(mask: &[bool], width: usize, tolerance_px: f64, max_corners: usize) -> Vec<Piece> {
    let mut borders = outer_borders(mask, width);
    borders.sort_by_key(|b| std::cmp::Reverse(b.len()));
    let largest = borders.first().map_or(0, Vec::len);
    borders
        .into_iter()
        .filter(|b| b.len() >= MIN_PIECE_BORDER_PX && b.len() as f64 >= MIN_PIECE_SHARE * largest as f64)
        .map(|border| {
            let reach = |k: usize| border.iter().map(move |p| p[k] as usize);
            let extent = [
                reach(0).min().unwrap_or(0),
                reach(0).max().unwrap_or(0),
                reach(1).min().unwrap_or(0),
                reach(1).max().unwrap_or(0),
            ];
            Piece { extent, corners: corners_of(&border, tolerance_px, max_corners) }
        })
        .collect()
}

/// The outer borders of a mask's pieces, as pixel centres going round each.
fn outer_borders(mask: &[bool], width: usize) -> Vec<Vec<[f64; 2]>> {
    use imageproc::contours::{BorderType, find_contours};
    let width = width.max(1);
    let height = mask.len() / width;
    let image = image::GrayImage::from_fn(width as u32, height as u32, |x, y| {
        image::Luma([if mask[y as usize * width + x as usize] { 255 } else { 0 }])
    });
    find_contours::<i32>(&image)
        .into_iter()
        .filter(|c| c.border_type == BorderType::Outer)
        .map(|c| c.points.iter().map(|p| [f64::from(p.x), f64::from(p.y)]).collect())
        .collect()
}

/// A border's corners when it is a polygon (see [`outline_corners`]).
fn corners_of(points: &[[f64; 2]], tolerance_px: f64, max_corners: usize) -> Option<Vec<[f64; 2]>> {
    let corners = polygon_corners(points, tolerance_px)?;
    let coarser = polygon_corners(points, 2.0 * tolerance_px)?;
    (corners.len() <= max_corners && coarser.len() == corners.len()).then_some(corners)
}

/// A side of an outline shorter than this (pixels) is a corner the target's renderer rounded
/// or a staircase of pixels, not a side.
pub const MIN_SIDE_PX: f64 = 6.0;

/// The corners of the closed outline `points` simplified within `tolerance`: see
/// [`outline_corners`]. `None` with fewer than three sides.
fn polygon_corners(points: &[[f64; 2]], tolerance: f64) -> Option<Vec<[f64; 2]>> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    // Close the outline at the point farthest from its first, then simplify both halves.
    let far = (1..n).max_by(|&a, &b| dist(points[0], points[a]).total_cmp(&dist(points[0], points[b])))?;
    let mut vertices = vec![0];
    simplify(points, 0, far, tolerance, &mut vertices);
    vertices.push(far);
    simplify(points, far, n, tolerance, &mut vertices);
    // The sides, as ranges of the outline's points, and the lines fitted to them.
    let mut sides: Vec<(usize, usize)> = (0..vertices.len())
        .map(|k| (vertices[k], vertices.get(k + 1).copied().unwrap_or(n)))
        .filter(|&(a, b)| b > a + 1)
        .collect();
    let mut lines: Vec<([f64; 2], [f64; 2])> = sides.iter().map(|&(a, b)| fit_line(points, a, b)).collect();
    // Two neighbouring sides within a few degrees of parallel are one side that the
    // simplification split where the renderer blunted the corner next to it: they become one
    // line, fitted to both. Then the shortest side between its corners goes while it is
    // shorter than MIN_SIDE_PX: the target's renderer rounds a corner over a few pixels, which
    // the simplification keeps.
    loop {
        if lines.len() < 3 {
            return None;
        }
        let m = lines.len();
        let corners: Vec<Option<[f64; 2]>> = (0..m).map(|k| intersect(lines[(k + m - 1) % m], lines[k])).collect();
        if let Some(k) = (0..m).find(|&k| corners[k].is_none()) {
            let before = (k + m - 1) % m;
            // The last side and the first meet across the outline's start: its index wraps.
            let end = if k == 0 { sides[k].1 + n } else { sides[k].1 };
            sides[before] = (sides[before].0, end);
            lines[before] = fit_line(points, sides[before].0, end);
            sides.remove(k);
            lines.remove(k);
            continue;
        }
        // Side k runs from corner k to corner k + 1.
        let length = |k: usize| match (corners[k], corners[(k + 1) % m]) {
            (Some(a), Some(b)) => dist(a, b),
            _ => 0.0,
        };
        let shortest = (0..m).min_by(|&a, &b| length(a).total_cmp(&length(b)))?;
        if length(shortest) >= MIN_SIDE_PX {
            return corners.into_iter().collect();
        }
        sides.remove(shortest);
        lines.remove(shortest);
    }
}

fn dist(a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

/// Douglas-Peucker between outline points `a` and `b` (`b` may be the outline's length,
/// standing for its first point): the vertices strictly between them, in order, as indices.
/// (`imageproc::geometry::approximate_polygon_dp` gives the points, not the index ranges the
/// sides' line fits need, and a thin outline's border passes some points twice.)
fn simplify(points: &[[f64; 2]], a: usize, b: usize, tolerance: f64, out: &mut Vec<usize>) {
    let (p, q) = (points[a], points[b % points.len()]);
    let length = dist(p, q).max(1e-9);
    let off = |r: [f64; 2]| ((q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])).abs() / length;
    let Some((k, d)) = (a + 1..b).map(|k| (k, off(points[k]))).max_by(|x, y| x.1.total_cmp(&y.1)) else { return };
    if d > tolerance {
        simplify(points, a, k, tolerance, out);
        out.push(k);
        simplify(points, k, b, tolerance, out);
    }
}

/// The line (a point and a unit direction) fitted by least squares to the outline's points
/// `a..=b`, leaving out a pixel's worth at each end where the corner's staircase bends.
fn fit_line(points: &[[f64; 2]], a: usize, b: usize) -> ([f64; 2], [f64; 2]) {
    let n = points.len();
    let span = b - a;
    let trim = if span > 6 { 2 } else { 0 };
    let chosen: Vec<[f64; 2]> = (a + trim..=b - trim).map(|k| points[k % n]).collect();
    let count = chosen.len() as f64;
    let mean = [chosen.iter().map(|p| p[0]).sum::<f64>() / count, chosen.iter().map(|p| p[1]).sum::<f64>() / count];
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for p in &chosen {
        let (dx, dy) = (p[0] - mean[0], p[1] - mean[1]);
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    // The principal direction of the points' spread.
    let angle = 0.5 * (2.0 * sxy).atan2(sxx - syy);
    (mean, [angle.cos(), angle.sin()])
}

/// Where two lines meet; `None` when they are within 5 degrees of parallel.
fn intersect((p, u): ([f64; 2], [f64; 2]), (q, v): ([f64; 2], [f64; 2])) -> Option<[f64; 2]> {
    let cross = u[0] * v[1] - u[1] * v[0];
    if cross.abs() < 5f64.to_radians().sin() {
        return None;
    }
    let t = ((q[0] - p[0]) * v[1] - (q[1] - p[1]) * v[0]) / cross;
    Some([p[0] + t * u[0], p[1] + t * u[1]])
}

/// The shift (pixels, x right, y down) that lines silhouette `candidate` up with `target`
/// (both `w` x `h`, row by row) as registration will after the step: the best overlap of
/// their column and row profiles, a quarter of the picture at most either way.
pub fn alignment(candidate: &[bool], target: &[bool], w: usize, h: usize) -> [i64; 2] {
    [
        best_shift(&profile(candidate, w, h, true), &profile(target, w, h, true), w as i64 / 4),
        best_shift(&profile(candidate, w, h, false), &profile(target, w, h, false), h as i64 / 4),
    ]
}

/// The legend of an overlay panel: where both agree (in `both`), target only, candidate only,
/// and any `more` entries.
fn overlay_legend(image: &mut RgbImage, both: Rgb<u8>, more: &[(&str, Rgb<u8>)]) {
    let legend = [("both", both), ("target only", OVERLAP_TARGET_ONLY), ("candidate only", OVERLAP_CANDIDATE_ONLY)];
    for (k, (name, color)) in legend.iter().chain(more).enumerate() {
        let y = 24.0 + 16.0 * k as f64;
        draw::filled_rect(image, &[8.0, y, 20.0, y + 12.0], *color);
        draw::text(image, 25.0, y - 1.0, 12.0, Rgb([40, 40, 40]), name);
    }
}

/// How the lines of two pictures of one framing agree: the target's drawn edges (its dark
/// pixels) against the candidate's visible edges, the candidate shifted as for the
/// silhouettes. Counts in pixels; a line pixel is matched when the other picture has one
/// within [`LINE_REACH`] pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LineOverlap {
    pub target_lines: usize,
    pub target_matched: usize,
    pub candidate_lines: usize,
    pub candidate_matched: usize,
    /// The target's line pixels along one of the candidate's seams, counted in neither
    /// share.
    #[serde(default)]
    pub target_on_seams: usize,
}

/// How far apart (pixels, either axis) two lines may be and still count as one.
pub const LINE_REACH: i64 = 2;

impl LineOverlap {
    /// One sentence for a prompt.
    pub fn describe(&self) -> String {
        let share = |m: usize, n: usize| 100.0 * m as f64 / n.max(1) as f64;
        format!(
            "{:.0}% of the target's lines lie within {LINE_REACH} px of the candidate's edges (the rest in red) and \
             {:.0}% of the candidate's edges within {LINE_REACH} px of the target's lines (the rest in blue)",
            share(self.target_matched, self.target_lines),
            share(self.candidate_matched, self.candidate_lines)
        ) + if self.target_on_seams > 0 {
            "; a line of the target's along a seam of the candidate's in light blue, not counted"
        } else {
            ""
        }
    }
}

pub const LINES_MATCHED: Rgb<u8> = Rgb([60, 60, 60]);
/// A target's line along one of the candidate's seams, which the candidate does not draw.
pub const LINES_ON_SEAM: Rgb<u8> = Rgb([150, 190, 235]);

/// The target's lines (`target_lines`, one flag per pixel of the candidate's framing) over
/// the candidate's visible edges (what `ids` shows), the candidate shifted by `shift` (as
/// [`silhouette_overlap`] found it): dark grey where they agree, red where only the target
/// has a line (an edge the candidate lacks or has elsewhere: a wall's inner side, a hole, a
/// slot), blue where only the candidate has one; the target's silhouette faint beneath.
/// Lines inside the outline show what a silhouette cannot: wall thickness, features on a face.
/// A target's line that the candidate's edges do not match but one of its seams does (a
/// renderer that draws where a cylinder's side closes on itself) is light blue and counted
/// in neither share: ours never draws seams, so it is no missing edge.
pub fn line_overlap(
    ids: &IdBuffers,
    target_lines: &[bool],
    target_silhouette: &[bool],
    shift: [i64; 2],
) -> (RgbImage, LineOverlap) {
    let (w, h) = (ids.width as usize, ids.height as usize);
    let at = |mask: &[bool], x: i64, y: i64| {
        x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h && mask[y as usize * w + x as usize]
    };
    // The candidate's edges and seams in the target's frame.
    let shifted = |of: &dyn Fn(usize) -> bool| -> Vec<bool> {
        (0..w * h)
            .map(|i| {
                let (x, y) = ((i % w) as i64 - shift[0], (i / w) as i64 - shift[1]);
                x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h && of(y as usize * w + x as usize)
            })
            .collect()
    };
    let candidate = shifted(&|i| ids.edge[i] != NO_ENTITY);
    let seams = shifted(&|i| ids.seam.get(i).copied().unwrap_or(false));
    let target: Vec<bool> = (0..w * h).map(|i| target_lines.get(i).copied().unwrap_or(false)).collect();
    let near = |mask: &[bool], x: i64, y: i64| {
        (-LINE_REACH..=LINE_REACH).any(|dy| (-LINE_REACH..=LINE_REACH).any(|dx| at(mask, x + dx, y + dy)))
    };
    let mut image = RgbImage::from_pixel(ids.width, ids.height, Rgb([255, 255, 255]));
    let mut counts = LineOverlap::default();
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            let (xi, yi) = (x as i64, y as i64);
            // The search for a candidate's edge near a target's line, once per pixel.
            let matched = target[i] && near(&candidate, xi, yi);
            let color = if target[i] && !matched && near(&seams, xi, yi) {
                counts.target_on_seams += 1;
                Some(LINES_ON_SEAM)
            } else if target[i] {
                counts.target_lines += 1;
                counts.target_matched += usize::from(matched);
                if candidate[i] {
                    counts.candidate_lines += 1;
                    counts.candidate_matched += 1;
                }
                Some(if matched { LINES_MATCHED } else { OVERLAP_TARGET_ONLY })
            } else if candidate[i] {
                counts.candidate_lines += 1;
                let matched = near(&target, xi, yi);
                counts.candidate_matched += usize::from(matched);
                Some(if matched { LINES_MATCHED } else { OVERLAP_CANDIDATE_ONLY })
            } else if target_silhouette.get(i).copied().unwrap_or(false) {
                Some(Rgb([236, 236, 236]))
            } else {
                None
            };
            if let Some(c) = color {
                image.put_pixel(x as u32, y as u32, c);
            }
        }
    }
    let seam_legend: &[(&str, Rgb<u8>)] =
        if counts.target_on_seams > 0 { &[("target, on a candidate's seam", LINES_ON_SEAM)] } else { &[] };
    overlay_legend(&mut image, LINES_MATCHED, seam_legend);
    (image, counts)
}

/// For every pixel of a `w` x `h` picture (row by row), how far away the nearest pixel of
/// `mask` is, in pixels (infinite where the mask is empty).
pub fn distance_to(mask: &[bool], w: u32, h: u32) -> Vec<f32> {
    let image = image::GrayImage::from_fn(w, h, |x, y| {
        image::Luma([u8::from(mask.get((y * w + x) as usize).copied().unwrap_or(false)) * 255])
    });
    imageproc::distance_transform::euclidean_squared_distance_transform(&image)
        .pixels()
        .map(|p| p.0[0].sqrt() as f32)
        .collect()
}

/// Directions of drawn lines told apart by [`oriented_distances`]: 180 degrees in this
/// many bins.
pub const ORIENTATION_BINS: usize = 8;

/// The bin of a direction on the picture (`dx`, `dy` in pixels, y down), for
/// [`oriented_distances`].
pub fn orientation_bin(dx: f64, dy: f64) -> usize {
    let angle = dy.atan2(dx).rem_euclid(std::f64::consts::PI);
    ((angle / std::f64::consts::PI * ORIENTATION_BINS as f64) as usize).min(ORIENTATION_BINS - 1)
}

/// [`distance_to`] the pixels of `lines` that run in each direction: one field per
/// [`orientation_bin`], each from the lines within a bin of it (so about +/- 34 degrees).
/// A line's direction is read from the structure tensor of the blurred line mask; where
/// lines meet or cross (no clear direction) a pixel counts in every bin. An edge scored
/// against its own direction's field is not pulled by a line that crosses it.
pub fn oriented_distances(lines: &[bool], w: u32, h: u32) -> Vec<Vec<f32>> {
    use image::{ImageBuffer, Luma};
    use imageproc::filter::gaussian_blur_f32;
    let (wu, hu) = (w as usize, h as usize);
    let mask: ImageBuffer<Luma<f32>, Vec<f32>> =
        ImageBuffer::from_fn(w, h, |x, y| Luma([f32::from(u8::from(lines[(y * w + x) as usize]))]));
    let blurred = gaussian_blur_f32(&mask, 1.0);
    let at = |x: usize, y: usize| blurred.get_pixel(x as u32, y as u32).0[0];
    let mut tensor = [(); 3].map(|_| ImageBuffer::<Luma<f32>, Vec<f32>>::new(w, h));
    for y in 1..hu.saturating_sub(1) {
        for x in 1..wu.saturating_sub(1) {
            let gx = (at(x + 1, y) - at(x - 1, y)) / 2.0;
            let gy = (at(x, y + 1) - at(x, y - 1)) / 2.0;
            tensor[0].put_pixel(x as u32, y as u32, Luma([gx * gx]));
            tensor[1].put_pixel(x as u32, y as u32, Luma([gx * gy]));
            tensor[2].put_pixel(x as u32, y as u32, Luma([gy * gy]));
        }
    }
    let [xx, xy, yy] = tensor.map(|t| gaussian_blur_f32(&t, 2.0));
    let mut masks = vec![vec![false; wu * hu]; ORIENTATION_BINS];
    for i in (0..wu * hu).filter(|&i| lines[i]) {
        let (x, y) = ((i % wu) as u32, (i / wu) as u32);
        let (a, b, c) = (xx.get_pixel(x, y).0[0], xy.get_pixel(x, y).0[0], yy.get_pixel(x, y).0[0]);
        let coherence = ((a - c).powi(2) + 4.0 * b * b).sqrt() / (a + c + 1e-9);
        if coherence < 0.5 {
            masks.iter_mut().for_each(|m| m[i] = true);
            continue;
        }
        // The gradient runs across the line: the line's direction is a right angle from it.
        let across = 0.5 * f64::from(2.0 * b).atan2(f64::from(a - c));
        let along = orientation_bin(-across.sin(), across.cos());
        for k in [along + ORIENTATION_BINS - 1, along, along + 1] {
            masks[k % ORIENTATION_BINS][i] = true;
        }
    }
    masks.iter().map(|m| distance_to(m, w, h)).collect()
}

/// Pixels of a mask (`w` x `h`, row by row) per column (or per row).
pub fn profile(mask: &[bool], w: usize, h: usize, by_column: bool) -> Vec<f64> {
    let mut p = vec![0.0; if by_column { w } else { h }];
    for (i, _) in mask.iter().enumerate().filter(|(_, m)| **m) {
        p[if by_column { i % w } else { i / w }] += 1.0;
    }
    p
}

/// The shift of profile `m` (at most `reach` either way) that overlaps profile `t` most, the
/// smallest of equals: registration's fit and the overlay's alignment.
pub fn best_shift(m: &[f64], t: &[f64], reach: i64) -> i64 {
    let n = m.len() as i64;
    let mut best = (f64::NEG_INFINITY, 0i64);
    for d in -reach..=reach {
        let score: f64 =
            (0..n).filter(|x| (0..n).contains(&(x - d))).map(|x| m[(x - d) as usize].min(t[x as usize])).sum();
        if score > best.0 + 1e-9 || ((score - best.0).abs() <= 1e-9 && d.abs() < best.1.abs()) {
            best = (score, d);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square(w: u32, x0: u32, y0: u32, side: u32) -> Vec<bool> {
        (0..w * w).map(|i| (x0..x0 + side).contains(&(i % w)) && (y0..y0 + side).contains(&(i / w))).collect()
    }

    /// Lines inside an outline: the candidate's edges (a square's outline) against the
    /// target's lines (the same outline 3 px right, where the shift puts the candidate, and
    /// an interior line the candidate lacks).
    #[test]
    fn an_outline_gives_its_corners_and_a_round_one_none() {
        // A hexagon as an isometric box shows it, with a smaller square apart from it.
        let w = 100usize;
        let hexagon = [[50.0, 10.0], [85.0, 30.0], [85.0, 70.0], [50.0, 90.0], [15.0, 70.0], [15.0, 30.0]];
        let inside = |x: f64, y: f64, poly: &[[f64; 2]]| {
            (0..poly.len()).all(|i| {
                let (a, b) = (poly[i], poly[(i + 1) % poly.len()]);
                (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0]) >= 0.0
            })
        };
        let mut mask: Vec<bool> = (0..w * w).map(|i| inside((i % w) as f64, (i / w) as f64, &hexagon)).collect();
        for y in 2..6 {
            for x in 2..6 {
                mask[y * w + x] = true;
            }
        }
        let corners = outline_corners(&mask, w, 1.5, 16).expect("corners");
        assert_eq!(corners.len(), 6, "{corners:?}");
        for c in &hexagon {
            let nearest = corners.iter().map(|p| (p[0] - c[0]).hypot(p[1] - c[1])).fold(f64::MAX, f64::min);
            assert!(nearest <= 1.5, "{c:?} not among {corners:?}");
        }
        // A disc needs many corners: none are listed.
        let disc: Vec<bool> =
            (0..w * w).map(|i| ((i % w) as f64 - 50.0).hypot((i / w) as f64 - 50.0) <= 40.0).collect();
        assert_eq!(outline_corners(&disc, w, 1.5, 16), None);
        assert_eq!(outline_corners(&vec![false; w * w], w, 1.5, 16), None);
    }

    #[test]
    fn every_separate_piece_of_a_silhouette_is_found_largest_first_and_specks_are_not() {
        let w = 100;
        let mut mask = vec![false; w * w];
        let mut fill = |x0: usize, x1: usize, y0: usize, y1: usize| {
            for y in y0..=y1 {
                for x in x0..=x1 {
                    mask[y * w + x] = true;
                }
            }
        };
        fill(10, 40, 10, 20); // the short strip, above
        fill(20, 90, 60, 75); // the long strip
        fill(5, 6, 90, 91); // a speck
        let pieces = silhouette_pieces(&mask, w, 1.5, 16);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!(pieces[0].extent, [20, 90, 60, 75]);
        assert_eq!(pieces[1].extent, [10, 40, 10, 20]);
        for piece in &pieces {
            let corners = piece.corners.as_ref().expect("a rectangle is a polygon");
            assert_eq!(corners.len(), 4, "{corners:?}");
            let [l, r, t, b] = piece.extent.map(|v| v as f64);
            for c in corners {
                let near = |a: f64, v: f64| (a - v).abs() <= 1.0;
                assert!((near(c[0], l) || near(c[0], r)) && (near(c[1], t) || near(c[1], b)), "{c:?} in {piece:?}");
            }
        }
        // The largest piece's corners are those outline_corners gives.
        assert_eq!(outline_corners(&mask, w, 1.5, 16), pieces[0].corners);
        assert!(silhouette_pieces(&vec![false; w * w], w, 1.5, 16).is_empty());
    }

    #[test]
    fn distances_count_pixels_to_the_nearest_marked_one() {
        let mut mask = vec![false; 25];
        mask[12] = true; // the centre of a 5 x 5 picture
        let d = distance_to(&mask, 5, 5);
        assert_eq!((d[12], d[13], d[7], d[0]), (0.0, 1.0, 1.0, 8f32.sqrt()));
        assert!(distance_to(&[false; 4], 2, 2)[0].is_infinite());
    }

    #[test]
    fn the_line_overlap_finds_a_line_the_candidate_lacks() {
        // Below the legend, which covers the top left corner.
        let w = 100u32;
        let outline = |x0: u32, i: u32| {
            let (x, y) = (i % w, i / w);
            (x0..x0 + 20).contains(&x) && (60..80).contains(&y) && (x == x0 || x == x0 + 19 || y == 60 || y == 79)
        };
        let mut edge = vec![NO_ENTITY; (w * w) as usize];
        for i in 0..w * w {
            if outline(40, i) {
                edge[i as usize] = 0;
            }
        }
        let blank = vec![NO_ENTITY; (w * w) as usize];
        let none = vec![false; (w * w) as usize];
        let ids = IdBuffers { width: w, height: w, face: blank, edge, covered: none.clone(), seam: none };
        let same: Vec<bool> = (0..w * w).map(|i| outline(43, i)).collect();
        let (_, agree) = line_overlap(&ids, &same, &same, [3, 0]);
        assert_eq!((agree.target_matched, agree.candidate_matched), (agree.target_lines, agree.candidate_lines));
        assert!(agree.describe().starts_with("100% of the target's lines"), "{}", agree.describe());
        // A wall's inner side: a vertical line at x = 48 the candidate does not draw.
        let inner: Vec<bool> =
            (0..w * w).map(|i| outline(43, i) || (i % w == 48 && (61..79).contains(&(i / w)))).collect();
        let (image, counts) = line_overlap(&ids, &inner, &same, [3, 0]);
        // 18 pixels long, of which the two at each end are within reach of the top and bottom.
        assert_eq!(counts.target_lines - counts.target_matched, 14, "{counts:?}");
        assert_eq!(*image.get_pixel(48, 70), OVERLAP_TARGET_ONLY);
        assert_eq!(counts.candidate_matched, counts.candidate_lines);
    }

    #[test]
    fn the_overlap_lines_the_candidate_up_first_and_counts_what_differs() {
        let w = 100;
        let covered = square(w, 30, 40, 20);
        let ids = IdBuffers {
            width: w,
            height: w,
            face: vec![NO_ENTITY; (w * w) as usize],
            edge: vec![NO_ENTITY; (w * w) as usize],
            covered,
            seam: vec![false; (w * w) as usize],
        };
        // The same square 5 px right and 3 px up: a registration shift, not a difference.
        let (_, same) = silhouette_overlap(&ids, &square(w, 35, 37, 20));
        assert_eq!((same.shift_px, same.both, same.iou()), ([5, -3], 400, 1.0));
        // A target 4 px taller: a band of red along one side.
        let taller: Vec<bool> =
            (0..w * w).map(|i| (30..50).contains(&(i % w)) && (36..60).contains(&(i / w))).collect();
        let (image, taller) = silhouette_overlap(&ids, &taller);
        assert_eq!(taller.candidate_only, 0);
        assert_eq!(taller.target_only, 80, "{taller:?}");
        assert!(image.pixels().filter(|p| **p == OVERLAP_TARGET_ONLY).count() >= 80);
        let text = taller.describe(2.0);
        assert!(text.contains("16.7% of the target's silhouette is missing"), "{text}");
        assert_eq!(taller.reach_px, [0, 0, 4, 0], "the target reaches 4 px further up");
        assert!(text.contains("left 0 px, right 0 px, up +4 px (+2.0 mm), down 0 px"), "{text}");
        assert!(same.describe(2.0).contains("agree within 1 px"), "{}", same.describe(2.0));
        assert!(same.describe(2.0).contains("shifted by 5 px right and -3 px down to line up, as registration will"));
        // A part-built model slid far along the target: the shift is said to mean little.
        let slid = Overlap { shift_px: [40, 0], ..same };
        assert!(slid.describe(2.0).contains("only part of what the target shows"), "{}", slid.describe(2.0));
        // A target of two squares, lower left and upper right, and a candidate square of the
        // same size lower right: the columns line it up on the one, the rows on the other,
        // and the shift (-2, 2) overlaps neither. Shown where it is drawn, not shifted.
        let two: Vec<bool> = square(w, 10, 60, 20).iter().zip(square(w, 60, 10, 20)).map(|(a, b)| *a || b).collect();
        let apart = IdBuffers { covered: square(w, 62, 58, 20), ..ids.clone() };
        assert_eq!(alignment(&apart.covered, &two, w as usize, w as usize), [-2, 2], "the profiles' shift");
        let (_, drawn) = silhouette_overlap(&apart, &two);
        assert_eq!((drawn.shift_px, drawn.both), ([0, 0], 0), "{drawn:?}");
    }
}

#[cfg(test)]
mod extent_tests {
    use super::*;

    #[test]
    fn a_silhouettes_extent_is_its_outermost_columns_and_rows() {
        let w = 20usize;
        let mut mask = vec![false; w * 10];
        assert_eq!(extent(&mask, w), None);
        mask[3 * w + 5] = true;
        mask[7 * w + 2] = true;
        mask[4 * w + 17] = true;
        assert_eq!(extent(&mask, w), Some([2, 17, 3, 7]));
    }
}

#[cfg(test)]
mod orientation_tests {
    use super::*;

    #[test]
    fn a_line_is_found_by_its_own_direction_and_not_by_one_crossing_it() {
        // A horizontal line at y = 20 and a vertical one at x = 60, on 100 x 100.
        let (w, h) = (100u32, 100u32);
        let lines: Vec<bool> = (0..w * h).map(|i| (i / w == 20 && i % w < 50) || (i % w == 60 && i / w > 40)).collect();
        let fields = oriented_distances(&lines, w, h);
        let horizontal = orientation_bin(1.0, 0.0);
        let vertical = orientation_bin(0.0, 1.0);
        assert_ne!(horizontal, vertical);
        // Beside the vertical line: near it in its own direction's field, far in the other's.
        let at = |x: u32, y: u32| (y * w + x) as usize;
        assert!(fields[vertical][at(62, 70)] <= 2.5, "{}", fields[vertical][at(62, 70)]);
        assert!(fields[horizontal][at(62, 70)] > 20.0, "{}", fields[horizontal][at(62, 70)]);
        assert!(fields[horizontal][at(25, 23)] <= 3.5);
        // A diagonal bin sees neither line as its own.
        let diagonal = orientation_bin(1.0, 1.0);
        assert!(fields[diagonal][at(25, 22)] > 10.0, "{}", fields[diagonal][at(25, 22)]);
    }
}
