//! The simulated VLM (`--vlm sim`): the oracle with a stated error model, so what each
//! mechanism of the harness is worth becomes a curve measured offline.
//!
//! Every answer starts as the oracle's, then gets the mistakes VLMs are known to make, each
//! drawn from a seeded generator at the configured rate, and each recorded in the reply
//! (`injected`, written to the trace) with what, where and how large:
//!
//! - `coordinate`: Gaussian noise, `sigma` in view units (a share of the sketch window), on
//!   every point and length of a Stage 2 drawing;
//! - `reference`: with probability `reference`, a reference names another entity of the same
//!   kind, the one drawn nearest to the right one (nearest centroid; under no-EGR, the
//!   selector that names that entity);
//! - `frame`: under no-LCB, with probability `frame` a sketch is drawn in the global axes
//!   projected onto the plane instead of the frame FreeCAD chose;
//! - `parameter`: relative Gaussian error `parameter` on depths, angles, radii and sizes;
//! - `operation`: with probability `operation`, a wrong but valid operation (cut for add,
//!   another extent);
//! - `judge`: Stage 3 accepts when an IoU estimate of the candidate against the true state
//!   after the step (the volume ratio times the boxes' IoU) reaches `judge_threshold`, and
//!   flips its verdict with probability `judge_flip`.
//!
//! The harness never sees `injected`; it gets the answer text only, like any model's.
//!
//! ```
//! use vision2cad::vlm::SimRates;
//! let rates: SimRates = toml::from_str("sigma = 0.02\nreference = 0.1").unwrap();
//! assert_eq!(rates.sigma, 0.02);
//! assert_eq!(rates.judge_flip, SimRates::default().judge_flip);
//! ```

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Context, Oracle, Reply, Request, Stage, Vlm, VlmError};
use crate::lcb::conventional_frame;
use crate::selectors;
use crate::stage1::reference_slots;

/// The error model's rates (`[sim]` in a config, `--sim KEY=VALUE` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimRates {
    /// Coordinate noise, standard deviation in view units (1 = the sketch window).
    pub sigma: f64,
    /// Probability that a reference names a neighbouring entity instead.
    pub reference: f64,
    /// Under no-LCB, probability that a sketch is drawn in the projected global axes.
    pub frame: f64,
    /// Relative standard deviation of depths, angles, radii and sizes.
    pub parameter: f64,
    /// Probability of a wrong but valid operation.
    pub operation: f64,
    /// Stage 3 accepts at or above this IoU estimate.
    pub judge_threshold: f64,
    /// Probability that Stage 3 flips its verdict.
    pub judge_flip: f64,
    /// Seed of the generator (`--seed`).
    pub seed: u64,
}

impl Default for SimRates {
    fn default() -> Self {
        SimRates {
            sigma: 0.01,
            reference: 0.05,
            frame: 0.5,
            parameter: 0.02,
            operation: 0.02,
            judge_threshold: 0.95,
            judge_flip: 0.05,
            seed: 0,
        }
    }
}

impl SimRates {
    /// Set one rate from `KEY=VALUE` (`sigma=0.02`); a bad value leaves the rates as they
    /// were.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let mut next = *self;
        next.assign(assignment)?;
        *self = next;
        Ok(())
    }

    fn assign(&mut self, assignment: &str) -> Result<(), String> {
        let (key, value) =
            assignment.split_once('=').ok_or_else(|| format!("{assignment:?} is not KEY=VALUE (e.g. sigma=0.02)"))?;
        let value: f64 = value.trim().parse().map_err(|_| format!("{assignment:?}: {value:?} is not a number"))?;
        let slot = match key.trim() {
            "sigma" => &mut self.sigma,
            "reference" => &mut self.reference,
            "frame" => &mut self.frame,
            "parameter" => &mut self.parameter,
            "operation" => &mut self.operation,
            "judge_threshold" => &mut self.judge_threshold,
            "judge_flip" => &mut self.judge_flip,
            "seed" => {
                self.seed = value as u64;
                return self.check();
            }
            other => {
                return Err(format!(
                    "unknown sim rate {other:?} (sigma, reference, frame, parameter, operation, judge_threshold, judge_flip, seed)"
                ));
            }
        };
        *slot = value;
        self.check()
    }

    pub fn check(&self) -> Result<(), String> {
        let probabilities = [
            ("reference", self.reference),
            ("frame", self.frame),
            ("operation", self.operation),
            ("judge_flip", self.judge_flip),
        ];
        for (name, p) in probabilities {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("sim {name} = {p} is not a probability (0 to 1)"));
            }
        }
        for (name, x) in
            [("sigma", self.sigma), ("parameter", self.parameter), ("judge_threshold", self.judge_threshold)]
        {
            if !x.is_finite() || x < 0.0 {
                return Err(format!("sim {name} = {x} must be a non-negative number"));
            }
        }
        Ok(())
    }
}

