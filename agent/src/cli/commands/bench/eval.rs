//! `vision2cad bench eval`: how fast evaluation is, on a directory of STEP files scored
//! against themselves.
//!
//! 1. Per pair, at each `--points` count: the whole pipeline (kernel work and metrics) on
//!    the first `--per-pair` files with one worker.
//! 2. The metric core alone (area sampling of both meshes, two k-d tree passes, CD/HD/HD95)
//!    on mesh pairs (file i against file i+1), which is what `scripts/reference_metrics.py`
//!    computes in Python on the same meshes (`--dump-meshes`).
//! 3. The whole directory with each worker count in `--workers`; the reports must be equal.
//!
//! With `--against-python --pred DIR --gt DIR`, instead: `eval` against a plain Python
//! pipeline on the same pairs (`eval_vs_python.rs`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use eval::{EvalOptions, Mesh, Pair};
use freecad_bridge::WorkerPool;
use serde_json::json;

use crate::cli::WorkerArgs;
use crate::cli::files::write_atomic;

#[derive(Debug, clap::Args)]
pub struct BenchEvalArgs {
    /// Directory of STEP files (each is scored against itself).
    #[arg(long, required_unless_present = "against_python")]
    pub steps: Option<PathBuf>,
    /// Time `eval` against the plain Python pipeline (`--script`) on the STEP pairs of
    /// `--pred` and `--gt`, side by side in one run, per core and per stage.
    #[arg(long, requires_all = ["pred", "gt"], conflicts_with = "steps")]
    pub against_python: bool,
    /// Predictions (with --against-python): STEP files paired with --gt by stem.
    #[arg(long)]
    pub pred: Option<PathBuf>,
    /// Ground truths (with --against-python).
    #[arg(long)]
    pub gt: Option<PathBuf>,
    /// The Python reference pipeline (with --against-python).
    #[arg(long, default_value = "scripts/eval_reference.py")]
    pub script: PathBuf,
    /// The interpreter that runs it (needs FreeCAD, numpy and scipy).
    #[arg(long, default_value_os_t = crate::cli::commands::bench::eval_vs_python::default_python())]
    pub python: PathBuf,
    /// Rounds (with --against-python): every variant runs this often, interleaved, and its
    /// fastest round counts.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Use at most this many files for the whole-run figure.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Files for the per-pair and metric-core figures.
    #[arg(long, default_value_t = 10)]
    pub per_pair: usize,
    /// Point counts for the per-pair and metric-core figures.
    #[arg(long, value_delimiter = ',', default_value = "8192,100000")]
    pub points: Vec<usize>,
    /// Worker counts for the whole-run figure (0 skips it).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub workers: Vec<usize>,
    /// Write the normalised meshes of the per-pair files here, for the Python reference.
    #[arg(long)]
    pub dump_meshes: Option<PathBuf>,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &BenchEvalArgs) -> Result<ExitCode> {
    let steps = match (&args.steps, &args.pred, &args.gt) {
        (_, Some(pred), Some(gt)) if args.against_python => {
            return crate::cli::commands::bench::eval_vs_python::run(args, pred, gt);
        }
        (Some(steps), _, _) => steps,
        _ => anyhow::bail!("give --steps DIR, or --against-python with --pred and --gt"),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(steps)
        .with_context(|| format!("cannot read {}", steps.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| matches!(eval::ModelKind::of(p), Some(eval::ModelKind::Step)))
        .collect();
    files.sort();
    files.truncate(args.limit);
    anyhow::ensure!(files.len() >= 2, "need at least two STEP files in {}", steps.display());
    let pairs: Vec<Pair> = files
        .iter()
        .map(|p| Pair {
            id: p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            pred: Some(p.clone()),
            gt: p.clone(),
        })
        .collect();
    let few = &pairs[..args.per_pair.clamp(2, pairs.len())];
    let rayon_threads = rayon_threads();
    println!("{} STEP files from {}; rayon threads {rayon_threads}", pairs.len(), steps.display());

    // 1. Whole pipeline per pair, one worker.
    println!("\nper pair, whole pipeline, 1 worker, {} pairs (self against self)", few.len());
    println!("{:>8} {:>12} {:>12} {:>12}", "points", "total ms", "kernel ms", "metrics ms");
    let pool = WorkerPool::new(args.worker.config()?, 1);
    let mut per_pair = Vec::new();
    let mut meshes: Vec<(String, Mesh)> = Vec::new();
    for &n in &args.points {
        let options = EvalOptions { points: n, ..Default::default() };
        // A first pass warms the worker up (FreeCAD import, file cache).
        let _ = eval::evaluate_detailed(&pool, &few[..1], &options, || {})?;
        let started = Instant::now();
        let detailed = eval::evaluate_detailed(&pool, few, &options, || {})?;
        let total = started.elapsed().as_secs_f64() / few.len() as f64 * 1e3;
        let kernel = detailed.iter().map(|d| d.stages.kernel()).sum::<f64>() / few.len() as f64 * 1e3;
        let metrics = detailed.iter().map(|d| d.stages.metrics).sum::<f64>() / few.len() as f64 * 1e3;
        println!("{n:>8} {total:>12.1} {kernel:>12.1} {metrics:>12.1}");
        per_pair.push(json!({"points": n, "total_ms": total, "kernel_ms": kernel, "metrics_ms": metrics}));
        if meshes.is_empty() {
            meshes =
                detailed.into_iter().zip(few).filter_map(|(d, p)| d.meshes.map(|(_, gt)| (p.id.clone(), gt))).collect();
        }
    }
    drop(pool);

    // 2. The metric core on mesh i against mesh i+1.
    println!("\nmetric core (sample both, two k-d tree passes, CD/HD/HD95), {} mesh pairs", meshes.len());
    println!("{:>8} {:>12} {:>14}", "points", "ms per pair", "CD mean x1000");
    let mut core = Vec::new();
    for &n in &args.points {
        let mut rows = Vec::new();
        let mut seconds = 0.0;
        for (i, (id, a)) in meshes.iter().enumerate() {
            let (_, b) = &meshes[(i + 1) % meshes.len()];
            let started = Instant::now();
            let seed = eval::seed_for(id);
            let p = eval::sample_surface(a, n, seed, eval::Role::Prediction).map_err(anyhow::Error::msg)?;
            let g = eval::sample_surface(b, n, seed, eval::Role::GroundTruth).map_err(anyhow::Error::msg)?;
            let d = eval::surface_distances(&p, &g);
            seconds += started.elapsed().as_secs_f64();
            rows.push(json!({"id": id, "cd": d.cd, "hd": d.hd, "hd95": d.hd95}));
        }
        let ms = seconds / meshes.len() as f64 * 1e3;
        let cd_mean = rows.iter().filter_map(|r| r["cd"].as_f64()).sum::<f64>() / rows.len() as f64;
        println!("{n:>8} {ms:>12.2} {cd_mean:>14.4}");
        core.push(json!({"points": n, "ms_per_pair": ms, "pairs": rows}));
    }
    if let Some(dir) = &args.dump_meshes {
        dump_meshes(dir, &meshes)?;
        write_atomic(&dir.join("rust_core.json"), serde_json::to_string_pretty(&core)?.as_bytes())?;
        println!("meshes written to {}", dir.display());
    }

    // 3. The whole directory per worker count.
    let mut whole = Vec::new();
    let mut reference: Option<String> = None;
    let workers: Vec<usize> = args.workers.iter().copied().filter(|&w| w > 0).collect();
    if !workers.is_empty() {
        println!("\nwhole run, {} pairs, N = {}", pairs.len(), eval::DEFAULT_POINTS);
        println!("{:>8} {:>10} {:>10} {:>8} {:>8} {:>12}", "workers", "seconds", "pairs/s", "CR", "mIoU", "CD mean");
    }
    for w in workers {
        let pool = WorkerPool::new(args.worker.config()?, w);
        let options = EvalOptions::default();
        let started = Instant::now();
        let report = eval::evaluate(&pool, &pairs, &options, || {})?;
        let seconds = started.elapsed().as_secs_f64();
        let fmt = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_else(|| "-".into());
        println!(
            "{w:>8} {seconds:>10.2} {:>10.2} {:>8.3} {:>8} {:>12}",
            pairs.len() as f64 / seconds,
            report.cr,
            fmt(report.miou),
            fmt(report.cd_mean)
        );
        let text = serde_json::to_string(&report)?;
        match &reference {
            None => reference = Some(text),
            Some(r) => anyhow::ensure!(*r == text, "the report with {w} workers differs from the first one"),
        }
        whole.push(json!({"workers": w, "seconds": seconds, "cr": report.cr, "miou": report.miou,
            "cd_mean": report.cd_mean, "iou_methods": report.iou_methods,
            "not_compiled": report.samples.iter().filter(|s| !s.compiled).map(|s| json!({"id": s.id, "reason": s.reason})).collect::<Vec<_>>()}));
    }
    if let Some(path) = &args.json {
        let figures = json!({"files": pairs.len(), "rayon_threads": rayon_threads, "per_pair": per_pair,
            "metric_core": core.iter().map(|c| json!({"points": c["points"], "ms_per_pair": c["ms_per_pair"]})).collect::<Vec<_>>(),
            "whole_run": whole});
        write_atomic(path, serde_json::to_string_pretty(&figures)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(freecad_bridge::default_workers)
}

/// `ID.bin`: u64 vertex count, u64 triangle count, f64 x y z per vertex, u32 i j k per
/// triangle, all little-endian.
fn dump_meshes(dir: &Path, meshes: &[(String, Mesh)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut order = Vec::new();
    for (id, mesh) in meshes {
        let mut bytes = Vec::with_capacity(16 + mesh.positions.len() * 24 + mesh.triangles.len() * 12);
        bytes.extend((mesh.positions.len() as u64).to_le_bytes());
        bytes.extend((mesh.triangles.len() as u64).to_le_bytes());
        for x in mesh.positions.iter().flatten() {
            bytes.extend(x.to_le_bytes());
        }
        for i in mesh.triangles.iter().flatten() {
            bytes.extend(i.to_le_bytes());
        }
        write_atomic(&dir.join(format!("{id}.bin")), &bytes)?;
        order.push(id.clone());
    }
    write_atomic(&dir.join("order.json"), serde_json::to_string(&order)?.as_bytes())
}
