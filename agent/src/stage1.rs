//! Stage 1: the next operation and the existing geometry it builds on, named by ID (EGR)
//! or, with EGR off, by selectors the harness resolves. Its request shows the target, the
//! tagged view of the current model (with S_t), the entity table, the accepted commands,
//! retrieved examples and why earlier attempts at the step failed.

use std::path::PathBuf;
use std::time::Instant;

use freecad_bridge::command::EntityId;
use freecad_bridge::{Command, ModelState, Session};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::{Asked, Engine, Turn};
use crate::error::LoopError;
use crate::events::TraceEvent;
use crate::prompts::Fill;
use crate::vlm::{Stage, Vlm};
use crate::{rag, register, selectors};

impl Engine<'_> {
    /// The tagged views of the current model (none while it is empty), with S_t drawn: one
    /// with every visible edge and face labelled, or, when that is crowded (more than
    /// [`CROWDED_LABELS`] labels, or some left out for want of room), one for the edges and
    /// one for the faces.
    pub(crate) fn tagged(&mut self, session: &mut Session, step: usize) -> Result<Vec<PathBuf>, LoopError> {
        if session.state().empty {
            return Ok(Vec::new());
        }
        let scene = self.scene(session)?;
        let start = Instant::now();
        let opts = self.options();
        let state = session.state();
        let both = views::tagged(&scene, state, &opts);
        let crowded =
            both.meta.labels.len() > CROWDED_LABELS || both.meta.unlabelled.iter().any(|u| u.reason == views::NO_ROOM);
        let mut drawn = vec![(both, format!("step{step:02}_tagged.png"))];
        if crowded && opts.labels.edges && opts.labels.faces {
            let only = |edges: bool| {
                let labels = views::LabelKinds { edges, faces: !edges, ..opts.labels };
                views::tagged(&scene, state, &views::Options { labels, ..opts.clone() })
            };
            drawn = vec![
                (only(true), format!("step{step:02}_tagged.png")),
                (only(false), format!("step{step:02}_tagged_faces.png")),
            ];
        }
        let mut paths = Vec::new();
        for (mut view, name) in drawn {
            if !self.config.ablations.no_reg {
                register::draw_sphere_on(&mut view, self.sphere);
            }
            paths.push(self.save(&view.image, &name)?);
        }
        self.timing.render += start.elapsed().as_secs_f64();
        Ok(paths)
    }

    /// Stage 1: the next operation, checked against the model.
    pub(crate) fn stage1(
        &mut self,
        vlm: &mut dyn Vlm,
        state: &ModelState,
        turn: Turn,
        tagged: &[PathBuf],
        feedback: &[String],
    ) -> Result<Asked<(Plan, Command)>, LoopError> {
        let start = Instant::now();
        let target_extent = self.framed_mask.as_deref().and_then(|m| extent_text(m, self.config.view_size));
        let circle_touch = self.framed_mask.as_deref().and_then(|m| farthest_pixel(m, self.config.view_size));
        let px_per_mm = self.circle_px() / self.sphere.radius;
        let target_corners = self
            .framed_mask
            .as_deref()
            .and_then(|m| corners_text(m, self.config.view_size, self.config.direction, px_per_mm));
        // Why the step before this one was set aside, when it was.
        let just_set_aside = self.skipped.last().filter(|(step, _)| step + 1 == turn.step).map(|(_, why)| why);
        let fill = Fill::default()
            .value("step", turn.step.to_string())
            .value("max_steps", self.config.max_steps.to_string())
            .value("sphere_center", fmt3(self.sphere.center))
            .value("sphere_radius", format!("{:.4}", self.sphere.radius))
            .value("moved_by", fmt3(self.moved))
            .value("circle_px", format!("{:.0}", self.circle_px()))
            .value("px_per_mm", format!("{:.3}", self.circle_px() / self.sphere.radius))
            .value("axis_px_per_mm", axis_scales(self.config.direction, self.circle_px() / self.sphere.radius))
            .value("circle_px_per_mm", circle_scales(self.config.direction, self.circle_px() / self.sphere.radius))
            .flag("moved", self.moved.iter().any(|d| d.abs() >= 5e-5))
            .flag("touch", circle_touch.is_some())
            .value("circle_touch", circle_touch.map(|[x, y]| format!("({x}, {y})")).unwrap_or_default())
            .flag("extent", target_extent.is_some())
            .value("target_extent", target_extent.unwrap_or_default())
            .flag("corners", target_corners.is_some())
            .value("target_corners", target_corners.unwrap_or_default())
            .value("part_diameter", format!("{:.0}", 2.0 * self.sphere.radius))
            .value("direction", direction_text(self.config.direction))
            .value("axes", views::axes_on_screen(self.config.direction))
            .value("entity_table", gerd::export::entity_table(state).trim_end().to_string())
            .value("history", history_text(&self.history, &self.history_notes))
            .value("skipped_text", just_set_aside.cloned().unwrap_or_default())
            .flag("skipped", just_set_aside.is_some())
            .value("feedback_text", feedback_text(feedback))
            .flag("feedback", !feedback.is_empty())
            .value("unverified_step", self.loop_steps().to_string())
            .flag("unverified", self.unverified.last() == Some(&self.loop_steps()) && self.steps_done > 0)
            .value("edit_failure", self.edit_failure.clone().unwrap_or_default())
            .flag("edit_failure", self.edit_failure.is_some())
            .flag("empty", state.empty)
            .flag("split", tagged.len() > 1)
            .flag("fresh", self.history.is_empty())
            .value("bodies", state.bodies.iter().map(|b| b.id.as_str()).collect::<Vec<_>>().join(", "))
            .value("active_body", format!("B{}", state.active_body_number()))
            .flag("several_bodies", state.bodies.len() > 1)
            .flag("fit_end", self.config.fit);
        let mut images: Vec<PathBuf> =
            std::iter::once(self.view_path("target.png")).chain(tagged.iter().cloned()).collect();
        let history = self.history.clone();
        let retrieved = match self.retriever.as_mut().map(|r| r.examples(state, &history)) {
            Some(Ok(retrieved)) => Some(retrieved),
            // The run ends as a recorded failure, with everything reached so far written.
            Some(Err(e)) => return Ok(Asked::Backend(e.to_string())),
            None => None,
        };
        let (examples, below_threshold) = retrieved.map_or_else(Default::default, |r| (r.examples, r.below_threshold));
        let text = rag::prompt_text(&examples, images.len() + 1, state, &history);
        if !examples.is_empty() || !below_threshold.is_empty() {
            let tokens = if examples.is_empty() { 0 } else { rag::added_tokens(&text, &examples) };
            self.retrieval_tokens += tokens;
            self.emit(TraceEvent::Retrieved {
                step: turn.step,
                attempt: turn.attempt,
                hits: examples.iter().map(|e| e.hit.clone()).collect(),
                below_threshold,
                tokens,
            })?;
        }
        images.extend(examples.iter().filter_map(|e| e.image.clone()));
        let fill = fill.value("retrieved", text).flag("rag", !examples.is_empty());
        let request = self.request(Stage::Stage1, "stage1.md", fill, images, self.context(state))?;
        self.timing.prompt += start.elapsed().as_secs_f64();
        let no_egr = self.config.ablations.no_egr;
        self.ask(vlm, request, turn, |v| {
            let plan: Plan = serde_json::from_value(v).map_err(|e| e.to_string())?;
            if plan.is_end() {
                return Ok((plan, Command::End));
            }
            interpret(plan, state, &history, no_egr)
        })
    }
}

