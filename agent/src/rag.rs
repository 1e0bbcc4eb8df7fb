//! RAG: Stage 1 shows up to `rag_k` modeling steps of other parts that resemble the current
//! situation, retrieved from a GERD-RET index (`vision2cad gerd index`, or the default index
//! `vision2cad gerd default-index` builds).
//!
//! The target image is embedded once per run; the state before each step is embedded when
//! Stage 1 is asked. The index never sees this run's ground truth: it holds other parts. A
//! hit is shown only when its score reaches `rag_min_score`: below it, an example's next
//! operation is no likelier to be the right one than a guess (docs/evaluation.md), and it
//! would cost an image and its text in every request.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use freecad_bridge::{Command, ModelState};
use gerd::retrieve::embed::{Builtin, Embedder, operation_key};
use gerd::retrieve::{EF_SEARCH, Example, Hit, RetrievalIndex};
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
    min_score: f32,
}

impl std::fmt::Debug for Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retriever")
            .field("path", &self.path)
            .field("embedder", &self.embedder.id())
            .finish_non_exhaustive()
    }
}

/// What one retrieval gave: the examples to show, best first, and the hits left out for a
/// score below the threshold.
#[derive(Debug, Default)]
pub struct Retrieved {
    pub examples: Vec<Example>,
    pub below_threshold: Vec<Hit>,
}

impl Retriever {
    /// Load the index and embed the target with `embedder` (the built-in one when `None`).
    /// A missing index, or one built by another embedder, is an error.
    pub fn open(
        path: &Path,
        target: &RgbImage,
        k: usize,
        min_score: f64,
        embedder: Option<Box<dyn Embedder>>,
    ) -> Result<Retriever, LoopError> {
        let mut embedder = embedder.unwrap_or_else(|| Box::new(Builtin));
        let index = RetrievalIndex::load(path, &embedder.id()).map_err(|e| LoopError::Rag(e.to_string()))?;
        let target = embedder.embed_image(target).map_err(|e| failed(path, e))?;
        Ok(Retriever { path: path.to_path_buf(), index, embedder, target, k, min_score: min_score as f32 })
    }

    /// The index's folder and what it holds, for the trace: `PATH (N parts, M steps)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({} parts, {} steps)",
            self.path.display(),
            self.index.meta.dataset.parts,
            self.index.entries().len()
        )
    }

    /// The examples for the model in `state` after `history`, best first, one per part; hits
    /// scoring below the threshold are returned apart.
    pub fn examples(&mut self, state: &ModelState, history: &[Command]) -> Result<Retrieved, LoopError> {
        let state = self.embedder.embed_state(state, history).map_err(|e| failed(&self.path, e))?;
        let query = self.index.query_vector(self.target.clone(), state).map_err(|e| failed(&self.path, e))?;
        let (shown, below): (Vec<Hit>, Vec<Hit>) =
            self.index.search(&query, self.k, EF_SEARCH).into_iter().partition(|h| h.score >= self.min_score);
        let examples = shown
            .iter()
            .map(|hit| self.index.example(hit).map_err(|e| LoopError::Rag(e.to_string())))
            .collect::<Result<_, _>>()?;
        Ok(Retrieved { examples, below_threshold: below })
    }
}

/// The examples as Stage 1's text; `first_image` is the number the first example's view
/// gets among the request's images (those without a view are described only). Each says
/// why it is shown: its two similarities, and what its situation shares with the current
/// one (`state` after `history`).
pub fn prompt_text(examples: &[Example], first_image: usize, state: &ModelState, history: &[Command]) -> String {
    let mut text = String::new();
    let mut image = first_image;
    for (n, example) in examples.iter().enumerate() {
        let e = &example.entry;
        let picture = if example.image.is_some() {
            image += 1;
            format!(" Image {}: that part's model before the step, with its own IDs (not this model's).", image - 1)
        } else {
            String::new()
        };
        let sketches: Vec<serde_json::Value> =
            e.sketches.iter().map(|s| serde_json::json!({"name": s.name, "on": s.on})).collect();
        let answer = serde_json::json!({"sketches": sketches, "command": e.command});
        text.push_str(&format!(
            "{}. {} (similarity {:.2}).{picture}\n   Shown because: {}.\n   `{}`\n",
            n + 1,
            e.description,
            example.hit.score,
            why(example, state, history),
            answer
        ));
    }
    text.trim_end().to_string()
}

/// Why an example is shown: how alike the pictures and the models are, and what the two
/// situations share (the operations so far, the kinds of faces) or where they differ, so a
/// reader does not take a high state similarity for the same shape (the built-in state
/// embedding scores a box and an L-section alike).
pub fn why(example: &Example, state: &ModelState, history: &[Command]) -> String {
    let mut reasons = vec![
        format!("its part looks like the target (image similarity {:.2})", example.hit.image_score),
        format!("its model before the step scores {:.2} against yours", example.hit.state_score),
    ];
    let (theirs, ours) = (operations(&example.history), operations(history));
    if theirs == ours {
        reasons.push(if ours.is_empty() {
            "both models are empty: it is a first feature".to_string()
        } else {
            format!("the same operations so far ({})", counted(&ours))
        });
    } else {
        reasons.push(format!(
            "other operations so far (its {}; yours {})",
            counted_or_none(&theirs),
            counted_or_none(&ours)
        ));
    }
    let (their_faces, our_faces) = (face_kinds(&example.before), face_kinds(state));
    if !our_faces.is_empty() || !their_faces.is_empty() {
        reasons.push(if their_faces == our_faces {
            format!("the same faces ({})", counted(&our_faces))
        } else {
            format!("other faces (its {}; yours {})", counted_or_none(&their_faces), counted_or_none(&our_faces))
        });
    }
    let last = reasons.pop().unwrap_or_default();
    format!("{}; {last}", reasons.join("; "))
}

