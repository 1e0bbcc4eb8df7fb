//! Candidates that do not build, against a real FreeCAD with the scripted backend: a drawing
//! whose curves cross is drawn again, told which curves; a step no candidate gets through is
//! set aside and the loop goes on from the model as it was (`max_skipped_steps`); an arc
//! drawn the long way round is drawn again, told which arc; a redrawn candidate in a new body
//! is built in that body; a hole drawn across its outline is moved in; a block drawn a hair
//! off the part beside it is put against it.

mod common;

use common::{box_plan, box_sketch, example_path, outcome, reconstruct, target_image, trace, write_script};
use serde_json::Value;

/// The errors of the candidates that failed, in order.
fn failed_executions(events: &[Value]) -> Vec<&str> {
    events.iter().filter(|e| e["event"] == "execute" && e["ok"] == false).filter_map(|e| e["error"].as_str()).collect()
}

/// The run's program.json.
fn program_of(out: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("program.json")).expect("program")).expect("json")
}

/// A hole drawn beside the block, not in it: the cut removes nothing and FreeCAD's error
/// goes back to Stage 1, every attempt.
fn missed_hole() -> [Value; 2] {
    [
        serde_json::json!({"stage": "stage1", "answer": {"reason": "a hole", "sketches": [{"name": "S2", "on": "XY"}],
            "command": {"op": "extrude", "profile": "S2", "mode": "cut", "extent": {"type": "symmetric", "depth": 30}}}}),
        serde_json::json!({"stage": "stage2", "answer": {"primitives": [
            {"type": "circle", "center": [0.15, 0.15], "radius": 0.05}]}}),
    ]
}

/// The block; a hole missed three times; then, with `go_on`, a hole in the block and END.
fn script(dir: &std::path::Path, go_on: bool) -> std::path::PathBuf {
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let mut lines = vec![box_plan(), box_sketch(), accept.clone()];
    for _ in 0..3 {
        lines.extend(missed_hole());
    }
    if go_on {
        let [plan, _] = missed_hole();
        lines.push(plan);
        lines.push(serde_json::json!({"stage": "stage2", "answer": {"primitives": [
            {"type": "circle", "center": [0.55, 0.5], "radius": 0.03}]}}));
        lines.push(accept);
        lines.push(serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}}));
    }
    let path = dir.join("script.jsonl");
    write_script(&path, &lines);
    path
}

#[test]
fn a_step_no_candidate_gets_through_is_set_aside_and_the_model_is_told() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let script = script(dir.path(), true);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let done = outcome(&out);
    assert_eq!((done["finished"].as_bool(), done["steps"].as_u64()), (Some(true), Some(2)), "{done}");
    assert_eq!(done["skipped_steps"], serde_json::json!([2]), "{done}");
    assert!(done["failure"].is_null(), "{done}");
    let events = trace(&out);
    let skipped: Vec<&Value> = events.iter().filter(|e| e["event"] == "skipped").collect();
    assert_eq!(skipped.len(), 1, "{events:?}");
    assert_eq!(skipped[0]["step"], 2);
    assert!(skipped[0]["reason"].as_str().is_some_and(|r| r.contains("no candidate got through in 3 attempts")));
    // The steps are numbered as the loop took them: the hole is step 3, END step 4.
    let accepted: Vec<u64> =
        events.iter().filter(|e| e["event"] == "accepted").filter_map(|e| e["step"].as_u64()).collect();
    assert_eq!(accepted, [1, 3]);
    assert!(out.join("views/step03_tagged.png").is_file());
    // Step 3's Stage 1 says why step 2 was set aside; no other request does.
    let stage1: Vec<&str> =
        events.iter().filter(|e| e["stage"] == "stage1").filter_map(|e| e["request"]["text"].as_str()).collect();
    let told: Vec<&&str> = stage1.iter().filter(|t| t.contains("## The last step was set aside")).collect();
    assert_eq!(told.len(), 1, "{stage1:?}");
    assert!(told[0].contains("(step 3 of at most 25)") && told[0].contains("removed no material"), "{}", told[0]);
    assert!(stage1.last().expect("END's request").contains("(step 4 of at most 25)"));
    // The model is the block with the one hole.
    let program = program_of(&out);
    let ops: Vec<&str> =
        program["commands"].as_array().expect("commands").iter().filter_map(|c| c["op"].as_str()).collect();
    assert_eq!(ops, ["sketch", "extrude", "sketch", "extrude", "end"]);
    assert!(std::fs::read_to_string(out.join("report.html")).expect("report").contains("Step 2 set aside"));
}