/// More labels than this in one tagged view, and Stage 1 gets edges and faces in two views.
pub const CROWDED_LABELS: usize = 36;

/// Why earlier attempts at a step failed, one line each.
pub(crate) fn feedback_text(feedback: &[String]) -> String {
    feedback.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
}

/// A view direction for a prompt: `(1, -1, 1)`.
pub(crate) fn direction_text(d: [f64; 3]) -> String {
    let n = |x: f64| if x == x.round() { format!("{x:.0}") } else { format!("{x:.3}") };
    format!("({}, {}, {})", n(d[0]), n(d[1]), n(d[2]))
}

/// Where the target's silhouette reaches in its framed picture (`size` pixels square), for
/// Stage 1: `x 96 to 404 px and y 85 to 368 px from the top-left corner (309 by 284 px)`.
/// Readers sized a base feature from the picture by eye and asked for these numbers.
fn extent_text(mask: &[bool], size: u32) -> Option<String> {
    let [left, right, top, bottom] = views::extent(mask, size as usize)?;
    Some(format!(
        "x {left} to {right} px and y {top} to {bottom} px from the top-left corner ({} by {} px)",
        right - left + 1,
        bottom - top + 1
    ))
}

/// The silhouette's pixel farthest from the picture's centre (where the circle is centred),
/// which the circle passes through: a relay reader measured from the left and right corners
/// (155 px) and could not square them with the circle's 165 px.
fn farthest_pixel(mask: &[bool], size: u32) -> Option<[u32; 2]> {
    let half = f64::from(size) / 2.0;
    let distance = |i: usize| (f64::from(i as u32 % size) + 0.5 - half).hypot(f64::from(i as u32 / size) + 0.5 - half);
    let far = (0..mask.len()).filter(|&i| mask[i]).max_by(|&a, &b| distance(a).total_cmp(&distance(b)))?;
    Some([far as u32 % size, far as u32 / size])
}

/// How near the listed corners of the target's outline lie to its border, in pixels.
const CORNER_TOLERANCE_PX: f64 = 1.5;
/// More corners than this are not listed (a long list costs tokens and reads as a curve).
const MAX_CORNERS: usize = 16;

