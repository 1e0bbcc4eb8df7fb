//! Training samples from GERD records: next-command prediction and entity selection, as
//! JSON lines (loads with the Hugging Face `datasets` JSON loader) or LLaVA conversations.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use freecad_bridge::ModelState;
use serde_json::{Value, json};

use crate::GerdError;
use crate::record::{PartRecord, Signature, Split, part_dirs, read_part};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Target image + tagged view + entity table -> the next command.
    NextCommand,
    /// Tagged view + a question naming a geometric role -> the entity ID.
    EntitySelection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Llava,
}

/// One training sample, format-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub id: String,
    /// The part the sample comes from.
    pub part: String,
    pub split: Split,
    /// Absolute paths, in the order the prompt mentions them.
    pub images: Vec<PathBuf>,
    pub prompt: String,
    pub answer: String,
}

/// Samples of every part in `root` (only `split` when given), in part and step order.
/// `keep` chooses parts by id (a shard's, for example).
pub fn samples(
    root: &Path,
    task: Task,
    split: Option<Split>,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<Sample>, GerdError> {
    let mut out = Vec::new();
    for dir in part_dirs(root)? {
        let record = read_part(&dir)?;
        if split.is_some_and(|s| s != record.split) || !keep(&record.id) {
            continue;
        }
        let dir = std::path::absolute(&dir).map_err(|e| GerdError::io(&dir, e))?;
        match task {
            Task::NextCommand => out.extend(next_command(&record, &dir)?),
            Task::EntitySelection => out.extend(entity_selection(&record, &dir)),
        }
    }
    Ok(out)
}

fn next_command(record: &PartRecord, dir: &Path) -> Result<Vec<Sample>, GerdError> {
    let mut out = Vec::new();
    let mut history: Vec<String> = Vec::new();
    for step in &record.steps {
        let command = serde_json::to_string(&step.command).map_err(|e| GerdError::Record(e.to_string()))?;
        let mut images = vec![dir.join(&record.files.target)];
        let mut prompt = String::from("Target part: <image>\n");
        match &step.tagged_view {
            Some(view) => {
                images.push(dir.join(view));
                prompt.push_str("Current model with entity IDs: <image>\n");
            }
            None => prompt.push_str("The current model is empty.\n"),
        }
        let before = &record.states[step.before];
        let _ = write!(prompt, "Entities:\n{}", entity_table(before));
        let _ = write!(
            prompt,
            "Commands so far:\n{}\n",
            if history.is_empty() { "none".into() } else { history.join("\n") }
        );
        prompt.push_str("Give the next command as JSON.");
        out.push(Sample {
            id: format!("{}-{:03}", record.id, step.index),
            part: record.id.clone(),
            split: record.split,
            images,
            prompt,
            answer: command.clone(),
        });
        history.push(command);
    }
    Ok(out)
}

fn entity_selection(record: &PartRecord, dir: &Path) -> Vec<Sample> {
    let mut out = Vec::new();
    for step in &record.steps {
        let Some(view) = &step.tagged_view else { continue };
        for (k, reference) in step.references.iter().enumerate() {
            let question = match describe(&reference.signature) {
                Some(q) => q,
                None => continue,
            };
            let purpose = match reference.role.as_str() {
                "support" => "the next sketch or plane goes on it".to_string(),
                "projected" => "the next sketch is tied to it".to_string(),
                "axis" => "the next revolve turns about it".to_string(),
                "path" => "the next sweep follows it".to_string(),
                _ => format!("the next step ({}) uses it", step.command.op()),
            };
            out.push(Sample {
                id: format!("{}-{:03}-{k}", record.id, step.index),
                part: record.id.clone(),
                split: record.split,
                images: vec![dir.join(view)],
                prompt: format!("<image>\n{question} ({purpose}) Answer with its ID."),
                answer: reference.id.clone(),
            });
        }
    }
    out
}

fn fmt3(v: [f64; 3]) -> String {
    let r = |x: f64| {
        let x = (x * 1000.0).round() / 1000.0;
        if x == 0.0 { 0.0 } else { x }
    };
    format!("({}, {}, {})", r(v[0]), r(v[1]), r(v[2]))
}

/// A question that names an entity by its geometry.
fn describe(signature: &Signature) -> Option<String> {
    Some(match signature {
        Signature::Face { kind, centroid, normal, radius, .. } => match (normal, radius) {
            (Some(n), _) => {
                format!("Which planar face has outward normal {} and centroid {}?", fmt3(*n), fmt3(*centroid))
            }
            (None, Some(r)) => {
                format!("Which {kind:?} face of radius {} has centroid {}?", round(*r), fmt3(*centroid)).to_lowercase()
            }
            _ => format!("Which {kind:?} face has centroid {}?", fmt3(*centroid)).to_lowercase(),
        },
        Signature::Edge { kind, start, end, center, radius, .. } => match (center, radius, start, end) {
            (Some(c), Some(r), _, _) => {
                format!("Which circular edge of radius {} is centred at {}?", round(*r), fmt3(*c))
            }
            (_, _, Some(a), Some(b)) => {
                format!("Which {kind:?} edge runs from {} to {}?", fmt3(*a), fmt3(*b)).to_lowercase()
            }
            _ => return None,
        },
        Signature::Vertex { point } => format!("Which vertex is at {}?", fmt3(*point)),
    })
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The entity table as text for a prompt: one line per face, edge and vertex.
pub fn entity_table(state: &ModelState) -> String {
    let mut t = String::new();
    if state.empty {
        return "(none)\n".into();
    }
    if state.bodies.len() > 1 {
        let bodies: Vec<String> =
            state.bodies.iter().map(|b| format!("{} ({} faces, {} solid)", b.id, b.faces.len(), b.solids)).collect();
        let _ = writeln!(t, "bodies: {}; active {}", bodies.join(", "), state.active_body.as_deref().unwrap_or("B1"));
    }
    for f in &state.faces {
        let _ = writeln!(t, "{} edges={}", face_text(f), f.edges.join(","));
    }
    for (e, seam) in state.edges.iter().zip(state.seams()) {
        let _ = writeln!(
            t,
            "{}{} vertices={}",
            edge_text(e),
            if seam { " seam (not drawn)" } else { "" },
            e.vertices.join(",")
        );
    }
    for v in &state.vertices {
        let _ = writeln!(t, "{} {}", v.id, fmt3(v.point));
    }
    t
}

/// One entity as the entity table describes it (without its neighbours): `F6 Plane
/// area=120 c=(0, 0, 7.65) n=(0, 0, 1)`; `None` for an ID the state does not have.
pub fn describe_entity(state: &ModelState, id: &str) -> Option<String> {
    if let Some(f) = state.faces.iter().find(|f| f.id == id) {
        return Some(face_text(f));
    }
    if let Some(e) = state.edges.iter().find(|e| e.id == id) {
        return Some(edge_text(e));
    }
    state.vertices.iter().find(|v| v.id == id).map(|v| format!("{} {}", v.id, fmt3(v.point)))
}

/// A face: kind, area, centroid, then what places it: the normal of a plane, the axis
/// (direction and a point on it) and radius of a cylinder, cone or torus.
fn face_text(f: &freecad_bridge::state::Face) -> String {
    let mut t = format!("{} {:?} area={} c={}", f.id, f.kind, round(f.area), fmt3(f.centroid));
    if let Some(n) = f.normal {
        let _ = write!(t, " n={}", fmt3(n));
    }
    if let (Some(axis), Some(center)) = (f.axis, f.center) {
        let _ = write!(t, " axis={} through {}", fmt3(axis), fmt3(center));
    }
    if let Some(r) = f.radius {
        let _ = write!(t, " r={}", round(r));
    }
    t
}

fn edge_text(e: &freecad_bridge::state::Edge) -> String {
    let mut t = format!("{} {:?}", e.id, e.kind);
    match (e.center, e.radius, e.start, e.end) {
        (Some(c), Some(r), _, _) => {
            let _ = write!(t, " center={} r={}", fmt3(c), round(r));
        }
        (_, _, Some(a), Some(b)) => {
            let _ = write!(t, " {} -> {}", fmt3(a), fmt3(b));
        }
        _ => {}
    }
    t
}

/// Write samples to `out` in `format`.
pub fn write(samples: &[Sample], format: Format, out: &Path) -> Result<(), GerdError> {
    let text = match format {
        Format::Jsonl => {
            let mut text = String::new();
            for s in samples {
                let images: Vec<String> = s.images.iter().map(|p| p.display().to_string()).collect();
                let line = json!({"id": s.id, "part": s.part, "split": s.split.name(), "images": images, "prompt": s.prompt, "answer": s.answer});
                text.push_str(&line.to_string());
                text.push('\n');
            }
            text
        }
        Format::Llava => {
            let items: Vec<Value> = samples
                .iter()
                .map(|s| {
                    let images: Vec<String> = s.images.iter().map(|p| p.display().to_string()).collect();
                    let image = if images.len() == 1 { json!(images[0]) } else { json!(images) };
                    json!({
                        "id": s.id,
                        "part": s.part,
                        "split": s.split.name(),
                        "image": image,
                        "conversations": [
                            {"from": "human", "value": s.prompt},
                            {"from": "gpt", "value": s.answer},
                        ],
                    })
                })
                .collect();
            serde_json::to_string_pretty(&items).map_err(|e| GerdError::Record(e.to_string()))?
        }
    };
    let tmp = out.with_extension("partial");
    std::fs::write(&tmp, text).map_err(|e| GerdError::io(&tmp, e))?;
    std::fs::rename(&tmp, out).map_err(|e| GerdError::io(out, e))
}
