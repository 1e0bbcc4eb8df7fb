//! `vision2cad merge`: put the shards of a batch command back together. The merged output
//! is what one unsharded process would have written (timings aside):
//!
//! - runs (`run --shard-*`): a run's `--out` holding `shard-I-of-N/` folders, or those
//!   folders themselves, or a sweep's `--out` holding one such run per configuration;
//! - evaluation reports (`eval --json R.json --shard-*` writes `R.shard-I-of-N.json`);
//! - GERD datasets (`gerd generate --shard-*`, `gerd import deepcad --shard-*`): the index
//!   (and the import report) is written once every shard is in;
//! - exports (`gerd export --shard-*` writes `OUT.shard-I-of-N.jsonl`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use eval::Report;
use serde_json::Value;

use crate::cli::commands::run::{self, RunResults, RunSettings};
use crate::cli::files::write_atomic;
use crate::cli::shard::{Shard, check_complete};

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' outputs: run folders, evaluation reports (.json), GERD datasets or
    /// export files (.jsonl, or .json in the llava format).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where the merged output goes (may be the folder the shards are in).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: &MergeArgs) -> Result<ExitCode> {
    for input in &args.inputs {
        anyhow::ensure!(input.exists(), "{} does not exist", input.display());
    }
    if args.inputs.iter().all(|p| p.is_file()) {
        let first = &args.inputs[0];
        return match first.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => merge_export(&args.inputs, &args.out),
            Some("json") => {
                let text = read(first)?;
                if text.trim_start().starts_with('[') {
                    merge_export(&args.inputs, &args.out)
                } else {
                    merge_reports(&args.inputs, &args.out)
                }
            }
            _ => bail!("{}: expected an evaluation report (.json) or an export (.jsonl)", first.display()),
        };
    }
    if let Some(file) = args.inputs.iter().find(|p| p.is_file()) {
        bail!("{} is a file; give only folders (runs, datasets) or only files (reports, exports)", file.display());
    }
    let runs: Vec<PathBuf> = args.inputs.iter().flat_map(|d| run_folders(d)).collect();
    if !runs.is_empty() {
        let results = merge_runs(&runs, &args.out)?;
        print!("{}", results.markdown());
        eprintln!("merged {} runs into {}", runs.len(), args.out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let sweep = sweep_folders(&args.inputs)?;
    if !sweep.is_empty() {
        let (order, vary) = sweep_file(&args.inputs)?;
        let mut rows = Vec::new();
        for (name, runs) in order_configs(order, sweep)? {
            let results = merge_runs(&runs, &args.out.join(&name))?;
            rows.push((name, results));
        }
        if let Some(key) = &vary {
            crate::cli::curves::write_curves(&args.out, key, &rows)?;
        }
        run::write_sweep(&args.out, &rows, vary.is_some())?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.inputs.iter().all(|d| d.join(gerd::record::PARTS_DIR).is_dir()) {
        return merge_datasets(&args.inputs, &args.out);
    }
    bail!(
        "{}: no run (run.json), sweep, shard folder or GERD dataset found",
        args.inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The run folders at `dir`: its `shard-I-of-N` folders, else itself when it is a run (a
/// folder merged before holds both: the shards are the source).
fn run_folders(dir: &Path) -> Vec<PathBuf> {
    let mut shards: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.join("run.json").is_file() && p.file_name().and_then(|n| n.to_str()).and_then(Shard::parse).is_some()
        })
        .collect();
    shards.sort();
    if shards.is_empty() && dir.join("run.json").is_file() {
        return vec![dir.to_path_buf()];
    }
    shards
}

/// A sweep's configurations (folders holding runs), each with its run folders.
fn sweep_folders(inputs: &[PathBuf]) -> Result<BTreeMap<String, Vec<PathBuf>>> {
    let mut configs: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for input in inputs {
        for entry in std::fs::read_dir(input).with_context(|| format!("cannot read {}", input.display()))?.flatten() {
            let runs = run_folders(&entry.path());
            if !runs.is_empty() {
                configs.entry(entry.file_name().to_string_lossy().into_owned()).or_default().extend(runs);
            }
        }
    }
    Ok(configs)
}

/// A sharded sweep's `sweep.json`: its configurations in order and the rate it varies.
fn sweep_file(inputs: &[PathBuf]) -> Result<(Option<Vec<String>>, Option<String>)> {
    let Some(path) = inputs.iter().map(|i| i.join(run::SWEEP_FILE)).find(|p| p.is_file()) else {
        return Ok((None, None));
    };
    let sweep: run::SweepFile =
        serde_json::from_str(&read(&path)?).with_context(|| format!("{} is not a sweep's list", path.display()))?;
    Ok((Some(sweep.configs), sweep.vary))
}

/// The configurations in the order the sweep was given (`sweep.json`), else by name.
fn order_configs(
    order: Option<Vec<String>>,
    mut configs: BTreeMap<String, Vec<PathBuf>>,
) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let mut out = Vec::new();
    for name in order.unwrap_or_else(|| configs.keys().cloned().collect()) {
        let runs = configs.remove(&name).with_context(|| format!("configuration {name} has no shards"))?;
        out.push((name, runs));
    }
    if let Some(extra) = configs.keys().next() {
        bail!("configuration {extra} is not in the sweep's list");
    }
    Ok(out)
}

/// Runs over disjoint parts of one split with the same settings, into one run at `out`.
fn merge_runs(runs: &[PathBuf], out: &Path) -> Result<RunResults> {
    let mut settings: Vec<(PathBuf, RunSettings)> = Vec::new();
    for run in runs {
        anyhow::ensure!(
            run.join("results.json").is_file() && run.join("eval_static.json").is_file(),
            "{} has not finished (no results.json): run its shard again to complete it",
            run.display()
        );
        let s: RunSettings = serde_json::from_str(&read(&run.join("run.json"))?)
            .with_context(|| format!("{} is not a run's settings", run.join("run.json").display()))?;
        settings.push((run.clone(), s));
    }
    let (first_dir, first) = &settings[0];
    for (dir, s) in &settings {
        let same = (&s.dataset, &s.split, s.vlm, &s.reconstruct)
            == (&first.dataset, &first.split, first.vlm, &first.reconstruct);
        anyhow::ensure!(
            same,
            "{} and {} are runs with different settings (dataset, split, backend or options)",
            first_dir.display(),
            dir.display()
        );
    }
    let shards: Vec<Shard> = settings.iter().filter_map(|(_, s)| s.shard).collect();
    if !shards.is_empty() {
        anyhow::ensure!(shards.len() == settings.len(), "sharded and unsharded runs cannot be merged");
        check_complete(&shards, &out.display().to_string())?;
    }
    let mut parts: Vec<String> = settings.iter().flat_map(|(_, s)| s.parts.iter().cloned()).collect();
    parts.sort();
    if let Some(w) = parts.windows(2).find(|w| w[0] == w[1]) {
        bail!("part {} is in more than one of the runs", w[0]);
    }

    std::fs::create_dir_all(out.join("parts")).with_context(|| format!("cannot create {}", out.display()))?;
    let (mut statics, mut edits, mut wall) = (Vec::new(), Vec::new(), 0.0f64);
    for (dir, s) in &settings {
        for id in &s.parts {
            let from = dir.join("parts").join(id);
            let to = out.join("parts").join(id);
            if from.is_dir() && !same_file(&from, &to) {
                copy_into_place(&from, &to)?;
            }
        }
        let gt_programs = dir.join("gt");
        if gt_programs.is_dir() {
            copy_dir(&gt_programs, &out.join("gt"))?;
        }
        // The run's own files (a part's prediction, the ground-truth programs) now live in
        // the merged folder, however the shard's folder was spelled when it ran.
        let moved = |path: &str, id: &str| {
            let p = Path::new(path);
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let parent = p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned());
            let grandparent =
                p.parent().and_then(Path::parent).and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned());
            match (parent.as_deref(), grandparent.as_deref()) {
                (Some(folder), Some("parts")) if folder == id => {
                    out.join("parts").join(id).join(name).display().to_string()
                }
                (Some("gt"), _) => out.join("gt").join(name).display().to_string(),
                _ => path.to_string(),
            }
        };
        let report = |name: &str| -> Result<Report> {
            let path = dir.join(name);
            let mut report: Report = serde_json::from_str(&read(&path)?)
                .with_context(|| format!("{} is not an evaluation report", path.display()))?;
            for sample in &mut report.samples {
                sample.pred = sample.pred.as_deref().map(|p| moved(p, &sample.id));
                sample.gt = moved(&sample.gt, &sample.id);
            }
            Ok(report)
        };
        statics.push(report("eval_static.json")?);
        edits.push(report("eval_edit10.json")?);
        let path = dir.join("results.json");
        let results: RunResults = serde_json::from_str(&read(&path)?)
            .with_context(|| format!("{} is not a run's results", path.display()))?;
        wall = wall.max(results.wall_seconds_this_session);
    }
    let static_report = Report::merge(statics).map_err(anyhow::Error::msg)?;
    let edit_report = Report::merge(edits).map_err(anyhow::Error::msg)?;
    write_atomic(&out.join("eval_static.json"), serde_json::to_string_pretty(&static_report)?.as_bytes())?;
    write_atomic(&out.join("eval_edit10.json"), serde_json::to_string_pretty(&edit_report)?.as_bytes())?;
    let merged = RunSettings { parts, shard: None, ..first.clone() };
    write_atomic(&out.join("run.json"), serde_json::to_string_pretty(&merged)?.as_bytes())?;
    run::write_results(out, &merged, &static_report, &edit_report, wall)
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Copies the folder `from` to `to` through a `.partial-` name, replacing what was there.
fn copy_into_place(from: &Path, to: &Path) -> Result<()> {
    let name = to.file_name().map_or("part".into(), |n| n.to_string_lossy().into_owned());
    let partial = to.with_file_name(format!(".partial-{name}"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial).with_context(|| format!("cannot remove {}", partial.display()))?;
    }
    copy_dir(from, &partial)?;
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("cannot replace {}", to.display()))?;
    }
    std::fs::rename(&partial, to).with_context(|| format!("cannot move {} into place", partial.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("cannot copy {} to {}", entry.path().display(), target.display()))?;
        }
    }
    Ok(())
}

