//! The chat-completions client against a mock server on 127.0.0.1: the request's shape,
//! the step-down of response formats, retries (429 with Retry-After, 5xx, dropped
//! connections, timeouts, broken bodies), the concurrency limit, the response cache, and
//! the key kept out of every message.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use common::files_under;
use serde_json::{Value, json};
use vision2cad::vlm::mock::{MockReply, MockServer};
use vision2cad::vlm::{
    ApiKey, CacheMode, ChatClient, Price, Request, ResponseFormat, Stage, Vlm, VlmError, VlmSettings,
};

const KEY: &str = "sk-test-0123456789abcdef";

fn settings() -> VlmSettings {
    let mut s =
        VlmSettings { model: "mock-model".into(), retry_delay: 0.01, retries: 3, timeout: 5.0, ..Default::default() };
    s.prices.insert("mock-model".into(), Price { input: 2.0, output: 8.0 });
    s
}

fn client(server: &MockServer, settings: VlmSettings) -> ChatClient {
    ChatClient::new(settings, server.base_url(), ApiKey::new(KEY)).expect("client")
}

/// A PNG of `size` pixels, written into `dir`.
fn png(dir: &Path, name: &str, size: u32) -> PathBuf {
    let path = dir.join(name);
    image::RgbImage::from_fn(size, size, |x, y| image::Rgb([(x % 256) as u8, (y % 256) as u8, 128]))
        .save(&path)
        .expect("png");
    path
}

fn request(images: Vec<PathBuf>) -> Request {
    Request {
        stage: Stage::Stage3,
        system: "You are a CAD engineer.".into(),
        text: "Accept or reject the preview.".into(),
        images,
        schema: json!({"type": "object", "required": ["verdict"], "properties": {"verdict": {"enum": ["accept", "reject"]}}}),
        context: Default::default(),
    }
}

const ACCEPT: &str = r#"{"verdict": "accept", "reasons": []}"#;

#[test]
fn a_request_carries_the_text_the_images_the_schema_and_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start(|_, _| MockReply::answer(ACCEPT)).expect("server");
    let mut vlm = client(&server, settings());
    let images = vec![png(dir.path(), "target.png", 40), png(dir.path(), "preview.png", 30)];
    let reply = vlm.answer(&request(images)).expect("answer");
    assert_eq!(reply.text, ACCEPT);
    let usage = reply.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (1000, 100));
    assert!((usage.cost.expect("priced") - (1000.0 * 2.0 + 100.0 * 8.0) / 1e6).abs() < 1e-12);

    let received = server.received();
    assert_eq!(received.len(), 1);
    let r = &received[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let body = &r.body;
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"]["required"][0], "verdict");
    let content = body["messages"][1]["content"].as_array().expect("parts");
    assert_eq!(content[0]["text"], "Accept or reject the preview.");
    let sizes: Vec<u32> = content[1..]
        .iter()
        .map(|part| {
            let url = part["image_url"]["url"].as_str().expect("data url");
            let data = url.strip_prefix("data:image/png;base64,").expect("a PNG data URL");
            let bytes = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
            image::load_from_memory(&bytes).expect("decodable").width()
        })
        .collect();
    assert_eq!(sizes, vec![40, 30], "both images, in order, decodable");
}

#[test]
fn images_larger_than_image_size_are_scaled_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start(|_, _| MockReply::answer(ACCEPT)).expect("server");
    let mut vlm = client(&server, VlmSettings { image_size: Some(64), ..settings() });
    vlm.answer(&request(vec![png(dir.path(), "big.png", 200), png(dir.path(), "small.png", 50)])).expect("answer");
    let body = &server.received()[0].body;
    let widths: Vec<u32> = body["messages"][1]["content"].as_array().expect("parts")[1..]
        .iter()
        .map(|p| {
            let url = p["image_url"]["url"].as_str().expect("url");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(url.split_once(",").expect("data url").1)
                .expect("base64");
            image::load_from_memory(&bytes).expect("png").width()
        })
        .collect();
    assert_eq!(widths, vec![64, 50]);
}

#[test]
fn a_server_without_json_schema_is_asked_for_json_object_from_then_on() {
    let server = MockServer::start(|_, body| {
        if body["response_format"]["type"] == "json_schema" {
            MockReply::status(400, "response_format json_schema is not supported by this server")
        } else {
            MockReply::answer(ACCEPT)
        }
    })
    .expect("server");
    let mut vlm = client(&server, settings());
    assert_eq!(vlm.answer(&request(vec![])).expect("answer").text, ACCEPT);
    assert_eq!(vlm.response_format(), ResponseFormat::JsonObject);
    vlm.answer(&request(vec![])).expect("second answer");
    let received = server.received();
    assert_eq!(received.len(), 3, "one refusal, then json_object straight away");
    assert_eq!(received[1].body["response_format"]["type"], "json_object");
    let system = received[1].body["messages"][0]["content"].as_str().expect("system");
    assert!(system.contains("\"verdict\""), "without json_schema the schema goes into the prompt: {system}");

    // A format fixed in the settings is never changed: the refusal is the error.
    let mut fixed = client(&server, VlmSettings { response_format: ResponseFormat::JsonSchema, ..settings() });
    let err = fixed.answer(&request(vec![])).expect_err("refused").to_string();
    assert!(err.contains("HTTP 400") && err.contains("json_schema"), "{err}");
}

