//! Every environment variable vision2cad reads, in one place.

/// Seconds one FreeCAD call may take (same as `--timeout`).
pub const TIMEOUT: &str = "VISION2CAD_TIMEOUT";
/// Log filter for stderr, e.g. `info` or `freecad=debug` (FreeCAD's own output).
pub const LOG: &str = "VISION2CAD_LOG";
/// Any value turns off coloured output.
pub const NO_COLOR: &str = "NO_COLOR";

/// Shown at the end of `--help`.
pub const HELP: &str = "Environment:
  VISION2CAD_TIMEOUT  seconds one FreeCAD call may take (default 120)
  VISION2CAD_LOG      log filter for stderr, e.g. info, freecad=debug (default warn)
  NO_COLOR            turn off coloured output";
