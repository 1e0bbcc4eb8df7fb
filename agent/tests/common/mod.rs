//! Shared helpers for tests that drive a real FreeCAD through the vision2cad binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use freecad_bridge::{Session, WorkerConfig};

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_vision2cad")
}

/// The vision2cad binary as a command with no default retrieval index: a test must not
/// depend on whether this machine has built one (`gerd default-index`, run by set-up). A
/// test of the default index points `VISION2CAD_RAG_HOME` somewhere of its own.
pub fn command() -> std::process::Command {
    let mut command = std::process::Command::new(binary());
    command.env("VISION2CAD_RAG_HOME", Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-default-index"));
    command
}

pub fn config() -> WorkerConfig {
    WorkerConfig::new(binary()).with_call_timeout(Duration::from_secs(120))
}

pub fn session() -> Session {
    Session::new(config()).expect("FreeCAD worker starts (run scripts/setup.sh first)")
}

#[allow(unused_imports)] // each test binary uses its own few
pub use freecad_bridge::testing::{assert_close, data_dir, example, example_path, files_under, program, repo_root};

/// The events of a reconstruction's `trace.jsonl`.
pub fn trace(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("trace.jsonl"))
        .expect("trace written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("trace lines are JSON"))
        .collect()
}

/// A generated GERD dataset of `count` test parts (seed `seed`, small views) in `dir/gerd`.
pub fn generated_test_split(dir: &Path, count: usize, seed: u64) -> PathBuf {
    let data = dir.join("gerd");
    let out = std::process::Command::new(binary())
        .args(["gerd", "generate", "--count", &count.to_string(), "--seed", &seed.to_string()])
        .args(["--split", &format!("0,0,{count}"), "--view-size", "160", "--out"])
        .arg(&data)
        .output()
        .expect("runs");
    assert!(out.status.success(), "gerd generate: {}", String::from_utf8_lossy(&out.stderr));
    data
}

/// Every `href` and `src` of a page (besides embedded data and anchors) names a file in
/// `dir`, the page's folder.
pub fn assert_links_resolve(dir: &Path, html: &str) {
    for attribute in ["href=\"", "src=\""] {
        for (i, _) in html.match_indices(attribute) {
            let rest = &html[i + attribute.len()..];
            let target = &rest[..rest.find('"').expect("closing quote")];
            if target.starts_with("data:") || target.starts_with('#') {
                continue;
            }
            assert!(dir.join(target).is_file(), "{} links to {target}, which is missing", dir.display());
        }
    }
}

/// Render a program's target image into `dir`.
pub fn target_image(program: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("target.png");
    let status = command()
        .args(["render"])
        .arg(program)
        .args(["--view", "target", "--out"])
        .arg(&out)
        .output()
        .expect("render runs");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    out
}

pub fn reconstruct(image: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    command().arg("reconstruct").arg(image).arg("--out").arg(out).args(extra).output().expect("runs")
}

/// IoU of a prediction against a ground truth under a protocol, from `vision2cad eval --json`.
pub fn iou(pred: &Path, gt: &Path, protocol: &str) -> Option<f64> {
    let json = pred.with_extension(format!("{protocol}.eval.json"));
    let out = command()
        .arg("eval")
        .arg("--pred")
        .arg(pred)
        .arg("--gt")
        .arg(gt)
        .args(["--protocol", protocol, "--json"])
        .arg(&json)
        .output()
        .expect("eval runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json");
    report["samples"][0]["iou"].as_f64()
}

pub fn outcome(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("outcome.json")).expect("outcome")).expect("json")
}

/// A scripted backend's answers, one JSON value per line.
pub fn write_script(path: &Path, lines: &[serde_json::Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("script");
}

/// The scripted model's Stage 1 for the bundled box: a block extruded 10 from sketch S1 on XY.
pub fn box_plan() -> serde_json::Value {
    serde_json::json!({"stage": "stage1", "answer": {"reason": "base block", "sketches": [{"name": "S1", "on": "XY"}],
        "command": {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 10}}}})
}

/// ... and its Stage 2: the block's rectangle, 0.3 x 0.2 view units.
pub fn box_sketch() -> serde_json::Value {
    serde_json::json!({"stage": "stage2", "answer": {"primitives": [
        {"type": "line", "start": [0.4, 0.6], "end": [0.7, 0.6]}, {"type": "line", "start": [0.7, 0.6], "end": [0.7, 0.4]},
        {"type": "line", "start": [0.7, 0.4], "end": [0.4, 0.4]}, {"type": "line", "start": [0.4, 0.4], "end": [0.4, 0.6]}]}})
}

/// Test100's folder and its jsonl's text; `None`, with a message, where ../shared/data or
/// its test100 is absent.
pub fn test100() -> Option<(PathBuf, String)> {
    let Some(data) = data_dir() else {
        println!("skipped: no test data (set VISION2CAD_DATA or provide ../shared/data)");
        return None;
    };
    let root = data.join("cadcoder-test100");
    let Ok(text) = std::fs::read_to_string(root.join("cadquery_test_data_subset100.jsonl")) else {
        println!("skipped: {} has no test100 jsonl", root.display());
        return None;
    };
    Some((root, text))
}

/// Test100's part `id` imported with `gerd import cadcoder` into `dir` (its part folder:
/// model.step, target.png, part.json); `None` as [`test100`].
pub fn test100_part(id: &str, dir: &Path) -> Option<PathBuf> {
    let (test100, rows) = test100()?;
    let row = rows.lines().find(|l| l.contains(&format!("\"{id}_0.png\""))).expect("the part's row");
    let jsonl = dir.join(format!("{id}.jsonl"));
    std::fs::write(&jsonl, format!("{row}\n")).expect("write jsonl");
    let dataset = dir.join("dataset");
    let o = command()
        .args(["gerd", "import", "cadcoder", "--jsonl"])
        .arg(&jsonl)
        .arg("--steps")
        .arg(test100.join("steps"))
        .arg("--images")
        .arg(test100.join("images"))
        .arg("--out")
        .arg(&dataset)
        .output()
        .expect("vision2cad runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(dataset.join("parts").join(id))
}
