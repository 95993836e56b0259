//! Importing rt-tests results into run documents, so that runs taken with cyclictest or oslat elsewhere can
//! be stored, reported and compared like rtgauge's own. Pure: text in, document out; every error names what
//! was wrong and where.
//!
//! Accepted:
//! - cyclictest JSON (rt-tests ≥ 2.0, `rt_write_json()` + `write_stats()`): per thread `cycles`, `min`,
//!   `max`, `avg` in µs (ns with `resolution_in_ns: 1`), optional `histogram` of non-zero 1-unit buckets;
//! - cyclictest text: the `T:` summary lines and/or the `-h`/`-H` histogram block, in both layouts — v2.4
//!   (every bucket, `# Total:`) and v2.7+ (zero buckets omitted) — with the `-H` sum column, overflow
//!   counts and overflow cycle lists. Text carries no unit: µs unless the caller says ns (`-N`);
//! - oslat JSON (`write_summary_json()`): per thread `cpu`, `freq`, `min`, `avg`, `max`, `duration` and a
//!   histogram keyed by bucket upper edges;
//! - oslat text (`write_summary()`, rt-tests 2.x): `Core:`, `Counter Freq:`, the `NNN (us):` bucket rows
//!   (the last `(including overflows)`), `Minimum`, `Average`, `Maximum`, `Max-Min`, `Duration`, one
//!   column per core. It is read into the JSON's shape and imported by the same code, so the text and the
//!   JSON of one run store the same result (the text's average has 3 decimals).
//!
//! The interval, priority and `-h` range are read from the command line when the file has one. What the
//! tools do not keep is not invented: samples beyond a histogram's range are known only by their count (and
//! the exact max), so they are stored at the range's edge with a warning that percentiles there are lower
//! bounds; cyclictest's skipped periods (missed deadlines) are unknown.

use rtgauge_model::cyclic::{
    CyclicConfig, CyclicResult, CyclicThread, LinearHistogram, StopReason,
};
use rtgauge_model::latency::{limit_warning, new_histogram, Beyond, LatencyStats};
use rtgauge_model::oslat::{
    CounterInfo, OslatBuckets, OslatConfig, OslatResult, OslatThread, Workload,
};
use rtgauge_model::rt::{ProcessConditions, SchedPolicy, Setting, ThreadConditions};
use rtgauge_model::run::{ImportSource, ProbeResult, RunDocument, RunStatus, SystemInfo, ToolInfo};
use rtgauge_model::CpuSet;
use serde_json::Value;

