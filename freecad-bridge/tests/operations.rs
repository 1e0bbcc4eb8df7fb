//! Every example program executed in FreeCAD, checked against volumes and face counts
//! worked out by hand, before and after every extrusion depth is multiplied by 1.1.

use std::f64::consts::PI;

use freecad_bridge::testing::{assert_close, example, session};

struct Expected {
    name: &'static str,
    volume: f64,
    faces: usize,
    /// After every Pad/Pocket length x 1.1 (equal to `volume` when there is none).
    volume_edited: f64,
}

fn expectations() -> Vec<Expected> {
    vec![
        // 20 x 10 x 5 block.
        Expected { name: "box", volume: 1000.0, faces: 6, volume_edited: 1100.0 },
        // Body B1: the block less a r=2 hole 3 deep; body B2: a r=4 h=8 cylinder whose top
        // edge is chamfered 1 x 1, which removes a triangle of area 1/2 swept around the axis
        // at its centroid's radius 4 - 1/3.
        Expected {
            name: "two_bodies",
            volume: 1000.0 - 4.0 * PI * 3.0 + 16.0 * PI * 8.0 - 2.0 * PI * (4.0 - 1.0 / 3.0) * 0.5,
            faces: 8 + 4,
            volume_edited: 1100.0 - 4.0 * PI * 3.3 + 16.0 * PI * 8.8 - 2.0 * PI * (4.0 - 1.0 / 3.0) * 0.5,
        },
        // Four vertical edges rounded: each removes (r^2 - pi r^2 / 4) x height.
        Expected {
            name: "fillet_box",
            volume: 1000.0 - 4.0 * (4.0 - PI) * 5.0,
            faces: 10,
            volume_edited: 1100.0 - 4.0 * (4.0 - PI) * 5.5,
        },
        // Top slab (1 mm) becomes a prismatoid 20x10 -> 18x8: V = h/6 (A1 + 4 Am + A2).
        Expected {
            name: "chamfer_box",
            volume: 800.0 + (200.0 + 4.0 * 19.0 * 9.0 + 144.0) / 6.0,
            faces: 10,
            volume_edited: 900.0 + (200.0 + 4.0 * 19.0 * 9.0 + 144.0) / 6.0,
        },
        // Plate 40x30x5, two r=4 through holes, counterbore r=6 depth 2.
        Expected {
            name: "plate_counterbore",
            volume: 6000.0 - 16.0 * PI * 5.0 * 2.0 - 20.0 * PI * 2.0,
            faces: 10,
            volume_edited: 6600.0 - 16.0 * PI * 5.5 * 2.0 - 20.0 * PI * 2.2,
        },
        // r=5 cylinder, 4 + 6 long.
        Expected { name: "two_sided_cylinder", volume: 25.0 * PI * 10.0, faces: 3, volume_edited: 25.0 * PI * 11.0 },
        // Slot: 20 x 10 rectangle plus a full r=5 disc, 6 thick.
        Expected {
            name: "symmetric_slot",
            volume: (200.0 + 25.0 * PI) * 6.0,
            faces: 6,
            volume_edited: (200.0 + 25.0 * PI) * 6.6,
        },
        // 10x10x8 minus a 4x4x3 pocket.
        Expected { name: "reversed_block", volume: 800.0 - 48.0, faces: 11, volume_edited: 880.0 - 52.8 },
        // Annulus r 5..20 x 4 plus annulus r 5..8 x 10.
        Expected {
            name: "flange_revolve",
            volume: PI * (375.0 * 4.0 + 39.0 * 10.0),
            faces: 6,
            volume_edited: PI * (375.0 * 4.0 + 39.0 * 10.0),
        },
        // r=10 x 40 shaft minus the ring r 8..10 x 5.
        Expected {
            name: "shaft_groove",
            volume: PI * (100.0 * 40.0 - 36.0 * 5.0),
            faces: 7,
            volume_edited: PI * (100.0 * 44.0 - 36.0 * 5.0),
        },
        // 10^3 block plus a quarter cylinder r=4, 10 long.
        Expected {
            name: "hinge_revolve_edge",
            volume: 1000.0 + PI * 16.0 * 10.0 / 4.0,
            faces: 10,
            volume_edited: 1100.0 + PI * 16.0 * 10.0 / 4.0,
        },
        // Pappus: r=2 disc along 20 + a quarter of a circle of radius 10.
        Expected {
            name: "pipe_sweep",
            volume: 4.0 * PI * (20.0 + 5.0 * PI),
            faces: 4,
            volume_edited: 4.0 * PI * (20.0 + 5.0 * PI),
        },
        // Block minus a quarter cylinder r=1 along the 20 mm edge.
        Expected {
            name: "edge_sweep_groove",
            volume: 1000.0 - PI * 20.0 / 4.0,
            faces: 7,
            volume_edited: 1100.0 - PI * 20.0 / 4.0,
        },
        // Frustum h/3 (A1 + A2 + sqrt(A1 A2)).
        Expected {
            name: "loft_frustum",
            volume: 10.0 / 3.0 * (400.0 + 100.0 + 200.0),
            faces: 6,
            volume_edited: 10.0 / 3.0 * 700.0,
        },
        // A 10 x 10 x 4 prism, whatever the plane's inclination.
        Expected { name: "inclined_prism", volume: 400.0, faces: 6, volume_edited: 440.0 },
        // 20x10x10 block minus a half cylinder r=3 through its 10 mm depth; the notch
        // follows the top edge, so it stays a half cylinder after the edit.
        Expected {
            name: "notch_projected_edge",
            volume: 2000.0 - 4.5 * PI * 10.0,
            faces: 8,
            volume_edited: 2200.0 - 4.5 * PI * 10.0,
        },
    ]
}

