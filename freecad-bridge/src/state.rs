//! The model state after a command: the entity table with IDs that commands can name.
//!
//! `F12`, `E33`, `V5` map one-to-one onto FreeCAD's sub-element names of the current shape
//! (`Face12`, `Edge33`, `Vertex5`), so they are valid exactly for the state they came from.
//! With several bodies, each body's entities are numbered on their own and carry its name
//! (`B2.F12`; body B1's carry none); `faces`, `edges` and `vertices` list body B1's first.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::{EntityId, EntityKind};

pub type Point3 = [f64; 3];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelState {
    /// One valid solid (at least one solid and a valid B-rep).
    pub valid: bool,
    /// No shape at all yet.
    pub empty: bool,
    pub volume: f64,
    pub area: f64,
    pub solids: usize,
    pub bbox: Option<BoundingBox>,
    /// Each body's faces and solid count (empty for a one-body document with no solid yet).
    pub bodies: Vec<Body>,
    /// The body commands work on, when the document has several (absent: B1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_body: Option<String>,
    pub faces: Vec<Face>,
    pub edges: Vec<Edge>,
    pub vertices: Vec<Vertex>,
    /// Sketches, construction planes and solid features in body order.
    #[serde(default)]
    pub features: Vec<Feature>,
}

impl Default for ModelState {
    fn default() -> Self {
        ModelState::empty()
    }
}

/// An axis-aligned box.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BoundingBox {
    pub min: Point3,
    pub max: Point3,
}

