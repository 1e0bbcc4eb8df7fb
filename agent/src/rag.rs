//! RAG: Stage 1 shows up to `rag_k` modeling steps of other parts that resemble the current
//! situation, retrieved from a GERD-RET index (`vision2cad gerd index`).
//!
//! The target image is embedded once per run; the state before each step is embedded when
//! Stage 1 is asked. The index never sees this run's ground truth: it holds other parts.

use std::path::{Path, PathBuf};

use freecad_bridge::{Command, ModelState};
use gerd::retrieve::embed::{Builtin, Embedder};
use gerd::retrieve::{EF_SEARCH, Example, RetrievalIndex};
use image::RgbImage;

use crate::LoopError;

fn failed(index: &Path, reason: impl std::fmt::Display) -> LoopError {
    LoopError::Rag(format!("{}: {reason}", index.display()))
}

pub struct Retriever {
    path: PathBuf,
    index: RetrievalIndex,
    embedder: Box<dyn Embedder>,
    target: Vec<f32>,
    k: usize,
}

impl std::fmt::Debug for Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retriever")
            .field("path", &self.path)
            .field("embedder", &self.embedder.id())
            .finish_non_exhaustive()
    }
}

impl Retriever {
    /// Load the index and embed the target with `embedder` (the built-in one when `None`).
    /// A missing index, or one built by another embedder, is an error.
    pub fn open(
        path: &Path,
        target: &RgbImage,
        k: usize,
        embedder: Option<Box<dyn Embedder>>,
    ) -> Result<Retriever, LoopError> {
        let mut embedder = embedder.unwrap_or_else(|| Box::new(Builtin));
        let index = RetrievalIndex::load(path, &embedder.id()).map_err(|e| LoopError::Rag(e.to_string()))?;
        let target = embedder.embed_image(target).map_err(|e| failed(path, e))?;
        Ok(Retriever { path: path.to_path_buf(), index, embedder, target, k })
    }

    /// The examples for the model in `state` after `history`, best first, one per part.
    pub fn examples(&mut self, state: &ModelState, history: &[Command]) -> Result<Vec<Example>, LoopError> {
        let state = self.embedder.embed_state(state, history).map_err(|e| failed(&self.path, e))?;
        let query = self.index.query_vector(self.target.clone(), state).map_err(|e| failed(&self.path, e))?;
        self.index
            .search(&query, self.k, EF_SEARCH)
            .iter()
            .map(|hit| self.index.example(hit).map_err(|e| LoopError::Rag(e.to_string())))
            .collect()
    }
}

/// The examples as Stage 1's text; `first_image` is the number the first example's view
/// gets among the request's images (those without a view are described only).
pub fn prompt_text(examples: &[Example], first_image: usize) -> String {
    let mut text = String::new();
    let mut image = first_image;
    for (n, example) in examples.iter().enumerate() {
        let e = &example.entry;
        let picture = if example.image.is_some() {
            image += 1;
            format!(" Image {}: the model before the step.", image - 1)
        } else {
            String::new()
        };
        let sketches: Vec<serde_json::Value> =
            e.sketches.iter().map(|s| serde_json::json!({"name": s.name, "on": s.on})).collect();
        let answer = serde_json::json!({"sketches": sketches, "command": e.command});
        text.push_str(&format!(
            "{}. {} (similarity {:.2}).{picture}\n   `{}`\n",
            n + 1,
            e.description,
            example.hit.score,
            answer
        ));
    }
    text.trim_end().to_string()
}
