//! Per-sample results, the summary over a run, and the text table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::pairs::Pair;
use crate::sample::SEED_CONVENTION;
use crate::{EvalOptions, Normalization, Protocol};

/// Which computation produced a sample's IoU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IouMethod {
    /// Kernel booleans on the normalised solids.
    Exact,
    /// The kernel's fuzzy boolean ([`crate::pipeline`]'s `FUZZY`), where the plain one
    /// failed or returned a common part the surfaces contradict (coincident faces), and the
    /// voxel IoU agrees with it.
    Fuzzy,
    /// Kernel booleans with the prediction moved a hundred-thousandth of the part's size
    /// ([`crate::pipeline`]'s `NUDGE`), where the plain and fuzzy ones failed or returned a
    /// common part the surfaces contradict, and the moves that give a plausible common part (at
    /// least two) agree.
    Nudged,
    /// 128^3 ray-parity voxels on the normalised meshes (the booleans failed).
    Voxel,
}

impl IouMethod {
    pub fn name(self) -> &'static str {
        match self {
            IouMethod::Exact => "exact",
            IouMethod::Fuzzy => "fuzzy",
            IouMethod::Nudged => "nudged",
            IouMethod::Voxel => "voxel",
        }
    }
}

/// One row of the per-sample report. Metrics are null for a sample that did not compile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleResult {
    pub id: String,
    pub pred: Option<String>,
    pub gt: String,
    pub compiled: bool,
    /// Why the sample did not compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the evaluator could not score the sample (its own fault, not the prediction's:
    /// a worker lost on every attempt, a mesh the kernel could not make). Such a sample is
    /// left out of CR and every metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub iou: Option<f64>,
    /// Chamfer distance x1000 (squared distances).
    pub cd: Option<f64>,
    pub hd: Option<f64>,
    pub hd95: Option<f64>,
    pub iou_method: Option<IouMethod>,
    /// Why the booleans were not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iou_fallback_reason: Option<String>,
    /// The voxel IoU as well, when asked for (`--voxel-check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iou_voxel: Option<f64>,
    /// With `voxel_check`: the column IoU, exact along z, that checks the booleans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iou_column: Option<f64>,
    /// The sign flip chosen under inertia normalisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flip: Option<[i8; 3]>,
    /// CadQueryEval-style checks of the prediction.
    pub watertight: Option<bool>,
    pub components: Option<usize>,
    pub bbox_ok: Option<bool>,
    pub volume_ok: Option<bool>,
    /// Volumes in model units (after the protocol's edit).
    pub pred_volume: Option<f64>,
    pub gt_volume: Option<f64>,
}

impl SampleResult {
    pub fn not_compiled(pair: &Pair, reason: String) -> SampleResult {
        SampleResult {
            id: pair.id.clone(),
            pred: pair.pred.as_ref().map(|p| p.display().to_string()),
            gt: pair.gt.display().to_string(),
            compiled: false,
            reason: Some(reason),
            error: None,
            iou: None,
            cd: None,
            hd: None,
            hd95: None,
            iou_method: None,
            iou_fallback_reason: None,
            iou_voxel: None,
            iou_column: None,
            flip: None,
            watertight: None,
            components: None,
            bbox_ok: None,
            volume_ok: None,
            pred_volume: None,
            gt_volume: None,
        }
    }
}

impl SampleResult {
    /// A sample the evaluator could not score, and why.
    pub fn not_scored(pair: &Pair, error: String) -> SampleResult {
        SampleResult { reason: None, error: Some(error), ..SampleResult::not_compiled(pair, String::new()) }
    }

    /// Whether the evaluator, not the prediction, failed this sample.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

/// A whole run: conventions, summary metrics (means over compiled samples; null when none
/// compiled) and every sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub protocol: Protocol,
    pub normalize: Normalization,
    pub points: usize,
    pub seed: String,
    pub n: usize,
    pub n_compiled: usize,
    /// Samples the evaluator could not score (see [`SampleResult::error`]); CR is over the
    /// others.
    #[serde(default)]
    pub n_errors: usize,
    pub cr: f64,
    pub miou: Option<f64>,
    pub cd_mean: Option<f64>,
    pub cd_median: Option<f64>,
    pub hd: Option<f64>,
    pub hd95: Option<f64>,
    /// Samples per IoU method.
    pub iou_methods: BTreeMap<IouMethod, usize>,
    /// Shares of compiled samples passing each CadQueryEval check.
    pub watertight_rate: Option<f64>,
    pub bbox_ok_rate: Option<f64>,
    pub volume_ok_rate: Option<f64>,
    pub samples: Vec<SampleResult>,
}

