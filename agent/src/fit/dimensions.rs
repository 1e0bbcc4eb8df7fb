//! The drawing's stated dimensions follow the fitted geometry: a fitted sketch keeps every
//! constraint, and the solver would pull the numbers back to the reader's wherever a stated
//! value still holds them there. Radii and lengths are measured on the sketch's own
//! primitives; a distance may name existing geometry (a window tied 5 mm from each outer
//! edge of a plate), which is measured in the sketch's coordinates: the model's edges and
//! vertices projected onto its plane.

use freecad_bridge::command::{Constraint, CurveRef, EntityId, EntityKind, PointPos, PointRef, Primitive, Sketch};
use freecad_bridge::geometry::circumcircle;
use freecad_bridge::state::{EdgeKind, Frame, ModelState};

/// The model a sketch is drawn on and the sketch's frame.
#[derive(Debug, Clone, Copy)]
pub struct Existing<'a> {
    pub state: &'a ModelState,
    pub frame: &'a Frame,
}

impl Existing<'_> {
    /// An edge's point, in the sketch's coordinates.
    fn edge_point(&self, id: EntityId, pos: PointPos) -> Option<[f64; 2]> {
        let edge = self.state.edge(id)?;
        let p = match pos {
            PointPos::Start => edge.start?,
            PointPos::End => edge.end?,
            PointPos::Center => edge.center?,
        };
        Some(self.frame.to_local(p))
    }

    fn vertex(&self, id: EntityId) -> Option<[f64; 2]> {
        let i = self.state.position(id).filter(|_| id.kind == EntityKind::Vertex)?;
        Some(self.frame.to_local(self.state.vertices[i].point))
    }

    /// A straight edge through two of its points, in the sketch's coordinates.
    fn line(&self, id: EntityId) -> Option<([f64; 2], [f64; 2])> {
        let edge = self.state.edge(id).filter(|e| e.kind == EdgeKind::Line)?;
        Some((self.frame.to_local(edge.start?), self.frame.to_local(edge.end?)))
    }
}

/// Where a constraint's point is: the sketch's own, or the model's when `existing` is known.
pub(super) fn point(at: &PointRef, primitives: &[Primitive], existing: Option<Existing<'_>>) -> Option<[f64; 2]> {
    match *at {
        PointRef::Own(index, pos) => own_point(primitives.get(index)?, pos),
        PointRef::Edge(id, pos) => existing?.edge_point(id, pos),
        PointRef::Vertex(id) => existing?.vertex(id),
        PointRef::Origin => Some([0.0, 0.0]),
    }
}

/// A constraint's straight line, through two of its points.
pub(super) fn line(
    at: &CurveRef,
    primitives: &[Primitive],
    existing: Option<Existing<'_>>,
) -> Option<([f64; 2], [f64; 2])> {
    match *at {
        CurveRef::Own(index) => match primitives.get(index)? {
            Primitive::Line { start, end, .. } => Some((*start, *end)),
            _ => None,
        },
        CurveRef::Edge(id) => existing?.line(id),
        CurveRef::HAxis => Some(([0.0, 0.0], [1.0, 0.0])),
        CurveRef::VAxis => Some(([0.0, 0.0], [0.0, 1.0])),
    }
}

fn own_point(primitive: &Primitive, pos: PointPos) -> Option<[f64; 2]> {
    let on_circle = |c: [f64; 2], r: f64, degrees: f64| {
        let a = degrees.to_radians();
        [c[0] + r * a.cos(), c[1] + r * a.sin()]
    };
    match (primitive, pos) {
        (Primitive::Line { start, .. } | Primitive::Arc { start, .. }, PointPos::Start) => Some(*start),
        (Primitive::Line { end, .. } | Primitive::Arc { end, .. }, PointPos::End) => Some(*end),
        (Primitive::Arc { start, mid, end, .. }, PointPos::Center) => Some(circumcircle(*start, *mid, *end)?.0),
        (Primitive::Circle { center, .. } | Primitive::CenterArc { center, .. }, PointPos::Center) => Some(*center),
        (Primitive::CenterArc { center, radius, start_angle, .. }, PointPos::Start) => {
            Some(on_circle(*center, *radius, *start_angle))
        }
        (Primitive::CenterArc { center, radius, end_angle, .. }, PointPos::End) => {
            Some(on_circle(*center, *radius, *end_angle))
        }
        _ => None,
    }
}

