//! Importers of public construction sequences into the command language.
//!
//! Two sources: the CadQuery subset of CAD-Coder's test100 ([`import_cadquery`]) and
//! DeepCAD's JSON ([`import_deepcad`]). Both first turn their input into a list of
//! sketch-and-extrude features in global 3D coordinates and then replay them in a
//! [`Session`], one command at a time, so that each sketch can be placed by looking at the
//! model built so far:
//!
//! 1. on an existing planar face, by ID (`"on": "F7"`), where the sketch plane coincides
//!    with one: that is the explicit reference the method wants, and a sketch so placed
//!    follows its face when an upstream depth is edited;
//! 2. else on a base plane (`XY`, `XZ`, `YZ`) through the origin;
//! 3. else on a construction plane `P1`, `P2`... built on `XY` with an origin (`at`,
//!    `offset`) and rotations that reproduce the source frame, checked against FreeCAD's.
//!
//! Sketch coordinates are then computed in the frame FreeCAD gives the chosen support
//! ([`Session::plane_frame`]), by mapping every point through 3D, so the geometry is the
//! source's whatever the support's own orientation. The session ends holding the model.
//!
//! ```no_run
//! use freecad_bridge::{Session, WorkerConfig};
//! use gerd::import::import_cadquery;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let code = "import cadquery as cq
//! wp = cq.Workplane(cq.Plane(cq.Vector(0, 0, 0), cq.Vector(1, 0, 0), cq.Vector(0, 0, 1)))
//! loop0 = wp.moveTo(0, 0).lineTo(2, 0).lineTo(2, 1).lineTo(0, 1).close()
//! solid = wp.add(loop0).extrude(0.5)
//! ";
//! let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
//! let imported = import_cadquery(code, &mut session)?;
//! println!("{}", serde_json::to_string_pretty(&imported.program)?);
//! assert!((session.state().volume - 1.0).abs() < 1e-9);
//! # Ok(())
//! # }
//! ```

mod cadquery;
mod deepcad;
pub mod folder;

use freecad_bridge::command::{
    BodyChoice, Command, Extent, Extrude, Mode, Plane, PlaneRotation, Primitive, Rotations, Sketch,
};
use freecad_bridge::state::{FaceKind, Frame};
use freecad_bridge::{BridgeError, Program, RefusalKind, Session};

pub use cadquery::{CqError, Expr, Stmt, import_cadquery, import_cadquery_with, parse_cadquery};
pub use deepcad::{Units, import_deepcad, import_deepcad_in};

/// A program in the command language, with what the importer noticed on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub program: Program,
    /// Choices and approximations worth knowing about (one line each).
    pub notes: Vec<String>,
    /// Where the sketches went.
    pub placements: PlacementCounts,
}

/// How many sketches went on faces by ID, on base planes and on construction planes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacementCounts {
    pub faces: usize,
    pub base_planes: usize,
    pub construction_planes: usize,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The CadQuery text is outside the supported subset or malformed.
    #[error(transparent)]
    CadQuery(#[from] CqError),
    /// The DeepCAD JSON does not have the expected shape.
    #[error("DeepCAD JSON: {0}")]
    DeepCadJson(String),
    /// A DeepCAD construct the command language cannot express.
    #[error("DeepCAD: unsupported {construct} ({entity})")]
    DeepCadUnsupported { construct: String, entity: String },
    /// The geometry cannot be expressed (degenerate curve, an extrusion not touching the plane...).
    #[error("{what}: {reason}")]
    Geometry { what: String, reason: String },
    /// FreeCAD refused a command of the converted program.
    #[error("command {index} ({op}) of the converted program failed: {error}")]
    Command { index: usize, op: String, error: BridgeError },
    /// A query to FreeCAD (a plane frame, a tessellation) failed.
    #[error("{what}: {error}")]
    Query { what: String, error: BridgeError },
}

// ------------------------------------------------------------------------ shared geometry

pub(crate) use freecad_bridge::geometry::{
    Point3 as V3, add, arc_angles, circumcircle, cross, dot, norm, scale, sub, unit,
};

