//! At END, numbers searched on the rebuilt model itself: each extrusion's depth, and each
//! fillet's radius and chamfer's size ([`crate::fit::edge_size`]).
//!
//! The picture model ([`crate::fit::sketch`]) draws a feature as its own sketch extruded;
//! where a later cut takes most of it away, what the target shows of its far end is what the
//! cut leaves, and the picture model's far outline is not there to be measured. A tube read
//! 6% deep whose far end a cut reduces to two tabs (test100 00932166) kept its depth through
//! every other fit, and the whole part's bounding box with it: 0.147 mIoU, 0.944 at the
//! depth the tabs' tips show. So each depth is also searched as the fillets' sizes are: the
//! whole program rebuilt with the number changed, its picture scored against the whole target
//! under the drawn model's alignment, the best kept by the rule every rebuilt fit is kept by
//! ([`crate::fit::Moved::agrees_better`]).

use freecad_bridge::command::Extent;
use freecad_bridge::{Command, Program, Session};
use nalgebra::Point3;

use super::walls::extruded_sketch;
use super::{Build, ProgramFit, Round, View};
use crate::fit::missed::{self, EdgeDistance};
use crate::fit::{FitReport, edge_distance_at, edge_size, moved_edges, sketch, worth_building};

/// A depth moves up to this many pixels' worth on the picture ...
pub const DEPTH_REACH_PX: f64 = 14.0;
/// ... and within this share of itself (the picture model's reach, [`sketch::DEPTH_REACH`]).
const DEPTH_REACH_SHARE: f64 = sketch::DEPTH_REACH;
/// A depth shorter than this on the picture is measured across its sides
/// ([`crate::fit::thickness`]), not searched.
const MIN_DEPTH_PX: f64 = 3.0;
/// How a number's tries are scored and the best kept.
#[derive(Clone, Copy)]
enum Judged {
    /// Under the drawn model's alignment, the best kept by the moved edges' rule
    /// ([`crate::fit::Moved::agrees_better`]); three golden-section steps after the scan: a
    /// fillet's or chamfer's edges are short, and they found the drawn sizes.
    OnDrawnAlignment,
    /// Each try lined up anew ([`crate::fit::Agreement::cost`]), the best kept where the whole
    /// picture agrees better by the rule a step's proposal is built by
    /// ([`crate::fit::worth_building`]). A depth changes the part's length on the picture,
    /// and the alignment's scale and shift follow: held at the drawn model's, the tube's
    /// shorter depth only moved its front ring from 5 px off one way to 5 px off the other.
    /// Its moved edges cannot tell either (every edge moves with the alignment), and on
    /// test100 that rule kept depths that made up for other numbers' errors: a pocket read
    /// right taken 21% shallow (00528846 0.932 -> 0.923). Five golden-section steps, closing
    /// the 14 px bracket to about 0.6 px, and only where the scan found a gain worth
    /// refining ([`REFINE_GAIN_PX`]).
    Realigned,
}

/// A realigned scan's best must lie this much under the drawn number's cost (pixels) to be
/// refined: a whole picture that gains less by a depth 7 or 14 px' worth off never gains the
/// [`crate::fit::MIN_GAIN`] it is kept by; most extrusions stop after the four tries.
const REFINE_GAIN_PX: f64 = 0.15;

/// Search the depth of feature `k` (an extrusion of sketch `j`) on rebuilt models: the
/// report, and the new build when a depth is kept. `None`: it has no depth to search (through
/// all, or too short on the picture).
pub(super) fn fit_depth(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    (j, k): (usize, usize),
    view: &View<'_>,
) -> Round {
    let Some((_, frame)) = extruded_sketch(current, built, (j, k)) else { return Ok(None) };
    let Command::Extrude(extrude) = &current.commands[k] else { return Ok(None) };
    let depth = match extrude.extent {
        Extent::OneSide { depth } | Extent::Symmetric { depth } => depth,
        Extent::TwoSides { depth, depth2 } => depth + depth2,
        Extent::ThroughAll { .. } => return Ok(None),
    };
    // How long the depth is on the picture, at the sketch's origin.
    let camera = &built.picture.camera;
    let (o, n) = (frame.to_global(0.0, 0.0), frame.normal);
    let at = |t: f64| camera.project(&Point3::new(o[0] + t * n[0], o[1] + t * n[1], o[2] + t * n[2]));
    let Some(((ax, ay, _), (bx, by, _))) = at(0.0).zip(at(depth)) else { return Ok(None) };
    let depth_px = (bx - ax).hypot(by - ay);
    if depth_px < MIN_DEPTH_PX {
        return Ok(None);
    }
    let reach = (DEPTH_REACH_PX / depth_px).min(DEPTH_REACH_SHARE);
    let what = "extent.depth";
    search(session, done, (current, built), k, view, (what, 1.0, (1.0 - reach, 1.0 + reach)), Judged::Realigned, |f| {
        let mut command = current.commands[k].clone();
        if let Command::Extrude(e) = &mut command {
            sketch::scale_depth(&mut e.extent, f);
        }
        command
    })
}

/// Search the size of fillet or chamfer `k` on rebuilt models ([`edge_size`]). `None`: `k` is
/// neither.
pub(super) fn fit_edge_size(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    k: usize,
    view: &View<'_>,
) -> Round {
    let Some((what, size)) = edge_size::size_of(&current.commands[k]) else { return Ok(None) };
    let bounds = edge_size::bounds(size, sketch::pixels_per_unit(&built.picture.camera));
    search(session, done, (current, built), k, view, (what, size, bounds), Judged::OnDrawnAlignment, |s| {
        edge_size::with_size(&current.commands[k], s)
    })
}

