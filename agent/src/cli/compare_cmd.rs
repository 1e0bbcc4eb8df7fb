//! `vision2cad compare RUNDIR_A RUNDIR_B`: what changed between two runs of `run` (an
//! ablation, a prompt edit, another model): the metrics side by side with their deltas, and
//! the parts whose IoU moved most.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::Value;

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

fn results(dir: &Path) -> Result<Value> {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{} is not a finished run (no results.json)", dir.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    anyhow::ensure!(
        v.is_object() && v["per_part"].is_array(),
        "{} holds a sweep or something else; compare two single-configuration runs (e.g. RUNDIR/full and RUNDIR/no-pgr)",
        path.display()
    );
    Ok(v)
}

/// The comparison as text (the table, then the parts that moved most).
pub fn compare(a: &Value, b: &Value, top: usize) -> String {
    let mut out = String::from("| metric | A | B | B - A |\n|---|---|---|---|\n");
    for protocol in ["static", "edit10"] {
        for metric in ["cr", "miou", "cd_mean", "cd_median", "hd", "hd95"] {
            let (x, y) = (a[protocol][metric].as_f64(), b[protocol][metric].as_f64());
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
            let delta = match (x, y) {
                (Some(x), Some(y)) => format!("{:+.4}", y - x),
                _ => "-".into(),
            };
            out.push_str(&format!("| {protocol} {metric} | {} | {} | {delta} |\n", show(x), show(y)));
        }
    }
    for (name, key) in [("finished", "finished"), ("failed", "failed"), ("timed out", "timeout")] {
        out.push_str(&format!("| {name} | {} | {} | |\n", a["status"][key], b["status"][key]));
    }
    let index = |v: &Value| -> BTreeMap<String, Value> {
        v["per_part"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["id"].as_str().map(|id| (id.to_string(), p.clone())))
            .collect()
    };
    let (pa, pb) = (index(a), index(b));
    let iou = |p: &Value, protocol: &str| p[protocol]["iou"].as_f64().unwrap_or(0.0);
    let mut moved: Vec<(f64, &String, f64, f64, f64, f64)> = pa
        .iter()
        .filter_map(|(id, x)| {
            let y = pb.get(id)?;
            Some((
                (iou(y, "static") - iou(x, "static")).abs(),
                id,
                iou(x, "static"),
                iou(y, "static"),
                iou(x, "edit10"),
                iou(y, "edit10"),
            ))
        })
        .collect();
    moved.sort_by(|l, r| r.0.total_cmp(&l.0).then(l.1.cmp(r.1)));
    let only = |from: &BTreeMap<String, Value>, to: &BTreeMap<String, Value>| {
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
            pa[*id]["status"].as_str().unwrap_or(""),
            pb[*id]["status"].as_str().unwrap_or("")
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
    use serde_json::json;

    fn run_with(ious: &[(&str, f64)], miou: f64) -> Value {
        json!({
            "status": {"finished": ious.len(), "failed": 0, "timeout": 0},
            "static": {"cr": 1.0, "miou": miou}, "edit10": {"cr": 1.0, "miou": miou},
            "per_part": ious.iter().map(|(id, i)| json!({"id": id, "status": "finished",
                "static": {"iou": i}, "edit10": {"iou": i}})).collect::<Vec<_>>(),
        })
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
