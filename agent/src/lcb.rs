//! The local-coordinate bridge (LCB): view coordinates of the Stage 2 sketch view to the
//! sketch plane's own local frame, the one FreeCAD chose when it attached the sketch.
//!
//! The sketch view's metadata holds the exact affine map (`view_to_local`), computed from
//! the frame FreeCAD reports for the plane, so the model never reasons about that frame:
//! on a revolved flange's top face FreeCAD's x is -X and y is -Y, on an inclined plane the
//! axes are tilted, and the same view coordinates land on the same 3D points regardless.

use freecad_bridge::state::Frame;
use nalgebra::Vector3;
use views::SketchMeta;

/// Local sketch coordinates of view point `p`.
pub fn view_to_local(meta: &SketchMeta, p: [f64; 2]) -> [f64; 2] {
    let m = &meta.view_to_local;
    [m[0][0] * p[0] + m[0][1] * p[1] + m[0][2], m[1][0] * p[0] + m[1][1] * p[1] + m[1][2]]
}

/// View coordinates of local sketch point `q` (the inverse of [`view_to_local`]).
pub fn local_to_view(meta: &SketchMeta, q: [f64; 2]) -> [f64; 2] {
    let m = &meta.view_to_local;
    let det = m[0][0] * m[1][1] - m[0][1] * m[1][0];
    let (x, y) = (q[0] - m[0][2], q[1] - m[1][2]);
    [(m[1][1] * x - m[0][1] * y) / det, (-m[1][0] * x + m[0][0] * y) / det]
}

/// A length in view units (radius, distance, depth) in model units.
pub fn length_to_local(meta: &SketchMeta, length: f64) -> f64 {
    length * meta.window.size
}

/// The frame the Stage 2 prompt describes when LCB is off (`no_lcb`): what a model would
/// assume without being told FreeCAD's choice. Base planes follow FreeCAD exactly; on a
/// face or construction plane the origin is the plane's point nearest the global origin, x
/// is global X projected onto the plane (Y where the plane is perpendicular to X), and
/// y = normal x x. Where FreeCAD chose otherwise, sketches land elsewhere: that is the
/// ablation's effect.
pub fn conventional_frame(on: &str, actual: &Frame) -> Frame {
    let axes = |x: [f64; 3], y: [f64; 3], n: [f64; 3]| Frame { origin: [0.0; 3], x_axis: x, y_axis: y, normal: n };
    match on {
        "XY" => axes([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]),
        "XZ" => axes([1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]),
        "YZ" => axes([0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]),
        _ => {
            let n = Vector3::from(actual.normal).normalize();
            let origin = n * Vector3::from(actual.origin).dot(&n);
            let seed = if n.x.abs() > 0.99 { Vector3::y() } else { Vector3::x() };
            let x = (seed - n * seed.dot(&n)).normalize();
            let y = n.cross(&x);
            Frame { origin: origin.into(), x_axis: x.into(), y_axis: y.into(), normal: n.into() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use views::{ViewToWorld, Window};

    fn meta(frame: Frame, window: Window) -> SketchMeta {
        let s = window.size;
        let o = Vector3::from(frame.origin)
            + Vector3::from(frame.x_axis) * window.u0
            + Vector3::from(frame.y_axis) * (window.v0 + s);
        SketchMeta {
            view_to_local: [[s, 0.0, window.u0], [0.0, -s, window.v0 + s]],
            view_to_world: ViewToWorld {
                origin: o.into(),
                x_step: (Vector3::from(frame.x_axis) * s).into(),
                y_step: (-Vector3::from(frame.y_axis) * s).into(),
            },
            frame,
            window,
            grid: [75.0, 75.0, 350.0],
            edges: Vec::new(),
        }
    }

    #[test]
    fn view_local_world_agree_on_a_rotated_frame() {
        let c = 30f64.to_radians().cos();
        let s = 30f64.to_radians().sin();
        // x = -X, y tilted 30 degrees out of -Y towards Z.
        let frame =
            Frame { origin: [3.0, -2.0, 7.5], x_axis: [-1.0, 0.0, 0.0], y_axis: [0.0, -c, s], normal: [0.0, s, c] };
        let m = meta(frame, Window { u0: -12.5, v0: 4.0, size: 40.0 });
        for p in [[0.0, 0.0], [1.0, 1.0], [0.1234, 0.9876], [-0.4, 1.3]] {
            let q = view_to_local(&m, p);
            let back = local_to_view(&m, q);
            assert!((back[0] - p[0]).abs() < 1e-12 && (back[1] - p[1]).abs() < 1e-12);
            let world = frame.to_global(q[0], q[1]);
            let direct = m.view_to_world(p[0], p[1]);
            for i in 0..3 {
                assert!((world[i] - direct[i]).abs() < 1e-9, "{world:?} vs {direct:?}");
            }
            let q2 = frame.to_local(world);
            assert!((q2[0] - q[0]).abs() < 1e-9 && (q2[1] - q[1]).abs() < 1e-9);
        }
        assert!((length_to_local(&m, 0.25) - 10.0).abs() < 1e-12);
    }

    #[test]
    fn conventional_frame_of_a_face_is_right_handed_and_on_the_plane() {
        let actual = Frame {
            origin: [5.0, 5.0, 10.0],
            x_axis: [-1.0, 0.0, 0.0],
            y_axis: [0.0, -1.0, 0.0],
            normal: [0.0, 0.0, 1.0],
        };
        let f = conventional_frame("F3", &actual);
        assert_eq!(f.origin, [0.0, 0.0, 10.0]);
        assert_eq!(f.x_axis, [1.0, 0.0, 0.0]);
        assert_eq!(f.y_axis, [0.0, 1.0, 0.0]);
        assert_eq!(conventional_frame("XZ", &actual).y_axis, [0.0, 0.0, 1.0]);
    }
}
