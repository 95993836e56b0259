//! Golden outputs: every view rendered from stored runs — the terminal summary, the HTML page, the
//! comparison (terminal, JSON, HTML), the exports (CSV, rt-tests JSON), `runs show` — byte for byte as
//! committed under tests/golden/. The two run documents under tests/fixtures/runs/ are real `rtgauge run`
//! outputs (the quick profile with and without `--trace`); runs 3 and 4 are the plain one's threads copied
//! onto 16 and 64 CPUs (the layout of a many-CPU machine, its figures the 2-CPU run's; run 4 with a gate it
//! fails). A change of any view shows here as a diff; `GOLDEN_UPDATE=1 cargo test --test golden` rewrites
//! the files when the change is meant.
#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
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

/// A run document of `n` CPUs made from a real one of 2: its timer and noise threads, and their per-CPU
/// accounting and interval counters, copied round-robin onto CPUs 0..n; with `gate`, a 1 µs gate on the
/// timer's maximum that it fails.
fn many_cpus(src: &Path, n: usize, gate: bool) -> Value {
    let mut d: Value = serde_json::from_slice(&std::fs::read(src).unwrap()).unwrap();
    d.as_object_mut().unwrap().remove("uuid");
    d["system"]["cpus_online"] = format!("0-{}", n - 1).into();
    for p in d["probes"].as_array_mut().unwrap() {
        if !matches!(p["probe"].as_str(), Some("cyclic" | "oslat")) {
            continue;
        }
        let copy = |list: &Value, set: &dyn Fn(&mut Value, usize)| -> Value {
            let list = list.as_array().unwrap();
            let by_cpu: Vec<u64> = {
                let mut c: Vec<u64> = list
                    .iter()
                    .map(|x| x["cpu"].as_u64().unwrap_or(0))
                    .collect();
                c.dedup();
                c
            };
            (0..n)
                .flat_map(|i| {
                    let from = by_cpu[i % by_cpu.len()];
                    list.iter()
                        .filter(move |x| x["cpu"].as_u64().unwrap_or(0) == from)
                        .map(move |x| {
                            let mut x = x.clone();
                            set(&mut x, i);
                            x
                        })
                })
                .collect()
        };
        let threads = p["threads"].as_array().unwrap().clone();
        p["threads"] = (0..n)
            .map(|i| {
                let mut t = threads[i % threads.len()].clone();
                t["index"] = i.into();
                if t.get("cpu").is_some() {
                    t["cpu"] = i.into();
                }
                t["conditions"]["cpu"]["requested"] = i.into();
                t["conditions"]["cpu"]["achieved"] = i.into();
                t
            })
            .collect();
        p["config"]["cpus"] = (0..n).collect();
        if p["config"]["threads"].is_u64() {
            p["config"]["threads"] = n.into();
        }
        let cpu = |x: &mut Value, i: usize| x["cpu"] = i.into();
        p["accounting"]["cpus"] = copy(&p["accounting"]["cpus"], &cpu);
        p["why"]["counters"] = copy(&p["why"]["counters"], &cpu);
    }
    if gate {
        let max = d["probes"][0]["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["latency"]["max_ns"].as_u64().unwrap())
            .max();
        d["verdicts"] = serde_json::json!([{
            "gate": {"metric": "cyclic_max_ns", "max": 1000},
            "observed": max,
            "outcome": "fail"
        }]);
    }
    d
}

/// The store of the golden views: runs 1 and 2 imported from the fixtures, 3 and 4 made from run 2.
fn store(dir: &Path) -> String {
    let db = dir.join("runs.db");
    let db = db.to_str().unwrap().to_string();
    let plain = repo().join("tests/fixtures/runs/quick-plain.json");
    let mut files = vec![
        repo().join("tests/fixtures/runs/quick-traced.json"),
        plain.clone(),
    ];
    for (n, gate) in [(16, false), (64, true)] {
        let f = dir.join(format!("{n}.json"));
        std::fs::write(&f, serde_json::to_vec(&many_cpus(&plain, n, gate)).unwrap()).unwrap();
        files.push(f);
    }
    for p in files {
        common::assert_ok(
            &common::rtgauge()
                .args(["import", p.to_str().unwrap(), "--db", &db])
                .output()
                .unwrap(),
        );
    }
    db
}

#[test]
fn views_of_stored_runs_are_byte_identical_to_their_goldens() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let db = db.as_str();
    let page = dir.path().join("page.html");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("report-1.txt", render(db, &["report", "1"], None)),
        (
            "report-1-verbose.txt",
            render(db, &["report", "1", "-v"], None),
        ),
        ("report-2.txt", render(db, &["report", "2"], None)),
        ("report-4-64cpus.txt", render(db, &["report", "4"], None)),
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

/// The terminal's verdict block: the lines after the output's last blank line.
fn terminal_block(out: &str) -> Vec<&str> {
    let lines: Vec<&str> = out.lines().collect();
    let start = lines.iter().rposition(|l| l.is_empty()).unwrap() + 1;
    lines[start..].to_vec()
}

/// The text of the page's verdict section, tags dropped, entities decoded, white space collapsed.
fn html_block_text(page: &str) -> String {
    let start = page.find("id=\"verdict\"").unwrap();
    let end = start + page[start..].find("</section>").unwrap();
    let mut text = String::new();
    let mut in_tag = false;
    for c in page[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The block's sentences unwrapped (a line four or more spaces in continues the one before), cut into
/// the pieces the terminal set side by side: table cells, clauses, list items without their markers.
fn pieces(block: &[&str]) -> Vec<String> {
    let mut logical: Vec<String> = Vec::new();
    for l in block {
        match logical.last_mut() {
            Some(last) if l.starts_with("    ") => {
                last.push(' ');
                last.push_str(l.trim());
            }
            _ => logical.push(l.to_string()),
        }
    }
    let mut out = Vec::new();
    for l in logical {
        for cell in l.split("  ") {
            for p in cell
                .split(": ")
                .flat_map(|p| p.split("; "))
                .flat_map(|p| p.split(", "))
            {
                let p = p.trim().trim_start_matches("- ");
                let p = p
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .trim_start_matches(". ");
                let p = p.trim_end_matches('.').trim();
                if !p.is_empty() {
                    out.push(p.to_string());
                }
            }
        }
    }
    out
}

/// The verdict block is the last thing `report` prints, in at most 15 lines of at most 80 columns, and
/// every piece of it is the page's verdict block's content; the default output of a 64-CPU run stays
/// within 60 lines, and `-v` prints every CPU.
#[test]
fn the_terminal_ends_with_the_pages_verdict_block_within_15_lines_and_60_at_64_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let page = dir.path().join("page.html");
    let mut counts = Vec::new();
    for (run, cpus) in [("1", 2), ("2", 2), ("3", 16), ("4", 64)] {
        let out = String::from_utf8(render(&db, &["report", run], None)).unwrap();
        let html = String::from_utf8(render(&db, &["report", run], Some(&page))).unwrap();
        let block = terminal_block(&out);
        assert!(
            block[0].starts_with("Is this platform fit for quick?") && block.len() < 15,
            "run {run}: the block is not the last 14 lines:\n{out}"
        );
        for l in &block {
            assert!(
                l.chars().count() <= 80,
                "run {run}: wider than 80 columns: {l}"
            );
        }
        let text = html_block_text(&html);
        for p in pieces(&block) {
            assert!(
                text.contains(&p),
                "run {run}: {p:?} is not in the page's block: {text}"
            );
        }
        assert!(!out.contains('\x1b'), "no colour without a terminal");
        counts.push((cpus, out.lines().count()));
    }
    eprintln!("lines of `report` by measured CPUs: {counts:?}");
    let at_64 = counts.last().unwrap().1;
    assert!(at_64 <= 60, "{at_64} lines at 64 CPUs");
    let verbose = String::from_utf8(render(&db, &["report", "4", "--verbose"], None)).unwrap();
    for cpu in [0, 37, 63] {
        assert!(
            verbose.contains(&format!("worst interval CPU {cpu} at")),
            "-v prints every CPU's worst interval"
        );
    }
    assert!(
        verbose.lines().count() > 4 * 64,
        "-v prints every CPU's rows"
    );
}
