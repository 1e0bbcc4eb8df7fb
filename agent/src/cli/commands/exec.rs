//! `vision2cad exec`: a program of the command language into a FreeCAD document.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::cli::WorkerArgs;
use crate::cli::files::{read_program, write_outputs};

#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The program (JSON, see `vision2cad schema`).
    pub program: PathBuf,
    /// Output directory (created if missing): model.FCStd, model.step, model.glb,
    /// state.json and solved_program.json (the program with each sketch as FreeCAD solved
    /// it, which replays to this model in any process).
    #[arg(long)]
    pub out: PathBuf,
    /// Multiply every extrusion depth by this factor before writing (1.1 for the edit test).
    #[arg(long)]
    pub scale_extrusions: Option<f64>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// The program as solved, beside the model in `--out` (up to the failing command, if one failed).
pub const SOLVED_PROGRAM: &str = "solved_program.json";

pub fn run(args: &ExecArgs) -> Result<ExitCode> {
    if let Some(f) = args.scale_extrusions {
        anyhow::ensure!(f.is_finite() && f > 0.0, "--scale-extrusions must be a positive number, got {f}");
    }
    let program = read_program(&args.program)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create output directory {}", args.out.display()))?;
    let mut session = args.worker.session()?;
    let (solved, result) = session.execute_program_solved(&program);
    let mut failure = result.err().map(anyhow::Error::from);
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
    // The program as FreeCAD solved it (before any --scale-extrusions): it replays to this
    // model in any process, where a rough drawing lands where each process's solver puts it.
    let mut text = serde_json::to_string_pretty(&solved)?;
    text.push('\n');
    crate::cli::files::write_atomic(&args.out.join(SOLVED_PROGRAM), text.as_bytes())?;
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
