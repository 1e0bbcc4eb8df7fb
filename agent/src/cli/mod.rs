//! The command-line front end: one module per subcommand. The method itself lives in the
//! library (`vision2cad::reconstruct` and its modules); these modules parse flags, open
//! files and print.

pub mod bench;
pub mod calibrate;
pub mod compare_cmd;
pub mod curves;
pub mod env;
pub mod eval_bench;
pub mod eval_cmd;
pub mod eval_vs_python;
pub mod exec;
pub mod fault_bench;
pub mod gerd_cmd;
pub mod loop_bench;
pub mod merge_cmd;
pub mod progress;
pub mod rag_bench;
pub mod reconstruct_cmd;
pub mod render;
pub mod run_cmd;
pub mod shard;
pub mod vlm_bench;
