//! Fillet radii and chamfer sizes, fitted at END on rebuilt models.
//!
//! A fillet or a chamfer is the kernel's own surface between two faces: the picture model
//! ([`super::sketch`]) has no edges for it, and where its edges lie depends on the faces it
//! joins. So its one number is searched on the real thing: the whole program rebuilt with the
//! size changed, its picture scored against the whole target (the mean distance of all its
//! drawn edges to the target's lines, [`super::Agreement::cost`]; only the fillet's or
//! chamfer's edges move between tries). A few sizes across the reach first, then a golden
//! section about the best of them. The best is kept by the rule every fitted feature is kept
//! by ([`super::Moved::agrees_better`]): the edges that moved lie closer to the target's
//! lines, and the whole picture agrees no worse.

use freecad_bridge::Command;

/// The size a fillet (its radius) or chamfer has, and what it is called in a report.
pub fn size_of(command: &Command) -> Option<(&'static str, f64)> {
    match command {
        Command::Fillet(fillet) => Some(("fillet radius", fillet.radius)),
        Command::Chamfer(chamfer) => Some(("chamfer size", chamfer.size)),
        _ => None,
    }
}

/// `command` (a fillet or chamfer) with its size set to `size`.
pub fn with_size(command: &Command, size: f64) -> Command {
    let mut command = command.clone();
    match &mut command {
        Command::Fillet(fillet) => fillet.radius = size,
        Command::Chamfer(chamfer) => chamfer.size = size,
        _ => {}
    }
    command
}

/// How far a size may move: this many pixels' worth on the picture ...
pub const REACH_PX: f64 = 14.0;
/// ... and within these factors of the size drawn (a fillet may not vanish, and one much
/// larger than drawn is another part).
pub const SMALLEST: f64 = 0.3;
pub const LARGEST: f64 = 2.5;

/// The sizes a fillet or chamfer drawn `size` may take, seen at `px_per_unit`.
pub fn bounds(size: f64, px_per_unit: f64) -> (f64, f64) {
    let reach = REACH_PX / px_per_unit.max(1e-9);
    ((size - reach).max(SMALLEST * size), (size + reach).min(LARGEST * size))
}

/// The best size in `(lo, hi)` by `cost` (lower is better; `None`: that size does not
/// build), starting from `start`, whose cost and result are `at_start`: the ends of the reach
/// and half way to them, then `steps` of a golden section about the best. The half-way sizes
/// are tried first; the ends and the golden section only where the best so far is `gain` or
/// more below the start's cost (a negative infinity: always). Returns the best size, its cost
/// and what `cost` made of it, and how many sizes were tried.
pub fn minimise<T>(
    start: f64,
    at_start: (f64, T),
    (lo, hi): (f64, f64),
    (steps, gain): (usize, f64),
    mut cost: impl FnMut(f64) -> Option<(f64, T)>,
) -> (f64, (f64, T), usize) {
    let mut tried = 0;
    let start_cost = at_start.0;
    let mut best = (start, at_start);
    // The scan: half way to the ends of the reach, either side, then the ends.
    let mut scanned = vec![(start, best.1.0)];
    let gained = |best: f64| best <= start_cost - gain;
    for (i, size) in [0.5 * (lo + start), 0.5 * (start + hi), lo, hi].into_iter().enumerate() {
        if i >= 2 && !gained(best.1.0) {
            break;
        }
        if (size - start).abs() <= 1e-9 * start.abs().max(1.0) {
            continue;
        }
        tried += 1;
        let Some(result) = cost(size) else { continue };
        scanned.push((size, result.0));
        if result.0 < best.1.0 {
            best = (size, result);
        }
    }
    // A golden section between the best's neighbours in the scan.
    scanned.sort_by(|a, b| a.0.total_cmp(&b.0));
    let at = scanned.iter().position(|&(s, _)| s == best.0).unwrap_or(0);
    let (mut a, mut b) = (scanned[at.saturating_sub(1)].0, scanned[(at + 1).min(scanned.len() - 1)].0);
    const INVERSE_PHI: f64 = 0.618_033_988_749_894_9;
    let steps = if gained(best.1.0) { steps } else { 0 };
    for _ in 0..steps {
        if b - a <= 1e-9 * best.0.abs().max(1.0) {
            break;
        }
        // The wider side of the best, cut at the golden ratio.
        let size = if best.0 - a > b - best.0 {
            best.0 - (1.0 - INVERSE_PHI) * (best.0 - a)
        } else {
            best.0 + (1.0 - INVERSE_PHI) * (b - best.0)
        };
        tried += 1;
        match cost(size) {
            Some(result) if result.0 < best.1.0 => {
                if size < best.0 {
                    b = best.0;
                } else {
                    a = best.0;
                }
                best = (size, result);
            }
            // Worse (or not built): the bracket closes on that side.
            _ => {
                if size < best.0 {
                    a = size;
                } else {
                    b = size;
                }
            }
        }
    }
    (best.0, best.1, tried)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_the_reach_in_pixels_within_the_factors() {
        // 3 px per mm: 14 px is 4.67 mm.
        let (lo, hi) = bounds(2.0, 3.0);
        assert_eq!((lo, hi), (0.6, 5.0));
        let (lo, hi) = bounds(20.0, 3.0);
        assert!((lo - 15.333).abs() < 1e-3 && (hi - 24.667).abs() < 1e-3, "{lo} {hi}");
    }

    #[test]
    fn a_size_drawn_off_is_found_within_a_tenth_and_a_size_that_does_not_build_is_skipped() {
        // The picture agrees best at 1.4 (cost grows with the distance from it, flat past
        // a cap as edges fall off the target's lines); sizes above 3 do not build.
        let cost = |s: f64| (s <= 3.0).then(|| ((s - 1.4).abs().min(1.0), ()));
        let (size, (c, ()), tried) =
            minimise(2.0, (cost(2.0).expect("2 builds").0, ()), bounds(2.0, 3.0), (3, f64::NEG_INFINITY), cost);
        assert!((size - 1.4).abs() < 0.1, "{size} (cost {c})");
        assert!(tried <= 4 + 3, "{tried} tries");
    }

    #[test]
    fn a_scan_that_gains_nothing_half_way_stops_there_unless_told_to_go_on() {
        // Flat near the start, lower only past 1.5 times it.
        let cost = |s: f64| Some((if s > 3.0 { 0.5 } else { 1.0 }, ()));
        let (size, _, tried) = minimise(2.0, (1.0, ()), (1.0, 3.5), (5, 0.15), cost);
        assert_eq!((size, tried), (2.0, 2), "two half-way tries, nothing kept");
        let (size, _, tried) = minimise(2.0, (1.0, ()), (1.0, 3.5), (5, f64::NEG_INFINITY), cost);
        assert!(size > 3.0 && tried > 4, "{size} after {tried} tries");
        // Lower half way: the ends and the golden section follow.
        let cost = |s: f64| Some(((s - 2.6).abs(), ()));
        let (size, _, tried) = minimise(2.0, (0.6, ()), (1.0, 3.5), (5, 0.15), cost);
        assert!((size - 2.6).abs() < 0.15 && tried == 9, "{size} after {tried} tries");
    }

    #[test]
    fn an_exact_size_stays() {
        let cost = |s: f64| Some(((s - 2.0).abs(), ()));
        let (size, _, _) = minimise(2.0, (0.0, ()), bounds(2.0, 3.0), (3, f64::NEG_INFINITY), cost);
        assert_eq!(size, 2.0);
    }
}
