//! The three-stage loop end to end, against a real FreeCAD: the oracle rebuilds every
//! example program and generated GERD parts; ablations change the requests; the scripted
//! backend drives rejections, the retry bound and failures; resume and a killed worker.

mod common;

use std::path::{Path, PathBuf};

use common::{
    box_plan, box_sketch, example_path, iou, outcome, reconstruct, repo_root, target_image, trace, write_script,
};
use serde_json::Value;

/// Does the program tie a sketch to existing geometry (a constraint naming E or V)?
fn has_ties(program: &Path) -> bool {
    let text = std::fs::read_to_string(program).expect("program");
    let v: Value = serde_json::from_str(&text).expect("json");
    v["commands"].as_array().into_iter().flatten().any(|c| {
        c["constraints"].as_array().into_iter().flatten().any(|k| {
            ["a", "b", "point", "object", "curve"].iter().any(|key| {
                k[key].as_str().is_some_and(|s| {
                    freecad_bridge::command::split_position(s).0.parse::<freecad_bridge::command::EntityId>().is_ok()
                })
            })
        })
    })
}

fn check_part(name: &str, program: &Path, gt_for_oracle: &Path, gt_step: &Path, dir: &Path) {
    let image = target_image(program, dir);
    let out = dir.join("out");
    let run = reconstruct(&image, &out, &["--gt", gt_for_oracle.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
    for file in ["model.FCStd", "model.step", "program.json", "trace.jsonl", "report.html", "views/target.png"] {
        assert!(out.join(file).is_file(), "{name}: {file} missing");
    }
    assert_eq!(outcome(&out)["finished"], true, "{name}");
    let pred = out.join("program.json");
    let static_iou = iou(&pred, gt_step, "static").expect("compiled");
    assert!(static_iou >= 0.99, "{name}: static IoU {static_iou}");
    if has_ties(program) {
        let edit = iou(&pred, program, "edit10").expect("compiled after the edit");
        assert!(edit >= 0.98, "{name}: edit10 IoU {edit}");
    }
}

#[test]
fn the_oracle_rebuilds_every_example_program() {
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("assets/programs"))
        .expect("examples")
        .filter_map(|e| e.ok()?.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    assert!(names.len() >= 15);
    for name in names {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = example_path(&name);
        check_part(&name, &program, &program, &program, dir.path());
    }
}

/// A triangular prism (on XY one-sided, on XZ symmetric) with a boss sketched on its slanted
/// face by ID: the oracle draws in rounded view coordinates, so the rebuilt slant is tilted a
/// little, and it must still name the face (it once stopped at step 2 where a rectangle works).
#[test]
fn the_oracle_finds_slanted_faces_of_triangular_profiles() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, plane, extent) in [
        ("xy_one_side", "XY", r#"{"type": "one_side", "depth": 10}"#),
        ("xz_symmetric", "XZ", r#"{"type": "symmetric", "depth": 10}"#),
    ] {
        let program = dir.path().join(format!("{name}.json"));
        std::fs::write(
            &program,
            format!(
                r#"{{"commands": [
                {{"op": "sketch", "name": "S1", "on": "{plane}", "primitives": [
                  {{"type": "line", "start": [0, 0], "end": [40, 0]}},
                  {{"type": "line", "start": [40, 0], "end": [0, 30]}},
                  {{"type": "line", "start": [0, 30], "end": [0, 0]}}]}},
                {{"op": "extrude", "profile": "S1", "mode": "add", "extent": {extent}}},
                {{"op": "sketch", "name": "S2", "on": "F2", "primitives": [
                  {{"type": "circle", "center": [0, 0], "radius": 2}}]}},
                {{"op": "extrude", "profile": "S2", "mode": "add", "extent": {{"type": "one_side", "depth": 4}}}},
                {{"op": "end"}}]}}"#
            ),
        )
        .expect("write program");
        let part = dir.path().join(name);
        std::fs::create_dir_all(&part).expect("mkdir");
        let image = target_image(&program, &part);
        let out = part.join("out");
        let run = reconstruct(&image, &out, &["--gt", program.to_str().expect("utf-8")]);
        assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(outcome(&out)["steps"], 2, "{name}");
        let static_iou = iou(&out.join("program.json"), &program, "static").expect("compiled");
        assert!(static_iou >= 0.99, "{name}: static IoU {static_iou}");
    }
}

#[test]
fn the_oracle_rebuilds_generated_parts_of_every_family() {
    let data = tempfile::tempdir().expect("tempdir");
    let generated = common::command()
        .args(["gerd", "generate", "--count", "8", "--seed", "11", "--out"])
        .arg(data.path())
        .output()
        .expect("gerd generate runs");
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let mut families = Vec::new();
    for entry in std::fs::read_dir(data.path().join("parts")).expect("parts") {
        let part = entry.expect("entry").path();
        let record: Value =
            serde_json::from_str(&std::fs::read_to_string(part.join("part.json")).expect("record")).expect("json");
        families.push(record["source"].as_str().unwrap_or_default().to_string());
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("gt.json");
        std::fs::write(&program, record["program"].to_string()).expect("write program");
        let out = dir.path().join("out");
        let run = reconstruct(&part.join("target.png"), &out, &["--gt", part.to_str().expect("utf-8")]);
        assert!(run.status.success(), "{}: {}", part.display(), String::from_utf8_lossy(&run.stderr));
        let pred = out.join("program.json");
        let static_iou = iou(&pred, &part.join("model.step"), "static").expect("compiled");
        assert!(static_iou >= 0.99, "{}: static IoU {static_iou}", part.display());
        if has_ties(&program) {
            let edit = iou(&pred, &program, "edit10").expect("compiled after the edit");
            assert!(edit >= 0.98, "{}: edit10 IoU {edit}", part.display());
        }
    }
    families.sort();
    families.dedup();
    assert_eq!(families.len(), 8, "{families:?}");
}

