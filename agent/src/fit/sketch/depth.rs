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
/// [`near_depth`]'s step, a share of the depth ...
const NEAR_STEP: f64 = 0.02;
/// ... when its edges lie this much closer (pixels, under the same cap) ...
const NEAR_GAIN_PX: f64 = 0.3;
/// ... leaving at most this share of the cost: a block read 14% deep beside a prism drawn 10
/// mm off had its far edges 19 px off the target's, past the search's cap, and no factor
/// above cut the cost by half (test100 00361382).
const NEAR_LEFT: f64 = 0.8;

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

/// Where no [`coarse_depth`] is: the depth within the search's reach ([`super::DEPTH_REACH`],
/// in steps of [`NEAR_STEP`]) that lowers the `cost` most, by [`NEAR_GAIN_PX`] to
/// [`NEAR_LEFT`] of it, short of the reach's ends.
pub(super) fn near_depth(start: &Numbers, cost: &dyn Fn(&Numbers) -> f64) -> Option<f64> {
    let at = |factor: f64| cost(&Numbers { depth_scale: factor, ..start.clone() });
    let drawn = at(start.depth_scale);
    let steps = (super::DEPTH_REACH / NEAR_STEP).round() as i64;
    let (best, k) = (-steps..=steps)
        .filter(|&i| i != 0)
        .map(|i| (i, at(start.depth_scale * (1.0 + i as f64 * NEAR_STEP))))
        .fold((0, drawn), |a, b| if b.1 < a.1 { b } else { a });
    // Best at the reach's end: the depth lies beyond, where the model lined up anew
    // ([`coarse_depth`]) may find it.
    (best.abs() < steps && drawn - k >= NEAR_GAIN_PX && k <= NEAR_LEFT * drawn)
        .then_some(start.depth_scale * (1.0 + best as f64 * NEAR_STEP))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cost flat past a cap (12 px) around the true depth factor, as a far edge's is.
    fn capped_about(truth: f64) -> impl Fn(&Numbers) -> f64 {
        move |n: &Numbers| 0.5 + ((n.depth_scale - truth).abs() * 100.0).min(12.0) * 0.2
    }

    fn drawn() -> Numbers {
        Numbers { points: vec![[0.0, 0.0]], radii: Vec::new(), depth_scale: 1.0 }
    }

    #[test]
    fn a_depth_read_14_percent_deep_is_found_within_the_searchs_reach() {
        // No coarse factor (0.8, 1.25, ...) halves the cost; the near one is 0.88.
        assert_eq!(coarse_depth(&drawn(), &capped_about(0.877)), None);
        let found = near_depth(&drawn(), &capped_about(0.877)).expect("a depth");
        assert!((found - 0.877).abs() <= 0.011, "{found}");
        // Read as drawn: nothing to move.
        assert_eq!(coarse_depth(&drawn(), &capped_about(1.0)), None);
        assert_eq!(near_depth(&drawn(), &capped_about(1.0)), None);
        // Half: the coarse factor; the near one's best is at its reach's end: none.
        assert_eq!(coarse_depth(&drawn(), &capped_about(0.5)), Some(0.5));
        assert_eq!(near_depth(&drawn(), &capped_about(0.5)), None);
    }
}