/// Signed area enclosed by a closed loop, in `plane`'s coordinates (counter-clockwise positive).
pub(crate) fn loop_area(curves: &[Curve], plane: &Frame) -> f64 {
    let mut area = 0.0;
    for c in curves {
        match *c {
            Curve::Circle { radius, .. } => area += std::f64::consts::PI * radius * radius,
            Curve::Line(a, b) => {
                let (a, b) = (plane.to_local(a), plane.to_local(b));
                area += 0.5 * (a[0] * b[1] - b[0] * a[1]);
            }
            Curve::Arc(a, m, b) => {
                let (a, m, b) = (plane.to_local(a), plane.to_local(m), plane.to_local(b));
                area += 0.5 * (a[0] * b[1] - b[0] * a[1]);
                if let Some((center, r)) = circumcircle(a, m, b) {
                    // The circular segment between the chord and the arc, on the side the
                    // arc turns to.
                    let (_, sweep) = arc_angles(a, m, b, center);
                    area += sweep.signum() * 0.5 * r * r * (sweep.abs() - sweep.abs().sin());
                }
            }
        }
    }
    area
}

/// A profile curve in global coordinates. Consecutive curves of a loop share their end
/// points by value, so the sketch points they map to are bitwise equal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Curve {
    Line(V3, V3),
    /// Start, a point on the arc, end.
    Arc(V3, V3, V3),
    Circle {
        center: V3,
        radius: f64,
    },
}

impl Curve {
    fn points(&self) -> Vec<V3> {
        match *self {
            Curve::Line(a, b) => vec![a, b],
            Curve::Arc(a, m, b) => vec![a, m, b],
            Curve::Circle { center, .. } => vec![center],
        }
    }
}

/// Material along the plane normal: the solid spans `[-backward, forward]` from the plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub forward: f64,
    pub backward: f64,
}

/// One sketch and its extrusion, as the source defines them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Feature {
    pub plane: Frame,
    pub loops: Vec<Vec<Curve>>,
    pub span: Span,
    pub mode: Mode,
    /// Names the feature in messages (`solid1, line 7`, a DeepCAD entity id).
    pub label: String,
    /// The area of the face the source builds from the loops, where known: the first
    /// feature's volume is checked against it.
    pub expected_area: Option<f64>,
    /// The same solid as one feature per source profile (empty when the source has one):
    /// built instead when FreeCAD cannot extrude the merged profile.
    pub parts: Vec<Feature>,
}

/// Where a sketch goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Support {
    Face(String),
    Base(&'static str),
    Construction(String),
}

/// Replays features in a session, choosing supports and writing the program.
struct Builder<'s> {
    session: &'s mut Session,
    commands: Vec<Command>,
    notes: Vec<String>,
    counts: PlacementCounts,
    /// Construction planes made so far, with their planes and bodies, for reuse.
    planes: Vec<(String, Frame, usize)>,
    sketches: usize,
    placement: Placement,
}

/// Where the importer may put a sketch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// On an existing face by ID where one holds the sketch plane (the design intent: the
    /// sketch follows the face when an earlier depth changes), else on a plane.
    #[default]
    FacesFirst,
    /// On base or construction planes only: for a program whose face attachments FreeCAD
    /// 0.20 cannot keep through an edit (the face a sketch sits on is renamed or split).
    PlanesOnly,
}

/// Relative tolerance on the parallelism of two unit normals.
const PARALLEL_TOLERANCE: f64 = 1e-9;
/// Distance between coincident planes, relative to the part size.
const COPLANAR_TOLERANCE: f64 = 1e-7;
/// How closely a construction plane must reproduce the source frame, relative to the part size.
const FRAME_TOLERANCE: f64 = 1e-9;

/// How a feature that FreeCAD refused relates to what the source builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The union or cut changes nothing (the extrusion repeats material already there, or
    /// misses the part): the source's boolean is a no-op, so leaving it out is exact.
    NoEffect,
    /// The union would leave separate solids for now (a later feature may join them).
    Disconnected,
    /// FreeCAD could not extrude the profiles merged into one sketch (their outlines
    /// overlap); the feature has `parts` to build one by one.
    Merged,
}

fn refusal(error: &ImportError) -> Option<Refusal> {
    let ImportError::Command { op, error: BridgeError::Command { kind, .. }, .. } = error else { return None };
    if op != "extrude" {
        return None;
    }
    match kind {
        RefusalKind::NoEffect => Some(Refusal::NoEffect),
        RefusalKind::SeparateSolids => Some(Refusal::Disconnected),
        RefusalKind::Unsolvable | RefusalKind::Other => None,
    }
}