/// Operations (not sketches) by kind, counted.
fn operations(history: &[Command]) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for c in history.iter().filter(|c| !matches!(c, Command::Sketch(_) | Command::Body(_) | Command::End)) {
        *out.entry(operation_key(c)).or_default() += 1;
    }
    out
}

fn face_kinds(state: &ModelState) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for f in &state.faces {
        *out.entry(f.kind.adjective().unwrap_or("free-form")).or_default() += 1;
    }
    out
}

fn counted(map: &BTreeMap<&str, usize>) -> String {
    map.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
}

fn counted_or_none(map: &BTreeMap<&str, usize>) -> String {
    if map.is_empty() { "none".into() } else { counted(map) }
}

/// Input tokens of one PNG image as the common vision APIs bill a high-detail image: 85,
/// plus 170 per 512-pixel tile after scaling to fit 2048 px and then to 768 px on the short
/// side (765 when the file cannot be read). The relay (`relay_vlm.py`) counts the same way.
pub fn image_tokens(path: &Path) -> usize {
    let Ok((w, h)) = image::image_dimensions(path) else { return 765 };
    let (mut w, mut h) = (w as f64, h as f64);
    let s = (2048.0 / w.max(h)).min(1.0);
    (w, h) = (w * s, h * s);
    let s = (768.0 / w.min(h)).min(1.0);
    (w, h) = (w * s, h * s);
    85 + 170 * (w / 512.0).ceil() as usize * (h / 512.0).ceil() as usize
}

/// Input tokens text costs, at four characters a token (no tokenizer is at hand; the relay
/// estimates the same way).
pub fn text_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The tokens retrieval adds to one Stage 1 request: its text and its images.
pub fn added_tokens(text: &str, examples: &[Example]) -> usize {
    text_tokens(text) + examples.iter().filter_map(|e| e.image.as_deref()).map(image_tokens).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(kinds: &[&str]) -> ModelState {
        let mut state = ModelState::empty();
        state.empty = kinds.is_empty();
        state.faces = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| {
                serde_json::from_value(serde_json::json!({"id": format!("F{}", i + 1), "kind": k, "area": 1.0,
                    "centroid": [0.0, 0.0, 0.0], "edges": []}))
                .expect("a face")
            })
            .collect();
        state
    }

    fn example(before: ModelState, history: Vec<Command>) -> Example {
        let command: Command = serde_json::from_value(serde_json::json!(
            {"op": "extrude", "profile": "S2", "mode": "cut", "extent": {"type": "through_all"}}))
        .expect("a cut");
        let hit = Hit { part: "p".into(), step: 3, score: 0.93, image_score: 0.91, state_score: 0.96, entry: 0 };
        let entry = gerd::retrieve::Entry {
            part: "p".into(),
            step: 3,
            source: "test".into(),
            op: "extrude_cut".into(),
            command,
            sketches: Vec::new(),
            description: "extrude cut".into(),
            tagged_view: None,
        };
        Example { hit, entry, image: None, before, history }
    }

    #[test]
    fn an_example_says_what_it_shares_with_the_current_model_and_where_it_differs() {
        let pad: Command = serde_json::from_value(serde_json::json!(
            {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 5}}))
        .expect("a pad");
        let box_faces = ["plane"; 6];
        let history = vec![pad.clone()];
        let same = example(state(&box_faces), history.clone());
        let text = why(&same, &state(&box_faces), &history);
        assert_eq!(
            text,
            "its part looks like the target (image similarity 0.91); its model before the step scores 0.96 \
             against yours; the same operations so far (1 extrude_add); the same faces (6 planar)"
        );
        // An L-section after two pads: the differences are named, not hidden by the score.
        let l_faces = ["plane"; 8];
        let text = why(&same, &state(&l_faces), &[pad.clone(), pad]);
        assert!(text.ends_with("other operations so far (its 1 extrude_add; yours 2 extrude_add); other faces (its 6 planar; yours 8 planar)"), "{text}");
        let first = example(ModelState::empty(), Vec::new());
        assert!(why(&first, &ModelState::empty(), &[]).ends_with("both models are empty: it is a first feature"));
    }

    #[test]
    fn image_tokens_count_tiles_as_the_vision_apis_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let png = |w: u32, h: u32| {
            let path = dir.path().join(format!("{w}x{h}.png"));
            image::RgbImage::new(w, h).save(&path).expect("png written");
            image_tokens(&path)
        };
        assert_eq!(png(500, 500), 255, "one tile");
        assert_eq!(png(1000, 1000), 85 + 170 * 4, "scaled to 768, two by two tiles");
        assert_eq!(png(2012, 500), 85 + 170 * 4, "a strip: 2012 x 500 needs four tiles across");
        assert_eq!(image_tokens(&dir.path().join("missing.png")), 765);
        assert_eq!(text_tokens("abcdefghi"), 3);
    }
}
