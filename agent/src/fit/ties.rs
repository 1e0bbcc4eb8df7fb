//! The drawing's own constraints, kept while the fit's search moves its numbers.
//!
//! Readers constrain most sketches: a window `parallel` to a plate's edges, slots of `equal`
//! width, a line `horizontal`, a hole's centre on an edge. The picture model moved each point
//! on its own, so the solver, enforcing those constraints in the rebuilt candidate, put the
//! feature elsewhere (a reader's window: 1.76 -> 0.54 px proposed, 1.67 -> 1.52 px rebuilt,
//! dropped). Here every geometric constraint is a residual on the search's numbers, and each
//! move the search tries is settled onto them before it is scored: the nearest numbers (least
//! squares) that keep every residual at zero, found by Gauss-Newton steps of least norm. A
//! move that breaks a constraint is then a move of everything tied to it: one end of a
//! horizontal line moved up lifts the whole line.
//!
//! Dimensional constraints (radius, length, distance, distance to a line) are not kept: they
//! are the sizes the fit is there to measure, and they follow the fitted geometry
//! ([`super::dimensions`]).

use freecad_bridge::command::{Constraint, CurveRef, PointPos, PointRef, Sketch};
use freecad_bridge::geometry::circumcircle;
use nalgebra::{DMatrix, DVector};

use super::dimensions::Existing;
use super::sketch::{Numbers, Shape};

/// A residual this small (as a share of the drawing's size) is met.
const MET: f64 = 1e-9;
/// A constraint is kept where the drawing as solved meets it to this (share of its size).
const HELD: f64 = 1e-6;
/// Settling gives up after this many Gauss-Newton steps: the move asked for something the
/// constraints cannot give near where the drawing is.
const MAX_STEPS: usize = 12;

/// A point of the drawing as the numbers give it.
#[derive(Debug, Clone, Copy)]
enum Point {
    Number(usize),
    /// The model's geometry, or the sketch's origin: it does not move.
    Fixed([f64; 2]),
    /// A centre-form arc's end: its centre and radius are numbers, its angle (degrees) is not.
    OnCircle {
        c: usize,
        r: usize,
        degrees: f64,
    },
    /// A three-point arc's centre.
    ArcCentre {
        a: usize,
        m: usize,
        b: usize,
    },
}

/// A radius as the numbers give it.
#[derive(Debug, Clone, Copy)]
enum Radius {
    Number(usize),
    Arc {
        a: usize,
        m: usize,
        b: usize,
    },
    /// A radius the search measured already: it does not move.
    Fixed(f64),
}

#[derive(Debug, Clone, Copy)]
enum Curve {
    Segment(Point, Point),
    Round(Point, Radius),
}

impl Point {
    fn at(self, n: &Numbers) -> [f64; 2] {
        match self {
            Point::Number(i) => n.points[i],
            Point::Fixed(p) => p,
            Point::OnCircle { c, r, degrees } => {
                let (s, co) = degrees.to_radians().sin_cos();
                [n.points[c][0] + n.radii[r] * co, n.points[c][1] + n.radii[r] * s]
            }
            Point::ArcCentre { a, m, b } => {
                circumcircle(n.points[a], n.points[m], n.points[b]).map_or([f64::NAN; 2], |(c, _)| c)
            }
        }
    }
}

impl Radius {
    fn at(self, n: &Numbers) -> f64 {
        match self {
            Radius::Number(i) => n.radii[i],
            Radius::Arc { a, m, b } => circumcircle(n.points[a], n.points[m], n.points[b]).map_or(f64::NAN, |(_, r)| r),
            Radius::Fixed(r) => r,
        }
    }
}

