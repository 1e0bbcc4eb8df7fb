//! `vision2cad gerd` on the command line: validate, export, generate (resuming, splits) and
//! import (CadQuery and DeepCAD files, folders of them).

mod common;

use std::path::Path;

use gerd::record::{Split, part_dirs, read_part};

#[test]
fn validate_finds_corrupted_records_and_export_writes_loadable_samples() {
    let root = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| common::command().args(args).output().expect("vision2cad runs");
    let dir = root.path().to_str().expect("utf-8");
    let generate = ["gerd", "generate", "--count", "3", "--seed", "5", "--split", "3,0,0", "--view-size", "200"];
    let generated = run(&[&generate[..], &["--workers", "2", "--out", dir]].concat());
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));

    let ok = run(&["gerd", "validate", dir]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stdout));

    // Exports parse, and every image they name exists.
    let out = |name: &str| root.path().join("export").join(name).to_string_lossy().into_owned();
    for (task, format, file) in [
        ("next-command", "jsonl", "nc.jsonl"),
        ("entity-selection", "jsonl", "es.jsonl"),
        ("next-command", "llava", "nc.json"),
        ("entity-selection", "llava", "es.json"),
    ] {
        let o = run(&["gerd", "export", dir, "--task", task, "--format", format, "--out", &out(file)]);
        assert!(o.status.success(), "{task} {format}: {}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(out(file)).expect("export written");
        let items: Vec<serde_json::Value> = if format == "jsonl" {
            text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
        } else {
            serde_json::from_str(&text).expect("a JSON list")
        };
        assert!(!items.is_empty(), "{task} {format}: no samples");
        for item in &items {
            let images: Vec<String> = match format {
                "jsonl" => item["images"]
                    .as_array()
                    .expect("images")
                    .iter()
                    .map(|v| v.as_str().expect("path").into())
                    .collect(),
                _ => match &item["image"] {
                    serde_json::Value::String(s) => vec![s.clone()],
                    v => v.as_array().expect("image list").iter().map(|v| v.as_str().expect("path").into()).collect(),
                },
            };
            assert!(!images.is_empty());
            for image in images {
                assert!(Path::new(&image).is_file(), "{task} {format}: {image} does not exist");
            }
            assert_eq!(item["split"], "train");
        }
        if task == "next-command" && format == "jsonl" {
            // The answers are commands of the language.
            for item in &items {
                let answer = item["answer"].as_str().expect("answer");
                serde_json::from_str::<freecad_bridge::Command>(answer).expect("a command");
            }
        }
        if task == "entity-selection" && format == "jsonl" {
            for item in &items {
                let answer = item["answer"].as_str().expect("answer");
                assert!(answer.parse::<freecad_bridge::command::EntityId>().is_ok(), "{answer}");
            }
        }
    }

    // Corrupt one record: a changed depth, a missing image.
    let parts = part_dirs(root.path()).expect("parts");
    let part_json = parts[0].join("part.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&part_json).expect("read")).expect("json");
    let extrude = record["program"]["commands"]
        .as_array_mut()
        .expect("commands")
        .iter_mut()
        .find(|c| c["op"] == "extrude" && c["extent"]["type"] == "one_side")
        .expect("a one-sided extrusion");
    let depth = extrude["extent"]["depth"].as_f64().expect("depth");
    extrude["extent"]["depth"] = serde_json::json!(depth * 2.0);
    std::fs::write(&part_json, record.to_string()).expect("write");
    std::fs::remove_file(parts[1].join("target.png")).expect("remove");

    let bad = run(&["gerd", "validate", dir]);
    assert_eq!(bad.status.code(), Some(1));
    let report = String::from_utf8_lossy(&bad.stdout);
    let first = parts[0].file_name().expect("name").to_string_lossy().into_owned();
    let second = parts[1].file_name().expect("name").to_string_lossy().into_owned();
    assert!(report.contains(&first) && report.contains("IoU"), "{report}");
    assert!(report.contains(&second) && report.contains("target.png is missing"), "{report}");
    assert!(report.contains("3 parts, 1 valid, 2 with problems"), "{report}");
}

#[test]
fn generate_from_the_command_line_resumes_and_splits() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().to_str().expect("utf-8");
    let run = |args: &[&str]| common::command().args(args).output().expect("vision2cad runs");
    let args =
        ["gerd", "generate", "--count", "4", "--seed", "2", "--out", dir, "--split", "2,1,1", "--view-size", "160"];
    let first = run(&args);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let index = std::fs::read_to_string(root.path().join("index.jsonl")).expect("index");
    let splits: Vec<String> = index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("line")["split"].as_str().expect("split").into())
        .collect();
    assert_eq!(splits, ["train", "train", "val", "test"]);
    let again = run(&args);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("4 of 4 parts already written"));
}

