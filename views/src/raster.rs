//! A small software rasteriser: depth-buffered triangles with a per-pixel face-ID buffer,
//! depth-tested edge polylines with a per-pixel edge-ID buffer, supersampled.

use image::{Rgb, RgbImage};
use nalgebra::{Point3, Vector3};

use crate::camera::Camera;
use crate::scene::{Material, NO_ENTITY, Scene};

pub type Color = [f32; 3];

/// How faces and edges are coloured.
#[derive(Debug, Clone)]
pub struct Style {
    pub background: Color,
    /// Colour = `base + gain * |n . v|` (a headlight Lambert term); `gain = 0` is flat.
    pub part_base: Color,
    pub part_gain: f32,
    pub added: Color,
    pub removed: Color,
    pub edge: Color,
    /// Edge width in output pixels.
    pub edge_width: f64,
    /// Draw hidden edges dashed in this colour.
    pub hidden_edge: Option<Color>,
}

impl Style {
    /// Gray part, black edges, white background: like the renders of public image-to-CAD
    /// benchmarks (faces seen at the isometric angle come out (141, 141, 138)).
    pub fn target() -> Style {
        Style {
            background: [255.0, 255.0, 255.0],
            part_base: [113.0, 113.0, 110.0],
            part_gain: 48.0,
            added: [70.0, 170.0, 90.0],
            removed: [220.0, 80.0, 70.0],
            edge: [0.0, 0.0, 0.0],
            edge_width: 1.0,
            hidden_edge: None,
        }
    }

    /// Lighter faces so that coloured labels and leaders stand out.
    pub fn tagged() -> Style {
        Style {
            background: [255.0, 255.0, 255.0],
            part_base: [168.0, 174.0, 182.0],
            part_gain: 62.0,
            edge: [20.0, 20.0, 30.0],
            hidden_edge: None,
            ..Style::target()
        }
    }
}

/// Per-pixel IDs at output resolution: which face and which edge each pixel shows.
#[derive(Debug, Clone)]
pub struct IdBuffers {
    pub width: u32,
    pub height: u32,
    /// 0-based face index or `NO_ENTITY`.
    pub face: Vec<u32>,
    /// 0-based edge index or `NO_ENTITY`.
    pub edge: Vec<u32>,
    /// Whether a surface was drawn there (a part's face or an overlay of material): the
    /// view's silhouette.
    pub covered: Vec<bool>,
    /// Where a visible seam runs (a curved face closing on itself, as a cylinder's side
    /// does). Never drawn, but other renderers draw it: Stage 3 does not count a target's
    /// line there as missing.
    pub seam: Vec<bool>,
}

impl IdBuffers {
    pub fn face_at(&self, x: i64, y: i64) -> u32 {
        self.index(x, y).map_or(NO_ENTITY, |i| self.face[i])
    }

    pub fn edge_at(&self, x: i64, y: i64) -> u32 {
        self.index(x, y).map_or(NO_ENTITY, |i| self.edge[i])
    }

    fn index(&self, x: i64, y: i64) -> Option<usize> {
        (x >= 0 && y >= 0 && x < i64::from(self.width) && y < i64::from(self.height))
            .then(|| y as usize * self.width as usize + x as usize)
    }
}

/// The supersampled frame being drawn.
#[derive(Debug)]
pub struct Raster {
    width: u32,
    height: u32,
    ss: u32,
    color: Vec<Color>,
    depth: Vec<f32>,
    face: Vec<u32>,
    edge: Vec<u32>,
    seam: Vec<bool>,
}

/// A vertex on screen: supersampled pixel position and depth.
#[derive(Debug, Clone, Copy)]
struct ScreenPoint {
    x: f64,
    y: f64,
    depth: f64,
}

impl Raster {
    /// `ss` x `ss` samples per output pixel.
    pub fn new(width: u32, height: u32, ss: u32, background: Color) -> Raster {
        let n = (width * ss * height * ss) as usize;
        Raster {
            width,
            height,
            ss,
            color: vec![background; n],
            depth: vec![f32::INFINITY; n],
            face: vec![NO_ENTITY; n],
            edge: vec![NO_ENTITY; n],
            seam: vec![false; n],
        }
    }

    fn sw(&self) -> i64 {
        i64::from(self.width * self.ss)
    }

    fn sh(&self) -> i64 {
        i64::from(self.height * self.ss)
    }