/// Why a file could not be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
    #[error("not a cyclictest or oslat result (JSON with a \"thread\" object, or cyclictest's text output)")]
    Unrecognised,
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> ImportError {
    ImportError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Most threads and buckets accepted (cyclictest's own limits).
const MAX_THREADS: usize = 4096;
const MAX_BUCKETS: u64 = 1_000_000;

/// Import any supported rt-tests result: JSON (cyclictest or oslat) or cyclictest text.
/// `text_unit_ns` is the unit of cyclictest text output (1000, or 1 for `-N`).
pub fn parse_rt_tests(
    text: &str,
    file: &str,
    text_unit_ns: u64,
) -> Result<RunDocument, ImportError> {
    if text.trim_start().starts_with('{') {
        let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json(e.to_string()))?;
        if v.get("schema_version").is_some() && v.get("probes").is_some() {
            return native(v);
        }
        let first = v
            .get("thread")
            .and_then(Value::as_object)
            .and_then(|t| t.values().next());
        if first.is_some_and(|t| t.get("freq").is_some() && t.get("cycles").is_none()) {
            return oslat_json(&v, file);
        }
        return cyclictest_json(&v, file);
    }
    if text
        .lines()
        .any(|l| l.trim_start().starts_with("Counter Freq:"))
    {
        return parse_oslat_text(text, file);
    }
    parse_cyclictest_text(text, file, text_unit_ns)
}

/// oslat's text summary: read into the shape of its JSON (same keys, same units) and imported as such.
pub fn parse_oslat_text(text: &str, file: &str) -> Result<RunDocument, ImportError> {
    use serde_json::{json, Map};
    // The whitespace-separated columns after `label:`, without a trailing `(unit)`/`(including …)`.
    fn cols<'a>(line: &'a str, label: &str) -> Option<Vec<&'a str>> {
        let rest = line.trim_start().strip_prefix(label)?;
        let rest = rest.split('(').next().unwrap_or("");
        Some(rest.split_whitespace().collect())
    }
    let mut cores: Option<Vec<u64>> = None;
    let mut rows: Vec<(String, Vec<u64>)> = Vec::new();
    let mut fields: Map<String, Value> = Map::new();
    let mut version = String::new();
    for (n, line) in text.lines().enumerate() {
        let at = |what: &str| bad(format!("line {}", n + 1), what.to_string());
        let ints = |v: Vec<&str>| -> Result<Vec<u64>, ImportError> {
            v.iter()
                .map(|x| x.parse::<u64>().map_err(|_| at("expected whole numbers")))
                .collect()
        };
        let t = line.trim();
        if let Some(v) = t.strip_prefix("oslat V ") {
            version = v.trim().to_string();
        } else if let Some(c) = cols(line, "Core:") {
            cores = Some(ints(c)?);
        } else if let Some(c) = cols(line, "Counter Freq:") {
            fields.insert("freq".into(), json!(ints(c)?));
        } else if let Some((edge, rest)) = t.split_once(" (us):") {
            if edge.is_empty() || !edge.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return Err(at("bucket label must be a number of µs"));
            }
            let counts = ints(
                rest.split('(')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect(),
            )?;
            rows.push((edge.to_string(), counts));
        } else {
            for (label, key) in [
                ("Minimum:", "min"),
                ("Average:", "avg"),
                ("Maximum:", "max"),
                ("Duration:", "duration"),
            ] {
                if let Some(c) = cols(line, label) {
                    let v: Vec<Value> = c
                        .iter()
                        .map(|x| match (x.parse::<u64>(), x.parse::<f64>()) {
                            (Ok(i), _) => Ok(json!(i)),
                            (_, Ok(f)) if f.is_finite() => Ok(json!(f)),
                            _ => Err(at("expected numbers")),
                        })
                        .collect::<Result<_, _>>()?;
                    fields.insert(key.into(), Value::Array(v));
                }
            }
        }
    }
    let cores = cores.ok_or_else(|| bad("Core:", "missing (not oslat's text summary)"))?;
    if cores.len() > MAX_THREADS {
        return Err(bad("Core:", "more than 4096 cores"));
    }
    let mut threads = Map::new();
    for (i, cpu) in cores.iter().enumerate() {
        let mut t = Map::new();
        t.insert("cpu".into(), json!(cpu));
        for key in ["freq", "min", "avg", "max", "duration"] {
            let v = fields
                .get(key)
                .and_then(|v| v.get(i))
                .ok_or_else(|| bad(key, format!("no value for core {cpu}")))?;
            t.insert(key.into(), v.clone());
        }
        let mut h = Map::new();
        for (edge, counts) in &rows {
            let c = counts
                .get(i)
                .ok_or_else(|| bad(format!("{edge} (us)"), format!("no count for core {cpu}")))?;
            h.insert(edge.clone(), json!(c));
        }
        t.insert("histogram".into(), Value::Object(h));
        threads.insert(i.to_string(), Value::Object(t));
    }
    let v = json!({ "rt_test_version:": version, "thread": threads });
    let mut doc = oslat_json(&v, file)?;
    if let Some(src) = doc.imported_from.as_mut() {
        src.format = "oslat-text".into();
    }
    Ok(doc)
}

/// An rtgauge run document (`export --format json`, `run --output`), e.g. moved from another machine.
fn native(v: Value) -> Result<RunDocument, ImportError> {
    let version = v.get("schema_version").and_then(Value::as_u64).unwrap_or(0);
    if version > u64::from(rtgauge_model::SCHEMA_VERSION) {
        return Err(bad(
            "schema_version",
            format!(
                "{version} is newer than this rtgauge reads ({})",
                rtgauge_model::SCHEMA_VERSION
            ),
        ));
    }
    serde_json::from_value(v)
        .map_err(|e| ImportError::Json(format!("not a valid run document: {e}")))
}

/// Import a cyclictest `--json` file.
pub fn parse_cyclictest_json(text: &str, file: &str) -> Result<RunDocument, ImportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json(e.to_string()))?;
    cyclictest_json(&v, file)
}

/// The value of a flag in a cyclictest command line (`-i 200`, `-i200`, `--interval=200`).
fn flag_value(cmdline: &str, short: &str, long: &str) -> Option<u64> {
    let words: Vec<&str> = cmdline.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let v = if *w == short || *w == long {
            words.get(i + 1).copied()
        } else if let Some(rest) = w.strip_prefix(&format!("{long}=")) {
            Some(rest)
        } else if short.len() == 2 && w.starts_with(short) && w.len() > 2 && !w.starts_with("--") {
            Some(&w[2..])
        } else {
            None
        };
        if let Some(n) = v.and_then(|v| v.parse().ok()) {
            return Some(n);
        }
    }
    None
}

fn rfc2822_to_3339(s: &str) -> String {
    chrono::DateTime::parse_from_rfc2822(s)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|_| s.to_string())
}

