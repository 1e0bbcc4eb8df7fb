//! Fixing a feature at its source: Stage 1 may answer `{"op": "revise", "number": 2,
//! "command": {...}}`, the accepted command `[2]` with its numbers changed (a pad's depth, a
//! fillet's radius, a sketch's coordinates). The document is rebuilt with the revised
//! command in place, everything after it on top, and the result goes through Stage 3 like
//! any candidate. A base that came out too thick is corrected where it was made, instead of
//! by a corrective cut that splits its faces.
//!
//! `"also": [{"number": 4, "command": {...}}]` revises linked commands in the same answer
//! (a plate's radius and the boss on it), rebuilt and judged as one candidate.
//!
//! A revision changes numbers only (and the `reversed`/`symmetric` switches, and an
//! extrusion's extent kind, which names no entity): the same op, names, references and
//! number of primitives, so every later command still means what it
//! meant. The rebuild checks that too: each entity a later command names must still be the
//! same kind of entity (a plane facing the same way), or the revision is refused with the
//! entity and the command that names it.

use freecad_bridge::{Command, ModelState, Preview, Session};
use serde_json::Value;

use crate::engine::{Attempt, Engine, Turn, kernel};
use crate::error::LoopError;
use crate::events::{Execution, TraceEvent};
use crate::stage1::Plan;
use crate::stage2::MAX_REVISION;
use crate::vlm::Vlm;

/// A revision Stage 1 asked for, checked against the accepted commands.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// The accepted command it replaces, numbered from 1 as Stage 1's history lists them.
    pub number: usize,
    /// What changed, one item per number: `extent.depth 10 -> 6`.
    pub changes: Vec<String>,
    /// Accepted commands revised with it (`also`), whose numbers go together with its own:
    /// a plate's radius and the boss drawn on it, a pad's depth and the hole through it.
    pub also: Vec<Linked>,
}

/// One more accepted command of a revision, with its numbers changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Linked {
    pub number: usize,
    pub command: Command,
    pub changes: Vec<String>,
}

impl Revision {
    /// `revision of [2] extrude: extent.depth 10 -> 6; with [4] sketch: ...`, at most six
    /// changes named for each command.
    pub fn describe(&self, op: &str) -> String {
        let mut text = format!("revision of [{}] {op}: {}", self.number, listed(&self.changes));
        for l in &self.also {
            text.push_str(&format!("; with [{}] {}: {}", l.number, l.command.op(), listed(&l.changes)));
        }
        text
    }

    /// The numbers of every command the revision replaces, the first one's first.
    pub fn numbers(&self) -> Vec<usize> {
        std::iter::once(self.number).chain(self.also.iter().map(|l| l.number)).collect()
    }
}

fn listed(changes: &[String]) -> String {
    const SHOWN: usize = 6;
    let mut text = changes.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if changes.len() > SHOWN {
        text.push_str(&format!(" and {} more", changes.len() - SHOWN));
    }
    text
}

/// At most this many commands in one revision (the first and its `also`).
pub const MAX_LINKED: usize = 4;

/// Check a `revise` answer (`command` is Stage 1's `command` object) against the accepted
/// commands: the revised command and what it changes, with the linked ones of `also`.
pub fn check(command: &Value, history: &[Command]) -> Result<(Command, Revision), String> {
    let number = command
        .get("number")
        .and_then(Value::as_u64)
        .ok_or("a revision needs `number`, the [n] of the accepted command it revises")? as usize;
    let new_value =
        command.get("command").ok_or("a revision needs `command`: the accepted command with its numbers changed")?;
    let (new, changes) = check_one(number, new_value, history)?;
    let mut also: Vec<Linked> = Vec::new();
    if let Some(list) = command.get("also") {
        let list = list.as_array().ok_or("`also` is a list of {\"number\": n, \"command\": {...}}")?;
        if list.len() + 1 > MAX_LINKED {
            return Err(format!(
                "a revision changes at most {MAX_LINKED} commands together; `also` names {}",
                list.len()
            ));
        }
        for (i, item) in list.iter().enumerate() {
            let n = item.get("number").and_then(Value::as_u64).ok_or(format!("also[{i}] needs `number`"))? as usize;
            if n == number || also.iter().any(|l| l.number == n) {
                return Err(format!("also[{i}]: [{n}] is revised twice in one answer"));
            }
            let value = item.get("command").ok_or(format!("also[{i}] needs `command`"))?;
            let (command, changes) = check_one(n, value, history).map_err(|e| format!("also[{i}]: {e}"))?;
            also.push(Linked { number: n, command, changes });
        }
    }
    Ok((new, Revision { number, changes, also }))
}

