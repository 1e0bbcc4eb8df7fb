//! The fit: the harness makes a candidate's numbers agree with the target's pixels.
//!
//! Readers choose the structure well and read sizes by eye (about 1 mm at 3.3 px/mm). A size
//! is a measurement, not a question for the model: after Stage 2, the candidate's extrusion
//! depths are moved, within [`REACH`] of what the model said, to where the candidate, seen
//! from the target's direction at S_t's framing, agrees best with the target image. Only the
//! target image and the harness's own renders are used. The structure never changes.
//!
//! Features not built yet are the trap: the target shows the whole part while the model holds
//! only some of it, so a fit that rewards covering the target's silhouette grows a base plate
//! into the boss standing on it, and one that penalises material outside the silhouette
//! thins it where a later cut shows the background. The cost here is only the mean distance
//! from the candidate's drawn edges to the nearest drawn line of the target (capped at
//! [`EDGE_CAP`] px, so an edge that a later feature will hide costs the same wherever it is).
//! A plate grown into its boss moves its top edges off the target's lines and gains nothing.
//! A fit that does not lower the cost by [`MIN_GAIN`] px is dropped.
//!
//! **Experimental, off by default** (`--fit`, `fit = true`; docs/reconstruct.md has the
//! figures): it leaves exact candidates alone, but with the simulated model's size errors it
//! moves depths to make up for errors in the sketch (one pad grew 22%), and on 10 generated
//! parts it did not raise mIoU. Until it does, it must not run by default.

use std::time::Instant;

use freecad_bridge::command::{Extent, Extrude};
use freecad_bridge::{BridgeError, Command, Preview, Session};
use serde::{Deserialize, Serialize};
use views::{IdBuffers, NO_ENTITY, Options, Scene};

/// How far a number may move, as a share of the model's value.
pub const REACH: f64 = 0.25;
/// Distances from a candidate's edge to the target's nearest line count up to this (pixels).
pub const EDGE_CAP: f64 = 6.0;
/// A fit must lower the cost by this much (pixels of mean edge distance) to be kept.
pub const MIN_GAIN: f64 = 0.15;
/// Values tried across the reach on the first pass; the best is then refined.
const COARSE: usize = 9;
const REFINEMENTS: usize = 5;

/// The target as the fit compares with it, at the framing of the views (S_t on the same
/// circle): its silhouette and the distance of every pixel to its nearest drawn line.
#[derive(Debug, Clone)]
pub struct TargetPixels {
    pub size: u32,
    pub mask: Vec<bool>,
    pub line_distance: Vec<f32>,
}

impl TargetPixels {
    /// From the target's framed silhouette and lines (`size` x `size`, row by row).
    pub fn new(size: u32, mask: Vec<bool>, lines: &[bool]) -> TargetPixels {
        TargetPixels { size, line_distance: views::distance_to(lines, size, size), mask }
    }
}

/// How a candidate's picture agrees with the target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Mean distance of the candidate's edge pixels to the target's nearest line, capped.
    pub edge_px: f64,
    /// The candidate's silhouette outside the target's, as a share of the target's.
    pub extra: f64,
}

impl Agreement {
    /// Lower is better. Only the edges count: material outside the target's silhouette
    /// (`extra`, reported) is also what a later cut removes (the bundled plate's holes show
    /// the background through them), so penalising it pulled a base plate thinner.
    pub fn cost(&self) -> f64 {
        self.edge_px
    }
}

/// One number the fit moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Where in the command: `extent.depth`, `extent.depth2`.
    pub what: String,
    pub from: f64,
    pub to: f64,
}

/// What a fit did, for the trace and Stage 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitReport {
    /// Empty when the fit was dropped (no value agreed better by [`MIN_GAIN`]).
    pub changes: Vec<Change>,
    pub before: Agreement,
    pub after: Agreement,
    /// Candidates rendered.
    pub evaluations: usize,
    pub seconds: f64,
}

impl FitReport {
    /// `extent.depth 10 -> 10.62 mm (edges 1.84 -> 0.61 px from the target's lines)`.
    pub fn describe(&self) -> String {
        let moved: Vec<String> =
            self.changes.iter().map(|c| format!("{} {} -> {} mm", c.what, short(c.from), short(c.to))).collect();
        format!(
            "{} (the candidate's edges {:.2} -> {:.2} px on average from the target's lines; outside the target's \
             silhouette {:.1}% -> {:.1}% of its area)",
            moved.join(", "),
            self.before.edge_px,
            self.after.edge_px,
            100.0 * self.before.extra,
            100.0 * self.after.extra
        )
    }
}

fn short(x: f64) -> String {
    format!("{}", (x * 1e4).round() / 1e4)
}

