//! # eval
//!
//! Metrics and protocols for image-to-CAD evaluation, with the conventions of the project's
//! metrics document (`design/metrics.md`), stated in every report:
//!
//! - **CR**: share of samples whose prediction builds into a valid, non-empty solid (and,
//!   under `edit10`, still recomputes after the edit).
//! - **IoU**: `vol(P' ∩ G') / vol(P' ∪ G')` by exact kernel booleans on the normalised
//!   solids; where the booleans fail or disagree with themselves (checked against a column
//!   IoU exact along z), a 128³ ray-parity voxel IoU on the meshes, and the method is
//!   recorded per sample.
//! - **CD** (x1000, squared, two-sided), **HD** and **HD95** on `N` points per shape
//!   sampled by area from meshes of the normalised solids (linear deflection 1e-3, angular
//!   0.1 rad), from a ChaCha8 generator seeded with FNV-1a-64 of the sample id, the
//!   prediction and the ground truth from independent streams (so a shape against itself
//!   shows the sampling noise floor, as in the published tables).
//! - **Normalisation** `unit-cube` (default), `none` or `inertia` ([`Normalization`]).
//! - **Protocols** `static` and `edit10` (every extrusion depth x1.1 in the prediction
//!   and the ground truth, via [`freecad_bridge::Session::scale_extrusions`]).
//! - CadQueryEval-style extra columns: watertight, components, bounding box within 1 mm per
//!   sorted extent, volume within 2%.
//!
//! The kernel work (building models, booleans, meshing) runs in FreeCAD workers of a
//! [`WorkerPool`]; sampling, nearest neighbours (a k-d tree with tight node boxes, see
//! `kdtree.rs` for why not a general-purpose crate), voxels and the
//! reductions run here, in a fixed order, so a report is the same to the last digit for the
//! same inputs whatever the number of workers or threads.
//!
//! ```no_run
//! use eval::{EvalOptions, Normalization, Protocol, evaluate, pair_paths};
//! use freecad_bridge::{WorkerConfig, WorkerPool};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Predictions and ground truths pair up by file stem.
//! let pairs = pair_paths("out/predictions".as_ref(), "data/ground_truth".as_ref())?;
//! let options = EvalOptions { protocol: Protocol::Edit10, normalization: Normalization::UnitCube, ..Default::default() };
//! // The binary that runs `freecad_bridge::worker_main()` for its `worker` subcommand.
//! let pool = WorkerPool::new(WorkerConfig::new("vision2cad"), 2);
//! let report = evaluate(&pool, &pairs, &options, || {})?;
//! print!("{}", report.table());
//! println!("{}", serde_json::to_string_pretty(&report)?);
//! # Ok(())
//! # }
//! ```

mod distance;
mod error;
mod kdtree;
mod mesh;
mod normalize;
mod pairs;
mod pipeline;
mod report;
mod sample;
mod voxel;

use freecad_bridge::WorkerPool;
use serde::{Deserialize, Serialize};

pub use distance::{SurfaceDistances, surface_distances};
pub use error::EvalError;
pub use kdtree::KdTree;
pub use mesh::{Mesh, Topology, topology};
pub use normalize::{FLIPS, Normalization, flipped, principal_axes, transform};
pub use pairs::{ModelKind, Pair, pair_paths};
pub use pipeline::{
    ANGULAR_DEFLECTION, BBOX_TOLERANCE, Detailed, EDIT_FACTOR, LINEAR_DEFLECTION, MERGE_TOLERANCE, Phase, Stages,
    VOLUME_TOLERANCE, evaluate_pair, evaluate_pair_in_phases, exact_iou,
};
pub use report::{IouMethod, Report, SampleResult};
pub use sample::{Role, SEED_CONVENTION, sample_surface, seed_for};
pub use voxel::{RESOLUTION as VOXEL_RESOLUTION, voxel_iou};

/// Points per shape unless told otherwise.
pub const DEFAULT_POINTS: usize = 8192;

/// Which models are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// The prediction against the ground truth as they are.
    #[default]
    Static,
    /// Both after every extrusion depth is multiplied by 1.1.
    Edit10,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Static => "static",
            Protocol::Edit10 => "edit10",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "static" => Ok(Protocol::Static),
            "edit10" => Ok(Protocol::Edit10),
            other => Err(format!("unknown protocol {other} (expected static or edit10)")),
        }
    }
}

/// How to evaluate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalOptions {
    pub protocol: Protocol,
    pub normalization: Normalization,
    /// Points sampled per shape.
    pub points: usize,
    /// Also compute the voxel IoU and the column IoU of every sample (reported as `iou_voxel`
    /// and `iou_column`).
    pub voxel_check: bool,
    /// Use the voxel IoU for every sample and skip the kernel booleans (faster, approximate;
    /// the samples say `iou_method: voxel`).
    pub voxel_only: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            protocol: Protocol::Static,
            normalization: Normalization::UnitCube,
            points: DEFAULT_POINTS,
            voxel_check: false,
            voxel_only: false,
        }
    }
}

/// Evaluate every pair on the pool's workers; `done` is called after each sample (for a
/// progress bar). Samples come back in the order of `pairs`. Fails on the first ground truth
/// (in pair order) that is missing or cannot be built, or when the workers cannot run.
pub fn evaluate(
    pool: &WorkerPool,
    pairs: &[Pair],
    options: &EvalOptions,
    done: impl Fn() + Sync,
) -> Result<Report, EvalError> {
    let samples = evaluate_detailed(pool, pairs, options, done)?.into_iter().map(|d| d.result).collect();
    Ok(Report::new(options, samples))
}

/// [`evaluate`], keeping meshes and timings (for benchmarks).
pub fn evaluate_detailed(
    pool: &WorkerPool,
    pairs: &[Pair],
    options: &EvalOptions,
    done: impl Fn() + Sync,
) -> Result<Vec<Detailed>, EvalError> {
    if options.points == 0 {
        return Err(EvalError::Pairing("the number of points must be at least 1".into()));
    }
    for pair in pairs {
        if !pair.gt.is_file() {
            return Err(EvalError::MissingGroundTruth { path: pair.gt.clone() });
        }
    }
    // Each sample in a worker that has done nothing else: FreeCAD's numbers depend on what
    // its process did before, and a report must not depend on the order samples reach the
    // workers, nor on their number.
    let pool = pool.clone().with_fresh_worker_per_item();
    let phases: Vec<Phase> = pairs.iter().map(|_| Phase::default()).collect();
    let items: Vec<(&Pair, &Phase)> = pairs.iter().zip(&phases).collect();
    let results = pool.map(
        &items,
        |session, (pair, phase)| Ok(evaluate_pair_in_phases(session, pair, options, phase)),
        |_| done(),
    );
    results
        .into_iter()
        .zip(items)
        .map(|(r, (pair, phase))| match r {
            // Every attempt lost its worker. Building the prediction each time: the
            // prediction crashes or hangs the kernel. Anywhere else: the evaluator failed.
            Err(fault @ freecad_bridge::BridgeError::KernelFault { .. }) => {
                let result = if phase.building_prediction() {
                    SampleResult::not_compiled(pair, format!("the prediction crashes the kernel: {fault}"))
                } else {
                    SampleResult::not_scored(pair, format!("{} failed: {fault}", phase.name()))
                };
                Ok(Detailed { result, meshes: None, stages: pipeline::Stages::default() })
            }
            r => r.map_err(EvalError::Bridge).and_then(|r| r),
        })
        .collect()
}
