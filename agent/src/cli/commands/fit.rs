//! `vision2cad fit`: a finished program's numbers fitted to a target image (the loop's fit
//! at END, for a program written elsewhere).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use vision2cad::config::Config;
use vision2cad::fit::to_image::fit_to_image;
use vision2cad::register::Target;
use vision2cad::report::write_json;
use vision2cad::vlm::Sphere;

use crate::cli::WorkerArgs;
use crate::cli::files::{read_program, write_outputs};

#[derive(Debug, clap::Args)]
pub struct FitArgs {
    /// The program (JSON, see `vision2cad schema`), in any units: the target's framing is
    /// found from the program's own model.
    pub program: PathBuf,
    /// The target image: the part on a plain background, seen from the views' direction
    /// (`direction` in --config; isometric from +X, -Y, +Z by default).
    #[arg(long)]
    pub image: PathBuf,
    /// Output directory (created if missing): program.json (the fitted program, each
    /// sketch as solved), model.FCStd, model.step, model.glb, state.json, and fit.json (the
    /// framing found and what the fit did to each feature).
    #[arg(long)]
    pub out: PathBuf,
    /// S_t as `X,Y,Z,R` in the program's units (a reconstruction's: the last `register`
    /// event of its trace.jsonl). Without it, S_t is the circle around the model's outline,
    /// scaled (0.7 to 1.3) and moved to where the model's outline overlaps the target's most.
    #[arg(long, value_parser = parse_sphere)]
    pub sphere: Option<Sphere>,
    /// A TOML configuration: its `direction`, `view_size` and `fit_subpixel` are used.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &FitArgs) -> Result<ExitCode> {
    let config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    let program = read_program(&args.program)?;
    let image = image::open(&args.image)
        .with_context(|| format!("cannot read the target image {}", args.image.display()))?
        .to_rgb8();
    let target = Target::analyse(image, &args.image.display().to_string())?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create output directory {}", args.out.display()))?;
    // The fitted program must not replace the one it was fitted from (a reconstruction's
    // own program.json, with --out its folder).
    let written = args.out.join("program.json");
    if let (Ok(a), Ok(b)) = (written.canonicalize(), args.program.canonicalize()) {
        anyhow::ensure!(
            a != b,
            "--out {} would overwrite the program being fitted ({}): choose another folder",
            args.out.display(),
            args.program.display()
        );
    }
    let mut session = args.worker.session()?;
    let (fitted, done) = fit_to_image(
        &mut session,
        &program,
        &target,
        args.sphere,
        config.direction,
        config.view_size,
        config.fit_subpixel,
    )
    .with_context(|| format!("cannot fit {}", args.program.display()))?;
    write_outputs(&mut session, &args.out)?;
    write_json(&written, &fitted)?;
    write_json(&args.out.join("fit.json"), &done)?;
    for feature in done.fit.features.iter().filter(|f| f.report.kept()) {
        eprintln!("command {}: {}", feature.command + 1, feature.report.describe());
    }
    eprintln!(
        "{}: {} of {} features' fits kept (the outlines overlapped {:.3} before); {} rebuilds in {:.1} s; wrote {}",
        args.program.display(),
        done.fit.kept(),
        done.fit.features.len(),
        done.overlap,
        done.fit.rebuilds,
        done.fit.seconds,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `X,Y,Z,R`: a sphere's centre and its radius.
fn parse_sphere(text: &str) -> Result<Sphere, String> {
    let numbers: Vec<f64> = text
        .split(',')
        .map(|v| v.trim().parse::<f64>().map_err(|_| format!("'{v}' is not a number")))
        .collect::<Result<_, _>>()?;
    match numbers[..] {
        [x, y, z, r] if [x, y, z, r].iter().all(|v| v.is_finite()) && r > 0.0 => {
            Ok(Sphere { center: [x, y, z], radius: r })
        }
        _ => Err(format!("expected X,Y,Z,R with a positive radius, got '{text}'")),
    }
}