/// A side of the outline runs along a model axis's direction on the picture when within
/// this angle of it (degrees), or, for a short side, when its far end lies within
/// [`SIDE_ALONG_PX`] of that direction, up to [`SIDE_ALONG_MAX_DEG`]: a corner found to half
/// a pixel turns a 19 px side by 1.5 degrees, and a relay reader was given a U channel's two
/// walls (19.1 and 18.5 px, 2.2 and 2.0 degrees off X's way) in px alone.
const SIDE_ALONG_DEG: f64 = 2.0;
const SIDE_ALONG_PX: f64 = 1.0;
const SIDE_ALONG_MAX_DEG: f64 = 5.0;

/// The target's outline corners, when it is a polygon, and its sides' lengths; a side that
/// runs the way a model axis does on the picture also in mm along that axis (readers turned
/// the corners into sizes by hand, and asked for the sides' lengths).
/// `(166.2, 210.0), (250.4, 96.1), ...; its sides from the first corner on: 141.9 px (X's
/// way: 52.7 mm along X), ...`. A silhouette of separate pieces (bodies apart) gives the
/// largest's, then each other's extent and corners ([`MAX_PIECES`] at most).
fn corners_text(mask: &[bool], size: u32, direction: [f64; 3], px_per_mm: f64) -> Option<String> {
    let pieces = views::silhouette_pieces(mask, size as usize, CORNER_TOLERANCE_PX, MAX_CORNERS);
    let polygon = |corners: &[[f64; 2]]| {
        let listed = corners.iter().map(|[x, y]| format!("({x:.1}, {y:.1})")).collect::<Vec<_>>().join(", ");
        let sides = (0..corners.len())
            .map(|k| side_text(corners[k], corners[(k + 1) % corners.len()], direction, px_per_mm))
            .collect::<Vec<_>>()
            .join(", ");
        format!("{listed}; its sides from the first corner on: {sides}")
    };
    let mut text = polygon(pieces.first()?.corners.as_deref()?);
    if pieces.len() > 1 {
        text = format!("the largest of {} separate pieces of the silhouette: {text}", pieces.len());
    }
    for piece in pieces.iter().skip(1).take(MAX_PIECES - 1) {
        let [left, right, top, bottom] = piece.extent;
        text += &format!("; a separate piece spans x {left} to {right} px and y {top} to {bottom} px");
        text += &match &piece.corners {
            Some(corners) => format!(", its corners {}", polygon(corners)),
            None => ", its outline curved (no corners listed)".to_string(),
        };
    }
    Some(text)
}

/// Separate pieces of the silhouette described at most (the largest first).
const MAX_PIECES: usize = 4;

/// One side's length in px, and in mm along the model axis it runs the way of, if any.
fn side_text(a: [f64; 2], b: [f64; 2], direction: [f64; 3], px_per_mm: f64) -> String {
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let length = dx.hypot(dy);
    let along = ["X", "Y", "Z"].iter().zip(views::axes_in_view(direction)).find_map(|(name, [right, up, _])| {
        let per_mm = px_per_mm * right.hypot(up);
        // Picture y runs down; the axis's "up" runs up.
        let cross = (dx * -up - dy * right) / (length * right.hypot(up)).max(1e-12);
        let within = (SIDE_ALONG_PX / length.max(1e-9))
            .atan()
            .clamp(SIDE_ALONG_DEG.to_radians(), SIDE_ALONG_MAX_DEG.to_radians());
        (per_mm > 1e-6 && cross.abs() <= within.sin())
            .then(|| format!(" ({name}'s way: {:.1} mm along {name})", length / per_mm))
    });
    format!("{length:.1} px{}", along.unwrap_or_default())
}

