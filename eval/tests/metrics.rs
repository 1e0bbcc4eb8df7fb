//! Evaluation against answers known in advance: identical solids, offset cubes, concentric
//! spheres, exact against voxel IoU, normalisation invariance, the edit10 protocol, and the
//! test100 STEP files scored against themselves.

use std::path::{Path, PathBuf};

use eval::{EvalOptions, IouMethod, Normalization, Pair, Protocol, Report};
use freecad_bridge::WorkerPool;
use freecad_bridge::testing::{config, data_dir, example, example_path};

fn pool(workers: usize) -> WorkerPool {
    WorkerPool::new(config(), workers)
}

fn pair(pred: &Path, gt: &Path) -> Pair {
    Pair {
        id: gt.file_stem().expect("stem").to_string_lossy().into(),
        pred: Some(pred.to_path_buf()),
        gt: gt.to_path_buf(),
    }
}

fn evaluate(pairs: &[Pair], options: &EvalOptions) -> Report {
    eval::evaluate(&pool(2), pairs, options, || {}).expect("evaluation runs")
}

fn none() -> EvalOptions {
    EvalOptions { normalization: Normalization::None, ..Default::default() }
}

/// A closed polygon sketched on XY and extruded by `depth`.
fn prism(dir: &Path, name: &str, corners: &[[f64; 2]], depth: f64) -> PathBuf {
    let lines: Vec<String> = (0..corners.len())
        .map(|i| {
            let (a, b) = (corners[i], corners[(i + 1) % corners.len()]);
            format!(r#"{{"type":"line","start":[{},{}],"end":[{},{}]}}"#, a[0], a[1], b[0], b[1])
        })
        .collect();
    write_program(
        dir,
        name,
        &format!(
            r#"{{"commands":[{{"op":"sketch","name":"S1","on":"XY","primitives":[{}]}},
            {{"op":"extrude","profile":"S1","mode":"add","extent":{{"type":"one_side","depth":{depth}}}}},{{"op":"end"}}]}}"#,
            lines.join(",")
        ),
    )
}

/// A sphere: a half-disc (a line along the sketch's vertical axis and an arc) revolved
/// about that axis.
fn sphere(dir: &Path, name: &str, r: f64) -> PathBuf {
    write_program(
        dir,
        name,
        &format!(
            r#"{{"commands":[{{"op":"sketch","name":"S1","on":"XZ","primitives":[
            {{"type":"line","start":[0,{m}],"end":[0,{r}]}},
            {{"type":"center_arc","center":[0,0],"radius":{r},"start_angle":-90,"end_angle":90}}]}},
            {{"op":"revolve","profile":"S1","mode":"add","axis":"S1.v_axis","angle":360}},{{"op":"end"}}]}}"#,
            m = -r
        ),
    )
}

fn write_program(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, text).expect("write program");
    path
}

fn only(report: &Report) -> &eval::SampleResult {
    assert_eq!(report.samples.len(), 1);
    let s = &report.samples[0];
    assert!(s.compiled, "{:?}", s.reason);
    s
}

fn value(x: Option<f64>) -> f64 {
    x.expect("a compiled sample has every metric")
}

/// A shape against itself: the two samples come from independent streams, so the distances
/// are the sampling noise floor, above zero and small. At N = 8192 on the 100 test100 parts
/// the floor's CD x1000 is 0.01 to 0.47 and its HD95 0.004 to 0.027 (README).
fn assert_noise_floor(s: &eval::SampleResult) {
    let (cd, hd95) = (value(s.cd), value(s.hd95));
    assert!(cd > 0.0 && cd < 1.0, "{}: CD {cd} is not a noise floor", s.id);
    assert!(hd95 > 0.0 && hd95 < 0.04, "{}: HD95 {hd95} is not a noise floor", s.id);
}

