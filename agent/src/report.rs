//! What a reconstruction leaves behind: the model files (`model.FCStd`, `model.step`,
//! `state.json`) and `report.html`, one self-contained page that walks through the steps
//! of `trace.jsonl` (read as [`TraceEvent`]s).

use std::fmt::Write as _;
use std::path::Path;

use base64::Engine as _;
use freecad_bridge::Session;
use serde::Serialize;
use serde_json::Value;

use crate::error::LoopError;
use crate::events::{TraceEvent, read_trace};
use crate::vlm::Usage;

fn io_error(path: &Path, source: std::io::Error) -> LoopError {
    LoopError::io(path, source)
}

/// Write JSON under a temporary name and rename it into place.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), LoopError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| io_error(path, std::io::Error::other(e)))?;
    write_atomic(path, text.as_bytes())
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LoopError> {
    use std::io::Write as _;
    // A temporary name of its own: shards on shared storage may write the same file at once.
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Readable like any file the user makes (0644 under the usual umask), not the temporary
    // file's private 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".partial-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(|e| io_error(dir, e))?;
    tmp.write_all(bytes).map_err(|e| io_error(tmp.path(), e))?;
    tmp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(())
}

/// `model.FCStd`, `model.step` and `model.glb` (when there is a solid) and `state.json`,
/// each written under a temporary name and renamed, so a reader never sees half a file.
pub fn write_model(session: &mut Session, dir: &Path) -> Result<(), LoopError> {
    let fcstd = dir.join("model.FCStd");
    let step = dir.join("model.step");
    let tmp_fcstd = dir.join(".model.partial.FCStd");
    let tmp_step = dir.join(".model.partial.step");
    let has_solid = !session.state().empty;
    session.save(Some(&tmp_fcstd), has_solid.then_some(tmp_step.as_path()))?;
    std::fs::rename(&tmp_fcstd, &fcstd).map_err(|e| io_error(&fcstd, e))?;
    let glb = dir.join("model.glb");
    if has_solid {
        std::fs::rename(&tmp_step, &step).map_err(|e| io_error(&step, e))?;
        // For the report's 3D view and any glTF viewer.
        let diagonal = session.state().bbox.map_or(100.0, |b| b.diagonal());
        let tessellation = session.tessellate(views::deflection_for(diagonal), 0.3)?;
        write_atomic(&glb, &views::glb(&tessellation))?;
    } else {
        // Files from an earlier run would contradict this document.
        for stale in [&step, &glb] {
            if stale.exists() {
                std::fs::remove_file(stale).map_err(|e| io_error(stale, e))?;
            }
        }
    }
    write_json(&dir.join("state.json"), session.state())
}

/// Text made safe for HTML (element content and quoted attributes).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn image_tag(dir: &Path, name: &str) -> String {
    match std::fs::read(dir.join(name)) {
        Ok(bytes) => format!(
            "<figure><img src=\"data:image/png;base64,{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>",
            base64::engine::general_purpose::STANDARD.encode(bytes),
            escape(name),
            escape(name)
        ),
        Err(_) => format!("<p class=\"missing\">{} is missing</p>", escape(name)),
    }
}