#[test]
fn every_example_program_is_covered() {
    let mut files: Vec<String> = std::fs::read_dir(freecad_bridge::testing::repo_root().join("assets/programs"))
        .expect("assets/programs")
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(String::from))
        .collect();
    files.sort();
    let mut covered: Vec<String> = expectations().iter().map(|e| e.name.to_string()).collect();
    covered.sort();
    assert_eq!(files, covered, "every example needs hand-computed expectations");
    let ops: std::collections::BTreeSet<&str> =
        expectations().iter().flat_map(|e| example(e.name).commands).map(|c| c.op()).collect();
    for op in ["sketch", "extrude", "revolve", "sweep", "loft", "fillet", "chamfer", "plane", "body", "end"] {
        assert!(ops.contains(op), "no example uses {op}");
    }
}

#[test]
fn examples_build_the_expected_solids_and_survive_the_depth_edit() {
    let mut s = session();
    for e in expectations() {
        s.reset().expect("reset");
        s.execute_program(&example(e.name)).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        let state = s.state().clone();
        assert!(state.valid, "{} is not a valid solid", e.name);
        assert!(state.one_solid_per_body(), "{}: {} solids in {} bodies", e.name, state.solids, state.bodies.len());
        assert_close(state.volume, e.volume, &format!("{} volume", e.name));
        assert_eq!(state.faces.len(), e.faces, "{} face count", e.name);

        let params = s.parameters().expect("parameters");
        let edited = s.scale_extrusions(1.1).unwrap_or_else(|err| panic!("{} edit: {err}", e.name)).clone();
        assert_close(edited.volume, e.volume_edited, &format!("{} volume after x1.1", e.name));
        assert_eq!(edited.faces.len(), e.faces, "{} face count after x1.1", e.name);
        for (before, after) in params.iter().zip(s.parameters().expect("parameters")) {
            assert_close(after.value, before.value * 1.1, &after.name);
        }
    }
}

#[test]
fn a_sketch_on_an_inclined_plane_lies_in_that_plane() {
    let mut s = session();
    s.execute_program(&example("inclined_prism")).expect("inclined prism");
    let frame = s.state().feature("S1").and_then(|f| f.frame).expect("sketch frame");
    let (sin, cos) = 30f64.to_radians().sin_cos();
    let expected_normal = [0.0, -sin, cos];
    for (actual, expected) in frame.normal.iter().zip(expected_normal) {
        assert!((actual - expected).abs() < 1e-9, "normal {:?}", frame.normal);
    }
    // The rectangle spans v in [0, 10] in the plane and is padded 4 along its normal.
    let bbox = s.state().bbox.expect("bbox");
    assert_close(bbox.max[2], 10.0 * sin + 4.0 * cos, "top of the prism");
    assert_close(bbox.min[2] + 1.0, 1.0, "bottom of the prism");
    assert_close(bbox.max[0] - bbox.min[0], 10.0, "width along x");
}