#[test]
fn with_no_steps_to_set_aside_the_run_stops_at_the_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let script = script(dir.path(), false);
    let config = dir.path().join("strict.toml");
    std::fs::write(&config, "max_skipped_steps = 0\n").expect("config");
    let out = dir.path().join("out");
    let run = reconstruct(
        &image,
        &out,
        &[
            "--vlm",
            "scripted",
            "--script",
            script.to_str().expect("utf-8"),
            "--config",
            config.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(run.status.code(), Some(1));
    let done = outcome(&out);
    assert_eq!((done["finished"].as_bool(), done["steps"].as_u64()), (Some(false), Some(1)), "{done}");
    assert!(
        done["failure"].as_str().is_some_and(|f| f.starts_with("step 2: no candidate got through in 3 attempts")),
        "{done}"
    );
    assert_eq!(done["skipped_steps"], serde_json::json!([]));
    assert!(out.join("model.FCStd").is_file() && out.join("program.json").is_file());
}

/// A bow tie: the block's rectangle drawn with its top corners swapped, so its long sides cross.
fn bow_tie_sketch() -> Value {
    serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.4, 0.6], "end": [0.7, 0.4]}, {"type": "line", "start": [0.7, 0.4], "end": [0.7, 0.6]},
        {"type": "line", "start": [0.7, 0.6], "end": [0.4, 0.4]}, {"type": "line", "start": [0.4, 0.4], "end": [0.4, 0.6]}]}})
}

/// A run whose block is first drawn as `first`, which does not build, then as it should be:
/// the one failure's error, after checking that the plan was kept (Stage 2 again, with the
/// reason `told`, and no second Stage 1) and the block committed.
fn drawn_again(first: Value, told: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), first, box_sketch(), accept, end]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let failed = failed_executions(&events);
    assert_eq!(failed.len(), 1, "{events:?}");
    let stages: Vec<&str> = events.iter().filter_map(|e| e["stage"].as_str()).collect();
    assert_eq!(stages, ["stage1", "stage2", "stage2", "stage3", "stage1"]);
    let redraw = events.iter().filter(|e| e["stage"] == "stage2").nth(1).expect("a second drawing");
    let text = redraw["request"]["text"].as_str().expect("text");
    assert!(text.contains("your last drawing of this sketch did not build") && text.contains(told), "{text}");
    let done = outcome(&out);
    assert_eq!((done["steps"].as_u64(), done["failed_candidates"].as_u64()), (Some(1), Some(1)), "{done}");
    failed[0].to_string()
}

#[test]
fn a_drawing_whose_curves_cross_is_drawn_again_told_which_curves() {
    let failed = drawn_again(bow_tie_sketch(), "curves g0 and g2 cross");
    assert!(failed.contains("in sketch S1, curves g0 and g2 cross each other 50% of the way along g0"), "{failed}");
}

/// The block's rectangle with its top side an arc whose middle point lies a hair off the
/// line through its ends, beyond them: round a circle far wider than the view.
fn runaway_arc_sketch() -> Value {
    serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.4, 0.4], "end": [0.7, 0.4]}, {"type": "line", "start": [0.7, 0.4], "end": [0.7, 0.6]},
        {"type": "arc", "start": [0.7, 0.6], "mid": [0.9, 0.6004], "end": [0.4, 0.6]},
        {"type": "line", "start": [0.4, 0.6], "end": [0.4, 0.4]}]}})
}

#[test]
fn an_arc_drawn_the_long_way_round_is_drawn_again_told_which_arc() {
    // The block as redrawn is committed ([`drawn_again`]): no blob metres across.
    let failed = drawn_again(runaway_arc_sketch(), "arc g2 goes the long way");
    assert!(failed.starts_with("in sketch S1, arc g2 goes the long way round"), "{failed}");
}

#[test]
fn a_candidate_drawn_again_in_a_new_body_is_built_in_that_body() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    // A second block apart from the first, in a body of its own: a bow tie first, then drawn right.
    let apart = serde_json::json!({"stage": "stage1", "answer": {"reason": "a block apart", "body": "B2",
        "sketches": [{"name": "S2", "on": "XY"}],
        "command": {"op": "extrude", "profile": "S2", "mode": "add", "extent": {"type": "one_side", "depth": 10}}}});
    let crossed = serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.1, 0.3], "end": [0.3, 0.1]}, {"type": "line", "start": [0.3, 0.1], "end": [0.3, 0.3]},
        {"type": "line", "start": [0.3, 0.3], "end": [0.1, 0.1]}, {"type": "line", "start": [0.1, 0.1], "end": [0.1, 0.3]}]}});
    let right = serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.1, 0.3], "end": [0.3, 0.3]}, {"type": "line", "start": [0.3, 0.3], "end": [0.3, 0.1]},
        {"type": "line", "start": [0.3, 0.1], "end": [0.1, 0.1]}, {"type": "line", "start": [0.1, 0.1], "end": [0.1, 0.3]}]}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), box_sketch(), accept.clone(), apart, crossed, right, accept, end]);
    let out = dir.path().join("out");
    let run = reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8")]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let failed = failed_executions(&events);
    // Only the bow tie fails; the block drawn right is not refused as a second solid of B1.
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].contains("cross each other") && !failed[0].contains("multiple solids"), "{}", failed[0]);
    let done = outcome(&out);
    assert_eq!((done["steps"].as_u64(), done["failed_candidates"].as_u64()), (Some(2), Some(1)), "{done}");
    let program = program_of(&out);
    let ops: Vec<String> = program["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .map(|c| format!("{}{}", c["op"].as_str().unwrap_or("?"), c["name"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(ops, ["sketchS1", "extrude", "bodyB2", "sketchS2", "extrude", "end"]);
    // B2's sketch lists B1's edges and vertices, which its picture labels, apart from its
    // own body's (none yet): for placing, not for ties.
    let text = |e: &Value| e["request"]["text"].as_str().expect("text").to_string();
    let stage2: Vec<String> = events.iter().filter(|e| e["stage"] == "stage2").map(text).collect();
    assert!(stage2[0].contains("```\n(none)\n```"), "{}", stage2[0]);
    let others = "(none)\nother bodies, for placing only (a sketch is tied only to its own body's geometry, and nothing snaps to them):\nE";
    assert!(stage2[1].contains(others), "{}", stage2[1]);
    assert!(stage2[1].contains("\nV1"), "{}", stage2[1]);
}

