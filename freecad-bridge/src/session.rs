//! A modeling session: one document in one worker, rebuilt from its log when the worker dies.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::{Command, EntityId, Program};
use crate::error::{BridgeError, CallError};
use crate::lower::lower;
use crate::protocol::{ExecuteReply, RefusalKind, Request};
use crate::state::{BoundingBox, EntityMatch, Frame, ModelState};
use crate::worker::{WorkerConfig, WorkerProcess};

/// What a successful command produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Executed {
    /// The FreeCAD feature it created (`S1`, `Pad001`...), none for `end`.
    pub feature: Option<String>,
    /// The local frame of a new sketch or plane.
    pub frame: Option<Frame>,
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

/// Triangles per face and polylines per edge, as flat arrays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tessellation {
    /// x, y, z of every mesh vertex.
    pub positions: Vec<f64>,
    /// Three vertex indices per triangle.
    pub triangles: Vec<u32>,
    /// Face `F(i+1)` owns triangles `face_offsets[i]..face_offsets[i+1]`.
    pub face_offsets: Vec<u32>,
    /// x, y, z of every polyline point.
    pub edge_points: Vec<f64>,
    /// Edge `E(i+1)` owns points `edge_offsets[i]..edge_offsets[i+1]`.
    pub edge_offsets: Vec<u32>,
}

impl Tessellation {
    pub fn triangle_count(&self) -> usize {
        self.triangles.len() / 3
    }
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
}

/// One logged request, and for a command the worker's entity table it was sent against (so
/// a replay that numbers entities differently can match its IDs by signature).
#[derive(Debug, Clone)]
struct Logged {
    request: Value,
    before: Option<ModelState>,
}

/// A replay numbered entities differently from the process before it; the IDs were matched
/// by geometric signature ([`ModelState::match_entities`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Renumbering {
    /// Where: `request N` of the replayed log, or `caller` for the IDs the caller holds.
    pub at: String,
    /// Old ID -> new ID, for the entities whose ID changed.
    pub changed: BTreeMap<String, String>,
    /// Old IDs that match several entities (refused where named).
    pub ambiguous: Vec<String>,
    /// Old IDs with no entity of their signature any more (refused where named).
    pub missing: Vec<String>,
}

impl Renumbering {
    fn of(at: String, m: &EntityMatch) -> Renumbering {
        Renumbering {
            at,
            changed: m.map.iter().filter(|(a, b)| a != b).map(|(a, b)| (a.clone(), b.clone())).collect(),
            ambiguous: m.ambiguous.clone(),
            missing: m.missing.clone(),
        }
    }
}