/// One residual row: zero where the constraint holds.
#[derive(Debug, Clone, Copy)]
enum Row {
    /// A coordinate (0: x, 1: y) of two points agrees.
    Same(Point, Point, usize),
    /// A point lies on a straight line (signed distance).
    OnLine(Point, Point, Point),
    /// A point lies on a circle.
    OnCircle(Point, Point, Radius),
    EqualLength(Point, Point, Point, Point),
    EqualRadius(Radius, Radius),
    /// The sine of the angle between two lines.
    Parallel(Point, Point, Point, Point),
    /// Its cosine.
    Perpendicular(Point, Point, Point, Point),
    /// A line's rise (0) or run (1).
    Square(Point, Point, usize),
    /// A line touches a circle.
    LineTangent(Point, Point, Point, Radius),
    /// Two circles touch, outside (`false`) or inside (`true`).
    CircleTangent(Point, Radius, Point, Radius, bool),
    /// A coordinate of a point midway between two others.
    Midpoint(Point, Point, Point, usize),
}

fn unit(p: [f64; 2], q: [f64; 2]) -> [f64; 2] {
    let (dx, dy) = (q[0] - p[0], q[1] - p[1]);
    let l = dx.hypot(dy).max(1e-12);
    [dx / l, dy / l]
}

fn distance(p: [f64; 2], q: [f64; 2]) -> f64 {
    (q[0] - p[0]).hypot(q[1] - p[1])
}

impl Row {
    fn value(self, n: &Numbers) -> f64 {
        match self {
            Row::Same(a, b, axis) => a.at(n)[axis] - b.at(n)[axis],
            Row::OnLine(p, a, b) => {
                let (p, a, d) = (p.at(n), a.at(n), unit(a.at(n), b.at(n)));
                (p[0] - a[0]) * d[1] - (p[1] - a[1]) * d[0]
            }
            Row::OnCircle(p, c, r) => distance(p.at(n), c.at(n)) - r.at(n),
            Row::EqualLength(a, b, c, d) => distance(a.at(n), b.at(n)) - distance(c.at(n), d.at(n)),
            Row::EqualRadius(a, b) => a.at(n) - b.at(n),
            Row::Parallel(a, b, c, d) => {
                let (u, v) = (unit(a.at(n), b.at(n)), unit(c.at(n), d.at(n)));
                u[0] * v[1] - u[1] * v[0]
            }
            Row::Perpendicular(a, b, c, d) => {
                let (u, v) = (unit(a.at(n), b.at(n)), unit(c.at(n), d.at(n)));
                u[0] * v[0] + u[1] * v[1]
            }
            Row::Square(a, b, axis) => b.at(n)[1 - axis] - a.at(n)[1 - axis],
            Row::LineTangent(a, b, c, r) => {
                let (a, d, c) = (a.at(n), unit(a.at(n), b.at(n)), c.at(n));
                ((c[0] - a[0]) * d[1] - (c[1] - a[1]) * d[0]).abs() - r.at(n)
            }
            Row::CircleTangent(c1, r1, c2, r2, inside) => {
                let gap = distance(c1.at(n), c2.at(n));
                if inside { gap - (r1.at(n) - r2.at(n)).abs() } else { gap - (r1.at(n) + r2.at(n)) }
            }
            Row::Midpoint(p, a, b, axis) => p.at(n)[axis] - 0.5 * (a.at(n)[axis] + b.at(n)[axis]),
        }
    }
}

/// The drawing's geometric constraints as residuals on the search's numbers.
#[derive(Debug, Clone)]
pub(super) struct Ties {
    rows: Vec<Row>,
    /// The drawing's size: residuals and steps are measured against it.
    scale: f64,
}

