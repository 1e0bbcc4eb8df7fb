//! The evaluator: CadQuery's semantics (shared workplane contexts, pending wires, extrude of
//! all pending wires) turned into features of the importer.

use std::collections::HashMap;

use freecad_bridge::command::Mode;

use super::CqError;
use super::parser::{Expr, Stmt, parse_cadquery};
use crate::import::{Curve, Feature, Frame, Span, V3, arc_angles, circumcircle, norm, sub};

/// A 2D curve in a workplane's local coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Curve2 {
    Line([f64; 2], [f64; 2]),
    Arc([f64; 2], [f64; 2], [f64; 2]),
    Circle([f64; 2], f64),
}

/// What CadQuery's `CQContext` holds for us.
#[derive(Debug, Clone)]
struct Context {
    plane: Frame,
    pending_edges: Vec<Curve2>,
    first_point: Option<[f64; 2]>,
    pending_wires: Vec<Vec<Curve2>>,
    /// The line of the workplane's creation, for messages.
    line: usize,
}

/// The top of a workplane's stack, as far as the subset needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Top {
    /// A fresh workplane: the current point is the plane origin.
    Empty,
    Point([f64; 2]),
    /// The last edge ended here.
    Edge([f64; 2]),
    Wire,
}

/// A boolean expression of extrusions, in program order.
#[derive(Debug, Clone, PartialEq)]
struct Solid {
    steps: Vec<(Mode, usize)>,
}

#[derive(Debug, Clone)]
enum Value {
    Module,
    Number(f64),
    Bool(bool),
    Tuple(Vec<Value>),
    Vector(V3),
    Plane(Frame),
    Workplane {
        ctx: usize,
        top: Top,
    },
    Solid(Solid),
    /// `obj.method` awaiting its call.
    Method(Box<Value>, String),
    /// `cq.Name` awaiting its call.
    Class(String),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Module => "the cadquery module",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            Value::Tuple(_) => "a tuple",
            Value::Vector(_) => "a Vector",
            Value::Plane(_) => "a Plane",
            Value::Workplane { .. } => "a Workplane",
            Value::Solid(_) => "a solid",
            Value::Method(..) => "a method",
            Value::Class(_) => "a class",
        }
    }
}

/// Tolerance of CadQuery's `close()`: a gap larger than this gets a closing line.
const CLOSE_TOLERANCE: f64 = 1e-6;

struct Eval {
    vars: HashMap<String, Value>,
    alias: Option<String>,
    contexts: Vec<Context>,
    features: Vec<Feature>,
    /// Holes of a feature's sketch that touch its outer wire, by the feature's index: CadQuery
    /// cuts them from the face; here a pocket of their own cuts them after the pad.
    touching_holes: HashMap<usize, Feature>,
    notes: Vec<String>,
    line: usize,
}

impl Eval {
    fn semantic<T>(&self, message: impl Into<String>) -> Result<T, CqError> {
        Err(CqError::Semantic { line: self.line, message: message.into() })
    }
    fn unsupported<T>(&self, construct: impl Into<String>) -> Result<T, CqError> {
        Err(CqError::Unsupported { line: self.line, construct: construct.into() })
    }

    fn run(&mut self, statements: &[Stmt]) -> Result<Solid, CqError> {
        for stmt in statements {
            match stmt {
                Stmt::Import { alias, line } => {
                    self.line = *line;
                    self.alias = Some(alias.clone());
                }
                Stmt::Assign { target, value, line } => {
                    self.line = *line;
                    let v = self.eval(value)?;
                    self.vars.insert(target.clone(), v);
                }
                Stmt::Expr { value, line } => {
                    self.line = *line;
                    let what = match value {
                        Expr::Call { func, .. } => callee_name(func),
                        _ => "a bare expression".into(),
                    };
                    return self.unsupported(what);
                }
            }
        }
        match self.vars.get("solid") {
            Some(Value::Solid(s)) => Ok(s.clone()),
            Some(other) => {
                let kind = other.kind();
                self.semantic(format!("`solid` holds {kind}, not a solid"))
            }
            None => Err(CqError::NoResult),
        }
    }