/// How long 1 mm along each model axis looks from `direction`, in pixels, at `px_per_mm`
/// face-on, and which way it runs on the picture: `X is 2.449 px (2.121 right, 1.225 down)`.
/// The views are orthographic, so an axis at angle a to the picture's plane shows cos(a) of
/// its length (relay readers worked out 0.816 for the isometric view by hand, and each
/// axis's direction on the picture from the axis icon).
pub(crate) fn axis_scales(direction: [f64; 3], px_per_mm: f64) -> String {
    let on_picture = |v: f64, ahead: &str, back: &str| {
        let v = px_per_mm * v;
        // -0.000 reads as a direction: a length seen end-on has none.
        let v = if v.abs() < 5e-4 { 0.0 } else { v };
        format!("{:.3} {}", v.abs(), if v < 0.0 { back } else { ahead })
    };
    let axes = views::axes_in_view(direction);
    ["X", "Y", "Z"]
        .iter()
        .zip(axes)
        .map(|(name, [right, up, _])| {
            let length = px_per_mm * right.hypot(up);
            format!(
                "{name} is {length:.3} px ({}, {})",
                on_picture(right, "right", "left"),
                on_picture(-up, "down", "up")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a circle in a plane square to each model axis shows, per mm of its diameter: an
/// ellipse whose long axis is the face-on scale, square to the axis's own direction on the
/// picture, and whose short axis is foreshortened by the axis's share of the viewing
/// direction; and the box it fills on the picture (readers derived 1.905 px/mm for an
/// isometric washer by hand, and one sized a bar from its end's box, which it had to work
/// out from the axes).
pub(crate) fn circle_scales(direction: [f64; 3], px_per_mm: f64) -> String {
    let axes = views::axes_in_view(direction);
    let short = unit(direction).map(|c| px_per_mm * c.abs());
    ["X", "Y", "Z"]
        .iter()
        .enumerate()
        .map(|(a, name)| {
            // The circle's plane is spanned by the other two axes.
            let (u, v) = (axes[(a + 1) % 3], axes[(a + 2) % 3]);
            let width = px_per_mm * u[0].hypot(v[0]);
            let height = px_per_mm * u[1].hypot(v[1]);
            let shape = if short[a] < 5e-4 {
                "seen edge-on, a line".to_string()
            } else if px_per_mm - short[a] < 5e-4 {
                "seen face-on, a circle".to_string()
            } else {
                // The long axis is square to the normal's direction on the picture.
                let [right, up, _] = axes[a];
                // An axis's tilt is the same either way along it: within [-90, 90).
                let tilt = (right.atan2(-up).to_degrees() + 90.0).rem_euclid(180.0) - 90.0;
                let along = match tilt {
                    t if t.abs() < 0.5 => "level".to_string(),
                    t if t.abs() > 89.5 => "upright".to_string(),
                    t if t > 0.0 => format!("rising to the right at {t:.0} deg"),
                    t => format!("falling to the right at {:.0} deg", -t),
                };
                format!("long axis {px_per_mm:.3} px {along}, short axis {:.3} px", short[a])
            };
            format!("square to {name}, {shape}, its box {width:.3} px wide and {height:.3} px tall")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The viewing direction of unit length (zero stays zero).
fn unit(direction: [f64; 3]) -> [f64; 3] {
    let norm = direction.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > 0.0 { direction.map(|x| x / norm) } else { [0.0; 3] }
}

fn fmt3(p: [f64; 3]) -> String {
    format!("({:.4}, {:.4}, {:.4})", p[0], p[1], p[2])
}

/// The accepted commands, one JSON line each, for the prompt; under a command that names
/// existing entities, what they were at its step.
fn history_text(history: &[Command], notes: &[String]) -> String {
    if history.is_empty() {
        return "(none yet: the model is empty)".into();
    }
    let mut lines = Vec::new();
    for (i, command) in history.iter().enumerate() {
        // Rounded as the model writes numbers: FreeCAD's round-off (-29.900000000000006) is noise.
        lines.push(format!("[{}] {}", i + 1, crate::report::compact_json(command)));
        if let Some(note) = notes.get(i).filter(|n| !n.is_empty()) {
            lines.push(format!("  # then: {note}"));
        }
    }
    lines.join("\n")
}

/// What the entities a command names were in `state` (the model it was applied to), as the
/// entity table described them: `F6 Plane area=120 c=(0, 0, 7.65) n=(0, 0, 1)`.
pub(crate) fn reference_note(state: &ModelState, command: &Command) -> String {
    let mut seen = Vec::new();
    for r in command.references() {
        if !seen.contains(&r.id) {
            seen.push(r.id);
        }
    }
    seen.iter().filter_map(|id| gerd::export::describe_entity(state, id)).collect::<Vec<_>>().join("; ")
}

/// Stage 1's answer: the command, the new sketches it needs, and the body it works in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub reason: String,
    /// The body the command works in (`B2` starts the next one) when it is not the active
    /// body: the harness switches before the sketches are drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sketches: Vec<SketchPlan>,
    /// One command of the language other than `sketch`, lengths in model units; or a
    /// revision (`op` `revise`) of an accepted command.
    pub command: Value,
    /// Set by [`interpret`] when the command is a revision: which command it revises and
    /// what it changes.
    #[serde(skip)]
    pub revision: Option<crate::revise::Revision>,
}

/// A new sketch and the plane it lies on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SketchPlan {
    pub name: String,
    pub on: String,
}

impl Plan {
    /// One line for prompts and reports: `extrude (add) of S3 on F6`.
    pub fn describe(&self) -> String {
        if let Some(r) = &self.revision {
            return r.describe(self.command["command"]["op"].as_str().unwrap_or("?"));
        }
        let op = self.command["op"].as_str().unwrap_or("?");
        let mode = self.command["mode"].as_str().map(|m| format!(" ({m})")).unwrap_or_default();
        let sketches: Vec<String> = self.sketches.iter().map(|s| format!("{} on {}", s.name, s.on)).collect();
        if sketches.is_empty() { format!("{op}{mode}") } else { format!("{op}{mode} of {}", sketches.join(", ")) }
    }

    /// [`Plan::describe`] and how far the extrusion or revolution goes as the model gave it
    /// (`extrude (add) of S2 on F6, 10.6 mm one side`), for the sketch's heading: readers
    /// drawing it asked for the depth there. Stage 3 shows the fitted numbers instead.
    pub fn describe_with_extent(&self) -> String {
        match (&self.revision, how_far(&self.command)) {
            (None, Some(far)) => format!("{}, {far}", self.describe()),
            _ => self.describe(),
        }
    }

    pub fn is_end(&self) -> bool {
        self.command["op"] == "end"
    }
}

/// How far an extrusion or a revolution goes (`16 mm one side`, `30 mm symmetric`,
/// `through all`, `360 deg about S1.v_axis`).
fn how_far(command: &Value) -> Option<String> {
    let mm = |v: &Value| v.as_f64().map(|d| format!("{} mm", trim_number(d)));
    let reversed = if command["reversed"] == true { ", reversed" } else { "" };
    let text = match command["op"].as_str()? {
        "extrude" => {
            let extent = &command["extent"];
            match extent["type"].as_str()? {
                "one_side" => format!("{} one side", mm(&extent["depth"])?),
                "two_sides" => format!("{} one way and {} the other", mm(&extent["depth"])?, mm(&extent["depth2"])?),
                "symmetric" => format!("{} symmetric", mm(&extent["depth"])?),
                "through_all" if extent["symmetric"] == true => "through all, both ways".to_string(),
                "through_all" => "through all".to_string(),
                _ => return None,
            }
        }
        "revolve" => {
            let symmetric = if command["symmetric"] == true { " symmetric" } else { "" };
            format!("{} deg{symmetric} about {}", trim_number(command["angle"].as_f64()?), command["axis"].as_str()?)
        }
        _ => return None,
    };
    Some(format!("{text}{reversed}"))
}

/// A number as a reader would write it: at most three decimals, no trailing zeros.
fn trim_number(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Resolve a reference string: a selector becomes the IDs it names; an ID is refused when
/// IDs are not shown (no-EGR); anything else (base planes, sketch names, `S1.v_axis`) stays.
pub fn resolve_reference(text: &str, state: &ModelState, no_egr: bool) -> Result<Vec<String>, String> {
    if selectors::is_selector(text) {
        // `(edge circle highest +Z).center`: a point of the selected edge.
        if let Some(body) = text.trim().strip_prefix('(')
            && let Some((inner, pos)) = body.rsplit_once(").")
        {
            let ids = selectors::resolve(inner, state)?;
            if ids.len() != 1 {
                return Err(format!("'{text}' must name one entity"));
            }
            return Ok(vec![format!("{}.{pos}", ids[0])]);
        }
        return selectors::resolve(text, state);
    }
    let head = freecad_bridge::command::split_position(text).0;
    if no_egr && head.parse::<EntityId>().is_ok() {
        return Err(format!("'{text}': IDs are not shown in this run; name the entity with a selector"));
    }
    Ok(vec![text.to_string()])
}

fn resolve_single(v: &mut Value, state: &ModelState, no_egr: bool) -> Result<(), String> {
    if let Some(text) = v.as_str() {
        let ids = resolve_reference(text, state, no_egr)?;
        if ids.len() != 1 {
            return Err(format!("'{text}' names {} entities where one is needed", ids.len()));
        }
        *v = Value::String(ids[0].clone());
    }
    Ok(())
}

fn resolve_list(v: &mut Value, state: &ModelState, no_egr: bool) -> Result<(), String> {
    if let Some(items) = v.as_array() {
        let mut out = Vec::new();
        for item in items {
            match item.as_str() {
                Some(text) => out.extend(resolve_reference(text, state, no_egr)?.into_iter().map(Value::String)),
                None => out.push(item.clone()),
            }
        }
        *v = Value::Array(out);
    }
    Ok(())
}

/// The places of a command (JSON) that name existing entities: those naming one (`on`,
/// `axis`, a rotation's axis) and lists (`edges`, a path's edges).
pub fn reference_slots(command: &mut Value) -> (Vec<&mut Value>, Vec<&mut Value>) {
    let (mut single, mut lists) = (Vec::new(), Vec::new());
    for (key, v) in command.as_object_mut().into_iter().flat_map(|m| m.iter_mut()) {
        match (key.as_str(), v) {
            ("on" | "axis", v) => single.push(v),
            ("edges", v) => lists.push(v),
            ("path", v) => lists.extend(v.get_mut("edges")),
            ("rotation", Value::Array(list)) => single.extend(list.iter_mut().filter_map(|r| r.get_mut("axis"))),
            ("rotation", one) => single.extend(one.get_mut("axis")),
            _ => {}
        }
    }
    (single, lists)
}

/// Resolve every reference of a command (JSON) in place.
pub fn resolve_command(command: &mut Value, state: &ModelState, no_egr: bool) -> Result<(), String> {
    let (single, lists) = reference_slots(command);
    for v in single {
        resolve_single(v, state, no_egr)?;
    }
    for v in lists {
        resolve_list(v, state, no_egr)?;
    }
    Ok(())
}

/// Check a plan against the model: references resolve, the command parses, names are new,
/// and the sketches it uses exist or are being drawn. Returns the plan with references
/// resolved to IDs and the command.
pub fn interpret(
    mut plan: Plan,
    state: &ModelState,
    history: &[Command],
    no_egr: bool,
) -> Result<(Plan, Command), String> {
    if plan.command["op"] == "sketch" {
        return Err("a sketch is not a command of its own here: list it in `sketches` and use it in the command".into());
    }
    if plan.command["op"] == "revise" {
        if !plan.sketches.is_empty() {
            return Err(
                "a revision draws no new sketches: leave `sketches` out (a sketch is revised by its own number)".into(),
            );
        }
        if plan.body.is_some() {
            return Err("a revision changes a command where it is: leave `body` out".into());
        }
        let (command, revision) = crate::revise::check(&plan.command, history)?;
        plan.revision = Some(revision);
        return Ok((plan, command));
    }
    if plan.command["op"] == "body" {
        return Err(
            "a body is not a command of its own here: name it in `body` beside the command that works in it".into()
        );
    }
    if let Some(body) = &plan.body {
        let n = state.body_count();
        let k = freecad_bridge::command::body_number(body);
        if k.is_none_or(|k| k > n + 1) {
            return Err(format!(
                "there is no body {body}: the bodies are B1..B{n}, and the next new one is B{}",
                n + 1
            ));
        }
        if k == Some(state.active_body_number()) {
            plan.body = None;
        }
    }
    let existing: Vec<String> = history
        .iter()
        .filter_map(|c| match c {
            Command::Sketch(s) => Some(s.name.clone()),
            Command::Plane(p) => Some(p.name.clone()),
            _ => None,
        })
        .collect();
    for s in plan.sketches.iter_mut() {
        if existing.contains(&s.name) {
            return Err(format!("the name {} is taken; new sketches need new names", s.name));
        }
        let mut on = Value::String(s.on.clone());
        resolve_single(&mut on, state, no_egr).map_err(|e| format!("sketch {}: {e}", s.name))?;
        s.on = on.as_str().unwrap_or_default().to_string();
    }
    let mut dupes = plan.sketches.iter().map(|s| &s.name).collect::<Vec<_>>();
    dupes.sort();
    if dupes.windows(2).any(|w| w[0] == w[1]) {
        return Err("two new sketches have the same name".into());
    }
    resolve_command(&mut plan.command, state, no_egr)?;
    let command: Command =
        serde_json::from_value(plan.command.clone()).map_err(|e| format!("the command does not parse: {e}"))?;
    if let Command::Plane(p) = &command
        && existing.contains(&p.name)
    {
        return Err(format!("the name {} is taken; a new plane needs a new name", p.name));
    }
    let new: Vec<&str> = plan.sketches.iter().map(|s| s.name.as_str()).collect();
    for used in sketches_used(&command) {
        if !new.contains(&used.as_str()) && !existing.contains(&used) {
            return Err(format!("the command uses sketch {used}, which neither exists nor is listed in `sketches`"));
        }
    }
    Ok((plan, command))
}

/// The sketches a command consumes (profiles, paths, a sketch axis).
pub fn sketches_used(command: &Command) -> Vec<String> {
    match command {
        Command::Extrude(e) => vec![e.profile.clone()],
        Command::Revolve(r) => {
            let mut v = vec![r.profile.clone()];
            if r.axis.parse::<EntityId>().is_err()
                && let Some((sketch, _)) = r.axis.split_once('.')
            {
                v.push(sketch.to_string());
            }
            v
        }
        Command::Sweep(s) => {
            let mut v = vec![s.profile.clone()];
            if let freecad_bridge::command::SweepPath::Sketch(p) = &s.path {
                v.push(p.clone());
            }
            v
        }
        Command::Loft(l) => l.profiles.clone(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_scales_foreshorten_by_the_viewing_angle() {
        // Isometric: every axis at the same angle, sqrt(2/3) = 0.816 of its length.
        // X runs down to the right, Y up to the right, Z straight up (the axis icon's).
        assert_eq!(
            axis_scales([1.0, -1.0, 1.0], 3.0),
            "X is 2.449 px (2.121 right, 1.225 down), Y is 2.449 px (2.121 right, 1.225 up), \
             Z is 2.449 px (0.000 right, 2.449 up)"
        );
        // From the top: X and Y face-on (X to the right, Y up), Z seen end-on.
        assert_eq!(
            axis_scales([0.0, 0.0, 5.0], 2.0),
            "X is 2.000 px (2.000 right, 0.000 down), Y is 2.000 px (0.000 right, 2.000 up), \
             Z is 0.000 px (0.000 right, 0.000 down)"
        );
    }

    #[test]
    fn an_outline_side_along_an_axis_is_told_in_mm_along_it() {
        // Isometric at 3.3 px/mm face-on: 1 mm along X runs 2.333 right and 1.347 down.
        let iso = [1.0, -1.0, 1.0];
        assert_eq!(
            side_text([100.0, 100.0], [100.0 + 23.33, 100.0 + 13.47], iso, 3.3),
            "26.9 px (X's way: 10.0 mm along X)"
        );
        // Z runs straight up; the same side walked the other way is along Z too.
        assert_eq!(side_text([50.0, 80.0], [50.0, 53.06], iso, 3.3), "26.9 px (Z's way: 10.0 mm along Z)");
        assert_eq!(side_text([50.0, 53.06], [50.0, 80.0], iso, 3.3), "26.9 px (Z's way: 10.0 mm along Z)");
        // Level: no axis runs that way.
        assert_eq!(side_text([0.0, 0.0], [30.0, 0.0], iso, 3.3), "30.0 px");
        // 2.2 degrees off X's way (30 degrees below level): a 19 px side's far end lies
        // 0.7 px off, within a pixel, so it is along X; at 60 px it lies 2.3 px off, and at
        // 8 px 5.2 degrees is past the most a short side may turn.
        let off = |length: f64| {
            let a = (30.0f64 - 2.2).to_radians();
            [100.0 + length * a.cos(), 100.0 + length * a.sin()]
        };
        assert_eq!(side_text([100.0, 100.0], off(19.0), iso, 3.3), "19.0 px (X's way: 7.1 mm along X)");
        assert_eq!(side_text([100.0, 100.0], off(60.0), iso, 3.3), "60.0 px");
        let steep = (30.0f64 - 5.2).to_radians();
        assert_eq!(side_text([0.0, 0.0], [8.0 * steep.cos(), 8.0 * steep.sin()], iso, 3.3), "8.0 px");
    }

    #[test]
    fn a_circle_square_to_an_axis_is_an_ellipse_whose_short_axis_is_foreshortened() {
        // Isometric: every such circle's short axis is 1/sqrt(3) = 0.577 of its long one; a
        // circle on XY is level, and one square to Y fills a box 2.333 wide and 3.012 tall
        // (its in-plane X runs 2.333 across and 1.347 down, Z 2.694 up).
        assert_eq!(
            circle_scales([1.0, -1.0, 1.0], 3.3),
            "square to X, long axis 3.300 px rising to the right at 60 deg, short axis 1.905 px, its box 2.333 px \
             wide and 3.012 px tall; square to Y, long axis 3.300 px falling to the right at 60 deg, short axis \
             1.905 px, its box 2.333 px wide and 3.012 px tall; square to Z, long axis 3.300 px level, short axis \
             1.905 px, its box 3.300 px wide and 1.905 px tall"
        );
        // From the top: a circle on XY is seen face-on, one on YZ or XZ edge-on.
        assert_eq!(
            circle_scales([0.0, 0.0, 5.0], 2.0),
            "square to X, seen edge-on, a line, its box 0.000 px wide and 2.000 px tall; square to Y, seen edge-on, \
             a line, its box 2.000 px wide and 0.000 px tall; square to Z, seen face-on, a circle, its box 2.000 px \
             wide and 2.000 px tall"
        );
    }

    #[test]
    fn a_sketch_heading_says_how_far_its_extrusion_or_revolution_goes() {
        let plan = |command: Value| Plan {
            reason: String::new(),
            body: None,
            sketches: vec![SketchPlan { name: "S2".into(), on: "F6".into() }],
            command,
            revision: None,
        };
        let pad = plan(serde_json::json!({"op": "extrude", "profile": "S2", "mode": "add",
            "extent": {"type": "one_side", "depth": 10.625}, "reversed": true}));
        assert_eq!(pad.describe_with_extent(), "extrude (add) of S2 on F6, 10.625 mm one side, reversed");
        let cut = plan(serde_json::json!({"op": "extrude", "profile": "S2", "mode": "cut",
            "extent": {"type": "through_all"}}));
        assert_eq!(cut.describe_with_extent(), "extrude (cut) of S2 on F6, through all");
        let slab = plan(serde_json::json!({"op": "extrude", "profile": "S2", "mode": "add",
            "extent": {"type": "symmetric", "depth": 30.0}}));
        assert_eq!(slab.describe_with_extent(), "extrude (add) of S2 on F6, 30 mm symmetric");
        let ring = plan(serde_json::json!({"op": "revolve", "profile": "S2", "mode": "add",
            "axis": "S2.v_axis", "angle": 360.0}));
        assert_eq!(ring.describe_with_extent(), "revolve (add) of S2 on F6, 360 deg about S2.v_axis");
        assert_eq!(ring.describe(), "revolve (add) of S2 on F6");
    }

    /// The silhouette of test100 part `id`'s image framed as the views are (500 px); `None`,
    /// with a message, where ../shared/data or the image is missing.
    fn framed_test100_mask(id: &str) -> Option<Vec<bool>> {
        let Some(data) = freecad_bridge::testing::data_dir() else {
            eprintln!("skipping: no ../shared/data (set VISION2CAD_DATA)");
            return None;
        };
        let path = data.join(format!("cadcoder-test100/images/{id}_0.png"));
        let Ok(image) = image::open(&path) else {
            eprintln!("skipping: {} is missing", path.display());
            return None;
        };
        let target = crate::register::Target::analyse(image.to_rgb8(), id).expect("a part");
        Some(target.framed_mask(500, views::TAGGED_FILL))
    }

    /// test100's 00531511, a plate seen from the corner: simplifying its outline split the
    /// lower long sides where the renderer blunted the tips, and the piece beside a tip,
    /// parallel to its side, left no corner; the short vertical side then went instead, and
    /// a relay reader was told 20.8 px (7.7 mm along Z) for the plate's 31 px.
    #[test]
    fn a_plates_thickness_is_told_from_its_full_vertical_sides() {
        let Some(mask) = framed_test100_mask("00531511") else { return };
        let corners = views::outline_corners(&mask, 500, CORNER_TOLERANCE_PX, MAX_CORNERS).expect("a polygon");
        assert_eq!(corners.len(), 6, "{corners:?}");
        let vertical: Vec<f64> = (0..6)
            .map(|k| (corners[k], corners[(k + 1) % 6]))
            .filter(|(a, b)| (a[0] - b[0]).abs() < 0.5)
            .map(|(a, b)| (a[1] - b[1]).abs())
            .collect();
        assert_eq!(vertical.len(), 2, "{corners:?}");
        for side in vertical {
            assert!((side - 30.7).abs() < 0.5, "a vertical side of {side:.1} px in {corners:?}");
        }
    }

    /// test100's 00129614, two thin strips apart (two bodies): a relay reader was given the
    /// long strip's corners and none of the short one's, and read those by eye.
    #[test]
    fn every_separate_piece_of_the_targets_silhouette_is_told() {
        let Some(mask) = framed_test100_mask("00129614") else { return };
        let text = corners_text(&mask, 500, views::ISOMETRIC, 3.3).expect("polygons");
        assert!(text.starts_with("the largest of 2 separate pieces of the silhouette: "), "{text}");
        let pieces = views::silhouette_pieces(&mask, 500, CORNER_TOLERANCE_PX, MAX_CORNERS);
        let [long, short] = [&pieces[0], &pieces[1]];
        // The short strip lies up and to the left of the long one, and is a polygon too.
        assert!(short.extent[0] < long.extent[0] && short.extent[2] < long.extent[2], "{pieces:?}");
        let corners = short.corners.as_ref().expect("the short strip's corners");
        assert_eq!(corners.len(), 4, "{corners:?}");
        let [left, right, top, bottom] = short.extent;
        assert!(
            text.contains(&format!(
                "; a separate piece spans x {left} to {right} px and y {top} to {bottom} px, its corners ("
            )),
            "{text}"
        );
        // Its long sides run Y's way, half the long strip's (about 51 mm against 102).
        assert_eq!(text.matches("mm along Y").count(), 4, "{text}");
    }

    /// test100's 00070015, a hexagonal prism: the circle passes through the silhouette's
    /// pixel the prompt names (a relay reader measured from two other corners, 155 px off).
    #[test]
    fn the_pixel_the_circle_passes_through_is_named_and_lies_on_it() {
        let Some(mask) = framed_test100_mask("00070015") else { return };
        let [x, y] = farthest_pixel(&mask, 500).expect("a silhouette");
        let off = (f64::from(x) + 0.5 - 250.0).hypot(f64::from(y) + 0.5 - 250.0);
        assert!((off - crate::engine::circle_px(500)).abs() < 1.0, "({x}, {y}) is {off:.1} px from the centre");
        // One of the two far corners (upper left or lower right), not the left and right ones.
        assert!(y.abs_diff(250) > 40 && x.abs_diff(250) > 140, "({x}, {y})");
        assert_eq!(farthest_pixel(&[false; 16], 4), None);
    }
}
