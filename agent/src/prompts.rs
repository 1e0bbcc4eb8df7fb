//! The prompt templates in `prompts/`, loaded at run time (`--prompts DIR` overrides the
//! built-in copies), filled in, and the JSON Schemas every answer is validated against.
//!
//! Templates are plain text with three forms: `{{name}}` inserts a value,
//! `{{#flag}}...{{/flag}}` keeps its text when the flag is on, `{{^flag}}...{{/flag}}` when
//! it is off. A name the harness does not provide is an error, so a typo in an edited
//! prompt is caught on the first request.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::vlm::Stage;

/// The files of a prompt set, with their built-in text.
const FILES: [(&str, &str); 10] = [
    ("system.md", include_str!("../../prompts/system.md")),
    ("stage1.md", include_str!("../../prompts/stage1.md")),
    ("stage2.md", include_str!("../../prompts/stage2.md")),
    ("stage3.md", include_str!("../../prompts/stage3.md")),
    ("stage1.schema.json", include_str!("../../prompts/stage1.schema.json")),
    ("stage2.schema.json", include_str!("../../prompts/stage2.schema.json")),
    ("stage3.schema.json", include_str!("../../prompts/stage3.schema.json")),
    ("direct_code_system.md", include_str!("../../prompts/direct_code_system.md")),
    ("direct_code.md", include_str!("../../prompts/direct_code.md")),
    ("direct_code.schema.json", include_str!("../../prompts/direct_code.schema.json")),
];

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("cannot read prompt file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("prompt schema {file} is not valid JSON Schema: {reason}")]
    Schema { file: String, reason: String },
    #[error("prompt template {file}: {reason}")]
    Template { file: String, reason: String },
}

/// A loaded prompt set.
#[derive(Debug)]
pub struct Prompts {
    /// Where the templates came from (`built-in` or a directory).
    pub source: String,
    texts: BTreeMap<&'static str, String>,
    schemas: BTreeMap<Stage, (Value, jsonschema::Validator)>,
}

/// Values and flags for one template.
#[derive(Debug, Default)]
pub struct Fill {
    values: BTreeMap<&'static str, String>,
    flags: BTreeMap<&'static str, bool>,
}

impl Fill {
    pub fn value(mut self, name: &'static str, text: impl Into<String>) -> Self {
        self.values.insert(name, text.into());
        self
    }
    pub fn flag(mut self, name: &'static str, on: bool) -> Self {
        self.flags.insert(name, on);
        self
    }
}

impl Prompts {
    /// The prompt set in `dir`, or the built-in one. A directory may hold only some of the
    /// files; the others keep their built-in text.
    pub fn load(dir: Option<&Path>) -> Result<Prompts, PromptError> {
        let mut texts = BTreeMap::new();
        for (name, builtin) in FILES {
            let text = match dir.map(|d| d.join(name)).filter(|p| p.is_file()) {
                Some(path) => std::fs::read_to_string(&path)
                    .map_err(|source| PromptError::Read { path: path.display().to_string(), source })?,
                None => builtin.to_string(),
            };
            texts.insert(name, text);
        }
        let mut schemas = BTreeMap::new();
        for stage in [Stage::Stage1, Stage::Stage2, Stage::Stage3, Stage::DirectCode] {
            let file = format!("{}.schema.json", stage.name());
            let text = texts.get(file.as_str()).cloned().unwrap_or_default();
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| PromptError::Schema { file: file.clone(), reason: e.to_string() })?;
            let validator = jsonschema::validator_for(&value)
                .map_err(|e| PromptError::Schema { file: file.clone(), reason: e.to_string() })?;
            schemas.insert(stage, (value, validator));
        }
        let source = dir.map_or_else(|| "built-in".to_string(), |d| d.display().to_string());
        Ok(Prompts { source, texts, schemas })
    }

    /// The schema of a stage's answer.
    pub fn schema(&self, stage: Stage) -> &Value {
        &self.schemas[&stage].0
    }

    /// Check an answer against its stage's schema; the errors, one line each, name the
    /// JSON path.
    pub fn validate(&self, stage: Stage, answer: &Value) -> Result<(), Vec<String>> {
        let errors: Vec<String> = self.schemas[&stage].1.iter_errors(answer).flat_map(|e| explain(&e)).collect();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// Fill a template (`system.md`, `stage1.md`...).
    pub fn render(&self, file: &'static str, fill: &Fill) -> Result<String, PromptError> {
        let text = self.texts.get(file).map(String::as_str).unwrap_or_default();
        render(text, fill).map_err(|reason| PromptError::Template { file: file.into(), reason })
    }
}

