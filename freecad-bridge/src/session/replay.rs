//! The session's log and its calls to the worker: a lost worker is replaced and the log
//! replayed, with entity IDs matched by geometric signature where the new process numbers
//! them differently.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Session, protocol};
use crate::command::EntityId;
use crate::error::{BridgeError, CallError};
use crate::protocol::{RefusalKind, Request};
use crate::state::{EntityMatch, ModelState};
use crate::worker::WorkerProcess;

/// One logged request, and for a command the worker's entity table it was sent against (so
/// a replay that numbers entities differently can match its IDs by signature).
#[derive(Debug, Clone)]
pub(super) struct Logged {
    pub(super) request: Value,
    pub(super) before: Option<ModelState>,
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
    pub(super) fn of(at: String, m: &EntityMatch) -> Renumbering {
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
pub(super) fn translate_ids(value: &mut Value, m: &EntityMatch) -> Result<(), String> {
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
pub(super) struct Refusal {
    pub(super) reason: String,
    pub(super) entity: Option<String>,
    pub(super) kind: RefusalKind,
}

impl Refusal {
    pub(super) fn command(self, op: String) -> BridgeError {
        BridgeError::Command { op, entity: self.entity, reason: self.reason, kind: self.kind }
    }
}

/// A command refused before it reached FreeCAD (validation, lowering).
pub(super) fn invalid(op: String, i: crate::lower::Invalid) -> BridgeError {
    BridgeError::Command { op, entity: i.entity, reason: i.reason, kind: RefusalKind::Other }
}

impl Session {
    /// An unlogged request whose refusal is an error of the worker, its reply parsed as `T`.
    pub(super) fn query<T: serde::de::DeserializeOwned>(
        &mut self,
        request: Request,
        what: &str,
    ) -> Result<T, BridgeError> {
        match self.call(request, false)? {
            Ok(v) => serde_json::from_value(v).map_err(|e| protocol(format!("bad {what}: {e}"))),
            Err(Refusal { reason, entity, kind }) => {
                Err(BridgeError::Worker(CallError::Rejected { reason, entity, kind }))
            }
        }
    }

    /// [`Session::query`] with the caller's own limit on its time: `Ok(None)` when the worker
    /// took longer. The worker is then stopped and dropped, not counted as lost (the caller
    /// chose the limit, and a job is not run again for it), and the next request starts
    /// another, which replays the log.
    pub(super) fn query_within<T: serde::de::DeserializeOwned>(
        &mut self,
        request: Request,
        what: &str,
        limit: std::time::Duration,
    ) -> Result<Option<T>, BridgeError> {
        if self.worker.is_none() {
            self.rebuild().map_err(BridgeError::Worker)?;
        }
        let Some(worker) = self.worker.as_mut() else {
            return Err(BridgeError::Worker(CallError::Spawn("no worker".into())));
        };
        self.served += 1;
        match worker.call(&request.to_value(), limit.min(self.config.call_timeout)) {
            Ok(v) => serde_json::from_value(v).map(Some).map_err(|e| protocol(format!("bad {what}: {e}"))),
            Err(CallError::Timeout { during, seconds }) => {
                tracing::info!("{during} took longer than {seconds:.1} s: its worker is stopped");
                self.worker = None;
                Ok(None)
            }
            Err(CallError::Rejected { reason, entity, kind }) => {
                Err(BridgeError::Worker(CallError::Rejected { reason, entity, kind }))
            }
            Err(lost) => Err(self.replace_lost(lost)),
        }
    }

    /// A worker lost during a request: replace it, replay the log, and say so.
    fn replace_lost(&mut self, lost: CallError) -> BridgeError {
        tracing::warn!("{lost}; replacing the worker and replaying {} requests", self.log.len());
        self.worker = None;
        self.replacements += 1;
        match self.rebuild() {
            Ok(()) => BridgeError::WorkerLost { source: lost },
            Err(rebuild) => BridgeError::RebuildFailed { source: lost, rebuild: Box::new(rebuild) },
        }
    }

    /// Send one request. The outer error is a lost worker (already replaced, document
    /// rebuilt); the inner one is FreeCAD refusing the request.
    pub(super) fn call(&mut self, request: Request, logged: bool) -> Result<Result<Value, Refusal>, BridgeError> {
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
        self.served += 1;
        match worker.call(&request, timeout) {
            Ok(v) => {
                if logged {
                    if is_execute {
                        crate::solved::settle_logged(&mut request, &v);
                    }
                    let before = is_execute.then(|| self.worker_state.clone());
                    self.log.push(Logged { request, before });
                }
                Ok(Ok(v))
            }
            Err(CallError::Rejected { reason, entity, kind }) => Ok(Err(Refusal { reason, entity, kind })),
            Err(lost) => Err(self.replace_lost(lost)),
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
    pub(super) fn rebuild(&mut self) -> Result<(), CallError> {
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
        self.served = relogged.len();
        self.log = relogged;
        self.worker = Some(worker);
        Ok(())
    }
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