/// Set `sketch`'s stated radii, lengths and distances to what its (fitted) primitives
/// measure. Distances that name existing geometry need `existing`; without it, or where a
/// named entity is not found, the value is left as stated.
pub fn follow_geometry(sketch: &mut Sketch, existing: Option<Existing<'_>>) {
    let primitives = sketch.primitives.clone();
    let point = |at: &PointRef| point(at, &primitives, existing);
    for constraint in &mut sketch.constraints {
        match constraint {
            Constraint::Radius { curve: CurveRef::Own(index), value } => match primitives.get(*index) {
                Some(Primitive::Circle { radius, .. } | Primitive::CenterArc { radius, .. }) => *value = *radius,
                Some(Primitive::Arc { start, mid, end, .. }) => {
                    if let Some((_, r)) = circumcircle(*start, *mid, *end) {
                        *value = r;
                    }
                }
                _ => {}
            },
            Constraint::Length { line: CurveRef::Own(index), value } => {
                if let Some(Primitive::Line { start, end, .. }) = primitives.get(*index) {
                    *value = (end[0] - start[0]).hypot(end[1] - start[1]);
                }
            }
            Constraint::Distance { a, b, value } => {
                if let (Some(p), Some(q)) = (point(a), point(b)) {
                    set_positive(value, (q[0] - p[0]).hypot(q[1] - p[1]));
                }
            }
            Constraint::DistanceToLine { point: at, line, value } => {
                if let (Some(p), Some((a, b))) = (point(at), self::line(line, &primitives, existing)) {
                    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
                    let length = dx.hypot(dy);
                    if length > 1e-12 {
                        set_positive(value, ((p[0] - a[0]) * dy - (p[1] - a[1]) * dx).abs() / length);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A distance of zero is no dimension FreeCAD keeps (the point is on the line): the stated
/// value stays, and the rebuilt candidate shows whether the fit still lands.
fn set_positive(value: &mut f64, measured: f64) {
    if measured > 1e-9 {
        *value = measured;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freecad_bridge::state::Edge;

    /// A plate's outer edge E1 along the model's x axis at y = 0, and a sketch on a frame
    /// shifted by (10, 20): the edge is the sketch's line v = -20.
    fn plate() -> (ModelState, Frame) {
        let mut state = ModelState::empty();
        state.edges.push(Edge::straight("E1", [0.0, 0.0, 5.0], [100.0, 0.0, 5.0]));
        let frame = Frame {
            origin: [10.0, 20.0, 5.0],
            x_axis: [1.0, 0.0, 0.0],
            y_axis: [0.0, 1.0, 0.0],
            normal: [0.0, 0.0, 1.0],
        };
        (state, frame)
    }

    fn window(bottom: f64) -> Sketch {
        let json = serde_json::json!({"name": "S2", "on": "F1", "primitives": [
            {"type": "line", "start": [0.0, bottom], "end": [30.0, bottom]},
            {"type": "circle", "center": [15.0, 10.0], "radius": 4.0}],
            "constraints": [
                {"type": "distance_to_line", "point": "g0.start", "line": "E1", "value": 5.0},
                {"type": "distance", "a": "g1.center", "b": "origin", "value": 18.0},
                {"type": "length", "line": "g0", "value": 30.0}]});
        serde_json::from_value(json).expect("a sketch")
    }

    #[test]
    fn a_distance_tied_to_an_existing_edge_follows_the_fitted_line() {
        let (state, frame) = plate();
        // Drawn 5 mm above the edge (v = -15); fitted 1.5 mm higher and 2 mm shorter.
        let mut fitted = window(-13.5);
        fitted.primitives[0] = Primitive::Line { start: [1.0, -13.5], end: [29.0, -13.5], construction: false };
        follow_geometry(&mut fitted, Some(Existing { state: &state, frame: &frame }));
        let values: Vec<f64> = fitted
            .constraints
            .iter()
            .map(|c| match c {
                Constraint::DistanceToLine { value, .. }
                | Constraint::Distance { value, .. }
                | Constraint::Length { value, .. } => *value,
                _ => f64::NAN,
            })
            .collect();
        assert!((values[0] - 6.5).abs() < 1e-9, "{values:?}");
        assert!((values[1] - (15.0f64).hypot(10.0)).abs() < 1e-9, "{values:?}");
        assert!((values[2] - 28.0).abs() < 1e-9, "{values:?}");
        // Without the model, a tie to its edge keeps the stated value.
        let mut unknown = window(-13.5);
        follow_geometry(&mut unknown, None);
        assert!(matches!(unknown.constraints[0], Constraint::DistanceToLine { value, .. } if value == 5.0));
    }
}
