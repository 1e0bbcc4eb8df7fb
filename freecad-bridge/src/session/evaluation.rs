//! Requests on shapes written to BREP or STEP files, or kept in the worker: evaluation
//! builds the prediction and the ground truth in turn in the one document, then meets them
//! in booleans and meshes that need no document state (so they survive a worker
//! replacement without replay).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Session;
use crate::error::BridgeError;
use crate::protocol::Request;
use crate::state::BoundingBox;

/// A similarity transform `x -> scale * rotate * (x + translate)`: a rigid motion and a
/// uniform scale, which the kernel applies exactly.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Similarity {
    pub translate: [f64; 3],
    /// A proper rotation, row-major.
    pub rotate: [[f64; 3]; 3],
    pub scale: f64,
}

impl Similarity {
    pub const IDENTITY: Similarity =
        Similarity { translate: [0.0; 3], rotate: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], scale: 1.0 };

    /// Where the transform takes `x`.
    pub fn apply(&self, x: [f64; 3]) -> [f64; 3] {
        let y = [x[0] + self.translate[0], x[1] + self.translate[1], x[2] + self.translate[2]];
        let r = &self.rotate;
        [
            self.scale * (r[0][0] * y[0] + r[0][1] * y[1] + r[0][2] * y[2]),
            self.scale * (r[1][0] * y[0] + r[1][1] * y[1] + r[1][2] * y[2]),
            self.scale * (r[2][0] * y[0] + r[2][1] * y[1] + r[2][2] * y[2]),
        ]
    }
}

/// Mass properties of the document's shape (unit density).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MassProperties {
    /// Sum of the solids' volumes.
    pub volume: f64,
    /// None where it was not asked for ([`Session::keep_shape`] without `inertia`).
    pub area: Option<f64>,
    pub solids: usize,
    /// Valid by the kernel's check and at least one solid.
    pub valid: bool,
    /// The tight box of the exact geometry.
    pub bbox: BoundingBox,
    /// None without a solid of positive volume.
    pub center_of_mass: Option<[f64; 3]>,
    /// Inertia tensor about the centre of mass, row-major.
    pub inertia: Option<[[f64; 3]; 3]>,
}

/// Volumes of two transformed shapes and of their common part (the fusion's volume is
/// vol(a) + vol(b) - common).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BooleanVolumes {
    pub volume_a: f64,
    pub volume_b: f64,
    pub common: f64,
}

/// Triangles as flat arrays: the one mesh type of the bridge (a whole shape for the
/// metrics; inside a [`Tessellation`](crate::Tessellation), the model's faces for the views).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriangleMesh {
    /// x, y, z of every vertex.
    pub positions: Vec<f64>,
    /// Three vertex indices per triangle.
    pub triangles: Vec<u32>,
}

impl TriangleMesh {
    pub fn triangle_count(&self) -> usize {
        self.triangles.len() / 3
    }
}

impl Session {
    /// Mass properties of the current shape; with `brep`, also write the shape there for
    /// [`Session::boolean_volumes`] and [`Session::mesh_shape`].
    pub fn measure(&mut self, brep: Option<&Path>) -> Result<MassProperties, BridgeError> {
        let brep = brep.map(absolute_text).transpose()?;
        self.query(Request::Measure { brep }, "mass properties")
    }

    /// Transform the shapes in two BREP files and return the volumes of each and of their
    /// common part (an exact kernel boolean).
    pub fn boolean_volumes(
        &mut self,
        a: &Path,
        transform_a: &Similarity,
        b: &Path,
        transform_b: &Similarity,
    ) -> Result<BooleanVolumes, BridgeError> {
        let request = Request::BooleanVolumes {
            a: absolute_text(a)?,
            transform_a: *transform_a,
            b: absolute_text(b)?,
            transform_b: *transform_b,
        };
        self.query(request, "boolean volumes")
    }

    /// Transform the shape in a BREP file and mesh it with absolute deflections (in the
    /// transformed units).
    pub fn mesh_shape(
        &mut self,
        brep: &Path,
        transform: &Similarity,
        linear_deflection: f64,
        angular_deflection: f64,
    ) -> Result<TriangleMesh, BridgeError> {
        let request = Request::MeshShape {
            path: absolute_text(brep)?,
            transform: *transform,
            linear_deflection,
            angular_deflection,
        };
        self.query(request, "mesh")
    }
}

