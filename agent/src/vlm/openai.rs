//! A client for every server that speaks OpenAI's chat-completions protocol: OpenAI,
//! OpenRouter, vLLM, Ollama, llama.cpp's server.
//!
//! One call is `POST {base_url}/chat/completions` with the stage's system prompt, its text
//! and its images as base64 data URLs. The structure of the answer is requested with
//! `response_format` as far as the server supports it ([`ResponseFormat`]); whatever comes
//! back, the loop validates it against the stage's schema and re-asks with the errors.
//!
//! 429, 5xx, dropped connections, timeouts and unreadable bodies are retried with
//! exponential backoff and jitter (`backon`), waiting at least what `Retry-After` asks.
//! Requests in flight are bounded by a semaphore that every clone of a client shares, so a
//! batch of parts running in threads stays within one limit.
//!
//! ```no_run
//! use vision2cad::vlm::{ApiKey, ChatClient, VlmSettings};
//! let settings = VlmSettings { model: "gpt-4o".into(), ..VlmSettings::default() };
//! let key = ApiKey::new(std::env::var("OPENAI_API_KEY").unwrap_or_default());
//! let client = ChatClient::new(settings, "https://api.openai.com/v1".into(), key)?;
//! # Ok::<(), vision2cad::vlm::VlmError>(())
//! ```

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::cache::{self, CachedReply, ResponseCache};
use super::settings::{ApiKey, CacheMode, Price, ResponseFormat, VlmSettings};
use super::{Reply, Request, Usage, Vlm, VlmError};

/// The longest wait a `Retry-After` header may impose; longer asks end the call.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// A chat-completions client. Clones share the connection pool, the concurrency limit, the
/// negotiated request shape and the cache. It is blocking: call it from ordinary threads
/// (the loop's), not from inside an async runtime.
#[derive(Debug, Clone)]
pub struct ChatClient {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    settings: VlmSettings,
    /// Without a trailing slash.
    base_url: String,
    key: Option<ApiKey>,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    limit: Semaphore,
    /// A limit shared with other processes (the jobs of one `run`).
    process_slots: OnceLock<ProcessSlots>,
    shape: Mutex<Shape>,
    cache: Option<ResponseCache>,
    price: Option<Price>,
}

/// What this server accepts, learnt from the errors it gives.
#[derive(Debug, Clone, Copy)]
struct Shape {
    format: ResponseFormat,
    /// `max_completion_tokens` instead of `max_tokens` (OpenAI's reasoning models).
    completion_tokens_field: bool,
    /// Some models accept only their default temperature.
    send_temperature: bool,
}

/// Why one HTTP attempt failed.
#[derive(Debug)]
enum CallError {
    Status {
        code: u16,
        retry_after: Option<Duration>,
        message: String,
    },
    Transport(String),
    /// Not JSON: a transfer cut short or a proxy's page; worth another try.
    BadBody(String),
    /// A well-formed response without an answer (a refusal, no content): asking again
    /// would be paid for and answered the same.
    NoAnswer(String),
}

