//! The engine's side of "same program, same part": the document the model is shown and
//! builds on is the one the accepted commands give when replayed from the start in a new
//! worker, as `exec`, a resumed run and the fit at END build them
//! (docs/freecad-bridge.md, "Same program, same part").

use freecad_bridge::{BridgeError, Command, Session, StepError};

use crate::engine::{Engine, kernel};
use crate::error::LoopError;

/// The evaluation's edit (edit10): every extrusion depth times this.
const EDIT_FACTOR: f64 = 1.1;

impl Engine<'_> {
    /// Back to the accepted commands: the document as it was before the attempt, as the
    /// program gives it in any process ([`Engine::replay_fresh`]).
    pub(crate) fn rollback(&mut self, session: &mut Session) -> Result<(), LoopError> {
        let history = self.history.clone();
        match self.replay_fresh(session, &history)? {
            Ok(()) => Ok(()),
            Err(failed) => Err(failed.error.into()),
        }
    }

    /// [`Engine::rollback`], then the attempt's body switch again (`switch`): a candidate
    /// tried again after a failure is built in the body its step works in (a new body's
    /// drawing built in the old one fails "Result has multiple solids", however well drawn).
    pub(crate) fn rollback_in_body(
        &mut self,
        session: &mut Session,
        switch: Option<&Command>,
    ) -> Result<(), LoopError> {
        self.rollback(session)?;
        if let Some(switch) = switch {
            kernel(&mut self.timing, session, |s| s.execute(switch))?;
        }
        Ok(())
    }

    /// The evaluation's edit on the program just built fresh in `session` (`commands`): every
    /// extrusion depth 10% longer, recomputed. A program whose sketches hold only at the
    /// current depths (a length between two corners the edit moves apart) scores nothing
    /// under edit10 however good its shape; the model is told in the next Stage 1
    /// ([`Engine::edit_failure`]), where a revision can loosen the ties, and a Stage 3
    /// `finish` waits for that. The session is then built fresh again: the next step is
    /// shown the program as it is.
    pub(crate) fn check_edit(
        &mut self,
        session: &mut Session,
        commands: &[Command],
        step: usize,
    ) -> Result<(), LoopError> {
        // Only pads' and pockets' lengths change: without one the edit is the program itself.
        let depths = commands.iter().any(|c| {
            matches!(c, Command::Extrude(e) if !matches!(e.extent, freecad_bridge::command::Extent::ThroughAll { .. }))
        });
        if !depths {
            self.edit_failure = None;
            return Ok(());
        }
        let edited =
            kernel(&mut self.timing, session, |s| s.scale_extrusions(EDIT_FACTOR).map(|m| m.valid && !m.empty));
        self.edit_failure = match edited {
            Ok(true) => None,
            Ok(false) => Some("the edited model is not a valid solid".into()),
            Err(error @ (BridgeError::Command { .. } | BridgeError::Parameters { .. })) => Some(error.to_string()),
            Err(other) => return Err(other.into()),
        };
        if let Some(reason) = &self.edit_failure {
            tracing::info!("step {step}: the program does not rebuild with every depth x{EDIT_FACTOR}: {reason}");
            self.finish = None;
        }
        match self.replay_fresh(session, commands)? {
            Ok(()) => Ok(()),
            Err(failed) => Err(failed.error.into()),
        }
    }

    /// `commands` executed in a worker that has served nothing yet: the document, entity
    /// numbers included, that the program gives in any process (`exec`, a resumed run, the
    /// fit at END). A worker that built other shapes first can split faces differently where
    /// two solids meet on a plane (its booleans order their maps by memory address): a step
    /// built on top of the previewed document once named a plane F9 that a replay of the
    /// saved program numbers as a cylinder, and the program no longer built. So the model is
    /// shown, and builds on, the replayed document. Outer error: the worker failed; inner:
    /// the command the kernel refused.
    pub(crate) fn replay_fresh(
        &mut self,
        session: &mut Session,
        commands: &[Command],
    ) -> Result<Result<(), StepError>, LoopError> {
        kernel(&mut self.timing, session, |s| s.fresh_start())?;
        for (index, c) in commands.iter().enumerate() {
            match kernel(&mut self.timing, session, |s| s.execute(c)) {
                Ok(_) => {}
                Err(error @ (BridgeError::Command { .. } | BridgeError::Parameters { .. })) => {
                    return Ok(Err(StepError { index, op: c.op().into(), error }));
                }
                Err(other) => return Err(other.into()),
            }
        }
        Ok(Ok(()))
    }
}

/// Why a step that previewed well did not build when its program was replayed from the start
/// ([`Engine::replay_fresh`]); `accepted` commands came before the step.
pub(crate) fn replay_failure(failed: &StepError, accepted: usize) -> String {
    let which = if failed.index >= accepted {
        format!("its command {} ({})", failed.index - accepted + 1, failed.op)
    } else {
        format!("the accepted command [{}] ({})", failed.index + 1, failed.op)
    };
    format!(
        "it previewed, but the program with it does not build again from the start ({which}: {}); the kernel \
         decides such a case by a hair, so change the feature a little (a size, or where it meets the model)",
        failed.error
    )
}
