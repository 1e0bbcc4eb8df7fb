//! Shared helpers for tests that drive a real FreeCAD through the vision2cad binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use freecad_bridge::{Program, Session, WorkerConfig, parse_program};

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_vision2cad")
}

pub fn config() -> WorkerConfig {
    WorkerConfig::new(binary()).with_call_timeout(Duration::from_secs(120))
}

pub fn session() -> Session {
    Session::new(config()).expect("FreeCAD worker starts (run scripts/setup.sh first)")
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

pub fn example_path(name: &str) -> PathBuf {
    repo_root().join("assets/programs").join(format!("{name}.json"))
}

pub fn example(name: &str) -> Program {
    let path = example_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_program(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn program(json: &str) -> Program {
    parse_program(json).unwrap_or_else(|e| panic!("test program does not parse: {e}"))
}

/// Relative closeness for volumes computed by the kernel.
pub fn assert_close(actual: f64, expected: f64, what: &str) {
    let tolerance = 1e-7 * expected.abs().max(1.0);
    assert!((actual - expected).abs() <= tolerance, "{what}: got {actual}, expected {expected}");
}

/// The public test data (`VISION2CAD_DATA`, default `../shared/data`), if present.
pub fn data_dir() -> Option<PathBuf> {
    let dir =
        std::env::var_os("VISION2CAD_DATA").map(PathBuf::from).unwrap_or_else(|| repo_root().join("../shared/data"));
    dir.is_dir().then_some(dir)
}

/// Every file below `dir`, at any depth.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for p in std::fs::read_dir(&d).expect("read dir").map(|e| e.expect("entry").path()) {
            if p.is_dir() { stack.push(p) } else { out.push(p) }
        }
    }
    out
}

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
