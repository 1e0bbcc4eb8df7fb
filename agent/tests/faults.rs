//! Faults change no result: with FreeCAD workers killed (SIGKILL) in the middle of
//! `gerd generate`, `eval` and `gerd import` (`VISION2CAD_FAULT_KILL_AT`), every output is
//! the undisturbed run's, byte for byte, and the exit code is 0; an item that kills its
//! worker every time is reported as crashing the kernel (in `eval`, as a sample the
//! evaluator could not score, unless the prediction was being built).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{data_dir, files_under};

const FAULT_ENV: &str = "VISION2CAD_FAULT_KILL_AT";

fn vision2cad(args: &[&str], faults: Option<(&Path, &str)>) -> Output {
    let mut cmd = common::command();
    cmd.args(args).env_remove(FAULT_ENV);
    if let Some((counter, at)) = faults {
        cmd.env(FAULT_ENV, format!("{}:{at}", counter.display()));
    }
    cmd.output().expect("runs")
}

fn ok(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what}: {stderr}");
    stderr
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// Every file under `dir` with its bytes, by relative path.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = files_under(dir)
        .into_iter()
        .map(|p| (p.strip_prefix(dir).expect("under").display().to_string(), std::fs::read(&p).expect("read")))
        .collect();
    files.sort();
    files
}

/// How many workers the plan killed: requests counted past each planned number.
fn killed(counter: &Path, at: &[u64]) -> usize {
    let n: u64 = std::fs::read_to_string(counter).expect("counter").trim().parse().expect("count");
    at.iter().filter(|&&k| k <= n).count()
}

