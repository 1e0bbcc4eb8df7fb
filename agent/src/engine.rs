//! The loop engine: [`Reconstruction`] checks a configuration once and runs it on images;
//! the engine sequences the steps, the attempts within a step, and the stages within an
//! attempt. Each stage lives in its own module ([`stage1`](crate::stage1),
//! [`stage2`](crate::stage2), [`stage3`](crate::stage3)): its request, its views, its answer
//! check and its events. What the engine shares with them is here: asking the model
//! ([`Engine::ask`]), the FreeCAD calls ([`kernel`]), rollback, registration and the trace.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use freecad_bridge::command::Sketch;
use freecad_bridge::{BridgeError, Command, ModelState, Program, Session};
use gerd::retrieve::embed::Embedder;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use views::{LabelKinds, Options, Scene};

use crate::config::{Config, ConfigError};
use crate::error::LoopError;
use crate::events::{Call, CallRequest, Execution, JsonlTrace, Sink, TargetCircle, TraceEvent};
use crate::prompts::{Fill, Prompts};
use crate::register::Target;
use crate::stage1::Plan;
use crate::vlm::{Context, Request, Sphere, Stage, Usage, Vlm};
use crate::{fit, rag, register, report};

/// Seconds spent, by kind of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
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

/// What a reconstruction reached (`outcome.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Accepted operations (END excluded).
    pub steps: usize,
    /// Steps set aside because no candidate got through (`max_skipped_steps`); the run went on.
    #[serde(default)]
    pub skipped_steps: Vec<usize>,
    /// The model said END.
    pub finished: bool,
    /// Why the loop stopped.
    pub stop: String,
    /// Set when the loop stopped on a failure (a step that never got a candidate through,
    /// a backend that could not answer).
    pub failure: Option<String>,
    /// The failure was the model server's (unreachable, the key refused, out of retries),
    /// not the part's.
    #[serde(default)]
    pub backend_failed: bool,
    pub calls: usize,
    pub rejections: usize,
    /// Candidates that failed to execute or preview (each sent back to Stage 1).
    #[serde(default)]
    pub failed_candidates: usize,
    /// Steps committed without a verification (after `max_rejections` rejections, or with
    /// EVf off).
    #[serde(default)]
    pub unverified_commits: usize,
    pub usage: Usage,
    /// Input tokens the retrieved examples added to Stage 1's requests (text and images,
    /// estimated as the common vision APIs count them; part of `usage` where the server
    /// counts tokens).
    #[serde(default)]
    pub retrieval_tokens: usize,
    pub timing: Timing,
    /// Per accepted step: the harness's own seconds.
    pub step_timing: Vec<Timing>,
    pub seconds: f64,
    pub backend: String,
    pub ablations: Vec<String>,
}

/// A reconstruction, configured once: build it, then run it on as many images as needed.
///
/// ```no_run
/// use freecad_bridge::{Session, WorkerConfig};
/// use vision2cad::{Config, Reconstruction, vlm::{GroundTruth, Oracle}};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
/// let gt = GroundTruth::load("assets/programs/plate_counterbore.json".as_ref(), &mut session)?;
/// let mut oracle = Oracle::new(gt);
/// let outcome = Reconstruction::new(Config::default())?
///     .run("assets/examples/plate_counterbore.png".as_ref(), "out/plate".as_ref(), &mut oracle, &mut session)?;
/// println!("{} steps, finished: {}", outcome.steps, outcome.finished);
/// # Ok(())
/// # }
/// ```
pub struct Reconstruction {
    config: Config,
    resume: bool,
    embedder: Option<Box<dyn Embedder>>,
    sinks: Vec<Box<dyn Sink>>,
}

