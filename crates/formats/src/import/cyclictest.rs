//! cyclictest results in: its `--json` file and its text output (the `T:` summary lines and the `-h`/`-H`
//! histogram block, rt-tests 2.4 and 2.7+ layouts), read into one cyclic probe result.

use super::{
    bad, check_figures, flag_value, imported_document, not_recorded, read_avg, rfc2822_to_3339,
    sysinfo, Figures, ImportError, ImportedThread, Importer, Meta, CYCLICTEST_UNSET_MIN,
    MAX_BUCKETS, MAX_SAMPLES, MAX_THREADS,
};
use rtgauge_model::cyclic::{CyclicConfig, CyclicResult, CyclicThread, LinearHistogram};
use rtgauge_model::kind::StopReason;
use rtgauge_model::latency::{limit_warning, new_histogram, Beyond, Histogram, LatencyStats};
use rtgauge_model::rt::{SchedPolicy, Setting, ThreadConditions};
use rtgauge_model::run::RunDocument;
use serde_json::Value;

/// Import a cyclictest `--json` file.
pub fn parse_cyclictest_json(text: &str, file: &str) -> Result<RunDocument, ImportError> {
    let v: Value = serde_json::from_str(text).map_err(ImportError::Json)?;
    cyclictest_json(&v, file)
}

/// cyclictest `--json`.
#[derive(Debug, Clone, Copy)]
pub struct CyclictestJson;

impl Importer for CyclictestJson {
    fn import(&self, text: &str, file: &str) -> Result<RunDocument, ImportError> {
        parse_cyclictest_json(text, file)
    }
}