#[test]
fn each_ablation_changes_the_requests_as_the_method_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("plate_counterbore");
    let image = target_image(&program, dir.path());
    let gt = program.to_str().expect("utf-8");
    let texts = |flag: &str| -> Vec<(String, String)> {
        let out = dir.path().join(flag.trim_start_matches('-'));
        let mut args = vec!["--gt", gt];
        if !flag.is_empty() {
            args.push(flag);
        }
        let run = reconstruct(&image, &out, &args);
        assert!(run.status.success(), "{flag}: {}", String::from_utf8_lossy(&run.stderr));
        trace(&out)
            .into_iter()
            .filter(|e| e["event"] == "call")
            .map(|e| {
                (e["stage"].as_str().unwrap_or("").to_string(), e["request"]["text"].as_str().unwrap_or("").to_string())
            })
            .collect()
    };
    let stage = |calls: &[(String, String)], s: &str| -> Vec<String> {
        calls.iter().filter(|(st, _)| st == s).map(|(_, t)| t.clone()).collect()
    };
    let full = texts("");
    assert!(stage(&full, "stage1")[1].contains("T_geom") && stage(&full, "stage1")[1].contains("F6 Plane"));
    assert!(stage(&full, "stage1")[0].contains("S_t"));
    assert!(stage(&full, "stage2")[1].contains("view coordinates") && stage(&full, "stage2")[1].contains("E12"));
    assert!(!stage(&full, "stage3").is_empty());

    let no_egr = texts("--no-egr");
    assert!(stage(&no_egr, "stage1").iter().all(|t| !t.contains("T_geom") && t.contains("selectors")));
    let answers: Vec<Value> = trace(&dir.path().join("no-egr"))
        .into_iter()
        .filter(|e| e["stage"] == "stage1")
        .map(|e| serde_json::from_str(e["answer"].as_str().unwrap_or("{}")).expect("answer"))
        .collect();
    assert!(answers[1]["sketches"][0]["on"].as_str().is_some_and(|s| s.starts_with("face planar")), "{answers:?}");

    let no_lcb = texts("--no-lcb");
    assert!(stage(&no_lcb, "stage2").iter().all(|t| t.contains("own local coordinates") && !t.contains("grid of")));
    let no_pgr = texts("--no-pgr");
    assert!(stage(&no_pgr, "stage2").iter().all(|t| !t.contains("samples") && t.contains("do not refer")));
    let no_reg = texts("--no-reg");
    assert!(no_reg.iter().all(|(_, t)| !t.contains("S_t")));
    let no_evf = texts("--no-evf");
    assert!(stage(&no_evf, "stage3").is_empty());
    assert_eq!(outcome(&dir.path().join("no-evf"))["ablations"], serde_json::json!(["no_evf"]));
}

/// A drawing with one constraint too many (the rectangle's top is horizontal, its bottom too,
/// and then parallel to the top): the solver's redundant constraint is dropped and recorded,
/// and the step is accepted at its first attempt.
#[test]
fn a_redundant_constraint_is_dropped_and_recorded_and_the_step_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let mut sketch = box_sketch();
    sketch["answer"]["constraints"] = serde_json::json!([
        {"type": "horizontal", "line": "g0"}, {"type": "horizontal", "line": "g2"},
        {"type": "vertical", "line": "g1"}, {"type": "parallel", "a": "g0", "b": "g2"}]);
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), sketch, accept, end]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let dropped: Vec<&Value> = events.iter().filter(|e| e["event"] == "dropped").collect();
    assert_eq!(dropped.len(), 1, "{events:?}");
    assert_eq!(dropped[0]["sketch"], "S1");
    let labels: Vec<&str> =
        dropped[0]["constraints"].as_array().expect("labels").iter().filter_map(Value::as_str).collect();
    assert_eq!(labels.len(), 1, "one of the four is redundant: {labels:?}");
    let committed = events.iter().find(|e| e["event"] == "execute" && e["ok"] == true).expect("committed");
    assert_eq!((committed["attempt"].as_u64(), committed["verified"].as_bool()), (Some(1), Some(true)));
    assert!(!events.iter().any(|e| e["event"] == "execute" && e["ok"] == false), "no failed candidate");
    // What is committed is what solves: the dropped constraint is not in the program.
    let program: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json");
    let kept = program["commands"][0]["constraints"].as_array().map_or(0, Vec::len);
    assert_eq!(kept, 3, "{}", program["commands"][0]);
    assert!(
        std::fs::read_to_string(out.join("report.html")).expect("report").contains("Redundant constraints dropped")
    );
}

