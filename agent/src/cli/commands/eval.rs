//! `vision2cad eval`: score predictions against ground truths (CR, mIoU, CD, HD, HD95)
//! under the `static` or `edit10` protocol. The table goes to stdout, the progress bar to
//! stderr, the JSON summary and per-sample rows to files.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use eval::{EvalOptions, Normalization, Protocol, Report};
use freecad_bridge::WorkerPool;

use crate::cli::WorkerArgs;
use crate::cli::files::write_atomic;
use crate::cli::progress::Progress;

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Predicted model (.step, .stp, .FCStd or program .json), or a directory of them.
    #[arg(long)]
    pub pred: PathBuf,
    /// Ground-truth model, or a directory of them; files pair up with predictions by stem.
    /// A GERD part folder (or its part.json) is its model for `static`, its program for
    /// `edit10`.
    #[arg(long)]
    pub gt: PathBuf,
    /// `static`, or `edit10` (every extrusion depth x1.1 in both models first).
    #[arg(long, default_value = "static")]
    pub protocol: Protocol,
    /// `unit-cube` (bounding box to [-0.5, 0.5]^3), `none` (model units) or `inertia`.
    #[arg(long = "normalize", default_value = "unit-cube")]
    pub normalization: Normalization,
    /// Surface points sampled per shape.
    #[arg(long, default_value_t = eval::DEFAULT_POINTS)]
    pub points: usize,
    /// Write the summary and every sample as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one JSON line per sample.
    #[arg(long)]
    pub jsonl: Option<PathBuf>,
    /// Also compute the voxel IoU of every sample (`iou_voxel`, 128^3, the fallback) and the
    /// column IoU (`iou_column`, 512 columns a side exact along z, the check on the
    /// booleans), to check them against the exact one.
    #[arg(long)]
    pub voxel_check: bool,
    /// Use the 128^3 voxel IoU for every sample instead of kernel booleans (faster,
    /// approximate; recorded as `iou_method: voxel`).
    #[arg(long, conflicts_with = "voxel_check")]
    pub voxel_iou: bool,
    /// FreeCAD workers (0: one per core). The results do not depend on it.
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// A shard of the pairs: --json/--jsonl get `.shard-I-of-N` before their extension;
    /// `vision2cad merge` joins the reports.
    #[command(flatten)]
    pub shard: crate::cli::shard::ShardArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

impl EvalArgs {
    pub fn options(&self) -> Result<EvalOptions> {
        anyhow::ensure!(self.points > 0, "--points must be at least 1");
        Ok(EvalOptions {
            protocol: self.protocol,
            normalization: self.normalization,
            points: self.points,
            voxel_check: self.voxel_check,
            voxel_only: self.voxel_iou,
        })
    }
}

pub fn run(args: &EvalArgs) -> Result<ExitCode> {
    let options = args.options()?;
    let shard = args.shard.resolve()?;
    let part_truth = gerd_part_truth(&args.gt, args.protocol)?;
    let gt = part_truth.as_ref().map_or(args.gt.clone(), |(_, path)| path.clone());
    let mut pairs = eval::pair_paths(&args.pred, &gt)?;
    if let Some(s) = shard {
        anyhow::ensure!(
            args.json.is_some() || args.jsonl.is_some(),
            "a shard's report is its result file: give --json (and --jsonl if wanted)"
        );
        pairs.retain(|p| s.holds(&p.id));
        eprintln!("{}: {} pairs", s.name(), pairs.len());
    }
    let pool = WorkerPool::new(args.worker.config()?, args.workers);
    let bar = Progress::new("evaluating", pairs.len());
    let report = eval::evaluate(&pool, &pairs, &options, || bar.tick(false));
    bar.finish();
    let report = report?;
    let json = args.json.as_deref().map(|p| crate::cli::shard::shard_file(p, shard));
    let jsonl = args.jsonl.as_deref().map(|p| crate::cli::shard::shard_file(p, shard));
    write_outputs(&report, json.as_deref(), jsonl.as_deref())?;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(report.table().as_bytes()).and_then(|()| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write the table");
    }
    if report.n_errors > 0 {
        // The table stands, but it is not the whole evaluation: say so in the exit status.
        eprintln!(
            "error: {} of {} samples could not be scored (evaluator errors, listed above; not counted in CR)",
            report.n_errors, report.n
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// A GERD part as a ground truth: `DIR` with a part.json, or the part.json itself. Its
/// model (`static`) or its program (`edit10`) is copied into a scratch folder under the
/// part's ID, so the sample is named after the part. `None` for anything else.
fn gerd_part_truth(gt: &Path, protocol: Protocol) -> Result<Option<(tempfile::TempDir, PathBuf)>> {
    let dir = if gt.is_dir() && gt.join(gerd::record::PART_JSON).is_file() {
        gt.to_path_buf()
    } else if gt.is_file() && gt.file_name().is_some_and(|n| n == gerd::record::PART_JSON) {
        gt.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    } else {
        return Ok(None);
    };
    let record =
        gerd::record::read_part(&dir).with_context(|| format!("{} is not a readable GERD part", dir.display()))?;
    let scratch = tempfile::tempdir().context("cannot make a scratch folder")?;
    let path = match protocol {
        Protocol::Static => {
            let step = dir.join(&record.files.model_step);
            let copy = scratch.path().join(format!("{}.step", record.id));
            std::fs::copy(&step, &copy).with_context(|| format!("cannot read the part's model {}", step.display()))?;
            copy
        }
        Protocol::Edit10 => {
            let copy = scratch.path().join(format!("{}.json", record.id));
            write_atomic(&copy, serde_json::to_string_pretty(&record.program)?.as_bytes())?;
            copy
        }
    };
    Ok(Some((scratch, path)))
}

pub fn write_outputs(report: &Report, json: Option<&Path>, jsonl: Option<&Path>) -> Result<()> {
    if let Some(path) = json {
        let mut text = serde_json::to_string_pretty(report)?;
        text.push('\n');
        write_atomic(path, text.as_bytes())?;
    }
    if let Some(path) = jsonl {
        let mut text = String::new();
        for sample in &report.samples {
            text.push_str(&serde_json::to_string(sample)?);
            text.push('\n');
        }
        write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}
