//! Snapshots of what the model is asked, in the full method and under each ablation: the
//! oracle rebuilds a box, and every distinct request text of the run is compared with the
//! stored snapshot (`agent/tests/snapshots/`). A change to a prompt or to what the harness
//! fills in shows up here as a diff to review (`cargo insta review`).

mod common;

use common::example_path;
use serde_json::Value;

#[test]
fn requests_per_ablation_match_their_snapshots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("chamfer_box");
    let image = dir.path().join("target.png");
    let render = common::command()
        .arg("render")
        .arg(&program)
        .args(["--view", "target", "--out"])
        .arg(&image)
        .output()
        .expect("render runs");
    assert!(render.status.success());
    for flag in ["full", "no-egr", "no-lcb", "no-pgr", "no-reg", "no-rag", "no-evf"] {
        let out = dir.path().join(flag);
        let mut cmd = common::command();
        cmd.arg("reconstruct").arg(&image).arg("--out").arg(&out).arg("--gt").arg(&program);
        if flag != "full" {
            cmd.arg(format!("--{flag}"));
        }
        let run = cmd.output().expect("reconstruct runs");
        assert!(run.status.success(), "{flag}: {}", String::from_utf8_lossy(&run.stderr));
        let trace = std::fs::read_to_string(out.join("trace.jsonl")).expect("trace");
        let mut requests = String::new();
        for line in trace.lines() {
            let e: Value = serde_json::from_str(line).expect("json");
            if e["event"] == "call" {
                requests.push_str(&format!(
                    "==== step {} {} (images: {})\n{}\n",
                    e["step"],
                    e["stage"].as_str().unwrap_or(""),
                    e["request"]["images"],
                    e["request"]["text"].as_str().unwrap_or("")
                ));
            }
        }
        insta::assert_snapshot!(format!("requests_{}", flag.replace('-', "_")), requests);
    }
}