#[test]
fn identical_solids_score_iou_one_and_the_sampling_noise_floor() {
    let p = example_path("plate_counterbore");
    for normalization in [Normalization::UnitCube, Normalization::Inertia] {
        let options = EvalOptions { normalization, ..Default::default() };
        let report = evaluate(&[pair(&p, &p)], &options);
        let s = only(&report);
        let again = evaluate(&[pair(&p, &p)], &options);
        assert_eq!(
            (s.cd, s.hd, s.hd95),
            (again.samples[0].cd, again.samples[0].hd, again.samples[0].hd95),
            "a second run"
        );
        assert!(report.table().contains("independent streams"), "{}", report.table());
        assert_eq!(s.iou_method, Some(IouMethod::Exact));
        assert!((value(s.iou) - 1.0).abs() < 1e-9, "{normalization:?}: IoU {:?}", s.iou);
        assert_noise_floor(s);
        assert_eq!((s.watertight, s.components, s.bbox_ok, s.volume_ok), (Some(true), Some(1), Some(true), Some(true)));
        assert_eq!(report.cr, 1.0);
    }
}

#[test]
fn unit_cubes_offset_by_two_have_the_exact_iou_and_hausdorff_distance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = prism(dir.path(), "a", &[[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0]], 10.0);
    let b = prism(dir.path(), "b", &[[2.0, 0.0], [12.0, 0.0], [12.0, 10.0], [2.0, 10.0]], 10.0);
    let report = evaluate(&[pair(&a, &b)], &none());
    let s = only(&report);
    // Common 8 x 10 x 10, fusion 12 x 10 x 10.
    assert!((value(s.iou) - 8.0 / 12.0).abs() < 1e-9, "IoU {:?}", s.iou);
    assert_eq!(s.iou_method, Some(IouMethod::Exact));
    // The farthest points are on the x = 0 face, at least 2 from every point of the other
    // cube (x >= 2); sampling can only add about the point spacing (0.27 here).
    let hd = value(s.hd);
    assert!((2.0 - 1e-9..2.2).contains(&hd), "HD {hd}");
    assert!(value(s.hd95) <= hd + 1e-12);
    // Under unit-cube both cubes become the same cube.
    let report = evaluate(&[pair(&a, &b)], &EvalOptions::default());
    assert!((value(only(&report).iou) - 1.0).abs() < 1e-9);
}

#[test]
fn concentric_spheres_are_close_to_the_analytic_distances() {
    // Radii 1 and 1.2: every point is 0.2 from the other sphere, so CD = 2 * 0.04 * 1000 = 80,
    // HD = HD95 = 0.2. A sample of 8192 points adds about (0.2^2 + 1 / (pi * density)) per
    // direction, a few percent.
    let dir = tempfile::tempdir().expect("tempdir");
    let small = sphere(dir.path(), "small", 1.0);
    let large = sphere(dir.path(), "large", 1.2);
    let report = evaluate(&[pair(&small, &large)], &none());
    let s = only(&report);
    assert!((value(s.iou) - (1.0f64 / 1.2).powi(3)).abs() < 1e-6, "IoU {:?}", s.iou);
    let (cd, hd, hd95) = (value(s.cd), value(s.hd), value(s.hd95));
    assert!((80.0..80.0 * 1.05).contains(&cd), "CD {cd}");
    assert!((0.2 - 1e-3..0.2 * 1.15).contains(&hd), "HD {hd}");
    assert!((0.2 - 1e-3..0.2 * 1.05).contains(&hd95), "HD95 {hd95}");
    assert!(hd95 <= hd);
}

