//! The oracle: answers every stage as a perfect model would for a part whose program is
//! known.
//!
//! It holds the ground truth (a program and the entity table before and after each of its
//! commands) and reads everything else from the request, as a model would from the text and
//! the pictures: the current entity table, the sketch view's exact maps, S_t, the preview's
//! state. It finds the ground truth's entities in the current model by geometric signature,
//! never by assuming IDs are equal; it gives view coordinates rounded to 5 decimals (finer
//! than the prompt's 4, so that near-tangent features of a ground truth do not turn on where
//! a rounding falls); it ties sketches to projected geometry exactly where the ground truth
//! has constraints; and it
//! honours the ablations as faithfully as a model could (selectors under no-EGR, no ties
//! under no-PGR, the prompt's frame conventions under no-LCB).
//!
//! One image gives no absolute size or position: the oracle builds the part at the scale
//! that makes it look as the target does, its silhouette's circle (seen from the target's
//! view direction) S_t's size (`s = S_t radius / ground-truth silhouette radius`), as a
//! model that fills the target's circle would; and it centres the part where S_t starts
//! (the origin) along every axis its program leaves free, so sketches on base planes stay
//! on base planes.

use std::path::Path;

use freecad_bridge::command::{Primitive, split_position};
use freecad_bridge::{Command, ModelState, Program, Session};
use gerd::record::{Signature, signature};
use nalgebra::Vector3;
use serde_json::{Value, json};

use super::{Context, Reply, Request, Stage, Vlm, VlmError};
use crate::lcb::conventional_frame;
use crate::selectors;
use crate::stage1::{reference_slots, sketches_used};

/// A program and its entity tables: `states[k]` before command `k`, `states[k + 1]` after.
#[derive(Debug, Clone)]
pub struct GroundTruth {
    pub program: Program,
    pub states: Vec<ModelState>,
}

