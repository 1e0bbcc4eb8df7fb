//! A modeling session: one document in one worker, rebuilt from its log when the worker dies.
//! This module holds the modeling requests; [`replay`] the log, the calls and the rebuild of
//! a lost worker; [`evaluation`] the requests on shapes that evaluation makes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::command::{Command, Program};
use crate::error::{BridgeError, CallError};
use crate::lower::lower;
use crate::protocol::{ExecuteReply, RefusalKind, Request, SolvedGeometry};
use crate::state::{EntityMatch, Frame, ModelState};
use crate::worker::{WorkerConfig, WorkerProcess};

mod evaluation;
mod replay;

pub use evaluation::{BooleanVolumes, KeptComparison, KeptSlot, MassProperties, Similarity, TriangleMesh};
pub use replay::Renumbering;
use replay::{Logged, Refusal, invalid, translate_ids};

/// What a successful command produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Executed {
    /// The FreeCAD feature it created (`S1`, `Pad001`...), none for `end`.
    pub feature: Option<String>,
    /// The local frame of a new sketch or plane.
    pub frame: Option<Frame>,
    /// A sketch's constraints the solver found redundant and removed, by label: `#3` for
    /// the sketch's own `constraints[3]`, `auto` for a tie the bridge added (see
    /// [`crate::command::Sketch::auto_coincident`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// A sketch's own primitives where the solver put them (see [`crate::command::Sketch::as_solved`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub solved: Vec<Option<SolvedGeometry>>,
}

/// An editable parameter of the document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parameter {
    /// `Pad.Length`, `Pocket001.Length2`: the key for [`Session::set_parameters`].
    pub name: String,
    pub feature: String,
    /// `pad` or `pocket`.
    pub kind: String,
    /// `depth`, `symmetric_total`, `side1`, `side2`.
    pub role: String,
    pub value: f64,
}

/// A model's triangles, partitioned by face, and its edges as polylines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tessellation {
    /// Every face's triangles in one mesh.
    #[serde(flatten)]
    pub mesh: TriangleMesh,
    /// Face `F(i+1)` owns triangles `face_offsets[i]..face_offsets[i+1]`.
    pub face_offsets: Vec<u32>,
    /// x, y, z of every polyline point.
    pub edge_points: Vec<f64>,
    /// Edge `E(i+1)` owns points `edge_offsets[i]..edge_offsets[i+1]`.
    pub edge_offsets: Vec<u32>,
}

/// What a command would do, computed without committing it (Stage 3 of the loop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    /// The feature the command would create.
    pub feature: Option<String>,
    /// The entity table the command would produce.
    pub state: ModelState,
    /// The model with the command applied.
    pub after: Tessellation,
    /// Material the command adds (after minus before).
    pub added: Tessellation,
    /// Material the command removes (before minus after).
    pub removed: Tessellation,
    /// The kernel could not compute `added`/`removed`; only `after` is meaningful.
    pub boolean_failed: bool,
    /// Polylines of a new sketch's curves, in 3D.
    pub sketch_curves: Vec<Vec<[f64; 3]>>,
    /// A new construction plane: a square of it around the model and a stroke along its
    /// normal.
    #[serde(default)]
    pub plane_outline: Vec<Vec<[f64; 3]>>,
}

/// A program stopped at a failing command.
#[derive(Debug, thiserror::Error)]
#[error("step {index} ({op}): {error}")]
pub struct StepError {
    /// 0-based index of the failing command.
    pub index: usize,
    pub op: String,
    pub error: BridgeError,
}