/// The shard named in a result file's name (`report.shard-1-of-4.json`).
fn shard_in_name(path: &Path) -> Option<Shard> {
    let name = path.file_name()?.to_str()?;
    name.split('.').find_map(Shard::parse)
}

fn shards_of_files(files: &[PathBuf]) -> Result<()> {
    let shards: Vec<Shard> = files
        .iter()
        .map(|f| {
            shard_in_name(f)
                .with_context(|| format!("{} is not named as a shard's output (NAME.shard-I-of-N.EXT)", f.display()))
        })
        .collect::<Result<_>>()?;
    check_complete(&shards, "the files")
}

/// Evaluation reports of disjoint shards into one (`--out R.json`).
fn merge_reports(files: &[PathBuf], out: &Path) -> Result<ExitCode> {
    shards_of_files(files)?;
    let reports: Vec<Report> = files
        .iter()
        .map(|f| {
            serde_json::from_str(&read(f)?).with_context(|| format!("{} is not an evaluation report", f.display()))
        })
        .collect::<Result<_>>()?;
    let report = Report::merge(reports).map_err(anyhow::Error::msg)?;
    crate::cli::commands::eval::write_outputs(&report, Some(out), None)?;
    print!("{}", report.table());
    eprintln!("merged {} reports ({} samples) into {}", files.len(), report.n, out.display());
    Ok(ExitCode::SUCCESS)
}

