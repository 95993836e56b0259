//! One module per verb: its clap arguments, their validation into a probe plan, and the glue that runs the
//! probe and renders the outputs.

pub mod audit;
pub mod capacity;
pub mod cyclic;
pub mod fingerprint;
pub mod load;
pub mod mem;
pub mod monitor;
pub mod net;
pub mod net_rate;
pub mod numa;
pub mod ops;
pub mod oslat;
pub mod report;
pub mod run;
pub mod runs;
pub mod verify;
pub mod why;

use rtgauge_model::rt::{ProcessConditions, ThreadConditions};
use rtgauge_model::units::parse_duration;
use rtgauge_model::Nanos;

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

/// One warning per process-wide setting that was requested but not achieved.
pub fn process_shortfalls(c: &ProcessConditions) -> Vec<String> {
    let why = |e: &Option<String>| e.clone().unwrap_or_else(|| "unknown".into());
    let mut w = Vec::new();
    if !c.mlockall.ok() {
        w.push(format!("mlockall not achieved: {}", why(&c.mlockall.error)));
    }
    if !c.cpu_dma_latency_us.ok() {
        let request = c
            .cpu_dma_latency_us
            .requested
            .map(|us| format!(" {us} µs"))
            .unwrap_or_default();
        w.push(format!(
            "/dev/cpu_dma_latency{request} not held: {}",
            why(&c.cpu_dma_latency_us.error)
        ));
    }
    for other in &c.contended {
        w.push(format!(
            "CPU {} measured at the same time by pid {} ({}): the two runs disturbed each other",
            other.cpus,
            other.pid,
            if other.command.is_empty() {
                "?"
            } else {
                &other.command
            }
        ));
    }
    if let Some(e) = &c.main_affinity.error {
        w.push(format!("main thread affinity not achieved: {e}"));
    }
    w
}

/// One warning per setting of measurement thread `who` that was requested but not achieved.
pub fn thread_shortfalls(who: &str, k: &ThreadConditions) -> Vec<String> {
    let mut w = Vec::new();
    if !k.policy.ok() || !k.priority.ok() {
        w.push(format!(
            "{who}: requested {}:{}, running {}:{} ({})",
            k.policy.requested,
            k.priority.requested,
            k.policy.achieved,
            k.priority.achieved,
            k.policy.error.as_deref().unwrap_or("unknown")
        ));
    }
    if !k.cpu.ok() {
        w.push(format!(
            "{who}: not pinned to CPU {} ({})",
            k.cpu.requested.map_or("-".to_string(), |c| c.to_string()),
            k.cpu
                .error
                .as_deref()
                .unwrap_or("CPU offline or not allowed")
        ));
    }
    w
}

/// Sizes with an optional K, M or G suffix (binary units), at most `max`.
pub fn parse_size_max(s: &str, max: u64) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 4096, 16K, 1M)"))?;
    let bytes = n.checked_mul(mult).ok_or("size too large")?;
    if bytes > max {
        return Err(format!("at most {}", rtgauge_model::mem::size_label(max)));
    }
    Ok(bytes)
}

/// A duration as the verbs take it (`30s`, `200us`, `24h`, …).
pub fn parse_duration_arg(s: &str) -> Result<Nanos, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// `--tag KEY=VALUE`.
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}' is not KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::rt::Setting;

    fn setting<T: Clone>(requested: T, achieved: T, error: Option<&str>) -> Setting<T> {
        Setting {
            requested,
            achieved,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn a_shortfall_reads_as_a_sentence_not_a_debug_dump() {
        let c = ProcessConditions {
            mlockall: setting(true, true, None),
            cpu_dma_latency_us: setting(Some(0), None, Some("Permission denied (os error 13)")),
            cpu_dma_latency_before_us: None,
            main_affinity: setting(None, None, None),
            contended: Vec::new(),
        };
        assert_eq!(
            process_shortfalls(&c),
            ["/dev/cpu_dma_latency 0 µs not held: Permission denied (os error 13)"]
        );
    }
}