/// Which shape of an evaluation sample a worker keeps ([`Session::keep_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptSlot {
    Prediction,
    GroundTruth,
}

/// The two kept shapes, transformed and compared ([`Session::compare_kept`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KeptComparison {
    pub prediction: TriangleMesh,
    pub ground_truth: TriangleMesh,
    pub volume_prediction: f64,
    pub volume_ground_truth: f64,
    /// The volume of the common part ([`Session::intersect_kept_within`]); None from
    /// [`Session::compare_kept`], or where the boolean failed.
    pub common: Option<f64>,
    /// Why the boolean failed.
    pub boolean_error: Option<String>,
    /// Seconds the worker spent meshing and intersecting (for benchmarks).
    #[serde(default)]
    pub mesh_seconds: f64,
    #[serde(default)]
    pub boolean_seconds: f64,
}

impl Session {
    /// Keep a shape in the worker for [`Session::compare_kept`] and return its mass
    /// properties (area, centre of mass and inertia only with `inertia`): the STEP file `step`
    /// read straight into memory (no document), or without it the document's shape.
    /// The worker keeps one shape per slot until it is replaced; a lost worker loses them.
    pub fn keep_shape(
        &mut self,
        slot: KeptSlot,
        step: Option<&Path>,
        inertia: bool,
    ) -> Result<MassProperties, BridgeError> {
        let path = step.map(absolute_text).transpose()?;
        self.query(Request::KeepShape { slot, path, inertia }, "mass properties")
    }

    /// Write the shape kept in `slot` to `path` (binary BREP: every number as it is), so that
    /// another worker can [`Session::load_kept`] the very same shape.
    pub fn save_kept(&mut self, slot: KeptSlot, path: &Path) -> Result<(), BridgeError> {
        let path = absolute_text(path)?;
        self.query::<serde::de::IgnoredAny>(Request::SaveKept { slot, path }, "reply").map(|_| ())
    }

    /// Keep the shape that [`Session::save_kept`] wrote to `path` in `slot`.
    pub fn load_kept(&mut self, slot: KeptSlot, path: &Path) -> Result<(), BridgeError> {
        let path = absolute_text(path)?;
        self.query::<serde::de::IgnoredAny>(Request::LoadKept { slot, path }, "reply").map(|_| ())
    }

    /// Transform the two kept shapes and mesh each with absolute deflections (in the
    /// transformed units), with their volumes.
    pub fn compare_kept(
        &mut self,
        transform_prediction: &Similarity,
        transform_ground_truth: &Similarity,
        linear_deflection: f64,
        angular_deflection: f64,
    ) -> Result<KeptComparison, BridgeError> {
        let request = Request::CompareKept {
            transform_prediction: *transform_prediction,
            transform_ground_truth: *transform_ground_truth,
            linear_deflection,
            angular_deflection,
        };
        self.query(request, "comparison")
    }

    /// The exact boolean of the two kept shapes, transformed, without meshing them (their
    /// meshes are known already), within `limit`: only `common` and the volumes are filled
    /// in (one common: the union's volume follows from the three volumes). With `fuzzy`,
    /// OpenCASCADE's fuzzy boolean: faces and edges closer than that (model units) are one,
    /// which is what two models of one part with coincident faces need when the plain
    /// boolean returns nothing. `Ok(None)` when the boolean takes longer than `limit`:
    /// booleans of near-coincident curved faces can run for minutes. The worker is then
    /// stopped (its kept shapes with it) without counting as lost, so a caller can go on
    /// without the boolean (an evaluation with the voxel IoU).
    pub fn intersect_kept_within(
        &mut self,
        transform_prediction: &Similarity,
        transform_ground_truth: &Similarity,
        fuzzy: Option<f64>,
        limit: std::time::Duration,
    ) -> Result<Option<KeptComparison>, BridgeError> {
        let request = Request::IntersectKept {
            transform_prediction: *transform_prediction,
            transform_ground_truth: *transform_ground_truth,
            fuzzy,
        };
        self.query_within(request, "comparison", limit)
    }
}

fn absolute_text(path: &Path) -> Result<String, BridgeError> {
    std::path::absolute(path)
        .map(|a| a.to_string_lossy().into_owned())
        .map_err(|e| BridgeError::Load { path: path.display().to_string(), reason: e.to_string() })
}
