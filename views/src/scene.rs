//! Geometry to draw: triangles tagged with their face, edge polylines, vertices.

use freecad_bridge::{ModelState, Tessellation};
use nalgebra::{Point3, Vector3};

/// What a triangle is made of, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Material {
    Part,
    /// Material a candidate feature adds.
    Added,
    /// Material a candidate feature removes.
    Removed,
}

/// A mesh whose triangles know their B-rep face, plus the B-rep edges and vertices.
#[derive(Debug, Clone, Default)]
pub struct Scene {
    pub positions: Vec<Point3<f64>>,
    /// Smooth normals within a face (vertices are not shared across faces).
    pub normals: Vec<Vector3<f64>>,
    pub triangles: Vec<[u32; 3]>,
    /// 0-based face index of each triangle (`F(i+1)`); `u32::MAX` for overlay material.
    pub triangle_face: Vec<u32>,
    pub triangle_material: Vec<Material>,
    /// Polyline of edge `E(i+1)`.
    pub edges: Vec<Vec<Point3<f64>>>,
    /// Point of vertex `V(i+1)`.
    pub vertices: Vec<Point3<f64>>,
    /// Edge `E(i+1)` is a seam: where a closed surface (a cylinder's side) meets itself.
    /// Renders of real parts draw no line there, so no view does.
    pub seams: Vec<bool>,
}

pub const NO_ENTITY: u32 = u32::MAX;

impl Scene {
    /// The model as the worker tessellated it; `state` gives the vertices.
    pub fn new(tessellation: &Tessellation, state: &ModelState) -> Self {
        let mut scene = Scene::default();
        scene.add_mesh(tessellation, Material::Part, true);
        let t = tessellation;
        for w in t.edge_offsets.windows(2) {
            let points = (w[0] as usize..w[1] as usize).filter_map(|i| point(&t.edge_points, i)).collect::<Vec<_>>();
            scene.edges.push(points);
        }
        scene.vertices = state.vertices.iter().map(|v| Point3::from(v.point)).collect();
        scene.seams = state.seams();
        scene
    }

    pub fn is_seam(&self, edge: usize) -> bool {
        self.seams.get(edge).copied().unwrap_or(false)
    }

    /// Add triangles of another material (a preview's added or removed solid). Overlay
    /// triangles carry no face ID.
    pub fn add_overlay(&mut self, tessellation: &Tessellation, material: Material) {
        self.add_mesh(tessellation, material, false);
    }

    fn add_mesh(&mut self, t: &Tessellation, material: Material, tag_faces: bool) {
        let base = self.positions.len() as u32;
        let n = t.mesh.positions.len() / 3;
        self.positions.extend((0..n).filter_map(|i| point(&t.mesh.positions, i)));
        let mut normals = vec![Vector3::zeros(); n];
        for (face, w) in t.face_offsets.windows(2).enumerate() {
            for tri in w[0] as usize..w[1] as usize {
                let Some(idx) = t.mesh.triangles.get(tri * 3..tri * 3 + 3) else { continue };
                let [a, b, c] = [idx[0] as usize, idx[1] as usize, idx[2] as usize];
                if a >= n || b >= n || c >= n {
                    continue;
                }
                let p = |i: usize| self.positions[base as usize + i];
                // Area-weighted: the cross product's length is twice the area.
                let normal = (p(b) - p(a)).cross(&(p(c) - p(a)));
                for i in [a, b, c] {
                    normals[i] += normal;
                }
                self.triangles.push([a as u32 + base, b as u32 + base, c as u32 + base]);
                self.triangle_face.push(if tag_faces { face as u32 } else { NO_ENTITY });
                self.triangle_material.push(material);
            }
        }
        self.normals.extend(normals.into_iter().map(|v| v.try_normalize(1e-300).unwrap_or_else(Vector3::z)));
    }

    /// Centre and radius of a sphere around everything in the scene.
    pub fn bounding_sphere(&self) -> (Point3<f64>, f64) {
        let points = self.positions.iter().chain(self.edges.iter().flatten());
        let mut lo = Vector3::repeat(f64::INFINITY);
        let mut hi = Vector3::repeat(f64::NEG_INFINITY);
        for p in points {
            lo = lo.inf(&p.coords);
            hi = hi.sup(&p.coords);
        }
        if !lo.x.is_finite() {
            return (Point3::origin(), 1.0);
        }
        let center = Point3::from((lo + hi) / 2.0);
        let radius = ((hi - lo).norm() / 2.0).max(1e-9);
        (center, radius)
    }
}

fn point(flat: &[f64], i: usize) -> Option<Point3<f64>> {
    flat.get(i * 3..i * 3 + 3).map(|p| Point3::new(p[0], p[1], p[2]))
}
