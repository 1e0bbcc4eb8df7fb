//! Embeddings for GERD-RET: a target image and a modeling state become unit vectors whose
//! dot products measure similarity.
//!
//! The built-in embedder needs no model download and gives the same bits on every machine:
//! the image becomes its silhouette, its edge density and its edge orientations on grids over
//! the part's bounding square (so position and scale in the picture do not matter); the state
//! becomes counts of face, edge and vertex kinds, the bounding box's proportions and the
//! operations so far. A learned encoder plugs in through [`Embedder`].

use freecad_bridge::command::Mode;
use freecad_bridge::state::{EdgeKind, FaceKind};
use freecad_bridge::{Command, ModelState};
use image::RgbImage;

/// Turns target images and modeling states into vectors. Vectors of one embedder must have
/// fixed lengths; they need not be normalised (the index normalises them).
pub trait Embedder {
    /// Names the embedder and its version; an index built by another is refused.
    fn id(&self) -> String;
    fn embed_image(&mut self, image: &RgbImage) -> Result<Vec<f32>, String>;
    /// `history`: the commands before the step (sketches included).
    fn embed_state(&mut self, state: &ModelState, history: &[Command]) -> Result<Vec<f32>, String>;
}

/// The offline, deterministic embedder.
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtin;

/// Cells per side of the silhouette and edge grids.
const GRID: usize = 16;
/// Cells per side of the orientation grid, and orientation bins per cell.
const ORIENT_GRID: usize = 4;
const ORIENT_BINS: usize = 8;

impl Embedder for Builtin {
    fn id(&self) -> String {
        "builtin-1".into()
    }

    fn embed_image(&mut self, image: &RgbImage) -> Result<Vec<f32>, String> {
        Ok(image_descriptor(image))
    }

    fn embed_state(&mut self, state: &ModelState, history: &[Command]) -> Result<Vec<f32>, String> {
        Ok(state_descriptor(state, history))
    }
}

/// Silhouette (16x16), edge density (16x16) and edge orientations (4x4 cells x 8 bins) over
/// the foreground's bounding square; each block normalised, then the whole.
pub fn image_descriptor(image: &RgbImage) -> Vec<f32> {
    let (w, h) = (image.width() as usize, image.height() as usize);
    let mut out = vec![0.0f32; 2 * GRID * GRID + ORIENT_GRID * ORIENT_GRID * ORIENT_BINS];
    if w < 3 || h < 3 {
        return out;
    }
    let background = border_colour(image);
    let gray: Vec<f32> =
        image.pixels().map(|p| (0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32) / 255.0).collect();
    let foreground: Vec<bool> = image
        .pixels()
        .map(|p| (0..3).map(|c| (p[c] as i32 - background[c] as i32).abs()).max().unwrap_or(0) > 24)
        .collect();
    // The foreground's bounding square, in pixels.
    let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
    for y in 0..h {
        for x in 0..w {
            if foreground[y * w + x] {
                (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            }
        }
    }
    if x0 > x1 {
        return out;
    }
    let side = ((x1 - x0).max(y1 - y0) + 1) as f32;
    let (cx, cy) = ((x0 + x1) as f32 / 2.0, (y0 + y1) as f32 / 2.0);
    let cell_of = |x: usize, y: usize, cells: usize| -> Option<usize> {
        let u = (x as f32 - cx) / side + 0.5;
        let v = (y as f32 - cy) / side + 0.5;
        let (i, j) = ((u * cells as f32).floor(), (v * cells as f32).floor());
        (i >= 0.0 && j >= 0.0 && (i as usize) < cells && (j as usize) < cells).then(|| j as usize * cells + i as usize)
    };
    let (silhouette, rest) = out.split_at_mut(GRID * GRID);
    let (edges, orientation) = rest.split_at_mut(GRID * GRID);
    for y in 1..h - 1 {
        for x in 1..w - 1 {
            let Some(cell) = cell_of(x, y, GRID) else { continue };
            if foreground[y * w + x] {
                silhouette[cell] += 1.0;
            }
            let gx = gray[y * w + x + 1] - gray[y * w + x - 1];
            let gy = gray[(y + 1) * w + x] - gray[(y - 1) * w + x];
            let magnitude = (gx * gx + gy * gy).sqrt();
            if magnitude < 0.05 {
                continue;
            }
            edges[cell] += magnitude;
            // Orientation modulo 180 degrees: an edge is the same edge seen from either side.
            let angle = gy.atan2(gx).rem_euclid(std::f32::consts::PI);
            let bin = ((angle / std::f32::consts::PI * ORIENT_BINS as f32) as usize).min(ORIENT_BINS - 1);
            if let Some(c) = cell_of(x, y, ORIENT_GRID) {
                orientation[c * ORIENT_BINS + bin] += magnitude;
            }
        }
    }
    for block in [silhouette, edges, orientation] {
        normalise(block);
    }
    normalise(&mut out);
    out
}

/// The most common colour of the image's border.
fn border_colour(image: &RgbImage) -> [u8; 3] {
    let (w, h) = image.dimensions();
    let mut counts = std::collections::BTreeMap::<[u8; 3], usize>::new();
    let border = (0..w).flat_map(|x| [(x, 0), (x, h - 1)]).chain((0..h).flat_map(|y| [(0, y), (w - 1, y)]));
    for (x, y) in border {
        let p = image.get_pixel(x, y).0;
        *counts.entry(p).or_default() += 1;
    }
    counts.into_iter().max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c))).map_or([255; 3], |(c, _)| c)
}