pub(super) fn cyclictest_json(v: &Value, file: &str) -> Result<RunDocument, ImportError> {
    let threads = v
        .get("thread")
        .and_then(Value::as_object)
        .ok_or(ImportError::Unrecognised)?;
    if threads
        .values()
        .next()
        .is_some_and(|t| t.get("cycles").is_none())
    {
        return Err(ImportError::Unrecognised);
    }
    let unit_ns: u64 = match v.get("resolution_in_ns").and_then(Value::as_u64) {
        Some(1) => 1,
        Some(0) | None => 1000,
        Some(other) => {
            return Err(bad(
                "resolution_in_ns",
                format!("{other} is neither 0 nor 1"),
            ))
        }
    };
    let mut out = Vec::with_capacity(threads.len());
    for (k, t) in threads {
        let index: u32 = k
            .parse()
            .map_err(|_| bad(format!("thread.{k}"), "thread keys must be numbers"))?;
        let path = format!("thread.{k}");
        let num = |f: &str| {
            t.get(f).and_then(Value::as_u64).ok_or_else(|| {
                bad(
                    format!("{path}.{f}"),
                    "missing or not a non-negative integer",
                )
            })
        };
        let buckets = match t.get("histogram") {
            None => None,
            Some(h) => {
                let h = h
                    .as_object()
                    .ok_or_else(|| bad(format!("{path}.histogram"), "not an object"))?;
                let mut pairs = Vec::with_capacity(h.len());
                for (b, c) in h {
                    let at = format!("{path}.histogram.{b}");
                    let b: u64 = b
                        .parse()
                        .map_err(|_| bad(&at, "bucket keys must be numbers"))?;
                    pairs.push((
                        b,
                        c.as_u64()
                            .ok_or_else(|| bad(&at, "count must be a non-negative integer"))?,
                    ));
                }
                Some(pairs)
            }
        };
        out.push(ImportedThread {
            index,
            cycles: num("cycles")?,
            min: num("min")?,
            max: num("max")?,
            avg: read_avg(t, &path)?,
            cpu: t
                .get("cpu")
                .and_then(Value::as_i64)
                .and_then(|c| u32::try_from(c).ok()),
            node: t
                .get("node")
                .and_then(Value::as_i64)
                .and_then(|c| u32::try_from(c).ok()),
            tid: 0,
            buckets,
            overflows: t.get("overflows").and_then(Value::as_u64),
            overflow_cycles: Vec::new(),
            interval_us: None,
        });
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let cmdline = s("cmdline:");
    // Thread i runs at -i + i × -d (cyclictest's defaults 1000 and 500 µs, -S included).
    let base = flag_value(&cmdline, "-i", "--interval").unwrap_or(1000);
    let distance = flag_value(&cmdline, "-d", "--distance").unwrap_or(500);
    for t in &mut out {
        t.interval_us = Some(
            u64::from(t.index)
                .checked_mul(distance)
                .and_then(|d| d.checked_add(base))
                .filter(|&i| i <= MAX_INTERVAL_US)
                .ok_or_else(|| bad("cmdline: -i/-d", "interval above an hour"))?,
        );
    }
    let meta = Meta {
        file,
        format: "cyclictest-json",
        unit_ns,
        interval_us: flag_value(&cmdline, "-i", "--interval").unwrap_or(1000),
        priority: flag_value(&cmdline, "-p", "--priority")
            .unwrap_or(0)
            .min(99) as i32,
        hist_range: flag_value(&cmdline, "-h", "--histogram")
            .or_else(|| flag_value(&cmdline, "-H", "--histofall")),
        cmdline,
        tool_version: s("rt_test_version:"),
        started_at: rfc2822_to_3339(&s("start_time")),
        ended_at: rfc2822_to_3339(&s("end_time")),
        system: sysinfo(v.get("sysinfo")),
    };
    cyclic_document(out, meta)
}

/// Numbers after a `# Label:` prefix (`# Max Latencies: 00601 00012`).
fn hash_values(line: &str, label: &str) -> Option<Vec<u64>> {
    let rest = line.strip_prefix(label)?;
    Some(
        rest.split_whitespace()
            .map_while(|w| w.parse().ok())
            .collect(),
    )
}

/// `T: 0 ( 1234) P:80 I:200 C:  25000 Min:      8 Act:   15 Avg:   14 Max:     601`
/// One cyclictest status line.
#[derive(Debug, Clone, Copy)]
struct TLine {
    index: u32,
    tid: i32,
    priority: i32,
    interval_us: u64,
    cycles: u64,
    min: u64,
    avg: u64,
    max: u64,
}

fn parse_t_line(line: &str) -> Option<TLine> {
    let rest = line.strip_prefix("T:")?;
    let (idx, rest) = rest.split_once('(')?;
    let (tid, rest) = rest.split_once(')')?;
    let field = |name: &str| -> Option<u64> {
        let at = rest.find(name)? + name.len();
        rest[at..].split_whitespace().next()?.parse().ok()
    };
    Some(TLine {
        index: idx.trim().parse().ok()?,
        tid: tid.trim().parse().ok()?,
        priority: field("P:")? as i32,
        interval_us: field("I:")?,
        cycles: field("C:")?,
        min: field("Min:")?,
        avg: field("Avg:")?,
        max: field("Max:")?,
    })
}

/// cyclictest text output.
#[derive(Debug, Clone, Copy)]
pub struct CyclictestText {
    /// 1000 (µs), or 1 for a run with `-N`.
    pub unit_ns: u64,
}

impl Importer for CyclictestText {
    fn import(&self, text: &str, file: &str) -> Result<RunDocument, ImportError> {
        parse_cyclictest_text(text, file, self.unit_ns)
    }
}

/// cyclictest's text does not say whether `-N` made its figures nanoseconds; read in the wrong unit they
/// are 1000× off, with no error. Two impossibilities tell: in µs, a min of at least the interval (and of
/// 1 ms) on every thread — every single wake-up a whole period late; in ns, a min below 100 ns on every
/// thread — faster than any timer interrupt path. Either is refused, naming the option that reads it.
fn check_text_unit(
    threads: &[ImportedThread],
    unit_ns: u64,
    interval_us: u64,
) -> Result<(), ImportError> {
    let measured: Vec<&ImportedThread> = threads.iter().filter(|t| t.cycles > 0).collect();
    let Some(first) = measured.first() else {
        return Ok(());
    };
    if unit_ns == 1000 && measured.iter().all(|t| t.min >= interval_us.max(1000)) {
        return Err(bad(
            format!("thread {}", first.index),
            format!(
                "min {} µs with a {interval_us} µs interval is no timer latency in µs: the file looks written with -N (ns); import it with --nsecs",
                first.min
            ),
        ));
    }
    if unit_ns == 1 && measured.iter().all(|t| t.min < 100) {
        return Err(bad(
            format!("thread {}", first.index),
            format!(
                "min {} ns is below any timer's wake-up path: the file looks written without -N (µs); import it without --nsecs",
                first.min
            ),
        ));
    }
    Ok(())
}

/// Import cyclictest's text output. `unit_ns`: 1000 (µs), or 1 when the run used `-N`.
pub fn parse_cyclictest_text(
    text: &str,
    file: &str,
    unit_ns: u64,
) -> Result<RunDocument, ImportError> {
    let parts = scan_text(text)?;
    // Threads by the index their T: lines name: a refreshed screen (cyclictest without -q) repeats them, the
    // last line of a thread holds its final figures; a file that skips a thread is refused, not zero-filled.
    let indices: std::collections::BTreeSet<u32> = parts.t_lines.iter().map(|t| t.index).collect();
    if let Some(&last) = indices.last() {
        if last as usize + 1 != indices.len() {
            let missing = (0..last).find(|i| !indices.contains(i)).unwrap_or(0);
            return Err(bad(
                "T: lines",
                format!("thread {missing} has no summary line (threads are numbered from 0)"),
            ));
        }
    }
    let n = parts
        .mins
        .as_ref()
        .map(Vec::len)
        .filter(|&n| n > 0)
        .unwrap_or(indices.len());
    if n == 0 {
        return Err(ImportError::Unrecognised);
    }
    if n > MAX_THREADS {
        return Err(bad("# Min Latencies", "more than 4096 threads"));
    }
    let have_hist = parts.mins.is_some();
    let mut threads: Vec<ImportedThread> = (0..n as u32)
        .map(|index| ImportedThread {
            index,
            ..ImportedThread::default()
        })
        .collect();
    if have_hist {
        from_histogram(&mut threads, &parts)?;
    }
    // Without -q cyclictest refreshes its screen: only each thread's last T: line holds its final figures.
    let last: std::collections::BTreeMap<u32, &TLine> =
        parts.t_lines.iter().map(|t| (t.index, t)).collect();
    let mut interval_us = 0;
    let mut priority = 0;
    for &&TLine {
        index: i,
        tid,
        priority: prio,
        interval_us: intv,
        cycles,
        min,
        avg,
        max,
    } in last.values()
    {
        let Some(t) = threads.get_mut(i as usize) else {
            continue;
        };
        t.tid = tid;
        t.interval_us = Some(intv);
        if i == 0 {
            interval_us = intv;
        }
        priority = prio;
        if !have_hist {
            (t.cycles, t.min, t.max, t.avg) = (cycles, min, max, Some(avg as f64));
        } else if cycles != t.cycles {
            return Err(bad(
                format!("T:{i:2} line"),
                format!(
                    "C: {cycles} but the histogram holds {} samples with its overflows",
                    t.cycles
                ),
            ));
        }
    }
    check_text_unit(&threads, unit_ns, interval_us)?;
    let meta = Meta {
        file,
        format: "cyclictest-text",
        unit_ns,
        interval_us,
        priority: priority.clamp(0, 99),
        hist_range: parts.rows.iter().map(|(b, _)| b + 1).max(),
        cmdline: String::new(),
        tool_version: String::new(),
        started_at: String::new(),
        ended_at: String::new(),
        system: sysinfo(None),
    };
    let mut doc = cyclic_document(threads, meta)?;
    doc.warnings
        .push("cyclictest's text prints whole units: averages are truncated".into());
    Ok(doc)
}

/// What cyclictest's text output holds: `T:` lines, histogram rows, the `#` summary lines.
#[derive(Debug, Default)]
struct TextParts {
    t_lines: Vec<TLine>,
    /// (bucket, one count per column).
    rows: Vec<(u64, Vec<u64>)>,
    mins: Option<Vec<u64>>,
    avgs: Option<Vec<u64>>,
    maxs: Option<Vec<u64>>,
    oflows: Option<Vec<u64>>,
    oflow_cycles: Vec<(u32, Vec<u64>)>,
}

/// Read cyclictest's text output line by line.
fn scan_text(text: &str) -> Result<TextParts, ImportError> {
    let mut p = TextParts::default();
    let mut in_hist = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let at = |what: &str| bad(format!("line {}", n + 1), what.to_string());
        if let Some(t) = parse_t_line(line.trim_start()) {
            p.t_lines.push(t);
        } else if line.trim_start().starts_with("T:") && line.contains(" Max:") {
            // A summary line whose figures do not parse (negative, past u64, cut short) would otherwise
            // leave its thread at zero latency.
            return Err(at(
                "a T: summary line whose figures are not non-negative integers",
            ));
        } else if line == "# Histogram" {
            in_hist = true;
        } else if let Some(v) = hash_values(line, "# Min Latencies:") {
            p.mins = Some(v);
            in_hist = false;
        } else if let Some(v) = hash_values(line, "# Avg Latencies:") {
            p.avgs = Some(v);
        } else if let Some(v) = hash_values(line, "# Max Latencies:") {
            p.maxs = Some(v);
        } else if let Some(v) = hash_values(line, "# Histogram Overflows:") {
            p.oflows = Some(v);
        } else if let Some(rest) = line.strip_prefix("# Thread ") {
            if let Some((i, list)) = rest.split_once(':') {
                let i: u32 = i.trim().parse().map_err(|_| at("thread number"))?;
                let cycles = list
                    .split('#')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                p.oflow_cycles.push((i, cycles));
            }
        } else if in_hist && !line.starts_with('#') && !line.trim().is_empty() {
            let mut f = line.split_whitespace();
            let bucket: u64 = f
                .next()
                .and_then(|b| b.parse().ok())
                .ok_or_else(|| at("histogram line without a bucket number"))?;
            let counts: Vec<u64> = f
                .map(|c| c.parse().map_err(|_| at("histogram count is not a number")))
                .collect::<Result<_, _>>()?;
            if bucket >= MAX_BUCKETS {
                return Err(at("bucket beyond 1,000,000"));
            }
            p.rows.push((bucket, counts));
        }
    }
    Ok(p)
}

