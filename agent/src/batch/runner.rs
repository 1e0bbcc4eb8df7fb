//! Running a batch: each part reconstructed by a child `vision2cad reconstruct` process (a
//! crash or a hang costs that part only), several at once, each part's folder renamed into
//! place only when its process has ended, so an interrupted run resumes where it stopped.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Item, ItemStatus, RunBackend};
use crate::error::LoopError;
use crate::report::write_json;
use crate::vlm::Usage;

/// Where the parts of a run live: `RUNDIR/parts/ID/`, written as `.partial-ID` first.
pub const PARTS: &str = "parts";
const PARTIAL: &str = ".partial-";

/// How each part of a run is reconstructed.
#[derive(Debug, Clone)]
pub struct PartRunner {
    /// The `vision2cad` executable whose `reconstruct` runs each part.
    pub program: PathBuf,
    pub backend: RunBackend,
    /// Calibration: an oracle shadows the model on every part (`--shadow-gt`).
    pub shadow: bool,
    /// Options for every `reconstruct` (`--config`, `--no-pgr`, `--seed`...).
    pub options: Vec<String>,
    /// Seconds one FreeCAD call may take in the child.
    pub worker_timeout: f64,
    /// How long one part may take before it is stopped and recorded as timed out.
    pub item_timeout: Duration,
    /// Environment for every child (the request slots shared by the run's jobs).
    pub env: Vec<(OsString, OsString)>,
}

/// The part folder name of a GERD part folder.
pub fn part_id(part: &Path) -> String {
    part.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
}

impl PartRunner {
    /// Reconstruct `part` (a GERD part folder) into `out/parts/ID/`, with the time limit,
    /// and record its [`Item`] there (`item.json`).
    pub fn run(&self, part: &Path, out: &Path) -> Result<Item, LoopError> {
        let id = part_id(part);
        let partial = out.join(PARTS).join(format!("{PARTIAL}{id}"));
        let done = out.join(PARTS).join(&id);
        let mut cmd = Process::new(&self.program);
        cmd.arg("reconstruct").arg(part.join("target.png")).arg("--out").arg(&partial);
        match self.backend {
            RunBackend::Oracle => cmd.arg("--vlm").arg("oracle").arg("--gt").arg(part),
            RunBackend::Openai => cmd.arg("--vlm").arg("openai"),
            RunBackend::Sim => cmd.arg("--vlm").arg("sim").arg("--gt").arg(part),
        };
        if self.shadow {
            cmd.arg("--shadow-gt").arg(part);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.args(&self.options).arg("--timeout").arg(self.worker_timeout.to_string());
        // The log waits beside the part's folder (which `reconstruct` wants new or empty)
        // and moves into it when the process has ended.
        std::fs::create_dir_all(out.join(PARTS)).map_err(|e| LoopError::io(&out.join(PARTS), e))?;
        let log_path = out.join(PARTS).join(format!("{PARTIAL}{id}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| LoopError::io(&log_path, e))?;
        cmd.stdout(Stdio::null()).stderr(log);
        let started = Instant::now();
        let process = |source| LoopError::Process { program: self.program.display().to_string(), source };
        let mut child = cmd.spawn().map_err(process)?;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(process)? {
                break Some(status);
            }
            if started.elapsed() > self.item_timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        std::fs::create_dir_all(&partial).map_err(|e| LoopError::io(&partial, e))?;
        let kept_log = partial.join("reconstruct.log");
        std::fs::rename(&log_path, &kept_log).map_err(|e| LoopError::io(&kept_log, e))?;
        let log_path = kept_log;
        let outcome = read_outcome(&partial.join("outcome.json"));
        let mut item = Item::new(&id, ItemStatus::Crashed);
        item.seconds = started.elapsed().as_secs_f64();
        if let Some(o) = &outcome {
            item.steps = o.steps;
            item.skipped_steps = o.skipped_steps.clone();
            item.input_tokens = o.usage.input_tokens;
            item.output_tokens = o.usage.output_tokens;
            item.retrieval_tokens = o.retrieval_tokens as u64;
            item.cost = o.usage.cost;
        }
        (item.status, item.reason) = match (status, outcome) {
            (None, _) => (
                ItemStatus::Timeout,
                Some(format!("stopped after {:.0} s (--item-timeout)", self.item_timeout.as_secs_f64())),
            ),
            (Some(_), Some(o)) if o.failure.is_some() && o.backend_failed => (ItemStatus::BackendFailed, o.failure),
            (Some(_), Some(o)) if o.failure.is_some() => (ItemStatus::Failed, o.failure),
            (Some(_), Some(o)) if o.finished => (ItemStatus::Finished, None),
            (Some(_), Some(o)) => (ItemStatus::Stopped, Some(o.stop)),
            (Some(s), None) => {
                let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
                let last = tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
                (ItemStatus::Crashed, Some(format!("reconstruct exited with {s}: {last}")))
            }
        };
        write_json(&partial.join("item.json"), &item)?;
        if done.exists() {
            std::fs::remove_dir_all(&done).map_err(|e| LoopError::io(&done, e))?;
        }
        std::fs::rename(&partial, &done).map_err(|e| LoopError::io(&done, e))?;
        Ok(item)
    }

    /// Run `parts`, `jobs` at once; `ended` hears of each part as it ends.
    pub fn run_all(
        &self,
        parts: Vec<PathBuf>,
        out: &Path,
        jobs: usize,
        ended: impl Fn(&Path, &Result<Item, LoopError>) + Sync,
    ) {
        let queue = Mutex::new(VecDeque::from(parts));
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                scope.spawn(|| {
                    while let Some(part) = queue.lock().ok().and_then(|mut q| q.pop_front()) {
                        ended(&part, &self.run(&part, out));
                    }
                });
            }
        });
    }
}

