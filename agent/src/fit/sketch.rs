//! The drawing's fit: a new sketch's points, radii and its extrusion's depth moved so the
//! feature's drawn edges lie on the target's lines.
//!
//! Rendering a candidate means rebuilding it in FreeCAD (0.04 to 0.7 s), and a drawing has
//! two numbers per corner, so the search runs on a model of the picture instead: every
//! edge the extrusion makes from the sketch (the profile on the sketch plane, its copy at
//! the far end, the straight edges between them at corners) is sampled, projected with the
//! outline's camera and scored against the target's line-distance field. Which samples
//! count is decided once, from the candidate's own render: a sample counts when the render
//! draws an edge where it lands (hidden edges, the wrong side of a symmetric extent and
//! seams drop out without a model of either). The engine then rebuilds the proposal once
//! and keeps it only when the real render agrees better ([`super::agreement`]).

use freecad_bridge::command::{Extent, Extrude, Primitive, Sketch};
use freecad_bridge::crossing::first_crossing;
use freecad_bridge::geometry::{circumcircle, dot, unit};
use freecad_bridge::state::Frame;
use nalgebra::{Point3, Vector3};
use views::{Camera, IdBuffers};

use super::dimensions::Existing;
use super::regular::Regularised;
use super::sweep::Carry;
use super::ties::Ties;
use super::{EDGE_CAP, TargetPixels};
use depth::{coarse_depth, depth_on_picture, depth_vector, near_depth};
use samples::counted_samples;
pub(super) use search::{Coordinate, search_over};
use search::{Moving, search, widest_range};

/// How far a point or radius may move, in pixels of the outline. The simulated reader's
/// 1% of the window is about 4.5 px at the views' scale: at 8 px a tenth of its corners
/// ended at the edge of the reach and were held where drawn (a notched block's cut kept
/// 4.45 px of misfit); at 14 px they land, and the oracle's exact candidates still move
/// nothing (the search goes to the nearest good value, not the best in reach).
pub const POINT_REACH_PX: f64 = 14.0;
/// The cap of the first search where the usual one ends this far from the target's lines
/// (pixels, on average): a corner drawn 9 px off has no pull under [`EDGE_CAP`].
pub(super) const WIDE_FROM_PX: f64 = 0.5;
pub(super) const WIDE_CAP: f64 = 12.0;
/// How far across its own axis a revolve's profile may be put back on it
/// ([`super::onto_axis`]), in pixels of the outline: a hair, not a fit.
pub const AXIS_REACH_PX: f64 = 8.0;
/// A revolve's side is scored by its outline where the profile runs within this angle of
/// the axis (`Model::steep_line`).
const STEEP_DEGREES: f64 = 30.0;
/// How far a depth may move, as a share of the model's value.
pub const DEPTH_REACH: f64 = 0.25;
/// The depth factor's search step at its coarsest, as a share of [`DEPTH_REACH`] (2 of 8).
const DEPTH_STEPS: f64 = 8.0;
/// Samples along a projected edge, one per this many pixels.
pub(super) const SAMPLE_SPACING_PX: f64 = 1.5;
/// The search stops refining below this step (pixels).
const FINEST_STEP_PX: f64 = 0.1;
/// A sample lies on the candidate's drawn edge when one running its way is this near
/// (pixels): the picture is rasterised at whole pixels, the sample is not.
pub(super) const DRAWN_PX: f32 = 1.5;
/// The narrowest bore ring the fit reads (radius, pixels).
const SMALLEST_BORE_PX: f64 = 2.0;
/// ... and that edge is the sample's own when it passes this near the sample in the model
/// (pixels' worth): the model's own edges lie on their samples up to the tessellation's chords.
const OWN_EDGE_PX: f64 = 2.0;

/// The centres of the model's circular edges square to the sketch (their axes along its
/// normal), in the sketch's coordinates: where a drawn circle may be made concentric
/// ([`super::regular`]).
fn circle_centres(on: &Existing<'_>) -> Vec<[f64; 2]> {
    let n = on.frame.normal;
    on.state
        .edges
        .iter()
        .filter(|e| e.kind == freecad_bridge::state::EdgeKind::Circle)
        .filter_map(|e| {
            let (c, a) = (e.center?, unit(e.axis?)?);
            (dot(a, n).abs() > PARALLEL_COS).then(|| on.frame.to_local(c))
        })
        .collect()
}

/// An edge's axis this near the sketch's normal (cosine) is square to the sketch.
const PARALLEL_COS: f64 = 0.9998;

/// The move of the drawing in its plane that looks on the picture like the extrusion's whole
/// depth (model units, at the drawing's first point); `None` where the plane is seen edge-on.
fn slide_vector(model: &Model, n: &Numbers, depth: f64) -> Option<[f64; 2]> {
    let (dx, dy) = depth_vector(model, n, depth)?;
    let &at = n.points.first()?;
    let on_picture = |u: f64, v: f64| {
        let p = model.frame.to_global(at[0] + u, at[1] + v);
        model.camera.project(&Point3::from(p)).map(|(x, y, _)| (x, y))
    };
    let (x0, y0) = on_picture(0.0, 0.0)?;
    let (xu, yu) = on_picture(1.0, 0.0)?;
    let (xv, yv) = on_picture(0.0, 1.0)?;
    let (a, b, c, d) = (xu - x0, xv - x0, yu - y0, yv - y0);
    let det = a * d - b * c;
    if det.abs() < 1e-9 * (a.abs() + b.abs() + c.abs() + d.abs()).powi(2).max(1e-300) {
        return None;
    }
    Some([(d * dx - b * dy) / det, (a * dy - c * dx) / det])
}