impl CallError {
    fn retryable(&self) -> bool {
        match self {
            CallError::Status { code, .. } => matches!(code, 408 | 409 | 425 | 429 | 500..=599),
            CallError::Transport(_) | CallError::BadBody(_) => true,
            CallError::NoAnswer(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            CallError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status { code, message, .. } => write!(f, "HTTP {code}: {message}"),
            CallError::Transport(m) => f.write_str(m),
            CallError::BadBody(m) => write!(f, "unreadable response: {m}"),
            CallError::NoAnswer(m) => f.write_str(m),
        }
    }
}

/// What the server's 400 asks us to change, if it is one of the known refusals.
#[derive(Debug, PartialEq)]
enum Refusal {
    Format,
    MaxTokensField,
    Temperature,
}

fn refusal(error: &CallError) -> Option<Refusal> {
    let CallError::Status { code: 400 | 422, message, .. } = error else { return None };
    let m = message.to_ascii_lowercase();
    if m.contains("max_completion_tokens") {
        Some(Refusal::MaxTokensField)
    } else if m.contains("response_format") || m.contains("json_schema") || m.contains("json_object") {
        Some(Refusal::Format)
    } else if m.contains("temperature") {
        Some(Refusal::Temperature)
    } else {
        None
    }
}

impl ChatClient {
    /// A client for the server at `base_url`. Checks the settings, the cache directory, and
    /// that a key is there when the server needs one, before any request is made.
    pub fn new(settings: VlmSettings, base_url: String, key: Option<ApiKey>) -> Result<ChatClient, VlmError> {
        // A server configured as keyless never receives the key from the environment.
        let key = if settings.needs_key == Some(false) { None } else { key };
        let fail = |reason: String| VlmError::Failed {
            backend: settings.model.clone(),
            reason: ApiKey::redact(key.as_ref(), &reason),
        };
        settings.check().map_err(fail)?;
        super::settings::check_base_url(&base_url).map_err(fail)?;
        let replay = settings.cache_mode == CacheMode::Replay;
        if key.is_none() && settings.key_needed(&base_url) && !replay {
            return Err(fail(format!(
                "{base_url} needs an API key: set VISION2CAD_API_KEY (or OPENAI_API_KEY); a local server without keys takes vlm.needs_key = false"
            )));
        }
        let cache = match &settings.cache {
            Some(dir) => ResponseCache::open(dir, settings.cache_mode).map_err(fail)?,
            None => None,
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(settings.timeout))
            .connect_timeout(Duration::from_secs_f64(settings.timeout.min(30.0)))
            .user_agent(concat!("vision2cad/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| fail(format!("cannot set up HTTP: {e}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vlm-http")
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start the HTTP runtime: {e}")))?;
        let shape = Shape {
            format: match settings.response_format {
                ResponseFormat::Auto => ResponseFormat::JsonSchema,
                f => f,
            },
            completion_tokens_field: false,
            send_temperature: true,
        };
        Ok(ChatClient {
            shared: Arc::new(Shared {
                price: settings.prices.get(&settings.model).copied(),
                limit: Semaphore::new(settings.concurrency),
                process_slots: OnceLock::new(),
                base_url: base_url.trim_end_matches('/').to_string(),
                settings,
                key,
                http,
                runtime,
                shape: Mutex::new(shape),
                cache,
            }),
        })
    }

    /// Share a limit of `count` requests in flight with every process given the same
    /// folder (the jobs of one `run`), on top of this client's own `concurrency`.
    pub fn limit_across_processes(&self, dir: PathBuf, count: usize) -> Result<(), VlmError> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| self.fail(format!("cannot create the request slots {}: {e}", dir.display())))?;
        let _ = self.shared.process_slots.set(ProcessSlots { dir, count: count.max(1) });
        Ok(())
    }

    /// The response format in use now (after any step-down).
    pub fn response_format(&self) -> ResponseFormat {
        self.shared.shape().format
    }

    fn fail(&self, reason: impl Into<String>) -> VlmError {
        VlmError::Failed { backend: self.name(), reason: ApiKey::redact(self.shared.key.as_ref(), &reason.into()) }
    }

    /// Check the server before a batch spends anything on it: it answers, takes the key,
    /// and (where it lists its models at `GET /models`) serves the configured model. A
    /// server that lists no models passes: not every OpenAI-compatible one does.
    pub fn check_server(&self) -> Result<(), VlmError> {
        let shared = &self.shared;
        if shared.settings.cache_mode == CacheMode::Replay {
            return Ok(());
        }
        let models = shared.runtime.block_on(shared.list_models()).map_err(|e| match e {
            CallError::Status { code: 401 | 403, message, .. } => {
                self.fail(format!("{} refused the API key (HTTP 401/403): {message}", shared.base_url))
            }
            other => self.fail(format!("{} cannot be used: {other}", shared.base_url)),
        })?;
        let model = &shared.settings.model;
        match models {
            Some(ids) if !ids.is_empty() && !ids.iter().any(|id| id == model) => {
                let mut listed = ids.iter().take(12).cloned().collect::<Vec<_>>().join(", ");
                if ids.len() > 12 {
                    listed.push_str(", ...");
                }
                Err(self.fail(format!(
                    "{} does not serve the model {model:?} (--model, [vlm] model); it serves: {listed}",
                    shared.base_url
                )))
            }
            _ => Ok(()),
        }
    }
}

impl Shared {
    /// The request with the key as a (sensitive, never logged) authorization header.
    fn authorized(&self, request: reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, CallError> {
        let Some(key) = &self.key else { return Ok(request) };
        let mut value = reqwest::header::HeaderValue::from_str(&key.header_value())
            .map_err(|_| CallError::NoAnswer("the API key holds characters an HTTP header cannot carry".into()))?;
        value.set_sensitive(true);
        Ok(request.header(reqwest::header::AUTHORIZATION, value))
    }

    /// The model IDs of `GET /models`; `None` when the server does not list them.
    async fn list_models(&self) -> Result<Option<Vec<String>>, CallError> {
        let request = self.authorized(self.http.get(format!("{}/models", self.base_url)))?;
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.transport(e))?;
        if matches!(status.as_u16(), 401 | 403) {
            return Err(CallError::Status { code: status.as_u16(), retry_after: None, message: server_message(&text) });
        }
        if !status.is_success() {
            return Ok(None);
        }
        let ids = serde_json::from_str::<Value>(&text).ok().and_then(|v| {
            v["data"]
                .as_array()
                .map(|models| models.iter().filter_map(|m| m["id"].as_str().map(str::to_owned)).collect())
        });
        Ok(ids)
    }

