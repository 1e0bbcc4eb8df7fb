//! A pipe (a sweep that adds material along a path sketch, of a round profile about the
//! path's start) at END: its path fitted to the target ([`fit_path`]), and how wide a bore
//! cut along that path may grow ([`bore_limit`]).

use freecad_bridge::command::{Mode, Primitive, Sketch, Sweep, SweepPath};
use freecad_bridge::state::Frame;
use freecad_bridge::{Command, Program, Session};

use super::{Build, ProgramFit, Round, View, latest_sketch};
use crate::fit::dimensions::Existing;
use crate::fit::{FitReport, describe_changes, path, sketch};

/// Fit the path of feature `k` when it is a pipe (a sweep that adds material along a path
/// sketch, of a round profile about the path's start) once ([`path::propose`]): the report,
/// and the new build when the fit is kept. The profiles of every sweep along that path drawn
/// about its start move with it, and the pipe's profile takes the fitted radius. `None`: no
/// pipe, or nothing of its outline shows.
pub(super) fn fit_path(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    k: usize,
    view: &View<'_>,
) -> Round {
    let Command::Sweep(sweep) = &current.commands[k] else { return Ok(None) };
    let (Mode::Add, SweepPath::Sketch(path_name)) = (&sweep.mode, &sweep.path) else { return Ok(None) };
    let before_k = &current.commands[..k];
    let (Some(p), Some(j)) = (latest_sketch(before_k, path_name), latest_sketch(before_k, &sweep.profile)) else {
        return Ok(None);
    };
    let (Command::Sketch(path), Command::Sketch(profile), Some(path_frame), Some(frame)) =
        (&current.commands[p], &current.commands[j], built.frames[p], built.frames[j])
    else {
        return Ok(None);
    };
    let Some(carry) = sweep_carry(before_k, &built.frames, sweep, profile, &frame) else { return Ok(None) };
    let picture = &built.picture;
    let reach = sketch::POINT_REACH_PX / sketch::pixels_per_unit(&picture.camera);
    let about_start = |centre: [f64; 2], frame: &Frame| near(frame.to_global(centre[0], centre[1]), carry.start, reach);
    let Some(radius) = section_radius(profile, &frame, carry.start, reach) else { return Ok(None) };
    let pipe = path::Pipe { path, frame: &path_frame, start: carry.start, radius, profile: &frame };
    let Some(fitted) = path::propose(&pipe, &picture.camera, &picture.ids, picture.alignment(), view.target) else {
        return Ok(None);
    };
    let mut report = FitReport::unmoved(picture.agreement, [fitted.before_px, fitted.after_px]);
    if !crate::fit::worth_building(fitted.before_px, fitted.after_px) {
        report.dropped =
            Some(format!("the pipe's path: {}", crate::fit::not_worth_building(fitted.before_px, fitted.after_px)));
        return Ok(Some((report, None)));
    }
    let mut candidate = current.clone();
    candidate.commands[p] = Command::Sketch(fitted.path.clone());
    // Every sweep's profile along the path about its start is put on it: the picture model
    // draws the tube about the path, and a profile read a little off the start sweeps a tube
    // as far off the path (a simulated reader's, 0.7 mm). The pipe's own section takes the
    // fitted radius.
    for m in p + 1..current.commands.len() {
        let Command::Sweep(along) = &current.commands[m] else { continue };
        if !matches!(&along.path, SweepPath::Sketch(name) if name == path_name) {
            continue;
        }
        let Some(q) = latest_sketch(&current.commands[..m], &along.profile) else { continue };
        let Some(q_frame) = built.frames[q] else { continue };
        let Command::Sketch(moved) = &mut candidate.commands[q] else { continue };
        // The new start in the profile's plane (the start moves only across it).
        let start = [0, 1].map(|a| {
            let axis = if a == 0 { q_frame.x_axis } else { q_frame.y_axis };
            (0..3).map(|i| axis[i] * (fitted.start[i] - q_frame.origin[i])).sum::<f64>()
        });
        for primitive in &mut moved.primitives {
            if let Primitive::Circle { center, radius: r, construction: false } = primitive
                && about_start(*center, &q_frame)
            {
                if m == k && *r == radius {
                    *r = fitted.radius;
                }
                *center = start;
            }
        }
        // Its stated dimensions follow (a radius the reader stated is the fitted one now).
        let existing = built.states[q].as_ref().map(|state| Existing { state, frame: &q_frame });
        crate::fit::dimensions::follow_geometry(moved, existing);
    }
    report.evaluations += 1;
    tracing::debug!("the fit at END: the pipe's path {}", serde_json::json!(fitted.path));
    let after = match done.build(session, &candidate, Some(built), view)? {
        Ok(after) => after,
        Err(e) => {
            report.dropped = Some(format!("the program no longer builds with the pipe's path fitted: {}", e.error));
            return Ok(Some((report, None)));
        }
    };
    let p_after = &after.picture;
    let moved =
        path::moved_outline((&picture.ids, picture.alignment()), (&p_after.ids, p_after.alignment()), view.target);
    report.moved = Some(moved);
    if !moved.agrees_better(&picture.agreement, &p_after.agreement) {
        report.dropped = Some(format!(
            "the pipe's path: in the rebuilt model the moved outline lies {:.2} px from the target's against {:.2} px \
             before ({} pixels changed), and all its edges {:.3} px against {:.3} px",
            moved.after_px,
            moved.before_px,
            moved.pixels,
            p_after.agreement.cost(),
            picture.agreement.cost()
        ));
        return Ok(Some((report, None)));
    }
    report.after = p_after.agreement;
    describe_changes(&mut report, path, &fitted.path, &current.commands[k], &candidate.commands[k]);
    if fitted.radius != radius {
        report.changes.push(crate::fit::Change {
            what: format!("{} radius", profile.name),
            from: radius,
            to: fitted.radius,
        });
    }
    Ok(Some((report, Some(after))))
}

