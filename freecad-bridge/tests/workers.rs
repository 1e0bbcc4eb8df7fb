//! Workers that die or hang are replaced and their documents rebuilt from the command log.

use std::time::Duration;

use freecad_bridge::testing::{assert_close, example, session};
use freecad_bridge::{BridgeError, CallError, Session, WorkerPool};

fn sigkill(pid: u32) {
    let status = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -KILL {pid}");
}

#[test]
fn a_killed_worker_is_replaced_and_the_run_continues_with_the_same_result() {
    let program = example("plate_counterbore");
    let mut reference = session();
    reference.execute_program(&program).expect("reference run");

    let mut s = session();
    let mut killed = 0;
    for (i, command) in program.commands.iter().enumerate() {
        if i == 4 {
            // Mid-run: three features in the document, the worker dies.
            let pid = s.worker_pid().expect("a worker");
            sigkill(pid);
            let err = s.execute(command).expect_err("the call to the dead worker fails");
            assert!(
                matches!(err, BridgeError::WorkerLost { source: CallError::Crashed { .. } }),
                "a typed crash error, got {err}"
            );
            assert_ne!(s.worker_pid(), Some(pid), "the worker was replaced");
            killed += 1;
        }
        // The caller retries what failed; everything before it survived the crash.
        s.execute(command).unwrap_or_else(|e| panic!("step {i}: {e}"));
    }
    assert_eq!(killed, 1);
    assert_eq!(s.replacements(), 1);
    assert_eq!(s.state(), reference.state(), "same entity table as an undisturbed run");
    assert_eq!(s.query_state().expect("state"), *reference.state());
    assert_eq!(s.parameters().expect("parameters"), reference.parameters().expect("parameters"));
}

#[test]
fn parameter_edits_survive_a_worker_crash() {
    let mut s = session();
    s.execute_program(&example("box")).expect("box");
    s.scale_extrusions(1.1).expect("edit");
    sigkill(s.worker_pid().expect("worker"));
    assert!(s.query_state().is_err(), "the first call after the crash reports it");
    assert_close(s.query_state().expect("rebuilt").volume, 1100.0, "rebuilt volume keeps the edit");
}

#[test]
fn a_hanging_worker_hits_its_timeout_and_is_replaced() {
    let config = freecad_bridge::testing::config().with_call_timeout(Duration::from_secs(3));
    let mut s = Session::new(config).expect("worker");
    s.execute_program(&example("box")).expect("box");
    let pid = s.worker_pid();
    let err = s.sleep_in_worker(Duration::from_secs(600)).expect_err("a 10-minute call cannot finish in 3 s");
    assert!(matches!(err, BridgeError::WorkerLost { source: CallError::Timeout { .. } }), "{err}");
    assert_ne!(s.worker_pid(), pid, "the hung worker was replaced");
    // The document came back by replay.
    assert_close(s.query_state().expect("state").volume, 1000.0, "volume after replay");
    s.scale_extrusions(1.1).expect("edit after replacement");
    assert_close(s.state().volume, 1100.0, "edited volume");
}

#[test]
fn a_request_past_the_callers_own_limit_stops_its_worker_without_counting_it_lost() {
    let mut s = Session::new(freecad_bridge::testing::config()).expect("worker");
    s.execute_program(&example("box")).expect("box");
    let pid = s.worker_pid();
    let done = s.sleep_in_worker_within(Duration::from_secs(600), Duration::from_millis(500)).expect("no error");
    assert!(!done, "a 10-minute call cannot finish in half a second");
    assert_eq!(s.replacements(), 0, "a limit the caller chose is no lost worker");
    assert_ne!(s.worker_pid(), pid, "the busy worker was stopped");
    // The next request starts a worker and replays the document into it.
    assert_close(s.query_state().expect("state").volume, 1000.0, "volume after the stop");
    assert!(s.sleep_in_worker_within(Duration::from_millis(10), Duration::from_secs(30)).expect("no error"));
}

#[test]
fn a_pool_runs_programs_in_parallel_and_recycles_workers() {
    let names = ["box", "fillet_box", "flange_revolve", "loft_frustum", "pipe_sweep"];
    let programs: Vec<_> = names.iter().map(|n| example(n)).collect();
    let pool = WorkerPool::new(freecad_bridge::testing::config(), 2).with_recycle_after(2);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results = pool.map(
        &programs,
        |s, p| {
            s.execute_program(p).map_err(|e| e.error)?;
            Ok((s.state().volume, s.worker_pid()))
        },
        |_| {
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        },
    );
    assert_eq!(done.into_inner(), programs.len());
    let mut single = session();
    let mut pids = std::collections::BTreeSet::new();
    for (result, program) in results.into_iter().zip(&programs) {
        let (volume, pid) = result.expect("pool job");
        single.reset().expect("reset");
        single.execute_program(program).expect("single run");
        assert_close(volume, single.state().volume, "pool and single session agree");
        pids.insert(pid);
    }
    // Two workers, each recycled after two jobs: five jobs need at least three processes.
    assert!(pids.len() >= 3, "workers were not recycled: {pids:?}");
}

