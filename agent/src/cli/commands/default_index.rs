//! The default retrieval index: what `reconstruct` and `run` retrieve from unless `--no-rag`
//! or another `--rag-index` is given. `vision2cad gerd default-index` builds it (set-up
//! does) from data no evaluation here uses: parts generated with a seed of their own, and
//! DeepCAD JSON when given (set-up gives the public sample). Never test100, never a test
//! split.
//!
//! It lives in `VISION2CAD_RAG_HOME` (default `$XDG_DATA_HOME/vision2cad/rag`, else
//! `~/.local/share/vision2cad/rag`): `dataset/` (the GERD parts, whose views Stage 1 shows)
//! and `index/` (GERD-RET). The index is written last, under another name and renamed, so a
//! folder with `index/` holds a finished one.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::cli::WorkerArgs;
use crate::cli::commands::gerd::{GenerateArgs, IndexArgs, SplitArg, generate_shard, import_deepcad_files};
use crate::cli::env;
use crate::cli::shard::ShardArgs;

/// The generator's seed for the default index: one no evaluation, test or document here uses.
pub const SEED: u64 = 1000;
/// Generated parts in the default index (50 of each of the eight families).
pub const COUNT: usize = 400;

#[derive(Debug, clap::Args)]
pub struct DefaultIndexArgs {
    /// Generated parts to index (seed 1000, which no evaluation uses).
    #[arg(long, default_value_t = COUNT)]
    pub count: usize,
    /// DeepCAD JSON to index as well: a file, a folder or a list (as `gerd import deepcad`
    /// reads them). Set-up gives the public sample of `../shared/data` when it is there.
    #[arg(long)]
    pub deepcad: Option<PathBuf>,
    /// Build it again, from scratch, even when it exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Parallel FreeCAD workers (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// Where the default index lives (`VISION2CAD_RAG_HOME`, else the user's data folder).
pub fn home() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(env::RAG_HOME).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let data = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".local/share"))
    })?;
    Some(data.join("vision2cad").join("rag"))
}

/// The default index's folder when it has been built.
pub fn existing() -> Option<PathBuf> {
    home().map(|h| h.join("index")).filter(|i| i.join("index.json").is_file())
}

/// What to tell a user whose run has no index: how to get the default one.
pub fn missing_note() -> String {
    let place = home().map_or_else(|| "(no home folder: set VISION2CAD_RAG_HOME)".into(), |h| h.display().to_string());
    format!(
        "RAG is off: no retrieval index was given and the default one is not built in {place}; \
         build it with `vision2cad gerd default-index` (set-up does), give --rag-index INDEX, or --no-rag to say so"
    )
}

pub fn run(args: &DefaultIndexArgs) -> Result<ExitCode> {
    anyhow::ensure!(args.count > 0, "--count must be at least 1");
    let home = home().context("no folder for the default index: set VISION2CAD_RAG_HOME (or HOME)")?;
    let (dataset, index) = (home.join("dataset"), home.join("index"));
    if index.join("index.json").is_file() && !args.rebuild {
        eprintln!("the default index is built: {} (--rebuild to build it again)", index.display());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.deepcad {
        anyhow::ensure!(path.exists(), "--deepcad {}: no such file or folder", path.display());
    }
    // The old index goes first: it must never point at a dataset being rebuilt.
    for dir in [&index, &home.join("index.partial")] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
    }
    if args.rebuild && dataset.exists() {
        std::fs::remove_dir_all(&dataset).with_context(|| format!("cannot remove {}", dataset.display()))?;
    }
    let started = std::time::Instant::now();
    eprintln!("building the default retrieval index in {}", home.display());
    // Resumable: parts already generated (an interrupted build) are kept.
    let generated = generate_shard(
        &GenerateArgs {
            count: args.count,
            seed: SEED,
            out: dataset.clone(),
            split: vec![args.count, 0, 0],
            workers: args.workers,
            view_size: 500,
            shard: ShardArgs::default(),
            worker: args.worker.clone(),
        },
        None,
    )?;
    if generated != ExitCode::SUCCESS {
        bail!("some generated parts failed (listed above); run `vision2cad gerd default-index` again");
    }
    if let Some(path) = &args.deepcad {
        // A file that does not import is reported and left out; the generated parts suffice.
        import_deepcad_files(path, &dataset, args.workers, gerd::import::Units::Auto, None, &args.worker)?;
    }
    let partial = home.join("index.partial");
    crate::cli::commands::gerd::index(&IndexArgs {
        dir: dataset.clone(),
        split: SplitArg::Train,
        out: partial.clone(),
        lambda: 0.6,
        embedder: "builtin".into(),
        embed_model: None,
        embed_url: None,
    })?;
    std::fs::rename(&partial, &index)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), index.display()))?;
    eprintln!(
        "the default index is built in {:.1} min: {}; reconstruct and run use it unless --no-rag or --rag-index",
        started.elapsed().as_secs_f64() / 60.0,
        index.display()
    );
    Ok(ExitCode::SUCCESS)
}
