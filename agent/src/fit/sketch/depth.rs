//! A depth on the picture, and a depth read far off ([`coarse_depth`]).

use nalgebra::{Point3, Vector3};

use super::{Model, Numbers};

/// A depth read far off is looked for first at these factors of the model's (the search's
/// reach is [`super::DEPTH_REACH`] about where it starts): a reader's depth off by half or twice,
/// as readers misread a side seen foreshortened. The nearest good one is taken ...
pub(super) const COARSE_DEPTHS: [f64; 10] = [0.8, 1.25, 0.7, 1.4, 0.6, 1.6, 0.5, 1.8, 0.4, 2.0];
/// ... when the edges that move with it lie this much closer to the target's lines (pixels,
/// under [`super::WIDE_CAP`]) ...
pub(super) const COARSE_GAIN_PX: f64 = 1.0;
/// ... leaving at most this share of the cost at the model's depth.
pub(super) const COARSE_LEFT: f64 = 0.5;

/// How long (pixels) the extrusion's depth is on the picture, at the drawing's first point.
pub(super) fn depth_on_picture(model: &Model, n: &Numbers, depth: f64) -> f64 {
    depth_vector(model, n, depth).map_or(0.0, |(x, y)| x.hypot(y))
}

/// The extrusion's depth on the picture (pixels, x and y), at the drawing's first point.
pub(super) fn depth_vector(model: &Model, n: &Numbers, depth: f64) -> Option<(f64, f64)> {
    let &at = n.points.first()?;
    let normal = Vector3::from(model.frame.normal) * depth;
    let p = Vector3::from(model.frame.to_global(at[0], at[1]));
    let a = model.camera.project(&Point3::from(p))?;
    let b = model.camera.project(&Point3::from(p + normal))?;
    Some((b.0 - a.0, b.1 - a.1))
}

/// Where a depth read far off agrees with the target ([`COARSE_DEPTHS`]): the factor of the
/// nearest that lowers the `cost` (the wide cap's: a far edge is far; each factor's model
/// lined up anew) by [`COARSE_GAIN_PX`] to [`COARSE_LEFT`] of it. The drawing's other
/// numbers stay as they are; the search then starts from it.
pub(super) fn coarse_depth(start: &Numbers, cost: &dyn Fn(&Numbers) -> f64) -> Option<f64> {
    let at = |factor: f64| cost(&Numbers { depth_scale: factor, ..start.clone() });
    let drawn = at(start.depth_scale);
    COARSE_DEPTHS.iter().map(|f| f * start.depth_scale).find(|&factor| {
        let k = at(factor);
        drawn - k >= COARSE_GAIN_PX && k <= COARSE_LEFT * drawn
    })
}
