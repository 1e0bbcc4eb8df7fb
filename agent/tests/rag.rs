//! GERD-RET on a generated dataset: `gerd index` and `gerd query`, HNSW against brute force
//! on validation-split queries, and the loop's Stage 1 with `--rag-index` and `--no-rag`.

mod common;

use std::path::Path;

use common::{repo_root, trace};
use gerd::record::{part_dirs, read_part};
use gerd::retrieve::embed::{Builtin, Embedder};
use gerd::retrieve::{EF_SEARCH, RetrievalIndex};
use serde_json::{Value, json};
use vision2cad::vlm::mock::{MockReply, MockServer};

/// 24 generated parts (3 per family): 16 train, 8 validation; 200-pixel views.
fn dataset(root: &Path) {
    let out = common::command()
        .args(["gerd", "generate", "--count", "24", "--seed", "5", "--split", "16,8,0", "--view-size", "200", "--out"])
        .arg(root)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn vision2cad(args: &[&str]) -> std::process::Output {
    common::command().args(args).output().expect("runs")
}

#[test]
fn retrieval_from_the_command_line_and_in_the_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("gerd");
    dataset(&data);
    let index = dir.path().join("index");
    let built = vision2cad(&["gerd", "index", data.to_str().expect("utf-8"), "--out", index.to_str().expect("utf-8")]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));

    // A train part's own target with the empty state finds that part's first operation.
    let train = part_dirs(&data)
        .expect("parts")
        .into_iter()
        .find(|d| read_part(d).is_ok_and(|r| r.split == gerd::record::Split::Train));
    let train = train.expect("a train part");
    let record = read_part(&train).expect("record");
    let first_op =
        record.steps.iter().find(|s| !matches!(s.command, freecad_bridge::Command::Sketch(_))).expect("an op");
    let q = vision2cad(&[
        "gerd",
        "query",
        index.to_str().expect("utf-8"),
        "--image",
        train.join("target.png").to_str().expect("utf-8"),
    ]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let hits: Value = serde_json::from_slice(&q.stdout).expect("JSON on stdout");
    let hits = hits["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0]["part"], record.id.as_str());
    assert_eq!(hits[0]["step"], first_op.index);
    assert!(hits[0]["score"].as_f64().is_some_and(|s| s > 0.999), "{}", hits[0]);
    let parts: std::collections::BTreeSet<&str> = hits.iter().filter_map(|h| h["part"].as_str()).collect();
    assert_eq!(parts.len(), 3, "one hit per part");

    // HNSW against brute force, every step of the validation split as a query.
    let mut embedder = Builtin;
    let loaded = RetrievalIndex::load(&index, &embedder.id()).expect("loads");
    assert!(loaded.entries().iter().all(|e| !e.part.is_empty()));
    let (mut found, mut asked) = (0, 0);
    for d in part_dirs(&data).expect("parts") {
        let r = read_part(&d).expect("record");
        if r.split != gerd::record::Split::Val {
            continue;
        }
        let target = image::open(d.join("target.png")).expect("target").to_rgb8();
        for step in r.steps.iter().filter(|s| !matches!(s.command, freecad_bridge::Command::Sketch(_))) {
            let state = embedder.embed_state(&r.states[step.before], &r.program.commands[..step.index]).expect("state");
            let query = loaded.query_vector(embedder.embed_image(&target).expect("image"), state).expect("query");
            let exact: Vec<usize> = loaded.brute_force(&query, 3).into_iter().map(|(i, _)| i).collect();
            let approx: Vec<usize> = loaded.nearest(&query, 3, EF_SEARCH).into_iter().map(|(i, _)| i).collect();
            found += exact.iter().filter(|i| approx.contains(i)).count();
            asked += 3;
        }
    }
    assert!(asked >= 24);
    assert!(found as f64 / asked as f64 >= 0.95, "recall@3 {found}/{asked}");

    // The loop: Stage 1 shows the hits, the trace and the report record them; the oracle
    // ignores them, so the result is the one without RAG.
    let image = repo_root().join("assets/examples/plate_counterbore.png");
    let gt = repo_root().join("assets/programs/plate_counterbore.json");
    let run = |out: &Path, extra: &[&str]| {
        let mut args =
            vec!["reconstruct", image.to_str().expect("utf-8"), "--gt", gt.to_str().expect("utf-8"), "--out"];
        args.push(out.to_str().expect("utf-8"));
        args.extend_from_slice(extra);
        vision2cad(&args)
    };
    // Every hit shown (no threshold): each says why, and the tokens they add are counted.
    let config = |name: &str, min_score: f64| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("rag_min_score = {min_score:?}\n")).expect("config");
        path
    };
    let all = config("all.toml", -1.0);
    let with = dir.path().join("with");
    let r = run(&with, &["--rag-index", index.to_str().expect("utf-8"), "--config", all.to_str().expect("utf-8")]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let events = trace(&with);
    let rag = events.iter().find(|e| e["event"] == "rag").expect("a rag event");
    assert_eq!(rag["on"], true);
    assert!(rag["reason"].as_str().is_some_and(|r| r.contains("16 parts")), "{rag}");
    let retrieved: Vec<&Value> = events.iter().filter(|e| e["event"] == "retrieved").collect();
    let stage1: Vec<&Value> = events.iter().filter(|e| e["event"] == "call" && e["stage"] == "stage1").collect();
    assert_eq!(retrieved.len(), stage1.len(), "every Stage 1 call retrieves");
    assert!(retrieved.iter().all(|e| e["hits"].as_array().is_some_and(|h| h.len() == 3)));
    let texts: Vec<&str> = stage1.iter().filter_map(|c| c["request"]["text"].as_str()).collect();
    assert!(texts.iter().all(|t| t.contains("Similar modeling steps") && t.matches("Shown because: ").count() == 3));
    assert!(texts[0].contains("both models are empty: it is a first feature"), "{}", texts[0]);
    // After the first step the examples' views are among the images.
    let later = stage1.last().expect("a call");
    assert!(later["request"]["images"].as_array().is_some_and(|i| i.len() > 2), "{}", later["request"]["images"]);
    let tokens: u64 = retrieved.iter().map(|e| e["tokens"].as_u64().expect("tokens")).sum();
    let outcome: Value =
        serde_json::from_str(&std::fs::read_to_string(with.join("outcome.json")).expect("outcome")).expect("json");
    assert_eq!(outcome["retrieval_tokens"].as_u64(), Some(tokens));
    // Three example views of 200 px (255 tokens each) after the first step, and text.
    assert!(tokens > 3 * 255, "{tokens}");
    let report = std::fs::read_to_string(with.join("report.html")).expect("report");
    assert!(report.contains("Retrieved examples") && report.contains("tokens in"));

    // A threshold above every score: the hits are recorded as left out, nothing is shown.
    let none = config("none.toml", 1.0);
    let strict = dir.path().join("strict");
    let r = run(&strict, &["--rag-index", index.to_str().expect("utf-8"), "--config", none.to_str().expect("utf-8")]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let events = trace(&strict);
    let left_out: Vec<&Value> = events.iter().filter(|e| e["event"] == "retrieved").collect();
    assert!(!left_out.is_empty());
    assert!(left_out.iter().all(|e| e["hits"].as_array().is_some_and(Vec::is_empty)
        && e["below_threshold"].as_array().is_some_and(|h| h.len() == 3)
        && e["tokens"] == 0));
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "call")
            .all(|c| !c["request"]["text"].as_str().unwrap_or("").contains("Similar modeling steps"))
    );
    assert!(std::fs::read_to_string(strict.join("report.html")).expect("report").contains("below the threshold"));

    let without = dir.path().join("without");
    let r = run(&without, &["--rag-index", index.to_str().expect("utf-8"), "--no-rag"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let events = trace(&without);
    assert!(!events.iter().any(|e| e["event"] == "retrieved"));
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "call")
            .all(|c| !c["request"]["text"].as_str().unwrap_or("").contains("Similar modeling steps"))
    );
    let program = |d: &Path| std::fs::read_to_string(d.join("program.json")).expect("program");
    assert_eq!(program(&with), program(&without));

    // A missing index is an error, not a quiet run without examples.
    let r = run(&dir.path().join("missing"), &["--rag-index", dir.path().join("nope").to_str().expect("utf-8")]);
    assert!(!r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("not a retrieval index"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );

    // A dataset changed after indexing is refused when its material is needed.
    let hit_part = retrieved[0]["hits"][0]["part"].as_str().expect("part").to_string();
    let part_json = data.join("parts").join(&hit_part).join("part.json");
    let original = std::fs::read_to_string(&part_json).expect("part.json");
    std::fs::write(&part_json, format!("{original}\n")).expect("touch");
    let changed = dir.path().join("changed");
    let r = run(&changed, &["--rag-index", index.to_str().expect("utf-8"), "--config", all.to_str().expect("utf-8")]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("changed after the index was built"), "{err}");
    assert!(changed.join("outcome.json").is_file(), "the run's files are written all the same");
    std::fs::write(&part_json, original).expect("restore");

    // Training data in the loop's format: the exported Stage 1 prompts are the requests a
    // reconstruction of the same part sends, byte for byte.
    let val_part = part_dirs(&data)
        .expect("parts")
        .into_iter()
        .find(|d| read_part(d).is_ok_and(|r| r.split == gerd::record::Split::Val))
        .expect("a val part");
    let val_id = val_part.file_name().expect("name").to_string_lossy().into_owned();
    // With RAG on: the index holds the train split, the export is of the validation split.
    let config = dir.path().join("rag.toml");
    let toml = format!("rag_index = {:?}\nrag_min_score = -1.0\n", index.to_str().expect("utf-8"));
    std::fs::write(&config, toml).expect("config");
    let export = dir.path().join("export/stage1.jsonl");
    let e = vision2cad(&[
        "gerd",
        "export",
        data.to_str().expect("utf-8"),
        "--task",
        "stage1",
        "--split",
        "val",
        "--perturb",
        "0",
        "--config",
        config.to_str().expect("utf-8"),
        "--out",
        export.to_str().expect("utf-8"),
    ]);
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let samples: Vec<Value> = std::fs::read_to_string(&export)
        .expect("export")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let exported: Vec<&str> =
        samples.iter().filter(|s| s["part"] == val_id.as_str()).filter_map(|s| s["prompt"].as_str()).collect();
    let own = dir.path().join("own");
    let r = vision2cad(&[
        "reconstruct",
        val_part.join("target.png").to_str().expect("utf-8"),
        "--gt",
        val_part.to_str().expect("utf-8"),
        "--out",
        own.to_str().expect("utf-8"),
        "--config",
        config.to_str().expect("utf-8"),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let sent: Vec<String> = trace(&own)
        .iter()
        .filter(|c| c["event"] == "call" && c["stage"] == "stage1")
        .filter_map(|c| c["request"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(!sent.is_empty());
    assert!(sent.iter().all(|t| t.contains("Similar modeling steps")), "RAG was on");
    assert_eq!(exported, sent, "the export's prompts are the loop's requests");
    // Exporting the parts the index holds is refused: their own steps would be the examples.
    let leak = vision2cad(&[
        "gerd",
        "export",
        data.to_str().expect("utf-8"),
        "--task",
        "stage1",
        "--split",
        "train",
        "--config",
        config.to_str().expect("utf-8"),
        "--out",
        dir.path().join("leak.jsonl").to_str().expect("utf-8"),
    ]);
    assert!(!leak.status.success());
    let why = String::from_utf8_lossy(&leak.stderr);
    assert!(why.contains("its own steps"), "{why}");
    for s in &samples {
        for image in s["images"].as_array().expect("images") {
            assert!(export.parent().expect("dir").join(image.as_str().expect("path")).is_file(), "{image}");
        }
        assert!(serde_json::from_str::<Value>(s["answer"].as_str().expect("answer")).is_ok());
    }

    // Stage 3 with every first candidate perturbed: accepts and rejects.
    let export3 = dir.path().join("export/stage3.jsonl");
    let e = vision2cad(&[
        "gerd",
        "export",
        data.to_str().expect("utf-8"),
        "--task",
        "stage3",
        "--split",
        "val",
        "--perturb",
        "1",
        "--out",
        export3.to_str().expect("utf-8"),
    ]);
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let verdicts: Vec<String> = std::fs::read_to_string(&export3)
        .expect("export")
        .lines()
        .map(|l| {
            let s: Value = serde_json::from_str(l).expect("json");
            let answer: Value = serde_json::from_str(s["answer"].as_str().expect("answer")).expect("answer json");
            answer["verdict"].as_str().expect("verdict").to_string()
        })
        .collect();
    assert!(verdicts.iter().any(|v| v == "accept") && verdicts.iter().any(|v| v == "reject"), "{verdicts:?}");

    // An index built by an /embeddings server is queried through the same server, and the
    // built-in embedder is refused for it.
    let embeddings = MockServer::start(|_, body| {
        let input = body["input"][0].as_str().unwrap_or("");
        let mut v = [0.0f64; 8];
        for (i, b) in input.bytes().enumerate() {
            v[i % 8] += f64::from(b) / 255.0;
        }
        MockReply::Body(
            json!({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": v}]}).to_string(),
        )
    })
    .expect("server");
    let http_index = dir.path().join("http-index");
    let built = vision2cad(&[
        "gerd",
        "index",
        data.to_str().expect("utf-8"),
        "--out",
        http_index.to_str().expect("utf-8"),
        "--embedder",
        "http",
        "--embed-model",
        "mock-embed",
        "--embed-url",
        &embeddings.base_url(),
    ]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let requests = embeddings.received();
    assert!(requests.iter().all(|r| r.path == "/v1/embeddings" && r.body["model"] == "mock-embed"));
    assert!(
        requests.iter().any(|r| r.body["input"][0].as_str().is_some_and(|i| i.starts_with("data:image/png;base64,")))
    );
    let q = vision2cad(&[
        "gerd",
        "query",
        http_index.to_str().expect("utf-8"),
        "--image",
        train.join("target.png").to_str().expect("utf-8"),
        "--embed-url",
        &embeddings.base_url(),
    ]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let hits: Value = serde_json::from_slice(&q.stdout).expect("JSON");
    assert_eq!(hits["hits"][0]["part"], record.id.as_str(), "its own image and the empty state find it");
    let err = RetrievalIndex::load(&http_index, &Builtin.id()).expect_err("another embedder").to_string();
    assert!(err.contains("http:mock-embed"), "{err}");
}

/// The default index: `gerd default-index` builds it once in `VISION2CAD_RAG_HOME` (from
/// generated parts of its own seed), `reconstruct` uses it when no index is named, and
/// `--no-rag` or `--rag-index` override it; without it the run says how to build it.
#[test]
fn the_default_index_is_built_once_and_used_unless_told_otherwise() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rag-home");
    let with_home =
        |args: &[&str]| common::command().env("VISION2CAD_RAG_HOME", &home).args(args).output().expect("runs");
    let image = repo_root().join("assets/examples/plate_counterbore.png");
    let gt = repo_root().join("assets/programs/plate_counterbore.json");
    let reconstruct = |out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let mut args = vec!["reconstruct", image.to_str().expect("utf-8"), "--gt", gt.to_str().expect("utf-8")];
        args.extend_from_slice(&["--out", out.to_str().expect("utf-8")]);
        args.extend_from_slice(extra);
        (with_home(&args), out)
    };

    // Not built yet: RAG is off, and the note says how to build it.
    let (r, out) = reconstruct("before", &[]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("vision2cad gerd default-index") && err.contains("rag-home"), "{err}");
    assert!(trace(&out).iter().any(|e| e["event"] == "rag" && e["on"] == false));

    let built = with_home(&["gerd", "default-index", "--count", "8", "--workers", "2"]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let index = home.join("index");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(index.join("index.json")).expect("index.json")).expect("json");
    assert_eq!(meta["dataset"]["parts"], 8);
    let parts: Vec<&str> =
        meta["dataset"]["part_digests"].as_object().expect("digests").keys().map(|k| k.as_str()).collect();
    assert!(parts.iter().all(|p| p.starts_with("gen-1000-")), "the default seed, no evaluated part: {parts:?}");
    assert!(!home.join("index.partial").exists());
    let again = with_home(&["gerd", "default-index", "--count", "8"]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is built"), "a second call leaves it be");

    // Used when no index is named.
    let (r, out) = reconstruct("default", &[]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(!String::from_utf8_lossy(&r.stderr).contains("RAG is off"));
    let events = trace(&out);
    let rag = events.iter().find(|e| e["event"] == "rag").expect("a rag event");
    assert_eq!(rag["on"], true, "{rag}");
    assert!(rag["reason"].as_str().is_some_and(|r| r.contains(index.to_str().expect("utf-8"))), "{rag}");
    assert!(events.iter().any(|e| e["event"] == "retrieved"), "Stage 1 asked the default index");

    // A run over parts the index holds is refused before any part runs.
    let dataset = home.join("dataset");
    let leak = with_home(
        &["run", "--dataset", dataset.to_str().expect("utf-8"), "--split", "train", "--limit", "1"]
            .iter()
            .copied()
            .chain(["--out", dir.path().join("leak").to_str().expect("utf-8")])
            .collect::<Vec<_>>(),
    );
    assert!(!leak.status.success());
    let err = String::from_utf8_lossy(&leak.stderr);
    assert!(err.contains("holds gen-1000-00000, a part of this run"), "{err}");

    // A run counts what retrieval added, per part and in all (every hit shown here: the
    // eight-part index is too small for the threshold).
    let data = common::generated_test_split(dir.path(), 1, 3);
    let all = dir.path().join("all.toml");
    std::fs::write(&all, "rag_min_score = -1.0\n").expect("config");
    let run_out = dir.path().join("run");
    let ran = with_home(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        run_out.to_str().expect("utf-8"),
        "--",
        "--config",
        all.to_str().expect("utf-8"),
    ]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_out.join("results.json")).expect("results")).expect("json");
    let total = results["tokens"]["retrieval"].as_u64().expect("retrieval tokens");
    assert!(total > 0);
    assert_eq!(results["per_part"][0]["retrieval_tokens"].as_u64(), Some(total));
    let md = std::fs::read_to_string(run_out.join("results.md")).expect("results.md");
    assert!(md.contains(&format!("Retrieved examples added about {total} input tokens")), "{md}");

    // --no-rag: no index is read.
    let (r, out) = reconstruct("no-rag", &["--no-rag"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let events = trace(&out);
    assert!(!events.iter().any(|e| e["event"] == "retrieved" || e["event"] == "rag"));
}