/// Execute `features` in order (the first adds material) and return the program.
///
/// PartDesign keeps one solid per body after every feature, while a CadQuery or DeepCAD
/// program may union extrusions that only touch once a later one joins them. Consecutive
/// additions commute (a union is order-free), so within such a run an addition is tried in
/// the active body, then in the others, then retried after the rest of the run; one that
/// touches no body even then starts a body of its own (the part is several solids). A cut
/// goes into every body it removes material from. Cuts are never moved across additions.
pub(crate) fn build(
    session: &mut Session,
    features: &[Feature],
    mut notes: Vec<String>,
    placement: Placement,
) -> Result<Imported, ImportError> {
    if features.is_empty() {
        return Err(ImportError::Geometry { what: "the program".into(), reason: "it builds no solid".into() });
    }
    // Face IDs, the first feature's volume check and the replay after a refused feature all
    // assume the program starts from nothing.
    if !session.state().empty || !session.state().features.is_empty() {
        return Err(ImportError::Geometry {
            what: "the session".into(),
            reason: "an import needs an empty document (call Session::reset first)".into(),
        });
    }
    let mut b = Builder {
        session,
        commands: Vec::new(),
        notes: Vec::new(),
        counts: PlacementCounts::default(),
        planes: Vec::new(),
        sketches: 0,
        placement,
    };
    let mut i = 0;
    while i < features.len() {
        if features[i].mode == Mode::Cut {
            b.cut(&features[i])?;
            i += 1;
            continue;
        }
        let run = features[i..].iter().take_while(|f| f.mode == Mode::Add).count();
        let mut pending: Vec<Feature> = features[i..i + run].to_vec();
        while !pending.is_empty() {
            let mut deferred = Vec::new();
            let (mut last, mut progress) = (None, false);
            for f in &pending {
                match b.add(f)? {
                    None => progress = true,
                    Some(Refusal::NoEffect) => {
                        progress = true;
                        b.notes.push(format!(
                            "{}: left out, it changes nothing (the source's boolean is a no-op)",
                            f.label
                        ));
                    }
                    Some(Refusal::Disconnected) => deferred.push(f.clone()),
                    Some(Refusal::Merged) => {
                        progress = true;
                        b.notes.push(format!("{}: its profiles extruded one by one (their outlines overlap)", f.label));
                        deferred.extend(f.parts.iter().cloned());
                    }
                }
                last = Some(f.label.clone());
            }
            if !progress {
                // Nothing left in the run touches a body. A profile of separate islands makes
                // separate solids by itself: place its islands one by one. Otherwise the first
                // starts a body of its own (or fills the active body while it is empty).
                let first = deferred.remove(0);
                // The source's own regions where it has several, else the profile's islands.
                let parts = if first.parts.len() > 1 { first.parts.clone() } else { islands(&first) };
                if parts.len() > 1 {
                    b.notes.push(format!(
                        "{}: its profile is {} separate regions, extruded one by one",
                        first.label,
                        parts.len()
                    ));
                    pending = parts.into_iter().chain(deferred).collect();
                    continue;
                }
                let state = b.session.state();
                let active = state.active_body_number();
                let active_empty = state.bodies.get(active - 1).map_or(state.empty, |body| body.solids == 0);
                let body = if active_empty { active } else { state.body_count() + 1 };
                if b.attempt_in(&first, Some(body))?.is_some() {
                    return Err(ImportError::Geometry {
                        what: first.label.clone(),
                        reason: format!("FreeCAD refused it even as a body of its own (B{body})"),
                    });
                }
                if !active_empty {
                    b.notes.push(format!("{}: body B{body}, a separate solid", first.label));
                }
            } else if deferred.iter().any(|d| pending.iter().any(|p| p.label == d.label)) {
                b.notes.push(format!(
                    "{} added after {} to keep one solid per body at every step",
                    deferred.iter().map(|f| f.label.as_str()).collect::<Vec<_>>().join(", "),
                    last.unwrap_or_default()
                ));
            }
            pending = deferred;
        }
        i += run;
    }
    notes.append(&mut b.notes);
    Ok(Imported {
        program: Program { name: None, description: None, commands: b.commands },
        notes,
        placements: b.counts,
    })
}

