//! The four views the loop shows the VLM, with their metadata.

use freecad_bridge::state::Frame;
use freecad_bridge::{ModelState, Preview};
use image::{Rgb, RgbImage};
use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};

use crate::camera::{Camera, ISOMETRIC};
use crate::draw;
use crate::labels::{self, Placed, Rect, Request};
use crate::raster::{IdBuffers, Raster, Style};
use crate::scene::{Material, NO_ENTITY, Scene};

/// Supersampling factor per axis.
const SUPERSAMPLE: u32 = 2;
/// Edges with fewer visible pixels are too small to label visibly.
pub const MIN_EDGE_PIXELS: usize = 5;
const MIN_FACE_PIXELS: usize = 80;

/// Which entities get ID labels in a tagged view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelKinds {
    pub edges: bool,
    pub faces: bool,
    pub vertices: bool,
}

impl Default for LabelKinds {
    fn default() -> Self {
        LabelKinds { edges: true, faces: false, vertices: false }
    }
}

/// How to render.
#[derive(Debug, Clone)]
pub struct Options {
    /// Width and height in pixels.
    pub size: u32,
    /// From the part towards the eye.
    pub direction: [f64; 3],
    pub perspective: bool,
    /// Draw hidden edges dashed.
    pub hidden_edges: bool,
    pub labels: LabelKinds,
    /// Frame the view on this sphere (centre, radius) instead of the part's bounding sphere:
    /// the registration sphere of the loop, so renders line up with the target image.
    pub sphere: Option<([f64; 3], f64)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            size: 500,
            direction: ISOMETRIC,
            perspective: false,
            hidden_edges: false,
            labels: LabelKinds::default(),
            sphere: None,
        }
    }
}

/// Everything a caller needs besides the pixels: where the labels are and what they name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub width: u32,
    pub height: u32,
    pub camera: Camera,
    pub labels: Vec<LabelMeta>,
    pub unlabelled: Vec<Unlabelled>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sketch: Option<SketchMeta>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelMeta {
    /// The entity: `E12`, `F3`, `V7`.
    pub id: String,
    /// The label's text box `[x0, y0, x1, y1]` in pixels.
    #[serde(rename = "box")]
    pub rect: [f64; 4],
    /// Where the leader touches the entity.
    pub anchor: [f64; 2],
    /// Where the leader meets the box.
    pub port: [f64; 2],
}

/// Why a seam edge has no label: no view draws it.
pub const SEAM: &str = "seam (where a curved face closes on itself; not drawn)";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unlabelled {
    pub id: String,
    /// `too small`, `hidden`, `no room`, `outside the window`, `covered by another edge or
    /// seen end-on` (sketch views), [`SEAM`].
    pub reason: String,
}

/// A rendered view.
#[derive(Debug, Clone)]
pub struct View {
    pub image: RgbImage,
    pub meta: Meta,
    /// Which face and edge each pixel shows (for checks and for picking).
    pub ids: IdBuffers,
}

/// Fraction of a [`target`] render the framing sphere's diameter fills.
pub const TARGET_FILL: f64 = 0.82;
/// Fraction of a [`tagged`] view the framing sphere's diameter fills (room for labels
/// around it). The preview uses the same, so every picture of the model a VLM sees is at one
/// scale.
pub const TAGGED_FILL: f64 = 0.66;
/// Fraction of a [`preview`]'s candidate panel the framing sphere's diameter fills: the
/// tagged view's.
pub const PREVIEW_FILL: f64 = TAGGED_FILL;

fn camera_for(scene: &Scene, opts: &Options, fill: f64) -> Camera {
    let (center, radius) = match opts.sphere {
        Some((c, r)) => (Point3::from(c), r),
        None => scene.bounding_sphere(),
    };
    Camera::framing(center, radius, Vector3::from(opts.direction), opts.perspective, opts.size, opts.size, fill)
}

fn render(scene: &Scene, camera: &Camera, style: &Style) -> (RgbImage, IdBuffers) {
    let mut raster = Raster::new(camera.width, camera.height, SUPERSAMPLE, style.background);
    raster.draw_triangles(scene, camera, style);
    raster.draw_edges(scene, camera, style, |_| true, false, |_| style.edge);
    raster.finish()
}

/// The finished part as public image-to-CAD benchmarks show it: gray, black edges, white.
pub fn target(scene: &Scene, opts: &Options) -> View {
    let camera = camera_for(scene, opts, TARGET_FILL);
    let mut style = Style::target();
    if opts.hidden_edges {
        style.hidden_edge = Some([150.0, 150.0, 150.0]);
    }
    let (image, ids) = render(scene, &camera, &style);
    View { meta: meta(&image, camera, Vec::new(), Vec::new()), image, ids }
}

fn meta(image: &RgbImage, camera: Camera, labels: Vec<LabelMeta>, unlabelled: Vec<Unlabelled>) -> Meta {
    Meta { width: image.width(), height: image.height(), camera, labels, unlabelled, sketch: None }
}

/// Why an entity got no label: every slot around the picture was taken.
pub const NO_ROOM: &str = "no room";

const EDGE_COLOR: Rgb<u8> = Rgb([196, 38, 38]);
const FACE_COLOR: Rgb<u8> = Rgb([32, 92, 200]);
const VERTEX_COLOR: Rgb<u8> = Rgb([22, 140, 64]);

fn color_of(id: &str) -> Rgb<u8> {
    use freecad_bridge::command::{EntityId, EntityKind};
    match id.parse::<EntityId>().map(|e| e.kind) {
        Ok(EntityKind::Face) => FACE_COLOR,
        Ok(EntityKind::Vertex) => VERTEX_COLOR,
        _ => EDGE_COLOR,
    }
}