impl GroundTruth {
    /// A GERD part folder (its `part.json`) or a program `.json`, executed in `session`.
    pub fn load(path: &Path, session: &mut Session) -> Result<GroundTruth, String> {
        if path.is_dir() && !path.join(gerd::record::PART_JSON).is_file() {
            return Err(if path.join(gerd::record::PARTS_DIR).is_dir() {
                format!(
                    "{} is a whole GERD dataset; the ground truth is one of its parts: {}/ID",
                    path.display(),
                    path.join(gerd::record::PARTS_DIR).display()
                )
            } else {
                format!(
                    "{} is a folder without a part.json: give a GERD part folder or a program .json",
                    path.display()
                )
            });
        }
        let record = if path.is_dir() { Some(path.join(gerd::record::PART_JSON)) } else { None };
        if let Some(part) = record {
            let r = gerd::record::read_part(path).map_err(|e| format!("{}: {e}", part.display()))?;
            if r.states.len() != r.program.commands.len() + 1 {
                return Err(format!("{}: states do not match the program's commands", part.display()));
            }
            return Ok(GroundTruth { program: r.program, states: r.states });
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let program = freecad_bridge::parse_program(&text)
            .map_err(|e| format!("{} is not a valid program: {e}", path.display()))?;
        Self::execute(program, session)
            .map_err(|e| format!("the ground truth {} does not execute: {e}", path.display()))
    }

    /// Execute a program from an empty document, recording every state. A worker lost on
    /// the way is the machine's fault: the program runs again from its start (three more
    /// times at most), so the states are the undisturbed ones.
    pub fn execute(program: Program, session: &mut Session) -> Result<GroundTruth, String> {
        let states =
            session.undisturbed(3, |s| Self::execute_once(&program, s), |_, _| {}).unwrap_or_else(|(_, last)| last)?;
        Ok(GroundTruth { program, states })
    }

    fn execute_once(program: &Program, session: &mut Session) -> Result<Vec<ModelState>, String> {
        session.reset().map_err(|e| e.to_string())?;
        let mut states = vec![session.state().clone()];
        for (i, c) in program.commands.iter().enumerate() {
            session.execute(c).map_err(|e| format!("step {i} ({}): {e}", c.op()))?;
            states.push(session.state().clone());
        }
        if states.last().is_none_or(|s| s.empty) {
            return Err("it builds no solid".into());
        }
        session.reset().map_err(|e| e.to_string())?;
        Ok(states)
    }
}

/// One operation of the ground truth: the body it works in when the program switched
/// before it, the sketches its feature consumes, then the feature.
#[derive(Debug, Clone)]
struct GtStep {
    body: Option<String>,
    sketches: Vec<usize>,
    feature: usize,
}

#[derive(Debug)]
pub struct Oracle {
    gt: GroundTruth,
    steps: Vec<GtStep>,
    /// The ground truth's bounding radius (half its box diagonal).
    radius: f64,
    /// Points on the ground truth's outline (vertices, edges sampled): what its silhouette
    /// spans from any direction.
    outline: Vec<[f64; 3]>,
    /// The silhouette radius from the last direction asked (every request of a run asks
    /// the same), so the outline is projected once, not per entity looked up.
    silhouette: std::cell::Cell<Option<([f64; 3], f64)>>,
    /// The centre of the ground truth's box.
    center: [f64; 3],
    /// Axes along which the part may move without changing its program (see `movable_axes`).
    movable: [bool; 3],
    /// Name the nearest entity of the right kind when none matches exactly (the model has
    /// drifted from the ground truth: the simulated VLM's errors).
    tolerant: bool,
}

/// A similarity without rotation: `x -> s x + t`.
#[derive(Debug, Clone, Copy)]
struct Placement {
    s: f64,
    t: [f64; 3],
}

impl Placement {
    fn point(&self, p: [f64; 3]) -> [f64; 3] {
        std::array::from_fn(|i| self.s * p[i] + self.t[i])
    }
}

/// The axes along which the whole part can be moved with its program unchanged: a sketch or
/// plane on `XY` pins Z (the plane is z = 0), `XZ` pins Y, `YZ` pins X. Sketch axes and
/// origins (`h_axis`, `v_axis`, `origin`, a revolve about `S1.v_axis`) and planes placed
/// with `at` or rotated about their frame's axes pin every axis: they lie where FreeCAD put
/// a frame, not with the part.
fn movable_axes(program: &Program) -> [bool; 3] {
    let mut movable = [true; 3];
    let pin = |on: &str, movable: &mut [bool; 3]| match on {
        "XY" => movable[2] = false,
        "XZ" => movable[1] = false,
        "YZ" => movable[0] = false,
        _ => {}
    };
    for c in &program.commands {
        match c {
            Command::Sketch(sk) => {
                pin(&sk.on, &mut movable);
                let text = serde_json::to_string(&sk.constraints).unwrap_or_default();
                if ["h_axis", "v_axis", "\"origin\""].iter().any(|k| text.contains(k)) {
                    return [false; 3];
                }
            }
            Command::Plane(p) => {
                pin(&p.on, &mut movable);
                if p.at.is_some() || !p.rotation.is_empty() {
                    return [false; 3];
                }
            }
            Command::Revolve(r) if !is_entity(&r.axis) => return [false; 3],
            _ => {}
        }
    }
    movable
}

fn no_answer(reason: impl Into<String>) -> VlmError {
    VlmError::NoAnswer { backend: "oracle".into(), reason: reason.into() }
}

fn round5(x: f64) -> f64 {
    (x * 1e5).round() / 1e5
}

impl Oracle {
    pub fn new(gt: GroundTruth) -> Oracle {
        let mut steps = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        let mut body = None;
        for (i, c) in gt.program.commands.iter().enumerate() {
            match c {
                Command::Sketch(_) => pending.push(i),
                Command::Body(b) => body = Some(b.name.clone()),
                Command::End => break,
                feature => {
                    let used = sketches_used(feature);
                    let mut sketches = Vec::new();
                    pending.retain(|&k| {
                        let take = matches!(&gt.program.commands[k], Command::Sketch(s) if used.contains(&s.name));
                        if take {
                            sketches.push(k);
                        }
                        !take
                    });
                    steps.push(GtStep { body: body.take(), sketches, feature: i });
                }
            }
        }
        let bbox = gt.states.last().and_then(|s| s.bbox);
        let radius = bbox.map_or(1.0, |b| b.diagonal() / 2.0).max(1e-12);
        let center = bbox.map_or([0.0; 3], |b| std::array::from_fn(|i| (b.min[i] + b.max[i]) / 2.0));
        let movable = movable_axes(&gt.program);
        let outline = gt.states.last().map(outline_points).unwrap_or_default();
        Oracle { gt, steps, radius, center, outline, silhouette: std::cell::Cell::new(None), movable, tolerant: false }
    }

