//! The loop's configuration: a TOML file (`--config`) with command-line flags over it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which mechanisms of the method are switched off (the ablations of `method.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ablations {
    /// No ID labels, no entity table: entities are named by selectors.
    pub no_egr: bool,
    /// Sketch coordinates in the plane's own local frame (model units), not view coordinates.
    pub no_lcb: bool,
    /// No projected edges in Stage 2, no ties to existing geometry, no snapping.
    pub no_pgr: bool,
    /// No registration and no sphere S_t; Stage 2 coordinates are not restricted.
    pub no_reg: bool,
    /// No retrieved examples in Stage 1.
    pub no_rag: bool,
    /// No Stage 3: candidates are committed unverified.
    pub no_evf: bool,
}

impl Ablations {
    /// The flags that are on, as their configuration keys (`no_egr`...).
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            (self.no_egr, "no_egr"),
            (self.no_lcb, "no_lcb"),
            (self.no_pgr, "no_pgr"),
            (self.no_reg, "no_reg"),
            (self.no_rag, "no_rag"),
            (self.no_evf, "no_evf"),
        ];
        all.into_iter().filter(|(on, _)| *on).map(|(_, n)| n).collect()
    }
}

/// Everything that shapes one reconstruction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Accepted steps before the loop stops (END stops it earlier).
    pub max_steps: usize,
    /// Failed verifications (rejections or candidates that fail to execute) per step; the
    /// candidate after the last one is committed without a verification.
    pub max_rejections: usize,
    /// Answers that fail their schema, re-asked with the validation error, per stage call.
    pub max_invalid_answers: usize,
    /// Steps no candidate got through that the loop sets aside and goes on from (the model
    /// as it was, told in the next Stage 1 request); the next such step ends the run.
    pub max_skipped_steps: usize,
    /// Width and height of every view, pixels.
    pub view_size: u32,
    /// The direction the target image looks from (towards the eye); isometric by default.
    pub direction: [f64; 3],
    /// Radius of the registration sphere S_t in model units: one image gives no absolute
    /// size, so the harness fixes it (the part comes out this big).
    pub part_radius: f64,
    /// PGR: a sketch point this close to a projected vertex (view units) snaps to it.
    pub snap_tolerance: f64,
    /// The fit at END: every extrusion, revolve, sweep and loft of the finished program fitted to the
    /// target's pixels (`fit/program.rs`; docs/method.md); with it, a revolve's profile is made
    /// regular at its step (`fit/regular.rs`). On by default (`--no-fit`).
    pub fit: bool,
    /// Also fit each new sketch and its extrusion or revolve after Stage 2, before Stage 3
    /// (`fit/mod.rs`). Off by default: a later feature's lines (a fillet's) can pull an exact
    /// candidate (docs/evaluation.md).
    pub fit_steps: bool,
    /// The fit at END measures to the target's lines where its own image has them
    /// (`fit/subpixel.rs`), not to the framed picture's whole pixels, and scores each drawing
    /// where it lies best within half a pixel. Off by default (`--subpixel-fit`): on test100
    /// with the simulated reader it lost more than it gained (docs/evaluation.md).
    pub fit_subpixel: bool,
    /// Prompt templates; the built-in ones when unset.
    pub prompts: Option<PathBuf>,
    /// The GERD-RET index Stage 1 retrieves examples from (`vision2cad gerd index`).
    pub rag_index: Option<PathBuf>,
    /// Retrieved examples per Stage 1 call, at most one per part.
    pub rag_k: usize,
    /// The least score (`lambda * image + (1 - lambda) * state` similarity) a retrieved step
    /// needs to be shown; measured in docs/evaluation.md ("Retrieval that earns its tokens").
    pub rag_min_score: f64,
    #[serde(flatten)]
    pub ablations: Ablations,
    /// The model server (`--vlm openai`): the `[vlm]` table.
    pub vlm: crate::vlm::VlmSettings,
    /// The simulated model's error rates (`--vlm sim`): the `[sim]` table.
    pub sim: crate::vlm::SimRates,
}

/// The default `rag_min_score`: below it, the top hit's operation matched the true next
/// step's no more often than the commonest operation's share (docs/evaluation.md).
pub const RAG_MIN_SCORE: f64 = 0.90;

