//! `vision2cad`: one image of a mechanical part in, a parametric FreeCAD model out.
//!
//! This binary is the command-line face of the workspace crates; `vision2cad --help` lists
//! what it can do. Exit codes: 0 success, 1 failure, 2 usage error.

mod cli;

use cli::{bench, calibrate, compare_cmd, env, eval_cmd, exec, gerd_cmd, merge_cmd, reconstruct_cmd, render, run_cmd};

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use freecad_bridge::{Session, WorkerConfig};

#[derive(Debug, Parser)]
#[command(name = "vision2cad", version, about, after_help = env::HELP)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Reconstruct a part from one image with the three-stage loop.
    ///
    /// Writes DIR/model.FCStd, model.step, program.json (the accepted commands, runnable
    /// with `exec` and `eval`), trace.jsonl, views/ and report.html. The document reached is
    /// written however the loop ends; exit 1 when it stopped on a failure.
    Reconstruct(Box<reconstruct_cmd::ReconstructArgs>),
    /// Reconstruct every part of a GERD split, then evaluate both protocols.
    ///
    /// Writes RUNDIR/parts/ID/ (each part's reconstruction, with item.json), results.md,
    /// results.json and index.html. Parts run in child processes, --jobs at once, each with
    /// a time limit; failures are recorded, never fatal; a run resumes where it stopped.
    /// Options after `--` go to every `reconstruct`.
    Run(Box<run_cmd::RunArgs>),
    /// Compare two runs: metrics with their deltas, and the parts whose IoU moved most.
    Compare(compare_cmd::CompareArgs),
    /// Merge the outputs of shards (`--shard-index I --shard-count N`) into one.
    ///
    /// Runs and sweeps (a run's --out holding shard-I-of-N/ folders), evaluation reports
    /// (R.shard-I-of-N.json), GERD datasets (from `gerd generate`) and exports
    /// (OUT.shard-I-of-N.jsonl). The result is what one unsharded process writes.
    Merge(merge_cmd::MergeArgs),
    /// The simulated VLM's rates, counted from runs made with `--shadow-gt`.
    ///
    /// Reads trace.jsonl files (or folders holding them), where a shadow oracle recorded how
    /// the model's answers differ from the ideal ones, and prints each rate with the counts
    /// behind it and a `[sim]` section to paste into a config.
    SimCalibrate(calibrate::CalibrateArgs),
    /// Execute a program of the command language into a FreeCAD document.
    ///
    /// Writes DIR/model.FCStd (opens in FreeCAD), DIR/model.step and DIR/state.json (the
    /// final entity table). If a command fails, the document up to the last good command is
    /// still written and the exit code is 1.
    Exec(exec::ExecArgs),
    /// Print the entity table of a model (STEP, FCStd or program JSON) as JSON.
    Inspect {
        /// A .step/.stp, .FCStd or program .json file.
        model: PathBuf,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// GERD datasets: generate, validate, export (and import, see its help).
    Gerd(gerd_cmd::GerdArgs),
    /// Render what the VLM sees: target, tagged, sketch-plane or preview views (PNG).
    Render(Box<render::RenderArgs>),
    /// Print the JSON Schema of programs.
    Schema,
    /// Measure: the FreeCAD worker (latency, throughput) or the views (render time).
    Bench(bench::BenchArgs),
    /// Score predicted models against ground truths: CR, mIoU, CD, HD, HD95.
    ///
    /// PRED and GT are model files (.step, .stp, .FCStd, program .json) or directories
    /// whose files pair up by stem. A missing or broken prediction counts as not compiled;
    /// a missing ground truth is an error. Conventions: see the README's Evaluation section.
    Eval(Box<eval_cmd::EvalArgs>),
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Cmd::Worker) {
        return match freecad_bridge::worker_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vision2cad worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if matches!(cli.command, Cmd::Codebox) {
        return match freecad_bridge::codebox::codebox_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vision2cad codebox: {e}");
                ExitCode::FAILURE
            }
        };
    }
    init_logging();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Cmd::Reconstruct(args) => reconstruct_cmd::run(&args),
        Cmd::Run(args) => run_cmd::run(&args),
        Cmd::Compare(args) => compare_cmd::run(&args),
        Cmd::Merge(args) => merge_cmd::run(&args),
        Cmd::SimCalibrate(args) => calibrate::run(&args),
        Cmd::Exec(args) => exec::run(&args),
        Cmd::Inspect { model, worker } => {
            let mut session = worker.session()?;
            exec::open_model(&mut session, &model)?;
            println!("{}", serde_json::to_string_pretty(session.state())?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Render(args) => render::run(&args),
        Cmd::Gerd(args) => gerd_cmd::run(&args),
        Cmd::Schema => {
            println!("{}", serde_json::to_string_pretty(&freecad_bridge::program_schema())?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench(args) => bench::run(&args),
        Cmd::Eval(args) => eval_cmd::run(&args),
        Cmd::Worker | Cmd::Codebox => unreachable!("handled before logging starts"),
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env(env::LOG).unwrap_or_else(|_| EnvFilter::new("warn"));
    let color = std::env::var_os(env::NO_COLOR).is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(color).init();
}