/// Kinds of faces, edges and vertices (log counts), bounding-box proportions, whether the
/// model is empty, and the operations so far (log counts), normalised.
pub fn state_descriptor(state: &ModelState, history: &[Command]) -> Vec<f32> {
    let log = |n: usize| (1.0 + n as f32).ln();
    let mut v = Vec::with_capacity(32);
    let face_kinds = [FaceKind::Plane, FaceKind::Cylinder, FaceKind::Cone, FaceKind::Sphere, FaceKind::Torus];
    for kind in face_kinds {
        v.push(log(state.faces.iter().filter(|f| f.kind == kind).count()));
    }
    v.push(log(state.faces.iter().filter(|f| !face_kinds.contains(&f.kind)).count()));
    let edge_kinds = [EdgeKind::Line, EdgeKind::Circle, EdgeKind::Ellipse];
    for kind in edge_kinds {
        v.push(log(state.edges.iter().filter(|e| e.kind == kind).count()));
    }
    v.push(log(state.edges.iter().filter(|e| !edge_kinds.contains(&e.kind)).count()));
    v.push(log(state.vertices.len()));
    let mut extents = state.bbox.map_or([0.0; 3], |b| [0, 1, 2].map(|i| (b.max[i] - b.min[i]) as f32));
    extents.sort_by(|a, b| b.total_cmp(a));
    let largest = extents[0].max(f32::MIN_POSITIVE);
    v.extend(extents.iter().map(|e| e / largest));
    v.push(if state.empty { 1.0 } else { 0.0 });
    let mut ops = [0usize; OPERATIONS.len()];
    for command in history {
        if let Some(i) = OPERATIONS.iter().position(|o| *o == operation_key(command)) {
            ops[i] += 1;
        }
    }
    v.extend(ops.iter().map(|n| log(*n)));
    v.push(log(history.iter().filter(|c| !matches!(c, Command::Sketch(_))).count()));
    normalise(&mut v);
    v
}

const OPERATIONS: [&str; 9] =
    ["extrude_add", "extrude_cut", "revolve_add", "revolve_cut", "sweep", "loft", "fillet", "chamfer", "plane"];

/// `extrude_add`, `revolve_cut`, `fillet`... for a command (sweeps and lofts either way).
pub fn operation_key(command: &Command) -> &'static str {
    match command {
        Command::Extrude(e) if e.mode == Mode::Cut => "extrude_cut",
        Command::Extrude(_) => "extrude_add",
        Command::Revolve(r) if r.mode == Mode::Cut => "revolve_cut",
        Command::Revolve(_) => "revolve_add",
        other => other.op(),
    }
}

/// Scale to unit length (a zero vector stays zero).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square(size: u32, x0: u32, y0: u32, side: u32) -> RgbImage {
        RgbImage::from_fn(size, size, |x, y| {
            let inside = x >= x0 && x < x0 + side && y >= y0 && y < y0 + side;
            image::Rgb(if inside { [60, 90, 160] } else { [255, 255, 255] })
        })
    }

    #[test]
    fn the_image_descriptor_ignores_position_and_scale_but_not_shape() {
        let a = image_descriptor(&square(200, 20, 30, 80));
        let b = image_descriptor(&square(300, 150, 40, 120));
        let disc = RgbImage::from_fn(200, 200, |x, y| {
            let d = ((x as f32 - 100.0).powi(2) + (y as f32 - 100.0).powi(2)).sqrt();
            image::Rgb(if d < 50.0 { [60, 90, 160] } else { [255, 255, 255] })
        });
        let c = image_descriptor(&disc);
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert!(dot(&a, &b) > 0.97, "the same square elsewhere and larger: {}", dot(&a, &b));
        assert!(dot(&a, &c) < dot(&a, &b) - 0.05, "a disc is less alike: {} vs {}", dot(&a, &c), dot(&a, &b));
    }

    #[test]
    fn an_empty_state_has_a_unit_descriptor() {
        let v = state_descriptor(&ModelState::empty(), &[]);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
    }
}