#[test]
fn a_plane_inclined_about_an_edge_turns_about_that_edge() {
    let mut s = session();
    let p = freecad_bridge::testing::program(
        r#"{"commands": [
        {"op": "sketch", "name": "S1", "on": "XY", "primitives": [
            {"type": "line", "start": [0, 0], "end": [20, 0]}, {"type": "line", "start": [20, 0], "end": [20, 10]},
            {"type": "line", "start": [20, 10], "end": [0, 10]}, {"type": "line", "start": [0, 10], "end": [0, 0]}]},
        {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 5}},
        {"op": "plane", "name": "P1", "on": "F6", "rotation": {"axis": "E10", "angle": 45}}
    ]}"#,
    );
    s.execute_program(&p).expect("plane about an edge");
    let frame = s.state().feature("P1").and_then(|f| f.frame).expect("plane frame");
    // E10 runs along x at y = 10 on the top face: the plane contains it and is tilted 45
    // degrees, so its normal has no x part and equal |y| and |z| parts.
    assert!(frame.normal[0].abs() < 1e-9, "{:?}", frame.normal);
    assert!((frame.normal[1].abs() - frame.normal[2].abs()).abs() < 1e-9, "{:?}", frame.normal);
    let o = frame.origin;
    let offset_from_edge = [o[1] - 10.0, o[2] - 5.0];
    // The edge line (y = 10, z = 5) lies in the plane.
    let along_normal = offset_from_edge[0] * frame.normal[1] + offset_from_edge[1] * frame.normal[2];
    assert!(along_normal.abs() < 1e-9, "edge is {along_normal} off the plane");
}

#[test]
fn a_sketch_tied_to_a_projected_edge_follows_it_after_the_depth_edit() {
    // The notch's centre is tied to the projected top edge E4. A copy without the tie
    // keeps its centre at z = 10 and, after the block grows to 11, cuts a shallow segment
    // instead of a half cylinder.
    let tied = example("notch_projected_edge");
    let mut untied = tied.clone();
    let freecad_bridge::Command::Sketch(sketch) = &mut untied.commands[2] else {
        panic!("the third command is the notch sketch")
    };
    sketch.constraints.clear();
    if let freecad_bridge::command::Primitive::Circle { center, .. } = &mut sketch.primitives[0] {
        *center = [10.0, 10.0];
    }

    let mut s = session();
    let half_notch = 4.5 * PI * 10.0;
    s.execute_program(&tied).expect("tied");
    s.scale_extrusions(1.1).expect("edit");
    assert_close(s.state().volume, 2200.0 - half_notch, "tied notch stays a half cylinder");
    let top = s.state().bbox.expect("bbox").max[2];
    assert_close(top, 11.0, "block height");

    s.reset().expect("reset");
    s.execute_program(&untied).expect("untied");
    assert_close(s.state().volume, 2000.0 - half_notch, "same part before the edit");
    s.scale_extrusions(1.1).expect("edit");
    // A circle r = 3 whose centre is 1 below the top: the part of it below the top.
    let (r, d) = (3.0f64, 1.0f64);
    let segment_above = r * r * (d / r).acos() - d * (r * r - d * d).sqrt();
    let cut_area = PI * r * r - segment_above;
    assert_close(s.state().volume, 2200.0 - cut_area * 10.0, "untied notch stays behind");
}

