//! Which of the picture model's samples count: those the candidate's own render draws as
//! an edge of the feature ([`counted_samples`]).

use nalgebra::{Point3, Vector3};
use views::NO_ENTITY;

use super::{Counted, DRAWN_PX, Model, Motion, Numbers, OWN_EDGE_PX, Place, Render, SAMPLE_SPACING_PX, Sample, Shape};

/// Samples along every edge the feature makes, kept where the candidate's render draws an
/// edge running the same way (within [`DRAWN_PX`]) that is the sample's own: in model
/// space it passes within [`OWN_EDGE_PX`] pixels' worth of the sample.
pub(super) fn counted_samples(
    model: &Model,
    n: &Numbers,
    copies: &[Place],
    spans: &[(f64, f64)],
    turns: bool,
    render: Render<'_>,
    px_per_unit: f64,
) -> Vec<Counted> {
    let ids = render.ids;
    // A sample counts where the candidate's own picture draws an edge running its way: an
    // edge hidden behind other material may pass near another feature's visible edge (a
    // flange's hole under the pipe standing in it), which must not pull its number.
    let edges: Vec<bool> = ids.edge.iter().map(|&e| e != NO_ENTITY).collect();
    let drawn_edges = views::oriented_distances(&edges, ids.width, ids.height);
    let drawn = |(x, y): (f64, f64), bin: usize| {
        let (cx, cy) = (x.floor() as i64, y.floor() as i64);
        let inside = cx >= 0 && cy >= 0 && cx < i64::from(ids.width) && cy < i64::from(ids.height);
        inside && drawn_edges[bin][cy as usize * ids.width as usize + cx as usize] <= DRAWN_PX
    };
    // ... and the edge drawn there is the sample's own. Where a later feature took the edge
    // away, another's may be drawn within a pixel or two on the picture though it lies
    // millimetres off in the model: a shaft's top corner, chamfered, is two circles, and the
    // corner's circle was pulled onto the chamfer's lower one (the top face then dipped 3 mm).
    let tolerance = OWN_EDGE_PX / px_per_unit;
    let own = |(x, y): (f64, f64), q: &Vector3<f64>| {
        let reach = DRAWN_PX.ceil() as i64;
        let (cx, cy) = (x.floor() as i64, y.floor() as i64);
        let mut nearby: Vec<u32> = Vec::new();
        for dy in -reach..=reach {
            for dx in -reach..=reach {
                let e = ids.edge_at(cx + dx, cy + dy);
                if e != NO_ENTITY && !nearby.contains(&e) {
                    nearby.push(e);
                }
            }
        }
        nearby
            .into_iter()
            .any(|e| render.edges.get(e as usize).is_some_and(|line| distance_to_polyline(q, line) <= tolerance))
    };
    // An outline sample counts where the candidate's silhouette has its boundary, running its
    // way: where the surface is hidden (a shaft's shoulder in front of it) there is none.
    let outlines = if turns {
        views::oriented_distances(&crate::fit::boundary(&ids.covered, ids.width), ids.width, ids.height)
    } else {
        Vec::new()
    };
    let outlined = |(x, y): (f64, f64), bin: usize| {
        let (cx, cy) = (x.floor() as i64, y.floor() as i64);
        let inside = cx >= 0 && cy >= 0 && cx < i64::from(ids.width) && cy < i64::from(ids.height);
        inside
            && outlines.get(bin).is_some_and(|field| field[cy as usize * ids.width as usize + cx as usize] <= DRAWN_PX)
    };
    // The edge's direction at a sample: from the picture of a point a little either side.
    let counted = |sample: Sample| -> Option<Counted> {
        let q = model.sample_point(n, &sample)?;
        let p = model.project(q)?;
        let nudged = |ds: f64| {
            let mut q = sample;
            match &mut q {
                Sample::Along { s, .. } | Sample::Across { s, .. } | Sample::Ring { s, .. } => {
                    *s = (*s + ds).clamp(0.0, 1.0)
                }
                // As far up or down the side.
                outline => *outline = model.nudged_outline(n, *outline, ds)?,
            }
            model.sample_pixel(n, &q)
        };
        let (a, b) = (nudged(-0.01)?, nudged(0.01)?);
        let bin = views::orientation_bin(b.0 - a.0, b.1 - a.1);
        let shown = if sample.on_outline() { outlined(p, bin) } else { drawn(p, bin) && own(p, &q) };
        shown.then_some(Counted { sample, bin })
    };
    let mut samples = Vec::new();
    for (index, &(_, shape)) in model.shapes.iter().enumerate() {
        for &place in copies {
            // The edge's length on the picture (curves bend).
            let pixels = picture_length(|s| model.uv(n, shape, s).and_then(|uv| model.pixel(n, uv, place)));
            let length = samples_along(pixels);
            for k in 0..length {
                let s = (k as f64 + 0.5) / length as f64;
                samples.extend(counted(Sample::Along { shape: index, s, place }));
            }
        }
    }
    // The straight edges between copies, at each point where two primitives meet.
    let ends: Vec<usize> = model
        .shapes
        .iter()
        .flat_map(|(_, shape)| match *shape {
            Shape::Line { a, b } | Shape::Arc { a, b, .. } => vec![a, b],
            _ => Vec::new(),
        })
        .collect();
    if turns {
        samples.extend(model.outline_samples(n).into_iter().filter_map(counted));
    }
    let mut corners: Vec<usize> = ends.clone();
    corners.sort_unstable();
    corners.dedup();
    for point in corners {
        for &(a, b) in spans {
            // A path's length in pixels (a revolve's is a circle).
            let pixels = picture_length(|s| model.pixel(n, n.points[point], Place::Of(a + s * (b - a))));
            // A point on a revolve's axis traces no circle.
            if pixels < 2.0 {
                continue;
            }
            let length = samples_along(pixels);
            for k in 0..length {
                let s = (k as f64 + 0.5) / length as f64;
                // An extrusion's corner edge away from the corners themselves, which the
                // profiles' samples hold.
                if matches!(model.motion, Motion::Extrude { .. }) && !(0.1..=0.9).contains(&s) {
                    continue;
                }
                samples.extend(counted(Sample::Across { point, s, span: (a, b) }));
            }
        }
    }
    if turns {
        samples.extend(ring_samples(model, n).into_iter().filter_map(counted));
    }
    samples
}

