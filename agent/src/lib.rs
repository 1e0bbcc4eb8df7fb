//! # vision2cad
//!
//! One image of a mechanical part in, a parametric FreeCAD model out, built step by step by
//! a vision-language model in the three-stage loop of the method:
//!
//! - [`Reconstruction`] ([`engine`]): a configuration checked once, run on images; the
//!   engine sequences steps, attempts and stages, and sends [`events`] to the trace;
//! - [`register`]: find the part in the target image, fit S_t and the camera (Reg);
//! - [`stage1`]: the next operation and its references, by ID (EGR) or by [`selectors`];
//! - [`stage2`]: sketches in view coordinates, mapped by [`lcb`] into the plane's frame and
//!   tied to projected geometry by [`pgr`];
//! - [`stage3`]: the preview, accepted or rejected with reasons (EVf);
//! - [`revise`]: an accepted command's numbers corrected at their source, the model rebuilt;
//! - [`vlm`]: the model behind one trait (the oracle, the simulated VLM, a model server);
//! - [`prompts`]: the templates in `prompts/`; [`report`]: the model files and the HTML report;
//! - [`direct_code`]: the one-shot code baseline; [`stage_export`]: per-stage training data.
//!
//! ```no_run
//! use freecad_bridge::{Session, WorkerConfig};
//! use vision2cad::{Config, Reconstruction, vlm::{GroundTruth, Oracle}};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
//! let gt = GroundTruth::load("assets/programs/plate_counterbore.json".as_ref(), &mut session)?;
//! let mut oracle = Oracle::new(gt);
//! let outcome = Reconstruction::new(Config::default())?
//!     .run("assets/examples/plate_counterbore.png".as_ref(), "out/plate".as_ref(), &mut oracle, &mut session)?;
//! println!("{} steps, finished: {}", outcome.steps, outcome.finished);
//! # Ok(())
//! # }
//! ```

pub mod batch;
mod candidate;
pub mod config;
pub mod direct_code;
pub mod engine;
mod engine_fit;
mod engine_replay;
pub mod error;
pub mod events;
pub mod fit;
pub mod lcb;
pub mod pgr;
pub mod prompts;
pub mod rag;
pub mod register;
pub mod report;
pub mod revise;
pub mod selectors;
pub mod stage1;
pub mod stage2;
pub mod stage3;
pub mod stage_export;
pub mod vlm;

pub use config::{Ablations, Config, ConfigError};
pub use engine::{Outcome, Reconstruction, Timing};
pub use error::LoopError;
pub use events::{Sink, TraceEvent};

pub(crate) use engine::json_text;
