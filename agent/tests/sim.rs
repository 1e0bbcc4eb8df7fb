//! The simulated VLM: with every rate at zero it is the oracle; a seed repeats a run to
//! the bit; injected errors are in the trace (and only there); `run --vary` writes the
//! curves, their table and chart.

mod common;

use std::path::Path;
use std::process::Output;

use common::{repo_root, trace};
use serde_json::Value;

fn vision2cad(args: &[&str]) -> Output {
    common::command().args(args).output().expect("runs")
}

fn reconstruct(out: &Path, extra: &[&str]) -> Output {
    let root = repo_root();
    let image = root.join("assets/examples/plate_counterbore.png");
    let gt = root.join("assets/programs/plate_counterbore.json");
    let mut args = vec![
        "reconstruct",
        image.to_str().expect("utf-8"),
        "--gt",
        gt.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ];
    args.extend(extra);
    vision2cad(&args)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn injected(out: &Path) -> Vec<Value> {
    trace(out)
        .into_iter()
        .filter(|e| e["event"] == "call")
        .flat_map(|e| e["injected"].as_array().cloned().unwrap_or_default())
        .collect()
}

const NO_ERRORS: [&str; 14] = [
    "--sim",
    "sigma=0",
    "--sim",
    "reference=0",
    "--sim",
    "frame=0",
    "--sim",
    "parameter=0",
    "--sim",
    "operation=0",
    "--sim",
    "judge_flip=0",
    "--vlm",
    "sim",
];

#[test]
fn without_errors_the_simulated_model_is_the_oracle_and_a_seed_repeats_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oracle = dir.path().join("oracle");
    assert!(reconstruct(&oracle, &[]).status.success());
    let clean = dir.path().join("clean");
    let r = reconstruct(&clean, &NO_ERRORS);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(read(&clean.join("program.json")), read(&oracle.join("program.json")));
    // Only the judge's estimates are recorded: nothing was injected.
    assert!(injected(&clean).iter().all(|e| e["kind"] == "judge" && e["flipped"] == false));

    // Noise and wrong parameters: the same seed gives the same run, another seed another.
    let noisy = |name: &str, seed: &str| {
        let out = dir.path().join(name);
        let r = reconstruct(&out, &["--vlm", "sim", "--sim", "sigma=0.01", "--sim", "parameter=0.05", "--seed", seed]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        out
    };
    let (a, b, c) = (noisy("a", "7"), noisy("b", "7"), noisy("c", "8"));
    assert_eq!(read(&a.join("program.json")), read(&b.join("program.json")), "same seed, same run");
    assert_ne!(read(&a.join("program.json")), read(&c.join("program.json")), "another seed, other errors");
    let errors = injected(&a);
    assert!(errors.iter().any(|e| e["kind"] == "coordinate" && e["sigma"] == 0.01), "{errors:?}");
    let parameter = errors.iter().find(|e| e["kind"] == "parameter").expect("a parameter error");
    assert_ne!(parameter["from"], parameter["to"]);
    // The harness reads the answer text only: the record of the errors is not in it.
    for call in trace(&a).into_iter().filter(|e| e["event"] == "call") {
        assert!(!call["answer"].as_str().expect("answer").contains("injected"));
    }
}

/// The numbers of the first Stage 2 answer of a run (its first sketch, drawn before any
/// error could change the model), in order.
fn first_drawing(out: &Path) -> Vec<f64> {
    let call = trace(out).into_iter().find(|e| e["event"] == "call" && e["stage"] == "stage2").expect("a drawing");
    let answer: Value = serde_json::from_str(call["answer"].as_str().expect("answer")).expect("json");
    let mut numbers = Vec::new();
    for prim in answer["primitives"].as_array().expect("primitives") {
        for key in ["start", "mid", "end", "center"] {
            numbers.extend(prim[key].as_array().into_iter().flatten().filter_map(Value::as_f64));
        }
        numbers.extend(prim["radius"].as_f64());
    }
    numbers
}

#[test]
fn coordinate_noise_moves_points_by_sigma_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oracle = dir.path().join("oracle");
    assert!(reconstruct(&oracle, &[]).status.success());
    let noisy = dir.path().join("noisy");
    let mut args = NO_ERRORS.to_vec();
    args.extend(["--sim", "sigma=0.01", "--seed", "5"]);
    let _ = reconstruct(&noisy, &args);
    let (a, b) = (first_drawing(&oracle), first_drawing(&noisy));
    assert_eq!(a.len(), b.len(), "the same primitives");
    let moves: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y - x).collect();
    let rms = (moves.iter().map(|d| d * d).sum::<f64>() / moves.len() as f64).sqrt();
    assert!(moves.iter().all(|d| d.abs() < 0.05), "{moves:?}");
    assert!((0.003..0.02).contains(&rms), "moved by {rms} for sigma 0.01: {moves:?}");
    // Only Stage 2 drew errors.
    assert!(injected(&noisy).iter().all(|e| e["kind"] == "coordinate" || e["kind"] == "judge"));
}