/// Rewrite every entity ID in a request by the match; an ID that could not be matched
/// uniquely is refused with the reason.
fn translate_ids(value: &mut Value, m: &EntityMatch) -> Result<(), String> {
    match value {
        Value::String(s) => {
            // `B1.F3` is `F3`: look IDs up in the state's own spelling.
            let Ok(id) = s.parse::<EntityId>() else { return Ok(()) };
            let key = id.to_string();
            if let Some(new) = m.map.get(&key) {
                *s = new.clone();
            } else if m.ambiguous.contains(&key) {
                return Err(format!(
                    "{s} cannot be told apart from another entity of the same geometry in the rebuilt document (the worker was replaced and numbered entities differently); name the entity again from the current state"
                ));
            } else if m.missing.contains(&key) {
                return Err(format!("{s} has no entity of its geometry in the rebuilt document"));
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|v| translate_ids(v, m)),
        Value::Object(map) => map.values_mut().try_for_each(|v| translate_ids(v, m)),
        _ => Ok(()),
    }
}

/// A refusal from FreeCAD: its reason, the entity it names and its kind.
#[derive(Debug)]
struct Refusal {
    reason: String,
    entity: Option<String>,
    kind: RefusalKind,
}

impl Refusal {
    fn command(self, op: String) -> BridgeError {
        BridgeError::Command { op, entity: self.entity, reason: self.reason, kind: self.kind }
    }
}

/// A command refused before it reached FreeCAD (validation, lowering).
fn invalid(op: String, i: crate::lower::Invalid) -> BridgeError {
    BridgeError::Command { op, entity: i.entity, reason: i.reason, kind: RefusalKind::Other }
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

    /// How many times a lost worker was replaced.
    pub fn replacements(&self) -> usize {
        self.replacements
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
                Ok(Executed { feature: reply.feature, frame: reply.frame })
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
        for (index, command) in program.commands.iter().enumerate() {
            self.execute(command).map_err(|error| StepError { index, op: command.op().into(), error })?;
        }
        Ok(())
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

    /// The local frame a sketch on `on` (`XY`, `F3`, `P1`) would get: the frame that
    /// sketch coordinates are in. The document is unchanged.
    pub fn plane_frame(&mut self, on: &str) -> Result<Frame, BridgeError> {
        let op = "plane_frame".to_string();
        crate::lower::need_support(on, &self.state).map_err(|i| invalid(op.clone(), i))?;
        match self.call(Request::PlaneFrame { on: on.to_string() }, false)? {
            Ok(v) => serde_json::from_value(v).map_err(|e| protocol(format!("bad frame: {e}"))),
            Err(refusal) => Err(refusal.command(op)),
        }
    }

    /// An unlogged request whose refusal is an error of the worker, its reply parsed as `T`.
    fn query<T: serde::de::DeserializeOwned>(&mut self, request: Request, what: &str) -> Result<T, BridgeError> {
        match self.call(request, false)? {
            Ok(v) => serde_json::from_value(v).map_err(|e| protocol(format!("bad {what}: {e}"))),
            Err(Refusal { reason, entity, kind }) => {
                Err(BridgeError::Worker(CallError::Rejected { reason, entity, kind }))
            }
        }
    }

    /// Send one request. The outer error is a lost worker (already replaced, document
    /// rebuilt); the inner one is FreeCAD refusing the request.
    fn call(&mut self, request: Request, logged: bool) -> Result<Result<Value, Refusal>, BridgeError> {
        let is_execute = matches!(request, Request::Execute { .. });
        let mut request = request.to_value();
        if self.worker.is_none() {
            self.rebuild().map_err(BridgeError::Worker)?;
        }
        // After a renumbering replay the caller's IDs are translated to the worker's.
        if let Some(m) = &self.id_map
            && let Err(reason) = translate_ids(&mut request, m)
        {
            return Ok(Err(Refusal { reason, entity: None, kind: RefusalKind::Other }));
        }
        let timeout = self.config.call_timeout;
        let Some(worker) = self.worker.as_mut() else {
            return Err(BridgeError::Worker(CallError::Spawn("no worker".into())));
        };
        match worker.call(&request, timeout) {
            Ok(v) => {
                if logged {
                    let before = is_execute.then(|| self.worker_state.clone());
                    self.log.push(Logged { request, before });
                }
                Ok(Ok(v))
            }
            Err(CallError::Rejected { reason, entity, kind }) => Ok(Err(Refusal { reason, entity, kind })),
            Err(lost) => {
                tracing::warn!("{lost}; replacing the worker and replaying {} requests", self.log.len());
                self.worker = None;
                self.replacements += 1;
                match self.rebuild() {
                    Ok(()) => Err(BridgeError::WorkerLost { source: lost }),
                    Err(rebuild) => Err(BridgeError::RebuildFailed { source: lost, rebuild: Box::new(rebuild) }),
                }
            }
        }
    }

    /// Tests: replace the worker as if the process so far had numbered the faces otherwise
    /// (each face's ID moved one place on), so the replay meets a renumbering. The caller's
    /// state afterwards uses the shifted IDs, and they name the same faces as before.
    #[doc(hidden)]
    pub fn debug_replay_with_shifted_face_ids(&mut self) -> Result<(), BridgeError> {
        fn shift(state: &mut ModelState) -> EntityMatch {
            let n = state.faces.len();
            let mut m = EntityMatch::default();
            for i in 0..n {
                m.map.insert(format!("F{}", i + 1), format!("F{}", (i + 1) % n + 1));
            }
            for f in &mut state.faces {
                f.id = m.map[&f.id].clone();
            }
            state.faces.rotate_right(1.min(n));
            for body in &mut state.bodies {
                body.faces = body.faces.iter().map(|f| m.map.get(f).cloned().unwrap_or_else(|| f.clone())).collect();
            }
            m
        }
        for entry in &mut self.log {
            if let Some(before) = &mut entry.before {
                let m = shift(before);
                translate_ids(&mut entry.request, &m).map_err(protocol)?;
            }
        }
        shift(&mut self.state);
        self.worker = None;
        self.replacements += 1;
        self.rebuild().map_err(BridgeError::Worker)
    }

    /// Start a worker and replay the log into it.
    ///
    /// OpenCascade may number the faces and edges of the same geometry differently in
    /// another process (its booleans iterate maps keyed by memory addresses), and IDs are
    /// FreeCAD's numbering. Where the replay numbers them differently from the process
    /// before, each logged command's IDs are matched by geometric signature to the new
    /// numbering before it is sent, and the caller's IDs likewise afterwards; the match is
    /// recorded ([`Session::renumberings`]). Only an ID the log names that matches no
    /// entity, or several, stops the replay: its commands would name other entities.
    fn rebuild(&mut self) -> Result<(), CallError> {
        let mut worker = WorkerProcess::spawn(&self.config)?;
        let mut current = ModelState::empty();
        let mut relogged = Vec::with_capacity(self.log.len());
        let mut renumbered = Vec::new();
        for (n, entry) in self.log.iter().enumerate() {
            let mut request = entry.request.clone();
            if let Some(before) = &entry.before
                && !before.same_numbering(&current)
            {
                let m = before.match_entities(&current);
                translate_ids(&mut request, &m)
                    .map_err(|reason| CallError::Protocol(format!("replay diverged at request {}: {reason}", n + 1)))?;
                if m.renumbers() {
                    renumbered.push(Renumbering::of(format!("request {}", n + 1), &m));
                }
            }
            let mut response = worker.call(&request, self.config.call_timeout).map_err(|e| match e {
                CallError::Rejected { reason, .. } => CallError::Protocol(format!("replay diverged: {reason}")),
                other => other,
            })?;
            let next = if entry.before.is_some() { response["state"].take() } else { response };
            let next: ModelState = serde_json::from_value(next)
                .map_err(|e| CallError::Protocol(format!("bad model state in the replay: {e}")))?;
            relogged.push(Logged { before: entry.before.as_ref().map(|_| current.clone()), request });
            current = next;
        }
        self.id_map = None;
        if !self.log.is_empty() && !self.state.same_numbering(&current) {
            let m = self.state.match_entities(&current);
            renumbered.push(Renumbering::of("caller".into(), &m));
            self.id_map = Some(m);
        }
        for r in &renumbered {
            tracing::warn!(
                "the new worker numbers entities differently ({}): {} IDs matched by signature, {} ambiguous, {} missing",
                r.at,
                r.changed.len(),
                r.ambiguous.len(),
                r.missing.len()
            );
        }
        self.renumberings.extend(renumbered);
        self.worker_state = current;
        self.log = relogged;
        self.worker = Some(worker);
        Ok(())
    }
}

fn protocol(message: String) -> BridgeError {
    BridgeError::Worker(CallError::Protocol(message))
}

// ---------------------------------------------------------------------------- evaluation
//
// Requests on shapes written to BREP files: evaluation builds the prediction and the
// ground truth in turn in the one document, then meets them in booleans and meshes that
// need no document state (so they survive a worker replacement without replay).

/// A similarity transform `x -> scale * rotate * (x + translate)`: a rigid motion and a
/// uniform scale, which the kernel applies exactly.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Similarity {
    pub translate: [f64; 3],
    /// A proper rotation, row-major.
    pub rotate: [[f64; 3]; 3],
    pub scale: f64,
}

impl Similarity {
    pub const IDENTITY: Similarity =
        Similarity { translate: [0.0; 3], rotate: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], scale: 1.0 };

    /// Where the transform takes `x`.
    pub fn apply(&self, x: [f64; 3]) -> [f64; 3] {
        let y = [x[0] + self.translate[0], x[1] + self.translate[1], x[2] + self.translate[2]];
        let r = &self.rotate;
        [
            self.scale * (r[0][0] * y[0] + r[0][1] * y[1] + r[0][2] * y[2]),
            self.scale * (r[1][0] * y[0] + r[1][1] * y[1] + r[1][2] * y[2]),
            self.scale * (r[2][0] * y[0] + r[2][1] * y[1] + r[2][2] * y[2]),
        ]
    }
}