#[test]
fn generate_and_eval_with_killed_workers_write_what_undisturbed_runs_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let generate = |out: &Path, faults| {
        let args = [
            "gerd",
            "generate",
            "--count",
            "6",
            "--seed",
            "5",
            "--split",
            "0,0,6",
            "--view-size",
            "160",
            "--workers",
            "2",
        ];
        let mut args = args.to_vec();
        args.extend(["--out", s(out)]);
        vision2cad(&args, faults)
    };
    let clean = dir.path().join("clean");
    ok(&generate(&clean, None), "clean generate");
    let faulty = dir.path().join("faulty");
    let counter = dir.path().join("generate.count");
    // Three faults: fewer than the four attempts an item gets, wherever they land.
    let at = [5, 60, 140];
    let stderr = ok(&generate(&faulty, Some((&counter, "5,60,140"))), "generate with faults");
    assert_eq!(killed(&counter, &at), at.len(), "every planned fault happened");
    assert!(stderr.contains("running the item again from its start"), "{stderr}");
    assert!(tree(&clean) == tree(&faulty), "the dataset written through faults is the undisturbed one, byte for byte");

    // The loop's stage samples, recorded through faults (one part: the shard of gen-5-00000).
    let export = |out: &Path, faults| {
        let jsonl = out.join("s.jsonl");
        let args = [
            "gerd",
            "export",
            s(&clean),
            "--task",
            "stage1",
            "--out",
            s(&jsonl),
            "--shard-index",
            "0",
            "--shard-count",
            "2",
        ];
        vision2cad(&args, faults)
    };
    let (export_clean, export_faulty) = (dir.path().join("export-clean"), dir.path().join("export-faulty"));
    ok(&export(&export_clean, None), "clean export");
    let counter = dir.path().join("export.count");
    ok(&export(&export_faulty, Some((&counter, "5,30"))), "export with faults");
    assert_eq!(killed(&counter, &[5, 30]), 2);
    assert!(
        tree(&export_clean) == tree(&export_faulty),
        "the samples recorded through faults are the undisturbed ones"
    );

    // Evaluation: the generated programs against the parts' STEP files.
    let (pred, gt) = (dir.path().join("pred"), dir.path().join("gt"));
    std::fs::create_dir_all(&pred).expect("mkdir");
    std::fs::create_dir_all(&gt).expect("mkdir");
    for part in std::fs::read_dir(clean.join("parts")).expect("parts").map(|e| e.expect("entry").path()) {
        let id = part.file_name().expect("name").to_string_lossy().into_owned();
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(part.join("part.json")).expect("part.json")).expect("json");
        std::fs::write(pred.join(format!("{id}.json")), record["program"].to_string()).expect("program");
        std::fs::copy(part.join("model.step"), gt.join(format!("{id}.step"))).expect("copy");
    }
    let eval = |json: &Path, faults| {
        vision2cad(&["eval", "--pred", s(&pred), "--gt", s(&gt), "--workers", "2", "--json", s(json)], faults)
    };
    let (clean_report, faulty_report) = (dir.path().join("clean.json"), dir.path().join("faulty.json"));
    ok(&eval(&clean_report, None), "clean eval");
    let counter = dir.path().join("eval.count");
    let at = [3, 17, 30];
    ok(&eval(&faulty_report, Some((&counter, "3,17,30"))), "eval with faults");
    assert_eq!(killed(&counter, &at), at.len());
    let read = |p: &PathBuf| std::fs::read_to_string(p).expect("report");
    assert_eq!(read(&faulty_report), read(&clean_report), "the report through faults is the undisturbed one");
    assert!(read(&clean_report).contains("\"cr\": 1.0"));

    // A machine that kills every worker, whatever it runs, fails the evaluator, not the
    // prediction: the sample is not scored (left out of CR), the table says why, and the
    // exit status says the evaluation is incomplete.
    let one = dir.path().join("one.json");
    let first = std::fs::read_dir(&pred).expect("pred").next().expect("one").expect("entry").path();
    let id = first.file_stem().expect("stem").to_string_lossy().into_owned();
    let every: Vec<String> = (1..=400).map(|n| n.to_string()).collect();
    let counter = dir.path().join("every.count");
    let out = vision2cad(
        &["eval", "--pred", s(&first), "--gt", s(&gt.join(format!("{id}.step"))), "--workers", "1", "--json", s(&one)],
        Some((&counter, &every.join(","))),
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = read(&one);
    let report: serde_json::Value = serde_json::from_str(&text).expect("report");
    assert_eq!((report["n_errors"].as_u64(), report["n_compiled"].as_u64()), (Some(1), Some(0)), "{text}");
    let error = report["samples"][0]["error"].as_str().expect("the evaluator's error");
    assert!(
        error.contains("building the ground truth failed") && error.contains("crashes the FreeCAD kernel"),
        "{error}"
    );
    assert!(report["samples"][0]["reason"].is_null(), "not a prediction failure: {text}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("not scored (1): evaluator errors, not counted in CR"), "{table}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not be scored"));
}

#[test]
fn an_import_with_killed_workers_writes_what_an_undisturbed_one_writes() {
    let Some(data) = data_dir() else {
        eprintln!("skipped: the shared test data (../shared/data) is not here");
        return;
    };
    let test100 = data.join("cadcoder-test100");
    let dir = tempfile::tempdir().expect("tempdir");
    // The first six programs of test100.
    let rows: String = std::fs::read_to_string(test100.join("cadquery_test_data_subset100.jsonl"))
        .expect("test100 rows")
        .lines()
        .take(6)
        .map(|l| format!("{l}\n"))
        .collect();
    let jsonl = dir.path().join("rows.jsonl");
    std::fs::write(&jsonl, rows).expect("write rows");
    let import = |out: &Path, faults| {
        vision2cad(
            &[
                "gerd",
                "import",
                "cadcoder",
                "--jsonl",
                s(&jsonl),
                "--steps",
                s(&test100.join("steps")),
                "--images",
                s(&test100.join("images")),
                "--workers",
                "2",
                "--out",
                s(out),
            ],
            faults,
        )
    };
    let clean = dir.path().join("clean");
    ok(&import(&clean, None), "clean import");
    let faulty = dir.path().join("faulty");
    let counter = dir.path().join("import.count");
    let at = [4, 25, 61];
    ok(&import(&faulty, Some((&counter, "4,25,61"))), "import with faults");
    assert_eq!(killed(&counter, &at), at.len());
    // Provenance names the source files, not the output folder, so the trees compare as is.
    assert!(tree(&clean) == tree(&faulty), "the import through faults is the undisturbed one, byte for byte");
    // Names, not this machine's paths: the dataset can move.
    for part in std::fs::read_dir(clean.join("parts")).expect("parts").map(|e| e.expect("entry").path()) {
        let record = gerd::record::read_part(&part).expect("part");
        assert!(!record.provenance.contains(&test100.display().to_string()), "{}", record.provenance);
        assert!(
            record.provenance.contains("cadquery_test_data_subset100.jsonl")
                || record.provenance.contains("rows.jsonl")
        );
    }
}
