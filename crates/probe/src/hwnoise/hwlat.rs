//! The `hwlat` tracer (`kernel/trace/trace_hwlat.c`, hwlatdetect's method): a kernel thread per CPU
//! (per-cpu mode) or one moved from CPU to CPU (round-robin) reads the clock in pairs with interrupts off
//! for `width` of every `window`; each window whose largest gap reached `tracing_thresh` is one entry in
//! the top level's trace (the tracer has no instances), stamped with the wall clock.

use super::{write, write_width_window, HwnoiseError};
use rtgauge_model::hwnoise::{HwGap, HwnoiseConfig};
use rtgauge_model::units::us_trunc;
use rtgauge_model::CpuSet;
use std::path::Path;

/// The files the tracer's setup changes, relative to tracefs, in the order they are restored (the tracer
/// first, so that nothing spins while the rest is put back).
pub const FILES: &[&str] = &[
    "current_tracer",
    "tracing_thresh",
    "tracing_cpumask",
    "hwlat_detector/width",
    "hwlat_detector/window",
    "hwlat_detector/mode",
    "tracing_on",
];

/// Set the tracer up and switch it on (the caller has saved [`FILES`]).
pub fn arm(r: &Path, config: &HwnoiseConfig) -> Result<(), HwnoiseError> {
    write(r, "current_tracer", "nop")?;
    write(r, "trace", "")?;
    write(r, "tracing_cpumask", &cpumask(&config.cpus))?;
    write(
        r,
        "tracing_thresh",
        &us_trunc(config.threshold_ns).max(1).to_string(),
    )?;
    write_width_window(
        r,
        ("hwlat_detector/width", us_trunc(config.width_ns)),
        ("hwlat_detector/window", us_trunc(config.window_ns)),
    )?;
    if r.join("hwlat_detector/mode").exists() {
        write(r, "hwlat_detector/mode", &config.mode)?;
    }
    write(r, "tracing_on", "1")?;
    write(r, "current_tracer", "hwlat")
}

/// The mode's bracketed choice (`none [round-robin] per-cpu`) for `hwlat_detector/mode`; `None` for the
/// other files.
pub fn restorable(file: &str, text: &str) -> Option<String> {
    (file == "hwlat_detector/mode").then_some(())?;
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .map(str::to_string)
}

/// One tracer entry: (the window's gap record with its CPU, its wall-clock stamp in ns since the epoch).
/// The payload must be hwlat's own (`#<seq> inner/outer(us): …`), right after the header's stamp.
pub fn parse_entry(line: &str) -> Option<(HwGap, u64)> {
    let (cpu, _, payload) = super::header(line)?;
    let (seq, rest) = payload.trim_start().split_once(char::is_whitespace)?;
    let n = seq.strip_prefix('#')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.trim_start().strip_prefix("inner/outer(us):")?;
    let (inner, rest) = rest.trim_start().split_once('/')?;
    let outer: u64 = rest.split_whitespace().next()?.parse().ok()?;
    let field = |name: &str| rest.split_whitespace().find_map(|w| w.strip_prefix(name));
    let wall = super::stamp_ns(field("ts:")?)?;
    let num = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let us = |v: u64| v.checked_mul(1000);
    Some((
        HwGap {
            cpu,
            at_ns: 0,
            inner_ns: us(inner.trim().parse().ok()?)?,
            outer_ns: us(outer)?,
            count: num("count:").max(1),
            nmi_count: num("nmi-count:"),
            nmi_ns: us(num("nmi-total:"))?,
        },
        wall,
    ))
}

/// The lowercase hex `tracing_cpumask` of `cpus` (32-bit groups joined by commas, as the kernel prints it).
pub fn cpumask(cpus: &CpuSet) -> String {
    let top = cpus.iter().max().unwrap_or(0);
    let groups = top / 32 + 1;
    (0..groups)
        .rev()
        .map(|g| {
            let bits = cpus
                .iter()
                .filter(|c| c / 32 == g)
                .fold(0u32, |a, c| a | 1 << (c % 32));
            format!("{bits:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_read_with_its_cpu_gaps_and_nmis() {
        let l = "          <...>-1366    [001] d....  1034.565617: #1     inner/outer(us):   12/14    ts:1700000000.123456789 count:3";
        let (g, wall) = parse_entry(l).unwrap();
        assert_eq!(
            (g.cpu, g.inner_ns, g.outer_ns, g.count),
            (1, 12_000, 14_000, 3)
        );
        assert_eq!(g.gap_ns(), 14_000);
        assert_eq!(wall, 1_700_000_000_123_456_789);
        let l = " hwlatd-77 [012] dn... 99.000001: #42    inner/outer(us): 20012/0     ts:1700000001.5 count:1 nmi-total:7 nmi-count:2";
        let (g, wall) = parse_entry(l).unwrap();
        assert_eq!(
            (g.cpu, g.inner_ns, g.nmi_count, g.nmi_ns),
            (12, 20_012_000, 2, 7_000)
        );
        assert_eq!(wall, 1_700_000_001_500_000_000);
        // Kernels before 5.14 print no count.
        let (g, _) =
            parse_entry("x-1 [000] .... 1.0: #1 inner/outer(us): 5/11 ts:10.000000001").unwrap();
        assert_eq!(g.count, 1);
        for bad in [
            "",
            "# tracer: hwlat",
            "x [001] inner/outer(us): a/b ts:1.0",
            "sh-1 [001] .... 5.0: tracing_mark_write: inner/outer(us): 9999/9999 ts:1.0",
            "sh-1 [000] .... 5.0: tracing_mark_write: #1 inner/outer(us): 99999/0 ts:1.0",
            "x-1 [001] .... 1.0: #1 inner/outer(us): 1/2 ts:1.12345678é",
            "x-1 [001] .... 1.0: #1 inner/outer(us): 99999999999999999/2 ts:1.0",
            "[x] inner/outer(us): 1/2 ts:1.0",
        ] {
            assert!(parse_entry(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_cpumask_is_hex_in_32_bit_groups() {
        assert_eq!(cpumask(&CpuSet::parse("0-1").unwrap()), "00000003");
        assert_eq!(
            cpumask(&CpuSet::parse("1,33").unwrap()),
            "00000002,00000002"
        );
        assert_eq!(cpumask(&CpuSet::parse("31").unwrap()), "80000000");
    }
}