/// One cyclictest thread as any format gives it, in the file's unit.
#[derive(Debug, Default)]
struct ImportedThread {
    index: u32,
    cycles: u64,
    min: u64,
    max: u64,
    avg: Option<f64>,
    cpu: Option<u32>,
    node: Option<u32>,
    tid: i32,
    /// (bucket, count) pairs, if a histogram was kept.
    buckets: Option<Vec<(u64, u64)>>,
    overflows: Option<u64>,
    overflow_cycles: Vec<u64>,
}

/// What the whole file says about the run.
struct Meta<'a> {
    file: &'a str,
    format: &'a str,
    unit_ns: u64,
    interval_us: u64,
    priority: i32,
    hist_range: Option<u64>,
    cmdline: String,
    tool_version: String,
    started_at: String,
    ended_at: String,
    system: SystemInfo,
}

fn cyclictest_json(v: &Value, file: &str) -> Result<RunDocument, ImportError> {
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
            avg: t
                .get("avg")
                .and_then(Value::as_f64)
                .filter(|a| a.is_finite() && *a >= 0.0),
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
        });
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let cmdline = s("cmdline:");
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

fn sysinfo(sys: Option<&Value>) -> SystemInfo {
    let ss = |k: &str| {
        sys.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    SystemInfo {
        sysname: ss("sysname"),
        nodename: ss("nodename"),
        release: ss("release"),
        version: ss("version"),
        machine: ss("machine"),
        realtime: sys.and_then(|x| x.get("realtime")).and_then(Value::as_i64) == Some(1),
        cpus_online: CpuSet::default(),
        clocksource: None,
    }
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

/// Import cyclictest's text output. `unit_ns`: 1000 (µs), or 1 when the run used `-N`.
pub fn parse_cyclictest_text(
    text: &str,
    file: &str,
    unit_ns: u64,
) -> Result<RunDocument, ImportError> {
    let mut t_lines = Vec::new();
    let mut rows: Vec<(u64, Vec<u64>)> = Vec::new();
    let (mut mins, mut avgs, mut maxs, mut oflows) = (None, None, None, None);
    let mut oflow_cycles: Vec<(u32, Vec<u64>)> = Vec::new();
    let mut in_hist = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let at = |what: &str| bad(format!("line {}", n + 1), what.to_string());
        if let Some(t) = parse_t_line(line.trim_start()) {
            t_lines.push(t);
        } else if line == "# Histogram" {
            in_hist = true;
        } else if let Some(v) = hash_values(line, "# Min Latencies:") {
            mins = Some(v);
            in_hist = false;
        } else if let Some(v) = hash_values(line, "# Avg Latencies:") {
            avgs = Some(v);
        } else if let Some(v) = hash_values(line, "# Max Latencies:") {
            maxs = Some(v);
        } else if let Some(v) = hash_values(line, "# Histogram Overflows:") {
            oflows = Some(v);
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
                oflow_cycles.push((i, cycles));
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
            rows.push((bucket, counts));
        }
    }
    let n = mins
        .as_ref()
        .map(Vec::len)
        .filter(|&n| n > 0)
        .unwrap_or(t_lines.len());
    if n == 0 {
        return Err(ImportError::Unrecognised);
    }
    if n > MAX_THREADS {
        return Err(bad("# Min Latencies", "more than 4096 threads"));
    }
    let have_hist = mins.is_some();
    let mut threads: Vec<ImportedThread> = (0..n as u32)
        .map(|index| ImportedThread {
            index,
            ..ImportedThread::default()
        })
        .collect();
    if have_hist {
        let col = |v: &Option<Vec<u64>>, name: &str| -> Result<Vec<u64>, ImportError> {
            let v = v.clone().ok_or_else(|| bad(name, "missing"))?;
            if v.len() < n {
                return Err(bad(name, format!("{} values for {n} threads", v.len())));
            }
            Ok(v)
        };
        let (mi, av, ma, of) = (
            col(&mins, "# Min Latencies")?,
            col(&avgs, "# Avg Latencies")?,
            col(&maxs, "# Max Latencies")?,
            col(&oflows, "# Histogram Overflows")?,
        );
        for (i, t) in threads.iter_mut().enumerate() {
            let mut pairs = Vec::new();
            for (b, counts) in &rows {
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
        for (i, c) in oflow_cycles {
            if let Some(t) = threads.get_mut(i as usize) {
                t.overflow_cycles = c;
            }
        }
    }
    let mut interval_us = 1000;
    let mut priority = 0;
    for &TLine {
        index: i,
        tid,
        priority: prio,
        interval_us: intv,
        cycles,
        min,
        avg,
        max,
    } in &t_lines
    {
        let Some(t) = threads.get_mut(i as usize) else {
            continue;
        };
        t.tid = tid;
        interval_us = intv;
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
    let meta = Meta {
        file,
        format: "cyclictest-text",
        unit_ns,
        interval_us,
        priority: priority.clamp(0, 99),
        hist_range: rows.iter().map(|(b, _)| b + 1).max(),
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
    let mut threads = Vec::with_capacity(imported.len());
    for t in imported {
        let path = format!("thread.{}", t.index);
        if t.min > t.max && t.cycles > 0 {
            return Err(bad(&path, format!("min {} > max {}", t.min, t.max)));
        }
        let too_large = || bad(&path, "value too large");
        let (min_ns, max_ns) = (
            t.min.checked_mul(unit_ns).ok_or_else(too_large)?,
            t.max.checked_mul(unit_ns).ok_or_else(too_large)?,
        );
        let mut hist = new_histogram();
        let mut beyond = None;
        let linear = match t.buckets {
            None => {
                if t.cycles > 0 {
                    // Only min, avg and max are known: keep the extremes so percentiles are bounded by them.
                    hist.saturating_record(min_ns);
                    if t.cycles > 1 {
                        hist.saturating_record(max_ns);
                    }
                }
                warnings.push(format!("thread {}: no histogram (cyclictest ran without -h): only min, avg and max are known", t.index));
                None
            }
            Some(pairs) => {
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
                    hist.saturating_record_n(b * unit_ns, c);
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
                Some(LinearHistogram {
                    unit_ns,
                    buckets,
                    overflows,
                    overflow_cycles: t.overflow_cycles,
                })
            }
        };
        let sum_ns = t
            .avg
            .map_or(0, |a| (a * unit_ns as f64 * t.cycles as f64).round() as u64);
        let mut latency = LatencyStats::from_parts(&hist, min_ns, max_ns, sum_ns, 0);
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
        threads.push(CyclicThread {
            windows: Default::default(),
            index: t.index,
            tid: t.tid,
            interval_ns: meta.interval_us * 1000,
            conditions: ThreadConditions {
                policy: Setting {
                    requested: policy,
                    achieved: policy,
                    error: None,
                },
                priority: Setting {
                    requested: meta.priority,
                    achieved: meta.priority,
                    error: None,
                },
                cpu: Setting {
                    requested: t.cpu,
                    achieved: t.cpu,
                    error: None,
                },
            },
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
        });
    }
    warnings.push(
        "cyclictest skips periods that were already over at wake-up: missed deadlines are unknown"
            .into(),
    );
    let result = CyclicResult {
        config: CyclicConfig {
            threads: threads.len() as u32,
            interval_ns: meta.interval_us * 1000,
            distance_ns: 0,
            policy,
            priority: meta.priority,
            priospread: false,
            cpus: threads.iter().map(|t| t.conditions.cpu.achieved).collect(),
            duration_ns: None,
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
        load: None,
    };
    Ok(imported_document(
        meta,
        "cyclictest",
        ProbeResult::Cyclic(result),
        warnings,
    ))
}

fn not_recorded() -> ProcessConditions {
    let why = Some("not recorded by rt-tests".to_string());
    ProcessConditions {
        mlockall: Setting {
            requested: false,
            achieved: false,
            error: why.clone(),
        },
        cpu_dma_latency_us: Setting {
            requested: None,
            achieved: None,
            error: why,
        },
        cpu_dma_latency_before_us: None,
        main_affinity: Setting {
            requested: None,
            achieved: None,
            error: None,
        },
        contended: Vec::new(),
    }
}

fn imported_document(
    meta: Meta<'_>,
    tool: &str,
    probe: ProbeResult,
    warnings: Vec<String>,
) -> RunDocument {
    RunDocument {
        schema_version: rtgauge_model::SCHEMA_VERSION,
        uuid: None,
        tool: ToolInfo {
            name: tool.into(),
            version: meta.tool_version,
        },
        command_line: meta.cmdline.split_whitespace().map(String::from).collect(),
        started_at: meta.started_at,
        ended_at: meta.ended_at,
        system: meta.system,
        probes: vec![probe],
        status: RunStatus::Complete,
        warnings,
        label: None,
        tags: Default::default(),
        profile: None,
        fingerprint: None,
        audit: None,
        verdicts: Vec::new(),
        imported_from: Some(ImportSource {
            format: meta.format.into(),
            file: meta.file.into(),
            resolution_ns: meta.unit_ns,
        }),
    }
}

/// oslat `--json`: histogram keys are bucket upper edges in µs (3 decimals when the width is not a whole µs);
/// `min`/`max` are whole µs, or ns when the keys have decimals.
fn oslat_json(v: &Value, file: &str) -> Result<RunDocument, ImportError> {
    let threads = v
        .get("thread")
        .and_then(Value::as_object)
        .ok_or(ImportError::Unrecognised)?;
    if threads.len() > MAX_THREADS {
        return Err(bad("thread", "more than 4096 threads"));
    }
    let mut out = Vec::with_capacity(threads.len());
    let mut freq_mhz = 0;
    let mut warnings = Vec::new();
    let mut width_ns_all = 1000;
    for (k, t) in threads {
        let path = format!("thread.{k}");
        let index: u32 = k
            .parse()
            .map_err(|_| bad(&path, "thread keys must be numbers"))?;
        let num = |f: &str| {
            t.get(f).and_then(Value::as_u64).ok_or_else(|| {
                bad(
                    format!("{path}.{f}"),
                    "missing or not a non-negative integer",
                )
            })
        };
        let cpu =
            u32::try_from(num("cpu")?).map_err(|_| bad(format!("{path}.cpu"), "too large"))?;
        freq_mhz = num("freq")?;
        let h = t
            .get("histogram")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(format!("{path}.histogram"), "missing or not an object"))?;
        let mut edges = Vec::with_capacity(h.len());
        let mut precise = false;
        for (e, c) in h {
            let at = format!("{path}.histogram.{e}");
            let us: f64 = e
                .parse()
                .map_err(|_| bad(&at, "bucket keys must be numbers"))?;
            if !(us.is_finite() && us > 0.0 && us < 1e9) {
                return Err(bad(&at, "bucket edge out of range"));
            }
            precise |= e.contains('.');
            edges.push((
                (us * 1000.0).round() as u64,
                c.as_u64()
                    .ok_or_else(|| bad(&at, "count must be a non-negative integer"))?,
            ));
        }
        edges.sort_unstable();
        // Bucket width: the smallest edge (oslat's first bucket ends at one width, without bias).
        let width = edges.first().map_or(1000, |e| e.0).max(1);
        width_ns_all = width;
        let unit = if precise { 1 } else { 1000 };
        let n = edges.last().map_or(0, |e| e.0 / width);
        if n > 1024 {
            return Err(bad(format!("{path}.histogram"), "more than 1024 buckets"));
        }
        let mut counts = vec![0u64; n as usize];
        let mut hist = new_histogram();
        let mut iterations: u64 = 0;
        for (edge, c) in &edges {
            let b = (edge / width).saturating_sub(1) as usize;
            if let Some(slot) = counts.get_mut(b) {
                *slot += c;
            }
            hist.saturating_record_n(edge.saturating_sub(width), *c);
            iterations = iterations
                .checked_add(*c)
                .ok_or_else(|| bad(format!("{path}.histogram"), "counts overflow"))?;
        }
        let (min_ns, max_ns) = (
            num("min")?.saturating_mul(unit),
            num("max")?.saturating_mul(unit),
        );
        let duration_ns = t
            .get("duration")
            .and_then(Value::as_f64)
            .filter(|d| d.is_finite() && *d >= 0.0)
            .map_or(0, |d| (d * 1e9) as u64);
        let mut gaps = LatencyStats::from_parts(&hist, min_ns, max_ns, duration_ns, 0);
        // oslat's last bucket holds its overflows too: the gaps there are known only to be beyond its
        // lower edge, so percentiles among them are unknown.
        if let Some(&last) = counts.last().filter(|&&c| c > 0) {
            gaps.beyond = Some(Beyond {
                limit_ns: (counts.len() as u64 - 1).saturating_mul(width),
                count: last,
            });
        }
        gaps.mean_ns = t
            .get("avg")
            .and_then(Value::as_f64)
            .filter(|a| a.is_finite())
            .map_or(0.0, |a| a * 1000.0);
        warnings.push(format!(
            "CPU {cpu}: oslat keeps {} {}-ns buckets only: gaps are stored at their bucket's lower edge, the last bucket includes overflows, and oslat's average is biased up by up to a bucket",
            counts.len(),
            width
        ));
        out.push(OslatThread {
            windows: Default::default(),
            index,
            cpu,
            tid: 0,
            node: None,
            conditions: ThreadConditions {
                policy: Setting {
                    requested: SchedPolicy::Other,
                    achieved: SchedPolicy::Other,
                    error: Some("not recorded by oslat".into()),
                },
                priority: Setting {
                    requested: 0,
                    achieved: 0,
                    error: Some("not recorded by oslat".into()),
                },
                cpu: Setting {
                    requested: Some(cpu),
                    achieved: Some(cpu),
                    error: None,
                },
            },
            iterations,
            duration_ns,
            loop_ns: if iterations == 0 {
                0.0
            } else {
                duration_ns as f64 / iterations as f64
            },
            gaps,
            buckets: OslatBuckets {
                width_ns: width,
                bias_ns: 0,
                counts,
                overflow_sum: 0,
            },
            over_thresholds: Vec::new(),
            lost_ns: 0,
            availability_pct: 0.0,
            worst: Vec::new(),
            timeline: Vec::new(),
            timeline_dropped: 0,
        });
    }
    out.sort_by_key(|t| t.index);
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let duration_ns = out.iter().map(|t| t.duration_ns).max().unwrap_or(0);
    let result = OslatResult {
        config: OslatConfig {
            cpus: out.iter().map(|t| t.cpu).collect(),
            main_cpu: None,
            duration_ns,
            rtprio: None,
            preheat_ns: 1_000_000_000,
            single_preheat: false,
            bucket_count: out.first().map_or(0, |t| t.buckets.counts.len() as u32),
            bucket_width_ns: width_ns_all,
            bias: false,
            workload: Workload::No,
            workload_mem_bytes: 0,
            trace_threshold_ns: None,
            availability_threshold_ns: 5_000,
            thresholds_ns: Vec::new(),
            worst_count: 0,
            timeline_interval_ns: 1_000_000_000,
        },
        counter: CounterInfo {
            source: "oslat".into(),
            frequency_hz: freq_mhz.saturating_mul(1_000_000),
            calibration: "reported by oslat (MHz)".into(),
            calibration_spread_ppm: 0.0,
            cross_check_ppm: 0.0,
        },
        conditions: not_recorded(),
        threads: out,
        stop_reason: StopReason::Duration,
        trace_hit: None,
        elapsed_ns: duration_ns,
        accounting: None,
        load: None,
    };
    let meta = Meta {
        file,
        format: "oslat-json",
        unit_ns: width_ns_all,
        interval_us: 0,
        priority: 0,
        hist_range: None,
        cmdline: s("cmdline:"),
        tool_version: s("rt_test_version:"),
        started_at: rfc2822_to_3339(&s("start_time")),
        ended_at: rfc2822_to_3339(&s("end_time")),
        system: sysinfo(v.get("sysinfo")),
    };
    Ok(imported_document(
        meta,
        "oslat",
        ProbeResult::Oslat(result),
        warnings,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const SAMPLE: &str = r##"{
  "file_version": 1,
  "cmdline:": "cyclictest -m -p 80 -t 2 -a -i 200 -D 5 -h 50 -H 50 --json=ct.json -q --spike=30",
  "rt_test_version:": "2.40",
  "start_time": "Sun, 22 Nov 2026 11:08:50 +0000",
  "end_time": "Sun, 22 Nov 2026 11:08:55 +0000",
  "return_code": 0,
  "sysinfo": { "sysname": "Linux", "nodename": "vm", "release": "6.18.44-fc-v669",
               "version": "#1 SMP PREEMPT_DYNAMIC @0", "machine": "x86_64", "realtime": 0 },
  "num_threads": 2,
  "resolution_in_ns": 0,
  "thread": {
    "0": { "histogram": { "8": 1, "10": 1, "11": 9, "13": 2204 },
           "cycles": 2216, "min": 8, "max": 601, "avg": 14.69, "cpu": 0, "node": 0 },
    "1": { "histogram": { "9": 100 }, "cycles": 100, "min": 9, "max": 9, "avg": 9.0, "cpu": 1, "node": 0 }
  }
}"##;

    /// rt-tests 2.4 layout: every bucket, `# Total:`, `-H` sum column and max-of-max.
    const TEXT_V24: &str = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\t000000\t000000\n000001 000000\t000000\t000000\n000002 000003\t000001\t000004\n000003 000001\t000002\t000003\n# Total: 000000004 000000003 000000007\n# Min Latencies: 00002 00002\n# Avg Latencies: 00002 00002\n# Max Latencies: 00007 00003 00007\n# Histogram Overflows: 00001 00000 00001\n# Histogram Overflow at cycle number:\n# Thread 0: 00003\n# Thread 1:\n";

    /// rt-tests ≥ 2.7 layout (zero buckets omitted) with the T: lines printed by a non-histogram run too.
    const TEXT_V27: &str = "policy: fifo: loadavg: 0.10 0.05 0.01 1/123 4567\n\nT: 0 ( 4242) P:90 I:200 C:      5 Min:      2 Act:    3 Avg:    2 Max:       7\n# Histogram\n000002 000003\n000003 000001\n# Min Latencies: 00002\n# Avg Latencies: 00002\n# Max Latencies: 00007\n# Histogram Overflows: 00001\n# Histogram Overflow at cycle number:\n# Thread 0: 00003\n";

    const OSLAT: &str = r#"{ "file_version": 1, "cmdline:": "oslat -c 1 -D 5", "rt_test_version:": "2.40",
      "start_time": "Sun, 22 Nov 2026 11:08:50 +0000", "end_time": "Sun, 22 Nov 2026 11:08:55 +0000",
      "return_code": 0, "sysinfo": { "sysname": "Linux", "nodename": "vm", "release": "6", "version": "v", "machine": "x86_64", "realtime": 0 },
      "num_threads": 1,
      "thread": { "0": { "cpu": 1, "freq": 2597, "min": 1, "avg": 1.001361, "max": 50038, "duration": 4.998,
                         "histogram": { "1": 215793394, "2": 3506, "32": 472 } } } }"#;

    fn cyclic(d: &RunDocument) -> &CyclicResult {
        match &d.probes[0] {
            ProbeResult::Cyclic(c) => c,
            _ => panic!("expected cyclic"),
        }
    }

    #[test]
    fn imports_the_published_json_sample() {
        let d = parse_cyclictest_json(SAMPLE, "ct.json").unwrap();
        let c = cyclic(&d);
        assert_eq!(c.config.interval_ns, 200_000);
        assert_eq!(c.config.hist_buckets, Some(50));
        assert_eq!(c.config.priority, 80);
        let t = &c.threads[0];
        assert_eq!(t.cycles, 2216);
        assert_eq!(t.latency.min_ns, 8_000);
        assert_eq!(t.latency.max_ns, 601_000);
        assert_eq!(
            t.linear.as_ref().unwrap().overflows,
            1,
            "2216 cycles, 2215 in the histogram"
        );
        assert_eq!(t.latency.hdr.decode().unwrap().len(), 2216);
        assert!((t.latency.mean_ns - 14_690.0).abs() < 1e-6);
        assert_eq!(d.started_at, "2026-11-22T11:08:50+00:00");
        assert_eq!(d.imported_from.as_ref().unwrap().resolution_ns, 1000);
        assert!(d.warnings.iter().any(|w| w.contains("lower bounds")));
        assert!(d.warnings.iter().any(|w| w.contains("unknown")));
    }

    #[test]
    fn imports_both_text_layouts() {
        let d = parse_cyclictest_text(TEXT_V24, "v24.txt", 1000).unwrap();
        let c = cyclic(&d);
        assert_eq!(c.threads.len(), 2, "the -H sum column is not a thread");
        let t0 = &c.threads[0];
        assert_eq!(t0.cycles, 5, "4 in the histogram + 1 overflow");
        assert_eq!(t0.latency.max_ns, 7_000);
        let l = t0.linear.as_ref().unwrap();
        assert_eq!((l.buckets[2], l.buckets[3], l.overflows), (3, 1, 1));
        assert_eq!(l.overflow_cycles, vec![3]);
        assert_eq!(c.threads[1].cycles, 3);
        let d = parse_cyclictest_text(TEXT_V27, "v27.txt", 1000).unwrap();
        let c = cyclic(&d);
        assert_eq!(c.threads.len(), 1);
        assert_eq!((c.threads[0].cycles, c.threads[0].tid), (5, 4242));
        assert_eq!((c.config.interval_ns, c.config.priority), (200_000, 90));
        // The same run in both layouts gives the same thread 0.
        let a = parse_cyclictest_text(TEXT_V24, "a", 1000).unwrap();
        assert_eq!(cyclic(&a).threads[0].linear, c.threads[0].linear);
    }

    #[test]
    fn text_with_only_summary_lines_and_nsecs() {
        let text =
            "T: 0 ( 99) P:80 I:1000 C:   1000 Min:   2500 Act:   3000 Avg:   3100 Max:   15000\n";
        let d = parse_cyclictest_text(text, "n.txt", 1).unwrap();
        let t = &cyclic(&d).threads[0];
        assert_eq!(
            (t.cycles, t.latency.min_ns, t.latency.max_ns),
            (1000, 2_500, 15_000)
        );
        assert!(d.warnings.iter().any(|w| w.contains("no histogram")));
    }

    #[test]
    fn imports_oslat_json() {
        let d = parse_rt_tests(OSLAT, "o.json", 1000).unwrap();
        let ProbeResult::Oslat(o) = &d.probes[0] else {
            panic!()
        };
        let t = &o.threads[0];
        assert_eq!(t.cpu, 1);
        assert_eq!(t.iterations, 215_793_394 + 3_506 + 472);
        assert_eq!(t.buckets.counts.len(), 32);
        assert_eq!(t.buckets.counts[31], 472);
        assert_eq!(t.gaps.max_ns, 50_038_000);
        assert_eq!(o.counter.frequency_hz, 2_597_000_000);
        assert_eq!(t.duration_ns, 4_998_000_000);
        assert_eq!(d.tool.name, "oslat");
    }

    /// oslat 2.40's text summary of a 2-core run (tests/fixtures/rt-tests/oslat-2core.txt, shortened).
    const OSLAT_TEXT: &str = "oslat V 2.40
Total runtime: \t\t3 seconds

        Core:\t 0 1
Counter Freq:\t 2597 2597 (Mhz)
    001 (us):\t 123892660 121388384
    002 (us):\t 184 322
    003 (us):\t 0 0
    004 (us):\t 425 1865 (including overflows)
     Minimum:\t 1 1 (us)
     Average:\t 1.003 1.004 (us)
     Maximum:\t 5058 4140 (us)
     Max-Min:\t 5057 4139 (us)
    Duration:\t 3.005 3.005 (sec)
";

    #[test]
    fn imports_oslat_text_with_its_overflow_bucket_unknown() {
        let d = parse_rt_tests(OSLAT_TEXT, "os.txt", 1000).unwrap();
        assert_eq!(d.imported_from.as_ref().unwrap().format, "oslat-text");
        let ProbeResult::Oslat(o) = &d.probes[0] else {
            panic!("not oslat")
        };
        assert_eq!(o.config.cpus, vec![0, 1]);
        let t = &o.threads[1];
        assert_eq!(t.buckets.counts, vec![121388384, 322, 0, 1865]);
        assert_eq!((t.gaps.min_ns, t.gaps.max_ns), (1000, 4_140_000));
        assert_eq!(t.iterations, 121388384 + 322 + 1865);
        // The last bucket holds the overflows: gaps there are only known to be ≥ 3 µs.
        let b = t.gaps.beyond.unwrap();
        assert_eq!((b.limit_ns, b.count), (3000, 1865));
        assert_eq!(t.gaps.unknown_above(99.9999), Some(3000));
        assert_eq!(t.gaps.unknown_above(99.0), None);
        // A row with a count missing for a core is an error naming the row.
        let bad_row = OSLAT_TEXT.replace("184 322", "184");
        let e = parse_rt_tests(&bad_row, "os.txt", 1000).unwrap_err();
        assert!(e.to_string().contains("002 (us)"), "{e}");
    }

    #[test]
    fn flags_are_found_in_any_spelling() {
        assert_eq!(
            flag_value("cyclictest -i200 -h 10", "-i", "--interval"),
            Some(200)
        );
        assert_eq!(
            flag_value("cyclictest --interval=300", "-i", "--interval"),
            Some(300)
        );
        assert_eq!(flag_value("cyclictest -h 7", "-h", "--histogram"), Some(7));
        assert_eq!(
            flag_value("cyclictest --histfile=x", "-h", "--histogram"),
            None
        );
    }

    #[test]
    fn hostile_inputs_are_errors_naming_the_field() {
        let cases = [
            ("{", "not JSON"),
            ("[]", "not a cyclictest"),
            (r#"{"thread": {"0": {"cycles": 1}}}"#, "thread.0.min"),
            (r#"{"thread": {"x": {"cycles": 1, "min": 1, "max": 1}}}"#, "thread.x"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"1": 5}}}}"#, "holds 5 samples"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"a": 1}}}}"#, "histogram.a"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"99999999": 1}}}}"#, "buckets"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 9, "max": 1}}}"#, "min 9 > max 1"),
            (r#"{"resolution_in_ns": 7, "thread": {"0": {"cycles": 1, "min": 1, "max": 1}}}"#, "resolution_in_ns"),
            (r#"{"thread": {"0": {"cpu": 1, "freq": 2000, "min": 1, "max": 1, "histogram": {"-3": 1}}}}"#, "out of range"),
            ("hello\n", "not a cyclictest"),
            ("# Histogram\n000001 x\n# Min Latencies: 00001\n", "line 2"),
            ("# Histogram\n000001 000001\n# Min Latencies: 00001\n", "# Avg Latencies"),
            ("# Histogram\n000001\n# Min Latencies: 00001\n# Avg Latencies: 1\n# Max Latencies: 1\n# Histogram Overflows: 0\n", "histogram bucket 1"),
        ];
        for (text, what) in cases {
            let e = parse_rt_tests(text, "f", 1000).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// 500 mutated or truncated versions of each real file: never a panic.
        #[test]
        fn mutated_files_never_panic(which in 0usize..5, cut in 0usize..2000, pos in 0usize..2000, byte in proptest::num::u8::ANY) {
            let src = [SAMPLE, TEXT_V24, TEXT_V27, OSLAT, OSLAT_TEXT][which];
            let mut b = src.as_bytes().to_vec();
            let pos = pos % b.len();
            b[pos] = byte;
            b.truncate((cut % b.len()).max(1));
            let _ = parse_rt_tests(&String::from_utf8_lossy(&b), "f", 1000);
        }
    }
}
