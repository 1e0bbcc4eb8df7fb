//! The ways every command opens models and writes outputs.

use std::path::Path;

use anyhow::{Context, Result};
use freecad_bridge::{Program, Session, parse_program};

pub fn read_program(path: &Path) -> Result<Program> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read program {}", path.display()))?;
    parse_program(&text).map_err(|e| anyhow::anyhow!("{} is not a valid program: {e}", path.display()))
}

/// Load a STEP or FCStd file, or execute a program JSON, into the session.
pub fn open_model(session: &mut Session, path: &Path) -> Result<()> {
    let is_program = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_program {
        let program = read_program(path)?;
        session.execute_program(&program).with_context(|| format!("program {} failed", path.display()))?;
    } else {
        session.load(path)?;
    }
    Ok(())
}

/// model.FCStd, model.step and model.glb (when there is a solid) and state.json, written atomically (the
/// same writer `reconstruct` uses).
pub fn write_outputs(session: &mut Session, dir: &Path) -> Result<()> {
    Ok(vision2cad::report::write_model(session, dir)?)
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(vision2cad::report::write_atomic(path, bytes)?)
}
