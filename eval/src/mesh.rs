//! Triangle meshes of normalised shapes, and the mesh-level checks (watertight, components).

use std::collections::HashMap;

use freecad_bridge::TriangleMesh;

/// A triangle mesh with checked indices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mesh {
    pub positions: Vec<[f64; 3]>,
    pub triangles: Vec<[u32; 3]>,
}

impl Mesh {
    /// Take the worker's flat arrays, refusing out-of-range indices and non-finite points.
    pub fn from_flat(mesh: TriangleMesh) -> Result<Mesh, String> {
        if !mesh.positions.len().is_multiple_of(3) || !mesh.triangles.len().is_multiple_of(3) {
            return Err("the mesh arrays are not triples".into());
        }
        let positions: Vec<[f64; 3]> = mesh.positions.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        if positions.iter().flatten().any(|x| !x.is_finite()) {
            return Err("the mesh has non-finite coordinates".into());
        }
        let n = positions.len() as u32;
        let triangles: Vec<[u32; 3]> = mesh.triangles.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        if triangles.iter().flatten().any(|&i| i >= n) {
            return Err("the mesh has a triangle index out of range".into());
        }
        if triangles.is_empty() {
            return Err("the mesh has no triangles".into());
        }
        Ok(Mesh { positions, triangles })
    }

    pub fn corners(&self, t: [u32; 3]) -> [[f64; 3]; 3] {
        t.map(|i| self.positions[i as usize])
    }

    pub fn bbox(&self) -> ([f64; 3], [f64; 3]) {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &self.positions {
            for i in 0..3 {
                lo[i] = lo[i].min(p[i]);
                hi[i] = hi[i].max(p[i]);
            }
        }
        (lo, hi)
    }

    /// The mesh with each coordinate multiplied by `flip` (a proper sign flip keeps the
    /// triangles' orientation, so indices stay as they are).
    pub fn flipped(&self, flip: [f64; 3]) -> Mesh {
        Mesh {
            positions: self.positions.iter().map(|p| [p[0] * flip[0], p[1] * flip[1], p[2] * flip[2]]).collect(),
            triangles: self.triangles.clone(),
        }
    }
}

/// Twice the area of a triangle.
pub fn double_area(c: &[[f64; 3]; 3]) -> f64 {
    let u = sub(c[1], c[0]);
    let v = sub(c[2], c[0]);
    let n = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]];
    (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt()
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// Watertightness and connected components, after merging vertices closer than `tolerance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    /// Every edge is shared by exactly two triangles.
    pub watertight: bool,
    /// Groups of triangles connected through shared vertices.
    pub components: usize,
}

/// The CadQueryEval mesh checks: vertices within `tolerance` of each other are one vertex
/// (the first one met, so the result is deterministic), degenerate triangles are dropped.
pub fn topology(mesh: &Mesh, tolerance: f64) -> Topology {
    let merged = merge_vertices(&mesh.positions, tolerance);
    let mut edges: HashMap<(u32, u32), u32> = HashMap::new();
    let mut parent: Vec<u32> = (0..mesh.positions.len() as u32).collect();
    let mut used = vec![false; mesh.positions.len()];
    for t in &mesh.triangles {
        let [a, b, c] = t.map(|i| merged[i as usize]);
        if a == b || b == c || a == c {
            continue;
        }
        for (u, v) in [(a, b), (b, c), (c, a)] {
            *edges.entry((u.min(v), u.max(v))).or_insert(0) += 1;
            union(&mut parent, u, v);
        }
        for v in [a, b, c] {
            used[v as usize] = true;
        }
    }
    let watertight = !edges.is_empty() && edges.values().all(|&n| n == 2);
    let mut roots: Vec<u32> =
        (0..parent.len() as u32).filter(|&v| used[v as usize]).map(|v| find(&mut parent, v)).collect();
    roots.sort_unstable();
    roots.dedup();
    Topology { watertight, components: roots.len() }
}

fn merge_vertices(points: &[[f64; 3]], tolerance: f64) -> Vec<u32> {
    let cell = |p: &[f64; 3]| p.map(|x| (x / tolerance).floor() as i64);
    let mut grid: HashMap<[i64; 3], Vec<u32>> = HashMap::new();
    let mut out = Vec::with_capacity(points.len());
    for (i, p) in points.iter().enumerate() {
        let c = cell(p);
        let mut found = None;
        'search: for dx in -1..=1 {
            for dy in -1..=1 {
                for dz in -1..=1 {
                    if let Some(list) = grid.get(&[c[0] + dx, c[1] + dy, c[2] + dz]) {
                        for &j in list {
                            let q = points[j as usize];
                            let d2 = (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2);
                            if d2 <= tolerance * tolerance {
                                found = Some(j);
                                break 'search;
                            }
                        }
                    }
                }
            }
        }
        out.push(match found {
            Some(j) => j,
            None => {
                grid.entry(c).or_default().push(i as u32);
                i as u32
            }
        });
    }
    out
}

fn find(parent: &mut [u32], mut v: u32) -> u32 {
    while parent[v as usize] != v {
        parent[v as usize] = parent[parent[v as usize] as usize];
        v = parent[v as usize];
    }
    v
}

fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        // The smaller root wins, so the result does not depend on the order of unions.
        parent[ra.max(rb) as usize] = ra.min(rb);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An axis-aligned box as 12 outward-facing triangles, each face with its own vertices
    /// (as a per-face tessellation delivers them).
    pub fn box_mesh(lo: [f64; 3], hi: [f64; 3]) -> Mesh {
        let mut m = Mesh::default();
        let corner = |i: usize| {
            [
                if i & 1 == 0 { lo[0] } else { hi[0] },
                if i & 2 == 0 { lo[1] } else { hi[1] },
                if i & 4 == 0 { lo[2] } else { hi[2] },
            ]
        };
        // Faces as corner indices, counter-clockwise seen from outside.
        let faces = [[0, 2, 3, 1], [4, 5, 7, 6], [0, 1, 5, 4], [2, 6, 7, 3], [0, 4, 6, 2], [1, 3, 7, 5]];
        for f in faces {
            let base = m.positions.len() as u32;
            m.positions.extend(f.map(corner));
            m.triangles.push([base, base + 1, base + 2]);
            m.triangles.push([base, base + 2, base + 3]);
        }
        m
    }

    #[test]
    fn a_box_with_duplicated_face_vertices_is_watertight_and_one_component() {
        let t = topology(&box_mesh([0.0; 3], [1.0, 2.0, 3.0]), 1e-4);
        assert_eq!(t, Topology { watertight: true, components: 1 });
    }

    #[test]
    fn two_boxes_are_two_components_and_an_open_box_is_not_watertight() {
        let mut two = box_mesh([0.0; 3], [1.0; 3]);
        let other = box_mesh([2.0; 3], [3.0; 3]);
        let base = two.positions.len() as u32;
        two.positions.extend(other.positions);
        two.triangles.extend(other.triangles.iter().map(|t| t.map(|i| i + base)));
        assert_eq!(topology(&two, 1e-4), Topology { watertight: true, components: 2 });
        let mut open = box_mesh([0.0; 3], [1.0; 3]);
        open.triangles.truncate(10);
        assert!(!topology(&open, 1e-4).watertight);
    }
}