    /// Draw the scene's triangles with depth test.
    pub fn draw_triangles(&mut self, scene: &Scene, camera: &Camera, style: &Style) {
        let cam = camera.scaled(self.ss);
        let perspective = cam.is_perspective();
        let screen: Vec<Option<ScreenPoint>> =
            scene.positions.iter().map(|p| cam.project(p).map(|(x, y, depth)| ScreenPoint { x, y, depth })).collect();
        let eye = Point3::from(cam.eye);
        let to_eye = cam.towards_eye();
        // Overlays (added or removed material) coincide with the part's faces where they
        // touch it: they win those ties.
        let overlay_bias = (scene.bounding_sphere().1 * 1e-3) as f32;
        let shade: Vec<f32> = scene
            .positions
            .iter()
            .zip(&scene.normals)
            .map(|(p, n)| {
                let v = if perspective { (eye - p).try_normalize(1e-12).unwrap_or(to_eye) } else { to_eye };
                n.dot(&v).abs() as f32
            })
            .collect();
        for (t, tri) in scene.triangles.iter().enumerate() {
            let [a, b, c] = tri.map(|i| i as usize);
            let (Some(pa), Some(pb), Some(pc)) = (screen[a], screen[b], screen[c]) else { continue };
            // Triangles follow their face's outward normal, so on a closed solid the ones
            // facing away are always behind others: skipping them halves the work.
            let (pa3, pb3, pc3) = (&scene.positions[a], &scene.positions[b], &scene.positions[c]);
            let normal = (pb3 - pa3).cross(&(pc3 - pa3));
            let view = if perspective { eye - pa3 } else { to_eye };
            if normal.dot(&view) < 0.0 {
                continue;
            }
            let base = match scene.triangle_material[t] {
                Material::Part => None,
                Material::Added => Some(style.added),
                Material::Removed => Some(style.removed),
            };
            let shades = [shade[a], shade[b], shade[c]];
            let bias = if base.is_some() { overlay_bias } else { 0.0 };
            self.fill_triangle([pa, pb, pc], shades, base, style, scene.triangle_face[t], perspective, bias);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_triangle(
        &mut self,
        p: [ScreenPoint; 3],
        shades: [f32; 3],
        overlay: Option<Color>,
        style: &Style,
        face: u32,
        perspective: bool,
        depth_bias: f32,
    ) {
        let area = (p[1].x - p[0].x) * (p[2].y - p[0].y) - (p[2].x - p[0].x) * (p[1].y - p[0].y);
        if area.abs() < 1e-12 {
            return;
        }
        let min_y = p.iter().map(|q| q.y).fold(f64::INFINITY, f64::min).floor().max(0.0) as i64;
        let max_y = p.iter().map(|q| q.y).fold(f64::NEG_INFINITY, f64::max).ceil().min((self.sh() - 1) as f64) as i64;
        let sw = self.sw();
        // Each edge as (y range, x at y = 0, dx/dy), to find a row's span with a multiply.
        let edges: [(f64, f64, f64, f64); 3] = [(p[0], p[1]), (p[1], p[2]), (p[2], p[0])].map(|(a, b)| {
            let slope = if (b.y - a.y).abs() < 1e-12 { 0.0 } else { (b.x - a.x) / (b.y - a.y) };
            (a.y.min(b.y), a.y.max(b.y), a.x - a.y * slope, slope)
        });
        let (x_lo, x_hi) = (
            p.iter().map(|q| q.x).fold(f64::INFINITY, f64::min),
            p.iter().map(|q| q.x).fold(f64::NEG_INFINITY, f64::max),
        );
        for y in min_y..=max_y {
            let cy = y as f64 + 0.5;
            // Only the span of this row inside the triangle: long slivers (fans on annuli)
            // would otherwise cost their whole bounding box.
            let mut lo = f64::INFINITY;
            let mut hi = f64::NEG_INFINITY;
            for &(y0, y1, x0, slope) in &edges {
                if cy >= y0 && cy <= y1 {
                    let x = x0 + cy * slope;
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
            if lo > hi {
                continue;
            }
            let (lo, hi) = (lo.max(x_lo), hi.min(x_hi));
            let x_from = (lo - 0.5).floor().max(0.0) as i64;
            let x_to = (hi - 0.5).ceil().min((sw - 1) as f64) as i64;
            // Barycentric weights are linear in x: step them along the row.
            let cx0 = x_from as f64 + 0.5;
            let mut w0 = ((p[1].x - cx0) * (p[2].y - cy) - (p[2].x - cx0) * (p[1].y - cy)) / area;
            let mut w1 = ((p[2].x - cx0) * (p[0].y - cy) - (p[0].x - cx0) * (p[2].y - cy)) / area;
            let (dw0, dw1) = ((p[1].y - p[2].y) / area, (p[2].y - p[0].y) / area);
            for x in x_from..=x_to {
                let (w0, w1) = {
                    let current = (w0, w1);
                    w0 += dw0;
                    w1 += dw1;
                    current
                };
                let w2 = 1.0 - w0 - w1;
                if w0 < -1e-9 || w1 < -1e-9 || w2 < -1e-9 {
                    continue;
                }
                let depth = if perspective {
                    1.0 / (w0 / p[0].depth + w1 / p[1].depth + w2 / p[2].depth)
                } else {
                    w0 * p[0].depth + w1 * p[1].depth + w2 * p[2].depth
                } as f32;
                let i = (y * sw + x) as usize;
                if depth - depth_bias >= self.depth[i] {
                    continue;
                }
                self.depth[i] = depth;
                let s = w0 as f32 * shades[0] + w1 as f32 * shades[1] + w2 as f32 * shades[2];
                self.color[i] = match overlay {
                    None => style.part_base.map(|c| c + style.part_gain * s),
                    Some(base) => base.map(|c| c * (0.7 + 0.3 * s)),
                };
                self.face[i] = face;
            }
        }
    }

    /// Draw edges (all, or those `keep` accepts) as depth-tested polylines; visible ones fill
    /// the edge-ID buffer. Seams are not drawn: where one is visible goes to the seam buffer.
    /// `always_visible` skips the depth test (projected edges).
    pub fn draw_edges(
        &mut self,
        scene: &Scene,
        camera: &Camera,
        style: &Style,
        keep: impl Fn(usize) -> bool,
        always_visible: bool,
        color_of: impl Fn(usize) -> Color,
    ) {
        let cam = camera.scaled(self.ss);
        let (_, radius) = scene.bounding_sphere();
        let eps = (radius * 2e-3) as f32;
        let brush = (style.edge_width * f64::from(self.ss)).round().max(1.0) as i64;
        let dash = 6.0 * f64::from(self.ss);
        let min_run = MIN_VISIBLE_RUN * f64::from(self.ss);
        for (e, polyline) in scene.edges.iter().enumerate() {
            if !keep(e) {
                continue;
            }
            let seam = scene.is_seam(e);
            let color = color_of(e);
            let mut samples = Vec::new();
            let mut run = 0.0;
            for seg in polyline.windows(2) {
                let (Some(a), Some(b)) = (cam.project(&seg[0]), cam.project(&seg[1])) else { continue };
                let length = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
                let steps = (length * 2.0).ceil().max(1.0) as usize;
                for k in 0..=steps {
                    let t = k as f64 / steps as f64;
                    let (x, y) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
                    let depth =
                        if cam.is_perspective() { 1.0 / ((1.0 - t) / a.2 + t / b.2) } else { a.2 + (b.2 - a.2) * t }
                            as f32;
                    let (ix, iy) = (x.floor() as i64, y.floor() as i64);
                    let visible = always_visible || depth <= self.farthest_near(ix, iy, brush + 1) + eps;
                    samples.push(EdgeSample { x: ix, y: iy, along: run + length * t, visible });
                }
                run += length;
            }
            hide_short_runs(&mut samples, min_run);
            for s in &samples {
                if seam {
                    if s.visible {
                        self.stamp_seam(s.x, s.y, brush);
                    }
                } else if s.visible {
                    self.stamp(s.x, s.y, brush, color, Some(e as u32));
                } else if let Some(hidden) = style.hidden_edge.filter(|_| s.along % (2.0 * dash) < dash) {
                    self.stamp(s.x, s.y, brush, hidden, None);
                }
            }
        }
    }

    /// The largest depth near a pixel: an edge is visible if it is in front of (or on) the
    /// farthest surface next to it, which keeps crease edges visible on grazing faces.
    fn farthest_near(&self, x: i64, y: i64, r: i64) -> f32 {
        let mut far = f32::NEG_INFINITY;
        for yy in (y - r).max(0)..=(y + r).min(self.sh() - 1) {
            for xx in (x - r).max(0)..=(x + r).min(self.sw() - 1) {
                far = far.max(self.depth[(yy * self.sw() + xx) as usize]);
            }
        }
        if far == f32::NEG_INFINITY { f32::INFINITY } else { far }
    }

    fn stamp_seam(&mut self, x: i64, y: i64, brush: i64) {
        let lo = -(brush - 1) / 2;
        for yy in (y + lo).max(0)..(y + lo + brush).min(self.sh()) {
            for xx in (x + lo).max(0)..(x + lo + brush).min(self.sw()) {
                let i = (yy * self.sw() + xx) as usize;
                self.seam[i] = true;
            }
        }
    }

    fn stamp(&mut self, x: i64, y: i64, brush: i64, color: Color, edge: Option<u32>) {
        let lo = -(brush - 1) / 2;
        for dy in lo..lo + brush {
            for dx in lo..lo + brush {
                let (xx, yy) = (x + dx, y + dy);
                if xx < 0 || yy < 0 || xx >= self.sw() || yy >= self.sh() {
                    continue;
                }
                let i = (yy * self.sw() + xx) as usize;
                match edge {
                    Some(id) => {
                        self.color[i] = color;
                        self.edge[i] = id;
                    }
                    // Hidden lines never cover visible ones.
                    None if self.edge[i] == NO_ENTITY => self.color[i] = color,
                    None => {}
                }
            }
        }
    }

    /// The share of each output pixel's samples where this raster drew something in front
    /// of (or within `eps` of) what `other`, of the same size, shows there.
    pub fn coverage_over(&self, other: &Raster, eps: f32) -> Vec<f32> {
        let (w, h, ss) = (self.width as usize, self.height as usize, self.ss as usize);
        let sw = w * ss;
        let mut out = vec![0.0f32; w * h];
        for y in 0..h {
            for x in 0..w {
                let mut hits = 0;
                for sy in 0..ss {
                    for sx in 0..ss {
                        let i = (y * ss + sy) * sw + x * ss + sx;
                        if self.depth[i].is_finite()
                            && self.depth[i] <= other.depth.get(i).map_or(f32::INFINITY, |d| d + eps)
                        {
                            hits += 1;
                        }
                    }
                }
                out[y * w + x] = hits as f32 / (ss * ss) as f32;
            }
        }
        out
    }

    /// Average the samples into the output image and reduce the ID buffers.
    pub fn finish(&self) -> (RgbImage, IdBuffers) {
        let (w, h, ss) = (self.width, self.height, self.ss as usize);
        let sw = (w as usize) * ss;
        let mut image = RgbImage::new(w, h);
        let mut face = vec![NO_ENTITY; (w * h) as usize];
        let mut edge = vec![NO_ENTITY; (w * h) as usize];
        let mut covered = vec![false; (w * h) as usize];
        let mut seam = vec![false; (w * h) as usize];
        for y in 0..h as usize {
            for x in 0..w as usize {
                let mut sum = [0.0f32; 3];
                let mut edge_votes: Vec<(u32, u32)> = Vec::new();
                for sy in 0..ss {
                    for sx in 0..ss {
                        let i = (y * ss + sy) * sw + x * ss + sx;
                        for (acc, c) in sum.iter_mut().zip(self.color[i]) {
                            *acc += c;
                        }
                        seam[y * w as usize + x] |= self.seam[i];
                        let e = self.edge[i];
                        if e != NO_ENTITY {
                            match edge_votes.iter_mut().find(|(id, _)| *id == e) {
                                Some(v) => v.1 += 1,
                                None => edge_votes.push((e, 1)),
                            }
                        }
                    }
                }
                let n = (ss * ss) as f32;
                image.put_pixel(x as u32, y as u32, Rgb(sum.map(|c| (c / n).round().clamp(0.0, 255.0) as u8)));
                let centre = (y * ss + ss / 2) * sw + x * ss + ss / 2;
                face[y * w as usize + x] = self.face[centre];
                covered[y * w as usize + x] = self.depth[centre].is_finite();
                if let Some((id, _)) = edge_votes.iter().max_by_key(|(id, votes)| (*votes, u32::MAX - id)) {
                    edge[y * w as usize + x] = *id;
                }
            }
        }
        (image, IdBuffers { width: w, height: h, face, edge, covered, seam })
    }
}

/// A partly hidden edge must be visible over this many output pixels in a row to count as
/// visible there: the depth test's neighbourhood lets a hidden edge show for a pixel or two
/// where it meets the silhouette, and such a stub would get a label on someone else's corner.
const MIN_VISIBLE_RUN: f64 = 3.0;

struct EdgeSample {
    x: i64,
    y: i64,
    /// Distance along the projected polyline, in supersampled pixels.
    along: f64,
    visible: bool,
}

/// Mark visible runs shorter than `min_run` hidden, when the edge is hidden elsewhere.
fn hide_short_runs(samples: &mut [EdgeSample], min_run: f64) {
    if samples.iter().all(|s| s.visible) {
        return;
    }
    let mut start = 0;
    while start < samples.len() {
        if !samples[start].visible {
            start += 1;
            continue;
        }
        let end = (start..samples.len()).find(|&i| !samples[i].visible).unwrap_or(samples.len());
        if samples[end - 1].along - samples[start].along < min_run {
            samples[start..end].iter_mut().for_each(|s| s.visible = false);
        }
        start = end;
    }
}

/// The pixel where a 3D point appears, if in front of the camera.
pub fn to_pixel(camera: &Camera, p: &Point3<f64>) -> Option<(f64, f64)> {
    camera.project(p).map(|(x, y, _)| (x, y))
}

/// Unit direction helper for callers that build cameras from arrays.
pub fn vector(v: [f64; 3]) -> Vector3<f64> {
    Vector3::from(v)
}