#[test]
fn rejections_go_back_to_stage_one_and_the_third_candidate_is_committed_unverified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let reject = serde_json::json!({"stage": "stage3", "answer": {"verdict": "reject", "reasons": ["too thin"]}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(
        &script,
        &[box_plan(), box_sketch(), reject.clone(), box_plan(), box_sketch(), reject, box_plan(), box_sketch(), end],
    );
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    assert_eq!(events.iter().filter(|e| e["event"] == "rejected").count(), 2);
    let stage1_texts: Vec<&str> =
        events.iter().filter(|e| e["stage"] == "stage1").filter_map(|e| e["request"]["text"].as_str()).collect();
    assert!(stage1_texts[1].contains("too thin") && !stage1_texts[0].contains("too thin"));
    // The rejection's reasons reach the next drawing too.
    let stage2_texts: Vec<&str> =
        events.iter().filter(|e| e["stage"] == "stage2").filter_map(|e| e["request"]["text"].as_str()).collect();
    assert!(stage2_texts[1].contains("too thin") && !stage2_texts[0].contains("too thin"));
    // The step after an unverified commit says so, and the outcome counts it.
    assert!(stage1_texts[3].contains("Step 1 was committed without a verification"), "{}", stage1_texts[3]);
    assert!(!stage1_texts[2].contains("without a verification"));
    assert_eq!(outcome(&out)["unverified_commits"], 1);
    let committed = events.iter().find(|e| e["event"] == "execute" && e["ok"] == true).expect("committed");
    assert_eq!(committed["verified"], false);
    let program: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json");
    let ops: Vec<&str> =
        program["commands"].as_array().expect("commands").iter().filter_map(|c| c["op"].as_str()).collect();
    assert_eq!(ops, ["sketch", "extrude", "end"]);
    // The window is S_t's square (100 mm): 0.3 view units are 30 mm.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("state.json")).expect("state")).expect("json");
    assert!((state["volume"].as_f64().expect("volume") - 30.0 * 20.0 * 10.0).abs() < 1e-6, "{}", state["volume"]);
    assert!(out.join("report.html").is_file());
}

/// Readers asked to accept and finish in one answer: a Stage 3 accept with `finish` ends the
/// run with that step (no Stage 1 call that would only say END), and the fit at END still
/// runs; `finish` beside a rejection changes nothing.
#[test]
fn an_accept_that_finishes_ends_the_run_without_another_stage_one_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let reject = serde_json::json!({"stage": "stage3", "answer": {"verdict": "reject", "reasons": ["too thin"], "finish": true}});
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": ["the whole part"], "finish": true}});
    let script = dir.path().join("script.jsonl");
    // Nothing after the accept: another Stage 1 call would find the script empty and fail.
    write_script(&script, &[box_plan(), box_sketch(), reject, box_plan(), box_sketch(), accept]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let done = outcome(&out);
    assert_eq!((done["finished"].as_bool(), done["steps"].as_u64()), (Some(true), Some(1)), "{done}");
    assert_eq!((done["calls"].as_u64(), done["rejections"].as_u64()), (Some(6), Some(1)), "{done}");
    let events = trace(&out);
    let end = events.iter().find(|e| e["event"] == "end").expect("an end event");
    assert_eq!(end["reason"], "Stage 3 accepted step 1 as the last: the whole part");
    assert!(events.iter().any(|e| e["event"] == "program_fit"), "the fit at END ran");
    // Stage 3 tells the sketch as solved, in model mm: the 0.3 x 0.2 view-unit rectangle.
    let stage3 =
        events.iter().find(|e| e["stage"] == "stage3").and_then(|e| e["request"]["text"].as_str()).expect("stage 3");
    assert!(
        stage3.contains("Its sketches as solved, in model mm: S1: lines 30.00, 20.00, 30.00, 20.00 mm long."),
        "{stage3}"
    );
    let program: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json");
    let ops: Vec<&str> =
        program["commands"].as_array().expect("commands").iter().filter_map(|c| c["op"].as_str()).collect();
    assert_eq!(ops, ["sketch", "extrude", "end"]);
}

/// A sketch tied so that it holds only at the drawn depths scores nothing under edit10: the
/// harness builds every accepted program with each depth 10% longer and, where it no longer
/// rebuilds, says so in the next Stage 1 (a revision can loosen the ties), and a Stage 3
/// `finish` waits for that.
#[test]
fn a_program_that_breaks_under_the_depth_edit_is_pointed_out_to_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    // The scripted box: x -10..20, y -10..10, z 0..10. Its bottom corner at x = y = -10 and
    // the top edge of its face at y = -10, found by position in the same box built alone.
    let alone = dir.path().join("box.json");
    std::fs::write(
        &alone,
        r#"{"commands": [{"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"line","start":[-10,-10],"end":[20,-10]},{"type":"line","start":[20,-10],"end":[20,10]},{"type":"line","start":[20,10],"end":[-10,10]},{"type":"line","start":[-10,10],"end":[-10,-10]}]},
        {"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10}}]}"#,
    )
    .expect("program");
    let inspected = common::command().arg("inspect").arg(&alone).output().expect("inspect");
    let state: Value = serde_json::from_slice(&inspected.stdout).expect("entity table");
    let id = |kind: &str, key: &str, at: Value| {
        state[kind]
            .as_array()
            .expect("entities")
            .iter()
            .find(|e| e[key] == at)
            .and_then(|e| e["id"].as_str())
            .map(str::to_string)
    };
    let corner = id("vertices", "point", serde_json::json!([-10.0, -10.0, 0.0])).expect("the bottom corner");
    let top = id("edges", "start", serde_json::json!([-10.0, -10.0, 10.0])).expect("the top edge");
    // Step 2 cuts a notch drawn on XZ (X = -50 + 100 x, Z = 50 - 100 y) whose slanted side runs
    // 10.5 mm from the corner to the top edge: 10 mm up, 3.2 mm across. At 11 mm of height
    // no such side reaches the edge.
    let notch_plan = serde_json::json!({"stage": "stage1", "answer": {"reason": "a notch", "sketches": [{"name": "S2", "on": "XZ"}],
        "command": {"op": "extrude", "profile": "S2", "mode": "cut", "extent": {"type": "one_side", "depth": 5}}}});
    let notch = serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.4, 0.5], "end": [0.48, 0.5]}, {"type": "line", "start": [0.48, 0.5], "end": [0.48, 0.4]},
        {"type": "line", "start": [0.48, 0.4], "end": [0.432, 0.4]}, {"type": "line", "start": [0.432, 0.4], "end": [0.4, 0.5]}],
        "constraints": [{"type": "coincident", "a": "g3.end", "b": corner}, {"type": "point_on_object", "point": "g3.start", "object": top},
            {"type": "length", "line": "g3", "value": 0.105}]}});
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let finish = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": [], "finish": true}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), box_sketch(), accept, notch_plan, notch, finish, end]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let stage1: Vec<&str> =
        events.iter().filter(|e| e["stage"] == "stage1").filter_map(|e| e["request"]["text"].as_str()).collect();
    assert_eq!(stage1.len(), 3, "the finish waited for the model to hear of the edit");
    let said = "The model does not survive the evaluation's edit";
    assert!(!stage1[1].contains(said), "the box alone survives it");
    assert!(stage1[2].contains(said) && stage1[2].contains("S2"), "{}", stage1[2]);
    assert_eq!(outcome(&out)["steps"], 2);
}