/// One FreeCAD document driven command by command.
#[derive(Debug)]
pub struct Session {
    config: WorkerConfig,
    worker: Option<WorkerProcess>,
    /// Every request that changed the document, in order: replaying it rebuilds the document.
    log: Vec<Logged>,
    /// The entity table as the caller knows it (the IDs it sends).
    state: ModelState,
    /// The same document as the current worker numbers it: it differs from `state` only
    /// after a replay numbered entities differently, until the next change.
    worker_state: ModelState,
    /// While the two differ: the caller's IDs matched to the worker's by signature.
    id_map: Option<EntityMatch>,
    renumberings: Vec<Renumbering>,
    replacements: usize,
    /// Requests the current worker has served since it started (the replay included).
    served: usize,
    /// The next worker for [`Session::fresh_start`], starting in the background: a caller
    /// that starts over often (the loop rebuilds every accepted step in a new worker) then
    /// does not wait for FreeCAD to load each time.
    spare: Option<std::thread::JoinHandle<Result<WorkerProcess, CallError>>>,
}

impl Session {
    /// Start a worker with an empty document.
    pub fn new(config: WorkerConfig) -> Result<Self, BridgeError> {
        let worker = WorkerProcess::spawn(&config).map_err(BridgeError::Worker)?;
        Ok(Session {
            config,
            worker: Some(worker),
            log: Vec::new(),
            state: ModelState::empty(),
            worker_state: ModelState::empty(),
            id_map: None,
            renumberings: Vec::new(),
            replacements: 0,
            served: 0,
            spare: None,
        })
    }

    /// A new entity table from the worker: the caller and the worker agree again.
    fn adopt(&mut self, state: ModelState) -> &ModelState {
        self.worker_state = state.clone();
        self.state = state;
        self.id_map = None;
        &self.state
    }

    /// The renumberings replays have met, in order: IDs matched by signature so that no
    /// caller sees a difference.
    pub fn renumberings(&self) -> &[Renumbering] {
        &self.renumberings
    }

    /// The entity table after the last successful command.
    pub fn state(&self) -> &ModelState {
        &self.state
    }

    /// Ask FreeCAD for the entity table afresh (the session's copy is normally current; this
    /// is how to check that).
    pub fn query_state(&mut self) -> Result<ModelState, BridgeError> {
        self.query(Request::State, "model state")
    }

    /// Process ID of the current worker (for diagnostics and tests).
    pub fn worker_pid(&self) -> Option<u32> {
        self.worker.as_ref().map(WorkerProcess::pid)
    }

    /// How long one request may take before its worker is stopped ([`WorkerConfig`]).
    pub fn call_timeout(&self) -> Duration {
        self.config.call_timeout
    }

    /// How many times a lost worker was replaced.
    pub fn replacements(&self) -> usize {
        self.replacements
    }

    /// Run `job` until a run of it loses no worker, at most `1 + retries` times: a worker
    /// lost on the way is the machine's fault, not the job's, so the job runs again from its
    /// start and its result is an undisturbed run's. `rerun` hears of each disturbed run
    /// (its number, from 1, and its result). `Err` holds the runs made and the last result
    /// when every run was disturbed.
    pub fn undisturbed<T>(
        &mut self,
        retries: usize,
        mut job: impl FnMut(&mut Session) -> T,
        mut rerun: impl FnMut(usize, &T),
    ) -> Result<T, (usize, T)> {
        let mut runs = 0;
        loop {
            let before = self.replacements;
            let result = job(self);
            runs += 1;
            if self.replacements == before {
                return Ok(result);
            }
            if runs > retries {
                return Err((runs, result));
            }
            rerun(runs, &result);
        }
    }

    /// Execute one command. On failure the document is exactly as before.
    pub fn execute(&mut self, command: &Command) -> Result<Executed, BridgeError> {
        let op = command.op().to_string();
        let lowered = lower(command, &self.state).map_err(|i| invalid(op.clone(), i))?;
        match self.call(Request::Execute { command: lowered }, true)? {
            Ok(response) => {
                let reply: ExecuteReply =
                    serde_json::from_value(response).map_err(|e| protocol(format!("bad execute response: {e}")))?;
                self.adopt(reply.state);
                Ok(Executed {
                    feature: reply.feature,
                    frame: reply.frame,
                    dropped: reply.dropped,
                    solved: reply.solved,
                })
            }
            Err(refusal) => Err(refusal.command(op)),
        }
    }

