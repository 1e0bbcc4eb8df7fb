//! At END, a profile's line moved onto a line of the target that no edge of the model is on
//! ([`crate::fit::missed`]).

use freecad_bridge::{Program, Session};

use super::walls::{extruded_sketch, settle, solved_extrusion, with_sketch};
use super::{Build, ProgramFit, Round, View, fit_feature};
use crate::fit::FitReport;
use crate::fit::missed::{self, EdgeDistance};

/// Passes over the features: a bar pinched at both ends has two sides to put back.
pub(super) const PASSES: usize = 2;
/// The lines with most profiles showing a missed line beside them are tried, at most this
/// many per feature and pass (each try is a rebuild).
const MAX_TRIES: usize = 3;
/// After a line is moved, its feature is fitted again this many rounds at most.
const REFITS: usize = 2;
/// A move is kept when it leaves at least this share of the missed line's profiles' worth of
/// the target's line pixels with an edge on them ...
const MIN_FOUND_SHARE: f64 = 0.5;
/// ... and the model's edges lie no farther from the target's lines than this (pixels, the
/// mean over the picture) beyond where they lay: the line left a line of the target that
/// another edge is on.
const COST_SLACK_PX: f64 = 0.01;

/// Look beside each line of feature `k`'s profile (an extrusion of sketch `j`) in `current`
/// as `built` for a line of the target that no edge is on, and move the line there where the
/// rebuilt model leaves fewer of the target's lines with no edge on them: the report, and the
/// new build when a move is kept. `None`: no line of it has a missed line beside it.
pub(super) fn fit_missed(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    (j, k): (usize, usize),
    view: &View<'_>,
) -> Round {
    let Some((sketch, frame)) = extruded_sketch(current, built, (j, k)) else { return Ok(None) };
    let Some((solved, extrude)) = solved_extrusion(built, (j, k)) else { return Ok(None) };
    let p = &built.picture;
    let align = p.alignment();
    let edges = EdgeDistance::of(&p.ids);
    let found = missed::beside(solved, extrude, &frame, &p.camera, &p.ids, &edges, align, view.target);
    if found.is_empty() {
        return Ok(None);
    }
    let before = p.agreement;
    let was = missed::missed_pixels(&edges, align, view.target);
    let mut report = FitReport { missed: found.clone(), ..FitReport::unmoved(before, [0.0, 0.0]) };
    let mut best: Option<(usize, Build)> = None;
    let mut why = Vec::new();
    for line in found.iter().take(MAX_TRIES) {
        let Some(fitted) = missed::onto(sketch, line.line, line.shift) else {
            why.push(format!("line {}: it meets a curve", line.line));
            continue;
        };
        let Some(mut after) = with_sketch(session, done, (current, built), (j, fitted, &frame), view, &mut report)?
        else {
            why.push(format!("line {}: {}", line.line, report.dropped.take().unwrap_or_default()));
            continue;
        };
        // The line's neighbours kept their directions to meet it where it now lies, and a
        // sliver's are the reader's noise (a collapsed leg's foot, steep, ran on far below the
        // part): the feature is fitted again as the search fits it, from there.
        for _ in 0..REFITS {
            let program = after.solved.clone();
            match fit_feature(session, done, (&program, &after), (j, k), view)? {
                Some((refit, Some(refitted))) => {
                    report.evaluations += refit.evaluations;
                    after = refitted;
                }
                Some((refit, None)) => {
                    report.evaluations += refit.evaluations;
                    break;
                }
                None => break,
            }
        }
        let q = &after.picture;
        let now = q.bare_pixels(view.target);
        let needed = was.saturating_sub((MIN_FOUND_SHARE * line.support as f64).ceil() as usize);
        let (cost_was, cost_now) = (before.cost(), q.agreement.cost());
        if now > needed {
            why.push(format!("line {}: the target's line pixels with no edge near {was} -> {now}", line.line));
        } else if cost_now > cost_was + COST_SLACK_PX {
            why.push(format!(
                "line {}: the edges lie {cost_now:.3} px from the target's lines for {cost_was:.3} (the target's line \
                 pixels with no edge near {was} -> {now})",
                line.line
            ));
        } else if best.as_ref().is_none_or(|b| now < b.0) {
            best = Some((now, after));
        }
    }
    let Some((_, after)) = best else {
        report.dropped = Some(why.join("; "));
        return Ok(Some((report, None)));
    };
    settle(report, current, (j, k), after)
}
