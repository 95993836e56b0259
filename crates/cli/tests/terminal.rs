//! Stored strings cannot drive the terminal: a label holding escape sequences (colour, window title, bell),
//! refused on the command line and on import but present in a store written before that, prints as visible
//! text in `runs list`, `report` and `compare`, and is kept unchanged.
#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_ok, rtgauge_std};

#[test]
fn escape_sequences_in_a_label_print_as_visible_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    let txt = dir.path().join("c.txt");
    std::fs::write(
        &txt,
        "T: 0 ( 1234) P:99 I:1000 C:   1000 Min:      2 Act:    3 Avg:    3 Max:      10\n",
    )
    .unwrap();
    let label = "\u{1b}[31mRED\u{1b}]0;title\u{7}\u{202e}";
    let import = |label: &str| {
        rtgauge_std()
            .args([
                "import",
                txt.to_str().unwrap(),
                "--label",
                label,
                "--db",
                db,
            ])
            .output()
            .unwrap()
    };
    assert_eq!(import(label).status.code(), Some(2));
    assert_ok(&import("plain"));
    // The label as a store written before names were checked holds it.
    let mut store = rtgauge_store::SqliteStore::open(std::path::Path::new(db)).unwrap();
    let mut doc = rtgauge_store::RunStore::get(&mut store, 1).unwrap();
    doc.label = Some(label.into());
    doc.uuid = None;
    assert_eq!(
        rtgauge_store::RunStore::insert(&mut store, &doc).unwrap(),
        2
    );
    drop(store);
    for args in [
        vec!["runs", "list", "--db", db],
        vec!["report", "latest", "--db", db],
        vec!["compare", "2", "2", "--db", db],
    ] {
        let out = rtgauge_std().args(&args).output().unwrap();
        assert_ok(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("\\x1b[31mRED\\x1b]0;title\\x07\\u{202e}"),
            "{args:?}: {text}"
        );
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
            "{args:?}: a control character reached the terminal"
        );
    }
    // The stored value is the one given.
    let doc = common::export_json(db, "latest");
    assert_eq!(doc["label"], label);
}

/// A corrupt database is refused with its cause said once.
#[test]
fn a_database_error_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bad.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend((0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    std::fs::write(&db, bytes).unwrap();
    let out = rtgauge_std()
        .args(["runs", "list", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    let cause = err.rsplit(": ").next().unwrap().trim();
    assert!(!cause.is_empty(), "{err}");
    assert_eq!(err.matches(cause).count(), 1, "cause repeated: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Two runs on one CPU at once both carry a "contended" condition naming the other; a run alone does not,
/// and a claim left by a killed run does not make the next run contended.
#[test]
fn two_runs_on_one_cpu_both_know_they_were_contended() {
    let _cpu = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    // A claim directory of this test's own: runs elsewhere on the machine must not count.
    let claims = dir.path().join("claims");
    let cyclic = |file: &str, secs: &str| {
        rtgauge_std()
            .env("RTGAUGE_RUN_DIR", &claims)
            .args([
                "cyclic", "-m", "-p", "80", "-i", "1000", "-a", "1", "-q", "-D", secs,
            ])
            .args(["--output", file])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = cyclic(&out("a.json"), "3");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let second = cyclic(&out("b.json"), "1").wait_with_output().unwrap();
    let first = first.wait_with_output().unwrap();
    assert_ok(&first);
    assert_ok(&second);
    let a = common::read_json(std::path::Path::new(&out("a.json")));
    let b = common::read_json(std::path::Path::new(&out("b.json")));
    let ca = &a["probes"][0]["conditions"]["contended"];
    let cb = &b["probes"][0]["conditions"]["contended"];
    assert_eq!(ca.as_array().map(Vec::len), Some(1), "{a}");
    assert_eq!(cb.as_array().map(Vec::len), Some(1), "{b}");
    assert_eq!(ca[0]["cpus"], "1");
    assert!(
        ca[0]["command"].as_str().unwrap().contains("b.json"),
        "{ca}"
    );
    assert!(
        cb[0]["command"].as_str().unwrap().contains("a.json"),
        "{cb}"
    );
    assert!(String::from_utf8_lossy(&second.stderr).contains("disturbed each other"));
    // compare says which run was contended.
    let db = out("r.db");
    let clean = out("clean.json");
    assert_ok(&cyclic(&clean, "1").wait_with_output().unwrap());
    for f in [&clean, &out("a.json")] {
        assert_ok(
            &rtgauge_std()
                .args(["import", f, "--db", &db])
                .output()
                .unwrap(),
        );
    }
    let c = common::compare_in(&db, &["1", "2"]);
    let diff = common::difference(&c, "contended");
    assert_eq!(diff["values"][0], "no");
    assert!(
        diff["values"][1]
            .as_str()
            .unwrap()
            .starts_with("yes, with pid"),
        "{diff}"
    );

    // A killed run leaves its claim behind; the next run alone is not contended.
    let mut killed = cyclic(&out("k.json"), "30");
    std::thread::sleep(std::time::Duration::from_millis(500));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let alone = cyclic(&out("c.json"), "1").wait_with_output().unwrap();
    assert_ok(&alone);
    let c = common::read_json(std::path::Path::new(&out("c.json")));
    assert!(
        c["probes"][0]["conditions"].get("contended").is_none(),
        "{c}"
    );
}
