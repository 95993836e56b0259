//! rt-tests compatible output, rendered from model data: cyclictest's summary lines, its `-h` text histogram
//! (rt-tests ≥ 2.7 layout: all-zero buckets omitted, no `# Total:`) and its `--json` schema — the same keys,
//! including the odd `"cmdline:"` and `"rt_test_version:"`, but written by a JSON serialiser, so the output is
//! always valid JSON. Values are in the unit rt-tests would use: whole µs (truncated, as `calcdiff` does) or
//! ns with `-N`. [`RtTestsJson`] exports a stored run this way. `hwnoise --json`'s, in rt-tests' envelope,
//! is its kind's module ([`hwnoise`]).

pub mod hwnoise;

use rtgauge_model::cyclic::{CyclicResult, CyclicThread};
use rtgauge_model::latency::LiveThread;
use rtgauge_model::oslat::{OslatResult, OslatThread};
use rtgauge_model::run::{ProbeResult, RunDocument, SystemInfo};
use rtgauge_model::units::{secs_to_ms, us, us_f64, us_trunc};
use rtgauge_model::Nanos;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// Convert ns to the rt-tests output unit (µs truncated, or ns).
fn unit(ns: u64, unit_ns: u64) -> u64 {
    ns / unit_ns.max(1)
}

/// One cyclictest status line: `T: 0 ( 1234) P:90 I:200 C:  50000 Min:      3 Act:    5 Avg:    4 Max:      40`.
/// `interval` is printed in µs as cyclictest does, whatever the output unit.
pub fn render_summary_line(thread: &CyclicThread, unit_ns: u64) -> String {
    let min = unit(thread.latency.min_ns, unit_ns);
    let act = unit(thread.last_ns, unit_ns);
    let avg = unit(
        thread
            .latency
            .sum_ns
            .checked_div(thread.latency.count)
            .unwrap_or(0),
        unit_ns,
    );
    let max = unit(thread.latency.max_ns, unit_ns);
    let prio = thread.conditions.priority.achieved;
    let interval_us = us_trunc(thread.interval_ns);
    if unit_ns == 1 {
        format!(
            "T:{:2} ({:5}) P:{:2} I:{} C:{:7} Min:{:7} Act:{:8} Avg:{:8} Max:{:8}",
            thread.index, thread.tid, prio, interval_us, thread.cycles, min, act, avg, max
        )
    } else {
        format!(
            "T:{:2} ({:5}) P:{:2} I:{} C:{:7} Min:{:7} Act:{:5} Avg:{:5} Max:{:8}",
            thread.index, thread.tid, prio, interval_us, thread.cycles, min, act, avg, max
        )
    }
}

/// cyclictest's live screen while it runs (redrawn in place on a terminal): the policy and load average, then
/// one line per thread.
pub fn render_live_screen(
    policy: &str,
    loadavg: &str,
    threads: &[LiveThread],
    unit_ns: u64,
) -> String {
    let mut out = format!("policy: {policy}: loadavg: {loadavg}          \n\n");
    let u = |ns: u64| ns / unit_ns.max(1);
    for (i, t) in threads.iter().enumerate() {
        let min = if t.cycles == 0 { 0 } else { u(t.min_ns) };
        let _ = writeln!(
            out,
            "T:{:2} ({:5}) P:{:2} I:{} C:{:7} Min:{:7} Act:{:5} Avg:{:5} Max:{:8} Missed:{:6}",
            i,
            t.tid,
            t.priority,
            Nanos(t.interval_ns).as_us_trunc(),
            t.cycles,
            min,
            u(t.last_ns),
            u(t.avg_ns()),
            u(t.max_ns),
            t.missed
        );
    }
    out
}

/// cyclictest's text at exit, before its histogram: the summary line of each thread, then (rtgauge's
/// additions) the percentile table, and the spike list with `--spike`.
pub fn render_cyclic_summary(r: &CyclicResult, spikes: bool) -> String {
    let mut out = String::new();
    let unit_ns = r.config.unit_ns;
    for t in &r.threads {
        let _ = writeln!(out, "{}", render_summary_line(t, unit_ns));
    }
    out.push_str(&render_percentile_table(r));
    if spikes {
        for s in &r.spikes {
            let _ = writeln!(
                out,
                "T:{:2} Spike:{:8}: TS: {:12}",
                s.thread,
                s.latency_ns / unit_ns.max(1),
                Nanos(s.monotonic_ns).as_us_trunc()
            );
        }
        let _ = writeln!(out, "spikes = {}", r.spikes_total);
    }
    out
}