impl Report {
    pub fn new(options: &EvalOptions, samples: Vec<SampleResult>) -> Report {
        let compiled: Vec<&SampleResult> = samples.iter().filter(|s| s.compiled).collect();
        let values = |f: fn(&SampleResult) -> Option<f64>| compiled.iter().filter_map(|s| f(s)).collect::<Vec<f64>>();
        let rate = |f: fn(&SampleResult) -> Option<bool>| {
            mean(&compiled.iter().filter_map(|s| f(s)).map(|b| if b { 1.0 } else { 0.0 }).collect::<Vec<_>>())
        };
        let mut iou_methods = BTreeMap::new();
        for m in compiled.iter().filter_map(|s| s.iou_method) {
            *iou_methods.entry(m).or_insert(0) += 1;
        }
        let n = samples.len();
        let n_errors = samples.iter().filter(|s| s.is_error()).count();
        let scored = n - n_errors;
        let cds = values(|s| s.cd);
        Report {
            protocol: options.protocol,
            normalize: options.normalization,
            points: options.points,
            seed: SEED_CONVENTION.into(),
            n,
            n_compiled: compiled.len(),
            n_errors,
            cr: if scored == 0 { 0.0 } else { compiled.len() as f64 / scored as f64 },
            miou: mean(&values(|s| s.iou)),
            cd_mean: mean(&cds),
            cd_median: median(cds),
            hd: mean(&values(|s| s.hd)),
            hd95: mean(&values(|s| s.hd95)),
            iou_methods,
            watertight_rate: rate(|s| s.watertight),
            bbox_ok_rate: rate(|s| s.bbox_ok),
            volume_ok_rate: rate(|s| s.volume_ok),
            samples,
        }
    }

    /// One report from the reports of disjoint shards of the same evaluation: the samples
    /// of all, ordered by id (the order of an unsharded run over sorted pairs), and the
    /// summary recomputed from them, so the result equals the unsharded report.
    pub fn merge(reports: Vec<Report>) -> Result<Report, String> {
        let first = reports.first().ok_or("no reports to merge")?;
        let options = EvalOptions {
            protocol: first.protocol,
            normalization: first.normalize,
            points: first.points,
            ..EvalOptions::default()
        };
        for r in &reports {
            if (r.protocol, r.normalize, r.points, &r.seed)
                != (first.protocol, first.normalize, first.points, &first.seed)
            {
                return Err(format!(
                    "reports of different conventions cannot be merged ({} {} N={} and {} {} N={})",
                    first.protocol.name(),
                    first.normalize.name(),
                    first.points,
                    r.protocol.name(),
                    r.normalize.name(),
                    r.points
                ));
            }
        }
        let mut samples: Vec<SampleResult> = reports.into_iter().flat_map(|r| r.samples).collect();
        samples.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(w) = samples.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(format!("sample {} is in more than one report", w[0].id));
        }
        Ok(Report::new(&options, samples))
    }

    /// The human-readable report: conventions first, then the metrics.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let methods = [IouMethod::Exact, IouMethod::Fuzzy, IouMethod::Nudged, IouMethod::Voxel]
            .map(|m| format!("{} {}", m.name(), self.iou_methods.get(&m).copied().unwrap_or(0)))
            .join(", ");
        let _ = writeln!(out, "protocol       {}", self.protocol.name());
        let _ = writeln!(out, "normalisation  {}", self.normalize.name());
        let _ = writeln!(out, "points         N = {} per shape, area-weighted; seed {}", self.points, self.seed);
        let _ = writeln!(out, "IoU methods    {methods}");
        let _ = writeln!(out, "solids         several in one model are scored as their union");
        let not_compiled = self.n - self.n_compiled - self.n_errors;
        let _ = write!(out, "samples        {} ({} compiled, {not_compiled} did not compile", self.n, self.n_compiled);
        let _ = match self.n_errors {
            0 => writeln!(out, ")"),
            e => writeln!(out, ", {e} not scored: evaluator errors, left out of CR)"),
        };
        let _ = writeln!(out);
        let _ = writeln!(out, "{:<22} {:>12}", "metric", "value");
        let row = |out: &mut String, name: &str, v: Option<f64>| {
            let _ = match v {
                Some(v) => writeln!(out, "{name:<22} {v:>12.6}"),
                None => writeln!(out, "{name:<22} {:>12}", "-"),
            };
        };
        row(&mut out, "CR", Some(self.cr));
        row(&mut out, "mIoU", self.miou);
        row(&mut out, "CD mean (x1000)", self.cd_mean);
        row(&mut out, "CD median (x1000)", self.cd_median);
        row(&mut out, "HD (mean)", self.hd);
        row(&mut out, "HD95 (mean)", self.hd95);
        row(&mut out, "watertight rate", self.watertight_rate);
        if self.normalize == Normalization::None {
            row(&mut out, "bbox within 1 mm", self.bbox_ok_rate);
            row(&mut out, "volume within 2%", self.volume_ok_rate);
        } else {
            // In model units: a reconstruction from one image has no known scale, so under a
            // normalisation these rates would only say the scales differ.
            for name in ["bbox within 1 mm", "volume within 2%"] {
                let _ = writeln!(out, "{name:<22} {:>12}", "n/a");
            }
            let _ = writeln!(
                out,
                "(bbox and volume checks are in model units, meaningful where the scale is known: --normalize none;\n per-sample values are in --json/--jsonl)"
            );
        }
        self.failures(&mut out);
        out
    }

    /// The samples that did not compile and those the evaluator could not score, each with
    /// its reason on one line (the first [`LISTED`] of each; all are in --json/--jsonl).
    fn failures(&self, out: &mut String) {
        let failed: Vec<&SampleResult> = self.samples.iter().filter(|s| !s.compiled && !s.is_error()).collect();
        let errors: Vec<&SampleResult> = self.samples.iter().filter(|s| s.is_error()).collect();
        let list = |out: &mut String, title: String, rows: &[&SampleResult], why: fn(&SampleResult) -> String| {
            if rows.is_empty() {
                return;
            }
            let _ = writeln!(out, "\n{title}");
            let width = rows.iter().take(LISTED).map(|s| s.id.len()).max().unwrap_or(0);
            for s in rows.iter().take(LISTED) {
                let _ = writeln!(out, "  {:<width$}  {}", s.id, one_line(&why(s)));
            }
            if rows.len() > LISTED {
                let _ = writeln!(out, "  ... and {} more (--json lists every sample)", rows.len() - LISTED);
            }
        };
        list(out, format!("did not compile ({}): CR 0", failed.len()), &failed, |s| {
            let reason = s.reason.clone().unwrap_or_default();
            if s.pred.is_none() { format!("missing: {reason}") } else { reason }
        });
        list(out, format!("not scored ({}): evaluator errors, not counted in CR", errors.len()), &errors, |s| {
            s.error.clone().unwrap_or_default()
        });
    }
}

