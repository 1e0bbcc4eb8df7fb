//! # vision2cad
//!
//! One image of a mechanical part in, a parametric FreeCAD model out, built step by step by
//! a vision-language model in the three-stage loop of `../shared/design/method.md`:
//!
//! - [`register`]: find the part in the target image, fit S_t and the camera (Reg);
//! - [`stage1`]: the next operation and its references, by ID (EGR) or by [`selectors`];
//! - [`stage2`]: sketches in view coordinates, mapped by [`lcb`] into the plane's frame and
//!   tied to projected geometry by [`pgr`];
//! - [`stage3`]: the preview, accepted or rejected with reasons (EVf);
//! - [`vlm`]: the model behind one trait (the oracle, a scripted replay);
//! - [`prompts`]: the templates in `prompts/`; [`report`]: the trace and the HTML report.
//!
//! ```no_run
//! use freecad_bridge::{Session, WorkerConfig};
//! use vision2cad::{Config, reconstruct, vlm::{GroundTruth, Oracle}};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
//! let gt = GroundTruth::load("assets/programs/plate_counterbore.json".as_ref(), &mut session)?;
//! let mut oracle = Oracle::new(gt);
//! let outcome = reconstruct(
//!     "assets/examples/plate_counterbore.png".as_ref(), "out/plate".as_ref(),
//!     &Config::default(), &mut oracle, &mut session, false)?;
//! println!("{} steps, finished: {}", outcome.steps, outcome.finished);
//! # Ok(())
//! # }
//! ```

pub mod config;
pub mod direct_code;
pub mod lcb;
pub mod pgr;
pub mod prompts;
pub mod rag;
pub mod register;
pub mod report;
pub mod selectors;
pub mod stage1;
pub mod stage2;
pub mod stage3;
pub mod stage_export;
pub mod vlm;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use freecad_bridge::command::Sketch;
use freecad_bridge::{BridgeError, Command, ModelState, Preview, Program, Session};
use serde::Serialize;
use serde_json::{Value, json};
use views::{LabelKinds, Options, Scene, Window};

pub use config::{Ablations, Config};

use crate::prompts::{Fill, Prompts};
use crate::register::Target;
use crate::report::Trace;
use crate::stage1::Plan;
use crate::stage2::Drawing;
use crate::stage3::Verdict;
use crate::vlm::{Context, Request, SketchRequest, Sphere, Stage, Usage, Vlm};

/// Why a reconstruction could not run (as opposed to a model that did badly: that is an
/// [`Outcome`] with a failure).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("cannot read the target image {path}: {reason}")]
    Image { path: String, reason: String },
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Register(#[from] register::RegisterError),
    #[error(transparent)]
    Prompts(#[from] prompts::PromptError),
    #[error("FreeCAD: {0}")]
    Bridge(#[from] BridgeError),
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("cannot resume from {path}: {reason}")]
    Resume { path: String, reason: String },
    #[error("retrieval (RAG): {0}")]
    Rag(String),
    #[error("cannot use the ground truth {path}: {reason}")]
    Truth { path: String, reason: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LoopError + '_ {
    move |source| LoopError::Io { path: path.display().to_string(), source }
}

/// Seconds spent, by kind of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timing {
    /// FreeCAD: executing, previewing, tessellating, rolling back.
    pub kernel: f64,
    /// Views: rasterising, labelling, PNG files.
    pub render: f64,
    /// Filling templates, validating answers.
    pub prompt: f64,
    /// Waiting for the model.
    pub model: f64,
}

impl Timing {
    /// What was spent since `earlier`, a copy of this timing taken before.
    pub fn since(&self, earlier: &Timing) -> Timing {
        Timing {
            kernel: self.kernel - earlier.kernel,
            render: self.render - earlier.render,
            prompt: self.prompt - earlier.prompt,
            model: self.model - earlier.model,
        }
    }

    /// The harness's own time (everything but the model).
    pub fn harness(&self) -> f64 {
        self.kernel + self.render + self.prompt
    }
}

/// What a reconstruction reached.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Accepted operations (END excluded).
    pub steps: usize,
    /// The model said END.
    pub finished: bool,
    /// Why the loop stopped.
    pub stop: String,
    /// Set when the loop stopped on a failure (a step that never got a candidate through,
    /// a backend that could not answer).
    pub failure: Option<String>,
    pub calls: usize,
    pub rejections: usize,
    pub usage: Usage,
    pub timing: Timing,
    /// Per accepted step: the harness's own seconds.
    pub step_timing: Vec<Timing>,
    pub seconds: f64,
    pub backend: String,
    pub ablations: Vec<&'static str>,
}

