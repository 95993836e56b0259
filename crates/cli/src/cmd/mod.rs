//! One module per verb: the glue from its arguments (parsed and validated by `rtgauge_flags`) to the
//! session engine and the views.

use rtgauge_analysis::kind::ProbeData;
pub mod audit;
pub mod capacity;
pub mod clock;
pub mod compare;
pub mod cyclic;
pub mod fingerprint;
pub mod fleet;
pub mod hwnoise;
pub mod keep;
pub mod load;
pub mod mem;
pub mod monitor;
pub mod net;
pub mod net_latency;
pub mod numa;
pub mod ops;
pub mod oslat;
pub mod plan;
pub mod progress;
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
/// first the conditions it did not get, one line per cause with the cause and its fix, then what the load
/// achieved and what else fell short.
pub fn measure(
    root: &rtgauge_host::HostRoot,
    stop: &rtgauge_probe::stop::StopFlag,
    probe: &dyn rtgauge_session::Probe,
    around: &rtgauge_session::Around,
    observers: &mut [&mut dyn rtgauge_session::SessionObserver],
) -> anyhow::Result<(Vec<rtgauge_model::run::ProbeResult>, Vec<String>)> {
    let m = rtgauge_session::Session { root, stop }.measure(probe, around, observers)?;
    for u in crate::output::unmet(&m.results) {
        eprintln!(
            "rtgauge: {}: {}",
            if u.condition.bears_on_figures() {
                "NOT MET"
            } else {
                "not met"
            },
            u.line()
        );
    }
    for c in &m.cleaned {
        eprintln!("rtgauge: warning: {c} before measuring");
    }
    if let Some(l) = &m.load {
        eprintln!("rtgauge: load achieved: {}", l.summary());
    }
    let mut warnings = Vec::new();
    for r in &m.results {
        // A trace that was asked for and not taken is an unmet condition, said above.
        if let Some(missing) = r
            .data()
            .why()
            .and_then(|w| w.missing.as_ref())
            .filter(|m| !m.starts_with("--trace"))
        {
            eprintln!("rtgauge: warning: {missing}");
        }
        warnings.extend(rtgauge_report::shortfalls::of_probe(r));
    }
    Ok((m.results, warnings))
}

/// [`measure`] for a probe of one kind: its results as the kind's own type.
pub fn measure_kind<P: rtgauge_session::KindProbe>(
    root: &rtgauge_host::HostRoot,
    stop: &rtgauge_probe::stop::StopFlag,
    probe: &P,
    around: &rtgauge_session::Around,
    observers: &mut [&mut dyn rtgauge_session::SessionObserver],
) -> anyhow::Result<(Vec<P::Result>, Vec<String>)> {
    let (results, warnings) = measure(root, stop, probe, around, observers)?;
    Ok((rtgauge_session::of_kind(results)?, warnings))
}

/// [`measure_kind`] for a probe that gives one result.
pub fn measure_one<P: rtgauge_session::KindProbe>(
    root: &rtgauge_host::HostRoot,
    stop: &rtgauge_probe::stop::StopFlag,
    probe: &P,
    around: &rtgauge_session::Around,
    observers: &mut [&mut dyn rtgauge_session::SessionObserver],
) -> anyhow::Result<(P::Result, Vec<String>)> {
    let (results, warnings) = measure_kind(root, stop, probe, around, observers)?;
    Ok((rtgauge_session::first::<P::Result, _>(results)?, warnings))
}

/// Say each warning on stderr.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("rtgauge: warning: {w}");
    }
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