/// The threads' figures from the histogram block and its `#` summary lines (`-h`/`-H` runs).
fn from_histogram(threads: &mut [ImportedThread], parts: &TextParts) -> Result<(), ImportError> {
    let n = threads.len();
    let col = |v: &Option<Vec<u64>>, name: &str| -> Result<Vec<u64>, ImportError> {
        let v = v.clone().ok_or_else(|| bad(name, "missing"))?;
        if v.len() < n {
            return Err(bad(name, format!("{} values for {n} threads", v.len())));
        }
        Ok(v)
    };
    let (mi, av, ma, of) = (
        col(&parts.mins, "# Min Latencies")?,
        col(&parts.avgs, "# Avg Latencies")?,
        col(&parts.maxs, "# Max Latencies")?,
        col(&parts.oflows, "# Histogram Overflows")?,
    );
    for (i, t) in threads.iter_mut().enumerate() {
        let mut pairs = Vec::new();
        for (b, counts) in &parts.rows {
            // -H adds a sum column: only the first n columns are threads.
            let c = counts.get(i).copied().ok_or_else(|| {
                bad(
                    format!("histogram bucket {b}"),
                    format!("{} columns for {n} threads", counts.len()),
                )
            })?;
            if c > 0 {
                pairs.push((*b, c));
            }
        }
        let sum = pairs
            .iter()
            .try_fold(0u64, |a, (_, c)| a.checked_add(*c))
            .ok_or_else(|| bad("# Histogram", "counts overflow"))?;
        t.min = mi[i];
        t.avg = Some(av[i] as f64);
        t.max = ma[i];
        t.overflows = Some(of[i]);
        t.cycles = sum.saturating_add(of[i]);
        t.buckets = Some(pairs);
    }
    for (i, c) in &parts.oflow_cycles {
        if let Some(t) = threads.get_mut(*i as usize) {
            t.overflow_cycles = c.clone();
        }
    }
    Ok(())
}