/// The candidate's render as the fit reads it: its ID buffers, and the model-space polyline
/// of each edge they name (by index, as [`views::Scene::edges`]).
#[derive(Debug, Clone, Copy)]
pub struct Render<'a> {
    pub ids: &'a IdBuffers,
    pub edges: &'a [Vec<Point3<f64>>],
}

/// The fitted drawing and extrusion, and the picture model's cost before and after.
#[derive(Debug, Clone)]
pub struct Proposal {
    pub sketch: Sketch,
    pub feature: Feature,
    /// Mean capped distance (pixels) of the counted samples to the target's lines.
    pub before_px: f64,
    pub after_px: f64,
    /// Samples the picture model counted.
    pub samples: usize,
    /// What the fit made regular ([`super::regular`]): lines level or upright, circles and
    /// arcs concentric.
    pub regular: Regularised,
    /// The next proposal to build where this one is not taken: with a drawing made regular,
    /// the fit without it; after a depth started from a near one, the search without it.
    pub free: Option<Box<Proposal>>,
    /// Whether the search started the depth from the best near one ([`depth::near_depth`]).
    from_near: bool,
}

impl Proposal {
    /// Whether this drawing's curves, or the free fit's, cross each other away from their
    /// ends.
    fn crosses(&self) -> bool {
        first_crossing(&self.sketch.primitives).is_some() || self.free.as_ref().is_some_and(|free| free.crosses())
    }

    /// The proposals to build in turn: this one, then each [`Proposal::free`] after it.
    pub fn tries(self) -> impl Iterator<Item = Proposal> {
        let mut next = Some(self);
        std::iter::from_fn(move || {
            let mut proposal = next.take()?;
            next = proposal.free.take().map(|free| *free);
            Some(proposal)
        })
    }

    /// This proposal's tries whose costs are numbers (a drawing every move of which the
    /// search refuses costs infinity): a report's figures are written as JSON.
    fn finite(mut self) -> Option<Proposal> {
        let rest = self.free.take().and_then(|free| free.finite());
        if self.before_px.is_finite() && self.after_px.is_finite() {
            self.free = rest.map(Box::new);
            Some(self)
        } else {
            rest
        }
    }

    /// This proposal's tries, then `after`'s.
    fn then(mut self, after: Option<Proposal>) -> Proposal {
        self.free = match self.free.take() {
            Some(free) => Some(Box::new(free.then(after))),
            None => after.map(Box::new),
        };
        self
    }
}

/// What [`propose`] may do with a drawing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moves {
    /// Move its numbers onto the target's lines, then try it made regular as well.
    Fit,
    /// [`Moves::Fit`], the feature being the program's last solid feature (no later feature
    /// stands on it): its depth is also tried with the drawing slid along in its plane
    /// ([`Moving::slides`]). Slid under other features, a feature moves against them where
    /// the picture cannot tell: on simulated test100, with every feature sliding, parts of
    /// one feature rose by 0.24 in all, parts of several fell by 0.33 (a tray's body slid off
    /// the pocket drawn on a base plane).
    Whole,
    /// Only make it regular where it is near it ([`super::regular`]), settled where it is
    /// drawn: a step's candidate, whose target still shows features not built yet, so no
    /// number is pulled onto a line.
    Regular,
}

/// The numbers the search moves: each distinct point of the drawing, each radius, and one
/// factor on the extrusion's depths.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Numbers {
    pub(super) points: Vec<[f64; 2]>,
    pub(super) radii: Vec<f64>,
    pub(super) depth_scale: f64,
}

/// A primitive by the numbers it is drawn from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shape {
    Line { a: usize, b: usize },
    Arc { a: usize, m: usize, b: usize },
    CenterArc { c: usize, r: usize, from: f64, to: f64 },
    Circle { c: usize, r: usize },
}

/// Where one sample sits: on primitive `shape` at `s` (0..1), on the profile's copy at
/// `place` (see [`Motion`]); or on the path point `point` takes from one place to another
/// (an extrusion's straight edge at a corner, a revolve's circle).
#[derive(Debug, Clone, Copy)]
enum Sample {
    Along {
        shape: usize,
        s: f64,
        place: Place,
    },
    Across {
        point: usize,
        s: f64,
        span: (f64, f64),
    },
    /// On the outline of the surface a whole turn sweeps from the line `shape`, on `side`
    /// (1 or -1) of the axis as the picture shows it ([`Model::turned`]): at `height` along
    /// the axis (sketch units from the axis's point), at the radius the line has at share
    /// `t` between its ends. Scored against the target's silhouette boundary: no edge is
    /// drawn there. It measures the side's radius only: held at a share alone it slid along
    /// the outline as the line's ends moved and found other outlines past a chamfered end,
    /// and held at a height alone it let a search straighten a slanted side by moving an end
    /// up (a shaft's head grew 4 mm where nothing else held it).
    Turned {
        shape: usize,
        t: f64,
        height: f64,
        side: f64,
    },
    /// On the circle a whole turn sweeps from the point at share `t` of the steep line
    /// `shape` (a side of a revolve's profile), at share `s` of the turn: counted only where
    /// a later feature's edge lies on the side's surface there ([`samples::counted_samples`]).
    /// It moves with the line's ends, as a chamfer's or fillet's circle moves with the
    /// corner it took (held at its height instead, the rings beside a corner pulled the
    /// radius to make up for the corner's move: gen-11 0.9742 -> 0.9599).
    Ring {
        shape: usize,
        t: f64,
        s: f64,
    },
}

