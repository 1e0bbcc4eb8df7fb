//! `vision2cad bench loop`: the harness's own time per step of the three-stage loop (no
//! model time: the oracle answers in microseconds), split into kernel, rendering and
//! prompts, against a reference measured in the same run: executing the same accepted
//! commands in FreeCAD with nothing else.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use vision2cad::vlm::{GroundTruth, Oracle};
use vision2cad::{Config, Reconstruction, Timing};

use crate::cli::WorkerArgs;
use crate::cli::commands::bench::median;
use crate::cli::files::{read_program, write_atomic};

#[derive(Debug, clap::Args)]
pub struct LoopBench {
    /// Directory of ground-truth programs (*.json): each is rendered as a target image and
    /// reconstructed by the oracle.
    #[arg(long, default_value = "assets/programs")]
    pub programs: PathBuf,
    /// Reconstructions of each program.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also reconstruct each program with the fit at END (the default; the figures above are
    /// without it, `--no-fit`), in the same run, and compare the harness's time per part.
    #[arg(long)]
    pub fit: bool,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &LoopBench) -> Result<ExitCode> {
    let paths = crate::cli::commands::bench::program_paths(&args.programs)?;
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mut session = args.worker.session()?;
    let mut reconstruction = Reconstruction::new(Config { fit: false, ..Config::default() })?;
    let (mut steps, mut reference) = (Vec::<Timing>::new(), Vec::<f64>::new());
    let mut model_seconds = 0.0;
    let mut fitted = if args.fit { Some(Reconstruction::new(Config::default())?) } else { None };
    let (mut parts, mut fit_steps, mut fit_parts) = (Vec::<f64>::new(), Vec::<f64>::new(), Vec::<f64>::new());
    for (k, path) in paths.iter().enumerate() {
        let program = read_program(path)?;
        session.reset()?;
        session.execute_program(&program).with_context(|| format!("{} failed", path.display()))?;
        let scene = views::scene_of(&mut session)?;
        let image = scratch.path().join(format!("{k}.png"));
        views::target(&scene, &views::Options::default()).image.save(&image)?;
        let truth = GroundTruth::execute(program, &mut session).map_err(anyhow::Error::msg)?;
        for r in 0..args.repeat.max(1) {
            let out = scratch.path().join(format!("{k}-{r}"));
            let mut oracle = Oracle::new(truth.clone());
            let outcome = reconstruction.run(&image, &out, &mut oracle, &mut session)?;
            anyhow::ensure!(outcome.finished, "{}: the oracle did not finish: {}", path.display(), outcome.stop);
            model_seconds += outcome.timing.model;
            steps.extend(outcome.step_timing.iter().copied());
            // Reference: the same accepted commands, executed one by one and nothing else.
            let accepted = read_program(&out.join("program.json"))?;
            session.reset()?;
            let started = Instant::now();
            session.execute_program(&accepted).map_err(|e| anyhow::anyhow!("{e}"))?;
            reference.push(started.elapsed().as_secs_f64() / outcome.steps.max(1) as f64);
            parts.push(outcome.timing.harness());
            if let Some(fitted) = fitted.as_mut() {
                let out = scratch.path().join(format!("{k}-{r}-fit"));
                let mut oracle = Oracle::new(truth.clone());
                let outcome = fitted.run(&image, &out, &mut oracle, &mut session)?;
                anyhow::ensure!(
                    outcome.finished,
                    "{}: the oracle did not finish with the fit: {}",
                    path.display(),
                    outcome.stop
                );
                fit_steps.extend(outcome.step_timing.iter().map(Timing::harness));
                fit_parts.push(outcome.timing.harness());
            }
        }
        eprintln!("{}: done", path.display());
    }
    let pick = |f: fn(&Timing) -> f64| median(steps.iter().map(f).collect());
    let rows = [
        ("kernel (execute, preview, tessellate, roll back)", pick(|t| t.kernel)),
        ("rendering (views, registration, PNG files)", pick(|t| t.render)),
        ("prompts (templates, schema checks)", pick(|t| t.prompt)),
        ("harness total", pick(Timing::harness)),
    ];
    let exec = median(reference);
    println!(
        "harness time per accepted step, {} steps of {} programs x {}",
        steps.len(),
        paths.len(),
        args.repeat.max(1)
    );
    println!("{:<52} {:>10} {:>10}", "", "median ms", "x exec");
    for (name, v) in rows {
        println!("{name:<52} {:>10.1} {:>10.2}", v * 1e3, v / exec);
    }
    println!("{:<52} {:>10.1} {:>10.2}", "reference: executing the accepted commands only", exec * 1e3, 1.0);
    println!("(model time, all steps: {:.3} ms: the oracle)", model_seconds * 1e3);
    let part = median(parts.clone());
    let fit_figures = (!fit_steps.is_empty()).then(|| {
        let (step, whole) = (median(fit_steps.clone()), median(fit_parts.clone()));
        println!("with the fit at END (the default; the oracle's exact programs are fitted and left as built):");
        println!("{:<52} {:>10.1} {:>10.2}", "harness total per part, without the fit", part * 1e3, 1.0);
        println!(
            "{:<52} {:>10.1} {:>10.2}",
            "harness total per part, with the fit (and at END)",
            whole * 1e3,
            whole / part
        );
        // The fit at END runs after the last step: per step the two runs differ only by noise.
        json!({"harness_per_step": step, "harness_per_part": whole, "harness_per_part_without": part})
    });
    if let Some(path) = &args.json {
        let report = json!({
            "steps": steps.len(), "programs": paths.len(), "repeat": args.repeat.max(1),
            "median_seconds": {"kernel": rows[0].1, "render": rows[1].1, "prompt": rows[2].1, "harness": rows[3].1},
            "reference_exec_seconds_per_step": exec,
            "fit": fit_figures,
        });
        write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