#[test]
fn the_judge_rejects_a_wrong_operation_and_the_loop_asks_again_unless_evf_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("wrong");
    let mut args = NO_ERRORS.to_vec();
    args.extend(["--sim", "operation=1", "--max-steps", "2"]);
    let _ = reconstruct(&out, &args);
    let errors = injected(&out);
    assert!(errors.iter().any(|e| e["kind"] == "operation"), "{errors:?}");
    assert!(errors.iter().any(|e| e["kind"] == "judge" && e["verdict"] == "reject"), "{errors:?}");
    let calls: Vec<Value> = trace(&out).into_iter().filter(|e| e["event"] == "call").collect();
    assert!(calls.iter().any(|c| c["stage"] == "stage1" && c["attempt"].as_u64() > Some(1)), "a second attempt");

    let unverified = dir.path().join("unverified");
    args.push("--no-evf");
    let _ = reconstruct(&unverified, &args);
    assert!(trace(&unverified).iter().all(|e| e["stage"] != "stage3"), "no verification without EVf");
}

#[test]
fn references_are_confused_with_the_nearest_entity_and_the_run_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("confused");
    let r = reconstruct(&out, &["--vlm", "sim", "--sim", "sigma=0", "--sim", "parameter=0", "--sim", "reference=1"]);
    // The model may fail with every reference wrong; what it did is on record either way.
    let _ = r;
    let errors = injected(&out);
    let confusion = errors.iter().find(|e| e["kind"] == "reference").expect("a reference error");
    assert_ne!(confusion["right"], confusion["named"], "{confusion}");
    let bad = reconstruct(&dir.path().join("bad"), &["--vlm", "sim", "--sim", "reference=2"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a probability"));
}

#[test]
fn a_sweep_over_a_rate_writes_curves_with_their_sample_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::generated_test_split(dir.path(), 2, 2);
    let run = dir.path().join("run");
    let r = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        run.to_str().expect("utf-8"),
        "--jobs",
        "2",
        "--vlm",
        "sim",
        "--configs",
        "full,no-pgr",
        "--vary",
        "sigma=0,0.02",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let table = read(&run.join("results.md"));
    for row in ["full_sigma=0 ", "full_sigma=0.02", "no-pgr_sigma=0 ", "no-pgr_sigma=0.02"] {
        assert!(table.contains(&format!("| {row}")), "{row}: {table}");
    }
    let curves = read(&run.join("curves.md"));
    assert!(curves.contains("## static mIoU") && curves.contains("| sigma | full | no-pgr |"), "{curves}");
    assert!(curves.contains("| 0.02 |") && curves.contains("(2)"), "{curves}");
    let png = image::open(run.join("curves.png")).expect("the chart is a PNG");
    assert!(png.width() >= 1000 && png.height() >= 300);
    assert!(read(&run.join("curves.svg")).contains("<svg"));
    let refused = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        run.to_str().expect("utf-8"),
        "--vary",
        "sigma=0,1",
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--vlm sim"));
}

/// A block with a notch cut at its corner: the notch is drawn from the block's corner vertex
/// along two of its edges, with no tie named in the program.
const CORNER_NOTCH: &str = r#"{"name":"corner_notch","commands":[
{"op":"sketch","name":"S1","on":"XY","primitives":[{"type":"line","start":[0,0],"end":[40,0]},{"type":"line","start":[40,0],"end":[40,30]},{"type":"line","start":[40,30],"end":[0,30]},{"type":"line","start":[0,30],"end":[0,0]}]},
{"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10}},
{"op":"sketch","name":"S2","on":"XY","primitives":[{"type":"line","start":[0,0],"end":[12,0]},{"type":"line","start":[12,0],"end":[12,12]},{"type":"line","start":[12,12],"end":[0,12]},{"type":"line","start":[0,12],"end":[0,0]}]},
{"op":"extrude","profile":"S2","mode":"cut","extent":{"type":"through_all","symmetric":true}},
{"op":"end"}]}"#;

