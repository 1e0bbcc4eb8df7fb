//! Check records: complete, self-consistent, and reproducible by re-executing the program.

use std::path::Path;

use freecad_bridge::{Session, Similarity};

use crate::GerdError;
use crate::record::{PartRecord, Summary, read_part, signature};

/// IoU a re-executed program must reach against its stored STEP.
pub const MIN_IOU: f64 = 0.999;
/// An exact IoU at least this high needs no second opinion from the meshes.
const TRUSTED_IOU: f64 = MIN_IOU;
/// A lower exact IoU stands where the voxel IoU is this close to it.
const VOXEL_AGREEMENT: f64 = 0.1;

/// What is wrong with one part (empty when it is fine).
#[derive(Debug, Clone, PartialEq)]
pub struct PartReport {
    pub id: String,
    pub problems: Vec<String>,
    /// IoU of the re-executed program against `model.step`, when it could be computed.
    pub iou: Option<f64>,
    pub iou_ex10p: Option<f64>,
}

/// Validate one part folder.
pub fn validate_part(session: &mut Session, dir: &Path) -> PartReport {
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut report = PartReport { id, problems: Vec::new(), iou: None, iou_ex10p: None };
    let record = match read_part(dir) {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(e.to_string());
            return report;
        }
    };
    report.problems.extend(check_record(&record, dir));
    match reproduce(session, &record, dir) {
        Ok((iou, iou_ex10p)) => {
            report.iou = Some(iou);
            report.iou_ex10p = Some(iou_ex10p);
            if iou < MIN_IOU {
                report.problems.push(format!("the program reproduces model.step only to IoU {iou:.6}"));
            }
            if iou_ex10p < MIN_IOU {
                report
                    .problems
                    .push(format!("the edited program reproduces model_ex10p.step only to IoU {iou_ex10p:.6}"));
            }
        }
        Err(e) => report.problems.push(e.to_string()),
    }
    report
}

/// Completeness and consistency, without FreeCAD.
pub fn check_record(record: &PartRecord, dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for file in [&record.files.target, &record.files.model_step, &record.files.model_ex10p_step] {
        if !dir.join(file).is_file() {
            problems.push(format!("{file} is missing"));
        }
    }
    if record.steps.len() != record.program.commands.len() {
        problems.push(format!("{} steps for {} commands", record.steps.len(), record.program.commands.len()));
    }
    if record.states.len() != record.steps.len() + 1 {
        problems.push(format!("{} states for {} steps (expected one more)", record.states.len(), record.steps.len()));
    }
    for (k, step) in record.steps.iter().enumerate() {
        if step.index != k || step.before != k || step.after != k + 1 {
            problems
                .push(format!("step {k}: indices {}, {} -> {} are out of order", step.index, step.before, step.after));
            continue;
        }
        if record.program.commands.get(k) != Some(&step.command) {
            problems.push(format!("step {k}: the command differs from the program's"));
        }
        let (Some(before), Some(after)) = (record.states.get(step.before), record.states.get(step.after)) else {
            continue;
        };
        if Summary::of(after) != step.summary {
            problems.push(format!("step {k}: the summary does not match the state after it"));
        }
        let named = step.command.references();
        if named.len() != step.references.len() {
            problems.push(format!(
                "step {k}: {} references recorded, the command names {}",
                step.references.len(),
                named.len()
            ));
        }
        for r in &step.references {
            match signature(before, &r.id) {
                Some(sig) if sig == r.signature => {}
                Some(_) => {
                    problems.push(format!("step {k}: the signature of {} does not match the state before", r.id))
                }
                None => problems.push(format!("step {k}: {} does not exist in the state before", r.id)),
            }
        }
        if let Some(view) = &step.tagged_view {
            if !dir.join(view).is_file() {
                problems.push(format!("step {k}: {view} is missing"));
            }
        } else if !before.empty {
            problems.push(format!("step {k}: no tagged view of a non-empty state"));
        }
    }
    if let Some(last) = record.states.last()
        && Summary::of(last) != record.final_summary
    {
        problems.push("the final summary does not match the last state".into());
    }
    problems
}

/// Re-execute the program: IoU against model.step, then after the 10% edit against
/// model_ex10p.step. Exact booleans; where the kernel's booleans are inconsistent (as they
/// can be between identical swept surfaces), the voxel IoU of evaluation.
fn reproduce(session: &mut Session, record: &PartRecord, dir: &Path) -> Result<(f64, f64), GerdError> {
    let scratch = tempfile::Builder::new()
        .prefix("vision2cad-validate-")
        .tempdir()
        .map_err(|e| GerdError::io(&std::env::temp_dir(), e))?;
    let path = |name: &str| scratch.path().join(name);
    let bridge = |e| GerdError::bridge(&record.id, e);
    session.reset().map_err(bridge)?;
    // Each command against the state it was recorded on: a process that numbers entities
    // otherwise has the command's IDs matched by geometry.
    for (index, command) in record.program.commands.iter().enumerate() {
        let executed = match record.states.get(index) {
            Some(recorded) => session.execute_recorded(command, recorded),
            None => session.execute(command),
        };
        executed.map_err(|error| GerdError::Step { part: record.id.clone(), index, error })?;
    }
    session.measure(Some(&path("built.brep"))).map_err(bridge)?;
    session.scale_extrusions(1.1).map_err(|error| GerdError::Ex10p { part: record.id.clone(), error })?;
    session.measure(Some(&path("edited.brep"))).map_err(bridge)?;
    session.load(&dir.join(&record.files.model_step)).map_err(bridge)?;
    session.measure(Some(&path("stored.brep"))).map_err(bridge)?;
    session.load(&dir.join(&record.files.model_ex10p_step)).map_err(bridge)?;
    let stored_edit = session.measure(Some(&path("stored_ex10p.brep"))).map_err(bridge)?;
    let size = stored_edit.bbox.max.iter().zip(stored_edit.bbox.min).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    let mut iou = |a: &Path, b: &Path| -> Result<f64, GerdError> {
        let volumes = session.boolean_volumes(a, &Similarity::IDENTITY, b, &Similarity::IDENTITY).map_err(bridge)?;
        let exact = eval::exact_iou(volumes.volume_a, volumes.volume_b, volumes.common).ok();
        if let Some(iou) = exact.filter(|&iou| iou >= TRUSTED_IOU) {
            return Ok(iou);
        }
        // The kernel can return consistent volumes with a wrongly empty common part (seen on
        // lofts): a low exact IoU stands only where the meshes agree with it.
        let mut mesh = |p: &Path| -> Result<eval::Mesh, GerdError> {
            let flat = session.mesh_shape(p, &Similarity::IDENTITY, size * 1e-3, 0.1).map_err(bridge)?;
            eval::Mesh::from_flat(flat).map_err(|e| GerdError::Record(format!("{}: {e}", record.id)))
        };
        let (ma, mb) = (mesh(a)?, mesh(b)?);
        let voxel = eval::voxel_iou(&ma, &mb, eval::VOXEL_RESOLUTION)
            .map_err(|e| GerdError::Record(format!("{}: {e}", record.id)))?;
        Ok(match exact {
            Some(iou) if (iou - voxel).abs() <= VOXEL_AGREEMENT => iou,
            _ => voxel,
        })
    };
    Ok((iou(&path("built.brep"), &path("stored.brep"))?, iou(&path("edited.brep"), &path("stored_ex10p.brep"))?))
}