/// Export files of disjoint shards into one, samples in the order of an unsharded export
/// (by part, each part's samples as its shard wrote them).
fn merge_export(files: &[PathBuf], out: &Path) -> Result<ExitCode> {
    shards_of_files(files)?;
    let out_dir = std::path::absolute(out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))?;
    for f in files {
        let dir = std::path::absolute(f.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))?;
        anyhow::ensure!(
            dir == out_dir,
            "{} and {} are in different folders: image paths in exports are relative to their file, so merge into the shards' folder",
            f.display(),
            out.display()
        );
    }
    let llava = out.extension().is_some_and(|e| e == "json");
    let mut samples: Vec<Value> = Vec::new();
    for f in files {
        let text = read(f)?;
        if llava {
            let items: Vec<Value> =
                serde_json::from_str(&text).with_context(|| format!("{} is not a llava export", f.display()))?;
            samples.extend(items);
        } else {
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                samples.push(serde_json::from_str(line).with_context(|| format!("{} line {}", f.display(), n + 1))?);
            }
        }
    }
    if let Some(s) = samples.iter().find(|s| !s["part"].is_string()) {
        bail!("a sample without its part ({}) cannot be placed", s["id"]);
    }
    // Stable: the samples of one part keep the order their shard wrote them in.
    samples.sort_by(|a, b| a["part"].as_str().cmp(&b["part"].as_str()));
    let text = if llava {
        serde_json::to_string_pretty(&samples)?
    } else {
        samples.iter().map(|s| format!("{s}\n")).collect()
    };
    write_atomic(out, text.as_bytes())?;
    eprintln!("merged {} samples of {} shards into {}", samples.len(), files.len(), out.display());
    Ok(ExitCode::SUCCESS)
}