#[test]
fn voxel_iou_agrees_with_exact_iou_within_one_percent_on_the_example_parts() {
    let names =
        ["box", "chamfer_box", "flange_revolve", "plate_counterbore", "shaft_groove", "symmetric_slot", "loft_frustum"];
    // Each part against the next: overlaps of every size.
    let pairs: Vec<Pair> =
        (0..names.len()).map(|i| pair(&example_path(names[i]), &example_path(names[(i + 1) % names.len()]))).collect();
    let report = evaluate(&pairs, &EvalOptions { voxel_check: true, ..Default::default() });
    assert_eq!(report.n_compiled, names.len());
    for s in &report.samples {
        let (exact, voxel) = (value(s.iou), value(s.iou_voxel));
        assert_eq!(s.iou_method, Some(IouMethod::Exact), "{}", s.id);
        assert!((exact - voxel).abs() <= 0.01, "{}: exact {exact}, voxel {voxel}", s.id);
    }
    // Voxels only: the same numbers, recorded as voxel IoUs.
    let voxels = evaluate(&pairs[..2], &EvalOptions { voxel_only: true, ..Default::default() });
    assert_eq!(voxels.iou_methods.get(&IouMethod::Voxel), Some(&2));
    for (v, s) in voxels.samples.iter().zip(&report.samples) {
        assert_eq!((v.iou_method, v.iou), (Some(IouMethod::Voxel), s.iou_voxel), "{}", s.id);
    }
}

#[test]
fn a_scaled_and_translated_copy_scores_iou_one_under_unit_cube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let l_shape = [[0.0, 0.0], [20.0, 0.0], [20.0, 5.0], [8.0, 5.0], [8.0, 10.0], [0.0, 10.0]];
    let a = prism(dir.path(), "a", &l_shape, 4.0);
    let moved: Vec<[f64; 2]> = l_shape.iter().map(|p| [p[0] * 2.5 + 100.0, p[1] * 2.5 - 40.0]).collect();
    let b = prism(dir.path(), "b", &moved, 10.0);
    let report = evaluate(&[pair(&a, &b)], &EvalOptions::default());
    let s = only(&report);
    assert!((value(s.iou) - 1.0).abs() < 1e-9, "IoU {:?}", s.iou);
    // Identical after normalisation: the distances are the sampling noise floor.
    assert_noise_floor(s);
    // In model units they are different parts.
    assert_eq!((s.bbox_ok, s.volume_ok), (Some(false), Some(false)));
}