    fn eval(&mut self, e: &Expr) -> Result<Value, CqError> {
        match e {
            Expr::Number(x) => Ok(Value::Number(*x)),
            Expr::Str(s) => self.unsupported(format!("string \"{s}\"")),
            Expr::Tuple(items) => Ok(Value::Tuple(items.iter().map(|i| self.eval(i)).collect::<Result<_, _>>()?)),
            Expr::Name(n) => match n.as_str() {
                "True" => Ok(Value::Bool(true)),
                "False" => Ok(Value::Bool(false)),
                _ if self.alias.as_deref() == Some(n) => Ok(Value::Module),
                _ => match self.vars.get(n) {
                    Some(v) => Ok(v.clone()),
                    None => self.semantic(format!("`{n}` is not defined")),
                },
            },
            Expr::Attr(object, name) => match self.eval(object)? {
                Value::Module => Ok(Value::Class(name.clone())),
                v @ (Value::Workplane { .. } | Value::Solid(_)) => Ok(Value::Method(Box::new(v), name.clone())),
                other => {
                    let kind = other.kind();
                    self.unsupported(format!("attribute `{name}` of {kind}"))
                }
            },
            Expr::Call { func, args, kwargs } => {
                let f = self.eval(func)?;
                let args: Vec<Value> = args.iter().map(|a| self.eval(a)).collect::<Result<_, _>>()?;
                let kwargs: Vec<(String, Value)> =
                    kwargs.iter().map(|(k, v)| Ok((k.clone(), self.eval(v)?))).collect::<Result<_, CqError>>()?;
                match f {
                    Value::Class(name) => self.construct(&name, &args, &kwargs),
                    Value::Method(object, name) => self.method(*object, &name, &args, &kwargs),
                    other => {
                        let kind = other.kind();
                        self.semantic(format!("{kind} cannot be called"))
                    }
                }
            }
        }
    }

    fn number(&self, v: &Value, what: &str) -> Result<f64, CqError> {
        match v {
            Value::Number(x) if x.is_finite() => Ok(*x),
            other => self.semantic(format!("{what} must be a finite number, got {}", other.kind())),
        }
    }

    fn point2(&self, v: &Value, what: &str) -> Result<[f64; 2], CqError> {
        match v {
            Value::Tuple(items) if items.len() == 2 => {
                Ok([self.number(&items[0], what)?, self.number(&items[1], what)?])
            }
            Value::Vector(_) => self.unsupported(format!("{what} as a global Vector")),
            other => self.semantic(format!("{what} must be an (x, y) tuple, got {}", other.kind())),
        }
    }

    fn no_kwargs(&self, name: &str, kwargs: &[(String, Value)]) -> Result<(), CqError> {
        match kwargs.first() {
            Some((k, _)) => self.unsupported(format!("{name}({k}=...)")),
            None => Ok(()),
        }
    }