impl Builder<'_> {
    /// An addition: into the active body, else into another one it joins. `Disconnected`
    /// when it touches none of them.
    fn add(&mut self, f: &Feature) -> Result<Option<Refusal>, ImportError> {
        let refusal = self.attempt_in(f, None)?;
        if refusal != Some(Refusal::Disconnected) {
            return Ok(refusal);
        }
        let active = self.session.state().active_body_number();
        for body in (1..=self.session.state().body_count()).filter(|&k| k != active) {
            let refusal = self.attempt_in(f, Some(body))?;
            if refusal != Some(Refusal::Disconnected) {
                return Ok(refusal);
            }
        }
        Ok(Some(Refusal::Disconnected))
    }

    /// A cut, in every body it removes material from.
    fn cut(&mut self, f: &Feature) -> Result<(), ImportError> {
        let bodies = self.session.state().body_count();
        let active = self.session.state().active_body_number();
        // The active body first: no switch where the cut reaches only it.
        let order = std::iter::once(active).chain((1..=bodies).filter(|&k| k != active));
        let mut applied = Vec::new();
        for body in order {
            match self.attempt_in(f, (bodies > 1).then_some(body))? {
                None => applied.push(body),
                Some(Refusal::NoEffect) => {}
                Some(Refusal::Merged) => {
                    self.notes.push(format!("{}: its profiles cut one by one (their outlines overlap)", f.label));
                    for part in &f.parts {
                        self.cut(part)?;
                    }
                    return Ok(());
                }
                Some(Refusal::Disconnected) => {
                    return Err(ImportError::Geometry {
                        what: f.label.clone(),
                        reason: format!("the cut splits body B{body} into separate solids (a body holds one)"),
                    });
                }
            }
        }
        applied.sort_unstable();
        match applied.as_slice() {
            [] => {
                self.notes.push(format!("{}: left out, it changes nothing (the source's boolean is a no-op)", f.label))
            }
            [_] => {}
            several => self.notes.push(format!(
                "{}: cut in each of bodies {}",
                f.label,
                several.iter().map(|b| format!("B{b}")).collect::<Vec<_>>().join(", ")
            )),
        }
        Ok(())
    }

    /// Build one feature, in `body` when given (switching to it, or starting it when it is
    /// the next new one); where FreeCAD refuses it for a reason in [`Refusal`], put the
    /// document and the program back as they were and say why.
    fn attempt_in(&mut self, f: &Feature, body: Option<usize>) -> Result<Option<Refusal>, ImportError> {
        let (commands, counts, planes, sketches) = (self.commands.len(), self.counts, self.planes.len(), self.sketches);
        let notes = self.notes.len();
        let switch = body.filter(|&k| k != self.session.state().active_body_number());
        if let Some(k) = switch {
            self.execute(Command::Body(BodyChoice { name: format!("B{k}") }))?;
        }
        let error = match self.feature(f) {
            Ok(()) => return Ok(None),
            Err(e) => e,
        };
        let merged = !f.parts.is_empty() && matches!(&error, ImportError::Command { op, .. } if op == "extrude");
        let Some(why) = refusal(&error).or(merged.then_some(Refusal::Merged)) else { return Err(error) };
        self.commands.truncate(commands);
        self.counts = counts;
        self.planes.truncate(planes);
        self.sketches = sketches;
        self.notes.truncate(notes);
        // The sketch (and any plane or body switch) before the refused extrusion are in the
        // document: rebuild it from the program so far.
        self.session.reset().map_err(|error| ImportError::Query {
            what: "resetting the document to drop a refused feature".into(),
            error,
        })?;
        for (index, command) in self.commands.iter().enumerate() {
            self.session.execute(command).map_err(|error| ImportError::Command {
                index,
                op: command.op().into(),
                error,
            })?;
        }
        Ok(Some(why))
    }

    fn execute(&mut self, command: Command) -> Result<(), ImportError> {
        let index = self.commands.len();
        self.session.execute(&command).map_err(|error| ImportError::Command {
            index,
            op: command.op().to_string(),
            error,
        })?;
        self.commands.push(command);
        Ok(())
    }

    fn frame(&mut self, on: &str) -> Result<Frame, ImportError> {
        self.session.plane_frame(on).map_err(|error| ImportError::Query { what: format!("the frame of {on}"), error })
    }

    /// A length scale for tolerances: the part so far and the new profile together.
    fn size(&self, feature: &Feature) -> f64 {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in feature.loops.iter().flatten().flat_map(Curve::points) {
            for i in 0..3 {
                lo[i] = lo[i].min(p[i]);
                hi[i] = hi[i].max(p[i]);
            }
        }
        let profile = if lo[0].is_finite() { norm(sub(hi, lo)) } else { 0.0 };
        let model = self.session.state().bbox.as_ref().map_or(0.0, |b| b.diagonal());
        let size = profile.max(model).max(feature.span.forward.abs()).max(feature.span.backward.abs());
        if size > 0.0 { size } else { 1.0 }
    }

    fn feature(&mut self, f: &Feature) -> Result<(), ImportError> {
        let size = self.size(f);
        let support = self.support(f, size)?;
        let on = match &support {
            Support::Face(id) => {
                self.counts.faces += 1;
                id.clone()
            }
            Support::Base(name) => {
                self.counts.base_planes += 1;
                (*name).to_string()
            }
            Support::Construction(name) => {
                self.counts.construction_planes += 1;
                name.clone()
            }
        };
        let frame = self.frame(&on)?;
        // The support's plane must hold the profile: check it rather than trust the choice.
        let off = dot(sub(f.plane.origin, frame.origin), frame.normal);
        if dot(frame.normal, f.plane.normal).abs() < 1.0 - 1e-9 || off.abs() > COPLANAR_TOLERANCE * size {
            return Err(ImportError::Geometry {
                what: f.label.clone(),
                reason: format!("the support {on} does not hold the sketch plane (offset {off:e})"),
            });
        }
        let first = self.session.state().empty;
        let primitives = sketch_primitives(&f.loops, &frame);
        self.sketches += 1;
        let name = format!("S{}", self.sketches);
        self.execute(Command::Sketch(Sketch {
            name: name.clone(),
            on,
            primitives,
            constraints: Vec::new(),
            auto_coincident: true,
        }))?;
        let sign = if dot(frame.normal, f.plane.normal) > 0.0 { 1.0 } else { -1.0 };
        let (extent, reversed) = extent_for(f.span, sign, f.mode).ok_or_else(|| ImportError::Geometry {
            what: f.label.clone(),
            reason: format!(
                "the extrusion spans {} to {} from its sketch plane; the command language extrudes from the plane",
                -f.span.backward, f.span.forward
            ),
        })?;
        self.execute(Command::Extrude(Extrude { profile: name, mode: f.mode, extent, reversed }))?;
        // The first solid is the prism of the source's face: its volume checks that FreeCAD's
        // face maker built the same face from the loops.
        if let (true, Some(area)) = (first, f.expected_area) {
            let expected = area * (f.span.forward + f.span.backward);
            let volume = self.session.state().volume;
            if (volume - expected).abs() > 1e-6 * expected.abs() {
                return Err(ImportError::Geometry {
                    what: f.label.clone(),
                    reason: format!(
                        "FreeCAD built a solid of volume {volume} where the source's face gives {expected}"
                    ),
                });
            }
        }
        Ok(())
    }

    fn support(&mut self, f: &Feature, size: f64) -> Result<Support, ImportError> {
        let z = f.plane.normal;
        let coplanar = |normal: V3, point: V3| {
            norm(cross(normal, z)) <= PARALLEL_TOLERANCE
                && dot(sub(f.plane.origin, point), normal).abs() <= COPLANAR_TOLERANCE * size
        };
        let on_faces = self.placement == Placement::FacesFirst;
        let candidates: Vec<(String, f64)> = self
            .session
            .state()
            .faces
            .iter()
            .filter(|face| on_faces && face.kind == FaceKind::Plane && self.session.state().in_active_body(&face.id))
            .filter_map(|face| {
                let n = unit(face.normal?)?;
                coplanar(n, face.centroid).then(|| (face.id.clone(), face.area))
            })
            .collect();
        if let Some(id) = self.best_face(f, &candidates, size)? {
            return Ok(Support::Face(id));
        }
        for (name, normal) in [("XY", [0.0, 0.0, 1.0]), ("XZ", [0.0, 1.0, 0.0]), ("YZ", [1.0, 0.0, 0.0])] {
            if coplanar(normal, [0.0; 3]) {
                return Ok(Support::Base(name));
            }
        }
        let body = self.session.state().active_body_number();
        if let Some((name, _, _)) = self.planes.iter().find(|(_, p, b)| *b == body && coplanar(p.normal, p.origin)) {
            return Ok(Support::Construction(name.clone()));
        }
        self.construction_plane(f, size).map(Support::Construction)
    }

    /// Among coplanar faces, the one that holds most of the profile's points (ties: the
    /// larger); several faces can share a plane (two steps of a staircase at one height).
    fn best_face(
        &mut self,
        f: &Feature,
        candidates: &[(String, f64)],
        size: f64,
    ) -> Result<Option<String>, ImportError> {
        match candidates {
            [] => return Ok(None),
            [(id, _)] => return Ok(Some(id.clone())),
            _ => {}
        }
        let tessellation = self
            .session
            .tessellate(1e-3 * size, 0.2)
            .map_err(|error| ImportError::Query { what: "tessellating the model to place a sketch".into(), error })?;
        let points: Vec<[f64; 2]> =
            f.loops.iter().flatten().flat_map(Curve::points).map(|p| f.plane.to_local(p)).collect();
        let mut best: Option<(usize, f64, &String)> = None;
        for (id, area) in candidates {
            // The tessellation lists faces in the state's order, body by body.
            let Some(index) = id.parse().ok().and_then(|id| self.session.state().position(id)) else { continue };
            let (Some(&t0), Some(&t1)) =
                (tessellation.face_offsets.get(index), tessellation.face_offsets.get(index + 1))
            else {
                continue;
            };
            let mesh = &tessellation.mesh;
            let corner = |t: usize, k: usize| -> Option<[f64; 2]> {
                let v = *mesh.triangles.get(3 * t + k)? as usize;
                let p = [*mesh.positions.get(3 * v)?, *mesh.positions.get(3 * v + 1)?, *mesh.positions.get(3 * v + 2)?];
                Some(f.plane.to_local(p))
            };
            let triangles: Vec<[[f64; 2]; 3]> = (t0 as usize..t1 as usize)
                .filter_map(|t| Some([corner(t, 0)?, corner(t, 1)?, corner(t, 2)?]))
                .collect();
            let eps = 1e-6 * size;
            let held = points.iter().filter(|p| triangles.iter().any(|t| in_triangle(**p, t, eps))).count();
            let better = match best {
                None => true,
                Some((h, a, _)) => held > h || (held == h && *area > a),
            };
            if better {
                best = Some((held, *area, id));
            }
        }
        Ok(best.map(|(_, _, id)| id.clone()))
    }

    fn construction_plane(&mut self, f: &Feature, size: f64) -> Result<String, ImportError> {
        let name = format!("P{}", self.planes.len() + 1);
        let xy = self.frame("XY")?;
        // Express the wanted frame in XY's frame (the identity in FreeCAD, but ask rather
        // than assume), then split its rotation into turns about z, the new y, the newest x.
        let origin = xy.to_local(f.plane.origin);
        let offset = dot(sub(f.plane.origin, xy.origin), xy.normal);
        let local = |v: V3| [dot(v, xy.x_axis), dot(v, xy.y_axis), dot(v, xy.normal)];
        let (x, y, z) = (local(f.plane.x_axis), local(f.plane.y_axis), local(f.plane.normal));
        // Columns of R are the new axes: R[i][j] = axis_j[i].
        let r = [[x[0], y[0], z[0]], [x[1], y[1], z[1]], [x[2], y[2], z[2]]];
        let sin_b = (-r[2][0]).clamp(-1.0, 1.0);
        let cos_b = (r[0][0] * r[0][0] + r[1][0] * r[1][0]).sqrt();
        let (a, b, c) = if cos_b > 1e-9 {
            (r[1][0].atan2(r[0][0]), sin_b.atan2(cos_b), r[2][1].atan2(r[2][2]))
        } else {
            // Gimbal lock: the first turn is free; put everything in the last one.
            (0.0, sin_b.atan2(cos_b), (-r[1][2]).atan2(r[1][1]))
        };
        let rotation: Vec<PlaneRotation> = [("z", a), ("y", b), ("x", c)]
            .into_iter()
            .filter(|(_, angle)| angle.abs() > 1e-15)
            .map(|(axis, angle)| PlaneRotation { axis: axis.into(), angle: angle.to_degrees() })
            .collect();
        self.execute(Command::Plane(Plane {
            name: name.clone(),
            on: "XY".into(),
            at: Some(origin),
            offset,
            rotation: Rotations(rotation),
        }))?;
        let got = self.frame(&name)?;
        let error = [
            norm(sub(got.origin, f.plane.origin)) / size,
            norm(sub(got.x_axis, f.plane.x_axis)),
            norm(sub(got.normal, f.plane.normal)),
        ]
        .into_iter()
        .fold(0.0, f64::max);
        if error > FRAME_TOLERANCE {
            return Err(ImportError::Geometry {
                what: f.label.clone(),
                reason: format!("construction plane {name} misses the source frame by {error:e}"),
            });
        }
        self.notes.push(format!("{}: construction plane {name}", f.label));
        let body = self.session.state().active_body_number();
        self.planes.push((name.clone(), f.plane, body));
        Ok(name)
    }
}

