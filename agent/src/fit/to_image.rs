//! A finished program fitted to a target image outside the loop (`vision2cad fit`).
//!
//! The loop fits a program it built step by step; a program written elsewhere (by hand, by
//! another tool, or a reconstruction with one number misread on purpose) meets the same fit
//! here. S_t is found as the loop would have it at END: the circle around the model's own
//! outline seen from the target's direction stands for the circle around the target's part,
//! and registration then moves its centre so the two outlines overlap most. The fit at END
//! ([`super::program::fit_program`]) then runs with no step's fit to judge again.

use freecad_bridge::{BridgeError, Program, Session, StepError};
use serde::{Deserialize, Serialize};
use views::{Options, Scene};

use super::TargetPixels;
use super::program::{ProgramFit, fit_program};
use crate::register::{self, Target};
use crate::vlm::Sphere;

/// What `fit_to_image` did: the framing it fitted in and the fit's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageFit {
    /// S_t as registration left it, in the program's units.
    pub sphere: Sphere,
    /// Silhouette IoU of the program's model and the target at that framing, before the fit.
    pub overlap: f64,
    pub fit: ProgramFit,
}

/// Why a program could not be fitted.
#[derive(Debug, thiserror::Error)]
pub enum ImageFitError {
    #[error("command {} ({}) of the program does not build: {}", .0.index + 1, .0.op, .0.error)]
    Build(StepError),
    #[error(transparent)]
    Kernel(#[from] BridgeError),
}

/// Render size for finding the model's outline circle.
const CIRCLE_SIZE: u32 = 500;

/// Fit `program` to `target` seen from `direction`, the views `view_size` pixels square,
/// on S_t = `sphere` when given (a reconstruction's own, from its trace), else on the
/// framing found from the model ([`framing`]); with `subpixel`, measuring to the target's
/// lines where its own image has them ([`super::subpixel`]). Returns the program to keep
/// (as solved) and what was done; the session then holds that program's document. A program that does not
/// build is an error.
pub fn fit_to_image(
    session: &mut Session,
    program: &Program,
    target: &Target,
    sphere: Option<Sphere>,
    direction: [f64; 3],
    view_size: u32,
    subpixel: bool,
) -> Result<(Program, ImageFit), ImageFitError> {
    let (solved, built) = session.execute_program_solved(program);
    built.map_err(ImageFitError::Build)?;
    let diagonal = session.state().bbox.map_or(1.0, |b| b.diagonal());
    let deflection = views::deflection_for(diagonal);
    let scene = Scene::new(&session.tessellate(deflection, 0.2)?, session.state());
    let pixels = TargetPixels::new(
        view_size,
        target.framed_mask(view_size, views::TAGGED_FILL),
        &target.framed_lines(view_size, views::TAGGED_FILL),
    )
    .with_native(target.native_lines(view_size, views::TAGGED_FILL));
    let pixels = if subpixel { pixels.with_refined_lines() } else { pixels };
    let registered = match sphere {
        Some(sphere) => register::refit(target, &scene, sphere, direction, register::Prior::Registered),
        None => framing(target, &scene, direction),
    };
    let opts = Options {
        size: view_size,
        direction,
        sphere: Some((registered.sphere.center, registered.sphere.radius)),
        ..Options::default()
    };
    let (fitted, fit) = fit_program(session, &solved, &[], &pixels, &opts, deflection)?;
    Ok((fitted, ImageFit { sphere: registered.sphere, overlap: registered.overlap, fit }))
}

/// How much larger or smaller than the model's outline circle S_t may be, as the steps of
/// the search: a picture has no scale, and a model with one size read wrong has another
/// outline than the part.
const SCALES: std::ops::RangeInclusive<i32> = -12..=12;
const SCALE_STEP: f64 = 0.025;

/// S_t for a program whose framing is not known: the circle around the model's outline
/// ([`outline_circle`]) scaled by the factor, within 0.7 to 1.3, at which registration
/// overlaps the two outlines most (the smallest change wins a tie).
fn framing(target: &Target, scene: &Scene, direction: [f64; 3]) -> register::Fit {
    let circle = outline_circle(scene, direction);
    let mut best: Option<(i32, register::Fit)> = None;
    for k in SCALES {
        let sphere = Sphere { radius: circle.radius * (1.0 + SCALE_STEP * f64::from(k)), ..circle };
        let fit = register::refit(target, scene, sphere, direction, register::Prior::Guess);
        let better = match &best {
            None => true,
            Some((j, b)) => fit.overlap > b.overlap + 1e-9 || (fit.overlap >= b.overlap - 1e-9 && k.abs() < j.abs()),
        };
        if better {
            best = Some((k, fit));
        }
    }
    best.map_or_else(|| register::refit(target, scene, circle, direction, register::Prior::Guess), |(_, fit)| fit)
}

/// The circle around the model's outline seen from `direction`, as a sphere in model units:
/// what S_t is when the model matches the target (the target's part circle, found the same
/// way by [`Target::analyse`], is drawn as S_t's).
fn outline_circle(scene: &Scene, direction: [f64; 3]) -> Sphere {
    let (center, radius) = scene.bounding_sphere();
    let view = views::target(scene, &Options { size: CIRCLE_SIZE, direction, ..Options::default() });
    let fallback = Sphere { center: center.into(), radius };
    let Ok(outline) = Target::analyse(view.image, "the model's outline") else { return fallback };
    let per_unit = f64::from(CIRCLE_SIZE) * views::TARGET_FILL / 2.0 / radius;
    let half = f64::from(CIRCLE_SIZE) / 2.0;
    let camera = &view.meta.camera;
    let (dx, dy) = ((outline.center_px[0] - half) / per_unit, (outline.center_px[1] - half) / per_unit);
    let at = |k: usize| center[k] + camera.right[k] * dx - camera.up[k] * dy;
    Sphere { center: [at(0), at(1), at(2)], radius: outline.radius_px / per_unit }
}
