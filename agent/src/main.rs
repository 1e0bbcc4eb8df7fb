//! `vision2cad`: one image of a mechanical part in, a parametric FreeCAD model out.
//!
//! This binary is the command-line face of the workspace crates; `vision2cad --help` lists
//! what it can do. Exit codes: 0 success, 1 failure, 2 usage error.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Cmd, env};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Cmd::Worker) {
        return match freecad_bridge::worker_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vision2cad worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if matches!(cli.command, Cmd::Codebox) {
        return match freecad_bridge::codebox::codebox_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vision2cad codebox: {e}");
                ExitCode::FAILURE
            }
        };
    }
    init_logging();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env(env::LOG).unwrap_or_else(|_| EnvFilter::new("warn"));
    let color = std::env::var_os(env::NO_COLOR).is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(color).init();
}
