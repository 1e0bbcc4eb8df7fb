//! At END, a loft's last section put over its first along the line of sight.
//!
//! One view cannot tell a section's height from where it stands along the line of sight: a
//! section lifted higher and moved toward the camera looks the same. A simulated reader read a
//! transition's height 4% tall (a square base to a round top, gen-11-00005); the line fit then
//! moved the base 2.7 mm along the line of sight to match the picture, where the part has its
//! round top centred over its base, and left it at 0.90 mIoU. Lofts join sections about one
//! axis far more often than not, so where a move along the line of sight (which the picture
//! does not see) brings the sections' centres closer in the plane, it is made, and kept where
//! the rebuilt picture agrees as well as before.

use freecad_bridge::command::{Loft, Primitive, Sketch};
use freecad_bridge::geometry::{add, dot, scale, sub};
use freecad_bridge::state::{Frame, Point3};
use freecad_bridge::{Command, Program, Session};

use super::sizes::translate;
use super::{Build, ProgramFit, Round, View, latest_sketch, lifting_plane};
use crate::fit::dimensions::{Existing, follow_geometry};
use crate::fit::{Change, FitReport, moved_edges, sketch};

/// The line of sight must lie at least this far off the section's normal (the sine): seen
/// along its axis, a loft's centres are on the picture.
const MIN_SIGHT_SIN: f64 = 0.2;
/// A move of the centres under this (pixels' worth, in the plane) is not worth a rebuild.
const MIN_MOVE_PX: f64 = 0.5;
/// The rebuilt picture may lie this much farther from the target's lines (pixels): the move
/// is along the line of sight, so only the renderer's rounding changes it.
const SLACK_PX: f64 = 0.02;
/// The plane's offset may change by at most this share of itself.
const MAX_LIFT_SHARE: f64 = 0.25;

/// Put loft `k`'s last section (on a plane lifted from its reference) over its first section's
/// centre, moving it along the line of sight: its drawing in its plane and the plane's offset
/// together. `None`: `k` is no such loft, or it is seen so that no such move helps.
pub(super) fn fit_loft_centre(
    session: &mut Session,
    done: &mut ProgramFit,
    (current, built): (&Program, &Build),
    k: usize,
    view: &View<'_>,
) -> Round {
    let Command::Loft(Loft { profiles, .. }) = &current.commands[k] else { return Ok(None) };
    let sketch_at = |name: &String| latest_sketch(&current.commands[..k], name);
    let (Some(first), Some(last)) = (profiles.first().and_then(sketch_at), profiles.last().and_then(sketch_at)) else {
        return Ok(None);
    };
    let (Command::Sketch(base), Command::Sketch(top)) = (&current.commands[first], &current.commands[last]) else {
        return Ok(None);
    };
    let (Some(base_frame), Some(top_frame)) = (built.frames[first], built.frames[last]) else { return Ok(None) };
    let Some((p, offset)) = lifting_plane(&current.commands[..last], &top.on) else { return Ok(None) };
    let (Some(c0), Some(c1)) = (centre(base, &base_frame), centre(top, &top_frame)) else { return Ok(None) };
    let camera = &built.picture.camera;
    let (f, n) = (camera.forward, top_frame.normal);
    // The line of sight in the top section's plane, and the centres' offset there.
    let f_in = sub(f, scale(n, dot(f, n)));
    let r = sub(c1, c0);
    let r_in = sub(r, scale(n, dot(r, n)));
    let f_in_sq = dot(f_in, f_in);
    if f_in_sq < MIN_SIGHT_SIN * MIN_SIGHT_SIN {
        return Ok(None);
    }
    // Slid by `s` along the line of sight, the centres' offset in the plane is r_in + s f_in.
    let s = -dot(r_in, f_in) / f_in_sq;
    let ppu = sketch::pixels_per_unit(camera);
    let lift = s * dot(f, n);
    if (s * f_in_sq.sqrt()).abs() * ppu < MIN_MOVE_PX || lift.abs() > MAX_LIFT_SHARE * offset.abs() {
        return Ok(None);
    }
    let before = built.picture.agreement;
    let mut report = FitReport::unmoved(before, [0.0, 0.0]);
    // The plane's offset runs along the section's normal or against it: the one that moves the
    // built frame's origin by `lift` along the normal.
    let mut candidate = None;
    for sign in [1.0, -1.0] {
        let moved = moved_program(
            current,
            (last, top, &top_frame),
            (p, offset + sign * lift),
            built,
            s * dot(f, top_frame.x_axis),
            s * dot(f, top_frame.y_axis),
        );
        report.evaluations += 1;
        let Ok(after) = done.build(session, &moved, Some(built), view)? else { continue };
        let Some(frame) = after.frames[last] else { continue };
        if (dot(sub(frame.origin, top_frame.origin), n) - lift).abs() <= 1e-6 * offset.abs().max(1.0) {
            candidate = Some((sign, after));
            break;
        }
    }
    let Some((sign, after)) = candidate else {
        report.dropped = Some("the section's plane does not move along its normal with its offset".into());
        return Ok(Some((report, None)));
    };
    let picture = &after.picture;
    let moved =
        moved_edges((&built.picture.ids, built.picture.alignment()), (&picture.ids, picture.alignment()), view.target);
    report.moved = Some(moved);
    let (was, now) = (built.picture.bare_pixels(view.target), picture.bare_pixels(view.target));
    let (c0_px, c1_px) = (before.cost(), picture.agreement.cost());
    if c1_px > c0_px + SLACK_PX || now > was || moved.after_px > moved.before_px + SLACK_PX {
        report.dropped = Some(format!(
            "{} put over the first section's centre ({:.3} mm along the line of sight): the rebuilt model's edges lie \
             {c1_px:.3} px from the target's lines against {c0_px:.3} px, {now} of their pixels with no edge on them \
             against {was}",
            top.name, s
        ));
        return Ok(Some((report, None)));
    }
    report.after = picture.agreement;
    report.largest_move = s.abs() * f_in_sq.sqrt();
    report.changes.push(Change {
        what: format!(
            "{} centre put over {}'s along the line of sight (its move in the plane, mm)",
            top.name, base.name
        ),
        from: 0.0,
        to: report.largest_move,
    });
    if let Command::Plane(plane) = &current.commands[p] {
        report.changes.push(Change { what: format!("{} offset", plane.name), from: offset, to: offset + sign * lift });
    }
    Ok(Some((report, Some(after))))
}