/// One schema error as lines a model can act on. An object that matches none of the forms
/// of a list (`anyOf`, one form per `type` or `op`: the constraints of Stage 2, the commands
/// of Stage 1) is explained by the form of its own `type`/`op` (a missing or unexpected
/// key), or by the values there are.
fn explain(e: &jsonschema::ValidationError) -> Vec<String> {
    let at = |e: &jsonschema::ValidationError| {
        let at = e.instance_path.to_string();
        if at.is_empty() { e.to_string() } else { format!("at {at}: {e}") }
    };
    let jsonschema::error::ValidationErrorKind::AnyOf { context } = &e.kind else { return vec![at(e)] };
    let Some((key, kind)) =
        ["type", "op"].into_iter().find_map(|k| e.instance.get(k).and_then(Value::as_str).map(|v| (k, v)))
    else {
        return vec![at(e)];
    };
    let about_key = |x: &jsonschema::ValidationError| x.instance_path.to_string().ends_with(&format!("/{key}"));
    let own: Vec<&Vec<jsonschema::ValidationError>> =
        context.iter().filter(|branch| !branch.iter().any(about_key)).collect();
    match own.as_slice() {
        [branch] => branch.iter().map(|x| format!("{} (a `{kind}`)", at(x))).collect(),
        _ => {
            let kinds: Vec<String> = context
                .iter()
                .flatten()
                .filter(|x| about_key(x))
                .filter_map(|x| match &x.kind {
                    jsonschema::error::ValidationErrorKind::Constant { expected_value } => {
                        expected_value.as_str().map(|t| format!("`{t}`"))
                    }
                    _ => None,
                })
                .collect();
            if kinds.is_empty() {
                vec![at(e)]
            } else {
                let place = e.instance_path.to_string();
                vec![format!("at {place}: \"{key}\" must be one of {}", kinds.join(", "))]
            }
        }
    }
}

fn render(text: &str, fill: &Fill) -> Result<String, String> {
    let out = expand(text, fill)?;
    // Sections that were left out leave blank lines behind; keep at most one.
    let mut tidy = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.lines() {
        blank = if line.trim().is_empty() { blank + 1 } else { 0 };
        if blank <= 1 {
            tidy.push_str(line);
            tidy.push('\n');
        }
    }
    Ok(tidy)
}

