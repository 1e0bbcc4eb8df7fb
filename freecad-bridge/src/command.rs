//! The command language: what a program (or the VLM) may ask the modeller to do.
//!
//! Programs are JSON (`{"commands": [...]}`), one object per command tagged by `op`. Sketch
//! coordinates are in the sketch plane's own 2D frame (the frame FreeCAD attaches to the
//! plane, reported as `frame` in the model state). Existing geometry is named by the IDs of
//! the current [`ModelState`](crate::ModelState): faces `F3`, edges `E12`, vertices `V5`;
//! sketches and construction planes by the name their command gave them (`S1`, `P1`).
//!
//! A part made of separate solids has one body per solid (PartDesign Bodies `B1`, `B2`,
//! ...). `{"op": "body", "name": "B2"}` starts the next body or makes an existing one active;
//! later commands work on the active body. Entities are numbered within their body: `F3` is
//! a face of B1 and `B2.F3` a face of B2 (`B1.F3` is read as `F3`). A command may attach to,
//! project or change only entities, sketches and planes of the active body.
//!
//! References inside a sketch are short strings, so a model can write them easily:
//! - a curve: `g0` (the sketch's first primitive), `E7` (an existing edge, projected into the
//!   sketch as external geometry), `h_axis`, `v_axis`;
//! - a point: `g0.start`, `g0.end`, `g0.center`, `V3` (an existing vertex, projected),
//!   `E7.start`, `E7.end`, `E7.center`, `origin`.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A whole modeling program: commands executed in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Program {
    /// Free text naming the part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text for humans; ignored by the modeller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub commands: Vec<Command>,
}

/// One modeling operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Command {
    /// A 2D sketch on a base plane, a planar face or a construction plane.
    Sketch(Sketch),
    /// Extrude a closed sketch: add material (Pad) or cut it (Pocket).
    Extrude(Extrude),
    /// Revolve a sketch about an axis: add (Revolution) or cut (Groove).
    Revolve(Revolve),
    /// Sweep a profile sketch along a path (AdditivePipe / SubtractivePipe).
    Sweep(Sweep),
    /// Loft through two or more sketches (AdditiveLoft / SubtractiveLoft).
    Loft(Loft),
    /// Round edges.
    Fillet(Fillet),
    /// Bevel edges.
    Chamfer(Chamfer),
    /// A construction plane (PartDesign DatumPlane), offset and optionally inclined.
    Plane(Plane),
    /// Start the next body (a separate solid) or make an existing one active.
    Body(BodyChoice),
    /// The model is finished.
    End,
}

/// An existing entity a command names, and what for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// `F6`, `E12`, `V3`.
    pub id: String,
    /// `support` (a sketch or plane lies on it), `projected` (sketch geometry is tied to
    /// it), `axis` (of a revolve), `path` (of a sweep), `edge` (filleted or chamfered),
    /// `rotation_axis` (of an inclined plane).
    pub role: String,
}

impl Command {
    /// The existing faces, edges and vertices the command names by ID, in order.
    pub fn references(&self) -> Vec<Reference> {
        let mut out = Vec::new();
        let mut push = |id: &str, role: &str| {
            if id.parse::<EntityId>().is_ok() && !out.iter().any(|r: &Reference| r.id == id && r.role == role) {
                out.push(Reference { id: id.to_string(), role: role.to_string() });
            }
        };
        match self {
            Command::Sketch(s) => {
                push(&s.on, "support");
                for c in &s.constraints {
                    let (curves, points): (Vec<CurveRef>, Vec<PointRef>) = match c {
                        Constraint::Coincident { a, b } | Constraint::Distance { a, b, .. } => (vec![], vec![*a, *b]),
                        Constraint::PointOnObject { point, object } => (vec![*object], vec![*point]),
                        Constraint::DistanceToLine { point, line, .. } => (vec![*line], vec![*point]),
                        Constraint::Midpoint { point, a, b } => (vec![], vec![*point, *a, *b]),
                        Constraint::Concentric { a, b }
                        | Constraint::Equal { a, b }
                        | Constraint::Tangent { a, b }
                        | Constraint::Parallel { a, b }
                        | Constraint::Perpendicular { a, b } => (vec![*a, *b], vec![]),
                        Constraint::Horizontal { line }
                        | Constraint::Vertical { line }
                        | Constraint::Length { line, .. } => (vec![*line], vec![]),
                        Constraint::Radius { curve, .. } => (vec![*curve], vec![]),
                    };
                    for curve in curves {
                        if let CurveRef::Edge(id) = curve {
                            push(&id.to_string(), "projected");
                        }
                    }
                    for point in points {
                        match point {
                            PointRef::Edge(id, _) | PointRef::Vertex(id) => push(&id.to_string(), "projected"),
                            PointRef::Own(..) | PointRef::Origin => {}
                        }
                    }
                }
            }
            Command::Revolve(r) => push(&r.axis, "axis"),
            Command::Sweep(s) => {
                if let SweepPath::Edges(edges) = &s.path {
                    edges.iter().for_each(|e| push(e, "path"));
                }
            }
            Command::Fillet(Fillet { edges, .. }) | Command::Chamfer(Chamfer { edges, .. }) => {
                edges.iter().for_each(|e| push(e, "edge"));
            }
            Command::Plane(p) => {
                push(&p.on, "support");
                p.rotation.0.iter().for_each(|r| push(&r.axis, "rotation_axis"));
            }
            Command::Extrude(_) | Command::Loft(_) | Command::Body(_) | Command::End => {}
        }
        out
    }