    fn construct(&mut self, name: &str, args: &[Value], kwargs: &[(String, Value)]) -> Result<Value, CqError> {
        self.no_kwargs(name, kwargs)?;
        match name {
            "Vector" => {
                let xs = match args {
                    [Value::Tuple(t)] => t.clone(),
                    _ => args.to_vec(),
                };
                match xs.as_slice() {
                    [x, y, z] => Ok(Value::Vector([
                        self.number(x, "Vector x")?,
                        self.number(y, "Vector y")?,
                        self.number(z, "Vector z")?,
                    ])),
                    _ => self.unsupported(format!("Vector with {} components", xs.len())),
                }
            }
            "Plane" => match args {
                [Value::Vector(o), Value::Vector(x), Value::Vector(n)] => {
                    if norm(*n) == 0.0 || norm(*x) == 0.0 {
                        return self.semantic("Plane with a zero normal or x direction");
                    }
                    let z = crate::import::scale(*n, 1.0 / norm(*n));
                    let xd = crate::import::scale(*x, 1.0 / norm(*x));
                    // CadQuery refuses an x direction that is not perpendicular to the normal.
                    if crate::import::dot(z, xd).abs() > 1e-6 {
                        return self.semantic("Plane: xDir and normal are not orthogonal");
                    }
                    match Frame::from_normal_x(*o, *n, *x) {
                        Some(f) => Ok(Value::Plane(f)),
                        None => self.semantic("Plane: degenerate frame"),
                    }
                }
                _ => self.unsupported("Plane other than Plane(Vector origin, Vector xDir, Vector normal)"),
            },
            "Workplane" => match args {
                [Value::Plane(p)] => {
                    self.contexts.push(Context {
                        plane: *p,
                        pending_edges: Vec::new(),
                        first_point: None,
                        pending_wires: Vec::new(),
                        line: self.line,
                    });
                    Ok(Value::Workplane { ctx: self.contexts.len() - 1, top: Top::Empty })
                }
                _ => self.unsupported("Workplane other than Workplane(Plane(...))"),
            },
            other => self.unsupported(format!("cq.{other}")),
        }
    }

    fn method(
        &mut self,
        object: Value,
        name: &str,
        args: &[Value],
        kwargs: &[(String, Value)],
    ) -> Result<Value, CqError> {
        match object {
            Value::Workplane { ctx, top } => self.workplane_method(ctx, top, name, args, kwargs),
            Value::Solid(solid) => {
                self.no_kwargs(name, kwargs)?;
                let other = match args {
                    [Value::Solid(s)] => s,
                    [Value::Workplane { .. }] => {
                        return self.unsupported(format!("{name} of a Workplane that holds no solid"));
                    }
                    _ => return self.unsupported(format!("{name} with these arguments")),
                };
                let mode = match name {
                    "union" => Mode::Add,
                    "cut" => Mode::Cut,
                    other => return self.unsupported(format!(".{other}()")),
                };
                // a op (b1 + b2 + ...) = ((a op b1) op b2)...: valid only when the operand is a
                // pure union; a cut inside it would be applied to the whole part.
                if other.steps.iter().any(|(m, _)| *m == Mode::Cut) {
                    return self.unsupported(format!("{name} of a solid that itself has a cut"));
                }
                let mut steps = solid.steps;
                steps.extend(other.steps.iter().map(|(_, i)| (mode, *i)));
                Ok(Value::Solid(Solid { steps }))
            }
            other => {
                let kind = other.kind();
                self.unsupported(format!(".{name}() on {kind}"))
            }
        }
    }