enum StepEnd {
    Accepted,
    Ended,
    Failed(String),
}

/// How one attempt at a step ended.
enum Attempt {
    Accepted,
    Ended,
    /// The attempt failed; its reason goes back to Stage 1. `rejected`: Stage 3 said no.
    Retry {
        reason: String,
        rejected: bool,
    },
    /// The backend cannot answer: the run stops.
    Failed(String),
}

impl Attempt {
    fn retry(reason: String) -> Attempt {
        Attempt::Retry { reason, rejected: false }
    }
}

/// Where in the run an attempt is.
#[derive(Debug, Clone, Copy)]
struct Turn {
    step: usize,
    attempt: usize,
    /// Stage 3 judges this attempt's candidate.
    verify: bool,
}

/// A stage's answer, checked; or why there is none.
enum Asked<T> {
    Answer(T),
    Invalid(String),
    Backend(String),
}

struct Run<'a> {
    config: &'a Config,
    prompts: Prompts,
    out: PathBuf,
    target: Target,
    trace: Trace,
    history: Vec<Command>,
    steps_done: usize,
    sphere: Sphere,
    timing: Timing,
    calls: usize,
    rejections: usize,
    usage: Usage,
    name: String,
    /// The scene of the current accepted state, once tessellated.
    scene: Option<Rc<Scene>>,
    /// GERD-RET, when an index is configured and RAG is on.
    retriever: Option<rag::Retriever>,
}

/// Reconstruct the part in `image` into `out` (created if missing): `model.FCStd`,
/// `model.step`, `state.json`, `program.json`, `trace.jsonl`, `views/`, `report.html`,
/// `outcome.json`. With `resume`, continue from `out/program.json`.
///
/// The document reached is written however the loop ends; an `Err` means the run could not
/// start or its outputs could not be written.
pub fn reconstruct(
    image: &Path,
    out: &Path,
    config: &Config,
    vlm: &mut dyn Vlm,
    session: &mut Session,
    resume: bool,
) -> Result<Outcome, LoopError> {
    reconstruct_with(image, out, config, vlm, session, resume, None)
}

/// [`reconstruct`] with the embedder that built the retrieval index (an HTTP embedder);
/// `None` is the built-in one.
pub fn reconstruct_with(
    image: &Path,
    out: &Path,
    config: &Config,
    vlm: &mut dyn Vlm,
    session: &mut Session,
    resume: bool,
    embedder: Option<Box<dyn gerd::retrieve::embed::Embedder>>,
) -> Result<Outcome, LoopError> {
    let started = Instant::now();
    config.check()?;
    let picture = image::open(image)
        .map_err(|e| LoopError::Image { path: image.display().to_string(), reason: e.to_string() })?
        .to_rgb8();
    let target = Target::analyse(picture, &image.display().to_string())?;
    let prompts = Prompts::load(config.prompts.as_deref())?;
    let retriever = match (&config.rag_index, config.ablations.no_rag) {
        (Some(index), false) => Some(rag::Retriever::open(index, &target.image, config.rag_k, embedder)?),
        _ => None,
    };
    std::fs::create_dir_all(out.join("views")).map_err(io(out))?;
    let name = image.file_stem().map_or("part".into(), |s| s.to_string_lossy().into_owned());
    let mut run = Run {
        config,
        prompts,
        out: out.to_path_buf(),
        trace: Trace::open(&out.join("trace.jsonl"), resume)?,
        target,
        history: Vec::new(),
        steps_done: 0,
        sphere: Sphere { center: [0.0; 3], radius: config.part_radius },
        timing: Timing::default(),
        calls: 0,
        rejections: 0,
        usage: Usage::default(),
        name,
        scene: None,
        retriever,
    };
    let target_image = run.target.image.clone();
    run.save(&target_image, "target.png")?;
    let mut finished = false;
    kernel(&mut run.timing, session, |s| s.reset().map(|_| ()))?;
    if resume {
        finished = run.replay(session)?;
    } else {
        run.trace.event(json!({"event": "start", "image": image.display().to_string(), "backend": vlm.name(),
            "config": config, "prompts": run.prompts.source, "target": {"center_px": run.target.center_px,
            "radius_px": run.target.radius_px}}))?;
        if run.retriever.is_none() && !config.ablations.no_rag {
            tracing::info!("RAG is off: no retrieval index (--rag-index, rag_index in the config)");
            run.trace.event(json!({"event": "rag", "on": false, "reason": "no retrieval index was given"}))?;
        }
    }
    let mut step_timing = Vec::new();
    let mut failure = None;
    let stop;
    loop {
        if finished {
            stop = "the model said END".to_string();
            break;
        }
        if run.steps_done >= config.max_steps {
            stop = format!("the step limit ({}) was reached", config.max_steps);
            break;
        }
        let before = run.timing;
        let end = run.step(vlm, session)?;
        let spent = run.timing.since(&before);
        match end {
            StepEnd::Accepted => {
                step_timing.push(spent);
                run.trace.event(json!({"event": "accepted", "step": run.steps_done, "timing": spent}))?;
            }
            StepEnd::Ended => finished = true,
            StepEnd::Failed(reason) => {
                stop = reason.clone();
                failure = Some(reason);
                break;
            }
        }
    }
    run.write_program(finished)?;
    let t = Instant::now();
    report::write_model(session, out)?;
    run.timing.kernel += t.elapsed().as_secs_f64();
    let outcome = Outcome {
        steps: run.steps_done,
        finished,
        stop,
        failure,
        calls: run.calls,
        rejections: run.rejections,
        usage: run.usage,
        timing: run.timing,
        step_timing,
        seconds: started.elapsed().as_secs_f64(),
        backend: vlm.name(),
        ablations: config.ablations.names(),
    };
    run.trace.event(json!({"event": "stop", "outcome": outcome}))?;
    report::write_json(&out.join("outcome.json"), &outcome)?;
    report::write_html(out)?;
    Ok(outcome)
}