/// The parts of `parts` to run: those whose reconstruction has not ended yet (no
/// `item.json`) and those the machine or the model server failed (crashed, backend failed),
/// after removing what an interrupted run left half-written.
pub fn parts_to_run(parts: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>, LoopError> {
    let dir = out.join(PARTS);
    std::fs::create_dir_all(&dir).map_err(|e| LoopError::io(&dir, e))?;
    for entry in std::fs::read_dir(&dir).map_err(|e| LoopError::io(&dir, e))?.flatten() {
        if entry.file_name().to_string_lossy().starts_with(PARTIAL) {
            let path = entry.path();
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.map_err(|e| LoopError::io(&path, e))?;
        }
    }
    let ended = |part: &PathBuf| {
        let text = std::fs::read_to_string(dir.join(part_id(part)).join("item.json")).ok();
        text.and_then(|t| serde_json::from_str::<Item>(&t).ok()).is_some_and(|item| !item.status.worth_retrying())
    };
    Ok(parts.iter().filter(|p| !ended(p)).cloned().collect())
}

/// Every part's [`Item`] (one that left none is recorded as crashed).
pub fn read_items(out: &Path, ids: &[String]) -> Vec<Item> {
    ids.iter()
        .map(|id| {
            let path = out.join(PARTS).join(id).join("item.json");
            std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_else(|| Item::missing(id, "the part did not run"))
        })
        .collect()
}

/// What a part's `outcome.json` says, in the fields the loop's and the baseline's outcomes
/// share (the baseline writes more).
#[derive(Debug, Deserialize)]
struct PartOutcome {
    steps: usize,
    finished: bool,
    stop: String,
    failure: Option<String>,
    #[serde(default)]
    backend_failed: bool,
    usage: Usage,
    /// The loop's only (the baseline retrieves nothing).
    #[serde(default)]
    retrieval_tokens: usize,
    /// The loop's only (the baseline has no steps).
    #[serde(default)]
    skipped_steps: Vec<usize>,
}

fn read_outcome(path: &Path) -> Option<PartOutcome> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}
