//! The worker protocol: one JSON line per [`Request`] (tagged by `type`), answered by one
//! line `{"ok": ...}` or `{"err": {"reason", "entity", "kind"}}`. The `python/v2c_worker/` package
//! dispatches on the same `type` names; a refusal carries a [`RefusalKind`] so callers can
//! tell a boolean that changed nothing from one that left separate solids without reading
//! FreeCAD's wording.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::session::{KeptSlot, Similarity};
use crate::state::{Frame, ModelState};

/// One request to a worker.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Start over with an empty document; answers the [`ModelState`].
    Reset,
    /// The entity table of the document.
    State,
    /// Execute one lowered command (see [`crate::lower`]); answers an [`ExecuteReply`].
    Execute {
        command: Value,
    },
    /// What a lowered command would do, without committing it; answers a [`crate::Preview`].
    Preview {
        command: Value,
        linear_deflection: f64,
        angular_deflection: f64,
    },
    /// Keep a copy of the model's shape in the worker, for [`Request::PreviewHeld`].
    Hold,
    /// The document against the shape [`Request::Hold`] kept, as a [`crate::Preview`]: what
    /// a revision (the document rebuilt with one command changed) adds and removes.
    PreviewHeld {
        linear_deflection: f64,
        angular_deflection: f64,
    },
    /// The frame a sketch on `on` would get.
    PlaneFrame {
        on: String,
    },
    /// The document's extrusion depths.
    Parameters,
    /// Set depths by name and recompute; answers the [`ModelState`].
    SetParameters {
        values: BTreeMap<String, f64>,
    },
    /// Replace the document with a STEP or FCStd file; answers the [`ModelState`].
    Load {
        path: String,
    },
    Save {
        fcstd: Option<String>,
        step: Option<String>,
    },
    Tessellate {
        linear_deflection: f64,
        angular_deflection: f64,
    },
    /// Mass properties of the document's shape, optionally written to a BREP file.
    Measure {
        brep: Option<String>,
    },
    BooleanVolumes {
        a: String,
        transform_a: Similarity,
        b: String,
        transform_b: Similarity,
    },
    MeshShape {
        path: String,
        transform: Similarity,
        linear_deflection: f64,
        angular_deflection: f64,
    },
    /// Keep a shape (a STEP file, or the document's) in a slot for the comparisons below.
    KeepShape {
        slot: KeptSlot,
        path: Option<String>,
        inertia: bool,
    },
    /// Write a kept shape to a binary BREP file (every number as it is), for another worker.
    SaveKept {
        slot: KeptSlot,
        path: String,
    },
    /// Keep the shape of a binary BREP file written by `SaveKept` in a slot.
    LoadKept {
        slot: KeptSlot,
        path: String,
    },
    /// Mesh the two kept shapes, transformed.
    CompareKept {
        transform_prediction: Similarity,
        transform_ground_truth: Similarity,
        linear_deflection: f64,
        angular_deflection: f64,
    },
    /// Only the exact common volume of the two kept shapes, transformed (no meshes); with
    /// `fuzzy`, a fuzzy boolean: faces closer than that (model units) count as one.
    IntersectKept {
        transform_prediction: Similarity,
        transform_ground_truth: Similarity,
        #[serde(skip_serializing_if = "Option::is_none")]
        fuzzy: Option<f64>,
    },
    /// Diagnostics: keep the worker busy.
    DebugSleep {
        seconds: f64,
    },
}