    /// Execute a command written against `recorded`, an entity table of the same document
    /// from another process (a GERD step's state before it). Where this process numbers the
    /// entities differently, the command's IDs are first matched by geometric signature
    /// (refused where an ID matches no entity or several), and the match is recorded in
    /// [`Session::renumberings`].
    pub fn execute_recorded(&mut self, command: &Command, recorded: &ModelState) -> Result<Executed, BridgeError> {
        if recorded.same_numbering(&self.state) {
            return self.execute(command);
        }
        let op = command.op().to_string();
        let m = recorded.match_entities(&self.state);
        let mut value = serde_json::to_value(command).map_err(|e| protocol(e.to_string()))?;
        translate_ids(&mut value, &m).map_err(|reason| BridgeError::Command {
            op: op.clone(),
            entity: None,
            reason,
            kind: RefusalKind::Other,
        })?;
        let translated: Command = serde_json::from_value(value).map_err(|e| protocol(e.to_string()))?;
        if m.renumbers() {
            self.renumberings.push(Renumbering::of(format!("recorded state before {op}"), &m));
        }
        self.execute(&translated)
    }

    /// Execute a whole program, stopping at the first failing command; the document then
    /// holds every command before it.
    pub fn execute_program(&mut self, program: &Program) -> Result<(), StepError> {
        self.execute_program_solved(program).1
    }

    /// [`Session::execute_program`], returning the program as it was solved: each command as
    /// [`Command::as_solved`] gives it, so the result replays to this document in any
    /// process. On a failure, the program holds the solved commands before the failing one.
    pub fn execute_program_solved(&mut self, program: &Program) -> (Program, Result<(), StepError>) {
        let mut solved = Program {
            name: program.name.clone(),
            description: program.description.clone(),
            commands: Vec::with_capacity(program.commands.len()),
        };
        for (index, command) in program.commands.iter().enumerate() {
            match self.execute(command) {
                Ok(executed) => solved.commands.push(command.as_solved(&executed)),
                Err(error) => return (solved, Err(StepError { index, op: command.op().into(), error })),
            }
        }
        (solved, Ok(()))
    }

    /// Every extrusion depth of the document (both sides of a two-sided extrusion, the
    /// total of a symmetric one).
    pub fn parameters(&mut self) -> Result<Vec<Parameter>, BridgeError> {
        match self.call(Request::Parameters, false)? {
            Ok(mut v) => serde_json::from_value(v["parameters"].take()).map_err(|e| protocol(e.to_string())),
            Err(refusal) => Err(BridgeError::Parameters { reason: refusal.reason }),
        }
    }

    /// Set parameters by name and recompute. On failure the old values are restored.
    pub fn set_parameters(&mut self, values: &BTreeMap<String, f64>) -> Result<&ModelState, BridgeError> {
        if let Some((name, v)) = values.iter().find(|(_, v)| !(v.is_finite() && **v > 0.0)) {
            return Err(BridgeError::Parameters { reason: format!("{name} must be a positive number, got {v}") });
        }
        match self.call(Request::SetParameters { values: values.clone() }, true)? {
            Ok(response) => {
                let state = serde_json::from_value(response).map_err(|e| protocol(e.to_string()))?;
                Ok(self.adopt(state))
            }
            Err(refusal) => Err(BridgeError::Parameters { reason: refusal.reason }),
        }
    }

    /// Multiply every extrusion depth by `factor` (the edit protocol uses 1.1).
    pub fn scale_extrusions(&mut self, factor: f64) -> Result<&ModelState, BridgeError> {
        let values: BTreeMap<String, f64> =
            self.parameters()?.into_iter().filter(|p| p.value > 0.0).map(|p| (p.name, p.value * factor)).collect();
        if values.is_empty() {
            return Ok(&self.state);
        }
        self.set_parameters(&values)
    }

