//! Area-weighted surface sampling with a generator seeded by the sample id.
//!
//! The seed is FNV-1a (64 bit) of the sample id's UTF-8 bytes; the generator is ChaCha8
//! seeded from it (`SeedableRng::seed_from_u64`), and each shape of a sample draws from its
//! own stream of that generator ([`Role`]): the prediction from stream 1, the ground truth
//! from stream 2. The two samples are independent, as in the published tables this project
//! is compared with, so a perfect reconstruction carries the sampling noise floor (a shape
//! against itself gives a CD above zero), and the numbers still depend only on the inputs,
//! never on threads, workers or runs.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::mesh::{Mesh, double_area};

/// The seed convention, as reports state it.
pub const SEED_CONVENTION: &str =
    "ChaCha8 seeded with FNV-1a-64(sample id); independent streams: 1 samples the prediction, 2 the ground truth";

/// Which shape of a sample is sampled: each has its own stream of the sample's generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Prediction,
    GroundTruth,
}

impl Role {
    fn stream(self) -> u64 {
        match self {
            Role::Prediction => 1,
            Role::GroundTruth => 2,
        }
    }
}

/// FNV-1a, 64 bit: small, specified, and stable across platforms and releases.
pub fn seed_for(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A uniform number in [0, 1) from the top 53 bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `n` points uniformly distributed by area over the mesh's surface, drawn from the `role`'s
/// stream of the generator seeded with `seed`.
pub fn sample_surface(mesh: &Mesh, n: usize, seed: u64, role: Role) -> Result<Vec<[f64; 3]>, String> {
    let mut cumulative = Vec::with_capacity(mesh.triangles.len());
    let mut total = 0.0;
    for t in &mesh.triangles {
        total += double_area(&mesh.corners(*t));
        cumulative.push(total);
    }
    if !(total.is_finite() && total > 0.0) {
        return Err("the mesh has no area to sample".into());
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(role.stream());
    let mut points = Vec::with_capacity(n);
    for _ in 0..n {
        let target = unit(&mut rng) * total;
        // The first triangle whose running total passes the target; zero-area triangles
        // are never chosen because their running total equals the previous one.
        let k = cumulative.partition_point(|&c| c <= target).min(cumulative.len() - 1);
        let [a, b, c] = mesh.corners(mesh.triangles[k]);
        let s = unit(&mut rng).sqrt();
        let r = unit(&mut rng);
        let (wa, wb, wc) = (1.0 - s, s * (1.0 - r), s * r);
        points.push([0, 1, 2].map(|i| wa * a[i] + wb * b[i] + wc * c[i]));
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::tests::box_mesh;

    #[test]
    fn the_seed_is_fnv1a() {
        assert_eq!(seed_for(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(seed_for("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn same_seed_same_points_and_points_lie_on_the_surface() {
        let m = box_mesh([0.0; 3], [1.0, 2.0, 4.0]);
        let a = sample_surface(&m, 2000, 7, Role::Prediction).expect("points");
        assert_eq!(a, sample_surface(&m, 2000, 7, Role::Prediction).expect("points"));
        assert_ne!(a, sample_surface(&m, 2000, 8, Role::Prediction).expect("points"));
        let other_stream = sample_surface(&m, 2000, 7, Role::GroundTruth).expect("points");
        assert!(a.iter().zip(&other_stream).all(|(p, q)| p != q), "the two roles share no point");
        for p in &a {
            let on_face = (0..3).any(|i| p[i].abs() < 1e-12 || (p[i] - [1.0, 2.0, 4.0][i]).abs() < 1e-12);
            assert!(on_face, "{p:?}");
        }
        // By area: the two 2 x 4 faces hold 16 of the box's 28 square units.
        let share = a.iter().filter(|p| p[0].abs() < 1e-12 || (p[0] - 1.0).abs() < 1e-12).count() as f64 / 2000.0;
        assert!((share - 16.0 / 28.0).abs() < 0.04, "{share}");
    }
}