/// A whole turn's steep sides between their ends ([`Model::steep_line`]): at each height
/// one [`SAMPLE_SPACING_PX`] apart, the circle the side's point there traces, before any is
/// counted. Most such circles are no edge and do not count; where a later feature's edge
/// lies on the side (a chamfer's lower circle on a bore whose top corner it took away), the
/// circle is that edge, and it holds the side's radius where nothing else on the picture
/// does: a simulated reader's bore, 8% wide under its chamfer, was left so (gen-11-00018).
fn ring_samples(model: &Model, n: &Numbers) -> Vec<Sample> {
    let mut samples = Vec::new();
    for (index, &(_, shape)) in model.shapes.iter().enumerate() {
        if model.steep_line(n, shape).is_none() {
            continue;
        }
        let ring = |t: f64, s: f64| Sample::Ring { shape: index, t, s };
        let at = |t: f64, s: f64| model.sample_pixel(n, &ring(t, s));
        let (Some(p), Some(q)) = (at(0.0, 0.0), at(1.0, 0.0)) else { continue };
        let heights = ((p.0 - q.0).hypot(p.1 - q.1) / SAMPLE_SPACING_PX).ceil() as usize;
        for k in 0..heights {
            let t = (k as f64 + 0.5) / heights as f64;
            // The ends' own circles are the corners' samples.
            if !(0.05..=0.95).contains(&t) {
                continue;
            }
            let pixels = picture_length(|s| at(t, s));
            if pixels < 2.0 {
                continue;
            }
            let length = samples_along(pixels);
            samples.extend((0..length).map(|j| ring(t, (j as f64 + 0.5) / length as f64)));
        }
    }
    samples
}

/// The length on the picture (pixels) of a curve `at` draws for shares 0 to 1, from 16
/// chords; a chord with an end off the picture counts nothing.
fn picture_length(at: impl Fn(f64) -> Option<(f64, f64)>) -> f64 {
    let chords = 16;
    (0..chords)
        .map(|k| match (at(k as f64 / chords as f64), at((k + 1) as f64 / chords as f64)) {
            (Some(p), Some(q)) => (p.0 - q.0).hypot(p.1 - q.1),
            _ => 0.0,
        })
        .sum()
}

/// How many samples a curve `pixels` long gets: one every [`SAMPLE_SPACING_PX`], two at least.
fn samples_along(pixels: f64) -> usize {
    ((pixels / SAMPLE_SPACING_PX).ceil() as usize).max(2)
}

pub(super) fn lerp(p: [f64; 2], q: [f64; 2], t: f64) -> [f64; 2] {
    [p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])]
}

/// The distance (model units) from `q` to the polyline `line`.
fn distance_to_polyline(q: &Vector3<f64>, line: &[Point3<f64>]) -> f64 {
    let to_segment = |a: &Point3<f64>, b: &Point3<f64>| {
        let (a, b) = (a.coords, b.coords);
        let ab = b - a;
        let t = ((q - a).dot(&ab) / ab.norm_squared().max(1e-300)).clamp(0.0, 1.0);
        (a + ab * t - q).norm()
    };
    match line {
        [] => f64::INFINITY,
        [only] => (only.coords - q).norm(),
        _ => line.windows(2).map(|w| to_segment(&w[0], &w[1])).fold(f64::INFINITY, f64::min),
    }
}