impl Sample {
    /// Whether the sample lies on the silhouette's boundary rather than on a drawn edge.
    fn on_outline(&self) -> bool {
        matches!(self, Sample::Turned { .. })
    }
}

/// Where a copy of the profile lies along the feature's motion.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    /// A share of the motion (see [`Motion`]): it moves with a fitted depth.
    Of(f64),
    /// Model units along an extrusion's normal, which a fitted depth does not move: where a
    /// face of the model parallel to the sketch meets the feature's sides.
    At(f64),
}

impl Place {
    fn share(self) -> f64 {
        match self {
            Place::Of(v) | Place::At(v) => v,
        }
    }
}

/// How the feature carries its profile.
#[derive(Debug, Clone, Copy)]
enum Motion {
    /// Along the sketch normal; a place is a number of depths.
    Extrude { depth: f64 },
    /// None of its own: a loft's section, whose plane lies `offset` along its normal from
    /// the plane's reference (0: a plane that does not move), the depth factor scaling it.
    Lift { offset: f64 },
    /// About an axis in the sketch plane (a point and a direction, sketch coordinates); a
    /// place is an angle in radians.
    Revolve { point: [f64; 2], direction: [f64; 2] },
    /// Along a sweep's path: place 0 is the profile as drawn, any other its copy at the
    /// path's far end.
    Sweep(Carry),
}

/// A counted sample and the direction its edge runs on the picture
/// ([`views::orientation_bin`]): it is scored against the target's lines that run the same way.
#[derive(Debug, Clone, Copy)]
struct Counted {
    sample: Sample,
    bin: usize,
}

struct Model<'a> {
    shapes: Vec<(usize, Shape)>,
    frame: &'a Frame,
    camera: &'a Camera,
    motion: Motion,
}

impl Model<'_> {
    fn uv(&self, n: &Numbers, shape: Shape, s: f64) -> Option<[f64; 2]> {
        uv(n, shape, s)
    }

    /// The pixel (outline's camera) of sketch point `uv` carried to `place`.
    fn pixel(&self, n: &Numbers, uv: [f64; 2], place: Place) -> Option<(f64, f64)> {
        self.project(self.point(n, uv, place)?)
    }

    /// Sketch point `uv` carried to `place`, in model space.
    fn point(&self, n: &Numbers, uv: [f64; 2], place: Place) -> Option<Vector3<f64>> {
        let p = Vector3::from(self.frame.to_global(uv[0], uv[1]));
        let normal = Vector3::from(self.frame.normal);
        let q = match self.motion {
            Motion::Extrude { depth } => match place {
                Place::Of(share) => p + normal * (share * depth * n.depth_scale),
                Place::At(along) => p + normal * along,
            },
            // The drawing's plane moves with its offset from its reference.
            Motion::Lift { offset } => p + normal * (offset * (n.depth_scale - 1.0)),
            Motion::Revolve { point, direction } => {
                let origin = Vector3::from(self.frame.to_global(point[0], point[1]));
                let axis =
                    Vector3::from(self.frame.x_axis) * direction[0] + Vector3::from(self.frame.y_axis) * direction[1];
                let axis = axis.try_normalize(1e-12)?;
                let rel = p - origin;
                // Rodrigues' rotation of the point about the axis.
                let (sin, cos) = place.share().sin_cos();
                origin + rel * cos + axis.cross(&rel) * sin + axis * axis.dot(&rel) * (1.0 - cos)
            }
            Motion::Sweep(_) if place == Place::Of(0.0) => p,
            Motion::Sweep(carry) => carry.carried(p),
        };
        Some(q)
    }

    fn sample_pixel(&self, n: &Numbers, sample: &Sample) -> Option<(f64, f64)> {
        self.project(self.sample_point(n, sample)?)
    }

    /// The pixel (outline's camera) of a point in model space.
    fn project(&self, q: Vector3<f64>) -> Option<(f64, f64)> {
        self.camera.project(&Point3::from(q)).map(|(x, y, _)| (x, y))
    }

    fn sample_point(&self, n: &Numbers, sample: &Sample) -> Option<Vector3<f64>> {
        match *sample {
            Sample::Along { shape, s, place } => self.point(n, self.uv(n, self.shapes[shape].1, s)?, place),
            Sample::Across { point, s, span: (a, b) } => self.point(n, n.points[point], Place::Of(a + s * (b - a))),
            Sample::Turned { shape, t, height, side } => self.turned(n, self.shapes[shape].1, t, height, side),
            Sample::Ring { shape, t, s } => {
                let Shape::Line { a, b } = self.shapes[shape].1 else { return None };
                let uv = samples::lerp(n.points[a], n.points[b], t);
                self.point(n, uv, Place::Of(s * std::f64::consts::TAU))
            }
        }
    }
}