/// The current model with an ID label on every visible edge (and optionally face and
/// vertex), each joined to its entity by a leader line.
pub fn tagged(scene: &Scene, state: &ModelState, opts: &Options) -> View {
    let camera = camera_for(scene, opts, TAGGED_FILL);
    let mut style = Style::tagged();
    if opts.hidden_edges {
        style.hidden_edge = Some([160.0, 160.0, 170.0]);
    }
    let (mut image, ids) = render(scene, &camera, &style);
    let legend = legend(&mut image, &camera);
    let mut keep_out = vec![legend];
    keep_out.extend(part_box(&ids));
    let (requests, unlabelled) = label_requests(&ids, state, scene, &camera, opts.labels, |_| true, "hidden");
    let (placed, unlabelled) = place_labels(&mut image, requests, unlabelled, &keep_out);
    View { meta: meta(&image, camera, placed, unlabelled), image, ids }
}

/// Lay out and draw labels; try a smaller font when there is not room for all.
fn place_labels(
    image: &mut RgbImage,
    requests: Vec<Request>,
    mut unlabelled: Vec<Unlabelled>,
    keep_out: &[Rect],
) -> (Vec<LabelMeta>, Vec<Unlabelled>) {
    let longest = requests.iter().map(|r| r.id.as_str()).max_by_key(|s| s.len()).unwrap_or("E1").to_string();
    let (w, h) = (f64::from(image.width()), f64::from(image.height()));
    let mut chosen = None;
    for px in [13.0f32, 11.0, 9.5] {
        let (tw, th) = draw::measure(&longest, px);
        let (bw, bh) = (tw + 6.0, th.max(px as f64) + 5.0);
        let (placed, no_room) = labels::layout(&requests, bw, bh, w, h, keep_out);
        let done = no_room.is_empty();
        chosen = Some((placed, no_room, px));
        if done {
            break;
        }
    }
    let Some((placed, no_room, px)) = chosen else { return (Vec::new(), unlabelled) };
    for p in &placed {
        draw::leader(image, p, color_of(&p.id));
    }
    for p in &placed {
        draw::label_box(image, p, px, color_of(&p.id));
    }
    unlabelled.extend(no_room.into_iter().map(|id| Unlabelled { id, reason: NO_ROOM.into() }));
    unlabelled.sort_by_key(|u| natural(&u.id));
    let mut metas: Vec<LabelMeta> = placed.iter().map(label_meta).collect();
    metas.sort_by_key(|m| natural(&m.id));
    (metas, unlabelled)
}

/// Body, then letter, then number: `E2` before `E10`, body B1's before `B2.E1`.
fn natural(id: &str) -> (usize, u8, usize) {
    match id.parse::<freecad_bridge::command::EntityId>() {
        Ok(e) => (e.body, e.letter() as u8, e.index),
        Err(_) => (usize::MAX, b'?', usize::MAX),
    }
}

/// The ID of the `e`-th edge of the scene (the state lists edges in the scene's order).
fn edge_id(state: &ModelState, e: usize) -> String {
    state.edges.get(e).map_or_else(|| format!("E{}", e + 1), |edge| edge.id.clone())
}

fn face_id(state: &ModelState, f: usize) -> String {
    state.faces.get(f).map_or_else(|| format!("F{}", f + 1), |face| face.id.clone())
}

fn label_meta(p: &Placed) -> LabelMeta {
    LabelMeta { id: p.id.clone(), rect: p.rect, anchor: [p.anchor.0, p.anchor.1], port: [p.port.0, p.port.1] }
}

/// The screen box of everything drawn, a little enlarged: labels stay off the part.
fn part_box(ids: &IdBuffers) -> Option<Rect> {
    let mut r = [f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY];
    for y in 0..ids.height {
        for x in 0..ids.width {
            let i = (y * ids.width + x) as usize;
            if ids.face[i] != NO_ENTITY || ids.edge[i] != NO_ENTITY {
                r = [
                    r[0].min(f64::from(x)),
                    r[1].min(f64::from(y)),
                    r[2].max(f64::from(x + 1)),
                    r[3].max(f64::from(y + 1)),
                ];
            }
        }
    }
    r[0].is_finite().then_some([r[0] - 3.0, r[1] - 3.0, r[2] + 3.0, r[3] + 3.0])
}

/// Pixels of each entity, in scan order.
fn pixels_by_id(buffer: &[u32], width: u32, count: usize) -> Vec<Vec<(i64, i64)>> {
    let mut out = vec![Vec::new(); count];
    for (i, &id) in buffer.iter().enumerate() {
        if let Some(list) = out.get_mut(id as usize) {
            list.push(((i % width as usize) as i64, (i / width as usize) as i64));
        }
    }
    out
}

