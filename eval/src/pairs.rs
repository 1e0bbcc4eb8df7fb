//! Pairing predictions with ground truths: two files, or two directories whose model files
//! share a stem (`0042.step` in one, `0042.json` in the other).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::EvalError;

/// One evaluation sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// The ground truth's file stem; it also seeds the point sampling.
    pub id: String,
    /// None where the prediction directory has no file of this stem.
    pub pred: Option<PathBuf>,
    pub gt: PathBuf,
}

/// How a model file is built in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Step,
    Fcstd,
    Program,
}

impl ModelKind {
    /// By extension (case-insensitive): `.step`/`.stp`, `.fcstd`, `.json`.
    pub fn of(path: &Path) -> Option<ModelKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "step" | "stp" => Some(ModelKind::Step),
            "fcstd" => Some(ModelKind::Fcstd),
            "json" => Some(ModelKind::Program),
            _ => None,
        }
    }
}

/// Pair `pred` with `gt`: both files (the sample is named after the ground truth's stem),
/// or both directories (one sample per ground-truth model file, in stem order).
pub fn pair_paths(pred: &Path, gt: &Path) -> Result<Vec<Pair>, EvalError> {
    if !gt.exists() {
        return Err(EvalError::MissingGroundTruth { path: gt.to_path_buf() });
    }
    if gt.is_file() {
        if pred.is_dir() {
            let id = stem(gt);
            let pred = models_in(pred)?.remove(&id);
            return Ok(vec![Pair { id, pred, gt: gt.to_path_buf() }]);
        }
        // A path that names nothing is a mistake on the command line, not a prediction that
        // failed (an unreadable or broken file is one: it does not compile).
        if !pred.exists() {
            return Err(EvalError::MissingPrediction { path: pred.to_path_buf() });
        }
        return Ok(vec![Pair { id: stem(gt), pred: Some(pred.to_path_buf()), gt: gt.to_path_buf() }]);
    }
    if !pred.exists() {
        return Err(EvalError::MissingPrediction { path: pred.to_path_buf() });
    }
    if !pred.is_dir() {
        return Err(EvalError::Pairing(format!(
            "the ground truth {} is a directory, so the prediction {} must be one too",
            gt.display(),
            pred.display()
        )));
    }
    let truths = models_in(gt)?;
    if truths.is_empty() {
        return Err(EvalError::Pairing(format!(
            "no model files (.step, .stp, .FCStd, .json) in the ground-truth directory {}",
            gt.display()
        )));
    }
    let mut preds = models_in(pred)?;
    let unpaired: Vec<&String> = preds.keys().filter(|k| !truths.contains_key(*k)).collect();
    if !unpaired.is_empty() {
        tracing::warn!("{} predictions have no ground truth and are ignored (first: {})", unpaired.len(), unpaired[0]);
    }
    Ok(truths.into_iter().map(|(id, gt)| Pair { pred: preds.remove(&id), id, gt }).collect())
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Model files of a directory by stem; two files of one stem are ambiguous.
fn models_in(dir: &Path) -> Result<BTreeMap<String, PathBuf>, EvalError> {
    let io = |source| EvalError::Io { what: format!("cannot read directory {}", dir.display()), source };
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if !path.is_file() || ModelKind::of(&path).is_none() {
            continue;
        }
        if let Some(previous) = out.insert(stem(&path), path.clone()) {
            return Err(EvalError::Pairing(format!(
                "{} and {} share a stem; keep one model per sample",
                previous.display(),
                path.display()
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_pair_by_stem_and_missing_predictions_stay_as_samples() {
        let gt = tempfile::tempdir().expect("tempdir");
        let pred = tempfile::tempdir().expect("tempdir");
        for name in ["a.step", "b.json", "notes.txt"] {
            std::fs::write(gt.path().join(name), "").expect("write");
        }
        for name in ["a.FCStd", "z.step"] {
            std::fs::write(pred.path().join(name), "").expect("write");
        }
        let pairs = pair_paths(pred.path(), gt.path()).expect("pairs");
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0].id, "a");
        assert_eq!(pairs[0].pred.as_deref(), Some(pred.path().join("a.FCStd").as_path()));
        assert_eq!(pairs[1].id, "b");
        assert_eq!(pairs[1].pred, None);
    }

    #[test]
    fn a_missing_ground_truth_is_an_error_naming_it() {
        let err = pair_paths(Path::new("p.step"), Path::new("/nonexistent/gt.step")).expect_err("error");
        assert!(err.to_string().contains("/nonexistent/gt.step"), "{err}");
    }

    #[test]
    fn ambiguous_stems_are_refused() {
        let gt = tempfile::tempdir().expect("tempdir");
        for name in ["a.step", "a.json"] {
            std::fs::write(gt.path().join(name), "").expect("write");
        }
        assert!(pair_paths(gt.path(), gt.path()).is_err());
    }
}