/// Datasets written by shards of `gerd generate`: parts of the other folders are copied into
/// `out`, and the index is written once every shard has finished.
fn merge_datasets(inputs: &[PathBuf], out: &Path) -> Result<ExitCode> {
    let mut shards = Vec::new();
    for input in inputs {
        for entry in
            std::fs::read_dir(input.join(crate::cli::commands::gerd::SHARDS_DIR)).into_iter().flatten().flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(shard) = shard_in_name(Path::new(&name)) {
                let record: Value = serde_json::from_str(&read(&entry.path())?)
                    .with_context(|| format!("{} is not a shard's record", entry.path().display()))?;
                anyhow::ensure!(
                    record["failures"].as_array().is_none_or(|f| f.is_empty()),
                    "{}: the shard had failures ({}); run it again",
                    entry.path().display(),
                    record["failures"]
                );
                shards.push(shard);
            }
        }
    }
    if !shards.is_empty() {
        shards.sort_by_key(|s| s.index);
        shards.dedup();
        check_complete(&shards, "the dataset")?;
    }
    std::fs::create_dir_all(out.join(gerd::record::PARTS_DIR))?;
    for input in inputs {
        for dir in gerd::record::part_dirs(input)? {
            let to = out.join(gerd::record::PARTS_DIR).join(dir.file_name().unwrap_or_default());
            if !same_file(&dir, &to) {
                copy_into_place(&dir, &to)?;
            }
        }
    }
    // The reports of `gerd import deepcad` shards, one line per file, by file.
    let reports: Vec<PathBuf> = inputs
        .iter()
        .flat_map(|i| std::fs::read_dir(i).into_iter().flatten().flatten().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
            name.starts_with("import-report.") && shard_in_name(p).is_some()
        })
        .collect();
    if !reports.is_empty() {
        shards_of_files(&reports)?;
        let mut lines: Vec<Value> = Vec::new();
        for r in &reports {
            for line in read(r)?.lines().filter(|l| !l.trim().is_empty()) {
                lines.push(
                    serde_json::from_str(line).with_context(|| format!("{} is not an import report", r.display()))?,
                );
            }
        }
        lines.sort_by(|a, b| a["file"].as_str().cmp(&b["file"].as_str()));
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        write_atomic(&out.join("import-report.jsonl"), text.as_bytes())?;
    }
    let entries = gerd::record::write_index(out)?;
    eprintln!("{} parts in {}; index.jsonl written", entries.len(), out.display());
    Ok(ExitCode::SUCCESS)
}
