//! `vision2cad bench faults`: what a lost worker costs a batch. The example programs run on
//! a one-worker pool twice, undisturbed and with workers killed (SIGKILL) at evenly spread
//! requests (`VISION2CAD_FAULT_KILL_AT`); the results must match, and the extra time per
//! fault is reported against a worker's start and an item's mean time, measured in the
//! same run. Then the same for `eval` (the examples against themselves, static and edit10):
//! the reports through faults must equal the undisturbed ones to the bit.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use freecad_bridge::{Program, WorkerPool, WorkerProcess};
use serde_json::json;

use crate::cli::WorkerArgs;
use crate::cli::commands::bench::{median, program_paths};
use crate::cli::files::read_program;

#[derive(Debug, clap::Args)]
pub struct FaultBench {
    /// Directory of example programs (*.json).
    #[arg(long, default_value = "assets/programs")]
    pub programs: PathBuf,
    /// Programs in the batch (the examples, cycled).
    #[arg(long, default_value_t = 60)]
    pub batch: usize,
    /// Workers killed during the faulty run.
    #[arg(long, default_value_t = 6)]
    pub faults: usize,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &FaultBench) -> Result<ExitCode> {
    anyhow::ensure!(args.faults >= 1, "--faults must be at least 1");
    let programs: Vec<Program> =
        program_paths(&args.programs)?.iter().map(|p| read_program(p)).collect::<Result<_>>()?;
    let batch: Vec<&Program> = programs.iter().cycle().take(args.batch.max(1)).collect();
    let scratch = tempfile::tempdir().context("cannot create a scratch folder")?;

    // One batch: seconds, every item's final volume, and the requests the workers served.
    let run_batch = |name: &str, at: &[u64]| -> Result<(f64, Vec<f64>, u64)> {
        let counter = scratch.path().join(format!("{name}.count"));
        let pool = faulty_pool(args, &counter, at)?;
        let started = Instant::now();
        let results =
            pool.map(&batch, |s, p| s.execute_program(p).map_err(|e| e.error).map(|()| s.state().volume), |_| {});
        let seconds = started.elapsed().as_secs_f64();
        let volumes = results.into_iter().collect::<Result<Vec<f64>, _>>().context("an item failed")?;
        Ok((seconds, volumes, served(&counter)))
    };
    // Warm the file cache, then the undisturbed reference, then the faults spread evenly.
    run_batch("warm", &[])?;
    let (clean_s, clean_volumes, requests) = run_batch("clean", &[])?;
    let at = spread(args.faults, requests);
    let (faulty_s, faulty_volumes, faulty_requests) = run_batch("faulty", &at)?;
    anyhow::ensure!(faulty_volumes == clean_volumes, "the batch through faults gave other results");

    // What a replacement is made of: a worker's start, measured on its own.
    let config = args.worker.config()?;
    let starts: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            WorkerProcess::spawn(&config).map(|_| started.elapsed().as_secs_f64())
        })
        .collect::<Result<_, _>>()?;
    let start_s = median(starts);
    let item_s = clean_s / batch.len() as f64;
    let per_fault = (faulty_s - clean_s) / args.faults as f64;
    println!("batch of {} programs on one worker, {requests} requests", batch.len());
    println!("undisturbed            {clean_s:>8.2} s");
    println!("{} workers killed       {faulty_s:>8.2} s  ({} requests served)", args.faults, faulty_requests);
    println!("cost per fault         {per_fault:>8.3} s");
    println!(
        "  = {:.2}x a worker's start ({start_s:.3} s), {:.2}x an item's mean time ({item_s:.3} s)",
        per_fault / start_s,
        per_fault / item_s
    );
    println!("results identical to the undisturbed run: yes");

    // Evaluation: every example against itself under both protocols, undisturbed and with
    // workers killed; the reports must be equal to the bit.
    let pairs: Vec<eval::Pair> = program_paths(&args.programs)?
        .into_iter()
        .map(|p| eval::Pair {
            id: p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            pred: Some(p.clone()),
            gt: p,
        })
        .collect();
    let run_eval = |name: &str, at: &[u64]| -> Result<(f64, Vec<eval::Report>, u64)> {
        let counter = scratch.path().join(format!("eval-{name}.count"));
        let pool = faulty_pool(args, &counter, at)?;
        let started = Instant::now();
        let reports = [eval::Protocol::Static, eval::Protocol::Edit10]
            .into_iter()
            .map(|protocol| {
                let options = eval::EvalOptions { protocol, ..eval::EvalOptions::default() };
                eval::evaluate(&pool, &pairs, &options, || {})
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((started.elapsed().as_secs_f64(), reports, served(&counter)))
    };
    let (eval_clean_s, clean_reports, eval_requests) = run_eval("clean", &[])?;
    let eval_at = spread(args.faults, eval_requests);
    let (eval_faulty_s, faulty_reports, _) = run_eval("faulty", &eval_at)?;
    anyhow::ensure!(
        faulty_reports == clean_reports,
        "the evaluation through faults gave another report than the undisturbed one"
    );
    let eval_per_fault = (eval_faulty_s - eval_clean_s) / args.faults as f64;
    println!("eval of {} examples against themselves (static and edit10), {eval_requests} requests", pairs.len());
    println!("undisturbed            {eval_clean_s:>8.2} s");
    println!("{} workers killed       {eval_faulty_s:>8.2} s", args.faults);
    println!("cost per fault         {eval_per_fault:>8.3} s  ({:.2}x a worker's start)", eval_per_fault / start_s);
    println!("reports identical to the undisturbed run, to the bit: yes");
    if let Some(path) = &args.json {
        let report = json!({
            "batch": batch.len(), "requests": requests, "faults": args.faults, "fault_at": at,
            "clean_seconds": clean_s, "faulty_seconds": faulty_s, "faulty_requests": faulty_requests,
            "seconds_per_fault": per_fault, "worker_start_seconds": start_s, "item_seconds": item_s,
            "eval_samples": pairs.len(), "eval_requests": eval_requests, "eval_fault_at": eval_at,
            "eval_clean_seconds": eval_clean_s, "eval_faulty_seconds": eval_faulty_s,
            "eval_seconds_per_fault": eval_per_fault,
        });
        crate::cli::files::write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A one-worker pool whose workers die (SIGKILL) at the `at`-th requests, counted in `counter`.
fn faulty_pool(args: &FaultBench, counter: &Path, at: &[u64]) -> Result<WorkerPool> {
    let plan = at.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let config =
        args.worker.config()?.with_env(crate::cli::env::FAULT_KILL_AT, format!("{}:{plan}", counter.display()));
    Ok(WorkerPool::new(config, 1))
}

/// The requests the workers served, from the fault counter.
fn served(counter: &Path) -> u64 {
    std::fs::read_to_string(counter).unwrap_or_default().trim().parse().unwrap_or(0)
}

/// `faults` request numbers spread evenly over `requests`.
fn spread(faults: usize, requests: u64) -> Vec<u64> {
    (0..faults).map(|i| ((i as f64 + 0.5) * requests as f64 / faults as f64).ceil() as u64).collect()
}
