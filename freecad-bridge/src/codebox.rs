//! The direct-code baseline's sandbox: one model-written FreeCAD Python script, run once in
//! a child process with a wall-clock limit, CPU and memory limits, and no access beyond the
//! FreeCAD API and its output folder.
//!
//! Two layers keep the script in: Linux Landlock (the child restricts itself before Python
//! starts: read-only system folders, read-write only the output folder and a private
//! scratch folder, no TCP, no signals to other processes) and, inside Python, an audit hook
//! with guarded FreeCAD file functions that turn a forbidden access into a clear error the
//! report can show (`v2c_codebox.py`). On a kernel without Landlock only the second layer
//! holds, and the outcome says so.
//!
//! ```no_run
//! # use freecad_bridge::codebox::{CodeboxLimits, run_script};
//! let outcome = run_script(
//!     std::path::Path::new("vision2cad"),
//!     "result = Part.makeBox(10, 20, 30)",
//!     std::path::Path::new("out"),
//!     &CodeboxLimits::default(),
//! )?;
//! assert_eq!(outcome.result["ok"], true);
//! # Ok::<(), freecad_bridge::codebox::CodeboxError>(())
//! ```

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

const CODEBOX_SOURCE: &str = include_str!("../python/v2c_codebox.py");
/// What the script built, found and saved: a module the codebox imports, loaded first.
const CODEBOX_RESULT_SOURCE: &str = include_str!("../python/v2c_codebox_result.py");
/// Marks the result line on the child's stdout.
const RESULT_PREFIX: &str = "v2c-codebox-result ";
/// Where Debian's FreeCAD keeps its Python modules.
const FREECAD_PATHS: [&str; 2] = ["/usr/lib/freecad-python3/lib", "/usr/lib/freecad/Mod"];

/// What one script may use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CodeboxLimits {
    /// Wall-clock seconds, FreeCAD's start included; past it the child is killed.
    pub wall_seconds: f64,
    /// CPU seconds of the script's process.
    pub cpu_seconds: u64,
    /// Address space of the script's process, MiB (0: no limit).
    pub memory_mb: u64,
}

impl Default for CodeboxLimits {
    fn default() -> Self {
        CodeboxLimits { wall_seconds: 120.0, cpu_seconds: 100, memory_mb: 8192 }
    }
}

/// How a script's run ended, when the child reported at all.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodeboxOutcome {
    /// The child's report: `ok`, `kind` (ok, exception, sandbox, no_solid, invalid,
    /// memory), `error`, `solids`, `volume`, `pads_pockets`, `parametric`, `output`...
    pub result: Value,
    /// Which layers held: `landlock (fully enforced) + audit hook`, or why Landlock did not.
    pub sandbox: String,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum CodeboxError {
    #[error("cannot run the script: {0}")]
    Spawn(String),
    #[error("the script ran past its limit of {seconds:.0} s and was stopped")]
    TimedOut { seconds: f64 },
    #[error("the script's process ended without a result ({status}){tail}")]
    Crashed { status: String, tail: String },
}

/// The request the child reads on stdin.
#[derive(Debug, Serialize, Deserialize)]
struct ChildRequest {
    script: String,
    out_dir: PathBuf,
    scratch: PathBuf,
    read_roots: Vec<PathBuf>,
    cpu_seconds: u64,
    memory_mb: u64,
}