    fn workplane_method(
        &mut self,
        ctx: usize,
        top: Top,
        name: &str,
        args: &[Value],
        kwargs: &[(String, Value)],
    ) -> Result<Value, CqError> {
        let line = self.line;
        let current = match top {
            Top::Empty => Some([0.0, 0.0]),
            Top::Point(p) | Top::Edge(p) => Some(p),
            Top::Wire => None,
        };
        if name != "extrude" {
            self.no_kwargs(name, kwargs)?;
        }
        let from = |s: &Self| match current {
            Some(p) => Ok(p),
            None => s.semantic(format!("{name} after a closed wire: no current point")),
        };
        match name {
            "moveTo" => {
                let p = match args {
                    [] => [0.0, 0.0],
                    [x] => [self.number(x, "moveTo x")?, 0.0],
                    [x, y] => [self.number(x, "moveTo x")?, self.number(y, "moveTo y")?],
                    _ => return self.semantic("moveTo takes x and y"),
                };
                if !self.contexts[ctx].pending_edges.is_empty() {
                    return self.unsupported("moveTo while a wire is still open");
                }
                Ok(Value::Workplane { ctx, top: Top::Point(p) })
            }
            "lineTo" => {
                let [x, y] = args else { return self.semantic("lineTo takes x and y") };
                let end = [self.number(x, "lineTo x")?, self.number(y, "lineTo y")?];
                let start = from(self)?;
                self.edge(ctx, Curve2::Line(start, end))?;
                Ok(Value::Workplane { ctx, top: Top::Edge(end) })
            }
            "threePointArc" => {
                let [m, e] = args else { return self.semantic("threePointArc takes two points") };
                let (mid, end) = (self.point2(m, "threePointArc point1")?, self.point2(e, "threePointArc point2")?);
                let start = from(self)?;
                self.edge(ctx, Curve2::Arc(start, mid, end))?;
                Ok(Value::Workplane { ctx, top: Top::Edge(end) })
            }
            "close" => {
                if !args.is_empty() {
                    return self.semantic("close takes no arguments");
                }
                let end = from(self)?;
                self.close(ctx, end)
            }
            "circle" => {
                let [r] = args else { return self.semantic("circle takes a radius") };
                let r = self.number(r, "circle radius")?;
                if r <= 0.0 {
                    return self.semantic(format!("circle radius must be positive, got {r}"));
                }
                let center = match top {
                    Top::Empty => [0.0, 0.0],
                    Top::Point(p) => p,
                    Top::Edge(_) | Top::Wire => return self.unsupported("circle centred on an edge or wire"),
                };
                self.contexts[ctx].pending_wires.push(vec![Curve2::Circle(center, r)]);
                Ok(Value::Workplane { ctx, top: Top::Wire })
            }
            "add" => {
                for a in args {
                    match a {
                        Value::Workplane { ctx: other, .. } if *other == ctx => {}
                        Value::Workplane { .. } => {
                            self.notes.push(format!(
                                "line {line}: add() of a loop from another workplane; CadQuery extrudes only this workplane's pending wires"
                            ));
                        }
                        other => return self.unsupported(format!("add({})", other.kind())),
                    }
                }
                Ok(Value::Workplane { ctx, top })
            }
            "extrude" => self.extrude(ctx, args, kwargs),
            other => self.unsupported(format!(".{other}()")),
        }
    }

    /// `close()`: a closing line when the end is more than [`CLOSE_TOLERANCE`] from the
    /// first point, and the pending edges become a wire (zero-width spikes dropped).
    fn close(&mut self, ctx: usize, end: [f64; 2]) -> Result<Value, CqError> {
        let line = self.line;

        let c = &mut self.contexts[ctx];
        let Some(first) = c.first_point else {
            return self.semantic("close without a start point");
        };
        let plane = c.plane;
        let gap = norm(sub(plane.to_global(end[0], end[1]), plane.to_global(first[0], first[1])));
        if gap > CLOSE_TOLERANCE {
            c.pending_edges.push(Curve2::Line(end, first));
        } else if let Some(last) = c.pending_edges.last_mut() {
            // Within CadQuery's tolerance the wire is closed as it is; make the end
            // exactly the start so the sketch closes on the same point.
            if gap > 0.0 {
                match last {
                    Curve2::Line(_, e) | Curve2::Arc(_, _, e) => *e = first,
                    Curve2::Circle(..) => {}
                }
                self.notes.push(format!("line {line}: closed a gap of {gap:e} by moving the last point"));
            }
        }
        let c = &mut self.contexts[ctx];
        c.first_point = None;
        let mut wire = std::mem::take(&mut c.pending_edges);
        // A spike can also sit where the wire closes: its last line runs back
        // over its first.
        while wire.len() > 2 {
            let Some(net) = spike_net(wire[wire.len() - 1], wire[0]) else { break };
            let at = match wire[0] {
                Curve2::Line(a, _) => a,
                _ => unreachable!("spike_net takes lines only"),
            };
            wire.pop();
            wire.remove(0);
            wire.extend(net);
            self.notes.push(format!(
                "line {line}: dropped a zero-width spike at ({}, {}) where the wire closes",
                at[0], at[1]
            ));
        }
        let c = &mut self.contexts[ctx];
        c.pending_wires.push(wire);
        Ok(Value::Workplane { ctx, top: Top::Wire })
    }

