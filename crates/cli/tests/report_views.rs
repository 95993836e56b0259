//! The report pages as a reader sees them, in headless Chromium (issue 20): a real 2-CPU run, a 64-CPU
//! run built from it (its threads copied onto CPUs 0–63 and imported), and a 3-run comparison.
//! - screenshots of the three pages are written under target/tmp/report-views/ (PNG, sizes asserted);
//! - the verdict block is the first section of a run page, and the 64-CPU page is less than 3× as tall
//!   as the 2-CPU one (many-CPU views, per-CPU detail collapsed);
//! - no console error, no request, user strings shown as text;
//! - `report --pdf` prints the qualification record, pdftoppm renders it, its text (pdftotext) holds the
//!   seed 003 result table of every CPU; `verify` accepts it, and detects a one-byte change of the stored
//!   run's JSON (made in SQLite); without Chromium `--pdf` is one clear line and exit 2.
//!
//! Needs root (SCHED_FIFO), chromium and poppler-utils (CI installs them).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, busy_cpu, export_json, rtgauge, run_labelled, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const LABEL: &str = "<b>two</b>-cpus";

const PROFILE: &str = r#"name = "two-cpus"
duration = "3s"
[[probe]]
kind = "cyclic"
flags = "-m -p10 -i 1000 -h 200 -a 0-1 -t 2 --mainaffinity=0 -q"
"#;

struct Fixture {
    db: String,
    dir: PathBuf,
}

/// Run 1: a real 2-CPU timer-latency run (labelled with markup); run 2: a second one; run 3: run 1's
/// threads copied onto 64 CPUs and imported.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let _cpu = busy_cpu();
        let dir = scratch("report-views-fixture");
        let db = dir.join("runs.db").to_str().unwrap().to_string();
        let profile = dir.join("two.toml");
        std::fs::write(&profile, PROFILE).unwrap();
        for label in [LABEL, "second"] {
            run_labelled(&profile, label, &db);
        }
        let mut doc = export_json(&db, "1");
        let threads = doc["probes"][0]["threads"].as_array().unwrap().clone();
        assert_eq!(threads.len(), 2);
        let many: Vec<Value> = (0..64)
            .map(|i| {
                let mut t = threads[i % 2].clone();
                t["index"] = i.into();
                t["conditions"]["cpu"]["requested"] = i.into();
                t["conditions"]["cpu"]["achieved"] = i.into();
                t
            })
            .collect();
        doc["probes"][0]["threads"] = Value::Array(many);
        doc["label"] = "sixty-four".into();
        // A different run: without the source run's id (the store derives one), or import refuses it.
        doc.as_object_mut().unwrap().remove("uuid");
        // A gate the run fails (1 µs): the verdict block answers NOT FIT with the figures.
        let max = threads
            .iter()
            .map(|t| t["latency"]["max_ns"].as_u64().unwrap())
            .max();
        doc["verdicts"] = serde_json::json!([{
            "gate": {"metric": "cyclic_max_ns", "max": 1000},
            "observed": max,
            "outcome": "fail"
        }]);
        let path = dir.join("64.json");
        std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
        let out = rtgauge()
            .args(["import", path.to_str().unwrap(), "--db", &db])
            .output()
            .unwrap();
        assert_ok(&out);
        Fixture { dir, db }
    })
}

fn views_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-views");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn chromium(args: &[&str], url: &Path) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let out = common::program("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(args)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", url.display()))
        .output()
        .expect("chromium (apt-get install chromium)");
    assert_ok(&out);
    out
}

/// What a page looks like at 1400 px wide: its height, the id of the element after the title, how many
/// resources it loaded, and its console lines.
struct Measured {
    height: u32,
    first: String,
    resources: u32,
    console: Vec<String>,
    dom: String,
}

fn measure(page: &Path) -> Measured {
    let probe = r#"<script>
addEventListener('error', () => document.documentElement.setAttribute('data-errors', 'yes'));
addEventListener('load', () => {
  const b = document.body;
  b.setAttribute('data-height', Math.ceil(document.documentElement.scrollHeight));
  const first = document.querySelector('h1').nextElementSibling;
  b.setAttribute('data-first', first.tagName.toLowerCase() + '#' + first.id);
  b.setAttribute('data-resources', performance.getEntriesByType('resource').length);
});
</script>"#;
    let html = std::fs::read_to_string(page).unwrap();
    let copy = page.with_extension("probed.html");
    std::fs::write(&copy, html.replacen("<head>", &format!("<head>{probe}"), 1)).unwrap();
    let out = chromium(
        &[
            "--window-size=1400,1000",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ],
        &copy,
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(!dom.contains("data-errors=\"yes\""), "{}", page.display());
    Measured {
        height: attr(&dom, "data-height").parse().unwrap(),
        first: attr(&dom, "data-first"),
        resources: attr(&dom, "data-resources").parse().unwrap(),
        console: String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("CONSOLE"))
            .map(String::from)
            .collect(),
        dom,
    }
}

