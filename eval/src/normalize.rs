//! The normalisations of the metrics document, as similarity transforms for the kernel.

use freecad_bridge::{MassProperties, Similarity};
use serde::{Deserialize, Serialize};

/// How each shape is placed and scaled before it is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Normalization {
    /// Centre of the bounding box to the origin, largest extent to 1 (CAD-Recode, cadrille).
    #[default]
    UnitCube,
    /// Model units as they are.
    None,
    /// Centre of mass to the origin, inertia radius to 1, principal axes to x, y, z (in order
    /// of increasing moment), best of the 4 proper sign flips (CAD-Coder).
    Inertia,
}

impl Normalization {
    pub fn name(self) -> &'static str {
        match self {
            Normalization::UnitCube => "unit-cube",
            Normalization::None => "none",
            Normalization::Inertia => "inertia",
        }
    }
}

impl std::str::FromStr for Normalization {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "unit-cube" => Ok(Normalization::UnitCube),
            "none" => Ok(Normalization::None),
            "inertia" => Ok(Normalization::Inertia),
            other => Err(format!("unknown normalisation {other} (expected unit-cube, none or inertia)")),
        }
    }
}

/// The proper (determinant +1) sign flips of the principal axes, in the order tried; the
/// first of equally good flips wins.
pub const FLIPS: [[f64; 3]; 4] = [[1.0, 1.0, 1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]];

/// The transform that normalises a shape with these properties. Inertia gives the principal
/// frame without a flip; see [`flipped`].
pub fn transform(normalization: Normalization, props: &MassProperties) -> Result<Similarity, String> {
    match normalization {
        Normalization::None => Ok(Similarity::IDENTITY),
        Normalization::UnitCube => {
            let b = &props.bbox;
            let extent = (0..3).map(|i| b.max[i] - b.min[i]).fold(0.0, f64::max);
            if !(extent.is_finite() && extent > 0.0) {
                return Err(format!("the shape has no extent (bounding box {:?} .. {:?})", b.min, b.max));
            }
            let centre = [0, 1, 2].map(|i| -(b.min[i] + b.max[i]) / 2.0);
            Ok(Similarity { translate: centre, rotate: Similarity::IDENTITY.rotate, scale: 1.0 / extent })
        }
        Normalization::Inertia => {
            let (Some(c), Some(inertia)) = (props.center_of_mass, props.inertia) else {
                return Err("the shape has no solid to take mass properties of".into());
            };
            if !(props.volume.is_finite() && props.volume > 0.0) {
                return Err(format!("the shape's volume is {}", props.volume));
            }
            let (moments, axes) = principal_axes(inertia);
            let radius = (moments.iter().map(|m| m.abs()).sum::<f64>() / props.volume).sqrt();
            if !(radius.is_finite() && radius > 0.0) {
                return Err("the shape's inertia radius is zero".into());
            }
            Ok(Similarity { translate: c.map(|x| -x), rotate: axes, scale: 1.0 / radius })
        }
    }
}

/// The transform followed by a sign flip of the result's axes.
pub fn flipped(t: &Similarity, flip: [f64; 3]) -> Similarity {
    let mut out = *t;
    for (row, f) in out.rotate.iter_mut().zip(flip) {
        *row = row.map(|x| x * f);
    }
    out
}

/// The transform followed by a translation `by` of its result (normalised units): where
/// `t` takes x to s R (x + c), this takes it to s R (x + c) + by = s R (x + c + R^T by / s).
pub fn nudged(t: &Similarity, by: [f64; 3]) -> Similarity {
    let mut out = *t;
    for (i, c) in out.translate.iter_mut().enumerate() {
        *c += (0..3).map(|k| t.rotate[k][i] * by[k]).sum::<f64>() / t.scale;
    }
    out
}

/// Principal moments in increasing order and the rotation whose rows are the matching axes.
/// Each axis points so its largest component is positive; the third is the cross product
/// of the first two, so the rotation is proper. What is left ambiguous (a sign per pair of
/// axes) is what the four flips try.
pub fn principal_axes(inertia: [[f64; 3]; 3]) -> ([f64; 3], [[f64; 3]; 3]) {
    let (values, vectors) = symmetric_eigen(inertia);
    let mut order = [0usize, 1, 2];
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let axis = |k: usize| -> [f64; 3] {
        let v = [vectors[0][k], vectors[1][k], vectors[2][k]];
        let mut big = 0;
        for i in 1..3 {
            if v[i].abs() > v[big].abs() + 1e-12 {
                big = i;
            }
        }
        if v[big] < 0.0 { v.map(|x| -x) } else { v }
    };
    let a = axis(order[0]);
    let b = axis(order[1]);
    let c = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
    ([values[order[0]], values[order[1]], values[order[2]]], [a, b, c])
}