/// Runs `script` with `program codebox` (this program's hidden subcommand that calls
/// [`codebox_main`]); the outputs (`model.step`, `model.FCStd`) land in `out_dir`.
pub fn run_script(
    program: &Path,
    script: &str,
    out_dir: &Path,
    limits: &CodeboxLimits,
) -> Result<CodeboxOutcome, CodeboxError> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| CodeboxError::Spawn(format!("cannot create {}: {e}", out_dir.display())))?;
    // The script works in a private folder: it never sees (or writes) the caller's folder,
    // whatever that holds. Only the two model files come back, and only when they are
    // plain files of a run that succeeded.
    let scratch = tempfile::Builder::new()
        .prefix("vision2cad-codebox-")
        .tempdir()
        .map_err(|e| CodeboxError::Spawn(format!("cannot create a scratch folder: {e}")))?;
    let work = scratch.path().join("work");
    std::fs::create_dir_all(&work)
        .map_err(|e| CodeboxError::Spawn(format!("cannot create {}: {e}", work.display())))?;
    let request = ChildRequest {
        script: script.to_string(),
        out_dir: work.clone(),
        scratch: scratch.path().to_path_buf(),
        read_roots: Vec::new(),
        cpu_seconds: limits.cpu_seconds,
        memory_mb: limits.memory_mb,
    };
    let started = Instant::now();
    // A clean environment: nothing of the parent's (an API key above all) reaches the script.
    let mut child = Process::new(program)
        .arg("codebox")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("PYTHONHOME", "/usr")
        .env("PYTHONNOUSERSITE", "1")
        .env_remove("PYTHONPATH")
        .env("FREECAD_USER_HOME", scratch.path())
        .env("HOME", scratch.path())
        .env("TMPDIR", scratch.path())
        .env("XDG_CACHE_HOME", scratch.path())
        .current_dir(&work)
        // Its own process group, so a stop reaches whatever it started.
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CodeboxError::Spawn(format!("cannot start {} codebox: {e}", program.display())))?;
    let body = serde_json::to_vec(&request).map_err(|e| CodeboxError::Spawn(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A child that dies at once closes its end; the wait below reports it.
        let _ = stdin.write_all(&body);
    }
    let out_reader = tail_reader(child.stdout.take());
    let err_reader = tail_reader(child.stderr.take());
    let limit = Duration::from_secs_f64(limits.wall_seconds.max(1.0));
    let group = rustix::process::Pid::from_raw(child.id() as i32);
    let stop_group = || {
        if let Some(pgid) = group {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                stop_group();
                break status;
            }
            Ok(None) if started.elapsed() > limit => {
                stop_group();
                let _ = child.kill();
                let _ = child.wait();
                return Err(CodeboxError::TimedOut { seconds: limits.wall_seconds });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(CodeboxError::Spawn(format!("cannot wait for the script's process: {e}"))),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let seconds = started.elapsed().as_secs_f64();
    let Some(line) = stdout.lines().rev().find_map(|l| l.strip_prefix(RESULT_PREFIX)) else {
        let last: Vec<&str> = stderr.lines().rev().filter(|l| !l.trim().is_empty()).take(3).collect();
        let tail = if last.is_empty() {
            String::new()
        } else {
            format!(": {}", last.into_iter().rev().collect::<Vec<_>>().join(" | "))
        };
        let status = match std::os::unix::process::ExitStatusExt::signal(&status) {
            Some(24) => "killed at its CPU limit (SIGXCPU)".to_string(),
            Some(sig) => format!("killed by signal {sig}"),
            None => status.to_string(),
        };
        return Err(CodeboxError::Crashed { status, tail });
    };
    let reply: Value = serde_json::from_str(line)
        .map_err(|e| CodeboxError::Crashed { status: format!("unreadable result ({e})"), tail: String::new() })?;
    if reply["result"]["ok"] == true {
        for name in ["model.FCStd", "model.step"] {
            let from = work.join(name);
            let plain = std::fs::symlink_metadata(&from).is_ok_and(|m| m.file_type().is_file());
            if plain {
                std::fs::copy(&from, out_dir.join(name))
                    .map_err(|e| CodeboxError::Spawn(format!("cannot copy {name} out of the sandbox: {e}")))?;
            }
        }
    }
    Ok(CodeboxOutcome {
        sandbox: reply["sandbox"].as_str().unwrap_or("unknown").to_string(),
        result: reply["result"].clone(),
        seconds,
    })
}

/// Reads a pipe to its end on a thread, keeping only the last 256 KiB: a script that prints
/// without end cannot fill the parent's memory.
fn tail_reader(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    const KEEP: usize = 256 * 1024;
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else { return String::new() };
        let mut kept: Vec<u8> = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buffer) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buffer[..n]);
            if kept.len() > 2 * KEEP {
                kept.drain(..kept.len() - KEEP);
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// The child's side; call it from the binary's hidden `codebox` subcommand. Reads the
/// request on stdin, restricts itself, runs the script and prints one result line.
pub fn codebox_main() -> Result<(), String> {
    use pyo3::prelude::*;
    use std::os::fd::AsFd;

    // Dies with its parent: a `run` that stops a part stops its script too.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| format!("cannot read the request: {e}"))?;
    let request: ChildRequest = serde_json::from_str(&text).map_err(|e| format!("bad request: {e}"))?;
    // The result goes to a private copy of stdout; whatever FreeCAD or the script prints
    // goes to stderr.
    let protocol_fd =
        std::io::stdout().as_fd().try_clone_to_owned().map_err(|e| format!("cannot duplicate stdout: {e}"))?;
    rustix::stdio::dup2_stdout(std::io::stderr()).map_err(|e| format!("cannot redirect stdout: {e}"))?;
    let mut protocol = std::fs::File::from(protocol_fd);

    let sandbox = match restrict(&request) {
        Ok(status) => format!("landlock ({status}) + audit hook"),
        Err(e) => format!("audit hook only (landlock: {e})"),
    };
    let source = CString::new(CODEBOX_SOURCE).map_err(|e| e.to_string())?;
    let result_source = CString::new(CODEBOX_RESULT_SOURCE).map_err(|e| e.to_string())?;
    let python_request = serde_json::json!({
        "script": request.script,
        "out_dir": request.out_dir,
        "read_roots": request.read_roots,
        "cpu_seconds": request.cpu_seconds,
        "memory_mb": request.memory_mb,
    })
    .to_string();
    let result = Python::attach(|py| -> PyResult<String> {
        let sys = py.import("sys")?;
        let path = sys.getattr("path")?;
        for dir in FREECAD_PATHS {
            path.call_method1("append", (dir,))?;
        }
        // Executed as a module it is registered in sys.modules, where the codebox's import
        // finds it.
        PyModule::from_code(py, &result_source, c"v2c_codebox_result.py", c"v2c_codebox_result")?;
        let module = PyModule::from_code(py, &source, c"v2c_codebox.py", c"v2c_codebox")?;
        module.getattr("main")?.call1((python_request,))?.extract()
    })
    .map_err(|e| format!("the sandbox failed to start: {e}"))?;
    let result: Value = serde_json::from_str(&result).map_err(|e| format!("the sandbox's result is not JSON: {e}"))?;
    let line = serde_json::json!({"sandbox": sandbox, "result": result});
    writeln!(protocol, "{RESULT_PREFIX}{line}").map_err(|e| e.to_string())?;
    Ok(())
}

/// Landlock: system folders read-only, the output and scratch folders read-write, no TCP,
/// no signals or abstract sockets outside the sandbox.
fn restrict(request: &ChildRequest) -> Result<String, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    // /proc stays readable for the interpreter's own use; Landlock forbids reading other
    // processes' entries (they are outside the domain), and the environment is clean.
    let read_only: Vec<&Path> =
        ["/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/sys", "/dev/urandom", "/dev/random", "/dev/zero"]
            .into_iter()
            .map(Path::new)
            .chain(request.read_roots.iter().map(PathBuf::as_path))
            .collect();
    // The work folder is inside the scratch folder. No links, pipes, sockets or devices may
    // be made there: nothing the parent copies out can point elsewhere.
    let read_write = [request.scratch.as_path(), Path::new("/dev/null")];
    let make_special =
        AccessFs::MakeSym | AccessFs::MakeFifo | AccessFs::MakeSock | AccessFs::MakeChar | AccessFs::MakeBlock;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(read_only, AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(read_write, AccessFs::from_all(abi) & !make_special)))
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok("fully enforced".into()),
        RulesetStatus::PartiallyEnforced => Ok("partially enforced".into()),
        RulesetStatus::NotEnforced => Err("not supported by this kernel".into()),
    }
}