/// The longest period an imported thread may state, µs (an hour; cyclictest's are micro- to milliseconds).
const MAX_INTERVAL_US: u64 = 3_600_000_000;

/// Build the run document of an imported cyclictest run.
fn cyclic_document(
    mut imported: Vec<ImportedThread>,
    meta: Meta<'_>,
) -> Result<RunDocument, ImportError> {
    if imported.len() > MAX_THREADS {
        return Err(bad("thread", "more than 4096 threads"));
    }
    imported.sort_by_key(|t| t.index);
    let unit_ns = meta.unit_ns;
    let policy = if meta.priority > 0 {
        SchedPolicy::Fifo
    } else {
        SchedPolicy::Other
    };
    let mut warnings = Vec::new();
    // The distance between the threads' periods (cyclictest -d), where two threads state theirs.
    let distance_us = match imported.as_slice() {
        [a, b, ..] => a
            .interval_us
            .zip(b.interval_us)
            .map_or(0, |(a, b)| b.saturating_sub(a)),
        _ => 0,
    };
    let mut threads = Vec::with_capacity(imported.len());
    for t in imported {
        threads.push(cyclic_thread(t, &meta, policy, &mut warnings)?);
    }
    warnings.push(
        "cyclictest skips periods that were already over at wake-up: missed deadlines are unknown"
            .into(),
    );
    let result = CyclicResult {
        config: CyclicConfig {
            threads: threads.len() as u32,
            // 0: the file states no period (a histogram without T: lines).
            interval_ns: meta.interval_us.saturating_mul(1000),
            distance_ns: distance_us.saturating_mul(1000),
            policy,
            priority: meta.priority,
            priospread: false,
            cpus: threads.iter().map(|t| t.conditions.cpu.achieved).collect(),
            duration: None,
            loops: None,
            relative: false,
            skip_missed: true,
            hist_buckets: threads
                .iter()
                .filter_map(|t| t.linear.as_ref())
                .map(|l| l.buckets.len() as u32)
                .max(),
            unit_ns,
            spike_threshold_ns: None,
            break_threshold_ns: None,
            timeline_interval_ns: 1_000_000_000,
        },
        conditions: not_recorded(),
        threads,
        spikes: Vec::new(),
        spikes_total: 0,
        stop_reason: StopReason::Duration,
        break_hit: None,
        elapsed_ns: 0,
        accounting: None,
        why: None,
        load: None,
    };
    Ok(imported_document(
        meta,
        "cyclictest",
        result.into(),
        warnings,
    ))
}