/// The sketch point at share `s` (0..1) along `shape` of the drawing `n`.
pub(super) fn uv(n: &Numbers, shape: Shape, s: f64) -> Option<[f64; 2]> {
    let on_circle = |c: [f64; 2], r: f64, angle: f64| [c[0] + r * angle.cos(), c[1] + r * angle.sin()];
    Some(match shape {
        Shape::Line { a, b } => {
            let (p, q) = (n.points[a], n.points[b]);
            [p[0] + s * (q[0] - p[0]), p[1] + s * (q[1] - p[1])]
        }
        Shape::Arc { a, m, b } => {
            let (p, mid, q) = (n.points[a], n.points[m], n.points[b]);
            let (c, r) = circumcircle(p, mid, q)?;
            let (from, sweep) = freecad_bridge::geometry::arc_angles(p, mid, q, c);
            on_circle(c, r, from + s * sweep)
        }
        Shape::CenterArc { c, r, from, to } => {
            let sweep = (to - from).rem_euclid(360.0);
            on_circle(n.points[c], n.radii[r], (from + s * sweep).to_radians())
        }
        Shape::Circle { c, r } => on_circle(n.points[c], n.radii[r], s * std::f64::consts::TAU),
    })
}

/// The target's distance to lines (or, `outline`, to its silhouette's boundary) running in
/// direction `bin` at a (fractional) pixel, bilinear, capped.
pub(super) fn line_distance(target: &TargetPixels, outline: bool, bin: usize, x: f64, y: f64, cap: f64) -> f64 {
    let size = target.size as usize;
    // The four pixels around it must all be inside the picture.
    let (x0, y0) = ((x - 0.5).floor(), (y - 0.5).floor());
    if x0 < 0.0 || y0 < 0.0 || x0 + 1.0 >= size as f64 || y0 + 1.0 >= size as f64 {
        return cap;
    }
    let field = match (outline, &target.refined) {
        (true, _) => &target.outline[bin],
        (false, Some(refined)) => &refined.by_bin[bin],
        (false, None) => &target.oriented[bin],
    };
    super::bilinear(x, y, |i, j| f64::from(field[j as usize * size + i as usize])).min(cap)
}

/// The copies of the profile an extent makes, in depths along the sketch normal (which side
/// is which is left to the render: a copy the candidate does not draw has no counted samples).
fn offsets(extent: &Extent) -> Vec<f64> {
    match *extent {
        Extent::OneSide { .. } => vec![0.0, 1.0, -1.0],
        Extent::Symmetric { .. } => vec![0.0, 0.5, -0.5],
        Extent::TwoSides { depth, depth2 } if depth > 0.0 => vec![0.0, 1.0, -1.0, -depth2 / depth, depth2 / depth],
        Extent::TwoSides { .. } | Extent::ThroughAll { .. } => vec![0.0],
    }
}

/// Where an extrusion's profile crosses the model besides its sketch plane: every planar face
/// of the model parallel to it strictly within `within` either way (offsets in model units
/// along the sketch normal). A hole drawn through all on a face the target does not show comes out on one it
/// does, and with only the drawn copy the fit of a wall's hole counted 13 stray samples and
/// shrank it from 4.5 to 1.28 (the target's, 2.9). A copy where the feature's sides do not
/// meet the face is not drawn, so it counts no sample.
fn faces_across(on: &Existing<'_>, within: f64) -> Vec<f64> {
    let normal = Vector3::from(on.frame.normal);
    let origin = Vector3::from(on.frame.origin);
    let scale = on.state.bbox.map_or(1.0, |b| b.diagonal()).max(1e-9);
    // The sketch plane first, so that a face on it is no copy of its own.
    let mut offsets = vec![0.0];
    for face in &on.state.faces {
        let Some(face_normal) = face.normal else { continue };
        if Vector3::from(face_normal).normalize().dot(&normal).abs() < 1.0 - 1e-6 {
            continue;
        }
        let offset = (Vector3::from(face.centroid) - origin).dot(&normal);
        if offset.abs() < within * (1.0 - 1e-6) && offsets.iter().all(|o: &f64| (o - offset).abs() > 1e-6 * scale) {
            offsets.push(offset);
        }
    }
    offsets.split_off(1)
}

/// How far along the normal (either way) an extent reaches from its sketch plane.
fn reach_of(extent: &Extent) -> f64 {
    match *extent {
        Extent::OneSide { depth } => depth,
        Extent::Symmetric { depth } => depth / 2.0,
        Extent::TwoSides { depth, depth2 } => depth.max(depth2),
        Extent::ThroughAll { .. } => f64::INFINITY,
    }
}

fn depth_of(extent: &Extent) -> Option<f64> {
    match *extent {
        Extent::OneSide { depth } | Extent::Symmetric { depth } | Extent::TwoSides { depth, .. } => Some(depth),
        Extent::ThroughAll { .. } => None,
    }
}

/// The feature the drawing is for: what carries the profile and which numbers of its own
/// the fit may move.
#[derive(Debug, Clone)]
pub enum Feature {
    Extrude(Extrude),
    /// A revolve about the sketch's own axis or line: the axis (a point and a direction,
    /// sketch coordinates) and the angle in degrees. The angle is not fitted.
    Revolve {
        point: [f64; 2],
        direction: [f64; 2],
        angle: f64,
    },
    /// A loft's section: its own edges are the model's edges where it lies (a section's
    /// outline). `offset`: its plane's distance from the plane's reference, when the fit
    /// may move that too (the loft's height); the fitted offset comes back here.
    Section {
        offset: f64,
    },
    /// A sweep's profile, carried along its path ([`super::sweep`]); the path is not fitted.
    /// `bore_under`: for a bore cut along a pipe's path, the largest radius its circles may
    /// take (the pipe's, less a wall the picture shows); they are read from that whole range.
    Sweep {
        carry: Carry,
        bore_under: Option<f64>,
    },
}

