//! GERD generation: deterministic across runs and worker counts, one part per family,
//! every operation used, every record valid.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use freecad_bridge::testing::{config, files_under, session};
use gerd::record::{RecordOptions, Split, part_dirs, read_part, write_index, write_part};

fn generate_with(root: &Path, seed: u64, count: usize, workers: usize) {
    let pool = freecad_bridge::WorkerPool::new(config(), workers);
    let indices: Vec<usize> = (0..count).collect();
    let options = RecordOptions { view_size: 200 };
    let results = pool.map(
        &indices,
        |session, &i| {
            let part = gerd::generate::generate(session, seed, i, Split::Train)
                .unwrap_or_else(|e| panic!("part {i} of seed {seed}: {e}"));
            write_part(session, &part, root, &options).unwrap_or_else(|e| panic!("writing part {i}: {e}"));
            Ok(())
        },
        |_| {},
    );
    assert!(results.iter().all(Result::is_ok));
    write_index(root).expect("index");
}

/// Every file under `root`, relative, with its bytes.
fn files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = files_under(root)
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read");
            (path.strip_prefix(root).expect("under root").to_path_buf(), bytes)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn generation_is_deterministic_covers_every_operation_and_validates() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let count = gerd::generate::FAMILIES.len();
    // Two runs, one and two workers: the bytes do not depend on which worker did what.
    generate_with(a.path(), 11, count, 2);
    generate_with(b.path(), 11, count, 1);
    let (fa, fb) = (files(a.path()), files(b.path()));
    assert_eq!(fa.len(), fb.len());
    for ((pa, ba), (pb, bb)) in fa.iter().zip(&fb) {
        assert_eq!(pa, pb);
        assert!(ba == bb, "{} differs between two runs with the same seed", pa.display());
    }

    // One part per family, each valid, together using every operation.
    let mut ops = BTreeSet::new();
    let mut sources = BTreeSet::new();
    let mut on_faces = 0;
    let mut projected = 0;
    let mut session = session();
    for dir in part_dirs(a.path()).expect("parts") {
        let record = read_part(&dir).expect("record");
        sources.insert(record.source.clone());
        assert!(record.final_summary.valid && record.final_summary.solids == 1, "{}", record.id);
        assert!(record.ex10p.valid && record.ex10p.solids == 1, "{}", record.id);
        for step in &record.steps {
            ops.insert(step.command.op());
            on_faces += step.references.iter().filter(|r| r.role == "support").count();
            projected += step.references.iter().filter(|r| r.role == "projected").count();
        }
        let report = gerd::validate::validate_part(&mut session, &dir);
        assert!(report.problems.is_empty(), "{}: {:?}", record.id, report.problems);
        assert!(report.iou.is_some_and(|iou| iou >= 0.999));
    }
    assert_eq!(sources.len(), count, "one part per family: {sources:?}");
    for op in ["sketch", "extrude", "revolve", "sweep", "loft", "fillet", "chamfer", "plane", "end"] {
        assert!(ops.contains(op), "no generated part uses {op}: {ops:?}");
    }
    assert!(on_faces >= count, "sketches go on faces by ID ({on_faces})");
    assert!(projected >= 2, "sketches tie geometry to projected edges ({projected})");
}
