//! Choosing and opening a backend: what `reconstruct --vlm ...` does, for any program
//! built on the crate. The model server is checked (key, cache, URL) before FreeCAD
//! starts; the oracle and the simulated VLM load their ground truth with the session.
//!
//! ```no_run
//! use vision2cad::vlm::{BackendKind, BackendSpec};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = vision2cad::Config::default();
//! let spec = BackendSpec { gt: Some("assets/programs/plate_counterbore.json".into()), ..BackendSpec::new(BackendKind::Oracle) };
//! let client = spec.connect(&config.vlm)?; // None: the oracle needs no server
//! let mut session = freecad_bridge::Session::new(freecad_bridge::WorkerConfig::new("vision2cad"))?;
//! let vlm = spec.open(&config, client, &mut session)?;
//! assert_eq!(vlm.name(), "oracle");
//! # Ok(())
//! # }
//! ```

use std::path::PathBuf;

use freecad_bridge::Session;

use super::{ApiKey, ChatClient, GroundTruth, Oracle, Scripted, Shadowed, Sim, Vlm, VlmError, VlmSettings};
use crate::config::Config;

/// The backends of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// A perfect model for a part whose program is known (needs --gt).
    Oracle,
    /// Replay a file of stage answers (needs --script).
    Scripted,
    /// A model server that speaks OpenAI's chat completions (OpenAI, OpenRouter, vLLM,
    /// Ollama, llama.cpp): key and URL from the environment, the rest from [vlm] in --config.
    Openai,
    /// The oracle with an error model (needs --gt): rates from [sim] in --config and
    /// --sim KEY=VALUE, seeded by --seed.
    Sim,
}

/// Everything a backend is opened from, resolved (flags, environment and configuration
/// already merged by the caller).
#[derive(Debug, Clone)]
pub struct BackendSpec {
    pub kind: BackendKind,
    /// The oracle's and the simulated VLM's ground truth: a GERD part folder or a program.
    pub gt: Option<PathBuf>,
    /// The scripted backend's answers.
    pub script: Option<PathBuf>,
    /// Calibration: an oracle for this ground truth shadows the model (`--shadow-gt`).
    pub shadow_gt: Option<PathBuf>,
    /// The model server's base URL; the `[vlm]` table's, else OpenAI's, when unset.
    pub base_url: Option<String>,
    pub api_key: Option<ApiKey>,
    /// A limit on requests in flight shared with other processes: `(count, folder)`.
    pub slots: Option<(usize, PathBuf)>,
}

/// A backend that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(
        "--vlm oracle and --vlm sim need --gt: a GERD part folder or a program .json (a real image needs a real model server)"
    )]
    NoGroundTruth,
    #[error("--vlm scripted needs --script FILE")]
    NoScript,
    #[error(
        "the direct-code baseline needs a model that writes code (--vlm openai, or scripted); the oracle only answers the loop's stages"
    )]
    NotACodeWriter,
    #[error("{0}")]
    GroundTruth(String),
    #[error(transparent)]
    Vlm(#[from] VlmError),
}

impl BackendSpec {
    pub fn new(kind: BackendKind) -> BackendSpec {
        BackendSpec { kind, gt: None, script: None, shadow_gt: None, base_url: None, api_key: None, slots: None }
    }

    /// The model server's client (`openai` only), set up before anything else starts.
    pub fn connect(&self, settings: &VlmSettings) -> Result<Option<ChatClient>, BackendError> {
        if self.kind != BackendKind::Openai {
            return Ok(None);
        }
        self.chat_client(settings).map(Some)
    }

    fn chat_client(&self, settings: &VlmSettings) -> Result<ChatClient, BackendError> {
        let base_url = self
            .base_url
            .clone()
            .or_else(|| settings.base_url.clone())
            .unwrap_or_else(|| VlmSettings::DEFAULT_BASE_URL.to_string());
        let client = ChatClient::new(settings.clone(), base_url, self.api_key.clone())?;
        if let Some((count, dir)) = &self.slots {
            client.limit_across_processes(dir.clone(), *count)?;
        }
        Ok(client)
    }

    /// The loop's backend; `client` is what [`Self::connect`] returned.
    pub fn open(
        &self,
        config: &Config,
        client: Option<ChatClient>,
        session: &mut Session,
    ) -> Result<Box<dyn Vlm>, BackendError> {
        let mut vlm: Box<dyn Vlm> = match self.kind {
            BackendKind::Openai => Box::new(client.map_or_else(|| self.chat_client(&config.vlm), Ok)?),
            BackendKind::Oracle | BackendKind::Sim => {
                let gt = self.gt.as_ref().ok_or(BackendError::NoGroundTruth)?;
                let truth = GroundTruth::load(gt, session).map_err(BackendError::GroundTruth)?;
                if self.kind == BackendKind::Sim {
                    Box::new(Sim::new(Oracle::new(truth), config.sim))
                } else {
                    Box::new(Oracle::new(truth))
                }
            }
            BackendKind::Scripted => Box::new(self.scripted()?),
        };
        if let Some(gt) = &self.shadow_gt {
            let truth = GroundTruth::load(gt, session).map_err(BackendError::GroundTruth)?;
            vlm = Box::new(Shadowed::new(vlm, Oracle::new(truth)));
        }
        Ok(vlm)
    }

    /// The direct-code baseline's backend: a model that writes code.
    pub fn open_code_writer(&self, settings: &VlmSettings) -> Result<Box<dyn Vlm>, BackendError> {
        match self.kind {
            BackendKind::Openai => Ok(Box::new(self.chat_client(settings)?)),
            BackendKind::Scripted => Ok(Box::new(self.scripted()?)),
            BackendKind::Oracle | BackendKind::Sim => Err(BackendError::NotACodeWriter),
        }
    }

    fn scripted(&self) -> Result<Scripted, BackendError> {
        Ok(Scripted::from_file(self.script.as_ref().ok_or(BackendError::NoScript)?)?)
    }
}
