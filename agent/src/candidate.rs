//! A step's candidate executed: its sketches solved, its feature previewed.

use freecad_bridge::command::{Mode, Primitive, Sketch};
use freecad_bridge::geometry::{arc_angles, circumcircle};
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
        // An arc that goes the long way round a circle wider than the whole view is a
        // drawing's slip (its middle point on the wrong side of its ends), not a feature.
        let view = f64::from(self.config.view_size) * self.pixel();
        if let Some((i, note)) = sketches.iter().enumerate().find_map(|(i, s)| Some((i, runaway_arc_note(s, view)?))) {
            return Ok(Err(CandidateFailure { reason: note, redraw_sketch: Some(i) }));
        }
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
    against_part: bool,
}

impl Engine<'_> {
    /// A failed candidate's drawing mended where it is a near miss the model would only draw
    /// again: a revolve's profile a hair across its axis put on it ([`fit::onto_axis`]), holes
    /// across their outline or just outside it moved inside ([`fit::inside`]), a pad's side a
    /// hair off the part's edge put on it ([`fit::touch`]). True when a sketch was mended (the
    /// candidate is built again); each kind once per attempt.
    pub(crate) fn mend(
        &mut self,
        session: &mut Session,
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
        let pad = matches!(command, Command::Extrude(e) if e.mode == Mode::Add);
        if !done.against_part && pad && reason.contains("multiple solids") {
            done.against_part = true;
            // The document is as before the candidate: the planes of the faces it names.
            let frames: Vec<_> = sketches.iter().map(|s| session.plane_frame(&s.on).ok()).collect();
            if let Some(touch) =
                fit::touch::against_part(sketches, &frames, session.state(), self.point_reach(), self.pixel())
            {
                let sketch = sketches[touch.sketch].name.clone();
                self.emit(TraceEvent::AgainstPart { step, attempt, sketch, moved: touch.moved })?;
                sketches[touch.sketch] = touch.mended;
                return Ok(true);
            }
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

/// The first three-point arc of `sketch` that sweeps more than a half turn on a circle wider
/// than `view` (model units), in the drawing's own names; `None` where none does. Its middle
/// point, a hair off the line through its ends and outside them, sends it round a circle
/// metres across: a simulated reader's 0.3 mm strip was drawn so, and the part became a
/// blob 2.4 m wide (test100 00578255, mIoU 0.003).
fn runaway_arc_note(sketch: &Sketch, view: f64) -> Option<String> {
    sketch.primitives.iter().enumerate().find_map(|(k, p)| {
        let Primitive::Arc { start, mid, end, construction: false } = *p else { return None };
        let (center, radius) = circumcircle(start, mid, end)?;
        let turn = arc_angles(start, mid, end, center).1.abs().to_degrees();
        (turn > 180.0 && 2.0 * radius > view).then(|| {
            format!(
                "in sketch {}, arc g{k} goes the long way round: from its start through its middle point to its end it \
                 turns {turn:.0} degrees on a circle {:.0} mm across, wider than the whole view (its middle point \
                 belongs between its ends, on the side the arc bulges to)",
                sketch.name,
                2.0 * radius
            )
        })
    })
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
    fn an_arc_the_long_way_round_a_circle_wider_than_the_view_is_named_and_a_corner_is_not() {
        let sketch = |primitives| Sketch {
            name: "S2".into(),
            on: "F1".into(),
            primitives,
            constraints: Vec::new(),
            auto_coincident: true,
        };
        let line = |start, end| Primitive::Line { start, end, construction: false };
        let arc = |start, mid, end| Primitive::Arc { start, mid, end, construction: false };
        // A strip 0.4 wide whose end arc's middle point lies a hair off the line through its
        // ends and outside them (test100 00578255's): round a circle 2.4 m across.
        let strip = sketch(vec![
            arc([22.51, 0.92], [22.71 - 0.4 * 2400.0, 0.12 - 1.6 * 600.0], [22.92, -0.68]),
            line([22.92, -0.68], [21.6, -0.44]),
            line([21.6, -0.44], [22.51, 0.92]),
        ]);
        let note = runaway_arc_note(&strip, 151.5).expect("the arc runs away");
        assert!(note.starts_with("in sketch S2, arc g0 goes the long way round"), "{note}");
        // A keyhole's round end sweeps 300 degrees on a circle well inside the view: no slip.
        let keyhole = sketch(vec![
            arc([1.0, 1.732], [-2.0, 0.0], [1.0, -1.732]),
            line([1.0, -1.732], [10.0, -1.0]),
            line([10.0, -1.0], [10.0, 1.0]),
            line([10.0, 1.0], [1.0, 1.732]),
        ]);
        assert_eq!(runaway_arc_note(&keyhole, 151.5), None);
        // A shallow arc of a huge circle (a nearly straight side) sweeps little: no slip.
        let shallow = sketch(vec![arc([0.0, 0.0], [50.0, 0.1], [100.0, 0.0]), line([100.0, 0.0], [0.0, 0.0])]);
        assert_eq!(runaway_arc_note(&shallow, 151.5), None);
    }

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
