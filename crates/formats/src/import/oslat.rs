//! oslat results in: its `--json` summary and its text summary (read into the JSON's shape first, so both
//! store the same result).

use super::{
    bad, check_figures, imported_document, not_recorded, read_avg, rfc2822_to_3339, sysinfo,
    Figures, ImportError, Importer, Meta, MAX_THREADS, OSLAT_UNSET_MIN,
};
use rtgauge_model::kind::StopReason;
use rtgauge_model::latency::{new_histogram, Beyond, Histogram, LatencyStats};
use rtgauge_model::oslat::{
    CounterInfo, OslatBuckets, OslatConfig, OslatResult, OslatThread, ThresholdCount, Workload,
};
use rtgauge_model::rt::{SchedPolicy, Setting, ThreadConditions};
use rtgauge_model::run::RunDocument;
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
        let v: Value = serde_json::from_str(text).map_err(ImportError::Json)?;
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
    // What the text states and the JSON does not: the bias, and which row holds the overflows.
    let mut extra: Map<String, Value> = Map::new();
    let ns_of = |us: &str| us.parse::<f64>().ok().map(|u| (u * 1000.0).round() as u64);
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
        } else if let Some(b) = t
            .strip_prefix("Global bias set to ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(ns_of)
        {
            extra.insert("rtgauge:bias_ns".into(), json!(b));
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
            if rest.contains("including overflows") {
                if let Some(l) = ns_of(edge) {
                    extra.insert("rtgauge:overflow_label_ns".into(), json!(l));
                }
            }
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
    let mut v = json!({ "rt_test_version:": version, "thread": threads });
    if let Some(o) = v.as_object_mut() {
        o.extend(extra);
    }
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
    let layout = Layout::of(v);
    for (k, t) in threads {
        let (thread, freq, warning) = oslat_thread(k, t, &layout)?;
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
            duration: rtgauge_model::Nanos(duration_ns),
            rtprio: None,
            preheat_ns: 1_000_000_000,
            single_preheat: false,
            bucket_count: out.first().map_or(0, |t| t.buckets.counts.len() as u32),
            bucket_width_ns: width_ns_all,
            bias: layout.biased,
            workload: Workload::No,
            workload_mem_bytes: 0,
            trace_threshold_ns: None,
            availability_threshold_ns: 5_000,
            thresholds_ns: out
                .first()
                .map(|t| t.over_thresholds.iter().map(|o| o.threshold_ns).collect())
                .unwrap_or_default(),
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
    Ok(imported_document(meta, "oslat", result.into(), warnings))
}

/// Thresholds whose gap counts an import gives where the buckets tell them (native runs' defaults).
const IMPORT_THRESHOLDS_NS: [u64; 4] = [1_000, 5_000, 10_000, 20_000];

/// What oslat's command line (or its text) says of its buckets; the JSON does not say it.
#[derive(Debug, Default)]
pub(super) struct Layout {
    /// `-W`/`--bucket-width`, ns (newer oslat; 1 µs before it).
    width_ns: Option<u64>,
    /// `-b`/`--bucket-size` (default 32).
    count: Option<u64>,
    /// `-B`/`--bias` given: every label is shifted by a bias the JSON does not state.
    biased: bool,
    /// The bias, µs-exact, where the text states it ("Global bias set to N (us)").
    bias_ns: Option<u64>,
    /// The overflow bucket's label, where the text marks it ("(including overflows)").
    overflow_label_ns: Option<u64>,
}

/// The buckets of one thread, as the labels and the layout give them.
struct Buckets {
    width_ns: u64,
    bias_ns: u64,
    count: u64,
    /// Label of the bucket that holds the overflows (every gap beyond the range).
    overflow_label_ns: u64,
}

impl Layout {
    /// From the JSON's `cmdline:` (and the text's extra keys, see [`parse_oslat_text`]).
    fn of(v: &Value) -> Layout {
        let cmdline = v.get("cmdline:").and_then(Value::as_str).unwrap_or("");
        let words: Vec<&str> = cmdline.split_whitespace().collect();
        let ns = |k: &str| v.get(k).and_then(Value::as_u64);
        Layout {
            width_ns: super::flag_value(cmdline, "-W", "--bucket-width"),
            count: super::flag_value(cmdline, "-b", "--bucket-size"),
            biased: words.iter().any(|w| *w == "-B" || *w == "--bias")
                || ns("rtgauge:bias_ns").is_some(),
            bias_ns: ns("rtgauge:bias_ns"),
            overflow_label_ns: ns("rtgauge:overflow_label_ns"),
        }
    }

    /// The buckets behind labels `edges` (ns, sorted; `precise`: labels with decimals, an ns width).
    /// oslat's label of bucket j is bias + (j + 1) × width. Without `-W` the width is 1 µs (it is the only
    /// one older oslat has); ns-precise labels without it take the largest width that spaces them. The
    /// overflow bucket is the last of `-b` (32 by default) — known exactly unless a bias the file does not
    /// state shifts it, when the highest label present is taken for it (its gaps then read as unknown
    /// beyond its lower edge rather than as a figure).
    fn buckets_of(&self, edges: &[(u64, u64)], precise: bool) -> Buckets {
        let labels: Vec<u64> = edges.iter().map(|e| e.0).collect();
        let highest = labels.last().copied().unwrap_or(0);
        let width_ns = self
            .width_ns
            .or_else(|| {
                precise.then(|| {
                    let mut g = labels.first().copied().unwrap_or(1000);
                    for w in labels.windows(2) {
                        g = gcd(g, w[1] - w[0]);
                    }
                    g
                })
            })
            .unwrap_or(1000)
            .max(1);
        let count = self.count.unwrap_or(32);
        let bias_ns = match self.bias_ns {
            Some(b) => b,
            // With an unstated bias the lowest label is taken for bucket 0 (the bias is the run's
            // estimated minimum, so the first bucket holds gaps).
            None if self.biased => labels.first().map_or(0, |l| l.saturating_sub(width_ns)),
            None => 0,
        };
        let overflow_label_ns = match self.overflow_label_ns {
            Some(l) => l,
            None if self.biased && self.bias_ns.is_none() => highest,
            None => (bias_ns + count * width_ns).max(highest),
        };
        let count = match self.overflow_label_ns {
            // The text names its last row: that many buckets exactly.
            Some(l) => l.saturating_sub(bias_ns) / width_ns,
            None => count.max(overflow_label_ns.saturating_sub(bias_ns) / width_ns),
        };
        Buckets {
            width_ns,
            bias_ns,
            count,
            overflow_label_ns,
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One thread of oslat's JSON: the thread, the counter frequency (MHz) and the warning on its buckets.
fn oslat_thread(
    k: &str,
    t: &Value,
    layout: &Layout,
) -> Result<(OslatThread, u64, String), ImportError> {
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
    let (edges, precise) = read_edges(t, &path)?;
    let unit = if precise { 1 } else { 1000 };
    let b = layout.buckets_of(&edges, precise);
    if b.count > 1024 {
        return Err(bad(format!("{path}.histogram"), "more than 1024 buckets"));
    }
    let width = b.width_ns;
    let filled = fill_buckets(&edges, &b, &path)?;
    let iterations = filled.iterations;
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
    let mut gaps = LatencyStats::from_parts(&filled.hist, min_ns, max_ns, duration_ns, 0);
    let overflow_edge = b.overflow_label_ns.saturating_sub(width);
    if filled.overflow > 0 {
        gaps.beyond = Some(Beyond {
            limit_ns: overflow_edge,
            count: filled.overflow,
        });
    }
    gaps.mean_ns = avg_us.map_or(0.0, |a| a * 1000.0);
    let over_thresholds =
        over_thresholds(&edges, width, filled.overflow, overflow_edge, duration_ns);
    let warning = format!(
        "CPU {cpu}: oslat keeps {} {}-ns buckets only: gaps are stored at their bucket's upper edge (oslat's label, as its min, avg and max), the last bucket includes overflows, and the time lost to gaps (availability) is unknown",
        filled.counts.len(),
        width
    );
    let thread = OslatThread {
        windows: Default::default(),
        index,
        cpu,
        tid: 0,
        node: None,
        conditions: unrecorded_conditions(cpu),
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
            bias_ns: b.bias_ns,
            counts: filled.counts,
            overflow_sum: 0,
        },
        over_thresholds,
        lost_ns: 0,
        availability_pct: None,
        worst: Vec::new(),
        timeline: Vec::new(),
        timeline_dropped: 0,
        bookkeeping: None,
        disturbance: None,
    };
    Ok((thread, freq_mhz, warning))
}

/// The thread's histogram as (label ns, count) pairs sorted by label, and whether its labels have decimals
/// (then min and max are in ns, not µs).
fn read_edges(t: &Value, path: &str) -> Result<(Vec<(u64, u64)>, bool), ImportError> {
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
    Ok((edges, precise))
}

/// A thread's labelled counts placed in its buckets.
struct Filled {
    /// Count per bucket.
    counts: Vec<u64>,
    /// Every gap at its bucket's upper edge (the overflow bucket's at its lower edge).
    hist: Histogram,
    /// Gaps in all.
    iterations: u64,
    /// Gaps in the overflow bucket.
    overflow: u64,
}

/// Place the counts of `edges` in the buckets `b` and record each gap (`path` names the thread in errors).
fn fill_buckets(edges: &[(u64, u64)], b: &Buckets, path: &str) -> Result<Filled, ImportError> {
    let width = b.width_ns;
    let mut counts = vec![0u64; b.count as usize];
    let mut hist = new_histogram();
    let mut iterations: u64 = 0;
    let mut overflow = 0;
    for &(label, c) in edges {
        let j = (label.saturating_sub(b.bias_ns) / width).saturating_sub(1) as usize;
        if let Some(slot) = counts.get_mut(j) {
            *slot += c;
        }
        if label == b.overflow_label_ns {
            // The overflow bucket: its gaps are known only to lie beyond its lower edge.
            hist.saturating_record_n(label.saturating_sub(width), c);
            overflow = c;
        } else {
            // A bucket's label is its upper edge (oslat prints bias + (j + 1) × width, and its own min, avg
            // and max count each gap at that edge): the value kept for every gap in it.
            hist.saturating_record_n(label, c);
        }
        iterations = iterations
            .checked_add(c)
            .ok_or_else(|| bad(format!("{path}.histogram"), "counts overflow"))?;
    }
    Ok(Filled {
        counts,
        hist,
        iterations,
        overflow,
    })
}

/// Gaps at or above each of [`IMPORT_THRESHOLDS_NS`]: the buckets whose lower edge reaches it. Unknown (left
/// out) for a threshold inside the overflow bucket when it holds gaps.
fn over_thresholds(
    edges: &[(u64, u64)],
    width: u64,
    overflow: u64,
    overflow_edge: u64,
    duration_ns: u64,
) -> Vec<ThresholdCount> {
    let secs = duration_ns as f64 / 1e9;
    IMPORT_THRESHOLDS_NS
        .iter()
        .filter(|&&thr| overflow == 0 || thr <= overflow_edge)
        .map(|&thr| {
            let count: u64 = edges
                .iter()
                .filter(|(label, _)| label.saturating_sub(width) >= thr)
                .map(|e| e.1)
                .sum();
            ThresholdCount {
                threshold_ns: thr,
                count,
                per_second: if secs > 0.0 { count as f64 / secs } else { 0.0 },
            }
        })
        .collect()
}

/// What an oslat thread ran with: its CPU; oslat does not record its policy and priority.
fn unrecorded_conditions(cpu: u32) -> ThreadConditions {
    ThreadConditions {
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
    }
}