    /// `extrude(d, both=...)`: every pending wire of the context, the first the outer one and
    /// the others holes, extruded along the plane normal.
    fn extrude(&mut self, ctx: usize, args: &[Value], kwargs: &[(String, Value)]) -> Result<Value, CqError> {
        let line = self.line;
        let [d] = args else { return self.semantic("extrude takes a distance") };
        let d = self.number(d, "extrude distance")?;
        let mut both = false;
        for (k, v) in kwargs {
            match (k.as_str(), v) {
                ("both", Value::Bool(b)) => both = *b,
                ("combine", Value::Bool(true)) => {}
                _ => return self.unsupported(format!("extrude({k}=...)")),
            }
        }
        if d == 0.0 {
            return self.semantic("extrude by 0");
        }
        let c = &mut self.contexts[ctx];
        if !c.pending_edges.is_empty() {
            return self.unsupported("extrude with an open wire (a loop without close())");
        }
        let wires = std::mem::take(&mut c.pending_wires);
        let (plane, created) = (c.plane, c.line);
        if wires.is_empty() {
            return self.semantic(format!("extrude with no closed wire pending on the workplane of line {created}"));
        }
        let mut wires = wires;
        let Nesting { touching_outer: touching, touching_pairs } = match nesting(&wires) {
            Ok(n) => n,
            Err(problem) => {
                return self.unsupported(format!(
                    "a sketch whose {problem}: CadQuery makes the first wire the outer boundary and every other wire a hole, FreeCAD nests wires by containment, and the two differ here"
                ))
            }
        };
        match separate_touching_holes(&mut wires, &touching_pairs) {
            Ok(shrunk) if shrunk.is_empty() => {}
            Ok(shrunk) => {
                let names: Vec<String> = shrunk.iter().map(|k| format!("wire {}", k + 1)).collect();
                self.notes.push(format!(
                    "line {line}: holes touch each other (a wall of zero thickness, invalid in CadQuery too); shrank the circle of {} by {TANGENT_HOLE_SHRINK:e} of the sketch's size",
                    names.join(", ")
                ));
            }
            Err((a, b)) => {
                return self.unsupported(format!(
                    "a sketch whose holes {} and {} touch and neither is a circle (a wall of zero thickness)",
                    a + 1,
                    b + 1
                ));
            }
        }
        let (cut_later, kept): (Vec<_>, Vec<_>) = wires.iter().enumerate().partition(|(k, _)| touching.contains(k));
        let global = |ws: Vec<(usize, &Vec<Curve2>)>| -> Vec<Vec<Curve>> {
            ws.into_iter().map(|(_, w)| to_global(&plane, w)).collect()
        };
        let (loops, hole_loops) = (global(kept), global(cut_later));
        let areas: Vec<f64> = loops.iter().map(|l| crate::import::loop_area(l, &plane).abs()).collect();
        let expected_area = Some(areas[0] - areas[1..].iter().sum::<f64>());
        let span = if both {
            Span { forward: d.abs(), backward: d.abs() }
        } else if d > 0.0 {
            Span { forward: d, backward: 0.0 }
        } else {
            Span { forward: 0.0, backward: -d }
        };
        let label = format!("extrusion of line {line}");
        if !hole_loops.is_empty() {
            let holes: Vec<String> = touching.iter().map(|k| (k + 1).to_string()).collect();
            self.touching_holes.insert(
                self.features.len(),
                Feature {
                    plane,
                    loops: hole_loops,
                    span,
                    mode: Mode::Cut,
                    label: format!("{label}, wire {} (touches the outer wire)", holes.join(" and ")),
                    expected_area: None,
                    parts: Vec::new(),
                },
            );
        }
        self.features.push(Feature {
            plane,
            loops,
            span,
            // The mode is decided when the solid joins the part.
            mode: Mode::Add,
            label,
            expected_area,
            parts: Vec::new(),
        });
        Ok(Value::Solid(Solid { steps: vec![(Mode::Add, self.features.len() - 1)] }))
    }

