//! `rtgauge report` and `rtgauge compare` on real runs: a clean one (labelled with markup, to prove it is
//! escaped) and one with injected 200 ms stalls, both timer-latency runs on CPU 1 at SCHED_FIFO 10.
//! - a run compared with itself: every ratio 1.0, every verdict equivalent;
//! - stall vs clean: on max and p99.99 the interval lies wholly above the margin (three 200 ms stalls: the
//!   extremes' interval comes from resampling the run's 1 s windows, and a single stall in 5 windows is
//!   dropped by a third of the resamples, so it could not decide); the runs are one per platform, so the
//!   verdict is "worse" where the interval also lies beyond the one-run floor, else "inconclusive: one run
//!   per platform"; and the stalls on the timeline;
//! - the report and the comparison page open in headless Chromium with networking disabled: no console
//!   errors, no resource loaded, the expected charts drawn, the label shown as text.
//!
//! Needs root (SCHED_FIFO) and chromium (CI installs it).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, busy_cpu, export_json, row, rtgauge, run_labelled, scratch, spinner};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const LABEL: &str = "<script>document.title='pwned'</script>bare-metal";

const PROFILE: &str = r#"name = "tl"
duration = "5s"
[[probe]]
kind = "cyclic"
flags = "-m -p10 -i 1000 -h 200 -a 1 -t 1 --mainaffinity=0 -q"
"#;

struct Fixture {
    db: String,
    dir: PathBuf,
}

/// The database with run 1 (clean, labelled LABEL) and run 2 (three 200 ms stalls 1.3 s apart from ~0.8 s
/// in), made once.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let _cpu = busy_cpu();
        let dir = scratch("report-fixture");
        let db = dir.join("runs.db").to_str().unwrap().to_string();
        let profile = dir.join("tl.toml");
        std::fs::write(&profile, PROFILE).unwrap();
        let run = |label: &str| {
            run_labelled(&profile, label, &db);
        };
        run(LABEL);
        let hog = spinner(
            1,
            Duration::from_millis(800),
            Duration::from_millis(200),
            3,
            Duration::from_millis(1_300),
        );
        run("stalled");
        hog.join().unwrap();
        Fixture { dir, db }
    })
}

/// `compare SELECTORS… --format json` over the fixture's runs.
fn compare_json(selectors: &[&str]) -> Value {
    common::compare_in(&fixture().db, selectors)
}

#[test]
fn a_run_compared_with_itself_is_equivalent_everywhere() {
    let c = compare_json(&["1", "1"]);
    let rows = c["rows"].as_array().unwrap();
    assert!(rows.len() >= 8, "{c}");
    for r in rows {
        let v = &r["versus"][0];
        assert_eq!(v["ratio"].as_f64().unwrap(), 1.0, "{r}");
        assert_eq!(v["verdict"]["verdict"], "equivalent", "{r}");
    }
}

#[test]
fn a_stall_is_worse_on_max_and_p9999_and_shows_on_the_timeline() {
    let c = compare_json(&["1", "2"]);
    for key in ["cyclic.max", "cyclic.p99.99"] {
        let r = row(&c, key);
        let v = &r["versus"][0];
        let lo = v["ci"][0].as_f64().unwrap();
        // The window bootstrap sees the three stalls: its interval lies wholly above the margin.
        assert!(lo > 1.1, "{r}");
        // One run per platform: worse only beyond the floor (the largest ratio between idle runs).
        let floor = v["one_run"]["floor"].as_f64().unwrap();
        let want = if lo > floor { "worse" } else { "inconclusive" };
        assert_eq!(v["verdict"]["verdict"], want, "{r}");
        assert!(r["values"][1].as_f64().unwrap() > 150e6, "{r}");
    }
    // Runs selected by label give the same comparison.
    let by_label = compare_json(&["--label", LABEL, "--label", "stalled"]);
    assert_eq!(by_label["rows"], c["rows"]);
    let f = fixture();
    let d = export_json(&f.db, "2");
    let tl = d["probes"][0]["threads"][0]["timeline"].as_array().unwrap();
    let stalled: Vec<u64> = tl
        .iter()
        .filter(|e| e["max_ns"].as_u64().unwrap() > 150_000_000)
        .map(|e| e["start_ns"].as_u64().unwrap() / 1_000_000_000)
        .collect();
    assert!(
        (3..=6).contains(&stalled.len()),
        "each of the three 200 ms stalls is in one (or two adjacent) 1 s intervals: {stalled:?}"
    );
}