fn attr(dom: &str, name: &str) -> String {
    let k = format!("{name}=\"");
    let i = dom
        .find(&k)
        .unwrap_or_else(|| panic!("no {name} in the DOM"))
        + k.len();
    dom[i..i + dom[i..].find('"').unwrap()].to_string()
}

/// A full-page screenshot (the page's own height, at most 16,000 px) written under target/; returns its
/// (width, height) from the PNG header and its size in bytes.
fn screenshot(page: &Path, height: u32, name: &str) -> (u32, u32, u64) {
    let png = views_dir().join(name);
    let _ = std::fs::remove_file(&png);
    chromium(
        &[
            &format!("--window-size=1400,{}", height.min(16_000)),
            &format!("--screenshot={}", png.display()),
        ],
        page,
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG", "{}", png.display());
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20), bytes.len() as u64)
}

fn render(args: &[&str], file: &str) -> PathBuf {
    let f = fixture();
    let path = f.dir.join(file);
    let out = rtgauge()
        .args(args)
        .args(["--html", path.to_str().unwrap(), "--db", &f.db])
        .output()
        .unwrap();
    assert_ok(&out);
    path
}

#[test]
fn verdict_first_and_64_cpus_stay_within_3x_the_height_of_2() {
    let two = render(&["report", "1"], "two.html");
    let many = render(&["report", "3"], "many.html");
    let (m2, m64) = (measure(&two), measure(&many));
    for (m, page) in [(&m2, &two), (&m64, &many)] {
        assert_eq!(m.first, "section#verdict", "{}", page.display());
        assert!(m.console.is_empty(), "{}: {:?}", page.display(), m.console);
        assert_eq!(m.resources, 0, "{}: requests made", page.display());
        assert!(m.dom.contains("Is this platform fit for two-cpus?"));
    }
    assert!(
        m2.dom.contains("&lt;b&gt;two&lt;/b&gt;-cpus"),
        "the label is text"
    );
    // Gate-less: the headline figure against the seeds' references; gated: the answer and the gate.
    assert!(
        m2.dom.contains("NO GATES")
            && m2.dom.contains("RAN ≤ 20.0 µs")
            && m2.dom.contains("(VMware RAN white paper)")
    );
    assert!(m64.dom.contains("NOT FIT") && m64.dom.contains("cyclic max latency"));
    // The many-CPU views are drawn, the per-CPU histograms collapsed.
    assert!(m64.dom.contains("CPU × latency"), "heatmap");
    assert!(m64.dom.contains("64 CPUs overlaid"), "overlaid histograms");
    assert!(m64.dom.contains("timer latency per CPU"), "strip chart");
    assert!(m64.dom.contains("Histogram of each CPU (64)"));
    eprintln!(
        "page height: 2 CPUs {} px, 64 CPUs {} px ({:.2}×)",
        m2.height,
        m64.height,
        m64.height as f64 / m2.height as f64
    );
    assert!(m2.height > 1000, "2-CPU page {} px", m2.height);
    assert!(
        m64.height < 3 * m2.height,
        "64 CPUs: {} px, 2 CPUs: {} px",
        m64.height,
        m2.height
    );
    for (page, m, name) in [
        (&two, &m2, "run-2-cpus.png"),
        (&many, &m64, "run-64-cpus.png"),
    ] {
        let (w, h, size) = screenshot(page, m.height, name);
        eprintln!("{name}: {w}×{h}, {size} bytes");
        assert_eq!((w, h), (1400, m.height.min(16_000)), "{name}");
        assert!(size > 50_000, "{name}: {size} bytes, nearly blank");
    }
}

#[test]
fn a_3_run_comparison_lays_the_runs_side_by_side() {
    let cmp = render(&["compare", "1", "2", "3"], "compare3.html");
    let m = measure(&cmp);
    assert!(m.console.is_empty(), "{:?}", m.console);
    assert_eq!(m.resources, 0);
    assert!(m.dom.contains("cyclic per CPU"), "per-CPU table");
    assert!(m.dom.contains("/ baseline max"), "ratios per CPU");
    // Verdict cells hold a word (and a footnote mark), never the sentence.
    let html = std::fs::read_to_string(&cmp).unwrap();
    assert!(
        !html.contains(">inconclusive: "),
        "a sentence in a verdict cell"
    );
    let (w, h, size) = screenshot(&cmp, m.height, "compare-3-runs.png");
    eprintln!("compare-3-runs.png: {w}×{h}, {size} bytes");
    assert_eq!(w, 1400);
    assert!(size > 50_000, "{size} bytes");
}

/// `us()` of the report: 3 decimals below 10 µs, else 1.
fn us(ns: u64) -> String {
    let v = ns as f64 / 1000.0;
    if v < 10.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.1}")
    }
}

