//! Every environment variable vision2cad reads, in one place.

/// Seconds one FreeCAD call may take (same as `--timeout`).
pub const TIMEOUT: &str = "VISION2CAD_TIMEOUT";
/// Log filter for stderr, e.g. `info` or `freecad=debug` (FreeCAD's own output).
pub const LOG: &str = "VISION2CAD_LOG";
/// Any value turns off coloured output.
pub const NO_COLOR: &str = "NO_COLOR";
/// The model server's API key; `OPENAI_API_KEY` when unset.
pub const API_KEY: &str = "VISION2CAD_API_KEY";
/// The model server's base URL; `OPENAI_BASE_URL` when unset.
pub const BASE_URL: &str = "VISION2CAD_BASE_URL";
/// The `/embeddings` server of an HTTP-embedder index; the model server's URL when unset.
pub const EMBED_BASE_URL: &str = "VISION2CAD_EMBED_BASE_URL";
/// The folder of the default retrieval index (`gerd default-index`); else
/// `$XDG_DATA_HOME/vision2cad/rag`, else `~/.local/share/vision2cad/rag`.
pub const RAG_HOME: &str = "VISION2CAD_RAG_HOME";
/// Set by `run` for its jobs: `COUNT:DIR`, a limit on model requests in flight shared by
/// every process given the same folder.
pub const VLM_SLOTS: &str = "VISION2CAD_VLM_SLOTS";
/// Fault injection for tests (read by the workers: [`freecad_bridge::FAULT_ENV`]).
pub const FAULT_KILL_AT: &str = freecad_bridge::FAULT_ENV;
/// Seconds between plain progress lines where stderr is not a terminal (default 30).
pub const PROGRESS_SECONDS: &str = "VISION2CAD_PROGRESS_SECONDS";
/// The shard of a Kubernetes Indexed Job (`--shard-index` when unset).
pub const JOB_COMPLETION_INDEX: &str = "JOB_COMPLETION_INDEX";
/// The task of a SLURM job array (`--shard-index` when unset; minus SLURM_ARRAY_TASK_MIN).
pub const SLURM_ARRAY_TASK_ID: &str = "SLURM_ARRAY_TASK_ID";
pub const SLURM_ARRAY_TASK_MIN: &str = "SLURM_ARRAY_TASK_MIN";
/// The tasks of a SLURM job array (`--shard-count` when unset).
pub const SLURM_ARRAY_TASK_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";

/// Shown at the end of `--help`.
pub const HELP: &str = "Environment:
  VISION2CAD_TIMEOUT   seconds one FreeCAD call may take (default 120)
  VISION2CAD_LOG       log filter for stderr, e.g. info, freecad=debug (default warn)
  VISION2CAD_API_KEY   API key of the model server (--vlm openai); else OPENAI_API_KEY
  VISION2CAD_BASE_URL  base URL of the model server; else OPENAI_BASE_URL, else the
                       [vlm] base_url of the config, else https://api.openai.com/v1
  VISION2CAD_EMBED_BASE_URL  the /embeddings server of an index built with --embedder http
                       (default: the model server's URL)
  VISION2CAD_RAG_HOME  the folder of the default retrieval index (gerd default-index);
                       default $XDG_DATA_HOME/vision2cad/rag or ~/.local/share/vision2cad/rag
  VISION2CAD_VLM_SLOTS COUNT:DIR, a limit on model requests in flight shared by processes
                       (set by `run` for its jobs from --vlm-concurrency)
  VISION2CAD_PROGRESS_SECONDS  seconds between plain progress lines when stderr is
                       not a terminal (default 30)
  JOB_COMPLETION_INDEX the shard of a Kubernetes Indexed Job (--shard-index when unset)
  SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT
                       the shard and shard count of a SLURM job array (when
                       --shard-index / --shard-count are unset)
  VISION2CAD_FAULT_KILL_AT  COUNTER_FILE:N1,N2,... kills the FreeCAD worker serving the
                       N1-th, N2-th... request (counted in the file): tests and `bench faults`
  NO_COLOR             turn off coloured output";

/// The first of `names` that is set to a non-blank value.
fn first_set(names: &[&str]) -> Option<String> {
    names.iter().filter_map(|n| std::env::var(n).ok()).find(|v| !v.trim().is_empty())
}

/// The API key from the environment (never from a file or a flag, so it stays out of shell
/// history, configs and traces).
pub fn api_key() -> Option<vision2cad::vlm::ApiKey> {
    first_set(&[API_KEY, OPENAI_API_KEY]).and_then(vision2cad::vlm::ApiKey::new)
}

/// The base URL from the environment.
pub fn base_url() -> Option<String> {
    first_set(&[BASE_URL, OPENAI_BASE_URL])
}

/// The embeddings server's base URL from the environment.
pub fn embed_base_url() -> Option<String> {
    first_set(&[EMBED_BASE_URL, BASE_URL, OPENAI_BASE_URL])
}

/// Seconds between plain progress lines.
pub fn progress_interval() -> std::time::Duration {
    let seconds = first_set(&[PROGRESS_SECONDS]).and_then(|v| v.trim().parse::<f64>().ok());
    std::time::Duration::from_secs_f64(seconds.filter(|s| s.is_finite() && *s >= 0.0).unwrap_or(30.0))
}

/// The shard index a scheduler gave this process: a Kubernetes Indexed Job's completion
/// index, or a SLURM array task relative to the array's first task.
pub fn scheduler_shard_index() -> Option<String> {
    if let Some(v) = first_set(&[JOB_COMPLETION_INDEX]) {
        return Some(v);
    }
    let id = first_set(&[SLURM_ARRAY_TASK_ID])?;
    let min = first_set(&[SLURM_ARRAY_TASK_MIN]);
    match (id.trim().parse::<i64>(), min.as_deref().map(|m| m.trim().parse::<i64>())) {
        (Ok(id), Some(Ok(min))) => Some((id - min).to_string()),
        _ => Some(id),
    }
}

/// The shard count a scheduler gave this process (SLURM arrays only: a Kubernetes Indexed
/// Job does not tell its pods the completion count).
pub fn scheduler_shard_count() -> Option<String> {
    first_set(&[SLURM_ARRAY_TASK_COUNT])
}

/// The request limit shared with other processes, when `run` set one.
pub fn vlm_slots() -> Option<(usize, std::path::PathBuf)> {
    let value = first_set(&[VLM_SLOTS])?;
    let (count, dir) = value.split_once(':')?;
    Some((count.trim().parse().ok()?, std::path::PathBuf::from(dir)))
}
