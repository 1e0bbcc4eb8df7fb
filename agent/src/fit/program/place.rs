//! At END, each profile's sides put where the target draws them, to a tenth of a pixel
//! ([`crate::fit::place`]).

use freecad_bridge::command::Command;
use freecad_bridge::{Program, Session};

use super::walls::{extruded_sketch, settle, solved_extrusion, with_sketch};
use super::{Build, ProgramFit, Round, View, profile_indices};
use crate::fit::place::{self, LineCopy, Placed, Placement};
use crate::fit::{FitReport, shift};

/// Measure the sides of feature `k` (an extrusion of sketch `j`) in `current` as `built`
/// against the target, and move those it draws off ([`place`]): the report, and the new build
/// when the move is kept. `None`: no side of it shows.
pub(super) fn fit_places(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    (j, k): (usize, usize),
    view: &View<'_>,
) -> Round {
    let Some((sketch, frame)) = extruded_sketch(current, built, (j, k)) else { return Ok(None) };
    let Some(Placement { sides, depth }) = measure(built, (j, k), view) else { return Ok(None) };
    if sides.is_empty() {
        return Ok(None);
    }
    let before = built.picture.agreement;
    let mut report = FitReport { placed: sides.clone(), placed_depth: depth, ..FitReport::unmoved(before, [0.0, 0.0]) };
    let moving: Vec<&Placed> = sides.iter().filter(|s| s.worth_moving()).collect();
    let deepen = depth.filter(|d| d.worth_moving());
    if moving.is_empty() && deepen.is_none() {
        report.dropped = Some(format!(
            "no side, and not the depth, is off by {} px that at least {} profiles agree on",
            place::MIN_OFF_PX,
            place::MIN_SIDE_PROFILES
        ));
        return Ok(Some((report, None)));
    }
    let moves: Vec<(usize, [f64; 2])> = moving.iter().flat_map(|s| s.moves(sketch)).collect();
    let Some(fitted) = shift::shifted(sketch, &moves) else {
        report.dropped = Some("a side to move meets a curve that cannot follow it".into());
        return Ok(Some((report, None)));
    };
    // The depth's change goes into the program the sketch is rebuilt in.
    let mut deepened = current.clone();
    if let (Some(d), Command::Extrude(e)) = (deepen, &mut deepened.commands[k]) {
        e.extent = place::grown(&e.extent, d.change);
    }
    let Some(after) = with_sketch(session, done, (&deepened, built), (j, fitted, &frame), view, &mut report)? else {
        return Ok(Some((report, None)));
    };
    // How far the moved sides, and the depth, are from the target's lines (pixels, summed);
    // `None` when one of them is no longer measured. The rebuilt ones must be nearer.
    let off = |placement: &Placement| -> Option<f64> {
        let sides: Option<f64> = moving
            .iter()
            .map(|moved| placement.sides.iter().find(|s| s.lines == moved.lines).map(|s| s.off_px.abs()))
            .sum();
        let depth = match deepen {
            Some(_) => placement.depth.map(|d| d.px.abs())?,
            None => 0.0,
        };
        Some(sides? + depth)
    };
    let was: f64 = moving.iter().map(|s| s.off_px.abs()).sum::<f64>() + deepen.map_or(0.0, |d| d.px.abs());
    report.dropped = match measure(&after, (j, k), view).as_ref().and_then(off) {
        None => Some("rebuilt, a moved side or the depth is no longer measured".into()),
        Some(now) if now >= was => Some(format!(
            "rebuilt, the moved sides and depth lie {now:.2} px from the target's lines against {was:.2} px before"
        )),
        Some(_) => None,
    };
    settle(report, current, (j, k), after)
}

/// The sides of feature `k` (on sketch `j`) as `build` has them, measured against the target
/// with what every feature's lines share taken out; `None` when the whole picture's lines do
/// not fix what they share.
fn measure(build: &Build, (j, k): (usize, usize), view: &View<'_>) -> Option<Placement> {
    let p = &build.picture;
    let align = p.alignment();
    let commands = &build.solved.commands;
    let drawn = place::Drawn::of(&p.edge_lines, &p.camera);
    let copies: Vec<LineCopy> = (0..commands.len())
        .flat_map(|f| {
            let s = profile_indices(&commands[..f], &commands[f]).first().copied()?;
            let (extrusion, frame) = (solved_extrusion(build, (s, f))?, build.frames[s]?);
            Some(place::copies(f, extrusion.0, extrusion.1, &frame, &p.camera, (&p.ids, &drawn), align, view.target))
        })
        .flatten()
        .collect();
    let shared = place::shared(&copies, align.centre)?;
    let (sketch, _) = solved_extrusion(build, (j, k))?;
    Some(place::placed(k, sketch, &copies, shared))
}