/// Mass properties of the document's shape (unit density).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MassProperties {
    /// Sum of the solids' volumes.
    pub volume: f64,
    /// None where it was not asked for ([`Session::keep_shape`] without `inertia`).
    pub area: Option<f64>,
    pub solids: usize,
    /// Valid by the kernel's check and at least one solid.
    pub valid: bool,
    /// The tight box of the exact geometry.
    pub bbox: BoundingBox,
    /// None without a solid of positive volume.
    pub center_of_mass: Option<[f64; 3]>,
    /// Inertia tensor about the centre of mass, row-major.
    pub inertia: Option<[[f64; 3]; 3]>,
}

/// Volumes of two transformed shapes and of their common part (the fusion's volume is
/// vol(a) + vol(b) - common).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BooleanVolumes {
    pub volume_a: f64,
    pub volume_b: f64,
    pub common: f64,
}

/// One triangle mesh of a whole shape, vertices shared between faces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriangleMesh {
    /// x, y, z of every vertex.
    pub positions: Vec<f64>,
    /// Three vertex indices per triangle.
    pub triangles: Vec<u32>,
}

impl Session {
    /// Mass properties of the current shape; with `brep`, also write the shape there for
    /// [`Session::boolean_volumes`] and [`Session::mesh_shape`].
    pub fn measure(&mut self, brep: Option<&Path>) -> Result<MassProperties, BridgeError> {
        let brep = brep.map(absolute_text).transpose()?;
        self.query(Request::Measure { brep }, "mass properties")
    }