/// cyclictest's break lines after a `-b` threshold stopped the run (empty when none did).
pub fn render_break(r: &CyclicResult) -> String {
    let Some((thread, value)) = r.break_hit else {
        return String::new();
    };
    let tids: Vec<String> = r.threads.iter().map(|t| format!("{:05}", t.tid)).collect();
    let tid = r.threads.get(thread as usize).map_or(0, |t| t.tid);
    format!(
        "# Thread Ids: {}\n# Break thread: {tid}\n# Break value: {}\n",
        tids.join(" "),
        value / r.config.unit_ns.max(1)
    )
}

/// cyclictest's `-h`/`-H` text histogram block, from `# Histogram` to the overflow cycle lists.
pub fn render_histogram(result: &CyclicResult, with_sum: bool) -> String {
    let mut out = String::new();
    let threads = &result.threads;
    let nbuckets = threads
        .iter()
        .filter_map(|t| t.linear.as_ref())
        .map(|l| l.buckets.len())
        .max()
        .unwrap_or(0);
    let unit_ns = result.config.unit_ns;
    out.push_str("# Histogram\n");
    for b in 0..nbuckets {
        let counts: Vec<u64> = threads
            .iter()
            .map(|t| {
                t.linear
                    .as_ref()
                    .and_then(|l| l.buckets.get(b))
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        let sum: u64 = counts.iter().sum();
        if sum == 0 {
            continue;
        }
        let _ = write!(out, "{b:06} ");
        let cols: Vec<String> = counts.iter().map(|c| format!("{c:06}")).collect();
        out.push_str(&cols.join("\t"));
        if with_sum {
            let _ = write!(out, "\t{sum:06}");
        }
        out.push('\n');
    }
    let row = |label: &str, vals: Vec<u64>, total: Option<u64>| {
        let mut s = format!("# {label}:");
        for v in vals {
            let _ = write!(s, " {v:05}");
        }
        if let Some(t) = total {
            let _ = write!(s, " {t:05}");
        }
        s.push('\n');
        s
    };
    let multi = with_sum && threads.len() > 1;
    out.push_str(&row(
        "Min Latencies",
        threads
            .iter()
            .map(|t| unit(t.latency.min_ns, unit_ns))
            .collect(),
        None,
    ));
    out.push_str(&row(
        "Avg Latencies",
        threads
            .iter()
            .map(|t| {
                unit(
                    t.latency.sum_ns.checked_div(t.latency.count).unwrap_or(0),
                    unit_ns,
                )
            })
            .collect(),
        None,
    ));
    let maxes: Vec<u64> = threads
        .iter()
        .map(|t| unit(t.latency.max_ns, unit_ns))
        .collect();
    let maxmax = maxes.iter().copied().max().unwrap_or(0);
    out.push_str(&row("Max Latencies", maxes, multi.then_some(maxmax)));
    let oflows: Vec<u64> = threads
        .iter()
        .map(|t| t.linear.as_ref().map_or(0, |l| l.overflows))
        .collect();
    let total: u64 = oflows.iter().sum();
    out.push_str(&row("Histogram Overflows", oflows, multi.then_some(total)));
    out.push_str("# Histogram Overflow at cycle number:\n");
    for t in threads {
        let _ = write!(out, "# Thread {}: ", t.index);
        if let Some(l) = &t.linear {
            let cyc: Vec<String> = l
                .overflow_cycles
                .iter()
                .map(|c| format!("{c:05}"))
                .collect();
            out.push_str(&cyc.join(" "));
            let listed = l.overflow_cycles.len() as u64;
            if l.overflows > listed && listed as usize >= l.buckets.len() {
                let _ = write!(out, " # {:05} others", l.overflows - listed);
            }
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// The rt-tests JSON envelope (`rt_write_json`), shared by cyclictest and oslat.
pub struct Envelope<'a> {
    /// The command line, space-separated, as rt-tests writes it.
    pub cmdline: &'a str,
    /// Version of the tool that measured the run, written as `rt_test_version:`.
    pub version: &'a str,
    /// RFC 2822 local times, as rt-tests writes them.
    pub start_time: &'a str,
    /// End time, RFC 2822 local time.
    pub end_time: &'a str,
    /// The program's exit status, as rt-tests records it.
    pub return_code: i32,
    /// uname facts for the `sysinfo` object.
    pub system: &'a SystemInfo,
}

pub(crate) fn envelope(e: &Envelope<'_>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("file_version".into(), json!(1));
    m.insert("cmdline:".into(), json!(e.cmdline));
    m.insert("rt_test_version:".into(), json!(e.version));
    m.insert("start_time".into(), json!(e.start_time));
    m.insert("end_time".into(), json!(e.end_time));
    m.insert("return_code".into(), json!(e.return_code));
    m.insert(
        "sysinfo".into(),
        json!({
            "sysname": e.system.sysname,
            "nodename": e.system.nodename,
            "release": e.system.release,
            "version": e.system.version,
            "machine": e.system.machine,
            "realtime": i32::from(e.system.realtime),
        }),
    );
    m
}

/// cyclictest's `--json` document. Per thread, beyond rt-tests' keys, `"overflows"` is added when a histogram
/// was kept, so that `sum(histogram) + overflows == cycles` can be checked.
pub fn render_cyclictest_json(result: &CyclicResult, run_envelope: &Envelope<'_>) -> Value {
    let unit_ns = result.config.unit_ns.max(1);
    let mut m = envelope(run_envelope);
    m.insert("num_threads".into(), json!(result.threads.len()));
    m.insert("resolution_in_ns".into(), json!(u32::from(unit_ns == 1)));
    let mut threads = Map::new();
    for t in &result.threads {
        let mut o = Map::new();
        if let Some(l) = &t.linear {
            let h: Map<String, Value> = l
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (i.to_string(), json!(c)))
                .collect();
            o.insert("histogram".into(), Value::Object(h));
            o.insert("overflows".into(), json!(l.overflows));
        }
        o.insert("cycles".into(), json!(t.cycles));
        o.insert("min".into(), json!(unit(t.latency.min_ns, unit_ns)));
        o.insert("max".into(), json!(unit(t.latency.max_ns, unit_ns)));
        let avg = if t.latency.count == 0 {
            0.0
        } else {
            t.latency.mean_ns / unit_ns as f64
        };
        o.insert("avg".into(), json!((avg * 100.0).round() / 100.0));
        o.insert(
            "cpu".into(),
            json!(t.conditions.cpu.achieved.map_or(-1, i64::from)),
        );
        o.insert("node".into(), json!(t.node.map_or(-1, i64::from)));
        threads.insert(t.index.to_string(), Value::Object(o));
    }
    m.insert("thread".into(), Value::Object(threads));
    Value::Object(m)
}

/// rtgauge's own addition to the text summary: percentiles and missed deadlines per thread, in µs with
/// three decimals (ns precision).
pub fn render_percentile_table(result: &CyclicResult) -> String {
    let ps = rtgauge_model::latency::DEFAULT_PERCENTILES;
    let mut out = String::from("# Latency (µs)");
    out.push_str(&" ".repeat(2));
    for p in ps {
        let _ = write!(out, "{:>10}", format!("p{p}"));
    }
    let _ = writeln!(out, "{:>10}{:>10}", "max", "missed");
    for t in &result.threads {
        let _ = write!(out, "# T:{:2}          ", t.index);
        for p in ps {
            let v = t.latency.percentile(*p).unwrap_or(0);
            let _ = write!(out, "{:>10.3}", us(v));
        }
        let _ = writeln!(
            out,
            "{:>10.3}{:>10}",
            us(t.latency.max_ns),
            t.missed_deadlines
        );
    }
    out
}

/// oslat prints µs, or ns-precision µs (3 decimals) when the bucket width is not a whole µs.
fn oslat_precision(r: &OslatResult) -> usize {
    if r.config.bucket_width_ns.is_multiple_of(1000) {
        0
    } else {
        3
    }
}

/// A gap in oslat's unit: whole µs (truncated) at precision 0, µs with ns precision at precision 3.
fn oslat_value(ns: u64, precision: usize) -> String {
    if precision == 0 {
        us_trunc(ns).to_string()
    } else {
        format!("{:.3}", us(ns))
    }
}

/// Upper edge of oslat bucket `b`, µs (oslat's `bucket_to_lat`).
fn oslat_label(t: &OslatThread, b: usize) -> f64 {
    us(t.buckets.bias_ns + (b as u64 + 1) * t.buckets.width_ns)
}

/// oslat's final summary (`write_summary`), one column per CPU. The average is the exact mean of the gaps,
/// not oslat's mean of bucket upper edges (which is biased up by up to one bucket).
pub fn render_oslat_summary(result: &OslatResult, zero_omit: bool) -> String {
    let prec = oslat_precision(result);
    let mut out = String::new();
    let field = |out: &mut String, label: &str, vals: Vec<String>, end: &str| {
        let _ = write!(out, "{label:>12}:\t");
        for v in vals {
            let _ = write!(out, " {v}");
        }
        let _ = writeln!(out, "{end}");
    };
    let ts = &result.threads;
    field(
        &mut out,
        "Core",
        ts.iter().map(|t| t.cpu.to_string()).collect(),
        "",
    );
    let mhz = result.counter.frequency_hz / 1_000_000;
    field(
        &mut out,
        "Counter Freq",
        ts.iter().map(|_| mhz.to_string()).collect(),
        " (MHz)",
    );
    let nb = ts.iter().map(|t| t.buckets.counts.len()).max().unwrap_or(0);
    let mut dots = false;
    for b in 0..nb {
        let counts: Vec<u64> = ts
            .iter()
            .map(|t| t.buckets.counts.get(b).copied().unwrap_or(0))
            .collect();
        if zero_omit && b + 1 < nb && counts.iter().all(|&c| c == 0) {
            dots = true;
            continue;
        }
        if dots {
            out.push_str("    ...\n");
            dots = false;
        }
        let label = ts.first().map_or(0.0, |t| oslat_label(t, b));
        let name = format!("{label:03.prec$} (us)");
        let end = if b + 1 == nb {
            " (including overflows)"
        } else {
            ""
        };
        field(
            &mut out,
            &name,
            counts.iter().map(u64::to_string).collect(),
            end,
        );
    }
    field(
        &mut out,
        "Minimum",
        ts.iter()
            .map(|t| oslat_value(t.gaps.min_ns, prec))
            .collect(),
        " (us)",
    );
    field(
        &mut out,
        "Average",
        ts.iter()
            .map(|t| format!("{:.3}", us_f64(t.gaps.mean_ns)))
            .collect(),
        " (us)",
    );
    field(
        &mut out,
        "Maximum",
        ts.iter()
            .map(|t| oslat_value(t.gaps.max_ns, prec))
            .collect(),
        " (us)",
    );
    field(
        &mut out,
        "Max-Min",
        ts.iter()
            .map(|t| oslat_value(t.gaps.max_ns - t.gaps.min_ns.min(t.gaps.max_ns), prec))
            .collect(),
        " (us)",
    );
    field(
        &mut out,
        "Duration",
        ts.iter()
            .map(|t| format!("{:.3}", t.duration_ns as f64 / 1e9))
            .collect(),
        " (sec)",
    );
    out.push('\n');
    out
}

/// oslat's `--json` document. Beyond oslat's keys each thread has `"iterations"`, so that
/// `sum(histogram) == iterations` can be checked.
pub fn render_oslat_json(result: &OslatResult, run_envelope: &Envelope<'_>) -> Value {
    let prec = oslat_precision(result);
    let mut m = envelope(run_envelope);
    m.insert("num_threads".into(), json!(result.threads.len()));
    let mut threads = Map::new();
    let unit = |ns: u64| if prec == 0 { us_trunc(ns) } else { ns };
    for t in &result.threads {
        let mut o = Map::new();
        o.insert("cpu".into(), json!(t.cpu));
        o.insert(
            "freq".into(),
            json!(result.counter.frequency_hz / 1_000_000),
        );
        o.insert("min".into(), json!(unit(t.gaps.min_ns)));
        o.insert("avg".into(), json!(us_f64(t.gaps.mean_ns)));
        o.insert("max".into(), json!(unit(t.gaps.max_ns)));
        o.insert("duration".into(), json!(secs_to_ms(t.duration_ns)));
        o.insert("iterations".into(), json!(t.iterations));
        let h: Map<String, Value> = t
            .buckets
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| (format!("{:.prec$}", oslat_label(t, b)), json!(c)))
            .collect();
        o.insert("histogram".into(), Value::Object(h));
        threads.insert(t.index.to_string(), Value::Object(o));
    }
    m.insert("thread".into(), Value::Object(threads));
    Value::Object(m)
}

/// rtgauge's additions to oslat's summary: counter calibration, loop cost, gaps per second above the
/// thresholds, CPU availability, tail percentiles and the worst gaps with their times.
pub fn render_oslat_extras(result: &OslatResult, run_start_monotonic_ns: u64) -> String {
    let mut out = String::new();
    let c = &result.counter;
    let _ = writeln!(
        out,
        "# Counter: {} at {:.3} MHz ({}; spread {:.0} ppm; whole-run cross-check {:+.1} ppm)",
        c.source,
        c.frequency_hz as f64 / 1e6,
        c.calibration,
        c.calibration_spread_ppm,
        c.cross_check_ppm
    );
    let thr: Vec<String> = result
        .config
        .thresholds_ns
        .iter()
        .map(|t| format!(">{}µs/s", us_trunc(*t)))
        .collect();
    let _ = write!(out, "# {:>4} {:>13} {:>8}", "CPU", "iterations", "loop ns");
    for t in &thr {
        let _ = write!(out, " {t:>9}");
    }
    let _ = writeln!(
        out,
        " {:>11} {:>10} {:>10}",
        format!(
            "avail(>{}µs)",
            us_trunc(result.config.availability_threshold_ns)
        ),
        "p99.99 µs",
        "max µs"
    );
    for t in &result.threads {
        let _ = write!(
            out,
            "# {:>4} {:>13} {:>8.2}",
            t.cpu, t.iterations, t.loop_ns
        );
        for o in &t.over_thresholds {
            let _ = write!(out, " {:>9.2}", o.per_second);
        }
        let _ = writeln!(
            out,
            " {:>11} {:>10.3} {:>10.3}",
            t.availability_pct
                .map_or("-".into(), |a| format!("{a:.4}%")),
            us(t.gaps.percentile(99.99).unwrap_or(0)),
            us(t.gaps.max_ns)
        );
    }
    for t in &result.threads {
        if let Some(b) = &t.bookkeeping {
            let _ = writeln!(
                out,
                "# CPU {}: the loop's own bookkeeping, not counted as gaps: {} blocks, {:.1} µs ({:.3} % of \
                 the run), longest {:.3} µs; {} interrupted, left in their gaps",
                t.cpu,
                b.blocks,
                us(b.total_ns),
                b.total_ns as f64 * 100.0 / t.duration_ns.max(1) as f64,
                us(b.max_ns),
                b.interrupted
            );
        }
    }
    for t in &result.threads {
        let shown: Vec<String> = t
            .worst
            .iter()
            .take(5)
            .map(|g| {
                format!(
                    "{:.3} µs at +{:.3} s",
                    us(g.gap_ns),
                    g.monotonic_ns.saturating_sub(run_start_monotonic_ns) as f64 / 1e9
                )
            })
            .collect();
        if !shown.is_empty() {
            let _ = writeln!(out, "# Worst gaps on CPU {}: {}", t.cpu, shown.join(", "));
        }
    }
    out
}

/// `export --format rt-tests`: the rt-tests JSON of a stored run's first cyclic probe (or first oslat probe).
#[derive(Debug, Clone, Copy)]
pub struct RtTestsJson;

impl crate::Exporter for RtTestsJson {
    fn export(&self, document: &RunDocument) -> Result<Vec<u8>, crate::ExportError> {
        Ok((serde_json::to_string_pretty(&render_rt_tests(document)?)? + "\n").into_bytes())
    }
}

/// rt-tests JSON of the run's first cyclic probe (or first oslat probe).
pub fn render_rt_tests(document: &RunDocument) -> Result<Value, crate::ExportError> {
    let cmdline = document.command_line.join(" ");
    let (start, end) = (
        crate::envelope::rfc2822(&document.started_at),
        crate::envelope::rfc2822(&document.ended_at),
    );
    let env = Envelope {
        cmdline: &cmdline,
        version: &document.tool.version,
        start_time: &start,
        end_time: &end,
        return_code: 0,
        system: &document.system,
    };
    // rt-tests formats exist for these two kinds only.
    let cyclic = document
        .probes
        .iter()
        .find_map(ProbeResult::downcast_ref::<CyclicResult>);
    if let Some(c) = cyclic {
        return Ok(render_cyclictest_json(c, &env));
    }
    let oslat = document
        .probes
        .iter()
        .find_map(ProbeResult::downcast_ref::<OslatResult>);
    match oslat {
        Some(o) => Ok(render_oslat_json(o, &env)),
        None => Err(crate::ExportError::NoRtTestsResult),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::cyclic::{CyclicConfig, LinearHistogram};
    use rtgauge_model::kind::StopReason;
    use rtgauge_model::latency::{new_histogram, LatencyStats};
    use rtgauge_model::rt::{ProcessConditions, SchedPolicy, Setting, ThreadConditions};
    use rtgauge_model::CpuSet;

    /// The monitor's `--store-every` absorbs its 10 s segments into one thread (8,640 a day; 600 here, each
    /// a histogram decode and encode): its timeline stays within `MAX_TIMELINE` entries, keeps every sample
    /// counted and the one spike as its bucket's worst.
    #[test]
    fn a_day_of_monitor_segments_keeps_a_bounded_timeline_and_its_worst_sample() {
        use rtgauge_model::latency::{TimelineEntry, MAX_TIMELINE};
        let seg = |spike: bool| {
            let mut t = thread(0, &[10_000, 12_000], 4);
            t.timeline = (0..10)
                .map(|i| TimelineEntry {
                    start_ns: i * 1_000_000_000,
                    count: 1_000,
                    max_ns: if spike && i == 7 { 950_000 } else { 20_000 },
                    missed: 0,
                })
                .collect();
            t
        };
        let mut day = seg(false);
        let mut span = 1_000_000_000;
        for k in 1..600u64 {
            day.absorb(seg(k == 400), k * 10_000_000_000, &mut span);
        }
        assert!(day.timeline.len() <= MAX_TIMELINE, "{}", day.timeline.len());
        assert_eq!(day.timeline.iter().map(|e| e.count).sum::<u64>(), 6_000_000);
        let worst = day
            .timeline
            .iter()
            .max_by_key(|e| e.max_ns)
            .expect("entries");
        assert_eq!(worst.max_ns, 950_000);
        let at = 400 * 10_000_000_000 + 7_000_000_000;
        assert!(
            worst.start_ns <= at && at < worst.start_ns + span,
            "the spike's bucket"
        );
        assert_eq!(span, 4_000_000_000, "1 s buckets doubled twice for 6,000 s");
    }

    fn thread(index: u32, samples: &[u64], buckets: usize) -> CyclicThread {
        let mut h = new_histogram();
        let mut lin = vec![0u64; buckets];
        let mut over = 0;
        let mut oc = vec![];
        for (c, &s) in samples.iter().enumerate() {
            h.record(s).unwrap();
            match lin.get_mut((s / 1000) as usize) {
                Some(b) => *b += 1,
                None => {
                    over += 1;
                    oc.push(c as u64)
                }
            }
        }
        let min = *samples.iter().min().unwrap();
        let max = *samples.iter().max().unwrap();
        CyclicThread {
            windows: Default::default(),
            index,
            tid: 4242 + index as i32,
            interval_ns: 200_000,
            conditions: ThreadConditions {
                policy: Setting {
                    requested: SchedPolicy::Fifo,
                    achieved: SchedPolicy::Fifo,
                    error: None,
                },
                priority: Setting {
                    requested: 90,
                    achieved: 90,
                    error: None,
                },
                cpu: Setting {
                    requested: Some(index),
                    achieved: Some(index),
                    error: None,
                },
            },
            node: Some(0),
            cycles: samples.len() as u64,
            missed_deadlines: 0,
            skipped_periods: 0,
            early_wakeups: 0,
            last_ns: *samples.last().unwrap(),
            latency: LatencyStats::from_parts(&h, min, max, samples.iter().sum(), 0),
            linear: Some(LinearHistogram {
                unit_ns: 1000,
                buckets: lin,
                overflows: over,
                overflow_cycles: oc,
            }),
            timeline: vec![],
            timeline_dropped: 0,
            late_dropped: 0,
            late_coalesced: 0,
            late_merged: 0,
            disturbance: None,
        }
    }

    fn result() -> CyclicResult {
        CyclicResult {
            config: CyclicConfig {
                threads: 2,
                interval_ns: 200_000,
                distance_ns: 0,
                policy: SchedPolicy::Fifo,
                priority: 90,
                priospread: false,
                cpus: vec![Some(0), Some(1)],
                duration: Some(rtgauge_model::Nanos::from_secs(1)),
                loops: None,
                relative: false,
                skip_missed: false,
                hist_buckets: Some(10),
                unit_ns: 1000,
                spike_threshold_ns: None,
                break_threshold_ns: None,
                timeline_interval_ns: 1_000_000_000,
            },
            conditions: ProcessConditions {
                mlockall: Setting {
                    requested: true,
                    achieved: true,
                    error: None,
                },
                cpu_dma_latency_us: Setting {
                    requested: Some(0),
                    achieved: Some(0),
                    error: None,
                },
                cpu_dma_latency_before_us: Some(2_000_000_000),
                main_affinity: Setting {
                    requested: None,
                    achieved: Some(CpuSet::new([0])),
                    error: None,
                },
                contended: Vec::new(),
            },
            threads: vec![
                thread(0, &[3_100, 3_900, 5_000, 12_500], 10),
                thread(1, &[2_999, 4_000, 4_001], 10),
            ],
            spikes: vec![],
            spikes_total: 0,
            stop_reason: StopReason::Duration,
            break_hit: None,
            elapsed_ns: 1_000_000_000,
            accounting: None,
            why: None,
            load: None,
        }
    }

    #[test]
    fn summary_line_matches_cyclictest_layout() {
        let r = result();
        assert_eq!(
            render_summary_line(&r.threads[0], 1000),
            "T: 0 ( 4242) P:90 I:200 C:      4 Min:      3 Act:   12 Avg:    6 Max:      12"
        );
        assert_eq!(
            render_summary_line(&r.threads[0], 1),
            "T: 0 ( 4242) P:90 I:200 C:      4 Min:   3100 Act:   12500 Avg:    6125 Max:   12500"
        );
    }

    #[test]
    fn histogram_block_matches_rt_tests_2_7() {
        let text = render_histogram(&result(), true);
        insta::assert_snapshot!(text, @r"
        # Histogram
        000002 000000	000001	000001
        000003 000002	000000	000002
        000004 000000	000002	000002
        000005 000001	000000	000001
        # Min Latencies: 00003 00002
        # Avg Latencies: 00006 00003
        # Max Latencies: 00012 00004 00012
        # Histogram Overflows: 00001 00000 00001
        # Histogram Overflow at cycle number:
        # Thread 0: 00003
        # Thread 1: 
        ");
    }

    #[test]
    fn json_is_rt_tests_schema_and_escapes_cmdline() {
        let sys = SystemInfo {
            sysname: "Linux".into(),
            nodename: "h\"ost".into(),
            release: "6.1".into(),
            version: "#1 SMP".into(),
            machine: "x86_64".into(),
            realtime: true,
            cpus_online: CpuSet::new([0, 1]),
            clocksource: None,
        };
        let env = Envelope {
            cmdline: "rtgauge cyclic --histfile='a\"b'",
            version: "0.1.0",
            start_time: "Sun, 22 Nov 2026 11:08:50 +0000",
            end_time: "Sun, 22 Nov 2026 11:08:55 +0000",
            return_code: 0,
            system: &sys,
        };
        let v = render_cyclictest_json(&result(), &env);
        let text = serde_json::to_string_pretty(&v).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["cmdline:"], "rtgauge cyclic --histfile='a\"b'");
        assert_eq!(back["sysinfo"]["realtime"], 1);
        assert_eq!(back["num_threads"], 2);
        let t0 = &back["thread"]["0"];
        assert_eq!(t0["histogram"]["3"], 2);
        let hsum: u64 = t0["histogram"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(
            hsum + t0["overflows"].as_u64().unwrap(),
            t0["cycles"].as_u64().unwrap()
        );
        assert_eq!(t0["min"], 3);
        assert_eq!(t0["max"], 12);
        assert_eq!(t0["avg"], 6.13);
        assert_eq!(t0["cpu"], 0);
    }
}