/// Open `page` in headless Chromium with networking disabled, with a probe script injected into a copy,
/// and return (the DOM after load, Chromium's console lines).
fn open_in_chromium(page: &Path) -> (String, Vec<String>) {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = r#"<script>
addEventListener('error', () => document.documentElement.setAttribute('data-errors', 'yes'));
addEventListener('load', () => {
  const drawn = [...document.querySelectorAll('figure.chart svg')].filter(s => {
    const r = s.getBoundingClientRect();
    return r.width > 200 && r.height > 100 && s.querySelectorAll('path,rect,polyline,line').length > 5;
  });
  const b = document.body;
  b.setAttribute('data-charts', drawn.length);
  b.setAttribute('data-resources', performance.getEntriesByType('resource').length);
  b.setAttribute('data-title', document.title);
});
</script>"#;
    let copy = page.with_extension("probed.html");
    std::fs::write(&copy, html.replacen("<head>", &format!("<head>{probe}"), 1)).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = common::program("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", copy.display()))
        .output()
        .expect("chromium (apt-get install chromium)");
    assert_ok(&out);
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(String::from)
        .collect();
    (String::from_utf8(out.stdout).unwrap(), console)
}

fn attr(dom: &str, name: &str) -> String {
    let k = format!("{name}=\"");
    let i = dom
        .find(&k)
        .unwrap_or_else(|| panic!("no {name} in the DOM"))
        + k.len();
    dom[i..i + dom[i..].find('"').unwrap()].to_string()
}

#[test]
fn report_and_comparison_render_in_headless_chromium() {
    let f = fixture();
    let report = f.dir.join("report.html");
    let cmp = f.dir.join("compare.html");
    let out = rtgauge()
        .args([
            "report",
            "--label",
            LABEL,
            "--html",
            report.to_str().unwrap(),
            "--db",
            &f.db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .args([
            "compare",
            "1",
            "2",
            "--html",
            cmp.to_str().unwrap(),
            "--db",
            &f.db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    // One cyclic thread: its histogram, the percentile plot and the timeline; the comparison overlays
    // the same three.
    for (page, charts) in [(&report, 3), (&cmp, 3)] {
        let (dom, console) = open_in_chromium(page);
        assert!(
            console.is_empty(),
            "{}: console: {console:?}",
            page.display()
        );
        assert!(
            !dom.contains("data-errors=\"yes\""),
            "{}: a script error",
            page.display()
        );
        assert_eq!(
            attr(&dom, "data-charts"),
            charts.to_string(),
            "{}",
            page.display()
        );
        assert_eq!(
            attr(&dom, "data-resources"),
            "0",
            "{}: requests made",
            page.display()
        );
        assert!(
            attr(&dom, "data-title").starts_with("rtgauge"),
            "the label ran as a script"
        );
        assert!(
            dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;bare-metal"),
            "{}: the label is shown as text",
            page.display()
        );
    }
}

#[test]
fn an_exported_run_imports_elsewhere_and_compares_with_its_original() {
    let f = fixture();
    let file = f.dir.join("run1.json");
    let other = f.dir.join("other.db").to_str().unwrap().to_string();
    let out = rtgauge()
        .args(["export", "1", "-o", file.to_str().unwrap(), "--db", &f.db])
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .args(["import", file.to_str().unwrap(), "--db", &other])
        .output()
        .unwrap();
    assert_ok(&out);
    let (a, b) = (export_json(&f.db, "1"), export_json(&other, "1"));
    assert_eq!(
        a, b,
        "the document survives the trip whole (label, windows, audit)"
    );
    assert_eq!(b["label"], LABEL);
}
