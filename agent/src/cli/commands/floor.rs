//! `vision2cad pixel-floor`: what a reader exact to within a fraction of a target pixel
//! would score. Each program of a run (an oracle's run gives the exact ones) has every
//! length moved by uniform noise of at most `--px` target pixels' worth, converted with the
//! part's own framing (S_t's radius over the target circle's radius in pixels, from its
//! trace), and the moved programs are scored against the run's ground truths (static).
//!
//! The figure frames a benchmark's resolution: gen-11's targets put a part's circle about
//! 150 to 200 pixels in radius, and a reader who reads every size to the nearest pixel there
//! is not at the oracle's 1.000.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, ensure};
use eval::{EvalOptions, Protocol};
use freecad_bridge::WorkerPool;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::Value;
use vision2cad::events::{TraceEvent, read_trace};

use crate::cli::WorkerArgs;
use crate::cli::commands::run::RunSettings;
use crate::cli::files::write_atomic;
use crate::cli::progress::Progress;

#[derive(Debug, clap::Args)]
pub struct FloorArgs {
    /// A run folder (`vision2cad run --out`): its parts' program.json and trace.jsonl, and
    /// run.json naming the dataset whose models are the ground truths.
    pub run: PathBuf,
    /// The largest move, in target pixels (uniform in [-PX, PX]); repeat for several.
    #[arg(long = "px", required = true)]
    pub px: Vec<f64>,
    /// Seeds the noise (with each part's ID): same run, same seed, same programs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The dataset, where run.json's path no longer holds it.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Keep the moved programs and the per-sample rows: OUT/px-PX/ID.json, OUT/px-PX.jsonl.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// FreeCAD workers (0: one per core). The results do not depend on it.
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// A part of the run: its program, how many model units a target pixel is, its truth.
struct Part {
    id: String,
    program: Value,
    units_per_px: f64,
    truth: PathBuf,
}

pub fn run(args: &FloorArgs) -> Result<ExitCode> {
    for px in &args.px {
        ensure!(px.is_finite() && *px >= 0.0, "--px {px}: give a move of zero or more pixels");
    }
    let parts = read_run(&args.run, args.dataset.as_deref())?;
    let scratch = tempfile::tempdir().context("cannot make a scratch folder")?;
    let out = args.out.clone().unwrap_or_else(|| scratch.path().to_path_buf());
    let pool = WorkerPool::new(args.worker.config()?, args.workers);
    let options = EvalOptions { protocol: Protocol::Static, ..EvalOptions::default() };
    let mut rows = Vec::new();
    for &px in &args.px {
        let dir = out.join(format!("px-{px}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
        let mut pairs = Vec::new();
        for part in &parts {
            let moved = moved_lengths(&part.program, px * part.units_per_px, args.seed, &part.id);
            let path = dir.join(format!("{}.json", part.id));
            write_atomic(&path, serde_json::to_string_pretty(&moved)?.as_bytes())?;
            pairs.push(eval::Pair { id: part.id.clone(), pred: Some(path), gt: part.truth.clone() });
        }
        let bar = Progress::new(&format!("{px} px"), pairs.len());
        let report = eval::evaluate(&pool, &pairs, &options, || bar.tick(false));
        bar.finish();
        let report = report?;
        if args.out.is_some() {
            super::eval::write_outputs(&report, None, Some(&out.join(format!("px-{px}.jsonl"))))?;
        }
        rows.push((px, report));
    }
    println!(
        "pixel floor of {} (seed {}): every length moved by up to PX target pixels",
        args.run.display(),
        args.seed
    );
    println!("{:>6}  {:>7}  {:>7}  {:>9}", "px", "built", "mIoU", "CD median");
    for (px, r) in &rows {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
        println!("{px:>6}  {:>7}  {:>7}  {:>9}", format!("{}/{}", r.n_compiled, r.n), f(r.miou), f(r.cd_median));
    }
    if rows.iter().any(|(_, r)| r.n_errors > 0) {
        eprintln!("error: some samples could not be scored (evaluator errors, listed above)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The run's parts that have a program and a trace that says how the target was framed.
fn read_run(run: &Path, dataset: Option<&Path>) -> Result<Vec<Part>> {
    let settings: RunSettings = serde_json::from_str(
        &std::fs::read_to_string(run.join("run.json"))
            .with_context(|| format!("{} is not a run folder (no run.json)", run.display()))?,
    )
    .with_context(|| format!("{}: run.json is not a run's settings", run.display()))?;
    let dataset = dataset.map_or(settings.dataset, Path::to_path_buf);
    let mut parts = Vec::new();
    for id in &settings.parts {
        let dir = run.join("parts").join(id);
        let Ok(text) = std::fs::read_to_string(dir.join("program.json")) else {
            eprintln!("{id}: no program.json; left out");
            continue;
        };
        let program: Value = serde_json::from_str(&text).with_context(|| format!("{id}: program.json is not JSON"))?;
        let framing = read_trace(&dir.join("trace.jsonl"))
            .with_context(|| format!("{id}: cannot read its trace"))?
            .into_iter()
            .find_map(|e| match e {
                TraceEvent::Start { config, target, .. } => Some(config.part_radius / target.radius_px),
                _ => None,
            })
            .with_context(|| format!("{id}: its trace has no start event (how the target was framed)"))?;
        let part_dir = dataset.join("parts").join(id);
        let record = gerd::record::read_part(&part_dir)
            .with_context(|| format!("{id}: no readable GERD part at {}", part_dir.display()))?;
        parts.push(Part {
            id: id.clone(),
            program,
            units_per_px: framing,
            truth: part_dir.join(&record.files.model_step),
        });
    }
    ensure!(!parts.is_empty(), "{}: no part with a program", run.display());
    Ok(parts)
}

/// Keys of points (a sketch's coordinates, a plane's origin on its reference).
const POINTS: [&str; 5] = ["start", "end", "mid", "center", "at"];
/// Keys of sizes, which stay positive.
const SIZES: [&str; 5] = ["radius", "depth", "depth2", "size", "value"];
/// A coordinate this near zero lies on the sketch's axis.
const ON_AXIS: f64 = 1e-9;
/// A plane's distance from its reference, which may be of either sign.
const OFFSET: &str = "offset";

/// `program` with every length moved by uniform noise in [-reach, reach] (model units):
/// points, sizes and offsets; angles and everything else stay. Equal numbers of one kind
/// move together (a coordinate along one axis, or one key's value), so what the drawing
/// shared stays shared: a rectangle's corners stay corners, a hole centred on an axis stays
/// on it.
pub fn moved_lengths(program: &Value, reach: f64, seed: u64, id: &str) -> Value {
    let mut noise = Noise { reach, rng: ChaCha8Rng::seed_from_u64(seed ^ eval::seed_for(id)), moves: HashMap::new() };
    let mut moved = program.clone();
    if let Some(commands) = moved.get_mut("commands").and_then(Value::as_array_mut) {
        for command in commands {
            noise.walk(command, "");
        }
    }
    moved
}

/// The moves drawn so far, one per kind and value.
struct Noise {
    reach: f64,
    rng: ChaCha8Rng,
    moves: HashMap<(String, i64), f64>,
}

impl Noise {
    fn moved(&mut self, kind: String, v: f64) -> f64 {
        let (reach, rng) = (self.reach, &mut self.rng);
        v + *self.moves.entry((kind, (v * 1e3).round() as i64)).or_insert_with(|| reach * (2.0 * unit(rng) - 1.0))
    }

    fn walk(&mut self, value: &mut Value, key: &str) {
        match value {
            Value::Object(map) => map.iter_mut().for_each(|(k, v)| self.walk(v, k)),
            Value::Array(items) if POINTS.contains(&key) => {
                for (axis, item) in items.iter_mut().enumerate() {
                    // A coordinate on the sketch's own axis stays: a drawing is tied there
                    // (a revolve's profile on its axis, a hole centred on the origin), and a
                    // profile moved across its axis does not revolve.
                    if let Some(v) = item.as_f64().filter(|v| v.abs() > ON_AXIS) {
                        *item = Value::from(self.moved(format!("point {axis}"), v));
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.walk(v, key)),
            Value::Number(n) if SIZES.contains(&key) || key == OFFSET => {
                let v = n.as_f64().unwrap_or_default();
                let mut w = self.moved(key.to_string(), v);
                if SIZES.contains(&key) && v > 0.0 {
                    w = w.max(v * 0.1);
                }
                *value = Value::from(w);
            }
            _ => {}
        }
    }
}

/// A uniform number in [0, 1).
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plate() -> Value {
        serde_json::json!({"name": "plate", "commands": [
            {"op": "sketch", "name": "S1", "on": "XY", "primitives": [
                {"type": "line", "start": [5.0, 2.0], "end": [40.0, 2.0]},
                {"type": "line", "start": [40.0, 2.0], "end": [40.0, 20.0]},
                {"type": "line", "start": [40.0, 20.0], "end": [5.0, 20.0]},
                {"type": "line", "start": [5.0, 20.0], "end": [5.0, 2.0]},
                {"type": "circle", "center": [20.0, 10.0], "radius": 3.0}]},
            {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 5.0}},
            {"op": "plane", "name": "P1", "on": "XY", "offset": 8.0, "rotation": {"axis": "x", "angle": 30.0}},
            {"op": "sketch", "name": "S2", "on": "XZ", "primitives": [
                {"type": "line", "start": [0.0, 0.0], "end": [5.0, 0.0]}]},
            {"op": "end"}]})
    }

    #[test]
    fn every_length_moves_within_reach_and_shared_values_move_together() {
        let moved = moved_lengths(&plate(), 0.5, 1, "p");
        let c = &moved["commands"];
        let p = |i: usize, end: &str| c[0]["primitives"][i][end].clone();
        // The rectangle stays closed: each corner is one point, however it is named.
        assert_eq!(p(0, "end"), p(1, "start"));
        assert_eq!(p(1, "end"), p(2, "start"));
        assert_eq!(p(3, "end"), p(0, "start"));
        // Every length moved, and by at most the reach.
        let pairs = [
            (p(0, "start")[0].as_f64(), 5.0),
            (p(0, "end")[0].as_f64(), 40.0),
            (p(2, "end")[1].as_f64(), 20.0),
            (c[0]["primitives"][4]["radius"].as_f64(), 3.0),
            (c[1]["extent"]["depth"].as_f64(), 5.0),
            (c[2]["offset"].as_f64(), 8.0),
        ];
        for (moved, was) in pairs {
            let d = moved.expect("a number") - was;
            assert!(d != 0.0 && d.abs() <= 0.5, "{was} moved by {d}");
        }
        // A value along one axis moves as one; on the sketch's axis it stays.
        assert_eq!(p(0, "start")[0], c[3]["primitives"][0]["end"][0]);
        assert_eq!(c[3]["primitives"][0]["start"], serde_json::json!([0.0, 0.0]));
        assert_eq!(c[3]["primitives"][0]["end"][1], 0.0);
        // Angles and the rest stay.
        assert_eq!(c[2]["rotation"], serde_json::json!({"axis": "x", "angle": 30.0}));
        assert_eq!(c[1]["extent"]["type"], "one_side");
        assert_eq!(c[4], serde_json::json!({"op": "end"}));
    }

    #[test]
    fn the_same_seed_and_part_give_the_same_program_and_no_reach_gives_it_unchanged() {
        assert_eq!(moved_lengths(&plate(), 0.5, 1, "p"), moved_lengths(&plate(), 0.5, 1, "p"));
        assert_ne!(moved_lengths(&plate(), 0.5, 1, "p"), moved_lengths(&plate(), 0.5, 2, "p"));
        assert_ne!(moved_lengths(&plate(), 0.5, 1, "p"), moved_lengths(&plate(), 0.5, 1, "q"));
        assert_eq!(moved_lengths(&plate(), 0.0, 1, "p"), plate());
    }
}
