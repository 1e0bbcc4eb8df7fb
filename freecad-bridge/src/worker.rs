//! The worker process: an embedded CPython running FreeCAD, and the parent's handle on it.
//!
//! Why a process: an OpenCascade segfault or hang must not take the run down, and FreeCAD
//! holds the GIL during kernel work, so parallelism means one interpreter per process.
//! Parent and worker speak JSON lines: requests on the worker's stdin, responses on a copy
//! of its original stdout. The worker points its own stdout at stderr before FreeCAD loads,
//! so nothing FreeCAD prints can corrupt the protocol.

use std::collections::VecDeque;
use std::ffi::{CString, OsString};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::error::CallError;
use crate::protocol::Reply;

/// The Python package `v2c_worker`, module by module in the order they import each other
/// (its `__init__.py` lists the same order).
pub(crate) const WORKER_PACKAGE: [(&str, &str); 8] = [
    ("__init__", include_str!("../python/v2c_worker/__init__.py")),
    ("document", include_str!("../python/v2c_worker/document.py")),
    ("entities", include_str!("../python/v2c_worker/entities.py")),
    ("commands", include_str!("../python/v2c_worker/commands.py")),
    ("files", include_str!("../python/v2c_worker/files.py")),
    ("meshes", include_str!("../python/v2c_worker/meshes.py")),
    ("evaluation", include_str!("../python/v2c_worker/evaluation.py")),
    ("dispatch", include_str!("../python/v2c_worker/dispatch.py")),
];
const READY_PREFIX: &str = "ready ";
const STDERR_TAIL_LINES: usize = 40;
/// Room for the largest request without growing (requests are commands, a few kB).
const REQUEST_BUFFER_BYTES: usize = 1 << 20;

/// Fault injection for tests and benchmarks: `COUNTER_FILE:N1,N2,...` makes the worker that
/// serves the N1-th, N2-th... request counted over every worker sharing the counter file
/// abort at once, as a crash would. Never set in normal use.
pub const FAULT_ENV: &str = "VISION2CAD_FAULT_KILL_AT";

/// How to start workers and how long to wait for them.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The executable that runs [`worker_main`] (by default this program with `worker`).
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Limit for one request.
    pub call_timeout: Duration,
    /// Limit for starting a worker (interpreter and FreeCAD import).
    pub startup_timeout: Duration,
    /// Extra environment of the worker processes.
    pub env: Vec<(OsString, OsString)>,
}

impl WorkerConfig {
    /// Workers run by `program worker`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        WorkerConfig {
            program: program.into(),
            args: vec!["worker".into()],
            call_timeout: Duration::from_secs(120),
            startup_timeout: Duration::from_secs(60),
            env: Vec::new(),
        }
    }

    /// Workers run by the current executable, which must dispatch `worker` to [`worker_main`].
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(Self::new(std::env::current_exe()?))
    }

    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Set an environment variable of the workers (e.g. [`FAULT_ENV`] in a benchmark).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// The library every worker preloads so that FreeCAD's sketch solver lands where the drawing
/// and the constraints put it and nowhere else: its helper threads run inline, in the thread
/// that starts them (`native/solver_threads.c`), and its memory is handed out in the order it
/// asks (`native/solver_memory.c`; each file says why). Built by `build.rs`.
const SOLVER_PRELOAD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libv2c_solver.so"));
const SOLVER_PRELOAD_NAME: &str = "libv2c_solver.so";

/// `LD_PRELOAD` for a worker: `library` first, then whatever the caller's environment
/// preloads.
fn preload_list(library: &Path) -> OsString {
    let mut list = OsString::from(library);
    if let Some(more) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        list.push(":");
        list.push(more);
    }
    list
}

/// `setarch`, where it can start a program without address-space randomisation.
///
/// FreeCAD's sketch solver and OpenCascade's booleans iterate maps keyed by memory
/// addresses: with randomised addresses, the same program built in two fresh processes gave
/// sketches 0.1 mm apart and faces numbered otherwise. Without randomisation, a worker that
/// is sent the same requests from its start computes the same numbers (`eval` builds each
/// sample in a fresh worker for this). Where the kernel refuses (some containers), workers
/// start as before, and replays may differ in the last digits.
fn fixed_layout() -> Option<&'static Path> {
    static SETARCH: OnceLock<Option<PathBuf>> = OnceLock::new();
    SETARCH
        .get_or_init(|| {
            let works = Process::new("setarch")
                .args(["-R", "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !works {
                tracing::warn!(
                    "`setarch -R` is not available here: FreeCAD workers start with randomised addresses, so replays of one program may differ in the last digits"
                );
            }
            works.then(|| PathBuf::from("setarch"))
        })
        .as_deref()
}