    /// A digest of the ground truth's program (FNV-1a 64 of its JSON): what tells parts apart.
    pub fn program_digest(&self) -> u64 {
        let text = serde_json::to_string(&self.gt.program).unwrap_or_default();
        text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }

    /// An oracle that keeps answering on a model that drifted from the ground truth.
    pub fn tolerant(mut self) -> Oracle {
        self.tolerant = true;
        self
    }

    fn scale(&self, ctx: &Context) -> f64 {
        let radius = match self.silhouette.get() {
            Some((direction, r)) if direction == ctx.direction => r,
            _ => {
                let r = silhouette_radius(&self.outline, ctx.direction).unwrap_or(self.radius);
                self.silhouette.set(Some((ctx.direction, r)));
                r
            }
        };
        ctx.sphere.radius / radius
    }

    /// Where the ground truth goes in the run's model space: scaled to S_t's size and, along
    /// the axes the program leaves free, centred where S_t starts (the origin).
    fn placement(&self, ctx: &Context) -> Placement {
        let s = self.scale(ctx);
        Placement { s, t: std::array::from_fn(|i| if self.movable[i] { -s * self.center[i] } else { 0.0 }) }
    }

    /// The current model's entity with the ground-truth entity's geometry, as the run names
    /// entities: an ID, or a selector under no-EGR.
    fn find(&self, id: &str, gt_state: &ModelState, ctx: &Context) -> Result<String, VlmError> {
        let (head, tail) = split_position(id);
        let sig = signature(gt_state, head).ok_or_else(|| no_answer(format!("the ground truth has no {head}")))?;
        // Bodies may overlap: look for the entity in the body the ground truth's lies in.
        let candidates = same_body(&ctx.state, head);
        let found = matching(&sig, &candidates, self.placement(ctx))
            .or_else(|| if self.tolerant { nearest(&sig, &candidates, self.placement(ctx)) } else { None })
            .ok_or_else(|| no_answer(format!("no entity of the current model matches the ground truth's {head}")))?;
        let name = if ctx.ablations.no_egr {
            let selector = selectors::find(&ctx.state, &found)
                .ok_or_else(|| no_answer(format!("no selector names {found} (the ground truth's {head}) uniquely")))?;
            if tail.is_some() { format!("({selector})") } else { selector }
        } else {
            found
        };
        Ok(match tail {
            Some(t) => format!("{name}.{t}"),
            None => name,
        })
    }

    fn stage1(&self, ctx: &Context) -> Result<Value, VlmError> {
        let Some(step) = self.steps.get(ctx.loop_steps()) else {
            return Ok(json!({"reason": "the model matches the target", "command": {"op": "end"}}));
        };
        let s = self.scale(ctx);
        let mut sketches = Vec::new();
        for &k in &step.sketches {
            let Command::Sketch(sk) = &self.gt.program.commands[k] else { continue };
            let on = if is_entity(&sk.on) { self.find(&sk.on, &self.gt.states[k], ctx)? } else { sk.on.clone() };
            sketches.push(json!({"name": sk.name, "on": on}));
        }
        let before = &self.gt.states[step.feature];
        let mut command =
            serde_json::to_value(&self.gt.program.commands[step.feature]).map_err(|e| no_answer(e.to_string()))?;
        let scale_len = |v: &mut Value| {
            if let Some(x) = v.as_f64() {
                *v = round5(x * s).into();
            }
        };
        if let Some(extent) = command.get_mut("extent") {
            for key in ["depth", "depth2"] {
                if let Some(v) = extent.get_mut(key) {
                    scale_len(v);
                }
            }
        }
        for key in ["radius", "size", "offset"] {
            if let Some(v) = command.get_mut(key) {
                scale_len(v);
            }
        }
        if let Some(Value::Array(at)) = command.get_mut("at") {
            at.iter_mut().for_each(scale_len);
        }
        let (single, lists) = reference_slots(&mut command);
        let items = single.into_iter().chain(lists.into_iter().flat_map(|l| l.as_array_mut().into_iter().flatten()));
        for item in items {
            if let Some(text) = item.as_str().filter(|t| is_entity(t)).map(str::to_string) {
                *item = self.find(&text, before, ctx)?.into();
            }
        }
        let op = self.gt.program.commands[step.feature].op();
        let mut answer =
            json!({"reason": format!("step {} of the target: {op}", ctx.loop_steps() + 1), "command": command});
        if !sketches.is_empty() {
            answer["sketches"] = Value::Array(sketches);
        }
        if let Some(body) = &step.body {
            answer["body"] = body.clone().into();
        }
        Ok(answer)
    }