/// A loop as a polygon in `plane`'s coordinates (arcs and circles sampled), for telling
/// which loops lie inside which.
pub(crate) fn loop_polygon(curves: &[Curve], plane: &Frame) -> Vec<[f64; 2]> {
    let mut out = Vec::new();
    for c in curves {
        match *c {
            Curve::Line(a, _) => out.push(plane.to_local(a)),
            Curve::Arc(a, m, b) => {
                let (a2, m2, b2) = (plane.to_local(a), plane.to_local(m), plane.to_local(b));
                match circumcircle(a2, m2, b2) {
                    Some((center, r)) => {
                        let (t0, sweep) = arc_angles(a2, m2, b2, center);
                        out.extend((0..16).map(|k| {
                            let t = t0 + sweep * f64::from(k) / 16.0;
                            [center[0] + r * t.cos(), center[1] + r * t.sin()]
                        }));
                    }
                    None => out.push(a2),
                }
            }
            Curve::Circle { center, radius } => {
                let c = plane.to_local(center);
                out.extend((0..64).map(|k| {
                    let t = std::f64::consts::TAU * f64::from(k) / 64.0;
                    [c[0] + radius * t.cos(), c[1] + radius * t.sin()]
                }));
            }
        }
    }
    out
}

/// Whether `p` is inside the polygon (even-odd rule).
pub(crate) fn point_in_polygon(p: [f64; 2], polygon: &[[f64; 2]]) -> bool {
    let mut inside = false;
    for (i, a) in polygon.iter().enumerate() {
        let b = polygon[(i + 1) % polygon.len()];
        if (a[1] > p[1]) != (b[1] > p[1]) && p[0] < a[0] + (p[1] - a[1]) * (b[0] - a[0]) / (b[1] - a[1]) {
            inside = !inside;
        }
    }
    inside
}