    fn edge(&mut self, ctx: usize, curve: Curve2) -> Result<(), CqError> {
        let c = &mut self.contexts[ctx];
        let (start, end) = match curve {
            Curve2::Line(a, b) | Curve2::Arc(a, _, b) => (a, b),
            Curve2::Circle(..) => return Ok(()),
        };
        if start == end {
            return self.semantic(format!("zero-length edge at ({}, {})", start[0], start[1]));
        }
        if c.first_point.is_none() {
            c.first_point = Some(start);
        }
        // A line straight back over the previous one makes a zero-width spike. CadQuery's
        // face fixing drops it (the solid it builds has no spike), and FreeCAD's sketch
        // would not close around it, so the two lines become their net line.
        if let Some(&last) = c.pending_edges.last()
            && let Some(net) = spike_net(last, curve)
        {
            c.pending_edges.pop();
            c.pending_edges.extend(net);
            self.notes.push(format!(
                "line {}: dropped a zero-width spike at ({}, {}) (a line straight back over the previous one)",
                self.line, start[0], start[1]
            ));
            return Ok(());
        }
        c.pending_edges.push(curve);
        Ok(())
    }
}

/// How CadQuery's "first wire outer, every other wire a hole" maps onto FreeCAD's
/// containment-based face maker. The two agree when every hole lies inside the first wire
/// and no hole lies inside another. Holes that touch each other are returned as pairs (their
/// zero-thickness wall is separated by [`separate_touching_holes`]).
/// They differ for a hole that touches the outer wire, which FreeCAD does not take for a
/// hole: those holes are returned, to be cut by a pocket of their own. Err names a layout
/// CadQuery builds differently from any FreeCAD sketch (a wire outside the first, nested or
/// overlapping holes).
fn nesting(wires: &[Vec<Curve2>]) -> Result<Nesting, String> {
    let mut nesting = Nesting::default();
    if wires.len() < 2 {
        return Ok(nesting);
    }
    let polygons: Vec<Vec<[f64; 2]>> = wires.iter().map(|w| sample_wire(w)).collect();
    let extent = polygons.iter().flatten().flat_map(|p| p.iter()).fold(0.0f64, |m, x| m.max(x.abs())).max(1e-12);
    let eps = 1e-7 * extent;
    let on = |p: [f64; 2], of: usize| boundary_distance(p, &wires[of]) <= eps;
    // Inside or on the boundary, and not entirely on it.
    let within = |k: usize, of: usize| {
        polygons[k].iter().all(|p| crate::import::point_in_polygon(*p, &polygons[of]) || on(*p, of))
            && polygons[k].iter().any(|p| !on(*p, of))
    };
    let outside = |k: usize, of: usize| {
        polygons[k].iter().all(|p| !crate::import::point_in_polygon(*p, &polygons[of]) || on(*p, of))
    };
    for k in 1..wires.len() {
        if !within(k, 0) {
            return Err(format!("wire {} is not inside the first", k + 1));
        }
        if polygons[k].iter().any(|p| on(*p, 0)) {
            nesting.touching_outer.push(k);
        }
        for l in 1..k {
            if !(outside(k, l) && outside(l, k)) {
                return Err(format!("holes {} and {} nest or overlap", l + 1, k + 1));
            }
            if polygons[k].iter().any(|p| on(*p, l)) || polygons[l].iter().any(|p| on(*p, k)) {
                nesting.touching_pairs.push((l, k));
            }
        }
    }
    Ok(nesting)
}

/// What [`nesting`] finds in a sketch CadQuery and FreeCAD both build.
#[derive(Debug, Default)]
struct Nesting {
    /// Holes that touch the outer wire.
    touching_outer: Vec<usize>,
    /// Holes that touch each other from outside.
    touching_pairs: Vec<(usize, usize)>,
}