impl BoundingBox {
    pub fn diagonal(&self) -> f64 {
        (0..3).map(|i| (self.max[i] - self.min[i]).powi(2)).sum::<f64>().sqrt()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Body {
    pub id: String,
    pub faces: Vec<String>,
    pub solids: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaceKind {
    Plane,
    Cylinder,
    Cone,
    Sphere,
    Torus,
    Bspline,
    Other,
}

impl FaceKind {
    /// `planar`, `cylindrical`...: the kind as prompts and selectors name it (`None` for a
    /// free-form or unknown surface).
    pub fn adjective(self) -> Option<&'static str> {
        match self {
            FaceKind::Plane => Some("planar"),
            FaceKind::Cylinder => Some("cylindrical"),
            FaceKind::Cone => Some("conical"),
            FaceKind::Sphere => Some("spherical"),
            FaceKind::Torus => Some("toroidal"),
            FaceKind::Bspline | FaceKind::Other => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Face {
    pub id: String,
    pub kind: FaceKind,
    pub area: f64,
    pub centroid: Point3,
    /// Outward normal of a planar face.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normal: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub center: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_radius: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_angle: Option<f64>,
    pub edges: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    Line,
    Circle,
    Ellipse,
    Bspline,
    Degenerate,
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub id: String,
    pub kind: EdgeKind,
    pub length: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub midpoint: Option<Point3>,
    #[serde(default)]
    pub closed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub center: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<Point3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Point3>,
    pub vertices: Vec<String>,
}

impl Edge {
    /// A straight edge from `start` to `end` with its length and midpoint, no vertices
    /// named: what tests and hand-made states need.
    pub fn straight(id: &str, start: Point3, end: Point3) -> Edge {
        let mid = [0, 1, 2].map(|i| (start[i] + end[i]) / 2.0);
        let length = (0..3).map(|i| (end[i] - start[i]).powi(2)).sum::<f64>().sqrt();
        Edge {
            id: id.into(),
            kind: EdgeKind::Line,
            length,
            start: Some(start),
            end: Some(end),
            midpoint: Some(mid),
            closed: false,
            center: None,
            radius: None,
            axis: None,
            direction: None,
            vertices: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vertex {
    pub id: String,
    pub point: Point3,
}

/// A document feature: `S1` sketches, `P1` planes, `Pad`, `Pocket001`...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feature {
    pub name: String,
    /// FreeCAD type, e.g. `Sketcher::SketchObject`, `PartDesign::Pad`.
    #[serde(rename = "type")]
    pub type_id: String,
    /// The body it belongs to, when the document has several (absent: B1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Placement of a sketch or plane: the local frame its 2D coordinates live in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<Frame>,
}

/// A local frame: a sketch point (u, v) lies at `origin + u * x_axis + v * y_axis`.
/// The one frame type of the bridge and the importers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    pub origin: Point3,
    pub x_axis: Point3,
    pub y_axis: Point3,
    pub normal: Point3,
}

impl Frame {
    /// The frame OCCT's `gp_Ax3(origin, normal, x_dir)` builds: the normal wins and the
    /// x direction is made perpendicular to it (CadQuery's `Plane` does exactly this).
    /// `None` when the normal is zero or the x direction is parallel to it.
    pub fn from_normal_x(origin: Point3, normal: Point3, x_dir: Point3) -> Option<Frame> {
        use crate::geometry::{cross, unit};
        let normal = unit(normal)?;
        let x_axis = unit(cross(normal, cross(x_dir, normal)))?;
        Some(Frame { origin, x_axis, y_axis: cross(normal, x_axis), normal })
    }

    /// The 3D point of local sketch coordinates (u, v).
    pub fn to_global(&self, u: f64, v: f64) -> Point3 {
        use crate::geometry::{add, scale};
        add(self.origin, add(scale(self.x_axis, u), scale(self.y_axis, v)))
    }

    /// How far a 3D point lies from the frame's plane, along its normal (signed).
    pub fn height(&self, p: Point3) -> f64 {
        (0..3).map(|i| (p[i] - self.origin[i]) * self.normal[i]).sum()
    }

    /// Local sketch coordinates of a 3D point projected onto the frame's plane (the
    /// inverse of [`Frame::to_global`] on the plane).
    pub fn to_local(&self, p: Point3) -> [f64; 2] {
        let rel: Point3 = std::array::from_fn(|i| p[i] - self.origin[i]);
        let dot = |a: &Point3| rel[0] * a[0] + rel[1] * a[1] + rel[2] * a[2];
        [dot(&self.x_axis), dot(&self.y_axis)]
    }
}

pub const SKETCH_TYPE: &str = "Sketcher::SketchObject";
pub const PLANE_TYPE: &str = "PartDesign::Plane";

impl ModelState {
    /// Which edges (in the order of `edges`) are seams: where a closed surface such as a
    /// cylinder's side meets itself. Only one face bounds a seam, and that face is curved;
    /// every other edge of a solid lies between two faces. Renders of real parts draw no line
    /// there.
    pub fn seams(&self) -> Vec<bool> {
        let mut bounding: BTreeMap<&str, (usize, bool)> = BTreeMap::new();
        for face in &self.faces {
            for edge in &face.edges {
                let entry = bounding.entry(edge.as_str()).or_insert((0, true));
                entry.0 += 1;
                entry.1 &= face.kind != FaceKind::Plane;
            }
        }
        self.edges.iter().map(|e| bounding.get(e.id.as_str()).is_some_and(|&(n, curved)| n == 1 && curved)).collect()
    }

    /// The state of an empty document.
    pub fn empty() -> Self {
        ModelState {
            valid: false,
            empty: true,
            volume: 0.0,
            area: 0.0,
            solids: 0,
            bbox: None,
            bodies: Vec::new(),
            active_body: None,
            faces: Vec::new(),
            edges: Vec::new(),
            vertices: Vec::new(),
            features: Vec::new(),
        }
    }

    /// How many entities of a kind exist, in every body.
    pub fn count(&self, kind: EntityKind) -> usize {
        match kind {
            EntityKind::Face => self.faces.len(),
            EntityKind::Edge => self.edges.len(),
            EntityKind::Vertex => self.vertices.len(),
        }
    }

    /// How many entities of a kind body `body` (1-based) has.
    pub fn count_in(&self, body: usize, kind: EntityKind) -> usize {
        let ids: Vec<&String> = match kind {
            EntityKind::Face => self.faces.iter().map(|f| &f.id).collect(),
            EntityKind::Edge => self.edges.iter().map(|e| &e.id).collect(),
            EntityKind::Vertex => self.vertices.iter().map(|v| &v.id).collect(),
        };
        ids.into_iter().filter(|id| body_of(id) == body).count()
    }

    /// How many bodies the document has (at least one).
    pub fn body_count(&self) -> usize {
        self.bodies.len().max(1)
    }

    /// The body commands work on, 1-based.
    pub fn active_body_number(&self) -> usize {
        self.active_body.as_deref().and_then(crate::command::body_number).unwrap_or(1)
    }

    /// Whether an entity ID names an entity of the active body (the only ones a command may
    /// attach to, project or change).
    pub fn in_active_body(&self, id: &str) -> bool {
        body_of(id) == self.active_body_number()
    }

    /// Every body holds exactly one solid, and the B-rep is valid: the model a finished
    /// program must leave.
    pub fn one_solid_per_body(&self) -> bool {
        self.valid && self.solids == self.body_count() && self.bodies.iter().all(|b| b.solids == 1)
    }

    /// The position of an entity in `faces`, `edges` or `vertices`.
    pub fn position(&self, id: EntityId) -> Option<usize> {
        let text = id.to_string();
        match id.kind {
            EntityKind::Face => self.faces.iter().position(|f| f.id == text),
            EntityKind::Edge => self.edges.iter().position(|e| e.id == text),
            EntityKind::Vertex => self.vertices.iter().position(|v| v.id == text),
        }
    }

    pub fn face(&self, id: EntityId) -> Option<&Face> {
        (id.kind == EntityKind::Face).then(|| self.position(id).map(|i| &self.faces[i])).flatten()
    }

    pub fn edge(&self, id: EntityId) -> Option<&Edge> {
        (id.kind == EntityKind::Edge).then(|| self.position(id).map(|i| &self.edges[i])).flatten()
    }

    pub fn feature(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }

    /// The same entities under the same IDs: kinds and positions agree index by index (to
    /// 1e-6 of the part's size; the kernel's arithmetic may differ in the last bits).
    pub fn same_numbering(&self, other: &ModelState) -> bool {
        let near = Near::of(self);
        let (close, close_opt) = (|a, b| near.point(a, b), |a, b| near.optional(a, b));
        self.faces.len() == other.faces.len()
            && self.edges.len() == other.edges.len()
            && self.vertices.len() == other.vertices.len()
            && self
                .faces
                .iter()
                .zip(&other.faces)
                .all(|(a, b)| a.id == b.id && a.kind == b.kind && close(a.centroid, b.centroid))
            && self
                .edges
                .iter()
                .zip(&other.edges)
                .all(|(a, b)| a.id == b.id && a.kind == b.kind && close_opt(a.midpoint, b.midpoint))
            && self.vertices.iter().zip(&other.vertices).all(|(a, b)| a.id == b.id && close(a.point, b.point))
    }

    /// The entity of `other` that each entity of this state is, by geometric signature:
    /// kind and position (a face's centroid, an edge's midpoint, a vertex's point) to 1e-6
    /// of the part's size, and a face's area or an edge's length to 1e-6 relative. Only
    /// entities with exactly one match on each side are mapped; the others are listed as
    /// ambiguous or missing.
    pub fn match_entities(&self, other: &ModelState) -> EntityMatch {
        let near = Near::of(self);
        let (close, close_opt) = (|a, b| near.point(a, b), |a, b| near.optional(a, b));
        let scale = near.scale;
        let same_size = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(scale * scale * 1e-12);
        let mut out = EntityMatch::default();
        // Bodies may overlap, so an entity only ever matches one of its own body.
        let body = |a: &String, b: &String| body_of(a) == body_of(b);
        let faces = |a: &Face, b: &Face| {
            body(&a.id, &b.id) && a.kind == b.kind && close(a.centroid, b.centroid) && same_size(a.area, b.area)
        };
        let edges = |a: &Edge, b: &Edge| {
            body(&a.id, &b.id) && a.kind == b.kind && close_opt(a.midpoint, b.midpoint) && same_size(a.length, b.length)
        };
        let vertices = |a: &Vertex, b: &Vertex| body(&a.id, &b.id) && close(a.point, b.point);
        pair_up(&self.faces, &other.faces, |f| &f.id, faces, &mut out);
        pair_up(&self.edges, &other.edges, |e| &e.id, edges, &mut out);
        pair_up(&self.vertices, &other.vertices, |v| &v.id, vertices, &mut out);
        out
    }

    /// The names of features of one FreeCAD type.
    pub fn features_of(&self, type_id: &str) -> impl Iterator<Item = &str> {
        self.features.iter().filter(move |f| f.type_id == type_id).map(|f| f.name.as_str())
    }
}

/// The body (1-based) an entity ID of the state belongs to.
fn body_of(id: &str) -> usize {
    id.parse::<EntityId>().map_or(1, |e| e.body)
}

/// Positions equal to 1e-6 of the part's size (the kernel's arithmetic may differ in the
/// last bits from one process to another).
struct Near {
    scale: f64,
}

impl Near {
    fn of(state: &ModelState) -> Near {
        Near { scale: state.bbox.map_or(1.0, |b| b.diagonal()).max(1e-9) }
    }

    fn point(&self, a: Point3, b: Point3) -> bool {
        (0..3).all(|i| (a[i] - b[i]).abs() <= 1e-6 * self.scale)
    }

    fn optional(&self, a: Option<Point3>, b: Option<Point3>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => self.point(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

/// How the entities of one state correspond to another's ([`ModelState::match_entities`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntityMatch {
    /// ID here -> ID there, for entities matched one to one.
    pub map: BTreeMap<String, String>,
    /// IDs whose signature fits several entities there, or several here.
    pub ambiguous: Vec<String>,
    /// IDs with no entity of that signature there.
    pub missing: Vec<String>,
}

impl EntityMatch {
    /// Whether the match changes any ID.
    pub fn renumbers(&self) -> bool {
        self.map.iter().any(|(a, b)| a != b)
    }
}

fn pair_up<T>(
    here: &[T],
    there: &[T],
    id: impl Fn(&T) -> &String,
    same: impl Fn(&T, &T) -> bool,
    out: &mut EntityMatch,
) {
    for a in here {
        let candidates: Vec<&T> = there.iter().filter(|b| same(a, b)).collect();
        match candidates.as_slice() {
            [] => out.missing.push(id(a).clone()),
            [b] if here.iter().filter(|c| same(c, b)).count() == 1 => {
                out.map.insert(id(a).clone(), id(b).clone());
            }
            _ => out.ambiguous.push(id(a).clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(id: &str, centroid: Point3) -> Face {
        Face {
            id: id.into(),
            kind: FaceKind::Plane,
            area: 1.0,
            centroid,
            normal: None,
            axis: None,
            center: None,
            radius: None,
            minor_radius: None,
            semi_angle: None,
            edges: Vec::new(),
        }
    }

    #[test]
    fn renumbered_entities_are_told_apart_from_round_off() {
        let mut a = ModelState::empty();
        a.bbox = Some(BoundingBox { min: [0.0; 3], max: [10.0; 3] });
        a.faces = vec![face("F1", [0.0, 0.0, 0.0]), face("F2", [5.0, 5.0, 10.0])];
        let mut noisy = a.clone();
        noisy.faces[1].centroid[2] += 1e-12;
        assert!(a.same_numbering(&noisy));
        let mut swapped = a.clone();
        swapped.faces.swap(0, 1);
        assert!(!a.same_numbering(&swapped));
    }

    #[test]
    fn entities_are_matched_by_signature_and_doubles_are_ambiguous() {
        let mut a = ModelState::empty();
        a.bbox = Some(BoundingBox { min: [0.0; 3], max: [10.0; 3] });
        a.faces = vec![face("F1", [0.0, 0.0, 0.0]), face("F2", [5.0, 5.0, 10.0]), face("F3", [5.0, 0.0, 5.0])];
        let mut renumbered = a.clone();
        renumbered.faces.rotate_left(1);
        for (i, f) in renumbered.faces.iter_mut().enumerate() {
            f.id = format!("F{}", i + 1);
        }
        renumbered.faces[0].centroid[0] += 1e-10; // the kernel's last bits
        let m = a.match_entities(&renumbered);
        let expected: BTreeMap<String, String> =
            [("F1", "F3"), ("F2", "F1"), ("F3", "F2")].iter().map(|(x, y)| (x.to_string(), y.to_string())).collect();
        assert_eq!(m.map, expected);
        assert!(m.renumbers() && m.ambiguous.is_empty() && m.missing.is_empty());

        // Two faces of one signature: neither can be told from the other.
        let mut doubled = a.clone();
        doubled.faces.push(face("F4", [5.0, 5.0, 10.0]));
        let m = doubled.match_entities(&doubled);
        assert_eq!(m.ambiguous, ["F2", "F4"]);
        assert_eq!(m.map.get("F1").map(String::as_str), Some("F1"));
        let m = a.match_entities(&ModelState { faces: a.faces[..2].to_vec(), ..a.clone() });
        assert_eq!(m.missing, ["F3"]);
    }
}