impl std::fmt::Debug for Reconstruction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconstruction")
            .field("config", &self.config)
            .field("resume", &self.resume)
            .field("embedder", &self.embedder.as_ref().map(|e| e.id()))
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl Reconstruction {
    /// Check the configuration: a value the loop cannot work with is refused here, by name.
    pub fn new(config: Config) -> Result<Reconstruction, ConfigError> {
        config.check()?;
        Ok(Reconstruction { config, resume: false, embedder: None, sinks: Vec::new() })
    }

    /// Continue from the output folder's `program.json` instead of starting afresh.
    pub fn resume(mut self, resume: bool) -> Reconstruction {
        self.resume = resume;
        self
    }

    /// The embedder that built the retrieval index (an HTTP embedder); without one, the
    /// built-in embedder.
    pub fn embedder(mut self, embedder: Option<Box<dyn Embedder>>) -> Reconstruction {
        self.embedder = embedder;
        self
    }

    /// Another receiver of the run's events, beside `trace.jsonl`.
    pub fn sink(mut self, sink: Box<dyn Sink>) -> Reconstruction {
        self.sinks.push(sink);
        self
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Reconstruct the part in `image` into `out` (created if missing): `model.FCStd`,
    /// `model.step`, `model.glb`, `state.json`, `program.json`, `trace.jsonl`, `views/`, `report.html`,
    /// `outcome.json`.
    ///
    /// The document reached is written however the loop ends; an `Err` means the run
    /// could not start or its outputs could not be written.
    pub fn run(
        &mut self,
        image: &Path,
        out: &Path,
        vlm: &mut dyn Vlm,
        session: &mut Session,
    ) -> Result<Outcome, LoopError> {
        let started = Instant::now();
        let config = &self.config;
        let picture = image::open(image)
            .map_err(|e| LoopError::Image { path: image.display().to_string(), reason: e.to_string() })?
            .to_rgb8();
        let target = Target::analyse(picture, &image.display().to_string())?;
        let prompts = Prompts::load(config.prompts.as_deref())?;
        let retriever = match (&config.rag_index, config.ablations.no_rag) {
            (Some(index), false) => Some(rag::Retriever::open(
                index,
                &target.image,
                config.rag_k,
                config.rag_min_score,
                self.embedder.take(),
            )?),
            _ => None,
        };
        std::fs::create_dir_all(out.join("views")).map_err(|e| LoopError::io(out, e))?;
        let name = image.file_stem().map_or("part".into(), |s| s.to_string_lossy().into_owned());
        let reg = !config.ablations.no_reg;
        let framed_mask = reg.then(|| target.framed_mask(config.view_size, views::TAGGED_FILL));
        let framed_lines = reg.then(|| target.framed_lines(config.view_size, views::TAGGED_FILL));
        let fit_target = match (&framed_mask, &framed_lines) {
            (Some(mask), Some(lines)) if config.fit || config.fit_steps => {
                let pixels = fit::TargetPixels::new(config.view_size, mask.clone(), lines)
                    .with_native(target.native_lines(config.view_size, views::TAGGED_FILL));
                Some(if config.fit_subpixel { pixels.with_refined_lines() } else { pixels })
            }
            _ => None,
        };
        let engine = Engine {
            config,
            prompts,
            out: out.to_path_buf(),
            trace: JsonlTrace::open(&out.join("trace.jsonl"), self.resume)?,
            sinks: &mut self.sinks,
            framed_target: reg.then(|| framed_with_circle(&target, config.view_size)),
            framed_mask,
            framed_lines,
            fit_target,
            fit_report: None,
            dropped: Vec::new(),
            finish: None,
            edit_failure: None,
            fitted_from: None,
            as_drawn: Vec::new(),
            target,
            history: Vec::new(),
            history_notes: Vec::new(),
            history_kinds: Vec::new(),
            steps_done: 0,
            skipped: Vec::new(),
            sphere: Sphere { center: [0.0; 3], radius: config.part_radius },
            sphere_prior: register::Prior::Guess,
            moved: [0.0; 3],
            timing: Timing::default(),
            calls: 0,
            rejections: 0,
            failed_candidates: 0,
            unverified: Vec::new(),
            backend_failed: false,
            usage: Usage::default(),
            name,
            scene: None,
            retriever,
            retrieval_tokens: 0,
        };
        engine.run(image, vlm, session, self.resume, started)
    }
}

// The preview's panels are at the tagged view's framing, so one framed target serves both.
const _: () = assert!(views::PREVIEW_FILL == views::TAGGED_FILL);

/// The radius in pixels of S_t's circle in a view of `view_size` pixels.
pub(crate) fn circle_px(view_size: u32) -> f64 {
    f64::from(view_size) * views::TAGGED_FILL / 2.0
}

/// The target at the framing of the model's views: its silhouette's circle where they draw
/// S_t, the circle drawn dashed.
fn framed_with_circle(target: &Target, view_size: u32) -> image::RgbImage {
    let mut framed = target.framed(view_size, views::TAGGED_FILL);
    let half = f64::from(view_size) / 2.0;
    register::draw_sphere(&mut framed, [half, half], circle_px(view_size));
    framed
}

/// How a step ended.
enum StepEnd {
    Accepted,
    Ended,
    Failed(String),
    /// No candidate got through in the step's attempts (the model server answered).
    GaveUp(String),
}

/// How one attempt at a step ended.
pub(crate) enum Attempt {
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
    pub(crate) fn retry(reason: String) -> Attempt {
        Attempt::Retry { reason, rejected: false }
    }
}

/// Stage 1's command with the parameters Stage 2 revised.
fn with_parameters(command: &Value) -> Result<Command, String> {
    serde_json::from_value(command.clone())
        .map_err(|e| format!("the command with the sketch's parameters does not parse: {e}"))
}

/// Why a candidate could not be executed or previewed.
#[derive(Debug)]
pub(crate) struct CandidateFailure {
    pub(crate) reason: String,
    /// The index of the sketch whose drawing was the failure (its constraints cannot be
    /// solved, or its curves cross each other): it is drawn again.
    pub(crate) redraw_sketch: Option<usize>,
}

/// Where in the run an attempt is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turn {
    pub step: usize,
    pub attempt: usize,
    /// Stage 3 judges this attempt's candidate.
    pub verify: bool,
    /// What a rejection of this attempt's candidate leads to (readers asked how many were
    /// left before a candidate is committed unchecked).
    pub after_rejection: crate::stage3::AfterRejection,
}