    /// Transform the shapes in two BREP files and return the volumes of each and of their
    /// common part (an exact kernel boolean).
    pub fn boolean_volumes(
        &mut self,
        a: &Path,
        transform_a: &Similarity,
        b: &Path,
        transform_b: &Similarity,
    ) -> Result<BooleanVolumes, BridgeError> {
        let request = Request::BooleanVolumes {
            a: absolute_text(a)?,
            transform_a: *transform_a,
            b: absolute_text(b)?,
            transform_b: *transform_b,
        };
        self.query(request, "boolean volumes")
    }

    /// Transform the shape in a BREP file and mesh it with absolute deflections (in the
    /// transformed units).
    pub fn mesh_shape(
        &mut self,
        brep: &Path,
        transform: &Similarity,
        linear_deflection: f64,
        angular_deflection: f64,
    ) -> Result<TriangleMesh, BridgeError> {
        let request = Request::MeshShape {
            path: absolute_text(brep)?,
            transform: *transform,
            linear_deflection,
            angular_deflection,
        };
        self.query(request, "mesh")
    }
}

/// Which shape of an evaluation sample a worker keeps ([`Session::keep_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptSlot {
    Prediction,
    GroundTruth,
}

/// The two kept shapes, transformed and compared ([`Session::compare_kept`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KeptComparison {
    pub prediction: TriangleMesh,
    pub ground_truth: TriangleMesh,
    pub volume_prediction: f64,
    pub volume_ground_truth: f64,
    /// The volume of the common part; None when booleans were not asked for or failed.
    pub common: Option<f64>,
    /// Why the boolean failed.
    pub boolean_error: Option<String>,
    /// Seconds the worker spent meshing and intersecting (for benchmarks).
    #[serde(default)]
    pub mesh_seconds: f64,
    #[serde(default)]
    pub boolean_seconds: f64,
}

