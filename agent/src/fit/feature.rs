//! The fit of one new feature after Stage 2 (the step's fit, `--fit-steps`; a revolve's
//! profile made regular at its step): propose on the picture model, rebuild once, keep
//! what agrees better ([`fit_feature`]).

use std::time::Instant;

use freecad_bridge::command::Sketch;
use freecad_bridge::{BridgeError, Command, Preview, Session};
use views::{Options, Scene};

use super::{
    FitReport, TargetPixels, agreement, describe_changes, dimensions, feature_of, in_turn, moved_edges,
    not_worth_building, regular, sketch, worth_building,
};

/// The fitted sketches, command and preview, with the report; or the report alone when the
/// fit was dropped (the candidate is then as drawn, rebuilt if it had to be). `None`: the
/// command has nothing this fit moves.
pub type Fitted = Option<(Option<(Vec<Sketch>, Command, Preview)>, FitReport)>;

/// Builds a candidate from its sketches and command (the document as it was before the
/// attempt, then the sketches, then a preview); `None` when the kernel refuses it.
pub type Rebuild<'a, E> = dyn FnMut(&mut Session, &[Sketch], &Command) -> Result<Option<Preview>, E> + 'a;

/// A candidate as the step built it: `command` on one of `sketches`, as executed, previewed
/// as `preview`.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub sketches: &'a [Sketch],
    pub command: &'a Command,
    pub preview: &'a Preview,
}

/// Fit a new extrusion (the `candidate`'s command) to the target. `opts` frames the views
/// on S_t. `rebuild` builds another drawing of it.
/// With [`sketch::Moves::Regular`] the drawing is only made regular where it is near it
/// (the step's fit when `--fit-steps` is off): taken when neither the picture model nor the
/// rebuilt candidate agrees worse by more than [`regular::SLACK_PX`].
pub fn fit_feature<E: From<BridgeError>>(
    session: &mut Session,
    candidate: Candidate<'_>,
    target: &TargetPixels,
    opts: &Options,
    moves: sketch::Moves,
    rebuild: &mut Rebuild<'_, E>,
) -> Result<Fitted, E> {
    let Candidate { sketches, command, preview } = candidate;
    let Some((index, feature)) = feature_of(sketches, command) else { return Ok(None) };
    let started = Instant::now();
    let scene = Scene::new(&preview.after, &preview.state);
    let ids = views::outline(&scene, opts);
    let before = agreement(&ids, target);
    let camera = views::outline_camera(&scene, opts);
    let frame = session.plane_frame(&sketches[index].on)?;
    let Some(proposal) = sketch::propose(
        &sketches[index],
        &feature,
        dimensions::Existing { state: session.state(), frame: &frame },
        &camera,
        sketch::Render { ids: &ids, edges: &scene.edges },
        before.alignment(ids.width),
        target,
        moves,
    ) else {
        return Ok(None);
    };
    let regular_only = moves == sketch::Moves::Regular;
    let worth = |p: &sketch::Proposal| {
        if regular_only {
            p.after_px <= p.before_px + regular::SLACK_PX
        } else {
            worth_building(p.before_px, p.after_px)
        }
    };
    let mut report = FitReport::unmoved(before, [proposal.before_px, proposal.after_px]);
    let done = |mut report: FitReport, fitted| {
        report.seconds = started.elapsed().as_secs_f64();
        Ok(Some((fitted, report)))
    };
    // The regular drawing first, then the free fit's where it is not taken.
    let mut dropped = Vec::new();
    for proposal in proposal.tries() {
        dropped.extend(report.dropped.take());
        report.model_px = [proposal.before_px, proposal.after_px];
        report.regular = proposal.regular;
        report.moved = None;
        if !worth(&proposal) {
            report.dropped = Some(if regular_only {
                format!(
                    "the drawing made regular agrees worse by more than {} px ({:.2} -> {:.2} px on the picture model)",
                    regular::SLACK_PX,
                    proposal.before_px,
                    proposal.after_px
                )
            } else {
                not_worth_building(proposal.before_px, proposal.after_px)
            });
            continue;
        }
        let mut fitted_sketches = sketches.to_vec();
        fitted_sketches[index] = proposal.sketch.clone();
        let fitted_command = match &proposal.feature {
            sketch::Feature::Extrude(e) => Command::Extrude(e.clone()),
            sketch::Feature::Revolve { .. } | sketch::Feature::Section { .. } | sketch::Feature::Sweep { .. } => {
                command.clone()
            }
        };
        report.evaluations += 1;
        let Some(fitted_preview) = rebuild(session, &fitted_sketches, &fitted_command)? else {
            report.dropped = Some("the kernel refused the fitted drawing".into());
            continue;
        };
        let fitted_ids = views::outline(&Scene::new(&fitted_preview.after, &fitted_preview.state), opts);
        let after = agreement(&fitted_ids, target);
        let size = ids.width;
        let moved = moved_edges((&ids, before.alignment(size)), (&fitted_ids, after.alignment(size)), target);
        report.moved = Some(moved);
        let kept = if regular_only {
            after.cost() <= before.cost() + regular::SLACK_PX
        } else {
            moved.agrees_better(&before, &after)
        };
        if kept {
            report.after = after;
            report.dropped = None;
            describe_changes(&mut report, &sketches[index], &proposal.sketch, command, &fitted_command);
            return done(report, Some((fitted_sketches, fitted_command, fitted_preview)));
        }
        report.dropped = Some(format!(
            "in the rebuilt candidate the moved edges lie {:.2} px from the target's lines against {:.2} px as drawn \
             ({} pixels changed; the whole picture {:.2} against {:.2} px)",
            moved.after_px, moved.before_px, moved.pixels, after.edge_px, before.edge_px
        ));
    }
    report.dropped = report.dropped.take().map(|last| in_turn(dropped, last));
    if report.evaluations == 0 {
        // Nothing was built: the document holds the candidate as drawn.
        return done(report, None);
    }
    // Back to the candidate as drawn.
    report.evaluations += 1;
    if rebuild(session, sketches, command)?.is_none() {
        return Err(BridgeError::Command {
            op: "fit".into(),
            entity: None,
            reason: "the candidate as drawn no longer builds after the fit's attempt".into(),
            kind: freecad_bridge::RefusalKind::Other,
        }
        .into());
    }
    done(report, None)
}
