//! Sharding and merging: `run`, `eval`, `gerd generate` and `gerd export` split across
//! shards (by flags, or by a scheduler's environment) and merged give what one unsharded
//! process gives; progress lines show off-terminal.

mod common;

use std::path::Path;
use std::process::Output;

use common::files_under;
use serde_json::Value;

fn vision2cad(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = common::command();
    cmd.args(args);
    // A scheduler's variables must come from the test only.
    for var in ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("runs")
}

fn ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .expect("json")
}

/// A run's results without what differs from run to run (time).
fn results(run: &Path) -> Value {
    let mut v = json(&run.join("results.json"));
    let o = v.as_object_mut().expect("object");
    o.remove("wall_seconds_this_session");
    o.remove("seconds_per_part");
    for p in v["per_part"].as_array_mut().expect("parts") {
        p.as_object_mut().expect("part").remove("seconds");
    }
    v
}

/// Every file under `dir` with its bytes, by relative path.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = files_under(dir)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).expect("under").display().to_string();
            let bytes = std::fs::read(&p).expect("read");
            (rel, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn generate_and_export_shards_merge_to_the_unsharded_dataset_and_export() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = dir.path().join("whole");
    let sharded = dir.path().join("sharded");
    let common = ["--count", "6", "--seed", "5", "--split", "0,0,6", "--view-size", "160", "--workers", "1"];
    let mut args = vec!["gerd", "generate", "--out", s(&whole)];
    args.extend(common);
    let g = vision2cad(&args, &[("VISION2CAD_PROGRESS_SECONDS", "0")]);
    ok(&g, "unsharded generate");
    // Off a terminal, long work prints plain progress lines.
    let stderr = String::from_utf8_lossy(&g.stderr);
    assert!(stderr.contains("generating: 1/6 done") && stderr.contains("generating: 6/6 done"), "{stderr}");

    // Shard 0 by flags, shard 1 as the second task of a SLURM array numbered from 1.
    let mut args = vec!["gerd", "generate", "--out", s(&sharded), "--shard-index", "0", "--shard-count", "2"];
    args.extend(common);
    ok(&vision2cad(&args, &[]), "shard 0");
    assert!(!sharded.join("index.jsonl").exists(), "a shard does not write the index of the whole dataset");
    let early = vision2cad(&["merge", s(&sharded), "--out", s(&sharded)], &[]);
    assert!(!early.status.success());
    assert!(
        String::from_utf8_lossy(&early.stderr).contains("shard 1 of 2 missing"),
        "{}",
        String::from_utf8_lossy(&early.stderr)
    );
    let mut args = vec!["gerd", "generate", "--out", s(&sharded)];
    args.extend(common);
    let slurm = [("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_ARRAY_TASK_MIN", "1"), ("SLURM_ARRAY_TASK_COUNT", "2")];
    ok(&vision2cad(&args, &slurm), "shard 1 from SLURM's variables");
    ok(&vision2cad(&["merge", s(&sharded), "--out", s(&sharded)], &[]), "merge");
    std::fs::remove_dir_all(sharded.join("shards")).expect("shard records");
    assert!(tree(&whole) == tree(&sharded), "the merged dataset equals the unsharded one, byte for byte");

    // Export: two shards, merged, equal the unsharded export.
    let exports = dir.path().join("exports");
    std::fs::create_dir_all(&exports).expect("mkdir");
    let all = exports.join("all.jsonl");
    ok(&vision2cad(&["gerd", "export", s(&whole), "--task", "next-command", "--out", s(&all)], &[]), "export");
    let part = exports.join("part.jsonl");
    for i in ["0", "1"] {
        let args = [
            "gerd",
            "export",
            s(&whole),
            "--task",
            "next-command",
            "--out",
            s(&part),
            "--shard-index",
            i,
            "--shard-count",
            "2",
        ];
        ok(&vision2cad(&args, &[]), "export shard");
    }
    let merged = exports.join("merged.jsonl");
    let shards = [exports.join("part.shard-0-of-2.jsonl"), exports.join("part.shard-1-of-2.jsonl")];
    ok(&vision2cad(&["merge", s(&shards[0]), s(&shards[1]), "--out", s(&merged)], &[]), "merge exports");
    let (a, b) = (std::fs::read_to_string(&all).expect("all"), std::fs::read_to_string(&merged).expect("merged"));
    assert!(a.lines().count() > 6, "{a}");
    assert_eq!(a, b, "merged export equals the unsharded one");
    let one = vision2cad(&["merge", s(&shards[0]), "--out", s(&merged)], &[]);
    assert!(!one.status.success(), "a merge with a shard missing is refused");
}