impl Session {
    /// Keep a shape in the worker for [`Session::compare_kept`] and return its mass
    /// properties (area, centre of mass and inertia only with `inertia`): the STEP file `step`
    /// read straight into memory (no document), or without it the document's shape.
    /// The worker keeps one shape per slot until it is replaced; a lost worker loses them.
    pub fn keep_shape(
        &mut self,
        slot: KeptSlot,
        step: Option<&Path>,
        inertia: bool,
    ) -> Result<MassProperties, BridgeError> {
        let path = step.map(absolute_text).transpose()?;
        self.query(Request::KeepShape { slot, path, inertia }, "mass properties")
    }

    /// Transform the two kept shapes, mesh each with absolute deflections (in the
    /// transformed units) and, with `booleans`, intersect them exactly (one common: the
    /// union's volume follows from the three volumes).
    pub fn compare_kept(
        &mut self,
        transform_prediction: &Similarity,
        transform_ground_truth: &Similarity,
        linear_deflection: f64,
        angular_deflection: f64,
        booleans: bool,
    ) -> Result<KeptComparison, BridgeError> {
        let request = Request::CompareKept {
            transform_prediction: *transform_prediction,
            transform_ground_truth: *transform_ground_truth,
            linear_deflection,
            angular_deflection,
            booleans,
        };
        self.query(request, "comparison")
    }

    /// The exact boolean of the two kept shapes, transformed, without meshing them (their
    /// meshes are known already): only `common` and the volumes are filled in.
    pub fn intersect_kept(
        &mut self,
        transform_prediction: &Similarity,
        transform_ground_truth: &Similarity,
    ) -> Result<KeptComparison, BridgeError> {
        let request = Request::IntersectKept {
            transform_prediction: *transform_prediction,
            transform_ground_truth: *transform_ground_truth,
        };
        self.query(request, "comparison")
    }
}

fn absolute_text(path: &Path) -> Result<String, BridgeError> {
    std::path::absolute(path)
        .map(|a| a.to_string_lossy().into_owned())
        .map_err(|e| BridgeError::Load { path: path.display().to_string(), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_translated_and_an_ambiguous_one_is_refused_with_the_reason() {
        let mut m = EntityMatch::default();
        m.map.insert("F1".into(), "F2".into());
        m.map.insert("E3".into(), "E3".into());
        m.ambiguous.push("F4".into());
        let mut request = json!({"type": "execute", "command": {"op": "sketch", "name": "S2", "on": "F1",
            "constraints": [{"type": "concentric", "a": "g0", "b": "E3"}], "edges": ["F1", "S1.g3"]}});
        translate_ids(&mut request, &m).expect("translated");
        assert_eq!(request["command"]["on"], "F2");
        assert_eq!(request["command"]["edges"], json!(["F2", "S1.g3"]), "names that are not IDs stay");
        assert_eq!(request["command"]["name"], "S2");
        let mut ambiguous = json!({"on": "F4"});
        let reason = translate_ids(&mut ambiguous, &m).expect_err("refused");
        assert!(reason.contains("F4") && reason.contains("cannot be told apart"), "{reason}");
        for not_an_id in ["Fillet", "F", "B2", "Pad001"] {
            let mut value = json!({"on": not_an_id});
            translate_ids(&mut value, &m).expect("not an ID");
            assert_eq!(value["on"], not_an_id);
        }
    }

    #[test]
    fn ids_of_another_body_and_b1_spelled_out_are_translated() {
        let mut m = EntityMatch::default();
        m.map.insert("F1".into(), "F2".into());
        m.map.insert("B2.E3".into(), "B2.E5".into());
        let mut request = json!({"on": "B1.F1", "edges": ["B2.E3"]});
        translate_ids(&mut request, &m).expect("translated");
        assert_eq!(request, json!({"on": "F2", "edges": ["B2.E5"]}));
    }
}