/// A running worker process.
#[derive(Debug)]
pub struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    responses: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    // Kept so the private FreeCAD home lives exactly as long as the worker.
    _home: tempfile::TempDir,
    pub freecad_version: String,
}

impl WorkerProcess {
    pub fn spawn(config: &WorkerConfig) -> Result<Self, CallError> {
        let home = tempfile::Builder::new()
            .prefix("vision2cad-freecad-")
            .tempdir()
            .map_err(|e| CallError::Spawn(format!("cannot create a FreeCAD home directory: {e}")))?;
        // Through setarch, a missing program would only show as a worker that died at start.
        if config.program.components().count() > 1 && !config.program.is_file() {
            return Err(CallError::Spawn(format!("cannot start worker {}: no such file", config.program.display())));
        }
        let mut process = match fixed_layout() {
            Some(setarch) => {
                let mut p = Process::new(setarch);
                p.arg("-R").arg(&config.program);
                p
            }
            None => Process::new(&config.program),
        };
        // FreeCAD's sketch solver runs its helper threads inline and gets its memory in
        // order (native/).
        let preload = home.path().join(SOLVER_PRELOAD_NAME);
        std::fs::write(&preload, SOLVER_PRELOAD)
            .map_err(|e| CallError::Spawn(format!("cannot write {}: {e}", preload.display())))?;
        // Only these variables: what FreeCAD computes must not depend on who starts it (a
        // shell, a test runner), and nothing of the caller's (an API key above all) has any
        // business in the kernel.
        let mut child = process
            .args(&config.args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .env("TMPDIR", home.path())
            .env("LD_PRELOAD", preload_list(&preload))
            // Debian's interpreter and nothing from the user's site: FreeCAD's modules are
            // built for exactly this Python.
            .env("PYTHONHOME", "/usr")
            // Dictionaries and sets iterate alike in every worker: Python's, and Qt's (its
            // hash seed is random per process otherwise, and FreeCAD's QHash order moved
            // where an edit's re-solve landed: three volumes in twelve fresh workers).
            .env("PYTHONHASHSEED", "0")
            .env("QT_HASH_SEED", "0")
            .env("PYTHONNOUSERSITE", "1")
            .env("FREECAD_USER_HOME", home.path())
            .env("HOME", home.path())
            // The fault plan of a caller that set it (the CLI's fault tests and benchmarks).
            .envs(std::env::var_os(FAULT_ENV).map(|plan| (FAULT_ENV, plan)))
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CallError::Spawn(format!("cannot start worker {}: {e}", config.program.display())))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            return Err(CallError::Spawn("worker pipes were not created".into()));
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        let pid = child.id();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                tracing::debug!(target: "freecad", pid, "{line}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == STDERR_TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        let (tx, responses) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut worker =
            WorkerProcess { child, stdin, responses, stderr_tail, _home: home, freecad_version: String::new() };
        let ready = worker.receive(config.startup_timeout, "startup")?;
        match ready.strip_prefix(READY_PREFIX) {
            Some(version) => worker.freecad_version = version.to_string(),
            None => {
                worker.kill();
                return Err(CallError::Protocol(format!("worker did not start: {ready}")));
            }
        }
        tracing::debug!(pid, version = %worker.freecad_version, "FreeCAD worker ready");
        Ok(worker)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send one request and wait for its response.
    pub fn call(&mut self, request: &Value, timeout: Duration) -> Result<Value, CallError> {
        let what = request.get("type").and_then(Value::as_str).unwrap_or("request").to_string();
        let mut line = request.to_string();
        line.push('\n');
        if self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()).is_err() {
            return Err(self.crashed(&what));
        }
        let response = self.receive(timeout, &what)?;
        match serde_json::from_str::<Reply>(&response) {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Err { reason, entity, kind }) => Err(CallError::Rejected { reason, entity, kind }),
            Err(e) => Err(CallError::Protocol(format!("bad response to {what}: {e}"))),
        }
    }