#[test]
fn tessellation_comes_back_as_flat_arrays_per_face_and_edge() {
    let mut s = session();
    s.execute_program(&example("plate_counterbore")).expect("plate");
    let t = s.tessellate(0.01, 0.1).expect("tessellate");
    let state = s.state().clone();
    assert_eq!(t.face_offsets.len(), state.faces.len() + 1, "one range per face");
    assert_eq!(t.edge_offsets.len(), state.edges.len() + 1, "one range per edge");
    assert_eq!(t.mesh.positions.len() % 3, 0);
    assert_eq!(*t.face_offsets.last().expect("offsets") as usize, t.mesh.triangle_count());
    let n_vertices = (t.mesh.positions.len() / 3) as u32;
    assert!(t.mesh.triangles.iter().all(|&i| i < n_vertices), "indices in range");
    // Triangle areas add up to the surface area (flat faces exactly, cylinders from inside).
    let p = |i: u32| {
        let i = i as usize * 3;
        [t.mesh.positions[i], t.mesh.positions[i + 1], t.mesh.positions[i + 2]]
    };
    let area: f64 = t
        .mesh
        .triangles
        .chunks(3)
        .map(|tri| {
            let (a, b, c) = (p(tri[0]), p(tri[1]), p(tri[2]));
            let u = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
            let v = [c[0] - a[0], c[1] - a[1], c[2] - a[2]];
            let n = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]];
            0.5 * (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt()
        })
        .sum();
    assert!((area - state.area).abs() < 1e-3 * state.area, "mesh area {area} vs surface area {}", state.area);
    // Every edge polyline starts and ends at the edge's vertices.
    for (i, edge) in state.edges.iter().enumerate() {
        let (from, to) = (t.edge_offsets[i] as usize, t.edge_offsets[i + 1] as usize);
        assert!(to - from >= 2, "{} has a polyline", edge.id);
        let first = [t.edge_points[from * 3], t.edge_points[from * 3 + 1], t.edge_points[from * 3 + 2]];
        let start = edge.start.expect("start");
        assert!((0..3).all(|k| (first[k] - start[k]).abs() < 1e-9), "{} starts at its start vertex", edge.id);
    }
}

#[test]
fn a_plane_can_take_any_frame_from_an_origin_and_a_chain_of_rotations() {
    let mut s = session();
    let p = freecad_bridge::testing::program(
        r#"{"commands": [
        {"op": "plane", "name": "P1", "on": "XY", "at": [3, 4], "offset": 5,
         "rotation": [{"axis": "z", "angle": 90}, {"axis": "x", "angle": 30}]}
    ]}"#,
    );
    s.execute_program(&p).expect("plane");
    let frame = s.state().feature("P1").and_then(|f| f.frame).expect("frame");
    let (sin, cos) = 30f64.to_radians().sin_cos();
    let close = |a: [f64; 3], b: [f64; 3]| (0..3).all(|i| (a[i] - b[i]).abs() < 1e-9);
    assert!(close(frame.origin, [3.0, 4.0, 5.0]), "{:?}", frame.origin);
    // Spun 90 degrees: x along global y; then tilted 30 degrees about that axis.
    assert!(close(frame.x_axis, [0.0, 1.0, 0.0]), "{:?}", frame.x_axis);
    assert!(close(frame.normal, [sin, 0.0, cos]), "{:?}", frame.normal);
}

