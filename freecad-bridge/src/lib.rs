//! # freecad-bridge
//!
//! Drives a real FreeCAD (0.20, Debian's `freecad-python3`) from Rust. FreeCAD runs in
//! worker processes that embed CPython with pyo3; the parent speaks typed JSON requests
//! ([`protocol`]) to them over pipes, with a timeout on every call. A [`Session`] owns one document: it
//! checks and lowers [`Command`]s of the command language, executes them as transactions
//! (a failing command leaves the document exactly as it was), keeps the log of what
//! succeeded, and rebuilds the document in a fresh worker when one crashes or hangs.
//! After every command it holds the [`ModelState`]: faces, edges and vertices with IDs
//! (`F3`, `E12`, `V5`) that later commands use to name geometry.
//!
//! ```no_run
//! use freecad_bridge::{Session, WorkerConfig, parse_program};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let program = parse_program(r#"{"commands": [
//!     {"op": "sketch", "name": "S1", "on": "XY", "primitives": [
//!         {"type": "circle", "center": [0, 0], "radius": 5}]},
//!     {"op": "extrude", "profile": "S1", "mode": "add",
//!      "extent": {"type": "one_side", "depth": 10}}
//! ]}"#)?;
//! // The binary that runs `freecad_bridge::worker_main()` for its `worker` subcommand.
//! let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
//! session.execute_program(&program)?;
//! println!("{} faces, volume {:.1}", session.state().faces.len(), session.state().volume);
//! session.scale_extrusions(1.1)?;
//! session.save(Some("model.FCStd".as_ref()), Some("model.step".as_ref()))?;
//! # Ok(())
//! # }
//! ```

pub mod codebox;
pub mod command;
pub mod crossing;
mod error;
pub mod geometry;
mod lower;
mod pool;
pub mod protocol;
mod session;
mod solved;
pub mod state;
pub mod testing;
mod worker;

pub use command::{Command, Program};
pub use error::{BridgeError, CallError};
pub use lower::{Invalid, lower};
pub use pool::{WorkerPool, default_workers};
pub use protocol::{RefusalKind, Request};
pub use session::{
    BooleanVolumes, Executed, KeptComparison, KeptSlot, MassProperties, Parameter, Preview, Renumbering, Session,
    Similarity, StepError, Tessellation, TriangleMesh,
};
pub use state::{BoundingBox, EntityMatch, ModelState};
pub use worker::{FAULT_ENV, WorkerConfig, WorkerProcess, worker_main};

/// Parse a program, naming the JSON path of the first problem
/// (e.g. `commands[2].extent: missing field 'depth'`).
pub fn parse_program(text: &str) -> Result<Program, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() { inner.to_string() } else { format!("{path}: {inner}") }
    })
}

/// The JSON Schema of programs (`assets/schema/program.schema.json` is this, pretty-printed).
pub fn program_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Program)).unwrap_or_default()
}
