//! The VLM behind one trait: every backend gets the request a real model would get.
//!
//! A [`Request`] carries the stage's text, the images (PNG files the harness drew), the JSON
//! Schema of the answer, and [`Context`]: the geometry behind what the request shows (the
//! entity table, the sketch view's maps, the preview's state). A real model reads that from
//! the text and the pictures; the oracle reads it directly. No backend sees the harness's
//! ground truth: only the oracle and the scripted backend hold answers of their own.

mod backend;
mod cache;
mod embeddings;
pub mod mock;
mod openai;
mod oracle;
mod scripted;
mod settings;
mod shadow;
mod sim;

use std::path::PathBuf;

use freecad_bridge::{Command, ModelState};
use serde::{Deserialize, Serialize};
use views::SketchMeta;

use crate::config::Ablations;

pub use backend::{BackendError, BackendKind, BackendSpec};
pub use embeddings::{HttpEmbedder, state_text};
pub use openai::ChatClient;
pub use oracle::{GroundTruth, Oracle};
pub use scripted::Scripted;
pub use settings::{ApiKey, CacheMode, Price, ResponseFormat, VlmSettings};
pub use shadow::Shadowed;
pub use sim::{Sim, SimRates};

/// The three stages of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Choose the next operation and its references.
    Stage1,
    /// Draw one sketch in view coordinates.
    Stage2,
    /// Accept or reject the preview.
    Stage3,
    /// The direct-code baseline: the whole part as one FreeCAD script, in one call.
    DirectCode,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Stage1 => "stage1",
            Stage::Stage2 => "stage2",
            Stage::Stage3 => "stage3",
            Stage::DirectCode => "direct_code",
        }
    }
}

/// One call to the model.
#[derive(Debug, Clone)]
pub struct Request {
    pub stage: Stage,
    pub system: String,
    pub text: String,
    /// PNG files, in the order the text refers to them.
    pub images: Vec<PathBuf>,
    /// The JSON Schema the answer must satisfy.
    pub schema: serde_json::Value,
    pub context: Context,
}

/// The registration sphere S_t in model space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sphere {
    pub center: [f64; 3],
    pub radius: f64,
}

/// What the harness drew for this request, as data (the default: an empty model).
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Accepted operations so far (END excluded).
    pub steps_done: usize,
    /// Steps set aside so far (no candidate got through): the loop is at step
    /// `steps_done + steps_skipped + 1`.
    pub steps_skipped: usize,
    /// Accepted commands so far.
    pub history: Vec<Command>,
    /// The model the views show.
    pub state: ModelState,
    pub ablations: Ablations,
    /// S_t (under no-Reg: the nominal sphere at the origin, not shown to the model).
    pub sphere: Sphere,
    /// The direction the target is seen from (the prompts state it).
    pub direction: [f64; 3],
    /// Stage 2 and 3: Stage 1's plan for this step.
    pub plan: Option<crate::stage1::Plan>,
    /// Stage 2: the sketch being drawn and its view's exact maps.
    pub sketch: Option<SketchRequest>,
    /// Stage 3: the model the candidate would produce.
    pub preview: Option<ModelState>,
}

impl Context {
    /// Steps the loop has finished, accepted or set aside: each is one of the ground truth's
    /// for the oracle (a step set aside is a feature the answers could not build).
    pub fn loop_steps(&self) -> usize {
        self.steps_done + self.steps_skipped
    }
}

#[derive(Debug, Clone)]
pub struct SketchRequest {
    pub name: String,
    /// The support as the harness resolved it (an ID, a base plane or a plane name).
    pub on: String,
    pub meta: SketchMeta,
}

/// Tokens a backend reports for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// In the configured currency, when a price is known.
    pub cost: Option<f64>,
}

/// The model's answer: raw text that the harness parses and validates.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub text: String,
    pub usage: Option<Usage>,
    /// Answered from the response cache: nothing was paid for it.
    pub cached: bool,
    /// The simulated model's injected errors (written to the trace; never read by the
    /// harness's mechanisms).
    pub injected: Vec<serde_json::Value>,
    /// Where a shadow oracle's answer differs from the model's (`--shadow-gt`; written to
    /// the trace, never read by the harness's mechanisms).
    pub observed: Vec<serde_json::Value>,
}

/// A backend could not answer at all (as opposed to answering badly).
#[derive(Debug, thiserror::Error)]
pub enum VlmError {
    #[error("the {backend} backend has no answer: {reason}")]
    NoAnswer { backend: String, reason: String },
    #[error("the {backend} backend failed: {reason}")]
    Failed { backend: String, reason: String },
}

/// A vision-language model, or something that answers like one.
pub trait Vlm {
    /// A short name for traces and reports (`oracle`, `scripted`, a model name).
    fn name(&self) -> String;
    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError>;
}