/// Search one number of command `k` (`what`, from `start` within `bounds`) on rebuilt models,
/// `with` giving the command at each value: the report (the change in the command's own
/// terms, through `describe`), and the new build when the best is kept.
#[allow(clippy::too_many_arguments)]
fn search(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    k: usize,
    view: &View<'_>,
    (what, start, bounds): (&str, f64, (f64, f64)),
    judged: Judged,
    with: impl Fn(f64) -> Command,
) -> Round {
    let before = built.picture.agreement;
    let mut failed = None;
    // Every value scored under the drawn model's alignment: the whole picture's best
    // alignment moves by a pixel with the number, and chasing it took a shaft's chamfer
    // from 1.66 to 0.58 (the target's is 1.54).
    let align = built.picture.alignment();
    let score = |p: &super::Picture| match judged {
        Judged::OnDrawnAlignment => edge_distance_at(&p.ids, align, view.target),
        Judged::Realigned => p.agreement.cost(),
    };
    let refine = match judged {
        Judged::OnDrawnAlignment => (3, f64::NEG_INFINITY),
        Judged::Realigned => (5, REFINE_GAIN_PX),
    };
    let start_cost = score(&built.picture);
    let (best, (_, after), tried) = edge_size::minimise(start, (start_cost, None), bounds, refine, |s| {
        let mut candidate = current.clone();
        candidate.commands[k] = with(s);
        match done.build(session, &candidate, Some(built), view) {
            Ok(Ok(after)) => Some((score(&after.picture), Some(after))),
            Ok(Err(_)) => None,
            Err(e) => {
                failed.get_or_insert(e);
                None
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let mut report = FitReport { evaluations: tried, ..FitReport::unmoved(before, [0.0, 0.0]) };
    let Some(after) = after else {
        report.dropped = Some(format!("no {what} in reach agrees better with the target"));
        return Ok(Some((report, None)));
    };
    let p = &after.picture;
    let moved = moved_edges((&built.picture.ids, align), (&p.ids, p.alignment()), view.target);
    report.moved = Some(moved);
    let kept = match judged {
        Judged::OnDrawnAlignment => moved.agrees_better(&before, &p.agreement),
        // The tube above: 1.79 -> 1.14 px, its moved edges 0.51 -> 0.50 px. The cost is the
        // model's edges to the target's lines, so a depth that takes edges away lowers it
        // too: the target's lines left with no edge on them must not grow (the oracle's
        // exact rounded triangle, its cut made shallow, 0.66 -> 0.49 px and mIoU 1.00 -> 0).
        Judged::Realigned => {
            let bare =
                |q: &super::Picture| missed::missed_pixels(&EdgeDistance::of(&q.ids), q.alignment(), view.target);
            worth_building(before.cost(), p.agreement.cost()) && bare(p) <= bare(&built.picture)
        }
    };
    if !kept {
        let tried = describe(what, &with(best), best);
        report.dropped = Some(match judged {
            Judged::OnDrawnAlignment => format!(
                "{tried}: in the rebuilt model the moved edges lie {:.2} px from the target's lines against {:.2} px \
                 before ({} pixels changed), and all its edges {:.3} px against {:.3} px",
                moved.after_px,
                moved.before_px,
                moved.pixels,
                p.agreement.cost(),
                before.cost()
            ),
            Judged::Realigned => format!(
                "{tried}: the rebuilt model, lined up anew, has its edges {:.3} px from the target's lines against \
                 {:.3} px before; kept for a gain of {} px leaving at most {} of the cost",
                p.agreement.cost(),
                before.cost(),
                crate::fit::MIN_GAIN,
                crate::fit::MAX_LEFT
            ),
        });
        return Ok(Some((report, None)));
    }
    report.after = p.agreement;
    report.changes = changes(what, (&current.commands[k], start), (&after.solved.commands[k], best));
    Ok(Some((report, Some(after))))
}

/// The numbers of command `k` as a report names them: each depth of an extrusion (in model
/// units: the factor searched is not what a reader reads), or the size of a fillet or
/// chamfer.
fn numbers(what: &str, command: &Command, size: f64) -> Vec<(String, f64)> {
    match command {
        Command::Extrude(e) => {
            crate::fit::depths(&e.extent).into_iter().map(|(n, x)| (format!("extent.{n}"), x)).collect()
        }
        _ => vec![(what.to_string(), size)],
    }
}

/// The numbers tried, for a report: `extent.depth 62.5`.
fn describe(what: &str, command: &Command, size: f64) -> String {
    numbers(what, command, size).iter().map(|(n, x)| format!("{n} {x:.3}")).collect::<Vec<_>>().join(", ")
}

/// What moved from `from` (at `start`) to `to` (at `best`).
fn changes(what: &str, (from, start): (&Command, f64), (to, best): (&Command, f64)) -> Vec<crate::fit::Change> {
    numbers(what, from, start)
        .into_iter()
        .zip(numbers(what, to, best))
        .filter(|((_, x), (_, y))| x != y)
        .map(|((what, from), (_, to))| crate::fit::Change { what, from, to })
        .collect()
}