    /// The `op` tag, for messages.
    pub fn op(&self) -> &'static str {
        match self {
            Command::Sketch(_) => "sketch",
            Command::Extrude(_) => "extrude",
            Command::Revolve(_) => "revolve",
            Command::Sweep(_) => "sweep",
            Command::Loft(_) => "loft",
            Command::Fillet(_) => "fillet",
            Command::Chamfer(_) => "chamfer",
            Command::Plane(_) => "plane",
            Command::Body(_) => "body",
            Command::End => "end",
        }
    }
}

/// Which body later commands work on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BodyChoice {
    /// `B2` for the next new body (bodies are numbered in order, B1 exists from the start),
    /// or an existing body to work on again.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sketch {
    /// Name that later commands use to refer to this sketch, e.g. `S1`.
    pub name: String,
    /// Where the sketch lies: `XY`, `XZ`, `YZ`, a planar face `F3`, or a construction plane `P1`.
    pub on: String,
    /// Lines, arcs and circles in the sketch's 2D frame (model units, mm).
    pub primitives: Vec<Primitive>,
    /// Constraints between primitives and to projected existing geometry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<Constraint>,
    /// Add coincident constraints where primitive endpoints meet (default true), so the
    /// profile stays closed when it is edited.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub auto_coincident: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Primitive {
    Line {
        start: [f64; 2],
        end: [f64; 2],
        #[serde(default, skip_serializing_if = "is_false")]
        construction: bool,
    },
    /// Three-point arc from `start` through `mid` to `end`.
    Arc {
        start: [f64; 2],
        mid: [f64; 2],
        end: [f64; 2],
        #[serde(default, skip_serializing_if = "is_false")]
        construction: bool,
    },
    /// Centre-form arc, counter-clockwise from `start_angle` to `end_angle` (degrees).
    CenterArc {
        center: [f64; 2],
        radius: f64,
        start_angle: f64,
        end_angle: f64,
        #[serde(default, skip_serializing_if = "is_false")]
        construction: bool,
    },
    Circle {
        center: [f64; 2],
        radius: f64,
        #[serde(default, skip_serializing_if = "is_false")]
        construction: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Constraint {
    Coincident {
        a: PointRef,
        b: PointRef,
    },
    PointOnObject {
        point: PointRef,
        object: CurveRef,
    },
    /// Circles or arcs share their centre.
    Concentric {
        a: CurveRef,
        b: CurveRef,
    },
    /// Equal length (lines) or equal radius (circles, arcs).
    Equal {
        a: CurveRef,
        b: CurveRef,
    },
    Tangent {
        a: CurveRef,
        b: CurveRef,
    },
    Parallel {
        a: CurveRef,
        b: CurveRef,
    },
    Perpendicular {
        a: CurveRef,
        b: CurveRef,
    },
    Horizontal {
        line: CurveRef,
    },
    Vertical {
        line: CurveRef,
    },
    /// Distance between two points.
    Distance {
        a: PointRef,
        b: PointRef,
        value: f64,
    },
    /// Distance from a point to a straight line (its own or an existing edge, extended):
    /// a hole placed by its distance to a face's edge.
    DistanceToLine {
        point: PointRef,
        line: CurveRef,
        value: f64,
    },
    /// `point` lies midway between `a` and `b` (Sketcher's symmetric constraint about a
    /// point): a hole at the middle of a face, between two of its corners, stays there when
    /// the face grows.
    Midpoint {
        point: PointRef,
        a: PointRef,
        b: PointRef,
    },
    /// Length of a line.
    Length {
        line: CurveRef,
        value: f64,
    },
    Radius {
        curve: CurveRef,
        value: f64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Extrude {
    /// The sketch to extrude.
    pub profile: String,
    pub mode: Mode,
    pub extent: Extent,
    /// Extrude against the default direction (a cut's default goes into the material
    /// below the sketch plane, an add's along the plane normal).
    #[serde(default, skip_serializing_if = "is_false")]
    pub reversed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Add,
    Cut,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Extent {
    OneSide {
        depth: f64,
    },
    /// `depth` along the direction, `depth2` against it.
    TwoSides {
        depth: f64,
        depth2: f64,
    },
    /// `depth` in total, centred on the sketch plane.
    Symmetric {
        depth: f64,
    },
    /// Through the whole part (for an add: up to the last face).
    ThroughAll {
        #[serde(default, skip_serializing_if = "is_false")]
        symmetric: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Revolve {
    pub profile: String,
    pub mode: Mode,
    /// `S1.v_axis`, `S1.h_axis`, a line of a sketch `S1.g3`, or a straight edge `E5`.
    pub axis: String,
    /// Degrees, in (0, 360].
    pub angle: f64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub symmetric: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub reversed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    pub profile: String,
    pub mode: Mode,
    pub path: SweepPath,
    /// Frenet orientation of the profile along the path (helix-like paths).
    #[serde(default, skip_serializing_if = "is_false")]
    pub frenet: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SweepPath {
    /// All edges of a path sketch.
    Sketch(String),
    /// Connected existing edges.
    Edges(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Loft {
    /// Two or more sketches, in order.
    pub profiles: Vec<String>,
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "is_false")]
    pub ruled: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub closed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fillet {
    pub edges: Vec<String>,
    pub radius: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Chamfer {
    pub edges: Vec<String>,
    pub size: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plane {
    /// Name later commands use, e.g. `P1`.
    pub name: String,
    /// The reference: `XY`, `XZ`, `YZ`, a planar face `F3`, or another plane `P1`.
    pub on: String,
    /// Move the plane's origin to this point of the reference, in the reference's own 2D
    /// frame (the frame a sketch on it would get); the rotations turn about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<[f64; 2]>,
    /// Distance along the reference's normal.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: f64,
    /// One rotation, or a list applied in order, each about an axis of the plane as turned
    /// so far.
    #[serde(default, skip_serializing_if = "Rotations::is_empty")]
    pub rotation: Rotations,
}

/// Incline a plane: turn it about an axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaneRotation {
    /// `x`, `y` (axes in the plane), `z` (the normal: spins the plane's frame), or a straight
    /// edge `E4` (projected onto the plane).
    pub axis: String,
    /// Degrees.
    pub angle: f64,
}

/// Zero, one or several rotations; JSON takes one object or a list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rotations(pub Vec<PlaneRotation>);

impl Rotations {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Rotations {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Rotations {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let result = if value.is_array() {
            serde_json::from_value(value).map(Rotations)
        } else {
            serde_json::from_value(value).map(|one| Rotations(vec![one]))
        };
        result.map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Rotations {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Rotations".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let one = generator.subschema_for::<PlaneRotation>();
        schemars::json_schema!({"oneOf": [one, {"type": "array", "items": one}]})
    }
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

// ------------------------------------------------------------------------------ references

/// An entity of the current model named by ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKind {
    Face,
    Edge,
    Vertex,
}

/// An ID such as `E12` (body B1) or `B2.E12`: body, kind and 1-based index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityId {
    /// 1-based: 1 is body B1, whose IDs carry no prefix.
    pub body: usize,
    pub kind: EntityKind,
    pub index: usize,
}

impl EntityId {
    /// An entity of body B1.
    pub fn new(kind: EntityKind, index: usize) -> EntityId {
        EntityId { body: 1, kind, index }
    }

    /// The body's name, `B1`, `B2`...
    pub fn body_name(&self) -> String {
        format!("B{}", self.body)
    }

    /// The ID's letter, `F`, `E` or `V`.
    pub fn letter(&self) -> char {
        match self.kind {
            EntityKind::Face => 'F',
            EntityKind::Edge => 'E',
            EntityKind::Vertex => 'V',
        }
    }

    /// The prefix IDs of this entity's body carry: none for B1, `B2.` for B2.
    pub fn prefix(&self) -> String {
        if self.body == 1 { String::new() } else { format!("B{}.", self.body) }
    }
}

/// The number of a body name: `B2` -> 2 (`B0`, `B02`, `2` are not body names).
pub fn body_number(name: &str) -> Option<usize> {
    name.strip_prefix('B').and_then(positive_number)
}

fn positive_number(digits: &str) -> Option<usize> {
    let ok = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) && !digits.starts_with('0');
    ok.then(|| digits.parse().ok()).flatten()
}

impl FromStr for EntityId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("'{s}' is not an entity ID (F3, E12, V5; B2.F3 for body B2)");
        let (body, local) = match s.split_once('.') {
            Some((b, local)) => (body_number(b).ok_or_else(bad)?, local),
            None => (1, s),
        };
        let (kind, digits) = match local.split_at_checked(1) {
            Some(("F", d)) => (EntityKind::Face, d),
            Some(("E", d)) => (EntityKind::Edge, d),
            Some(("V", d)) => (EntityKind::Vertex, d),
            _ => return Err(bad()),
        };
        // The worker reads `F3`, not `F03`: one spelling per entity.
        positive_number(digits).map(|index| EntityId { body, kind, index }).ok_or_else(bad)
    }
}

impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.prefix(), self.letter(), self.index)
    }
}

/// A reference split into the entity and the point of it: `B2.E7.start` -> (`B2.E7`,
/// `start`); text without a point suffix comes back whole.
pub fn split_position(text: &str) -> (&str, Option<&str>) {
    match text.rsplit_once('.') {
        Some((head, pos)) if parse_pos(pos).is_some() => (head, Some(pos)),
        _ => (text, None),
    }
}

/// Which point of a curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointPos {
    Start,
    End,
    Center,
}

/// A curve a sketch constraint can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurveRef {
    /// The sketch's own primitive, 0-based.
    Own(usize),
    /// An existing edge, projected into the sketch.
    Edge(EntityId),
    HAxis,
    VAxis,
}

/// A point a sketch constraint can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointRef {
    Own(usize, PointPos),
    Edge(EntityId, PointPos),
    Vertex(EntityId),
    Origin,
}

fn parse_pos(s: &str) -> Option<PointPos> {
    match s {
        "start" => Some(PointPos::Start),
        "end" => Some(PointPos::End),
        "center" => Some(PointPos::Center),
        _ => None,
    }
}

fn parse_own(s: &str) -> Option<usize> {
    let digits = s.strip_prefix('g')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl FromStr for CurveRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "h_axis" => return Ok(CurveRef::HAxis),
            "v_axis" => return Ok(CurveRef::VAxis),
            _ => {}
        }
        if let Some(i) = parse_own(s) {
            return Ok(CurveRef::Own(i));
        }
        match s.parse::<EntityId>() {
            Ok(id) if id.kind == EntityKind::Edge => Ok(CurveRef::Edge(id)),
            _ => Err(format!(
                "'{s}' is not a curve reference (g0 for the sketch's first primitive, E7 for an existing edge, B2.E7 for one of body B2, h_axis, v_axis)"
            )),
        }
    }
}

