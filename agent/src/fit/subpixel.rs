//! The target's lines where its own image draws them, for the picture model at END
//! (`--subpixel-fit`; off by default: with the simulated reader it gained on gen-11 and lost
//! on test100, docs/evaluation.md).
//!
//! The framed target's lines are the image's lines resampled onto the framed picture's
//! whole pixels: rounded twice, and a line the resampling spreads over two pixel rows is a
//! band two pixels wide at distance zero, anywhere in which a sample costs nothing. Each
//! framed line pixel is moved instead, across its direction only (along it, a junction's
//! ink would pull a line's end), to its ink's centroid in the image's own pixels, and the
//! distance is measured to those points: one least-distance place across each line.
//!
//! Where the lines are read so, the whole-pixel alignment of the picture (`fit::agreement`)
//! leaves an exact model up to half a pixel off them, which the search would take for its
//! numbers' error (the oracle's exact pipe had its flange moved, gen-11-00004 1.000 ->
//! 0.930): the picture model then scores a drawing where it lies best within half a pixel
//! (`fit::sketch`).
//!
//! The images our targets come in draw lines one pixel wide without anti-aliasing, so a
//! line's place is its image pixel's, to half an image pixel. Distances measured exactly to
//! the line through each point (not interpolated) were tried and fitted the drawings onto
//! those pixels' centres (gen-11 0.9699 against 0.9812; docs/evaluation.md).

use super::TargetPixels;

/// Points within this many pixels (square window) are searched; farther counts as this.
const REACH: i64 = 7;

/// The target's line distance fields by direction (as [`TargetPixels::oriented`]),
/// measured to each line pixel's ink centroid in the image's own pixels instead of the
/// framed pixel's centre, and interpolated between framed pixels as those are.
#[derive(Debug, Clone)]
pub struct RefinedLines {
    pub by_bin: Vec<Vec<f32>>,
}

/// A bin's middle direction on the picture (unit, y down).
fn bin_direction(bin: usize) -> [f64; 2] {
    let theta = (bin as f64 + 0.5) * std::f64::consts::PI / views::ORIENTATION_BINS as f64;
    [theta.cos(), theta.sin()]
}

/// The refined lines, where the target's image is kept at its own resolution.
pub(crate) fn refined(target: &TargetPixels) -> Option<RefinedLines> {
    let native = target.native.as_ref()?;
    let size = target.size as usize;
    // The ink centroid (framed pixels) of the 3 x 3 image pixels around a framed pixel's
    // centre; the pixel's centre where there is no ink.
    let centroid = |i: usize| -> [f64; 2] {
        let (x, y) = ((i % size) as f64 + 0.5, (i / size) as f64 + 0.5);
        let (nx, ny) = native.at(x, y);
        let (cx, cy) = (nx.floor(), ny.floor());
        let (mut sw, mut sx, mut sy) = (0.0, 0.0, 0.0);
        for dj in -1..=1 {
            for di in -1..=1 {
                let (px, py) = (cx + f64::from(di) + 0.5, cy + f64::from(dj) + 0.5);
                let w = native.ink_at(px, py);
                (sw, sx, sy) = (sw + w, sx + w * px, sy + w * py);
            }
        }
        if sw <= 1e-9 {
            return [x, y];
        }
        let c = native.framed_centre;
        [(sx / sw - native.centre[0]) / native.per_framed + c, (sy / sw - native.centre[1]) / native.per_framed + c]
    };
    let by_bin = target
        .oriented
        .iter()
        .enumerate()
        .map(|(bin, field)| {
            // Moved only across the bin's direction: along it, a junction's ink would pull
            // a line's end.
            let t = bin_direction(bin);
            let normal = [-t[1], t[0]];
            let mut out = vec![REACH as f32; size * size];
            for i in (0..size * size).filter(|&i| field[i] <= 0.0) {
                let c = centroid(i);
                let centre = [(i % size) as f64 + 0.5, (i / size) as f64 + 0.5];
                let across = (c[0] - centre[0]) * normal[0] + (c[1] - centre[1]) * normal[1];
                let p = [centre[0] + across * normal[0], centre[1] + across * normal[1]];
                let (ix, iy) = ((i % size) as i64, (i / size) as i64);
                for dy in -REACH..=REACH {
                    for dx in -REACH..=REACH {
                        let (jx, jy) = (ix + dx, iy + dy);
                        if jx < 0 || jy < 0 || jx >= size as i64 || jy >= size as i64 {
                            continue;
                        }
                        let d = (jx as f64 + 0.5 - p[0]).hypot(jy as f64 + 0.5 - p[1]) as f32;
                        let j = jy as usize * size + jx as usize;
                        out[j] = out[j].min(d);
                    }
                }
            }
            out
        })
        .collect();
    Some(RefinedLines { by_bin })
}

#[cfg(test)]
mod tests {
    use super::super::{NativeLines, TargetPixels, sketch::line_distance};

    /// A framed picture of 60 pixels over an image of three pixels each, with one
    /// horizontal line in the image's row `row` (one pixel of ink), which the framed
    /// picture has in its rows `framed`.
    fn one_line(row: usize, framed: &[usize]) -> TargetPixels {
        let (size, native) = (60u32, 180usize);
        let ink = (0..native * native)
            .map(|i| f32::from(u8::from(i / native == row && (30..150).contains(&(i % native)))))
            .collect();
        let lines: Vec<bool> =
            (0..60 * 60).map(|i| framed.contains(&(i / 60)) && (10..50).contains(&(i % 60))).collect();
        let native = NativeLines::centred(size, 3, ink);
        TargetPixels::new(size, lines.clone(), &lines).with_native(native)
    }

    #[test]
    fn a_line_is_measured_from_where_the_image_has_its_ink_not_from_the_framed_pixel() {
        // Ink in the image's row 92: 92.5 / 3 = 30.83 framed pixels down, in the framed
        // pixel row 30 (its centre 30.5).
        let whole = one_line(92, &[30]);
        let refined = one_line(92, &[30]).with_refined_lines();
        let bin = views::orientation_bin(1.0, 0.0);
        let at = |t: &TargetPixels, y: f64| line_distance(t, false, bin, 30.0, y, 7.0);
        assert!(at(&whole, 30.5) < 0.01 && (at(&whole, 31.5) - 1.0).abs() < 0.01);
        assert!((at(&refined, 30.5) - 0.333).abs() < 0.05, "{}", at(&refined, 30.5));
        assert!((at(&refined, 31.5) - 0.667).abs() < 0.05, "{}", at(&refined, 31.5));
        assert!((at(&refined, 29.5) - 1.333).abs() < 0.05, "{}", at(&refined, 29.5));
    }

    #[test]
    fn a_target_without_its_own_pixels_has_no_refined_lines() {
        let lines = vec![false; 100];
        assert!(TargetPixels::new(10, lines.clone(), &lines).with_refined_lines().refined.is_none());
    }
}