#[test]
fn edit10_follows_sketches_placed_on_upstream_faces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plate = example_path("plate_counterbore");
    let edit10 = EvalOptions { protocol: Protocol::Edit10, normalization: Normalization::None, ..Default::default() };

    // The program against itself: both edited the same way.
    let s = evaluate(&[pair(&plate, &plate)], &edit10).samples.remove(0);
    assert!(s.compiled && (value(s.iou) - 1.0).abs() < 1e-9, "{s:?}");
    // In model units (the plate is 40 long): the noise floor, above zero and well under 1.
    assert!(value(s.cd) > 0.0 && value(s.hd95) > 0.0 && value(s.hd95) < 1.0, "{s:?}");

    // The unedited STEP (nothing to edit) against the edited program. The pad grows from
    // 5 to 5.5 and the counterbore, sketched on the top face, moves up with it and deepens
    // from 2 to 2.2: the unedited plate lies inside the edited one, IoU = V / (1.1 V).
    let step = dir.path().join("model.step");
    let mut session = freecad_bridge::testing::session();
    session.execute_program(&example("plate_counterbore")).expect("the plate builds");
    session.save(None, Some(&step)).expect("STEP written");
    let s = evaluate(&[pair(&step, &plate)], &edit10).samples.remove(0);
    assert!((value(s.iou) - 1.0 / 1.1).abs() < 1e-6, "IoU {:?}", s.iou);
    let s = evaluate(&[pair(&step, &plate)], &none()).samples.remove(0);
    assert!((value(s.iou) - 1.0).abs() < 1e-9, "static: IoU {:?}", s.iou);

    // A variant with a deeper counterbore: after the edit it is still a different part.
    let variant = std::fs::read_to_string(&plate).expect("read").replace(r#""depth":2}"#, r#""depth":3}"#);
    assert!(variant.contains(r#""depth":3}"#), "the variant differs");
    let variant = write_program(dir.path(), "variant", &variant);
    let report = evaluate(&[pair(&variant, &plate)], &edit10);
    let s = only(&report);
    let cb = |depth: f64| std::f64::consts::PI * (36.0 - 16.0) * depth;
    let (vp, vg) = (6600.0 - 176.0 * std::f64::consts::PI - cb(3.3), 6600.0 - 176.0 * std::f64::consts::PI - cb(2.2));
    assert!((value(s.iou) - vp / vg).abs() < 1e-6, "IoU {:?}, expected {}", s.iou, vp / vg);

    // A STEP ground truth has no depths to edit.
    let err = eval::evaluate(&pool(1), &[pair(&plate, &step)], &edit10, || {}).expect_err("not editable");
    assert!(err.to_string().contains("model.step") && err.to_string().contains("edit10"), "{err}");
}

#[test]
fn a_prediction_that_breaks_under_the_edit_is_not_compiled_for_edit10() {
    // A 10-high block whose top 0.5 is cut away from a plane at z = 9.5 (its offset is not
    // an extrusion depth). After the edit the block is 11 high and the cut 0.55 deep: it
    // splits the part into two solids, so the model no longer recomputes.
    let dir = tempfile::tempdir().expect("tempdir");
    let pred = write_program(
        dir.path(),
        "split",
        r#"{"commands":[
        {"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"line","start":[0,0],"end":[20,0]},
         {"type":"line","start":[20,0],"end":[20,10]},{"type":"line","start":[20,10],"end":[0,10]},
         {"type":"line","start":[0,10],"end":[0,0]}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10}},
        {"op":"plane","name":"P1","on":"XY","offset":9.5},
        {"op":"sketch","name":"S2","on":"P1","primitives":[{"type":"line","start":[-1,-1],"end":[21,-1]},
         {"type":"line","start":[21,-1],"end":[21,11]},{"type":"line","start":[21,11],"end":[-1,11]},
         {"type":"line","start":[-1,11],"end":[-1,-1]}]},
        {"op":"extrude","profile":"S2","mode":"cut","reversed":true,"extent":{"type":"one_side","depth":0.5}},
        {"op":"end"}]}"#,
    );
    let gt = example_path("box");
    let report = evaluate(&[pair(&pred, &gt)], &EvalOptions::default());
    assert_eq!(report.n_compiled, 1, "static: {:?}", report.samples[0].reason);
    let report = evaluate(&[pair(&pred, &gt)], &EvalOptions { protocol: Protocol::Edit10, ..Default::default() });
    let s = &report.samples[0];
    assert!(!s.compiled && s.iou.is_none(), "{s:?}");
    assert!(s.reason.as_deref().is_some_and(|r| r.contains("does not recompute")), "{:?}", s.reason);
    assert_eq!(report.cr, 0.0);
}

#[test]
fn test100_steps_score_perfectly_against_themselves() {
    let Some(steps) = data_dir().map(|d| d.join("cadcoder-test100/steps")).filter(|s| s.is_dir()) else {
        println!("skipped: no test100 STEP files (set VISION2CAD_DATA or provide ../shared/data)");
        return;
    };
    let entries = std::fs::read_dir(&steps).expect("the STEP folder reads");
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let pairs: Vec<Pair> = files.iter().take(5).map(|p| pair(p, p)).collect();
    let report = evaluate(&pairs, &EvalOptions::default());
    assert_eq!((report.n, report.n_compiled), (pairs.len(), pairs.len()));
    for s in &report.samples {
        assert!((value(s.iou) - 1.0).abs() < 1e-9, "{}: IoU {:?}", s.id, s.iou);
        assert_noise_floor(s);
    }
}