    fn shape(&self) -> Shape {
        *self.shape.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Change what is sent after a refusal; false when there is nothing left to change.
    fn adapt(&self, refusal: Refusal, used: Shape) -> bool {
        let mut shape = self.shape.lock().unwrap_or_else(PoisonError::into_inner);
        if shape.format != used.format
            || shape.completion_tokens_field != used.completion_tokens_field
            || shape.send_temperature != used.send_temperature
        {
            // Another call already adapted to this server: ask again in the new shape.
            return true;
        }
        let auto = self.settings.response_format == ResponseFormat::Auto;
        match refusal {
            Refusal::Format if auto => match shape.format.weaker() {
                Some(weaker) => {
                    tracing::warn!(
                        "{} refused response_format {}; using {} from now on",
                        self.base_url,
                        shape.format.name(),
                        weaker.name()
                    );
                    shape.format = weaker;
                    true
                }
                None => false,
            },
            Refusal::MaxTokensField if !shape.completion_tokens_field => {
                shape.completion_tokens_field = true;
                true
            }
            Refusal::Temperature if shape.send_temperature => {
                tracing::warn!("{} refused the temperature setting; using the model's default", self.settings.model);
                shape.send_temperature = false;
                true
            }
            _ => false,
        }
    }

    /// The JSON body of a request in the current shape.
    fn body(&self, request: &Request, images: &[EncodedImage], shape: Shape) -> Value {
        let s = &self.settings;
        let mut system = request.system.clone();
        if shape.format != ResponseFormat::JsonSchema {
            let schema = serde_json::to_string_pretty(&request.schema).unwrap_or_default();
            system.push_str(&format!(
                "\n\nYour answer is one JSON object, and nothing else, that satisfies this JSON Schema:\n```json\n{schema}\n```\n"
            ));
        }
        let mut content = vec![json!({"type": "text", "text": request.text})];
        for image in images {
            content.push(json!({"type": "image_url", "image_url": {"url": image.data_url()}}));
        }
        let mut body = json!({
            "model": s.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": content}],
        });
        let tokens_field = if shape.completion_tokens_field { "max_completion_tokens" } else { "max_tokens" };
        body[tokens_field] = s.max_tokens.into();
        if shape.send_temperature {
            body["temperature"] = s.temperature.into();
        }
        if let Some(seed) = s.seed {
            body["seed"] = seed.into();
        }
        match shape.format {
            ResponseFormat::Auto | ResponseFormat::JsonSchema => {
                body["response_format"] = json!({"type": "json_schema",
                    "json_schema": {"name": request.stage.name(), "schema": request.schema, "strict": false}});
            }
            ResponseFormat::JsonObject => body["response_format"] = json!({"type": "json_object"}),
            ResponseFormat::Text => {}
        }
        body
    }

    /// One HTTP attempt, holding a slot of the concurrency limit.
    async fn post(&self, body: &[u8]) -> Result<(String, Usage), CallError> {
        let _slot =
            self.limit.acquire().await.map_err(|_| CallError::Transport("the client is shutting down".into()))?;
        let _process_slot = match self.process_slots.get() {
            Some(slots) => Some(slots.acquire().await.map_err(|e| CallError::Transport(e.to_string()))?),
            None => None,
        };
        let request = self.authorized(
            self.http
                .post(format!("{}/chat/completions", self.base_url))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec()),
        )?;
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let text = response.text().await.map_err(|e| self.transport(e))?;
        if !status.is_success() {
            return Err(CallError::Status { code: status.as_u16(), retry_after, message: server_message(&text) });
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| CallError::BadBody(format!("not JSON ({e})")))?;
        self.completion(&value)
    }

    fn transport(&self, e: reqwest::Error) -> CallError {
        if e.is_timeout() {
            CallError::Transport(format!("no answer within {} s", self.settings.timeout))
        } else if e.is_connect() {
            CallError::Transport(format!("cannot connect to {}", self.base_url))
        } else {
            let e = e.without_url();
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            CallError::Transport(text)
        }
    }