impl FromStr for PointRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "'{s}' is not a point reference (g0.start, g0.end, g0.center, V3, E7.start, E7.end, E7.center, origin; B2.V3 for body B2)"
            )
        };
        if s == "origin" {
            return Ok(PointRef::Origin);
        }
        if let Some((curve, pos)) = s.rsplit_once('.')
            && let Some(pos) = parse_pos(pos)
        {
            if let Some(i) = parse_own(curve) {
                return Ok(PointRef::Own(i, pos));
            }
            return match curve.parse::<EntityId>() {
                Ok(id) if id.kind == EntityKind::Edge => Ok(PointRef::Edge(id, pos)),
                _ => Err(bad()),
            };
        }
        match s.parse::<EntityId>() {
            Ok(id) if id.kind == EntityKind::Vertex => Ok(PointRef::Vertex(id)),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for CurveRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CurveRef::Own(i) => write!(f, "g{i}"),
            CurveRef::Edge(id) => write!(f, "{id}"),
            CurveRef::HAxis => f.write_str("h_axis"),
            CurveRef::VAxis => f.write_str("v_axis"),
        }
    }
}

impl fmt::Display for PointRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pos = |p: &PointPos| match p {
            PointPos::Start => "start",
            PointPos::End => "end",
            PointPos::Center => "center",
        };
        match self {
            PointRef::Own(i, p) => write!(f, "g{i}.{}", pos(p)),
            PointRef::Edge(id, p) => write!(f, "{id}.{}", pos(p)),
            PointRef::Vertex(id) => write!(f, "{id}"),
            PointRef::Origin => f.write_str("origin"),
        }
    }
}

