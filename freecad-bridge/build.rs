//! Builds `native/solver_threads.c` into the shared library that every FreeCAD worker
//! preloads (see that file for why), for `src/worker.rs` to embed.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "native/solver_threads.c";
    println!("cargo:rerun-if-changed={source}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out.join("libv2c_solver_threads.so");
    // cc finds the C compiler the way Rust's own build does (CC, the target's defaults);
    // it builds static archives, so the shared object is linked here with its compiler.
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    let status = Command::new(compiler.path())
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&library)
        .arg(source)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {}: {e}", compiler.path().display()));
    assert!(status.success(), "compiling {source} failed");
}
