//! `reconstruct --vlm openai` end to end against a mock chat-completions server that gives
//! the answers the oracle gave (after a malformed and a schema-violating one), then the same
//! run replayed from the response cache with no server and no key.

mod common;

use std::path::Path;
use std::process::Command as Process;
use std::sync::Arc;

use common::{files_under, repo_root, trace};
use serde_json::Value;
use vision2cad::vlm::mock::{MockReply, MockServer};

const KEY: &str = "sk-e2e-secret-9f8e7d6c5b4a";

fn run(image: &Path, out: &Path, args: &[&str], key: Option<&str>) -> std::process::Output {
    let mut cmd = common::command();
    cmd.arg("reconstruct").arg(image).arg("--out").arg(out).args(args);
    with_key(&mut cmd, key).output().expect("runs")
}

/// The command with no server settings from the environment, and the key when given.
fn with_key<'a>(cmd: &'a mut Process, key: Option<&str>) -> &'a mut Process {
    for var in ["VISION2CAD_API_KEY", "OPENAI_API_KEY", "VISION2CAD_BASE_URL", "OPENAI_BASE_URL"] {
        cmd.env_remove(var);
    }
    if let Some(k) = key {
        cmd.env("VISION2CAD_API_KEY", k);
    }
    cmd
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_model_server_drives_the_loop_and_the_cache_replays_it_offline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = repo_root();
    let image = root.join("assets/examples/plate_counterbore.png");
    let gt = root.join("assets/programs/plate_counterbore.json");

    // The answers a perfect model gives, recorded from the oracle.
    let oracle_out = dir.path().join("oracle");
    let o = run(&image, &oracle_out, &["--gt", gt.to_str().expect("utf-8")], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let answers: Vec<String> = trace(&oracle_out)
        .into_iter()
        .filter(|e| e["event"] == "call")
        .map(|e| e["answer"].as_str().expect("answer").to_string())
        .collect();
    assert!(answers.len() >= 6);

    // The server first answers with prose, then with JSON that breaks the schema.
    let recorded = Arc::new(answers);
    let server = {
        let recorded = Arc::clone(&recorded);
        MockServer::start(move |call, _| match call {
            0 => MockReply::answer("Sure! I would start with a sketch on XY."),
            1 => MockReply::answer(r#"{"operation": "pad"}"#),
            n => {
                recorded.get(n - 2).map_or(MockReply::status(500, "no more answers"), |a| MockReply::answer(a.clone()))
            }
        })
        .expect("server")
    };
    let cache = dir.path().join("cache");
    let live_out = dir.path().join("live");
    let live = run(
        &image,
        &live_out,
        &[
            "--vlm",
            "openai",
            "--model",
            "mock-model",
            "--base-url",
            &server.base_url(),
            "--cache",
            cache.to_str().expect("utf-8"),
        ],
        Some(KEY),
    );
    assert!(live.status.success(), "{}", String::from_utf8_lossy(&live.stderr));
    assert_eq!(read(&live_out.join("program.json")), read(&oracle_out.join("program.json")));

    let received = server.received();
    assert_eq!(received.len(), recorded.len() + 2);
    for r in &received {
        let images = r.body["messages"][1]["content"].as_array().expect("parts").len() - 1;
        assert!(images >= 1, "every stage shows at least the target");
        assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    }
    let calls: Vec<Value> = trace(&live_out).into_iter().filter(|e| e["event"] == "call").collect();
    assert!(calls[0]["errors"][0].as_str().is_some_and(|e| e.contains("not JSON")), "{}", calls[0]);
    assert!(calls[1]["errors"].as_array().is_some_and(|e| !e.is_empty()), "{}", calls[1]);
    assert!(calls[2]["errors"].is_null() && calls[2]["try"] == 3, "the third try is valid: {}", calls[2]);
    assert!(calls.iter().all(|c| c["usage"]["input_tokens"] == 1000));
    let outcome: Value = serde_json::from_str(&read(&live_out.join("outcome.json"))).expect("outcome");
    assert_eq!(outcome["usage"]["input_tokens"].as_u64(), Some(1000 * received.len() as u64));
    assert!(read(&live_out.join("report.html")).contains("tokens in"));

    // Replay: no server, no key, the same outputs.
    drop(server);
    let replay_out = dir.path().join("replay");
    let replay = run(
        &image,
        &replay_out,
        &[
            "--vlm",
            "openai",
            "--model",
            "mock-model",
            // A server that needs a key, and no key: replay contacts nothing.
            "--base-url",
            "https://api.openai.com/v1",
            "--cache",
            cache.to_str().expect("utf-8"),
            "--cache-mode",
            "replay",
        ],
        None,
    );
    assert!(replay.status.success(), "{}", String::from_utf8_lossy(&replay.stderr));
    for file in ["program.json", "state.json"] {
        assert_eq!(read(&replay_out.join(file)), read(&live_out.join(file)), "{file} differs in the replay");
    }
    assert!(trace(&replay_out).iter().filter(|e| e["event"] == "call").all(|c| c["cached"] == true));

    // The key is in no file any of this wrote, nor on stderr.
    for f in files_under(dir.path()) {
        let bytes = std::fs::read(&f).expect("read");
        assert!(!bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()), "{} holds the key", f.display());
    }
    assert!(!String::from_utf8_lossy(&live.stderr).contains(KEY));
}

