//! What a reconstruction leaves behind: `trace.jsonl` (every stage call and decision),
//! the model files, and `report.html`, one self-contained page that walks through the steps.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use freecad_bridge::Session;
use serde::Serialize;
use serde_json::Value;

use crate::LoopError;

fn io_error(path: &Path, source: std::io::Error) -> LoopError {
    LoopError::Io { path: path.display().to_string(), source }
}

/// `trace.jsonl`, one JSON object per line, flushed as it goes.
#[derive(Debug)]
pub struct Trace {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl Trace {
    /// Open for appending (`resume`) or start afresh.
    pub fn open(path: &Path, append: bool) -> Result<Trace, LoopError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(path)
            .map_err(|e| io_error(path, e))?;
        Ok(Trace { file, path: path.to_path_buf() })
    }

    pub fn event(&mut self, value: Value) -> Result<(), LoopError> {
        let mut line = value.to_string();
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(|e| io_error(&self.path, e))
    }
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
    let mut tmp = tempfile::Builder::new().prefix(".partial-").tempfile_in(dir).map_err(|e| io_error(dir, e))?;
    tmp.write_all(bytes).map_err(|e| io_error(tmp.path(), e))?;
    tmp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(())
}

/// `model.FCStd`, `model.step` (when there is a solid) and `state.json`, each written under
/// a temporary name and renamed, so a reader never sees half a file.
pub fn write_model(session: &mut Session, dir: &Path) -> Result<(), LoopError> {
    let fcstd = dir.join("model.FCStd");
    let step = dir.join("model.step");
    let tmp_fcstd = dir.join(".model.partial.FCStd");
    let tmp_step = dir.join(".model.partial.step");
    let has_solid = !session.state().empty;
    session.save(Some(&tmp_fcstd), has_solid.then_some(tmp_step.as_path()))?;
    std::fs::rename(&tmp_fcstd, &fcstd).map_err(|e| io_error(&fcstd, e))?;
    if has_solid {
        std::fs::rename(&tmp_step, &step).map_err(|e| io_error(&step, e))?;
    } else if step.exists() {
        // A STEP from an earlier run would contradict this document.
        std::fs::remove_file(&step).map_err(|e| io_error(&step, e))?;
    }
    write_json(&dir.join("state.json"), session.state())
}