#[test]
fn a_replay_that_numbers_faces_otherwise_is_mapped_by_geometry_and_the_caller_sees_no_difference() {
    let program = example("plate_counterbore");
    let mut reference = session();
    let mut s = session();
    // Sketch, pad, a sketch on F6 and its pocket: the log names a face.
    let split = 4;
    for c in &program.commands[..split] {
        reference.execute(c).expect("reference");
        s.execute(c).expect("run");
    }
    let before = s.state().clone();
    // The replay meets a numbering other than the one the log and the caller hold.
    s.debug_replay_with_shifted_face_ids().expect("the replay maps the IDs");
    let held = s.state().clone();
    let id_of = |state: &freecad_bridge::ModelState, c: [f64; 3]| {
        state.faces.iter().find(|f| f.centroid == c).map(|f| f.id.clone()).expect("the face")
    };
    assert!(before.faces.iter().all(|f| id_of(&held, f.centroid) != f.id), "every face ID moved");
    let records = s.renumberings();
    assert!(records.iter().any(|r| r.at.starts_with("request") && !r.changed.is_empty()), "{records:?}");
    let caller = records.iter().find(|r| r.at == "caller").expect("the caller's IDs were matched");
    assert!(caller.ambiguous.is_empty() && caller.missing.is_empty(), "{caller:?}");

    // The next command names the top face by the ID the caller holds; it reaches the same face.
    let mut next = serde_json::to_value(&program.commands[split]).expect("json");
    let top = before.faces.iter().find(|f| f.id == next["on"]).expect("the sketch's face").centroid;
    next["on"] = id_of(&held, top).into();
    assert_ne!(next["on"], serde_json::to_value(&program.commands[split]).expect("json")["on"]);
    let next: freecad_bridge::Command = serde_json::from_value(next).expect("command");
    reference.execute(&program.commands[split]).expect("reference");
    s.execute(&next).expect("the translated command");
    // From here the caller reads the worker's numbering again, as after any command.
    for c in &program.commands[split + 1..] {
        reference.execute(c).expect("reference");
        s.execute(c).expect("run");
    }
    assert_eq!(s.state(), reference.state(), "the same part as an undisturbed run");
}

#[test]
fn a_command_recorded_against_another_numbering_is_matched_by_geometry() {
    let program = example("plate_counterbore");
    let mut reference = session();
    reference.execute_program(&program).expect("reference");
    let mut s = session();
    let split = 4;
    for c in &program.commands[..split] {
        s.execute(c).expect("run");
    }
    // The state as another process numbered it: every face ID one place on.
    let mut recorded = s.state().clone();
    let n = recorded.faces.len();
    let shifted = |id: &str| format!("F{}", id[1..].parse::<usize>().expect("index") % n + 1);
    for f in &mut recorded.faces {
        f.id = shifted(&f.id);
    }
    recorded.faces.rotate_right(1);
    let mut next = serde_json::to_value(&program.commands[split]).expect("json");
    next["on"] = shifted(next["on"].as_str().expect("a face")).into();
    let next: freecad_bridge::Command = serde_json::from_value(next).expect("command");
    s.execute_recorded(&next, &recorded).expect("matched by geometry");
    assert!(s.renumberings().iter().any(|r| r.at.starts_with("recorded state")), "the match is recorded");
    for c in &program.commands[split + 1..] {
        s.execute(c).expect("run");
    }
    assert_eq!(s.state(), reference.state(), "the same part as with the original numbering");

    // Two faces that cannot be told apart: the command naming one of them is refused.
    let mut doubled = s.state().clone();
    let copy = doubled.faces[0].clone();
    doubled.faces.push(freecad_bridge::state::Face { id: format!("F{}", doubled.faces.len() + 1), ..copy });
    let sketch = freecad_bridge::testing::program(
        r#"{"commands": [{"op": "sketch", "name": "S9", "on": "F1", "primitives": [{"type": "circle", "center": [0, 0], "radius": 1}]}]}"#,
    );
    let err = s.execute_recorded(&sketch.commands[0], &doubled).expect_err("ambiguous");
    assert!(err.to_string().contains("cannot be told apart"), "{err}");
}