    /// Replace the document with a STEP or FCStd file.
    pub fn load(&mut self, path: &Path) -> Result<&ModelState, BridgeError> {
        let text = path.to_string_lossy().to_string();
        let absolute =
            std::path::absolute(path).map_err(|e| BridgeError::Load { path: text.clone(), reason: e.to_string() })?;
        if !absolute.is_file() {
            return Err(BridgeError::Load { path: text, reason: "no such file".into() });
        }
        let request = Request::Load { path: absolute.to_string_lossy().into_owned() };
        // A load replaces the document: what came before no longer matters for replay.
        let previous_log = std::mem::take(&mut self.log);
        match self.call(request, true)? {
            Ok(response) => {
                let state = serde_json::from_value(response).map_err(|e| protocol(e.to_string()))?;
                Ok(self.adopt(state))
            }
            Err(refusal) => {
                self.log = previous_log;
                Err(BridgeError::Load { path: text, reason: refusal.reason })
            }
        }
    }

    /// Write the document as FCStd and/or the current solid as STEP.
    pub fn save(&mut self, fcstd: Option<&Path>, step: Option<&Path>) -> Result<(), BridgeError> {
        let path_of = |p: Option<&Path>| -> Result<Option<String>, BridgeError> {
            p.map(|p| {
                std::path::absolute(p)
                    .map(|a| a.to_string_lossy().into_owned())
                    .map_err(|e| BridgeError::Save { path: p.display().to_string(), reason: e.to_string() })
            })
            .transpose()
        };
        let request = Request::Save { fcstd: path_of(fcstd)?, step: path_of(step)? };
        match self.call(request, false)? {
            Ok(_) => Ok(()),
            Err(Refusal { reason, .. }) => {
                let path =
                    [fcstd, step].into_iter().flatten().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
                Err(BridgeError::Save { path, reason })
            }
        }
    }

    /// Triangles per face and polylines per edge of the current shape.
    pub fn tessellate(&mut self, linear_deflection: f64, angular_deflection: f64) -> Result<Tessellation, BridgeError> {
        self.query(Request::Tessellate { linear_deflection, angular_deflection }, "tessellation")
    }

    /// Start over with an empty document.
    pub fn reset(&mut self) -> Result<&ModelState, BridgeError> {
        self.log.clear();
        let state = self.query(Request::Reset, "model state")?;
        Ok(self.adopt(state))
    }

    /// An empty document in a worker that has served nothing yet (a new one, unless the
    /// current one is still untouched). FreeCAD's results depend on what its process did
    /// before (the solver and the booleans order by memory address): work that must give the
    /// same numbers in every run, such as scoring a sample, starts here.
    ///
    /// The new worker is the spare started by the previous call, when it started well, and
    /// another spare is started in the background for the next call.
    pub fn fresh_start(&mut self) -> Result<(), BridgeError> {
        self.log.clear();
        self.state = ModelState::empty();
        self.worker_state = ModelState::empty();
        self.id_map = None;
        if self.worker.is_none() || self.served > 0 {
            self.worker = None;
            match self.spare.take().map(|spare| spare.join()) {
                Some(Ok(Ok(worker))) => {
                    self.worker = Some(worker);
                    self.served = 0;
                }
                // A spare that failed to start: start one here, and hear why if it fails again.
                _ => self.rebuild().map_err(BridgeError::Worker)?,
            }
            let config = self.config.clone();
            self.spare = Some(std::thread::spawn(move || WorkerProcess::spawn(&config)));
        }
        Ok(())
    }

    /// Replace the worker with a fresh one holding the same document (recycling long-lived
    /// workers bounds the memory FreeCAD accumulates).
    pub fn restart_worker(&mut self) -> Result<(), BridgeError> {
        self.worker = None;
        self.rebuild().map_err(BridgeError::Worker)
    }

