//! Stage 2: one sketch drawn in view coordinates on the sketch view, turned into a sketch
//! command in the plane's local frame (LCB), tied to projected geometry (PGR).

use std::time::Instant;

use freecad_bridge::command::{Constraint, Primitive, Sketch};
use freecad_bridge::{ModelState, Session};
use serde::Deserialize;
use serde_json::Value;
use views::{SketchMeta, Window, axis_name};

use crate::config::Config;
use crate::engine::{Asked, Engine, Turn, kernel};
use crate::error::LoopError;
use crate::events::TraceEvent;
use crate::pgr::{self, Snapped};
use crate::prompts::Fill;
use crate::stage1::{Plan, SketchPlan, resolve_reference};
use crate::vlm::{SketchRequest, Stage, Vlm};
use crate::{lcb, register};

impl Engine<'_> {
    /// Stage 2 for one sketch: the sketch view, the drawing, LCB and PGR; revised
    /// parameters go into `command`. `feedback`: why earlier attempts at the step failed.
    #[allow(clippy::too_many_arguments)] // the engine's state is split across &mut borrows
    pub(crate) fn stage2(
        &mut self,
        vlm: &mut dyn Vlm,
        session: &mut Session,
        plan: &Plan,
        sp: &SketchPlan,
        turn: Turn,
        command: &mut Value,
        feedback: &[String],
    ) -> Result<Asked<Sketch>, LoopError> {
        let frame = match kernel(&mut self.timing, session, |s| s.plane_frame(&sp.on)) {
            Ok(f) => f,
            Err(e) => return Ok(Asked::Invalid(format!("sketch {} on {}: {e}", sp.name, sp.on))),
        };
        let scene = self.scene(session)?;
        let start = Instant::now();
        let window = (!self.config.ablations.no_reg).then(|| {
            let c = frame.to_local(self.sphere.center);
            let r = self.sphere.radius;
            Window { u0: c[0] - r, v0: c[1] - r, size: 2.0 * r }
        });
        let state = session.state().clone();
        let mut view = views::sketch(&scene, &state, &frame, window, &self.options());
        let Some(meta) = view.meta.sketch.clone() else {
            return Ok(Asked::Invalid("the sketch view has no map".into()));
        };
        if !self.config.ablations.no_reg {
            let center = meta.view_to_pixel([0.5, 0.5]);
            register::draw_sphere(&mut view.image, [center.0, center.1], meta.grid[2] / 2.0);
        }
        // Where the grid lies in the part, seen as the target is: a face-on grid alone does
        // not say which face it is or which way it is turned.
        let inset = views::plane_inset(&scene, &meta, &self.options(), self.config.view_size / 2);
        view.image = views::append_panel(&view.image, &inset, "the grid's square in the model");
        let image =
            self.save(&view.image, &format!("step{:02}_try{}_{}_sketch.png", turn.step, turn.attempt, sp.name))?;
        self.timing.render += start.elapsed().as_secs_f64();
        let start = Instant::now();
        let fill = Fill::default()
            .value("sketch_name", sp.name.clone())
            .value("sketch_on", sp.on.clone())
            .value("plan", plan.describe_with_extent())
            .value("window_size", format!("{:.4}", meta.window.size))
            .value("snap_tolerance", snap_distance(self.config, &meta))
            .value("projected", pgr::projected_table(&meta, &state).trim_end().to_string())
            .value("grid_right", axis_name(meta.view_to_world.x_step))
            .value("grid_down", axis_name(meta.view_to_world.y_step))
            .value("grid_viewer", axis_name(towards_viewer(&meta)))
            .value("model_to_view", model_to_view(&meta))
            .value("view_to_model", view_to_model(&meta))
            .value("worked_example", worked_example(&meta))
            .value("feedback_text", crate::stage1::feedback_text(feedback))
            .flag("feedback", !feedback.is_empty());
        let mut context = self.context(&state);
        context.plan = Some(plan.clone());
        context.sketch = Some(SketchRequest { name: sp.name.clone(), on: sp.on.clone(), meta: meta.clone() });
        let images = vec![self.view_path("target.png"), image];
        let request = self.request(Stage::Stage2, "stage2.md", fill, images, context)?;
        self.timing.prompt += start.elapsed().as_secs_f64();
        let config = self.config;
        let planned = command.clone();
        let asked = self.ask(vlm, request, turn, |v| {
            let drawing: Drawing = serde_json::from_value(v).map_err(|e| e.to_string())?;
            let (sketch, snapped) = to_sketch(&drawing, &sp.name, &sp.on, &meta, &state, config)?;
            check_parameters(&planned, &drawing.parameters)?;
            Ok((drawing.parameters, sketch, snapped))
        })?;
        Ok(match asked {
            Asked::Answer((parameters, sketch, snapped)) => {
                if !snapped.constraints.is_empty() {
                    self.emit(TraceEvent::Snapped {
                        step: turn.step,
                        attempt: turn.attempt,
                        sketch: sp.name.clone(),
                        constraints: snapped.constraints,
                    })?;
                }
                apply_parameters(command, &parameters);
                Asked::Answer(sketch)
            }
            Asked::Invalid(reason) => Asked::Invalid(format!("sketch {}: {reason}", sp.name)),
            Asked::Backend(reason) => Asked::Backend(reason),
        })
    }
}

