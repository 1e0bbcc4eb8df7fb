//! `vision2cad gerd`: generate, import, validate and export GERD datasets.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::progress::Progress;
use crate::cli::shard::ShardArgs;
use anyhow::{Context, Result, bail};
use freecad_bridge::WorkerPool;
use gerd::export::{Format, Task};
use gerd::import::Placement;
use gerd::import::folder::{SourceFile, deepcad_files};
use gerd::record::{PartSource, RecordOptions, Split, part_dir, read_part, write_index, write_part};

use crate::cli::WorkerArgs;

#[derive(Debug, clap::Args)]
pub struct GerdArgs {
    #[command(subcommand)]
    pub command: GerdCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum GerdCommand {
    /// Generate procedural parts (resumable: parts already written are kept).
    Generate(GenerateArgs),
    /// Import public construction sequences into GERD records.
    Import(ImportArgs),
    /// Re-execute every record and compare it with its stored STEP files.
    Validate(ValidateArgs),
    /// Export training samples.
    Export(ExportArgs),
    /// Build the GERD-RET retrieval index over a split's modeling steps.
    Index(IndexArgs),
    /// Query a retrieval index with a target image (and a state): the most similar steps.
    Query(QueryArgs),
    /// Build the default retrieval index (set-up does): generated parts and DeepCAD JSON
    /// that no evaluation uses. `reconstruct` and `run` retrieve from it unless --no-rag or
    /// --rag-index.
    DefaultIndex(crate::cli::commands::default_index::DefaultIndexArgs),
}

#[derive(Debug, clap::Args)]
pub struct IndexArgs {
    /// The GERD dataset.
    pub dir: PathBuf,
    #[arg(long, value_enum, default_value = "train")]
    pub split: SplitArg,
    /// Index directory (created; files in it replaced).
    #[arg(long)]
    pub out: PathBuf,
    /// Weight of target-image similarity against state similarity.
    #[arg(long, default_value_t = 0.6)]
    pub lambda: f64,
    /// `builtin` (offline, deterministic) or `http` (an OpenAI-compatible /embeddings server).
    #[arg(long, value_parser = ["builtin", "http"], default_value = "builtin")]
    pub embedder: String,
    /// --embedder http: the embedding model.
    #[arg(long)]
    pub embed_model: Option<String>,
    /// --embedder http: the server (else VISION2CAD_EMBED_BASE_URL, VISION2CAD_BASE_URL...).
    #[arg(long)]
    pub embed_url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// The index directory (`gerd index --out`).
    pub index: PathBuf,
    /// The target image.
    #[arg(long)]
    pub image: PathBuf,
    /// The current model's state (a `state.json` from `exec` or `reconstruct`); the empty
    /// model when left out.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// The commands so far (a program .json, e.g. a reconstruction's program.json).
    #[arg(long)]
    pub program: Option<PathBuf>,
    /// Hits (at most one per part).
    #[arg(short, long, default_value_t = 3)]
    pub k: usize,
    /// HNSW search list length.
    #[arg(long, default_value_t = gerd::retrieve::EF_SEARCH)]
    pub ef: usize,
    /// The /embeddings server, for an index built with --embedder http.
    #[arg(long)]
    pub embed_url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    #[arg(long)]
    pub count: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Dataset directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Train, validation and test proportions (GERD: 2500,100,100).
    #[arg(long, value_delimiter = ',', default_value = "2500,100,100")]
    pub split: Vec<usize>,
    /// Parallel FreeCAD workers (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// Width and height of the views.
    #[arg(long, default_value_t = 500)]
    pub view_size: u32,
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub source: ImportSource,
}

#[derive(Debug, clap::Subcommand)]
pub enum ImportSource {
    /// The CadQuery programs of CAD-Coder's test100 (a DeepCAD subset); split `test`.
    Cadcoder {
        /// `cadquery_test_data_subset100.jsonl` (rows with `image` and `ground_truth`).
        #[arg(long)]
        jsonl: PathBuf,
        /// Folder of the ground-truth `<id>.step` files (recorded in the provenance).
        #[arg(long)]
        steps: PathBuf,
        /// Folder of the `<id>_0.png` images; each becomes the part's target.png.
        #[arg(long)]
        images: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        workers: usize,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// DeepCAD JSON models: PATH is one file, a folder (searched recursively for *.json)
    /// or a text file listing them (one path per line, relative to the list). Split
    /// `train`. Every file's outcome goes to OUT/import-report.jsonl; a run resumes.
    Deepcad {
        path: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        workers: usize,
        /// The files' length unit: `auto` (metres when every length is below 1, as in
        /// DeepCAD's raw files; else millimetres), `m` or `mm`. Parts are in millimetres.
        #[arg(long, default_value = "auto", value_parser = ["auto", "m", "mm"])]
        units: String,
        #[command(flatten)]
        shard: ShardArgs,
        #[command(flatten)]
        worker: WorkerArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    pub dir: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskArg {
    NextCommand,
    EntitySelection,
    /// Stage 1 requests of the loop (the oracle rebuilding each part) with the oracle's answers.
    Stage1,
    /// Stage 2 requests (sketches in view coordinates) with the oracle's drawings.
    Stage2,
    /// Stage 3 requests (previews) with the oracle's verdicts, accepts and rejects.
    Stage3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Jsonl,
    Llava,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitArg {
    Train,
    Val,
    Test,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    pub dir: PathBuf,
    #[arg(long, value_enum)]
    pub task: TaskArg,
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: FormatArg,
    #[arg(long)]
    pub out: PathBuf,
    /// Only this split (default: all, each sample tagged with its split).
    #[arg(long, value_enum)]
    pub split: Option<SplitArg>,
    /// stage1-3: share of steps whose first candidate is perturbed (a length x1.5), so
    /// Stage 3 sees rejections.
    #[arg(long, default_value_t = 0.3)]
    pub perturb: f64,
    /// stage1-3: seed of the perturbations.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// stage1-3: the loop's configuration (TOML), as `reconstruct --config` takes it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A shard of the parts: writes OUT.shard-I-of-N.EXT; `vision2cad merge` joins them.
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &GerdArgs) -> Result<ExitCode> {
    match &args.command {
        GerdCommand::Generate(a) => generate(a),
        GerdCommand::Import(a) => import(a),
        GerdCommand::Validate(a) => validate(a),
        GerdCommand::Export(a) => export(a),
        GerdCommand::Index(a) => index(a),
        GerdCommand::Query(a) => query(a),
        GerdCommand::DefaultIndex(a) => crate::cli::commands::default_index::run(a),
    }
}

/// Where the shards of a sharded `gerd generate` record what they wrote.
pub const SHARDS_DIR: &str = "shards";

/// Sizes of train, val and test for `count` parts in the given proportions.
pub fn split_sizes(count: usize, proportions: &[usize]) -> Result<[usize; 3]> {
    let total: usize = proportions.iter().sum();
    anyhow::ensure!(proportions.len() == 3 && total > 0, "--split needs three proportions with a positive sum");
    let val = (count * proportions[1] + total / 2) / total;
    let test = (count * proportions[2] + total / 2) / total;
    let val = val.min(count);
    let test = test.min(count - val);
    Ok([count - val - test, val, test])
}

fn split_of(index: usize, sizes: [usize; 3]) -> Split {
    if index < sizes[0] {
        Split::Train
    } else if index < sizes[0] + sizes[1] {
        Split::Val
    } else {
        Split::Test
    }
}

fn generate(args: &GenerateArgs) -> Result<ExitCode> {
    generate_shard(args, args.shard.resolve()?)
}

/// `gerd generate` for one shard (`None`: every part, and the dataset's index written).
pub(crate) fn generate_shard(args: &GenerateArgs, shard: Option<crate::cli::shard::Shard>) -> Result<ExitCode> {
    let sizes = split_sizes(args.count, &args.split)?;
    std::fs::create_dir_all(args.out.join(gerd::record::PARTS_DIR))
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let id_of = |i: usize| format!("gen-{}-{i:05}", args.seed);
    let mine: Vec<usize> = (0..args.count).filter(|&i| shard.is_none_or(|s| s.holds(&id_of(i)))).collect();
    // Resume: parts whose record reads back are done.
    let todo: Vec<usize> =
        mine.iter().copied().filter(|&i| read_part(&part_dir(&args.out, &id_of(i))).is_err()).collect();
    if todo.len() < mine.len() {
        eprintln!("resuming: {} of {} parts already written", mine.len() - todo.len(), mine.len());
    }
    let pool = WorkerPool::new(args.worker.config()?, args.workers);
    let bar = Progress::new("generating", todo.len());
    let options = RecordOptions { view_size: args.view_size };
    let started = std::time::Instant::now();
    // A lost worker reruns the same draw from its start (the pool's fault retries), so a
    // fault never turns one part into another.
    let results = pool.map(
        &todo,
        |session, &index| {
            let split = split_of(index, sizes);
            Ok(gerd::generate::generate(session, args.seed, index, split)
                .and_then(|part| write_part(session, &part, &args.out, &options))
                .map(|_| ())
                .map_err(|e| e.to_string()))
        },
        |r| bar.tick(!matches!(r, Ok(Ok(())))),
    );
    bar.finish();
    let failures: Vec<String> = todo
        .iter()
        .zip(results)
        .filter_map(|(index, r)| {
            r.map_err(|e| e.to_string()).and_then(|r| r).err().map(|e| format!("part {index}: {e}"))
        })
        .collect();
    if let Some(s) = shard {
        // The index covers every shard's parts, so only the merge writes it.
        let record = serde_json::json!({
            "seed": args.seed, "count": args.count, "split": args.split, "shard": s,
            "parts": mine.iter().map(|&i| id_of(i)).collect::<Vec<_>>(), "failures": failures,
        });
        let path = args.out.join(SHARDS_DIR).join(format!("generate.{}.json", s.name()));
        std::fs::create_dir_all(args.out.join(SHARDS_DIR))?;
        crate::cli::files::write_atomic(&path, serde_json::to_string_pretty(&record)?.as_bytes())?;
        eprintln!(
            "{}: {} parts written to {}; when every shard is done: vision2cad merge {} --out {}",
            s.name(),
            mine.len() - failures.len(),
            args.out.display(),
            args.out.display(),
            args.out.display()
        );
        for f in &failures {
            eprintln!("failed: {f}");
        }
        return Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let entries = write_index(&args.out)?;
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "{} parts in {} ({} new in {:.1} min, {:.1} parts/min with {} workers); index.jsonl written",
        entries.len(),
        args.out.display(),
        todo.len() - failures.len(),
        minutes,
        (todo.len() - failures.len()) as f64 / minutes.max(1e-9),
        pool.workers()
    );
    for f in &failures {
        eprintln!("failed: {f}");
    }
    Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One test100 row: the image names the part.
#[derive(Debug, serde::Deserialize)]
struct CadcoderRow {
    image: String,
    ground_truth: String,
}

/// Where a test100 row's inputs are named from, for its provenance.
struct CadcoderNames<'a> {
    jsonl: &'a std::path::Path,
    steps: &'a std::path::Path,
    images: &'a std::path::Path,
}

/// Why a test100 row did not import: the converter refused it, or the record could not be
/// written (its steps or its 10% edit failed).
#[derive(Debug, thiserror::Error)]
enum RowFailure {
    #[error(transparent)]
    Import(#[from] gerd::import::ImportError),
    #[error(transparent)]
    Record(#[from] gerd::GerdError),
}

fn import_cadcoder_row(
    session: &mut freecad_bridge::Session,
    row: &CadcoderRow,
    id: &str,
    names: &CadcoderNames,
    out: &std::path::Path,
    placement: Placement,
    note: Option<String>,
) -> Result<(), RowFailure> {
    let mut imported = gerd::import::import_cadquery_with(&row.ground_truth, session, placement)?;
    imported.notes.extend(note);
    let part = PartSource {
        id: id.to_string(),
        source: "cadcoder-test100".into(),
        split: Split::Test,
        licence: "Apache-2.0 (CAD-Coder, anniedoris/CAD-Coder inference/)".into(),
        // Names, not this machine's paths: a dataset moves.
        provenance: format!(
            "{} row {}; ground-truth STEP {}/{id}.step; {}",
            file_name(names.jsonl),
            row.image,
            file_name(names.steps),
            imported.notes.join("; ")
        ),
        program: imported.program,
        target_image: Some(names.images.join(&row.image)),
    };
    write_part(session, &part, out, &RecordOptions::default())?;
    Ok(())
}

fn import(args: &ImportArgs) -> Result<ExitCode> {
    match &args.source {
        ImportSource::Cadcoder { jsonl, steps, images, out, workers, worker } => {
            let text = std::fs::read_to_string(jsonl).with_context(|| format!("cannot read {}", jsonl.display()))?;
            let rows: Vec<CadcoderRow> = text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{} line {}", jsonl.display(), i + 1)))
                .collect::<Result<_>>()?;
            std::fs::create_dir_all(out.join(gerd::record::PARTS_DIR))
                .with_context(|| format!("cannot create {}", out.display()))?;
            let pool = WorkerPool::new(worker.config()?, *workers);
            let bar = Progress::new("importing", rows.len());
            let results = pool.map(
                &rows,
                |session, row| {
                    let id = row.image.trim_end_matches(".png").trim_end_matches("_0").to_string();
                    let names = CadcoderNames { jsonl, steps, images };
                    let first = import_cadcoder_row(session, row, &id, &names, out, Placement::FacesFirst, None);
                    let outcome = match first {
                        // FreeCAD 0.20 renames faces when an earlier depth changes, and a
                        // sketch on a renamed face loses its support: place every sketch on
                        // a plane instead, which the edit cannot take away.
                        Err(RowFailure::Record(gerd::GerdError::Ex10p { error, .. })) => {
                            let note = format!(
                                "every sketch on a plane: with sketches on faces the 10% edit failed ({error})"
                            );
                            session.reset()?;
                            import_cadcoder_row(session, row, &id, &names, out, Placement::PlanesOnly, Some(note))
                        }
                        other => other,
                    };
                    Ok(outcome.map_err(|e| format!("{id}: {e}")))
                },
                |r| bar.tick(!matches!(r, Ok(Ok(())))),
            );
            bar.finish();
            write_index(out)?;
            let failures: Vec<String> =
                results.into_iter().filter_map(|r| r.map_err(|e| e.to_string()).and_then(|r| r).err()).collect();
            eprintln!("imported {} of {} parts into {}", rows.len() - failures.len(), rows.len(), out.display());
            for f in &failures {
                eprintln!("not imported: {f}");
            }
            Ok(if failures.len() < rows.len() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        ImportSource::Deepcad { path, out, workers, units, shard, worker } => {
            let units = match units.as_str() {
                "m" => gerd::import::Units::Metres,
                "mm" => gerd::import::Units::Millimetres,
                _ => gerd::import::Units::Auto,
            };
            import_deepcad_files(path, out, *workers, units, shard.resolve()?, worker)
        }
    }
}

fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let dirs =
        gerd::record::part_dirs(&args.dir).with_context(|| format!("{} is not a GERD dataset", args.dir.display()))?;
    anyhow::ensure!(!dirs.is_empty(), "{} holds no parts", args.dir.display());
    let pool = WorkerPool::new(args.worker.config()?, args.workers);
    let bar = Progress::new("validating", dirs.len());
    let reports = pool.map(
        &dirs,
        |session, dir| Ok(gerd::validate::validate_part(session, dir)),
        |r| bar.tick(!matches!(r, Ok(report) if report.problems.is_empty())),
    );
    bar.finish();
    let mut bad = 0;
    for (dir, report) in dirs.iter().zip(reports) {
        match report {
            Ok(r) if r.problems.is_empty() => {}
            Ok(r) => {
                bad += 1;
                println!("{}:", r.id);
                for p in &r.problems {
                    println!("  - {p}");
                }
            }
            Err(e) => {
                bad += 1;
                println!("{}:\n  - {e}", dir.display());
            }
        }
    }
    println!("{} parts, {} valid, {} with problems", dirs.len(), dirs.len() - bad, bad);
    Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn export(args: &ExportArgs) -> Result<ExitCode> {
    let task = match args.task {
        TaskArg::NextCommand => Task::NextCommand,
        TaskArg::EntitySelection => Task::EntitySelection,
        TaskArg::Stage1 => return export_stage(args, vision2cad::vlm::Stage::Stage1),
        TaskArg::Stage2 => return export_stage(args, vision2cad::vlm::Stage::Stage2),
        TaskArg::Stage3 => return export_stage(args, vision2cad::vlm::Stage::Stage3),
    };
    let format = match args.format {
        FormatArg::Jsonl => Format::Jsonl,
        FormatArg::Llava => Format::Llava,
    };
    let split = args.split.map(SplitArg::split);
    if !args.dir.join(gerd::record::INDEX).is_file() && !args.dir.join(gerd::record::PARTS_DIR).is_dir() {
        bail!("{} is not a GERD dataset (no index.jsonl or parts/)", args.dir.display());
    }
    let shard = args.shard.resolve()?;
    let out = crate::cli::shard::shard_file(&args.out, shard);
    let samples = gerd::export::samples(&args.dir, task, split, |id| shard.is_none_or(|s| s.holds(id)))?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    gerd::export::write(&samples, format, &out)?;
    eprintln!("wrote {} samples to {}", samples.len(), out.display());
    Ok(ExitCode::SUCCESS)
}

impl SplitArg {
    pub fn split(self) -> Split {
        match self {
            SplitArg::Train => Split::Train,
            SplitArg::Val => Split::Val,
            SplitArg::Test => Split::Test,
        }
    }
}

pub(crate) fn index(args: &IndexArgs) -> Result<ExitCode> {
    if !args.dir.join(gerd::record::PARTS_DIR).is_dir() {
        bail!("{} is not a GERD dataset (no parts/)", args.dir.display());
    }
    let started = std::time::Instant::now();
    let bar = Progress::new("indexing", 0);
    let mut embedder: Box<dyn gerd::retrieve::embed::Embedder> = match args.embedder.as_str() {
        "http" => {
            let model = args.embed_model.as_deref().context("--embedder http needs --embed-model")?;
            Box::new(http_embedder(model, args.embed_url.as_deref())?)
        }
        _ => Box::new(gerd::retrieve::embed::Builtin),
    };
    let index = gerd::retrieve::RetrievalIndex::build(
        &args.dir,
        args.split.split(),
        embedder.as_mut(),
        args.lambda,
        |done, total| bar.set(done, total),
    )?;
    bar.finish();
    index.save(&args.out)?;
    eprintln!(
        "indexed {} steps of {} {} parts in {:.1} s; wrote {}",
        index.entries().len(),
        index.meta.dataset.parts,
        index.meta.dataset.split.name(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn query(args: &QueryArgs) -> Result<ExitCode> {
    let mut embedder = embedder_for_index(&args.index, args.embed_url.as_deref())?
        .unwrap_or_else(|| Box::new(gerd::retrieve::embed::Builtin));
    let index = gerd::retrieve::RetrievalIndex::load(&args.index, &embedder.id())?;
    let image = image::open(&args.image)
        .with_context(|| format!("cannot read the target image {}", args.image.display()))?
        .to_rgb8();
    let state = match &args.state {
        Some(path) => serde_json::from_str(
            &std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?,
        )
        .with_context(|| format!("{} is not a model state (state.json)", path.display()))?,
        None => freecad_bridge::ModelState::empty(),
    };
    let history = match &args.program {
        Some(path) => crate::cli::files::read_program(path)?.commands,
        None => Vec::new(),
    };
    let query = index.query_vector(
        embedder.embed_image(&image).map_err(anyhow::Error::msg)?,
        embedder.embed_state(&state, &history).map_err(anyhow::Error::msg)?,
    )?;
    let hits = index.search(&query, args.k.max(1), args.ef);
    println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "hits": hits }))?);
    Ok(ExitCode::SUCCESS)
}

/// `gerd export --task stage1|stage2|stage3`: the loop's own requests, the oracle's answers.
fn export_stage(args: &ExportArgs, stage: vision2cad::vlm::Stage) -> Result<ExitCode> {
    use std::io::Write;
    anyhow::ensure!(
        args.format == FormatArg::Jsonl,
        "stage tasks are written as JSON lines (--format jsonl): their samples carry several images"
    );
    anyhow::ensure!((0.0..=1.0).contains(&args.perturb), "--perturb must be between 0 and 1");
    if !args.dir.join(gerd::record::PARTS_DIR).is_dir() {
        bail!("{} is not a GERD dataset (no parts/)", args.dir.display());
    }
    let config = match &args.config {
        Some(path) => vision2cad::Config::from_file(path)?,
        None => vision2cad::Config::default(),
    };
    let split = args.split.map(SplitArg::split);
    // Retrieval during the export must not see the exported parts: their own steps would be
    // the examples, and the answers would leak into the prompts.
    let indexed: std::collections::BTreeSet<String> = match (&config.rag_index, config.ablations.no_rag) {
        (Some(index), false) => gerd::retrieve::RetrievalIndex::parts_of(index)?.into_keys().collect(),
        _ => Default::default(),
    };
    let shard = args.shard.resolve()?;
    let dirs: Vec<PathBuf> = gerd::record::part_dirs(&args.dir)?
        .into_iter()
        .filter(|d| split.is_none_or(|s| read_part(d).is_ok_and(|r| r.split == s)))
        .filter(|d| shard.is_none_or(|s| s.holds(&d.file_name().unwrap_or_default().to_string_lossy())))
        .collect();
    let args_out = &crate::cli::shard::shard_file(&args.out, shard);
    let jsonl_dir =
        args_out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).to_path_buf();
    std::fs::create_dir_all(&jsonl_dir).with_context(|| format!("cannot create {}", jsonl_dir.display()))?;
    let stem = args_out.file_stem().map_or("samples".into(), |s| s.to_string_lossy().into_owned());
    let images = jsonl_dir.join(format!("{stem}_images"));
    let partial = args_out.with_extension("jsonl.partial");
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?,
    );
    // An index whose embedder cannot be set up stops the export before any part.
    if let (Some(index), false) = (&config.rag_index, config.ablations.no_rag) {
        embedder_for_index(index, None)?;
    }
    let mut session = args.worker.session()?;
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let bar = Progress::new(&format!("{} samples", stage.name()), dirs.len());
    let (mut written, mut failed) = (0, Vec::new());
    for dir in &dirs {
        let record = read_part(dir)?;
        if indexed.contains(&record.id) {
            bail!(
                "the retrieval index of the config holds {}, a part being exported: Stage 1 would retrieve its own steps; index another split",
                record.id
            );
        }
        let work = scratch.path().join(&record.id);
        let embedder = || match (&config.rag_index, config.ablations.no_rag) {
            (Some(index), false) => {
                embedder_for_index(index, None).map_err(|e| vision2cad::LoopError::Rag(format!("{e:#}")))
            }
            _ => Ok(None),
        };
        let recorded = vision2cad::stage_export::record_part_undisturbed(
            dir,
            &work,
            &config,
            &mut session,
            args.perturb,
            args.seed,
            embedder,
        );
        match recorded {
            Ok(samples) => {
                written += vision2cad::stage_export::write_samples(
                    &samples,
                    &record.id,
                    record.split.name(),
                    stage,
                    &mut file,
                    &jsonl_dir,
                    &images,
                )?;
            }
            Err(e) => {
                bar.failed();
                failed.push(format!("{}: {e}", record.id));
            }
        }
        let _ = std::fs::remove_dir_all(&work);
        bar.tick(false);
    }
    bar.finish();
    file.flush().with_context(|| format!("cannot write {}", partial.display()))?;
    drop(file);
    if written == 0 {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "no {} samples: {}",
            stage.name(),
            if failed.is_empty() { "no parts to export".into() } else { failed.join("; ") }
        );
    }
    std::fs::rename(&partial, args_out).with_context(|| format!("cannot write {}", args_out.display()))?;
    eprintln!(
        "wrote {written} {} samples of {} parts to {} (images in {})",
        stage.name(),
        dirs.len() - failed.len(),
        args_out.display(),
        images.display()
    );
    for f in &failed {
        eprintln!("skipped {f}");
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn http_embedder(model: &str, url: Option<&str>) -> Result<vision2cad::vlm::HttpEmbedder> {
    let url = url
        .map(str::to_owned)
        .or_else(crate::cli::env::embed_base_url)
        .unwrap_or_else(|| vision2cad::vlm::VlmSettings::DEFAULT_BASE_URL.to_string());
    vision2cad::vlm::HttpEmbedder::new(model, &url, crate::cli::env::api_key()).map_err(anyhow::Error::msg)
}

/// The embedder an index needs for its queries: `None` for the built-in one, the HTTP
/// embedder of the index's model otherwise.
pub fn embedder_for_index(
    index: &std::path::Path,
    url: Option<&str>,
) -> Result<Option<Box<dyn gerd::retrieve::embed::Embedder>>> {
    let id = gerd::retrieve::RetrievalIndex::embedder_of(index)?;
    Ok(match id.strip_prefix("http:") {
        Some(model) => Some(Box::new(http_embedder(model, url)?)),
        None => None,
    })
}

/// `gerd import deepcad PATH`: every file, in parallel, resumable, with a report.
pub(crate) fn import_deepcad_files(
    path: &std::path::Path,
    out: &std::path::Path,
    workers: usize,
    units: gerd::import::Units,
    shard: Option<crate::cli::shard::Shard>,
    worker: &WorkerArgs,
) -> Result<ExitCode> {
    let files: Vec<SourceFile> =
        deepcad_files(path)?.into_iter().filter(|f| shard.is_none_or(|s| s.holds(&f.part_id()))).collect();
    let pool = WorkerPool::new(worker.config()?, workers);
    let pending = gerd::import::folder::already_imported(&files, out);
    if !pending.earlier.is_empty() {
        eprintln!("resuming: {} of {} files already imported", pending.earlier.len(), files.len());
    }
    let bar = Progress::new("importing", pending.todo.len());
    let import =
        gerd::import::folder::import_deepcad_files(&files, pending, out, &pool, units, |failed| bar.tick(failed))?;
    bar.finish();
    let report_path = crate::cli::shard::shard_file(&out.join("import-report.jsonl"), shard);
    crate::cli::files::write_atomic(&report_path, import.report_lines().as_bytes())?;
    if shard.is_none() {
        write_index(out)?;
    }
    let imported = import.imported();
    eprintln!(
        "imported {imported} of {} files into {}; report in {}",
        files.len(),
        out.display(),
        report_path.display()
    );
    for (class, n) in import.failure_classes() {
        eprintln!("{n:>6}  {class}");
    }
    if let Some(s) = shard {
        eprintln!("{}: when every shard is done: vision2cad merge {} --out {}", s.name(), out.display(), out.display());
    }
    Ok(if imported > 0 || files.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}
