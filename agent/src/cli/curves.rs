//! The curves of a `run --vlm sim --vary KEY=...` sweep: static mIoU, static CR and edit10
//! mIoU against the varied rate, one line per configuration, as a table (`curves.md`,
//! `curves.json`, with the sample count of every point) and a chart (`curves.svg`, drawn
//! with plotters, and `curves.png`, the SVG rasterised by resvg with the bundled font).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde_json::{Value, json};

use vision2cad::batch::{ProtocolSummary, RunResults};

use crate::cli::files::write_atomic;

const FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSansCondensed-Bold.ttf");

/// One point of a curve: the rate, the metric (None when nothing compiled) and its samples.
type Point = (f64, Option<f64>, u64);

/// The metrics drawn, with where they sit in a run's results and their sample count.
type Metric = (&'static str, &'static str, fn(&ProtocolSummary) -> Option<f64>, &'static str);
const METRICS: [Metric; 3] = [
    ("static mIoU", "static", |s| s.miou, "compiled"),
    ("static CR", "static", |s| Some(s.cr), "all"),
    ("edit10 mIoU", "edit10", |s| s.miou, "compiled"),
];

/// Writes curves.md, curves.json, curves.svg and curves.png into `out`. `rows` are the
/// sweep's runs, named `CONFIG_KEY=VALUE`.
pub fn write_curves(out: &Path, key: &str, rows: &[(String, RunResults)]) -> Result<()> {
    // config -> metric -> points
    let mut curves: BTreeMap<String, Vec<Vec<Point>>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (name, r) in rows {
        let Some((config, value)) = name.rsplit_once(&format!("_{key}=")) else { continue };
        let Ok(x) = value.parse::<f64>() else { continue };
        if !order.contains(&config.to_string()) {
            order.push(config.to_string());
        }
        let entry = curves.entry(config.to_string()).or_insert_with(|| vec![Vec::new(); METRICS.len()]);
        for (k, (_, protocol, value, count)) in METRICS.iter().enumerate() {
            let Some(summary) = r.protocol(protocol) else { continue };
            let samples = if *count == "all" { summary.n as u64 } else { summary.compiled() };
            entry[k].push((x, value(summary), samples));
        }
    }
    anyhow::ensure!(!curves.is_empty(), "no runs of the sweep vary {key}");

    let mut md = format!("# {key}: the curves of the simulated VLM\n\nEach cell: the metric (samples behind it).\n");
    let mut json_curves = serde_json::Map::new();
    for (k, (title, ..)) in METRICS.iter().enumerate() {
        md.push_str(&format!("\n## {title}\n\n| {key} |"));
        for config in &order {
            md.push_str(&format!(" {config} |"));
        }
        md.push_str(&format!("\n|---|{}\n", "---|".repeat(order.len())));
        let xs: Vec<f64> = curves[&order[0]][k].iter().map(|p| p.0).collect();
        for (i, x) in xs.iter().enumerate() {
            md.push_str(&format!("| {x} |"));
            for config in &order {
                let cell = match curves[config][k].get(i) {
                    Some((_, Some(y), n)) => format!(" {y:.4} ({n}) |"),
                    Some((_, None, n)) => format!(" - ({n}) |"),
                    None => " |".into(),
                };
                md.push_str(&cell);
            }
            md.push('\n');
        }
        let per_config: serde_json::Map<String, Value> = order
            .iter()
            .map(|c| {
                let points: Vec<Value> =
                    curves[c][k].iter().map(|(x, y, n)| json!({key: x, "value": y, "samples": n})).collect();
                (c.clone(), Value::Array(points))
            })
            .collect();
        json_curves.insert(title.to_string(), Value::Object(per_config));
    }
    write_atomic(&out.join("curves.md"), md.as_bytes())?;
    write_atomic(&out.join("curves.json"), serde_json::to_string_pretty(&json_curves)?.as_bytes())?;
    let svg = chart(key, &order, &curves)?;
    write_atomic(&out.join("curves.svg"), svg.as_bytes())?;
    write_atomic(&out.join("curves.png"), &rasterise(&svg)?)?;
    eprintln!("wrote {}/{{curves.md, curves.json, curves.svg, curves.png}}", out.display());
    Ok(())
}

fn chart(key: &str, order: &[String], curves: &BTreeMap<String, Vec<Vec<Point>>>) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1500, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let panels = root.split_evenly((1, METRICS.len()));
        let x_max = curves.values().flat_map(|m| m[0].iter().map(|p| p.0)).fold(0.0f64, f64::max).max(1e-9);
        for (k, panel) in panels.iter().enumerate() {
            let title = METRICS[k].0;
            let mut chart = ChartBuilder::on(panel)
                .caption(title, ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(55)
                .build_cartesian_2d(0.0..x_max * 1.05, 0.0..1.02)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            chart
                .configure_mesh()
                .x_desc(key)
                .y_desc(title)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for (i, config) in order.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let points: Vec<(f64, f64)> =
                    curves[config][k].iter().filter_map(|(x, y, _)| Some((*x, (*y)?))).collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .label(config.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .position(SeriesLabelPosition::LowerLeft)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(svg)
}

/// The SVG as PNG bytes, its text set in the bundled font.
fn rasterise(svg: &str) -> Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    let mut fonts = usvg::fontdb::Database::new();
    fonts.load_font_data(FONT.to_vec());
    let family = fonts.faces().next().and_then(|f| f.families.first().map(|(name, _)| name.clone()));
    if let Some(family) = family {
        fonts.set_sans_serif_family(family);
    }
    let options = usvg::Options { fontdb: std::sync::Arc::new(fonts), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &options).context("the chart is not valid SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).context("the chart has no size")?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let image = image::RgbaImage::from_raw(size.width(), size.height(), pixmap.take())
        .context("cannot convert the chart's pixels")?;
    let mut png = Vec::new();
    image::DynamicImage::ImageRgba8(image)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .context("cannot encode the chart as PNG")?;
    Ok(png)
}
