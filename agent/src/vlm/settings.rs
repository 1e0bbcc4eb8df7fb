//! How to reach a chat-completions server: the `[vlm]` table of the configuration.
//!
//! ```toml
//! [vlm]
//! model = "gpt-4o"
//! temperature = 0.0
//! cache = "runs/vlm-cache"
//! cache_mode = "write"
//!
//! [vlm.prices."gpt-4o"]
//! input = 2.5    # per million input tokens
//! output = 10.0  # per million output tokens
//! ```
//!
//! The API key is never part of the configuration: it comes from the environment only
//! (see [`ApiKey`]), so a configuration file can be shared and a trace can record it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How the answer's structure is requested from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Start with `json_schema` and step down to `json_object`, then `text`, the first time
    /// the server refuses one (the choice is kept for the rest of the run).
    #[default]
    Auto,
    /// `response_format: {type: json_schema}` with the stage's schema (OpenAI, vLLM, recent
    /// Ollama and llama.cpp).
    JsonSchema,
    /// `response_format: {type: json_object}`; the schema goes into the system prompt.
    JsonObject,
    /// No `response_format`; the schema goes into the system prompt.
    Text,
}

impl ResponseFormat {
    pub fn name(self) -> &'static str {
        match self {
            ResponseFormat::Auto => "auto",
            ResponseFormat::JsonSchema => "json_schema",
            ResponseFormat::JsonObject => "json_object",
            ResponseFormat::Text => "text",
        }
    }

    /// The next weaker format, for a server that refused this one.
    pub fn weaker(self) -> Option<ResponseFormat> {
        match self {
            ResponseFormat::Auto | ResponseFormat::JsonSchema => Some(ResponseFormat::JsonObject),
            ResponseFormat::JsonObject => Some(ResponseFormat::Text),
            ResponseFormat::Text => None,
        }
    }
}

impl FromStr for ResponseFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ResponseFormat::Auto),
            "json_schema" => Ok(ResponseFormat::JsonSchema),
            "json_object" => Ok(ResponseFormat::JsonObject),
            "text" => Ok(ResponseFormat::Text),
            other => Err(format!("unknown response format {other:?} (auto, json_schema, json_object, text)")),
        }
    }
}

/// What the response cache does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// No cache.
    #[default]
    Off,
    /// Answer from the cache when it holds the request; ask the server otherwise and store
    /// nothing.
    Read,
    /// Answer from the cache when it holds the request; ask the server otherwise and store
    /// its answer (a batch shares one cache this way, and a repeated run costs nothing).
    Write,
    /// Answer only from the cache; a request it does not hold is an error. Needs no server
    /// and no key: a recorded run repeats bit for bit.
    Replay,
}

impl FromStr for CacheMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(CacheMode::Off),
            "read" => Ok(CacheMode::Read),
            "write" => Ok(CacheMode::Write),
            "replay" => Ok(CacheMode::Replay),
            other => Err(format!("unknown cache mode {other:?} (off, read, write, replay)")),
        }
    }
}

/// Price of one model, per million tokens, in whatever currency the table is written in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Price {
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input + output_tokens as f64 * self.output) / 1e6
    }
}

/// The `[vlm]` table: everything about the model server except the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VlmSettings {
    /// The model name the server knows (`gpt-4o`, `qwen2.5-vl-72b-instruct`, ...).
    pub model: String,
    /// `https://api.openai.com/v1` when neither this, `--base-url` nor the environment
    /// gives one.
    pub base_url: Option<String>,
    pub temperature: f64,
    /// Upper bound on the answer's tokens.
    pub max_tokens: u32,
    /// Sent when set; servers that honour it repeat their sampling.
    pub seed: Option<u64>,
    /// Longest side of every image sent, pixels; larger images are scaled down. Unset:
    /// images go as the harness drew them.
    pub image_size: Option<u32>,
    pub response_format: ResponseFormat,
    /// Seconds one HTTP request may take before it is abandoned and retried. 600 by default,
    /// as OpenAI's own client: a server goes on with an abandoned request and bills it, and at
    /// 120 s four of eight relay runs asked a slow reader the same question twice.
    pub timeout: f64,
    /// Retries after a failed request (429, 5xx, a dropped connection, a timeout).
    pub retries: u32,
    /// Seconds before the first retry; each further wait doubles, with jitter, up to a
    /// minute. A `Retry-After` from the server replaces it.
    pub retry_delay: f64,
    /// Requests in flight at once, shared by every part of a batch.
    pub concurrency: usize,
    /// Whether the server needs an API key. Unset: every server except one on this
    /// machine (localhost, 127.0.0.1, ::1) does.
    pub needs_key: Option<bool>,
    /// Directory of the response cache.
    pub cache: Option<PathBuf>,
    pub cache_mode: CacheMode,
    /// Prices by model name.
    pub prices: BTreeMap<String, Price>,
}