    fn receive(&mut self, timeout: Duration, what: &str) -> Result<String, CallError> {
        match self.responses.recv_timeout(timeout) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(CallError::Timeout { during: what.to_string(), seconds: timeout.as_secs_f64() })
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.crashed(what)),
        }
    }

    fn crashed(&mut self, what: &str) -> CallError {
        // The pipe closed: reap the process for its exit status.
        let status = self.child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
        // Give the stderr reader a moment to drain what the process printed last.
        std::thread::sleep(Duration::from_millis(50));
        let tail =
            self.stderr_tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default();
        CallError::Crashed { during: what.to_string(), status, stderr_tail: tail }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The worker's main loop; call it from the binary's hidden `worker` subcommand. Returns
/// when the parent closes stdin.
pub fn worker_main() -> Result<(), String> {
    use pyo3::prelude::*;
    use std::os::fd::AsFd;

    // Keep the protocol on a private copy of stdout and send everything else to stderr.
    let protocol_fd =
        std::io::stdout().as_fd().try_clone_to_owned().map_err(|e| format!("cannot duplicate stdout: {e}"))?;
    rustix::stdio::dup2_stdout(std::io::stderr()).map_err(|e| format!("cannot redirect stdout: {e}"))?;
    let mut protocol = std::io::BufWriter::new(std::fs::File::from(protocol_fd));

    let home = std::env::var("FREECAD_USER_HOME").unwrap_or_default();
    let handler = Python::attach(|py| -> PyResult<(Py<PyAny>, String)> {
        let module = load_worker_package(py)?;
        let version: String = module.getattr("init")?.call1((home,))?.extract()?;
        Ok((module.getattr("handle")?.unbind(), version))
    });
    let (handle, version) = match handler {
        Ok(h) => h,
        Err(e) => {
            let message = format!("FreeCAD failed to load: {e}");
            let _ = writeln!(protocol, "{message}").and_then(|()| protocol.flush());
            return Err(message);
        }
    };
    writeln!(protocol, "{READY_PREFIX}{version}").and_then(|()| protocol.flush()).map_err(|e| e.to_string())?;

    let faults = std::env::var(FAULT_ENV).ok().and_then(|v| FaultPlan::parse(&v));
    let mut stdin = std::io::stdin().lock();
    // One buffer for every request, allocated once: a request arrives in as many pipe reads
    // as the timing gives, and a line grown read by read left the heap in another state in
    // each process (the solver's results differed in the last bits, and an edit's
    // re-solve of an under-constrained sketch by far more).
    let mut line = String::with_capacity(REQUEST_BUFFER_BYTES);
    loop {
        line.clear();
        if stdin.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(plan) = &faults
            && plan.strikes_now()
        {
            eprintln!("{FAULT_ENV}: this worker dies here, as planned");
            // SIGKILL, as a user or the OOM killer would: no handler runs, no core is left.
            let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
            std::process::abort();
        }
        let response = Python::attach(|py| -> PyResult<String> { handle.bind(py).call1((line,))?.extract() })
            .unwrap_or_else(|e| {
                serde_json::json!({"err": {"reason": format!("worker: {e}"), "entity": null}}).to_string()
            });
        writeln!(protocol, "{response}").and_then(|()| protocol.flush()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Run the embedded `v2c_worker` package's modules in order and return its `dispatch`.
fn load_worker_package(py: pyo3::Python<'_>) -> pyo3::PyResult<pyo3::Bound<'_, pyo3::types::PyModule>> {
    use pyo3::prelude::*;
    use pyo3::types::PyModule;

    let as_c = |text: String| CString::new(text).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()));
    let mut package: Option<Bound<'_, PyModule>> = None;
    let mut last = None;
    for (name, source) in WORKER_PACKAGE {
        let (module_name, file_name) = match name {
            "__init__" => ("v2c_worker".to_string(), "v2c_worker/__init__.py".to_string()),
            _ => (format!("v2c_worker.{name}"), format!("v2c_worker/{name}.py")),
        };
        let module = PyModule::from_code(py, &as_c(source.to_string())?, &as_c(file_name)?, &as_c(module_name)?)?;
        match &package {
            None => {
                // A package, so that `from v2c_worker.entities import ...` reads as it would on disk.
                module.setattr("__path__", Vec::<String>::new())?;
                package = Some(module.clone());
            }
            Some(package) => package.setattr(name, &module)?,
        }
        last = Some(module);
    }
    Ok(last.expect("the package has modules"))
}

/// The requests at which workers die ([`FAULT_ENV`]).
#[derive(Debug)]
struct FaultPlan {
    counter: PathBuf,
    at: Vec<u64>,
}

impl FaultPlan {
    fn parse(value: &str) -> Option<FaultPlan> {
        let (counter, list) = value.rsplit_once(':')?;
        let at = list.split(',').filter_map(|n| n.trim().parse().ok()).collect();
        Some(FaultPlan { counter: PathBuf::from(counter), at })
    }

    /// Counts this request in the shared counter; true when it is one to die at.
    fn strikes_now(&self) -> bool {
        use std::io::{Read, Seek};
        let Ok(mut file) =
            std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&self.counter)
        else {
            return false;
        };
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).is_err() {
            return false;
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let n = text.trim().parse::<u64>().unwrap_or(0) + 1;
        let _ = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{n}"));
        self.at.contains(&n)
    }
}