#[test]
fn a_backend_that_keeps_answering_invalid_json_is_a_recorded_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let garbage = serde_json::json!({"stage": "stage1", "text": "I think a box {"});
    let off_grid = serde_json::json!({"stage": "stage2", "answer": {"primitives": [{"type": "circle", "center": [3.0, 0.5], "radius": 0.1}]}});
    let script = dir.path().join("script.jsonl");
    write_script(
        &script,
        &[garbage.clone(), garbage.clone(), garbage, box_plan(), off_grid.clone(), off_grid.clone(), off_grid],
    );
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert_eq!(run.status.code(), Some(1));
    let events = trace(&out);
    let errors: Vec<String> = events.iter().filter_map(|e| e["errors"][0].as_str().map(str::to_string)).collect();
    assert!(errors[0].contains("not JSON"), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("outside the sketch window")), "{errors:?}");
    let o = outcome(&out);
    assert!(o["failure"].as_str().is_some_and(|f| f.contains("ran out of answers")), "{o}");
    assert!(
        out.join("model.FCStd").is_file() && out.join("program.json").is_file() && out.join("report.html").is_file()
    );
}

#[test]
fn bad_inputs_get_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blank = dir.path().join("blank.png");
    image::RgbImage::from_pixel(200, 200, image::Rgb([255, 255, 255])).save(&blank).expect("png");
    let gt = example_path("box");
    let gt = gt.to_str().expect("utf-8");
    let run = reconstruct(&blank, &dir.path().join("a"), &["--gt", gt]);
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("no part found"), "{}", String::from_utf8_lossy(&run.stderr));
    let not_image = dir.path().join("notes.png");
    std::fs::write(&not_image, "hello").expect("write");
    let run = reconstruct(&not_image, &dir.path().join("b"), &["--gt", gt]);
    assert!(String::from_utf8_lossy(&run.stderr).contains("cannot read the target image"));
    let missing = reconstruct(&dir.path().join("nope.png"), &dir.path().join("c"), &["--gt", gt]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does not exist"));
    let image = target_image(&example_path("box"), dir.path());
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, r#"{"commands": [{"op": "extrude", "profile": "S9", "mode": "add", "extent": {"type": "one_side", "depth": 1}}]}"#)
        .expect("write");
    let run = reconstruct(&image, &dir.path().join("d"), &["--gt", broken.to_str().expect("utf-8")]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("does not execute"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // A whole dataset as the ground truth: the message says to give one of its parts.
    let dataset = dir.path().join("dataset");
    std::fs::create_dir_all(dataset.join("parts")).expect("mkdir");
    let run = reconstruct(&image, &dir.path().join("e"), &["--gt", dataset.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("is a whole GERD dataset") && err.contains("parts/ID"), "{err}");
    // Each cause once: no "Not a directory (os error 20): Not a directory (os error 20)".
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("write");
    let run = reconstruct(&image, &file.join("out"), &["--gt", gt]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{err}");
    let line = err.lines().find(|l| l.starts_with("error:")).expect("an error line");
    let words: Vec<&str> = line.split(": ").collect();
    let mut unique = words.clone();
    unique.dedup();
    assert_eq!(words, unique, "a cause repeated: {line}");
}

#[test]
fn resume_continues_from_the_accepted_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("plate_counterbore");
    let image = target_image(&program, dir.path());
    let out = dir.path().join("out");
    let gt = program.to_str().expect("utf-8");
    let first = reconstruct(&image, &out, &["--gt", gt, "--max-steps", "2"]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(outcome(&out)["finished"], false);
    let resumed = common::command()
        .arg("reconstruct")
        .arg(&image)
        .arg("--resume")
        .arg(&out)
        .args(["--gt", gt])
        .output()
        .expect("runs");
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let o = outcome(&out);
    assert_eq!((o["steps"].as_u64(), o["finished"].as_bool()), (Some(4), Some(true)));
    assert!(trace(&out).iter().any(|e| e["event"] == "resume" && e["steps"] == 2));
    let edit = iou(&out.join("program.json"), &program, "edit10").expect("compiled");
    assert!(edit >= 0.98, "{edit}");
}

#[test]
fn a_worker_killed_mid_reconstruction_costs_only_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("plate_counterbore");
    let image = target_image(&program, dir.path());
    let gt = vision2cad::vlm::GroundTruth::load(&program, &mut common::session()).expect("ground truth");
    // The worker serving the run's 20th FreeCAD request aborts, as a crash would (the loop
    // moves to a new worker after each step, so no worker is known beforehand).
    let counter = dir.path().join("requests");
    let faulty = common::config().with_env(freecad_bridge::FAULT_ENV, format!("{}:20", counter.display()));
    let mut session = freecad_bridge::Session::new(faulty).expect("a worker");
    let mut vlm = vision2cad::vlm::Oracle::new(gt);
    let out = dir.path().join("out");
    let outcome = vision2cad::Reconstruction::new(vision2cad::Config::default())
        .expect("the default configuration is valid")
        .run(&image, &out, &mut vlm, &mut session)
        .expect("the run completes");
    assert!(outcome.finished && outcome.failure.is_none(), "{outcome:?}");
    assert!(session.replacements() >= 1, "the worker was not killed");
    let static_iou = iou(&out.join("program.json"), &program, "static").expect("compiled");
    assert!(static_iou >= 0.99, "{static_iou}");
}

/// Collects a run's events, as a program embedding the loop would (a progress bar, a UI).
#[derive(Debug, Clone, Default)]
struct Collect(std::sync::Arc<std::sync::Mutex<Vec<vision2cad::TraceEvent>>>);

impl vision2cad::Sink for Collect {
    fn event(&mut self, event: &vision2cad::TraceEvent) -> Result<(), vision2cad::LoopError> {
        self.0.lock().expect("not poisoned").push(event.clone());
        Ok(())
    }
}

#[test]
fn a_sink_sees_the_events_the_trace_holds_and_every_line_reads_back_typed() {
    use vision2cad::TraceEvent;
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("plate_counterbore");
    let image = target_image(&program, dir.path());
    let mut session = common::session();
    let gt = vision2cad::vlm::GroundTruth::load(&program, &mut session).expect("ground truth");
    let mut oracle = vision2cad::vlm::Oracle::new(gt);
    let out = dir.path().join("out");
    let seen = Collect::default();
    let outcome = vision2cad::Reconstruction::new(vision2cad::Config::default())
        .expect("the default configuration is valid")
        .sink(Box::new(seen.clone()))
        .run(&image, &out, &mut oracle, &mut session)
        .expect("the run completes");
    let written = vision2cad::events::read_trace(&out.join("trace.jsonl")).expect("every line is a typed event");
    let seen = seen.0.lock().expect("not poisoned").clone();
    assert_eq!(written, seen, "the trace and the sink got the same events");
    assert!(matches!(written.first(), Some(TraceEvent::Start { .. })), "{:?}", written.first());
    let Some(TraceEvent::Stop { outcome: last }) = written.last() else { panic!("the trace ends with stop") };
    assert_eq!(**last, outcome);
    let calls = written.iter().filter(|e| matches!(e, TraceEvent::Call(_))).count();
    assert_eq!(calls, outcome.calls);
    let committed = written.iter().filter(|e| matches!(e, TraceEvent::Execute(x) if x.ok)).count();
    assert_eq!(committed, outcome.steps);
    // What `outcome.json` holds reads back as the same outcome.
    let on_disk: vision2cad::Outcome =
        serde_json::from_str(&std::fs::read_to_string(out.join("outcome.json")).expect("outcome")).expect("typed");
    assert_eq!(on_disk, outcome);
}

/// Test100's folder and records, or None (with the reason printed) when the data is absent.
fn test100() -> Option<(PathBuf, Vec<Value>)> {
    let (root, text) = common::test100()?;
    let records = text.lines().map(|l| serde_json::from_str(l).expect("jsonl line")).collect();
    Some((root, records))
}

/// The oracle's reconstruction of an imported test100 part from the part's own image, in
/// `dir`: the predicted program and the ground-truth program written beside it.
fn rebuild_test100(root: &Path, record: &Value, program: &freecad_bridge::Program, dir: &Path) -> (PathBuf, PathBuf) {
    let gt = dir.join("gt.json");
    std::fs::write(&gt, serde_json::to_string(program).expect("json")).expect("write");
    let image = root.join("images").join(record["image"].as_str().expect("image"));
    let out = dir.join("out");
    let run = reconstruct(&image, &out, &["--gt", gt.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}: {}", image.display(), String::from_utf8_lossy(&run.stderr));
    (out.join("program.json"), gt)
}

#[test]
fn the_oracle_rebuilds_test100_parts_from_their_own_images() {
    let Some((root, records)) = test100() else { return };
    let mut session = common::session();
    let mut checked = 0;
    // Every seventh part: a spread of the benchmark in the time of the suite.
    for record in records.iter().step_by(7) {
        session.reset().expect("reset");
        let Ok(imported) = gerd::import::import_cadquery(record["ground_truth"].as_str().expect("code"), &mut session)
        else {
            continue; // Parts the importer cannot represent are its own test's concern.
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let (pred, program) = rebuild_test100(&root, record, &imported.program, dir.path());
        let name = &record["image"];
        let static_iou = iou(&pred, &program, "static").expect("compiled");
        assert!(static_iou >= 0.99, "{name}: static IoU {static_iou}");
        let edit = iou(&pred, &program, "edit10").expect("compiled after the edit");
        assert!(edit >= 0.98, "{name}: edit10 IoU {edit}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} test100 parts checked");
}

#[test]
fn the_oracle_rebuilds_test100_parts_of_several_bodies() {
    let Some((root, records)) = test100() else { return };
    let mut session = common::session();
    // Two bodies whose sketch planes hold vertices of the other body (snapping must keep to
    // the active body), and three bodies.
    for id in ["00342885", "00319779"] {
        let record = records
            .iter()
            .find(|r| r["image"].as_str().is_some_and(|i| i.contains(id)))
            .unwrap_or_else(|| panic!("{id} is in test100"));
        session.reset().expect("reset");
        let imported = gerd::import::import_cadquery(record["ground_truth"].as_str().expect("code"), &mut session)
            .unwrap_or_else(|e| panic!("{id} imports: {e}"));
        assert!(session.state().bodies.len() >= 2, "{id} is several bodies");
        let dir = tempfile::tempdir().expect("tempdir");
        let (pred, program) = rebuild_test100(&root, record, &imported.program, dir.path());
        let bodies = std::fs::read_to_string(&pred).expect("program").matches(r#""op": "body""#).count();
        assert!(bodies >= 1, "{id}: the reconstruction starts a second body");
        let static_iou = iou(&pred, &program, "static").expect("compiled");
        assert!(static_iou >= 0.99, "{id}: static IoU {static_iou}");
    }
}

/// The circle around the part in one panel of a preview: pixels unlike the panel's corner
/// that are grey (not the blue circle, not the legend's colours), outside the labels.
fn panel_circle(image: &image::RgbImage, x0: u32, width: u32) -> ([f64; 2], f64) {
    let background = image.get_pixel(x0 + width - 1, image.height() - 1).0;
    let mut points = Vec::new();
    for y in 24..image.height() {
        for x in 0..width {
            let p = image.get_pixel(x0 + x, y).0;
            let unlike = (0..3).any(|c| (i32::from(p[c]) - i32::from(background[c])).abs() > 24);
            let grey = p.iter().max().expect("rgb") - p.iter().min().expect("rgb") < 20;
            if unlike && grey && !(x < 90 && y < 60) {
                points.push([f64::from(x) + 0.5, f64::from(y) + 0.5]);
            }
        }
    }
    let lo = [0, 1].map(|i| points.iter().map(|p| p[i]).fold(f64::INFINITY, f64::min));
    let hi = [0, 1].map(|i| points.iter().map(|p| p[i]).fold(f64::NEG_INFINITY, f64::max));
    let center = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0];
    let radius = points.iter().map(|p| (p[0] - center[0]).hypot(p[1] - center[1])).fold(0.0, f64::max);
    (center, radius)
}

/// Every image of the part is at one scale: the oracle's exact rebuild of a part photographed
/// off-centre on a wide grey canvas looks, in the last Stage 3 preview, as big as the target
/// beside it and sits where it does (the target is shown through the registration).
#[test]
fn the_preview_shows_the_target_at_the_candidates_scale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = repo_root().join("assets/programs/shaft_groove.json");
    let rendered = image::open(target_image(&program, dir.path())).expect("png").to_rgb8();
    let small = image::imageops::resize(&rendered, 300, 300, image::imageops::FilterType::Triangle);
    let mut wide = image::RgbImage::from_pixel(960, 420, image::Rgb([190, 190, 190]));
    for (x, y, p) in small.enumerate_pixels() {
        if p.0.iter().any(|&c| c < 235) {
            wide.put_pixel(600 + x, 40 + y, *p);
        }
    }
    let image = dir.path().join("wide.png");
    wide.save(&image).expect("save");
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "oracle", "--gt", program.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let mut previews: Vec<PathBuf> = std::fs::read_dir(out.join("views"))
        .expect("views")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with("_preview.png"))
        .collect();
    previews.sort();
    let preview = image::open(previews.last().expect("a preview")).expect("png").to_rgb8();
    // Two panels, the candidate and the target (the overlays are Stage 3's second image,
    // `_overlay.png`, of the same panel width).
    let width = (preview.width() - 4) / 2;
    let (candidate_center, candidate) = panel_circle(&preview, 0, width);
    let (target_center, target) = panel_circle(&preview, width + 4, width);
    assert!((candidate / target - 1.0).abs() < 0.03, "candidate radius {candidate:.1} px, target {target:.1} px");
    let apart = (candidate_center[0] - target_center[0]).hypot(candidate_center[1] - target_center[1]);
    assert!(apart < 0.03 * target, "centres {candidate_center:?} and {target_center:?}");
    // The overlay agrees: the exact rebuild covers the target's silhouette and little else.
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).expect("trace");
    let last = trace.rsplit("silhouettes overlap with IoU ").next().expect("Stage 3 states the overlap");
    let iou: f64 = last[..5].parse().expect("an IoU");
    assert!(iou > 0.95, "overlap IoU {iou} in the last Stage 3 request");
    // And the lines: the exact rebuild draws the edges the target draws.
    let lines = last.split("; ").find(|t| t.contains("of the target's lines lie within")).expect("the lines stated");
    let share: f64 = lines[..lines.find('%').expect("a share")].parse().expect("a number");
    assert!(share >= 80.0, "{lines}");
}

/// A folder that holds an earlier reconstruction is refused (its stale step images would mix
/// with the new ones) unless --replace says to start over, which deletes them; the user's
/// own files in a folder (the target image beside its reconstruction) are left alone.
#[test]
fn an_output_folder_in_use_is_refused_or_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("part.png");
    std::fs::copy(repo_root().join("assets/examples/plate_counterbore.png"), &image).expect("copy");
    let gt = example_path("plate_counterbore");
    let gt = gt.to_str().expect("utf-8");
    let out = dir.path();
    let first = reconstruct(&image, out, &["--gt", gt]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    for file in ["report.html", "program.json", "outcome.json", "trace.jsonl"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join(file)).expect("written").permissions().mode();
        assert_eq!(mode & 0o044, 0o044, "{file} is readable like the user's other files ({mode:o})");
    }
    let stale = out.join("views/step09_tagged.png");
    std::fs::write(&stale, b"from another run").expect("write");

    let again = reconstruct(&image, out, &["--gt", gt]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && err.contains("--resume") && err.contains("--replace"), "{err}");
    assert!(stale.is_file(), "nothing was deleted");

    let replaced = reconstruct(&image, out, &["--gt", gt, "--replace"]);
    assert!(replaced.status.success(), "{}", String::from_utf8_lossy(&replaced.stderr));
    assert!(!stale.exists(), "the earlier run's images are gone");
    assert!(out.join("program.json").is_file());
    assert!(image.is_file(), "the target image is the user's and stays");
}

/// A JPEG target (what a phone or a web page gives) is read like a PNG.
#[test]
fn a_jpeg_target_is_reconstructed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpeg = dir.path().join("part.jpg");
    image::open(repo_root().join("assets/examples/plate_counterbore.png"))
        .expect("png")
        .to_rgb8()
        .save(&jpeg)
        .expect("jpeg");
    let gt = example_path("plate_counterbore");
    let out = dir.path().join("out");
    let run = reconstruct(&jpeg, &out, &["--gt", gt.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(outcome(&out)["finished"], true);
}

/// A drawing whose constraints conflict goes back to Stage 2, with the solver's words, in the
/// same attempt: Stage 1 is not asked again, and the redrawn sketch is committed.
#[test]
fn a_conflicting_drawing_is_redrawn_in_stage_two() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let mut conflicting = box_sketch();
    conflicting["answer"]["constraints"] = serde_json::json!([
        {"type": "length", "line": "g0", "value": 0.3}, {"type": "length", "line": "g0", "value": 0.35}]);
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), conflicting, box_sketch(), accept, end]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let stage2: Vec<&Value> = events.iter().filter(|e| e["stage"] == "stage2").collect();
    assert_eq!(stage2.len(), 2, "the sketch was drawn twice");
    let again = stage2[1]["request"]["text"].as_str().expect("text");
    assert!(again.contains("cannot be solved") && again.contains("conflicting constraints"), "{again}");
    assert_eq!(events.iter().filter(|e| e["stage"] == "stage1").count(), 2, "one plan, then END");
    let committed = events.iter().find(|e| e["event"] == "execute" && e["ok"] == true).expect("committed");
    assert_eq!(committed["attempt"].as_u64(), Some(1), "in the same attempt");
    assert_eq!(outcome(&out)["failed_candidates"], 1, "the unsolvable drawing is counted");
}

