//! Input hygiene at the command line:
//! - the verbs that only read the store refuse a SQLite path that does not exist (a mistyped `--db`,
//!   `RTGAUGE_DB` or a default database not made yet) in one line, exit 2, creating nothing; the verbs that
//!   store runs (`import`, `push`'s destination) still create theirs;
//! - names given on the command line (`--label`, `--host-name`, `--tag`) with a control character are
//!   refused in one line naming the option, the value shown escaped.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, fixture, rtgauge};

#[test]
fn read_only_verbs_refuse_a_missing_store_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let db_s = db.to_str().unwrap();
    // `import` creates the store it writes to.
    let out = rtgauge()
        .args([
            "import",
            &fixture("rt-tests/cyclictest-h20.json"),
            "--db",
            db_s,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let page = dir.path().join("run.html");
    let out = rtgauge()
        .args(["report", "--html", page.to_str().unwrap(), "--db", db_s])
        .output()
        .unwrap();
    assert_ok(&out);
    // A typo in a directory that does not exist either: not even the directory may be created.
    let typo = dir.path().join("typo/runs.db");
    let typo_s = typo.to_str().unwrap();
    let central = dir.path().join("central.db");
    let verbs: [&[&str]; 11] = [
        &["runs", "list"],
        &["runs", "show", "1"],
        &["runs", "delete", "1"],
        &["runs", "export", "1"],
        &["export", "1"],
        &["report"],
        &["compare", "1", "1"],
        &["compare", "--host", "vm", "--host", "vm"],
        &["fleet"],
        &["verify", page.to_str().unwrap()],
        &["push", "--to", central.to_str().unwrap()],
    ];
    for verb in verbs {
        let out = rtgauge()
            .args(verb)
            .args(["--db", typo_s])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {err}");
        assert_eq!(
            err,
            format!(
                "rtgauge: error: --db {typo_s}: no such store (rtgauge run, a probe or rtgauge import creates one)\n"
            ),
            "{verb:?}"
        );
        assert!(!typo.parent().unwrap().exists(), "{verb:?}");
        assert!(!central.exists(), "{verb:?}");
    }
    // The same through RTGAUGE_DB and the default database, each named as the source.
    let out = rtgauge()
        .args(["runs", "list"])
        .env("RTGAUGE_DB", typo_s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(&format!(
        "rtgauge: error: RTGAUGE_DB {typo_s}: no such store"
    )));
    let xdg = dir.path().join("xdg");
    let out = rtgauge()
        .args(["report"])
        .env_remove("RTGAUGE_DB")
        .env("XDG_DATA_HOME", &xdg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("rtgauge: error: the default database ")
    );
    assert!(!xdg.exists());
    // The existing store still answers, and push creates its destination.
    let out = rtgauge()
        .args(["runs", "list", "--db", db_s])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let out = rtgauge()
        .args(["push", "--to", central.to_str().unwrap(), "--db", db_s])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(central.exists());
}

#[test]
fn names_with_control_characters_are_refused_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let db_s = db.to_str().unwrap();
    let f = fixture("rt-tests/cyclictest-h20.json");
    let cases: [(&[&str], &str); 11] = [
        (&["run", "--label", "", "--db", db_s], "invalid value '' for '--label <LABEL>': a name must not be empty or blank"),
        (&["run", "--host-name", " ", "--db", db_s], "invalid value ' ' for '--host-name <NAME>': a name must not be empty or blank"),
        (&["import", &f, "--label", "host\u{200b}1", "--db", db_s], "invalid value 'host\\u{200b}1' for '--label <LABEL>': holds the format character U+200B"),
        (&["import", &f, "--label", "a\u{feff}", "--db", db_s], "holds the format character U+FEFF"),
        (&["run", "--label", "a\u{1b}[31mb", "--db", db_s], "invalid value 'a\\x1b[31mb' for '--label <LABEL>': holds the control character U+001B"),
        (&["run", "--host-name", "two\nlines", "--db", db_s], "invalid value 'two\\x0alines' for '--host-name <NAME>': holds the control character U+000A"),
        (&["run", "--tag", "site=x\u{7}", "--db", db_s], "for '--tag <KEY=VALUE>': holds the control character U+0007"),
        (&["import", &f, "--label", "a\u{9b}b", "--db", db_s], "invalid value 'a\\x9bb' for '--label <LABEL>'"),
        (&["import", &f, "--label", "abc\u{202e}fed", "--db", db_s], "invalid value 'abc\\u{202e}fed' for '--label <LABEL>'"),
        (&["net", "cps", "--label", "\r", "--db", db_s], "for '--label <LABEL>': holds the control character U+000D"),
        (&["monitor", "--label", "t\tab", "--db", db_s], "invalid value 't\\x09ab' for '--label <TEXT>'"),
    ];
    for (args, what) in cases {
        let out = rtgauge().args(args).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("rtgauge: error: "), "{err}");
        assert!(err.contains(what), "{what}: {err}");
        assert!(
            !err.contains(['\u{1b}', '\u{7}', '\u{9b}', '\r', '\u{202e}', '\u{200b}', '\u{feff}']),
            "{err}"
        );
        assert!(!db.exists(), "{args:?}");
    }
    // Printable names, Unicode included, are taken as they are.
    let out = rtgauge()
        .args(["import", &f, "--label", "bare-metal µs ü", "--db", db_s])
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .args(["runs", "list", "--db", db_s])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("bare-metal µs ü"));
}
