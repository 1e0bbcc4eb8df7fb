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

/// What a model looks like at the framing of Stage 3's candidate panel (the preview's,
/// on S_t), without labels or overlays: which face and edge each pixel shows. The fit
/// compares these with the target's silhouette and lines many times per step, so it is the
/// cheapest render there is.
pub fn outline(scene: &Scene, opts: &Options) -> IdBuffers {
    render(scene, &outline_camera(scene, opts), &Style::target()).1
}

/// The camera of [`outline`]: where a point of the model lands in its pixels.
pub fn outline_camera(scene: &Scene, opts: &Options) -> Camera {
    camera_for(scene, opts, PREVIEW_FILL)
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

/// A caption in the top left corner of a panel, as [`append_panel`] writes one.
pub fn caption(image: &mut RgbImage, text: &str) {
    draw::text(image, 8.0, 6.0, 12.0, Rgb([40, 40, 40]), text);
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
