//! Batch runs over a GERD split: what a run is started with ([`RunSettings`]), which
//! machine takes which part ([`shard`]), how each part runs ([`runner`]: a child process
//! per part, resumable), and what a run reports ([`results`]): every part's [`Item`] with
//! its [`ItemStatus`], and the [`RunResults`] of `results.json`.
//!
//! ```
//! use vision2cad::batch::{Item, ItemStatus};
//!
//! let item = Item::new("00000007", ItemStatus::Finished);
//! assert!(item.status.reached_the_end());
//! assert_eq!(serde_json::to_value(&item).unwrap()["status"], "finished");
//! ```

pub mod html;
pub mod results;
pub mod runner;
pub mod shard;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use results::{Item, ItemStatus, PartResult, PartScore, ProtocolSummary, RunResults, StatusCounts, Tokens};
pub use runner::PartRunner;
pub use shard::Shard;

/// The backend every part of a run is reconstructed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunBackend {
    /// A perfect model: each part's own GERD folder is its ground truth.
    Oracle,
    /// A chat-completions server (see `reconstruct --vlm openai`).
    Openai,
    /// The oracle with an error model (see `reconstruct --vlm sim`; rates after `--` as
    /// `--sim KEY=VALUE`, or varied with --vary).
    Sim,
}

impl RunBackend {
    pub fn name(self) -> &'static str {
        match self {
            RunBackend::Oracle => "oracle",
            RunBackend::Openai => "openai",
            RunBackend::Sim => "sim",
        }
    }
}

/// The settings a run was started with (`run.json`); a resumed run must be given the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub dataset: PathBuf,
    pub split: String,
    pub vlm: RunBackend,
    pub reconstruct: Vec<String>,
    /// The parts of this run (of this shard, when sharded).
    pub parts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
}

/// A sharded sweep's list of configurations, in order, in the sweep's folder.
pub const SWEEP_FILE: &str = "sweep.json";

/// What [`SWEEP_FILE`] holds: the configurations in order, and the sim rate `--vary` varies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepFile {
    pub configs: Vec<String>,
    pub vary: Option<String>,
}
