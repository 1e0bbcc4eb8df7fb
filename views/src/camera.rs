//! Cameras: where the model is seen from and how it maps onto pixels.

use nalgebra::{Point3, Vector3};
use serde::{Deserialize, Serialize};

/// The direction common CAD renders look from: front (-Y), right (+X), top (+Z).
pub const ISOMETRIC: [f64; 3] = [1.0, -1.0, 1.0];

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Projection {
    /// `pixels_per_unit` model units to pixels.
    Orthographic { pixels_per_unit: f64 },
    /// Vertical field of view in degrees.
    Perspective { fov_y_degrees: f64 },
}

/// A camera with an image size. Pixel coordinates: origin top-left, x right, y down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Camera {
    pub eye: [f64; 3],
    /// Unit vector the camera looks along.
    pub forward: [f64; 3],
    /// Unit vector that points up on the screen.
    pub up: [f64; 3],
    /// Unit vector that points right on the screen.
    pub right: [f64; 3],
    pub projection: Projection,
    pub width: u32,
    pub height: u32,
}

impl Camera {
    /// A camera looking at a sphere from `direction` (a vector from the sphere towards the
    /// eye), with the sphere's diameter filling `fill` of the smaller image side.
    pub fn framing(
        center: Point3<f64>,
        radius: f64,
        direction: Vector3<f64>,
        perspective: bool,
        width: u32,
        height: u32,
        fill: f64,
    ) -> Camera {
        let back = direction.try_normalize(1e-12).unwrap_or_else(|| Vector3::new(1.0, -1.0, 1.0).normalize());
        let forward = -back;
        // Z is up, unless we look along it.
        let world_up = if forward.z.abs() > 0.999 { Vector3::y() } else { Vector3::z() };
        let right = forward.cross(&world_up).normalize();
        let up = right.cross(&forward).normalize();
        let half_extent = f64::from(width.min(height)) * fill / 2.0;
        let (projection, distance) = if perspective {
            let fov: f64 = 30.0;
            // The sphere's apparent radius: r / (d tan(fov/2)) of half the image height.
            let focal = f64::from(height) / 2.0 / (fov.to_radians() / 2.0).tan();
            let distance = (radius * focal / half_extent).max(radius * 1.5);
            (Projection::Perspective { fov_y_degrees: fov }, distance)
        } else {
            (Projection::Orthographic { pixels_per_unit: half_extent / radius }, radius * 4.0)
        };
        let eye = center + back * distance;
        Camera {
            eye: eye.into(),
            forward: forward.into(),
            up: up.into(),
            right: right.into(),
            projection,
            width,
            height,
        }
    }

    /// A camera looking straight at a plane (`normal` towards the viewer), with the plane's
    /// `x_axis` to the right and `y_axis` up, and the point `center` at the image centre.
    /// `axes` are the plane's x axis, y axis and normal.
    pub fn facing_plane(
        center: Point3<f64>,
        axes: [Vector3<f64>; 3],
        pixels_per_unit: f64,
        distance: f64,
        width: u32,
        height: u32,
    ) -> Camera {
        let [x_axis, y_axis, normal] = axes;
        let eye = center + normal * distance;
        Camera {
            eye: eye.into(),
            forward: (-normal).into(),
            up: y_axis.into(),
            right: x_axis.into(),
            projection: Projection::Orthographic { pixels_per_unit },
            width,
            height,
        }
    }

    /// Pixel position (x, y) and depth along the view direction; `None` behind the eye.
    pub fn project(&self, p: &Point3<f64>) -> Option<(f64, f64, f64)> {
        let rel = p.coords - Vector3::from(self.eye);
        let depth = rel.dot(&Vector3::from(self.forward));
        let x = rel.dot(&Vector3::from(self.right));
        let y = rel.dot(&Vector3::from(self.up));
        let (cx, cy) = (f64::from(self.width) / 2.0, f64::from(self.height) / 2.0);
        match self.projection {
            Projection::Orthographic { pixels_per_unit: s } => Some((cx + s * x, cy - s * y, depth)),
            Projection::Perspective { fov_y_degrees } => {
                if depth <= 1e-9 {
                    return None;
                }
                let focal = f64::from(self.height) / 2.0 / (fov_y_degrees.to_radians() / 2.0).tan();
                Some((cx + focal * x / depth, cy - focal * y / depth, depth))
            }
        }
    }

    pub fn is_perspective(&self) -> bool {
        matches!(self.projection, Projection::Perspective { .. })
    }

    /// The same view at `factor` times the resolution (for supersampling).
    pub fn scaled(&self, factor: u32) -> Camera {
        let mut c = self.clone();
        c.width *= factor;
        c.height *= factor;
        if let Projection::Orthographic { pixels_per_unit } = &mut c.projection {
            *pixels_per_unit *= f64::from(factor);
        }
        c
    }

    /// Unit vector from the scene towards the eye.
    pub fn towards_eye(&self) -> Vector3<f64> {
        -Vector3::from(self.forward)
    }
}

/// Each model axis (X, Y, Z) on a view from `direction` (towards the eye): its unit vector's
/// components to the right, up and away from the viewer, in [`Camera::framing`]'s basis.
pub fn axes_in_view(direction: [f64; 3]) -> [[f64; 3]; 3] {
    let camera = Camera::framing(Point3::origin(), 1.0, Vector3::from(direction), false, 64, 64, 1.0);
    std::array::from_fn(|i| [camera.right[i], camera.up[i], camera.forward[i]])
}

/// How the model's axes lie on a view from `direction` (towards the eye), in words for a
/// prompt: `+X points down and to the right, +Y up and to the right, +Z up` for
/// [`ISOMETRIC`]. Same basis as [`Camera::framing`].
pub fn axes_on_screen(direction: [f64; 3]) -> String {
    let axes = axes_in_view(direction);
    let way = |i: usize| {
        let [right, up, forward] = axes[i];
        let vertical = if up > 0.2 {
            Some("up")
        } else if up < -0.2 {
            Some("down")
        } else {
            None
        };
        let horizontal = if right > 0.2 {
            Some("to the right")
        } else if right < -0.2 {
            Some("to the left")
        } else {
            None
        };
        match (vertical, horizontal) {
            (Some(v), Some(h)) => format!("{v} and {h}"),
            (Some(v), None) => v.to_string(),
            (None, Some(h)) => h.to_string(),
            (None, None) if forward > 0.0 => "away from the viewer".to_string(),
            (None, None) => "towards the viewer".to_string(),
        }
    };
    format!("+X points {}, +Y {}, +Z {}", way(0), way(1), way(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axes_of_the_isometric_view_in_words() {
        assert_eq!(axes_on_screen(ISOMETRIC), "+X points down and to the right, +Y up and to the right, +Z up");
        assert_eq!(axes_on_screen([0.0, -1.0, 0.0]), "+X points to the right, +Y away from the viewer, +Z up");
    }
}