/// A point just inside a polygon, next to the middle of its longest side: neighbours that
/// share sides hold none of each other's such points, whereas a loop's corners lie on them.
fn interior_point(polygon: &[[f64; 2]]) -> Option<[f64; 2]> {
    let n = polygon.len();
    let twice_area: f64 =
        (0..n).map(|i| polygon[i][0] * polygon[(i + 1) % n][1] - polygon[(i + 1) % n][0] * polygon[i][1]).sum();
    let (a, b) = (0..n)
        .map(|i| (polygon[i], polygon[(i + 1) % n]))
        .max_by(|(a, b), (c, d)| dist2(*a, *b).total_cmp(&dist2(*c, *d)))?;
    let length = dist2(a, b).sqrt();
    if length == 0.0 || twice_area == 0.0 {
        return None;
    }
    // The interior lies to the left of a counter-clockwise loop's sides.
    let side = twice_area.signum() * 1e-6 * length;
    let normal = [-(b[1] - a[1]) / length, (b[0] - a[0]) / length];
    Some([(a[0] + b[0]) / 2.0 + side * normal[0], (a[1] + b[1]) / 2.0 + side * normal[1]])
}

fn dist2(a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)
}

/// A feature's profile split into islands: each outer loop with the holes directly inside
/// it (a loop inside an even number of others is outer). One island: the feature itself.
fn islands(f: &Feature) -> Vec<Feature> {
    let polygons: Vec<Vec<[f64; 2]>> = f.loops.iter().map(|l| loop_polygon(l, &f.plane)).collect();
    let probes: Vec<Option<[f64; 2]>> = polygons.iter().map(|p| interior_point(p)).collect();
    let inside = |i: usize, j: usize| i != j && probes[i].is_some_and(|p| point_in_polygon(p, &polygons[j]));
    let depth: Vec<usize> =
        (0..polygons.len()).map(|i| (0..polygons.len()).filter(|&j| inside(i, j)).count()).collect();
    let outer: Vec<usize> = (0..polygons.len()).filter(|&i| depth[i].is_multiple_of(2)).collect();
    if outer.len() <= 1 {
        return vec![f.clone()];
    }
    outer
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let holes = (0..polygons.len()).filter(|&j| depth[j] == depth[i] + 1 && inside(j, i));
            Feature {
                loops: std::iter::once(i).chain(holes).map(|j| f.loops[j].clone()).collect(),
                label: format!("{} (island {} of {})", f.label, k + 1, outer.len()),
                expected_area: None,
                parts: Vec::new(),
                ..f.clone()
            }
        })
        .collect()
}

