//! The direct-code baseline against a mock model server: a script that builds a part is
//! run and evaluated like the loop's models (the 10% edit follows its pads); a script that
//! reads outside its folder, one that runs past its limit, and one that looks for the API
//! key all fail as they should; `run` puts the baseline's row in the sweep's table.

mod common;

use std::path::Path;
use std::process::Output;

use common::repo_root;
use serde_json::{Value, json};
use vision2cad::vlm::mock::{MockReply, MockServer};

const KEY: &str = "sk-direct-code-secret-5a4b3c";

/// A 40 x 20 x 10 plate, the way a model would write it.
const PLATE: &str = r#"body = doc.addObject("PartDesign::Body", "Body")
sk = body.newObject("Sketcher::SketchObject", "Sketch")
sk.Support = (doc.getObject("XY_Plane"), [""])
sk.MapMode = "FlatFace"
pts = [Vector(0, 0, 0), Vector(40, 0, 0), Vector(40, 20, 0), Vector(0, 20, 0)]
for i in range(4):
    sk.addGeometry(Part.LineSegment(pts[i], pts[(i + 1) % 4]))
for i in range(4):
    sk.addConstraint(Sketcher.Constraint("Coincident", i, 2, (i + 1) % 4, 1))
pad = body.newObject("PartDesign::Pad", "Pad")
pad.Profile = sk
pad.Length = 10
doc.recompute()
"#;

fn server(code: &str) -> MockServer {
    let answer = json!({ "code": code }).to_string();
    MockServer::start(move |_, _| MockReply::answer(answer.clone())).expect("mock server")
}

fn vision2cad(args: &[&str]) -> Output {
    let mut cmd = common::command();
    cmd.args(args);
    for var in ["VISION2CAD_API_KEY", "OPENAI_API_KEY", "VISION2CAD_BASE_URL", "OPENAI_BASE_URL"] {
        cmd.env_remove(var);
    }
    cmd.env("VISION2CAD_API_KEY", KEY);
    cmd.output().expect("runs")
}

fn baseline(server: &MockServer, out: &Path, extra: &[&str]) -> (Output, Value) {
    let image = repo_root().join("assets/examples/plate_counterbore.png");
    let url = server.base_url();
    let mut args = vec![
        "reconstruct",
        image.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
        "--baseline",
        "direct-code",
        "--vlm",
        "openai",
        "--base-url",
        &url,
    ];
    args.extend(extra);
    let output = vision2cad(&args);
    let outcome = std::fs::read_to_string(out.join("outcome.json"))
        .map_or(Value::Null, |t| serde_json::from_str(&t).expect("outcome.json"));
    (output, outcome)
}

#[test]
fn a_script_from_the_model_is_built_in_the_sandbox_and_evaluated_like_the_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server(PLATE);
    let out = dir.path().join("plate");
    let (output, outcome) = baseline(&server, &out, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(outcome["finished"], true, "{outcome}");
    assert_eq!(outcome["script"]["pads_pockets"], 1);
    assert!(outcome["script"]["volume"].as_f64().is_some_and(|v| (v - 8000.0).abs() < 1e-6), "{outcome}");
    for file in ["model.FCStd", "model.step", "model_script.py", "report.html", "trace.jsonl"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    // The request carried the prompt and the image, as the loop's do.
    let request = &server.received()[0].body;
    assert_eq!(request["response_format"]["json_schema"]["name"], "direct_code");
    assert!(
        request["messages"][1]["content"][1]["image_url"]["url"]
            .as_str()
            .expect("image")
            .starts_with("data:image/png;base64,")
    );

    // The 10% edit reaches the script's pad: the model grows as the ground truth does.
    let gt = dir.path().join("gt.json");
    let program = json!({"commands": [
        {"op": "sketch", "name": "S1", "on": "XY", "primitives": [
            {"type": "line", "start": [0, 0], "end": [40, 0]}, {"type": "line", "start": [40, 0], "end": [40, 20]},
            {"type": "line", "start": [40, 20], "end": [0, 20]}, {"type": "line", "start": [0, 20], "end": [0, 0]}]},
        {"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side", "depth": 10}}]});
    std::fs::write(&gt, program.to_string()).expect("write gt");
    let report = dir.path().join("report.json");
    let e = vision2cad(&[
        "eval",
        "--pred",
        out.join("model.FCStd").to_str().expect("utf-8"),
        "--gt",
        gt.to_str().expect("utf-8"),
        "--protocol",
        "edit10",
        "--normalize",
        "none",
        "--json",
        report.to_str().expect("utf-8"),
    ]);
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert!(r["miou"].as_f64().is_some_and(|m| m > 0.999), "{r}");
    assert!(r["samples"][0]["pred_volume"].as_f64().is_some_and(|v| (v - 8800.0).abs() < 1e-6), "{r}");
}

