//! Chamfer and Hausdorff distances between two point samples, as the metrics document
//! defines them: `d(x, S)` is the distance from `x` to the nearest sampled point of `S`.

use rayon::prelude::*;

use crate::kdtree::KdTree;

/// Surface distances of one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SurfaceDistances {
    /// mean_p d(p,G)^2 + mean_g d(g,P)^2, times 1000.
    pub cd: f64,
    /// max(max_p d(p,G), max_g d(g,P)).
    pub hd: f64,
    /// max(P95 of d(p,G), P95 of d(g,P)), nearest-rank percentile.
    pub hd95: f64,
}

/// Both directions of nearest-neighbour distances; the point sets must not be empty.
pub fn surface_distances(p: &[[f64; 3]], g: &[[f64; 3]]) -> SurfaceDistances {
    let (mut pg, mut gp) = rayon::join(|| squared_nearest(p, g), || squared_nearest(g, p));
    // Sums in index order: the same numbers whatever the thread count.
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let cd = (mean(&pg) + mean(&gp)) * 1000.0;
    let max = |xs: &[f64]| xs.iter().copied().fold(0.0, f64::max);
    let hd = max(&pg).max(max(&gp)).sqrt();
    let hd95 = percentile95(&mut pg).max(percentile95(&mut gp)).sqrt();
    SurfaceDistances { cd, hd, hd95 }
}

/// For each point of `from`, the squared distance to the nearest point of `to`.
fn squared_nearest(from: &[[f64; 3]], to: &[[f64; 3]]) -> Vec<f64> {
    let tree = KdTree::new(to);
    from.par_iter().with_min_len(512).map(|q| tree.nearest_squared(q)).collect()
}

/// Nearest-rank 95th percentile: the value at rank ceil(0.95 n), so the largest
/// floor(0.05 n) values are excluded.
fn percentile95(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let rank = (xs.len() * 95).div_ceil(100).max(1);
    let (_, v, _) = xs.select_nth_unstable_by(rank - 1, f64::total_cmp);
    *v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_sets_are_at_distance_zero() {
        let p: Vec<[f64; 3]> = (0..100).map(|i| [i as f64, (i * i) as f64, 1.0]).collect();
        assert_eq!(surface_distances(&p, &p), SurfaceDistances { cd: 0.0, hd: 0.0, hd95: 0.0 });
    }

    #[test]
    fn a_shifted_line_of_points() {
        // 100 points on a line, and the same shifted sideways by 0.5: every nearest
        // distance is 0.5.
        let p: Vec<[f64; 3]> = (0..100).map(|i| [i as f64, 0.0, 0.0]).collect();
        let g: Vec<[f64; 3]> = p.iter().map(|x| [x[0], 0.5, 0.0]).collect();
        let d = surface_distances(&p, &g);
        assert!((d.cd - 500.0).abs() < 1e-9, "{d:?}");
        assert!((d.hd - 0.5).abs() < 1e-12 && (d.hd95 - 0.5).abs() < 1e-12, "{d:?}");
    }

    #[test]
    fn hd95_drops_the_largest_five_percent() {
        // 100 points; 5 outliers at distance 10 are excluded, a sixth is not.
        let g: Vec<[f64; 3]> = (0..100).map(|i| [i as f64 * 100.0, 0.0, 0.0]).collect();
        let mut p = g.clone();
        for x in p.iter_mut().take(5) {
            x[1] = 10.0;
        }
        let d = surface_distances(&p, &g);
        assert_eq!(d.hd, 10.0);
        assert_eq!(d.hd95, 0.0);
        p[5][1] = 3.0;
        assert_eq!(surface_distances(&p, &g).hd95, 3.0);
    }

    #[test]
    fn percentile_rank() {
        let mut xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile95(&mut xs), 19.0);
        let mut xs: Vec<f64> = (1..=8192).rev().map(f64::from).collect();
        assert_eq!(percentile95(&mut xs), 7783.0); // 409 excluded
    }
}