/// Run a FreeCAD call, retrying it when the worker was lost (the session has already
/// rebuilt the document in a fresh one): a crash costs time, never the result.
fn kernel<T>(
    timing: &mut Timing,
    session: &mut Session,
    mut call: impl FnMut(&mut Session) -> Result<T, BridgeError>,
) -> Result<T, BridgeError> {
    let start = Instant::now();
    let mut lost = 0;
    let result = loop {
        match call(session) {
            Err(BridgeError::WorkerLost { source }) if lost < 3 => {
                lost += 1;
                tracing::warn!("FreeCAD worker lost ({source}); the document was rebuilt, trying again");
            }
            other => break other,
        }
    };
    timing.kernel += start.elapsed().as_secs_f64();
    result
}

/// Strip the code fences some models wrap JSON in.
pub(crate) fn json_text(text: &str) -> &str {
    let t = text.trim();
    let t = t.strip_prefix("```json").or_else(|| t.strip_prefix("```")).unwrap_or(t);
    t.strip_suffix("```").unwrap_or(t).trim()
}

impl Run<'_> {
    fn flags(&self, fill: Fill) -> Fill {
        let ab = self.config.ablations;
        fill.flag("egr", !ab.no_egr)
            .flag("lcb", !ab.no_lcb)
            .flag("pgr", !ab.no_pgr)
            .flag("reg", !ab.no_reg)
            .flag("evf", !ab.no_evf)
    }

    fn context(&self, state: &ModelState) -> Context {
        Context {
            steps_done: self.steps_done,
            history: self.history.clone(),
            state: state.clone(),
            ablations: self.config.ablations,
            sphere: self.sphere,
            plan: None,
            sketch: None,
            preview: None,
        }
    }

    fn view_path(&self, name: &str) -> PathBuf {
        self.out.join("views").join(name)
    }

    fn save(&self, image: &image::RgbImage, name: &str) -> Result<PathBuf, LoopError> {
        let path = self.view_path(name);
        image.save(&path).map_err(|e| LoopError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(path)
    }

    fn options(&self) -> Options {
        let ab = self.config.ablations;
        Options {
            size: self.config.view_size,
            direction: self.config.direction,
            labels: LabelKinds { edges: !ab.no_egr, faces: false, vertices: false },
            sphere: (!ab.no_reg).then_some((self.sphere.center, self.sphere.radius)),
            ..Options::default()
        }
    }

    /// Ask the model, re-asking with the validation errors up to the configured bound.
    fn ask<T>(
        &mut self,
        vlm: &mut dyn Vlm,
        mut request: Request,
        turn: Turn,
        check: impl Fn(Value) -> Result<T, String>,
    ) -> Result<Asked<T>, LoopError> {
        let base_text = request.text.clone();
        let mut last_errors = Vec::new();
        for round in 0..=self.config.max_invalid_answers {
            if !last_errors.is_empty() {
                request.text = format!(
                    "{base_text}\n## Your previous answer was not valid\n{}\nAnswer again with one JSON object that fixes this.\n",
                    last_errors.iter().map(|e| format!("- {e}")).collect::<Vec<_>>().join("\n")
                );
            }
            let start = Instant::now();
            let reply = vlm.answer(&request);
            let model_seconds = start.elapsed().as_secs_f64();
            self.timing.model += model_seconds;
            self.calls += 1;
            let images: Vec<String> =
                request.images.iter().map(|p| p.strip_prefix(&self.out).unwrap_or(p).display().to_string()).collect();
            let mut entry = json!({"event": "call", "step": turn.step, "attempt": turn.attempt, "try": round + 1,
                "stage": request.stage.name(), "request": {"text": request.text, "images": images},
                "seconds": model_seconds});
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    entry["error"] = e.to_string().into();
                    self.trace.event(entry)?;
                    return Ok(Asked::Backend(e.to_string()));
                }
            };
            if let Some(u) = reply.usage {
                self.usage.input_tokens += u.input_tokens;
                self.usage.output_tokens += u.output_tokens;
                self.usage.cost = match (self.usage.cost, u.cost) {
                    (a, None) => a,
                    (a, Some(c)) => Some(a.unwrap_or(0.0) + c),
                };
                entry["usage"] = serde_json::to_value(u).unwrap_or_default();
            }
            if reply.cached {
                entry["cached"] = true.into();
            }
            if !reply.injected.is_empty() {
                entry["injected"] = Value::Array(reply.injected.clone());
            }
            if !reply.observed.is_empty() {
                entry["observed"] = Value::Array(reply.observed.clone());
            }
            entry["answer"] = reply.text.clone().into();
            let start = Instant::now();
            let checked = serde_json::from_str::<Value>(json_text(&reply.text))
                .map_err(|e| vec![format!("the answer is not JSON: {e}")])
                .and_then(|v| self.prompts.validate(request.stage, &v).map(|()| v))
                .and_then(|v| check(v).map_err(|e| vec![e]));
            self.timing.prompt += start.elapsed().as_secs_f64();
            match checked {
                Ok(value) => {
                    self.trace.event(entry)?;
                    return Ok(Asked::Answer(value));
                }
                Err(errors) => {
                    entry["errors"] = json!(errors);
                    self.trace.event(entry)?;
                    last_errors = errors;
                }
            }
        }
        Ok(Asked::Invalid(format!(
            "{} answers in a row were invalid; the last: {}",
            self.config.max_invalid_answers + 1,
            last_errors.join("; ")
        )))
    }

    fn request(
        &self,
        stage: Stage,
        file: &'static str,
        fill: Fill,
        images: Vec<PathBuf>,
        context: Context,
    ) -> Result<Request, LoopError> {
        let system = self.prompts.render("system.md", &Fill::default())?;
        let text = self.prompts.render(file, &self.flags(fill))?;
        Ok(Request { stage, system, text, images, schema: self.prompts.schema(stage).clone(), context })
    }

    /// The current model as the views draw it, tessellated once per accepted state (the
    /// registration, the tagged view and every sketch view of a step share it).
    fn scene(&mut self, session: &mut Session) -> Result<Rc<Scene>, LoopError> {
        if let Some(scene) = &self.scene {
            return Ok(Rc::clone(scene));
        }
        let scene =
            if session.state().empty { Scene::default() } else { kernel(&mut self.timing, session, views::scene_of)? };
        let scene = Rc::new(scene);
        self.scene = Some(Rc::clone(&scene));
        Ok(scene)
    }

    /// The tagged view of the current model (none while it is empty), with S_t drawn.
    fn tagged(&mut self, session: &mut Session, step: usize) -> Result<Option<PathBuf>, LoopError> {
        if session.state().empty {
            return Ok(None);
        }
        let scene = self.scene(session)?;
        let start = Instant::now();
        let mut view = views::tagged(&scene, session.state(), &self.options());
        if !self.config.ablations.no_reg {
            draw_sphere_on(&mut view, self.sphere);
        }
        let path = self.save(&view.image, &format!("step{step:02}_tagged.png"))?;
        self.timing.render += start.elapsed().as_secs_f64();
        Ok(Some(path))
    }

    fn step(&mut self, vlm: &mut dyn Vlm, session: &mut Session) -> Result<StepEnd, LoopError> {
        let step = self.steps_done + 1;
        let tagged = self.tagged(session, step)?;
        let mut feedback: Vec<String> = Vec::new();
        let mut rejections = 0;
        let attempts = self.config.max_rejections + 1;
        for attempt in 1..=attempts {
            let verify = !self.config.ablations.no_evf && rejections < self.config.max_rejections;
            let turn = Turn { step, attempt, verify };
            match self.attempt(vlm, session, turn, tagged.as_deref(), &feedback)? {
                Attempt::Accepted => return Ok(StepEnd::Accepted),
                Attempt::Ended => return Ok(StepEnd::Ended),
                Attempt::Failed(reason) => return Ok(StepEnd::Failed(format!("step {step}: {reason}"))),
                Attempt::Retry { reason, rejected } => {
                    rejections += usize::from(rejected);
                    feedback.push(reason);
                }
            }
        }
        Ok(StepEnd::Failed(format!(
            "step {step}: no candidate got through in {attempts} attempts; the last problem: {}",
            feedback.last().map_or("none recorded", String::as_str)
        )))
    }

    /// One candidate for the step: Stage 1, Stage 2 for each new sketch, execution and
    /// preview, Stage 3, commit. Whatever fails leaves the document as it was.
    fn attempt(
        &mut self,
        vlm: &mut dyn Vlm,
        session: &mut Session,
        turn: Turn,
        tagged: Option<&Path>,
        feedback: &[String],
    ) -> Result<Attempt, LoopError> {
        let state = session.state().clone();
        let (plan, command) = match self.stage1(vlm, &state, turn, tagged, feedback)? {
            Asked::Answer(x) => x,
            Asked::Invalid(reason) => return Ok(Attempt::retry(reason)),
            Asked::Backend(reason) => return Ok(Attempt::Failed(reason)),
        };
        if plan.is_end() {
            self.trace.event(json!({"event": "end", "step": turn.step, "reason": plan.reason}))?;
            return Ok(Attempt::Ended);
        }
        // The command works in another body: switch before its sketches are placed and
        // drawn, and switch back (by rebuilding) if the candidate does not get through.
        let switch = plan.body.clone().map(|name| Command::Body(freecad_bridge::command::BodyChoice { name }));
        if let Some(c) = &switch
            && let Err(e) = kernel(&mut self.timing, session, |s| s.execute(c))
        {
            return self.failed_candidate(turn, e.to_string());
        }
        let outcome = self.attempt_in_body(vlm, session, turn, &state, plan, command, switch.clone())?;
        // A failure after the switch may have rebuilt the document already (back in the
        // body it started in); otherwise the switch is undone here.
        let switched = session.state().active_body != state.active_body || session.state().bodies != state.bodies;
        if switched && !matches!(outcome, Attempt::Accepted) {
            self.rollback(session)?;
        }
        Ok(outcome)
    }

    /// The rest of [`Self::attempt`], in the body the plan works in: Stage 2, execution and
    /// preview, Stage 3, commit (with the body switch first, when there is one).
    #[allow(clippy::too_many_arguments)]
    fn attempt_in_body(
        &mut self,
        vlm: &mut dyn Vlm,
        session: &mut Session,
        turn: Turn,
        state: &ModelState,
        plan: Plan,
        command: Command,
        switch: Option<Command>,
    ) -> Result<Attempt, LoopError> {
        let mut command_value = plan.command.clone();
        let mut sketches: Vec<Sketch> = Vec::new();
        for sp in &plan.sketches {
            match self.stage2(vlm, session, &plan, sp, turn, &mut command_value)? {
                Asked::Answer(sketch) => sketches.push(sketch),
                Asked::Invalid(reason) => return Ok(Attempt::retry(reason)),
                Asked::Backend(reason) => return Ok(Attempt::Failed(reason)),
            }
        }
        let command = if plan.sketches.is_empty() {
            command
        } else {
            match serde_json::from_value::<Command>(command_value) {
                Ok(c) => c,
                Err(e) => {
                    return Ok(Attempt::retry(format!("the command with the sketch's parameters does not parse: {e}")));
                }
            }
        };
        let preview = match self.candidate(session, &sketches, &command)? {
            Ok(p) => p,
            Err(reason) => return self.failed_candidate(turn, reason),
        };
        if turn.verify {
            let verdict = self.stage3(vlm, state, &plan, &preview, turn)?;
            let retry = match verdict {
                Asked::Answer(v) if v.accepted() => None,
                Asked::Answer(v) => {
                    self.rejections += 1;
                    self.trace.event(
                        json!({"event": "rejected", "step": turn.step, "attempt": turn.attempt, "reasons": v.reasons}),
                    )?;
                    let reason = format!(
                        "attempt {} ({}) was rejected: {}",
                        turn.attempt,
                        plan.describe(),
                        v.reasons.join("; ")
                    );
                    Some(Attempt::Retry { reason, rejected: true })
                }
                Asked::Invalid(reason) => Some(Attempt::retry(reason)),
                Asked::Backend(reason) => Some(Attempt::Failed(reason)),
            };
            if let Some(retry) = retry {
                self.rollback(session)?;
                return Ok(retry);
            }
        }
        if let Err(e) = kernel(&mut self.timing, session, |s| s.execute(&command)) {
            self.rollback(session)?;
            return self.failed_candidate(turn, e.to_string());
        }
        let committed: Vec<Command> =
            switch.into_iter().chain(sketches.into_iter().map(Command::Sketch)).chain([command]).collect();
        self.trace.event(json!({"event": "execute", "step": turn.step, "attempt": turn.attempt, "ok": true,
            "verified": turn.verify, "commands": committed}))?;
        self.history.extend(committed);
        self.steps_done += 1;
        self.scene = None;
        self.write_program(false)?;
        self.register(session)?;
        Ok(Attempt::Accepted)
    }

    fn failed_candidate(&mut self, turn: Turn, reason: String) -> Result<Attempt, LoopError> {
        self.trace.event(
            json!({"event": "execute", "step": turn.step, "attempt": turn.attempt, "ok": false, "error": reason}),
        )?;
        Ok(Attempt::retry(format!("the candidate failed: {reason}")))
    }

    /// Execute the sketches and preview the feature; on a failure the document is put back.
    fn candidate(
        &mut self,
        session: &mut Session,
        sketches: &[Sketch],
        command: &Command,
    ) -> Result<Result<Preview, String>, LoopError> {
        for (i, sketch) in sketches.iter().enumerate() {
            let c = Command::Sketch(sketch.clone());
            if let Err(e) = kernel(&mut self.timing, session, |s| s.execute(&c)) {
                if i > 0 {
                    self.rollback(session)?;
                }
                return Ok(Err(format!("sketch {}: {e}", sketch.name)));
            }
        }
        let diagonal = session.state().bbox.map_or(2.0 * self.sphere.radius, |b| b.diagonal());
        let preview = kernel(&mut self.timing, session, |s| s.preview(command, views::deflection_for(diagonal)));
        match preview {
            Ok(p) => Ok(Ok(p)),
            Err(e) => {
                if !sketches.is_empty() {
                    self.rollback(session)?;
                }
                Ok(Err(e.to_string()))
            }
        }
    }

    /// Stage 1: the next operation, checked against the model.
    fn stage1(
        &mut self,
        vlm: &mut dyn Vlm,
        state: &ModelState,
        turn: Turn,
        tagged: Option<&Path>,
        feedback: &[String],
    ) -> Result<Asked<(Plan, Command)>, LoopError> {
        let start = Instant::now();
        let fill = Fill::default()
            .value("step", turn.step.to_string())
            .value("max_steps", self.config.max_steps.to_string())
            .value("sphere_center", fmt3(self.sphere.center))
            .value("sphere_radius", format!("{:.4}", self.sphere.radius))
            .value("part_diameter", format!("{:.0}", 2.0 * self.sphere.radius))
            .value("entity_table", gerd::export::entity_table(state).trim_end().to_string())
            .value("history", history_text(&self.history))
            .value("feedback_text", feedback.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n"))
            .flag("feedback", !feedback.is_empty())
            .flag("empty", state.empty)
            .value("bodies", state.bodies.iter().map(|b| b.id.as_str()).collect::<Vec<_>>().join(", "))
            .value("active_body", format!("B{}", state.active_body_number()))
            .flag("several_bodies", state.bodies.len() > 1);
        let mut images: Vec<PathBuf> =
            std::iter::once(self.view_path("target.png")).chain(tagged.map(Path::to_path_buf)).collect();
        let examples = match self.retriever.as_mut().map(|r| r.examples(state, &self.history)) {
            Some(Ok(examples)) => examples,
            // The run ends as a recorded failure, with everything reached so far written.
            Some(Err(e)) => return Ok(Asked::Backend(e.to_string())),
            None => Vec::new(),
        };
        let fill = if examples.is_empty() {
            fill.value("retrieved", String::new()).flag("rag", false)
        } else {
            self.trace.event(json!({"event": "retrieved", "step": turn.step, "attempt": turn.attempt,
                "hits": examples.iter().map(|e| &e.hit).collect::<Vec<_>>()}))?;
            let text = rag::prompt_text(&examples, images.len() + 1);
            images.extend(examples.iter().filter_map(|e| e.image.clone()));
            fill.value("retrieved", text).flag("rag", true)
        };
        let request = self.request(Stage::Stage1, "stage1.md", fill, images, self.context(state))?;
        self.timing.prompt += start.elapsed().as_secs_f64();
        let no_egr = self.config.ablations.no_egr;
        let history = self.history.clone();
        self.ask(vlm, request, turn, |v| {
            let plan: Plan = serde_json::from_value(v).map_err(|e| e.to_string())?;
            if plan.is_end() {
                return Ok((plan, Command::End));
            }
            stage1::interpret(plan, state, &history, no_egr)
        })
    }

    /// Stage 2 for one sketch: the sketch view, the drawing, LCB and PGR; revised
    /// parameters go into `command`.
    fn stage2(
        &mut self,
        vlm: &mut dyn Vlm,
        session: &mut Session,
        plan: &Plan,
        sp: &stage1::SketchPlan,
        turn: Turn,
        command: &mut Value,
    ) -> Result<Asked<Sketch>, LoopError> {
        let frame = match kernel(&mut self.timing, session, |s| s.plane_frame(&sp.on)) {
            Ok(f) => f,
            Err(e) => return Ok(Asked::Invalid(format!("sketch {} on {}: {e}", sp.name, sp.on))),
        };
        let scene = self.scene(session)?;
        let start = Instant::now();
        let window = (!self.config.ablations.no_reg).then(|| {
            let c = frame.to_local(self.sphere.center);
            let r = self.sphere.radius;
            Window { u0: c[0] - r, v0: c[1] - r, size: 2.0 * r }
        });
        let state = session.state().clone();
        let mut view = views::sketch(&scene, &state, &frame, window, &self.options());
        let Some(meta) = view.meta.sketch.clone() else {
            return Ok(Asked::Invalid("the sketch view has no map".into()));
        };
        if !self.config.ablations.no_reg {
            let center = meta.view_to_pixel([0.5, 0.5]);
            register::draw_sphere(&mut view.image, [center.0, center.1], meta.grid[2] / 2.0);
        }
        let image =
            self.save(&view.image, &format!("step{:02}_try{}_{}_sketch.png", turn.step, turn.attempt, sp.name))?;
        self.timing.render += start.elapsed().as_secs_f64();
        let start = Instant::now();
        let fill = Fill::default()
            .value("sketch_name", sp.name.clone())
            .value("sketch_on", sp.on.clone())
            .value("plan", plan.describe())
            .value("window_size", format!("{:.4}", meta.window.size))
            .value("projected", pgr::projected_table(&meta, &state).trim_end().to_string());
        let mut context = self.context(&state);
        context.plan = Some(plan.clone());
        context.sketch = Some(SketchRequest { name: sp.name.clone(), on: sp.on.clone(), meta: meta.clone() });
        let images = vec![self.view_path("target.png"), image];
        let request = self.request(Stage::Stage2, "stage2.md", fill, images, context)?;
        self.timing.prompt += start.elapsed().as_secs_f64();
        let config = self.config;
        let asked = self.ask(vlm, request, turn, |v| {
            let drawing: Drawing = serde_json::from_value(v).map_err(|e| e.to_string())?;
            let (sketch, snapped) = stage2::to_sketch(&drawing, &sp.name, &sp.on, &meta, &state, config)?;
            Ok((drawing.parameters, sketch, snapped))
        })?;
        Ok(match asked {
            Asked::Answer((parameters, sketch, snapped)) => {
                if !snapped.constraints.is_empty() {
                    self.trace.event(json!({"event": "snapped", "step": turn.step, "attempt": turn.attempt,
                        "sketch": sp.name, "constraints": snapped.constraints}))?;
                }
                stage2::apply_parameters(command, &parameters, &meta, !self.config.ablations.no_lcb);
                Asked::Answer(sketch)
            }
            Asked::Invalid(reason) => Asked::Invalid(format!("sketch {}: {reason}", sp.name)),
            Asked::Backend(reason) => Asked::Backend(reason),
        })
    }

    /// Stage 3: the preview beside the target, judged.
    fn stage3(
        &mut self,
        vlm: &mut dyn Vlm,
        state: &ModelState,
        plan: &Plan,
        preview: &Preview,
        turn: Turn,
    ) -> Result<Asked<Verdict>, LoopError> {
        let start = Instant::now();
        let mut view = views::preview(preview, &self.options(), Some(&self.target.image));
        if !self.config.ablations.no_reg {
            draw_sphere_on(&mut view, self.sphere);
        }
        let image = self.save(&view.image, &format!("step{:02}_try{}_preview.png", turn.step, turn.attempt))?;
        self.timing.render += start.elapsed().as_secs_f64();
        let start = Instant::now();
        let fill = Fill::default()
            .value("step", turn.step.to_string())
            .value("plan", plan.describe())
            .value("preview_summary", stage3::summary(&preview.state))
            .value("before_summary", stage3::summary(state));
        let mut context = self.context(state);
        context.plan = Some(plan.clone());
        context.preview = Some(preview.state.clone());
        let request = self.request(Stage::Stage3, "stage3.md", fill, vec![image], context)?;
        self.timing.prompt += start.elapsed().as_secs_f64();
        self.ask(vlm, request, turn, |v| serde_json::from_value::<Verdict>(v).map_err(|e| e.to_string()))
    }

    /// Back to the accepted commands: the document as it was before the attempt.
    fn rollback(&mut self, session: &mut Session) -> Result<(), LoopError> {
        let history = self.history.clone();
        kernel(&mut self.timing, session, |s| {
            s.reset()?;
            history.iter().try_for_each(|c| s.execute(c).map(|_| ()))
        })?;
        Ok(())
    }

    /// Refit S_t to the current model (Reg).
    fn register(&mut self, session: &mut Session) -> Result<(), LoopError> {
        if self.config.ablations.no_reg || session.state().empty {
            return Ok(());
        }
        let scene = self.scene(session)?;
        let start = Instant::now();
        let fit = register::refit(&self.target, &scene, self.sphere, self.config.direction);
        self.timing.render += start.elapsed().as_secs_f64();
        self.sphere = fit.sphere;
        self.trace.event(json!({"event": "register", "step": self.steps_done, "fit": fit}))
    }

    fn program(&self, finished: bool) -> Program {
        let mut commands = self.history.clone();
        if finished {
            commands.push(Command::End);
        }
        Program {
            name: Some(self.name.clone()),
            description: Some(format!("reconstructed by vision2cad from {}", self.name)),
            commands,
        }
    }

    fn write_program(&self, finished: bool) -> Result<(), LoopError> {
        report::write_json(&self.out.join("program.json"), &self.program(finished))
    }

    /// Continue from `program.json`: execute the accepted commands again. Returns whether
    /// that program was finished (ends with END).
    fn replay(&mut self, session: &mut Session) -> Result<bool, LoopError> {
        let path = self.out.join("program.json");
        let fail = |reason: String| LoopError::Resume { path: path.display().to_string(), reason };
        let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
        let program = freecad_bridge::parse_program(&text).map_err(&fail)?;
        let mut finished = false;
        for (i, c) in program.commands.iter().enumerate() {
            if matches!(c, Command::End) {
                finished = true;
                break;
            }
            kernel(&mut self.timing, session, |s| s.execute(c))
                .map_err(|e| fail(format!("command {i} ({}): {e}", c.op())))?;
            self.history.push(c.clone());
        }
        self.steps_done = self.history.iter().filter(|c| !matches!(c, Command::Sketch(_) | Command::Body(_))).count();
        self.trace.event(json!({"event": "resume", "steps": self.steps_done, "finished": finished}))?;
        self.register(session)?;
        Ok(finished)
    }
}

fn draw_sphere_on(view: &mut views::View, sphere: Sphere) {
    let camera = &view.meta.camera;
    if let (Some((x, y, _)), views::Projection::Orthographic { pixels_per_unit }) =
        (camera.project(&nalgebra::Point3::from(sphere.center)), camera.projection)
    {
        register::draw_sphere(&mut view.image, [x, y], sphere.radius * pixels_per_unit);
    }
}

fn fmt3(p: [f64; 3]) -> String {
    format!("({:.4}, {:.4}, {:.4})", p[0], p[1], p[2])
}

fn history_text(history: &[Command]) -> String {
    if history.is_empty() {
        return "(none yet: the model is empty)".into();
    }
    history.iter().map(|c| serde_json::to_string(c).unwrap_or_default()).collect::<Vec<_>>().join("\n")
}