/// The report opens with what a user looks for first: the target beside the model, how the
/// run ended, and links to the files; answers read as compact JSON with rounded numbers.
#[test]
fn the_report_opens_with_a_summary_and_reads_compactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let gt = example_path("plate_counterbore");
    let run = reconstruct(
        &repo_root().join("assets/examples/plate_counterbore.png"),
        &out,
        &["--gt", gt.to_str().expect("utf-8")],
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).expect("report");
    let summary = html.find("<b>Finished</b>: 4 steps accepted").expect("the outcome in the summary");
    let first_step = html.find("<h2 id=\"step-1\">Step 1</h2>").expect("the steps");
    assert!(summary < first_step, "the summary comes first");
    for file in ["model.FCStd", "model.step", "program.json", "trace.jsonl"] {
        assert!(html.contains(&format!("<a href=\"{file}\">{file}</a>")), "a link to {file}");
    }
    assert!(html.matches("<img ").count() >= 2, "the target and the model");
    // A timeline of the steps, each linked to its section.
    let timeline = html.find("<div class=\"timeline\">").expect("a timeline");
    assert!(summary < timeline && timeline < first_step);
    for step in 1..=4 {
        assert!(html.contains(&format!("<a href=\"#step-{step}\">")), "step {step} in the timeline");
        assert!(html.contains(&format!("<h2 id=\"step-{step}\">")), "step {step}'s anchor");
    }
    // No float noise: at most 4 decimals in the answers and commands shown.
    let noisy = html
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .any(|t| t.split_once('.').is_some_and(|(_, frac)| frac.len() > 4 && frac.chars().all(|c| c.is_ascii_digit())));
    assert!(!noisy, "a number with more than 4 decimals in the report");
}

