//! The `osnoise` tracer with `OSNOISE_IRQ_DISABLE` (`kernel/trace/trace_osnoise.c`, Linux 6.3 and later;
//! rtla hwnoise's method): a kernel thread on every CPU in `osnoise/cpus` reads the clock with interrupts
//! off for `runtime_us` of every `period_us`; any gap at or above `tracing_thresh` is a noise (the event
//! `osnoise:sample_threshold`, in ns, with the count of interferences — NMIs — inside it), and each
//! period ends with a summary line per CPU (runtime, noise, % available, largest single noise, HW and NMI
//! counts, all µs).
//!
//! Unlike hwlat it runs in an instance of its own ([`INSTANCE`], traced with CLOCK_MONOTONIC), but its
//! `osnoise/` settings and `tracing_thresh` are global: [`FILES`] are saved and restored like hwlat's.
//! A period becomes one window ([`Periods`]): its largest noise (from the events, ns) or the summary's.

use super::{write, write_width_window, Entries, HwnoiseError};
use rtgauge_model::hwnoise::{HwGap, HwnoiseConfig};
use rtgauge_model::units::us_trunc;
use std::collections::BTreeMap;
use std::path::Path;

/// The probe's tracefs instance.
pub const INSTANCE: &str = "rtgauge-hwnoise";

/// The global files the setup changes, relative to tracefs (the instance is removed, not restored).
pub const FILES: &[&str] = &[
    "tracing_thresh",
    "osnoise/cpus",
    "osnoise/runtime_us",
    "osnoise/period_us",
    "osnoise/stop_tracing_us",
    "osnoise/stop_tracing_total_us",
    "osnoise/options",
];

/// The options the setup sets (and restores).
const OPTIONS: &[&str] = &["OSNOISE_WORKLOAD", "OSNOISE_IRQ_DISABLE"];

/// Whether the kernel has the osnoise tracer with the interrupts-off option.
pub fn offered(root: &Path) -> bool {
    let tracers = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    let options = std::fs::read_to_string(root.join("osnoise/options")).unwrap_or_default();
    tracers.split_whitespace().any(|t| t == "osnoise")
        && options
            .split_whitespace()
            .any(|w| w.trim_start_matches("NO_") == "OSNOISE_IRQ_DISABLE")
}

/// What the kernel lacks for this method, in words that follow "this kernel (…)".
pub fn lacking(root: &Path) -> &'static str {
    let tracers = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    if tracers.split_whitespace().any(|t| t == "osnoise") {
        "has the osnoise tracer but not its OSNOISE_IRQ_DISABLE option (Linux 6.3 added it)"
    } else {
        "has no osnoise tracer"
    }
}

