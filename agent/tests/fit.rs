//! The fit against a real FreeCAD, end to end: an exact candidate is left alone and
//! `--no-fit` turns the fit off; a noisy drawing is moved onto the target's lines; a thin
//! plate's depth and a tube's walls read wrong are measured back at END; a pipe's path drawn
//! leaning is put on the target's outline; a feature whose fit is kept is fitted again; a run
//! that stops at a failed step is fitted too; a drawing the search would fold across itself
//! is fitted without crossing; a feature fitted before a later one moved is fitted again
//! after it (test100 parts, where ../shared/data has them).

mod common;

use std::path::{Path, PathBuf};

use common::{example_path, iou, outcome, reconstruct, target_image, trace, write_script};
use serde_json::Value;

/// A JSON file the run wrote (a program, the fit's report), its path named where it fails.
fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The program a run wrote to `out`.
fn program_in(out: &Path) -> Value {
    read_json(&out.join("program.json"))
}

/// The four lines of a rectangle about `centre`, `x` and `y` half its sides, as a sketch's
/// primitives (model units, or the sketch window's for a drawing).
fn rectangle(centre: [f64; 2], x: f64, y: f64) -> Vec<Value> {
    let [cx, cy] = centre;
    let c = [[cx - x, cy - y], [cx + x, cy - y], [cx + x, cy + y], [cx - x, cy + y]];
    (0..4).map(|i| serde_json::json!({"type": "line", "start": c[i], "end": c[(i + 1) % 4]})).collect()
}