/// How a model point maps to view coordinates, as formulas a model can apply by hand:
/// `x = 0.5199 + X / 100, y = 0.5199 - Z / 100` on a plane along the model axes.
pub(crate) fn model_to_view(meta: &SketchMeta) -> String {
    let origin = meta.view_to_world.origin;
    let formula = |name: &str, step: [f64; 3]| {
        let size = step.iter().map(|c| c * c).sum::<f64>().sqrt();
        match model_axis(step) {
            Some(k) => {
                let sign = step[k].signum();
                let offset = -sign * origin[k] / size;
                let offset = if offset.abs() < 5e-5 { 0.0 } else { offset };
                let letter = ["X", "Y", "Z"][k];
                format!("{name} = {offset:.4} {} {letter} / {}", if sign > 0.0 { "+" } else { "-" }, trim(size))
            }
            None => {
                let unit = step.map(|c| c / size);
                format!(
                    "{name} = ((X, Y, Z) - ({}, {}, {})) . ({:.4}, {:.4}, {:.4}) / {}",
                    trim(origin[0]),
                    trim(origin[1]),
                    trim(origin[2]),
                    unit[0],
                    unit[1],
                    unit[2],
                    trim(size)
                )
            }
        }
    };
    format!("{}, {}", formula("x", meta.view_to_world.x_step), formula("y", meta.view_to_world.y_step))
}

/// The model axis (0, 1, 2 for X, Y, Z) a grid step runs along, where it runs along one.
fn model_axis(step: [f64; 3]) -> Option<usize> {
    let size = step.iter().map(|c| c * c).sum::<f64>().sqrt();
    (0..3).find(|&k| (step[k].abs() - size).abs() < 1e-9 * size.max(1.0))
}

/// A worked example of [`model_to_view`]: the model point at the view point (0.1, 0.9), where
/// a grid about the origin has coordinates below zero, on a plane along the model's axes put
/// on whole mm (tenths for a grid under 20 mm): `the model point (X, Y, Z) = (-42, 0, -38)
/// lies at (x, y) = (0.0999, 0.8999)`. Two relay readers of four converted a negative
/// coordinate with its sign slipped (-52.1 mm written 0.0290 for -0.0210), each costing a
/// candidate.
pub(crate) fn worked_example(meta: &SketchMeta) -> String {
    let map = meta.view_to_world;
    let mut point: [f64; 3] = std::array::from_fn(|k| map.origin[k] + 0.1 * map.x_step[k] + 0.9 * map.y_step[k]);
    if let (Some(i), Some(j)) = (model_axis(map.x_step), model_axis(map.y_step)) {
        let unit = if meta.window.size < 20.0 { 0.1 } else { 1.0 };
        for k in [i, j] {
            point[k] = (point[k] / unit).round() * unit;
        }
    }
    let view = |step: [f64; 3]| {
        let len2: f64 = step.iter().map(|c| c * c).sum();
        (0..3).map(|k| (point[k] - map.origin[k]) * step[k]).sum::<f64>() / len2
    };
    format!(
        "the model point (X, Y, Z) = ({}, {}, {}) lies at (x, y) = ({:.4}, {:.4})",
        trim(point[0]),
        trim(point[1]),
        trim(point[2]),
        view(map.x_step),
        view(map.y_step)
    )
}