#[test]
fn transient_failures_are_retried_and_the_answer_arrives() {
    let cases: Vec<(&str, MockReply)> = vec![
        ("500", MockReply::status(500, "internal error")),
        ("503", MockReply::status(503, "overloaded")),
        ("dropped connection", MockReply::Drop),
        ("broken body", MockReply::Body("{\"choices\": [".into())),
        ("slow answer", MockReply::Delay(Duration::from_secs(3), Box::new(MockReply::answer(ACCEPT)))),
    ];
    for (what, failure) in cases {
        let server =
            MockServer::start(move |call, _| if call == 0 { failure.clone() } else { MockReply::answer(ACCEPT) })
                .expect("server");
        let mut vlm = client(&server, VlmSettings { timeout: 1.0, ..settings() });
        let reply = vlm.answer(&request(vec![])).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(reply.text, ACCEPT, "{what}");
        assert!(server.received().len() >= 2, "{what}: retried");
    }
}

#[test]
fn retry_after_is_honoured() {
    let server = MockServer::start(|call, _| {
        if call == 0 {
            MockReply::Status {
                code: 429,
                headers: vec![("Retry-After".into(), "1".into())],
                body: json!({"error": {"message": "rate limited"}}).to_string(),
            }
        } else {
            MockReply::answer(ACCEPT)
        }
    })
    .expect("server");
    let mut vlm = client(&server, settings());
    let start = Instant::now();
    vlm.answer(&request(vec![])).expect("answer after the wait");
    // The backoff alone would wait 10 ms; the server asked for a second.
    assert!(start.elapsed() >= Duration::from_millis(950), "waited only {:?}", start.elapsed());
    assert_eq!(server.received().len(), 2);
}

#[test]
fn the_last_failure_is_a_clear_error_and_the_key_never_shows() {
    let server = MockServer::start(|_, _| MockReply::status(503, "overloaded")).expect("server");
    let mut vlm = client(&server, VlmSettings { retries: 2, ..settings() });
    let err = vlm.answer(&request(vec![])).expect_err("gives up").to_string();
    assert!(err.contains("HTTP 503") && err.contains("after 3 tries") && err.contains("overloaded"), "{err}");
    assert_eq!(server.received().len(), 3);

    // A wrong key: not retried, and neither the key nor the fragment the server echoes shows.
    let echo = format!("Incorrect API key provided: {}***{}", &KEY[..8], &KEY[KEY.len() - 4..]);
    let server = MockServer::start(move |_, _| MockReply::status(401, &echo)).expect("server");
    let mut vlm = client(&server, settings());
    let err = vlm.answer(&request(vec![])).expect_err("unauthorised");
    let text = format!("{err} {err:?} {vlm:?}");
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(!text.contains(KEY) && !text.contains(&KEY[KEY.len() - 4..]), "the key leaked: {text}");
    assert_eq!(server.received().len(), 1, "a refused key is not retried");
}

#[test]
fn a_wait_longer_than_ten_minutes_is_not_honoured_but_reported() {
    let server = MockServer::start(|_, _| MockReply::Status {
        code: 429,
        headers: vec![("Retry-After".into(), "1e25".into())],
        body: json!({"error": {"message": "come back next year"}}).to_string(),
    })
    .expect("server");
    let mut vlm = client(&server, settings());
    let err = vlm.answer(&request(vec![])).expect_err("gives up").to_string();
    assert!(err.contains("HTTP 429") && err.contains("next year"), "{err}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn clients_refused_at_once_step_down_one_format_only() {
    let server = MockServer::start(|_, body| {
        if body["response_format"]["type"] == "json_schema" {
            MockReply::Delay(
                Duration::from_millis(100),
                Box::new(MockReply::status(400, "response_format json_schema is not supported")),
            )
        } else {
            MockReply::answer(ACCEPT)
        }
    })
    .expect("server");
    let vlm = client(&server, settings());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut vlm = vlm.clone();
            std::thread::spawn(move || vlm.answer(&request(vec![])).map(|r| r.text))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("thread").expect("answer"), ACCEPT);
    }
    assert_eq!(vlm.response_format(), ResponseFormat::JsonObject, "not stepped past json_object");
    assert!(server.received().iter().all(|r| r.body["response_format"].is_object()), "never plain text");
}

