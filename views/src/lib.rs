//! # views
//!
//! What the VLM sees. The model reaches the VLM only through these pictures, so they are
//! drawn here, in Rust, from the FreeCAD worker's tessellation and entity table:
//!
//! - [`target`]: the part as image-to-CAD benchmarks show it (gray, black edges, white);
//! - [`tagged`]: the model with an ID label (`E12`, `F3`, `V7`) on every visible entity,
//!   joined to it by a leader line, laid out around the border so labels never overlap;
//! - [`sketch`]: a sketch plane face-on, with a [0,1] x [0,1] view-coordinate grid, the
//!   existing edges projected onto it and labelled, and the exact view-to-plane map;
//! - [`preview`]: a candidate feature's added and removed material, beside the target.
//!
//! Every view comes with [`Meta`] (camera, label boxes and anchors, unlabelled entities,
//! sketch maps) and per-pixel face and edge IDs. It is its own crate because the loop, the
//! GERD exporter and reports all draw with it, and it needs no FreeCAD of its own.
//!
//! ```no_run
//! use freecad_bridge::{Session, WorkerConfig, parse_program};
//! use views::{Options, Scene};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut session = Session::new(WorkerConfig::new("vision2cad"))?;
//! session.execute_program(&parse_program(&std::fs::read_to_string("assets/programs/box.json")?)?)?;
//! let scene = Scene::new(&session.tessellate(0.05, 0.2)?, session.state());
//! let view = views::tagged(&scene, session.state(), &Options::default());
//! view.image.save("tagged.png")?;
//! println!("{}", serde_json::to_string(&view.meta)?);
//! # Ok(())
//! # }
//! ```

pub mod camera;
mod draw;
pub mod glb;
pub mod labels;
mod overlay;
pub mod raster;
pub mod scene;
mod view;

pub use camera::{Camera, ISOMETRIC, Projection, axes_in_view, axes_on_screen};
pub use glb::glb;
pub use overlay::{
    LINE_REACH, LineOverlap, ORIENTATION_BINS, Overlap, Piece, alignment, best_shift, distance_to, extent,
    line_overlap, orientation_bin, oriented_distances, outline_corners, profile, silhouette, silhouette_overlap,
    silhouette_pieces,
};
pub use raster::{IdBuffers, Style};
pub use scene::{Material, NO_ENTITY, Scene};
pub use view::{
    LabelKinds, LabelMeta, MIN_EDGE_PIXELS, Meta, NO_ROOM, Options, PREVIEW_FILL, ProjectedEdge, SEAM, SketchMeta,
    TAGGED_FILL, TARGET_FILL, Unlabelled, View, ViewToWorld, Window, append_panel, axis_name, caption, draw_axes,
    in_sketch_picture, outline, outline_camera, plane_inset, preview, sketch, tagged, target,
};

/// A tessellation tolerance suited to a view of a part of this size (bounding diagonal).
pub fn deflection_for(diagonal: f64) -> f64 {
    (diagonal * 1e-3).max(1e-4)
}

/// The session's current model, tessellated finely enough for a view of its size.
pub fn scene_of(session: &mut freecad_bridge::Session) -> Result<Scene, freecad_bridge::BridgeError> {
    let diagonal = session.state().bbox.map_or(1.0, |b| b.diagonal());
    let tessellation = session.tessellate(deflection_for(diagonal), 0.2)?;
    Ok(Scene::new(&tessellation, session.state()))
}