/// The fitted command and its preview, with the report; or the report alone when the fit
/// was dropped. `None`: the command has no number this fit moves.
pub type Fitted = Option<(Option<(Command, Preview)>, FitReport)>;

/// Fit the depths of an extrusion (`command`, whose sketches the session already holds) to
/// the target. `opts` frames the views on S_t; `deflection` is the preview's tessellation.
pub fn fit_extrusion(
    session: &mut Session,
    command: &Command,
    target: &TargetPixels,
    opts: &Options,
    deflection: f64,
) -> Result<Fitted, BridgeError> {
    let Command::Extrude(extrude) = command else { return Ok(None) };
    let names: &[&str] = match extrude.extent {
        Extent::OneSide { .. } | Extent::Symmetric { .. } => &["depth"],
        Extent::TwoSides { .. } => &["depth", "depth2"],
        Extent::ThroughAll { .. } => return Ok(None),
    };
    let started = Instant::now();
    let mut evaluations = 0;
    let mut evaluate = |e: &Extrude, session: &mut Session| -> Result<Option<(Agreement, Preview)>, BridgeError> {
        evaluations += 1;
        let command = Command::Extrude(e.clone());
        match session.preview(&command, deflection) {
            Ok(preview) => {
                let scene = Scene::new(&preview.after, &preview.state);
                Ok(Some((agreement(&views::outline(&scene, opts), target), preview)))
            }
            // A depth that does not build (a cut through everything, a pad into nothing)
            // is simply not a candidate.
            Err(BridgeError::Command { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let Some((before, first_preview)) = evaluate(extrude, session)? else { return Ok(None) };
    let (mut best, mut best_agreement, mut best_preview) = (extrude.clone(), before, first_preview);
    // One number at a time (two-sided extents: each side in turn).
    for name in names {
        let original = value(&extrude.extent, name);
        let (lo, hi) = (original * (1.0 - REACH), original * (1.0 + REACH));
        let mut tried: Vec<(f64, Agreement, Preview)> = Vec::new();
        let mut step = (hi - lo) / (COARSE - 1) as f64;
        let mut centre = value(&best.extent, name);
        let mut span: Vec<f64> = (0..COARSE).map(|k| lo + step * k as f64).collect();
        for _ in 0..=REFINEMENTS {
            for v in span {
                if tried.iter().any(|(t, _, _)| (t - v).abs() < 1e-9) {
                    continue;
                }
                let mut candidate = best.clone();
                set_value(&mut candidate.extent, name, v);
                if let Some((a, p)) = evaluate(&candidate, session)? {
                    tried.push((v, a, p));
                }
            }
            if let Some((v, _, _)) = tried.iter().min_by(|a, b| a.1.cost().total_cmp(&b.1.cost())) {
                centre = *v;
            }
            step /= 2.0;
            span = vec![(centre - step).max(lo), (centre + step).min(hi)];
        }
        if let Some((v, a, p)) = tried.into_iter().min_by(|a, b| a.1.cost().total_cmp(&b.1.cost()))
            && a.cost() < best_agreement.cost()
        {
            set_value(&mut best.extent, name, v);
            best_agreement = a;
            best_preview = p;
        }
    }
    let gained = before.cost() - best_agreement.cost() >= MIN_GAIN;
    let changes: Vec<Change> = if gained {
        names
            .iter()
            .map(|n| Change {
                what: format!("extent.{n}"),
                from: value(&extrude.extent, n),
                to: value(&best.extent, n),
            })
            .filter(|c| c.from != c.to)
            .collect()
    } else {
        Vec::new()
    };
    let report = FitReport {
        after: if changes.is_empty() { before } else { best_agreement },
        before,
        changes,
        evaluations,
        seconds: started.elapsed().as_secs_f64(),
    };
    let fitted = (!report.changes.is_empty()).then_some((Command::Extrude(best), best_preview));
    Ok(Some((fitted, report)))
}

fn value(extent: &Extent, name: &str) -> f64 {
    match (extent, name) {
        (Extent::OneSide { depth } | Extent::Symmetric { depth } | Extent::TwoSides { depth, .. }, "depth") => *depth,
        (Extent::TwoSides { depth2, .. }, "depth2") => *depth2,
        _ => f64::NAN,
    }
}

fn set_value(extent: &mut Extent, name: &str, v: f64) {
    match (extent, name) {
        (Extent::OneSide { depth } | Extent::Symmetric { depth } | Extent::TwoSides { depth, .. }, "depth") => {
            *depth = v
        }
        (Extent::TwoSides { depth2, .. }, "depth2") => *depth2 = v,
        _ => {}
    }
}

/// How far (pixels, each axis) around the silhouettes' alignment the edges are lined up.
const ALIGN_REACH: i64 = 3;

/// How a candidate's picture (`ids`, at the target's framing) agrees with the target. The
/// two are lined up as Stage 3's overlay and registration line them up (the silhouettes'
/// profiles), then the candidate's edges are moved up to [`ALIGN_REACH`] px further to where
/// they lie closest to the target's lines: the profiles of a partial model inside the
/// target's silhouette leave its position loose by a few pixels, and a fit that scored the
/// edges at a loose position would change a depth to make up for the position.
pub fn agreement(ids: &IdBuffers, target: &TargetPixels) -> Agreement {
    let (w, h) = (ids.width as usize, ids.height as usize);
    let candidate = views::silhouette(ids);
    let shift = views::alignment(&candidate, &target.mask, w, h);
    let at = |x: i64, y: i64| {
        (x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h).then(|| y as usize * w + x as usize)
    };
    let edges: Vec<(i64, i64)> =
        (0..w * h).filter(|&i| ids.edge[i] != NO_ENTITY).map(|i| ((i % w) as i64, (i / w) as i64)).collect();
    let mean_distance = |dx: i64, dy: i64| {
        if edges.is_empty() {
            return EDGE_CAP;
        }
        let sum: f64 = edges
            .iter()
            .map(|&(x, y)| at(x + dx, y + dy).map_or(EDGE_CAP, |t| f64::from(target.line_distance[t]).min(EDGE_CAP)))
            .sum();
        sum / edges.len() as f64
    };
    let mut best = (f64::INFINITY, shift);
    for dy in -ALIGN_REACH..=ALIGN_REACH {
        for dx in -ALIGN_REACH..=ALIGN_REACH {
            let d = mean_distance(shift[0] + dx, shift[1] + dy);
            if d < best.0 - 1e-12 {
                best = (d, [shift[0] + dx, shift[1] + dy]);
            }
        }
    }
    let (edge_px, shift) = best;
    let target_area = target.mask.iter().filter(|m| **m).count().max(1) as f64;
    let extra = (0..w * h)
        .filter(|&i| {
            candidate[i] && !at((i % w) as i64 + shift[0], (i / w) as i64 + shift[1]).is_some_and(|t| target.mask[t])
        })
        .count();
    Agreement { edge_px, extra: extra as f64 / target_area }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate whose outline is a square's, against targets drawn as squares.
    fn square_ids(w: u32, x0: u32, y0: u32, side: u32) -> IdBuffers {
        let n = (w * w) as usize;
        let inside = |i: u32| (x0..x0 + side).contains(&(i % w)) && (y0..y0 + side).contains(&(i / w));
        let border = |i: u32| {
            inside(i) && ((i % w) == x0 || (i % w) == x0 + side - 1 || (i / w) == y0 || (i / w) == y0 + side - 1)
        };
        IdBuffers {
            width: w,
            height: w,
            face: vec![NO_ENTITY; n],
            edge: (0..w * w).map(|i| if border(i) { 0 } else { NO_ENTITY }).collect(),
            covered: (0..w * w).map(inside).collect(),
        }
    }

    fn target(w: u32, x0: u32, y0: u32, side: u32) -> TargetPixels {
        let ids = square_ids(w, x0, y0, side);
        let lines: Vec<bool> = ids.edge.iter().map(|e| *e != NO_ENTITY).collect();
        TargetPixels::new(w, ids.covered.clone(), &lines)
    }

    #[test]
    fn the_same_outline_agrees_exactly_and_a_larger_one_costs_its_band() {
        let t = target(100, 30, 30, 40);
        let same = agreement(&square_ids(100, 30, 30, 40), &t);
        assert_eq!((same.edge_px, same.extra), (0.0, 0.0));
        // 4 px larger on two sides: its far edges 4 px off the target's, and a band outside.
        let larger = agreement(&square_ids(100, 30, 30, 44), &t);
        assert!(larger.edge_px > 1.0 && larger.extra > 0.0, "{larger:?}");
        assert!(larger.cost() > same.cost());
    }

    #[test]
    fn what_the_target_has_beyond_the_candidate_does_not_pull_it() {
        // The target: a tall block (a base with a boss on it). The candidate: the base only,
        // its edges on the target's lines where the two share them.
        let w = 100u32;
        let tall = target(w, 30, 20, 50);
        let base = agreement(&square_ids(w, 30, 40, 30), &tall);
        // Grown towards the boss: no material outside the target, but the top edge now lies
        // on nothing the target draws.
        let grown = agreement(&square_ids(w, 30, 34, 36), &tall);
        assert_eq!(grown.extra, 0.0);
        assert!(grown.cost() >= base.cost() - 1e-9, "growing into the missing boss must not pay: {base:?} {grown:?}");
    }
}
