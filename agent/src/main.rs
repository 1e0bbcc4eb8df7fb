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
    if let Some(hint) = cli::interrupt_hint(&cli) {
        // Everything the loop and the runner keep is written atomically, so stopping here
        // loses at most the step or the parts in progress.
        let _ = ctrlc::set_handler(move || {
            eprintln!("\ninterrupted: {hint}");
            std::process::exit(130);
        });
    }
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
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

/// The error and its causes, each said once: many errors already quote their cause in their
/// own message (`cannot write X: Not a directory`), and the chain would repeat it.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