#[test]
fn pgr_snaps_noise_below_its_tolerance_onto_projected_geometry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = dir.path().join("corner_notch.json");
    std::fs::write(&gt, CORNER_NOTCH).expect("write");
    let image = dir.path().join("target.png");
    let r = vision2cad(&[
        "render",
        gt.to_str().expect("utf-8"),
        "--view",
        "target",
        "--out",
        image.to_str().expect("utf-8"),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // Noise of sigma 0.0005 view units, a quarter of PGR's snap tolerance (0.002).
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec!["reconstruct", image.to_str().expect("utf-8"), "--gt", gt.to_str().expect("utf-8")];
        args.extend(["--out", out.to_str().expect("utf-8")]);
        args.extend(NO_ERRORS);
        args.extend(["--sim", "sigma=0.0005", "--seed", "3"]);
        args.extend(extra);
        let r = vision2cad(&args);
        assert!(r.status.success(), "{name}: {}", String::from_utf8_lossy(&r.stderr));
        let program: Value = serde_json::from_str(&read(&out.join("program.json"))).expect("program");
        let state: Value = serde_json::from_str(&read(&out.join("state.json"))).expect("state");
        (program, state)
    };
    let sketches = |program: &Value| -> Vec<Value> {
        program["commands"].as_array().expect("commands").iter().filter(|c| c["op"] == "sketch").cloned().collect()
    };
    let point = |sketch: &Value, key: &str| -> [f64; 2] {
        let p = &sketch["primitives"][0][key];
        [p[0].as_f64().expect("x"), p[1].as_f64().expect("y")]
    };
    let distance = |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).hypot(a[1] - b[1]);

    // With PGR the notch's corner lands exactly on the block's (noisy) corner, tied to it,
    // and the part has the ground truth's 8 faces.
    let (program, state) = run("full", &[]);
    let s = sketches(&program);
    let (block_corner, notch_corner) = (point(&s[0], "start"), point(&s[1], "start"));
    assert!(distance(block_corner, notch_corner) < 1e-9, "{block_corner:?} {notch_corner:?}");
    let ties = s[1]["constraints"].as_array().expect("snapped ties");
    assert!(ties.iter().any(|c| c["type"] == "coincident" && c["a"] == "g0.start"), "{ties:?}");
    assert_eq!(state["faces"].as_array().expect("faces").len(), 8);

    // Without PGR the same noise stays: the corners miss each other by a little.
    let (program, _) = run("no-pgr", &["--no-pgr"]);
    let s = sketches(&program);
    let miss = distance(point(&s[0], "start"), point(&s[1], "start"));
    assert!(miss > 1e-6 && miss < 0.5, "the corners are {miss} apart");
    assert!(s[1]["constraints"].as_array().is_none_or(|c| c.is_empty()), "no ties without PGR");
}

#[test]
fn a_shadow_oracle_records_the_models_errors_and_calibration_recovers_the_rates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gt = repo_root().join("assets/programs/plate_counterbore.json");
    // A "real" model with known errors: the simulated one, coordinate noise only.
    for seed in ["1", "2"] {
        let out = dir.path().join(format!("runs/s{seed}"));
        let mut args = NO_ERRORS.to_vec();
        args.extend(["--sim", "sigma=0.02", "--seed", seed, "--shadow-gt", gt.to_str().expect("utf-8")]);
        let _ = reconstruct(&out, &args);
        let observed: Vec<Value> =
            trace(&out).into_iter().flat_map(|e| e["observed"].as_array().cloned().unwrap_or_default()).collect();
        assert!(observed.iter().any(|o| o["kind"] == "coordinate"), "{observed:?}");
    }
    let json = dir.path().join("rates.json");
    let r = vision2cad(&[
        "sim-calibrate",
        dir.path().join("runs").to_str().expect("utf-8"),
        "--json",
        json.to_str().expect("utf-8"),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.contains("[sim]") && stdout.contains("sigma = "), "{stdout}");
    let rates: Value = serde_json::from_str(&read(&json)).expect("json");
    assert_eq!(rates["traces"], 2);
    let sigma = rates["sigma"]["estimate"].as_f64().expect("a sigma");
    assert!((0.012..0.03).contains(&sigma), "sigma 0.02 estimated as {sigma}");
    // No wrong reference or operation was made, and none is counted.
    assert!(rates["reference"]["samples"].as_u64() > Some(0), "{rates}");
    assert_eq!(
        (&rates["reference"]["estimate"], &rates["operation"]["estimate"]),
        (&serde_json::json!(0.0), &serde_json::json!(0.0)),
        "{rates}"
    );

    // A trace without a shadow has nothing to count, and says how to get it.
    let plain = dir.path().join("plain");
    assert!(reconstruct(&plain, &[]).status.success());
    let r = vision2cad(&["sim-calibrate", plain.to_str().expect("utf-8")]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("--shadow-gt"), "{}", String::from_utf8_lossy(&r.stderr));
}