impl Default for VlmSettings {
    fn default() -> Self {
        VlmSettings {
            model: "gpt-4o".into(),
            base_url: None,
            temperature: 0.0,
            max_tokens: 4096,
            seed: None,
            image_size: None,
            response_format: ResponseFormat::Auto,
            timeout: 600.0,
            retries: 5,
            retry_delay: 1.0,
            concurrency: 4,
            needs_key: None,
            cache: None,
            cache_mode: CacheMode::Off,
            prices: BTreeMap::new(),
        }
    }
}

impl VlmSettings {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// Refuse values no server could work with, naming the key.
    pub fn check(&self) -> Result<(), String> {
        if self.model.trim().is_empty() {
            return Err("vlm.model must name a model".into());
        }
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return Err("vlm.temperature must be between 0 and 2".into());
        }
        if self.max_tokens == 0 {
            return Err("vlm.max_tokens must be at least 1".into());
        }
        if let Some(size) = self.image_size
            && !(64..=8192).contains(&size)
        {
            return Err("vlm.image_size must be between 64 and 8192 pixels".into());
        }
        if !(self.timeout > 0.0 && self.timeout <= 3600.0) {
            return Err("vlm.timeout must be between 0 and 3600 seconds".into());
        }
        if !(self.retry_delay > 0.0 && self.retry_delay <= 60.0) {
            return Err("vlm.retry_delay must be between 0 and 60 seconds".into());
        }
        if !(1..=1024).contains(&self.concurrency) {
            return Err("vlm.concurrency must be between 1 and 1024".into());
        }
        if self.cache_mode != CacheMode::Off && self.cache.is_none() {
            return Err(format!("vlm.cache_mode = {:?} needs vlm.cache, a directory", self.cache_mode));
        }
        for (model, price) in &self.prices {
            if !(price.input.is_finite() && price.input >= 0.0 && price.output.is_finite() && price.output >= 0.0) {
                return Err(format!("vlm.prices.{model}: prices must be zero or positive numbers"));
            }
        }
        if let Some(url) = &self.base_url {
            check_base_url(url)?;
        }
        Ok(())
    }

    /// Whether a server at `base_url` needs a key under these settings.
    pub fn key_needed(&self, base_url: &str) -> bool {
        self.needs_key.unwrap_or_else(|| !is_local(base_url))
    }
}

/// A base URL must be http(s) and must not carry credentials (they would end up in logs).
pub fn check_base_url(url: &str) -> Result<(), String> {
    // The URL itself is not echoed: a malformed one may carry a secret.
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("the base URL is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("the base URL must start with http:// or https://, not {}://", parsed.scheme()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.query().is_some() {
        return Err("the base URL must not carry credentials or a query; give the key in VISION2CAD_API_KEY".into());
    }
    Ok(())
}

fn is_local(url: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .is_some_and(|h| h == "localhost" || h == "127.0.0.1" || h == "[::1]" || h == "::1")
}