/// Samples listed by name under each failure heading of the table.
pub const LISTED: usize = 20;

/// A reason on one line of at most 200 characters (FreeCAD's messages run over several).
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &flat[..cut]),
        None => flat,
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: &str, iou: Option<f64>, cd: Option<f64>) -> SampleResult {
        let pair = Pair { id: id.into(), pred: None, gt: format!("{id}.step").into() };
        let mut s = SampleResult::not_compiled(&pair, "x".into());
        if iou.is_some() {
            s.compiled = true;
            s.reason = None;
            s.iou = iou;
            s.cd = cd;
            s.hd = Some(1.0);
            s.hd95 = Some(0.5);
            s.iou_method = Some(IouMethod::Exact);
        }
        s
    }

    #[test]
    fn summary_counts_only_compiled_samples_in_the_metrics() {
        let options = EvalOptions::default();
        let r = Report::new(
            &options,
            vec![sample("a", Some(1.0), Some(1.0)), sample("b", None, None), sample("c", Some(0.5), Some(4.0))],
        );
        assert_eq!((r.n, r.n_compiled), (3, 2));
        assert!((r.cr - 2.0 / 3.0).abs() < 1e-15);
        assert_eq!(r.miou, Some(0.75));
        assert_eq!((r.cd_mean, r.cd_median), (Some(2.5), Some(2.5)));
        assert_eq!(r.iou_methods.get(&IouMethod::Exact), Some(&2));
        let json = serde_json::to_value(&r).expect("json");
        for key in ["cr", "miou", "cd_mean", "cd_median", "hd", "hd95", "n", "n_compiled", "samples"] {
            assert!(json.get(key).is_some(), "{key}");
        }
        assert_eq!(json["samples"][1]["reason"], "x");
        assert!(r.table().contains("CR"));
    }

    #[test]
    fn an_empty_run_has_null_metrics() {
        let r = Report::new(&EvalOptions::default(), vec![sample("b", None, None)]);
        assert_eq!((r.cr, r.miou, r.cd_median), (0.0, None, None));
    }
}
