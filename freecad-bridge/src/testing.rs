//! Helpers for integration tests that drive a real FreeCAD, shared by the workspace's
//! crates: workers from the `v2c-worker` binary that `cargo test --workspace` builds beside
//! the test executables, the repository's example programs and the public test data.
//!
//! ```no_run
//! let mut session = freecad_bridge::testing::session();
//! session.execute_program(&freecad_bridge::testing::example("plate_counterbore")).unwrap();
//! ```
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Program, Session, WorkerConfig, parse_program};

/// The `v2c-worker` binary of this build: beside the test executable's folder
/// (`target/debug/deps/..`), or beside the running program.
pub fn worker_program() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let name = format!("v2c-worker{}", std::env::consts::EXE_SUFFIX);
    let candidates: Vec<PathBuf> = exe.ancestors().skip(1).take(2).map(|dir| dir.join(&name)).collect();
    candidates.iter().find(|p| p.is_file()).cloned().unwrap_or_else(|| {
        panic!(
            "no FreeCAD worker binary at {}: build it with `cargo build -p freecad-bridge --bin v2c-worker` (cargo test --workspace does)",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" or ")
        )
    })
}

/// Workers of [`worker_program`], with a generous call limit for loaded test machines.
pub fn config() -> WorkerConfig {
    WorkerConfig::new(worker_program()).with_call_timeout(Duration::from_secs(120))
}

/// A session on a fresh worker.
pub fn session() -> Session {
    Session::new(config()).expect("FreeCAD worker starts (run scripts/setup.sh first)")
}

/// The workspace root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// `assets/programs/NAME.json`.
pub fn example_path(name: &str) -> PathBuf {
    repo_root().join("assets/programs").join(format!("{name}.json"))
}

/// An example program, parsed.
pub fn example(name: &str) -> Program {
    let path = example_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_program(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A program written in a test.
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