/// The fit at END runs by default and `--no-fit` turns it off; `--fit-steps` adds the fit of
/// every step. An exact candidate (the oracle's) is left alone at every step and at END, also
/// with `--subpixel-fit`: the
/// program is the one without the fit, number for number; every fit is in the trace and the
/// report.
#[test]
fn the_fit_leaves_an_exact_candidate_alone_and_no_fit_turns_it_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = example_path("box");
    let image = target_image(&gt, dir.path());
    let gt_arg = gt.to_str().expect("utf-8");
    let plain = dir.path().join("plain");
    assert!(reconstruct(&image, &plain, &["--vlm", "oracle", "--gt", gt_arg, "--no-fit"]).status.success());
    assert!(!trace(&plain).iter().any(|e| e["event"] == "fit" || e["event"] == "program_fit"), "--no-fit: no fit");
    let default = dir.path().join("default");
    assert!(reconstruct(&image, &default, &["--vlm", "oracle", "--gt", gt_arg]).status.success());
    let events = trace(&default);
    assert!(events.iter().any(|e| e["event"] == "program_fit"), "the fit at END runs by default");
    assert!(!events.iter().any(|e| e["event"] == "fit"), "the steps' fit only with --fit-steps");

    let fitted = dir.path().join("fitted");
    let run = reconstruct(&image, &fitted, &["--vlm", "oracle", "--gt", gt_arg, "--fit-steps"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&fitted);
    let fits: Vec<&Value> = events.iter().filter(|e| e["event"] == "fit").collect();
    assert!(!fits.is_empty(), "the box's pad is fitted");
    for fit in &fits {
        let report = &fit["report"];
        assert!(report["dropped"].is_string(), "an exact candidate stays as drawn: {fit}");
        assert_eq!(report["points_moved"], 0, "{fit}");
    }
    let at_end = events.iter().find(|e| e["event"] == "program_fit").expect("the fit at END ran");
    assert!(!at_end["report"]["features"].as_array().expect("features").is_empty(), "{at_end}");
    let program = program_in;
    assert_eq!(program(&fitted)["commands"], program(&plain)["commands"], "the same numbers as without the fit");
    assert_eq!(program(&default)["commands"], program(&plain)["commands"], "the same numbers as without the fit");
    // Measured to the lines where the target's image has them, each drawing scored within
    // half a pixel of the whole-pixel alignment: still left alone.
    let fine = dir.path().join("fine");
    let run = reconstruct(&image, &fine, &["--vlm", "oracle", "--gt", gt_arg, "--subpixel-fit"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(trace(&fine).iter().any(|e| e["event"] == "program_fit"), "--subpixel-fit is the fit at END");
    assert_eq!(program(&fine)["commands"], program(&plain)["commands"], "the same numbers as without the fit");
    let html = std::fs::read_to_string(fitted.join("report.html")).expect("report");
    assert!(html.contains("Fit dropped") && html.contains("Fit at END"), "the report shows the fits");
}

/// A drawing read off by a few pixels (the simulated model's coordinate noise) is fitted:
/// the fit's own render says the moved edges lie closer to the target's lines, and the
/// program saved holds the fitted numbers (it is what was built and what Stage 3 saw).
#[test]
fn the_fit_moves_a_noisy_drawing_onto_the_targets_lines_and_the_program_keeps_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = example_path("box");
    let image = target_image(&gt, dir.path());
    let out = dir.path().join("sim");
    let rates = ["sigma=0.01", "parameter=0", "reference=0", "operation=0", "judge_flip=0"];
    // The steps' fit alone (no fit at END), so the program saved is what the steps committed.
    let config = dir.path().join("steps-only.toml");
    std::fs::write(&config, "fit = false\nfit_steps = true\n").expect("config");
    let config = config.to_str().expect("utf-8");
    let mut args = vec!["--vlm", "sim", "--gt", gt.to_str().expect("utf-8"), "--seed", "3", "--config", config];
    for rate in &rates {
        args.extend(["--sim", rate]);
    }
    let run = reconstruct(&image, &out, &args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let kept: Vec<&Value> = events.iter().filter(|e| e["event"] == "fit" && e["report"]["dropped"].is_null()).collect();
    assert!(
        !kept.is_empty(),
        "a drawing 1% off is fitted: {:?}",
        events.iter().filter(|e| e["event"] == "fit").collect::<Vec<_>>()
    );
    for fit in &kept {
        let moved = &fit["report"]["moved"];
        assert!(moved["after_px"].as_f64() < moved["before_px"].as_f64(), "{fit}");
        assert!(
            fit["report"]["points_moved"].as_u64() > Some(0)
                || !fit["report"]["changes"].as_array().expect("changes").is_empty()
        );
    }
    // The committed commands are the program's.
    let committed: Vec<Value> = events
        .iter()
        .filter(|e| e["event"] == "execute" && e["ok"] == true)
        .flat_map(|e| e["commands"].as_array().cloned().unwrap_or_default())
        .collect();
    let program = program_in(&out);
    let saved: Vec<Value> =
        program["commands"].as_array().expect("commands").iter().filter(|c| c["op"] != "end").cloned().collect();
    assert_eq!(saved, committed);
}

/// A plate about five pixels thick whose depth the reader reads 20% off (the simulated
/// reader's parameter noise, nothing else): the line fit cannot see a pixel's change there,
/// and the fit at END measures the depth between the two lines the target draws along the
/// plate's sides. Without the fit the program keeps the depth read.
#[test]
fn a_thin_plates_depth_read_wrong_is_measured_back_at_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = dir.path().join("plate.json");
    std::fs::write(
        &gt,
        r#"{"commands":[{"op":"sketch","name":"S1","on":"XY","primitives":[
        {"type":"line","start":[-40,-20],"end":[40,-20]},{"type":"line","start":[40,-20],"end":[40,20]},
        {"type":"line","start":[40,20],"end":[-40,20]},{"type":"line","start":[-40,20],"end":[-40,-20]}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":2}},{"op":"end"}]}"#,
    )
    .expect("ground truth");
    let image = target_image(&gt, dir.path());
    let depth_of = |out: &Path| -> f64 {
        let program = program_in(out);
        let pad = program["commands"].as_array().expect("commands").iter().find(|c| c["op"] == "extrude").cloned();
        pad.expect("the pad")["extent"]["depth"].as_f64().expect("a depth")
    };
    let run = |name: &str, extra: &[&str]| -> PathBuf {
        let out = dir.path().join(name);
        let mut args = vec!["--vlm", "sim", "--gt", gt.to_str().expect("utf-8"), "--seed", "6"];
        for rate in ["sigma=0", "parameter=0.2", "reference=0", "operation=0", "judge_flip=0"] {
            args.extend(["--sim", rate]);
        }
        args.extend(extra);
        let output = reconstruct(&image, &out, &args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        out
    };
    let fitted = run("fitted", &[]);
    // The plate's depth in the run's model space: what the simulated reader was given to
    // spoil (the oracle's, scaled to S_t).
    let truth = trace(&fitted)
        .iter()
        .flat_map(|e| e["injected"].as_array().cloned().unwrap_or_default())
        .find(|i| i["where"] == "extrude.depth")
        .and_then(|i| i["from"].as_f64())
        .expect("the reader's depth was spoiled");
    let unfitted = run("unfitted", &["--no-fit"]);
    assert!((depth_of(&unfitted) / truth - 1.0).abs() > 0.1, "read {} for {truth}", depth_of(&unfitted));
    assert!((depth_of(&fitted) / truth - 1.0).abs() < 0.05, "fitted {} for {truth}", depth_of(&fitted));
    let measured = trace(&fitted)
        .into_iter()
        .filter(|e| e["event"] == "program_fit")
        .flat_map(|e| e["report"]["features"].as_array().cloned().unwrap_or_default())
        .find(|f| f["report"]["thickness"].is_object() && f["report"]["dropped"].is_null());
    let measured = measured.expect("the depth was measured and moved");
    assert!(measured["report"]["thickness"]["profiles"].as_u64() > Some(100), "{measured}");
}

/// A disc 4 mm thick read 3.7 (a round plate has no straight side to measure): the fit at
/// END measures its depth across the turned side, between the near circle's line and where
/// the far one crosses each profile, and the exact disc is left alone.
#[test]
fn a_discs_depth_read_thin_is_measured_across_its_turned_side() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disc = |name: &str, depth: f64| -> PathBuf {
        let path = dir.path().join(format!("{name}.json"));
        let program = serde_json::json!({"commands": [
            {"op": "sketch", "name": "S1", "on": "XZ", "primitives": [{"type": "circle", "center": [0, 0], "radius": 30}]},
            {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": depth}},
            {"op": "end"}]});
        std::fs::write(&path, program.to_string()).expect("write");
        path
    };
    let (gt, thin) = (disc("truth", 4.0), disc("thin", 3.7));
    let image = target_image(&gt, dir.path());
    let read = read_json;
    let fit = |program: &Path, out: &Path, extra: &[String]| {
        let run = common::command()
            .arg("fit")
            .arg(program)
            .arg("--image")
            .arg(&image)
            .arg("--out")
            .arg(out)
            .args(extra)
            .output();
        let run = run.expect("runs");
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        read(&out.join("fit.json"))
    };
    let depth = |out: &Path| read(&out.join("program.json"))["commands"][1]["extent"]["depth"].as_f64().expect("depth");
    let exact = dir.path().join("exact");
    let report = fit(&gt, &exact, &[]);
    assert_eq!(depth(&exact), 4.0, "{report}");
    let s = &report["sphere"];
    let sphere = format!("--sphere={},{},{},{}", s["center"][0], s["center"][1], s["center"][2], s["radius"]);
    let fitted = dir.path().join("fitted");
    let report = fit(&thin, &fitted, &[sphere]);
    let measured = report["fit"]["features"].as_array().expect("features").iter().find_map(|f| {
        let t = &f["report"]["thickness"];
        t.is_object().then(|| t.clone())
    });
    let measured = measured.expect("the disc's side was measured");
    assert_eq!(measured["curved"], true, "{measured}");
    assert!(measured["profiles"].as_u64() > Some(100), "{measured}");
    assert!((depth(&fitted) / 4.0 - 1.0).abs() < 0.02, "fitted {} for 4.0: {report}", depth(&fitted));
}

/// A square tube whose walls the reader draws at two fifths of the target's (a loop a few
/// pixels inside the outline, as readers drew a tray's rim): the line fit pulls each inner
/// line onto the nearest of the target's lines, the outline's, and the fit at END measures the
/// wall between the target's outline and the first line inside it instead.
#[test]
fn a_tubes_walls_drawn_thin_are_measured_to_the_targets_at_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = dir.path().join("tube.json");
    let mut primitives = rectangle([0.0, 0.0], 20.0, 15.0);
    primitives.extend(rectangle([0.0, 0.0], 17.0, 12.0));
    let program = serde_json::json!({"commands": [
        {"op": "sketch", "name": "S1", "on": "XY", "primitives": primitives},
        {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 30}},
        {"op": "end"}]});
    std::fs::write(&gt, program.to_string()).expect("ground truth");
    let image = target_image(&gt, dir.path());
    // The reader's drawing in the sketch window (0..1 across 100 mm of the model, centred on
    // the origin): the outline about where the target has it, the walls 2 mm where the
    // target's are about 5.
    let mut drawn = rectangle([0.5, 0.5], 0.343, 0.257);
    drawn.extend(rectangle([0.5, 0.5], 0.323, 0.237));
    let script = dir.path().join("script.jsonl");
    write_script(
        &script,
        &[
            serde_json::json!({"stage": "stage1", "answer": {"reason": "a tube", "sketches": [{"name": "S1", "on": "XY"}],
                "command": {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 51.4}}}}),
            serde_json::json!({"stage": "stage2", "answer": {"primitives": drawn}}),
            serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}}),
            serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}}),
        ],
    );
    let run = |name: &str, extra: &[&str]| -> PathBuf {
        let out = dir.path().join(name);
        let mut args = vec!["--vlm", "scripted", "--script", script.to_str().expect("utf-8")];
        args.extend(extra);
        let output = reconstruct(&image, &out, &args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        out
    };
    // Each wall's width over the outline's half-width on its axis (the target's: 3/20, 3/15),
    // on the outline's right, top, left and bottom: each side against the inner one beside
    // it (the fit may move the whole tube in its plane).
    let walls = |out: &Path| -> Vec<f64> {
        let program = program_in(out);
        let lines = program["commands"][0]["primitives"].as_array().expect("primitives").clone();
        let extent = |loop_: std::ops::Range<usize>, axis: usize| -> (f64, f64) {
            let values: Vec<f64> = loop_.map(|k| lines[k]["start"][axis].as_f64().expect("a coordinate")).collect();
            (
                values.iter().copied().fold(f64::INFINITY, f64::min),
                values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        let (outer, inner) = ([extent(0..4, 0), extent(0..4, 1)], [extent(4..8, 0), extent(4..8, 1)]);
        let half = [(outer[0].1 - outer[0].0) / 2.0, (outer[1].1 - outer[1].0) / 2.0];
        vec![
            (outer[0].1 - inner[0].1) / half[0],
            (outer[1].1 - inner[1].1) / half[1],
            (inner[0].0 - outer[0].0) / half[0],
            (inner[1].0 - outer[1].0) / half[1],
        ]
    };
    let unfitted = run("unfitted", &["--no-fit"]);
    let fitted = run("fitted", &[]);
    let truth = [3.0 / 20.0, 3.0 / 15.0, 3.0 / 20.0, 3.0 / 15.0];
    for (w, t) in walls(&unfitted).iter().zip(truth) {
        assert!(w / t < 0.5, "unfitted walls {:?}", walls(&unfitted));
    }
    for (w, t) in walls(&fitted).iter().zip(truth) {
        assert!((w / t - 1.0).abs() < 0.1, "fitted walls {:?} for {truth:?}", walls(&fitted));
    }
    let (before, after) = (
        iou(&unfitted.join("model.FCStd"), &gt, "static").expect("scored"),
        iou(&fitted.join("model.FCStd"), &gt, "static").expect("scored"),
    );
    assert!(before < 0.6 && after > 0.93, "static IoU {before} without the fit, {after} with it");
    let measured = trace(&fitted)
        .into_iter()
        .filter(|e| e["event"] == "program_fit")
        .flat_map(|e| e["report"]["features"].as_array().cloned().unwrap_or_default())
        .find(|f| f["report"]["walls"].is_array() && f["report"]["dropped"].is_null())
        .expect("the walls were measured and moved");
    assert_eq!(measured["report"]["walls"].as_array().map(Vec::len), Some(4), "{measured}");
}

/// A bent pipe the simulated reader draws leaning and too thick (reader seed 4, a percent of
/// the window's noise on each point): the profile's fit reads only its far end, and the fit
/// at END moves the path's points and the radius until the tube's sides lie on the target's
/// outline and its rings on the target's lines.
#[test]
fn a_pipes_path_drawn_leaning_is_put_on_the_targets_outline_at_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = dir.path().join("pipe.json");
    let program = serde_json::json!({"commands": [
        {"op": "sketch", "name": "S1", "on": "XY", "primitives": [{"type": "circle", "center": [0, 0], "radius": 4}]},
        {"op": "sketch", "name": "S2", "on": "XZ", "primitives": [
            {"type": "line", "start": [0, 0], "end": [0, 40]},
            {"type": "center_arc", "center": [15, 40], "radius": 15, "start_angle": 90, "end_angle": 180},
            {"type": "line", "start": [15, 55], "end": [30, 55]}]},
        {"op": "sweep", "profile": "S1", "mode": "add", "path": {"sketch": "S2"}},
        {"op": "end"}]});
    std::fs::write(&gt, program.to_string()).expect("ground truth");
    let image = target_image(&gt, dir.path());
    let run = |name: &str, extra: &[&str]| -> PathBuf {
        let out = dir.path().join(name);
        let mut args = vec!["--vlm", "sim", "--gt", gt.to_str().expect("utf-8"), "--seed", "4"];
        for rate in ["sigma=0.01", "parameter=0", "reference=0", "operation=0", "judge_flip=0"] {
            args.extend(["--sim", rate]);
        }
        args.extend(extra);
        let output = reconstruct(&image, &out, &args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        out
    };
    let (unfitted, fitted) = (run("unfitted", &["--no-fit"]), run("fitted", &[]));
    let path_of = |out: &Path| -> Value {
        let program = program_in(out);
        program["commands"].as_array().expect("commands").iter().find(|c| c["name"] == "S2").cloned().expect("S2")
    };
    assert_ne!(path_of(&unfitted), path_of(&fitted), "the path moved");
    let (before, after) = (
        iou(&unfitted.join("model.FCStd"), &gt, "static").expect("scored"),
        iou(&fitted.join("model.FCStd"), &gt, "static").expect("scored"),
    );
    assert!(
        before < 0.8 && after > 0.9 && after - before > 0.1,
        "static IoU {before} without the fit, {after} with it"
    );
}

/// A square-to-round loft with a recess in its top, drawn by the simulated reader at readers'
/// error size (generated part 5 of seed 11, reader seed 1). The fit at END searches the
/// drawing under the alignment of the model as drawn; once a fit is kept the model is lined
/// up anew and the feature fitted again, while fits are kept: the loft's edges lie 1.83 px
/// off the target's as drawn, 1.24 px fitted once, 1.06 px fitted again (static IoU 0.964).
/// (The shaft, part 3, showed it until the revolve's rings fitted its profile in one go:
/// 2.50 -> 0.58 px, and nothing better by 0.3 px was left for a second fit.)
#[test]
fn a_feature_whose_fit_is_kept_is_fitted_again_under_the_new_alignment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("gerd");
    let generated = common::command()
        .args(["gerd", "generate", "--count", "6", "--seed", "11", "--split", "0,0,6", "--out"])
        .arg(&data)
        .output()
        .expect("runs");
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let part = data.join("parts/gen-11-00005");
    let config = common::repo_root().join("assets/configs/sim-noise-only.toml");
    let out = dir.path().join("loft");
    let mut args = vec!["--vlm", "sim", "--gt", part.to_str().expect("utf-8"), "--seed", "1", "--no-evf"];
    args.extend(["--no-rag", "--config", config.to_str().expect("utf-8")]);
    args.extend(["--sim", "sigma=0.01", "--sim", "parameter=0.05"]);
    let run = reconstruct(&part.join("target.png"), &out, &args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let features: Vec<Value> = trace(&out)
        .into_iter()
        .filter(|e| e["event"] == "program_fit")
        .flat_map(|e| e["report"]["features"].as_array().cloned().unwrap_or_default())
        .collect();
    let kept = |f: &Value| {
        let r = &f["report"];
        r["dropped"].is_null()
            && (r["points_moved"].as_u64() > Some(0) || !r["changes"].as_array().is_none_or(Vec::is_empty))
    };
    let again = features.windows(2).any(|w| w[0]["command"] == w[1]["command"] && kept(&w[0]) && kept(&w[1]));
    assert!(again, "a feature fitted, lined up anew and fitted again: {features:?}");
    let score = iou(&out.join("model.FCStd"), &part.join("model.step"), "static").expect("scored");
    assert!(score > 0.95, "static IoU {score}");
}

/// The oracle's exact pipe with a square flange (generated gen-11-00004): its picture agrees
/// only 0.83 px with its own target (a pipe's sides are no edges), and its flange made 12%
/// deeper let the picture be lined up anew 2 px and 0.6% off, 0.61 px, with fewer of the
/// target's lines bare, while the flange's moved edges went 0.21 -> 1.85 px off. Kept on the
/// bare lines alone, it scored 0.951. A searched depth or slide is kept only where its moved
/// edges come no farther off, and the bare lines count only under the same alignment.
#[test]
fn an_exact_flange_is_not_deepened_for_a_picture_lined_up_anew() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("gerd");
    let generated = common::command()
        .args(["gerd", "generate", "--count", "5", "--seed", "11", "--split", "0,0,5", "--out"])
        .arg(&data)
        .output()
        .expect("runs");
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let part = data.join("parts/gen-11-00004");
    let out = dir.path().join("pipe");
    let args = ["--vlm", "oracle", "--gt", part.to_str().expect("utf-8"), "--no-evf", "--no-rag"];
    let run = reconstruct(&part.join("target.png"), &out, &args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let kept: Vec<Value> = trace(&out)
        .into_iter()
        .filter(|e| e["event"] == "program_fit")
        .flat_map(|e| e["report"]["features"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["report"]["dropped"].is_null() && !f["report"]["changes"].as_array().is_none_or(Vec::is_empty))
        .collect();
    assert!(kept.is_empty(), "nothing of the exact part moves: {kept:?}");
    let score = iou(&out.join("model.FCStd"), &part.join("model.step"), "static").expect("scored");
    assert!(score > 0.999, "static IoU {score}");
}

/// A run that stops at a step no candidate gets through still ends with the model built so
/// far, and that model is the one the user gets: it is fitted as a finished one is. A tall
/// block drawn 10% tall and a little off, then a hole drawn off the part three times, with no
/// step to set aside (`max_skipped_steps = 0`).
#[test]
fn a_run_that_stops_at_a_failed_step_is_fitted_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = dir.path().join("block.json");
    let lines = rectangle([0.0, 0.0], 20.0, 20.0);
    let program = serde_json::json!({"commands": [
        {"op": "sketch", "name": "S1", "on": "XY", "primitives": lines},
        {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 80}},
        {"op": "end"}]});
    std::fs::write(&gt, program.to_string()).expect("ground truth");
    let image = target_image(&gt, dir.path());
    // The sketch window spans 100 mm about the origin here: the block's 40 mm are 0.4.
    let drawn = rectangle([0.51, 0.495], 0.21, 0.195);
    let hole = serde_json::json!({"stage": "stage1", "answer": {"reason": "a hole", "sketches": [{"name": "S2", "on": "F6"}],
        "command": {"op": "extrude", "profile": "S2", "mode": "cut", "extent": {"type": "one_side", "depth": 5}}}});
    let off_the_part = serde_json::json!({"stage": "stage2", "answer": {"primitives": [{"type": "circle", "center": [0.95, 0.95], "radius": 0.02}]}});
    let mut answers = vec![
        serde_json::json!({"stage": "stage1", "answer": {"reason": "a block", "sketches": [{"name": "S1", "on": "XY"}],
            "command": {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 88}}}}),
        serde_json::json!({"stage": "stage2", "answer": {"primitives": drawn}}),
    ];
    for _ in 0..3 {
        answers.extend([hole.clone(), off_the_part.clone()]);
    }
    let script = dir.path().join("script.jsonl");
    write_script(&script, &answers);
    let config = dir.path().join("no-skips.toml");
    std::fs::write(&config, "max_skipped_steps = 0\n").expect("config");
    let run = |name: &str, extra: &[&str]| -> PathBuf {
        let out = dir.path().join(name);
        let mut args = vec![
            "--vlm",
            "scripted",
            "--script",
            script.to_str().expect("utf-8"),
            "--no-evf",
            "--no-rag",
            "--config",
            config.to_str().expect("utf-8"),
        ];
        args.extend(extra);
        let output = reconstruct(&image, &out, &args);
        assert!(!output.status.success(), "the run stops at step 2");
        let outcome = outcome(&out);
        assert_eq!(outcome["finished"], false, "{outcome}");
        assert!(outcome["failure"].as_str().is_some_and(|f| f.contains("removed no material")), "{outcome}");
        out
    };
    let unfitted = run("unfitted", &["--no-fit"]);
    let fitted = run("fitted", &[]);
    assert!(trace(&fitted).iter().any(|e| e["event"] == "program_fit"), "the model built so far is fitted");
    let (before, after) = (
        iou(&unfitted.join("model.FCStd"), &gt, "static").expect("scored"),
        iou(&fitted.join("model.FCStd"), &gt, "static").expect("scored"),
    );
    assert!(before < 0.9 && after > 0.98, "static IoU {before} without the fit, {after} with it");
}

