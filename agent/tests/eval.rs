//! Evaluation against answers known in advance: identical solids, offset cubes, concentric
//! spheres, exact against voxel IoU, determinism, normalisation invariance, the edit10
//! protocol, the command line, and the test100 STEP files scored against themselves.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{binary, config, example_path, repo_root};
use eval::{EvalOptions, IouMethod, Normalization, Pair, Protocol, Report};
use freecad_bridge::WorkerPool;
use serde_json::Value;

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
    let out = dir.path().join("out");
    let o = Command::new(binary())
        .args(["exec", plate.to_str().expect("path"), "--out", out.to_str().expect("path")])
        .output()
        .expect("exec runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let step = out.join("model.step");
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

fn cli(args: &[&str]) -> Output {
    Command::new(binary()).arg("eval").args(args).env_remove("VISION2CAD_LOG").output().expect("vision2cad runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Three ground-truth programs and predictions for two of them.
fn sample_dirs(root: &Path) -> (PathBuf, PathBuf) {
    let (pred, gt) = (root.join("pred"), root.join("gt"));
    for d in [&pred, &gt] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    for (name, example) in [("a", "box"), ("b", "flange_revolve"), ("c", "chamfer_box")] {
        std::fs::copy(example_path(example), gt.join(format!("{name}.json"))).expect("copy");
    }
    std::fs::copy(example_path("fillet_box"), pred.join("a.json")).expect("copy");
    std::fs::copy(example_path("flange_revolve"), pred.join("b.json")).expect("copy");
    (pred, gt)
}

#[test]
fn the_cli_prints_the_table_writes_json_and_counts_a_missing_prediction_as_not_compiled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pred, gt) = sample_dirs(dir.path());
    let json = dir.path().join("report.json");
    let jsonl = dir.path().join("samples.jsonl");
    let o = cli(&[
        "--pred",
        pred.to_str().expect("path"),
        "--gt",
        gt.to_str().expect("path"),
        "--json",
        json.to_str().expect("path"),
        "--jsonl",
        jsonl.to_str().expect("path"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    for needle in [
        "protocol       static",
        "normalisation  unit-cube",
        "N = 8192",
        "FNV-1a",
        "exact 2, voxel 0",
        "3 (2 compiled)",
        "CR",
        "mIoU",
        "CD mean",
        "CD median",
        "HD95",
    ] {
        assert!(table.contains(needle), "{needle:?} missing from\n{table}");
    }
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("JSON");
    for key in ["cr", "miou", "cd_mean", "cd_median", "hd", "hd95", "n", "n_compiled", "samples"] {
        assert!(report.get(key).is_some(), "{key} missing");
    }
    assert_eq!((report["n"].as_u64(), report["n_compiled"].as_u64()), (Some(3), Some(2)));
    let samples = report["samples"].as_array().expect("samples");
    for key in
        ["id", "compiled", "iou", "cd", "hd", "hd95", "iou_method", "watertight", "components", "bbox_ok", "volume_ok"]
    {
        assert!(samples[0].get(key).is_some(), "sample key {key} missing");
    }
    assert_eq!(samples[1]["id"], "b");
    assert!((samples[1]["iou"].as_f64().expect("iou") - 1.0).abs() < 1e-9);
    assert_eq!((samples[2]["id"].as_str(), samples[2]["compiled"].as_bool()), (Some("c"), Some(false)));
    assert!(samples[2]["reason"].as_str().is_some_and(|r| r.contains("no prediction")), "{}", samples[2]);
    assert!(samples[2]["iou"].is_null());
    let lines = std::fs::read_to_string(&jsonl).expect("jsonl");
    assert_eq!(lines.lines().count(), 3);
    let first: Value = serde_json::from_str(lines.lines().next().expect("line")).expect("JSON line");
    assert_eq!(first, samples[0]);

    // A prediction file that is not a model at all: not compiled, with the kernel's reason.
    let broken = dir.path().join("broken.step");
    std::fs::write(&broken, "not a STEP file").expect("write");
    let o = cli(&["--pred", broken.to_str().expect("path"), "--gt", example_path("box").to_str().expect("path")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("1 (0 compiled)"), "{}", text(&o.stdout));
}

#[test]
fn a_missing_ground_truth_exits_1_naming_it() {
    let o = cli(&["--pred", example_path("box").to_str().expect("path"), "--gt", "/nonexistent/truth.step"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("/nonexistent/truth.step"), "{}", text(&o.stderr));
    let o = cli(&["--pred", "x", "--gt", "y", "--protocol", "edit11"]);
    assert_eq!(o.status.code(), Some(2), "a bad protocol is a usage error");
}

#[test]
fn reports_are_identical_across_runs_and_worker_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pred, gt) = sample_dirs(dir.path());
    let run = |workers: &str, name: &str| -> String {
        let out = dir.path().join(name);
        let o = cli(&[
            "--pred",
            pred.to_str().expect("path"),
            "--gt",
            gt.to_str().expect("path"),
            "--normalize",
            "inertia",
            "--workers",
            workers,
            "--json",
            out.to_str().expect("path"),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        std::fs::read_to_string(out).expect("json")
    };
    let first = run("1", "one.json");
    assert_eq!(first, run("1", "again.json"), "two runs");
    assert_eq!(first, run("2", "two.json"), "1 against 2 workers");
}

#[test]
fn test100_steps_score_perfectly_against_themselves() {
    let data =
        std::env::var_os("VISION2CAD_DATA").map(PathBuf::from).unwrap_or_else(|| repo_root().join("../shared/data"));
    let steps = data.join("cadcoder-test100/steps");
    let Ok(entries) = std::fs::read_dir(&steps) else {
        println!("skipped: no test100 STEP files at {} (set VISION2CAD_DATA)", steps.display());
        return;
    };
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
fn bench_against_python_runs_both_pipelines_on_the_same_pairs_and_they_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pred, gt) = (dir.path().join("pred"), dir.path().join("gt"));
    for d in [&pred, &gt] {
        std::fs::create_dir(d).expect("dir");
    }
    // Two parts, each scored against a slightly different version of itself.
    for (name, from, to) in [("plate", r#""depth":2}"#, r#""depth":3}"#), ("flange", "", "")] {
        let program = example_path(if name == "plate" { "plate_counterbore" } else { "flange_revolve" });
        let text = std::fs::read_to_string(&program).expect("read");
        let variant = if from.is_empty() { text.clone() } else { text.replace(from, to) };
        for (side, text) in [(&gt, text), (&pred, variant)] {
            let source = write_program(dir.path(), &format!("{name}-source"), &text);
            let out = dir.path().join(format!("{name}-out"));
            let o = Command::new(binary())
                .args(["exec", source.to_str().expect("path"), "--out", out.to_str().expect("path")])
                .output()
                .expect("exec runs");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            std::fs::copy(out.join("model.step"), side.join(format!("{name}.step"))).expect("copy");
            std::fs::remove_dir_all(&out).expect("clean");
        }
    }
    let json = dir.path().join("bench.json");
    let o = Command::new(binary())
        .current_dir(repo_root())
        .args(["bench", "eval", "--against-python", "--rounds", "1", "--workers", "1"])
        .arg("--pred")
        .arg(&pred)
        .arg("--gt")
        .arg(&gt)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("bench runs");
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let figures: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse");
    assert_eq!(figures["pairs"], 2);
    let variants: Vec<&str> =
        figures["whole_run"].as_array().expect("rows").iter().filter_map(|r| r["variant"].as_str()).collect();
    assert_eq!(variants, ["python", "vision2cad"]);
    // The same IoU from both (the plates differ, so it is not trivially 1 on both sides).
    assert_eq!(figures["agreement"]["pairs"], 2);
    let diff = figures["agreement"]["max_iou_difference"].as_f64().expect("difference");
    assert!(diff < 1e-6, "IoU differs by {diff}");
    let stages = figures["stages_ms_per_pair"].as_array().expect("stages");
    assert!(
        stages.iter().any(|s| s["stage"] == "exact booleans" && s["vision2cad_ms"].as_f64() > Some(0.0)),
        "{stages:?}"
    );
}