impl Ties {
    /// The geometric constraints of `sketch` (whose primitives are `shapes` over numbers
    /// `n`), the coincidences the worker adds where a centre-form arc's end meets another
    /// primitive, and ties to the model's geometry where `existing` names it. A constraint
    /// naming something unknown is left out (the rebuilt candidate shows whether it holds).
    pub(super) fn of(sketch: &Sketch, shapes: &[(usize, Shape)], n: &Numbers, existing: Option<Existing<'_>>) -> Ties {
        let shape_of = |k: usize| shapes.iter().find(|(index, _)| *index == k).map(|(_, s)| *s);
        let point = |at: &PointRef| -> Option<Point> {
            match *at {
                PointRef::Own(k, pos) => match (shape_of(k)?, pos) {
                    (Shape::Line { a, .. } | Shape::Arc { a, .. }, PointPos::Start) => Some(Point::Number(a)),
                    (Shape::Line { b, .. } | Shape::Arc { b, .. }, PointPos::End) => Some(Point::Number(b)),
                    (Shape::Arc { a, m, b }, PointPos::Center) => Some(Point::ArcCentre { a, m, b }),
                    (Shape::CenterArc { c, .. } | Shape::Circle { c, .. }, PointPos::Center) => Some(Point::Number(c)),
                    (Shape::CenterArc { c, r, from, .. }, PointPos::Start) => {
                        Some(Point::OnCircle { c, r, degrees: from })
                    }
                    (Shape::CenterArc { c, r, to, .. }, PointPos::End) => Some(Point::OnCircle { c, r, degrees: to }),
                    _ => None,
                },
                _ => super::dimensions::point(at, &sketch.primitives, existing).map(Point::Fixed),
            }
        };
        let curve = |at: &CurveRef| -> Option<Curve> {
            match *at {
                CurveRef::Own(k) => Some(match shape_of(k)? {
                    Shape::Line { a, b } => Curve::Segment(Point::Number(a), Point::Number(b)),
                    Shape::Arc { a, m, b } => Curve::Round(Point::ArcCentre { a, m, b }, Radius::Arc { a, m, b }),
                    Shape::CenterArc { c, r, .. } | Shape::Circle { c, r } => {
                        Curve::Round(Point::Number(c), Radius::Number(r))
                    }
                }),
                _ => {
                    let (a, b) = super::dimensions::line(at, &sketch.primitives, existing)?;
                    Some(Curve::Segment(Point::Fixed(a), Point::Fixed(b)))
                }
            }
        };
        let mut rows = Vec::new();
        for constraint in &sketch.constraints {
            rows.extend(rows_of(constraint, &point, &curve, n));
        }
        // The worker ties primitives' ends where they meet; a line's and a three-point arc's
        // ends are shared numbers already, a centre-form arc's ends are not.
        let ends: Vec<Point> = shapes
            .iter()
            .flat_map(|(_, shape)| match *shape {
                Shape::Line { a, b } | Shape::Arc { a, b, .. } => vec![Point::Number(a), Point::Number(b)],
                Shape::CenterArc { c, r, from, to } => {
                    vec![Point::OnCircle { c, r, degrees: from }, Point::OnCircle { c, r, degrees: to }]
                }
                Shape::Circle { .. } => Vec::new(),
            })
            .collect();
        let scale = n.points.iter().flatten().chain(&n.radii).fold(1.0f64, |m, v| m.max(v.abs()));
        if sketch.auto_coincident {
            for (i, &p) in ends.iter().enumerate() {
                for &q in &ends[i + 1..] {
                    let arc_end = |x: Point| matches!(x, Point::OnCircle { .. });
                    if (arc_end(p) || arc_end(q)) && distance(p.at(n), q.at(n)) <= 1e-6 * scale {
                        rows.extend([Row::Same(p, q, 0), Row::Same(p, q, 1)]);
                    }
                }
            }
        }
        // A constraint the drawing does not meet as solved (the solver gave up on it, or it
        // names nothing that moves and does not hold) is not the search's to keep.
        rows.retain(|row| row.value(n).abs() <= HELD * scale);
        Ties { rows, scale }
    }

