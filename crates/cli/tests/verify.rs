//! `rtgauge verify` finds the run a report names by its uuid, so that a copy of the run in another store
//! (exported and imported, or pushed) under another id verifies; a record without a uuid (written before it
//! was embedded) is found by its id; the answer says which lookup found it. Real imports of rt-tests
//! results, real report pages (the PDF record is covered in report_views.rs).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
use common::{fixture, run};
use std::path::Path;

fn import(db: &Path, files: &[&str]) {
    let mut a = vec!["import", "--db", db.to_str().unwrap()];
    a.extend_from_slice(files);
    let (code, _, err) = run(&a);
    assert_eq!(code, 0, "{err}");
}

fn verify(page: &Path, db: &Path) -> (i32, String) {
    let (code, out, err) = run(&[
        "verify",
        page.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(err.is_empty(), "{err}");
    (code, out)
}

#[test]
fn a_copy_under_another_id_is_found_by_its_uuid_and_an_old_record_by_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a.db"),
        tmp.path().join("b.db"),
        tmp.path().join("c.db"),
    );
    let cyclic = fixture("rt-tests/cyclictest-h400.json");
    let oslat = fixture("rt-tests/oslat-2core.json");
    let other = fixture("rt-tests/cyclictest-h20.json");
    // Store A: the oslat run is run 2; its report page is the record.
    import(&a, &[&cyclic, &oslat]);
    let page = tmp.path().join("run2.html");
    let (code, _, err) = run(&[
        "report",
        "2",
        "--html",
        page.to_str().unwrap(),
        "--db",
        a.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    let (code, json, _) = run(&[
        "export",
        "2",
        "--format",
        "json",
        "--db",
        a.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let uuid = serde_json::from_str::<serde_json::Value>(&json).unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        html.contains(&format!("uuid {uuid}")),
        "no uuid in the page"
    );
    // Store B: the copy is run 1, and run 2 is another run.
    let copy = tmp.path().join("run2.json");
    std::fs::write(&copy, &json).unwrap();
    import(&b, &[copy.to_str().unwrap(), &other]);

    let (code, out) = verify(&page, &a);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "OK: matches stored run 2, found by uuid {uuid} (sha256:"
        )),
        "{out}"
    );
    let (code, out) = verify(&page, &b);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "OK: matches stored run 1, found by uuid {uuid}; the record names run 2 of its store"
        )),
        "{out}"
    );
    // A store without the run: not there by uuid, and its run 2 does not exist.
    import(&c, &[&other]);
    let (code, out) = verify(&page, &c);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "MISMATCH: no run of the database has its uuid, and run 2 is not in the database"
        ),
        "{out}"
    );

    // A record written before the uuid was embedded: found by its id, which only its own store agrees with.
    let old = tmp.path().join("old.html");
    let line =
        format!("<p>Run <code class=\"hash\" style=\"white-space:nowrap\">uuid {uuid}</code></p>");
    let meta = format!("<meta name=\"rtgauge-run-uuid\" content=\"{uuid}\">");
    assert!(html.contains(&line) && html.contains(&meta));
    std::fs::write(&old, html.replace(&line, "").replace(&meta, "")).unwrap();
    let (code, out) = verify(&old, &a);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("OK: matches stored run 2, found by id: the record names no uuid"),
        "{out}"
    );
    let (code, out) = verify(&old, &b);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("MISMATCH: stored run 2 (found by id: the record names no uuid) hashes"),
        "{out}"
    );
}

#[test]
fn a_record_whose_uuid_was_changed_does_not_match_the_run_found_by_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("a.db");
    import(&db, &[&fixture("rt-tests/cyclictest-h400.json")]);
    let page = tmp.path().join("run1.html");
    let (code, _, err) = run(&[
        "report",
        "1",
        "--html",
        page.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, json, _) = run(&[
        "export",
        "1",
        "--format",
        "json",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let uuid = serde_json::from_str::<serde_json::Value>(&json).unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, out) = verify(&page, &db);
    assert_eq!(code, 0, "{out}");
    // Another valid uuid in place of the run's, everywhere the page names it.
    let forged = "0b8e6a52-3c1d-4e7f-9a2b-5d6c7e8f9a0b";
    assert_ne!(uuid, forged);
    let edited = tmp.path().join("edited.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&uuid));
    std::fs::write(&edited, html.replace(&uuid, forged)).unwrap();
    let (code, out) = verify(&edited, &db);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "MISMATCH: no run of the database has its uuid; stored run 1 (the record's run id) has uuid {uuid}, the record names {forged}"
        )),
        "{out}"
    );
}
