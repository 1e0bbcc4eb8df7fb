//! `vision2cad render`: the views the VLM sees, as PNG files with JSON metadata.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use freecad_bridge::{Command, Session};
use views::{LabelKinds, Options, View, Window};

use crate::cli::WorkerArgs;
use crate::cli::files::{open_model, read_program, write_atomic};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewKind {
    /// Gray part, black edges, white background (like benchmark input images).
    Target,
    /// The model with entity-ID labels and leader lines.
    Tagged,
    /// A sketch plane face-on with the [0,1] view-coordinate grid (needs --sketch-plane).
    Sketch,
    /// A program's last command as a candidate: added and removed material highlighted.
    Preview,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LabelKind {
    Edges,
    Faces,
    Vertices,
}

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// A .step/.stp, .FCStd or program .json file (preview: a program).
    pub model: PathBuf,
    #[arg(long, value_enum, default_value = "tagged")]
    pub view: ViewKind,
    /// The PNG to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Width and height in pixels.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(64..=4096))]
    pub size: u32,
    /// For --view sketch: the plane, `XY`, `XZ`, `YZ`, a planar face `F3` or a plane `P1`.
    #[arg(long)]
    pub sketch_plane: Option<String>,
    /// For --view sketch: the square of the plane the grid covers, `u0,v0,size` in the
    /// plane's local coordinates (default: the part's outline with a margin).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub window: Option<Vec<f64>>,
    /// Entities to label in a tagged view.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "edges")]
    pub labels: Vec<LabelKind>,
    /// Also write the view's metadata (camera, labels, unlabelled, sketch maps) as JSON.
    #[arg(long)]
    pub meta: Option<PathBuf>,
    /// For --view preview: show the candidate beside this target image.
    #[arg(long)]
    pub target: Option<PathBuf>,
    /// View from this direction (x,y,z towards the eye); default the isometric 1,-1,1.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub direction: Option<Vec<f64>>,
    #[arg(long)]
    pub perspective: bool,
    /// Draw hidden edges dashed.
    #[arg(long)]
    pub hidden_edges: bool,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

pub fn run(args: &RenderArgs) -> Result<ExitCode> {
    let is_png = args.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("png"));
    anyhow::ensure!(is_png, "--out must name a .png file, got {}", args.out.display());
    let mut opts = Options {
        size: args.size,
        perspective: args.perspective,
        hidden_edges: args.hidden_edges,
        labels: LabelKinds {
            edges: args.labels.contains(&LabelKind::Edges),
            faces: args.labels.contains(&LabelKind::Faces),
            vertices: args.labels.contains(&LabelKind::Vertices),
        },
        ..Options::default()
    };
    for (name, values) in [("--direction", &args.direction), ("--window", &args.window)] {
        if let Some(v) = values {
            anyhow::ensure!(v.len() == 3, "{name} takes three comma-separated numbers, got {}", v.len());
        }
    }
    if let Some(d) = &args.direction {
        anyhow::ensure!(
            d.iter().all(|x| x.is_finite()) && d.iter().any(|x| *x != 0.0),
            "--direction must be a non-zero vector"
        );
        opts.direction = [d[0], d[1], d[2]];
    }
    if args.view == ViewKind::Sketch && args.sketch_plane.is_none() {
        bail!("--view sketch needs --sketch-plane (XY, XZ, YZ, a face ID such as F3, or a plane such as P1)");
    }
    let target = match &args.target {
        Some(path) => {
            Some(image::open(path).with_context(|| format!("cannot read target image {}", path.display()))?.to_rgb8())
        }
        None => None,
    };
    let mut session = args.worker.session()?;
    let view = match args.view {
        ViewKind::Preview => preview(&mut session, &args.model, &opts, target.as_ref())?,
        kind => {
            let known = args.model.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
            anyhow::ensure!(
                matches!(known.as_deref(), Some("step" | "stp" | "fcstd" | "json")),
                "cannot render {}: expected a .step/.stp, .FCStd or program .json file",
                args.model.display()
            );
            open_model(&mut session, &args.model)?;
            anyhow::ensure!(!session.state().empty, "{} holds no solid to render", args.model.display());
            let scene = views::scene_of(&mut session)?;
            match kind {
                ViewKind::Target => views::target(&scene, &opts),
                ViewKind::Tagged => views::tagged(&scene, session.state(), &opts),
                _ => {
                    let plane = args.sketch_plane.as_deref().unwrap_or("XY");
                    let frame = session.plane_frame(plane)?;
                    let window = args.window.as_ref().map(|w| Window { u0: w[0], v0: w[1], size: w[2] });
                    if let Some(w) = window {
                        anyhow::ensure!(w.size.is_finite() && w.size > 0.0, "--window size must be positive");
                    }
                    views::sketch(&scene, session.state(), &frame, window, &opts)
                }
            }
        }
    };
    write_view(&view, &args.out, args.meta.as_deref())?;
    eprintln!(
        "wrote {} ({}x{}, {} labels, {} unlabelled)",
        args.out.display(),
        view.image.width(),
        view.image.height(),
        view.meta.labels.len(),
        view.meta.unlabelled.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn preview(session: &mut Session, model: &Path, opts: &Options, target: Option<&image::RgbImage>) -> Result<View> {
    let is_program = model.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    anyhow::ensure!(is_program, "--view preview needs a program .json: its last command is the candidate");
    let program = read_program(model)?;
    let mut commands: Vec<&Command> = program.commands.iter().collect();
    while commands.last().is_some_and(|c| matches!(c, Command::End)) {
        commands.pop();
    }
    let Some((candidate, before)) = commands.split_last() else {
        bail!("{} has no command to preview", model.display());
    };
    for (index, command) in before.iter().enumerate() {
        session.execute(command).with_context(|| format!("step {index} ({}) failed", command.op()))?;
    }
    let diagonal = session.state().bbox.as_ref().map_or(10.0, |b| b.diagonal());
    let p = session
        .preview(candidate, views::deflection_for(diagonal))
        .with_context(|| format!("the candidate (step {}, {}) failed", before.len(), candidate.op()))?;
    Ok(views::preview(&p, opts, target))
}

fn write_view(view: &View, out: &Path, meta: Option<&Path>) -> Result<()> {
    let folder = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    anyhow::ensure!(folder.is_dir(), "cannot write {}: the folder {} does not exist", out.display(), folder.display());
    let name = out.file_name().map_or("view".into(), |n| n.to_string_lossy().into_owned());
    let tmp = folder.join(format!(".{name}.partial.png"));
    view.image.save(&tmp).with_context(|| format!("cannot write {}", out.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot write {}", out.display()))?;
    if let Some(path) = meta {
        write_atomic(path, serde_json::to_string_pretty(&view.meta)?.as_bytes())?;
    }
    Ok(())
}
