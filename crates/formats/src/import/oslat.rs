//! oslat results in: its `--json` summary and its text summary (read into the JSON's shape first, so both
//! store the same result).

use super::{
    bad, check_figures, imported_document, not_recorded, read_avg, rfc2822_to_3339, sysinfo,
    Figures, ImportError, Importer, Meta, MAX_THREADS, OSLAT_UNSET_MIN,
};
use rtgauge_model::cyclic::StopReason;
use rtgauge_model::latency::{new_histogram, Beyond, LatencyStats};
use rtgauge_model::oslat::{
    CounterInfo, OslatBuckets, OslatConfig, OslatResult, OslatThread, Workload,
};
use rtgauge_model::rt::{SchedPolicy, Setting, ThreadConditions};
use rtgauge_model::run::{ProbeResult, RunDocument};
use serde_json::Value;

/// oslat text summary.
#[derive(Debug, Clone, Copy)]
pub struct OslatText;

impl Importer for OslatText {
    fn import(&self, text: &str, file: &str) -> Result<RunDocument, ImportError> {
        parse_oslat_text(text, file)
    }
}

/// oslat `--json`.
#[derive(Debug, Clone, Copy)]
pub struct OslatJson;

impl Importer for OslatJson {
    fn import(&self, text: &str, file: &str) -> Result<RunDocument, ImportError> {
        let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json(e.to_string()))?;
        oslat_json(&v, file)
    }
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

/// oslat `--json`: histogram keys are bucket upper edges in µs (3 decimals when the width is not a whole µs);
/// `min`/`max` are whole µs, or ns when the keys have decimals.
pub(super) fn oslat_json(v: &Value, file: &str) -> Result<RunDocument, ImportError> {
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
        let (thread, freq, warning) = oslat_thread(k, t)?;
        freq_mhz = freq;
        width_ns_all = thread.buckets.width_ns;
        warnings.push(warning);
        out.push(thread);
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
        why: None,
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

/// One thread of oslat's JSON: the thread, the counter frequency (MHz) and the warning on its buckets.
fn oslat_thread(k: &str, t: &Value) -> Result<(OslatThread, u64, String), ImportError> {
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
    let cpu = u32::try_from(num("cpu")?).map_err(|_| bad(format!("{path}.cpu"), "too large"))?;
    let freq_mhz = num("freq")?;
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
    let (min, max) = (num("min")?, num("max")?);
    let avg_us = read_avg(t, &path)?;
    check_figures(
        &format!("{path} (CPU {cpu})"),
        Figures {
            samples_word: "samples",
            samples: iterations,
            min,
            // oslat's average is in µs whatever the unit of min and max.
            avg: avg_us.map(|a| a * 1000.0 / unit as f64),
            max,
            unset_min: OSLAT_UNSET_MIN,
            // oslat averages bucket edges (biased up by up to a bucket), and adds the first thread's
            // overflow sum to every thread's average (rt-tests' calculate()): one bucket of slack.
            slack: width as f64 / unit as f64,
        },
    )?;
    // A CPU without a sample keeps no minimum (oslat prints its initial u64::MAX).
    let min = if iterations == 0 { 0 } else { min };
    let (min_ns, max_ns) = (min.saturating_mul(unit), max.saturating_mul(unit));
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
    gaps.mean_ns = avg_us.map_or(0.0, |a| a * 1000.0);
    let warning = format!(
        "CPU {cpu}: oslat keeps {} {}-ns buckets only: gaps are stored at their bucket's lower edge, the last bucket includes overflows, and oslat's average is biased up by up to a bucket",
        counts.len(),
        width
    );
    let thread = OslatThread {
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
    };
    Ok((thread, freq_mhz, warning))
}