    fn stage2(&self, ctx: &Context) -> Result<Value, VlmError> {
        let request = ctx.sketch.as_ref().ok_or_else(|| no_answer("a Stage 2 request without a sketch"))?;
        let step = self.steps.get(ctx.loop_steps()).ok_or_else(|| no_answer("the ground truth has no such step"))?;
        let (k, sketch) = step
            .sketches
            .iter()
            .find_map(|&k| match &self.gt.program.commands[k] {
                Command::Sketch(s) if s.name == request.name => Some((k, s)),
                _ => None,
            })
            .ok_or_else(|| no_answer(format!("the ground truth draws no sketch {} at this step", request.name)))?;
        let gt_frame = self.gt.states[k + 1]
            .feature(&sketch.name)
            .and_then(|f| f.frame)
            .ok_or_else(|| no_answer(format!("the ground truth's state has no frame for {}", sketch.name)))?;
        let placement = self.placement(ctx);
        let s = placement.s;
        let meta = &request.meta;
        let lcb = !ctx.ablations.no_lcb;
        let convention = conventional_frame(&request.on, &meta.frame);
        let point = |u: f64, v: f64| -> Value {
            let w = placement.point(gt_frame.to_global(u, v));
            let p = if lcb { meta.world_to_view(w) } else { convention.to_local(w) };
            json!([round5(p[0]), round5(p[1])])
        };
        let length = |l: f64| if lcb { round5(l * s / meta.window.size) } else { round5(l * s) };
        let primitives: Vec<Value> = sketch
            .primitives
            .iter()
            .map(|p| {
                let (mut v, construction) = match p {
                    Primitive::Line { start, end, construction } => {
                        (json!({"type": "line", "start": point(start[0], start[1]), "end": point(end[0], end[1])}), *construction)
                    }
                    Primitive::Arc { start, mid, end, construction } => (
                        json!({"type": "arc", "start": point(start[0], start[1]), "mid": point(mid[0], mid[1]), "end": point(end[0], end[1])}),
                        *construction,
                    ),
                    Primitive::CenterArc { center, radius, start_angle, end_angle, construction } => {
                        let mut end_angle = *end_angle;
                        while end_angle <= *start_angle {
                            end_angle += 360.0;
                        }
                        let at = |a: f64| {
                            let r = a.to_radians();
                            point(center[0] + radius * r.cos(), center[1] + radius * r.sin())
                        };
                        (
                            json!({"type": "arc", "start": at(*start_angle), "mid": at((start_angle + end_angle) / 2.0), "end": at(end_angle)}),
                            *construction,
                        )
                    }
                    Primitive::Circle { center, radius, construction } => {
                        (json!({"type": "circle", "center": point(center[0], center[1]), "radius": length(*radius)}), *construction)
                    }
                };
                if construction {
                    v["construction"] = true.into();
                }
                v
            })
            .collect();
        let mut constraints = Vec::new();
        'constraints: for c in &sketch.constraints {
            let mut v = serde_json::to_value(c).map_err(|e| no_answer(e.to_string()))?;
            for key in ["a", "b", "point", "object", "curve", "line"] {
                let Some(text) = v.get(key).and_then(Value::as_str).map(str::to_string) else { continue };
                if is_entity(split_position(&text).0) {
                    if ctx.ablations.no_pgr {
                        continue 'constraints;
                    }
                    v[key] = self.find(&text, &self.gt.states[k], ctx)?.into();
                }
            }
            if let Some(x) = v.get("value").and_then(Value::as_f64) {
                v["value"] = length(x).into();
            }
            constraints.push(v);
        }
        let mut answer = json!({"primitives": primitives});
        if !constraints.is_empty() {
            answer["constraints"] = Value::Array(constraints);
        }
        Ok(answer)
    }