fn expand(text: &str, fill: &Fill) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or("a '{{' without its '}}'")?;
        let tag = after[..close].trim();
        rest = &after[close + 2..];
        if let Some(name) = tag.strip_prefix('#').or_else(|| tag.strip_prefix('^')) {
            let on = *fill.flags.get(name).ok_or_else(|| format!("unknown flag '{name}'"))?;
            let end_tag = format!("{{{{/{name}}}}}");
            let end = rest.find(&end_tag).ok_or_else(|| format!("section '{name}' is not closed with {end_tag}"))?;
            let inner = &rest[..end];
            rest = &rest[end + end_tag.len()..];
            if on == tag.starts_with('#') {
                out.push_str(&expand(inner, fill)?);
            }
        } else {
            let value = fill.values.get(tag).ok_or_else(|| format!("unknown value '{{{{{tag}}}}}'"))?;
            out.push_str(value);
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_values_fill_and_typos_are_errors() {
        let fill = Fill::default().value("n", "3").flag("egr", true).flag("pgr", false);
        let text = "a {{n}}\n{{#egr}}ids {{n}}\n{{/egr}}{{^pgr}}no ties\n{{/pgr}}{{#pgr}}ties\n{{/pgr}}end";
        assert_eq!(render(text, &fill).expect("renders"), "a 3\nids 3\nno ties\nend\n");
        assert!(render("{{nn}}", &fill).expect_err("typo").contains("nn"));
        assert!(render("{{#egr}} open", &fill).is_err());
    }

    #[test]
    fn built_in_prompts_load_and_schemas_check_answers() {
        let p = Prompts::load(None).expect("built-in prompts load");
        let ok = serde_json::json!({"reason": "top face", "command": {"op": "end"}});
        assert!(p.validate(Stage::Stage1, &ok).is_ok());
        let bad = serde_json::json!({"command": {"op": "end"}});
        assert!(p.validate(Stage::Stage1, &bad).is_err());
        let verdict = serde_json::json!({"verdict": "maybe", "reasons": []});
        assert!(p.validate(Stage::Stage3, &verdict).is_err());
    }

    #[test]
    fn the_stage2_schema_refuses_a_constraint_with_a_wrong_key_and_says_which() {
        let p = Prompts::load(None).expect("built-in prompts load");
        let line = serde_json::json!({"type": "line", "start": [0.1, 0.1], "end": [0.9, 0.1]});
        let answer =
            |constraints: serde_json::Value| serde_json::json!({"primitives": [line], "constraints": constraints});
        assert!(p.validate(Stage::Stage2, &answer(serde_json::json!([{"type": "horizontal", "line": "g0"}]))).is_ok());
        let to_edge =
            serde_json::json!([{"type": "distance_to_line", "point": "g0.start", "line": "E4", "value": 0.1}]);
        assert!(p.validate(Stage::Stage2, &answer(to_edge)).is_ok());
        let middle = serde_json::json!([{"type": "midpoint", "point": "g0.start", "a": "V1", "b": "V3"}]);
        assert!(p.validate(Stage::Stage2, &answer(middle)).is_ok());
        let errors = p
            .validate(Stage::Stage2, &answer(serde_json::json!([{"type": "midpoint", "point": "g0.start", "a": "V1"}])))
            .expect_err("a midpoint needs both ends");
        assert!(errors.join("\n").contains("\"b\" is a required property"), "{errors:?}");
        // The key a model guesses for a line constraint: refused by the schema itself, with
        // the key named.
        let errors = p
            .validate(Stage::Stage2, &answer(serde_json::json!([{"type": "horizontal", "a": "g0"}])))
            .expect_err("`a` is not a key of horizontal");
        let text = errors.join("\n");
        assert!(text.contains("/constraints/0") && text.contains("'a'") && text.contains("horizontal"), "{text}");
        assert!(text.contains("\"line\" is a required property"), "{text}");
        let errors = p
            .validate(Stage::Stage2, &answer(serde_json::json!([{"type": "distance", "a": "g0.start", "b": "g0.end"}])))
            .expect_err("a distance needs its value");
        assert!(errors.join("\n").contains("\"value\" is a required property"), "{errors:?}");
        let errors = p
            .validate(Stage::Stage2, &answer(serde_json::json!([{"type": "fixed", "point": "g0.start"}])))
            .expect_err("no such constraint");
        assert!(errors.join("\n").contains("must be one of `coincident`"), "{errors:?}");
    }

    #[test]
    fn the_stage1_schema_gives_each_command_its_own_keys() {
        let p = Prompts::load(None).expect("built-in prompts load");
        let answer = |command: serde_json::Value| serde_json::json!({"reason": "r", "command": command});
        let pad = serde_json::json!({"op": "extrude", "profile": "S1", "mode": "add",
            "extent": {"type": "one_side", "depth": 10}});
        assert!(p.validate(Stage::Stage1, &answer(pad)).is_ok());
        // A depth guessed at the top level, where a plane's offset would be: refused, named.
        let guessed = serde_json::json!({"op": "extrude", "profile": "S1", "mode": "add", "depth": 10});
        let text = p.validate(Stage::Stage1, &answer(guessed)).expect_err("depth belongs in extent").join("\n");
        assert!(text.contains("/command") && text.contains("'depth'") && text.contains("a `extrude`"), "{text}");
        assert!(text.contains("\"extent\" is a required property"), "{text}");
        let text = p
            .validate(Stage::Stage1, &answer(serde_json::json!({"op": "pocket", "profile": "S1"})))
            .expect_err("no such op")
            .join("\n");
        assert!(text.contains("\"op\" must be one of `extrude`") && text.contains("`end`"), "{text}");
        let hole =
            serde_json::json!({"op": "extrude", "profile": "S2", "mode": "cut", "extent": {"type": "through_all"}});
        assert!(p.validate(Stage::Stage1, &answer(hole)).is_ok());
        let inclined = serde_json::json!({"op": "plane", "name": "P1", "on": "XY", "offset": 5,
            "rotation": [{"axis": "x", "angle": 30}, {"axis": "E4", "angle": 10}]});
        assert!(p.validate(Stage::Stage1, &answer(inclined)).is_ok());
    }
}
