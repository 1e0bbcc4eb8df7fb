//! The direct-code baseline: the same model gets the target image once and writes a whole
//! FreeCAD Python script (`prompts/direct_code*.md`), which runs in the sandbox of
//! [`freecad_bridge::codebox`] with a time limit. Its `model.FCStd` is evaluated exactly
//! like the loop's models (the 10% edit changes the lengths of its pads and pockets).
//!
//! ```no_run
//! # use vision2cad::{Config, direct_code::direct_code};
//! # use freecad_bridge::codebox::CodeboxLimits;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut vlm = vision2cad::vlm::Scripted::from_file("answers.jsonl".as_ref())?;
//! let outcome = direct_code(
//!     "part.png".as_ref(),
//!     "out".as_ref(),
//!     &Config::default(),
//!     &mut vlm,
//!     "vision2cad".as_ref(),
//!     &CodeboxLimits::default(),
//! )?;
//! println!("{}", outcome.failure.unwrap_or_else(|| "built".into()));
//! # Ok(())
//! # }
//! ```

use std::path::Path;
use std::time::Instant;

use freecad_bridge::codebox::{CodeboxLimits, run_script};
use serde::Serialize;
use serde_json::Value;

use crate::prompts::{Fill, Prompts};
use crate::report::{escape, write_atomic, write_json};
use crate::vlm::{Context, Request, Stage, Usage, Vlm};
use crate::{Config, LoopError};

/// How the baseline ended (written as `outcome.json`, in the fields a loop's outcome has).
#[derive(Debug, Clone, Serialize)]
pub struct DirectCodeOutcome {
    pub baseline: &'static str,
    /// 1 when the script built a solid, else 0.
    pub steps: usize,
    /// The script ran and built a valid solid.
    pub finished: bool,
    pub stop: String,
    /// Why there is no model: no answer, no script in it, the script failed, broke out of
    /// the sandbox, or ran past its limit.
    pub failure: Option<String>,
    pub calls: usize,
    pub usage: Usage,
    pub backend: String,
    /// Seconds waiting for the model, running the script, in all.
    pub model_seconds: f64,
    pub script_seconds: f64,
    pub seconds: f64,
    /// Which sandbox layers held.
    pub sandbox: Option<String>,
    /// The sandbox's report on the script (kind, error, solids, volume, pads_pockets...).
    pub script: Value,
}

/// One line of the baseline's `trace.jsonl`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum BaselineEvent<'a> {
    Request { stage: Stage, system: &'a str, text: &'a str },
    Answer { text: String, usage: Option<Usage>, cached: bool },
    Stop { outcome: &'a DirectCodeOutcome },
}