    /// These ties and the drawing made regular ([`super::regular`]): lines level or
    /// upright, centres one, radii one.
    pub(super) fn with_regular(&self, regular: &super::regular::Regular) -> Ties {
        let centre = |c: super::regular::Centre| match c {
            super::regular::Centre::Point(i) => Point::Number(i),
            super::regular::Centre::Arc { a, m, b } => Point::ArcCentre { a, m, b },
            super::regular::Centre::Fixed(p) => Point::Fixed(p),
        };
        let mut rows = self.rows.clone();
        rows.extend(regular.square.iter().map(|&(a, b, axis)| Row::Square(Point::Number(a), Point::Number(b), axis)));
        for &(x, y) in &regular.concentric {
            rows.extend([Row::Same(centre(x), centre(y), 0), Row::Same(centre(x), centre(y), 1)]);
        }
        // Both radii held at the measured one's value: tied as two numbers, a hole left at
        // 0.16 mm pulled the one measured at 1.40 to 0.78 with it (test100 00763349).
        for e in &regular.equal {
            let value = Radius::Fixed(e.radius);
            rows.extend([
                Row::EqualRadius(Radius::Number(e.left), value),
                Row::EqualRadius(Radius::Number(e.measured), value),
            ]);
        }
        Ties { rows, scale: self.scale }
    }

    /// These ties and each line (two points) touching the three-point arc (its three points)
    /// it meets: a pipe's path drawn smooth by eye ([`super::path`]).
    pub(super) fn with_tangents(&self, pairs: &[([usize; 2], [usize; 3])]) -> Ties {
        let mut rows = self.rows.clone();
        rows.extend(pairs.iter().map(|&([p, q], [a, m, b])| {
            Row::LineTangent(Point::Number(p), Point::Number(q), Point::ArcCentre { a, m, b }, Radius::Arc { a, m, b })
        }));
        Ties { rows, scale: self.scale }
    }

    /// These ties and coordinate `axis` of point `point` held at `value`.
    pub(super) fn with_held(&self, point: usize, axis: usize, value: f64) -> Ties {
        let mut rows = self.rows.clone();
        rows.push(Row::Same(Point::Number(point), Point::Fixed([value; 2]), axis));
        Ties { rows, scale: self.scale }
    }

    fn residuals(&self, n: &Numbers) -> DVector<f64> {
        DVector::from_iterator(self.rows.len(), self.rows.iter().map(|r| r.value(n)))
    }

    /// The numbers nearest `n` that keep every constraint, or `None` when none are found near
    /// it. The depth factor is no constraint's business and stays.
    pub(super) fn settle(&self, mut n: Numbers) -> Option<Numbers> {
        if self.rows.is_empty() {
            return Some(n);
        }
        let met = MET * self.scale;
        let vars = 2 * n.points.len() + n.radii.len();
        let get = |n: &Numbers, j: usize| {
            if j < 2 * n.points.len() { n.points[j / 2][j % 2] } else { n.radii[j - 2 * n.points.len()] }
        };
        let set = |n: &mut Numbers, j: usize, v: f64| {
            if j < 2 * n.points.len() {
                n.points[j / 2][j % 2] = v;
            } else {
                let k = j - 2 * n.points.len();
                n.radii[k] = v;
            }
        };
        let h = 1e-7 * self.scale;
        for _ in 0..MAX_STEPS {
            let g = self.residuals(&n);
            if !g.iter().all(|v| v.is_finite()) {
                return None;
            }
            if g.amax() <= met {
                return Some(n);
            }
            let mut jacobian = DMatrix::zeros(self.rows.len(), vars);
            for j in 0..vars {
                let v = get(&n, j);
                set(&mut n, j, v + h);
                let moved = self.residuals(&n);
                set(&mut n, j, v);
                jacobian.set_column(j, &((moved - &g) / h));
            }
            // The step of least norm that zeroes the linearised residuals; redundant rows
            // (two ways of saying one thing) fall out of the pseudo-inverse.
            let step = jacobian.svd(true, true).solve(&g, 1e-10).ok()?;
            for j in 0..vars {
                let v = get(&n, j);
                set(&mut n, j, v - step[j]);
            }
        }
        (self.residuals(&n).amax() <= met).then_some(n)
    }
}

