//! What a reconstruction records as it goes: one [`TraceEvent`] per decision, sent to
//! [`Sink`]s. The engine writes them to `trace.jsonl` ([`JsonlTrace`]); the HTML report and
//! `sim-calibrate` read them back with [`read_trace`], as the same type.
//!
//! ```
//! use vision2cad::events::{Sink, TraceEvent};
//!
//! /// Counts the model calls of a run, e.g. for a progress bar.
//! #[derive(Debug, Default)]
//! struct Calls(usize);
//!
//! impl Sink for Calls {
//!     fn event(&mut self, event: &TraceEvent) -> Result<(), vision2cad::LoopError> {
//!         self.0 += usize::from(matches!(event, TraceEvent::Call(_)));
//!         Ok(())
//!     }
//! }
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};

use freecad_bridge::Command;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Config;
use crate::engine::{Outcome, Timing};
use crate::error::LoopError;
use crate::register::Fit;
use crate::vlm::{Stage, Usage};

/// One line of `trace.jsonl`: `{"event": "call", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TraceEvent {
    /// The run began: what it works on and how it is configured.
    Start { image: String, backend: String, config: Box<Config>, prompts: String, target: TargetCircle },
    /// Whether retrieval is on, and why (which index, or why none).
    Rag { on: bool, reason: String },
    /// The run continues from `program.json` with `steps` accepted steps.
    Resume { steps: usize, finished: bool },
    /// One call to the model and what came of its answer.
    Call(Call),
    /// Stage 1's retrieved examples.
    Retrieved {
        step: usize,
        attempt: usize,
        hits: Vec<gerd::retrieve::Hit>,
        /// Hits left out for a score below `rag_min_score`.
        #[serde(default)]
        below_threshold: Vec<gerd::retrieve::Hit>,
        /// Input tokens the shown examples added to the request (text and images, estimated
        /// as the common vision APIs count them).
        #[serde(default)]
        tokens: usize,
    },
    /// PGR ties added to a drawn sketch.
    Snapped { step: usize, attempt: usize, sketch: String, constraints: Vec<String> },
    /// Constraints of a sketch the solver found redundant: dropped, and the step goes on
    /// (`#3` is the sketch's `constraints[3]`: the drawing's, then PGR's ties; `auto` a
    /// coincidence the bridge added where curves meet).
    Dropped { step: usize, attempt: usize, sketch: String, constraints: Vec<String> },
    /// The fit moved the candidate's numbers to agree with the target's pixels (or found no
    /// value that agrees better: `changes` empty).
    Fit { step: usize, attempt: usize, report: Box<crate::fit::FitReport> },
    /// The fit at END: every feature of the finished program fitted again.
    ProgramFit { report: crate::fit::program::ProgramFit },
    /// A revolve's profile crossed its own axis by a hair: its points across were put on it.
    OntoAxis { step: usize, attempt: usize, sketch: String, points: usize },
    /// A sketch's holes crossed its outline or lay just outside it: they were moved inside.
    HolesInside { step: usize, attempt: usize, sketch: String, circles: usize },
    /// A pad came out a solid of its own: its side nearest an edge of the part, a hair off it,
    /// was put a pixel past it, into the part (`moved`: the farther end's move, model units).
    AgainstPart { step: usize, attempt: usize, sketch: String, moved: f64 },
    /// Stage 3 rejected the candidate.
    Rejected { step: usize, attempt: usize, reasons: Vec<String> },
    /// A candidate was executed: committed (`ok`) or failed.
    Execute(Execution),
    /// S_t refitted after a step (registration).
    Register { step: usize, fit: Fit },
    /// No candidate got through in the step's attempts: the step is set aside, the model is
    /// as it was, and the loop goes on (`max_skipped_steps`).
    Skipped { step: usize, reason: String },
    /// A step was accepted; the harness's own seconds for it.
    Accepted { step: usize, timing: Timing },
    /// The model said END.
    End { step: usize, reason: String },
    /// The run stopped.
    Stop { outcome: Box<Outcome> },
}

/// Where the part is in the target image, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TargetCircle {
    pub center_px: [f64; 2],
    pub radius_px: f64,
}

/// One call to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub step: usize,
    pub attempt: usize,
    /// 1 for the first answer, then one more per re-ask after an invalid answer.
    #[serde(rename = "try")]
    pub round: usize,
    pub stage: Stage,
    pub request: CallRequest,
    /// Waiting for the model.
    pub seconds: f64,
    /// The backend could not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The simulated model's injected errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<Value>,
    /// Where a shadow oracle's answer differs from the model's (`--shadow-gt`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Why the answer was invalid (it is asked again while rounds are left).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// What the model was shown: the text and the images, relative to the output folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    pub text: String,
    pub images: Vec<String>,
}

/// A candidate executed: its commands when committed, the error when it failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    pub step: usize,
    pub attempt: usize,
    pub ok: bool,
    /// Stage 3 accepted it (false: committed without verification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Command>,
    /// The committed command replaces the accepted command of this number (a revision,
    /// numbered from 1 as Stage 1's history lists them) instead of following the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revises: Option<usize>,
    /// A revision's linked commands (`also`): `commands[1..]` replace these numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_revises: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Execution {
    pub fn committed(step: usize, attempt: usize, verified: bool, commands: Vec<Command>) -> Execution {
        Execution {
            step,
            attempt,
            ok: true,
            verified: Some(verified),
            commands,
            revises: None,
            also_revises: Vec::new(),
            error: None,
        }
    }

    pub fn failed(step: usize, attempt: usize, error: String) -> Execution {
        Execution {
            step,
            attempt,
            ok: false,
            verified: None,
            commands: Vec::new(),
            revises: None,
            also_revises: Vec::new(),
            error: Some(error),
        }
    }
}

/// Receives the events of a run as they happen (ripgrep's `Sink`, for a reconstruction).
pub trait Sink {
    fn event(&mut self, event: &TraceEvent) -> Result<(), LoopError>;
}

/// `trace.jsonl`, one JSON object per line, written as it goes.
#[derive(Debug)]
pub struct JsonlTrace {
    file: std::fs::File,
    path: PathBuf,
}

impl JsonlTrace {
    /// Open for appending (`resume`) or start afresh.
    pub fn open(path: &Path, append: bool) -> Result<JsonlTrace, LoopError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(path)
            .map_err(|e| LoopError::io(path, e))?;
        Ok(JsonlTrace { file, path: path.to_path_buf() })
    }
}

impl Sink for JsonlTrace {
    fn event(&mut self, event: &TraceEvent) -> Result<(), LoopError> {
        let mut line = serde_json::to_string(event).map_err(|e| LoopError::io(&self.path, e.into()))?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(|e| LoopError::io(&self.path, e))
    }
}

/// A line of a trace that is not an event of this version.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {reason}")]
pub struct TraceError {
    pub path: String,
    pub line: usize,
    pub reason: String,
}

/// Every event of a `trace.jsonl`, in order.
pub fn read_trace(path: &Path) -> Result<Vec<TraceEvent>, TraceError> {
    let fail = |line, reason: String| TraceError { path: path.display().to_string(), line, reason };
    let text = std::fs::read_to_string(path).map_err(|e| fail(0, e.to_string()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| serde_json::from_str(l).map_err(|e| fail(n + 1, format!("not a trace event: {e}"))))
        .collect()
}
