//! `vision2cad run` over a small generated test split with the oracle: results, resuming
//! after an interruption gives the same results, the item time limit, settings mismatches.

mod common;

use std::path::Path;

use common::assert_links_resolve;
use serde_json::Value;

fn vision2cad(args: &[&str]) -> std::process::Output {
    common::command().args(args).output().expect("runs")
}

fn results(run: &Path) -> Value {
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).expect("results")).expect("json");
    // Time differs from run to run; everything else must not.
    v.as_object_mut().expect("object").remove("wall_seconds_this_session");
    v.as_object_mut().expect("object").remove("seconds_per_part");
    for p in v["per_part"].as_array_mut().expect("parts") {
        p.as_object_mut().expect("part").remove("seconds");
    }
    v
}

#[test]
fn a_run_evaluates_every_part_and_resumes_to_the_same_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("gerd");
    let g = vision2cad(&[
        "gerd",
        "generate",
        "--count",
        "4",
        "--seed",
        "8",
        "--split",
        "0,0,4",
        "--view-size",
        "200",
        "--out",
        data.to_str().expect("utf-8"),
    ]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let run_dir = dir.path().join("run");
    let args =
        ["run", "--dataset", data.to_str().expect("utf-8"), "--out", run_dir.to_str().expect("utf-8"), "--jobs", "2"];
    let r = vision2cad(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let first = results(&run_dir);
    assert_eq!(first["parts"], 4);
    assert_eq!(first["status"]["finished"], 4);
    assert_eq!(first["static"]["cr"], 1.0);
    assert!(first["static"]["miou"].as_f64().is_some_and(|m| m > 0.99), "{}", first["static"]);
    assert!(first["edit10"]["miou"].as_f64().is_some_and(|m| m > 0.98), "{}", first["edit10"]);
    let md = std::fs::read_to_string(run_dir.join("results.md")).expect("results.md");
    assert!(md.contains("| static |") && md.contains("| edit10 |"), "{md}");
    let html = std::fs::read_to_string(run_dir.join("index.html")).expect("index.html");
    let id = first["per_part"][0]["id"].as_str().expect("id").to_string();
    assert!(html.contains(&format!("parts/{id}/report.html")));
    assert!(html.contains("<table class=\"sortable\">") && html.matches("<tr>").count() >= 2 + 1 + 4, "{html}");
    assert_links_resolve(&run_dir, &html);
    assert!(run_dir.join("parts").join(&id).join("report.html").is_file());

    // An interruption: one part gone, another half-written. The rerun redoes just those.
    std::fs::remove_dir_all(run_dir.join("parts").join(&id)).expect("remove a part");
    let second_id = first["per_part"][1]["id"].as_str().expect("id").to_string();
    std::fs::rename(
        run_dir.join("parts").join(&second_id),
        run_dir.join("parts").join(format!(".partial-{second_id}")),
    )
    .expect("half-written");
    let r = vision2cad(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("2 of 4 parts are already done"));
    assert_eq!(results(&run_dir), first, "the resumed run reports what the uninterrupted one did");
    assert!(!run_dir.join("parts").join(format!(".partial-{second_id}")).exists());

    // The pixel floor: at no move it scores the run's own programs, as the run did; moved
    // by up to two target pixels they score less, and the moved programs are kept.
    let floor_out = dir.path().join("floor");
    let r = vision2cad(&[
        "pixel-floor",
        run_dir.to_str().expect("utf-8"),
        "--px",
        "0",
        "--px",
        "2",
        "--out",
        floor_out.to_str().expect("utf-8"),
    ]);
    let table = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let miou = |px: &str| -> f64 {
        let row = table.lines().find(|l| l.split_whitespace().next() == Some(px)).expect("a row per --px");
        row.split_whitespace().nth(2).and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("{table}"))
    };
    let run_miou = first["static"]["miou"].as_f64().expect("miou");
    assert!((miou("0") - run_miou).abs() < 1e-4, "{table} against {run_miou}");
    assert!(miou("2") < miou("0") - 1e-3, "{table}");
    assert!(floor_out.join("px-2").join(format!("{id}.json")).is_file() && floor_out.join("px-2.jsonl").is_file());

    // Other settings in the same folder are refused.
    let mut other = args.to_vec();
    other.extend(["--", "--no-pgr"]);
    let r = vision2cad(&other);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("other settings"));

    // A part past its time limit is recorded as timed out, and the run still reports.
    let slow = dir.path().join("slow");
    let r = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        slow.to_str().expect("utf-8"),
        "--limit",
        "1",
        "--item-timeout",
        "0.2",
    ]);
    // No part reached the end, so the run exits 1, after writing its results.
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("no part reached the loop's end"), "{err}");
    let slow_results = results(&slow);
    assert_eq!(slow_results["status"]["timeout"], 1);
    let html = std::fs::read_to_string(slow.join("index.html")).expect("index.html");
    assert!(html.contains("<td class=\"reason\">") && html.contains("--item-timeout"), "the reason is shown: {html}");
    assert_links_resolve(&slow, &html);
    assert_eq!(slow_results["static"]["cr"], 0.0);

    // A sweep: one row per configuration, from names and from a sweep file.
    let sweep = dir.path().join("sweep");
    let r = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        sweep.to_str().expect("utf-8"),
        "--limit",
        "1",
        "--configs",
        "full,no-evf",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let table = std::fs::read_to_string(sweep.join("results.md")).expect("table");
    assert!(table.contains("| full | 1/1 |") && table.contains("| no-evf | 1/1 |"), "{table}");
    assert!(sweep.join("no-evf/results.json").is_file());
    let html = std::fs::read_to_string(sweep.join("index.html")).expect("index.html");
    assert!(html.contains("<a href=\"no-evf/index.html\">no-evf</a>"), "{html}");
    assert_links_resolve(&sweep, &html);
    let calls = |run: &Path| -> usize {
        let id = results(run)["per_part"][0]["id"].as_str().expect("id").to_string();
        std::fs::read_to_string(run.join("parts").join(id).join("trace.jsonl"))
            .expect("trace")
            .lines()
            .filter(|l| l.contains("\"stage\":\"stage3\""))
            .count()
    };
    assert!(calls(&sweep.join("full")) > 0 && calls(&sweep.join("no-evf")) == 0, "no-evf has no Stage 3");
    std::fs::write(dir.path().join("one-step.toml"), "max_steps = 1\n").expect("config");
    std::fs::write(dir.path().join("default.toml"), "").expect("config");
    std::fs::write(dir.path().join("sweep.toml"), "[configs]\nfull = \"default.toml\"\none-step = \"one-step.toml\"\n")
        .expect("sweep");
    let from_file = dir.path().join("from-file");
    let r = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        from_file.to_str().expect("utf-8"),
        "--limit",
        "1",
        "--sweep",
        dir.path().join("sweep.toml").to_str().expect("utf-8"),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let table = std::fs::read_to_string(from_file.join("results.md")).expect("table");
    assert!(table.contains("| full | 1/1 |") && table.contains("| one-step | 0/1 |"), "{table}");
    let r = vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        sweep.to_str().expect("utf-8"),
        "--configs",
        "no-such",
    ]);
    assert!(!r.status.success() && String::from_utf8_lossy(&r.stderr).contains("unknown configuration"));
}
