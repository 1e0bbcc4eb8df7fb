//! A step's candidate executed: its sketches solved, its feature previewed.

use freecad_bridge::command::Sketch;
use freecad_bridge::{BridgeError, Command, Preview, RefusalKind, Session};

use crate::engine::{CandidateFailure, Engine, Turn, kernel};
use crate::error::LoopError;
use crate::events::TraceEvent;
use crate::fit;

impl Engine<'_> {
    /// Execute the sketches and preview the feature; on a failure the document is put back
    /// as the attempt began it (the history, then `switch`, the step's body switch).
    /// Constraints the solver drops as redundant are recorded (Stage 3 is told) and left out
    /// of the sketches that will be committed.
    pub(crate) fn candidate(
        &mut self,
        session: &mut Session,
        switch: Option<&Command>,
        sketches: &mut [Sketch],
        command: &Command,
        turn: Turn,
    ) -> Result<Result<Preview, CandidateFailure>, LoopError> {
        self.dropped.clear();
        for (i, sketch) in sketches.iter_mut().enumerate() {
            let c = Command::Sketch(sketch.clone());
            match kernel(&mut self.timing, session, |s| s.execute(&c)) {
                Ok(executed) => {
                    self.dropped.extend(dropped_constraints(sketch, &executed.dropped));
                    // What is committed is what was solved (a replay then builds this model).
                    *sketch = sketch.as_solved(&executed);
                    if !executed.dropped.is_empty() {
                        self.emit(TraceEvent::Dropped {
                            step: turn.step,
                            attempt: turn.attempt,
                            sketch: sketch.name.clone(),
                            constraints: executed.dropped.clone(),
                        })?;
                    }
                }
                Err(e) => {
                    let name = sketch.name.clone();
                    if i > 0 {
                        self.rollback_in_body(session, switch)?;
                    }
                    let unsolvable = matches!(&e, BridgeError::Command { kind: RefusalKind::Unsolvable, .. });
                    return Ok(Err(CandidateFailure {
                        reason: format!("sketch {name}: {e}"),
                        redraw_sketch: unsolvable.then_some(i),
                    }));
                }
            }
        }
        let diagonal = session.state().bbox.map_or(2.0 * self.sphere.radius, |b| b.diagonal());
        let preview = kernel(&mut self.timing, session, |s| s.preview(command, views::deflection_for(diagonal)));
        match preview {
            Ok(p) => Ok(Ok(p)),
            Err(e) => {
                if !sketches.is_empty() {
                    self.rollback_in_body(session, switch)?;
                }
                // A profile whose curves cross each other is the drawing's fault, which
                // FreeCAD's words do not name: the sketch is drawn again, told where.
                let crossed = sketches.iter().enumerate().find_map(|(i, sketch)| Some((i, crossing_note(sketch)?)));
                Ok(Err(match crossed {
                    Some((i, note)) => CandidateFailure { reason: format!("{e}; {note}"), redraw_sketch: Some(i) },
                    None => CandidateFailure { reason: e.to_string(), redraw_sketch: None },
                }))
            }
        }
    }
}

/// What the harness has mended in an attempt's failed candidates: each kind once.
#[derive(Debug, Default)]
pub(crate) struct Mends {
    onto_axis: bool,
    holes_inside: bool,
}

impl Engine<'_> {
    /// A failed candidate's drawing mended where it is a near miss the model would only draw
    /// again: a revolve's profile a hair across its axis put on it ([`fit::onto_axis`]), holes
    /// across their outline or just outside it moved inside ([`fit::inside`]). True when a
    /// sketch was mended (the candidate is built again); each kind once per attempt.
    pub(crate) fn mend(
        &mut self,
        reason: &str,
        sketches: &mut [Sketch],
        command: &Command,
        turn: Turn,
        done: &mut Mends,
    ) -> Result<bool, LoopError> {
        let (step, attempt) = (turn.step, turn.attempt);
        if !done.onto_axis
            && reason.contains("axis intersects")
            && let Some((i, sketch, points)) = fit::onto_axis(sketches, command, self.axis_reach())
        {
            done.onto_axis = true;
            self.emit(TraceEvent::OntoAxis { step, attempt, sketch: sketch.name.clone(), points })?;
            sketches[i] = sketch;
            return Ok(true);
        }
        if !done.holes_inside
            && (reason.contains("cross each other") || reason.contains("multiple solids"))
            && let Some((i, sketch, circles)) = fit::inside::holes_inside(sketches, self.point_reach(), self.pixel())
        {
            done.holes_inside = true;
            self.emit(TraceEvent::HolesInside { step, attempt, sketch: sketch.name.clone(), circles })?;
            sketches[i] = sketch;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Each of `sketch`'s constraints the solver dropped (by the worker's labels, `#k` for the
/// k-th), as the model wrote it: a relay reader whose four tangents were dropped (an arc
/// drawn through three points already meets its lines) found them gone from the committed
/// command and was never told.
pub(crate) fn dropped_constraints(sketch: &Sketch, labels: &[String]) -> Vec<String> {
    labels
        .iter()
        .map(|label| {
            let given =
                label.strip_prefix('#').and_then(|k| k.parse::<usize>().ok()).and_then(|k| sketch.constraints.get(k));
            match given.and_then(|c| serde_json::to_string(c).ok()) {
                Some(c) => format!("{}'s constraint {label} {c}", sketch.name),
                None => format!("{}'s constraint {label}", sketch.name),
            }
        })
        .collect()
}

/// Where two curves of `sketch` cross each other away from their ends, in the drawing's own
/// names (`g0`, `g2`); `None` where none do.
fn crossing_note(sketch: &Sketch) -> Option<String> {
    let c = freecad_bridge::crossing::first_crossing(&sketch.primitives)?;
    Some(format!(
        "in sketch {}, curves g{} and g{} cross each other {:.0}% of the way along g{} (a profile's curves may \
         meet only at their ends: draw them apart)",
        sketch.name,
        c.first,
        c.second,
        100.0 * c.along,
        c.first
    ))
}

#[cfg(test)]
mod tests {
    use freecad_bridge::command::{Constraint, Primitive};

    use super::*;

    #[test]
    fn a_dropped_constraint_is_named_as_the_model_wrote_it() {
        let line = |start, end| Primitive::Line { start, end, construction: false };
        let sketch = Sketch {
            name: "S1".into(),
            on: "XY".into(),
            primitives: vec![line([0.0, 0.0], [10.0, 0.0]), line([10.0, 0.0], [10.0, 5.0])],
            constraints: vec![
                serde_json::from_str::<Constraint>(r#"{"type": "horizontal", "line": "g0"}"#).expect("a constraint"),
                serde_json::from_str::<Constraint>(r#"{"type": "perpendicular", "a": "g0", "b": "g1"}"#)
                    .expect("a constraint"),
            ],
            auto_coincident: true,
        };
        let told = dropped_constraints(&sketch, &["#1".to_string(), "#7".to_string()]);
        assert_eq!(told.len(), 2);
        assert!(told[0].starts_with("S1's constraint #1 {") && told[0].contains("perpendicular"), "{told:?}");
        assert_eq!(told[1], "S1's constraint #7");
    }
}
