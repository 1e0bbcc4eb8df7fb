//! The engine's side of the fit ([`crate::fit`]): where a step's candidate and the finished
//! program meet it. The fit itself takes typed inputs (a command, the target's pixels, the
//! view options, the session); here the engine hands them over, records what came back in
//! the trace and for Stage 3, and puts the document back when a fit fails.

use freecad_bridge::command::Sketch;
use freecad_bridge::{BridgeError, Command, Preview, Session};

use crate::engine::{Engine, Turn, kernel};
use crate::error::LoopError;
use crate::events::TraceEvent;
use crate::fit;

impl Engine<'_> {
    /// The fit ([`fit`]): the new sketch and its extrusion moved to agree with the target's
    /// pixels, recorded in the trace and kept for Stage 3. A fit that fails (the kernel
    /// refuses a request) leaves the candidate as the model made it.
    pub(crate) fn fit(
        &mut self,
        session: &mut Session,
        sketches: &mut Vec<Sketch>,
        switch: Option<&Command>,
        command: Command,
        preview: Preview,
        turn: Turn,
    ) -> Result<(Command, Preview), LoopError> {
        // Taken for the fit and put back: the rebuilds below need the engine itself.
        self.fitted_from = None;
        // Without `--fit-steps` the fit at END does the fitting; a revolve's profile is only
        // made regular where it is near it, so the next step's faces are the part's: a
        // flange's face drawn a hair off level is a cone, not the plane to sketch on.
        let revolve = matches!(command, Command::Revolve(_));
        let moves = match (self.config.fit_steps, self.config.fit && revolve) {
            (true, _) => fit::sketch::Moves::Fit,
            (false, true) => fit::sketch::Moves::Regular,
            (false, false) => return Ok((command, preview)),
        };
        let Some(target) = self.fit_target.take() else { return Ok((command, preview)) };
        let opts = self.options();
        let drawn = sketches.clone();
        let mut rebuild = |s: &mut Session, fitted: &[Sketch], c: &Command| -> Result<Option<Preview>, LoopError> {
            Ok(self.rebuild_candidate(s, switch, fitted, c, turn)?.ok())
        };
        let candidate = fit::Candidate { sketches: &drawn, command: &command, preview: &preview };
        // The step's fit measures to whole pixels, the refined lines are for END's: with them a
        // revolve's profile made regular at its step moved where its later faces were then
        // not found (a simulated hub, gen-11-00018, stopped at step 2).
        let mut target = target;
        let refined = target.refined.take();
        let fitted = fit::fit_feature(session, candidate, &target, &opts, moves, &mut rebuild);
        target.refined = refined;
        self.fit_target = Some(target);
        match fitted {
            Ok(Some((fitted, report))) => {
                self.emit(TraceEvent::Fit {
                    step: turn.step,
                    attempt: turn.attempt,
                    report: Box::new(report.clone()),
                })?;
                self.fit_report = report.kept().then_some(report);
                Ok(match fitted {
                    Some((fitted_sketches, c, p)) => {
                        self.fitted_from = Some((drawn, command));
                        *sketches = fitted_sketches;
                        (c, p)
                    }
                    None => (command, preview),
                })
            }
            Ok(None) => Ok((command, preview)),
            Err(e) => {
                tracing::warn!("the fit of step {} failed, the candidate stays as drawn: {e}", turn.step);
                // The document may hold the fitted drawing: build the drawn one again.
                match self.rebuild_candidate(session, switch, &drawn, &command, turn)? {
                    Ok(p) => Ok((command, p)),
                    Err(failure) => Err(LoopError::Bridge(BridgeError::Command {
                        op: "fit".into(),
                        entity: None,
                        reason: format!("the candidate as drawn no longer builds after the fit: {}", failure.reason),
                        kind: freecad_bridge::RefusalKind::Other,
                    })),
                }
            }
        }
    }

    /// The document as before the attempt, the body switch, then `sketches` executed and
    /// `command` previewed: a candidate built again with other numbers.
    fn rebuild_candidate(
        &mut self,
        session: &mut Session,
        switch: Option<&Command>,
        sketches: &[Sketch],
        command: &Command,
        turn: Turn,
    ) -> Result<Result<Preview, crate::engine::CandidateFailure>, LoopError> {
        self.rollback_in_body(session, switch)?;
        // The fitted sketches are the solved ones, which the solver's drops already left out:
        // what Stage 3 is told it dropped is the drawing's.
        let dropped = std::mem::take(&mut self.dropped);
        let built = self.candidate(session, switch, &mut sketches.to_vec(), command, turn);
        self.dropped = dropped;
        built
    }

    /// How far across its axis a revolve's profile may be put back on it: [`fit::sketch::AXIS_REACH_PX`]
    /// for a point, in model units at the views' scale.
    pub(crate) fn axis_reach(&self) -> f64 {
        fit::sketch::AXIS_REACH_PX * self.pixel()
    }

    /// How far the fit may move a point (model units): what a hole crossing its outline may
    /// be moved to go inside ([`fit::inside`]).
    pub(crate) fn point_reach(&self) -> f64 {
        fit::sketch::POINT_REACH_PX * self.pixel()
    }

    /// One pixel of the views, in model units.
    pub(crate) fn pixel(&self) -> f64 {
        2.0 * self.sphere.radius / (f64::from(self.config.view_size) * views::PREVIEW_FILL)
    }

    /// Remember a committed feature the step's fit moved, as the model drew it (the history
    /// is about to get the switch, the sketches and the command, in that order).
    pub(crate) fn record_as_drawn(
        &mut self,
        switched: bool,
        fitted: &[Sketch],
        drawn: &[Sketch],
        command: &Command,
        drawn_command: Command,
    ) {
        let profile = match command {
            Command::Extrude(e) => &e.profile,
            Command::Revolve(r) => &r.profile,
            _ => return,
        };
        let Some(i) = fitted.iter().position(|s| &s.name == profile) else { return };
        let base = self.history.len() + usize::from(switched);
        self.as_drawn.push(fit::program::AsDrawn {
            sketch: base + i,
            command: base + fitted.len(),
            fitted: (Command::Sketch(fitted[i].clone()), command.clone()),
            drawn: (Command::Sketch(drawn[i].clone()), drawn_command),
        });
    }

    /// The fit at END ([`fit::program`]): the finished program's features fitted again
    /// against the whole target; the history becomes the program kept. A fit that fails
    /// leaves the program as it was.
    pub(crate) fn fit_program(&mut self, session: &mut Session) -> Result<(), LoopError> {
        let Some(target) = self.fit_target.take() else { return Ok(()) };
        let opts = self.options();
        let diagonal = session.state().bbox.map_or(2.0 * self.sphere.radius, |b| b.diagonal());
        let deflection = views::deflection_for(diagonal);
        let program = freecad_bridge::Program { name: None, description: None, commands: self.history.clone() };
        let fitted = kernel(&mut self.timing, session, |s| {
            fit::program::fit_program(s, &program, &self.as_drawn, &target, &opts, deflection)
        });
        self.fit_target = Some(target);
        match fitted {
            Ok((fitted, report)) => {
                self.history = fitted.commands;
                self.emit(TraceEvent::ProgramFit { report })?;
            }
            Err(e) => {
                tracing::warn!("the fit at END failed, the program stays as built: {e}");
                self.rollback(session)?;
            }
        }
        Ok(())
    }
}