/// Generated parts replay alike: each part's program, executed in three processes, writes
/// the same entity table (volume and area to the bit), and so does the program `exec` saves
/// as solved.
#[test]
fn generated_programs_replay_to_the_same_part_in_every_process() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = common::generated_test_split(root.path(), 5, 11);
    for part in part_dirs(&data).expect("parts") {
        let record = read_part(&part).expect("part");
        let program = root.path().join(format!("{}.json", record.id));
        std::fs::write(&program, serde_json::to_string(&record.program).expect("json")).expect("program");
        let exec = |program: &Path, out: &Path| {
            let o = common::command().arg("exec").arg(program).arg("--out").arg(out).output().expect("exec");
            assert!(o.status.success(), "{}: {}", record.id, String::from_utf8_lossy(&o.stderr));
            std::fs::read_to_string(out.join("state.json")).expect("state.json")
        };
        let first = exec(&program, &root.path().join(format!("{}-0", record.id)));
        for k in 1..3 {
            assert!(
                first == exec(&program, &root.path().join(format!("{}-{k}", record.id))),
                "{}: replay {k}",
                record.id
            );
        }
        let solved = root.path().join(format!("{}-0", record.id)).join("solved_program.json");
        assert!(first == exec(&solved, &root.path().join(format!("{}-solved", record.id))), "{}: as solved", record.id);
    }
}