/// Anchors and priorities for every labelable entity; the rest with the reason.
fn label_requests(
    ids: &IdBuffers,
    state: &ModelState,
    scene: &Scene,
    camera: &Camera,
    kinds: LabelKinds,
    in_view: impl Fn(usize) -> bool,
    unseen: &str,
) -> (Vec<Request>, Vec<Unlabelled>) {
    let mut requests = Vec::new();
    let mut unlabelled = Vec::new();
    // Anchors are chosen biggest entity first, each away from those already taken.
    let mut taken: Vec<(i64, i64)> = Vec::new();
    if kinds.edges {
        let pixels = pixels_by_id(&ids.edge, ids.width, scene.edges.len());
        let mut labelable = Vec::new();
        for (e, px) in pixels.iter().enumerate() {
            let id = edge_id(state, e);
            if scene.is_seam(e) {
                unlabelled.push(Unlabelled { id, reason: SEAM.into() });
            } else if !in_view(e) {
                unlabelled.push(Unlabelled { id, reason: "outside the window".into() });
            } else if px.is_empty() {
                unlabelled.push(Unlabelled { id, reason: unseen.into() });
            } else if px.len() < MIN_EDGE_PIXELS {
                unlabelled.push(Unlabelled { id, reason: "too small".into() });
            } else {
                labelable.push((e, id));
            }
        }
        labelable.sort_by_key(|(e, _)| std::cmp::Reverse(pixels[*e].len()));
        for (e, id) in labelable {
            let anchor = edge_anchor(&pixels[e], ids, e as u32, &taken);
            taken.push(anchor);
            requests.push(Request {
                id,
                anchor: (anchor.0 as f64 + 0.5, anchor.1 as f64 + 0.5),
                priority: pixels[e].len() as f64,
            });
        }
    }
    if kinds.faces {
        let pixels = pixels_by_id(&ids.face, ids.width, state.faces.len());
        let depth = interior_distance(ids);
        for (f, px) in pixels.iter().enumerate() {
            let id = face_id(state, f);
            if px.is_empty() {
                unlabelled.push(Unlabelled { id, reason: "hidden".into() });
            } else if px.len() < MIN_FACE_PIXELS {
                unlabelled.push(Unlabelled { id, reason: "too small".into() });
            } else {
                // The widest point of the face that keeps clear of the anchors taken.
                let clear = |p: &&(i64, i64)| !near_any(**p, &taken);
                let widest = |p: &&(i64, i64)| depth[(p.1 * i64::from(ids.width) + p.0) as usize];
                let best = px.iter().filter(clear).max_by_key(widest).or_else(|| px.iter().max_by_key(widest)).copied();
                if let Some((x, y)) = best {
                    taken.push((x, y));
                    requests.push(Request {
                        id,
                        anchor: (x as f64 + 0.5, y as f64 + 0.5),
                        priority: px.len() as f64 / 10.0,
                    });
                }
            }
        }
    }
    if kinds.vertices {
        for (v, vertex) in state.vertices.iter().enumerate() {
            let incident: Vec<u32> = state
                .edges
                .iter()
                .enumerate()
                .filter(|(_, e)| e.vertices.contains(&vertex.id))
                .map(|(i, _)| i as u32)
                .collect();
            let found = scene.vertices.get(v).and_then(|p| camera.project(p)).and_then(|(x, y, _)| {
                nearest_pixel(ids, x.floor() as i64, y.floor() as i64, 3, |e| incident.contains(&e))
            });
            match found {
                Some((x, y)) => requests.push(Request {
                    id: vertex.id.clone(),
                    anchor: (x as f64 + 0.5, y as f64 + 0.5),
                    priority: 1.0,
                }),
                None => unlabelled.push(Unlabelled { id: vertex.id.clone(), reason: "hidden".into() }),
            }
        }
    }
    (requests, unlabelled)
}

/// Anchors of different entities at least this far apart (pixels), where an entity has room.
const ANCHOR_SPACING: f64 = 10.0;

fn nearest_taken(p: (i64, i64), taken: &[(i64, i64)]) -> f64 {
    taken.iter().map(|t| ((t.0 - p.0) as f64).hypot((t.1 - p.1) as f64)).fold(f64::INFINITY, f64::min)
}

fn near_any(p: (i64, i64), taken: &[(i64, i64)]) -> bool {
    nearest_taken(p, taken) < ANCHOR_SPACING
}

/// A pixel of the edge near the middle of its visible pixels, away from other edges and
/// from the anchors already `taken`.
fn edge_anchor(pixels: &[(i64, i64)], ids: &IdBuffers, edge: u32, taken: &[(i64, i64)]) -> (i64, i64) {
    let n = pixels.len() as f64;
    let cx = pixels.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let cy = pixels.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let crowding = |x: i64, y: i64| {
        let mut others = 0;
        for dy in -3..=3 {
            for dx in -3..=3 {
                let e = ids.edge_at(x + dx, y + dy);
                if e != NO_ENTITY && e != edge {
                    others += 1;
                }
            }
        }
        others as f64
    };
    let score = |p: &(i64, i64)| {
        // Where every pixel is near a taken anchor, the farthest from them.
        let clash = if near_any(*p, taken) { 1e6 - 1e3 * nearest_taken(*p, taken) } else { 0.0 };
        ((p.0 as f64 - cx).powi(2) + (p.1 as f64 - cy).powi(2)).sqrt() + 4.0 * crowding(p.0, p.1) + clash
    };
    *pixels.iter().min_by(|a, b| score(a).total_cmp(&score(b))).unwrap_or(&pixels[0])
}

fn nearest_pixel(ids: &IdBuffers, x: i64, y: i64, radius: i64, accept: impl Fn(u32) -> bool) -> Option<(i64, i64)> {
    let mut best = None;
    for dy in -radius..=radius {
        for dx in -radius..=radius {
            let e = ids.edge_at(x + dx, y + dy);
            if e != NO_ENTITY && accept(e) {
                let d = dx * dx + dy * dy;
                if best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, (x + dx, y + dy)));
                }
            }
        }
    }
    best.map(|(_, p)| p)
}

/// City-block distance of every pixel to the nearest pixel of another face, an edge or
/// the background (two-pass transform): face labels go where the face is widest.
fn interior_distance(ids: &IdBuffers) -> Vec<u32> {
    let (w, h) = (ids.width as usize, ids.height as usize);
    let mut d = vec![u32::MAX / 2; w * h];
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            let f = ids.face[i];
            let border = f == NO_ENTITY
                || ids.edge[i] != NO_ENTITY
                || x == 0
                || y == 0
                || x + 1 == w
                || y + 1 == h
                || ids.face[i - 1] != f
                || ids.face[i + 1] != f
                || ids.face[i - w] != f
                || ids.face[i + w] != f;
            if border {
                d[i] = 0;
            }
        }
    }
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            if x > 0 {
                d[i] = d[i].min(d[i - 1] + 1);
            }
            if y > 0 {
                d[i] = d[i].min(d[i - w] + 1);
            }
        }
    }
    for y in (0..h).rev() {
        for x in (0..w).rev() {
            let i = y * w + x;
            if x + 1 < w {
                d[i] = d[i].min(d[i + 1] + 1);
            }
            if y + 1 < h {
                d[i] = d[i].min(d[i + w] + 1);
            }
        }
    }
    d
}

