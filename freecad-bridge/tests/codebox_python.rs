//! The sandbox's own Python suite (`python/test_v2c_codebox.py`): scripts that build, fail,
//! or reach outside their folder, each in a fresh interpreter with FreeCAD.

#[test]
fn the_sandbox_python_suite_passes() {
    let suite = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/test_v2c_codebox.py");
    let out = std::process::Command::new("/usr/bin/python3.11")
        .arg("-B")
        .arg(&suite)
        .env("PYTHONNOUSERSITE", "1")
        .env_remove("PYTHONPATH")
        .output()
        .expect("python3.11 runs (scripts/setup.sh installs it with FreeCAD)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("all passed"), "{text}");
}