/// For `osnoise/options`: the words of [`OPTIONS`] as they were set (`NO_OSNOISE_IRQ_DISABLE`), written
/// back one at a time; `None` for the other files.
pub fn restorable(file: &str, text: &str) -> Option<String> {
    (file == "osnoise/options").then_some(())?;
    Some(
        text.split_whitespace()
            .filter(|w| OPTIONS.contains(&w.trim_start_matches("NO_")))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Set the global settings, create the instance `dir` and switch the tracer on in it (the caller has saved
/// [`FILES`] and removes `dir` when done).
pub fn arm(root: &Path, dir: &Path, config: &HwnoiseConfig) -> Result<(), HwnoiseError> {
    std::fs::create_dir(dir).map_err(|err| HwnoiseError::Io {
        path: dir.display().to_string(),
        err,
    })?;
    write(
        root,
        "tracing_thresh",
        &us_trunc(config.threshold_ns).max(1).to_string(),
    )?;
    write(root, "osnoise/cpus", &cpus_value(&config.cpus.to_string()))?;
    write_width_window(
        root,
        ("osnoise/runtime_us", us_trunc(config.width_ns)),
        ("osnoise/period_us", us_trunc(config.window_ns)),
    )?;
    write(root, "osnoise/stop_tracing_us", "0")?;
    write(root, "osnoise/stop_tracing_total_us", "0")?;
    for o in OPTIONS {
        write(root, "osnoise/options", o)?;
    }
    write(dir, "trace_clock", "mono")?;
    write(dir, "events/osnoise/sample_threshold/enable", "1")?;
    write(dir, "tracing_on", "1")?;
    write(dir, "current_tracer", "osnoise")
}

/// What to write to `osnoise/cpus`: the list with a newline. The kernel copies the bytes written into a
/// buffer of their length and parses it as a string; without a terminator it reads past them (6.12 here:
/// the restore of "0-1" left "1" in place).
pub fn cpus_value(list: &str) -> String {
    format!("{}\n", list.trim())
}

/// One line of the instance's trace.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// `sample_threshold: start … duration N ns interference I`: one noise at or above the threshold.
    Noise {
        /// The CPU.
        cpu: u32,
        /// The line's stamp (CLOCK_MONOTONIC in the probe's instance), ns: the end of the noise.
        stamp_ns: u64,
        /// How long, ns.
        duration_ns: u64,
        /// Interferences (NMIs) inside it.
        interference: u64,
    },
    /// A period's summary: runtime, noise, % available, largest single noise, HW, NMI (IRQ, softirq and
    /// thread counts follow; with interrupts off they stay 0).
    Period {
        /// The CPU.
        cpu: u32,
        /// The line's stamp, ns.
        stamp_ns: u64,
        /// Time sampled, µs.
        runtime_us: u64,
        /// Noise in it, µs.
        noise_us: u64,
        /// The largest single noise, µs.
        max_single_us: u64,
        /// Noises with no interference in them (hardware).
        hw: u64,
        /// NMIs in the period.
        nmi: u64,
    },
}

/// Read one line of the trace: a noise, a period's summary, or `None` (headers, other events).
pub fn parse(line: &str) -> Option<Line> {
    let (cpu, stamp_ns, payload) = super::header(line)?;
    let words: Vec<&str> = payload.split_whitespace().collect();
    if let Some(rest) = payload.trim_start().strip_prefix("sample_threshold:") {
        let w: Vec<&str> = rest.split_whitespace().collect();
        let after_word = |name: &str| {
            w.iter()
                .position(|x| *x == name)
                .and_then(|i| w.get(i + 1))
                .and_then(|v| v.parse::<u64>().ok())
        };
        return Some(Line::Noise {
            cpu,
            stamp_ns,
            duration_ns: after_word("duration")?,
            interference: after_word("interference").unwrap_or(0),
        });
    }
    // The summary: nine numbers, the third a percentage.
    if words.len() != 9 || words[2].parse::<f64>().is_err() {
        return None;
    }
    let n = |i: usize| words[i].parse::<u64>().ok();
    for i in [6, 7, 8] {
        n(i)?;
    }
    Some(Line::Period {
        cpu,
        stamp_ns,
        runtime_us: n(0)?,
        noise_us: n(1)?,
        max_single_us: n(3)?,
        hw: n(4)?,
        nmi: n(5)?,
    })
}

/// The noises of each CPU's period so far, closed into a window by the period's summary.
#[derive(Debug, Default)]
pub struct Periods {
    open: BTreeMap<u32, Open>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Open {
    /// The largest noise, ns, and the stamp of its start.
    max_ns: u64,
    max_at: u64,
    /// Noises, and interferences inside them.
    noises: u64,
    interference: u64,
}

impl Periods {
    /// Take one line: a noise joins its CPU's period; a summary closes the period into a window (when any
    /// noise reached the threshold) and adds its runtime and noise to the CPU's totals.
    pub fn take(&mut self, line: &str, out: &mut Entries) {
        match parse(line) {
            Some(Line::Noise {
                cpu,
                stamp_ns,
                duration_ns,
                interference,
            }) => {
                let o = self.open.entry(cpu).or_default();
                o.noises += 1;
                o.interference = o.interference.saturating_add(interference);
                if duration_ns >= o.max_ns {
                    o.max_ns = duration_ns;
                    o.max_at = stamp_ns.saturating_sub(duration_ns);
                }
            }
            Some(Line::Period {
                cpu,
                stamp_ns,
                runtime_us,
                noise_us,
                max_single_us,
                hw,
                nmi,
            }) => {
                let t = out.totals.entry(cpu).or_default();
                t.0 = t.0.saturating_add(runtime_us.saturating_mul(1000));
                t.1 = t.1.saturating_add(noise_us.saturating_mul(1000));
                let o = self.open.remove(&cpu).unwrap_or_default();
                // The events are in ns; the summary's µs stand in where the events were lost.
                let max_ns = o.max_ns.max(max_single_us.saturating_mul(1000));
                if o.noises > 0 || hw > 0 || max_single_us > 0 {
                    let at = if o.noises > 0 { o.max_at } else { stamp_ns };
                    out.windows
                        .push((window(cpu, max_ns, o.noises.max(hw), nmi), at));
                }
            }
            None => {}
        }
    }

    /// The periods the run ended in: their noises as windows (no summary came; NMIs as counted inside
    /// the noises).
    pub fn finish(self, out: &mut Entries) {
        for (cpu, o) in self.open {
            if o.noises > 0 {
                out.windows
                    .push((window(cpu, o.max_ns, o.noises, o.interference), o.max_at));
            }
        }
    }
}

fn window(cpu: u32, max_ns: u64, count: u64, nmi_count: u64) -> HwGap {
    HwGap {
        cpu,
        at_ns: 0,
        inner_ns: max_ns,
        outer_ns: 0,
        count,
        nmi_count,
        nmi_ns: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOISE: &str = "       osnoise/1-170     [001] d...1     5.790581: sample_threshold: start 5.793067684 duration 106089 ns interference 0";
    const PERIOD: &str = "       osnoise/1-170     [001] ....1     8.696721: 900000     126507  85.94366    1169    239      0      0      0      0";

    #[test]
    fn a_noise_and_a_period_are_read_from_6_12s_lines() {
        assert_eq!(
            parse(NOISE),
            Some(Line::Noise {
                cpu: 1,
                stamp_ns: 5_790_581_000,
                duration_ns: 106_089,
                interference: 0
            })
        );
        assert_eq!(
            parse(PERIOD),
            Some(Line::Period {
                cpu: 1,
                stamp_ns: 8_696_721_000,
                runtime_us: 900_000,
                noise_us: 126_507,
                max_single_us: 1169,
                hw: 239,
                nmi: 0
            })
        );
        // A comm with spaces, brackets and a colon: the CPU is the bracket before the stamp.
        assert_eq!(
            parse("my task: [7] x-12  [003] d...1  5.5: 900000 0 100.00000 0 0 0 0 0 0"),
            Some(Line::Period {
                cpu: 3,
                stamp_ns: 5_500_000_000,
                runtime_us: 900_000,
                noise_us: 0,
                max_single_us: 0,
                hw: 0,
                nmi: 0
            })
        );
        for bad in [
            "",
            "# tracer: osnoise",
            "#           TASK-PID      CPU# |||||||   TIMESTAMP    IN US       IN US  AVAILABLE  IN US     HW    NMI    IRQ   SIRQ THREAD",
            "sh-1 [001] .... 5.0: tracing_mark_write: 900000 1 99.0 1 1 0 0 0 0",
            "x-1 [001] .... 5.0: sample_threshold: start 1.0 duration ten ns interference 0",
            "x-1 [001] .... 5.0: 900000 1 x 1 1 0 0 0 0",
            "x-1 [00x] .... 5.0: 900000 1 99.0 1 1 0 0 0 0",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_period_becomes_one_window_with_its_largest_noise_in_ns() {
        let mut p = Periods::default();
        let mut e = Entries::default();
        p.take(NOISE, &mut e);
        p.take(
            "osnoise/1-170 [001] d...1 5.900000: sample_threshold: start 5.9 duration 1169400 ns interference 1",
            &mut e,
        );
        // Another CPU's noise stays in its own period.
        p.take(
            "osnoise/0-169 [000] d...1 5.950000: sample_threshold: start 5.9 duration 50000 ns interference 0",
            &mut e,
        );
        p.take(PERIOD, &mut e);
        assert_eq!(e.windows.len(), 1);
        let (w, at) = &e.windows[0];
        assert_eq!((w.cpu, w.inner_ns, w.outer_ns), (1, 1_169_400, 0));
        assert_eq!((w.count, w.nmi_count), (239, 0), "the summary's HW count");
        assert_eq!(*at, 5_900_000_000 - 1_169_400);
        assert_eq!(e.totals[&1], (900_000_000, 126_507_000));
        // A quiet period adds to the totals, not to the windows.
        p.take(
            "osnoise/1-170 [001] ....1 9.7: 900000 0 100.00000 0 0 0 0 0 0",
            &mut e,
        );
        assert_eq!(e.windows.len(), 1);
        assert_eq!(e.totals[&1], (1_800_000_000, 126_507_000));
        // The run ends inside CPU 0's period: its noise is kept.
        p.finish(&mut e);
        assert_eq!(e.windows.len(), 2);
        assert_eq!((e.windows[1].0.cpu, e.windows[1].0.inner_ns), (0, 50_000));
    }

    #[test]
    fn only_the_options_the_probe_sets_are_restored() {
        assert_eq!(
            restorable(
                "osnoise/options",
                "NO_DEFAULTS NO_OSNOISE_WORKLOAD NO_PANIC_ON_STOP OSNOISE_IRQ_DISABLE"
            )
            .as_deref(),
            Some("NO_OSNOISE_WORKLOAD OSNOISE_IRQ_DISABLE")
        );
        assert_eq!(restorable("osnoise/cpus", "0-1"), None);
    }
}
