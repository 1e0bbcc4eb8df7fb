//! A sketch as the solver left it: the program that is saved is the one that was solved.
//!
//! FreeCAD's sketch solver orders its unknowns by memory address, so where it puts an
//! under-constrained sketch (and which of two equivalent constraints it calls redundant)
//! differs from process to process: the same drawing solved to positions 0.1 mm apart in
//! five runs. A sketch whose primitives already sit where the solver put them gives the
//! solver nothing to move, so every replay of it builds the same part. The engine keeps
//! each executed sketch in this form, and the session logs it so (a replaced worker
//! rebuilds the same document).

use serde_json::Value;

use crate::command::{Command, Primitive, Sketch};
use crate::geometry::{arc_angles, circumcircle};
use crate::protocol::SolvedGeometry;
use crate::session::Executed;

impl Sketch {
    /// This sketch as FreeCAD solved it: each primitive moved to the solver's geometry
    /// (same kind, same direction: a three-point arc keeps its start, a point midway and
    /// its end), and the constraints the solver dropped as redundant (`#n` labels) left
    /// out. Primitives the reply does not cover are kept as they are.
    pub fn as_solved(&self, executed: &Executed) -> Sketch {
        let mut sketch = self.clone();
        for (primitive, solved) in sketch.primitives.iter_mut().zip(&executed.solved) {
            if let Some(solved) = solved {
                settle(primitive, solved);
            }
        }
        let dropped: Vec<usize> = executed.dropped.iter().filter_map(|l| l.strip_prefix('#')?.parse().ok()).collect();
        let mut index = 0;
        sketch.constraints.retain(|_| {
            let keep = !dropped.contains(&index);
            index += 1;
            keep
        });
        sketch
    }
}

impl Command {
    /// A sketch [`Sketch::as_solved`]; any other command as it is.
    pub fn as_solved(&self, executed: &Executed) -> Command {
        match self {
            Command::Sketch(sketch) => Command::Sketch(sketch.as_solved(executed)),
            other => other.clone(),
        }
    }
}

fn settle(primitive: &mut Primitive, solved: &SolvedGeometry) {
    match (primitive, *solved) {
        (Primitive::Line { start, end, .. }, SolvedGeometry::Line([x1, y1, x2, y2])) => {
            *start = [x1, y1];
            *end = [x2, y2];
        }
        (Primitive::Circle { center, radius, .. }, SolvedGeometry::Circle([cx, cy, r])) => {
            *center = [cx, cy];
            *radius = r;
        }
        (
            Primitive::CenterArc { center, radius, start_angle, end_angle, .. },
            SolvedGeometry::Arc([cx, cy, r, a0, a1]),
        ) => {
            *center = [cx, cy];
            *radius = r;
            *start_angle = a0.to_degrees();
            *end_angle = a1.to_degrees();
        }
        (Primitive::Arc { start, mid, end, .. }, SolvedGeometry::Arc([cx, cy, r, a0, a1])) => {
            let at = |a: f64| [cx + r * a.cos(), cy + r * a.sin()];
            // Sketcher stores arcs counter-clockwise: one drawn clockwise has its ends swapped.
            let clockwise = is_clockwise(*start, *mid, *end);
            let (first, last) = if clockwise { (at(a1), at(a0)) } else { (at(a0), at(a1)) };
            *start = first;
            *mid = at((a0 + a1) / 2.0);
            *end = last;
        }
        // A kind the solver cannot change: nothing to settle.
        _ => {}
    }
}

/// Whether the arc from `start` through `mid` to `end` turns clockwise (as lowering reads it).
pub(crate) fn is_clockwise(start: [f64; 2], mid: [f64; 2], end: [f64; 2]) -> bool {
    circumcircle(start, mid, end).is_some_and(|(center, _)| arc_angles(start, mid, end, center).1 < 0.0)
}