/// Stage 1 corrects an accepted pad's depth at its source, and the fillet's radius with it
/// (`also`): the document is rebuilt with the revised commands, the preview judged, and the
/// program holds one pad of the new depth (no corrective cut). A revision that changes more than numbers is
/// an invalid answer with the reason.
#[test]
fn a_revision_corrects_an_accepted_command_where_it_was_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let fillet = serde_json::json!({"stage": "stage1", "answer": {"reason": "round one edge",
        "command": {"op": "fillet", "edges": ["E1"], "radius": 1}}});
    // The second revision also changes a linked number: the fillet's radius with the depth.
    let revise = |profile: &str, depth: f64| {
        serde_json::json!({"stage": "stage1", "answer": {"reason": "the block is too thick",
            "command": {"op": "revise", "number": 2, "command": {"op": "extrude", "profile": profile, "mode": "add",
                "extent": {"type": "one_side", "depth": depth}},
                "also": [{"number": 3, "command": {"op": "fillet", "edges": ["E1"], "radius": 1.5}}]}}})
    };
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(
        &script,
        &[
            box_plan(),
            box_sketch(),
            accept.clone(),
            fillet,
            accept.clone(),
            revise("S9", 6.0),
            revise("S1", 6.0),
            accept,
            end,
        ],
    );
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let stage1: Vec<&Value> = events.iter().filter(|e| e["stage"] == "stage1").collect();
    // The history is numbered for revisions.
    assert!(stage1[2]["request"]["text"].as_str().expect("text").contains("[2] {\"op\":\"extrude\""));
    let refused = stage1[2]["errors"][0].as_str().expect("the first revision is refused");
    assert!(refused.contains("`profile` changed") && refused.contains("numbers of [2]"), "{refused}");
    let stage3 = events.iter().rfind(|e| e["stage"] == "stage3").expect("stage 3");
    let text = stage3["request"]["text"].as_str().expect("text");
    assert!(text.contains("revision of [2] extrude: extent.depth 10 -> 6; with [3] fillet: radius 1 -> 1.5"), "{text}");
    assert!(text.contains("rebuilds the model on it"), "{text}");
    let revised = events.iter().find(|e| e["event"] == "execute" && e["revises"] == 2).expect("a committed revision");
    assert_eq!(revised["verified"], true);
    assert_eq!(revised["also_revises"], serde_json::json!([3]));
    assert!(std::fs::read_to_string(out.join("report.html")).expect("report").contains("replacing [2], [3]"));
    let program: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json");
    let ops: Vec<&str> =
        program["commands"].as_array().expect("commands").iter().filter_map(|c| c["op"].as_str()).collect();
    assert_eq!(ops, ["sketch", "extrude", "fillet", "end"]);
    assert_eq!(program["commands"][1]["extent"]["depth"], 6.0);
    assert_eq!(program["commands"][2]["radius"], 1.5);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("state.json")).expect("state")).expect("json");
    assert!((state["bbox"]["max"][2].as_f64().expect("top") - 6.0).abs() < 1e-6, "{}", state["bbox"]);
    let volume = state["volume"].as_f64().expect("volume");
    // The 1.5 mm fillet (not the 1 mm one) along a vertical edge, now 6 mm long.
    let rounded = (1.0 - std::f64::consts::FRAC_PI_4) * 1.5 * 1.5 * 6.0;
    assert!((volume - (3600.0 - rounded)).abs() < 0.01, "{volume}");
    assert_eq!(outcome(&out)["steps"], 3, "a revision is a step");
    // The program written is the model: replayed from scratch it gives the same solid.
    let replayed = iou(&out.join("program.json"), &out.join("model.step"), "static").expect("iou");
    assert!(replayed > 0.999, "{replayed}");
}