    /// The ground truth's model after the step `ctx` is at, placed like the current model.
    pub(crate) fn expected_after_step(&self, ctx: &Context) -> Option<ModelState> {
        let step = self.steps.get(ctx.loop_steps())?;
        let mut expected = self.gt.states.get(step.feature + 1)?.clone();
        let placement = self.placement(ctx);
        expected.volume *= placement.s.powi(3);
        if let Some(b) = expected.bbox.as_mut() {
            (b.min, b.max) = (placement.point(b.min), placement.point(b.max));
        }
        Some(expected)
    }

    fn stage3(&self, ctx: &Context) -> Result<Value, VlmError> {
        let candidate = ctx.preview.as_ref().ok_or_else(|| no_answer("a Stage 3 request without a preview"))?;
        let step = self.steps.get(ctx.loop_steps()).ok_or_else(|| no_answer("the ground truth has no such step"))?;
        let expected = &self.gt.states[step.feature + 1];
        let placement = self.placement(ctx);
        let mut reasons = Vec::new();
        let volume = expected.volume * placement.s.powi(3);
        if (candidate.volume - volume).abs() > 2e-3 * volume.max(1e-12) {
            reasons.push(format!(
                "the volume would be {:.3}, the target's at this step is {:.3}",
                candidate.volume, volume
            ));
        }
        // Boxes of swept and lofted B-spline faces are not tight (OpenCascade pads them by up
        // to a few percent, differently from one state to the next): compare them loosely.
        let diagonal = 2.0 * self.radius * placement.s;
        if let (Some(a), Some(b)) = (candidate.bbox, expected.bbox) {
            let (min, max) = (placement.point(b.min), placement.point(b.max));
            let off = (0..3)
                .any(|i| (a.min[i] - min[i]).abs() > 5e-2 * diagonal || (a.max[i] - max[i]).abs() > 5e-2 * diagonal);
            if off {
                reasons.push("the part's extent differs from the target's at this step".into());
            }
        }
        let verdict = if reasons.is_empty() { "accept" } else { "reject" };
        if reasons.is_empty() {
            reasons.push("matches the target at this step".into());
        }
        Ok(json!({"verdict": verdict, "reasons": reasons}))
    }
}

/// Points on a model's outline: its vertices and its edges sampled (lines by their ends,
/// circles and arcs densely), enough to find the circle around its silhouette.
fn outline_points(state: &ModelState) -> Vec<[f64; 3]> {
    use freecad_bridge::geometry::{add, cross, dot, scale, sub, unit};
    const SAMPLES: usize = 72;
    let mut points: Vec<[f64; 3]> = state.vertices.iter().map(|v| v.point).collect();
    for e in &state.edges {
        points.extend([e.start, e.end, e.midpoint].into_iter().flatten());
        let (Some(c), Some(r), Some(axis)) = (e.center, e.radius, e.axis.and_then(unit)) else { continue };
        let u = e
            .start
            .and_then(|s| unit(sub(s, c)))
            .or_else(|| unit(cross(axis, [1.0, 0.0, 0.0])))
            .or_else(|| unit(cross(axis, [0.0, 1.0, 0.0])));
        let Some(u) = u else { continue };
        let w = cross(axis, u);
        let angle = |p: [f64; 3]| {
            let d = sub(p, c);
            dot(d, w).atan2(dot(d, u)).rem_euclid(std::f64::consts::TAU)
        };
        // An arc runs from its start to its end through its midpoint, one way or the other.
        let sweep = match (e.closed, e.end, e.midpoint) {
            (false, Some(end), Some(mid)) => {
                let end = angle(end);
                if angle(mid) <= end { end } else { end - std::f64::consts::TAU }
            }
            _ => std::f64::consts::TAU,
        };
        points.extend((0..=SAMPLES).map(|k| {
            let a = sweep * k as f64 / SAMPLES as f64;
            add(c, add(scale(u, r * a.cos()), scale(w, r * a.sin())))
        }));
    }
    points
}