fn in_triangle(p: [f64; 2], t: &[[f64; 2]; 3], eps: f64) -> bool {
    let edge = |a: [f64; 2], b: [f64; 2]| {
        let (ex, ey) = (b[0] - a[0], b[1] - a[1]);
        let len = (ex * ex + ey * ey).sqrt().max(1e-300);
        (ex * (p[1] - a[1]) - ey * (p[0] - a[0])) / len
    };
    let d = [edge(t[0], t[1]), edge(t[1], t[2]), edge(t[2], t[0])];
    d.iter().all(|x| *x >= -eps) || d.iter().all(|x| *x <= eps)
}

/// The loops as sketch primitives in `frame`.
fn sketch_primitives(loops: &[Vec<Curve>], frame: &Frame) -> Vec<Primitive> {
    let at = |p: V3| frame.to_local(p);
    loops
        .iter()
        .flatten()
        .map(|c| match *c {
            Curve::Line(a, b) => Primitive::Line { start: at(a), end: at(b), construction: false },
            Curve::Arc(a, m, b) => Primitive::Arc { start: at(a), mid: at(m), end: at(b), construction: false },
            Curve::Circle { center, radius } => Primitive::Circle { center: at(center), radius, construction: false },
        })
        .collect()
}

/// The extent of an extrusion spanning `span` along the source normal, for a sketch whose
/// normal is `sign` times the source's; None when the solid does not touch the sketch plane.
pub(crate) fn extent_for(span: Span, sign: f64, mode: Mode) -> Option<(Extent, bool)> {
    // Interval along the sketch normal, then along the feature's default direction
    // (Pad: the normal; Pocket: against it).
    let (lo, hi) = if sign > 0.0 { (-span.backward, span.forward) } else { (-span.forward, span.backward) };
    let (lo, hi) = match mode {
        Mode::Add => (lo, hi),
        Mode::Cut => (-hi, -lo),
    };
    if !(lo.is_finite() && hi.is_finite()) || hi - lo <= 0.0 {
        return None;
    }
    let scale = hi.abs().max(lo.abs());
    if (hi + lo).abs() <= 1e-12 * scale {
        return Some((Extent::Symmetric { depth: hi - lo }, false));
    }
    if lo == 0.0 {
        return Some((Extent::OneSide { depth: hi }, false));
    }
    if hi == 0.0 {
        return Some((Extent::OneSide { depth: -lo }, true));
    }
    if lo < 0.0 && hi > 0.0 {
        return Some((Extent::TwoSides { depth: hi, depth2: -lo }, false));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_follow_the_default_direction_of_pad_and_pocket() {
        let one = Span { forward: 2.0, backward: 0.0 };
        assert_eq!(extent_for(one, 1.0, Mode::Add), Some((Extent::OneSide { depth: 2.0 }, false)));
        assert_eq!(extent_for(one, -1.0, Mode::Add), Some((Extent::OneSide { depth: 2.0 }, true)));
        assert_eq!(extent_for(one, 1.0, Mode::Cut), Some((Extent::OneSide { depth: 2.0 }, true)));
        assert_eq!(extent_for(one, -1.0, Mode::Cut), Some((Extent::OneSide { depth: 2.0 }, false)));
        let sym = Span { forward: 1.5, backward: 1.5 };
        assert_eq!(extent_for(sym, -1.0, Mode::Cut), Some((Extent::Symmetric { depth: 3.0 }, false)));
        let two = Span { forward: 1.0, backward: 3.0 };
        assert_eq!(extent_for(two, 1.0, Mode::Add), Some((Extent::TwoSides { depth: 1.0, depth2: 3.0 }, false)));
        assert_eq!(extent_for(two, 1.0, Mode::Cut), Some((Extent::TwoSides { depth: 3.0, depth2: 1.0 }, false)));
        assert_eq!(extent_for(Span { forward: 3.0, backward: -1.0 }, 1.0, Mode::Add), None);
    }

    #[test]
    fn frames_make_x_perpendicular_to_the_normal_like_occt() {
        let f = Frame::from_normal_x([1.0, 2.0, 3.0], [0.0, 0.0, 2.0], [1.0, 0.0, 0.5]).expect("frame");
        assert_eq!(f.x_axis, [1.0, 0.0, 0.0]);
        assert_eq!(f.y_axis, [0.0, 1.0, 0.0]);
        assert_eq!(f.to_global(1.0, 1.0), [2.0, 3.0, 3.0]);
        assert!(Frame::from_normal_x([0.0; 3], [0.0, 0.0, 1.0], [0.0, 0.0, 3.0]).is_none());
    }
}