/// Fit `sketch` (as executed, drawn on `on`: the model it was drawn on and its frame) and, for an extrusion, its depth, to the target,
/// seen through `camera` (the outline's), where the candidate's render is `render` and its
/// best alignment with the target is `align`. `None`: nothing in the drawing can be
/// scored (no sample lands on a drawn edge).
///
/// A drawing whose curves cross each other away from their ends is no profile (FreeCAD: "the
/// result is not a valid solid"), and the picture model does not see it: a simulated
/// reader's rounded triangle had a corner's short line and small arc folded across each
/// other by the search, and its base was left unfitted (test100 00966577, 0.55). Where the
/// search's drawing crosses, it searches again refusing every drawing that crosses.
#[allow(clippy::too_many_arguments)]
pub fn propose(
    sketch: &Sketch,
    feature: &Feature,
    on: Existing<'_>,
    camera: &Camera,
    render: Render<'_>,
    align: super::Alignment,
    target: &TargetPixels,
    moves: Moves,
) -> Option<Proposal> {
    let inputs = Inputs { sketch, feature, on, camera, render, align, target, moves };
    let once = |refuse_crossing: bool, near: bool| {
        let proposal = propose_once(&inputs, Search { refuse_crossing, near })?;
        // A depth started from the best near one ([`depth::near_depth`]) that the rebuilt
        // model does not take is followed by the search without it.
        Some(match proposal.from_near {
            true => proposal.then(propose_once(&inputs, Search { refuse_crossing, near: false })),
            false => proposal,
        })
    };
    let proposal = once(false, true)?.finite()?;
    // A drawing that crosses as drawn (and builds: two curves touching at a point) would be
    // refused at every move, its own cost infinite.
    if !proposal.crosses() || first_crossing(&sketch.primitives).is_some() {
        return Some(proposal);
    }
    // Where every drawing the search reaches crosses (its cost infinite), the first proposal
    // stands: its build fails and says so.
    once(true, true).and_then(Proposal::finite).or(Some(proposal))
}

/// How [`propose_once`] searches.
#[derive(Debug, Clone, Copy)]
struct Search {
    /// Refusing drawings whose curves cross.
    refuse_crossing: bool,
    /// Starting a depth from the best near one where no factor far off is found.
    near: bool,
}

/// [`propose`]'s inputs.
struct Inputs<'a> {
    sketch: &'a Sketch,
    feature: &'a Feature,
    on: Existing<'a>,
    camera: &'a Camera,
    render: Render<'a>,
    align: super::Alignment,
    target: &'a TargetPixels,
    moves: Moves,
}

