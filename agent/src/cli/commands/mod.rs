//! One module per subcommand of `vision2cad`.

pub mod bench;
pub mod compare;
pub mod default_index;
pub mod eval;
pub mod exec;
pub mod fit;
pub mod floor;
pub mod gerd;
pub mod merge;
pub mod reconstruct;
pub mod render;
pub mod run;
pub mod sim_calibrate;