/// The view's own map, read the other way: the model point of view point (x, y), one formula
/// per model axis (`X = -51.99 + 100 x, Y = 0, Z = 51.99 - 100 y`). A reader converting its
/// measurements by inverting the other map by hand slipped a sign and lost a step.
pub(crate) fn view_to_model(meta: &SketchMeta) -> String {
    let map = meta.view_to_world;
    let term = |c: f64, name: &str| {
        let size = trim(c.abs());
        if size == "0" { String::new() } else { format!(" {} {size} {name}", if c < 0.0 { "-" } else { "+" }) }
    };
    let formula = |k: usize| {
        let terms = format!("{}{}", term(map.x_step[k], "x"), term(map.y_step[k], "y"));
        let offset = trim(map.origin[k]);
        // Terms start with " + " or " - ": without an offset the first loses its spaces.
        let text = match (offset.as_str(), terms.as_str()) {
            (offset, "") => offset.to_string(),
            ("0", terms) => terms.strip_prefix(" + ").map_or_else(|| format!("-{}", &terms[3..]), str::to_string),
            (offset, terms) => format!("{offset}{terms}"),
        };
        format!("{} = {text}", ["X", "Y", "Z"][k])
    };
    (0..3).map(formula).collect::<Vec<_>>().join(", ")
}

/// A number with up to 4 decimals, without trailing zeros: `100`, `33.25`.
fn trim(x: f64) -> String {
    let text = format!("{x:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".into() } else { text.into() }
}

/// The model direction towards the eye of a sketch view: right x down points away from it.
fn towards_viewer(meta: &SketchMeta) -> [f64; 3] {
    let (a, b) = (meta.view_to_world.x_step, meta.view_to_world.y_step);
    let away = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
    away.map(|x| -x)
}

/// How far outside the [0,1] grid a point may lie under registration (view units).
pub const GRID_SLACK: f64 = 1.0;

/// Stage 2's answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Drawing {
    pub primitives: Vec<Value>,
    #[serde(default)]
    pub constraints: Vec<Value>,
    #[serde(default)]
    pub parameters: Parameters,
}

/// Revised feature parameters, in the units of Stage 1's command: lengths in mm, angles in
/// degrees (never view units: a depth is not drawn).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Parameters {
    pub depth: Option<f64>,
    pub depth2: Option<f64>,
    pub angle: Option<f64>,
}

/// How the drawing's numbers become sketch coordinates.
struct Units<'a> {
    meta: &'a SketchMeta,
    /// LCB on: view coordinates; off: local coordinates already.
    view: bool,
    /// Registration on: points must stay near the grid.
    bounded: bool,
}

impl Units<'_> {
    fn point(&self, v: &Value, what: &str) -> Result<[f64; 2], String> {
        let p: [f64; 2] = serde_json::from_value(v.clone()).map_err(|_| format!("{what} must be [x, y]"))?;
        if !p.iter().all(|x| x.is_finite()) {
            return Err(format!("{what} is not a finite point"));
        }
        if !self.view {
            return Ok(p);
        }
        if self.bounded && p.iter().any(|x| !(-GRID_SLACK..=1.0 + GRID_SLACK).contains(x)) {
            return Err(format!(
                "{what} ({}, {}) is outside the sketch window: view coordinates run from 0 to 1 (at most {GRID_SLACK} beyond)",
                p[0], p[1]
            ));
        }
        Ok(lcb::view_to_local(self.meta, p))
    }

    fn length(&self, x: f64) -> f64 {
        if self.view { lcb::length_to_local(self.meta, x) } else { x }
    }
}

