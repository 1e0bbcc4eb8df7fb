//! `vision2cad reconstruct`: the three-stage loop on one image.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use vision2cad::vlm::BackendKind as Backend;
use vision2cad::{Config, Reconstruction};

use crate::cli::{WorkerArgs, settings};

#[derive(Debug, clap::Args)]
pub struct ReconstructArgs {
    /// The target image: one picture of the part (PNG, JPEG...).
    pub image: PathBuf,
    /// Output directory (created if missing). With --resume it may be left out.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the interrupted reconstruction in DIR from its program.json.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Start over in an --out folder that holds an earlier reconstruction, deleting what
    /// that one wrote (without it such a folder is refused, so nothing stale mixes in).
    #[arg(long, conflicts_with = "resume")]
    pub replace: bool,
    #[arg(long, value_enum, default_value = "oracle")]
    pub vlm: Backend,
    /// Ground truth for the oracle: a GERD part folder or a program .json.
    #[arg(long)]
    pub gt: Option<PathBuf>,
    /// Answers for the scripted backend (JSON lines: {"stage": "stage1", "answer": {...}}).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// A TOML configuration; the flags below override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// --vlm openai: the model name the server knows (default gpt-4o).
    #[arg(long)]
    pub model: Option<String>,
    /// --vlm openai: the server's base URL, e.g. http://localhost:8000/v1 (overrides the
    /// environment and the config).
    #[arg(long)]
    pub base_url: Option<String>,
    /// --vlm openai: how the answer's structure is requested.
    #[arg(long, value_parser = ["auto", "json_schema", "json_object", "text"])]
    pub response_format: Option<String>,
    /// --vlm openai: directory of the response cache.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// --vlm openai: off, read (use hits), write (use hits, store answers), replay (hits
    /// only; no server, no key).
    #[arg(long, value_parser = ["off", "read", "write", "replay"])]
    pub cache_mode: Option<String>,
    /// Prompt templates to use instead of the built-in ones (see prompts/README.md).
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// The GERD-RET index for Stage 1's examples (`vision2cad gerd index`); default: the
    /// default index (`vision2cad gerd default-index`, built by set-up) when it is built.
    #[arg(long, value_name = "INDEX")]
    pub rag_index: Option<PathBuf>,
    /// Accepted steps before the loop stops (default 25).
    #[arg(long)]
    pub max_steps: Option<usize>,
    /// No ID labels and no entity table: entities are named by selectors.
    #[arg(long)]
    pub no_egr: bool,
    /// Sketch coordinates in the plane's own frame instead of view coordinates.
    #[arg(long)]
    pub no_lcb: bool,
    /// No ties to projected geometry and no snapping.
    #[arg(long)]
    pub no_pgr: bool,
    /// No registration and no sphere S_t.
    #[arg(long)]
    pub no_reg: bool,
    /// No retrieved examples in Stage 1 (no index is read, the default one neither).
    #[arg(long)]
    pub no_rag: bool,
    /// No Stage 3: candidates are committed unverified.
    #[arg(long)]
    pub no_evf: bool,
    /// No fit: the program keeps the model's numbers as drawn (by default the harness fits
    /// every extrusion, revolve, sweep and loft to the target's pixels at END, and squares a
    /// revolve's profile drawn a hair off square at its step; docs/method.md).
    #[arg(long)]
    pub no_fit: bool,
    /// Also fit each new sketch and its extrusion or revolve after Stage 2, so Stage 3
    /// judges the fitted candidate (off by default; docs/evaluation.md has why).
    #[arg(long, conflicts_with = "no_fit")]
    pub fit_steps: bool,
    /// The fit at END measures to the target's lines where its own image has them, not to
    /// the framed picture's whole pixels (off by default; docs/evaluation.md has why).
    #[arg(long, conflicts_with = "no_fit")]
    pub subpixel_fit: bool,
    /// --vlm sim: one rate of the error model, KEY=VALUE (sigma, reference, frame,
    /// parameter, operation, judge_threshold, judge_flip); may be repeated.
    #[arg(long, value_name = "KEY=VALUE")]
    pub sim: Vec<String>,
    /// --vlm sim: the seed of the injected errors (a run repeats to the bit).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Calibration: an oracle for this ground truth (a GERD part folder or a program .json)
    /// answers every request beside the model, and the trace records where the model's
    /// answers differ (`observed`), for `vision2cad sim-calibrate`. The run itself goes on
    /// the model's answers alone.
    #[arg(long, value_name = "GT")]
    pub shadow_gt: Option<PathBuf>,
    /// Instead of the loop, a baseline: `direct-code` asks the model once for a whole
    /// FreeCAD script and runs it in a sandbox (needs a model: --vlm openai or scripted).
    #[arg(long, value_enum)]
    pub baseline: Option<Baseline>,
    /// --baseline direct-code: seconds the script may run (wall clock, FreeCAD's start
    /// included).
    #[arg(long, default_value_t = 120.0)]
    pub script_seconds: f64,
    /// Check the model server (the key, that it answers, that it serves the model) and
    /// exit: what `run` does once before its first part.
    #[arg(long, hide = true)]
    pub check_backend: bool,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Baseline {
    /// One call, one FreeCAD Python script, run in a sandbox with a time limit.
    DirectCode,
}

pub fn run(args: &ReconstructArgs) -> Result<ExitCode> {
    if args.check_backend {
        let config = settings::config(args)?;
        if let Some(client) = settings::backend(args).connect(&config.vlm)? {
            client.check_server()?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let out = match (&args.out, &args.resume) {
        (Some(o), Some(r)) if o != r => bail!("--out and --resume name different directories"),
        (Some(o), _) => o.clone(),
        (None, Some(r)) => r.clone(),
        (None, None) => bail!("give --out DIR (or --resume DIR to continue a reconstruction)"),
    };
    if let Some(dir) = &args.resume {
        anyhow::ensure!(
            dir.join("program.json").is_file(),
            "--resume {}: there is no program.json to continue from",
            dir.display()
        );
    }
    anyhow::ensure!(args.image.is_file(), "the target image {} does not exist", args.image.display());
    if args.resume.is_none() {
        prepare_out(&out, args.replace)?;
    }
    let config = settings::config(args)?;
    if let Some(Baseline::DirectCode) = args.baseline {
        return direct_code(args, &out, &config);
    }
    let spec = settings::backend(args);
    // The model server is checked (key, cache, URL) before FreeCAD starts.
    let client = spec.connect(&config.vlm)?;
    let mut session = args.worker.session()?;
    let mut vlm = spec.open(&config, client, &mut session)?;
    let embedder = match (&config.rag_index, config.ablations.no_rag) {
        (Some(index), false) => crate::cli::commands::gerd::embedder_for_index(index, None)?,
        _ => None,
    };
    let outcome = Reconstruction::new(config.clone())?
        .resume(args.resume.is_some())
        .embedder(embedder)
        .run(&args.image, &out, vlm.as_mut(), &mut session)
        .with_context(|| format!("reconstruction of {} failed", args.image.display()))?;
    if config.rag_index.is_none() && !config.ablations.no_rag {
        eprintln!("note: {}", crate::cli::commands::default_index::missing_note());
    }
    let u = &outcome.usage;
    let cost = u.cost.map(|c| format!(", cost {c:.4}")).unwrap_or_default();
    eprintln!(
        "{}: {} steps, {}; {} model calls ({} tokens in, {} out{cost}), {} rejections, {} failed candidates, {} unverified commits; harness {:.2} s, model {:.2} s; wrote {}/{{model.FCStd, model.step, model.glb, program.json, trace.jsonl, report.html}}",
        args.image.display(),
        outcome.steps,
        outcome.stop,
        outcome.calls,
        u.input_tokens,
        u.output_tokens,
        outcome.rejections,
        outcome.failed_candidates,
        outcome.unverified_commits,
        outcome.timing.harness(),
        outcome.timing.model,
        out.display()
    );
    Ok(if outcome.failure.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// What a reconstruction (the loop's or the baseline's) writes in its folder.
const WRITTEN: [&str; 10] = [
    "views",
    "trace.jsonl",
    "outcome.json",
    "program.json",
    "state.json",
    "report.html",
    "model.FCStd",
    "model.step",
    "model.glb",
    "model_script.py",
];

/// A new reconstruction's folder: missing, or holding none of the files a reconstruction
/// writes (other files, such as the target image itself, are left alone). One that holds an
/// earlier reconstruction is refused, so its stale step images never mix with new ones,
/// unless `replace` says to delete what that one wrote.
fn prepare_out(out: &std::path::Path, replace: bool) -> Result<()> {
    let ours: Vec<&str> = WRITTEN.iter().copied().filter(|name| out.join(name).exists()).collect();
    if ours.is_empty() {
        return Ok(());
    }
    if !replace {
        bail!(
            "the output folder {} holds an earlier reconstruction ({}): --resume {} continues it, --replace starts over (deleting those files), or give another --out",
            out.display(),
            ours.join(", "),
            out.display()
        );
    }
    for name in ours {
        let path = out.join(name);
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        removed.with_context(|| format!("cannot delete {} to start over", path.display()))?;
    }
    Ok(())
}

/// `--baseline direct-code`: one script from the model, run in the sandbox.
fn direct_code(args: &ReconstructArgs, out: &std::path::Path, config: &Config) -> Result<ExitCode> {
    anyhow::ensure!(args.resume.is_none(), "--resume continues the loop; the direct-code baseline is one call");
    anyhow::ensure!(
        args.script_seconds.is_finite() && args.script_seconds > 0.0,
        "--script-seconds must be a positive number of seconds"
    );
    let mut vlm = settings::backend(args).open_code_writer(&config.vlm)?;
    let program = args.worker.config()?.program;
    // The CPU limit sits a little under the wall-clock one, so a busy loop is stopped by
    // the kernel with a clear signal before the wall clock kills it.
    let limits = freecad_bridge::codebox::CodeboxLimits {
        wall_seconds: args.script_seconds,
        cpu_seconds: (args.script_seconds * 0.9).ceil().max(1.0) as u64,
        ..Default::default()
    };
    let outcome = vision2cad::direct_code::direct_code(&args.image, out, config, vlm.as_mut(), &program, &limits)
        .with_context(|| format!("the direct-code baseline on {} failed", args.image.display()))?;
    let u = &outcome.usage;
    eprintln!(
        "{}: direct-code baseline: {}; {} tokens in, {} out; model {:.1} s, script {:.1} s; wrote {}/{{model_script.py, outcome.json, report.html{}}}",
        args.image.display(),
        outcome.failure.as_deref().unwrap_or(&outcome.stop),
        u.input_tokens,
        u.output_tokens,
        outcome.model_seconds,
        outcome.script_seconds,
        out.display(),
        if outcome.finished { ", model.FCStd, model.step" } else { "" }
    );
    Ok(if outcome.failure.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