/// An API key. It is only ever written into the `Authorization` header: its `Debug` and
/// `Display` print a placeholder, and every message from a server passes [`ApiKey::redact`].
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// `None` for an empty or blank value (an unset variable exported as empty).
    pub fn new(value: impl Into<String>) -> Option<ApiKey> {
        let value = value.into().trim().to_string();
        (!value.is_empty()).then_some(ApiKey(value))
    }

    pub(crate) fn header_value(&self) -> String {
        format!("Bearer {}", self.0)
    }

    /// `text` with this key, any fragment of it a server might echo (OpenAI prints the first
    /// and last characters of a wrong key), and anything shaped like a key (`sk-...`)
    /// replaced by `[redacted]`.
    pub fn redact(key: Option<&ApiKey>, text: &str) -> String {
        let mut out = text.to_string();
        // Placeholder keys of local servers ("EMPTY", "ollama") are no secret, and replacing
        // them would garble every message.
        if let Some(ApiKey(k)) = key.filter(|k| k.0.chars().count() >= 12) {
            out = out.replace(k.as_str(), "[redacted]");
            let chars: Vec<char> = k.chars().collect();
            let head: String = chars[..8].iter().collect();
            let tail: String = chars[chars.len() - 4..].iter().collect();
            out = out.replace(&head, "[redacted]");
            for mark in ["*", "\u{2026}", "."] {
                out = out.replace(&format!("{mark}{tail}"), &format!("{mark}[redacted]"));
            }
        }
        redact_key_shapes(&out)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Replace `sk-...`, `sk_...` and `Bearer ...` tokens: providers echo parts of a wrong key in
/// their error messages.
fn redact_key_shapes(text: &str) -> String {
    let token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*' | '.');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = ["sk-", "sk_", "Bearer "].iter().filter_map(|p| rest.find(p).map(|i| (i, p.len()))).min() {
        let (start, prefix) = pos;
        let after = &rest[start + prefix..];
        let len = after.find(|c: char| !token_char(c)).unwrap_or(after.len());
        let word_start = start == 0 || !rest[..start].ends_with(|c: char| c.is_ascii_alphanumeric());
        out.push_str(&rest[..start]);
        if word_start && len >= 4 {
            out.push_str("[redacted]");
        } else {
            out.push_str(&rest[start..start + prefix + len]);
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_key_shaped_tokens_are_redacted() {
        let key = ApiKey::new("sk-proj-abcdef123456").expect("key");
        let text = "Incorrect API key provided: sk-proj-***3456. Header: Bearer sk-proj-abcdef123456; risk-free ok";
        let out = ApiKey::redact(Some(&key), text);
        assert!(!out.contains("abcdef"), "{out}");
        assert!(!out.contains("3456"), "{out}");
        assert!(out.contains("risk-free ok"), "{out}");
        assert_eq!(format!("{key:?} {key}"), "ApiKey([redacted]) [redacted]");
    }

    #[test]
    fn echoed_fragments_of_unprefixed_keys_are_redacted_and_placeholders_left_alone() {
        let key = ApiKey::new("AIzaSyD4e5f6g7h8i9j0kLmN").expect("key");
        let out = ApiKey::redact(Some(&key), "API key not valid: AIzaSyD4...***kLmN for model ollama/llava");
        assert!(!out.contains("AIzaSyD4") && !out.contains("kLmN"), "{out}");
        let placeholder = ApiKey::new("ollama").expect("key");
        assert_eq!(ApiKey::redact(Some(&placeholder), "model ollama/llava"), "model ollama/llava");
    }

    #[test]
    fn local_servers_need_no_key_unless_configured() {
        let s = VlmSettings::default();
        assert!(s.key_needed("https://api.openai.com/v1"));
        assert!(s.key_needed("https://openrouter.ai/api/v1"));
        assert!(!s.key_needed("http://localhost:11434/v1"));
        assert!(!s.key_needed("http://127.0.0.1:8000/v1"));
        let strict = VlmSettings { needs_key: Some(true), ..VlmSettings::default() };
        assert!(strict.key_needed("http://127.0.0.1:8000/v1"));
    }

    #[test]
    fn unusable_settings_are_refused_by_name() {
        let bad = VlmSettings { cache_mode: CacheMode::Replay, ..VlmSettings::default() };
        assert!(bad.check().expect_err("no cache dir").contains("vlm.cache"));
        let bad = VlmSettings { base_url: Some("https://user:pw@example.com/v1".into()), ..VlmSettings::default() };
        assert!(bad.check().expect_err("credentials").contains("credentials"));
        let bad = VlmSettings { base_url: Some("htps//sk-secret-value@host".into()), ..VlmSettings::default() };
        assert!(!bad.check().expect_err("not a URL").contains("sk-secret"), "the URL is not echoed");
        let bad = VlmSettings { timeout: 1e30, ..VlmSettings::default() };
        assert!(bad.check().expect_err("timeout").contains("vlm.timeout"));
        let bad = VlmSettings { temperature: 3.0, ..VlmSettings::default() };
        assert!(bad.check().expect_err("temperature").contains("temperature"));
    }
}