#[test]
fn the_pdf_record_holds_the_result_table_and_verify_catches_a_changed_byte() {
    let f = fixture();
    let pdf = f.dir.join("record.pdf");
    let out = rtgauge()
        .args(["report", "1", "--pdf", pdf.to_str().unwrap(), "--db", &f.db])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(std::fs::read(&pdf).unwrap().starts_with(b"%PDF"));
    // pdftoppm renders it (first page, into target/).
    let prefix = views_dir().join("record");
    let out = common::program("pdftoppm")
        .args(["-png", "-r", "60", "-f", "1", "-l", "1", "-singlefile"])
        .arg(&pdf)
        .arg(&prefix)
        .output()
        .expect("pdftoppm (poppler-utils)");
    assert_ok(&out);
    let page = std::fs::metadata(prefix.with_extension("png"))
        .unwrap()
        .len();
    assert!(page > 10_000, "first page of the record: {page} bytes");
    // Its text holds the requirement, the conditions, the command line, the version, the hash, and seed
    // 003's table: samples, min, avg, max, overflows of each CPU.
    let out = common::program("pdftotext")
        .arg(&pdf)
        .arg("-")
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    for s in [
        "Is this platform fit for two-cpus?",
        "Conditions (requested → achieved)",
        "Platform fingerprint",
        "Real-time readiness audit",
        concat!("rtgauge ", env!("CARGO_PKG_VERSION")),
        "Content hash sha256:",
    ] {
        assert!(text.contains(s), "no {s:?} in the record:\n{text}");
    }
    let doc = export_json(&f.db, "1");
    // The command line, wherever the page wrapped it (pdftotext drops a hyphen at a line end).
    let squeeze = |s: &str| s.replace(|c: char| c.is_whitespace() || c == '-', "");
    let command: Vec<&str> = doc["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        squeeze(&text).contains(&squeeze(&command.join(" "))),
        "no command line {command:?} in the record"
    );
    for t in doc["probes"][0]["threads"].as_array().unwrap() {
        let l = &t["latency"];
        let n = |k: &str| l[k].as_u64().unwrap();
        let mean = l["mean_ns"].as_f64().unwrap() as u64;
        let overflows = t["linear"]["overflows"].as_u64().unwrap();
        for v in [
            n("count").to_string(),
            us(n("min_ns")),
            us(mean),
            us(n("max_ns")),
            overflows.to_string(),
        ] {
            assert!(text.contains(&v), "no {v} in the record's table:\n{text}");
        }
    }
    // verify: the record matches the stored run…
    let out = rtgauge()
        .args(["verify", pdf.to_str().unwrap(), "--db", &f.db])
        .output()
        .unwrap();
    assert_ok(&out);
    // …found by the uuid the record names (read back from the PDF's text).
    let uuid = doc["uuid"].as_str().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("OK: matches stored run 1, found by uuid {uuid}")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // …and not once one byte of the stored JSON changed (in a copy of the database).
    let db2 = f.dir.join("tampered.db");
    std::fs::copy(&f.db, &db2).unwrap();
    let c = rusqlite::Connection::open(&db2).unwrap();
    let json: String = c
        .query_row("SELECT document FROM runs WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    let i = json.find("\"max_ns\":").unwrap() + "\"max_ns\":".len();
    let mut bytes = json.into_bytes();
    bytes[i] = if bytes[i] == b'9' { b'8' } else { bytes[i] + 1 };
    c.execute(
        "UPDATE runs SET document = ?1 WHERE id = 1",
        [String::from_utf8(bytes).unwrap()],
    )
    .unwrap();
    drop(c);
    let out = rtgauge()
        .args([
            "verify",
            pdf.to_str().unwrap(),
            "--db",
            db2.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("MISMATCH") && said.contains("probes[0] changed"),
        "{said}"
    );
    // The HTML page is verified the same way.
    let page = render(&["report", "1"], "verify.html");
    let out = rtgauge()
        .args([
            "verify",
            page.to_str().unwrap(),
            "--db",
            db2.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn bad_input_to_verify_and_pdf_without_chromium_are_one_line_and_exit_2() {
    let f = fixture();
    let junk = f.dir.join("junk.html");
    std::fs::write(&junk, "<html>no hash</html>").unwrap();
    let missing = f.dir.join("missing.pdf");
    let broken = f.dir.join("broken.pdf");
    std::fs::write(&broken, "%PDF-1.4 not really").unwrap();
    for file in [&junk, &missing, &broken] {
        let out = rtgauge()
            .args(["verify", file.to_str().unwrap(), "--db", &f.db])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(file.to_str().unwrap()), "{err}");
    }
    let pdf = f.dir.join("nochromium.pdf");
    let out = rtgauge()
        .env("PATH", f.dir.as_os_str())
        .args(["report", "1", "--pdf", pdf.to_str().unwrap(), "--db", &f.db])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--pdf") && err.contains("Chromium"), "{err}");
    assert!(!pdf.exists());
    let out = rtgauge()
        .args([
            "report",
            "1",
            "--pdf",
            "/nonexistent-dir/r.pdf",
            "--db",
            &f.db,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no directory /nonexistent-dir"), "{err}");
}