#[test]
fn run_shards_merge_to_the_unsharded_run_and_eval_shards_to_the_unsharded_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("gerd");
    let g = vision2cad(
        // Seed 2: two parts fall in each shard.
        &[
            "gerd",
            "generate",
            "--count",
            "4",
            "--seed",
            "2",
            "--split",
            "0,0,4",
            "--view-size",
            "200",
            "--out",
            s(&data),
        ],
        &[],
    );
    ok(&g, "generate");
    let whole = dir.path().join("whole");
    ok(&vision2cad(&["run", "--dataset", s(&data), "--out", s(&whole), "--jobs", "2"], &[]), "unsharded run");

    // The same command line on every machine: the index comes from a Kubernetes Indexed Job.
    let sharded = dir.path().join("sharded");
    let args = ["run", "--dataset", s(&data), "--out", s(&sharded), "--shard-count", "2"];
    for i in ["0", "1"] {
        ok(&vision2cad(&args, &[("JOB_COMPLETION_INDEX", i)]), "run shard");
    }
    for shard in ["shard-0-of-2", "shard-1-of-2"] {
        assert_eq!(json(&sharded.join(shard).join("results.json"))["parts"], 2, "{shard}");
    }
    let merged = dir.path().join("merged");
    ok(&vision2cad(&["merge", s(&sharded), "--out", s(&merged)], &[]), "merge runs");
    assert_eq!(results(&merged), results(&whole), "the merged run reports what the unsharded one did");
    // The reports name files in their own run's folder.
    let relative = |run: &Path| {
        let text = std::fs::read_to_string(run.join("eval_edit10.json")).expect("report");
        text.replace(&format!("{}/", s(run)), "RUN/")
    };
    assert_eq!(relative(&merged), relative(&whole));
    assert!(merged.join("gt").read_dir().expect("gt programs").count() == 4);
    for id in results(&whole)["per_part"].as_array().expect("parts").iter().map(|p| p["id"].as_str().expect("id")) {
        assert!(merged.join("parts").join(id).join("report.html").is_file(), "{id} copied");
    }

    // Eval shards of the predictions against the ground truths.
    let (pred, gt) = (dir.path().join("pred"), dir.path().join("gt"));
    std::fs::create_dir_all(&pred).expect("mkdir");
    std::fs::create_dir_all(&gt).expect("mkdir");
    for p in results(&whole)["per_part"].as_array().expect("parts") {
        let id = p["id"].as_str().expect("id");
        std::fs::copy(whole.join("parts").join(id).join("program.json"), pred.join(format!("{id}.json")))
            .expect("copy");
        std::fs::copy(data.join("parts").join(id).join("model.step"), gt.join(format!("{id}.step"))).expect("copy");
    }
    let report = dir.path().join("report.json");
    let eval = |extra: &[&str]| {
        let mut args = vec!["eval", "--pred", s(&pred), "--gt", s(&gt), "--workers", "1", "--json", s(&report)];
        args.extend(extra);
        vision2cad(&args, &[])
    };
    ok(&eval(&[]), "unsharded eval");
    for i in ["0", "1"] {
        ok(&eval(&["--shard-index", i, "--shard-count", "2"]), "eval shard");
    }
    let merged_report = dir.path().join("merged.json");
    let shard_files = [dir.path().join("report.shard-0-of-2.json"), dir.path().join("report.shard-1-of-2.json")];
    ok(
        &vision2cad(&["merge", s(&shard_files[0]), s(&shard_files[1]), "--out", s(&merged_report)], &[]),
        "merge reports",
    );
    assert_eq!(json(&merged_report), json(&report), "the merged report equals the unsharded one");
}