/// One accepted command `[number]` against its revised form: the command and its changes.
fn check_one(number: usize, new_value: &Value, history: &[Command]) -> Result<(Command, Vec<String>), String> {
    if history.is_empty() {
        return Err("there is no accepted command to revise yet".into());
    }
    let Some(old) = number.checked_sub(1).and_then(|i| history.get(i)) else {
        return Err(format!("there is no accepted command [{number}]: they are [1]..[{}]", history.len()));
    };
    if matches!(old, Command::Body(_) | Command::End) {
        return Err(format!("[{number}] ({}) has no numbers to revise", old.op()));
    }
    let new: Command =
        serde_json::from_value(new_value.clone()).map_err(|e| format!("the revised command does not parse: {e}"))?;
    // Both as the language writes them, so a default spelled out (`"reversed": false`)
    // is no difference.
    let as_json = |c: &Command| serde_json::to_value(c).unwrap_or(Value::Null);
    let mut new_value = as_json(&new);
    let mut changes = Vec::new();
    compare(&as_json(old), &mut new_value, "", &mut changes).map_err(|e| {
        format!("{e}: a revision changes only the numbers of [{number}]; anything else is a new command")
    })?;
    if changes.is_empty() {
        return Err(format!("the revised command is [{number}] unchanged: change at least one of its numbers"));
    }
    let new = serde_json::from_value(new_value).map_err(|e| format!("the revised command does not parse: {e}"))?;
    Ok((new, changes))
}

/// Keys whose numbers are sizes: a change beyond [`MAX_REVISION`] times is a unit mistake.
const SIZES: [&str; 6] = ["depth", "depth2", "radius", "size", "value", "length"];
/// Switches a revision may flip.
const SWITCHES: [&str; 2] = ["reversed", "symmetric"];

/// Stage 1's history shows numbers to 4 decimals: a number copied from it is unchanged.
const COPIED: f64 = 6e-5;

/// Compare the accepted command with the revision (both JSON), listing the numbers that
/// changed; a number within [`COPIED`] of the old one is set back to it.
fn compare(old: &Value, new: &mut Value, path: &str, changes: &mut Vec<String>) -> Result<(), String> {
    let here = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match (old, new) {
        (Value::Number(a), new @ Value::Number(_)) => {
            let (a_value, a) = (Value::Number(a.clone()), a.as_f64().unwrap_or(f64::NAN));
            let b = new.as_f64().unwrap_or(f64::NAN);
            if (a - b).abs() <= COPIED {
                *new = a_value;
            } else {
                let key = path.rsplit('.').next().unwrap_or(path);
                if SIZES.contains(&key) {
                    unit_mistake(path, a, b)?;
                }
                changes.push(format!("{path} {} -> {}", short(a), short(b)));
            }
            Ok(())
        }
        // An extrusion's extent may change its kind (a depth to through all, one side to
        // both): no extent names an entity, so every later command still means what it
        // meant. A relay reader who found a notch cut through the bar where it had a depth
        // could not say so in a revision.
        (Value::Object(a), Value::Object(b)) if path == "extent" && a.get("type") != b.get("type") => {
            if let (Some(x), Some(y)) = (a.get("depth").and_then(Value::as_f64), b.get("depth").and_then(Value::as_f64))
            {
                unit_mistake("extent.depth", x, y)?;
            }
            changes.push(format!("extent {} -> {}", extent_text(a), extent_text(b)));
            Ok(())
        }
        (Value::Object(a), Value::Object(b)) => {
            let keys: Vec<String> = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).cloned().collect();
            for key in &keys {
                match (a.get(key), b.get_mut(key)) {
                    (Some(x), Some(y)) => compare(x, y, &here(key), changes)?,
                    // A switch left out is off.
                    (x, y) if SWITCHES.contains(&key.as_str()) => {
                        let on = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
                        if on(x) != on(y.as_deref()) {
                            changes.push(format!("{} {} -> {}", here(key), on(x), on(y.as_deref())));
                        }
                    }
                    // Every constraint left out: the language writes no `constraints`.
                    (Some(x), None) if key == "constraints" => {
                        compare(x, &mut Value::Array(Vec::new()), &here(key), changes)?
                    }
                    (Some(_), None) => return Err(format!("`{}` is left out", here(key))),
                    (None, _) => return Err(format!("`{}` is new", here(key))),
                }
            }
            Ok(())
        }
        // A sketch's constraints may be left out (not added or changed): the edit check
        // asks for a tie that holds only at the drawn depths to go.
        (Value::Array(a), Value::Array(b)) if path == "constraints" && b.len() < a.len() => {
            let mut next = 0;
            for (i, x) in a.iter().enumerate() {
                let mut matched = Vec::new();
                let kept = next < b.len() && compare(x, &mut b[next], &format!("{path}[{i}]"), &mut matched).is_ok();
                if kept {
                    changes.extend(matched);
                    next += 1;
                } else {
                    changes.push(format!("{path}[{i}] ({}) left out", x["type"].as_str().unwrap_or("?")));
                }
            }
            match b.get(next) {
                None => Ok(()),
                Some(y) => {
                    Err(format!("`{path}` has {y} where it had none such: constraints may be left out, not added"))
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Err(format!("`{path}` has {} items where it had {}", b.len(), a.len()));
            }
            a.iter()
                .zip(b.iter_mut())
                .enumerate()
                .try_for_each(|(i, (x, y))| compare(x, y, &format!("{path}[{i}]"), changes))
        }
        (Value::Bool(a), Value::Bool(b)) if a != b => {
            let (a, b) = (*a, *b);
            let key = path.rsplit('.').next().unwrap_or(path);
            if !SWITCHES.contains(&key) {
                return Err(format!("`{path}` changed from {a} to {b}"));
            }
            changes.push(format!("{path} {a} -> {b}"));
            Ok(())
        }
        (a, b) if a == &*b => Ok(()),
        (a, b) => Err(format!("`{path}` changed from {a} to {b}")),
    }
}