#[test]
fn a_missing_key_stops_before_freecad_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = repo_root().join("assets/examples/plate_counterbore.png");
    let out = dir.path().join("out");
    let r = run(&image, &out, &["--vlm", "openai", "--base-url", "https://api.openai.com/v1"], None);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("VISION2CAD_API_KEY"), "{err}");
    assert!(!out.join("trace.jsonl").exists(), "no work was done");
}

#[test]
fn a_server_that_keeps_failing_ends_the_run_with_a_recorded_error_and_the_files_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = repo_root().join("assets/examples/plate_counterbore.png");
    let server = MockServer::start(|_, _| MockReply::status(503, "the model is overloaded")).expect("server");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[vlm]\nretries = 1\nretry_delay = 0.01\n").expect("config");
    let out = dir.path().join("out");
    let r = run(
        &image,
        &out,
        &["--vlm", "openai", "--base-url", &server.base_url(), "--config", config.to_str().expect("utf-8")],
        Some(KEY),
    );
    assert_eq!(r.status.code(), Some(1), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(server.received().len(), 2, "one try and one retry");
    let outcome: Value = serde_json::from_str(&read(&out.join("outcome.json"))).expect("outcome");
    let failure = outcome["failure"].as_str().expect("a recorded failure");
    assert!(failure.contains("HTTP 503") && failure.contains("overloaded"), "{failure}");
    for file in ["program.json", "trace.jsonl", "report.html"] {
        assert!(out.join(file).is_file(), "{file} written");
    }
}

/// `vision2cad run --vlm openai` over `dataset` into `out`, without a key unless given,
/// with `options` for every part.
fn batch(dataset: &Path, out: &Path, options: &[&str], key: Option<&str>) -> std::process::Output {
    let mut cmd = common::command();
    cmd.args(["run", "--dataset"]).arg(dataset).arg("--out").arg(out).args(["--vlm", "openai", "--"]).args(options);
    with_key(&mut cmd, key).output().expect("runs")
}

fn items_written(out: &Path) -> usize {
    let parts = out.join("parts");
    std::fs::read_dir(&parts).map(|d| d.flatten().filter(|e| e.path().join("item.json").is_file()).count()).unwrap_or(0)
}

/// A run checks the model server before its first part (a missing key, a server that is
/// down, a model it does not serve), and parts the server failed on are not the parts'
/// fault: the run exits non-zero and running it again tries them again.
#[test]
fn a_run_checks_the_server_first_and_retries_the_parts_it_failed_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = common::generated_test_split(dir.path(), 2, 3);

    let no_key = batch(&dataset, &dir.path().join("no-key"), &["--base-url", "https://api.example.invalid/v1"], None);
    let err = String::from_utf8_lossy(&no_key.stderr);
    assert!(!no_key.status.success() && err.contains("VISION2CAD_API_KEY") && err.contains("no part was run"), "{err}");
    assert!(!err.contains("crash"), "a missing key is not a crash: {err}");
    assert_eq!(items_written(&dir.path().join("no-key")), 0);

    let down = batch(&dataset, &dir.path().join("down"), &["--base-url", "http://127.0.0.1:9/v1"], Some(KEY));
    let err = String::from_utf8_lossy(&down.stderr);
    assert!(!down.status.success() && err.contains("cannot connect to http://127.0.0.1:9/v1"), "{err}");
    assert_eq!(items_written(&dir.path().join("down")), 0);

    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let server = {
        let failing = Arc::clone(&failing);
        MockServer::start(move |_, _| {
            if failing.load(std::sync::atomic::Ordering::SeqCst) {
                MockReply::status(503, "the model is overloaded")
            } else {
                MockReply::answer(r#"{"reason": "done", "command": {"op": "end"}}"#)
            }
        })
        .expect("server")
    };
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[vlm]\nretries = 0\nmodel = \"served-model\"\n").expect("config");
    let options = ["--base-url", &server.base_url(), "--config", config.to_str().expect("utf-8")];

    server.list_models(&["another-model"]);
    let unknown = batch(&dataset, &dir.path().join("unknown"), &options, Some(KEY));
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(!unknown.status.success() && err.contains("does not serve the model \"served-model\""), "{err}");
    assert!(err.contains("another-model"), "the served models are listed: {err}");

    server.list_models(&["another-model", "served-model"]);
    let out = dir.path().join("run");
    let first = batch(&dataset, &out, &options, Some(KEY));
    assert_eq!(first.status.code(), Some(1), "no part reached the end: {}", String::from_utf8_lossy(&first.stderr));
    let results = read(&out.join("results.md"));
    assert!(results.contains("the model server failed on 2"), "{results}");
    let calls = server.received().len();
    assert!(calls >= 2, "each part asked once");

    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    let again = batch(&dataset, &out, &options, Some(KEY));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(server.received().len() > calls, "the failed parts ran again: {err}");
    assert!(again.status.success(), "{err}");
    let results = read(&out.join("results.md"));
    assert!(!results.contains("the model server failed"), "{results}");
}