/// `report.html` from `trace.jsonl`: the steps with their images, the commands and the
/// accept and reject reasons, images embedded so the page stands alone.
pub fn write_html(dir: &Path) -> Result<(), LoopError> {
    let trace_path = dir.join("trace.jsonl");
    let events = read_trace(&trace_path).map_err(|e| io_error(&trace_path, std::io::Error::other(e)))?;
    let mut h = String::new();
    h.push_str(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>vision2cad reconstruction</title><style>\
        body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}\
        figure{display:inline-block;margin:4px}img{max-width:500px;border:1px solid #ccc}\
        pre{background:#f6f6f6;padding:6px;white-space:pre-wrap;font-size:12px}\
        .ok{color:#1a7f37}.bad{color:#b42318}.call{border-left:3px solid #ccd;padding-left:8px;margin:8px 0}\
        details summary{cursor:pointer;color:#555}.wide img{max-width:100%}\
        .summary{background:#f4f6fa;padding:8px 12px;border-radius:6px}\
        .timeline figure{width:130px;vertical-align:top}.timeline img{max-width:128px}.timeline a{color:#222;text-decoration:none}</style></head><body>\n<h1>vision2cad reconstruction</h1>\n",
    );
    summary(&mut h, dir, &events);
    timeline(&mut h, dir, &events);
    let mut current_step = 0;
    for e in &events {
        match e {
            TraceEvent::Start { image, backend, config, prompts, .. } => {
                let _ = write!(
                    h,
                    "<p>Image <code>{}</code>, backend <b>{}</b>, prompts {}.</p><details><summary>configuration</summary><pre>{}</pre></details>",
                    escape(image),
                    escape(backend),
                    escape(prompts),
                    escape(&serde_json::to_string_pretty(config).unwrap_or_default())
                );
            }
            TraceEvent::Resume { steps, .. } => {
                let _ = write!(h, "<p><b>Resumed</b> after {steps} accepted steps.</p>");
            }
            TraceEvent::Call(call) => {
                if call.step != current_step && call.step > 0 {
                    current_step = call.step;
                    let _ = write!(h, "<h2 id=\"step-{current_step}\">Step {current_step}</h2>");
                }
                let _ = write!(
                    h,
                    "<div class=\"call\"><b>{}</b> (attempt {}, try {}{}{})<br>",
                    escape(call.stage.name()),
                    call.attempt,
                    call.round,
                    call.usage.as_ref().map(usage_text).unwrap_or_default(),
                    if call.cached { ", from the response cache" } else { "" }
                );
                for img in call.request.images.iter().filter(|i| *i != "views/target.png") {
                    // The preview's two panels and the two overlays at their full size.
                    if img.ends_with("_preview.png") || img.ends_with("_overlay.png") {
                        let _ = write!(h, "<div class=\"wide\">{}</div>", image_tag(dir, img));
                    } else {
                        h.push_str(&image_tag(dir, img));
                    }
                }
                let _ = write!(
                    h,
                    "<details><summary>request</summary><pre>{}</pre></details><pre>{}</pre>",
                    escape(&call.request.text),
                    escape(&compact(call.answer.as_deref().unwrap_or("")))
                );
                for err in &call.errors {
                    let _ = write!(h, "<p class=\"bad\">invalid: {}</p>", escape(err));
                }
                // The simulated model's own mistakes, where it made them.
                for injected in &call.injected {
                    let _ = write!(h, "<p class=\"bad\">simulated error: {}</p>", escape(&compact_json(injected)));
                }
                if let Some(err) = &call.error {
                    let _ = write!(h, "<p class=\"bad\">{}</p>", escape(err));
                }
                h.push_str("</div>");
            }
            TraceEvent::Rejected { reasons, .. } => {
                let _ = write!(h, "<p class=\"bad\">Rejected: {}</p>", escape(&reasons.join("; ")));
            }
            TraceEvent::Execute(x) if !x.ok => {
                let error = x.error.as_deref().unwrap_or("");
                let _ = write!(h, "<p class=\"bad\">Candidate failed: {}</p>", escape(error));
            }
            TraceEvent::Execute(x) => {
                let verified = if x.verified == Some(true) { "accepted" } else { "committed without verification" };
                let revises = revised_numbers(x).map(|n| format!(", replacing {n}")).unwrap_or_default();
                let _ = write!(
                    h,
                    "<p class=\"ok\">{verified}{revises}:</p><pre>{}</pre>",
                    escape(&x.commands.iter().map(compact_json).collect::<Vec<_>>().join("\n"))
                );
            }
            TraceEvent::Retrieved { hits, below_threshold, tokens, .. } => {
                let named = |hits: &[gerd::retrieve::Hit]| {
                    hits.iter()
                        .map(|h| format!("{} step {} ({})", h.part, h.step, (f64::from(h.score) * 1e4).round() / 1e4))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if !hits.is_empty() {
                    let _ = write!(h, "<p>Retrieved examples: {} (about {tokens} tokens in)</p>", escape(&named(hits)));
                }
                if !below_threshold.is_empty() {
                    let _ = write!(h, "<p>Not shown, below the threshold: {}</p>", escape(&named(below_threshold)));
                }
            }
            TraceEvent::Rag { on, reason } => {
                let _ = write!(h, "<p>RAG {}: {}</p>", if *on { "on" } else { "off" }, escape(reason));
            }
            TraceEvent::Snapped { sketch, constraints, .. } => {
                let _ = write!(
                    h,
                    "<p>PGR snapping on {}: {}</p>",
                    escape(sketch),
                    escape(&serde_json::to_string(constraints).unwrap_or_default())
                );
            }
            TraceEvent::Dropped { sketch, constraints, .. } => {
                let _ = write!(
                    h,
                    "<p>Redundant constraints dropped from {}: {}</p>",
                    escape(sketch),
                    escape(&constraints.join(", "))
                );
            }
            TraceEvent::ProgramFit { report } => {
                let _ = write!(
                    h,
                    "<h2>Fit at END</h2><p>{} of {} features moved ({} rebuilds, {:.2} s).</p><ul>",
                    report.kept(),
                    report.features.len(),
                    report.rebuilds,
                    report.seconds
                );
                for f in &report.features {
                    let text = if f.report.kept() {
                        f.report.describe()
                    } else {
                        format!("stays: {}", f.report.dropped.as_deref().unwrap_or("nothing moved"))
                    };
                    let _ = write!(h, "<li>command {}: {}</li>", f.command, escape(&text));
                }
                let _ = write!(h, "</ul>");
            }
            TraceEvent::OntoAxis { sketch, points, .. } => {
                let _ = write!(
                    h,
                    "<p>The revolve's profile crossed its axis by a hair: {points} point(s) of {} put on the axis.</p>",
                    escape(sketch)
                );
            }
            TraceEvent::HolesInside { sketch, circles, .. } => {
                let _ = write!(
                    h,
                    "<p>{circles} hole(s) of {} crossed the outline or lay just outside it: moved inside.</p>",
                    escape(sketch)
                );
            }
            TraceEvent::AgainstPart { sketch, moved, .. } => {
                let _ = write!(
                    h,
                    "<p>The pad of {} came out a solid of its own: its side nearest an edge of the part put a pixel \
                     past it, into the part (moved by up to {moved:.2} mm).</p>",
                    escape(sketch)
                );
            }
            TraceEvent::Fit { report, .. } => {
                let _ = if report.kept() {
                    write!(
                        h,
                        "<p>Fit: {} ({} rebuilds, {:.2} s).</p>",
                        escape(&report.describe()),
                        report.evaluations,
                        report.seconds
                    )
                } else {
                    write!(
                        h,
                        "<p>Fit dropped, the candidate stays as drawn: {} ({} rebuilds, {:.2} s).</p>",
                        escape(report.dropped.as_deref().unwrap_or("nothing moved")),
                        report.evaluations,
                        report.seconds
                    )
                };
            }
            TraceEvent::Skipped { step, reason } => {
                let _ = write!(h, "<h2>Step {step} set aside</h2><p>{}</p>", escape(reason));
            }
            TraceEvent::End { reason, .. } => {
                let _ = write!(h, "<h2>END</h2><p>{}</p>", escape(reason));
            }
            TraceEvent::Stop { outcome: o } => {
                let _ = write!(
                    h,
                    "<h2>Outcome</h2><p>{} steps accepted{}; {}; {} model calls, {} rejections, {} failed candidates, {} unverified commits; {:.2} s.</p>",
                    o.steps,
                    set_aside_text(&o.skipped_steps),
                    escape(&o.stop),
                    o.calls,
                    o.rejections,
                    o.failed_candidates,
                    o.unverified_commits,
                    o.seconds
                );
                if o.usage.input_tokens > 0 {
                    let _ = write!(h, "<p>Model usage:{}.</p>", usage_text(&o.usage).trim_start_matches(','));
                }
                if o.retrieval_tokens > 0 {
                    let _ = write!(
                        h,
                        "<p>Retrieved examples added about {} input tokens (estimated).</p>",
                        o.retrieval_tokens
                    );
                }
                if let Some(f) = &o.failure {
                    let _ = write!(h, "<p class=\"bad\">{}</p>", escape(f));
                }
            }
            TraceEvent::Register { .. } | TraceEvent::Accepted { .. } => {}
        }
    }
    h.push_str("\n</body></html>\n");
    write_atomic(&dir.join("report.html"), h.as_bytes())
}

/// One thumbnail per accepted step: the model as the next step saw it, captioned with what
/// the step did, linked to the step's section.
fn timeline(h: &mut String, dir: &Path, events: &[TraceEvent]) {
    let steps: Vec<(usize, String)> = events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Execute(x) if x.ok => {
                let ops: Vec<&str> =
                    x.commands.iter().map(|c| c.op()).filter(|op| !matches!(*op, "sketch" | "body")).collect();
                let what = revised_numbers(x).map_or_else(|| ops.join(", "), |n| format!("revised {n}"));
                Some((x.step, what))
            }
            _ => None,
        })
        .collect();
    if steps.is_empty() {
        return;
    }
    h.push_str("<h2>Steps</h2><div class=\"timeline\">");
    for (step, what) in steps {
        let name = format!("views/step{:02}_tagged.png", step + 1);
        let picture = match std::fs::read(dir.join(&name)) {
            Ok(bytes) => format!(
                "<img src=\"data:image/png;base64,{}\" alt=\"the model after step {step}\">",
                base64::engine::general_purpose::STANDARD.encode(bytes)
            ),
            Err(_) => String::new(),
        };
        let _ = write!(
            h,
            "<figure><a href=\"#step-{step}\">{picture}<figcaption>{step}. {}</figcaption></a></figure>",
            escape(&what)
        );
    }
    h.push_str("</div>\n");
}

/// ", 1200 tokens in, 80 out, cost 0.0041".
fn usage_text(usage: &Usage) -> String {
    let cost = usage.cost.map(|c| format!(", cost {c:.4}")).unwrap_or_default();
    format!(", {} tokens in, {} out{cost}", usage.input_tokens, usage.output_tokens)
}

/// The top of the report: the target beside the model as last shown, how the run ended,
/// what it cost, and the files it wrote.
fn summary(h: &mut String, dir: &Path, events: &[TraceEvent]) {
    h.push_str("<div class=\"summary\">");
    h.push_str(&image_tag(dir, "views/target.png"));
    let last_view = std::fs::read_dir(dir.join("views"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("_tagged.png"))
        .max();
    if let Some(name) = last_view {
        h.push_str(&image_tag(dir, &format!("views/{name}")));
    }
    match events.iter().rev().find_map(|e| if let TraceEvent::Stop { outcome } = e { Some(outcome) } else { None }) {
        Some(o) => {
            let class = if o.failure.is_some() { "bad" } else { "ok" };
            let _ = write!(
                h,
                "<p class=\"{class}\"><b>{}</b>: {} steps accepted{}; {} model calls, {} rejections, {} failed candidates, {} unverified commits{}; {:.1} s.</p>",
                if o.finished { "Finished" } else { "Stopped" },
                o.steps,
                set_aside_text(&o.skipped_steps),
                o.calls,
                o.rejections,
                o.failed_candidates,
                o.unverified_commits,
                if o.usage.input_tokens > 0 { usage_text(&o.usage) } else { String::new() },
                o.seconds
            );
            if o.retrieval_tokens > 0 {
                let _ = write!(h, "<p>Retrieval added about {} input tokens (estimated).</p>", o.retrieval_tokens);
            }
            if !o.finished {
                let _ = write!(h, "<p class=\"{class}\">{}</p>", escape(&o.stop));
            }
        }
        None => {
            h.push_str("<p class=\"bad\">The run has not ended (or was interrupted): the steps so far are below.</p>")
        }
    }
    if let Ok(glb) = std::fs::read(dir.join("model.glb")) {
        // The model embedded in the page, so the view works offline and from file://.
        let _ = write!(
            h,
            "<figure><canvas id=\"model3d\" width=\"500\" height=\"400\" style=\"width:500px;height:400px;border:1px solid #ccc;cursor:grab\"></canvas>\
             <figcaption id=\"model3d-note\">the model in 3D: drag to turn, wheel to zoom, double-click to reset</figcaption></figure>\
             <script type=\"application/octet-stream\" id=\"model3d-glb\">{}</script><script>{}</script>",
            base64::engine::general_purpose::STANDARD.encode(glb),
            include_str!("viewer.js")
        );
    }
    let links: Vec<String> = ["model.FCStd", "model.step", "model.glb", "program.json", "trace.jsonl"]
        .iter()
        .filter(|f| dir.join(f).is_file())
        .map(|f| format!("<a href=\"{f}\">{f}</a>"))
        .collect();
    let _ = writeln!(h, "<p>Files: {}</p></div>", links.join(" &middot; "));
}

/// An answer as one line of JSON, numbers rounded to 4 decimals (`-29.85`, not
/// `-29.849999999999994`); text that is not JSON as it is.
fn compact(text: &str) -> String {
    serde_json::from_str::<Value>(text).map(|v| compact_json(&v)).unwrap_or_else(|_| text.to_string())
}

/// One line of JSON, in the value's own key order, numbers rounded to 4 decimals.
pub(crate) fn compact_json<T: Serialize>(value: &T) -> String {
    round_numbers(&serde_json::to_string(value).unwrap_or_default())
}

/// Every number of a JSON text with more than 4 decimals, rounded to 4 (strings are left
/// alone).
fn round_numbers(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut chars = json.char_indices().peekable();
    let mut in_string = false;
    while let Some((i, c)) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some((_, next)) = chars.next() {
                    out.push(next);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
            continue;
        }
        if c == '-' || c.is_ascii_digit() {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-') {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let token = &json[i..end];
            match token.parse::<f64>() {
                Ok(x) if token.contains(['.', 'e', 'E']) => {
                    let r = (x * 1e4).round() / 1e4;
                    out.push_str(
                        &serde_json::Number::from_f64(if r == 0.0 { 0.0 } else { r })
                            .map_or_else(|| token.to_string(), |n| n.to_string()),
                    );
                }
                _ => out.push_str(token),
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// `[2], [4]`: the accepted commands a committed revision replaced (`None`: no revision).
fn revised_numbers(x: &crate::events::Execution) -> Option<String> {
    let first = x.revises?;
    let all: Vec<String> =
        std::iter::once(first).chain(x.also_revises.iter().copied()).map(|n| format!("[{n}]")).collect();
    Some(all.join(", "))
}

/// ", steps 2 and 5 set aside" for the summary lines; empty when none was.
fn set_aside_text(steps: &[usize]) -> String {
    match steps {
        [] => String::new(),
        [one] => format!(", step {one} set aside"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!(", steps {} and {last} set aside", rest.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_rounded_and_strings_left_alone() {
        let text = r#"{"op":"extrude","depth":-29.849999999999994,"n":3,"note":"1.234567 \"2.345678\"","e":1e-12}"#;
        assert_eq!(
            round_numbers(text),
            r#"{"op":"extrude","depth":-29.85,"n":3,"note":"1.234567 \"2.345678\"","e":0.0}"#
        );
    }
}
