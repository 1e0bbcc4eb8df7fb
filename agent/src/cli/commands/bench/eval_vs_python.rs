//! `vision2cad bench eval --against-python`: `eval` and a plain Python pipeline
//! (`scripts/eval_reference.py`: FreeCAD's Part for reading, normalising and booleans,
//! MeshPart at the same deflections, numpy sampling, scipy's cKDTree) on the same STEP
//! pairs, side by side in one run, with the time per stage of each.
//!
//! The comparison is per core: the script is one process on one core; `eval` with `w`
//! workers is charged `w` cores for its whole wall time. Each variant runs `--rounds`
//! times, interleaved, and its fastest round counts (the machine is shared).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use eval::{EvalOptions, ModelKind, Pair, Stages};
use freecad_bridge::WorkerPool;
use serde_json::{Value, json};

use crate::cli::commands::bench::eval::BenchEvalArgs;
use crate::cli::files::write_atomic;

/// One timed round of `eval` with some worker count.
struct RustRound {
    seconds: f64,
    stages: Stages,
    samples: Vec<eval::SampleResult>,
}

pub fn run(args: &BenchEvalArgs, pred: &Path, gt: &Path) -> Result<ExitCode> {
    let script = &args.script;
    ensure!(
        script.is_file(),
        "the Python reference {} does not exist (run from the repository root, or give --script)",
        script.display()
    );
    let pairs: Vec<Pair> = eval::pair_paths(pred, gt)?
        .into_iter()
        .filter(|p| {
            ModelKind::of(&p.gt) == Some(ModelKind::Step)
                && p.pred.as_deref().and_then(ModelKind::of) == Some(ModelKind::Step)
        })
        .collect();
    ensure!(
        !pairs.is_empty(),
        "no STEP file of {} has a STEP file of the same stem in {}",
        pred.display(),
        gt.display()
    );
    let points = *args.points.first().context("--points is empty")?;
    let workers: Vec<usize> = args.workers.iter().copied().filter(|&w| w > 0).collect();
    ensure!(!workers.is_empty(), "--workers names no worker count");

    // The script pairs files by stem in two folders: give it exactly these pairs.
    let scratch =
        tempfile::Builder::new().prefix("vision2cad-bench-").tempdir().context("cannot create a temporary folder")?;
    let (pred_dir, gt_dir) = (scratch.path().join("pred"), scratch.path().join("gt"));
    for dir in [&pred_dir, &gt_dir] {
        std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut linked = Vec::new();
    for pair in &pairs {
        let (Some(p), g) = (&pair.pred, &pair.gt) else { continue };
        let (lp, lg) = (pred_dir.join(format!("{}.step", pair.id)), gt_dir.join(format!("{}.step", pair.id)));
        std::os::unix::fs::symlink(std::path::absolute(p)?, &lp)?;
        std::os::unix::fs::symlink(std::path::absolute(g)?, &lg)?;
        linked.push(Pair { id: pair.id.clone(), pred: Some(lp), gt: lg });
    }
    let n = linked.len() as f64;
    println!(
        "{} STEP pairs from {} and {}; N = {points}; {} round(s), fastest counts",
        linked.len(),
        pred.display(),
        gt.display(),
        args.rounds
    );

    let mut python: Option<(f64, Value, Vec<Value>)> = None;
    let mut ours: Vec<Option<RustRound>> = workers.iter().map(|_| None).collect();
    for round in 1..=args.rounds.max(1) {
        let started = Instant::now();
        let (summary, rows) = run_script(&args.python, script, &pred_dir, &gt_dir, points)?;
        let seconds = started.elapsed().as_secs_f64();
        println!("round {round}: python script {seconds:.2} s");
        if python.as_ref().is_none_or(|(best, _, _)| seconds < *best) {
            python = Some((seconds, summary, rows));
        }
        for (slot, &w) in ours.iter_mut().zip(&workers) {
            let r = run_eval(args, &linked, points, w)?;
            println!("round {round}: vision2cad eval, {w} worker(s) {:.2} s", r.seconds);
            if slot.as_ref().is_none_or(|best| r.seconds < best.seconds) {
                *slot = Some(r);
            }
        }
    }
    let (py_seconds, py_summary, py_rows) = python.context("no round ran")?;
    let ours: Vec<RustRound> = ours.into_iter().collect::<Option<_>>().context("no round ran")?;

    println!("\nwhole run, per core (core-seconds = wall x processes doing the work)");
    println!("{:<28} {:>9} {:>15} {:>18}", "", "wall s", "core-ms / pair", "vs script per core");
    let py_core = py_seconds / n * 1e3;
    println!("{:<28} {py_seconds:>9.2} {py_core:>15.1} {:>17.2}x", "python script (1 process)", 1.0);
    let mut whole =
        vec![json!({"variant": "python", "processes": 1, "seconds": py_seconds, "core_ms_per_pair": py_core})];
    for (r, &w) in ours.iter().zip(&workers) {
        let core = r.seconds * w as f64 / n * 1e3;
        println!(
            "{:<28} {:>9.2} {core:>15.1} {:>17.2}x",
            format!("vision2cad eval, {w} worker(s)"),
            r.seconds,
            py_core / core
        );
        whole.push(json!({"variant": "vision2cad", "workers": w, "seconds": r.seconds, "core_ms_per_pair": core,
            "speedup_per_core": py_core / core}));
    }

    // Per stage, ms per pair: the 1-worker run (or the first worker count) against the script.
    let (one, one_workers) =
        ours.iter().zip(&workers).min_by_key(|(_, w)| **w).map(|(r, w)| (r, *w)).context("no run")?;
    let py_stage = |key: &str| py_summary["stage_seconds"][key].as_f64().unwrap_or(0.0) / n * 1e3;
    let st = &one.stages;
    let per = |x: f64| x / n * 1e3;
    let rows: Vec<(&str, f64, f64)> = vec![
        ("read models + mass props", per(st.read), py_stage("read") + py_stage("normalise")),
        ("mesh (+ sample, python)", per(st.mesh), py_stage("mesh_and_sample")),
        ("exact booleans", per(st.boolean), py_stage("booleans")),
        ("worker exchange", per(st.exchange), 0.0),
        ("sampling + distances + checks", per(st.metrics), py_stage("distances")),
    ];
    let accounted_ours: f64 = rows.iter().map(|r| r.1).sum();
    let accounted_py: f64 = rows.iter().map(|r| r.2).sum();
    let ours_wall = one.seconds * one_workers as f64 / n * 1e3;
    println!("\nper stage, ms per pair (vision2cad with {one_workers} worker(s); python script)");
    println!("{:<32} {:>12} {:>12}", "stage", "vision2cad", "python");
    let mut stage_json = Vec::new();
    for (name, a, b) in &rows {
        println!("{name:<32} {a:>12.1} {b:>12.1}");
        stage_json.push(json!({"stage": name, "vision2cad_ms": a, "python_ms": b}));
    }
    let (other_ours, other_py) = (ours_wall - accounted_ours, py_core - accounted_py);
    println!("{:<32} {other_ours:>12.1} {other_py:>12.1}", "other (start-up, scheduling)");
    stage_json.push(json!({"stage": "other", "vision2cad_ms": other_ours, "python_ms": other_py}));

    // The two must measure the same thing.
    let agreement = agreement(&one.samples, &py_rows);
    println!(
        "\nagreement on {} pairs both scored: max |IoU difference| {:.2e}; mean CD x1000 {:.4} (vision2cad) and {:.4} (python), independent samples",
        agreement["pairs"],
        agreement["max_iou_difference"].as_f64().unwrap_or(f64::NAN),
        agreement["cd_mean_vision2cad"].as_f64().unwrap_or(f64::NAN),
        agreement["cd_mean_python"].as_f64().unwrap_or(f64::NAN),
    );
    if let Some(path) = &args.json {
        let figures = json!({"pairs": linked.len(), "points": points, "rounds": args.rounds, "whole_run": whole,
            "stages_ms_per_pair": stage_json, "agreement": agreement});
        write_atomic(path, serde_json::to_string_pretty(&figures)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The script's per-pair lines and its closing summary.
fn run_script(python: &Path, script: &Path, pred: &Path, gt: &Path, points: usize) -> Result<(Value, Vec<Value>)> {
    let out = Command::new(python)
        .arg(script)
        .arg(pred)
        .arg(gt)
        .args(["--points", &points.to_string()])
        .output()
        .with_context(|| format!("cannot run {} {}", python.display(), script.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("{} failed ({}): {}", script.display(), out.status, stderr.lines().last().unwrap_or(""));
    }
    let mut rows: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let summary = rows
        .pop()
        .and_then(|mut last| last.get_mut("summary").map(Value::take))
        .with_context(|| format!("{} printed no summary line", script.display()))?;
    Ok((summary, rows))
}

fn run_eval(args: &BenchEvalArgs, pairs: &[Pair], points: usize, workers: usize) -> Result<RustRound> {
    let options = EvalOptions { points, ..Default::default() };
    let started = Instant::now();
    let pool = WorkerPool::new(args.worker.config()?, workers);
    let detailed = eval::evaluate_detailed(&pool, pairs, &options, || {})?;
    drop(pool);
    let seconds = started.elapsed().as_secs_f64();
    let mut stages = Stages::default();
    for d in &detailed {
        let s = d.stages;
        stages.read += s.read;
        stages.mesh += s.mesh;
        stages.boolean += s.boolean;
        stages.exchange += s.exchange;
        stages.metrics += s.metrics;
    }
    Ok(RustRound { seconds, stages, samples: detailed.into_iter().map(|d| d.result).collect() })
}

fn agreement(ours: &[eval::SampleResult], python: &[Value]) -> Value {
    let mut max_diff: f64 = 0.0;
    let (mut cd_ours, mut cd_py, mut count) = (0.0, 0.0, 0usize);
    for row in python {
        let (Some(id), Some(iou), Some(cd)) = (row["id"].as_str(), row["iou"].as_f64(), row["cd"].as_f64()) else {
            continue;
        };
        let Some(s) = ours.iter().find(|s| s.id == id) else { continue };
        let (Some(our_iou), Some(our_cd)) = (s.iou, s.cd) else { continue };
        max_diff = max_diff.max((our_iou - iou).abs());
        cd_ours += our_cd;
        cd_py += cd;
        count += 1;
    }
    let mean = |x: f64| if count > 0 { x / count as f64 } else { f64::NAN };
    json!({"pairs": count, "max_iou_difference": max_diff, "cd_mean_vision2cad": mean(cd_ours), "cd_mean_python": mean(cd_py)})
}

/// The interpreter for the script: Debian's, which has FreeCAD, numpy and scipy.
pub fn default_python() -> PathBuf {
    PathBuf::from("/usr/bin/python3.11")
}
