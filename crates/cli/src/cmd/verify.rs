//! `rtgauge verify FILE.pdf|FILE.html`: check a filed report or qualification record against the stored
//! run it names. The file carries the SHA-256 of the run document's canonical JSON and short hashes of its
//! parts (see [`rtgauge_report::record`]); a PDF's text is read by `rtgauge_report::pdf` (`pdftotext`).
//! The run is found by the uuid the record names (a copy pushed or imported into another store keeps its
//! uuid under another id), else by the record's run id, whose stored run must then have the uuid the record
//! names (when it names one); the answer says which. Exit 0 when the stored run
//! hashes the same, 1 when it does not (naming the parts that differ) or is not there, 2 when the file
//! cannot be read or holds no hash.

use super::runs::find_run;
use anyhow::{bail, Context as _};
use rtgauge_flags::verify::*;
use rtgauge_report::record;
use std::process::ExitCode;

/// The text of the file: a PDF through `pdftotext`, anything else as UTF-8.
fn text_of(a: &VerifyArgs) -> anyhow::Result<String> {
    let what = format!("verify {}", a.file.display());
    let bytes = rtgauge_flags::read_user_file(&a.file, "verify", rtgauge_flags::MAX_IMPORT_BYTES)?;
    if !bytes.starts_with(b"%PDF") {
        return String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("{what}: neither a PDF nor a UTF-8 HTML report"));
    }
    rtgauge_report::pdf::text_of(&a.file).with_context(|| what)
}

/// How the stored run was found: by the record's uuid (the same in every store holding a copy), or by its
/// id (a record without a uuid, or a uuid no run of this store has).
enum Found {
    Uuid(String),
    Id(&'static str),
}

/// The stored run the record names: by uuid first, else by id. `Err` says why none was found.
fn find_recorded(
    store: &mut dyn rtgauge_store::RunStore,
    run: Option<i64>,
    uuid: Option<&str>,
) -> anyhow::Result<Result<(i64, rtgauge_model::run::RunDocument, Found), String>> {
    if let Some(u) = uuid {
        if let Some(r) = store.list()?.into_iter().find(|r| r.uuid == u) {
            let doc = store.get(r.id).with_context(|| format!("run {}", r.id))?;
            return Ok(Ok((r.id, doc, Found::Uuid(u.to_string()))));
        }
    }
    let why = if uuid.is_some() {
        "no run of the database has its uuid"
    } else {
        "the record names no uuid"
    };
    let Some(id) = run else {
        return Ok(Err(format!("{why} and it names no run id")));
    };
    match find_run(store, &id.to_string()) {
        // A record naming a uuid is of that run only: the run stored under its id with another uuid is
        // another run (an edited record, or a record of another store), whatever its hash says.
        Ok((id, doc)) if uuid.is_some_and(|u| doc.uuid.as_deref() != Some(u)) => Ok(Err(format!(
            "{why}; stored run {id} (the record's run id) has uuid {}, the record names {}",
            doc.uuid.as_deref().unwrap_or("none"),
            uuid.unwrap_or_default()
        ))),
        Ok((id, doc)) => Ok(Ok((id, doc, Found::Id(why)))),
        Err(err) => Ok(Err(format!(
            "{why}, and run {id} is not in the database ({err:#})"
        ))),
    }
}

pub fn run(a: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let name = a.file.display().to_string();
    let text = text_of(a)?;
    let Some(e) = record::extract(&text) else {
        bail!("verify {name}: no rtgauge content hash in it (not a report or record of rtgauge)");
    };
    if e.run.is_none() && e.uuid.is_none() {
        bail!("verify {name}: the content hash names no run");
    }
    let (mut store, _) = a.db.open_existing()?;
    let (id, doc, found) = match find_recorded(store.as_mut(), e.run, e.uuid.as_deref())? {
        Ok(x) => x,
        Err(why) => {
            super::print_text(&format!("{name}: MISMATCH: {why}\n"))?;
            return Ok(ExitCode::from(1));
        }
    };
    // Which lookup found it, and the id the record gave when this store's differs (a copy elsewhere).
    let how = match &found {
        Found::Uuid(u) => match e.run {
            Some(r) if r != id => {
                format!("found by uuid {u}; the record names run {r} of its store")
            }
            _ => format!("found by uuid {u}"),
        },
        Found::Id(why) => format!("found by id: {why}"),
    };
    let now = record::hashes(&doc);
    if now.whole == e.hashes.whole {
        super::print_text(&format!(
            "{name}: OK: matches stored run {id}, {how} ({})\n",
            now.whole
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let diff = record::differences(&e.hashes, &now);
    super::print_text(&format!(
        "{name}: MISMATCH: stored run {id} ({how}) hashes {}, the file records {}; differs: {}\n",
        now.whole,
        e.hashes.whole,
        if diff.is_empty() {
            "the whole document (the parts recorded agree)".to_string()
        } else {
            diff.join(", ")
        }
    ))?;
    Ok(ExitCode::from(1))
}