/// `current` with sketch `last` (`top`, on `frame`) moved by `(du, dv)` in its plane and plane
/// `p` given `offset`.
fn moved_program(
    current: &Program,
    (last, top, frame): (usize, &Sketch, &Frame),
    (p, offset): (usize, f64),
    built: &Build,
    du: f64,
    dv: f64,
) -> Program {
    let mut candidate = current.clone();
    let mut moved = top.clone();
    translate(&mut moved, [du, dv]);
    follow_geometry(&mut moved, built.states[last].as_ref().map(|state| Existing { state, frame }));
    candidate.commands[last] = Command::Sketch(moved);
    if let Command::Plane(plane) = &mut candidate.commands[p] {
        plane.offset = offset;
    }
    candidate
}

/// The centre of a section (in model coordinates): the mean of its distinct points (its
/// lines' and arcs' ends, its circles' centres), construction geometry left out.
fn centre(sketch: &Sketch, frame: &Frame) -> Option<Point3> {
    let mut points: Vec<[f64; 2]> = Vec::new();
    for primitive in sketch.primitives.iter().filter(|p| !sketch::is_construction(p)) {
        let ends: Vec<[f64; 2]> = match *primitive {
            Primitive::Line { start, end, .. } | Primitive::Arc { start, end, .. } => vec![start, end],
            Primitive::CenterArc { center, .. } | Primitive::Circle { center, .. } => vec![center],
        };
        for q in ends {
            if !points.iter().any(|p| (p[0] - q[0]).hypot(p[1] - q[1]) <= 1e-9 * (1.0 + q[0].abs() + q[1].abs())) {
                points.push(q);
            }
        }
    }
    if points.is_empty() {
        return None;
    }
    let k = points.len() as f64;
    let (u, v) = points.iter().fold((0.0, 0.0), |(u, v), p| (u + p[0] / k, v + p[1] / k));
    Some(add(frame.origin, add(scale(frame.x_axis, u), scale(frame.y_axis, v))))
}