/// Ask `vlm` for one script for `image`, run it, and write `out/`: `model_script.py`,
/// `model.FCStd` and `model.step` (when it built a solid), `outcome.json`, `trace.jsonl`,
/// `report.html`. `program` is this program, whose `codebox` subcommand is the sandbox.
pub fn direct_code(
    image: &Path,
    out: &Path,
    config: &Config,
    vlm: &mut dyn Vlm,
    program: &Path,
    limits: &CodeboxLimits,
) -> Result<DirectCodeOutcome, LoopError> {
    let started = Instant::now();
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| LoopError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io(out))?;
    // A model left by an earlier run in this folder must not pass for this run's.
    for stale in ["model.FCStd", "model.step"] {
        let path = out.join(stale);
        if path.exists() {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    let target = image::open(image)
        .map_err(|e| LoopError::Image { path: image.display().to_string(), reason: e.to_string() })?;
    // Where the loop keeps the target it shows, so a folder never holds a second copy of
    // a user's own `target.png` beside it.
    let target_png = out.join("views").join("target.png");
    std::fs::create_dir_all(out.join("views")).map_err(|e| io(&out.join("views"))(e))?;
    target
        .save(&target_png)
        .map_err(|e| LoopError::Image { path: target_png.display().to_string(), reason: e.to_string() })?;
    let prompts = Prompts::load(config.prompts.as_deref())?;
    let request = Request {
        stage: Stage::DirectCode,
        system: prompts.render("direct_code_system.md", &Fill::default())?,
        text: prompts.render(
            "direct_code.md",
            &Fill::default()
                .value("seconds", format!("{:.0}", limits.wall_seconds))
                .value("direction", crate::stage1::direction_text(config.direction))
                .value("axes", views::axes_on_screen(config.direction)),
        )?,
        images: vec![target_png.clone()],
        schema: prompts.schema(Stage::DirectCode).clone(),
        context: Context::default(),
    };
    let mut outcome = DirectCodeOutcome {
        baseline: "direct-code",
        steps: 0,
        finished: false,
        stop: String::new(),
        failure: None,
        calls: 1,
        usage: Usage::default(),
        backend: vlm.name(),
        model_seconds: 0.0,
        script_seconds: 0.0,
        seconds: 0.0,
        sandbox: None,
        script: Value::Null,
    };
    let mut trace = vec![
        serde_json::to_string(&BaselineEvent::Request {
            stage: request.stage,
            system: &request.system,
            text: &request.text,
        })
        .map_err(|e| io(&out.join("trace.jsonl"))(e.into()))?,
    ];

    let asked = Instant::now();
    let answer = vlm.answer(&request);
    outcome.model_seconds = asked.elapsed().as_secs_f64();
    let script = match answer {
        Err(e) => Err(format!("the model gave no answer: {e}")),
        Ok(reply) => {
            outcome.usage = reply.usage.unwrap_or_default();
            let answer = BaselineEvent::Answer { text: reply.text.clone(), usage: reply.usage, cached: reply.cached };
            trace.push(serde_json::to_string(&answer).map_err(|e| io(&out.join("trace.jsonl"))(e.into()))?);
            script_of(&reply.text, &prompts)
        }
    };
    match script {
        Err(reason) => {
            outcome.stop = "no script".into();
            outcome.failure = Some(reason);
        }
        Ok(code) => {
            write_atomic(&out.join("model_script.py"), code.as_bytes())?;
            match run_script(program, &code, out, limits) {
                Ok(ran) => {
                    outcome.script_seconds = ran.seconds;
                    outcome.sandbox = Some(ran.sandbox);
                    let ok = ran.result["ok"] == true;
                    if ok {
                        outcome.steps = 1;
                        outcome.finished = true;
                        outcome.stop = "the script built a solid".into();
                    } else {
                        let kind = ran.result["kind"].as_str().unwrap_or("failed");
                        let error = ran.result["error"].as_str().unwrap_or("");
                        outcome.stop = format!("script: {kind}");
                        outcome.failure = Some(match kind {
                            "sandbox" => format!("the script reached outside its sandbox: {error}"),
                            _ => format!("the script failed ({kind}): {error}"),
                        });
                    }
                    outcome.script = ran.result;
                }
                Err(e) => {
                    outcome.stop = "script stopped".into();
                    outcome.failure = Some(e.to_string());
                }
            }
        }
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    let stop = BaselineEvent::Stop { outcome: &outcome };
    trace.push(serde_json::to_string(&stop).map_err(|e| io(&out.join("trace.jsonl"))(e.into()))?);
    let lines: String = trace.iter().map(|e| format!("{e}\n")).collect();
    write_atomic(&out.join("trace.jsonl"), lines.as_bytes())?;
    write_json(&out.join("outcome.json"), &outcome)?;
    write_atomic(&out.join("report.html"), report_html(&outcome, out).as_bytes())?;
    Ok(outcome)
}

/// The script in an answer: the `code` of a JSON answer that meets the schema, else the
/// first fenced Python block (a server without structured output may answer in prose).
fn script_of(text: &str, prompts: &Prompts) -> Result<String, String> {
    if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
        prompts
            .validate(Stage::DirectCode, &value)
            .map_err(|errors| format!("the answer does not meet the schema: {}", errors.join("; ")))?;
        return value["code"].as_str().map(str::to_owned).ok_or_else(|| "the answer has no code".into());
    }
    let fenced = text.split("```").nth(1).map(|block| block.strip_prefix("python").unwrap_or(block));
    match fenced {
        Some(code) if !code.trim().is_empty() => Ok(code.trim_start_matches('\n').to_string()),
        _ => {
            let head: String = text.chars().take(200).collect();
            Err(format!("the answer holds no script (neither JSON with `code` nor a ```python block): {head:?}"))
        }
    }
}

fn report_html(outcome: &DirectCodeOutcome, out: &Path) -> String {
    let script = std::fs::read_to_string(out.join("model_script.py")).unwrap_or_default();
    let status = match &outcome.failure {
        None => format!(
            "built {} solid(s), volume {:.3}, {} pads and pockets for the 10% edit",
            outcome.script["solids"],
            outcome.script["volume"].as_f64().unwrap_or(0.0),
            outcome.script["pads_pockets"]
        ),
        Some(f) => f.clone(),
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>direct-code baseline</title>\
         <style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style>\
         </head><body><h1>Direct-code baseline</h1><p><img src=\"views/target.png\" width=\"300\"></p>\
         <p><b>{}</b></p><p>Backend {}; sandbox: {}; model {:.1} s, script {:.1} s.</p>\
         <h2>Script</h2><pre>{}</pre><h2>Script output</h2><pre>{}</pre></body></html>\n",
        escape(&status),
        escape(&outcome.backend),
        escape(outcome.sandbox.as_deref().unwrap_or("not run")),
        outcome.model_seconds,
        outcome.script_seconds,
        escape(&script),
        escape(outcome.script["output"].as_str().unwrap_or(""))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_come_from_json_answers_or_fenced_blocks_and_prose_is_refused() {
        let p = Prompts::load(None).expect("prompts");
        assert_eq!(script_of(r#"{"code": "x = 1"}"#, &p).expect("json"), "x = 1");
        assert_eq!(script_of("Here:\n```python\nx = 2\n```\nDone.", &p).expect("fenced"), "x = 2\n");
        assert!(script_of(r#"{"script": "x"}"#, &p).expect_err("schema").contains("schema"));
        assert!(script_of("I would pad a rectangle.", &p).expect_err("prose").contains("no script"));
    }
}