    /// Keep the worker busy for `duration` (diagnostics: exercises the call timeout).
    pub fn sleep_in_worker(&mut self, duration: Duration) -> Result<(), BridgeError> {
        self.query::<serde::de::IgnoredAny>(Request::DebugSleep { seconds: duration.as_secs_f64() }, "reply")
            .map(|_| ())
    }

    /// Keep the worker busy for `duration`, within the caller's `limit` (diagnostics: exercises
    /// [`Session::intersect_kept_within`]'s bound). `Ok(false)`: stopped at the limit.
    pub fn sleep_in_worker_within(&mut self, duration: Duration, limit: Duration) -> Result<bool, BridgeError> {
        let request = Request::DebugSleep { seconds: duration.as_secs_f64() };
        self.query_within::<serde::de::IgnoredAny>(request, "reply", limit).map(|done| done.is_some())
    }

    /// What `command` would do, without changing the document: the model after it and the
    /// material it adds and removes, tessellated. Fails like [`Session::execute`] would.
    pub fn preview(&mut self, command: &Command, linear_deflection: f64) -> Result<Preview, BridgeError> {
        let op = command.op().to_string();
        let lowered = lower(command, &self.state).map_err(|i| invalid(op.clone(), i))?;
        let request = Request::Preview { command: lowered, linear_deflection, angular_deflection: 0.3 };
        match self.call(request, false)? {
            Ok(v) => serde_json::from_value(v).map_err(|e| protocol(format!("bad preview: {e}"))),
            Err(refusal) => Err(refusal.command(op)),
        }
    }

    /// Keep a copy of the model's shape in the worker: [`Session::preview_held`] later shows
    /// what changed since. A revision holds the shape, rebuilds the document with one
    /// command changed ([`Session::reset`], then [`Session::execute`] each command) and
    /// previews the result against it.
    pub fn hold(&mut self) -> Result<(), BridgeError> {
        match self.call(Request::Hold, false)? {
            Ok(_) => Ok(()),
            Err(refusal) => Err(refusal.command("hold".into())),
        }
    }

    /// The document as a [`Preview`] against the shape [`Session::hold`] kept: `added` and
    /// `removed` are the material the document gained and lost since (with
    /// `boolean_failed` when the kept shape was lost with its worker, or the booleans
    /// failed). The kept shape is used up.
    pub fn preview_held(&mut self, linear_deflection: f64) -> Result<Preview, BridgeError> {
        let request = Request::PreviewHeld { linear_deflection, angular_deflection: 0.3 };
        match self.call(request, false)? {
            Ok(v) => serde_json::from_value(v).map_err(|e| protocol(format!("bad preview: {e}"))),
            Err(refusal) => Err(refusal.command("preview".into())),
        }
    }

    /// The local frame a sketch on `on` (`XY`, `F3`, `P1`) would get: the frame that
    /// sketch coordinates are in. The document is unchanged.
    pub fn plane_frame(&mut self, on: &str) -> Result<Frame, BridgeError> {
        // Messages read "placing a sketch plane failed at F99: ...".
        let op = "placing a sketch plane".to_string();
        crate::lower::need_support(on, &self.state).map_err(|i| invalid(op.clone(), i))?;
        match self.call(Request::PlaneFrame { on: on.to_string() }, false)? {
            Ok(v) => serde_json::from_value(v).map_err(|e| protocol(format!("bad frame: {e}"))),
            Err(refusal) => Err(refusal.command(op)),
        }
    }
}

impl Drop for Session {
    /// A spare still starting is waited for and stopped, so its process and its FreeCAD home
    /// folder do not outlive the session.
    fn drop(&mut self) {
        if let Some(spare) = self.spare.take() {
            drop(spare.join());
        }
    }
}

fn protocol(message: String) -> BridgeError {
    BridgeError::Worker(CallError::Protocol(message))
}
