//! `vision2cad sim-calibrate`: the simulated VLM's rates, counted from the traces of runs
//! made with `--shadow-gt` (where a shadow oracle recorded how the model's answers differ
//! from the ideal ones).
//!
//! Each rate is estimated the way the error model draws it: `sigma` and `parameter` are
//! Gaussian scales, estimated robustly as 1.4826 x the median absolute difference (a few
//! gross misdrawings do not inflate them; the root mean square is given beside it);
//! `reference`, `operation` and `judge_flip` are shares of the compared slots, calls and
//! verdicts. `frame` cannot be seen in answers (it needs the sketch's true frame) and is
//! not estimated.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

use vision2cad::events::{TraceEvent, read_trace};

use crate::cli::files::write_atomic;

#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Traces: trace.jsonl files, reconstruction folders, or run folders (searched for
    /// trace.jsonl).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Also write the estimates as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What the observations add up to.
#[derive(Debug, Default)]
struct Tally {
    traces: usize,
    coordinates: Vec<f64>,
    parameters: Vec<f64>,
    references: (usize, usize),
    operations: (usize, usize),
    verdicts: (usize, usize),
    drawings: (usize, usize),
    uncompared: usize,
}

pub fn run(args: &CalibrateArgs) -> Result<ExitCode> {
    let mut traces = Vec::new();
    for path in &args.paths {
        ensure!(path.exists(), "{} does not exist", path.display());
        find_traces(path, &mut traces)?;
    }
    ensure!(
        !traces.is_empty(),
        "no trace.jsonl under {}",
        args.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    let mut tally = Tally::default();
    for trace in &traces {
        let mut shadowed = false;
        for event in read_trace(trace)? {
            let TraceEvent::Call(call) = event else { continue };
            for o in &call.observed {
                shadowed = true;
                count(&mut tally, o);
            }
        }
        ensure!(
            shadowed,
            "{} has no observations: run the model with `reconstruct --shadow-gt GT` (or `run --shadow`) to record them",
            trace.display()
        );
        tally.traces += 1;
    }
    let estimates = estimates(&tally);
    print!("{}", table(&tally, &estimates));
    if let Some(path) = &args.json {
        write_atomic(path, serde_json::to_string_pretty(&estimates)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn find_traces(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            find_traces(&entry, out)?;
        } else if entry.file_name().is_some_and(|n| n == "trace.jsonl") {
            out.push(entry);
        }
    }
    Ok(())
}

fn count(tally: &mut Tally, o: &Value) {
    let differs = o["differs"] == true;
    let add = |pair: &mut (usize, usize)| {
        pair.0 += usize::from(differs);
        pair.1 += 1;
    };
    match o["kind"].as_str() {
        Some("coordinate") => {
            tally.coordinates.extend(o["deltas"].as_array().into_iter().flatten().filter_map(Value::as_f64))
        }
        Some("parameter") => tally.parameters.extend(o["relative"].as_f64()),
        Some("reference") => add(&mut tally.references),
        Some("operation") => add(&mut tally.operations),
        Some("judge") => add(&mut tally.verdicts),
        Some("drawing") => {
            tally.drawings.0 += 1;
            tally.drawings.1 += 1;
        }
        Some("uncompared") => tally.uncompared += 1,
        _ => {}
    }
    if o["kind"] == "coordinate" {
        tally.drawings.1 += 1;
    }
}

/// 1.4826 x the median absolute value: the standard deviation of a centred Gaussian.
fn robust_scale(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut a: Vec<f64> = xs.iter().map(|x| x.abs()).collect();
    a.sort_by(f64::total_cmp);
    let m = a.len() / 2;
    let median = if a.len().is_multiple_of(2) { (a[m - 1] + a[m]) / 2.0 } else { a[m] };
    Some(1.4826 * median)
}

fn rms(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| (xs.iter().map(|x| x * x).sum::<f64>() / xs.len() as f64).sqrt())
}

fn share((hits, total): (usize, usize)) -> Option<f64> {
    (total > 0).then(|| hits as f64 / total as f64)
}

fn estimates(t: &Tally) -> Value {
    json!({
        "traces": t.traces,
        "sigma": {"estimate": robust_scale(&t.coordinates), "rms": rms(&t.coordinates), "samples": t.coordinates.len()},
        "parameter": {"estimate": robust_scale(&t.parameters), "rms": rms(&t.parameters), "samples": t.parameters.len()},
        "reference": {"estimate": share(t.references), "wrong": t.references.0, "samples": t.references.1},
        "operation": {"estimate": share(t.operations), "wrong": t.operations.0, "samples": t.operations.1},
        "judge_flip": {"estimate": share(t.verdicts), "wrong": t.verdicts.0, "samples": t.verdicts.1},
        "drawings_of_other_primitives": {"share": share(t.drawings), "count": t.drawings.0, "samples": t.drawings.1},
        "uncompared_calls": t.uncompared,
        "frame": "not estimated: answers do not show which frame a drawing assumed",
    })
}

fn table(t: &Tally, e: &Value) -> String {
    let fmt = |v: &Value| v.as_f64().map(|x| format!("{x:.4}")).unwrap_or_else(|| "-".into());
    let mut out = format!("{} trace(s)\n\n| rate | estimate | from |\n|---|---|---|\n", t.traces);
    for (key, from) in [
        ("sigma", format!("{} coordinates (RMS {})", e["sigma"]["samples"], fmt(&e["sigma"]["rms"]))),
        ("parameter", format!("{} numbers (RMS {})", e["parameter"]["samples"], fmt(&e["parameter"]["rms"]))),
        ("reference", format!("{} of {} references", e["reference"]["wrong"], e["reference"]["samples"])),
        ("operation", format!("{} of {} operations", e["operation"]["wrong"], e["operation"]["samples"])),
        ("judge_flip", format!("{} of {} verdicts", e["judge_flip"]["wrong"], e["judge_flip"]["samples"])),
    ] {
        out.push_str(&format!("| {key} | {} | {from} |\n", fmt(&e[key]["estimate"])));
    }
    out.push_str(&format!(
        "\n{} of {} drawings used other primitives than the ideal one (not counted in sigma); {} calls could not be compared; frame: not estimated.\n\n[sim]\n",
        t.drawings.0, t.drawings.1, t.uncompared
    ));
    for key in ["sigma", "parameter", "reference", "operation", "judge_flip"] {
        if let Some(x) = e[key]["estimate"].as_f64() {
            out.push_str(&format!("{key} = {x:.4}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gaussian_scale_is_recovered_and_outliers_do_not_move_it() {
        // Quantiles of a standard normal, scaled by 0.02, plus two gross errors.
        let mut xs: Vec<f64> = (1..200).map(|i| 0.02 * inverse_normal(i as f64 / 200.0)).collect();
        xs.extend([3.0, -5.0]);
        let s = robust_scale(&xs).expect("scale");
        assert!((s - 0.02).abs() < 0.001, "{s}");
        assert!(rms(&xs).expect("rms") > 0.3, "the RMS is what outliers inflate");
    }

    /// Acklam-style bisection on the error function: good to 1e-9 for these quantiles.
    fn inverse_normal(p: f64) -> f64 {
        let cdf = |x: f64| 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2));
        let (mut lo, mut hi) = (-10.0, 10.0);
        for _ in 0..100 {
            let mid = (lo + hi) / 2.0;
            if cdf(mid) < p { lo = mid } else { hi = mid }
        }
        (lo + hi) / 2.0
    }

    /// Abramowitz and Stegun 7.1.26 (error below 1.5e-7).
    fn erf(x: f64) -> f64 {
        let t = 1.0 / (1.0 + 0.3275911 * x.abs());
        let y = 1.0
            - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592)
                * t
                * (-x * x).exp();
        if x >= 0.0 { y } else { -y }
    }
}
