//! `vision2cad bench vlm`: what the chat client itself costs per call, against a mock
//! server on 127.0.0.1 that answers at once. The reference, measured in the same run, is a
//! bare HTTP POST of the same request body (already encoded) with its response parsed: the
//! difference is the client's own work (reading and encoding the images, building the body,
//! the cache digest, the concurrency slot, parsing the answer).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use vision2cad::prompts::Prompts;
use vision2cad::vlm::mock::{MockReply, MockServer};
use vision2cad::vlm::{CacheMode, ChatClient, Request, Stage, Vlm, VlmSettings};

use crate::cli::commands::bench::median;
use crate::cli::files::write_atomic;

#[derive(Debug, clap::Args)]
pub struct VlmBench {
    /// The images each request carries (the loop sends the target and one view).
    #[arg(long, default_value = "assets/examples/plate_counterbore.png")]
    pub image: PathBuf,
    /// Calls timed per figure.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// A Stage 1 answer of realistic size.
const ANSWER: &str = r#"{"reason": "The plate is the base feature: a rectangle on XY, padded 10 mm.", "sketches": [{"name": "S1", "on": "XY"}], "command": {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 10.0}}}"#;

pub fn run(args: &VlmBench) -> Result<ExitCode> {
    anyhow::ensure!(args.image.is_file(), "--image {} does not exist", args.image.display());
    let prompts = Prompts::load(None)?;
    let server = MockServer::start(|_, _| MockReply::answer(ANSWER)).context("cannot start the mock server")?;
    let request = Request {
        stage: Stage::Stage1,
        system: "You are a CAD engineer who models parts in FreeCAD step by step.".into(),
        text: "Choose the next operation. ".repeat(100),
        images: vec![args.image.clone(), args.image.clone()],
        schema: prompts.schema(Stage::Stage1).clone(),
        context: Default::default(),
    };
    let calls = args.calls.max(10);
    let settings = VlmSettings { model: "mock".into(), retries: 0, ..VlmSettings::default() };

    // The client, no cache: every call goes to the server.
    let mut client = ChatClient::new(settings.clone(), server.base_url(), None)?;
    client.answer(&request)?;
    let full = time(calls, || Ok(client.answer(&request).map(drop)?))?;
    let body = server.received().pop().context("the mock saw no request")?.body;
    let body_bytes = serde_json::to_vec(&body)?;

    // Reference: the same bytes POSTed with a bare reqwest client, response parsed.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let http = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());
    let post = || -> Result<()> {
        runtime.block_on(async {
            let text = http.post(&url).body(body_bytes.clone()).send().await?.text().await?;
            let v: serde_json::Value = serde_json::from_str(&text)?;
            anyhow::ensure!(v["choices"][0]["message"]["content"].is_string(), "no answer");
            Ok(())
        })
    };
    post()?;
    let reference = time(calls, post)?;

    // Cache hits: the request answered from disk, no server.
    let cache = tempfile::tempdir()?;
    let cached = VlmSettings { cache: Some(cache.path().to_path_buf()), cache_mode: CacheMode::Write, ..settings };
    let mut cached_client = ChatClient::new(cached, server.base_url(), None)?;
    cached_client.answer(&request)?;
    let hit = time(calls, || Ok(cached_client.answer(&request).map(drop)?))?;

    // What the loop adds to every answer: parsing and the schema check.
    let validate = time(calls, || {
        let v: serde_json::Value = serde_json::from_str(ANSWER)?;
        prompts.validate(Stage::Stage1, &v).map_err(|e| anyhow::anyhow!(e.join("; ")))
    })?;

    let image_kib = std::fs::metadata(&args.image)?.len() as f64 * 2.0 / 1024.0;
    println!(
        "chat client per call against a local mock server, median of {calls}; request body {:.0} KiB (2 images, {image_kib:.0} KiB of PNG)",
        body_bytes.len() as f64 / 1024.0
    );
    println!("{:<58} {:>10} {:>10}", "", "median ms", "x bare");
    let rows = [
        ("client call (encode, digest, POST, parse)", full),
        ("client call answered from the response cache", hit),
        ("loop: parse and schema-check one answer", validate),
    ];
    for (name, v) in rows {
        println!("{name:<58} {:>10.3} {:>10.2}", v * 1e3, v / reference);
    }
    println!(
        "{:<58} {:>10.3} {:>10.2}",
        "reference: bare POST of the same body, response parsed",
        reference * 1e3,
        1.0
    );
    println!("client overhead over the bare POST: {:.3} ms per call", (full - reference) * 1e3);
    if let Some(path) = &args.json {
        let report = json!({
            "calls": calls, "body_bytes": body_bytes.len(),
            "median_seconds": {"client": full, "cache_hit": hit, "validate": validate, "reference_bare_post": reference},
        });
        write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Median seconds of `n` runs of `f`.
fn time(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(median(samples))
}