#[test]
fn two_bodies_number_their_entities_apart_and_keep_to_the_active_body() {
    let mut s = session();
    s.execute_program(&example("two_bodies")).expect("two bodies");
    let state = s.state().clone();
    let bodies: Vec<(&str, usize, usize)> =
        state.bodies.iter().map(|b| (b.id.as_str(), b.faces.len(), b.solids)).collect();
    assert_eq!(bodies, [("B1", 8, 1), ("B2", 4, 1)]);
    assert_eq!(state.active_body.as_deref(), Some("B1"), "the program switched back to B1 for the hole");
    assert!(state.faces[..8].iter().all(|f| !f.id.contains('.')), "B1's IDs carry no prefix");
    assert!(state.faces[8..].iter().all(|f| f.id.starts_with("B2.F")));
    assert!(
        state
            .edges
            .iter()
            .filter(|e| e.id.starts_with("B2."))
            .all(|e| e.vertices.iter().all(|v| v.starts_with("B2.V")))
    );
    let body_of = |name: &str| state.feature(name).and_then(|f| f.body.clone());
    assert_eq!((body_of("S2").as_deref(), body_of("S3").as_deref()), (Some("B2"), Some("B1")));
    // The cylinder's top face: a B2 face at z = 8 (less the chamfer), found by its ID.
    let top = state.faces.iter().find(|f| f.id.starts_with("B2.") && (f.centroid[2] - 8.0).abs() < 1e-6).expect("top");
    let top_id: freecad_bridge::command::EntityId = top.id.parse().expect("ID");
    assert_eq!((top_id.body, state.face(top_id).map(|f| f.centroid)), (2, Some(top.centroid)));

    // With B1 active, B2's entities cannot be used; the refusal names the body to switch to.
    let refused = |s: &mut freecad_bridge::Session, json: &str| {
        let command: freecad_bridge::Command = serde_json::from_str(json).expect("command");
        s.execute(&command).expect_err(json).to_string()
    };
    let sketch_on_b2 = format!(
        r#"{{"op":"sketch","name":"S9","on":"{}","primitives":[{{"type":"circle","center":[0,0],"radius":1}}]}}"#,
        top.id
    );
    let err = refused(&mut s, &sketch_on_b2);
    assert!(err.contains("belongs to body B2") && err.contains(r#""name": "B2""#), "{err}");
    let err = refused(&mut s, r#"{"op":"fillet","edges":["B2.E1"],"radius":0.5}"#);
    assert!(err.contains("belongs to body B2") && !err.contains("too large"), "{err}");
    let err = refused(&mut s, r#"{"op":"body","name":"B4"}"#);
    assert!(err.contains("B1..B2") && err.contains("next new one is B3"), "{err}");
    let err = refused(
        &mut s,
        r#"{"op":"sketch","name":"S9","on":"B2.F9","primitives":[{"type":"circle","center":[0,0],"radius":1}]}"#,
    );
    assert!(err.contains("body B2 has B2.F1..B2.F4"), "{err}");
    // A second lump in one body is refused with the way out.
    let lump = r#"{"op":"sketch","name":"S9","on":"XY","primitives":[{"type":"circle","center":[80,0],"radius":1}]}"#;
    s.execute(&serde_json::from_str(lump).expect("sketch")).expect("sketch");
    let err = refused(&mut s, r#"{"op":"extrude","profile":"S9","mode":"add","extent":{"type":"one_side","depth":2}}"#);
    assert!(err.contains(r#"{"op": "body", "name": "B3"}"#), "{err}");
    assert_eq!(s.state().bodies.len(), 2, "refused commands leave the bodies as they were");

    // The STEP file holds both solids, and reads back as two bodies.
    let dir = tempfile::tempdir().expect("tempdir");
    let step = dir.path().join("two.step");
    s.save(None, Some(&step)).expect("save");
    let loaded = s.load(&step).expect("load").clone();
    assert_eq!(loaded.bodies.iter().map(|b| b.solids).collect::<Vec<_>>(), [1, 1]);
    assert_close(loaded.volume, state.volume, "volume read back");
}

#[test]
fn entity_tables_keep_the_precision_of_a_small_model() {
    // A 0.0123 x 0.0456 x 0.00789 block (a part in metres): volume 4.425e-6, which a table
    // rounded to 9 decimals would cut to four digits.
    let (a, b, h) = (0.0123, 0.0456, 0.00789);
    let program: freecad_bridge::Program = serde_json::from_value(serde_json::json!({"commands": [
        {"op": "sketch", "name": "S1", "on": "XY", "primitives": [
            {"type": "line", "start": [0, 0], "end": [a, 0]}, {"type": "line", "start": [a, 0], "end": [a, b]},
            {"type": "line", "start": [a, b], "end": [0, b]}, {"type": "line", "start": [0, b], "end": [0, 0]}]},
        {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": h}}]}))
    .expect("program");
    let mut s = session();
    s.execute_program(&program).expect("small block");
    let state = s.state();
    let relative = |got: f64, want: f64| ((got - want) / want).abs();
    assert!(relative(state.volume, a * b * h) < 1e-9, "volume {} vs {}", state.volume, a * b * h);
    assert!(relative(state.area, 2.0 * (a * b + a * h + b * h)) < 1e-9, "area {}", state.area);
    let top = state.faces.iter().find(|f| f.centroid[2] > h / 2.0).expect("top face");
    assert!(relative(top.area, a * b) < 1e-9, "top face area {}", top.area);
    assert!(relative(top.centroid[0], a / 2.0) < 1e-9, "centroid {:?}", top.centroid);
}

#[test]
fn a_hole_placed_by_its_distance_to_an_edge_keeps_that_distance_after_the_edit() {
    // A 20 x 10 x 10 block; a hole on XZ drawn at z = 7.5 whose centre is held 3 below the
    // projected top edge E4: it is cut at z = 7, and at z = 8 once the block is 11 high.
    let program = freecad_bridge::testing::program(
        r#"{"commands": [
        {"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"line","start":[0,0],"end":[20,0]},{"type":"line","start":[20,0],"end":[20,10]},{"type":"line","start":[20,10],"end":[0,10]},{"type":"line","start":[0,10],"end":[0,0]}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10}},
        {"op":"sketch","name":"S2","on":"XZ","primitives":[{"type":"circle","center":[10,7.5],"radius":1}],
         "constraints":[{"type":"distance_to_line","point":"g0.center","line":"E4","value":3}]},
        {"op":"extrude","profile":"S2","mode":"cut","extent":{"type":"through_all","symmetric":true}}
    ]}"#,
    );
    let hole_height = |s: &freecad_bridge::Session| {
        let hole = s.state().faces.iter().find(|f| f.radius == Some(1.0)).expect("the hole's cylinder");
        hole.center.expect("its axis point")[2]
    };
    let mut s = session();
    s.execute_program(&program).expect("program");
    assert_close(hole_height(&s), 7.0, "3 below the top edge");
    s.scale_extrusions(1.1).expect("edit");
    assert_close(hole_height(&s), 8.0, "still 3 below the top edge");
}

#[test]
fn a_hole_placed_midway_between_two_corners_is_cut_at_their_middle() {
    // A 20 x 10 x 10 block; a hole drawn off-centre at (8, 4) on XY, held midway between two
    // diagonal corners of the top face (projected onto the plane): it is cut at (10, 5).
    let mut s = session();
    let block = freecad_bridge::testing::program(
        r#"{"commands": [
        {"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"line","start":[0,0],"end":[20,0]},{"type":"line","start":[20,0],"end":[20,10]},{"type":"line","start":[20,10],"end":[0,10]},{"type":"line","start":[0,10],"end":[0,0]}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10}}
    ]}"#,
    );
    s.execute_program(&block).expect("block");
    let corner = |p: [f64; 3]| {
        s.state().vertices.iter().find(|v| v.point == p).map(|v| v.id.clone()).expect("a corner of the top face")
    };
    let (a, b) = (corner([0.0, 0.0, 10.0]), corner([20.0, 10.0, 10.0]));
    let hole = freecad_bridge::testing::program(&format!(
        r#"{{"commands": [
        {{"op":"sketch","name":"S2","on":"XY","primitives":[{{"type":"circle","center":[8,4],"radius":1}}],
         "constraints":[{{"type":"midpoint","point":"g0.center","a":"{a}","b":"{b}"}}]}},
        {{"op":"extrude","profile":"S2","mode":"cut","extent":{{"type":"through_all","symmetric":true}}}}
    ]}}"#
    ));
    s.execute_program(&hole).expect("hole");
    let axis = s.state().faces.iter().find(|f| f.radius == Some(1.0)).and_then(|f| f.center).expect("the hole");
    assert_close(axis[0], 10.0, "x midway");
    assert_close(axis[1], 5.0, "y midway");
}

#[test]
fn a_fuse_that_leaves_crossing_wires_is_built_refined_and_the_same_in_a_new_worker() {
    // A ring (r 9..20 about (-33, -1), 17 high); a link plate from its top face down 16 whose
    // concave end (an arc of r 19.01) cuts into the ring; a second ring (r 10..19) from the
    // bottom face up 35, drawn at (-33, 1) in that face's frame (which turns y over), so
    // concentric with the first. Its outer wall nearly meets the link's concave end, and the
    // fuse leaves coplanar faces whose wires cross (OCC: "Intersecting wires"): the case the
    // fit's moves and readers' rings met. FreeCAD's Refine merges them into one valid solid.
    let p = freecad_bridge::testing::program(
        r#"{"commands": [
        {"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"circle","center":[-33,-1],"radius":20},{"type":"circle","center":[-33,-1],"radius":9}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":17}},
        {"op":"sketch","name":"S2","on":"F3","primitives":[{"type":"line","start":[32,19],"end":[32,-18]},{"type":"line","start":[32,-18],"end":[-30,-17]},{"type":"arc","start":[-30,-17],"mid":[-10,2],"end":[-29,21]},{"type":"line","start":[-29,21],"end":[32,19]}]},
        {"op":"extrude","profile":"S2","mode":"add","extent":{"type":"one_side","depth":16},"reversed":true},
        {"op":"sketch","name":"S3","on":"F2","primitives":[{"type":"circle","center":[-33,1],"radius":19},{"type":"circle","center":[-33,1],"radius":10}]},
        {"op":"extrude","profile":"S3","mode":"add","extent":{"type":"one_side","depth":35},"reversed":true}
    ]}"#,
    );
    let mut s = session();
    let (first, last) = p.commands.split_at(5);
    for (k, command) in first.iter().enumerate() {
        s.execute(command).unwrap_or_else(|e| panic!("step {}: {e}", k + 1));
    }
    let before = s.state().volume;
    s.execute(&last[0]).unwrap_or_else(|e| panic!("step 6: {e}"));
    let built = s.state().clone();
    assert!(built.valid && built.solids == 1, "one valid solid: {:?} solids, valid {}", built.solids, built.valid);
    // Below z = 17 the second ring lies inside the first; above, up to 35, it is all new.
    let annulus = PI * (19.0f64.powi(2) - 10.0f64.powi(2));
    assert_close(built.volume - before, annulus * 18.0, "the volume the second ring adds");
    // The same program in a new worker takes the same path: the same entities and volume.
    let mut again = session();
    again.execute_program(&p).expect("the program builds again");
    assert_eq!(again.state().faces.len(), built.faces.len());
    assert_eq!(again.state().edges.len(), built.edges.len());
    assert_close(again.state().volume, built.volume, "the volume in a new worker");
}

#[test]
fn a_fillet_that_fails_says_whether_its_edges_fail_alone_or_only_together() {
    // A 10 mm cube; E4 and E10 are the top face's two edges along x. At a radius of 6 each
    // takes its fillet alone, but the two need 12 mm of a 10 mm face: a reader told "the
    // radius may be too large" had seen the same radius work edge by edge. At 12 neither
    // edge takes it alone. A failure leaves the document as it was.
    let mut s = session();
    let cube = freecad_bridge::testing::program(
        r#"{"commands": [
        {"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"line","start":[0,0],"end":[10,0]},{"type":"line","start":[10,0],"end":[10,10]},{"type":"line","start":[10,10],"end":[0,10]},{"type":"line","start":[0,10],"end":[0,0]}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10}}
    ]}"#,
    );
    s.execute_program(&cube).expect("cube");
    let top_edge_along_x = |y: f64| {
        s.state()
            .edges
            .iter()
            .find(|e| e.start.zip(e.end).is_some_and(|(a, b)| a[1] == y && b[1] == y && a[2] == 10.0 && b[2] == 10.0))
            .map(|e| e.id.clone())
            .expect("a top edge along x")
    };
    let (front, back) = (top_edge_along_x(0.0), top_edge_along_x(10.0));
    let fillet = |s: &mut freecad_bridge::Session, edges: &str, radius: f64| {
        let json = format!(r#"{{"op":"fillet","edges":[{edges}],"radius":{radius}}}"#);
        let command: freecad_bridge::Command = serde_json::from_str(&json).expect("command");
        s.execute(&command).map(|_| ()).map_err(|e| e.to_string())
    };
    let both = format!(r#""{front}","{back}""#);
    let err = fillet(&mut s, &both, 6.0).expect_err("two fillets of 6 on a 10 mm face");
    assert!(err.contains("each of these edges takes this radius alone, but not all of them together"), "{err}");
    let err = fillet(&mut s, &both, 12.0).expect_err("a fillet of 12 on a 10 mm cube");
    assert!(err.contains(&format!("{front}, {back} do not take this radius even alone")), "{err}");
    let err = fillet(&mut s, &format!(r#""{front}""#), 12.0).expect_err("one fillet of 12");
    assert!(err.contains("the radius may be too large for the faces next to this edge"), "{err}");
    assert_close(s.state().volume, 1000.0, "the cube as it was");
    fillet(&mut s, &format!(r#""{front}""#), 6.0).expect("one edge takes 6 alone");
}