/// A revision may change an extrusion's extent kind (no extent names an entity): a pad of
/// 10 mm on one side becomes one of 10 mm centred on its sketch, rebuilt and judged like
/// any revision.
#[test]
fn a_revision_may_change_an_extents_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let revise = serde_json::json!({"stage": "stage1", "answer": {"reason": "the block stands on both sides",
        "command": {"op": "revise", "number": 2, "command": {"op": "extrude", "profile": "S1", "mode": "add",
            "extent": {"type": "symmetric", "depth": 10}}}}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), box_sketch(), accept.clone(), revise, accept, end]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let stage3 = events.iter().rfind(|e| e["stage"] == "stage3").expect("stage 3");
    let text = stage3["request"]["text"].as_str().expect("text");
    assert!(text.contains("revision of [2] extrude: extent one_side 10 -> symmetric 10"), "{text}");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("state.json")).expect("state")).expect("json");
    let z = |corner: &str| state["bbox"][corner][2].as_f64().expect("z");
    assert!((z("min") + 5.0).abs() < 1e-6 && (z("max") - 5.0).abs() < 1e-6, "{}", state["bbox"]);
    let program: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json");
    assert_eq!(program["commands"][1]["extent"], serde_json::json!({"type": "symmetric", "depth": 10.0}));
}