/// Part of a sketch's size by which a circular hole that touches another hole shrinks:
/// holes that touch leave a wall of zero thickness, which makes the solid invalid in both
/// kernels (CadQuery builds it invalid), and a shrunk hole leaves a wall FreeCAD accepts.
const TANGENT_HOLE_SHRINK: f64 = 1e-5;

/// Shrink one circle of every pair of touching holes (the larger, or one already shrunk)
/// by [`TANGENT_HOLE_SHRINK`] of the sketch's size. Returns the holes shrunk, or Err with
/// a pair of which neither is a circle.
fn separate_touching_holes(wires: &mut [Vec<Curve2>], pairs: &[(usize, usize)]) -> Result<Vec<usize>, (usize, usize)> {
    let radius = |w: &[Curve2]| match w {
        [Curve2::Circle(_, r)] => Some(*r),
        _ => None,
    };
    let extent = wires.iter().flat_map(|w| sample_wire(w)).fold(0.0f64, |m, p| m.max(p[0].abs()).max(p[1].abs()));
    let mut shrunk: Vec<usize> = Vec::new();
    for &(a, b) in pairs {
        if shrunk.contains(&a) || shrunk.contains(&b) {
            continue;
        }
        let pick = match (radius(&wires[a]), radius(&wires[b])) {
            (Some(ra), Some(rb)) => {
                if ra >= rb {
                    a
                } else {
                    b
                }
            }
            (Some(_), None) => a,
            (None, Some(_)) => b,
            (None, None) => return Err((a, b)),
        };
        if let [Curve2::Circle(_, r)] = wires[pick].as_mut_slice() {
            *r -= TANGENT_HOLE_SHRINK * extent;
        }
        shrunk.push(pick);
    }
    shrunk.sort_unstable();
    Ok(shrunk)
}

/// The net of a line followed by a line straight back over it (a zero-width spike): no
/// edge when the second ends where the first started, else the one line between the ends.
/// None when the two do not double back.
fn spike_net(last: Curve2, next: Curve2) -> Option<Vec<Curve2>> {
    let (Curve2::Line(a, b), Curve2::Line(start, e)) = (last, next) else { return None };
    let (u, v) = ([b[0] - a[0], b[1] - a[1]], [e[0] - start[0], e[1] - start[1]]);
    let (lu, lv) = (u[0].hypot(u[1]), v[0].hypot(v[1]));
    let cross = u[0] * v[1] - u[1] * v[0];
    let dot = u[0] * v[0] + u[1] * v[1];
    if start != b || dot >= 0.0 || cross.abs() > 1e-12 * lu * lv {
        return None;
    }
    let rest = (e[0] - a[0]).hypot(e[1] - a[1]);
    Some(if rest <= 1e-12 * lu.max(lv) { Vec::new() } else { vec![Curve2::Line(a, e)] })
}

/// A dense polygon through the wire (arcs and circles at 64 points).
fn sample_wire(wire: &[Curve2]) -> Vec<[f64; 2]> {
    const N: usize = 64;
    let mut out = Vec::new();
    for c in wire {
        match *c {
            Curve2::Line(a, _) => out.push(a),
            Curve2::Arc(a, m, b) => match circumcircle(a, m, b) {
                Some((center, r)) => {
                    let (t0, sweep) = arc_angles(a, m, b, center);
                    out.extend((0..N).map(|i| {
                        let t = t0 + sweep * i as f64 / N as f64;
                        [center[0] + r * t.cos(), center[1] + r * t.sin()]
                    }));
                }
                None => out.push(a),
            },
            Curve2::Circle(center, r) => out.extend((0..N).map(|i| {
                let t = std::f64::consts::TAU * i as f64 / N as f64;
                [center[0] + r * t.cos(), center[1] + r * t.sin()]
            })),
        }
    }
    out
}

