//! `v2c-worker`: a FreeCAD worker and nothing else, so the crates below the `vision2cad`
//! binary (views, eval, gerd) can start workers in their own integration tests
//! ([`freecad_bridge::testing`]). The `vision2cad` binary's `worker` subcommand runs the
//! same [`freecad_bridge::worker_main`].

use std::process::ExitCode;

fn main() -> ExitCode {
    match freecad_bridge::worker_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("v2c-worker: {e}");
            ExitCode::FAILURE
        }
    }
}