/// A bore is kept this many pixels inside its pipe ([`fit_feature`]).
pub(super) const MIN_WALL_PX: f64 = 2.0;

/// How wide a bore cut along a pipe's path may be: the radius that leaves the pipe
/// [`MIN_WALL_PX`] of wall (`widest`), its circles being those within `reach` of the path's
/// `start`.
#[derive(Debug, Clone, Copy)]
pub(super) struct BoreLimit {
    pub widest: f64,
    pub start: [f64; 3],
    pub reach: f64,
}

/// The limit of `sweep` (after the commands `before`, built with `frames`, the path's start
/// at `start`) when it is a bore: a cut along the path of a pipe that adds material, seen
/// through `camera`.
pub(super) fn bore_limit(
    before: &[Command],
    frames: &[Option<Frame>],
    sweep: &Sweep,
    start: [f64; 3],
    camera: &views::Camera,
) -> Option<BoreLimit> {
    if sweep.mode != Mode::Cut {
        return None;
    }
    let ppu = sketch::pixels_per_unit(camera);
    let reach = sketch::POINT_REACH_PX / ppu;
    let pipe = pipe_radius(before, frames, sweep, start, reach)?;
    Some(BoreLimit { widest: pipe - MIN_WALL_PX / ppu, start, reach })
}

/// A pipe's section: the largest circle of `profile` (drawn in `frame`) whose centre lies
/// within `reach` of the path's `start`.
pub(super) fn section_radius(profile: &Sketch, frame: &Frame, start: [f64; 3], reach: f64) -> Option<f64> {
    profile
        .primitives
        .iter()
        .filter_map(|q| match *q {
            Primitive::Circle { center, radius, construction: false }
                if near(frame.to_global(center[0], center[1]), start, reach) =>
            {
                Some(radius)
            }
            _ => None,
        })
        .max_by(f64::total_cmp)
}

fn near(a: [f64; 3], b: [f64; 3], reach: f64) -> bool {
    (0..3).map(|i| (a[i] - b[i]).powi(2)).sum::<f64>().sqrt() <= reach
}

/// The radius of the pipe that adds material along the path `cut` is swept on, among the
/// commands `before` (built with `frames`): its section about the path's `start`.
fn pipe_radius(before: &[Command], frames: &[Option<Frame>], cut: &Sweep, start: [f64; 3], reach: f64) -> Option<f64> {
    before.iter().enumerate().rev().find_map(|(m, c)| {
        let Command::Sweep(pipe) = c else { return None };
        if pipe.mode != Mode::Add || pipe.path != cut.path {
            return None;
        }
        let q = latest_sketch(&before[..m], &pipe.profile)?;
        let (Command::Sketch(profile), Some(frame)) = (&before[q], frames[q]) else { return None };
        section_radius(profile, &frame, start, reach)
    })
}

/// How `sweep` (after the commands `before`, built with `frames`) carries its profile
/// `profile`, drawn in `frame`: `None` unless its path is a sketch of one open chain.
pub(super) fn sweep_carry(
    before: &[Command],
    frames: &[Option<Frame>],
    sweep: &Sweep,
    profile: &Sketch,
    frame: &Frame,
) -> Option<crate::fit::sweep::Carry> {
    let SweepPath::Sketch(path) = &sweep.path else { return None };
    let p = latest_sketch(before, path)?;
    let (Command::Sketch(path), Some(path_frame)) = (&before[p], frames[p]) else { return None };
    crate::fit::sweep::carry(path, &path_frame, crate::fit::sweep::profile_anchor(profile, frame)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bores_pipe_is_the_sweep_that_adds_along_its_path() {
        let program: Vec<Command> = serde_json::from_value(serde_json::json!([
            {"op": "sketch", "name": "S1", "on": "XY", "primitives": [{"type": "circle", "center": [0.0, 0.0], "radius": 3.0}]},
            {"op": "sketch", "name": "S2", "on": "XZ", "primitives": [{"type": "line", "start": [0.0, 0.0], "end": [0.0, 50.0]}]},
            {"op": "sweep", "profile": "S1", "mode": "add", "path": {"sketch": "S2"}},
            {"op": "sketch", "name": "S3", "on": "XY", "primitives": [
                {"type": "circle", "center": [0.2, 0.0], "radius": 1.25},
                {"type": "circle", "center": [20.0, 0.0], "radius": 4.0}]},
            {"op": "sweep", "profile": "S3", "mode": "cut", "path": {"sketch": "S2"}}
        ]))
        .expect("commands");
        let xy = Frame { origin: [0.0; 3], x_axis: [1.0, 0.0, 0.0], y_axis: [0.0, 1.0, 0.0], normal: [0.0, 0.0, 1.0] };
        let frames = vec![Some(xy), None, None, Some(xy), None];
        let Command::Sweep(cut) = &program[4] else { panic!("a sweep") };
        assert_eq!(pipe_radius(&program[..4], &frames, cut, [0.0; 3], 1.0), Some(3.0));
        // Only circles about the path's start are the bore's section (not a hole 20 mm away).
        let Command::Sketch(bore) = &program[3] else { panic!("a sketch") };
        assert_eq!(section_radius(bore, &xy, [0.0; 3], 1.0), Some(1.25));
        // A cut along another path has no pipe.
        let other = Sweep { path: SweepPath::Sketch("S9".into()), ..cut.clone() };
        assert_eq!(pipe_radius(&program[..4], &frames, &other, [0.0; 3], 1.0), None);
    }
}
