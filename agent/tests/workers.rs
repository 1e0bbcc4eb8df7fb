//! Workers that die or hang are replaced and their documents rebuilt from the command log.

mod common;

use std::time::Duration;

use common::{assert_close, example, session};
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
    let config = common::config().with_call_timeout(Duration::from_secs(3));
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
fn a_pool_runs_programs_in_parallel_and_recycles_workers() {
    let names = ["box", "fillet_box", "flange_revolve", "loft_frustum", "pipe_sweep"];
    let programs: Vec<_> = names.iter().map(|n| example(n)).collect();
    let pool = WorkerPool::new(common::config(), 2).with_recycle_after(2);
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