#[test]
fn a_hole_drawn_across_its_outline_is_moved_inside_and_the_step_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    // The block with a 2 mm hole whose centre sits on its right side (x = 0.7 view units).
    let mut sketch = box_sketch();
    sketch["answer"]["primitives"]
        .as_array_mut()
        .expect("primitives")
        .push(serde_json::json!({"type": "circle", "center": [0.7, 0.5], "radius": 0.02}));
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), sketch, accept, end]);
    let out = dir.path().join("out");
    let run =
        reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8"), "--no-fit"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let mended: Vec<&Value> = events.iter().filter(|e| e["event"] == "holes_inside").collect();
    assert_eq!(mended.len(), 1, "{events:?}");
    assert_eq!((mended[0]["sketch"].as_str(), mended[0]["circles"].as_u64()), (Some("S1"), Some(1)));
    let done = outcome(&out);
    assert_eq!((done["steps"].as_u64(), done["failed_candidates"].as_u64()), (Some(1), Some(0)), "{done}");
    // The committed hole lies inside the block's right side, its edge clear of it.
    let program = program_of(&out);
    let primitives = program["commands"][0]["primitives"].as_array().expect("primitives");
    let xs: Vec<f64> =
        primitives[..4].iter().flat_map(|l| [l["start"][0].as_f64(), l["end"][0].as_f64()]).flatten().collect();
    let right = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let hole = &primitives[4];
    let (x, r) = (hole["center"][0].as_f64().expect("x"), hole["radius"].as_f64().expect("r"));
    assert!(x + r < right && right - (x + r) < 2.0 * r, "hole at {x} r {r}, side at {right}");
}

#[test]
fn a_block_drawn_a_hair_off_the_part_beside_it_is_put_against_it_and_the_step_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = target_image(&example_path("box"), dir.path());
    let accept = serde_json::json!({"stage": "stage3", "answer": {"verdict": "accept", "reasons": []}});
    // A second block beside the first, its left side read 0.01 view units (a few pixels)
    // right of the first block's right side (x = 0.7): FreeCAD makes it a solid of its own.
    let beside = serde_json::json!({"stage": "stage1", "answer": {"reason": "a block beside it",
        "sketches": [{"name": "S2", "on": "XY"}],
        "command": {"op": "extrude", "profile": "S2", "mode": "add", "extent": {"type": "one_side", "depth": 10}}}});
    let drawn = serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.71, 0.6], "end": [0.8, 0.6]}, {"type": "line", "start": [0.8, 0.6], "end": [0.8, 0.4]},
        {"type": "line", "start": [0.8, 0.4], "end": [0.712, 0.4]}, {"type": "line", "start": [0.712, 0.4], "end": [0.71, 0.6]}]}});
    let end = serde_json::json!({"stage": "stage1", "answer": {"reason": "done", "command": {"op": "end"}}});
    let script = dir.path().join("script.jsonl");
    write_script(&script, &[box_plan(), box_sketch(), accept.clone(), beside, drawn, accept, end]);
    let out = dir.path().join("out");
    let run =
        reconstruct(&image, &out, &["--vlm", "scripted", "--script", script.to_str().expect("utf-8"), "--no-fit"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let events = trace(&out);
    let mended: Vec<&Value> = events.iter().filter(|e| e["event"] == "against_part").collect();
    assert_eq!(mended.len(), 1, "{events:?}");
    assert_eq!(mended[0]["sketch"].as_str(), Some("S2"));
    let done = outcome(&out);
    assert_eq!((done["steps"].as_u64(), done["failed_candidates"].as_u64()), (Some(2), Some(0)), "{done}");
    // The committed block's left side lies on the first block's right side, a hair inside
    // it (both sketches are on XY: one frame), and its other sides stay where drawn.
    let program = program_of(&out);
    let xs = |k: usize| -> Vec<f64> {
        program["commands"][k]["primitives"]
            .as_array()
            .expect("primitives")
            .iter()
            .flat_map(|l| [l["start"][0].as_f64(), l["end"][0].as_f64()])
            .flatten()
            .collect()
    };
    let (first, second) = (xs(0), xs(2));
    let right = first.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (left, far) = second.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let width = right - first.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        left < right && right - left < 0.02 * width,
        "the first block ends at {right}, the second starts at {left}"
    );
    assert!((far - right) > 0.25 * width, "the second block's far side moved: {far}");
}
