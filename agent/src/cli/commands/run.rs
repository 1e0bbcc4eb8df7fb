//! `vision2cad run`: `reconstruct` on every part of a GERD split, then both evaluation
//! protocols, `results.md`, `results.json` and an `index.html` linking every part's report.
//!
//! Each part runs as a child `vision2cad reconstruct` process (`--jobs` at once), so a part
//! that crashes or runs past `--item-timeout` costs that part only. A part's folder appears
//! under `RUNDIR/parts/` only when its reconstruction has ended (it is written under a
//! `.partial-` name and renamed), so an interrupted run resumes where it stopped.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use eval::{EvalOptions, Protocol, Report};
use freecad_bridge::WorkerPool;
use gerd::record::{Split, part_dirs, read_part};
use serde::Deserialize;
use vision2cad::batch::results::fmt;
use vision2cad::batch::runner::{self, PartRunner};
pub use vision2cad::batch::{RunBackend, RunResults, RunSettings, SWEEP_FILE, SweepFile};

use crate::cli::WorkerArgs;
use crate::cli::files::write_atomic;
use crate::cli::progress::Progress;
use crate::cli::shard::Shard;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A GERD dataset (`gerd generate`, `gerd import`).
    #[arg(long)]
    pub dataset: PathBuf,
    #[arg(long, value_enum, default_value = "test")]
    pub split: crate::cli::commands::gerd::SplitArg,
    /// The run's folder; an existing run there is resumed.
    #[arg(long)]
    pub out: PathBuf,
    /// Parts reconstructed at once (one FreeCAD worker each).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Only the first N parts of the split (by ID).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Seconds one part may take; past it the part is stopped and recorded as timed out.
    #[arg(long, default_value_t = 1800.0)]
    pub item_timeout: f64,
    #[arg(long, value_enum, default_value = "oracle")]
    pub vlm: RunBackend,
    /// An ablation sweep: the split once per configuration, `full` or a flag of
    /// `reconstruct` without its dashes (`no-egr`, `no-lcb`, `no-pgr`, `no-reg`, `no-rag`,
    /// `no-evf`, and the fit's `no-fit`, `fit-steps`, `subpixel-fit`), each in RUNDIR/NAME/, and one table
    /// with a row per configuration.
    #[arg(long, value_delimiter = ',', conflicts_with = "sweep")]
    pub configs: Vec<String>,
    /// A sweep file: a TOML table `[configs]` of NAME = "config.toml" (a `reconstruct
    /// --config` each), run like --configs.
    #[arg(long, value_name = "FILE")]
    pub sweep: Option<PathBuf>,
    /// A baseline as one more row of the table: `direct-code` (the model writes one FreeCAD
    /// script per part; `reconstruct --baseline direct-code`). Also a name for --configs.
    #[arg(long, value_enum)]
    pub baseline: Option<crate::cli::commands::reconstruct::Baseline>,
    /// --vlm sim: one rate of the error model over several values, KEY=V1,V2,... (e.g.
    /// sigma=0,0.005,0.01,0.02,0.04), crossed with the configurations; writes curves.md and
    /// curves.svg / curves.png (mIoU, CR and edit10 mIoU against the rate).
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub vary: Option<String>,
    /// --vlm openai: model requests in flight at once across all jobs (each job's own
    /// `[vlm] concurrency` still applies within it).
    #[arg(long, default_value_t = 4)]
    pub vlm_concurrency: usize,
    /// Calibration: an oracle shadows the model on every part (`reconstruct --shadow-gt`
    /// with the part's folder), so `vision2cad sim-calibrate RUNDIR` can count its errors.
    #[arg(long)]
    pub shadow: bool,
    /// Options passed to every `reconstruct` (the same flags: --config, --model,
    /// --base-url, --cache, --rag-index, --max-steps, --no-egr ...), after `--`.
    #[arg(last = true)]
    pub reconstruct: Vec<String>,
    #[command(flatten)]
    pub shard: crate::cli::shard::ShardArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let configs = sweep_configs(args)?;
    if args.vlm != RunBackend::Openai && configs.iter().any(|(name, _)| name == DIRECT_CODE) {
        bail!(
            "the direct-code baseline needs a model that writes code (--vlm openai); the oracle only answers the loop's stages"
        );
    }
    let vary = match &args.vary {
        Some(text) => {
            anyhow::ensure!(
                args.vlm == RunBackend::Sim,
                "--vary varies a rate of the simulated VLM: use it with --vlm sim"
            );
            Some(parse_vary(text)?)
        }
        None => None,
    };
    let configs = match &vary {
        Some((key, values)) => {
            let base = if configs.is_empty() { vec![("full".to_string(), Vec::new())] } else { configs };
            let mut grid = Vec::new();
            for (name, extra) in &base {
                for v in values {
                    let mut extra = extra.clone();
                    extra.extend(["--sim".to_string(), format!("{key}={v}")]);
                    grid.push((format!("{name}_{key}={v}"), extra));
                }
            }
            grid
        }
        None => configs,
    };
    let shard = args.shard.resolve()?;
    // A shard writes into its own folder under the run's, so every machine can be given the
    // same command line.
    let folder = |base: PathBuf| match shard {
        Some(s) => base.join(s.name()),
        None => base,
    };
    if configs.is_empty() {
        let out = folder(args.out.clone());
        let results = run_split(args, &out, &[], shard)?;
        print!("{}", results.markdown());
        eprintln!("wrote {}/{{results.md, results.json, index.html}}", out.display());
        if shard.is_some() {
            eprintln!("when every shard is done: vision2cad merge {} --out {}", args.out.display(), args.out.display());
        }
        return Ok(exit_code(&[&results], &out));
    }
    if shard.is_some() {
        // The merge writes the sweep's table in the order the configurations were given.
        std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
        let sweep = SweepFile {
            configs: configs.iter().map(|(name, _)| name.clone()).collect(),
            vary: vary.as_ref().map(|(key, _)| key.clone()),
        };
        write_atomic(&args.out.join(SWEEP_FILE), serde_json::to_string_pretty(&sweep)?.as_bytes())?;
    }
    let mut rows = Vec::new();
    for (name, extra) in &configs {
        eprintln!("configuration {name}");
        let results = run_split(args, &folder(args.out.join(name)), extra, shard)?;
        rows.push((name.clone(), results));
    }
    if let Some(s) = shard {
        eprintln!(
            "{} of every configuration is done; when every shard is: vision2cad merge {} --out {}",
            s.name(),
            args.out.display(),
            args.out.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some((key, _)) = &vary {
        crate::cli::curves::write_curves(&args.out, key, &rows)?;
    }
    write_sweep(&args.out, &rows, vary.is_some())?;
    Ok(exit_code(&rows.iter().map(|(_, r)| r).collect::<Vec<_>>(), &args.out))
}

/// Failure when no part of any configuration reached the loop's end: something is wrong
/// with the run, not with its parts.
fn exit_code(results: &[&RunResults], out: &Path) -> ExitCode {
    let reached = results.iter().map(|r| r.status.finished + r.status.stopped).sum::<usize>();
    if reached > 0 {
        return ExitCode::SUCCESS;
    }
    let retry = results.iter().map(|r| r.status.crashed + r.status.backend_failed).sum::<usize>();
    eprintln!(
        "error: no part reached the loop's end; the reasons are in {}/results.md and each part's reconstruct.log{}",
        out.display(),
        if retry > 0 {
            "; parts the machine or the model server failed run again when the same command is repeated"
        } else {
            ""
        }
    );
    ExitCode::FAILURE
}

/// `KEY=V1,V2,...` of --vary.
fn parse_vary(text: &str) -> Result<(String, Vec<String>)> {
    let (key, values) = text.split_once('=').with_context(|| format!("--vary {text:?}: expected KEY=V1,V2,..."))?;
    let key = key.trim().to_string();
    let mut probe = vision2cad::vlm::SimRates::default();
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
    anyhow::ensure!(!values.is_empty(), "--vary {text:?} has no values");
    for v in &values {
        probe.set(&format!("{key}={v}")).map_err(|e| anyhow::anyhow!("--vary: {e}"))?;
    }
    Ok((key, values))
}

/// The sweep's table (a row per configuration), `results.json` and `index.html` in `out`.
pub(crate) fn write_sweep(out: &Path, rows: &[(String, RunResults)], curves: bool) -> Result<()> {
    let table = sweep_markdown(rows);
    std::fs::create_dir_all(out)?;
    write_atomic(&out.join("results.md"), table.as_bytes())?;
    #[derive(serde::Serialize)]
    struct Row<'a> {
        config: &'a str,
        results: &'a RunResults,
    }
    let json_rows: Vec<Row> = rows.iter().map(|(config, results)| Row { config, results }).collect();
    write_atomic(&out.join("results.json"), serde_json::to_string_pretty(&json_rows)?.as_bytes())?;
    write_atomic(&out.join("index.html"), sweep_html(rows, curves).as_bytes())?;
    print!("{table}");
    eprintln!("wrote {}/{{results.md, results.json, index.html}} and one folder per configuration", out.display());
    Ok(())
}