/// [`propose`] once.
fn propose_once(inputs: &Inputs<'_>, Search { refuse_crossing, near }: Search) -> Option<Proposal> {
    let Inputs { sketch, feature, on, camera, render, align, target, moves } = *inputs;
    let (numbers, all_shapes) = numbers_of(sketch);
    let ties = Ties::of(sketch, &all_shapes, &numbers, Some(on));
    // Construction geometry makes no edge; it is in the numbers for the constraints on it.
    let shapes = all_shapes.into_iter().filter(|&(k, _)| !is_construction(&sketch.primitives[k])).collect();
    let (motion, copies, spans, turns) = match feature {
        // Through all has no depth (0: nothing to fit) and one share, its sketch plane; its
        // other copies are where it crosses the model's faces.
        Feature::Extrude(extrude) => {
            let shares = offsets(&extrude.extent);
            let spans =
                shares.iter().enumerate().flat_map(|(i, &a)| shares[i + 1..].iter().map(move |&b| (a, b))).collect();
            let depth = depth_of(&extrude.extent).unwrap_or(0.0);
            // And where the model's faces parallel to the sketch cross its sides: a pocket
            // drawn on a base plane above the block's top is seen at the top's rim.
            let across = faces_across(&on, reach_of(&extrude.extent));
            let copies = shares.into_iter().map(Place::Of).chain(across.into_iter().map(Place::At)).collect();
            (Motion::Extrude { depth }, copies, spans, false)
        }
        Feature::Section { offset } => (Motion::Lift { offset: *offset }, vec![Place::Of(0.0)], Vec::new(), false),
        // The profile and its copy at the far end; the edges along the path are not modelled.
        Feature::Sweep { carry, .. } => {
            (Motion::Sweep(*carry), vec![Place::Of(0.0), Place::Of(1.0)], Vec::new(), false)
        }
        Feature::Revolve { point, direction, angle } => {
            let a = angle.to_radians();
            let motion = Motion::Revolve { point: *point, direction: *direction };
            if angle.abs() >= 360.0 - 1e-9 {
                // A whole turn: each corner's circle and the surfaces' outlines; the profile
                // itself is only a seam.
                (motion, Vec::new(), vec![(0.0, std::f64::consts::TAU)], true)
            } else {
                (motion, vec![Place::Of(0.0), Place::Of(a), Place::Of(-a)], vec![(0.0, a), (0.0, -a)], false)
            }
        }
    };
    let model = Model { shapes, frame: on.frame, camera, motion };
    let centres = circle_centres(&on);
    let px_per_unit = pixels_per_unit(camera);
    let samples = counted_samples(&model, &numbers, &copies, &spans, turns, render, px_per_unit);
    if samples.is_empty() {
        return None;
    }
    // Where the target's lines are read from its own image ([`super::subpixel`]), the
    // whole-pixel alignment leaves an exact feature up to half a pixel off them, which the
    // search would take for its numbers' error (the oracle's exact pipe had its flange
    // moved): the samples are scored where they lie best within half a pixel
    // ([`fine_offset`]), found for the drawing and again for the search's best.
    let fine = std::cell::Cell::new((0.0, 0.0));
    // The mean capped distance of the samples to the target's lines, the picture moved by
    // `offset` (pixels) from where `align` lines it up.
    let capped_at = |n: &Numbers, cap: f64, offset: (f64, f64)| -> f64 {
        let (fx, fy) = fine.get();
        let total: f64 = samples
            .iter()
            .map(|c| {
                model.sample_pixel(n, &c.sample).map_or(cap, |(x, y)| {
                    let (tx, ty) = align.on_target(x, y);
                    line_distance(target, c.sample.on_outline(), c.bin, tx + offset.0 + fx, ty + offset.1 + fy, cap)
                })
            })
            .sum();
        total / samples.len() as f64
    };
    // Where the search scores the picture: as lined up, or lined up anew for a depth read
    // far off (below).
    let offset = std::cell::Cell::new((0.0, 0.0));
    // A wall of the drawing that would close is no fit: its cost is infinite.
    let apart = apart::Apart::of(&numbers, &model.shapes, px_per_unit);
    // Nor is a drawing whose curves cross (above).
    let crosses = |n: &Numbers| {
        let mut moved = sketch.clone();
        apply(&mut moved, n, None);
        first_crossing(&moved.primitives).is_some()
    };
    let capped = |n: &Numbers, cap: f64| {
        if apart.kept(n) && !(refuse_crossing && crosses(n)) { capped_at(n, cap, offset.get()) } else { f64::INFINITY }
    };
    let cost = |n: &Numbers| capped(n, EDGE_CAP);
    let wide = |n: &Numbers| capped(n, WIDE_CAP);
    let line_up_finely = |n: &Numbers| {
        if target.refined.is_some() {
            fine.set((0.0, 0.0));
            fine.set(fine_offset(|f| capped_at(n, EDGE_CAP, (offset.get().0 + f.0, offset.get().1 + f.1))));
        }
    };
    line_up_finely(&numbers);
    let before_px = cost(&numbers);
    let reach = POINT_REACH_PX / px_per_unit;
    let fits_depth = match motion {
        Motion::Extrude { depth } => {
            depth > 0.0
                && samples.iter().any(|c| moves_with_depth(&c.sample))
                && depth_on_picture(&model, &numbers, depth) >= super::thickness::MIN_FITTED_DEPTH_PX
        }
        Motion::Lift { offset } => offset.abs() > 0.0,
        Motion::Revolve { .. } | Motion::Sweep(_) => false,
    };
    // A sweep's path places its profile (about the path's start: below) and is not fitted:
    // a profile point moved moves the whole swept body off its path, whose sides the
    // picture model does not draw, so only a sweep's sizes (a pipe's radii) are read off its
    // far end. An exact pipe's far end, 120 px from the picture's centre, lies a pixel or two
    // off the target's under the alignment's scale, and its profile was moved there.
    let slides = match (feature, motion) {
        (Feature::Extrude(extrude), Motion::Extrude { depth })
            if moves == Moves::Whole && !matches!(extrude.extent, Extent::TwoSides { .. }) =>
        {
            // Each end the picture shows (its counted samples), kept where it is: the base
            // slid with a depth whose far end is hidden (a block under a later one) would
            // move a hidden number to fit a seen one.
            let end = if matches!(extrude.extent, Extent::Symmetric { .. }) { 0.5 } else { 1.0 };
            let seen = |share: f64| {
                samples
                    .iter()
                    .any(|c| matches!(c.sample, Sample::Along { place: Place::Of(s), .. } if (s - share).abs() < 1e-9))
            };
            let w = slide_vector(&model, &numbers, depth);
            [end, -end].map(|e| w.filter(|_| seen(e)).map(|w| [e * w[0], e * w[1]]))
        }
        _ => [None, None],
    };
    let mut moving =
        Moving { points: !matches!(motion, Motion::Sweep(_)), depth: fits_depth, slides, depth_about: 1.0 };
    let proposal = |best: &Numbers, after_px: f64, regular: Regularised| {
        let mut fitted = sketch.clone();
        apply(&mut fitted, best, Some(on));
        let feature = match feature {
            Feature::Extrude(extrude) => {
                let mut extrude = extrude.clone();
                scale_depth(&mut extrude.extent, best.depth_scale);
                Feature::Extrude(extrude)
            }
            Feature::Section { offset } => Feature::Section { offset: offset * best.depth_scale },
            revolve => revolve.clone(),
        };
        Proposal {
            sketch: fitted,
            feature,
            before_px,
            after_px,
            samples: samples.len(),
            regular,
            free: None,
            from_near: false,
        }
    };
    if moves == Moves::Regular {
        // Settled where it is drawn: no number goes to a line.
        let regular = super::regular::find(&numbers, &numbers, &model.shapes, px_per_unit, &centres)
            .filter(|r| r.made().any())?;
        let settled = ties.with_regular(&regular).settle(numbers.clone())?;
        return Some(proposal(&settled, cost(&settled), regular.made()));
    }
    // A sweep's circles about its path's start put on it first ([`super::sweep::onto_path`]).
    let on_path = match feature {
        Feature::Sweep { carry, .. } => {
            let near = super::regular::REACH_PX / px_per_unit;
            super::sweep::onto_path(&numbers, &model.shapes, on.frame, carry, near)
                .and_then(|(n, moved)| Some((ties.settle(n)?, moved)))
        }
        _ => None,
    };
    let (mut start, concentric) = on_path.unwrap_or_else(|| (numbers.clone(), 0));
    if let Feature::Sweep { bore_under: Some(widest), .. } = feature {
        start = widest_range(start, &model.shapes, *widest, px_per_unit, &cost, &ties);
    }
    // A depth read far off: each factor's model lined up anew along the depth's direction
    // on the picture (the whole model's alignment centres a block read short on the
    // target's, so under it a taller block's top only moves further off).
    let v = match motion {
        Motion::Extrude { depth } => depth_vector(&model, &numbers, depth).unwrap_or((0.0, 0.0)),
        _ => (0.0, 0.0),
    };
    let lined_up = |n: &Numbers| -> (f64, (f64, f64)) {
        let span = (n.depth_scale - 1.0).abs();
        let steps = (span * v.0.hypot(v.1)).ceil() as i64;
        (-steps..=steps)
            .map(|k| {
                let s = if steps == 0 { 0.0 } else { span * k as f64 / steps as f64 };
                (capped_at(n, WIDE_CAP, (s * v.0, s * v.1)), (s * v.0, s * v.1))
            })
            .fold((f64::INFINITY, (0.0, 0.0)), |a, b| if b.0 < a.0 { b } else { a })
    };
    let mut from_near = false;
    if moving.depth && matches!(motion, Motion::Extrude { .. }) {
        // As the picture is lined up first (a block read deep keeps its alignment best),
        // then each depth lined up anew (a block read short needs it), a factor far off,
        // else the best near one (a block read 14% deep beside a prism drawn 10 mm off:
        // test100 00361382, 0.80 -> 0.99; where the rebuilt model does not take it, the
        // search without it follows: [`propose`]).
        let anew = |n: &Numbers| lined_up(n).0;
        if let Some(factor) = coarse_depth(&start, &wide) {
            start.depth_scale = factor;
            moving.depth_about = factor;
        } else if let Some(factor) = coarse_depth(&start, &anew) {
            start.depth_scale = factor;
            moving.depth_about = factor;
            offset.set(lined_up(&start).1);
        } else if let Some(factor) = near.then(|| near_depth(&start, &anew)).flatten() {
            start.depth_scale = factor;
            moving.depth_about = factor;
            offset.set(lined_up(&start).1);
            from_near = true;
        }
    }
    let (best, after_px) = search(&start, &cost, &ties, reach, px_per_unit, moving);
    // Where the drawing lies beyond the capped cost's reach (it is flat past EDGE_CAP), the
    // search again from where a wider cap leads it; the better of the two by the usual cost.
    let (best, after_px) = if after_px > WIDE_FROM_PX {
        let (led, _) = search(&start, &wide, &ties, reach, px_per_unit, moving);
        let (again, again_px) = search(&led, &cost, &ties, reach, px_per_unit, moving);
        if again_px < after_px { (again, again_px) } else { (best, after_px) }
    } else {
        (best, after_px)
    };
    // The drawing's numbers and its fraction of a pixel, in turn: the drawn numbers' best
    // offset is pulled by what was drawn off.
    let (best, after_px) = match target.refined.is_some() {
        true => {
            line_up_finely(&best);
            search(&best, &cost, &ties, reach, px_per_unit, moving)
        }
        false => (best, after_px),
    };
    let free = Proposal { from_near, ..proposal(&best, after_px, Regularised { squared: 0, concentric, equal: 0 }) };
    // The drawing made regular where it is near it, searched again keeping it so.
    if let Some(regular) = super::regular::find(&numbers, &best, &model.shapes, px_per_unit, &centres) {
        let kept = ties.with_regular(&regular);
        if let Some(start) = kept.settle(best.clone()) {
            let (regular_best, regular_px) = search(&start, &cost, &kept, reach, px_per_unit, moving);
            if regular_px <= after_px + super::regular::SLACK_PX {
                let made = regular.made();
                return Some(Proposal {
                    free: Some(Box::new(free)),
                    from_near,
                    ..proposal(&regular_best, regular_px, made)
                });
            }
        }
    }
    Some(free)
}