/// Each accepted step is built again from the start in a new worker, and that is the model
/// the next step is shown. The slab of this part (fused onto a washer, its concave end inside
/// the washer's rim), executed in the worker that had just previewed it, gave another solid
/// than a replay of the program does: 40 mm3 more and the faces numbered otherwise. The
/// oracle, shown that document, put the boss on its F2, which in the replay is the slab's
/// bottom: the program written built a different part (IoU 0 against the ground truth).
#[test]
fn the_program_written_replays_to_the_model_the_reader_was_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = repo_root().join("agent/tests/data/washer_slab_boss.json");
    let image = target_image(&program, dir.path());
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--gt", program.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(outcome(&out)["finished"], true);
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json");
    let boss = written["commands"].as_array().expect("commands").iter().rfind(|c| c["op"] == "sketch").expect("S3");
    assert_eq!(boss["on"], "F10", "the slab's top as a replay numbers it");
    // Replayed in a new process, the program gives the model, face for face.
    let replay = dir.path().join("replay");
    let exec = common::command().arg("exec").arg(out.join("program.json")).arg("--out").arg(&replay).output();
    let exec = exec.expect("exec runs");
    assert!(exec.status.success(), "{}", String::from_utf8_lossy(&exec.stderr));
    let table = |path: PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).expect("state")).expect("json")
    };
    let (built, replayed) = (table(out.join("state.json")), table(replay.join("state.json")));
    assert_eq!(built["faces"], replayed["faces"]);
    assert_eq!(built["volume"], replayed["volume"]);
    let against_truth = iou(&out.join("program.json"), &program, "static").expect("iou");
    assert!(against_truth > 0.99, "the program replays to the part: {against_truth}");
}

/// A busy model (test100 00531511: a plate with a hole, a recess with a pin and three
/// slots) has too many entities to label in one picture: Stage 1 then gets its edges and its
/// faces in two tagged views, and says so; a plain model keeps one view.
#[test]
fn a_crowded_model_is_tagged_in_two_views() {
    let Some((root, records)) = test100() else { return };
    let record = records.iter().find(|r| r["image"] == "00531511_0.png").expect("test100 holds 00531511");
    let mut session = common::session();
    let imported = gerd::import::import_cadquery(record["ground_truth"].as_str().expect("code"), &mut session)
        .expect("00531511 imports");
    let dir = tempfile::tempdir().expect("tempdir");
    let (pred, _) = rebuild_test100(&root, record, &imported.program, dir.path());
    let events = trace(pred.parent().expect("out"));
    let stage1: Vec<&Value> = events.iter().filter(|e| e["stage"] == "stage1").collect();
    let images = |e: &Value| e["request"]["images"].as_array().map_or(0, Vec::len);
    let text = |e: &Value| e["request"]["text"].as_str().unwrap_or("").to_string();
    assert_eq!(images(stage1[1]), 2, "the plate alone: one tagged view");
    assert!(!text(stage1[1]).contains("too many entities"));
    let last = stage1.last().expect("stage 1 calls");
    assert_eq!(images(last), 3, "the finished part: edges and faces apart");
    assert!(text(last).contains("image 3 is the same\nview with a label on every visible face"), "{}", text(last));
    let names: Vec<&str> =
        last["request"]["images"].as_array().expect("images").iter().filter_map(Value::as_str).collect();
    assert!(names[2].ends_with("_tagged_faces.png"), "{names:?}");
}

/// Stage 2 lists the existing vertices beside the edges, in the same view coordinates (a
/// reader tying a hole midway between two corners had looked them up in Stage 1's table):
/// on the plate's top face, each of its four corners sits where the top edges it joins end.
#[test]
fn stage_two_lists_the_vertices_where_the_edges_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("plate_counterbore");
    let image = target_image(&program, dir.path());
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--gt", program.to_str().expect("utf-8"), "--no-rag", "--max-steps", "2"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let second = events
        .iter()
        .filter(|e| e["stage"] == "stage2")
        .nth(1)
        .and_then(|e| e["request"]["text"].as_str())
        .expect("a Stage 2 request for the second sketch");
    let table = second.split("```").nth(1).expect("the projected table");
    // The edges lying in the sketch plane come first: a reader had to search for them.
    let edge_lines: Vec<&str> = table.lines().filter(|l| l.starts_with('E')).collect();
    let in_plane = edge_lines.iter().take_while(|l| l.contains("(in plane)")).count();
    assert!(in_plane >= 4, "the top face's edges first:\n{table}");
    assert!(edge_lines[in_plane..].iter().all(|l| !l.contains("(in plane)")), "{table}");
    // The box's vertical edges project onto points and its bottom edges onto its top ones:
    // neither is listed again, so the table holds the top face's four edges.
    assert_eq!(edge_lines.len(), 4, "each projection once:\n{table}");
    let lines: Vec<&str> = table.lines().filter(|l| l.contains("(in plane)")).collect();
    let (vertices, edges): (Vec<&str>, Vec<&str>) = lines.iter().partition(|l| l.starts_with('V'));
    assert_eq!(vertices.len(), 4, "the top face's corners:\n{table}");
    for v in vertices {
        let at = v.split_once(": ").expect("a vertex's coordinates").1;
        let ends = edges.iter().filter(|e| e.ends_with(at) || e.contains(&format!(": {at} "))).count();
        assert_eq!(ends, 2, "{v}: two top edges end there\n{table}");
    }
}