/// A logged `execute` request made to say what was solved: its sketch geometry replaced by
/// the reply's `solved` and the reply's `dropped` constraints removed, so a replay of the
/// log sends the solved sketch.
pub(crate) fn settle_logged(request: &mut Value, reply: &Value) {
    let Some(command) = request.get_mut("command") else { return };
    if let (Some(geometry), Some(solved)) =
        (command.get_mut("geometry").and_then(Value::as_array_mut), reply.get("solved").and_then(Value::as_array))
    {
        for (geo, solved) in geometry.iter_mut().zip(solved) {
            let (Some(geo), Some(solved)) = (geo.as_object_mut(), solved.as_object()) else { continue };
            for (kind, numbers) in solved {
                if geo.contains_key(kind) {
                    geo.insert(kind.clone(), numbers.clone());
                }
            }
        }
    }
    let dropped: Vec<&str> = reply
        .get("dropped")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |d| d.iter().filter_map(Value::as_str).collect());
    if dropped.is_empty() {
        return;
    }
    if let Some(constraints) = command.get_mut("constraints").and_then(Value::as_array_mut) {
        // `auto` labels several ties; the worker names each dropped one once, in order.
        let mut remaining = dropped;
        constraints.retain(|c| {
            let label = c.get("label").and_then(Value::as_str).unwrap_or("");
            match remaining.iter().position(|d| *d == label) {
                Some(i) => {
                    remaining.remove(i);
                    false
                }
                None => true,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sketch() -> Sketch {
        serde_json::from_value(json!({
            "name": "S1", "on": "XY",
            "primitives": [
                {"type": "line", "start": [0, 0], "end": [10, 0.2]},
                {"type": "arc", "start": [10, 0], "mid": [11, 5], "end": [10, 10]},
                {"type": "arc", "start": [0, 0], "mid": [-1, 5], "end": [0, 10]},
                {"type": "center_arc", "center": [5, 5], "radius": 2, "start_angle": 0, "end_angle": 90},
                {"type": "circle", "center": [5, 5], "radius": 1}],
            "constraints": [{"type": "horizontal", "line": "g0"}, {"type": "radius", "curve": "g4", "value": 1},
                            {"type": "vertical", "line": "g0"}]
        }))
        .expect("sketch")
    }

    #[test]
    fn a_solved_sketch_takes_the_solvers_numbers_in_its_own_forms() {
        let quarter = std::f64::consts::FRAC_PI_2;
        let executed = Executed {
            feature: Some("S1".into()),
            frame: None,
            dropped: vec!["#2".into()],
            solved: vec![
                Some(SolvedGeometry::Line([0.0, 0.0, 10.0, 0.0])),
                Some(SolvedGeometry::Arc([10.0, 5.0, 5.0, -quarter, quarter])),
                // Drawn clockwise (bottom, left, top): Sketcher holds it from top to bottom.
                Some(SolvedGeometry::Arc([0.0, 5.0, 5.0, quarter, 3.0 * quarter])),
                Some(SolvedGeometry::Arc([5.0, 5.0, 2.5, 0.0, quarter])),
                None,
            ],
        };
        let solved = sketch().as_solved(&executed);
        let close = |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).abs() < 1e-12 && (a[1] - b[1]).abs() < 1e-12;
        match &solved.primitives[0] {
            Primitive::Line { start, end, .. } => assert_eq!((*start, *end), ([0.0, 0.0], [10.0, 0.0])),
            other => panic!("{other:?}"),
        }
        match &solved.primitives[1] {
            Primitive::Arc { start, mid, end, .. } => {
                assert!(close(*start, [10.0, 0.0]) && close(*mid, [15.0, 5.0]) && close(*end, [10.0, 10.0]));
                assert!(!is_clockwise(*start, *mid, *end));
            }
            other => panic!("{other:?}"),
        }
        match &solved.primitives[2] {
            Primitive::Arc { start, mid, end, .. } => {
                assert!(
                    close(*start, [0.0, 0.0]) && close(*mid, [-5.0, 5.0]) && close(*end, [0.0, 10.0]),
                    "{start:?} {mid:?} {end:?}"
                );
                assert!(is_clockwise(*start, *mid, *end), "the drawing's direction is kept");
            }
            other => panic!("{other:?}"),
        }
        match &solved.primitives[3] {
            Primitive::CenterArc { radius, start_angle, end_angle, .. } => {
                assert_eq!(*radius, 2.5);
                assert!(start_angle.abs() < 1e-12 && (end_angle - 90.0).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(solved.primitives[4], sketch().primitives[4], "not covered: kept");
        assert_eq!(solved.constraints.len(), 2, "the dropped #2 is gone");
        assert_eq!(solved.constraints[..], sketch().constraints[..2]);
    }

    #[test]
    fn a_logged_request_is_settled_in_place() {
        let mut request = json!({"type": "execute", "command": {"op": "sketch", "name": "S1",
            "geometry": [{"line": [0, 0, 1, 1], "construction": true}, {"circle": [0, 0, 1], "construction": false}],
            "constraints": [{"kind": "Horizontal", "label": "#0"}, {"kind": "Coincident", "label": "auto"},
                            {"kind": "Coincident", "label": "auto"}]}});
        let reply = json!({"solved": [{"line": [0, 0, 2, 0]}, null], "dropped": ["auto"]});
        settle_logged(&mut request, &reply);
        assert_eq!(request["command"]["geometry"][0], json!({"line": [0, 0, 2, 0], "construction": true}));
        assert_eq!(request["command"]["geometry"][1], json!({"circle": [0, 0, 1], "construction": false}));
        assert_eq!(request["command"]["constraints"].as_array().map(Vec::len), Some(2), "one auto tie went");
    }
}