/// One imported thread as a cyclic thread; what the file could not hold is said in `warnings`.
fn cyclic_thread(
    t: ImportedThread,
    meta: &Meta<'_>,
    policy: SchedPolicy,
    warnings: &mut Vec<String>,
) -> Result<CyclicThread, ImportError> {
    let unit_ns = meta.unit_ns;
    let path = format!("thread.{}", t.index);
    let mut t = checked_thread(t, &path)?;
    let too_large = || bad(&path, "value too large");
    let (min_ns, max_ns) = (
        t.min.checked_mul(unit_ns).ok_or_else(too_large)?,
        t.max.checked_mul(unit_ns).ok_or_else(too_large)?,
    );
    let mut hist = new_histogram();
    // cyclictest's JSON writes `"histogram": {}` when it ran without -h: no histogram either.
    let buckets = t
        .buckets
        .take()
        .filter(|pairs| !pairs.is_empty() || meta.hist_range.is_some());
    let (linear, beyond) = match buckets {
        None => (
            None,
            record_extremes(&t, min_ns, max_ns, &mut hist, warnings),
        ),
        Some(pairs) => {
            let (linear, beyond) = record_buckets(&mut t, pairs, meta, &path, &mut hist, warnings)?;
            (Some(linear), beyond)
        }
    };
    let latency = thread_latency(&t, unit_ns, &hist, (min_ns, max_ns), beyond, warnings);
    Ok(CyclicThread {
        windows: Default::default(),
        index: t.index,
        tid: t.tid,
        interval_ns: t
            .interval_us
            .unwrap_or(meta.interval_us)
            .checked_mul(1000)
            .filter(|&i| i <= MAX_INTERVAL_US * 1000)
            .ok_or_else(|| bad(format!("{path}.interval"), "above an hour"))?,
        conditions: imported_conditions(policy, meta.priority, t.cpu),
        node: t.node,
        cycles: t.cycles,
        missed_deadlines: 0,
        skipped_periods: 0,
        early_wakeups: 0,
        last_ns: 0,
        latency,
        linear,
        timeline: Vec::new(),
        timeline_dropped: 0,
        late_dropped: 0,
        late_coalesced: 0,
        late_merged: 0,
        disturbance: None,
    })
}