/// An axis triad and the view direction in the bottom-left corner; returns its box.
fn legend(image: &mut RgbImage, camera: &Camera) -> Rect {
    let h = f64::from(image.height());
    let origin = (22.0, h - 22.0);
    let (right, up) = (Vector3::from(camera.right), Vector3::from(camera.up));
    let axes = [
        ("X", Vector3::x(), Rgb([200, 40, 40])),
        ("Y", Vector3::y(), Rgb([30, 150, 60])),
        ("Z", Vector3::z(), Rgb([40, 80, 210])),
    ];
    for (name, axis, color) in axes {
        let tip = (origin.0 + 15.0 * axis.dot(&right), origin.1 - 15.0 * axis.dot(&up));
        draw::line(image, origin, tip, color);
        draw::text_with_halo(image, tip.0 + 2.0 * (tip.0 - origin.0).signum() - 3.0, tip.1 - 6.0, 10.0, color, name);
    }
    let d = camera.towards_eye();
    let caption = format!("view from ({:+.2}, {:+.2}, {:+.2})", d.x, d.y, d.z);
    draw::text_with_halo(image, 44.0, h - 16.0, 10.0, Rgb([60, 60, 60]), &caption);
    let (tw, _) = draw::measure(&caption, 10.0);
    [0.0, h - 44.0, 48.0 + tw, h]
}

// ------------------------------------------------------------------------------ sketch view

/// The square of the sketch plane that the [0,1] x [0,1] view coordinates cover, in the
/// plane's local coordinates: `[u0, u0 + size] x [v0, v0 + size]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub u0: f64,
    pub v0: f64,
    pub size: f64,
}