/// The radius of the circle around the points' silhouette seen from `direction`, found as
/// registration finds the target's (centred on the silhouette's box, through its farthest
/// point), with the views' camera axes.
fn silhouette_radius(points: &[[f64; 3]], direction: [f64; 3]) -> Option<f64> {
    use freecad_bridge::geometry::dot;
    let camera = views::Camera::framing(nalgebra::Point3::origin(), 1.0, Vector3::from(direction), false, 64, 64, 1.0);
    let flat: Vec<[f64; 2]> = points.iter().map(|p| [dot(*p, camera.right), dot(*p, camera.up)]).collect();
    let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for p in &flat {
        lo = [lo[0].min(p[0]), lo[1].min(p[1])];
        hi = [hi[0].max(p[0]), hi[1].max(p[1])];
    }
    let center = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0];
    let radius = flat.iter().map(|p| (p[0] - center[0]).hypot(p[1] - center[1])).fold(0.0, f64::max);
    (radius > 1e-12).then_some(radius)
}

fn is_entity(text: &str) -> bool {
    text.parse::<freecad_bridge::command::EntityId>().is_ok()
}

/// The entities of `state` in the body of the entity `id` names (the whole state when the
/// model has one body).
fn same_body<'a>(state: &'a ModelState, id: &str) -> std::borrow::Cow<'a, ModelState> {
    let Ok(body) = id.parse::<freecad_bridge::command::EntityId>().map(|e| e.body) else {
        return std::borrow::Cow::Borrowed(state);
    };
    if state.bodies.len() <= 1 {
        return std::borrow::Cow::Borrowed(state);
    }
    let mine = |e: &String| e.parse::<freecad_bridge::command::EntityId>().is_ok_and(|e| e.body == body);
    let mut only = state.clone();
    only.faces.retain(|f| mine(&f.id));
    only.edges.retain(|e| mine(&e.id));
    only.vertices.retain(|v| mine(&v.id));
    std::borrow::Cow::Owned(only)
}

/// The entity of `state` with the signature's geometry, placed.
/// How far two unit normals may differ and still be one direction: the oracle draws in view
/// coordinates rounded to 1e-4 of the window, which tilts a slanted side by up to ~1e-4.
const NORMAL_TOLERANCE: f64 = 2e-3;