/// The sketch command for a drawing, and what snapping added.
pub fn to_sketch(
    drawing: &Drawing,
    name: &str,
    on: &str,
    meta: &SketchMeta,
    state: &ModelState,
    config: &Config,
) -> Result<(Sketch, Snapped), String> {
    let ab = config.ablations;
    let units = Units { meta, view: !ab.no_lcb, bounded: !ab.no_reg };
    let mut primitives = Vec::new();
    for (i, p) in drawing.primitives.iter().enumerate() {
        let what = |field: &str| format!("primitives[{i}].{field}");
        let get = |field: &str| p.get(field).ok_or_else(|| format!("{} is missing", what(field)));
        let construction = p.get("construction").and_then(Value::as_bool).unwrap_or(false);
        let primitive = match p["type"].as_str() {
            Some("line") => Primitive::Line {
                start: units.point(get("start")?, &what("start"))?,
                end: units.point(get("end")?, &what("end"))?,
                construction,
            },
            Some("arc") => Primitive::Arc {
                start: units.point(get("start")?, &what("start"))?,
                mid: units.point(get("mid")?, &what("mid"))?,
                end: units.point(get("end")?, &what("end"))?,
                construction,
            },
            Some("circle") => {
                let r = get("radius")?.as_f64().filter(|r| r.is_finite() && *r > 0.0);
                Primitive::Circle {
                    center: units.point(get("center")?, &what("center"))?,
                    radius: units.length(r.ok_or_else(|| format!("{} must be a positive number", what("radius")))?),
                    construction,
                }
            }
            other => return Err(format!("primitives[{i}].type {other:?} is not line, arc or circle")),
        };
        primitives.push(primitive);
    }
    let mut constraints = Vec::new();
    for (i, c) in drawing.constraints.iter().enumerate() {
        let mut c = c.clone();
        for key in ["a", "b", "point", "object", "curve", "line"] {
            let Some(text) = c.get(key).and_then(Value::as_str).map(str::to_string) else { continue };
            let ids = resolve_reference(&text, state, ab.no_egr).map_err(|e| format!("constraints[{i}].{key}: {e}"))?;
            let [id] = ids.as_slice() else {
                return Err(format!(
                    "constraints[{i}].{key}: '{text}' names {} entities where one is needed",
                    ids.len()
                ));
            };
            let existing = freecad_bridge::command::split_position(id)
                .0
                .parse::<freecad_bridge::command::EntityId>()
                .is_ok_and(|e| e.kind != freecad_bridge::command::EntityKind::Face);
            if ab.no_pgr && existing {
                return Err(format!(
                    "constraints[{i}].{key}: '{text}' is existing geometry; this run does not tie sketches to it"
                ));
            }
            c[key] = Value::String(id.clone());
        }
        if let Some(v) = c.get("value").and_then(Value::as_f64) {
            c["value"] = units.length(v).into();
        }
        let parsed: Constraint = serde_json::from_value(c).map_err(|e| format!("constraints[{i}]: {e}"))?;
        constraints.push(parsed);
    }
    let mut sketch = Sketch { name: name.into(), on: on.into(), primitives, constraints, auto_coincident: true };
    let snapped = if ab.no_pgr {
        Snapped::default()
    } else {
        // The tolerance is in view units whichever coordinates the model gave.
        let tolerance = lcb::length_to_local(meta, config.snap_tolerance);
        pgr::snap(&mut sketch, &meta.frame, state, tolerance)
    };
    Ok((sketch, snapped))
}

/// PGR's snapping distance in the units the model draws in: view units, or mm without LCB.
fn snap_distance(config: &Config, meta: &SketchMeta) -> String {
    if config.ablations.no_lcb {
        format!("{:.3} mm", lcb::length_to_local(meta, config.snap_tolerance))
    } else {
        format!("{} view units", config.snap_tolerance)
    }
}

