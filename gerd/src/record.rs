//! The GERD record format (`gerd-2`, see `gerd/FORMAT.md`) and its writer.

use std::path::{Path, PathBuf};

use freecad_bridge::command::Reference;
use freecad_bridge::state::{BoundingBox, EdgeKind, FaceKind};
use freecad_bridge::{Command, ModelState, Program, Session};
use serde::{Deserialize, Serialize};

use crate::GerdError;

pub const FORMAT: &str = "gerd-2";

/// Earlier versions every reader still accepts: each `gerd-1` record reads the same as
/// `gerd-2` (one body, whose IDs carry no prefix).
pub const FORMATS_READ: [&str; 2] = ["gerd-1", FORMAT];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Train,
    Val,
    Test,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
        }
    }
}

/// One part: its program and every modeling step with the states around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartRecord {
    pub format: String,
    pub id: String,
    /// `generator/<family>`, `cadcoder-test100`, `deepcad`.
    pub source: String,
    pub split: Split,
    pub licence: String,
    pub provenance: String,
    pub program: Program,
    /// `states[0]` is the empty document; `states[k + 1]` the state after step `k`.
    pub states: Vec<ModelState>,
    pub steps: Vec<StepRecord>,
    #[serde(rename = "final")]
    pub final_summary: Summary,
    /// After every extrusion depth x 1.1, recomputed.
    pub ex10p: Summary,
    pub files: Files,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Files {
    /// The finished part in target style (or the source's own image).
    pub target: String,
    pub model_step: String,
    pub model_ex10p_step: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub index: usize,
    pub command: Command,
    /// Entities of the state before the step that the command names, with signatures to
    /// find them again in another state of the model.
    pub references: Vec<ReferenceRecord>,
    /// Index into `states` of the state the command was written against.
    pub before: usize,
    /// Index into `states` of the state it produced.
    pub after: usize,
    pub summary: Summary,
    /// Tagged view of the `before` state (what a VLM sees when choosing this step); none
    /// while the document has no solid.
    pub tagged_view: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceRecord {
    pub id: String,
    pub role: String,
    pub signature: Signature,
}

/// What identifies an entity geometrically, independent of its ID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entity", rename_all = "snake_case")]
pub enum Signature {
    Face {
        kind: FaceKind,
        centroid: [f64; 3],
        area: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        normal: Option<[f64; 3]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        axis: Option<[f64; 3]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        radius: Option<f64>,
    },
    Edge {
        kind: EdgeKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<[f64; 3]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<[f64; 3]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        midpoint: Option<[f64; 3]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        center: Option<[f64; 3]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        radius: Option<f64>,
    },
    Vertex {
        point: [f64; 3],
    },
}

/// Signature of an entity of `state`, if it exists there.
pub fn signature(state: &ModelState, id: &str) -> Option<Signature> {
    use freecad_bridge::command::{EntityId, EntityKind};
    let id: EntityId = id.parse().ok()?;
    let index = state.position(id)?;
    match id.kind {
        EntityKind::Face => state.faces.get(index).map(|f| Signature::Face {
            kind: f.kind,
            centroid: f.centroid,
            area: f.area,
            normal: f.normal,
            axis: f.axis,
            radius: f.radius,
        }),
        EntityKind::Edge => state.edges.get(index).map(|e| Signature::Edge {
            kind: e.kind,
            start: e.start,
            end: e.end,
            midpoint: e.midpoint,
            center: e.center,
            radius: e.radius,
        }),
        EntityKind::Vertex => state.vertices.get(index).map(|v| Signature::Vertex { point: v.point }),
    }
}

/// The geometry after a step, in brief.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub valid: bool,
    pub volume: f64,
    pub solids: usize,
    pub bbox: Option<BoundingBox>,
    pub faces: usize,
    pub edges: usize,
    pub vertices: usize,
}

impl Summary {
    pub fn of(state: &ModelState) -> Summary {
        Summary {
            valid: state.valid,
            volume: state.volume,
            solids: state.solids,
            bbox: state.bbox,
            faces: state.faces.len(),
            edges: state.edges.len(),
            vertices: state.vertices.len(),
        }
    }
}

/// What to record: a program and where it comes from.
#[derive(Debug, Clone)]
pub struct PartSource {
    pub id: String,
    pub source: String,
    pub split: Split,
    pub licence: String,
    pub provenance: String,
    pub program: Program,
    /// The source's own picture of the part (imports); otherwise a target view is rendered.
    pub target_image: Option<PathBuf>,
}

/// How records are written.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Width and height of the views.
    pub view_size: u32,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions { view_size: 500 }
    }
}