#[test]
fn scripts_that_reach_outside_run_too_long_or_look_for_the_key_get_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A file beside the output, standing for the ground truth.
    let secret = dir.path().join("ground_truth.json");
    // A marker no report holds by chance: the answer this test first wrote, 42, turned up in
    // a clean-clone CI's report (a timing or a temporary folder's name) and failed it.
    std::fs::write(&secret, "{\"answer\": \"ground-truth-7b3f\"}").expect("write");
    let reader =
        server(&format!("print(open({:?}).read())\nresult = Part.makeBox(1, 1, 1)\n", secret.display().to_string()));
    let out = dir.path().join("reader");
    let (output, outcome) = baseline(&reader, &out, &[]);
    assert!(!output.status.success());
    let failure = outcome["failure"].as_str().expect("failure");
    assert!(failure.contains("outside its sandbox") && failure.contains("ground_truth.json"), "{failure}");
    assert!(!out.join("model.step").exists() && !out.join("model.FCStd").exists());
    assert!(!std::fs::read_to_string(out.join("report.html")).expect("report").contains("ground-truth-7b3f"));

    let spinner = server("while True:\n    pass\n");
    let out = dir.path().join("spinner");
    let (output, outcome) = baseline(&spinner, &out, &["--script-seconds", "4"]);
    assert!(!output.status.success());
    let failure = outcome["failure"].as_str().expect("failure");
    assert!(failure.contains("CPU limit") || failure.contains("past its limit"), "{failure}");

    // A script that saves a document and then fails leaves no model to be scored, and it
    // never sees the caller's folder (the target image is there, not in its own).
    let saver = server(
        "import os\nprint('SEES=' + ','.join(sorted(os.listdir('.'))))\nresult = Part.makeBox(1, 1, 1)\ndoc.saveAs('model.FCStd')\nraise RuntimeError('late failure')\n",
    );
    let out = dir.path().join("saver");
    let (output, outcome) = baseline(&saver, &out, &[]);
    assert!(!output.status.success());
    assert!(outcome["failure"].as_str().expect("failure").contains("late failure"), "{outcome}");
    assert!(!out.join("model.FCStd").exists() && !out.join("model.step").exists());
    assert!(!outcome["script"]["output"].as_str().expect("output").contains("target.png"), "{outcome}");

    // The script's environment is clean: the key of the model server is not in it.
    let snoop = server(
        "import os\nprint('KEY=' + repr(os.environ.get('VISION2CAD_API_KEY')))\nresult = Part.makeBox(1, 2, 3)\n",
    );
    let out = dir.path().join("snoop");
    let (output, outcome) = baseline(&snoop, &out, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(outcome["script"]["output"].as_str().expect("output").contains("KEY=None"), "{outcome}");
    for file in common::files_under(&out) {
        let bytes = std::fs::read(&file).expect("read");
        assert!(!String::from_utf8_lossy(&bytes).contains(KEY), "{} holds the key", file.display());
    }
}

#[test]
fn a_run_puts_the_baseline_in_the_table_and_the_oracle_cannot_write_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::generated_test_split(dir.path(), 2, 2);
    let run_dir = dir.path().join("run");
    let oracle = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        run_dir.to_str().expect("utf-8"),
        "--baseline",
        "direct-code",
    ]);
    assert!(!oracle.status.success());
    assert!(String::from_utf8_lossy(&oracle.stderr).contains("needs a model that writes code"));

    // A slow server: two jobs would have two requests in flight, the run's limit allows one.
    let answer = json!({ "code": PLATE }).to_string();
    let server = MockServer::start(move |_, _| {
        MockReply::Delay(std::time::Duration::from_millis(400), Box::new(MockReply::answer(answer.clone())))
    })
    .expect("mock server");
    let url = server.base_url();
    let r = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        run_dir.to_str().expect("utf-8"),
        "--vlm",
        "openai",
        "--configs",
        "direct-code",
        "--jobs",
        "2",
        "--vlm-concurrency",
        "1",
        "--",
        "--base-url",
        &url,
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let table = std::fs::read_to_string(run_dir.join("results.md")).expect("results.md");
    assert!(table.contains("| direct-code | 2/2 | 1.000 |"), "{table}");
    assert_eq!(server.received().len(), 2);
    assert_eq!(server.max_in_flight(), 1, "the run's limit holds across its jobs");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("direct-code/results.json")).expect("results"))
            .expect("json");
    // A plate is not these parts, but it compiled, and both protocols measured it.
    assert_eq!(results["edit10"]["cr"], 1.0, "{results}");
    assert!(results["static"]["miou"].as_f64().is_some_and(|m| m < 0.99), "{results}");
}