/// The thread's figures checked against each other and against what any run holds (`path` names it in
/// errors). A thread without a cycle keeps no minimum (cyclictest prints its initial 1000000).
fn checked_thread(t: ImportedThread, path: &str) -> Result<ImportedThread, ImportError> {
    check_figures(
        path,
        Figures {
            samples_word: "cycles",
            samples: t.cycles,
            min: t.min,
            avg: t.avg,
            max: t.max,
            unset_min: CYCLICTEST_UNSET_MIN,
            // JSON averages have 2 decimals, text ones are truncated: neither leaves [min, max].
            slack: 0.01,
        },
    )?;
    let t = ImportedThread {
        min: if t.cycles == 0 { 0 } else { t.min },
        ..t
    };
    if t.cycles > MAX_SAMPLES {
        return Err(bad(
            path,
            format!("{} samples: more than any run holds", t.cycles),
        ));
    }
    // A histogram bucket below the min or above the max holds samples the file says did not happen.
    if let Some(pairs) = &t.buckets {
        let held = pairs.iter().filter(|p| p.1 > 0).map(|p| p.0);
        if let (Some(lo), Some(hi)) = (held.clone().min(), held.max()) {
            if lo < t.min || hi > t.max {
                return Err(bad(
                    format!("{path}.histogram"),
                    format!(
                        "samples in bucket {} lie outside min {} .. max {}",
                        if lo < t.min { lo } else { hi },
                        t.min,
                        t.max
                    ),
                ));
            }
        }
    }
    Ok(t)
}

/// A thread without a histogram (cyclictest ran without -h): only min, avg and max are known. The extremes
/// are kept (the plots reach them), and every sample counts as beyond a histogram of limit 0, so no
/// percentile is ever read from these two.
fn record_extremes(
    t: &ImportedThread,
    min_ns: u64,
    max_ns: u64,
    hist: &mut Histogram,
    warnings: &mut Vec<String>,
) -> Option<Beyond> {
    let mut beyond = None;
    if t.cycles > 0 {
        hist.saturating_record(min_ns);
        if t.cycles > 1 {
            hist.saturating_record(max_ns);
        }
        beyond = Some(Beyond {
            limit_ns: 0,
            count: t.cycles,
        });
    }
    warnings.push(format!("thread {}: no histogram (cyclictest ran without -h): only min, avg and max are known, every percentile is unknown (> min)", t.index));
    beyond
}

/// A thread's histogram (`pairs`: bucket, count) as cyclictest kept it, recorded into `hist` at each
/// bucket's value; the samples beyond its range are stored at its edge, and said in `warnings`.
fn record_buckets(
    t: &mut ImportedThread,
    pairs: Vec<(u64, u64)>,
    meta: &Meta<'_>,
    path: &str,
    hist: &mut Histogram,
    warnings: &mut Vec<String>,
) -> Result<(LinearHistogram, Option<Beyond>), ImportError> {
    let unit_ns = meta.unit_ns;
    if let Some((b, _)) = pairs.iter().find(|(b, _)| *b >= MAX_BUCKETS) {
        return Err(bad(
            format!("{path}.histogram.{b}"),
            "bucket beyond 1,000,000",
        ));
    }
    let top = pairs.iter().map(|(b, _)| b + 1).max().unwrap_or(0);
    let n = meta.hist_range.unwrap_or(top).max(top);
    if n > MAX_BUCKETS {
        return Err(bad(
            format!("{path}.histogram"),
            "more than 1,000,000 buckets",
        ));
    }
    let mut buckets = vec![0u64; n as usize];
    let mut sum: u64 = 0;
    for (b, c) in pairs {
        buckets[b as usize] = c;
        sum = sum
            .checked_add(c)
            .ok_or_else(|| bad(format!("{path}.histogram"), "counts overflow"))?;
        hist.saturating_record_n(b.saturating_mul(unit_ns), c);
    }
    let overflows = match t.overflows {
        Some(o) => o,
        None => t.cycles.checked_sub(sum).ok_or_else(|| {
            bad(
                format!("{path}.histogram"),
                format!("holds {sum} samples but cycles is {}", t.cycles),
            )
        })?,
    };
    let mut beyond = None;
    if overflows > 0 {
        hist.saturating_record_n(n * unit_ns, overflows);
        warnings.push(format!(
            "thread {}: {overflows} samples were beyond the histogram range ({n} buckets); stored at its edge: percentiles among them are unknown, shown as lower bounds \"> limit\" (max is exact)",
            t.index
        ));
        beyond = Some(Beyond {
            limit_ns: n.saturating_mul(unit_ns),
            count: overflows,
        });
    }
    let linear = LinearHistogram {
        unit_ns,
        buckets,
        overflows,
        overflow_cycles: std::mem::take(&mut t.overflow_cycles),
    };
    Ok((linear, beyond))
}

