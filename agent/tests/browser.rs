//! The pages a user opens, opened in a real browser (headless Chromium, which
//! scripts/setup.sh installs): a reconstruction's report.html, a run's and a sweep's
//! index.html. Every link and image resolves and no script fails. With
//! `VISION2CAD_UPDATE_DOCS=1` the test also writes their screenshots into docs/images/.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_links_resolve, example_path, generated_test_split, repo_root};

fn chromium() -> PathBuf {
    let found = std::env::var_os("VISION2CAD_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!("no Chromium at /usr/bin/chromium (scripts/setup.sh installs it; VISION2CAD_CHROMIUM names another)")
    })
}

fn vision2cad(args: &[&str]) {
    let o = common::command()
        .args(args)
        .env_remove("VISION2CAD_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("vision2cad runs");
    assert!(o.status.success(), "vision2cad {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
}

/// The page as Chromium built it, and the page's console messages.
fn open(page: &Path, screenshot: Option<&Path>) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().expect("profile dir");
    let url = format!("file://{}", page.canonicalize().expect("page exists").display());
    let mut cmd = Command::new(chromium());
    // Software WebGL (SwiftShader) for the report's 3D view.
    cmd.args([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-unsafe-swiftshader",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        Some(png) => {
            cmd.args(["--window-size=1280,1400", "--hide-scrollbars"]).arg(format!("--screenshot={}", png.display()))
        }
        None => cmd.arg("--dump-dom"),
    };
    let o = cmd.arg(&url).output().expect("chromium runs");
    assert!(o.status.success(), "chromium {url}: {}", String::from_utf8_lossy(&o.stderr));
    let console =
        String::from_utf8_lossy(&o.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect();
    (String::from_utf8_lossy(&o.stdout).into_owned(), console)
}

fn check(page: &Path, must_show: &[&str], screenshot: &str) {
    let (dom, console) = open(page, None);
    let errors: Vec<&String> = console.iter().filter(|l| l.contains("Uncaught") || l.contains("Error")).collect();
    assert!(errors.is_empty(), "{}: script errors {errors:?}", page.display());
    for text in must_show {
        assert!(dom.contains(text), "{} does not show {text:?}", page.display());
    }
    assert_links_resolve(page.parent().expect("folder"), &dom);
    if std::env::var_os("VISION2CAD_UPDATE_DOCS").is_some() {
        let images = repo_root().join("docs/images");
        std::fs::create_dir_all(&images).expect("docs/images");
        open(page, Some(&images.join(screenshot)));
    }
}

#[test]
fn reports_and_indexes_open_in_a_browser_with_every_link_and_no_script_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let example = example_path("plate_counterbore");
    let out = dir.path().join("example");
    vision2cad(&[
        "reconstruct",
        repo_root().join("assets/examples/plate_counterbore.png").to_str().expect("utf-8"),
        "--vlm",
        "oracle",
        "--gt",
        example.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    // The 3D view drew the embedded model (its script marks the canvas when it has).
    check(&out.join("report.html"), &["model.FCStd", "model.glb", "<img", "data-ready=\"1\""], "report.png");

    let data = generated_test_split(dir.path(), 2, 8);
    let sweep = dir.path().join("sweep");
    vision2cad(&[
        "run",
        "--dataset",
        data.to_str().expect("utf-8"),
        "--out",
        sweep.to_str().expect("utf-8"),
        "--configs",
        "full,no-evf",
    ]);
    check(&sweep.join("index.html"), &["<table class=\"sortable\">", "no-evf/index.html"], "sweep-index.png");
    check(&sweep.join("full/index.html"), &["<table class=\"sortable\">", "report.html"], "run-index.png");
}
