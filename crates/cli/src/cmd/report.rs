//! `rtgauge report RUN`: a stored run on the terminal, as a self-contained HTML page and as the qualification
//! record in PDF (the views are rtgauge_report's).

use super::runs::find_run;
use anyhow::Context as _;
use rtgauge_flags::report::*;
use rtgauge_report::html;
use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

pub(super) fn write_html(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::output::write_atomic(path, text.as_bytes())
        .with_context(|| format!("--html {}", path.display()))
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let (mut store, _) = a.db.open_existing()?;
    let sel = match (&a.run, &a.label) {
        (Some(r), _) => r.clone(),
        (None, Some(l)) => format!("label:{l}"),
        (None, None) => "latest".into(),
    };
    let (id, doc) = find_run(store.as_mut(), &sel)?;
    if let Some(path) = &a.html.html {
        write_html(path, &html::render_report(id, &doc))?;
    }
    if let Some(path) = &a.pdf {
        let record = html::render_report_with(id, &doc, html::ReportOptions { record: true });
        rtgauge_report::pdf::print_record(path, &record)
            .with_context(|| format!("--pdf {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    let opts = rtgauge_report::text::TextOptions::for_stdout(a.verbose.verbose);
    super::print_text(&rtgauge_report::terminal::render_show(id, &doc, opts))?;
    if let Some(p) = &a.html.html {
        writeln!(out, "report: {}", p.display())?;
    }
    if let Some(p) = &a.pdf {
        writeln!(out, "record: {}", p.display())?;
    }
    super::print_text(&rtgauge_report::terminal::render_verdict(&doc, opts))?;
    Ok(ExitCode::SUCCESS)
}