#[test]
fn imports_from_the_command_line_become_valid_records() {
    let Some(data) = common::data_dir() else {
        eprintln!("skipping: no ../shared/data (set VISION2CAD_DATA)");
        return;
    };
    let test100 = data.join("cadcoder-test100");
    let fixture = data.join("seekcad-example/00000066_deepcad_format.json");
    if !test100.is_dir() || !fixture.is_file() {
        eprintln!("skipping: test100 or the DeepCAD fixture is missing under {}", data.display());
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    // Three rows of test100 (the whole set is imported, without records, in gerd_import.rs).
    let rows: Vec<String> = std::fs::read_to_string(test100.join("cadquery_test_data_subset100.jsonl"))
        .expect("jsonl")
        .lines()
        .take(3)
        .map(String::from)
        .collect();
    let jsonl = root.path().join("three.jsonl");
    std::fs::write(&jsonl, rows.join("\n")).expect("write");
    let out = root.path().join("gerd");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let run = |args: &[String]| common::command().args(args).output().expect("vision2cad runs");
    let args: Vec<String> =
        ["gerd", "import", "cadcoder", "--jsonl", &s(&jsonl), "--steps", &s(&test100.join("steps"))]
            .iter()
            .map(|a| a.to_string())
            .chain(["--images".into(), s(&test100.join("images")), "--out".into(), s(&out)])
            .collect();
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["gerd", "import", "deepcad", &s(&fixture), "--out", &s(&out)].map(String::from));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let dirs = part_dirs(&out).expect("parts");
    assert_eq!(dirs.len(), 4, "three test100 parts and the DeepCAD part");
    for dir in &dirs {
        let record = read_part(dir).expect("record");
        let target = image::open(dir.join(&record.files.target)).expect("target image");
        match record.source.as_str() {
            "cadcoder-test100" => {
                assert_eq!(record.split, Split::Test);
                assert_eq!(target.width(), 448, "the source image is the target");
            }
            source => assert_eq!(source, "deepcad"),
        }
    }
    let o = run(&["gerd", "validate", &s(&out)].map(String::from));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

/// A DeepCAD JSON file: a `side` x `side` square on XY extruded 1 up.
fn deepcad_plate(side: f64) -> String {
    let point = |x: f64, y: f64| serde_json::json!({"x": x, "y": y, "z": 0.0});
    let corners = [[0.0, 0.0], [side, 0.0], [side, side], [0.0, side]];
    let curves: Vec<serde_json::Value> = (0..4)
        .map(|i| {
            let (a, b) = (corners[i], corners[(i + 1) % 4]);
            serde_json::json!({"type": "Line3D", "start_point": point(a[0], a[1]), "end_point": point(b[0], b[1]),
                "curve": format!("a{i}")})
        })
        .collect();
    let axis = |x: f64, y: f64, z: f64| serde_json::json!({"x": x, "y": y, "z": z});
    serde_json::json!({
        "entities": {
            "s1": {"type": "Sketch",
                "transform": {"origin": axis(0.0, 0.0, 0.0), "x_axis": axis(1.0, 0.0, 0.0),
                    "y_axis": axis(0.0, 1.0, 0.0), "z_axis": axis(0.0, 0.0, 1.0)},
                "profiles": {"p1": {"loops": [{"is_outer": true, "profile_curves": curves}]}}},
            "e1": {"type": "ExtrudeFeature", "extent_type": "OneSideFeatureExtentType",
                "operation": "NewBodyFeatureOperation",
                "extent_one": {"distance": {"value": 1.0}}, "extent_two": {"distance": {"value": 0.0}},
                "start_extent": {"type": "ProfilePlaneStartDefinition"},
                "profiles": [{"sketch": "s1", "profile": "p1"}]}
        },
        "sequence": [{"index": 0, "type": "Sketch", "entity": "s1"}, {"index": 1, "type": "ExtrudeFeature", "entity": "e1"}]
    })
    .to_string()
}

#[test]
fn a_folder_of_deepcad_files_imports_in_parallel_with_a_report_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("deepcad");
    std::fs::create_dir_all(src.join("0000")).expect("mkdir");
    std::fs::create_dir_all(src.join("0001")).expect("mkdir");
    std::fs::write(src.join("0000/00000001.json"), deepcad_plate(2.0)).expect("write");
    std::fs::write(src.join("0000/00000002.json"), deepcad_plate(3.0)).expect("write");
    std::fs::write(
        src.join("0001/00000003.json"),
        "{\"entities\": {}, \"sequence\": [{\"index\": 0, \"type\": \"Sketch\", \"entity\": \"gone\"}]}",
    )
    .expect("write");
    let out = dir.path().join("gerd");
    let run = |path: &std::path::Path| {
        common::command()
            .args(["gerd", "import", "deepcad"])
            .arg(path)
            .arg("--out")
            .arg(&out)
            .args(["--workers", "2"])
            .output()
            .expect("runs")
    };
    let first = run(&src);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(stderr.contains("imported 2 of 3 files"), "{stderr}");
    assert!(stderr.contains("1  DeepCAD JSON: the sequence names gone"), "a summary by reason: {stderr}");
    let report: Vec<serde_json::Value> = std::fs::read_to_string(out.join("import-report.jsonl"))
        .expect("report")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(report.len(), 3);
    assert_eq!(report[0]["file"], "0000/00000001.json");
    assert_eq!(report[2]["status"], "failed");
    assert!(report[2]["reason"].as_str().expect("reason").contains("gone"));
    let record = gerd::record::read_part(&out.join("parts/00000002")).expect("imported part");
    assert!(record.provenance.contains("DeepCAD JSON 0000/00000002.json"), "{}", record.provenance);
    assert!(!record.provenance.contains(&dir.path().display().to_string()), "no absolute paths in provenance");
    assert!(out.join("index.jsonl").is_file());

    // A list of files, relative to the list: the imported ones are not imported again.
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "deepcad/0000/00000001.json\n# a comment\ndeepcad/0000/00000002.json\n").expect("write");
    let again = run(&list);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(stderr.contains("resuming: 2 of 2 files already imported"), "{stderr}");
}