impl Default for Config {
    fn default() -> Self {
        Config {
            max_steps: 25,
            max_rejections: 2,
            max_invalid_answers: 2,
            max_skipped_steps: 2,
            view_size: 500,
            direction: views::ISOMETRIC,
            part_radius: 50.0,
            snap_tolerance: 0.002,
            fit: true,
            fit_steps: false,
            fit_subpixel: false,
            prompts: None,
            rag_index: None,
            rag_k: 3,
            rag_min_score: RAG_MIN_SCORE,
            ablations: Ablations::default(),
            vlm: crate::vlm::VlmSettings::default(),
            sim: crate::vlm::SimRates::default(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: {0}")]
    Invalid(String),
}

impl Config {
    /// Candidates a step may try: each rejection allows one more, and the last is committed
    /// unverified.
    pub fn attempts_per_step(&self) -> usize {
        self.max_rejections + 1
    }

    /// Read a TOML file; keys not given keep their defaults.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        let config: Config = toml::from_str(&text).map_err(|e| {
            let mut message = e.to_string();
            // Serde lists the expected keys of the tables but not of the top level (the
            // ablations are flattened into it): say them here, from the type itself.
            if message.contains("unknown field") && !message.contains("expected") {
                message.push_str(&format!("\nthe configuration's keys: {}", Config::keys().join(", ")));
            }
            ConfigError::Parse { path: path.display().to_string(), message }
        })?;
        config.check()?;
        Ok(config)
    }

    /// The top-level keys of a configuration file, tables last (`[vlm]`, `[sim]`).
    pub fn keys() -> Vec<String> {
        let value = serde_json::to_value(Config::default()).unwrap_or_default();
        let mut keys: Vec<(bool, String)> = value
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (v.is_object(), if v.is_object() { format!("[{k}]") } else { k.clone() }))
                    .collect()
            })
            .unwrap_or_default();
        keys.sort_by_key(|(table, _)| *table);
        keys.into_iter().map(|(_, k)| k).collect()
    }

    /// Refuse values the loop cannot work with.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.max_steps == 0 {
            return bad("max_steps must be at least 1");
        }
        self.sim.check().map_err(ConfigError::Invalid)?;
        if !(64..=4096).contains(&self.view_size) {
            return bad("view_size must be between 64 and 4096 pixels");
        }
        if !self.direction.iter().all(|x| x.is_finite()) || self.direction.iter().all(|x| *x == 0.0) {
            return bad("direction must be a non-zero vector");
        }
        if !(self.part_radius.is_finite() && self.part_radius > 0.0) {
            return bad("part_radius must be a positive number");
        }
        if !(self.snap_tolerance.is_finite() && self.snap_tolerance >= 0.0) {
            return bad("snap_tolerance must be zero or positive");
        }
        if !(1..=10).contains(&self.rag_k) {
            return bad("rag_k must be between 1 and 10");
        }
        if !(self.rag_min_score.is_finite() && (-1.0..=1.0).contains(&self.rag_min_score)) {
            return bad("rag_min_score must be between -1 and 1 (a similarity)");
        }
        self.vlm.check().map_err(ConfigError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_keys_override_defaults_and_unknown_keys_are_refused() {
        let c: Config = toml::from_str("max_steps = 7\nno_pgr = true\ndirection = [1.0, 1.0, 1.0]").expect("parses");
        assert_eq!(c.max_steps, 7);
        assert!(c.ablations.no_pgr && !c.ablations.no_egr);
        assert_eq!(c.direction, [1.0, 1.0, 1.0]);
        assert_eq!(c.part_radius, 50.0);
        assert!(toml::from_str::<Config>("no_such_key = 1").is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "max_step = 3\n").expect("write");
        let err = Config::from_file(&file).expect_err("a typo").to_string();
        assert!(
            err.contains("max_step") && err.contains("max_steps") && err.contains("no_pgr") && err.contains("[vlm]"),
            "{err}"
        );
        assert_eq!(c.ablations.names(), vec!["no_pgr"]);
        let c: Config =
            toml::from_str("[vlm]\nmodel = \"m\"\n[vlm.prices.m]\ninput = 1.0\noutput = 2.0").expect("parses");
        assert_eq!(c.vlm.model, "m");
        assert_eq!(c.vlm.prices["m"].cost(1_000_000, 500_000), 2.0);
        assert!(toml::from_str::<Config>("[vlm]\napi_key = \"sk-x\"").is_err(), "keys live in the environment only");
    }

    #[test]
    fn the_example_model_server_config_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/configs/model-server.toml");
        let c = Config::from_file(&path).expect("the example config is valid");
        assert_eq!(c.vlm.model, "gpt-4o");
        assert_eq!(c.vlm.cache_mode, crate::vlm::CacheMode::Write);
        assert!(c.vlm.prices.contains_key("gpt-4o-mini"));
    }

    #[test]
    fn unusable_values_are_refused_by_name() {
        let c = Config { part_radius: -1.0, ..Config::default() };
        assert!(c.check().expect_err("negative radius").to_string().contains("part_radius"));
    }
}
