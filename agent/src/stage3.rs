//! Stage 3: the model judges the rendered preview of the candidate (EVf).

use serde::{Deserialize, Serialize};

/// Stage 3's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub verdict: Decision,
    #[serde(default)]
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accept,
    Reject,
}

impl Verdict {
    pub fn accepted(&self) -> bool {
        self.verdict == Decision::Accept
    }
}

/// One line summarising a model state for the Stage 3 prompt.
pub fn summary(state: &freecad_bridge::ModelState) -> String {
    if state.empty {
        return "empty".into();
    }
    let bbox = state.bbox.map_or_else(String::new, |b| {
        format!(
            ", box ({:.2}, {:.2}, {:.2}) to ({:.2}, {:.2}, {:.2})",
            b.min[0], b.min[1], b.min[2], b.max[0], b.max[1], b.max[2]
        )
    });
    format!(
        "volume {:.3} mm3, {} faces, {} edges{bbox}{}",
        state.volume,
        state.faces.len(),
        state.edges.len(),
        if state.valid { "" } else { ", not a valid solid" }
    )
}
