//! Builds `native/solver_threads.c` and `native/solver_memory.c` into the shared library
//! that every FreeCAD worker preloads (see those files for why), for `src/worker.rs` to embed.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let sources = ["native/solver_threads.c", "native/solver_memory.c"];
    for source in sources {
        println!("cargo:rerun-if-changed={source}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out.join("libv2c_solver.so");
    // cc finds the C compiler the way Rust's own build does (CC, the target's defaults);
    // it builds static archives, so the shared object is linked here with its compiler.
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    let status = Command::new(compiler.path())
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&library)
        .args(sources)
        // The C++ runtime is a dependency of the library itself, so it is loaded with the
        // preload, before FreeCAD: solver_memory.c passes every allocation that is not the
        // solver's on to the runtime's own operator new and delete (RTLD_NEXT).
        .args(["-ldl", "-Wl,--no-as-needed", "-lstdc++"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {}: {e}", compiler.path().display()));
    assert!(status.success(), "compiling {sources:?} failed");
}