#[test]
fn a_missing_key_is_an_error_before_any_request() {
    let err = ChatClient::new(settings(), "https://api.openai.com/v1".into(), None).expect_err("no key");
    assert!(err.to_string().contains("VISION2CAD_API_KEY"), "{err}");
    // A local server needs none.
    let server = MockServer::start(|_, _| MockReply::answer(ACCEPT)).expect("server");
    let mut vlm = ChatClient::new(settings(), server.base_url(), None).expect("local server, no key");
    vlm.answer(&request(vec![])).expect("answer");
    assert_eq!(server.received()[0].header("authorization"), None);
}

#[test]
fn clones_share_one_concurrency_limit() {
    let server =
        MockServer::start(|_, _| MockReply::Delay(Duration::from_millis(150), Box::new(MockReply::answer(ACCEPT))))
            .expect("server");
    let vlm = client(&server, VlmSettings { concurrency: 2, ..settings() });
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let mut vlm = vlm.clone();
            std::thread::spawn(move || vlm.answer(&request(vec![])).map(|r| r.text))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("thread").expect("answer"), ACCEPT);
    }
    assert_eq!(server.received().len(), 6);
    assert_eq!(server.max_in_flight(), 2, "never more than the limit, and the limit is used");
}

#[test]
fn the_cache_answers_repeated_requests_and_replays_without_a_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let image = png(dir.path(), "target.png", 32);
    let server = MockServer::start(|_, _| MockReply::answer(ACCEPT)).expect("server");
    let write = VlmSettings { cache: Some(cache.clone()), cache_mode: CacheMode::Write, ..settings() };
    let mut vlm = client(&server, write.clone());
    let first = vlm.answer(&request(vec![image.clone()])).expect("answer");
    let second = vlm.answer(&request(vec![image.clone()])).expect("cached answer");
    assert!(!first.cached && second.cached);
    assert_eq!(first.text, second.text);
    assert_eq!(second.usage.and_then(|u| u.cost), Some(0.0), "nothing paid for a cached answer");
    assert_eq!(server.received().len(), 1);

    // Replay: a server that needs a key, no key, and no request leaves this machine (the
    // answer comes from the cache); a request the cache does not hold fails.
    let remote = "https://api.openai.com/v1".to_string();
    let replay = VlmSettings { cache_mode: CacheMode::Replay, ..write.clone() };
    let mut offline = ChatClient::new(replay, remote, None).expect("replay needs no key");
    assert_eq!(offline.answer(&request(vec![image.clone()])).expect("replayed").text, ACCEPT);
    let mut other = request(vec![image]);
    other.text.push_str(" Again.");
    assert!(matches!(offline.answer(&other), Err(VlmError::NoAnswer { .. })));

    // Read mode uses hits but stores nothing new.
    let read = VlmSettings { cache_mode: CacheMode::Read, ..write };
    let mut reader = client(&server, read);
    reader.answer(&other).expect("from the server");
    assert!(matches!(offline.answer(&other), Err(VlmError::NoAnswer { .. })), "read mode stored an answer");
    // No cached file holds the key.
    for entry in files_under(&cache) {
        let text = std::fs::read_to_string(&entry).expect("read");
        assert!(!text.contains(KEY), "{} holds the key", entry.display());
    }
}

#[test]
fn concurrent_writers_share_one_cache_without_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start(|call, _| MockReply::answer(format!("{{\"verdict\": \"accept\", \"n\": {call}}}")))
        .expect("server");
    let write = VlmSettings { cache: Some(dir.path().to_path_buf()), cache_mode: CacheMode::Write, ..settings() };
    let threads: Vec<_> = (0..8)
        .map(|i| {
            // Separate clients, as separate processes would have; half the requests coincide,
            // and the server answers each call differently.
            let mut vlm = client(&server, write.clone());
            std::thread::spawn(move || {
                (0..5)
                    .map(|j| {
                        let mut r = request(vec![]);
                        r.text = format!("question {}", (i % 2) * 100 + j);
                        (r.text.clone(), vlm.answer(&r).expect("answer").text)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<(String, String)> = threads.into_iter().flat_map(|t| t.join().expect("thread")).collect();
    // Every client used the answer the cache keeps for its question: a replay repeats each run.
    let mut replay = ChatClient::new(
        VlmSettings { cache_mode: CacheMode::Replay, ..write.clone() },
        "http://127.0.0.1:9/v1".into(),
        None,
    )
    .expect("replay");
    for (question, answer) in answers {
        let mut r = request(vec![]);
        r.text = question;
        assert_eq!(replay.answer(&r).expect("cached").text, answer);
    }
    let files = files_under(dir.path());
    assert_eq!(files.len(), 10, "one file per distinct request");
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).expect("read")).expect("whole JSON");
        assert!(v["text"].as_str().is_some_and(|t| t.starts_with("{\"verdict\"")));
    }
}
