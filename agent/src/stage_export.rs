//! Training data in the loop's own format: the requests the loop sends while the oracle
//! rebuilds GERD parts from their target images, each with the answer the oracle gives.
//!
//! Because every sample is a request the loop really built (same templates, views, view
//! coordinates, entity tables), a model fine-tuned on them drops into `reconstruct`
//! unchanged. Stage 3 needs rejections too: with probability `perturb`, the first Stage 1
//! answer of a step is sent to the loop with one length or angle scaled by 1.5 (a wrong but
//! valid operation); its preview is then judged, and rejected, by the oracle. The Stage 1
//! sample keeps the oracle's own answer, never the perturbed one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use freecad_bridge::Session;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::{Value, json};

use crate::vlm::{GroundTruth, Oracle, Reply, Request, Stage, Vlm, VlmError};
use crate::{Config, LoopError, Reconstruction};

/// One recorded stage call.
#[derive(Debug, Clone)]
pub struct StageSample {
    pub stage: Stage,
    pub system: String,
    pub prompt: String,
    /// The request's images, as the loop wrote them.
    pub images: Vec<PathBuf>,
    /// The oracle's answer (JSON text).
    pub answer: String,
}

/// Wraps the oracle: records every call, and perturbs some first Stage 1 answers.
struct Recorder {
    oracle: Oracle,
    perturb: f64,
    rng: ChaCha8Rng,
    /// The loop's steps (accepted or set aside) whose first Stage 1 answer was already given.
    answered: std::collections::BTreeSet<usize>,
    samples: Vec<StageSample>,
}

impl Vlm for Recorder {
    fn name(&self) -> String {
        "oracle".into()
    }

    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError> {
        let reply = self.oracle.answer(request)?;
        self.samples.push(StageSample {
            stage: request.stage,
            system: request.system.clone(),
            prompt: request.text.clone(),
            images: request.images.clone(),
            answer: reply.text.clone(),
        });
        let first = request.stage == Stage::Stage1 && self.answered.insert(request.context.loop_steps());
        let draw = self.rng.next_u64() as f64 / u64::MAX as f64;
        if first
            && draw < self.perturb
            && let Some(wrong) = perturbed(&reply.text)
        {
            return Ok(Reply { text: wrong, ..reply });
        }
        Ok(reply)
    }
}

/// The Stage 1 answer with its first length or angle scaled by 1.5; `None` when it has none.
fn perturbed(answer: &str) -> Option<String> {
    let mut v: Value = serde_json::from_str(answer).ok()?;
    let command = v.get_mut("command")?;
    let scale = |x: &mut Value| -> bool {
        match x.as_f64() {
            Some(n) if n != 0.0 => {
                *x = ((n * 1.5 * 1e4).round() / 1e4).into();
                true
            }
            _ => false,
        }
    };
    let halve = |x: &mut Value| -> bool {
        let Some(n) = x.as_f64() else { return false };
        *x = (n * 0.5).into();
        true
    };
    // Only extrusion depths and revolution angles: a wrong fillet radius or plane offset can
    // leave volume and extent unchanged, and the oracle would accept a wrong preview.
    let changed = if command.get("extent").and_then(|e| e.get("depth")).is_some() {
        command["extent"].get_mut("depth").is_some_and(scale)
    } else {
        // One and a half turns would be refused, not judged: half the angle instead.
        command.get_mut("angle").is_some_and(halve)
    };
    changed.then(|| v.to_string())
}

/// [`record_part`], undisturbed by the machine: a FreeCAD worker lost while the part is
/// recorded is a fault of the machine, not of the part, so the part is recorded again from
/// its start (up to three times), and the samples are always those of an undisturbed run.
/// `embedder` gives the retrieval index's embedder afresh for each attempt.
#[allow(clippy::too_many_arguments)]
pub fn record_part_undisturbed(
    part_dir: &Path,
    work: &Path,
    config: &Config,
    session: &mut Session,
    perturb: f64,
    seed: u64,
    embedder: impl Fn() -> Result<Option<Box<dyn gerd::retrieve::embed::Embedder>>, LoopError>,
) -> Result<Vec<StageSample>, LoopError> {
    session
        .undisturbed(
            3,
            |s| {
                let _ = std::fs::remove_dir_all(work);
                record_part(part_dir, work, config, s, perturb, seed, embedder()?)
            },
            |_, _| {
                tracing::warn!("the FreeCAD worker was lost while recording {}; recording it again", part_dir.display())
            },
        )
        .unwrap_or_else(|(attempts, _)| {
            Err(LoopError::Bridge(freecad_bridge::BridgeError::KernelFault {
                attempts,
                last: "the worker was lost while the part was recorded".into(),
            }))
        })
}