/// The exact maps of a sketch view, and the existing edges in view coordinates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SketchMeta {
    pub frame: Frame,
    pub window: Window,
    /// Pixel `(x, y)` of view point `(vx, vy)` is `(grid[0] + vx * grid[2], grid[1] + vy * grid[2])`.
    pub grid: [f64; 3],
    /// Local plane coordinates of view point (vx, vy): `[u, v] = M [vx, vy, 1]`.
    pub view_to_local: [[f64; 3]; 2],
    /// 3D point of view point (vx, vy): `origin + vx * x_step + vy * y_step`.
    pub view_to_world: ViewToWorld,
    /// Existing edges projected onto the plane (T_t^geom,s).
    pub edges: Vec<ProjectedEdge>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ViewToWorld {
    pub origin: [f64; 3],
    pub x_step: [f64; 3],
    pub y_step: [f64; 3],
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectedEdge {
    pub id: String,
    /// The edge lies in the sketch plane.
    pub in_plane: bool,
    /// Samples along the projected edge, in view coordinates.
    pub points: Vec<[f64; 2]>,
}

impl SketchMeta {
    pub fn view_to_world(&self, vx: f64, vy: f64) -> [f64; 3] {
        let m = &self.view_to_world;
        std::array::from_fn(|i| m.origin[i] + vx * m.x_step[i] + vy * m.y_step[i])
    }

    /// View coordinates of the projection of a 3D point onto the plane.
    pub fn world_to_view(&self, p: [f64; 3]) -> [f64; 2] {
        let m = &self.view_to_world;
        let rel = Vector3::from(p) - Vector3::from(m.origin);
        let (xs, ys) = (Vector3::from(m.x_step), Vector3::from(m.y_step));
        [rel.dot(&xs) / xs.norm_squared(), rel.dot(&ys) / ys.norm_squared()]
    }

    pub fn view_to_pixel(&self, v: [f64; 2]) -> (f64, f64) {
        (self.grid[0] + v[0] * self.grid[2], self.grid[1] + v[1] * self.grid[2])
    }
}

const SKETCH_SAMPLES: usize = 24;

/// How far past the [0,1] grid a sketch view's picture reaches, in view units (its margin,
/// 15% of the side, over the grid's 70%, less a little for the tick labels).
pub const SKETCH_PICTURE_MARGIN: f64 = 0.2;

/// Whether a view point is within a sketch view's picture: edges there are labelled and
/// listed with their samples alike.
pub fn in_sketch_picture(p: [f64; 2]) -> bool {
    let range = -SKETCH_PICTURE_MARGIN..=1.0 + SKETCH_PICTURE_MARGIN;
    range.contains(&p[0]) && range.contains(&p[1])
}

/// The sketch plane seen face-on: a [0,1]^2 view-coordinate grid over `window` (default:
/// the part's outline on the plane, with a margin), the part's edges projected onto the
/// plane and labelled by ID.
pub fn sketch(scene: &Scene, state: &ModelState, frame: &Frame, window: Option<Window>, opts: &Options) -> View {
    let (o, ex, ey, n) = (
        Vector3::from(frame.origin),
        Vector3::from(frame.x_axis),
        Vector3::from(frame.y_axis),
        Vector3::from(frame.normal),
    );
    let local = |p: &Point3<f64>| ((p.coords - o).dot(&ex), (p.coords - o).dot(&ey));
    let window = window.unwrap_or_else(|| {
        let mut lo = (f64::INFINITY, f64::INFINITY);
        let mut hi = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        for p in scene.positions.iter().chain(scene.edges.iter().flatten()) {
            let (u, v) = local(p);
            lo = (lo.0.min(u), lo.1.min(v));
            hi = (hi.0.max(u), hi.1.max(v));
        }
        if !lo.0.is_finite() {
            return Window { u0: -50.0, v0: -50.0, size: 100.0 };
        }
        let size = (hi.0 - lo.0).max(hi.1 - lo.1).max(1e-6) * 1.2;
        Window { u0: (lo.0 + hi.0 - size) / 2.0, v0: (lo.1 + hi.1 - size) / 2.0, size }
    });
    let px = f64::from(opts.size);
    let margin = (px * 0.15).round();
    let grid_px = px - 2.0 * margin;
    let center_local = (window.u0 + window.size / 2.0, window.v0 + window.size / 2.0);
    let center = Point3::from(o + ex * center_local.0 + ey * center_local.1);
    let (scene_center, radius) = scene.bounding_sphere();
    let distance = 4.0 * (radius + (scene_center - center).norm()) + window.size;
    let camera = Camera::facing_plane(center, [ex, ey, n], grid_px / window.size, distance, opts.size, opts.size);

    let tolerance = 1e-6 * (1.0 + radius);
    let in_plane: Vec<bool> = scene
        .edges
        .iter()
        .map(|pl| !pl.is_empty() && pl.iter().all(|p| (p.coords - o).dot(&n).abs() <= tolerance))
        .collect();
    let mut style = Style::tagged();
    style.part_base = [226.0, 229.0, 234.0];
    style.part_gain = 18.0;
    let mut raster = Raster::new(opts.size, opts.size, SUPERSAMPLE, style.background);
    raster.draw_triangles(scene, &camera, &style);
    raster.draw_edges(scene, &camera, &style, |e| !in_plane[e], true, |_| [150.0, 150.0, 158.0]);
    style.edge_width = 1.5;
    raster.draw_edges(scene, &camera, &style, |e| in_plane[e], true, |_| [25.0, 25.0, 35.0]);
    let (mut image, ids) = raster.finish();

    let sketch_meta = {
        let s = window.size;
        let origin = o + ex * window.u0 + ey * (window.v0 + s);
        let edges = scene
            .edges
            .iter()
            .enumerate()
            .map(|(e, pl)| {
                let step = (pl.len() / SKETCH_SAMPLES).max(1);
                let mut points: Vec<[f64; 2]> = pl
                    .iter()
                    .step_by(step)
                    .map(|p| {
                        let (u, v) = local(p);
                        [(u - window.u0) / s, (window.v0 + s - v) / s]
                    })
                    .collect();
                if let Some(last) = pl.last().filter(|_| (pl.len() - 1) % step != 0) {
                    let (u, v) = local(last);
                    points.push([(u - window.u0) / s, (window.v0 + s - v) / s]);
                }
                ProjectedEdge { id: edge_id(state, e), in_plane: in_plane[e], points }
            })
            .collect();
        SketchMeta {
            frame: *frame,
            window,
            grid: [margin, margin, grid_px],
            view_to_local: [[s, 0.0, window.u0], [0.0, -s, window.v0 + s]],
            view_to_world: ViewToWorld { origin: origin.into(), x_step: (ex * s).into(), y_step: (-ey * s).into() },
            edges,
        }
    };
    draw_grid(&mut image, &ids, &sketch_meta);
    let in_window = |e: usize| sketch_meta.edges[e].points.iter().any(|p| in_sketch_picture(*p));
    let kinds = LabelKinds { edges: opts.labels.edges, faces: false, vertices: false };
    let (mut requests, unlabelled) =
        label_requests(&ids, state, scene, &camera, kinds, in_window, "covered by another edge or seen end-on");
    for r in &mut requests {
        let e = state.edges.iter().position(|edge| edge.id == r.id);
        if e.is_some_and(|e| in_plane.get(e).copied().unwrap_or(false)) {
            r.priority += 1e6;
        }
    }
    let grid_keep_out = [margin - 34.0, margin - 20.0, px - margin + 4.0, px - margin + 4.0];
    let (placed, unlabelled) = place_labels(&mut image, requests, unlabelled, &[grid_keep_out]);
    let mut meta = meta(&image, camera, placed, unlabelled);
    meta.sketch = Some(sketch_meta);
    View { image, meta, ids }
}

/// Grid lines every 0.05 (every 0.25 darker) with tick labels, under the edges.
fn draw_grid(image: &mut RgbImage, ids: &IdBuffers, meta: &SketchMeta) {
    let [gx, gy, g] = meta.grid;
    for k in 0..=20 {
        let t = f64::from(k) / 20.0;
        let major = k % 5 == 0;
        let color = if major { Rgb([120, 150, 200]) } else { Rgb([205, 218, 238]) };
        for i in 0..=g.round() as i64 {
            let along = gx + i as f64;
            let across = gx + t * g;
            for (x, y) in [(across, gy + i as f64), (along, gy + t * g)] {
                let (xi, yi) = (x.round() as i64, y.round() as i64);
                if ids.edge_at(xi, yi) == NO_ENTITY
                    && xi >= 0
                    && yi >= 0
                    && xi < i64::from(image.width())
                    && yi < i64::from(image.height())
                {
                    let keep = image.get_pixel(xi as u32, yi as u32);
                    // Lines go over the faint part and the background, never over edges.
                    if !major && keep.0 != [255, 255, 255] && keep.0.iter().all(|&c| c < 200) {
                        continue;
                    }
                    image.put_pixel(xi as u32, yi as u32, color);
                }
            }
        }
        if major {
            let tick = format!("{t:.2}");
            let (tw, th) = draw::measure(&tick, 10.0);
            draw::text_with_halo(image, gx + t * g - tw / 2.0, gy - th - 6.0, 10.0, Rgb([60, 80, 130]), &tick);
            draw::text_with_halo(image, gx - tw - 5.0, gy + t * g - th / 2.0 - 2.0, 10.0, Rgb([60, 80, 130]), &tick);
        }
    }
    // Which model direction each grid axis runs along, where the axes are named.
    let x_name = format!("x = {}", axis_name(meta.view_to_world.x_step));
    let (xw, _) = draw::measure(&x_name, 11.0);
    draw::text_with_halo(
        image,
        (gx + g - xw + 10.0).min(f64::from(image.width()) - xw - 4.0),
        gy - 32.0,
        11.0,
        Rgb([60, 80, 130]),
        &x_name,
    );
    draw::text_with_halo(
        image,
        gx - 40.0,
        gy + g + 6.0,
        11.0,
        Rgb([60, 80, 130]),
        &format!("y = {} (down)", axis_name(meta.view_to_world.y_step)),
    );
}

/// A model direction in words: `+X` along an axis, else its unit components
/// `(0.600, 0.800, 0.000)`.
pub fn axis_name(v: [f64; 3]) -> String {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if n == 0.0 {
        return "(0, 0, 0)".into();
    }
    let u = v.map(|x| x / n);
    for (i, name) in ["X", "Y", "Z"].iter().enumerate() {
        for sign in [1.0, -1.0] {
            if (0..3).all(|k| (u[k] - if k == i { sign } else { 0.0 }).abs() < 1e-6) {
                return format!("{}{name}", if sign > 0.0 { "+" } else { "-" });
            }
        }
    }
    format!("({:.3}, {:.3}, {:.3})", u[0] + 0.0, u[1] + 0.0, u[2] + 0.0)
}

const INSET_PLANE: [f64; 3] = [245.0, 140.0, 30.0];

/// Where a sketch view's grid lies in the model: the model seen from `opts.direction` (as
/// the target and the tagged view show it) with the grid's square on the sketch plane
/// filled translucent orange, its x edge (from view point (0,0) to (1,0)) and y edge
/// (to (0,1)) drawn and named, and the model's axes. `size` pixels square.
pub fn plane_inset(scene: &Scene, meta: &SketchMeta, opts: &Options, size: u32) -> RgbImage {
    let corners: Vec<Point3<f64>> = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
        .iter()
        .map(|v| Point3::from(meta.view_to_world(v[0], v[1])))
        .collect();
    // Frame the part and the square together.
    let mut lo = Vector3::repeat(f64::INFINITY);
    let mut hi = Vector3::repeat(f64::NEG_INFINITY);
    for p in scene.positions.iter().chain(corners.iter()) {
        lo = lo.inf(&p.coords);
        hi = hi.sup(&p.coords);
    }
    let center = Point3::from((lo + hi) / 2.0);
    let radius = ((hi - lo).norm() / 2.0).max(1e-6);
    let camera = Camera::framing(center, radius, Vector3::from(opts.direction), false, size, size, 0.8);
    let (mut image, _) = render(scene, &camera, &Style::tagged());
    let pixels: Vec<(f64, f64)> = corners.iter().filter_map(|p| crate::raster::to_pixel(&camera, p)).collect();
    if pixels.len() == 4 {
        fill_polygon(&mut image, &pixels, INSET_PLANE, 0.35);
        let dark = Rgb([170, 80, 10]);
        for k in 0..4 {
            draw::line(&mut image, pixels[k], pixels[(k + 1) % 4], dark);
        }
        for (end, name) in [(1, "x"), (3, "y")] {
            let (a, b) = (pixels[0], pixels[end]);
            for d in [-1.0, 0.0, 1.0] {
                draw::line(&mut image, (a.0 + d, a.1), (b.0 + d, b.1), Rgb([150, 40, 150]));
                draw::line(&mut image, (a.0, a.1 + d), (b.0, b.1 + d), Rgb([150, 40, 150]));
            }
            let along = (b.0 - a.0, b.1 - a.1);
            let norm = along.0.hypot(along.1).max(1e-9);
            let at = (b.0 + 9.0 * along.0 / norm - 4.0, b.1 + 9.0 * along.1 / norm - 7.0);
            draw::text_with_halo(&mut image, at.0, at.1, 13.0, Rgb([150, 40, 150]), name);
        }
        draw::text_with_halo(&mut image, pixels[0].0 - 12.0, pixels[0].1 - 16.0, 10.0, Rgb([150, 40, 150]), "(0,0)");
    }
    let length = (f64::from(size) * 0.09).max(12.0);
    draw_axes(&mut image, opts.direction, (length + 10.0, f64::from(size) - length - 10.0), length);
    image
}

/// Blend `color` over the inside of a convex or simple polygon (pixel coordinates).
fn fill_polygon(image: &mut RgbImage, polygon: &[(f64, f64)], color: [f64; 3], alpha: f64) {
    let (w, h) = (image.width() as i64, image.height() as i64);
    let y0 = polygon.iter().map(|p| p.1).fold(f64::INFINITY, f64::min).floor().max(0.0) as i64;
    let y1 = polygon.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max).ceil().min(h as f64 - 1.0) as i64;
    for y in y0..=y1 {
        let yc = y as f64 + 0.5;
        let mut xs: Vec<f64> = Vec::new();
        for k in 0..polygon.len() {
            let (a, b) = (polygon[k], polygon[(k + 1) % polygon.len()]);
            if (a.1 <= yc) != (b.1 <= yc) {
                xs.push(a.0 + (yc - a.1) / (b.1 - a.1) * (b.0 - a.0));
            }
        }
        xs.sort_by(f64::total_cmp);
        for pair in xs.chunks(2) {
            let [from, to] = pair else { continue };
            for x in (from.round().max(0.0) as i64)..(to.round().min(w as f64) as i64) {
                let p = image.get_pixel_mut(x as u32, y as u32);
                for (channel, over) in p.0.iter_mut().zip(color) {
                    *channel = (f64::from(*channel) * (1.0 - alpha) + over * alpha).round() as u8;
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------ preview

/// A candidate feature against the current model: added material in green, removed
/// material as a translucent red volume with its outline (the cut's new faces show through),
/// a new sketch's curves in orange, a new plane in purple; beside the target image when one
/// is given.
pub fn preview(p: &Preview, opts: &Options, target: Option<&RgbImage>) -> View {
    let mut scene = Scene::new(&p.after, &p.state);
    scene.add_overlay(&p.added, Material::Added);
    let mut removed = Scene::default();
    removed.add_overlay(&p.removed, Material::Removed);
    let polylines = |lines: &[Vec<[f64; 3]>]| -> Vec<Vec<Point3<f64>>> {
        lines.iter().map(|c| c.iter().map(|q| Point3::from(*q)).collect()).collect()
    };
    let camera = {
        // Framed on everything drawn, the removed volume and a new plane included.
        let mut all = scene.clone();
        all.add_overlay(&p.removed, Material::Removed);
        all.edges.extend(polylines(&p.sketch_curves));
        all.edges.extend(polylines(&p.plane_outline));
        camera_for(&all, opts, PREVIEW_FILL)
    };
    let style = Style::target();
    let mut raster = Raster::new(opts.size, opts.size, SUPERSAMPLE, style.background);
    raster.draw_triangles(&scene, &camera, &style);
    raster.draw_edges(&scene, &camera, &style, |_| true, false, |_| style.edge);
    let strokes = [(&p.sketch_curves, SKETCH_COLOR), (&p.plane_outline, PLANE_COLOR)];
    for (lines, color) in strokes.into_iter().filter(|(lines, _)| !lines.is_empty()) {
        let curves = Scene { edges: polylines(lines), ..Scene::default() };
        let mut curve_style = style.clone();
        curve_style.edge_width = 2.0;
        raster.draw_edges(&curves, &camera, &curve_style, |_| true, true, |_| color);
    }
    let (mut image, ids) = raster.finish();
    if !removed.triangles.is_empty() {
        // Where the removed volume is in front of what is left: the opening of a hole, the
        // space above a pocket's floor; not the hole's walls inside the material.
        let mut volume = Raster::new(opts.size, opts.size, SUPERSAMPLE, style.background);
        volume.draw_triangles(&removed, &camera, &style);
        let eps = (scene.bounding_sphere().1 * 2e-3) as f32;
        tint(&mut image, &volume.coverage_over(&raster, eps), style.removed);
    }
    // A legend of what this preview shows.
    let swatches = [
        ("added", style.added, !p.added.mesh.triangles.is_empty()),
        ("removed", style.removed, !removed.triangles.is_empty()),
        ("sketch", SKETCH_COLOR, !p.sketch_curves.is_empty()),
        ("plane", PLANE_COLOR, !p.plane_outline.is_empty()),
    ];
    let shown: Vec<(&str, [f32; 3])> = swatches.iter().filter(|s| s.2).map(|&(name, color, _)| (name, color)).collect();
    for (i, (name, color)) in shown.iter().enumerate() {
        let y = 8.0 + 16.0 * i as f64;
        draw::filled_rect(&mut image, &[8.0, y, 20.0, y + 12.0], draw::rgb(*color));
        draw::text(&mut image, 25.0, y - 1.0, 12.0, Rgb([40, 40, 40]), name);
    }
    if p.boolean_failed {
        let y = 8.0 + 16.0 * shown.len() as f64;
        draw::text(&mut image, 8.0, y, 12.0, Rgb([160, 40, 40]), "added/removed material unavailable");
    }
    let image = match target {
        None => image,
        Some(t) => side_by_side(&image, t),
    };
    View { meta: meta(&image, camera, Vec::new(), Vec::new()), image, ids }
}

const SKETCH_COLOR: [f32; 3] = [240.0, 140.0, 20.0];
const PLANE_COLOR: [f32; 3] = [150.0, 60.0, 200.0];
/// How much of the removed volume's colour covers what lies behind it.
const REMOVED_OPACITY: f32 = 0.4;

/// Lay a translucent colour over the pixels `coverage` marks, and an opaque, darker outline
/// around them.
fn tint(image: &mut RgbImage, coverage: &[f32], color: [f32; 3]) {
    let (w, h) = (image.width() as usize, image.height() as usize);
    let inside = |x: usize, y: usize| coverage[y * w + x] >= 0.5;
    let outline = color.map(|c| c * 0.6);
    for y in 0..h {
        for x in 0..w {
            let share = coverage[y * w + x];
            if share == 0.0 {
                continue;
            }
            let edge = inside(x, y)
                && (x == 0
                    || y == 0
                    || x + 1 == w
                    || y + 1 == h
                    || !inside(x - 1, y)
                    || !inside(x + 1, y)
                    || !inside(x, y - 1)
                    || !inside(x, y + 1));
            let pixel = image.get_pixel_mut(x as u32, y as u32);
            let (over, alpha) = if edge { (outline, 1.0) } else { (color, REMOVED_OPACITY * share) };
            for (c, o) in pixel.0.iter_mut().zip(over) {
                *c = (f32::from(*c) * (1.0 - alpha) + o * alpha).round().clamp(0.0, 255.0) as u8;
            }
        }
    }
}

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
        } else {
            format!(
                " (the candidate shifted by {} px right and {} px down to line up, as registration will after the \
                 step)",
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

    /// Where the outlines differ by 2 px or more: `; the target reaches 6 px (1.8 mm) further
    /// right, the candidate 3 px (0.9 mm) further down`.
    fn reach_text(&self, px_per_mm: f64) -> String {
        let sides = ["left", "right", "up", "down"];
        let parts: Vec<String> = self
            .reach_px
            .iter()
            .zip(sides)
            .filter(|(d, _)| d.abs() >= 2)
            .map(|(&d, side)| {
                let who = if d > 0 { "the target" } else { "the candidate" };
                let mm = d.abs() as f64 / px_per_mm.max(1e-9);
                format!("{who} reaches {} px ({mm:.1} mm) further {side}", d.abs())
            })
            .collect();
        if parts.is_empty() {
            "; the outlines' extremes agree within 1 px on every side".into()
        } else {
            format!("; at the outlines' extremes (in the picture's plane) {}", parts.join(", "))
        }
    }
}

pub const OVERLAP_BOTH: Rgb<u8> = Rgb([185, 185, 185]);
pub const OVERLAP_TARGET_ONLY: Rgb<u8> = Rgb([215, 55, 55]);
pub const OVERLAP_CANDIDATE_ONLY: Rgb<u8> = Rgb([50, 90, 215]);

/// The candidate's silhouette (what `ids` shows) over the target's (`target`, one flag per
/// pixel of the same framing), the candidate first shifted to line up with the target as
/// registration will after the step: grey where both show the part, red where only the
/// target does, blue where only the candidate does.
pub fn silhouette_overlap(ids: &IdBuffers, target: &[bool]) -> (RgbImage, Overlap) {
    let (w, h) = (ids.width as usize, ids.height as usize);
    let candidate: Vec<bool> = ids.covered.iter().zip(&ids.edge).map(|(&c, &e)| c || e != NO_ENTITY).collect();
    let target: Vec<bool> = (0..w * h).map(|i| target.get(i).copied().unwrap_or(false)).collect();
    let shift = [
        best_shift(&profile(&candidate, w, h, true), &profile(&target, w, h, true), w as i64 / 4),
        best_shift(&profile(&candidate, w, h, false), &profile(&target, w, h, false), h as i64 / 4),
    ];
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
    let bounds = |mask: &dyn Fn(usize, usize) -> bool| {
        let mut b = [i64::MAX, i64::MIN, i64::MAX, i64::MIN];
        for y in 0..h {
            for x in 0..w {
                if mask(x, y) {
                    b = [b[0].min(x as i64), b[1].max(x as i64), b[2].min(y as i64), b[3].max(y as i64)];
                }
            }
        }
        b
    };
    let (t, c) = (bounds(&|x, y| target[y * w + x]), bounds(&|x, y| candidate[y * w + x]));
    if t[0] <= t[1] && c[0] <= c[1] {
        let c = [c[0] + shift[0], c[1] + shift[0], c[2] + shift[1], c[3] + shift[1]];
        overlap.reach_px = [c[0] - t[0], t[1] - c[1], c[2] - t[2], t[3] - c[3]];
    }
    overlay_legend(&mut image, OVERLAP_BOTH);
    (image, overlap)
}

/// The legend of an overlay panel: where both agree (in `both`), target only, candidate only.
fn overlay_legend(image: &mut RgbImage, both: Rgb<u8>) {
    let legend = [("both", both), ("target only", OVERLAP_TARGET_ONLY), ("candidate only", OVERLAP_CANDIDATE_ONLY)];
    for (k, (name, color)) in legend.iter().enumerate() {
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
        )
    }
}

pub const LINES_MATCHED: Rgb<u8> = Rgb([60, 60, 60]);

/// The target's lines (`target_lines`, one flag per pixel of the candidate's framing) over
/// the candidate's visible edges (what `ids` shows), the candidate shifted by `shift` (as
/// [`silhouette_overlap`] found it): dark grey where they agree, red where only the target
/// has a line (an edge the candidate lacks or has elsewhere: a wall's inner side, a hole, a
/// slot), blue where only the candidate has one; the target's silhouette faint beneath.
/// Lines inside the outline show what a silhouette cannot: wall thickness, features on a face.
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
    // The candidate's edges in the target's frame.
    let candidate: Vec<bool> = (0..w * h)
        .map(|i| {
            let (x, y) = ((i % w) as i64 - shift[0], (i / w) as i64 - shift[1]);
            x >= 0
                && y >= 0
                && (x as usize) < w
                && (y as usize) < h
                && ids.edge[y as usize * w + x as usize] != NO_ENTITY
        })
        .collect();
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
            let color = if target[i] {
                counts.target_lines += 1;
                let matched = near(&candidate, xi, yi);
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
    overlay_legend(&mut image, LINES_MATCHED);
    (image, counts)
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

/// `panel` appended to the right of `image`, after a grey gutter, captioned.
pub fn append_panel(image: &RgbImage, panel: &RgbImage, caption: &str) -> RgbImage {
    let (w, h) = image.dimensions();
    let mut out = RgbImage::from_pixel(w + 4 + panel.width(), h.max(panel.height()), Rgb([255, 255, 255]));
    image::imageops::replace(&mut out, image, 0, 0);
    image::imageops::replace(&mut out, panel, i64::from(w) + 4, 0);
    for y in 0..out.height() {
        for x in w..w + 4 {
            out.put_pixel(x, y, Rgb([200, 200, 200]));
        }
    }
    draw::text(&mut out, f64::from(w) + 12.0, 6.0, 12.0, Rgb([40, 40, 40]), caption);
    out
}

fn side_by_side(left: &RgbImage, target: &RgbImage) -> RgbImage {
    let (w, h) = left.dimensions();
    let scaled = image::imageops::resize(target, w, h, image::imageops::FilterType::Triangle);
    let mut out = RgbImage::from_pixel(w * 2 + 4, h, Rgb([255, 255, 255]));
    image::imageops::replace(&mut out, left, 0, 0);
    image::imageops::replace(&mut out, &scaled, i64::from(w) + 4, 0);
    for y in 0..h {
        for x in w..w + 4 {
            out.put_pixel(x, y, Rgb([200, 200, 200]));
        }
    }
    draw::text(&mut out, f64::from(w) - 80.0, 6.0, 12.0, Rgb([40, 40, 40]), "candidate");
    draw::text(&mut out, f64::from(w) + 12.0, 6.0, 12.0, Rgb([40, 40, 40]), "target");
    out
}

/// A small triad of the model's axes as a view from `direction` shows them, drawn at pixel
/// `at` with arms `length` pixels long (red X, green Y, blue Z), so a picture says which way
/// the axes point.
pub fn draw_axes(image: &mut RgbImage, direction: [f64; 3], at: (f64, f64), length: f64) {
    let camera = Camera::framing(Point3::origin(), 1.0, Vector3::from(direction), false, 64, 64, 1.0);
    let colors = [Rgb([200, 40, 40]), Rgb([30, 150, 50]), Rgb([40, 80, 210])];
    for (i, name) in ["X", "Y", "Z"].iter().enumerate() {
        let (dx, dy) = (camera.right[i], -camera.up[i]);
        let tip = (at.0 + dx * length, at.1 + dy * length);
        for offset in [-0.5, 0.0, 0.5] {
            draw::line(image, (at.0 + offset, at.1), (tip.0 + offset, tip.1), colors[i]);
            draw::line(image, (at.0, at.1 + offset), (tip.0, tip.1 + offset), colors[i]);
        }
        let norm = dx.hypot(dy).max(1e-9);
        let label = (tip.0 + 6.0 * dx / norm - 4.0, tip.1 + 6.0 * dy / norm - 7.0);
        draw::text_with_halo(image, label.0, label.1, 13.0, colors[i], name);
    }
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
        let ids = IdBuffers { width: w, height: w, face: blank, edge, covered: vec![false; (w * w) as usize] };
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
        assert!(text.contains("the target reaches 4 px (2.0 mm) further up"), "{text}");
        assert!(same.describe(2.0).contains("agree within 1 px"), "{}", same.describe(2.0));
    }
}
