//! # eval
//!
//! Metrics and protocols for image-to-CAD evaluation: compile rate, IoU, Chamfer and
//! Hausdorff distances under the `static` and `edit10` protocols, with the conventions of
//! the project's metrics document. It is empty until that work lands (see the project's
//! issues); the `edit10` protocol already has its foundation in
//! `freecad_bridge::Session::scale_extrusions`.
