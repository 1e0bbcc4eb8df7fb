//! `vision2cad bench rag`: GERD-RET on a generated dataset. Index build time, median query
//! latency against exhaustive search over the same vectors (the reference, same run),
//! recall@3 of HNSW against that exact search, memory of the loaded index, and retrieval
//! quality (does the top hit do what the true next step does?) against random hits. Then
//! the same search figures at `--scale` times the parts, made by repeating the vectors with
//! noise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use freecad_bridge::Command;
use gerd::record::{Split, part_dirs, read_part};
use gerd::retrieve::embed::{Builtin, Embedder, operation_key};
use gerd::retrieve::{EF_SEARCH, RetrievalIndex, combine, from_vectors};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::json;

use crate::cli::commands::bench::median;
use crate::cli::files::write_atomic;

#[derive(Debug, clap::Args)]
pub struct RagBench {
    /// A GERD dataset with train and validation splits (`gerd generate --split 2500,100,100`).
    #[arg(long, required_unless_present = "index")]
    pub dataset: Option<PathBuf>,
    /// Instead: an existing index (e.g. the default one) and `--queries-from`: how often the
    /// top hit does what the true next step does, by score band (the threshold's evidence).
    #[arg(long, requires = "queries_from", conflicts_with = "dataset")]
    pub index: Option<PathBuf>,
    /// A GERD dataset whose every part (any split) is a query for `--index`.
    #[arg(long, requires = "index")]
    pub queries_from: Option<PathBuf>,
    /// Queries (validation targets paired with validation states).
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// Also measure an index this many times larger (vectors repeated with noise); 1 skips it.
    #[arg(long, default_value_t = 10)]
    pub scale: usize,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Resident memory of this process, bytes (Linux; 0 elsewhere).
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

struct ValStep {
    image: Vec<f32>,
    state: Vec<f32>,
    op: &'static str,
}

fn validation_steps(dataset: &Path, embedder: &mut Builtin) -> Result<Vec<ValStep>> {
    query_steps(dataset, Some(Split::Val), embedder)
}

/// Every operation step of the parts of `split` (all parts when `None`) as a query: the
/// part's target image, the state before the step, the step's operation.
fn query_steps(dataset: &Path, split: Option<Split>, embedder: &mut Builtin) -> Result<Vec<ValStep>> {
    let mut out = Vec::new();
    for dir in part_dirs(dataset)? {
        let record = read_part(&dir)?;
        if split.is_some_and(|s| record.split != s) {
            continue;
        }
        let target = image::open(dir.join(&record.files.target))?.to_rgb8();
        let image = embedder.embed_image(&target).map_err(anyhow::Error::msg)?;
        for step in record.steps.iter().filter(|s| !matches!(s.command, Command::Sketch(_) | Command::Body(_))) {
            let state = embedder
                .embed_state(&record.states[step.before], &record.program.commands[..step.index])
                .map_err(anyhow::Error::msg)?;
            out.push(ValStep { image: image.clone(), state, op: operation_key(&step.command) });
        }
    }
    anyhow::ensure!(!out.is_empty(), "{} has no parts with steps to query", dataset.display());
    Ok(out)
}

/// Median seconds per query of HNSW top-3, of the diverse search, and of exhaustive search
/// (each timed in its own pass over the queries, so none warms the caches for another), and
/// recall@3 of HNSW against exhaustive search.
fn measure(index: &RetrievalIndex, queries: &[Vec<f32>]) -> (f64, f64, f64, f64) {
    let time = |f: &dyn Fn(&[f32])| -> f64 {
        median(
            queries
                .iter()
                .map(|q| {
                    let t = Instant::now();
                    f(q);
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        )
    };
    let hnsw = time(&|q| drop(index.nearest(q, 3, EF_SEARCH)));
    let diverse = time(&|q| drop(index.search(q, 3, EF_SEARCH)));
    let exact = time(&|q| drop(index.brute_force(q, 3)));
    let found: usize = queries
        .iter()
        .map(|q| {
            let approx: Vec<usize> = index.nearest(q, 3, EF_SEARCH).into_iter().map(|(i, _)| i).collect();
            index.brute_force(q, 3).iter().filter(|(i, _)| approx.contains(i)).count()
        })
        .sum();
    (hnsw, diverse, exact, found as f64 / (3 * queries.len()) as f64)
}

/// Quality by score band: for every step of `queries`, the top hit of `index`; per band of
/// its score, how often its operation is the true next step's, against always guessing the
/// commonest operation of the queries. The threshold `rag_min_score` is read from this.
fn quality_by_score(index_dir: &Path, queries: &Path, json: Option<&Path>) -> Result<ExitCode> {
    let mut embedder = Builtin;
    let index = RetrievalIndex::load(index_dir, &embedder.id())?;
    let steps = query_steps(queries, None, &mut embedder)?;
    let mut by_op = std::collections::BTreeMap::<&str, usize>::new();
    steps.iter().for_each(|s| *by_op.entry(s.op).or_default() += 1);
    let (common, common_n) = by_op.iter().max_by_key(|(_, n)| **n).map(|(o, n)| (*o, *n)).unwrap_or(("", 0));
    let mut scored: Vec<(f32, bool)> = Vec::new();
    for v in &steps {
        let q = index.query_vector(v.image.clone(), v.state.clone())?;
        if let Some(top) = index.search(&q, 1, EF_SEARCH).first() {
            scored.push((top.score, index.entries()[top.entry].op == v.op));
        }
    }
    let base = common_n as f64 / steps.len() as f64;
    println!(
        "top hits of {} for the {} steps of {}: always guessing `{common}` is right {:.1}% of the time",
        index_dir.display(),
        steps.len(),
        queries.display(),
        base * 100.0
    );
    println!("| score | steps | top hit's operation right | at or above: steps | right |");
    println!("|---|---|---|---|---|");
    let mut bands = Vec::new();
    const BAND: f32 = 0.025;
    for band in (0..40).rev() {
        let (lo, hi) = (band as f32 * BAND, (band + 1) as f32 * BAND);
        let band: Vec<bool> = scored.iter().filter(|(s, _)| *s >= lo && *s < hi).map(|(_, r)| *r).collect();
        let above: Vec<bool> = scored.iter().filter(|(s, _)| *s >= lo).map(|(_, r)| *r).collect();
        if band.is_empty() {
            continue;
        }
        let rate = |v: &[bool]| v.iter().filter(|r| **r).count() as f64 / v.len() as f64;
        println!(
            "| {lo:.3}-{hi:.3} | {} | {:.1}% | {} | {:.1}% |",
            band.len(),
            rate(&band) * 100.0,
            above.len(),
            rate(&above) * 100.0
        );
        bands.push(json!({"from": lo, "to": hi, "steps": band.len(), "right": rate(&band),
            "at_or_above": above.len(), "right_at_or_above": rate(&above)}));
    }
    if let Some(path) = json {
        let report = json!({"index": index_dir, "queries": queries, "steps": steps.len(),
            "commonest": common, "commonest_share": base, "bands": bands});
        write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: &RagBench) -> Result<ExitCode> {
    if let (Some(index), Some(queries)) = (&args.index, &args.queries_from) {
        return quality_by_score(index, queries, args.json.as_deref());
    }
    let dataset = args.dataset.as_deref().context("give --dataset, or --index with --queries-from")?;
    let mut embedder = Builtin;
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    eprintln!("building the index over {} (train split)...", dataset.display());
    let started = Instant::now();
    let index = RetrievalIndex::build(dataset, Split::Train, &mut embedder, 0.6, |_, _| {})?;
    let build_seconds = started.elapsed().as_secs_f64();
    index.save(scratch.path())?;
    drop(index);
    let before_load = resident();
    let started = Instant::now();
    let index = RetrievalIndex::load(scratch.path(), &embedder.id())?;
    let load_seconds = started.elapsed().as_secs_f64();
    let loaded_bytes = resident().saturating_sub(before_load);
    let (parts, steps) = (index.meta.dataset.parts, index.entries().len());

    // Graph alone, over the same vectors: what the build costs without reading and embedding.
    let vectors: Vec<f32> = (0..steps).flat_map(|i| index.vector(i).to_vec()).collect();
    let started = Instant::now();
    let _graph_only = from_vectors(vectors.clone(), index.meta.image_dim, index.meta.state_dim, 0.6);
    let graph_seconds = started.elapsed().as_secs_f64();
    drop(_graph_only);

    let val = validation_steps(dataset, &mut embedder)?;
    // The queries: every validation step, then validation targets paired with the states of
    // other validation steps, until there are enough.
    let mut queries: Vec<Vec<f32>> = Vec::new();
    'outer: for offset in 0..val.len() {
        for (i, v) in val.iter().enumerate() {
            if queries.len() == args.queries {
                break 'outer;
            }
            let state = &val[(i + offset) % val.len()].state;
            queries.push(index.query_vector(v.image.clone(), state.clone())?);
        }
    }
    let (hnsw, diverse, exact, recall) = measure(&index, &queries);

    // Quality: the top hit's operation against the true next step's, and what a random hit
    // would score (the share of indexed steps with that operation).
    let (mut same, mut chance) = (0usize, 0.0f64);
    for v in &val {
        let q = index.query_vector(v.image.clone(), v.state.clone())?;
        if let Some(top) = index.search(&q, 1, EF_SEARCH).first() {
            same += usize::from(index.entries()[top.entry].op == v.op);
        }
        chance += index.entries().iter().filter(|e| e.op == v.op).count() as f64 / steps as f64;
    }
    let (top1, random) = (same as f64 / val.len() as f64, chance / val.len() as f64);

    println!("GERD-RET on {}: {parts} train parts, {steps} steps; {} queries", dataset.display(), queries.len());
    println!(
        "  build (read, embed, graph): {build_seconds:.2} s; graph alone {graph_seconds:.2} s; load {load_seconds:.3} s"
    );
    println!(
        "  memory of the loaded index: {:.1} MiB (resident growth on load)",
        loaded_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "  per query, median: HNSW top-3 {:.3} ms, with one hit per part {:.3} ms; exhaustive (reference) {:.3} ms = {:.1}x HNSW",
        hnsw * 1e3,
        diverse * 1e3,
        exact * 1e3,
        exact / hnsw
    );
    println!("  recall@3 of HNSW (ef {EF_SEARCH}) against exhaustive search: {recall:.4}");
    println!(
        "  top hit does what the true next step does: {:.1}% of {} validation steps (random hit: {:.1}%)",
        top1 * 100.0,
        val.len(),
        random * 100.0
    );
    let mut report = json!({
        "parts": parts, "steps": steps, "queries": queries.len(), "ef": EF_SEARCH,
        "build_seconds": build_seconds, "graph_seconds": graph_seconds, "load_seconds": load_seconds,
        "loaded_bytes": loaded_bytes, "median_query_seconds": {"hnsw": hnsw, "hnsw_diverse": diverse, "exhaustive": exact},
        "recall_at_3": recall, "top1_same_operation": top1, "random_same_operation": random,
    });

    if args.scale > 1 {
        let dim = index.dim();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut big = Vec::with_capacity(vectors.len() * args.scale);
        for copy in 0..args.scale {
            for i in 0..steps {
                let v = &vectors[i * dim..(i + 1) * dim];
                let (image, state) = v.split_at(index.meta.image_dim);
                let noisy =
                    |x: &[f32], rng: &mut ChaCha8Rng| -> Vec<f32> {
                        x.iter()
                            .map(|a| {
                                if copy == 0 {
                                    *a
                                } else {
                                    a + 0.02 * ((rng.next_u32() as f32 / u32::MAX as f32) - 0.5)
                                }
                            })
                            .collect()
                    };
                let (a, b) = (noisy(image, &mut rng), noisy(state, &mut rng));
                big.extend(combine(a, b, 0.6));
            }
        }
        eprintln!("building an index of {} steps...", steps * args.scale);
        let before = resident();
        let started = Instant::now();
        let large = from_vectors(big, index.meta.image_dim, index.meta.state_dim, 0.6);
        let large_graph_seconds = started.elapsed().as_secs_f64();
        let large_bytes = resident().saturating_sub(before);
        let (hnsw_l, diverse_l, exact_l, recall_l) = measure(&large, &queries);
        println!(
            "  x{}: {} parts, {} steps: graph {large_graph_seconds:.1} s, memory {:.1} MiB; per query HNSW {:.3} ms, one per part {:.3} ms, exhaustive {:.3} ms = {:.1}x; recall@3 {recall_l:.4}",
            args.scale,
            parts * args.scale,
            steps * args.scale,
            large_bytes as f64 / (1 << 20) as f64,
            hnsw_l * 1e3,
            diverse_l * 1e3,
            exact_l * 1e3,
            exact_l / hnsw_l
        );
        report["scaled"] = json!({"scale": args.scale, "steps": steps * args.scale, "graph_seconds": large_graph_seconds,
            "bytes": large_bytes, "median_query_seconds": {"hnsw": hnsw_l, "hnsw_diverse": diverse_l, "exhaustive": exact_l},
            "recall_at_3": recall_l});
    }
    if let Some(path) = &args.json {
        write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