/// The fraction of a pixel, each axis within half a pixel, where `cost` is lowest: on a
/// grid of quarter pixels, then of tenths about the best.
fn fine_offset(cost: impl Fn((f64, f64)) -> f64) -> (f64, f64) {
    let mut best = ((0.0, 0.0), cost((0.0, 0.0)));
    for (step, reach) in [(0.25, 2), (0.1, 2)] {
        let about = best.0;
        for j in -reach..=reach {
            for i in -reach..=reach {
                let f = (about.0 + f64::from(i) * step, about.1 + f64::from(j) * step);
                if f.0.abs() > 0.5 + 1e-9 || f.1.abs() > 0.5 + 1e-9 {
                    continue;
                }
                let c = cost(f);
                if c < best.1 - 1e-12 {
                    best = (f, c);
                }
            }
        }
    }
    best.0
}

pub(super) fn is_construction(primitive: &Primitive) -> bool {
    matches!(
        primitive,
        Primitive::Line { construction: true, .. }
            | Primitive::Arc { construction: true, .. }
            | Primitive::CenterArc { construction: true, .. }
            | Primitive::Circle { construction: true, .. }
    )
}

/// Whether a fitted depth moves the sample.
fn moves_with_depth(sample: &Sample) -> bool {
    match sample {
        Sample::Along { place: Place::Of(share), .. } => *share != 0.0,
        Sample::Along { place: Place::At(_), .. } => false,
        Sample::Across { .. } => true,
        Sample::Turned { .. } | Sample::Ring { .. } => false,
    }
}

