//! Why a reconstruction could not run, as opposed to a model that did badly (that is an
//! [`Outcome`](crate::Outcome) with a failure).

use std::path::Path;

use freecad_bridge::BridgeError;

use crate::{config, prompts, register};

#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("cannot read the target image {path}: {reason}")]
    Image { path: String, reason: String },
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Register(#[from] register::RegisterError),
    #[error(transparent)]
    Prompts(#[from] prompts::PromptError),
    #[error("FreeCAD: {0}")]
    Bridge(#[from] BridgeError),
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("cannot resume from {path}: {reason}")]
    Resume { path: String, reason: String },
    #[error("retrieval (RAG): {0}")]
    Rag(String),
    #[error("cannot use the ground truth {path}: {reason}")]
    Truth { path: String, reason: String },
    #[error("cannot run {program}: {source}")]
    Process { program: String, source: std::io::Error },
}

impl LoopError {
    /// An I/O failure on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> LoopError {
        LoopError::Io { path: path.display().to_string(), source }
    }
}
