//! `vision2cad compare RUNDIR_A RUNDIR_B`: what changed between two runs of `run` (an
//! ablation, a prompt edit, another model): the metrics side by side with their deltas, and
//! the parts whose IoU moved most.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::Value;
use vision2cad::batch::{ItemStatus, PartResult, PartScore, ProtocolSummary, RunResults};

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The reference run (a `run --out` folder with results.json).
    pub a: PathBuf,
    /// The run compared with it.
    pub b: PathBuf,
    /// Parts listed, those whose static IoU changed most first.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

fn results(dir: &Path) -> Result<RunResults> {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{} is not a finished run (no results.json)", dir.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    anyhow::ensure!(
        v.is_object() && v["per_part"].is_array(),
        "{} holds a sweep or something else; compare two single-configuration runs (e.g. RUNDIR/full and RUNDIR/no-pgr)",
        path.display()
    );
    serde_json::from_value(v).with_context(|| format!("{} is not a run's results", path.display()))
}

/// The comparison as text (the table, then the parts that moved most).
pub fn compare(a: &RunResults, b: &RunResults, top: usize) -> String {
    type Figure = fn(&ProtocolSummary) -> Option<f64>;
    const METRICS: [(&str, Figure); 6] = [
        ("cr", |s| Some(s.cr)),
        ("miou", |s| s.miou),
        ("cd_mean", |s| s.cd_mean),
        ("cd_median", |s| s.cd_median),
        ("hd", |s| s.hd),
        ("hd95", |s| s.hd95),
    ];
    let mut out = String::from("| metric | A | B | B - A |\n|---|---|---|---|\n");
    for (protocol, sa, sb) in [("static", &a.static_, &b.static_), ("edit10", &a.edit10, &b.edit10)] {
        for (metric, figure) in METRICS {
            let (x, y) = (figure(sa), figure(sb));
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
            let delta = match (x, y) {
                (Some(x), Some(y)) => format!("{:+.4}", y - x),
                _ => "-".into(),
            };
            out.push_str(&format!("| {protocol} {metric} | {} | {} | {delta} |\n", show(x), show(y)));
        }
    }
    for (name, status) in
        [("finished", ItemStatus::Finished), ("failed", ItemStatus::Failed), ("timed out", ItemStatus::Timeout)]
    {
        out.push_str(&format!("| {name} | {} | {} | |\n", a.status.get(status), b.status.get(status)));
    }
    fn index(r: &RunResults) -> BTreeMap<&str, &PartResult> {
        r.per_part.iter().map(|p| (p.id.as_str(), p)).collect()
    }
    let (pa, pb) = (index(a), index(b));
    let iou = |s: &Option<PartScore>| s.and_then(|s| s.iou).unwrap_or(0.0);
    let mut moved: Vec<(f64, &str, f64, f64, f64, f64)> = pa
        .iter()
        .filter_map(|(id, x)| {
            let y = pb.get(id)?;
            Some((
                (iou(&y.static_) - iou(&x.static_)).abs(),
                *id,
                iou(&x.static_),
                iou(&y.static_),
                iou(&x.edit10),
                iou(&y.edit10),
            ))
        })
        .collect();
    moved.sort_by(|l, r| r.0.total_cmp(&l.0).then(l.1.cmp(r.1)));
    let only = |from: &BTreeMap<&str, &PartResult>, to: &BTreeMap<&str, &PartResult>| {
        from.keys().filter(|k| !to.contains_key(*k)).count()
    };
    out.push_str(&format!(
        "\n{} parts in both runs ({} only in A, {} only in B). Largest changes of static IoU (0 where a run has no model):\n\n",
        moved.len(),
        only(&pa, &pb),
        only(&pb, &pa)
    ));
    out.push_str("| part | static IoU A | B | edit10 IoU A | B | status A | B |\n|---|---|---|---|---|---|---|\n");
    for (_, id, sa, sb, ea, eb) in moved.iter().take(top) {
        out.push_str(&format!(
            "| {id} | {sa:.4} | {sb:.4} | {ea:.4} | {eb:.4} | {} | {} |\n",
            pa[*id].status.name(),
            pb[*id].status.name()
        ));
    }
    out
}

pub fn run(args: &CompareArgs) -> Result<ExitCode> {
    let (a, b) = (results(&args.a)?, results(&args.b)?);
    println!("A = {}\nB = {}\n", args.a.display(), args.b.display());
    print!("{}", compare(&a, &b, args.top));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vision2cad::batch::StatusCounts;

    fn run_with(ious: &[(&str, f64)], miou: f64) -> RunResults {
        let summary = ProtocolSummary { n: ious.len(), cr: 1.0, miou: Some(miou), ..ProtocolSummary::default() };
        let score = |i: f64| Some(PartScore { compiled: true, iou: Some(i), cd: None, hd: None, hd95: None });
        RunResults {
            settings: vision2cad::batch::RunSettings {
                dataset: "gerd".into(),
                split: "test".into(),
                vlm: vision2cad::batch::RunBackend::Oracle,
                reconstruct: Vec::new(),
                parts: ious.iter().map(|(id, _)| id.to_string()).collect(),
                shard: None,
            },
            parts: ious.len(),
            status: StatusCounts { finished: ious.len(), ..StatusCounts::default() },
            static_: summary,
            edit10: summary,
            tokens: Default::default(),
            cost: None,
            seconds_per_part: 0.0,
            wall_seconds_this_session: 0.0,
            per_part: ious
                .iter()
                .map(|(id, i)| PartResult {
                    static_: score(*i),
                    edit10: score(*i),
                    ..PartResult::from(&vision2cad::batch::Item::new(id, ItemStatus::Finished))
                })
                .collect(),
        }
    }

    #[test]
    fn deltas_and_the_parts_that_moved_most() {
        let a = run_with(&[("p1", 0.99), ("p2", 0.98), ("p3", 0.97)], 0.98);
        let b = run_with(&[("p1", 0.99), ("p2", 0.50), ("p3", 0.96)], 0.8167);
        let text = compare(&a, &b, 2);
        assert!(text.contains("| static miou | 0.9800 | 0.8167 | -0.1633 |"), "{text}");
        let p2 = text.find("| p2 |").expect("p2 listed");
        let p3 = text.find("| p3 |").expect("p3 listed");
        assert!(p2 < p3, "the largest change first");
        assert!(!text.contains("| p1 |"), "only the top 2");
    }
}