/// The residual rows of one constraint; none for a dimension or for what cannot be resolved.
fn rows_of(
    constraint: &Constraint,
    point: &dyn Fn(&PointRef) -> Option<Point>,
    curve: &dyn Fn(&CurveRef) -> Option<Curve>,
    n: &Numbers,
) -> Vec<Row> {
    let same = |a: Point, b: Point| vec![Row::Same(a, b, 0), Row::Same(a, b, 1)];
    let resolved = || -> Option<Vec<Row>> {
        Some(match constraint {
            Constraint::Coincident { a, b } => match (point(a)?, point(b)?) {
                (Point::Number(i), Point::Number(j)) if i == j => Vec::new(),
                (a, b) => same(a, b),
            },
            Constraint::PointOnObject { point: p, object } => match curve(object)? {
                Curve::Segment(a, b) => vec![Row::OnLine(point(p)?, a, b)],
                Curve::Round(c, r) => vec![Row::OnCircle(point(p)?, c, r)],
            },
            Constraint::Concentric { a, b } => match (curve(a)?, curve(b)?) {
                (Curve::Round(c1, _), Curve::Round(c2, _)) => same(c1, c2),
                _ => return None,
            },
            Constraint::Equal { a, b } => match (curve(a)?, curve(b)?) {
                (Curve::Segment(p, q), Curve::Segment(r, s)) => vec![Row::EqualLength(p, q, r, s)],
                (Curve::Round(_, r1), Curve::Round(_, r2)) => vec![Row::EqualRadius(r1, r2)],
                _ => return None,
            },
            Constraint::Parallel { a, b } | Constraint::Perpendicular { a, b } => match (curve(a)?, curve(b)?) {
                (Curve::Segment(p, q), Curve::Segment(r, s)) => {
                    if matches!(constraint, Constraint::Parallel { .. }) {
                        vec![Row::Parallel(p, q, r, s)]
                    } else {
                        vec![Row::Perpendicular(p, q, r, s)]
                    }
                }
                _ => return None,
            },
            Constraint::Horizontal { line } | Constraint::Vertical { line } => match curve(line)? {
                Curve::Segment(a, b) => {
                    vec![Row::Square(a, b, usize::from(matches!(constraint, Constraint::Vertical { .. })))]
                }
                Curve::Round(..) => return None,
            },
            Constraint::Tangent { a, b } => match (curve(a)?, curve(b)?) {
                (Curve::Segment(p, q), Curve::Round(c, r)) | (Curve::Round(c, r), Curve::Segment(p, q)) => {
                    vec![Row::LineTangent(p, q, c, r)]
                }
                (Curve::Round(c1, r1), Curve::Round(c2, r2)) => {
                    // Inside or outside: whichever the drawing shows.
                    let gap = distance(c1.at(n), c2.at(n));
                    let inside = (gap - (r1.at(n) - r2.at(n)).abs()).abs() < (gap - (r1.at(n) + r2.at(n))).abs();
                    vec![Row::CircleTangent(c1, r1, c2, r2, inside)]
                }
                _ => return None,
            },
            Constraint::Midpoint { point: p, a, b } => {
                let (p, a, b) = (point(p)?, point(a)?, point(b)?);
                vec![Row::Midpoint(p, a, b, 0), Row::Midpoint(p, a, b, 1)]
            }
            Constraint::Distance { .. }
            | Constraint::DistanceToLine { .. }
            | Constraint::Length { .. }
            | Constraint::Radius { .. } => Vec::new(),
        })
    };
    resolved().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::sketch::numbers_of;

    /// A sketch from its JSON form.
    fn sketch(json: serde_json::Value) -> Sketch {
        serde_json::from_value(json).expect("a sketch")
    }

    fn ties(s: &Sketch) -> (Ties, Numbers) {
        let (n, shapes) = numbers_of(s);
        (Ties::of(s, &shapes, &n, None), n)
    }

    #[test]
    fn one_end_of_a_horizontal_line_moved_up_lifts_the_line() {
        let s = sketch(serde_json::json!({"name": "S1", "on": "XY", "primitives": [
            {"type": "line", "start": [0.0, 0.0], "end": [10.0, 0.0]}],
            "constraints": [{"type": "horizontal", "line": "g0"}]}));
        let (ties, mut n) = ties(&s);
        n.points[1][1] = 1.0;
        let settled = ties.settle(n).expect("settles");
        // The nearest numbers that keep it level: each end half way.
        assert!((settled.points[0][1] - 0.5).abs() < 1e-9 && (settled.points[1][1] - 0.5).abs() < 1e-9, "{settled:?}");
        assert!((settled.points[1][0] - 10.0).abs() < 1e-9);
    }

    #[test]
    fn equal_parallel_slots_stay_equal_and_parallel_and_an_unmet_constraint_is_not_kept() {
        // Two slots' long sides: equal and parallel. A third constraint, `vertical` on the
        // first side, the drawing does not meet (the solver dropped it): not kept.
        let s = sketch(serde_json::json!({"name": "S1", "on": "XY", "primitives": [
            {"type": "line", "start": [0.0, 0.0], "end": [10.0, 0.0]},
            {"type": "line", "start": [0.0, 5.0], "end": [10.0, 5.0]},
            {"type": "circle", "center": [20.0, 0.0], "radius": 2.0},
            {"type": "circle", "center": [30.0, 0.0], "radius": 2.0}],
            "constraints": [
                {"type": "equal", "a": "g0", "b": "g1"},
                {"type": "parallel", "a": "g0", "b": "g1"},
                {"type": "equal", "a": "g2", "b": "g3"},
                {"type": "vertical", "line": "g0"}]}));
        let (ties, mut n) = ties(&s);
        n.points[1] = [12.0, 1.0];
        n.radii[0] = 2.6;
        let settled = ties.settle(n).expect("settles");
        let side = |a: usize, b: usize| {
            let (p, q) = (settled.points[a], settled.points[b]);
            (q[0] - p[0], q[1] - p[1])
        };
        let ((ax, ay), (bx, by)) = (side(0, 1), side(2, 3));
        assert!((ax.hypot(ay) - bx.hypot(by)).abs() < 1e-7, "equal: {settled:?}");
        assert!((ax * by - ay * bx).abs() < 1e-7, "parallel: {settled:?}");
        assert!((settled.radii[0] - settled.radii[1]).abs() < 1e-9 && settled.radii[0] > 2.2, "{settled:?}");
        // The first side was not vertical and is not made so.
        assert!(ay.abs() < 0.5 * ax.abs(), "{settled:?}");
    }

    #[test]
    fn a_centre_form_arcs_end_stays_on_the_line_it_meets() {
        // A line ending where a quarter arc (centre (10, 5), radius 5) starts.
        let s = sketch(serde_json::json!({"name": "S1", "on": "XY", "primitives": [
            {"type": "line", "start": [0.0, 0.0], "end": [10.0, 0.0]},
            {"type": "center_arc", "center": [10.0, 5.0], "radius": 5.0, "start_angle": 270.0, "end_angle": 360.0}]}));
        let (ties, mut n) = ties(&s);
        n.radii[0] = 6.0;
        let settled = ties.settle(n).expect("settles");
        let end = Point::OnCircle { c: 2, r: 0, degrees: 270.0 }.at(&settled);
        let line_end = settled.points[1];
        assert!((end[0] - line_end[0]).hypot(end[1] - line_end[1]) < 1e-7, "{settled:?}");
    }
}