#[test]
fn two_models_of_one_flange_whose_plain_boolean_is_empty_are_scored_by_the_fuzzy_boolean() {
    // A generated flange (gen-11-00003: a stepped revolve, a groove cut round it, two
    // chamfers) and the oracle's model of it: 2.04 times the size, some numbers 5e-4 off.
    // Normalised, OpenCASCADE's plain common part of the two is empty (exact IoU 0 against
    // HD95 0.015), and the voxels stood in for it; the fuzzy boolean gives the exact IoU.
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = write_program(
        dir.path(),
        "flange",
        r#"{"commands": [{"op": "sketch", "name": "S1", "on": "XZ", "primitives": [{"type": "line", "start": [0.0, 0.0], "end": [8.5, 0.0]}, {"type": "line", "start": [8.5, 0.0], "end": [8.5, 14.0]}, {"type": "line", "start": [8.5, 14.0], "end": [13.0, 14.0]}, {"type": "line", "start": [13.0, 14.0], "end": [13.0, 37.0]}, {"type": "line", "start": [13.0, 37.0], "end": [8.5, 37.0]}, {"type": "line", "start": [8.5, 37.0], "end": [8.5, 49.0]}, {"type": "line", "start": [8.5, 49.0], "end": [0.0, 49.0]}, {"type": "line", "start": [0.0, 49.0], "end": [0.0, 0.0]}]}, {"op": "revolve", "profile": "S1", "mode": "add", "axis": "S1.v_axis", "angle": 360.0}, {"op": "sketch", "name": "S2", "on": "XZ", "primitives": [{"type": "line", "start": [6.75, 4.75], "end": [9.5, 4.75]}, {"type": "line", "start": [9.5, 4.75], "end": [9.5, 9.25]}, {"type": "line", "start": [9.5, 9.25], "end": [6.75, 9.25]}, {"type": "line", "start": [6.75, 9.25], "end": [6.75, 4.75]}]}, {"op": "revolve", "profile": "S2", "mode": "cut", "axis": "S2.v_axis", "angle": 360.0}, {"op": "chamfer", "edges": ["E1", "E14"], "size": 0.75}, {"op": "end"}]}"#,
    );
    let pred_dir = dir.path().join("pred");
    std::fs::create_dir(&pred_dir).expect("mkdir");
    let pred = write_program(
        &pred_dir,
        "flange",
        r#"{"commands": [{"op": "sketch", "name": "S1", "on": "XZ", "primitives": [{"type": "line", "start": [0.0, 0.0], "end": [17.361999999999995, 0.0]}, {"type": "line", "start": [17.361999999999995, 0.0], "end": [17.361999999999995, 28.596]}, {"type": "line", "start": [17.361999999999995, 28.596], "end": [26.554000000000002, 28.596]}, {"type": "line", "start": [26.554000000000002, 28.596], "end": [26.554000000000002, 75.576]}, {"type": "line", "start": [26.554000000000002, 75.576], "end": [17.361999999999995, 75.576]}, {"type": "line", "start": [17.361999999999995, 75.576], "end": [17.361999999999995, 100.087]}, {"type": "line", "start": [17.361999999999995, 100.087], "end": [0.0, 100.087]}, {"type": "line", "start": [0.0, 100.087], "end": [0.0, 0.0]}]}, {"op": "revolve", "profile": "S1", "mode": "add", "axis": "S1.v_axis", "angle": 360.0}, {"op": "sketch", "name": "S2", "on": "XZ", "primitives": [{"type": "line", "start": [13.787563743244618, 9.701872513510764], "end": [19.40456374324461, 9.701872513510764]}, {"type": "line", "start": [19.40456374324461, 9.701872513510764], "end": [19.40456374324461, 18.893872513510757]}, {"type": "line", "start": [19.40456374324461, 18.893872513510757], "end": [13.787563743244618, 18.893872513510757]}, {"type": "line", "start": [13.787563743244618, 18.893872513510757], "end": [13.787563743244618, 9.701872513510764]}]}, {"op": "revolve", "profile": "S2", "mode": "cut", "axis": "S2.v_axis", "angle": 360.0}, {"op": "chamfer", "edges": ["E1", "E14"], "size": 1.53195}, {"op": "end"}]}"#,
    );
    let report = evaluate(&[pair(&pred, &gt)], &EvalOptions::default());
    let s = only(&report);
    assert_eq!(s.iou_method, Some(IouMethod::Fuzzy), "{s:?}");
    assert!(value(s.iou) > 0.999, "IoU {:?}", s.iou);
    assert_eq!(report.iou_methods.get(&IouMethod::Fuzzy), Some(&1));
}
