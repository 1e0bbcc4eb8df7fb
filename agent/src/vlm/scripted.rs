//! A backend that replays a file of answers, one per stage call, for tests and for
//! re-running a recorded session.
//!
//! The file is JSON lines: `{"stage": "stage1", "answer": {...}}` (an answer as JSON) or
//! `{"stage": "stage2", "text": "..."}` (raw text, to replay malformed answers).

use std::path::Path;

use serde::Deserialize;

use super::{Reply, Request, Stage, Vlm, VlmError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    stage: Stage,
    #[serde(default)]
    answer: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<String>,
}

/// Replays answers in order; a call for another stage than the next answer's is an error.
#[derive(Debug)]
pub struct Scripted {
    answers: Vec<(Stage, String)>,
    next: usize,
}

impl Scripted {
    pub fn from_file(path: &Path) -> Result<Scripted, VlmError> {
        let fail = |reason: String| VlmError::Failed { backend: "scripted".into(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        let mut answers = Vec::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let parsed: Line =
                serde_json::from_str(line).map_err(|e| fail(format!("{} line {}: {e}", path.display(), n + 1)))?;
            let body = match (parsed.answer, parsed.text) {
                (Some(a), None) => a.to_string(),
                (None, Some(t)) => t,
                _ => return Err(fail(format!("{} line {}: give exactly one of answer, text", path.display(), n + 1))),
            };
            answers.push((parsed.stage, body));
        }
        Ok(Scripted { answers, next: 0 })
    }
}

impl Vlm for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError> {
        let Some((stage, text)) = self.answers.get(self.next) else {
            return Err(VlmError::NoAnswer {
                backend: "scripted".into(),
                reason: format!("the script ran out of answers at a {} call", request.stage.name()),
            });
        };
        if *stage != request.stage {
            return Err(VlmError::NoAnswer {
                backend: "scripted".into(),
                reason: format!(
                    "answer {} of the script is for {}, but the harness asked {}",
                    self.next + 1,
                    stage.name(),
                    request.stage.name()
                ),
            });
        }
        self.next += 1;
        Ok(Reply { text: text.clone(), usage: None, cached: false, injected: Vec::new(), observed: Vec::new() })
    }
}