    /// The answer text and token counts of a chat completion.
    fn completion(&self, value: &Value) -> Result<(String, Usage), CallError> {
        let choice = &value["choices"][0];
        let message = &choice["message"];
        let finish = choice["finish_reason"].as_str().unwrap_or("none");
        if message.is_null() {
            return Err(CallError::NoAnswer(format!(
                "the response has no choices[0].message (finish_reason {finish})"
            )));
        }
        if finish == "length" {
            tracing::warn!("{}: the answer was cut at max_tokens = {}", self.settings.model, self.settings.max_tokens);
        }
        if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty()) {
            return Err(CallError::NoAnswer(format!("the model refused: {refusal}")));
        }
        let text = match &message["content"] {
            Value::String(s) => s.clone(),
            // Some servers return content as a list of parts.
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
            _ => {
                return Err(CallError::NoAnswer(format!(
                    "choices[0].message.content is not text (finish_reason {finish})"
                )));
            }
        };
        let input_tokens = value["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        let output_tokens = value["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        let cost = self.price.map(|p| p.cost(input_tokens, output_tokens));
        Ok((text, Usage { input_tokens, output_tokens, cost }))
    }

    /// Ask until an answer comes, a refusal cannot be adapted to, or the retries run out.
    async fn ask(&self, request: &Request, images: &[EncodedImage]) -> Result<(String, Usage), String> {
        let s = &self.settings;
        loop {
            let shape = self.shape();
            let body = serde_json::to_vec(&self.body(request, images, shape)).map_err(|e| e.to_string())?;
            let backoff = ExponentialBuilder::default()
                .with_min_delay(Duration::from_secs_f64(s.retry_delay))
                .with_max_delay(Duration::from_secs(60))
                .with_max_times(s.retries as usize)
                .with_jitter();
            let mut tries = 0;
            let result = (|| {
                tries += 1;
                self.post(&body)
            })
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(|e| e.retryable() && e.retry_after().is_none_or(|d| d <= MAX_RETRY_AFTER))
            .adjust(|e, next| next.map(|d| e.retry_after().map_or(d, |asked| asked.max(d))))
            .notify(|e, wait| {
                tracing::warn!(
                    "{} at {}: {}; retrying in {:.1} s",
                    s.model,
                    self.base_url,
                    ApiKey::redact(self.key.as_ref(), &e.to_string()),
                    wait.as_secs_f64()
                )
            })
            .await;
            match result {
                Ok(answer) => return Ok(answer),
                Err(e) => {
                    if let Some(r) = refusal(&e)
                        && self.adapt(r, shape)
                    {
                        continue;
                    }
                    let tries = if tries > 1 { format!(" after {tries} tries") } else { String::new() };
                    return Err(format!("{} at {}{tries}: {e}", s.model, self.base_url));
                }
            }
        }
    }
}

/// An image as it is sent: its media type and bytes.
#[derive(Debug)]
struct EncodedImage {
    mime: &'static str,
    bytes: Vec<u8>,
}

impl EncodedImage {
    fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, base64::engine::general_purpose::STANDARD.encode(&self.bytes))
    }
}

/// Read an image, scaled down to `max_side` when it is larger; PNG and JPEG go as they are,
/// other formats are converted to PNG.
fn encode_image(path: &std::path::Path, max_side: Option<u32>) -> Result<EncodedImage, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read image {}: {e}", path.display()))?;
    let format = image::guess_format(&bytes).map_err(|e| format!("{} is not an image: {e}", path.display()))?;
    let mime = match format {
        image::ImageFormat::Png => Some("image/png"),
        image::ImageFormat::Jpeg => Some("image/jpeg"),
        _ => None,
    };
    let decode = || image::load_from_memory(&bytes).map_err(|e| format!("cannot decode image {}: {e}", path.display()));
    let too_big = |img: &image::DynamicImage| max_side.is_some_and(|m| img.width().max(img.height()) > m);
    match (mime, max_side) {
        (Some(mime), None) => Ok(EncodedImage { mime, bytes }),
        _ => {
            let mut img = decode()?;
            if let (true, Some(m)) = (too_big(&img), max_side) {
                img = img.resize(m, m, image::imageops::FilterType::Triangle);
            } else if let Some(mime) = mime {
                return Ok(EncodedImage { mime, bytes });
            }
            let mut out = Vec::new();
            img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
                .map_err(|e| format!("cannot encode image {}: {e}", path.display()))?;
            Ok(EncodedImage { mime: "image/png", bytes: out })
        }
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        // A wait too long to represent is a wait too long to honour: past MAX_RETRY_AFTER.
        return (seconds >= 0.0).then(|| Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// The useful part of an error body: OpenAI-style `error.message`, or the text itself,
/// shortened.
fn server_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v["error"]["message"].as_str().or(v["error"].as_str()).or(v["message"].as_str()).map(str::to_owned)
        })
        .unwrap_or_else(|| body.trim().to_string());
    let mut short: String = message.chars().take(400).collect();
    if short.len() < message.len() {
        short.push_str("...");
    }
    if short.is_empty() { "(empty body)".into() } else { short }
}

