//! The local-coordinate bridge against FreeCAD's own frames: on every planar face of a
//! revolved flange (FreeCAD turns their sketch frames) and on an inclined construction
//! plane, view coordinates land where the sketch view says, in the sketch FreeCAD builds.

mod common;

use freecad_bridge::command::{Command, Primitive, Sketch};
use freecad_bridge::state::FaceKind;
use vision2cad::lcb;

fn near(a: [f64; 3], b: [f64; 3], tolerance: f64) -> bool {
    (0..3).all(|i| (a[i] - b[i]).abs() <= tolerance)
}

#[test]
fn view_coordinates_land_where_the_view_says_on_rotated_and_inclined_frames() {
    let mut session = common::session();
    let mut rotated = 0;
    let mut checked = 0;
    for (name, extra_planes) in [("flange_revolve", vec![]), ("inclined_prism", vec!["P1"])] {
        session.reset().expect("reset");
        session.execute_program(&common::example(name)).expect("example runs");
        let state = session.state().clone();
        let scene = views::scene_of(&mut session).expect("scene");
        let mut supports: Vec<String> =
            state.faces.iter().filter(|f| f.kind == FaceKind::Plane).map(|f| f.id.clone()).collect();
        supports.extend(extra_planes.into_iter().map(String::from));
        for on in supports {
            let frame = session.plane_frame(&on).expect("a frame");
            if (frame.x_axis[0] - 1.0).abs() > 1e-9 {
                rotated += 1;
            }
            let view = views::sketch(&scene, &state, &frame, None, &views::Options::default());
            let meta = view.meta.sketch.expect("sketch metadata");
            for p in [[0.25, 0.25], [0.5, 0.5], [0.8125, 0.3333]] {
                let local = lcb::view_to_local(&meta, p);
                let back = lcb::local_to_view(&meta, local);
                assert!((back[0] - p[0]).abs() < 1e-9 && (back[1] - p[1]).abs() < 1e-9, "{name} {on}");
                let world = meta.view_to_world(p[0], p[1]);
                assert!(near(frame.to_global(local[0], local[1]), world, 1e-9), "{name} {on}: {p:?}");
                // FreeCAD itself: a circle centred at the LCB point, seen in the preview.
                let radius = lcb::length_to_local(&meta, 0.01);
                let sketch = Command::Sketch(Sketch {
                    name: "S99".into(),
                    on: on.clone(),
                    primitives: vec![Primitive::Circle { center: local, radius, construction: false }],
                    constraints: Vec::new(),
                    auto_coincident: true,
                });
                let preview = session.preview(&sketch, 1e-3).expect("preview of the sketch");
                let curve = &preview.sketch_curves[0];
                let n = curve.len() as f64;
                let centre: [f64; 3] = std::array::from_fn(|i| curve.iter().map(|q| q[i]).sum::<f64>() / n);
                assert!(near(centre, world, radius * 0.05), "{name} {on}: FreeCAD put it at {centre:?}, not {world:?}");
                checked += 1;
            }
        }
    }
    assert!(rotated >= 2, "only {rotated} frames differ from the global axes");
    assert!(checked >= 20, "{checked}");
}