/// The configurations of a sweep, each with the options it adds to `reconstruct`.
fn sweep_configs(args: &RunArgs) -> Result<Vec<(String, Vec<String>)>> {
    let mut configs = loop_configs(args)?;
    if args.baseline.is_some() && !configs.iter().any(|(name, _)| name == DIRECT_CODE) {
        configs.push((DIRECT_CODE.into(), direct_code_args()));
    }
    Ok(configs)
}

/// The name of the direct-code baseline's row.
const DIRECT_CODE: &str = "direct-code";

fn direct_code_args() -> Vec<String> {
    vec!["--baseline".into(), DIRECT_CODE.into()]
}

fn loop_configs(args: &RunArgs) -> Result<Vec<(String, Vec<String>)>> {
    const FLAGS: [&str; 9] =
        ["no-egr", "no-lcb", "no-pgr", "no-reg", "no-rag", "no-evf", "no-fit", "fit-steps", "subpixel-fit"];
    if let Some(path) = &args.sweep {
        #[derive(Deserialize)]
        struct Sweep {
            configs: std::collections::BTreeMap<String, PathBuf>,
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read the sweep file {}", path.display()))?;
        let sweep: Sweep = toml::from_str(&text)
            .with_context(|| format!("{}: expected a [configs] table of NAME = \"file.toml\"", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        return sweep
            .configs
            .into_iter()
            .map(|(name, file)| {
                let file = if file.is_absolute() { file } else { base.join(file) };
                anyhow::ensure!(
                    file.is_file(),
                    "{}: configuration {name}: {} does not exist",
                    path.display(),
                    file.display()
                );
                check_name(&name)?;
                Ok((name, vec!["--config".into(), file.display().to_string()]))
            })
            .collect();
    }
    args.configs
        .iter()
        .map(|name| {
            let name = name.trim();
            check_name(name)?;
            if name == "full" {
                Ok((name.to_string(), Vec::new()))
            } else if name == DIRECT_CODE {
                Ok((name.to_string(), direct_code_args()))
            } else if FLAGS.contains(&name) {
                Ok((name.to_string(), vec![format!("--{name}")]))
            } else {
                bail!("unknown configuration {name:?} (full, {}, {DIRECT_CODE})", FLAGS.join(", "))
            }
        })
        .collect()
}

fn check_name(name: &str) -> Result<()> {
    anyhow::ensure!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "configuration name {name:?} must be letters, digits, - or _ (it names a folder)"
    );
    Ok(())
}

fn sweep_markdown(rows: &[(String, RunResults)]) -> String {
    let mut t = String::from(
        "| config | finished | static CR | static mIoU | static CD mean | static HD95 | edit10 CR | edit10 mIoU | edit10 CD mean | edit10 HD95 | tokens in | retrieval tokens | cost | s/part |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, r) in rows {
        let (s, e) = (&r.static_, &r.edit10);
        t.push_str(&format!(
            "| {name} | {}/{} | {:.3} | {} | {} | {} | {:.3} | {} | {} | {} | {} | {} | {} | {:.1} |\n",
            r.status.finished,
            r.parts,
            s.cr,
            fmt(s.miou, 4),
            fmt(s.cd_mean, 4),
            fmt(s.hd95, 4),
            e.cr,
            fmt(e.miou, 4),
            fmt(e.cd_mean, 4),
            fmt(e.hd95, 4),
            r.tokens.input,
            r.tokens.retrieval,
            fmt(r.cost, 4),
            r.seconds_per_part
        ));
    }
    t
}

/// The sweep's `index.html`: a sortable row per configuration, linked to its run, and the
/// curves when the sweep varied a rate.
fn sweep_html(rows: &[(String, RunResults)], curves: bool) -> String {
    use vision2cad::batch::html::{Cell, page, table};
    let mut body = String::from(
        "<p>One run per configuration over the same parts; click a configuration for its parts, a heading to \
         sort. Also as <a href=\"results.md\">results.md</a> and <a href=\"results.json\">results.json</a>.</p>\n",
    );
    let cells = rows
        .iter()
        .map(|(name, r)| {
            let (s, e) = (&r.static_, &r.edit10);
            let finished = Cell {
                sort: Some(r.status.finished as f64),
                ..Cell::text(&format!("{}/{}", r.status.finished, r.parts))
            };
            vec![
                Cell::link(&format!("{name}/index.html"), name),
                finished,
                Cell::number(Some(s.cr), 3),
                Cell::number(s.miou, 4),
                Cell::number(s.cd_median, 4),
                Cell::number(s.hd95, 4),
                Cell::number(Some(e.cr), 3),
                Cell::number(e.miou, 4),
                Cell::number(e.cd_median, 4),
                Cell::number(Some(r.tokens.input as f64), 0),
                Cell::number(r.cost, 4),
                Cell::number(Some(r.seconds_per_part), 1),
            ]
        })
        .collect();
    body.push_str(&table(
        &[
            "config",
            "finished",
            "static CR",
            "static mIoU",
            "static CD median",
            "static HD95",
            "edit10 CR",
            "edit10 mIoU",
            "edit10 CD median",
            "tokens in",
            "cost",
            "s/part",
        ],
        cells,
        true,
    ));
    if curves {
        body.push_str(
            "<h2>Curves</h2><p>Also as <a href=\"curves.md\">curves.md</a>, <a href=\"curves.json\">curves.json</a> and \
             <a href=\"curves.svg\">curves.svg</a>.</p><img src=\"curves.png\" alt=\"the metrics against the varied rate\">\n",
        );
    }
    page("vision2cad sweep", &body)
}

/// One run over the split into `out`, with `extra` options for every `reconstruct`.
fn run_split(args: &RunArgs, out: &Path, extra: &[String], shard: Option<Shard>) -> Result<RunResults> {
    anyhow::ensure!(args.jobs >= 1, "--jobs must be at least 1");
    anyhow::ensure!(args.vlm_concurrency >= 1, "--vlm-concurrency must be at least 1");
    anyhow::ensure!(args.item_timeout > 0.0, "--item-timeout must be a positive number of seconds");
    let split: Split = args.split.split();
    anyhow::ensure!(args.limit != Some(0), "--limit must be at least 1");
    anyhow::ensure!(args.dataset.exists(), "the dataset folder {} does not exist", args.dataset.display());
    if !args.dataset.join(gerd::record::PARTS_DIR).is_dir() {
        let holds_parts = std::fs::read_dir(&args.dataset)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join(gerd::record::PART_JSON).is_file());
        let one_part = args.dataset.join(gerd::record::PART_JSON).is_file();
        if holds_parts || one_part {
            let up = if one_part { 2 } else { 1 };
            let root = args.dataset.ancestors().nth(up).filter(|p| !p.as_os_str().is_empty());
            bail!(
                "{} is {} of a GERD dataset, not the dataset: give the folder that holds parts/{}",
                args.dataset.display(),
                if one_part { "one part" } else { "the parts folder" },
                root.map(|r| format!(" (--dataset {})", r.display())).unwrap_or_default()
            );
        }
        bail!("{} is not a GERD dataset (no parts/ folder in it)", args.dataset.display());
    }
    let dataset = args.dataset.canonicalize().with_context(|| format!("cannot read {}", args.dataset.display()))?;
    let mut parts: Vec<PathBuf> = Vec::new();
    for dir in part_dirs(&dataset)? {
        if read_part(&dir)?.split == split {
            parts.push(dir);
        }
    }
    if let Some(n) = args.limit {
        parts.truncate(n);
    }
    anyhow::ensure!(!parts.is_empty(), "{} has no {} parts", dataset.display(), split.name());
    if let Some(s) = shard {
        parts.retain(|p| s.holds(&runner::part_id(p)));
        eprintln!("{}: {} parts", s.name(), parts.len());
    }
    let ids: Vec<String> = parts.iter().map(|p| runner::part_id(p)).collect();
    // What every part's `reconstruct` gets: the run's options, then the configuration's.
    let options: Vec<String> = args.reconstruct.iter().chain(extra).cloned().collect();
    check_index_holds_none_of(&options, &ids)?;
    let settings = RunSettings {
        dataset: dataset.clone(),
        split: split.name().into(),
        vlm: args.vlm,
        reconstruct: options.clone(),
        parts: ids.clone(),
        shard,
    };
    std::fs::create_dir_all(out.join("parts")).with_context(|| format!("cannot create {}", out.display()))?;
    let settings_path = out.join("run.json");
    if settings_path.is_file() {
        let earlier: RunSettings = serde_json::from_str(&std::fs::read_to_string(&settings_path)?)
            .with_context(|| format!("{} is not a run's settings", settings_path.display()))?;
        if earlier != settings {
            bail!(
                "{} holds a run with other settings (dataset, split, backend, options or parts); use another --out",
                out.display()
            );
        }
    } else {
        write_atomic(&settings_path, serde_json::to_string_pretty(&settings)?.as_bytes())?;
    }
    // Unfinished parts of an interrupted run start again.
    let todo = runner::parts_to_run(&parts, out)?;
    let skipped = parts.len() - todo.len();
    if skipped > 0 {
        eprintln!("{skipped} of {} parts are already done; running the other {}", parts.len(), todo.len());
    }

    if args.vlm == RunBackend::Openai
        && let Some(first) = todo.first()
    {
        check_backend(&first.join("target.png"), &options)?;
    }

    // One limit on requests in flight for the whole run, whatever --jobs is.
    let slots = format!("{}:{}", args.vlm_concurrency.max(1), out.join(".vlm-slots").display());
    let part_runner = PartRunner {
        program: std::env::current_exe().context("cannot locate the vision2cad executable")?,
        backend: args.vlm,
        shadow: args.shadow,
        options,
        worker_timeout: args.worker.timeout,
        item_timeout: Duration::from_secs_f64(args.item_timeout),
        env: vec![(crate::cli::env::VLM_SLOTS.into(), slots.into())],
    };
    let progress = Progress::new("parts", todo.len());
    let started = Instant::now();
    part_runner.run_all(todo, out, args.jobs, |part, item| {
        progress.tick(item.as_ref().map_or(true, |i| !i.status.reached_the_end()));
        if let Err(e) = item {
            eprintln!("{}: {e}", runner::part_id(part));
        }
    });
    progress.finish();
    let wall = started.elapsed().as_secs_f64();

    // Evaluation, both protocols, over every part of the run (resumed ones included).
    let gt_programs = out.join("gt");
    std::fs::create_dir_all(&gt_programs)?;
    let mut static_pairs = Vec::new();
    let mut edit_pairs = Vec::new();
    for part in &parts {
        let id = runner::part_id(part);
        let record = read_part(part)?;
        let gt_program = gt_programs.join(format!("{id}.json"));
        write_atomic(&gt_program, serde_json::to_string_pretty(&record.program)?.as_bytes())?;
        // The loop's program, or the document a baseline's script built.
        let pred = ["program.json", "model.FCStd"]
            .into_iter()
            .map(|f| out.join("parts").join(&id).join(f))
            .find(|p| p.is_file());
        static_pairs.push(eval::Pair { id: id.clone(), pred: pred.clone(), gt: part.join(&record.files.model_step) });
        edit_pairs.push(eval::Pair { id, pred, gt: gt_program });
    }
    let pool = WorkerPool::new(args.worker.config()?, args.jobs);
    let evaluate = |protocol: Protocol, pairs: &[eval::Pair]| -> Result<Report> {
        let options = EvalOptions { protocol, ..EvalOptions::default() };
        let progress = Progress::new(&format!("{} evaluations", protocol.name()), pairs.len());
        let report = eval::evaluate(&pool, pairs, &options, || progress.tick(false))?;
        progress.finish();
        Ok(report)
    };
    let static_report = evaluate(Protocol::Static, &static_pairs)?;
    let edit_report = evaluate(Protocol::Edit10, &edit_pairs)?;
    write_atomic(&out.join("eval_static.json"), serde_json::to_string_pretty(&static_report)?.as_bytes())?;
    write_atomic(&out.join("eval_edit10.json"), serde_json::to_string_pretty(&edit_report)?.as_bytes())?;

    write_results(out, &settings, &static_report, &edit_report, wall)
}

/// The retrieval index the parts' `reconstruct` will read with `options` (`--no-rag`,
/// `--rag-index`, a `--config` file's keys, else the default index), when there is one.
fn index_of(options: &[String]) -> Result<Option<PathBuf>> {
    let value = |flag: &str| {
        options.iter().enumerate().rev().find_map(|(i, o)| {
            o.strip_prefix(&format!("{flag}="))
                .map(str::to_owned)
                .or_else(|| (o == flag).then(|| options.get(i + 1).cloned()).flatten())
        })
    };
    let config = value("--config").map(|c| vision2cad::Config::from_file(c.as_ref())).transpose()?;
    if options.iter().any(|o| o == "--no-rag") || config.as_ref().is_some_and(|c| c.ablations.no_rag) {
        return Ok(None);
    }
    Ok(value("--rag-index")
        .map(PathBuf::from)
        .or_else(|| config.and_then(|c| c.rag_index))
        .or_else(crate::cli::commands::default_index::existing))
}

/// A part retrieving its own steps would be shown its answer: refuse a run over parts the
/// retrieval index holds.
fn check_index_holds_none_of(options: &[String], ids: &[String]) -> Result<()> {
    let Some(index) = index_of(options)? else { return Ok(()) };
    let Ok(held) = gerd::retrieve::RetrievalIndex::parts_of(&index) else {
        return Ok(()); // reconstruct reports an unreadable index itself, with its reason
    };
    if let Some(id) = ids.iter().find(|id| held.contains_key(*id)) {
        bail!(
            "the retrieval index {} holds {id}, a part of this run: Stage 1 would be shown its own steps; \
             run another split or dataset, or give --no-rag or another --rag-index after --",
            index.display()
        );
    }
    Ok(())
}

/// Before any part runs: the model server takes the key, answers and serves the model,
/// checked by `reconstruct --check-backend` with the options every part gets, so a run
/// with a missing key or a server that is down stops at once instead of failing every part.
fn check_backend(image: &Path, options: &[String]) -> Result<()> {
    let program = std::env::current_exe().context("cannot locate the vision2cad executable")?;
    let out = std::process::Command::new(program)
        .arg("reconstruct")
        .arg(image)
        .args(["--vlm", "openai", "--check-backend"])
        .args(options)
        .output()
        .context("cannot check the model server")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("\n");
        bail!("the model server cannot be used, so no part was run:\n{reason}");
    }
    Ok(())
}

/// `results.json`, `results.md` and `index.html` of a run whose parts and evaluation
/// reports are in `out`.
pub(crate) fn write_results(
    out: &Path,
    settings: &RunSettings,
    static_report: &Report,
    edit_report: &Report,
    wall: f64,
) -> Result<RunResults> {
    let items = runner::read_items(out, &settings.parts);
    let results = RunResults::new(settings, &items, static_report, edit_report, wall);
    write_atomic(&out.join("results.json"), serde_json::to_string_pretty(&results)?.as_bytes())?;
    write_atomic(&out.join("results.md"), results.markdown().as_bytes())?;
    write_atomic(&out.join("index.html"), results.index_html(out).as_bytes())?;
    Ok(results)
}
