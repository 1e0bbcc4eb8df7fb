//! The command-line front end. `Cli` and its subcommands are defined here, options shared
//! by several commands ([`WorkerArgs`]) too; each subcommand has one file under
//! [`commands`] that parses its flags, calls the libraries and prints. What a program using
//! the crates needs lives in the libraries: the loop ([`vision2cad::Reconstruction`]), the
//! backends ([`vision2cad::vlm::BackendSpec`]), batch results ([`vision2cad::batch`]).
//! Helpers: [`env`] (every environment variable, in one place), [`settings`] (flags, TOML
//! and environment merged into one reconstruction's settings), [`files`], [`progress`],
//! [`shard`], [`curves`].

pub mod commands;
pub mod curves;
pub mod env;
pub mod files;
pub mod progress;
pub mod settings;
pub mod shard;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use freecad_bridge::{Session, WorkerConfig};

use commands::{bench, compare, eval, exec, fit, floor, gerd, merge, reconstruct, render, run, sim_calibrate};

#[derive(Debug, Parser)]
#[command(name = "vision2cad", version, about, after_help = env::HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Reconstruct a part from one image with the three-stage loop.
    ///
    /// Writes DIR/model.FCStd, model.step, model.glb, program.json (the accepted commands, runnable
    /// with `exec` and `eval`), trace.jsonl, views/ and report.html. The document reached is
    /// written however the loop ends; exit 1 when it stopped on a failure.
    Reconstruct(Box<reconstruct::ReconstructArgs>),
    /// Reconstruct every part of a GERD split, then evaluate both protocols.
    ///
    /// Writes RUNDIR/parts/ID/ (each part's reconstruction, with item.json), results.md,
    /// results.json and index.html. Parts run in child processes, --jobs at once, each with
    /// a time limit; failures are recorded, never fatal; a run resumes where it stopped.
    /// Options after `--` go to every `reconstruct`.
    Run(Box<run::RunArgs>),
    /// Compare two runs: metrics with their deltas, and the parts whose IoU moved most.
    Compare(compare::CompareArgs),
    /// Merge the outputs of shards (`--shard-index I --shard-count N`) into one.
    ///
    /// Runs and sweeps (a run's --out holding shard-I-of-N/ folders), evaluation reports
    /// (R.shard-I-of-N.json), GERD datasets (from `gerd generate`) and exports
    /// (OUT.shard-I-of-N.jsonl). The result is what one unsharded process writes.
    Merge(merge::MergeArgs),
    /// The simulated VLM's rates, counted from runs made with `--shadow-gt`.
    ///
    /// Reads trace.jsonl files (or folders holding them), where a shadow oracle recorded how
    /// the model's answers differ from the ideal ones, and prints each rate with the counts
    /// behind it and a `[sim]` section to paste into a config.
    SimCalibrate(sim_calibrate::CalibrateArgs),
    /// What a reader exact to within a fraction of a target pixel would score.
    ///
    /// Every length of a run's programs (an oracle run's are exact) is moved by uniform noise
    /// of at most PX target pixels, converted with each part's framing from its trace, and
    /// the moved programs are scored against the run's ground truths (static protocol).
    PixelFloor(floor::FloorArgs),
    /// Execute a program of the command language into a FreeCAD document.
    ///
    /// Writes DIR/model.FCStd (opens in FreeCAD), DIR/model.step, DIR/model.glb (glTF, for
    /// 3D viewers) and DIR/state.json (the final entity table). If a command fails, the document up to the last good command is
    /// still written and the exit code is 1.
    Exec(exec::ExecArgs),
    /// Fit a finished program's numbers to a target image (the loop's fit at END).
    ///
    /// The program is built, S_t is found from its model's outline and registered on the
    /// target, and every feature is fitted in program order, keeping every tie. Writes
    /// DIR/program.json (fitted), the model files as `exec` does, and DIR/fit.json.
    Fit(Box<fit::FitArgs>),
    /// Print the entity table of a model (STEP, FCStd or program JSON) as JSON.
    Inspect {
        /// A .step/.stp, .FCStd or program .json file.
        model: PathBuf,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// GERD datasets: generate, validate, export (and import, see its help).
    Gerd(gerd::GerdArgs),
    /// Render what the VLM sees: target, tagged, sketch-plane or preview views (PNG).
    Render(Box<render::RenderArgs>),
    /// Print the JSON Schema of programs.
    Schema,
    /// Measure: the FreeCAD worker (latency, throughput) or the views (render time).
    Bench(bench::BenchArgs),
    /// Score predicted models against ground truths: CR, mIoU, CD, HD, HD95.
    ///
    /// PRED and GT are model files (.step, .stp, .FCStd, program .json) or directories
    /// whose files pair up by stem. A broken prediction, or a ground truth with no
    /// prediction of its stem, counts as not compiled (listed with its reason); a path that
    /// names nothing is an error. A sample the evaluator itself cannot score (a worker lost
    /// on every attempt) is listed apart, left out of CR, and makes the exit status 1.
    /// Conventions: docs/evaluation.md.
    Eval(Box<eval::EvalArgs>),
    /// Run a FreeCAD worker on stdin/stdout (started by vision2cad itself).
    #[command(hide = true)]
    Worker,
    /// Run one model-written script in the sandbox (started by vision2cad itself).
    #[command(hide = true)]
    Codebox,
}