/// Eigenvalues and eigenvectors (columns) of a symmetric 3x3 matrix by cyclic Jacobi
/// rotations: deterministic, and accurate to rounding for these well-scaled tensors.
fn symmetric_eigen(m: [[f64; 3]; 3]) -> ([f64; 3], [[f64; 3]; 3]) {
    let mut a = m;
    let mut v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let scale = a.iter().flatten().map(|x| x.abs()).fold(0.0, f64::max);
    if scale == 0.0 {
        return ([0.0; 3], v);
    }
    for _sweep in 0..64 {
        let off = a[0][1].abs() + a[0][2].abs() + a[1][2].abs();
        if off <= 1e-15 * scale {
            break;
        }
        for (p, q) in [(0, 1), (0, 2), (1, 2)] {
            if a[p][q].abs() <= 1e-300 {
                continue;
            }
            let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
            let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
            let t = if theta == 0.0 { 1.0 } else { t };
            let c = 1.0 / (t * t + 1.0).sqrt();
            let s = t * c;
            // a <- J^T a J, v <- v J for the rotation J in the (p, q) plane.
            for row in a.iter_mut() {
                let (akp, akq) = (row[p], row[q]);
                row[p] = c * akp - s * akq;
                row[q] = s * akp + c * akq;
            }
            let (row_p, row_q) = (a[p], a[q]);
            for k in 0..3 {
                a[p][k] = c * row_p[k] - s * row_q[k];
                a[q][k] = s * row_p[k] + c * row_q[k];
            }
            for row in v.iter_mut() {
                let vp = row[p];
                let vq = row[q];
                row[p] = c * vp - s * vq;
                row[q] = s * vp + c * vq;
            }
        }
    }
    ([a[0][0], a[1][1], a[2][2]], v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use freecad_bridge::BoundingBox;

    fn mat_vec(m: &[[f64; 3]; 3], x: [f64; 3]) -> [f64; 3] {
        [0, 1, 2].map(|i| m[i][0] * x[0] + m[i][1] * x[1] + m[i][2] * x[2])
    }

    #[test]
    fn jacobi_diagonalises_a_rotated_tensor() {
        // diag(1, 2, 3) turned by 30 degrees about z, then 40 about x.
        let (s1, c1) = 30f64.to_radians().sin_cos();
        let (s2, c2) = 40f64.to_radians().sin_cos();
        let rz = [[c1, -s1, 0.0], [s1, c1, 0.0], [0.0, 0.0, 1.0]];
        let rx = [[1.0, 0.0, 0.0], [0.0, c2, -s2], [0.0, s2, c2]];
        let r: [[f64; 3]; 3] = [0, 1, 2].map(|i| [0, 1, 2].map(|j| (0..3).map(|k| rx[i][k] * rz[k][j]).sum()));
        let d = [1.0, 2.0, 3.0];
        let m: [[f64; 3]; 3] = [0, 1, 2].map(|i| [0, 1, 2].map(|j| (0..3).map(|k| r[i][k] * d[k] * r[j][k]).sum()));
        let (moments, axes) = principal_axes(m);
        for (got, want) in moments.iter().zip(d) {
            assert!((got - want).abs() < 1e-12, "{moments:?}");
        }
        for (k, axis) in axes.iter().enumerate() {
            let image = mat_vec(&m, *axis);
            for i in 0..3 {
                assert!((image[i] - moments[k] * axis[i]).abs() < 1e-12, "axis {k} is an eigenvector");
            }
        }
        let det = axes[0][0] * (axes[1][1] * axes[2][2] - axes[1][2] * axes[2][1])
            - axes[0][1] * (axes[1][0] * axes[2][2] - axes[1][2] * axes[2][0])
            + axes[0][2] * (axes[1][0] * axes[2][1] - axes[1][1] * axes[2][0]);
        assert!((det - 1.0).abs() < 1e-12, "proper rotation");
    }

    #[test]
    fn unit_cube_centres_the_box_and_scales_its_largest_extent_to_one() {
        let props = MassProperties {
            volume: 1000.0,
            area: None,
            solids: 1,
            valid: true,
            bbox: BoundingBox { min: [10.0, 0.0, 0.0], max: [30.0, 10.0, 5.0] },
            center_of_mass: None,
            inertia: None,
        };
        let t = transform(Normalization::UnitCube, &props).expect("transform");
        assert_eq!(t.apply([10.0, 0.0, 0.0]), [-0.5, -0.25, -0.125]);
        assert_eq!(t.apply([30.0, 10.0, 5.0]), [0.5, 0.25, 0.125]);
    }

    #[test]
    fn a_nudge_moves_the_normalised_shape_by_exactly_that_much_whatever_the_rotation() {
        let (moments, axes) = principal_axes([[3.0, 1.0, 0.5], [1.0, 2.0, 0.2], [0.5, 0.2, 1.0]]);
        assert!(moments[0] < moments[2]);
        let t = Similarity { translate: [4.0, -2.0, 7.0], rotate: axes, scale: 0.05 };
        let by = [1e-5, -3e-6, 2e-6];
        for x in [[0.0, 0.0, 0.0], [12.0, -5.0, 3.0]] {
            let (a, b) = (t.apply(x), nudged(&t, by).apply(x));
            for i in 0..3 {
                assert!((b[i] - a[i] - by[i]).abs() < 1e-12, "{a:?} -> {b:?}");
            }
        }
    }

    #[test]
    fn every_flip_is_a_proper_rotation() {
        for f in FLIPS {
            assert_eq!(f[0] * f[1] * f[2], 1.0);
        }
    }
}