pub(super) fn pixels_per_unit(camera: &Camera) -> f64 {
    match camera.projection {
        views::Projection::Orthographic { pixels_per_unit } => pixels_per_unit,
        // A perspective outline: its scale at the eye's distance from the origin.
        views::Projection::Perspective { fov_y_degrees } => {
            let distance = camera.eye.iter().map(|c| c * c).sum::<f64>().sqrt().max(1e-9);
            f64::from(camera.height) / 2.0 / (fov_y_degrees.to_radians() / 2.0).tan() / distance
        }
    }
}

/// The drawing's distinct points and radii, and its primitives by them (construction
/// geometry too: constraints tie to it). Points the drawing shares (a corner of two lines)
/// are one point, so a closed profile stays closed.
pub(super) fn numbers_of(sketch: &Sketch) -> (Numbers, Vec<(usize, Shape)>) {
    let mut numbers = Numbers { points: Vec::new(), radii: Vec::new(), depth_scale: 1.0 };
    let scale = sketch_scale(sketch);
    let point = |n: &mut Numbers, p: [f64; 2]| {
        let near = |q: &[f64; 2]| (q[0] - p[0]).abs() <= 1e-7 * scale && (q[1] - p[1]).abs() <= 1e-7 * scale;
        n.points.iter().position(near).unwrap_or_else(|| {
            n.points.push(p);
            n.points.len() - 1
        })
    };
    let mut shapes = Vec::new();
    for (k, primitive) in sketch.primitives.iter().enumerate() {
        let shape = match *primitive {
            Primitive::Line { start, end, .. } => {
                Shape::Line { a: point(&mut numbers, start), b: point(&mut numbers, end) }
            }
            Primitive::Arc { start, mid, end, .. } => {
                Shape::Arc { a: point(&mut numbers, start), m: point(&mut numbers, mid), b: point(&mut numbers, end) }
            }
            Primitive::CenterArc { center, radius, start_angle, end_angle, .. } => {
                numbers.radii.push(radius);
                Shape::CenterArc {
                    c: point(&mut numbers, center),
                    r: numbers.radii.len() - 1,
                    from: start_angle,
                    to: end_angle,
                }
            }
            Primitive::Circle { center, radius, .. } => {
                numbers.radii.push(radius);
                Shape::Circle { c: point(&mut numbers, center), r: numbers.radii.len() - 1 }
            }
        };
        shapes.push((k, shape));
    }
    (numbers, shapes)
}

fn sketch_scale(sketch: &Sketch) -> f64 {
    let mut largest: f64 = 1.0;
    for p in &sketch.primitives {
        let values: Vec<f64> = match *p {
            Primitive::Line { start, end, .. } => vec![start[0], start[1], end[0], end[1]],
            Primitive::Arc { start, mid, end, .. } => vec![start[0], start[1], mid[0], mid[1], end[0], end[1]],
            Primitive::CenterArc { center, radius, .. } | Primitive::Circle { center, radius, .. } => {
                vec![center[0], center[1], radius]
            }
        };
        largest = values.into_iter().fold(largest, |m, v| m.max(v.abs()));
    }
    largest
}

/// Write the fitted numbers back into the drawing, primitive by primitive.
pub(super) fn apply(sketch: &mut Sketch, fitted: &Numbers, existing: Option<super::dimensions::Existing<'_>>) {
    let (_, shapes) = numbers_of(sketch);
    for (k, shape) in shapes {
        match (&mut sketch.primitives[k], shape) {
            (Primitive::Line { start: s, end: e, .. }, Shape::Line { a, b }) => {
                *s = fitted.points[a];
                *e = fitted.points[b];
            }
            (Primitive::Arc { start: s, mid, end: e, .. }, Shape::Arc { a, m, b }) => {
                *s = fitted.points[a];
                *mid = fitted.points[m];
                *e = fitted.points[b];
            }
            (Primitive::CenterArc { center, radius, .. }, Shape::CenterArc { c, r, .. })
            | (Primitive::Circle { center, radius, .. }, Shape::Circle { c, r }) => {
                *center = fitted.points[c];
                *radius = fitted.radii[r];
            }
            _ => {}
        }
    }
    // Dimensions the drawing states follow the fitted geometry: the solver would otherwise
    // pull the numbers back to the model's.
    super::dimensions::follow_geometry(sketch, existing);
}

pub(super) fn scale_depth(extent: &mut Extent, factor: f64) {
    match extent {
        Extent::OneSide { depth } | Extent::Symmetric { depth } => *depth *= factor,
        Extent::TwoSides { depth, depth2 } => {
            *depth *= factor;
            *depth2 *= factor;
        }
        Extent::ThroughAll { .. } => {}
    }
}

mod apart;
mod depth;
mod outline;
mod samples;
mod search;

#[cfg(test)]
pub(super) mod tests;
