//! Golden outputs: every view rendered from stored runs — the terminal summary, the HTML page, the
//! comparison (terminal, JSON, HTML), the exports (CSV, rt-tests JSON), `runs show` — byte for byte as
//! committed under tests/golden/. The two run documents under tests/fixtures/runs/ are real `rtgauge run`
//! outputs (the quick profile with and without `--trace`). A change of any view shows here as a diff;
//! `GOLDEN_UPDATE=1 cargo test --test golden` rewrites the files when the change is meant.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The output of `rtgauge ARGS --db DB` (stdout), or of the file it wrote with `--html FILE`.
fn render(db: &str, args: &[&str], html: Option<&Path>) -> Vec<u8> {
    let mut c = common::rtgauge();
    c.args(args).args(["--db", db]);
    if let Some(h) = html {
        c.arg("--html").arg(h);
    }
    let out = c.output().unwrap();
    common::assert_ok(&out);
    match html {
        Some(h) => std::fs::read(h).unwrap(),
        None => out.stdout,
    }
}

#[test]
fn views_of_stored_runs_are_byte_identical_to_their_goldens() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let db = db.to_str().unwrap();
    for f in ["quick-traced.json", "quick-plain.json"] {
        let p = repo().join("tests/fixtures/runs").join(f);
        common::assert_ok(
            &common::rtgauge()
                .args(["import", p.to_str().unwrap(), "--db", db])
                .output()
                .unwrap(),
        );
    }
    let page = dir.path().join("page.html");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("report-1.txt", render(db, &["report", "1"], None)),
        ("report-2.txt", render(db, &["report", "2"], None)),
        ("report-1.html", render(db, &["report", "1"], Some(&page))),
        ("compare-1-2.txt", render(db, &["compare", "1", "2"], None)),
        (
            "compare-1-2.json",
            render(db, &["compare", "1", "2", "--format", "json"], None),
        ),
        (
            "compare-1-2.html",
            render(db, &["compare", "1", "2"], Some(&page)),
        ),
        (
            "export-1.csv",
            render(db, &["export", "1", "--format", "csv"], None),
        ),
        (
            "export-1.rt-tests.json",
            render(db, &["export", "1", "--format", "rt-tests"], None),
        ),
        (
            "export-2.rt-tests.json",
            render(db, &["export", "2", "--format", "rt-tests"], None),
        ),
        ("runs-show-1.txt", render(db, &["runs", "show", "1"], None)),
    ];
    let update = std::env::var_os("GOLDEN_UPDATE").is_some();
    let mut differ = Vec::new();
    for (name, got) in cases {
        let path = repo().join("tests/golden").join(name);
        if update {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read(&path).unwrap_or_default();
        if want != got {
            let first = want
                .iter()
                .zip(&got)
                .position(|(a, b)| a != b)
                .unwrap_or(want.len().min(got.len()));
            let line = got[..first].iter().filter(|&&b| b == b'\n').count() + 1;
            differ.push(format!(
                "{name}: differs from line {line} ({} bytes committed, {} rendered)",
                want.len(),
                got.len()
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "views changed (GOLDEN_UPDATE=1 if meant):\n{}",
        differ.join("\n")
    );
}