/// `vision2cad fit`: the part's own program, fitted to its image, is left alone, and the
/// framing found from its model is the part's; a copy with one depth read 15% deep, fitted
/// on that framing (`--sphere`), gets the truth's depth back. An image with no part in it is
/// refused, naming the image.
#[test]
fn the_fit_command_fits_a_program_to_an_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = example_path("plate_counterbore");
    let image = target_image(&gt, dir.path());
    let read = read_json;
    let depth = |p: &Value| -> f64 {
        let pad = p["commands"].as_array().expect("commands").iter().find(|c| c["op"] == "extrude").cloned();
        pad.expect("the plate's pad")["extent"]["depth"].as_f64().expect("a depth")
    };
    let fit = |program: &Path, image: &Path, out: &Path, extra: &[String]| {
        let mut command = common::command();
        command.arg("fit").arg(program).arg("--image").arg(image).arg("--out").arg(out).args(extra);
        command.output().expect("runs")
    };
    let exact = dir.path().join("exact");
    let run = fit(&gt, &image, &exact, &[]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report = read(&exact.join("fit.json"));
    assert!(report["overlap"].as_f64() > Some(0.95), "{report}");
    let features = report["fit"]["features"].as_array().expect("features");
    assert!(!features.is_empty() && features.iter().all(|f| !f["report"]["dropped"].is_null()), "{report}");
    // Left alone: the program as FreeCAD solves it, as `exec` writes it.
    let built = dir.path().join("built");
    assert!(common::command().arg("exec").arg(&gt).arg("--out").arg(&built).status().expect("exec").success());
    assert_eq!(read(&exact.join("program.json"))["commands"], read(&built.join("solved_program.json"))["commands"]);
    assert!(exact.join("model.FCStd").is_file() && exact.join("model.step").is_file());

    let mut program = read(&gt);
    let truth = depth(&program);
    let pad = program["commands"].as_array_mut().expect("commands").iter_mut().find(|c| c["op"] == "extrude");
    pad.expect("the pad")["extent"]["depth"] = serde_json::json!(truth * 1.15);
    let misread = dir.path().join("misread.json");
    std::fs::write(&misread, program.to_string()).expect("write");
    let s = &report["sphere"];
    let sphere = format!("--sphere={},{},{},{}", s["center"][0], s["center"][1], s["center"][2], s["radius"]);
    let fitted = dir.path().join("fitted");
    let run = fit(&misread, &image, &fitted, &[sphere]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let got = depth(&read(&fitted.join("program.json")));
    assert!((got / truth - 1.0).abs() < 0.03, "fitted {got} for {truth}");
    assert!(iou(&fitted.join("model.step"), &gt, "static") > Some(0.98));

    // The fitted program never replaces the one it is fitted from.
    let again = fitted.join("program.json");
    let before = std::fs::read_to_string(&again).expect("program");
    let refused = fit(&again, &image, &fitted, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("would overwrite the program"));
    assert_eq!(std::fs::read_to_string(&again).expect("program"), before, "nothing written over");

    let blank = dir.path().join("blank.png");
    image::RgbImage::from_pixel(64, 64, image::Rgb([255, 255, 255])).save(&blank).expect("png");
    let refused = fit(&misread, &blank, &dir.path().join("blank"), &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("blank.png") && stderr.contains("nothing stands out"), "{stderr}");
}

/// A drawing (from agent/tests/data) fitted with `vision2cad fit` to a part's target, S_t
/// `sphere` as the reconstruction registered it (its trace's last `register` event).
struct DrawnFit {
    _dir: tempfile::TempDir,
    part: PathBuf,
    drawn: PathBuf,
    out: PathBuf,
    features: Vec<Value>,
}

impl DrawnFit {
    /// On an imported test100 part; `None`, with a message, where ../shared/data has no
    /// test100.
    fn run(id: &str, drawing: &str, sphere: &str) -> Option<DrawnFit> {
        let dir = tempfile::tempdir().expect("tempdir");
        let part = common::test100_part(id, dir.path())?;
        Some(DrawnFit::fitted(dir, part, drawing, sphere))
    }

    /// On generated part `index` of `gerd generate --seed seed` (gen-SEED-INDEX).
    fn generated(seed: u64, index: usize, drawing: &str, sphere: &str) -> DrawnFit {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("gerd");
        let count = (index + 1).to_string();
        let generated = common::command()
            .args(["gerd", "generate", "--count", &count, "--seed", &seed.to_string(), "--split"])
            .arg(format!("0,0,{count}"))
            .arg("--out")
            .arg(&data)
            .output()
            .expect("runs");
        assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
        let part = data.join(format!("parts/gen-{seed}-{index:05}"));
        DrawnFit::fitted(dir, part, drawing, sphere)
    }

    fn fitted(dir: tempfile::TempDir, part: PathBuf, drawing: &str, sphere: &str) -> DrawnFit {
        // A copy: the IoU's report is written beside the program it scores.
        let drawn = dir.path().join(drawing);
        std::fs::copy(common::repo_root().join("agent/tests/data").join(drawing), &drawn).expect("copy");
        let out = dir.path().join("fitted");
        let run = common::command()
            .arg("fit")
            .arg(&drawn)
            .arg("--image")
            .arg(part.join("target.png"))
            .arg(format!("--sphere={sphere}"))
            .arg("--out")
            .arg(&out)
            .output()
            .expect("runs");
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let report = read_json(&out.join("fit.json"));
        let features = report["fit"]["features"].as_array().expect("features").clone();
        DrawnFit { _dir: dir, part, drawn, out, features }
    }

    /// The static IoU of `model` against the part.
    fn iou(&self, model: &Path) -> f64 {
        iou(model, &self.part.join("model.step"), "static").expect("an IoU")
    }

    /// The fitted model's static IoU.
    fn fitted_iou(&self) -> f64 {
        self.iou(&self.out.join("model.step"))
    }
}

/// A simulated reader's rounded triangle (test100 00966577, as drawn, before any fit): its
/// corners' short lines and small arcs are read a millimetre or two off. The search folded a
/// corner's line and arc across each other, FreeCAD refused the profile, and the base was
/// left unfitted (mIoU 0.52). Searched again refusing drawings that cross, it is fitted.
#[test]
fn a_drawing_the_search_would_fold_across_itself_is_fitted_without_crossing() {
    let sphere = "4.280670627515853,-1.6936945987845822,-5.974365226300436,50";
    let Some(fit) = DrawnFit::run("00966577", "triangle_00966577_drawn.json", sphere) else { return };
    let features = &fit.features;
    let base: Vec<&Value> = features.iter().filter(|f| f["command"] == 1).collect();
    assert!(base.iter().any(|f| f["report"]["dropped"].is_null()), "the base's fit is kept: {base:?}");
    assert!(
        features.iter().all(|f| !f["report"]["dropped"].as_str().unwrap_or("").contains("no longer builds")),
        "no proposal failed to build: {features:?}"
    );
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.85 && before < 0.6, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// A simulated reader's block with three cuts (test100 00486941, as drawn): the second cut
/// (command 5) finds nothing to move until the third (command 7) is fitted, after it. A
/// second pass over the features before the last one kept fits it (mIoU 0.929 -> 0.960).
#[test]
fn a_feature_fitted_before_a_later_one_moved_is_fitted_again_after_it() {
    let sphere = "-8.040816057659265,-13.51731751510133,-5.476501457442066,50";
    let Some(fit) = DrawnFit::run("00486941", "block_00486941_drawn.json", sphere) else { return };
    let features = &fit.features;
    let kept = |f: &Value| {
        f["report"]["dropped"].is_null() && f["report"]["changes"].as_array().is_some_and(|c| !c.is_empty())
    };
    let third = features.iter().position(|f| f["command"] == 7 && kept(f)).expect("the third cut's fit kept");
    assert!(
        features[third..].iter().any(|f| f["command"] == 5 && kept(f)),
        "the second cut fitted after the third: {features:?}"
    );
    let got = fit.fitted_iou();
    assert!(got > 0.95, "mIoU {got:.3}");
}

/// A simulated reader's wedge block read 14% deep beside a prism drawn 10 mm off (test100
/// 00361382, as drawn): the block's far edges lie 19 px off the target's, where the search's
/// capped cost is flat, and no coarse depth factor halves it. The depth near the drawn one
/// whose model, lined up anew, agrees best starts the search; the rebuilt picture comes
/// much closer as a whole, and is kept (mIoU 0.80 -> 0.99).
#[test]
fn a_depth_read_14_percent_deep_is_found_near_the_drawn_one() {
    let sphere = "-9.929825025322694,-19.389236633631718,-9.459411608309022,50.0";
    let Some(fit) = DrawnFit::run("00361382", "wedge_00361382_drawn.json", sphere) else { return };
    let features = &fit.features;
    let depth = |f: &Value| {
        f["report"]["changes"].as_array().and_then(|c| c.iter().find(|c| c["what"] == "extent.depth").cloned())
    };
    let block = features.iter().find_map(|f| (f["command"] == 1).then(|| depth(f)).flatten()).expect("the depth moved");
    let to = block["to"].as_f64().expect("a number");
    assert!((to / 46.96 - 1.0).abs() < 0.03, "the block's depth {to} for the part's 46.96");
    let got = fit.fitted_iou();
    assert!(got > 0.95, "mIoU {got:.3}");
}

/// A simulated reader's comb (test100 00694405, as drawn): a bar on three legs, the middle
/// leg's sides drawn 6 and 21 degrees off upright, so no wall. The search put both sides on
/// one line of the target and fitted the leg's foot from 4.6 mm to 0.04 (mIoU 0.49 as drawn,
/// 0.44 fitted). The foot of a U keeps its length by the walls' rule (0.71), and the leg's
/// other side goes onto the target's line that no edge was on (`fit::missed`): 0.91.
#[test]
fn a_legs_foot_drawn_askew_is_not_fitted_to_nothing() {
    let sphere = "-12.498928548870524,-25.443386539188133,-12.944457990317611,50.0";
    let Some(fit) = DrawnFit::run("00694405", "comb_00694405_drawn.json", sphere) else { return };
    let program = program_in(&fit.out);
    let foot = &program["commands"][0]["primitives"][3];
    let point = |k: &str| {
        foot[k].as_array().expect("a point").iter().map(|v| v.as_f64().expect("a number")).collect::<Vec<_>>()
    };
    let (a, b) = (point("start"), point("end"));
    let length = (a[0] - b[0]).hypot(a[1] - b[1]);
    assert!(length > 1.0, "the middle leg's foot is {length:.2} mm long (drawn 4.6)");
    assert!(kept_missed_line(&fit.features), "a side moved onto a missed line: {:?}", fit.features);
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.85 && before < 0.5, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// Whether the fit at END kept a move of a profile's line onto a line of the target that no
/// edge was on.
fn kept_missed_line(features: &[Value]) -> bool {
    features.iter().any(|f| f["report"]["missed"].is_array() && f["report"]["dropped"].is_null())
}

/// A simulated reader's bar (test100 00961053, as drawn): 10 mm across, 8.6 px on the picture,
/// its bottom corner by a notch read 2 px under the top. The search put that corner on the
/// top line, pinching the bar to nothing there (0.83), and nothing in its cost saw the
/// bottom line left with no edge on it. At END the bottom side goes onto it (0.65 as drawn,
/// 0.92 fitted).
#[test]
fn a_bars_side_pinched_onto_its_top_goes_back_onto_the_targets_bottom_line() {
    let Some(fit) = DrawnFit::run("00961053", "bar_00961053_drawn.json", "0,0,0,50") else { return };
    assert!(kept_missed_line(&fit.features), "a side moved onto a missed line: {:?}", fit.features);
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.9 && before < 0.7, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// A simulated reader's tube (test100 00932166, as drawn): read 6% deep, and a cut takes its
/// far end down to two tabs. The picture model draws the tube's far outline where the target
/// shows none, so no fit moved the depth, and the part's bounding box, set by the depth, scaled
/// its thin wall off itself (mIoU 0.18). Searched on the rebuilt model, lined up anew, the
/// depth comes back to the 62.5 mm the tube's 31.6 mm radius gives it (0.94).
#[test]
fn a_tubes_depth_read_deep_is_searched_on_the_rebuilt_model() {
    let sphere = "-17.126188245254983,-28.577054928997487,-11.4508666837425,50";
    let Some(fit) = DrawnFit::run("00932166", "tube_00932166_drawn.json", sphere) else { return };
    let depth = kept_changes(&fit.features, 1)
        .into_iter()
        .rfind(|c| c["what"] == "extent.depth")
        .expect("the tube's depth moved");
    let to = depth["to"].as_f64().expect("a number");
    assert!((to / 62.5 - 1.0).abs() < 0.03, "the tube's depth {to} for the part's 62.5");
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.9 && before < 0.3, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// A simulated reader's plate with two blocks on its back half (test100 00319779, as drawn):
/// the plate read 4% thin, its back on its sketch plane. Fitted where its front is drawn,
/// the whole plate lay 2 mm down and left along the line of sight, which the front's lines
/// cannot tell; only its back's outline and the line where it meets the blocks did (mIoU
/// 0.83). Slid along the line of sight on the rebuilt model, its drawing moves about 3 mm in
/// its plane and its depth grows by about 2 mm: 0.98.
#[test]
fn a_plate_fitted_off_along_the_line_of_sight_is_slid_back() {
    let sphere = "-10.79215036823312,-20.251561976542142,-9.459411608309022,50.0";
    let Some(fit) = DrawnFit::run("00319779", "plate_00319779_drawn.json", sphere) else { return };
    let slid = kept_changes(&fit.features, 1)
        .into_iter()
        .find(|c| c["what"].as_str().is_some_and(|w| w.starts_with("slide along the line of sight")))
        .expect("the plate slid");
    let by = slid["to"].as_f64().expect("a number");
    assert!((2.0..4.5).contains(&by), "the plate's drawing moved {by} mm in its plane (about 3 expected)");
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.95 && before < 0.9, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// A simulated reader's plate with a notch (test100 00106662, as drawn): its corners read a
/// millimetre off. Squared, it agrees only 0.09 px better on the picture model, under the
/// 0.3 px a free move must gain; a drawing read off square and squared is kept where the
/// picture shows it no worse (mIoU 0.949 fitted without that; 0.993 with it).
#[test]
fn a_plate_whose_corners_were_read_off_square_is_squared() {
    let sphere = "-0.613393458481239,-1.1112572273396086,-0.4978637688583696,50.0";
    let Some(fit) = DrawnFit::run("00106662", "plate_00106662_drawn.json", sphere) else { return };
    let squared = fit
        .features
        .iter()
        .any(|f| f["report"]["dropped"].is_null() && f["report"]["regular"]["squared"].as_u64() > Some(0));
    assert!(squared, "a squared drawing kept: {:?}", fit.features);
    let got = fit.fitted_iou();
    assert!(got > 0.98, "mIoU {got:.3}");
}

/// A simulated reader's bar with a boss and a cut on the boss's end (test100 00528846, as
/// drawn): the boss's depth read 5% short. Fitted, its 641 moved edge pixels come 4.79 ->
/// 2.32 px from the target's lines, while the cut on its end moves with it and takes the
/// whole picture 0.581 -> 0.620 px. Edges moved that much closer over that many pixels are
/// kept (mIoU 0.817 -> 0.923).
#[test]
fn a_boss_fitted_much_closer_is_kept_though_the_cut_on_it_moves_off() {
    let sphere = "8.756655623910556,6.765200548477076,-1.9914550754334785,50.0";
    let Some(fit) = DrawnFit::run("00528846", "boss_00528846_drawn.json", sphere) else { return };
    let boss = fit.features.iter().find(|f| f["command"] == 3 && f["report"]["dropped"].is_null());
    let boss = boss.expect("the boss's fit kept");
    assert!(boss["report"]["after"]["edge_px"].as_f64() > boss["report"]["before"]["edge_px"].as_f64(), "{boss}");
    let got = fit.fitted_iou();
    assert!(got > 0.9, "mIoU {got:.3}");
}

/// A simulated reader's rod (test100 00824990, as drawn): its radius read 1.9% wide, 0.8 px
/// on each side of the outline, which the line fit does not see (our renderer draws no line
/// along a turned side). Measured across the outline on the target's image, the radius takes
/// the target's width (mIoU 0.962 -> 0.999).
#[test]
fn a_rods_radius_read_wide_is_measured_across_its_outline() {
    let sphere = "0.18223078702602713,0.6800945558843967,0.4978637688583696,50.0";
    let Some(fit) = DrawnFit::run("00824990", "rod_00824990_drawn.json", sphere) else { return };
    let rod = fit.features.iter().find(|f| f["report"]["round_sides"].is_array() && f["report"]["dropped"].is_null());
    let rod = rod.expect("the rod's outline measured and its radius moved");
    let measured = &rod["report"]["round_sides"][0];
    let (model, target) =
        (measured["model_px"].as_f64().expect("a number"), measured["target_px"].as_f64().expect("a number"));
    assert!(target < model * 0.99, "{measured}");
    let got = fit.fitted_iou();
    assert!(got > 0.99, "mIoU {got:.3}");
}

/// A simulated reader's flanged part (test100 00387732, as drawn): the base's fitted radius
/// and depth leave the flange on it touching the base at one edge, and FreeCAD refuses the
/// two solids. Half the move builds, and the fit goes on from there (mIoU 0.894 with half
/// of it kept: the evaluator before stop 68 passed that exact figure over for a coarser fuzzy
/// boolean's 0.968, and 0.845 with the whole move dropped).
#[test]
fn a_fit_that_does_not_build_is_kept_half_way() {
    let sphere = "-4.475984996394701,-8.458895147261659,-3.982910150866957,50.0";
    let Some(fit) = DrawnFit::run("00387732", "base_00387732_drawn.json", sphere) else { return };
    let half = fit.features.iter().find(|f| f["report"]["part_way"] == 0.5 && f["report"]["dropped"].is_null());
    let half = half.expect("a fit kept half way");
    assert!(half["report"]["evaluations"].as_u64() >= Some(2), "{half}");
    let got = fit.fitted_iou();
    assert!(got > 0.88, "mIoU {got:.3}");
}

/// The changes of the fits kept on command `k`.
fn kept_changes(features: &[Value], k: usize) -> Vec<Value> {
    features
        .iter()
        .filter(|f| f["command"] == k && f["report"]["dropped"].is_null())
        .flat_map(|f| f["report"]["changes"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// A simulated reader's transition, a square base lofted to a round top (gen-11-00005, as
/// drawn): its height read 4% tall. The line fit moved the base 2.7 mm along the line of
/// sight to make up for it, which the picture cannot tell from a top centred over its base
/// (mIoU 0.90). Moved back along the line of sight over the base's centre, the top comes down
/// to about the height the part's width gives it: 0.96.
#[test]
fn a_lofts_top_read_high_is_put_back_over_its_base_along_the_line_of_sight() {
    let sphere = "-5.725433341871251,5.725433341871251,11.450866683742502,50.0";
    let fit = DrawnFit::generated(11, 5, "loft_gen-11-00005_drawn.json", sphere);
    let changes = kept_changes(&fit.features, 3);
    let offset = changes.iter().rfind(|c| c["what"] == "P1 offset").expect("the top's plane moved");
    let to = offset["to"].as_f64().expect("a number");
    assert!((47.0..49.5).contains(&to), "the top's height {to} (read 50.09; the part's width gives 48.1)");
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.95 && before < 0.92, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// A simulated reader's hubbed disc (gen-11-00018, as built before the fit at END): its bore
/// drawn 13.0 mm where the part's, at this scale, is 12.0, under a chamfer that took the
/// bore's top circle away. The revolve's picture model had no sample on the bore, so the
/// bore kept its width (mIoU 0.972); the chamfer's lower circle, which lies on the bore,
/// now holds it (0.988).
#[test]
fn a_bores_radius_is_read_from_the_chamfer_circle_on_it_where_its_own_corner_is_gone() {
    let sphere = "-2.987182613150218,2.987182613150218,5.974365226300436,50.0";
    let fit = DrawnFit::generated(11, 18, "hub_gen-11-00018_drawn.json", sphere);
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.983 && before < 0.95, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// A simulated reader's flange (gen-11-00010, reconstructed, its holes as drawn): its three
/// bolt holes, one size in the part, drawn 0.95, 3.12 and 1.68 mm, the first behind the boss.
/// The search measures the third (about 1.98, the part's 2.03) and leaves the others, which
/// then take its radius (mIoU 0.971 -> 0.974).
#[test]
fn a_patterns_holes_the_picture_does_not_measure_take_the_radius_of_one_it_does() {
    let sphere = "-2.738250728721033,2.738250728721033,5.476501457442066,50.0";
    let fit = DrawnFit::generated(11, 10, "flange_gen-11-00010_drawn.json", sphere);
    let holes = fit.features.iter().find(|f| f["command"] == 6 && f["report"]["dropped"].is_null());
    let holes = holes.expect("the holes' fit kept");
    assert_eq!(holes["report"]["regular"]["equal"], 2, "{holes}");
    let radii: Vec<f64> = kept_changes(&fit.features, 6)
        .iter()
        .filter(|c| c["what"].as_str().is_some_and(|w| w.ends_with("radius")))
        .map(|c| c["to"].as_f64().expect("a number"))
        .collect();
    assert_eq!(radii.len(), 3, "{radii:?}");
    assert!(radii.iter().all(|r| (r - 1.98).abs() < 0.05), "the holes' radii {radii:?}");
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > before + 0.001, "mIoU {before:.4} before, {got:.4} fitted");
}

/// A relay reader's crank (test100 00152464, as accepted): a plate with round ends read 30%
/// thin (7 mm) under a sketch 14% tall, and a pin. The whole picture lay 2.26 px off the
/// target's lines; the plate's depth at the reach's end (8.75 mm) took it to 1.89 px, short of
/// leaving 0.8 of the cost, and was dropped (mIoU 0.70). A picture that far off is a misread:
/// the depth is kept, and the fit runs once more from there, when the sketch and the depth
/// together find the target (mIoU 0.97).
#[test]
fn a_plate_read_thin_under_a_tall_sketch_is_fitted_again_after_its_depth() {
    let sphere = "-11.143528360432352,-12.139255898149091,-0.9957275377167392,50";
    let Some(fit) = DrawnFit::run("00152464", "crank_00152464_drawn.json", sphere) else { return };
    let depths: Vec<f64> = kept_changes(&fit.features, 1)
        .iter()
        .filter(|c| c["what"] == "extent.depth")
        .filter_map(|c| c["to"].as_f64())
        .collect();
    assert!(depths.len() >= 2 && depths.last().is_some_and(|d| *d > 9.5), "the plate's depths kept: {depths:?}");
    let (got, before) = (fit.fitted_iou(), fit.iou(&fit.drawn));
    assert!(got > 0.95 && before < 0.75, "mIoU {before:.3} as drawn, {got:.3} fitted");
}

/// The oracle's two strips under a pixel thick (test100 00129614, exact): their picture lies
/// 4.7 px off the target's lines, lined up 20 px away with three times the target's area
/// outside it, so no size may move for being far off there (a depth made 16% deeper took
/// the picture to 4.1 px and the part's mIoU from 0.96 to 0.01).
#[test]
fn an_exact_program_whose_picture_is_not_lined_up_is_not_fitted_for_being_far_off() {
    let sphere = "-5.987448808153256,-3.498129963861408,2.489318844291848,50";
    let Some(fit) = DrawnFit::run("00129614", "strips_00129614_oracle.json", sphere) else { return };
    let kept: Vec<&Value> = fit.features.iter().filter(|f| f["report"]["dropped"].is_null()).collect();
    assert!(kept.iter().all(|f| f["report"]["changes"].as_array().is_none_or(Vec::is_empty)), "{kept:?}");
    // The extrusions as given (the sketches come back as solved, to about 1e-12).
    let features = |p: &Path| -> Vec<Value> {
        let program = read_json(p);
        program["commands"].as_array().expect("commands").iter().filter(|c| c["op"] != "sketch").cloned().collect()
    };
    assert_eq!(features(&fit.out.join("program.json")), features(&fit.drawn));
}
