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
