//! Errors of an evaluation run. A bad prediction is never one of them: it becomes a sample
//! that did not compile, with its reason. What stops a run is a problem with the ground
//! truth, the inputs as a whole, or the FreeCAD workers.

use std::path::PathBuf;

use freecad_bridge::BridgeError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EvalError {
    /// The ground truth named on the command line, or paired by stem, is not there.
    #[error("ground truth {} does not exist", path.display())]
    MissingGroundTruth { path: PathBuf },
    /// The ground truth exists but cannot be built, measured or edited.
    #[error("ground truth {}: {reason}", path.display())]
    GroundTruth { path: PathBuf, reason: String },
    /// `edit10` edits the ground truth's extrusion depths, which a STEP file does not have.
    #[error(
        "the edit10 protocol needs a ground truth with extrusion parameters (a program .json or a .FCStd \
         document); {} is a STEP file",
        path.display()
    )]
    GroundTruthNotEditable { path: PathBuf },
    /// The prediction named on the command line is not there.
    #[error("prediction {} does not exist", path.display())]
    MissingPrediction { path: PathBuf },
    /// The prediction and ground-truth arguments do not pair up.
    #[error("{0}")]
    Pairing(String),
    /// A directory or temporary file could not be read or written.
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// The FreeCAD workers could not be started or kept running.
    #[error("FreeCAD: {0}")]
    Bridge(#[from] BridgeError),
}