/// A size changed more than [`MAX_REVISION`] times either way is a unit mistake.
fn unit_mistake(path: &str, a: f64, b: f64) -> Result<(), String> {
    if a != 0.0 && !(1.0 / MAX_REVISION..=MAX_REVISION).contains(&(b / a)) {
        return Err(format!(
            "`{path}` goes from {a} to {b}, more than {MAX_REVISION} times either way (sizes are in mm)"
        ));
    }
    Ok(())
}

/// An extent as a change lists it: `one_side 10`, `two_sides 5/3`, `through_all symmetric`.
fn extent_text(extent: &serde_json::Map<String, Value>) -> String {
    let mut text = extent.get("type").and_then(Value::as_str).unwrap_or("?").to_string();
    let depths: Vec<String> =
        ["depth", "depth2"].iter().filter_map(|k| extent.get(*k).and_then(Value::as_f64)).map(short).collect();
    if !depths.is_empty() {
        text.push_str(&format!(" {}", depths.join("/")));
    }
    if extent.get("symmetric").and_then(Value::as_bool) == Some(true) {
        text.push_str(" symmetric");
    }
    text
}

fn short(x: f64) -> String {
    let r = (x * 1e4).round() / 1e4;
    format!("{}", r + 0.0)
}

/// What the entities a command names are in `state`, for the check that a revision left
/// them the same kind: `F6 Plane n=(0, 0, 1)`, `E3 Line`, `F2 Cylinder axis=(0, 0, 1)`.
pub(crate) fn kinds(state: &ModelState, command: &Command) -> Vec<String> {
    let dir = |v: [f64; 3]| {
        let r = |x: f64| (x * 1e3).round() / 1e3 + 0.0;
        format!("({}, {}, {})", r(v[0]), r(v[1]), r(v[2]))
    };
    let mut out: Vec<String> = Vec::new();
    for r in command.references() {
        let id = freecad_bridge::command::split_position(&r.id).0.to_string();
        let text = if let Some(f) = state.faces.iter().find(|f| f.id == id) {
            match (f.normal, f.axis) {
                (Some(n), _) => format!("{id} {:?} n={}", f.kind, dir(n)),
                (None, Some(a)) => format!("{id} {:?} axis={}", f.kind, dir(a)),
                _ => format!("{id} {:?}", f.kind),
            }
        } else if let Some(e) = state.edges.iter().find(|e| e.id == id) {
            format!("{id} {:?}", e.kind)
        } else if state.vertices.iter().any(|v| v.id == id) {
            format!("{id} vertex")
        } else {
            format!("{id} missing")
        };
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

impl Engine<'_> {
    /// A revision as the step's candidate: the document rebuilt with the revised command,
    /// previewed against the model as it was, judged in Stage 3, committed or rolled back.
    pub(crate) fn revise(
        &mut self,
        vlm: &mut dyn Vlm,
        session: &mut Session,
        turn: Turn,
        state: &ModelState,
        plan: Plan,
        command: Command,
    ) -> Result<Attempt, LoopError> {
        let Some(revision) = plan.revision.clone() else { return Ok(Attempt::retry("not a revision".into())) };
        // A revision changes numbers, not constraints: nothing of it is dropped to tell.
        self.dropped.clear();
        let mut revised = self.history.clone();
        revised[revision.number - 1] = command;
        for l in &revision.also {
            revised[l.number - 1] = l.command.clone();
        }
        let numbers = revision.numbers();
        let index = numbers.iter().min().copied().unwrap_or(revision.number) - 1;
        let diagonal = state.bbox.map_or(2.0 * self.sphere.radius, |b| b.diagonal());
        kernel(&mut self.timing, session, |s| s.hold())?;
        let (notes, kinds_now) = match self.rebuild(session, &mut revised, index)? {
            Ok(x) => x,
            Err(reason) => {
                self.rollback(session)?;
                return self.failed_candidate(turn, reason);
            }
        };
        let preview = kernel(&mut self.timing, session, |s| s.preview_held(views::deflection_for(diagonal)));
        let preview: Preview = match preview {
            Ok(p) => p,
            Err(e) => {
                self.rollback(session)?;
                return self.failed_candidate(turn, e.to_string());
            }
        };
        if turn.verify
            && let Some(retry) =
                self.stage3(vlm, state, &plan, &preview, &revised_sketches(&revised, &numbers), turn)?
        {
            self.rollback(session)?;
            return Ok(retry);
        }
        // Built again from the start in a new worker: what the next step is shown
        // ([`Engine::replay_fresh`]).
        if let Err(failed) = self.replay_fresh(session, &revised)? {
            self.rollback(session)?;
            return self.failed_candidate(
                turn,
                format!(
                    "the revised program previewed, but does not build again from the start ([{}] ({}): {})",
                    failed.index + 1,
                    failed.op,
                    failed.error
                ),
            );
        }
        self.check_edit(session, &revised, turn.step)?;
        let changed = numbers.iter().map(|n| revised[n - 1].clone()).collect();
        let mut execution = Execution::committed(turn.step, turn.attempt, turn.verify, changed);
        execution.revises = Some(revision.number);
        execution.also_revises = revision.also.iter().map(|l| l.number).collect();
        self.emit(TraceEvent::Execute(execution))?;
        self.history = revised;
        self.history_notes = notes;
        self.history_kinds = kinds_now;
        self.commit_step(session, turn)
    }

    /// Reset the document and execute `commands`, checking from command `from + 1` on that
    /// the entities each names are still of the kinds they were. Returns each command's
    /// note and kinds, or why the rebuild failed (the document is then partly built; the
    /// caller rolls back). Each sketch is left as it was solved (the revised one, and those
    /// after it that follow it through their ties), so the history stays a program that
    /// replays to this model.
    #[allow(clippy::type_complexity)]
    fn rebuild(
        &mut self,
        session: &mut Session,
        commands: &mut [Command],
        from: usize,
    ) -> Result<Result<(Vec<String>, Vec<Vec<String>>), String>, LoopError> {
        let mut notes = Vec::with_capacity(commands.len());
        let mut kinds_now = Vec::with_capacity(commands.len());
        kernel(&mut self.timing, session, |s| s.reset().map(|_| ()))?;
        for (j, c) in commands.iter_mut().enumerate() {
            let k = kinds(session.state(), c);
            if j > from
                && let Some(before) = self.history_kinds.get(j)
                && *before != k
            {
                let was = before.iter().filter(|b| !k.contains(b)).cloned().collect::<Vec<_>>().join("; ");
                let is = k.iter().filter(|x| !before.contains(x)).cloned().collect::<Vec<_>>().join("; ");
                return Ok(Err(format!(
                    "the revision changes what [{}] ({}) names: it named {was}, now {is}; revise differently or correct the model with a new command",
                    j + 1,
                    c.op()
                )));
            }
            notes.push(crate::stage1::reference_note(session.state(), c));
            kinds_now.push(k);
            match kernel(&mut self.timing, session, |s| s.execute(c)) {
                Ok(executed) => *c = c.as_solved(&executed),
                Err(e) => {
                    return Ok(Err(format!(
                        "the revised model cannot be rebuilt: [{}] ({}) fails: {e}",
                        j + 1,
                        c.op()
                    )));
                }
            }
        }
        Ok(Ok((notes, kinds_now)))
    }
}

/// The sketches among the revised commands (`numbers`, 1-based), as rebuilt.
fn revised_sketches(revised: &[Command], numbers: &[usize]) -> Vec<freecad_bridge::command::Sketch> {
    numbers
        .iter()
        .filter_map(|n| match revised.get(n - 1) {
            Some(Command::Sketch(s)) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> Vec<Command> {
        serde_json::from_value(serde_json::json!([
            {"op": "sketch", "name": "S1", "on": "XY", "primitives": [{"type": "circle", "center": [1.23456789, 0], "radius": 5}]},
            {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 10}},
            {"op": "fillet", "edges": ["E1"], "radius": 1}
        ]))
        .expect("commands")
    }

    fn revise(number: usize, command: Value) -> Result<(Command, Revision), String> {
        check(&serde_json::json!({"op": "revise", "number": number, "command": command}), &history())
    }

    #[test]
    fn a_revision_lists_the_numbers_it_changes() {
        let (_, r) = revise(
            2,
            serde_json::json!({"op": "extrude", "profile": "S1", "mode": "add",
            "extent": {"type": "one_side", "depth": 6}, "reversed": true}),
        )
        .expect("valid");
        assert_eq!(r.changes, ["extent.depth 10 -> 6", "reversed false -> true"]);
        assert_eq!(r.describe("extrude"), "revision of [2] extrude: extent.depth 10 -> 6, reversed false -> true");
    }

    #[test]
    fn a_number_copied_as_the_history_rounds_it_is_unchanged() {
        let (command, r) = revise(
            1,
            serde_json::json!({"op": "sketch", "name": "S1", "on": "XY",
            "primitives": [{"type": "circle", "center": [1.2346, 0], "radius": 6}]}),
        )
        .expect("valid");
        assert_eq!(r.changes, ["primitives[0].radius 5 -> 6"]);
        let Command::Sketch(s) = command else { panic!("a sketch") };
        assert_eq!(serde_json::to_value(&s.primitives[0]).expect("json")["center"][0], 1.23456789);
    }

    /// The edit check asks for a tie that holds only at the drawn depths to go: a revision
    /// of a sketch may leave constraints out, not add or change them.
    #[test]
    fn a_sketch_revision_may_leave_constraints_out() {
        let history: Vec<Command> = serde_json::from_value(serde_json::json!([
            {"op": "sketch", "name": "S1", "on": "XY", "primitives": [{"type": "circle", "center": [0, 0], "radius": 5}],
             "constraints": [{"type": "radius", "curve": "g0", "value": 5},
                             {"type": "distance_to_line", "point": "g0.center", "line": "E3", "value": 4}]}
        ]))
        .expect("commands");
        let revise = |constraints: Value| {
            let mut sketch = serde_json::json!({"op": "sketch", "name": "S1", "on": "XY",
                "primitives": [{"type": "circle", "center": [0, 0], "radius": 5}]});
            if !constraints.is_null() {
                sketch["constraints"] = constraints;
            }
            check(&serde_json::json!({"op": "revise", "number": 1, "command": sketch}), &history)
        };
        let (command, r) = revise(serde_json::json!([{"type": "radius", "curve": "g0", "value": 6}])).expect("valid");
        assert_eq!(r.changes, ["constraints[0].value 5 -> 6", "constraints[1] (distance_to_line) left out"]);
        let Command::Sketch(s) = command else { panic!("a sketch") };
        assert_eq!(s.constraints.len(), 1);
        let (_, r) = revise(Value::Null).expect("every constraint left out");
        assert_eq!(r.changes, ["constraints[0] (radius) left out", "constraints[1] (distance_to_line) left out"]);
        let added = revise(serde_json::json!([{"type": "radius", "curve": "g0", "value": 5},
            {"type": "distance_to_line", "point": "g0.center", "line": "E3", "value": 4},
            {"type": "horizontal", "line": "g0"}]));
        assert!(added.expect_err("added").contains("has 3 items where it had 2"));
        let other =
            revise(serde_json::json!([{"type": "distance_to_line", "point": "g0.center", "line": "E5", "value": 4}]));
        assert!(other.expect_err("changed").contains("may be left out, not added"));
    }

    #[test]
    fn linked_numbers_change_in_one_revision() {
        let answer = serde_json::json!({"op": "revise", "number": 1,
            "command": {"op": "sketch", "name": "S1", "on": "XY",
                "primitives": [{"type": "circle", "center": [1.23456789, 0], "radius": 6}]},
            "also": [{"number": 3, "command": {"op": "fillet", "edges": ["E1"], "radius": 1.5}}]});
        let (command, r) = check(&answer, &history()).expect("valid");
        assert!(matches!(command, Command::Sketch(_)));
        assert_eq!(r.numbers(), [1, 3]);
        assert_eq!(r.also[0].command.op(), "fillet");
        assert_eq!(
            r.describe("sketch"),
            "revision of [1] sketch: primitives[0].radius 5 -> 6; with [3] fillet: radius 1 -> 1.5"
        );
        // Each linked command is checked like the first, and named in the reason.
        let twice = serde_json::json!({"op": "revise", "number": 3,
            "command": {"op": "fillet", "edges": ["E1"], "radius": 2},
            "also": [{"number": 3, "command": {"op": "fillet", "edges": ["E1"], "radius": 3}}]});
        assert!(check(&twice, &history()).expect_err("twice").contains("[3] is revised twice"));
        let more = serde_json::json!({"op": "revise", "number": 3,
            "command": {"op": "fillet", "edges": ["E1"], "radius": 2},
            "also": [{"number": 2, "command": {"op": "extrude", "profile": "S1", "mode": "cut",
                "extent": {"type": "one_side", "depth": 10}}}]});
        let err = check(&more, &history()).expect_err("a mode");
        assert!(err.starts_with("also[0]: `mode` changed") && err.contains("numbers of [2]"), "{err}");
    }

    #[test]
    fn a_revision_of_more_than_numbers_or_by_a_unit_mistake_is_refused_with_the_reason() {
        let err = revise(3, serde_json::json!({"op": "fillet", "edges": ["E2"], "radius": 1})).expect_err("an ID");
        assert!(err.contains("`edges[0]` changed from \"E1\" to \"E2\""), "{err}");
        let err = revise(3, serde_json::json!({"op": "fillet", "edges": ["E1"], "radius": 100})).expect_err("100x");
        assert!(err.contains("`radius` goes from 1 to 100"), "{err}");
        let err = revise(3, serde_json::json!({"op": "fillet", "edges": ["E1"], "radius": 1})).expect_err("same");
        assert!(err.contains("unchanged"), "{err}");
        let err = revise(4, serde_json::json!({"op": "end"})).expect_err("no [4]");
        assert!(err.contains("they are [1]..[3]"), "{err}");
        let err = revise(
            2,
            serde_json::json!({"op": "extrude", "profile": "S1", "mode": "cut",
            "extent": {"type": "one_side", "depth": 10}}),
        )
        .expect_err("another mode");
        assert!(err.contains("a revision changes only the numbers of [2]"), "{err}");
    }

    #[test]
    fn a_revision_may_change_an_extents_kind_but_not_by_a_unit_mistake() {
        let extrude =
            |extent: Value| serde_json::json!({"op": "extrude", "profile": "S1", "mode": "add", "extent": extent});
        let (command, r) = revise(2, extrude(serde_json::json!({"type": "through_all"}))).expect("through all");
        assert_eq!(r.changes, ["extent one_side 10 -> through_all"]);
        let Command::Extrude(e) = command else { panic!("an extrude") };
        assert_eq!(e.extent, freecad_bridge::command::Extent::ThroughAll { symmetric: false });
        let (_, r) =
            revise(2, extrude(serde_json::json!({"type": "two_sides", "depth": 8, "depth2": 3}))).expect("both");
        assert_eq!(r.changes, ["extent one_side 10 -> two_sides 8/3"]);
        let (_, r) =
            revise(2, extrude(serde_json::json!({"type": "through_all", "symmetric": true}))).expect("both ways");
        assert_eq!(r.describe("extrude"), "revision of [2] extrude: extent one_side 10 -> through_all symmetric");
        let err = revise(2, extrude(serde_json::json!({"type": "symmetric", "depth": 100}))).expect_err("100x");
        assert!(err.contains("`extent.depth` goes from 10 to 100"), "{err}");
    }
}