impl Request {
    /// The `type` of the request, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Reset => "reset",
            Request::State => "state",
            Request::Execute { .. } => "execute",
            Request::Preview { .. } => "preview",
            Request::PlaneFrame { .. } => "plane_frame",
            Request::Hold => "hold",
            Request::PreviewHeld { .. } => "preview_held",
            Request::Parameters => "parameters",
            Request::SetParameters { .. } => "set_parameters",
            Request::Load { .. } => "load",
            Request::Save { .. } => "save",
            Request::Tessellate { .. } => "tessellate",
            Request::Measure { .. } => "measure",
            Request::BooleanVolumes { .. } => "boolean_volumes",
            Request::MeshShape { .. } => "mesh_shape",
            Request::KeepShape { .. } => "keep_shape",
            Request::SaveKept { .. } => "save_kept",
            Request::LoadKept { .. } => "load_kept",
            Request::CompareKept { .. } => "compare_kept",
            Request::IntersectKept { .. } => "intersect_kept",
            Request::DebugSleep { .. } => "debug_sleep",
        }
    }

    /// The request as it goes on the wire.
    pub fn to_value(&self) -> Value {
        // A request is plain data (strings, numbers, maps with string keys): it always
        // serialises.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The answer to [`Request::Execute`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExecuteReply {
    /// The FreeCAD feature it created (`S1`, `Pad001`...), none for `end`.
    pub feature: Option<String>,
    /// The local frame of a new sketch or plane.
    #[serde(default)]
    pub frame: Option<Frame>,
    /// A sketch's redundant constraints the worker removed, by label.
    #[serde(default)]
    pub dropped: Vec<String>,
    /// A sketch's own geometry as the solver left it, primitive by primitive.
    #[serde(default)]
    pub solved: Vec<Option<SolvedGeometry>>,
    /// The entity table after the command.
    pub state: ModelState,
}

/// One primitive of a solved sketch, as Sketcher holds it, in the sketch's frame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SolvedGeometry {
    /// Start x, y, end x, y.
    Line([f64; 4]),
    /// Centre x, y, radius.
    Circle([f64; 3]),
    /// Centre x, y, radius, start and end angle in radians, counter-clockwise.
    Arc([f64; 5]),
}

/// Why FreeCAD refused a request, as far as the worker can tell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// The boolean changed nothing: an addition added no material, a cut removed none, a
    /// dress-up changed nothing.
    NoEffect,
    /// The result would be several separate solids, which one body cannot hold.
    SeparateSolids,
    /// A sketch's constraints cannot be solved (they conflict, or the solver fails): the
    /// drawing is at fault, not its place in the model.
    Unsolvable,
    /// Anything else: a reference that does not resolve, a feature FreeCAD could not
    /// compute, an invalid result.
    #[default]
    Other,
}

/// One line from the worker.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply {
    Ok(Value),
    Err {
        reason: String,
        entity: Option<String>,
        #[serde(default)]
        kind: RefusalKind,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_by_type_as_the_worker_dispatches_them() {
        let r = Request::PlaneFrame { on: "F3".into() };
        assert_eq!(r.to_value(), serde_json::json!({"type": "plane_frame", "on": "F3"}));
        assert_eq!(Request::Reset.to_value(), serde_json::json!({"type": "reset"}));
        let worker = crate::worker::WORKER_PACKAGE.iter().find(|(name, _)| *name == "dispatch").expect("dispatch").1;
        for r in [
            Request::Reset,
            Request::State,
            Request::Parameters,
            r,
            Request::DebugSleep { seconds: 0.0 },
            Request::IntersectKept {
                transform_prediction: Similarity::IDENTITY,
                transform_ground_truth: Similarity::IDENTITY,
                fuzzy: Some(1e-5),
            },
        ] {
            assert_eq!(r.to_value()["type"], r.name());
            assert!(worker.contains(&format!("\"{}\":", r.name())), "the worker has no handler for {}", r.name());
        }
    }

    #[test]
    fn refusals_carry_their_kind_and_old_workers_read_as_other() {
        let reply: Reply = serde_json::from_str(
            r#"{"err": {"reason": "the extrude added no material", "entity": null, "kind": "no_effect"}}"#,
        )
        .expect("parses");
        assert!(matches!(reply, Reply::Err { kind: RefusalKind::NoEffect, .. }));
        let reply: Reply = serde_json::from_str(r#"{"err": {"reason": "x", "entity": "F3"}}"#).expect("parses");
        assert!(matches!(reply, Reply::Err { kind: RefusalKind::Other, .. }));
    }
}