/// Exact distance from `p` to the wire's curves.
fn boundary_distance(p: [f64; 2], wire: &[Curve2]) -> f64 {
    let dist = |a: [f64; 2], b: [f64; 2]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
    wire.iter()
        .map(|c| match *c {
            Curve2::Line(a, b) => {
                let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
                let len2 = dx * dx + dy * dy;
                let t =
                    if len2 > 0.0 { (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / len2).clamp(0.0, 1.0) } else { 0.0 };
                dist(p, [a[0] + t * dx, a[1] + t * dy])
            }
            Curve2::Circle(center, r) => (dist(p, center) - r).abs(),
            Curve2::Arc(a, m, b) => match circumcircle(a, m, b) {
                Some((center, r)) => {
                    let (t0, sweep) = arc_angles(a, m, b, center);
                    let t = (p[1] - center[1]).atan2(p[0] - center[0]);
                    let along = if sweep >= 0.0 {
                        (t - t0).rem_euclid(std::f64::consts::TAU)
                    } else {
                        (t0 - t).rem_euclid(std::f64::consts::TAU)
                    };
                    if along <= sweep.abs() { (dist(p, center) - r).abs() } else { dist(p, a).min(dist(p, b)) }
                }
                None => dist(p, a).min(dist(p, b)),
            },
        })
        .fold(f64::INFINITY, f64::min)
}

fn callee_name(func: &Expr) -> String {
    match func {
        Expr::Name(n) => n.clone(),
        Expr::Attr(_, n) => n.clone(),
        _ => "a call".into(),
    }
}

fn to_global(plane: &Frame, wire: &[Curve2]) -> Vec<Curve> {
    let g = |p: [f64; 2]| plane.to_global(p[0], p[1]);
    wire.iter()
        .map(|c| match *c {
            Curve2::Line(a, b) => Curve::Line(g(a), g(b)),
            Curve2::Arc(a, m, b) => Curve::Arc(g(a), g(m), g(b)),
            Curve2::Circle(center, radius) => Curve::Circle { center: g(center), radius },
        })
        .collect()
}

/// The features a CadQuery program builds, in the order they join the part, and notes on
/// what was changed or left out.
pub(super) fn features_of(code: &str) -> Result<(Vec<Feature>, Vec<String>), CqError> {
    let statements = parse_cadquery(code)?;
    let mut ev = Eval {
        vars: HashMap::new(),
        alias: None,
        contexts: Vec::new(),
        features: Vec::new(),
        touching_holes: HashMap::new(),
        notes: Vec::new(),
        line: 0,
    };
    let solid = ev.run(&statements)?;
    if solid.steps.first().is_some_and(|(m, _)| *m == Mode::Cut) {
        return Err(CqError::Unsupported { line: ev.line, construct: "a part that starts with a cut".into() });
    }
    let mut seen = vec![false; ev.features.len()];
    let mut out = Vec::new();
    for (mode, index) in &solid.steps {
        // The same extrusion joined twice changes nothing the second time (a ∪ a = a);
        // cutting what was added would empty it, which no test100 part does.
        if std::mem::replace(&mut seen[*index], true) {
            if *mode == Mode::Add {
                continue;
            }
            return Err(CqError::Unsupported {
                line: ev.line,
                construct: "cutting an extrusion already in the part".into(),
            });
        }
        let mut f = ev.features[*index].clone();
        f.mode = *mode;
        if let Some(holes) = ev.touching_holes.get(index) {
            // Pad then pocket equals CadQuery's face only where the pocket meets nothing
            // built before it; for the part's first solid that holds by construction.
            if !out.is_empty() || *mode != Mode::Add {
                return Err(CqError::Unsupported {
                    line: ev.line,
                    construct: format!(
                        "{}: a hole touching the outer wire in an extrusion that is not the part's first solid (CadQuery cuts the hole from this extrusion alone; a pocket would also cut what is built before it)",
                        holes.label
                    ),
                });
            }
            out.push(f);
            out.push(holes.clone());
            continue;
        }
        out.push(f);
    }
    let unused = seen.iter().filter(|s| !**s).count();
    if unused > 0 {
        ev.notes.push(format!("{unused} extrusions are not part of `solid` and were left out"));
    }
    Ok((out, ev.notes))
}