impl Vlm for ChatClient {
    fn name(&self) -> String {
        self.shared.settings.model.clone()
    }

    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError> {
        let shared = &self.shared;
        let s = &shared.settings;
        let images = request
            .images
            .iter()
            .map(|p| encode_image(p, s.image_size))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.fail(e))?;
        // The request as the model sees it, whatever shape the server needs: a cache recorded
        // against one server replays against another.
        let key = cache::digest(&json!({
            "model": s.model, "system": request.system, "text": request.text, "schema": request.schema,
            "images": images.iter().map(|i| cache::digest_bytes(&i.bytes)).collect::<Vec<_>>(),
            "temperature": s.temperature, "max_tokens": s.max_tokens, "seed": s.seed,
        }));
        if let Some(cache) = &shared.cache {
            if let Some(hit) = cache.get(&key).map_err(|e| self.fail(e))? {
                let usage = hit.usage.map(|u| Usage { cost: Some(0.0), ..u });
                return Ok(Reply { text: hit.text, usage, cached: true, injected: Vec::new(), observed: Vec::new() });
            }
            if cache.mode() == CacheMode::Replay {
                return Err(VlmError::NoAnswer {
                    backend: self.name(),
                    reason: format!(
                        "the response cache holds no answer to this {} request ({key})",
                        request.stage.name()
                    ),
                });
            }
        }
        let (text, usage) = shared.runtime.block_on(shared.ask(request, &images)).map_err(|e| self.fail(e))?;
        if let Some(cache) = &shared.cache {
            let fresh = CachedReply { key, model: s.model.clone(), text: text.clone(), usage: Some(usage) };
            match cache.put(&fresh) {
                // Another process stored an answer to the same request first: use that one, so
                // every run that shares the cache replays to what it did.
                Ok(stored) if stored.text != text => {
                    return Ok(Reply {
                        text: stored.text,
                        usage: Some(usage),
                        cached: false,
                        injected: Vec::new(),
                        observed: Vec::new(),
                    });
                }
                Ok(_) => {}
                // The answer is paid for: a cache that cannot store it costs the cache, not the run.
                Err(e) => tracing::warn!("{e}"),
            }
        }
        Ok(Reply { text, usage: Some(usage), cached: false, injected: Vec::new(), observed: Vec::new() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn known_refusals_are_recognised() {
        let status = |m: &str| CallError::Status { code: 400, retry_after: None, message: m.into() };
        assert_eq!(refusal(&status("response_format json_schema is not supported")), Some(Refusal::Format));
        assert_eq!(
            refusal(&status("Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead.")),
            Some(Refusal::MaxTokensField)
        );
        assert_eq!(refusal(&status("'temperature' does not support 0 with this model")), Some(Refusal::Temperature));
        assert_eq!(refusal(&status("messages: too long")), None);
    }

    #[test]
    fn server_messages_are_extracted_and_shortened() {
        assert_eq!(server_message(r#"{"error": {"message": "slow down"}}"#), "slow down");
        assert_eq!(server_message(""), "(empty body)");
        assert!(server_message(&"x".repeat(1000)).ends_with("..."));
    }
}

/// Request slots shared between processes: `count` lock files in a folder, each held with
/// `flock` for one request. The kernel frees a slot when its holder ends, however it ends.
#[derive(Debug)]
struct ProcessSlots {
    dir: PathBuf,
    count: usize,
}

impl ProcessSlots {
    async fn acquire(&self) -> std::io::Result<std::fs::File> {
        use rustix::fs::{FlockOperation, flock};
        loop {
            for k in 0..self.count {
                let path = self.dir.join(format!("slot-{k}.lock"));
                let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
                match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                    Ok(()) => return Ok(file),
                    Err(e) if e == rustix::io::Errno::WOULDBLOCK => {}
                    Err(e) => return Err(std::io::Error::other(format!("cannot lock {}: {e}", path.display()))),
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
