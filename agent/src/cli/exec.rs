//! `vision2cad exec` and the shared ways of opening models and writing outputs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use freecad_bridge::{Program, Session, parse_program};

use crate::WorkerArgs;

#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The program (JSON, see `vision2cad schema`).
    pub program: PathBuf,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Multiply every extrusion depth by this factor before writing (1.1 for the edit test).
    #[arg(long)]
    pub scale_extrusions: Option<f64>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

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

pub fn run(args: &ExecArgs) -> Result<ExitCode> {
    if let Some(f) = args.scale_extrusions {
        anyhow::ensure!(f.is_finite() && f > 0.0, "--scale-extrusions must be a positive number, got {f}");
    }
    let program = read_program(&args.program)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create output directory {}", args.out.display()))?;
    let mut session = args.worker.session()?;
    let mut failure = session.execute_program(&program).err().map(anyhow::Error::from);
    if failure.is_none()
        && let Some(factor) = args.scale_extrusions
        && let Err(e) = session.scale_extrusions(factor)
    {
        failure = Some(
            anyhow::Error::from(e)
                .context(format!("scaling extrusions by {factor} failed; writing the unscaled model")),
        );
    }
    write_outputs(&mut session, &args.out)?;
    let state = session.state();
    eprintln!(
        "wrote {}: {} faces, {} edges, volume {:.6}, {}",
        args.out.display(),
        state.faces.len(),
        state.edges.len(),
        state.volume,
        if state.valid { "valid" } else { "not a valid solid" }
    );
    match failure {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => bail!(
            e.context(format!("{} failed (the document up to the last good step was written)", args.program.display()))
        ),
    }
}

/// model.FCStd, model.step (when there is a solid) and state.json, written atomically (the
/// same writer `reconstruct` uses).
pub fn write_outputs(session: &mut Session, dir: &Path) -> Result<()> {
    Ok(vision2cad::report::write_model(session, dir)?)
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(vision2cad::report::write_atomic(path, bytes)?)
}
