//! Errors of dataset work.

use std::path::Path;

use freecad_bridge::BridgeError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GerdError {
    #[error("{part}: step {index} failed: {error}")]
    Step { part: String, index: usize, error: BridgeError },
    #[error("{part}: the 10% edit of every extrusion depth failed: {error}")]
    Ex10p { part: String, error: BridgeError },
    #[error("{part}: {error}")]
    Bridge { part: String, error: BridgeError },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{0}")]
    Record(String),
}

impl GerdError {
    pub fn io(path: &Path, error: std::io::Error) -> GerdError {
        GerdError::Io { path: path.display().to_string(), message: error.to_string() }
    }

    pub fn bridge(part: &str, error: BridgeError) -> GerdError {
        GerdError::Bridge { part: part.to_string(), error }
    }
}
