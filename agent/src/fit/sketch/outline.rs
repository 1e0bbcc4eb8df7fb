//! Outlines for the picture model: where a surface the feature sweeps runs along the view
//! direction. No edge is drawn there, so these samples are scored against the target's
//! silhouette boundary ([`super::super::TargetPixels::outline`]).

use nalgebra::Vector3;

use super::{Model, Motion, Numbers, SAMPLE_SPACING_PX, STEEP_DEGREES, Sample, Shape};

/// A steep line of a revolve's profile ([`Model::steep_line`]): the axis's point and unit
/// direction, and the line's ends (sketch coordinates).
#[derive(Debug, Clone, Copy)]
pub(super) struct SteepLine {
    pub(super) point: [f64; 2],
    pub(super) dir: [f64; 2],
    pub(super) p: [f64; 2],
    pub(super) q: [f64; 2],
}

impl SteepLine {
    /// How far along the axis a sketch point lies, from the axis's point.
    pub(super) fn axial(&self, uv: [f64; 2]) -> f64 {
        (uv[0] - self.point[0]) * self.dir[0] + (uv[1] - self.point[1]) * self.dir[1]
    }

    /// How far along the axis the line runs from its start to its end.
    pub(super) fn rise(&self) -> f64 {
        self.axial(self.q) - self.axial(self.p)
    }
}

impl Model<'_> {
    /// The line `shape` of a revolve's profile when it runs within [`STEEP_DEGREES`] of the
    /// axis: a shaft's side, not a shoulder, whose outline lies on its rim.
    pub(super) fn steep_line(&self, n: &Numbers, shape: Shape) -> Option<SteepLine> {
        let (Motion::Revolve { point, direction }, Shape::Line { a, b }) = (self.motion, shape) else { return None };
        let norm = direction[0].hypot(direction[1]);
        if norm <= 1e-12 {
            return None;
        }
        let dir = [direction[0] / norm, direction[1] / norm];
        let (p, q) = (n.points[a], n.points[b]);
        let (du, dv) = (q[0] - p[0], q[1] - p[1]);
        let along = (du * dir[0] + dv * dir[1]).abs();
        let across = (du * dir[1] - dv * dir[0]).abs();
        (along > 0.0 && across <= along * STEEP_DEGREES.to_radians().tan()).then_some(SteepLine { point, dir, p, q })
    }

    /// Where the surface a revolve's whole turn sweeps from the line `shape` shows its
    /// outline on `side` (1 or -1), at `height` along the axis and the radius the line has
    /// at share `t`: that point turned about the axis to where the surface runs along the
    /// view direction. A shaft's side is an outline, not an edge, and where a chamfer took
    /// its corner's circle away nothing else on the picture holds the radius (a simulated
    /// reader's neck stayed a cone, 15 to 19 mm across where the target's is 17). `None` for
    /// a line that is not steep ([`Model::steep_line`]), on the axis, and for any other
    /// motion.
    pub(super) fn turned(&self, n: &Numbers, shape: Shape, t: f64, height: f64, side: f64) -> Option<Vector3<f64>> {
        let line = self.steep_line(n, shape)?;
        let SteepLine { point, dir, p, q } = line;
        let on_line = [p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])];
        let up = height - line.axial(on_line);
        let uv = [on_line[0] + up * dir[0], on_line[1] + up * dir[1]];
        let global = |uv: [f64; 2]| Vector3::from(self.frame.to_global(uv[0], uv[1]));
        let origin = global(point);
        let axis = (Vector3::from(self.frame.x_axis) * dir[0] + Vector3::from(self.frame.y_axis) * dir[1])
            .try_normalize(1e-12)?;
        let tangent = global(q) - global(p);
        let rel = global(uv) - origin;
        let along = axis.dot(&rel);
        let radial = rel - axis * along;
        let radius = radial.norm();
        if radius <= 1e-9 * (1.0 + rel.norm()) {
            return None;
        }
        // The point turned by phi: origin + along axis + radius (e0 cos phi + e1 sin phi).
        let (e0, view) = (radial / radius, Vector3::from(self.camera.forward));
        let e1 = axis.cross(&e0);
        // There the surface's normal is dz r(phi) - dr axis, for the line's rates across
        // and along the axis; the outline is where it is square to the view.
        let (dr, dz) = (tangent.dot(&e0), tangent.dot(&axis));
        let across = e0.dot(&view).hypot(e1.dot(&view));
        if dz.abs() <= 1e-9 * tangent.norm() || across <= 1e-9 {
            return None;
        }
        let cos = dr * axis.dot(&view) / (dz * across);
        if cos.abs() >= 1.0 {
            return None;
        }
        let phi = e1.dot(&view).atan2(e0.dot(&view)) + side * cos.acos();
        Some(origin + axis * along + (e0 * phi.cos() + e1 * phi.sin()) * radius)
    }

    /// A whole turn's outline samples, before any is counted: each steep side's
    /// ([`Model::turned`]), one every [`SAMPLE_SPACING_PX`] away from its ends, where the
    /// outline turns into a rim the corners' circles hold.
    pub(super) fn outline_samples(&self, n: &Numbers) -> Vec<Sample> {
        let mut samples = Vec::new();
        for (index, &(_, shape)) in self.shapes.iter().enumerate() {
            let Some(line) = self.steep_line(n, shape) else { continue };
            let (hp, hq) = (line.axial(line.p), line.axial(line.q));
            for side in [1.0, -1.0] {
                let turned = |t: f64| Sample::Turned { shape: index, t, height: hp + t * (hq - hp), side };
                let at = |t: f64| self.sample_pixel(n, &turned(t));
                let (Some(a), Some(b)) = (at(0.0), at(1.0)) else { continue };
                let length = ((a.0 - b.0).hypot(a.1 - b.1) / SAMPLE_SPACING_PX).ceil() as usize;
                for k in 0..length {
                    let t = (k as f64 + 0.5) / length as f64;
                    if (0.1..=0.9).contains(&t) {
                        samples.push(turned(t));
                    }
                }
            }
        }
        samples
    }

    /// An outline sample moved a little along its side (`ds`, a share of it), to read the
    /// outline's direction on the picture.
    pub(super) fn nudged_outline(&self, n: &Numbers, sample: Sample, ds: f64) -> Option<Sample> {
        Some(match sample {
            Sample::Turned { shape, t, height, side } => {
                let line = self.steep_line(n, self.shapes[shape].1)?;
                Sample::Turned { shape, t: t + ds, height: height + ds * line.rise(), side }
            }
            other => other,
        })
    }
}
