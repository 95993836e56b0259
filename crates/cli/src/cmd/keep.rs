//! Where a measured run goes, for the verbs that store their run themselves (`net`, `net latency`,
//! `clock`): the store
//! (unless `--no-store`), `--output`, its label and tags; stored and written before anything is printed.

use anyhow::Context as _;
use std::io::Write as _;
use std::process::ExitCode;

/// Where a measured run goes: the store (unless `--no-store`), `--output`, and its label and tags.
pub struct Keep<'a> {
    /// The store's flags.
    pub store: &'a rtgauge_flags::StoreArgs,
    /// `--no-store`.
    pub no_store: bool,
    /// `--output`.
    pub output: &'a rtgauge_flags::OutputArg,
    /// `--label`.
    pub label: &'a Option<String>,
}

/// The store `keep` asks for, opened before measuring (a store that cannot be opened is said at once).
pub fn open_store(
    keep: &Keep,
) -> anyhow::Result<Option<(Box<dyn rtgauge_store::RunStore>, String)>> {
    if keep.no_store {
        return Ok(None);
    }
    let (s, name) = keep.store.db.open()?;
    Ok(Some((s, name)))
}

/// Store and write the finished run `doc`, then `show` it; the exit code is `show`'s unless the store
/// refused the run.
pub fn keep_run(
    keep: &Keep,
    mut store: Option<(Box<dyn rtgauge_store::RunStore>, String)>,
    doc: &mut rtgauge_model::run::RunDocument,
    show: impl FnOnce() -> std::io::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    doc.label = keep.label.clone();
    doc.tags = keep.store.tags.iter().cloned().collect();
    // Stored and written before anything is printed: a closed stdout (`| head`) ends the printing quietly
    // and must not lose the measurement. Each of the three is tried whatever became of the others; the
    // first error in that order is the one returned.
    let stored = store.as_mut().map(|(store, db)| {
        store
            .insert(doc)
            .with_context(|| format!("storing the run in {db}"))
            .map(|id| (id, db.clone()))
    });
    let written = crate::output::write_output_file(keep.output.output.as_deref(), doc);
    let shown = show();
    let id = match stored.transpose() {
        Ok(id) => id,
        // The results are on the screen; the document must not be lost with the store.
        Err(e) => return not_stored(keep, doc, &e, written),
    };
    written?;
    let code = shown?;
    if let Some((id, db)) = id {
        let mut out = std::io::stdout().lock();
        writeln!(out, "stored: run {id} ({}) in {db}", doc.status.as_str())?;
        out.flush()?;
    }
    crate::output::write_output_to_stdout(keep.output.output.as_deref(), doc)?;
    Ok(code)
}

/// The store refused the finished run: its document is in `--output` (when that was written) or a fallback
/// file, named in the error with how to store it later; the exit code says "measured, not stored".
fn not_stored(
    a: &Keep,
    doc: &rtgauge_model::run::RunDocument,
    cause: &anyhow::Error,
    written: anyhow::Result<()>,
) -> anyhow::Result<ExitCode> {
    let output = a
        .output
        .output
        .as_deref()
        .filter(|p| !crate::output::is_stdout(p));
    let kept = match (output, written) {
        (Some(p), Ok(())) => Ok(p.to_path_buf()),
        (_, w) => {
            if let Err(e) = w {
                eprintln!("rtgauge: error: {e:#}");
            }
            crate::output::fallback_file(a.store.db.db.as_deref(), doc)
        }
    };
    match kept {
        Ok(p) => eprintln!(
            "rtgauge: error: the run was measured but not stored: {cause:#}. Its document is in {p}: \
             `rtgauge import {p}` stores it once the store can be written",
            p = p.display()
        ),
        Err(e) if a.output.output.as_deref().is_some_and(crate::output::is_stdout) => eprintln!(
            "rtgauge: error: the run was measured but not stored: {cause:#}; its document follows on \
             standard output (--output -), no file could take a copy ({e:#})"
        ),
        Err(e) => eprintln!(
            "rtgauge: error: the run was measured but not stored: {cause:#}; nor could its document be \
             written anywhere ({e:#}): the results above are all that is left"
        ),
    }
    // A closed stdout must not turn "measured, not stored" into another error.
    let _ = crate::output::write_output_to_stdout(a.output.output.as_deref(), doc);
    Ok(ExitCode::from(super::run::NOT_STORED))
}
