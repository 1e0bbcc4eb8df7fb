//! `vision2cad bench`: latency of single commands and throughput of batches, measured on
//! the example programs. Figures go to stdout as a table and, with `--json`, to a file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use freecad_bridge::{Program, WorkerPool};
use serde_json::json;

pub mod eval;
pub mod eval_vs_python;
pub mod faults;
pub mod loop_timing;
pub mod rag;
pub mod vlm;

use crate::cli::WorkerArgs;
use crate::cli::files::read_program;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Debug, clap::Subcommand)]
pub enum BenchWhat {
    /// The FreeCAD worker: per-command latency and batch throughput with N workers.
    Worker(WorkerBench),
    /// The views: a tagged view of a finely tessellated part, single-threaded.
    Render(RenderBench),
    /// Evaluation: time per pair and whole runs on STEP files scored against themselves.
    Eval(eval::BenchEvalArgs),
    /// The loop: the harness's own time per step (kernel, rendering, prompts) with the oracle.
    Loop(loop_timing::LoopBench),
    /// The chat client: its own time per call against a local mock server.
    Vlm(vlm::VlmBench),
    /// Retrieval: index build, query latency, recall, memory and quality on a GERD dataset.
    Rag(rag::RagBench),
    /// Faults: what a lost worker costs a batch (killed workers against an undisturbed run).
    Faults(faults::FaultBench),
}

pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    match &args.what {
        BenchWhat::Worker(w) => run_worker(w),
        BenchWhat::Render(r) => run_render(r),
        BenchWhat::Eval(e) => eval::run(e),
        BenchWhat::Loop(l) => loop_timing::run(l),
        BenchWhat::Vlm(v) => vlm::run(v),
        BenchWhat::Rag(r) => rag::run(r),
        BenchWhat::Faults(f) => faults::run(f),
    }
}

#[derive(Debug, clap::Args)]
pub struct WorkerBench {
    /// Directory of example programs (*.json).
    #[arg(long, default_value = "assets/programs")]
    pub programs: PathBuf,
    /// How often each program is executed for the latency figures.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Programs in the throughput batch (the examples, cycled).
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Worker counts to compare for throughput.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub workers: Vec<usize>,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

/// The program files (*.json) of a folder, sorted; none is an error.
pub fn program_paths(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    anyhow::ensure!(!paths.is_empty(), "no programs (*.json) in {}", dir.display());
    Ok(paths)
}

fn run_worker(args: &WorkerBench) -> Result<ExitCode> {
    let paths = program_paths(&args.programs)?;
    let programs: Vec<Program> = paths.iter().map(|p| read_program(p)).collect::<Result<_>>()?;

    // Latency: each command timed on its own, documents reset between repeats.
    let mut session = args.worker.session()?;
    let mut per_op: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for _ in 0..args.repeat.max(1) {
        for (program, path) in programs.iter().zip(&paths) {
            session.reset()?;
            for command in &program.commands {
                let started = Instant::now();
                session.execute(command).with_context(|| format!("{} failed", path.display()))?;
                per_op.entry(command.op()).or_default().push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    drop(session);
    println!("per-command latency over {} programs x {} repeats", programs.len(), args.repeat.max(1));
    println!("{:<10} {:>8} {:>12}", "op", "calls", "median ms");
    let mut latency = serde_json::Map::new();
    for (op, times) in &per_op {
        let m = median(times.clone());
        println!("{op:<10} {:>8} {m:>12.2}", times.len());
        latency.insert(op.to_string(), json!({"calls": times.len(), "median_ms": m}));
    }

    // Throughput: a batch of whole programs on a pool.
    let batch: Vec<&Program> = programs.iter().cycle().take(args.batch).collect();
    println!("\nbatch of {} programs", batch.len());
    println!("{:<8} {:>10} {:>14} {:>9}", "workers", "seconds", "programs/s", "speed-up");
    let mut throughput = Vec::new();
    let mut baseline = None;
    for &w in &args.workers {
        let pool = WorkerPool::new(args.worker.config()?, w);
        let started = Instant::now();
        let results = pool.map(&batch, |s, p| s.execute_program(p).map_err(|e| e.error), |_| {});
        let seconds = started.elapsed().as_secs_f64();
        let failed = results.iter().filter(|r| r.is_err()).count();
        anyhow::ensure!(failed == 0, "{failed} programs failed in the batch with {w} workers");
        let rate = batch.len() as f64 / seconds;
        let speedup = rate / *baseline.get_or_insert(rate);
        println!("{:<8} {seconds:>10.2} {rate:>14.2} {speedup:>8.2}x", pool.workers());
        throughput.push(json!({"workers": pool.workers(), "seconds": seconds, "programs_per_second": rate}));
    }
    if let Some(path) = &args.json {
        let report = json!({"latency": latency, "throughput": throughput, "programs": paths.len()});
        crate::cli::files::write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub struct RenderBench {
    /// The part (program .json, .step or .FCStd).
    #[arg(long, default_value = "assets/programs/flange_revolve.json")]
    pub model: PathBuf,
    /// Tessellate finer until the part has at least this many triangles.
    #[arg(long, default_value_t = 20_000)]
    pub triangles: usize,
    #[arg(long, default_value_t = 20)]
    pub repeat: usize,
    #[arg(long, default_value_t = 500)]
    pub size: u32,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

fn time_ms<T>(repeat: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        last = Some(f());
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    (median(times), last.expect("ran at least once"))
}

fn run_render(args: &RenderBench) -> Result<ExitCode> {
    let mut session = args.worker.session()?;
    crate::cli::files::open_model(&mut session, &args.model)?;
    let diagonal = session.state().bbox.as_ref().map_or(1.0, |b| b.diagonal());
    let mut deflection = diagonal * 1e-3;
    let mut tessellation = session.tessellate(deflection, 0.2)?;
    for _ in 0..16 {
        if tessellation.mesh.triangle_count() >= args.triangles {
            break;
        }
        deflection /= 1.6;
        tessellation = session.tessellate(deflection, 0.2)?;
    }
    let (tessellate_ms, _) = time_ms(args.repeat.min(5), || session.tessellate(deflection, 0.2));
    let state = session.state().clone();
    let opts = views::Options { size: args.size, ..views::Options::default() };
    let (scene_ms, scene) = time_ms(args.repeat, || views::Scene::new(&tessellation, &state));
    let (target_ms, _) = time_ms(args.repeat, || views::target(&scene, &opts));
    let (tagged_ms, tagged) = time_ms(args.repeat, || views::tagged(&scene, &state, &opts));
    let (png_ms, _) = time_ms(args.repeat, || {
        let mut bytes = std::io::Cursor::new(Vec::new());
        tagged.image.write_to(&mut bytes, image::ImageFormat::Png).map(|()| bytes.into_inner().len())
    });
    println!(
        "{}: {} triangles, {} edges, {}x{} px, median of {} runs, one thread",
        args.model.display(),
        tessellation.mesh.triangle_count(),
        state.edges.len(),
        args.size,
        args.size,
        args.repeat.max(1)
    );
    println!("{:<34} {:>10} {:>16}", "step", "median ms", "x tagged view");
    for (name, ms) in [
        ("tagged view (render + labels)", tagged_ms),
        ("target view", target_ms),
        ("scene from tessellation", scene_ms),
        ("reference: PNG encode of the view", png_ms),
        ("reference: FreeCAD tessellation", tessellate_ms),
    ] {
        println!("{name:<34} {ms:>10.2} {:>15.2}x", ms / tagged_ms);
    }
    Ok(ExitCode::SUCCESS)
}