pub const PARTS_DIR: &str = "parts";
pub const PART_JSON: &str = "part.json";
pub const INDEX: &str = "index.jsonl";

/// The folder of part `id` in dataset `root`.
pub fn part_dir(root: &Path, id: &str) -> PathBuf {
    root.join(PARTS_DIR).join(id)
}

/// Execute the part's program step by step and write its record folder, atomically: the
/// folder appears complete or not at all.
pub fn write_part(
    session: &mut Session,
    part: &PartSource,
    root: &Path,
    options: &RecordOptions,
) -> Result<PartRecord, GerdError> {
    let final_dir = part_dir(root, &part.id);
    let tmp = root.join(PARTS_DIR).join(format!(".partial-{}", part.id));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| GerdError::io(&tmp, e))?;
    }
    std::fs::create_dir_all(tmp.join("views")).map_err(|e| GerdError::io(&tmp, e))?;
    let record = build_record(session, part, &tmp, options)?;
    write_json(&tmp.join(PART_JSON), &record)?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(|e| GerdError::io(&final_dir, e))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(|e| GerdError::io(&final_dir, e))?;
    Ok(record)
}

fn build_record(
    session: &mut Session,
    part: &PartSource,
    dir: &Path,
    options: &RecordOptions,
) -> Result<PartRecord, GerdError> {
    let view_options = views::Options { size: options.view_size, ..views::Options::default() };
    session.reset().map_err(|e| GerdError::bridge(&part.id, e))?;
    let mut states = vec![session.state().clone()];
    let mut steps = Vec::new();
    let mut current_view: Option<String> = None;
    let mut solid_changed = true;
    for (index, command) in part.program.commands.iter().enumerate() {
        let before = states.len() - 1;
        if solid_changed && !session.state().empty {
            let name = format!("views/state_{before:03}_tagged.png");
            let scene = views::scene_of(session).map_err(|e| GerdError::bridge(&part.id, e))?;
            let view = views::tagged(&scene, session.state(), &view_options);
            save_png(&view.image, &dir.join(&name))?;
            current_view = Some(name);
        }
        let references = command
            .references()
            .into_iter()
            .map(|Reference { id, role }| {
                let signature = signature(&states[before], &id).ok_or_else(|| {
                    GerdError::Record(format!("{}: step {index} names {id}, which does not exist", part.id))
                })?;
                Ok(ReferenceRecord { id, role, signature })
            })
            .collect::<Result<Vec<_>, GerdError>>()?;
        session.execute(command).map_err(|error| GerdError::Step { part: part.id.clone(), index, error })?;
        let after = session.state().clone();
        solid_changed = after.volume != states[before].volume || after.faces.len() != states[before].faces.len();
        steps.push(StepRecord {
            index,
            command: command.clone(),
            references,
            before,
            after: before + 1,
            summary: Summary::of(&after),
            tagged_view: current_view.clone(),
        });
        states.push(after);
    }
    let final_state = session.state().clone();
    if !final_state.one_solid_per_body() {
        return Err(GerdError::Record(format!("{}: the finished model is not one valid solid per body", part.id)));
    }

    let files = Files {
        target: "target.png".into(),
        model_step: "model.step".into(),
        model_ex10p_step: "model_ex10p.step".into(),
    };
    match &part.target_image {
        Some(source) => {
            let image = image::open(source).map_err(|e| GerdError::Record(format!("{}: {e}", source.display())))?;
            save_png(&image.to_rgb8(), &dir.join(&files.target))?;
        }
        None => {
            let scene = views::scene_of(session).map_err(|e| GerdError::bridge(&part.id, e))?;
            save_png(&views::target(&scene, &view_options).image, &dir.join(&files.target))?;
        }
    }
    save_step(session, &part.id, &dir.join(&files.model_step))?;
    let edited =
        session.scale_extrusions(1.1).map_err(|e| GerdError::Ex10p { part: part.id.clone(), error: e })?.clone();
    if !edited.one_solid_per_body() {
        return Err(GerdError::Record(format!(
            "{}: after the 10% edit the model is not one valid solid per body",
            part.id
        )));
    }
    save_step(session, &part.id, &dir.join(&files.model_ex10p_step))?;
    Ok(PartRecord {
        format: FORMAT.into(),
        id: part.id.clone(),
        source: part.source.clone(),
        split: part.split,
        licence: part.licence.clone(),
        provenance: part.provenance.clone(),
        program: part.program.clone(),
        final_summary: Summary::of(&final_state),
        ex10p: Summary::of(&edited),
        states,
        steps,
        files,
    })
}

fn save_png(image: &image::RgbImage, path: &Path) -> Result<(), GerdError> {
    image.save(path).map_err(|e| GerdError::Record(format!("cannot write {}: {e}", path.display())))
}

