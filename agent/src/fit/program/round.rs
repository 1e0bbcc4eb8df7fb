//! At END, the round sides' radii measured across their outlines ([`crate::fit::round_side`]).

use freecad_bridge::command::Primitive;
use freecad_bridge::{Program, Session};

use super::walls::{extruded_sketch, solved_extrusion, with_sketch};
use super::{Build, ProgramFit, Round, View, settle};
use crate::fit::FitReport;
use crate::fit::round_side::{self, Measured};

/// Measure the round sides that feature `k` (on sketch `j`) of `current` as `built` adds, and
/// give each circle measured off by more than two renderers differ its measured radius. The
/// rebuilt model is kept where the moved circles' outlines lie nearer the target's than
/// before. `None`: no round side of it shows against the paper.
pub(super) fn fit_round_sides(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    (j, k): (usize, usize),
    view: &View<'_>,
) -> Round {
    let Some((sketch, frame)) = extruded_sketch(current, built, (j, k)) else { return Ok(None) };
    let measure = |build: &Build| -> Vec<Measured> {
        let p = &build.picture;
        solved_extrusion(build, (j, k)).map_or(Vec::new(), |(s, e)| {
            round_side::measure(s, e, &frame, &p.camera, &p.ids, p.alignment(), view.target)
        })
    };
    let measured = measure(built);
    if measured.is_empty() {
        return Ok(None);
    }
    let before = built.picture.agreement;
    let mut report = FitReport { round_sides: measured.clone(), ..FitReport::unmoved(before, [0.0, 0.0]) };
    let moving: Vec<&Measured> = measured.iter().filter(|m| m.worth_moving()).collect();
    if moving.is_empty() {
        report.dropped = Some(measured.iter().map(Measured::why_not).collect::<Vec<_>>().join("; "));
        return Ok(Some((report, None)));
    }
    let mut fitted = sketch.clone();
    for m in &moving {
        if let Some(Primitive::Circle { radius, .. }) = fitted.primitives.get_mut(m.primitive) {
            *radius = m.radius;
        }
    }
    let Some(after) = with_sketch(session, done, (current, built), (j, fitted, &frame), view, &mut report)? else {
        return Ok(Some((report, None)));
    };
    // How far the moved circles' outlines are from the target's (pixels, summed); `None`
    // when one of them is no longer measured. The solver keeps the drawing's constraints,
    // which may hold a radius where it was.
    let off = |found: &[Measured]| -> Option<f64> {
        moving
            .iter()
            .map(|moved| {
                found.iter().find(|m| m.primitive == moved.primitive).map(|m| (m.target_px - m.model_px).abs())
            })
            .sum()
    };
    let (was, now) = (off(&measured).unwrap_or(0.0), off(&measure(&after)));
    report.dropped = match now {
        None => Some("rebuilt, a moved circle's outline is no longer measured".into()),
        Some(now) if now >= was => Some(format!(
            "rebuilt, the moved circles' outlines differ from the target's by {now:.2} px against {was:.2} px before"
        )),
        Some(_) => None,
    };
    settle(report, current, (j, k), after)
}