fn matching(sig: &Signature, state: &ModelState, placement: Placement) -> Option<String> {
    let s = placement.s;
    let diagonal = state.bbox.map_or(1.0, |b| b.diagonal()).max(1e-12);
    let tolerance = 2e-3 * diagonal;
    let dist = |a: [f64; 3], b: [f64; 3]| (Vector3::from(a) - Vector3::from(placement.point(b))).norm();
    let opt = |a: Option<[f64; 3]>, b: Option<[f64; 3]>| match (a, b) {
        (Some(a), Some(b)) => dist(a, b),
        (None, None) => 0.0,
        _ => f64::INFINITY,
    };
    // Directions are not placed: a normal is the same whatever the scale and offset.
    let turn = |a: Option<[f64; 3]>, b: Option<[f64; 3]>| match (a, b) {
        (Some(a), Some(b)) => (Vector3::from(a) - Vector3::from(b)).norm(),
        (None, None) => 0.0,
        _ => f64::INFINITY,
    };
    let best = |scores: Vec<(f64, String)>| {
        scores.into_iter().filter(|(d, _)| *d <= tolerance).min_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, id)| id)
    };
    match sig {
        Signature::Face { kind, centroid, area, normal, .. } => {
            let same_kind = state.faces.iter().filter(|f| f.kind == *kind);
            let scored: Vec<(f64, String)> = same_kind
                .clone()
                .map(|f| {
                    let area_off = (f.area - area * s * s).abs() / (area * s * s).max(1e-12);
                    let normal_off = turn(f.normal, *normal);
                    let d = dist(f.centroid, *centroid)
                        + if area_off > 1e-2 || normal_off > NORMAL_TOLERANCE { f64::INFINITY } else { 0.0 };
                    (d, f.id.clone())
                })
                .collect();
            best(scored).or_else(|| {
                // A planar face that an earlier feature reshaped: the same plane.
                let n = Vector3::from((*normal)?);
                let offset = Vector3::from(placement.point(*centroid)).dot(&n);
                let coplanar: Vec<(f64, String)> = same_kind
                    .filter(|f| turn(f.normal, Some(n.into())) <= NORMAL_TOLERANCE)
                    .filter(|f| (Vector3::from(f.centroid).dot(&n) - offset).abs() <= tolerance)
                    .map(|f| (dist(f.centroid, *centroid), f.id.clone()))
                    .collect();
                coplanar.into_iter().min_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, id)| id)
            })
        }
        Signature::Edge { kind, start, end, midpoint, center, radius } => best(
            state
                .edges
                .iter()
                .filter(|e| e.kind == *kind)
                .map(|e| {
                    let ends = (opt(e.start, *start) + opt(e.end, *end)).min(opt(e.start, *end) + opt(e.end, *start));
                    let r = match (e.radius, radius) {
                        (Some(a), Some(b)) => (a - b * s).abs(),
                        _ => 0.0,
                    };
                    (ends + opt(e.midpoint, *midpoint) + opt(e.center, *center) + r, e.id.clone())
                })
                .collect(),
        ),
        Signature::Vertex { point } => {
            best(state.vertices.iter().map(|v| (dist(v.point, *point), v.id.clone())).collect())
        }
    }
}

/// The entity of `state` of the signature's kind nearest its placed position, however far.
fn nearest(sig: &Signature, state: &ModelState, placement: Placement) -> Option<String> {
    let dist = |a: [f64; 3], b: [f64; 3]| (Vector3::from(a) - Vector3::from(placement.point(b))).norm();
    let closest = |scores: Vec<(f64, String)>| scores.into_iter().min_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, id)| id);
    let diagonal = state.bbox.map_or(1.0, |b| b.diagonal()).max(1e-12);
    match sig {
        Signature::Face { kind, centroid, normal, .. } => closest(
            state
                .faces
                .iter()
                .filter(|f| f.kind == *kind)
                .map(|f| {
                    let turn = match (f.normal, normal) {
                        (Some(a), Some(b)) => (Vector3::from(a) - Vector3::from(*b)).norm(),
                        _ => 0.0,
                    };
                    (dist(f.centroid, *centroid) + diagonal * turn, f.id.clone())
                })
                .collect(),
        ),
        Signature::Edge { kind, midpoint, center, start, .. } => {
            let at = (*midpoint).or(*center).or(*start)?;
            closest(
                state
                    .edges
                    .iter()
                    .filter(|e| e.kind == *kind)
                    .filter_map(|e| Some((dist(e.midpoint.or(e.center).or(e.start)?, at), e.id.clone())))
                    .collect(),
            )
        }
        Signature::Vertex { point } => {
            closest(state.vertices.iter().map(|v| (dist(v.point, *point), v.id.clone())).collect())
        }
    }
}

impl Vlm for Oracle {
    fn name(&self) -> String {
        "oracle".into()
    }

    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError> {
        let answer = match request.stage {
            Stage::Stage1 => self.stage1(&request.context)?,
            Stage::Stage2 => self.stage2(&request.context)?,
            Stage::Stage3 => self.stage3(&request.context)?,
            Stage::DirectCode => {
                return Err(VlmError::NoAnswer {
                    backend: self.name(),
                    reason: "the oracle answers the loop's stages, not the direct-code baseline (it needs a model: --vlm openai)".into(),
                });
            }
        };
        Ok(Reply { text: answer.to_string(), usage: None, cached: false, injected: Vec::new(), observed: Vec::new() })
    }
}