/// Write the current solid as STEP with a fixed timestamp, so the same part gives the
/// same bytes on every run.
fn save_step(session: &mut Session, id: &str, path: &Path) -> Result<(), GerdError> {
    session.save(None, Some(path)).map_err(|e| GerdError::bridge(id, e))?;
    let text = std::fs::read_to_string(path).map_err(|e| GerdError::io(path, e))?;
    std::fs::write(path, name_step_product(&pin_step_timestamp(&text), id)).map_err(|e| GerdError::io(path, e))
}

/// Name the STEP product after the part: OpenCascade names it after its translator and a
/// per-process export counter, which differs with the worker's history.
pub fn name_step_product(text: &str, name: &str) -> String {
    const PREFIX: &str = "Open CASCADE STEP translator ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let end = after.find('\'').unwrap_or(after.len());
        out.push_str(name);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Replace the time stamp in a STEP header's FILE_NAME with the epoch.
pub fn pin_step_timestamp(text: &str) -> String {
    let Some(start) = text.find("FILE_NAME(") else { return text.to_string() };
    let header = &text[start..];
    // FILE_NAME('name','2026-11-30T04:30:00',...): the second quoted field.
    let mut quotes = header.match_indices('\'').map(|(i, _)| start + i);
    let (Some(_), Some(_), Some(open), Some(close)) = (quotes.next(), quotes.next(), quotes.next(), quotes.next())
    else {
        return text.to_string();
    };
    format!("{}1970-01-01T00:00:00{}", &text[..=open], &text[close..])
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), GerdError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| GerdError::Record(e.to_string()))?;
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, text).map_err(|e| GerdError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| GerdError::io(path, e))
}

pub fn read_part(dir: &Path) -> Result<PartRecord, GerdError> {
    let path = dir.join(PART_JSON);
    let text = std::fs::read_to_string(&path).map_err(|e| GerdError::io(&path, e))?;
    parse_part(&text, &path)
}

/// A record from the text of its `part.json` (`path` names it in errors).
pub fn parse_part(text: &str, path: &Path) -> Result<PartRecord, GerdError> {
    let record: PartRecord =
        serde_json::from_str(text).map_err(|e| GerdError::Record(format!("{}: {e}", path.display())))?;
    if !FORMATS_READ.contains(&record.format.as_str()) {
        return Err(GerdError::Record(format!(
            "{}: format {} is not one this reader knows ({})",
            path.display(),
            record.format,
            FORMATS_READ.join(", ")
        )));
    }
    Ok(record)
}

/// The part folders of a dataset, sorted by ID (unfinished `.partial-*` folders skipped).
pub fn part_dirs(root: &Path) -> Result<Vec<PathBuf>, GerdError> {
    let parts = root.join(PARTS_DIR);
    let entries = std::fs::read_dir(&parts).map_err(|e| GerdError::io(&parts, e))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// One line of `index.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub id: String,
    pub split: Split,
    pub source: String,
    pub steps: usize,
    pub path: String,
}

/// Rewrite `index.jsonl` from the part folders.
pub fn write_index(root: &Path) -> Result<Vec<IndexEntry>, GerdError> {
    let mut entries = Vec::new();
    for dir in part_dirs(root)? {
        let record = read_part(&dir)?;
        entries.push(IndexEntry {
            path: format!("{PARTS_DIR}/{}", record.id),
            id: record.id,
            split: record.split,
            source: record.source,
            steps: record.steps.len(),
        });
    }
    let mut text = String::new();
    for e in &entries {
        text.push_str(&serde_json::to_string(e).map_err(|e| GerdError::Record(e.to_string()))?);
        text.push('\n');
    }
    let path = root.join(INDEX);
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, text).map_err(|e| GerdError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| GerdError::io(&path, e))?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_timestamps_are_pinned() {
        let text = "HEADER;\nFILE_NAME('Open CASCADE Shape Model','2026-11-30T04:30:00',('Author'),(''),'x');\nENDSEC;";
        let pinned = pin_step_timestamp(text);
        assert!(pinned.contains("FILE_NAME('Open CASCADE Shape Model','1970-01-01T00:00:00',('Author')"), "{pinned}");
        assert_eq!(pin_step_timestamp(&pinned), pinned);
    }

    #[test]
    fn step_products_are_named_after_the_part() {
        let text =
            "#7 = PRODUCT('Open CASCADE STEP translator 7.6 3',\n  'Open CASCADE STEP translator 7.6 3','',(#8));";
        assert_eq!(name_step_product(text, "gen-1-00002"), "#7 = PRODUCT('gen-1-00002',\n  'gen-1-00002','',(#8));");
    }
}
