//! Voxel IoU, the fallback where a kernel boolean fails: both meshes are voxelised on one
//! grid of 128 cells per axis over their common bounding box; a cell is inside when a ray
//! along z from below crosses the surface an odd number of times before the cell's centre
//! (ray-parity column fill).

use rayon::prelude::*;

use crate::mesh::Mesh;

/// Cells per axis.
pub const RESOLUTION: usize = 128;

/// Voxel IoU of two closed meshes.
pub fn voxel_iou(a: &Mesh, b: &Mesh, resolution: usize) -> Result<f64, String> {
    let (alo, ahi) = a.bbox();
    let (blo, bhi) = b.bbox();
    let lo = [0, 1, 2].map(|i| alo[i].min(blo[i]));
    let hi = [0, 1, 2].map(|i| ahi[i].max(bhi[i]));
    let grid = Grid::new(lo, hi, resolution)?;
    let (va, vb) = rayon::join(|| grid.fill(a), || grid.fill(b));
    let (mut common, mut union) = (0u64, 0u64);
    for (x, y) in va.iter().zip(&vb) {
        common += u64::from(*x && *y);
        union += u64::from(*x || *y);
    }
    if union == 0 {
        return Err("neither mesh encloses a voxel centre".into());
    }
    Ok(common as f64 / union as f64)
}

struct Grid {
    lo: [f64; 3],
    cell: [f64; 3],
    n: usize,
}

impl Grid {
    fn new(lo: [f64; 3], hi: [f64; 3], n: usize) -> Result<Grid, String> {
        let cell = [0, 1, 2].map(|i| (hi[i] - lo[i]) / n as f64);
        if cell.iter().any(|c| !(c.is_finite() && *c > 0.0)) || n == 0 {
            return Err("the meshes have a flat or empty bounding box".into());
        }
        Ok(Grid { lo, cell, n })
    }

    /// The x or y of column `i`'s ray. A tiny irrational offset keeps rays off the mesh
    /// vertices and edges that CAD geometry puts at round coordinates, where one crossing
    /// could count twice or not at all.
    fn ray(&self, axis: usize, i: usize) -> f64 {
        let jitter = [std::f64::consts::SQRT_2, std::f64::consts::E][axis] * 1e-6;
        self.lo[axis] + (i as f64 + 0.5 + jitter) * self.cell[axis]
    }

    /// Occupancy, index `(i * n + j) * n + k` for cell (x i, y j, z k).
    fn fill(&self, mesh: &Mesh) -> Vec<bool> {
        let n = self.n;
        // Crossings per column, gathered triangle by triangle (a triangle covers few columns).
        let mut crossings: Vec<Vec<f64>> = vec![Vec::new(); n * n];
        for t in &mesh.triangles {
            let [a, b, c] = mesh.corners(*t);
            let d = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
            if d.abs() <= f64::MIN_POSITIVE {
                continue; // seen edge-on from below: no ray crosses its interior
            }
            let range = |axis: usize| {
                let lo = a[axis].min(b[axis]).min(c[axis]);
                let hi = a[axis].max(b[axis]).max(c[axis]);
                let first = ((lo - self.lo[axis]) / self.cell[axis] - 0.5).ceil().max(0.0) as usize;
                let last = ((hi - self.lo[axis]) / self.cell[axis] - 0.5).floor();
                (first, if last < 0.0 { None } else { Some((last as usize).min(n - 1)) })
            };
            let ((i0, Some(i1)), (j0, Some(j1))) = (range(0), range(1)) else { continue };
            // Cells at the very edge of the range are checked exactly below.
            for i in i0.saturating_sub(1)..=(i1 + 1).min(n - 1) {
                let x = self.ray(0, i);
                for j in j0.saturating_sub(1)..=(j1 + 1).min(n - 1) {
                    let y = self.ray(1, j);
                    // Barycentric weights from signed areas; inside when all agree in sign.
                    let wa = ((b[0] - x) * (c[1] - y) - (b[1] - y) * (c[0] - x)) / d;
                    let wb = ((c[0] - x) * (a[1] - y) - (c[1] - y) * (a[0] - x)) / d;
                    let wc = 1.0 - wa - wb;
                    if wa >= 0.0 && wb >= 0.0 && wc >= 0.0 {
                        crossings[i * n + j].push(wa * a[2] + wb * b[2] + wc * c[2]);
                    }
                }
            }
        }
        let mut cells = vec![false; n * n * n];
        cells.par_chunks_mut(n).zip(crossings.par_iter_mut()).for_each(|(column, zs)| {
            zs.sort_by(f64::total_cmp);
            if zs.len() % 2 == 1 {
                // An odd count means one crossing was seen twice (a ray through a shared
                // edge despite the jitter): drop the closest duplicate.
                if let Some(k) = (1..zs.len()).min_by(|&p, &q| (zs[p] - zs[p - 1]).total_cmp(&(zs[q] - zs[q - 1]))) {
                    zs.remove(k);
                } else {
                    zs.clear();
                }
            }
            for pair in zs.chunks_exact(2) {
                let first = ((pair[0] - self.lo[2]) / self.cell[2] - 0.5).ceil().max(0.0) as usize;
                let last = ((pair[1] - self.lo[2]) / self.cell[2] - 0.5).floor();
                if last < 0.0 {
                    continue;
                }
                for cell in column.iter_mut().take((last as usize).min(n - 1) + 1).skip(first) {
                    *cell = true;
                }
            }
        });
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::tests::box_mesh;

    #[test]
    fn overlapping_boxes() {
        // [0,1]^3 against [0.5,1.5]x[0,1]x[0,1]: IoU 1/3. Along x the cell centres count
        // 85 cells in each box and 42 in both.
        let a = box_mesh([0.0; 3], [1.0; 3]);
        let b = box_mesh([0.5, 0.0, 0.0], [1.5, 1.0, 1.0]);
        let iou = voxel_iou(&a, &b, 128).expect("iou");
        assert_eq!(iou, 42.0 / 128.0);
        assert!((iou - 1.0 / 3.0).abs() < 0.01, "{iou}");
        assert_eq!(voxel_iou(&a, &a, 128).expect("iou"), 1.0);
    }

    #[test]
    fn disjoint_boxes() {
        let a = box_mesh([0.0; 3], [1.0; 3]);
        let b = box_mesh([2.0; 3], [3.0; 3]);
        assert_eq!(voxel_iou(&a, &b, 64).expect("iou"), 0.0);
    }
}