/// A stage's answer, checked; or why there is none.
pub(crate) enum Asked<T> {
    Answer(T),
    Invalid(String),
    Backend(String),
}

/// One reconstruction in progress: the accepted commands, S_t, the trace and the tallies.
pub(crate) struct Engine<'a> {
    pub config: &'a Config,
    pub prompts: Prompts,
    pub out: PathBuf,
    pub target: Target,
    /// The target at the framing of the model's views, S_t's circle drawn (none under
    /// no-Reg): made once, shown in Stage 1 and beside every preview.
    pub framed_target: Option<image::RgbImage>,
    /// The target's silhouette at that framing (none under no-Reg): the overlap panel of
    /// Stage 3 compares the candidate's with it.
    pub framed_mask: Option<Vec<bool>>,
    /// The target's drawn lines at that framing (none under no-Reg): Stage 3 lays the
    /// candidate's edges over them.
    pub framed_lines: Option<Vec<bool>>,
    /// The target as the fit compares candidates with it (only with `fit` on, not under no-Reg).
    pub(crate) fit_target: Option<fit::TargetPixels>,
    /// The fit of the candidate Stage 3 is judging, when one ran.
    pub fit_report: Option<fit::FitReport>,
    /// The constraints the solver dropped from that candidate's sketches, as written.
    pub(crate) dropped: Vec<String>,
    /// Stage 3 accepted this attempt's candidate as the last step (its reasons): once it is
    /// committed the run ends as if Stage 1 had said END, without that call.
    pub(crate) finish: Option<String>,
    /// Why the accepted program does not rebuild under the evaluation's 10% depth edit, when
    /// it does not ([`Engine::check_edit`]): the next Stage 1 says so.
    pub(crate) edit_failure: Option<String>,
    /// The candidate's sketches and command as the model drew them, when the fit moved them.
    pub(crate) fitted_from: Option<(Vec<Sketch>, Command)>,
    /// Every committed feature a step's fit moved, as drawn, for the fit at END.
    pub(crate) as_drawn: Vec<fit::program::AsDrawn>,
    trace: JsonlTrace,
    sinks: &'a mut Vec<Box<dyn Sink>>,
    pub history: Vec<Command>,
    /// What the IDs each command of `history` names were at its step (IDs are renumbered
    /// as the model grows): one line per command, empty when it names none.
    pub history_notes: Vec<String>,
    /// The kinds of the entities each command of `history` names, at its step (see
    /// [`crate::revise::kinds`]): a revision must leave them so.
    pub history_kinds: Vec<Vec<String>>,
    pub steps_done: usize,
    /// Steps set aside, each with why no candidate got through (`max_skipped_steps`).
    pub skipped: Vec<(usize, String)>,
    pub sphere: Sphere,
    /// Whether `sphere` is a registration's or still the first guess.
    sphere_prior: register::Prior,
    /// How far the last registration moved S_t's centre.
    pub moved: [f64; 3],
    pub timing: Timing,
    calls: usize,
    pub rejections: usize,
    failed_candidates: usize,
    /// Steps (the loop's numbers) committed without a verification, in order.
    pub unverified: Vec<usize>,
    /// The model server failed (see [`Outcome::backend_failed`]).
    backend_failed: bool,
    usage: Usage,
    name: String,
    /// The scene of the current accepted state, once tessellated.
    scene: Option<Rc<Scene>>,
    /// GERD-RET, when an index is configured and RAG is on.
    pub retriever: Option<rag::Retriever>,
    /// Input tokens the retrieved examples have added so far.
    pub retrieval_tokens: usize,
}

