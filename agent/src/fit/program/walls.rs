//! At END, the thin walls beside the profiles' inner lines, measured across them
//! ([`crate::fit::wall`]).

use freecad_bridge::command::{Extrude, Sketch};
use freecad_bridge::state::Frame;
use freecad_bridge::{BridgeError, Command, Program, Session};

use super::{Build, ProgramFit, Round, View};
use crate::fit::dimensions::{Existing, follow_geometry};
use crate::fit::{FitReport, describe_changes, shift, thickness, wall};
use freecad_bridge::state::Point3;

/// A line meeting a curve (a fillet) moves for a wall this much wider or narrower (pixels).
const BESIDE_CURVE_PX: f64 = 0.5;

/// Measure the walls beside the inner lines of feature `k` (an extrusion of sketch `j`) in
/// `current` as `built`, and move those the target draws wider or narrower ([`wall`]): the
/// report, and the new build when the move is kept. `None`: no wall of it shows.
pub(super) fn fit_walls(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    (j, k): (usize, usize),
    inner: &[[Point3; 2]],
    view: &View<'_>,
) -> Round {
    let Some((sketch, frame)) = extruded_sketch(current, built, (j, k)) else { return Ok(None) };
    let measure = |build: &Build| -> Vec<wall::Measured> {
        let p = &build.picture;
        solved_extrusion(build, (j, k)).map_or(Vec::new(), |(s, e)| {
            wall::measure(s, e, &frame, &p.edges, inner, &p.camera, &p.ids, p.alignment(), view.target)
        })
    };
    let walls = measure(built);
    if walls.is_empty() {
        return Ok(None);
    }
    let before = built.picture.agreement;
    let mut report = FitReport { walls: walls.clone(), ..FitReport::unmoved(before, [0.0, 0.0]) };
    // A wall's line is moved along its fillets only for a change beyond what a fillet's line
    // beside the measurement biases: the oracle's exact triangular frame on test100 measured
    // its wall 0.35 px narrow beside one, and moving it cost 0.009. The lines measured with
    // it as one wall stay with it.
    let along_curve = |m: &wall::Measured| {
        (m.target_px - m.model_px).abs() < BESIDE_CURVE_PX
            && std::iter::once(m.line).chain(m.with.iter().copied()).any(|k| shift::meets_curve(sketch, &[k]))
    };
    let measured_moving = walls.iter().filter(|m| m.worth_moving()).count();
    let moving: Vec<&wall::Measured> = walls.iter().filter(|m| m.worth_moving() && !along_curve(m)).collect();
    let moves: Vec<(usize, [f64; 2])> = moving.iter().map(|m| (m.line, m.shift)).collect();
    if moves.is_empty() && measured_moving > 0 {
        report.dropped =
            Some(format!("a line to move meets a curve and its wall differs by under {BESIDE_CURVE_PX} px"));
        return Ok(Some((report, None)));
    }
    if moves.is_empty() {
        report.dropped = Some(format!(
            "no wall's width differs by {} px and {:.1}% that at least {} profiles agree on",
            thickness::MIN_CHANGE_PX,
            100.0 * thickness::MIN_CHANGE_SHARE,
            thickness::MIN_PROFILES
        ));
        return Ok(Some((report, None)));
    }
    let Some(fitted) = shift::shifted(sketch, &moves) else {
        report.dropped = Some("the lines to move do not meet their neighbours".into());
        return Ok(Some((report, None)));
    };
    let Some(after) = with_sketch(session, done, (current, built), (j, fitted, &frame), view, &mut report)? else {
        return Ok(Some((report, None)));
    };
    // How far the moved lines' walls are from the target's (pixels, summed); `None` when one
    // of them is no longer measured. The rebuilt walls must be closer (the solver keeps the
    // drawing's constraints, which may hold a line where it was).
    let off = |walls: &[wall::Measured]| -> Option<f64> {
        moving
            .iter()
            .map(|moved| walls.iter().find(|m| m.line == moved.line).map(|m| (m.target_px - m.model_px).abs()))
            .sum()
    };
    let (was, now) = (off(&walls).unwrap_or(0.0), off(&measure(&after)));
    // A wall that grows or shrinks by more than a pixel or two must also leave the whole
    // picture agreeing as well (the first line inward was the wall's); under that, the
    // picture's whole-pixel alignment cannot tell, and the measurement decides.
    let large = moving.iter().any(|m| (m.target_px - m.model_px).abs() > wall::CHECKED_PX);
    let (cost_was, cost_now) = (before.cost(), after.picture.agreement.cost());
    report.dropped = match now {
        None => Some("rebuilt, a moved wall is no longer measured".into()),
        Some(_) if large && cost_now > cost_was => Some(format!(
            "rebuilt, the whole picture agrees less with the target (cost {cost_was:.3} -> {cost_now:.3})"
        )),
        Some(now) if now >= was => {
            Some(format!("rebuilt, the moved walls differ from the target's by {now:.2} px against {was:.2} px before"))
        }
        Some(_) => None,
    };
    settle(report, current, (j, k), after)
}

/// A measured fit of feature `k` (on sketch `j`) of `current`, rebuilt as `after`: dropped
/// where the report says why, else kept, with the rebuilt agreement and what moved.
pub(super) fn settle(mut report: FitReport, current: &Program, (j, k): (usize, usize), after: Build) -> Round {
    if report.dropped.is_some() {
        return Ok(Some((report, None)));
    }
    report.after = after.picture.agreement;
    if let (Command::Sketch(sketch), Command::Sketch(solved)) = (&current.commands[j], &after.solved.commands[j]) {
        describe_changes(&mut report, sketch, solved, &current.commands[k], &after.solved.commands[k]);
    }
    Ok(Some((report, Some(after))))
}

/// `current` as `built`, rebuilt with sketch `j` (on `frame`) drawn as `fitted`, its stated
/// dimensions following the measured geometry; `None`, the report saying why, where the
/// program no longer builds.
pub(super) fn with_sketch(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    (j, mut fitted, frame): (usize, Sketch, &Frame),
    view: &View<'_>,
    report: &mut FitReport,
) -> Result<Option<Build>, BridgeError> {
    let existing = built.states[j].as_ref().map(|state| Existing { state, frame });
    follow_geometry(&mut fitted, existing);
    let mut candidate = current.clone();
    candidate.commands[j] = Command::Sketch(fitted);
    report.evaluations += 1;
    Ok(match done.build(session, &candidate, Some(built), view)? {
        Ok(after) => Some(after),
        Err(e) => {
            report.dropped = Some(format!("the program no longer builds with it: {}", e.error));
            None
        }
    })
}

/// Sketch `j` of `current` and its frame in `built`, where command `k` is an extrusion of it:
/// what each measured fit at END moves.
pub(super) fn extruded_sketch<'a>(
    current: &'a Program,
    built: &Build,
    (j, k): (usize, usize),
) -> Option<(&'a Sketch, Frame)> {
    match (&current.commands[k], &current.commands[j], built.frames[j]) {
        (Command::Extrude(_), Command::Sketch(sketch), Some(frame)) => Some((sketch, frame)),
        _ => None,
    }
}

/// Feature `k`, an extrusion, and its sketch `j` as `build` solved them (measured again after
/// a move).
pub(super) fn solved_extrusion(build: &Build, (j, k): (usize, usize)) -> Option<(&Sketch, &Extrude)> {
    match (&build.solved.commands[j], &build.solved.commands[k]) {
        (Command::Sketch(s), Command::Extrude(e)) => Some((s, e)),
        _ => None,
    }
}
