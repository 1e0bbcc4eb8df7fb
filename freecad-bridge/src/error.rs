//! Errors of the bridge.

use thiserror::Error;

use crate::protocol::RefusalKind;

/// What went wrong with one call to a worker.
#[derive(Debug, Error)]
pub enum CallError {
    #[error("cannot start a FreeCAD worker: {0}")]
    Spawn(String),
    #[error("the FreeCAD worker crashed during {during} ({status}){}", tail_suffix(.stderr_tail))]
    Crashed { during: String, status: String, stderr_tail: String },
    #[error("the FreeCAD worker took longer than {seconds:.1} s for {during} and was stopped")]
    Timeout { during: String, seconds: f64 },
    #[error("FreeCAD refused: {reason}")]
    Rejected { reason: String, entity: Option<String>, kind: RefusalKind },
    #[error("worker protocol error: {0}")]
    Protocol(String),
}

fn tail_suffix(tail: &str) -> String {
    if tail.trim().is_empty() { String::new() } else { format!("; its last output:\n{tail}") }
}

/// An error of the bridge, as a caller sees it.
#[derive(Debug, Error)]
pub enum BridgeError {
    /// A command was refused (by validation or by FreeCAD); the document is unchanged.
    #[error("{op} failed{}: {reason}", entity.as_ref().map(|e| format!(" at {e}")).unwrap_or_default())]
    Command { op: String, entity: Option<String>, reason: String, kind: RefusalKind },
    /// A parameter edit was refused; the previous values are restored.
    #[error("parameter edit failed: {reason}")]
    Parameters { reason: String },
    /// A model file could not be read.
    #[error("cannot load {path}: {reason}")]
    Load { path: String, reason: String },
    /// Writing a file failed.
    #[error("cannot save {path}: {reason}")]
    Save { path: String, reason: String },
    /// The worker crashed or hung during this call. It has been replaced and the document
    /// rebuilt from the command log: only this call's effect is lost.
    #[error("{source}; the worker was replaced and the document rebuilt")]
    WorkerLost { source: CallError },
    /// The worker was lost and the document could not be rebuilt.
    #[error("{source}; rebuilding the document in a new worker failed: {rebuild}")]
    RebuildFailed { source: CallError, rebuild: Box<CallError> },
    /// The worker could not be started or spoke nonsense.
    #[error(transparent)]
    Worker(CallError),
    /// A batch item lost its worker on every attempt: the item itself crashes or hangs the
    /// kernel (as opposed to a fault of the machine, which a retry gets past).
    #[error("the item crashes the FreeCAD kernel: its worker was lost on each of {attempts} attempts (last: {last})")]
    KernelFault { attempts: usize, last: String },
}
