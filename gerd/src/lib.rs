//! # gerd
//!
//! GERD (Geometry Explicit Reference Dataset): every modeling step of a part with its
//! command, the entity IDs it references (with geometric signatures), the entity table
//! before and after, tagged views, and the finished part before and after the 10% edit.
//! The loop retrieves examples from it, evaluation runs on it, and users train on it.
//!
//! - [`record`]: the `gerd-2` record format (`gerd/FORMAT.md`) and its writer;
//! - [`generate`]: seeded procedural part families that use every operation;
//! - [`validate`]: re-execute records and compare with their stored STEP;
//! - [`export`]: training samples (next command, entity selection) as JSONL or LLaVA;
//! - [`retrieve`]: GERD-RET, similar steps from an HNSW index for the loop's Stage 1.
//!
//! ```no_run
//! use freecad_bridge::{Session, WorkerConfig};
//! use gerd::record::{RecordOptions, Split};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
//! let part = gerd::generate::generate(&mut session, 7, 0, Split::Train)?;
//! let record = gerd::record::write_part(&mut session, &part, "gerd-out".as_ref(), &RecordOptions::default())?;
//! println!("{}: {} steps", record.id, record.steps.len());
//! # Ok(())
//! # }
//! ```

mod error;
pub mod export;
pub mod generate;
pub mod import;
pub mod record;
pub mod retrieve;
pub mod validate;

pub use error::GerdError;
