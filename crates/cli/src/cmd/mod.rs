//! One module per verb: its clap arguments, their validation into a probe plan, and the glue that runs the
//! probe and renders the outputs.

pub mod audit;
pub mod capacity;
pub mod cyclic;
pub mod fingerprint;
pub mod fleet;
pub mod load;
pub mod mem;
pub mod monitor;
pub mod net;
pub mod numa;
pub mod ops;
pub mod oslat;
pub mod plan;
pub mod push;
pub mod report;
pub mod run;
pub mod runs;
pub mod verify;
pub mod vm;

/// The stop flag of a measuring verb: SIGINT and SIGTERM end the measurement through the normal path.
pub fn stop_on_signals() -> anyhow::Result<rtgauge_probe::stop::StopFlag> {
    use anyhow::Context as _;
    let stop = rtgauge_probe::stop::StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;
    Ok(stop)
}

/// Measure `probe` on the live host through the session engine ([`rtgauge_session::Session::measure`]):
/// the results, and the settings that were not achieved (for the caller to say and store). Says (stderr)
/// what the load achieved and what the "why" could not collect.
pub fn measure(
    root: &rtgauge_host::HostRoot,
    stop: &rtgauge_probe::stop::StopFlag,
    probe: &dyn rtgauge_session::Probe,
    around: &rtgauge_session::Around,
    observers: &mut [&mut dyn rtgauge_session::Observer],
) -> anyhow::Result<(Vec<rtgauge_model::run::ProbeResult>, Vec<String>)> {
    let m = rtgauge_session::Session { root, stop }.measure(probe, around, observers)?;
    if let Some(l) = &m.load {
        eprintln!("rtgauge: load achieved: {}", l.summary());
    }
    let mut warnings = Vec::new();
    for r in &m.results {
        if let Some(missing) = r.why().and_then(|w| w.missing.as_ref()) {
            eprintln!("rtgauge: warning: {missing}");
        }
        warnings.extend(rtgauge_report::shortfalls::of_probe(r));
    }
    Ok((m.results, warnings))
}

/// Say each warning on stderr.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("rtgauge: warning: {w}");
    }
}

/// Open the store `--db` names, or `RTGAUGE_DB`, or the default SQLite file: a SQLite path or a
/// `postgresql://` URL. Returns the store and its name for messages (a URL without its password). An error
/// names where the store came from (`--db`, `RTGAUGE_DB`).
pub fn open_store(
    db: Option<&std::path::Path>,
) -> anyhow::Result<(Box<dyn rtgauge_store::RunStore>, String)> {
    use anyhow::Context as _;
    let spec = rtgauge_store::store_spec(db);
    let shown = rtgauge_store::display_spec(&spec);
    let from = store_source(db);
    let store = rtgauge_store::open_store(&spec).with_context(|| format!("{from} {shown}"))?;
    Ok((store, shown))
}

/// Where the store's spec came from, for messages: `--db`, `RTGAUGE_DB` or the default database.
fn store_source(db: Option<&std::path::Path>) -> &'static str {
    if db.is_some() {
        "--db"
    } else if std::env::var_os("RTGAUGE_DB").is_some_and(|v| !v.is_empty()) {
        "RTGAUGE_DB"
    } else {
        "the default database"
    }
}

/// Open the store like [`open_store`] for a verb that only reads runs: a SQLite file that does not exist is
/// refused, naming where the path came from, instead of being created empty (a mistyped `--db` would
/// otherwise answer "no runs" and leave a stray database behind). PostgreSQL URLs are opened as they are.
pub fn open_existing_store(
    db: Option<&std::path::Path>,
) -> anyhow::Result<(Box<dyn rtgauge_store::RunStore>, String)> {
    let spec = rtgauge_store::store_spec(db);
    // URLs (PostgreSQL, or another scheme that open_store refuses by name) are not files to look for.
    let is_url = spec.to_str().is_some_and(|s| s.contains("://"));
    if !is_url && !spec.exists() {
        anyhow::bail!(
            "{} {}: no such store (rtgauge run, a probe or rtgauge import creates one)",
            store_source(db),
            spec.display()
        );
    }
    open_store(db)
}

/// The directory reports go to by default: beside a SQLite file, or beside the default one when the store
/// is a PostgreSQL server.
pub fn store_dir(db: Option<&std::path::Path>) -> std::path::PathBuf {
    let spec = rtgauge_store::store_spec(db);
    let file = if spec.to_str().is_some_and(rtgauge_store::is_postgres_url) {
        rtgauge_store::SqliteStore::default_path()
    } else {
        spec
    };
    file.parent()
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf()
}

/// Largest definition or profile a verb reads (a .vmx, a domain XML, a manifest, a TOML profile).
pub const MAX_DEFINITION_BYTES: u64 = 16 << 20;
/// Largest rt-tests or run document `import` reads (a week of cyclictest with wide histograms on many
/// CPUs stays far below).
pub const MAX_IMPORT_BYTES: u64 = 256 << 20;

/// Read a file the user names, refusing one larger than `max` before reading it (regular files) or after
/// `max` bytes (pipes, devices): nothing unbounded is ever held in memory. The error names the flag or verb
/// (`what`) and the path.
pub fn read_user_file(path: &std::path::Path, what: &str, max: u64) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let f = std::fs::File::open(path).with_context(|| format!("{what} {}", path.display()))?;
    let too_large = || {
        anyhow::anyhow!(
            "{what} {}: larger than {} MiB, refused",
            path.display(),
            max >> 20
        )
    };
    if f.metadata().is_ok_and(|m| m.is_file() && m.len() > max) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{what} {}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Write rendered text to standard output with every control character made visible (see
/// [`rtgauge_report::escape`]): what rtgauge prints comes partly from stored runs, imported documents and
/// foreign trees, and none of it may drive the terminal.
pub fn print_text(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::io::stdout()
        .lock()
        .write_all(rtgauge_report::escape::visible(text).as_bytes())
}

/// Name every file of a captured tree that was refused (a link out of the tree, a loop, a FIFO or device,
/// an oversized file): it was read as missing, and the user should know which findings lack it.
pub fn warn_refused(root: &rtgauge_host::HostRoot) {
    for (path, why) in root.refused() {
        let line = format!(
            "rtgauge: warning: --root {}: {path} was not read: {why}",
            root.path("/").display()
        );
        eprintln!("{}", rtgauge_report::escape::visible(&line));
    }
}

/// One warning when a topology file is malformed (a sibling list or node CPU list that does not parse, an
/// online CPU without its directory): the fingerprint and the audit read such a file as absent rather than
/// stop, so say which file, as their topology figures and findings rest on it. `plan` refuses instead.
pub fn warn_topology(root: &rtgauge_host::HostRoot) {
    if !root.exists("/sys/devices/system/cpu/online") {
        return;
    }
    if let Err(e) = rtgauge_host::fingerprint::check_topology_files(root, None) {
        let line = if root.is_live() {
            format!("rtgauge: warning: {e} (read as absent)")
        } else {
            format!(
                "rtgauge: warning: --root {}: {e} (read as absent)",
                root.path("/").display()
            )
        };
        eprintln!("{}", rtgauge_report::escape::visible(&line));
    }
}

/// The last non-empty line a tool wrote to `stderr` ("no output" when none): the one line an error
/// about that tool quotes.
pub fn last_stderr_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .to_string()
}