/// The oracle with the error model.
#[derive(Debug)]
pub struct Sim {
    oracle: Oracle,
    rates: SimRates,
    streams: Streams,
}

/// One generator per error kind, indexed by [`Kind`].
#[derive(Debug)]
struct Streams(Vec<ChaCha8Rng>);

impl Streams {
    fn new(seed: u64) -> Streams {
        Streams(
            (0..6u64)
                .map(|kind| {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    rng.set_stream(kind);
                    rng
                })
                .collect(),
        )
    }

    fn uniform(&mut self, kind: Kind) -> f64 {
        (self.0[kind as usize].next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box-Muller).
    fn normal(&mut self, kind: Kind) -> f64 {
        let u1 = self.uniform(kind).max(1e-300);
        let u2 = self.uniform(kind);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// The error kinds, each drawn from its own stream: a draw of one kind never shifts the draws
/// of another, so configurations that differ in one kind (no-LCB's frame draws) see the same
/// reference confusions, slot for slot, as long as their runs take the same steps.
#[derive(Clone, Copy)]
enum Kind {
    Operation,
    Parameter,
    Reference,
    Frame,
    Coordinate,
    Judge,
}

impl Sim {
    /// The generator is seeded with `rates.seed` and the part (its ground truth's program),
    /// so the parts of a run draw independent errors and a run repeats to the bit.
    pub fn new(oracle: Oracle, rates: SimRates) -> Sim {
        let part = oracle.program_digest();
        Sim { oracle: oracle.tolerant(), rates, streams: Streams::new(rates.seed ^ part) }
    }

    fn uniform(&mut self, kind: Kind) -> f64 {
        self.streams.uniform(kind)
    }

    fn chance(&mut self, kind: Kind, p: f64) -> bool {
        p > 0.0 && self.uniform(kind) < p
    }

    fn normal(&mut self, kind: Kind) -> f64 {
        self.streams.normal(kind)
    }

    fn stage1(&mut self, answer: &mut Value, ctx: &Context, injected: &mut Vec<Value>) {
        let Some(command) = answer.get_mut("command") else { return };
        let op = command["op"].as_str().unwrap_or("").to_string();
        if op == "end" {
            return;
        }
        if self.chance(Kind::Operation, self.rates.operation) {
            let pick = self.uniform(Kind::Operation);
            let before = command.clone();
            let mode = command["mode"].as_str().map(str::to_string);
            let kind = command["extent"]["type"].as_str().map(str::to_string);
            let change = match (op.as_str(), mode.as_deref(), kind.as_deref()) {
                ("extrude", Some(mode), _) if pick < 0.5 => {
                    let other = if mode == "add" { "cut" } else { "add" };
                    command["mode"] = other.into();
                    Some(format!("mode {mode} -> {other}"))
                }
                ("extrude", _, Some(kind)) => {
                    let other = if kind == "symmetric" { "one_side" } else { "symmetric" };
                    command["extent"]["type"] = other.into();
                    if let Some(e) = command["extent"].as_object_mut() {
                        e.remove("depth2");
                    }
                    Some(format!("extent {kind} -> {other}"))
                }
                ("revolve", Some(mode), _) => {
                    let other = if mode == "add" { "cut" } else { "add" };
                    command["mode"] = other.into();
                    Some(format!("mode {mode} -> {other}"))
                }
                _ => None,
            };
            if let Some(change) = change {
                injected.push(
                    json!({"stage": "stage1", "kind": "operation", "where": op, "what": change, "before": before}),
                );
            }
        }
        if self.rates.parameter > 0.0 {
            let mut slots: Vec<(&str, &mut Value)> = Vec::new();
            let Some(object) = command.as_object_mut() else { return };
            for (key, value) in object.iter_mut() {
                match key.as_str() {
                    "radius" | "size" | "angle" | "offset" => slots.push((key.as_str(), value)),
                    "extent" => {
                        for (k, v) in value.as_object_mut().into_iter().flat_map(|m| m.iter_mut()) {
                            if matches!(k.as_str(), "depth" | "depth2" | "angle") {
                                slots.push((k.as_str(), v));
                            }
                        }
                    }
                    _ => {}
                }
            }
            let mut draws = Vec::new();
            for (key, value) in slots {
                if let Some(x) = value.as_f64() {
                    draws.push((key.to_string(), x, value));
                }
            }
            for (key, x, value) in draws {
                let relative = self.rates.parameter * self.normal(Kind::Parameter);
                // A model names a full turn as 360 and no angle beyond it: the draw is made
                // (the stream stays in step) but a full turn stays whole and angles stay in
                // (0, 360].
                if key == "angle" && x >= 360.0 {
                    continue;
                }
                let y = round4(x * (1.0 + relative));
                let y = if key == "angle" { y.min(360.0) } else { y };
                *value = y.into();
                injected.push(json!({"stage": "stage1", "kind": "parameter", "where": format!("{op}.{key}"),
                    "from": x, "to": y, "relative": relative}));
            }
        }
        if self.rates.reference > 0.0 {
            let (single, lists) = reference_slots(command);
            let items =
                single.into_iter().chain(lists.into_iter().flat_map(|l| l.as_array_mut().into_iter().flatten()));
            for item in items {
                self.confuse(item, ctx, &op, injected);
            }
            // The faces the step's sketches sit on are references too.
            for sketch in answer.get_mut("sketches").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(on) = sketch.get_mut("on") {
                    self.confuse(on, ctx, "sketch", injected);
                }
            }
        }
    }

    /// With probability `reference`, `slot` names the entity nearest the right one instead.
    fn confuse(&mut self, slot: &mut Value, ctx: &Context, op: &str, injected: &mut Vec<Value>) {
        let Some(text) = slot.as_str().map(str::to_string) else { return };
        if !self.chance(Kind::Reference, self.rates.reference) {
            return;
        }
        let (head, tail) = freecad_bridge::command::split_position(&text);
        let (head, tail) = (head.to_string(), tail.map(str::to_string));
        // Under no-EGR the answer names entities by selectors: resolve the right one first.
        let right = if ctx.ablations.no_egr {
            match selectors::resolve(head.trim_start_matches('(').trim_end_matches(')'), &ctx.state) {
                Ok(ids) if ids.len() == 1 => ids[0].clone(),
                _ => return,
            }
        } else if head.parse::<freecad_bridge::command::EntityId>().is_ok() {
            head.clone()
        } else {
            return; // a base plane (XY, XZ, YZ) or a sketch's name
        };
        let Some(wrong) = nearest_other(&ctx.state, &right) else { return };
        let named = if ctx.ablations.no_egr {
            match selectors::find(&ctx.state, &wrong) {
                Some(sel) if tail.is_some() => format!("({sel})"),
                Some(sel) => sel,
                None => return,
            }
        } else {
            wrong.clone()
        };
        let new = match &tail {
            Some(t) => format!("{named}.{t}"),
            None => named,
        };
        *slot = new.clone().into();
        injected.push(
            json!({"stage": "stage1", "kind": "reference", "where": op, "right": right, "named": wrong, "text": new}),
        );
    }

    fn stage2(&mut self, answer: &mut Value, ctx: &Context, injected: &mut Vec<Value>) {
        let Some(request) = &ctx.sketch else { return };
        let meta = &request.meta;
        let lcb = !ctx.ablations.no_lcb;
        let Some(primitives) = answer.get_mut("primitives").and_then(Value::as_array_mut) else { return };
        // Frame confusion first (the model's whole drawing), then the hand's noise.
        if !lcb {
            let convention = conventional_frame(&request.on, &meta.frame);
            if self.chance(Kind::Frame, self.rates.frame) {
                injected.push(json!({"stage": "stage2", "kind": "frame", "where": request.name,
                    "what": "drawn in the global axes projected onto the plane"}));
            } else {
                // The right answer: FreeCAD's own frame.
                for_points(primitives, |p| {
                    let w = convention.to_global(p[0], p[1]);
                    let q = meta.frame.to_local(w);
                    [round4(q[0]), round4(q[1])]
                });
            }
        }
        if self.rates.sigma > 0.0 {
            // View units are shares of the window; without LCB the drawing is in model units.
            let unit = if lcb { 1.0 } else { meta.window.size };
            let sigma = self.rates.sigma * unit;
            let mut largest: f64 = 0.0;
            let mut count = 0usize;
            let mut draws = Vec::new();
            for_points(primitives, |p| {
                draws.push(p);
                p
            });
            // One draw per distinct point: where the model means the same point (a corner
            // shared by two lines) it writes the same numbers, so closed profiles stay closed.
            let mut seen: Vec<([f64; 2], [f64; 2])> = Vec::new();
            let mut noisy = Vec::with_capacity(draws.len());
            for p in &draws {
                if let Some((_, q)) =
                    seen.iter().find(|(o, _)| (o[0] - p[0]).abs() < 1e-9 && (o[1] - p[1]).abs() < 1e-9)
                {
                    noisy.push(*q);
                    continue;
                }
                let d = [sigma * self.normal(Kind::Coordinate), sigma * self.normal(Kind::Coordinate)];
                largest = largest.max(d[0].abs()).max(d[1].abs());
                count += 1;
                let q = [round4(p[0] + d[0]), round4(p[1] + d[1])];
                seen.push((*p, q));
                noisy.push(q);
            }
            let mut k = 0;
            for_points(primitives, |_| {
                let q = noisy[k];
                k += 1;
                q
            });
            for prim in primitives.iter_mut() {
                if let Some(r) = prim.get("radius").and_then(Value::as_f64) {
                    let d = sigma * self.normal(Kind::Coordinate);
                    largest = largest.max(d.abs());
                    count += 1;
                    prim["radius"] = round4((r + d).max(r * 0.05)).into();
                }
            }
            injected.push(json!({"stage": "stage2", "kind": "coordinate", "where": request.name,
                "sigma": self.rates.sigma, "values": count, "largest": largest / unit}));
        }
    }

    fn stage3(&mut self, answer: &mut Value, ctx: &Context, injected: &mut Vec<Value>) {
        let Some(candidate) = &ctx.preview else { return };
        let Some(expected) = self.oracle.expected_after_step(ctx) else { return };
        let ratio = match (candidate.volume, expected.volume) {
            (a, b) if a > 0.0 && b > 0.0 => a.min(b) / a.max(b),
            _ => 0.0,
        };
        let boxes = match (candidate.bbox, expected.bbox) {
            (Some(a), Some(b)) => box_iou(a.min, a.max, b.min, b.max),
            _ => 0.0,
        };
        let estimate = ratio * boxes;
        let mut accept = estimate >= self.rates.judge_threshold;
        let flipped = self.chance(Kind::Judge, self.rates.judge_flip);
        if flipped {
            accept = !accept;
        }
        let reason = format!("IoU estimate {estimate:.3} against the target at this step");
        *answer = json!({"verdict": if accept { "accept" } else { "reject" }, "reasons": [reason]});
        injected.push(json!({"stage": "stage3", "kind": "judge", "iou_estimate": estimate,
            "threshold": self.rates.judge_threshold, "flipped": flipped, "verdict": if accept { "accept" } else { "reject" }}));
    }
}

impl Vlm for Sim {
    fn name(&self) -> String {
        "sim".into()
    }

    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError> {
        // The answer is the simulated model's: so is its failure to answer.
        let reply = self.oracle.answer(request).map_err(|e| match e {
            VlmError::NoAnswer { reason, .. } => VlmError::NoAnswer { backend: "sim".into(), reason },
            other => other,
        })?;
        let mut answer: Value = serde_json::from_str(&reply.text)
            .map_err(|e| VlmError::Failed { backend: "sim".into(), reason: format!("the oracle's answer: {e}") })?;
        let mut injected = Vec::new();
        let ctx = &request.context;
        match request.stage {
            Stage::Stage1 => self.stage1(&mut answer, ctx, &mut injected),
            Stage::Stage2 => self.stage2(&mut answer, ctx, &mut injected),
            Stage::Stage3 => self.stage3(&mut answer, ctx, &mut injected),
            Stage::DirectCode => {}
        }
        Ok(Reply { text: answer.to_string(), usage: None, cached: false, injected, observed: Vec::new() })
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Applies `f` to every point of a drawing's primitives, in order.
fn for_points(primitives: &mut [Value], mut f: impl FnMut([f64; 2]) -> [f64; 2]) {
    for prim in primitives.iter_mut() {
        for key in ["start", "mid", "end", "center"] {
            if let Some(p) = prim.get_mut(key)
                && let Some([x, y]) = p.as_array().and_then(|a| Some([a.first()?.as_f64()?, a.get(1)?.as_f64()?]))
            {
                let q = f([x, y]);
                *p = json!(q);
            }
        }
    }
}

/// The entity of the same kind whose position is nearest `id`'s (its centroid, midpoint or
/// point): the label a reader would take for the right one.
fn nearest_other(state: &freecad_bridge::ModelState, id: &str) -> Option<String> {
    let dist =
        |a: [f64; 3], b: [f64; 3]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
    let pick = |at: [f64; 3], others: Vec<(String, [f64; 3])>| {
        others
            .into_iter()
            .filter(|(o, _)| o != id)
            .min_by(|a, b| dist(a.1, at).total_cmp(&dist(b.1, at)))
            .map(|(o, _)| o)
    };
    use freecad_bridge::command::{EntityId, EntityKind};
    match id.parse::<EntityId>().ok()?.kind {
        EntityKind::Face => {
            let at = state.faces.iter().find(|f| f.id == id)?.centroid;
            pick(at, state.faces.iter().map(|f| (f.id.clone(), f.centroid)).collect())
        }
        EntityKind::Edge => {
            let mid = |e: &freecad_bridge::state::Edge| e.midpoint.or(e.center).or(e.start);
            let at = mid(state.edges.iter().find(|e| e.id == id)?)?;
            pick(at, state.edges.iter().filter_map(|e| Some((e.id.clone(), mid(e)?))).collect())
        }
        EntityKind::Vertex => {
            let at = state.vertices.iter().find(|v| v.id == id)?.point;
            pick(at, state.vertices.iter().map(|v| (v.id.clone(), v.point)).collect())
        }
    }
}

fn box_iou(a0: [f64; 3], a1: [f64; 3], b0: [f64; 3], b1: [f64; 3]) -> f64 {
    let vol = |lo: [f64; 3], hi: [f64; 3]| (0..3).map(|i| (hi[i] - lo[i]).max(0.0)).product::<f64>();
    let inter = vol(std::array::from_fn(|i| a0[i].max(b0[i])), std::array::from_fn(|i| a1[i].min(b1[i])));
    let union = vol(a0, a1) + vol(b0, b1) - inter;
    if union > 0.0 { inter / union } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_set_by_name_and_checked() {
        let mut rates = SimRates::default();
        rates.set("sigma=0.03").expect("sigma");
        rates.set(" reference = 0.2 ").expect("reference");
        assert_eq!((rates.sigma, rates.reference), (0.03, 0.2));
        assert!(rates.set("reference=1.5").expect_err("probability").contains("not a probability"));
        assert!(rates.set("sigma=-1").expect_err("negative").contains("non-negative"));
        assert!(rates.set("colour=1").expect_err("unknown").contains("unknown sim rate"));
        assert!(rates.set("sigma").expect_err("no value").contains("KEY=VALUE"));
    }

    #[test]
    fn the_box_muller_draws_are_standard_normal() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let draws: Vec<f64> = (0..20_000)
            .map(|_| {
                let (u1, u2) = (uniform().max(1e-300), uniform());
                (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
            })
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean}, variance {var}");
    }

    #[test]
    fn each_error_kind_draws_from_its_own_stream() {
        let (mut plain, mut with_frames) = (Streams::new(7), Streams::new(7));
        for _ in 0..5 {
            with_frames.uniform(Kind::Frame);
        }
        let draws = |s: &mut Streams| (0..5).map(|_| s.uniform(Kind::Reference)).collect::<Vec<_>>();
        assert_eq!(draws(&mut plain), draws(&mut with_frames), "frame draws shifted the reference draws");
        let mut other = Streams::new(7);
        assert_ne!(draws(&mut other), (0..5).map(|_| other.uniform(Kind::Coordinate)).collect::<Vec<_>>());
    }

    #[test]
    fn box_iou_of_shifted_boxes() {
        assert!((box_iou([0.0; 3], [1.0; 3], [0.0; 3], [1.0; 3]) - 1.0).abs() < 1e-12);
        // Half overlapping along x: intersection 0.5, union 1.5.
        assert!((box_iou([0.0; 3], [1.0; 3], [0.5, 0.0, 0.0], [1.5, 1.0, 1.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(box_iou([0.0; 3], [1.0; 3], [2.0; 3], [3.0; 3]), 0.0);
    }
}