/// Rebuild one GERD part (`part_dir`) with the oracle through the loop, in `work` (a scratch
/// directory), and return every stage call it made. `embedder` is the retrieval index's,
/// when the configuration has one (it must not hold this part). A rebuild that fails is an
/// error: its calls are not samples.
fn record_part(
    part_dir: &Path,
    work: &Path,
    config: &Config,
    session: &mut Session,
    perturb: f64,
    seed: u64,
    embedder: Option<Box<dyn gerd::retrieve::embed::Embedder>>,
) -> Result<Vec<StageSample>, LoopError> {
    let truth = GroundTruth::load(part_dir, session)
        .map_err(|reason| LoopError::Truth { path: part_dir.display().to_string(), reason })?;
    let id = part_dir.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    // One stream per part: the samples do not depend on which parts are exported with it.
    let mut seed_bytes = seed.to_le_bytes().to_vec();
    seed_bytes.extend(id.bytes());
    let part_seed =
        seed_bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3));
    let mut recorder = Recorder {
        oracle: Oracle::new(truth),
        perturb,
        rng: ChaCha8Rng::seed_from_u64(part_seed),
        answered: Default::default(),
        samples: Vec::new(),
    };
    let outcome = Reconstruction::new(config.clone())?.embedder(embedder).run(
        &part_dir.join("target.png"),
        work,
        &mut recorder,
        session,
    )?;
    if let Some(failure) = outcome.failure {
        return Err(LoopError::Truth {
            path: part_dir.display().to_string(),
            reason: format!("the oracle's rebuild failed: {failure}"),
        });
    }
    Ok(recorder.samples)
}

/// Write `samples` of part `part` as JSON lines into `out`, copying their images into
/// `images_dir` (paths in the lines are relative to the JSONL's folder).
pub fn write_samples(
    samples: &[StageSample],
    part: &str,
    split: &str,
    stage: Stage,
    out: &mut impl std::io::Write,
    jsonl_dir: &Path,
    images_dir: &Path,
) -> Result<usize, LoopError> {
    let part_images = images_dir.join(part);
    let mut copied: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut written = 0;
    for (n, s) in samples.iter().filter(|s| s.stage == stage).enumerate() {
        let mut images = Vec::new();
        for image in &s.images {
            if !copied.contains_key(image) {
                std::fs::create_dir_all(&part_images).map_err(|e| LoopError::io(&part_images, e))?;
                // Views of the run and retrieved examples may share a file name.
                let name = format!(
                    "{:02}_{}",
                    copied.len(),
                    image.file_name().map_or("image.png".into(), |f| f.to_string_lossy())
                );
                let target = part_images.join(&name);
                std::fs::copy(image, &target).map_err(|e| LoopError::io(&target, e))?;
                let relative = target.strip_prefix(jsonl_dir).unwrap_or(&target).display().to_string();
                copied.insert(image.clone(), relative);
            }
            images.push(copied[image].clone());
        }
        let line = json!({
            "id": format!("{part}-{}-{n:03}", stage.name()), "split": split, "part": part, "stage": stage.name(),
            "system": s.system, "prompt": s.prompt, "images": images, "answer": s.answer,
        });
        writeln!(out, "{line}").map_err(|e| LoopError::io(jsonl_dir, e))?;
        written += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perturbation_changes_one_length_and_keeps_the_answer_valid_json() {
        let a = r#"{"reason":"r","command":{"op":"extrude","profile":"S1","mode":"add","extent":{"type":"one_side","depth":10.0}}}"#;
        let p: Value = serde_json::from_str(&perturbed(a).expect("perturbed")).expect("json");
        assert_eq!(p["command"]["extent"]["depth"], 15.0);
        let f = r#"{"reason":"r","command":{"op":"fillet","edges":["E1"],"radius":2.0}}"#;
        assert_eq!(perturbed(f), None, "a wrong fillet may look right");
        let r =
            r#"{"reason":"r","command":{"op":"revolve","profile":"S1","mode":"add","axis":"S1.v_axis","angle":360.0}}"#;
        let p: Value = serde_json::from_str(&perturbed(r).expect("perturbed")).expect("json");
        assert_eq!(p["command"]["angle"], 180.0);
        let through =
            r#"{"reason":"r","command":{"op":"extrude","profile":"S1","mode":"cut","extent":{"type":"through_all"}}}"#;
        assert_eq!(perturbed(through), None);
        assert_eq!(perturbed(r#"{"reason":"r","command":{"op":"end"}}"#), None);
    }
}