pub(crate) fn escape(text: &str) -> String {
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
    let text = std::fs::read_to_string(&trace_path).map_err(|e| io_error(&trace_path, e))?;
    let events: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let mut h = String::new();
    h.push_str(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>vision2cad reconstruction</title><style>\
        body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}\
        figure{display:inline-block;margin:4px}img{max-width:500px;border:1px solid #ccc}\
        pre{background:#f6f6f6;padding:6px;white-space:pre-wrap;font-size:12px}\
        .ok{color:#1a7f37}.bad{color:#b42318}.call{border-left:3px solid #ccd;padding-left:8px;margin:8px 0}\
        details summary{cursor:pointer;color:#555}</style></head><body>\n<h1>vision2cad reconstruction</h1>\n",
    );
    h.push_str(&image_tag(dir, "views/target.png"));
    let mut current_step = 0;
    for e in &events {
        let step = e["step"].as_u64().unwrap_or(0);
        match e["event"].as_str().unwrap_or("") {
            "start" => {
                let _ = write!(
                    h,
                    "<p>Image <code>{}</code>, backend <b>{}</b>, prompts {}.</p><details><summary>configuration</summary><pre>{}</pre></details>",
                    escape(e["image"].as_str().unwrap_or("")),
                    escape(e["backend"].as_str().unwrap_or("")),
                    escape(e["prompts"].as_str().unwrap_or("")),
                    escape(&serde_json::to_string_pretty(&e["config"]).unwrap_or_default())
                );
            }
            "resume" => {
                let _ = write!(h, "<p><b>Resumed</b> after {} accepted steps.</p>", e["steps"]);
            }
            "call" => {
                if step != current_step && step > 0 {
                    current_step = step;
                    let _ = write!(h, "<h2>Step {step}</h2>");
                }
                let _ = write!(
                    h,
                    "<div class=\"call\"><b>{}</b> (attempt {}, try {}{}{})<br>",
                    escape(e["stage"].as_str().unwrap_or("")),
                    e["attempt"],
                    e["try"],
                    usage_text(&e["usage"]),
                    if e["cached"] == true { ", from the response cache" } else { "" }
                );
                for img in e["request"]["images"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if img != "views/target.png" {
                        h.push_str(&image_tag(dir, img));
                    }
                }
                let _ = write!(
                    h,
                    "<details><summary>request</summary><pre>{}</pre></details><pre>{}</pre>",
                    escape(e["request"]["text"].as_str().unwrap_or("")),
                    escape(&pretty(e["answer"].as_str().unwrap_or("")))
                );
                if let Some(errors) = e["errors"].as_array() {
                    for err in errors.iter().filter_map(Value::as_str) {
                        let _ = write!(h, "<p class=\"bad\">invalid: {}</p>", escape(err));
                    }
                }
                if let Some(err) = e["error"].as_str() {
                    let _ = write!(h, "<p class=\"bad\">{}</p>", escape(err));
                }
                h.push_str("</div>");
            }
            "rejected" => {
                let reasons: Vec<&str> =
                    e["reasons"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let _ = write!(h, "<p class=\"bad\">Rejected: {}</p>", escape(&reasons.join("; ")));
            }
            "execute" if e["ok"] == false => {
                let _ =
                    write!(h, "<p class=\"bad\">Candidate failed: {}</p>", escape(e["error"].as_str().unwrap_or("")));
            }
            "execute" => {
                let verified = if e["verified"] == true { "accepted" } else { "committed without verification" };
                let _ = write!(
                    h,
                    "<p class=\"ok\">{verified}:</p><pre>{}</pre>",
                    escape(&serde_json::to_string_pretty(&e["commands"]).unwrap_or_default())
                );
            }
            "retrieved" => {
                let hits: Vec<String> = e["hits"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|h| format!("{} step {} ({})", h["part"].as_str().unwrap_or(""), h["step"], h["score"]))
                    .collect();
                let _ = write!(h, "<p>Retrieved examples: {}</p>", escape(&hits.join(", ")));
            }
            "rag" => {
                let _ = write!(h, "<p>RAG off: {}</p>", escape(e["reason"].as_str().unwrap_or("")));
            }
            "snapped" => {
                let _ = write!(
                    h,
                    "<p>PGR snapping on {}: {}</p>",
                    escape(e["sketch"].as_str().unwrap_or("")),
                    escape(&e["constraints"].to_string())
                );
            }
            "end" => {
                let _ = write!(h, "<h2>END</h2><p>{}</p>", escape(e["reason"].as_str().unwrap_or("")));
            }
            "stop" => {
                let o = &e["outcome"];
                let _ = write!(
                    h,
                    "<h2>Outcome</h2><p>{} steps accepted; {}; {} model calls, {} rejections; {:.2} s.</p>",
                    o["steps"],
                    escape(o["stop"].as_str().unwrap_or("")),
                    o["calls"],
                    o["rejections"],
                    o["seconds"].as_f64().unwrap_or(0.0)
                );
                if o["usage"]["input_tokens"].as_u64().is_some_and(|t| t > 0) {
                    let _ = write!(h, "<p>Model usage:{}.</p>", usage_text(&o["usage"]).trim_start_matches(','));
                }
                if let Some(f) = o["failure"].as_str() {
                    let _ = write!(h, "<p class=\"bad\">{}</p>", escape(f));
                }
            }
            _ => {}
        }
    }
    h.push_str("\n</body></html>\n");
    write_atomic(&dir.join("report.html"), h.as_bytes())
}

/// ", 1200 tokens in, 80 out, cost 0.0041" for a usage object; empty when there is none.
fn usage_text(usage: &Value) -> String {
    let (Some(input), Some(output)) = (usage["input_tokens"].as_u64(), usage["output_tokens"].as_u64()) else {
        return String::new();
    };
    let cost = usage["cost"].as_f64().map(|c| format!(", cost {c:.4}")).unwrap_or_default();
    format!(", {input} tokens in, {output} out{cost}")
}

fn pretty(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}
