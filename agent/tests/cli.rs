//! The command line as a user meets it: files written, files reopened, errors and exit codes.

mod common;

use std::path::Path;
use std::process::Output;

use common::{assert_close, example_path, repo_root};
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    common::command().args(args).env_remove("VISION2CAD_LOG").output().expect("vision2cad runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn inspect(path: &Path) -> Value {
    let o = run(&["inspect", path.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "inspect {}: {}", path.display(), stderr(&o));
    serde_json::from_slice(&o.stdout).expect("inspect prints JSON")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file exists")).expect("JSON")
}

#[test]
fn exec_writes_a_document_a_step_and_the_entity_table_that_reopen_identically() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = run(&[
        "exec",
        example_path("plate_counterbore").to_str().expect("path"),
        "--out",
        out.path().to_str().expect("path"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = std::fs::read_dir(out.path())
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(
        names,
        ["model.FCStd", "model.glb", "model.step", "solved_program.json", "state.json"],
        "exactly the outputs, no partial files"
    );

    let state = read_json(&out.path().join("state.json"));
    assert_eq!(state["valid"], true);
    let volume = state["volume"].as_f64().expect("volume");
    assert_close(volume, 6000.0 - 200.0 * std::f64::consts::PI, "state.json volume");
    assert!(state["bbox"]["min"].is_array() && state["bbox"]["max"].is_array());
    for (list, prefix) in [("faces", "F"), ("edges", "E"), ("vertices", "V")] {
        let items = state[list].as_array().expect(list);
        assert!(!items.is_empty(), "{list}");
        for (i, item) in items.iter().enumerate() {
            assert_eq!(item["id"], format!("{prefix}{}", i + 1), "{list} IDs are 1-based and in order");
            if list != "vertices" {
                assert!(item["kind"].is_string(), "{list} entries have a kind");
            }
        }
    }

    // FreeCAD's own document and the STEP export both reopen as the same solid.
    let from_fcstd = inspect(&out.path().join("model.FCStd"));
    assert_eq!(from_fcstd["faces"], state["faces"], "the FCStd holds the same entities");
    let from_step = inspect(&out.path().join("model.step"));
    assert_close(from_step["volume"].as_f64().expect("volume"), volume, "STEP volume");
    assert_eq!(from_step["faces"].as_array().map(Vec::len), state["faces"].as_array().map(Vec::len));

    // The program as solved: the same commands, and it builds the same model again.
    let solved = out.path().join("solved_program.json");
    let program = read_json(&solved);
    let given = read_json(&example_path("plate_counterbore"));
    assert_eq!(program["commands"].as_array().map(Vec::len), given["commands"].as_array().map(Vec::len));
    let again = tempfile::tempdir().expect("tempdir");
    let o = run(&["exec", solved.to_str().expect("path"), "--out", again.path().to_str().expect("path")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_json(&again.path().join("state.json")), state, "the solved program rebuilds the same model");
}

#[test]
fn scale_extrusions_edits_every_depth_before_writing() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = run(&[
        "exec",
        example_path("two_sided_cylinder").to_str().expect("path"),
        "--out",
        out.path().to_str().expect("path"),
        "--scale-extrusions",
        "1.1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let state = read_json(&out.path().join("state.json"));
    assert_close(state["volume"].as_f64().expect("volume"), 25.0 * std::f64::consts::PI * 11.0, "edited volume");
    assert_close(state["bbox"]["min"][2].as_f64().expect("zmin"), -6.6, "second side scaled");
    assert_close(state["bbox"]["max"][2].as_f64().expect("zmax"), 4.4, "first side scaled");
    let reopened = inspect(&out.path().join("model.FCStd"));
    assert_close(
        reopened["volume"].as_f64().expect("volume"),
        25.0 * std::f64::consts::PI * 11.0,
        "the saved document is edited",
    );
}

#[test]
fn a_failing_command_names_its_step_and_keeps_the_good_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = dir.path().join("bad_fillet.json");
    let mut json: Value = read_json(&example_path("box"));
    json["commands"][2] = serde_json::json!({"op": "fillet", "edges": ["E1", "E2"], "radius": 50});
    std::fs::write(&program, json.to_string()).expect("write");
    let out = dir.path().join("out");
    let o = run(&["exec", program.to_str().expect("path"), "--out", out.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("step 2 (fillet)") && err.contains("E1, E2"), "{err}");
    let state = read_json(&out.join("state.json"));
    assert_close(state["volume"].as_f64().expect("volume"), 1000.0, "the block before the fillet");
    assert!(out.join("model.FCStd").is_file() && out.join("model.step").is_file());
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    std::fs::write(p("truncated.json"), r#"{"commands": ["#).expect("write");
    std::fs::write(
        p("schema.json"),
        r#"{"commands": [{"op": "extrude", "profile": "S1", "mode": "add", "extent": {"type": "one_side"}}]}"#,
    )
    .expect("write");
    std::fs::write(p("unknown_op.json"), r#"{"commands": [{"op": "bend"}]}"#).expect("write");
    std::fs::write(p("garbage.step"), "ISO-10303-21; this is not a STEP file").expect("write");
    // Something a user wrote before: a failing run must leave it alone.
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(out.join("model.FCStd"), "earlier result").expect("write");

    let cases: [(&[&str], &str); 5] = [
        (&["exec", &p("missing.json"), "--out", &p("out")], "missing.json"),
        (&["exec", &p("truncated.json"), "--out", &p("out")], "truncated.json is not a valid program"),
        (&["exec", &p("schema.json"), "--out", &p("out")], "commands[0]"),
        (&["exec", &p("unknown_op.json"), "--out", &p("out")], "unknown variant `bend`"),
        (&["inspect", &p("garbage.step")], "garbage.step"),
    ];
    for (args, needle) in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: '{err}' lacks '{needle}'");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(out.join("model.FCStd")).expect("kept"), "earlier result");

    assert_eq!(run(&["exec"]).status.code(), Some(2), "usage error");
    assert_eq!(run(&["exec", &p("x.json"), "--out", &p("o"), "--scale-extrusions", "lots"]).status.code(), Some(2));
    let o = run(&["inspect", &p("missing.step")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.step"), "{}", stderr(&o));
}

#[test]
fn the_committed_schema_is_the_one_the_binary_prints() {
    let o = run(&["schema"]);
    assert!(o.status.success());
    let printed: Value = serde_json::from_slice(&o.stdout).expect("schema JSON");
    let committed = read_json(&repo_root().join("assets/schema/program.schema.json"));
    assert_eq!(printed, committed, "regenerate with: vision2cad schema > assets/schema/program.schema.json");
}

#[test]
fn render_writes_views_and_their_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = example_path("plate_counterbore");
    let model = model.to_str().expect("path");
    let out = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    for (view, extra) in [
        ("target", vec![]),
        ("tagged", vec!["--labels", "edges,faces"]),
        ("sketch", vec!["--sketch-plane", "F5"]),
        ("preview", vec![]),
    ] {
        let png = out(&format!("{view}.png"));
        let meta = out(&format!("{view}.json"));
        let mut args = vec!["render", model, "--view", view, "--out", &png, "--meta", &meta, "--size", "300"];
        args.extend(extra);
        let o = run(&args);
        assert!(o.status.success(), "{view}: {}", stderr(&o));
        let image = image::open(&png).expect("a PNG");
        assert_eq!(image.height(), 300);
        let meta = read_json(Path::new(&meta));
        assert_eq!(meta["height"], 300);
        assert!(meta["camera"]["forward"].is_array() && meta["labels"].is_array() && meta["unlabelled"].is_array());
        if view == "tagged" {
            let labels = meta["labels"].as_array().expect("labels");
            assert!(labels.iter().any(|l| l["id"] == "F5"), "faces were asked for");
            for l in labels {
                assert!(l["id"].is_string() && l["box"].as_array().map(Vec::len) == Some(4) && l["anchor"].is_array());
            }
        }
        if view == "sketch" {
            assert!(meta["sketch"]["view_to_local"].is_array() && meta["sketch"]["edges"].is_array());
        }
    }
    let failures: [(&[&str], &str); 3] = [
        (&["render", model, "--view", "sketch", "--out", &out("s.png")], "--sketch-plane"),
        (&["render", model, "--out", &out("x.jpg")], ".png"),
        (&["render", model, "--view", "sketch", "--sketch-plane", "F7", "--out", &out("s.png")], "planar"),
    ];
    for (args, needle) in failures {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// Subcommands listed under `Commands:` in a help text (`help` itself left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The help of `path` and, depth first, of every subcommand under it, as Markdown.
fn help_pages(path: &[String], out: &mut String) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    // Help shows an environment variable's value where one is set: none is.
    let o = common::command().args(&args).env_remove("VISION2CAD_TIMEOUT").output().expect("vision2cad runs");
    assert!(o.status.success(), "vision2cad {}: {}", args.join(" "), stderr(&o));
    let help = String::from_utf8(o.stdout).expect("utf-8 help");
    let name = std::iter::once("vision2cad").chain(path.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
    let level = "#".repeat((path.len() + 2).min(5));
    out.push_str(&format!("{level} `{name}`\n\n```text\n{}\n```\n\n", help.trim_end()));
    for sub in subcommands(&help) {
        let mut next = path.to_vec();
        next.push(sub);
        help_pages(&next, out);
    }
}

/// docs/cli.md is every command's `--help`, generated from the clap definitions, so the
/// reference cannot drift from the program: this test fails when it differs, and
/// `VISION2CAD_UPDATE_DOCS=1` rewrites it.
#[test]
fn the_cli_reference_is_the_programs_own_help() {
    let mut page = String::from(
        "# Command-line reference\n\nEvery command's `--help`, generated from the program by the test \
         `the_cli_reference_is_the_programs_own_help` (agent/tests/cli.rs); regenerate with \
         `VISION2CAD_UPDATE_DOCS=1 cargo test -p vision2cad --test cli the_cli_reference`.\n\n",
    );
    help_pages(&[], &mut page);
    let path = repo_root().join("docs/cli.md");
    if std::env::var_os("VISION2CAD_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &page).expect("write docs/cli.md");
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == page,
        "docs/cli.md is not the program's help: regenerate it with VISION2CAD_UPDATE_DOCS=1 cargo test -p vision2cad --test cli the_cli_reference"
    );
}

/// render's errors name what the user gave: the missing folder, the face that does not
/// exist (not an internal request name or a temporary file).
/// A sketch view of an imported model: a STEP file, and an FCStd document as `exec` writes
/// it, on a base plane and on a planar face (the STEP's faces come from the file, not a body).
#[test]
fn render_sketch_views_of_step_and_fcstd_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let built = dir.path().join("built");
    let o = run(&[
        "exec",
        example_path("plate_counterbore").to_str().expect("path"),
        "--out",
        built.to_str().expect("path"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for file in ["model.step", "model.FCStd"] {
        let model = built.join(file);
        let model = model.to_str().expect("path");
        let o = run(&["inspect", model]);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        let table: Value = serde_json::from_slice(&o.stdout).expect("entity table");
        let face = table["faces"]
            .as_array()
            .expect("faces")
            .iter()
            .find(|f| f["kind"] == "plane" && f["normal"][2].as_f64().is_some_and(|z| z > 0.99))
            .and_then(|f| f["id"].as_str())
            .expect("an upward planar face")
            .to_string();
        for plane in ["XY", "XZ", face.as_str()] {
            let png = dir.path().join(format!("{file}-{plane}.png"));
            let meta = dir.path().join(format!("{file}-{plane}.json"));
            let o = run(&[
                "render",
                model,
                "--view",
                "sketch",
                "--sketch-plane",
                plane,
                "--size",
                "200",
                "--out",
                png.to_str().expect("path"),
                "--meta",
                meta.to_str().expect("path"),
            ]);
            assert!(o.status.success(), "{file} on {plane}: {}", stderr(&o));
            let meta = read_json(&meta);
            assert!(meta["sketch"]["view_to_local"].is_array(), "{file} on {plane}: {meta}");
            assert_eq!(image::open(&png).expect("a PNG").height(), 200);
        }
    }
}

#[test]
fn render_errors_name_the_users_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = example_path("plate_counterbore");
    let program = program.to_str().expect("utf-8");
    let missing = dir.path().join("no-such-folder/view.png");
    let o = run(&["render", program, "--out", missing.to_str().expect("utf-8")]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("no-such-folder does not exist"), "{err}");
    assert!(!err.contains("partial"), "{err}");
    let out = dir.path().join("sketch.png");
    let o =
        run(&["render", program, "--view", "sketch", "--sketch-plane", "F99", "--out", out.to_str().expect("utf-8")]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("sketch plane") && err.contains("F1..F10"), "{err}");
    assert!(!err.contains("plane_frame"), "{err}");
}