/// Options shared by every command that starts FreeCAD workers.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// Seconds one FreeCAD call may take before its worker is stopped and replaced.
    #[arg(long, env = env::TIMEOUT, default_value_t = 120.0)]
    pub timeout: f64,
}

impl WorkerArgs {
    pub fn config(&self) -> Result<WorkerConfig> {
        anyhow::ensure!(
            self.timeout.is_finite() && self.timeout > 0.0,
            "--timeout must be a positive number of seconds"
        );
        Ok(WorkerConfig::current_exe()
            .context("cannot locate the vision2cad executable to start workers")?
            .with_call_timeout(Duration::from_secs_f64(self.timeout)))
    }

    pub fn session(&self) -> Result<Session> {
        Session::new(self.config()?).context("cannot start FreeCAD")
    }
}

/// Run the command the user asked for (`worker` and `codebox` are handled before logging
/// starts, in `main`).
/// What to tell a user who pressed Ctrl-C: how to continue where the command stopped.
pub fn interrupt_hint(cli: &Cli) -> Option<String> {
    match &cli.command {
        Cmd::Reconstruct(args) if args.baseline.is_none() && !args.check_backend => {
            let dir = args.resume.as_ref().or(args.out.as_ref())?;
            Some(format!(
                "to continue, run the same command with --resume {} (instead of --out); the accepted steps are kept",
                dir.display()
            ))
        }
        Cmd::Run(args) => Some(format!(
            "to continue, run the same command again: the parts done in {} are kept and the others run",
            args.out.display()
        )),
        _ => None,
    }
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Cmd::Reconstruct(args) => reconstruct::run(&args),
        Cmd::Run(args) => run::run(&args),
        Cmd::Compare(args) => compare::run(&args),
        Cmd::Merge(args) => merge::run(&args),
        Cmd::SimCalibrate(args) => sim_calibrate::run(&args),
        Cmd::PixelFloor(args) => floor::run(&args),
        Cmd::Exec(args) => exec::run(&args),
        Cmd::Fit(args) => fit::run(&args),
        Cmd::Inspect { model, worker } => {
            let mut session = worker.session()?;
            files::open_model(&mut session, &model)?;
            println!("{}", serde_json::to_string_pretty(session.state())?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Render(args) => render::run(&args),
        Cmd::Gerd(args) => gerd::run(&args),
        Cmd::Schema => {
            println!("{}", serde_json::to_string_pretty(&freecad_bridge::program_schema())?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench(args) => bench::run(&args),
        Cmd::Eval(args) => eval::run(&args),
        Cmd::Worker | Cmd::Codebox => unreachable!("handled before logging starts"),
    }
}