/// Run a FreeCAD call, retrying it when the worker was lost (the session has already
/// rebuilt the document in a fresh one): a crash costs time, never the result.
pub(crate) fn kernel<T>(
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

impl Engine<'_> {
    fn run(
        mut self,
        image: &Path,
        vlm: &mut dyn Vlm,
        session: &mut Session,
        resume: bool,
        started: Instant,
    ) -> Result<Outcome, LoopError> {
        let config = self.config;
        let shown = self.target_as_shown();
        self.save(&shown, "target.png")?;
        let mut finished = false;
        // A worker that has served nothing: a resumed program is numbered as it was when it ran.
        kernel(&mut self.timing, session, |s| s.fresh_start())?;
        if resume {
            finished = self.replay(session)?;
        } else {
            self.emit(TraceEvent::Start {
                image: image.display().to_string(),
                backend: vlm.name(),
                config: Box::new(config.clone()),
                prompts: self.prompts.source.clone(),
                target: TargetCircle { center_px: self.target.center_px, radius_px: self.target.radius_px },
            })?;
            if let Some(retriever) = &self.retriever {
                let reason = format!(
                    "index {}; examples shown from a score of {:.2}",
                    retriever.describe(),
                    config.rag_min_score
                );
                self.emit(TraceEvent::Rag { on: true, reason })?;
            } else if !config.ablations.no_rag {
                tracing::info!("RAG is off: no retrieval index (--rag-index, rag_index in the config)");
                self.emit(TraceEvent::Rag { on: false, reason: "no retrieval index was given".into() })?;
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
            if self.loop_steps() >= config.max_steps {
                stop = format!("the step limit ({}) was reached", config.max_steps);
                break;
            }
            let before = self.timing;
            let end = self.step(vlm, session)?;
            let spent = self.timing.since(&before);
            // Stage 1's END, or a Stage 3 accept that finished the part.
            let ended = match end {
                StepEnd::Accepted => {
                    step_timing.push(spent);
                    self.emit(TraceEvent::Accepted { step: self.loop_steps(), timing: spent })?;
                    match self.finish.take() {
                        Some(reason) => {
                            self.emit(TraceEvent::End { step: self.loop_steps() + 1, reason })?;
                            true
                        }
                        None => false,
                    }
                }
                StepEnd::Ended => true,
                // Set aside: the model as it was, and the next Stage 1 told why.
                StepEnd::GaveUp(reason) if self.can_set_aside() => {
                    let step = self.loop_steps() + 1;
                    self.emit(TraceEvent::Skipped { step, reason: reason.clone() })?;
                    self.skipped.push((step, reason));
                    false
                }
                StepEnd::GaveUp(reason) | StepEnd::Failed(reason) => {
                    stop = reason.clone();
                    failure = Some(reason);
                    // What was built is the model the user gets: fitted as a finished one is.
                    if config.fit && self.steps_done > 0 {
                        self.fit_program(session)?;
                    }
                    break;
                }
            };
            if ended {
                finished = true;
                if config.fit {
                    self.fit_program(session)?;
                }
            }
        }
        self.write_program(finished)?;
        let t = Instant::now();
        report::write_model(session, &self.out)?;
        self.timing.kernel += t.elapsed().as_secs_f64();
        let outcome = Outcome {
            steps: self.steps_done,
            skipped_steps: self.skipped.iter().map(|(step, _)| *step).collect(),
            finished,
            stop,
            failure,
            backend_failed: self.backend_failed,
            calls: self.calls,
            rejections: self.rejections,
            failed_candidates: self.failed_candidates,
            unverified_commits: self.unverified.len(),
            usage: self.usage,
            retrieval_tokens: self.retrieval_tokens,
            timing: self.timing,
            step_timing,
            seconds: started.elapsed().as_secs_f64(),
            backend: vlm.name(),
            ablations: config.ablations.names().into_iter().map(String::from).collect(),
        };
        self.emit(TraceEvent::Stop { outcome: Box::new(outcome.clone()) })?;
        report::write_json(&self.out.join("outcome.json"), &outcome)?;
        report::write_html(&self.out)?;
        Ok(outcome)
    }

    /// The radius in pixels of S_t's circle in the images of the model (the tagged view,
    /// the target as shown, the preview's panels).
    pub(crate) fn circle_px(&self) -> f64 {
        circle_px(self.config.view_size)
    }

    /// The target as every request shows it: framed as the model's views are, with the
    /// circle around the part's silhouette (what S_t stands for, dashed; under no-Reg the
    /// image as given) and the model's axes as the target's direction shows them (a triad in
    /// the lower left corner).
    fn target_as_shown(&self) -> image::RgbImage {
        let mut shown = self.framed_target.clone().unwrap_or_else(|| self.target.image.clone());
        let (w, h) = shown.dimensions();
        let size = f64::from(w.min(h));
        let length = (size * 0.07).max(12.0);
        views::draw_axes(&mut shown, self.config.direction, (length + 10.0, f64::from(h) - length - 10.0), length);
        shown
    }

    /// Record an event: `trace.jsonl` first, then the other sinks.
    pub(crate) fn emit(&mut self, event: TraceEvent) -> Result<(), LoopError> {
        self.trace.event(&event)?;
        self.sinks.iter_mut().try_for_each(|s| s.event(&event))
    }

    /// The ablation flags every template can test.
    fn flags(&self, fill: Fill) -> Fill {
        let ab = self.config.ablations;
        fill.flag("egr", !ab.no_egr)
            .flag("lcb", !ab.no_lcb)
            .flag("pgr", !ab.no_pgr)
            .flag("reg", !ab.no_reg)
            .flag("evf", !ab.no_evf)
    }

    pub(crate) fn context(&self, state: &ModelState) -> Context {
        Context {
            steps_done: self.steps_done,
            steps_skipped: self.skipped.len(),
            history: self.history.clone(),
            state: state.clone(),
            ablations: self.config.ablations,
            sphere: self.sphere,
            direction: self.config.direction,
            plan: None,
            sketch: None,
            preview: None,
        }
    }

    pub(crate) fn view_path(&self, name: &str) -> PathBuf {
        self.out.join("views").join(name)
    }

    pub(crate) fn save(&self, image: &image::RgbImage, name: &str) -> Result<PathBuf, LoopError> {
        let path = self.view_path(name);
        image.save(&path).map_err(|e| LoopError::io(&path, std::io::Error::other(e.to_string())))?;
        Ok(path)
    }

    /// The options every view of this run is drawn with.
    pub(crate) fn options(&self) -> Options {
        let ab = self.config.ablations;
        Options {
            size: self.config.view_size,
            direction: self.config.direction,
            labels: LabelKinds { edges: !ab.no_egr, faces: !ab.no_egr, vertices: false },
            sphere: (!ab.no_reg).then_some((self.sphere.center, self.sphere.radius)),
            ..Options::default()
        }
    }

    /// Ask the model, re-asking with the validation errors up to the configured bound.
    pub(crate) fn ask<T>(
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
            let mut call = Call {
                step: turn.step,
                attempt: turn.attempt,
                round: round + 1,
                stage: request.stage,
                request: CallRequest { text: request.text.clone(), images },
                seconds: model_seconds,
                error: None,
                usage: None,
                cached: false,
                injected: Vec::new(),
                observed: Vec::new(),
                answer: None,
                errors: Vec::new(),
            };
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    call.error = Some(e.to_string());
                    self.emit(TraceEvent::Call(call))?;
                    self.backend_failed |= matches!(e, crate::vlm::VlmError::Failed { .. });
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
                call.usage = Some(u);
            }
            call.cached = reply.cached;
            call.injected = reply.injected.clone();
            call.observed = reply.observed.clone();
            call.answer = Some(reply.text.clone());
            let start = Instant::now();
            let checked = serde_json::from_str::<Value>(json_text(&reply.text))
                .map_err(|e| vec![format!("the answer is not JSON: {e}")])
                .and_then(|v| self.prompts.validate(request.stage, &v).map(|()| v))
                .and_then(|v| check(v).map_err(|e| vec![e]));
            self.timing.prompt += start.elapsed().as_secs_f64();
            match checked {
                Ok(value) => {
                    self.emit(TraceEvent::Call(call))?;
                    return Ok(Asked::Answer(value));
                }
                Err(errors) => {
                    call.errors = errors.clone();
                    self.emit(TraceEvent::Call(call))?;
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

    /// A stage's request: the system prompt, its template filled, its images and schema.
    pub(crate) fn request(
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
    pub(crate) fn scene(&mut self, session: &mut Session) -> Result<Rc<Scene>, LoopError> {
        if let Some(scene) = &self.scene {
            return Ok(Rc::clone(scene));
        }
        let scene =
            if session.state().empty { Scene::default() } else { kernel(&mut self.timing, session, views::scene_of)? };
        let scene = Rc::new(scene);
        self.scene = Some(Rc::clone(&scene));
        Ok(scene)
    }

    /// Steps the loop has finished: accepted or set aside.
    pub(crate) fn loop_steps(&self) -> usize {
        self.steps_done + self.skipped.len()
    }

    /// Whether a step no candidate gets through is set aside (else it ends the run).
    pub(crate) fn can_set_aside(&self) -> bool {
        self.skipped.len() < self.config.max_skipped_steps
    }

    fn step(&mut self, vlm: &mut dyn Vlm, session: &mut Session) -> Result<StepEnd, LoopError> {
        let step = self.loop_steps() + 1;
        let tagged = self.tagged(session, step)?;
        let mut feedback: Vec<String> = Vec::new();
        let mut rejections = 0;
        let attempts = self.config.attempts_per_step();
        for attempt in 1..=attempts {
            let verify = !self.config.ablations.no_evf && rejections < self.config.max_rejections;
            let after_rejection =
                crate::stage3::AfterRejection::of(attempt, attempts, rejections, self.config.max_rejections);
            let turn = Turn { step, attempt, verify, after_rejection };
            match self.attempt(vlm, session, turn, &tagged, &feedback)? {
                Attempt::Accepted => return Ok(StepEnd::Accepted),
                Attempt::Ended => return Ok(StepEnd::Ended),
                Attempt::Failed(reason) => return Ok(StepEnd::Failed(format!("step {step}: {reason}"))),
                Attempt::Retry { reason, rejected } => {
                    rejections += usize::from(rejected);
                    feedback.push(reason);
                }
            }
        }
        Ok(StepEnd::GaveUp(format!(
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
        tagged: &[PathBuf],
        feedback: &[String],
    ) -> Result<Attempt, LoopError> {
        let state = session.state().clone();
        self.finish = None;
        let (plan, command) = match self.stage1(vlm, &state, turn, tagged, feedback)? {
            Asked::Answer(x) => x,
            Asked::Invalid(reason) => return Ok(Attempt::retry(reason)),
            Asked::Backend(reason) => return Ok(Attempt::Failed(reason)),
        };
        if plan.is_end() {
            self.emit(TraceEvent::End { step: turn.step, reason: plan.reason })?;
            return Ok(Attempt::Ended);
        }
        if plan.revision.is_some() {
            return self.revise(vlm, session, turn, &state, plan, command);
        }
        // The command works in another body: switch before its sketches are placed and
        // drawn, and switch back (by rebuilding) if the candidate does not get through.
        let switch = plan.body.clone().map(|name| Command::Body(freecad_bridge::command::BodyChoice { name }));
        if let Some(c) = &switch
            && let Err(e) = kernel(&mut self.timing, session, |s| s.execute(c))
        {
            return self.failed_candidate(turn, e.to_string());
        }
        let outcome = self.attempt_in_body(vlm, session, turn, &state, plan, command, switch.clone(), feedback)?;
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
        feedback: &[String],
    ) -> Result<Attempt, LoopError> {
        let mut command_value = plan.command.clone();
        let mut sketches: Vec<Sketch> = Vec::new();
        for sp in &plan.sketches {
            match self.stage2(vlm, session, &plan, sp, turn, &mut command_value, feedback)? {
                Asked::Answer(sketch) => sketches.push(sketch),
                Asked::Invalid(reason) => return Ok(Attempt::retry(reason)),
                Asked::Backend(reason) => return Ok(Attempt::Failed(reason)),
            }
        }
        let mut command = if plan.sketches.is_empty() {
            command
        } else {
            match with_parameters(&command_value) {
                Ok(c) => c,
                Err(reason) => return Ok(Attempt::retry(reason)),
            }
        };
        // A sketch whose constraints cannot be solved goes back to Stage 2 with the solver's
        // words (the drawing is at fault, not the plan), up to `max_invalid_answers` times.
        let mut redraws = 0;
        let mut mends = crate::candidate::Mends::default();
        let (command, preview) = loop {
            let failure = match self.candidate(session, switch.as_ref(), &mut sketches, &command, turn)? {
                Ok(p) => break (command, p),
                Err(failure) => failure,
            };
            if self.mend(session, &failure.reason, &mut sketches, &command, turn, &mut mends)? {
                continue;
            }
            let Some(i) = failure.redraw_sketch.filter(|_| redraws < self.config.max_invalid_answers) else {
                return self.failed_candidate(turn, failure.reason);
            };
            redraws += 1;
            self.failed_candidates += 1;
            self.emit(TraceEvent::Execute(Execution::failed(turn.step, turn.attempt, failure.reason.clone())))?;
            let mut told = feedback.to_vec();
            told.push(format!("your last drawing of this sketch did not build: {}", failure.reason));
            match self.stage2(vlm, session, &plan, &plan.sketches[i], turn, &mut command_value, &told)? {
                Asked::Answer(sketch) => sketches[i] = sketch,
                Asked::Invalid(reason) => return Ok(Attempt::retry(reason)),
                Asked::Backend(reason) => return Ok(Attempt::Failed(reason)),
            }
            match with_parameters(&command_value) {
                Ok(c) => command = c,
                Err(reason) => return Ok(Attempt::retry(reason)),
            }
        };
        let (command, preview) = self.fit(session, &mut sketches, switch.as_ref(), command, preview, turn)?;
        let retry = if turn.verify { self.stage3(vlm, state, &plan, &preview, &sketches, turn)? } else { None };
        self.fit_report = None;
        if let Some(retry) = retry {
            self.rollback(session)?;
            return Ok(retry);
        }
        let fitted_from = self.fitted_from.take();
        let committed: Vec<Command> = switch
            .iter()
            .cloned()
            .chain(sketches.iter().cloned().map(Command::Sketch))
            .chain([command.clone()])
            .collect();
        // The step is built again from the start in a new worker: what the next step is shown.
        let mut program = self.history.clone();
        program.extend(committed.iter().cloned());
        if let Err(failed) = self.replay_fresh(session, &program)? {
            self.rollback(session)?;
            return self.failed_candidate(turn, crate::engine_replay::replay_failure(&failed, self.history.len()));
        }
        self.check_edit(session, &program, turn.step)?;
        if let Some((drawn, drawn_command)) = fitted_from {
            self.record_as_drawn(switch.is_some(), &sketches, &drawn, &command, drawn_command);
        }
        self.emit(TraceEvent::Execute(Execution::committed(turn.step, turn.attempt, turn.verify, committed.clone())))?;
        self.history_notes.extend(committed.iter().map(|c| crate::stage1::reference_note(state, c)));
        self.history_kinds.extend(committed.iter().map(|c| crate::revise::kinds(state, c)));
        self.history.extend(committed);
        self.commit_step(session, turn)
    }

    /// The step's candidate is in the history: count it, write the program, refit S_t.
    pub(crate) fn commit_step(&mut self, session: &mut Session, turn: Turn) -> Result<Attempt, LoopError> {
        self.steps_done += 1;
        if !turn.verify && !self.config.ablations.no_evf {
            self.unverified.push(self.loop_steps());
        }
        self.scene = None;
        self.write_program(false)?;
        self.register(session)?;
        Ok(Attempt::Accepted)
    }

    pub(crate) fn failed_candidate(&mut self, turn: Turn, reason: String) -> Result<Attempt, LoopError> {
        self.failed_candidates += 1;
        self.emit(TraceEvent::Execute(Execution::failed(turn.step, turn.attempt, reason.clone())))?;
        Ok(Attempt::retry(format!("the candidate failed: {reason}")))
    }

    /// Refit S_t to the current model (Reg).
    fn register(&mut self, session: &mut Session) -> Result<(), LoopError> {
        if self.config.ablations.no_reg || session.state().empty {
            return Ok(());
        }
        let scene = self.scene(session)?;
        let start = Instant::now();
        let fit = register::refit(&self.target, &scene, self.sphere, self.config.direction, self.sphere_prior);
        self.sphere_prior = register::Prior::Registered;
        self.timing.render += start.elapsed().as_secs_f64();
        self.moved = std::array::from_fn(|i| fit.sphere.center[i] - self.sphere.center[i]);
        self.sphere = fit.sphere;
        self.emit(TraceEvent::Register { step: self.loop_steps(), fit })
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
            self.history_notes.push(crate::stage1::reference_note(session.state(), c));
            self.history_kinds.push(crate::revise::kinds(session.state(), c));
            kernel(&mut self.timing, session, |s| s.execute(c))
                .map_err(|e| fail(format!("command {i} ({}): {e}", c.op())))?;
            self.history.push(c.clone());
        }
        self.steps_done = self.history.iter().filter(|c| !matches!(c, Command::Sketch(_) | Command::Body(_))).count();
        self.emit(TraceEvent::Resume { steps: self.steps_done, finished })?;
        self.register(session)?;
        Ok(finished)
    }
}