/// The thread's latency from its histogram and exact extremes (`min_max_ns`); a limit some samples lie
/// beyond is said in `warnings`.
fn thread_latency(
    t: &ImportedThread,
    unit_ns: u64,
    hist: &Histogram,
    (min_ns, max_ns): (u64, u64),
    beyond: Option<Beyond>,
    warnings: &mut Vec<String>,
) -> LatencyStats {
    let sum_ns = t
        .avg
        .map_or(0, |a| (a * unit_ns as f64 * t.cycles as f64).round() as u64);
    let mut latency = LatencyStats::from_parts(hist, min_ns, max_ns, sum_ns, 0);
    latency.count = t.cycles;
    latency.mean_ns = t.avg.map_or(0.0, |a| a * unit_ns as f64);
    latency.beyond = beyond;
    if let Some(w) = beyond.and_then(|b| {
        limit_warning(
            &format!("thread {}", t.index),
            &latency,
            b.limit_ns,
            b.count,
        )
    }) {
        warnings.push(w);
    }
    latency
}

/// What an imported thread ran with: cyclictest's settings, as requested and achieved alike (the file does
/// not tell them apart).
fn imported_conditions(policy: SchedPolicy, priority: i32, cpu: Option<u32>) -> ThreadConditions {
    ThreadConditions {
        policy: Setting {
            requested: policy,
            achieved: policy,
            error: None,
        },
        priority: Setting {
            requested: priority,
            achieved: priority,
            error: None,
        },
        cpu: Setting {
            requested: cpu,
            achieved: cpu,
            error: None,
        },
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    fn line(index: u32, cycles: u64, max: &str) -> String {
        format!("T:{index:2} ( 1234) P:99 I:1000 C:{cycles:7} Min:      2 Act:    3 Avg:    3 Max:{max:>8}\n")
    }

    #[test]
    fn summary_lines_are_threads_by_index_and_bad_ones_are_refused() {
        // A refreshed screen repeats a thread's line: the last one holds its final figures.
        let d = parse_cyclictest_text(&(line(0, 500, "9") + &line(0, 1000, "12")), "r.txt", 1000)
            .unwrap();
        let c = d.probes[0]
            .downcast_ref::<rtgauge_model::cyclic::CyclicResult>()
            .expect("cyclic");
        assert_eq!(c.threads.len(), 1);
        assert_eq!(c.threads[0].latency.max_ns, 12_000);
        // A thread without its line is refused, not filled with zeros.
        let e = parse_cyclictest_text(&line(1, 1000, "12"), "o.txt", 1000).unwrap_err();
        assert!(
            e.to_string().contains("thread 0 has no summary line"),
            "{e}"
        );
        // Figures that are not non-negative integers are refused with the line.
        for max in ["-3", "99999999999999999999999"] {
            let e = parse_cyclictest_text(&line(0, 1000, max), "n.txt", 1000).unwrap_err();
            assert!(e.to_string().contains("line 1"), "{max}: {e}");
        }
    }
}