macro_rules! string_serde {
    ($ty:ty, $pattern:literal, $desc:literal) => {
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
        impl JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string", "pattern": $pattern, "description": $desc})
            }
        }
    };
}

string_serde!(
    CurveRef,
    "^(g[0-9]+|(B[1-9][0-9]*\\.)?E[1-9][0-9]*|h_axis|v_axis)$",
    "A curve: g0 (own primitive), E7 (projected existing edge; B2.E7 in body B2), h_axis, v_axis"
);
string_serde!(
    PointRef,
    "^(g[0-9]+\\.(start|end|center)|(B[1-9][0-9]*\\.)?E[1-9][0-9]*\\.(start|end|center)|(B[1-9][0-9]*\\.)?V[1-9][0-9]*|origin)$",
    "A point: g0.start/end/center, E7.start/end/center, V3 (projected existing vertex; B2.V3 in body B2), origin"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_round_trip_through_text() {
        for s in ["g0", "g12", "E7", "h_axis", "v_axis"] {
            assert_eq!(s.parse::<CurveRef>().map(|r| r.to_string()), Ok(s.to_string()));
        }
        for s in ["g0.start", "g3.center", "V3", "E7.end", "origin", "B2.E7.end", "B3.V1"] {
            assert_eq!(s.parse::<PointRef>().map(|r| r.to_string()), Ok(s.to_string()));
        }
        assert_eq!("B2.E7".parse::<CurveRef>().map(|r| r.to_string()), Ok("B2.E7".to_string()));
    }

    #[test]
    fn malformed_references_are_refused_with_the_text() {
        for s in ["g", "gx", "F3", "E0", "E-1", "g1.middle", "V3.start", ""] {
            let err = s.parse::<PointRef>().expect_err(s);
            assert!(err.contains(&format!("'{s}'")), "{err}");
        }
        assert!("V3".parse::<CurveRef>().is_err());
        assert!("E07x".parse::<EntityId>().is_err());
        for s in ["B0.F1", "B.F1", "B02.F1", "B2.", "B2.S1", "X2.F1", "B2.F0"] {
            let err = s.parse::<EntityId>().expect_err(s);
            assert!(err.contains(&format!("'{s}'")), "{err}");
        }
    }

    #[test]
    fn entity_ids_say_their_body_and_b1_needs_no_prefix() {
        let id: EntityId = "B2.F3".parse().expect("B2.F3");
        assert_eq!((id.body, id.kind, id.index), (2, EntityKind::Face, 3));
        assert_eq!(id.to_string(), "B2.F3");
        let b1: EntityId = "B1.E4".parse().expect("B1.E4");
        assert_eq!(b1, EntityId::new(EntityKind::Edge, 4));
        assert_eq!(b1.to_string(), "E4");
        assert_ne!(b1, "B2.E4".parse::<EntityId>().expect("B2.E4"));
    }

    #[test]
    fn commands_parse_from_json_and_reject_unknown_fields() {
        let ok: Command = serde_json::from_str(
            r#"{"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":5}}"#,
        )
        .expect("valid extrude");
        assert_eq!(ok.op(), "extrude");
        let bad = serde_json::from_str::<Command>(
            r#"{"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":5},"colour":"red"}"#,
        );
        assert!(bad.is_err());
        let end: Command = serde_json::from_str(r#"{"op":"end"}"#).expect("end");
        assert_eq!(end, Command::End);
    }
}