/// How far a revision may move one of Stage 1's numbers: further is a unit mistake (view
/// units or metres for mm), not a correction.
pub const MAX_REVISION: f64 = 5.0;

/// The places of revisable numbers in a command (JSON): depths in its extent, its angle.
fn parameter_slot<'a>(command: &'a Value, key: &str) -> Option<&'a Value> {
    match key {
        "angle" => command.get("angle"),
        _ => command.get("extent").and_then(|e| e.get(key)),
    }
}

/// Refuse revised parameters the command has no place for, or that change its number more
/// than [`MAX_REVISION`] times either way, naming the number and the units.
pub fn check_parameters(command: &Value, p: &Parameters) -> Result<(), String> {
    let unit = |key: &str| if key == "angle" { "degrees" } else { "mm" };
    for (key, value) in [("depth", p.depth), ("depth2", p.depth2), ("angle", p.angle)] {
        let Some(value) = value else { continue };
        let Some(current) = parameter_slot(command, key) else {
            return Err(format!(
                "parameters.{key}: the command ({}) has no {key} to revise; leave it out",
                command["op"].as_str().unwrap_or("?")
            ));
        };
        if let Some(current) = current.as_f64().filter(|c| *c > 0.0) {
            let ratio = value / current;
            if !(1.0 / MAX_REVISION..=MAX_REVISION).contains(&ratio) {
                return Err(format!(
                    "parameters.{key} {value} is {} times the command's {current} {}: parameters are in {}, like Stage 1's command (not view units); leave a number out to keep it",
                    fmt_ratio(ratio),
                    unit(key),
                    unit(key)
                ));
            }
        }
    }
    Ok(())
}

fn fmt_ratio(r: f64) -> String {
    if r >= 1.0 { format!("{r:.0}") } else { format!("1/{:.0}", 1.0 / r) }
}

