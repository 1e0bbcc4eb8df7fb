//! An embedder behind an OpenAI-compatible `/embeddings` endpoint, for GERD-RET with a
//! learned encoder.
//!
//! A target image goes as one `input` string, a PNG data URL (the form multimodal
//! embedding servers such as Infinity and vLLM's CLIP-style models take); a state goes as a
//! line of text describing it ([`state_text`]). The index records `http:MODEL` as its
//! embedder, so an index is only ever queried with the model that built it.

use std::io::Cursor;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use base64::Engine;
use freecad_bridge::{Command, ModelState};
use gerd::retrieve::embed::{Embedder, operation_key};
use image::RgbImage;
use serde_json::{Value, json};

use super::ApiKey;

#[derive(Debug)]
pub struct HttpEmbedder {
    model: String,
    base_url: String,
    key: Option<ApiKey>,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl HttpEmbedder {
    pub fn new(model: &str, base_url: &str, key: Option<ApiKey>) -> Result<HttpEmbedder, String> {
        super::settings::check_base_url(base_url)?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| format!("cannot set up HTTP: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
        Ok(HttpEmbedder {
            model: model.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            http,
            runtime,
        })
    }

    /// The embedder ID an index built with `model` records.
    pub fn id_for(model: &str) -> String {
        format!("http:{model}")
    }

    fn embed(&self, input: String) -> Result<Vec<f32>, String> {
        let body = json!({"model": self.model, "input": [input], "encoding_format": "float"}).to_string();
        let url = format!("{}/embeddings", self.base_url);
        let post = || async {
            let mut request =
                self.http.post(&url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.clone());
            if let Some(key) = &self.key {
                let mut value = reqwest::header::HeaderValue::from_str(&key.header_value())
                    .map_err(|_| (false, "the API key holds characters an HTTP header cannot carry".to_string()))?;
                value.set_sensitive(true);
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
            let response = request.send().await.map_err(|e| (true, e.without_url().to_string()))?;
            let status = response.status();
            let text = response.text().await.map_err(|e| (true, e.without_url().to_string()))?;
            let retry = status.as_u16() == 429 || status.is_server_error();
            if !status.is_success() {
                return Err((
                    retry,
                    format!("HTTP {}: {}", status.as_u16(), text.chars().take(300).collect::<String>()),
                ));
            }
            let v: Value = serde_json::from_str(&text).map_err(|e| (true, format!("not JSON ({e})")))?;
            let values = v["data"][0]["embedding"]
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or((false, "the response has no data[0].embedding".to_string()))?;
            values
                .iter()
                .map(|x| x.as_f64().filter(|f| f.is_finite()).map(|f| f as f32))
                .collect::<Option<Vec<f32>>>()
                .ok_or((false, "data[0].embedding holds a value that is not a number".to_string()))
        };
        let backoff =
            ExponentialBuilder::default().with_min_delay(Duration::from_millis(500)).with_max_times(4).with_jitter();
        self.runtime
            .block_on(post.retry(backoff).sleep(tokio::time::sleep).when(|(retry, _)| *retry))
            .map_err(|(_, e)| ApiKey::redact(self.key.as_ref(), &format!("{} at {}: {e}", self.model, self.base_url)))
    }
}

impl Embedder for HttpEmbedder {
    fn id(&self) -> String {
        HttpEmbedder::id_for(&self.model)
    }

    fn embed_image(&mut self, image: &RgbImage) -> Result<Vec<f32>, String> {
        let mut png = Vec::new();
        image.write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| e.to_string())?;
        let url = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(&png));
        self.embed(url)
    }

    fn embed_state(&mut self, state: &ModelState, history: &[Command]) -> Result<Vec<f32>, String> {
        self.embed(state_text(state, history))
    }
}

/// One line describing a modeling state for a text embedding model.
pub fn state_text(state: &ModelState, history: &[Command]) -> String {
    if state.empty {
        return "An empty CAD model: no operations yet.".into();
    }
    let count = |name: &str, n: usize| (n > 0).then(|| format!("{n} {name}"));
    let faces: Vec<String> = [
        ("planar", freecad_bridge::state::FaceKind::Plane),
        ("cylindrical", freecad_bridge::state::FaceKind::Cylinder),
        ("conical", freecad_bridge::state::FaceKind::Cone),
        ("spherical", freecad_bridge::state::FaceKind::Sphere),
        ("toroidal", freecad_bridge::state::FaceKind::Torus),
    ]
    .iter()
    .filter_map(|(name, kind)| count(name, state.faces.iter().filter(|f| f.kind == *kind).count()))
    .collect();
    let ops: Vec<&str> = history.iter().filter(|c| !matches!(c, Command::Sketch(_))).map(operation_key).collect();
    // Proportions, not millimetres: the loop builds at S_t's scale, datasets at their own.
    let size = state.bbox.map_or(String::new(), |b| {
        let mut e = [0, 1, 2].map(|i| b.max[i] - b.min[i]);
        e.sort_by(|a, b| b.total_cmp(a));
        let l = e[0].max(f64::MIN_POSITIVE);
        format!(", proportions 1 : {:.2} : {:.2}", e[1] / l, e[2] / l)
    });
    format!(
        "A CAD model with {} faces ({}), {} edges, {} vertices{size}; operations so far: {}.",
        state.faces.len(),
        faces.join(", "),
        state.edges.len(),
        state.vertices.len(),
        ops.join(", ")
    )
}