/// Apply revised parameters (checked by [`check_parameters`]) to the command (JSON).
pub fn apply_parameters(command: &mut Value, p: &Parameters) {
    if let Some(extent) = command.get_mut("extent") {
        for (key, value) in [("depth", p.depth), ("depth2", p.depth2)] {
            if let Some(v) = value
                && extent.get(key).is_some()
            {
                extent[key] = v.into();
            }
        }
    }
    if let Some(a) = p.angle
        && command.get("angle").is_some()
    {
        command["angle"] = a.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pad(depth: f64) -> Value {
        serde_json::json!({"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": depth}})
    }

    #[test]
    fn model_directions_read_as_axes_or_components() {
        assert_eq!(axis_name([0.0, 0.0, 2.5]), "+Z");
        assert_eq!(axis_name([0.0, -1.0, 0.0]), "-Y");
        assert_eq!(axis_name([0.6, 0.8, 0.0]), "(0.600, 0.800, 0.000)");
    }

    #[test]
    fn the_model_to_view_map_is_stated_as_formulas_that_invert_the_views_map() {
        let meta = |origin: [f64; 3], x_step: [f64; 3], y_step: [f64; 3]| SketchMeta {
            frame: freecad_bridge::state::Frame {
                origin: [0.0; 3],
                x_axis: [1.0, 0.0, 0.0],
                y_axis: [0.0, 0.0, 1.0],
                normal: [0.0, -1.0, 0.0],
            },
            window: views::Window { u0: 0.0, v0: 0.0, size: 100.0 },
            grid: [75.0, 75.0, 350.0],
            view_to_local: [[100.0, 0.0, 0.0], [0.0, -100.0, 100.0]],
            view_to_world: views::ViewToWorld { origin, x_step, y_step },
            edges: Vec::new(),
        };
        // The XZ plane seen from -Y, S_t's square 100 mm wide and a quarter mm off centre.
        let xz = meta([-51.99, 0.0, 51.99], [100.0, 0.0, 0.0], [0.0, 0.0, -100.0]);
        assert_eq!(model_to_view(&xz), "x = 0.5199 + X / 100, y = 0.5199 - Z / 100");
        // Check by the view's own map: view (0.5199 + 10/100, 0.5199 - 20/100) is X = 10, Z = 20.
        let (vx, vy) = (0.5199 + 0.1, 0.5199 - 0.2);
        let world: Vec<f64> = (0..3)
            .map(|k| xz.view_to_world.origin[k] + vx * 100.0 * [1.0, 0.0, 0.0][k] + vy * [0.0, 0.0, -100.0][k])
            .collect();
        assert!((world[0] - 10.0).abs() < 1e-9 && (world[2] - 20.0).abs() < 1e-9, "{world:?}");
        // An inclined plane: a dot product with the axis.
        let inclined = meta([0.0, 0.0, 0.0], [0.0, 60.0, 80.0], [100.0, 0.0, 0.0]);
        assert_eq!(
            model_to_view(&inclined),
            "x = ((X, Y, Z) - (0, 0, 0)) . (0.0000, 0.6000, 0.8000) / 100, y = 0.0000 + X / 100"
        );
        // And the other way, one formula per model axis: view (0.6199, 0.3199) is X = 10, Z = 20.
        assert_eq!(view_to_model(&xz), "X = -51.99 + 100 x, Y = 0, Z = 51.99 - 100 y");
        assert!((-51.99 + 100.0 * vx - 10.0f64).abs() < 1e-9 && (51.99 - 100.0 * vy - 20.0f64).abs() < 1e-9);
        assert_eq!(view_to_model(&inclined), "X = 100 y, Y = 60 x, Z = 80 x");
        let negative = meta([0.0, 0.0, 0.0], [-100.0, 0.0, 0.0], [0.0, 0.0, 100.0]);
        assert_eq!(view_to_model(&negative), "X = -100 x, Y = 0, Z = 100 y");
        // A worked example, on whole mm, below zero where the grid is about the origin; its
        // view point is the one the formulas give (x = 0.5199 - 42/100, y = 0.5199 + 38/100).
        assert_eq!(worked_example(&xz), "the model point (X, Y, Z) = (-42, 0, -38) lies at (x, y) = (0.0999, 0.8999)");
        assert_eq!(
            worked_example(&negative),
            "the model point (X, Y, Z) = (-10, 0, 90) lies at (x, y) = (0.1000, 0.9000)"
        );
        // An inclined plane's point is not rounded off its plane.
        assert_eq!(
            worked_example(&inclined),
            "the model point (X, Y, Z) = (90, 6, 8) lies at (x, y) = (0.1000, 0.9000)"
        );
    }

    #[test]
    fn a_revision_in_another_unit_is_refused_with_its_reason() {
        // A 6 mm plate revised to 600: a size read in the wrong unit.
        let p = Parameters { depth: Some(600.0), ..Parameters::default() };
        let e = check_parameters(&pad(6.0), &p).expect_err("100x is a unit mistake");
        assert!(e.contains("parameters.depth 600 is 100 times the command's 6 mm") && e.contains("in mm"), "{e}");
        let e = check_parameters(&pad(6.0), &Parameters { depth: Some(0.06), ..Parameters::default() })
            .expect_err("1/100 too");
        assert!(e.contains("1/100 times"), "{e}");
        // A correction within 5x is the model's to make, and goes into the command as given.
        let p = Parameters { depth: Some(7.5), ..Parameters::default() };
        check_parameters(&pad(6.0), &p).expect("a correction");
        let mut command = pad(6.0);
        apply_parameters(&mut command, &p);
        assert_eq!(command["extent"]["depth"], 7.5);
        // A number the command does not have is named, not ignored.
        let e = check_parameters(&pad(6.0), &Parameters { angle: Some(90.0), ..Parameters::default() })
            .expect_err("a pad has no angle");
        assert!(e.contains("parameters.angle") && e.contains("extrude"), "{e}");
    }
}
