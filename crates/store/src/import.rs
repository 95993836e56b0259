//! Importing rt-tests results into run documents, so that runs taken with cyclictest elsewhere can be
//! stored, reported and compared like rtgauge's own. Pure: text in, document out; every error names what
//! was wrong and where.
//!
//! cyclictest JSON (rt-tests ≥ 2.0, `rt_write_json()` + `write_stats()`): per thread `cycles`, `min`, `max`,
//! `avg` in µs (ns with `resolution_in_ns: 1`), optional `histogram` of non-zero 1-unit buckets. The
//! `-h` range and the interval are read from the `"cmdline:"` when present. What cyclictest does not keep
//! is not invented: samples beyond the histogram range are known only by their count (and the exact max),
//! so they are stored at the range's edge and a warning says that percentiles there are lower bounds;
//! missed deadlines are unknown (cyclictest skips late periods).

use rtgauge_model::cyclic::{
    CyclicConfig, CyclicResult, CyclicThread, LinearHistogram, StopReason,
};
use rtgauge_model::latency::{new_histogram, LatencyStats};
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
    #[error("not a cyclictest JSON result (no \"thread\" object with \"cycles\")")]
    Unrecognised,
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> ImportError {
    ImportError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

fn get_u64(o: &Value, field: &str, path: &str) -> Result<u64, ImportError> {
    o.get(field).and_then(Value::as_u64).ok_or_else(|| {
        bad(
            format!("{path}.{field}"),
            "missing or not a non-negative integer",
        )
    })
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

/// Import a cyclictest `--json` file. `file` names it in the document.
pub fn parse_cyclictest_json(text: &str, file: &str) -> Result<RunDocument, ImportError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json(e.to_string()))?;
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
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let cmdline = s("cmdline:");
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
    let interval_us = flag_value(&cmdline, "-i", "--interval").unwrap_or(1000);
    let hist_range = flag_value(&cmdline, "-h", "--histogram")
        .or_else(|| flag_value(&cmdline, "-H", "--histofall"));
    let priority = flag_value(&cmdline, "-p", "--priority")
        .unwrap_or(0)
        .min(99) as i32;
    let policy = if priority > 0 {
        SchedPolicy::Fifo
    } else {
        SchedPolicy::Other
    };

    let mut keys: Vec<(u32, &Value)> = Vec::with_capacity(threads.len());
    for (k, t) in threads {
        let i: u32 = k
            .parse()
            .map_err(|_| bad(format!("thread.{k}"), "thread keys must be numbers"))?;
        keys.push((i, t));
    }
    keys.sort_by_key(|(i, _)| *i);
    if keys.len() > 4096 {
        return Err(bad("thread", "more than 4096 threads"));
    }
    let mut warnings = Vec::new();
    let mut out = Vec::with_capacity(keys.len());
    let mut cpus = Vec::with_capacity(keys.len());
    for (i, t) in keys {
        let path = format!("thread.{i}");
        let cycles = get_u64(t, "cycles", &path)?;
        let min = get_u64(t, "min", &path)?;
        let max = get_u64(t, "max", &path)?;
        let avg = t
            .get("avg")
            .and_then(Value::as_f64)
            .filter(|a| a.is_finite() && *a >= 0.0);
        let cpu = t
            .get("cpu")
            .and_then(Value::as_i64)
            .and_then(|c| u32::try_from(c).ok());
        let node = t
            .get("node")
            .and_then(Value::as_i64)
            .and_then(|c| u32::try_from(c).ok());
        if min > max && cycles > 0 {
            return Err(bad(&path, format!("min {min} > max {max}")));
        }
        let (min_ns, max_ns) = (
            min.checked_mul(unit_ns)
                .ok_or_else(|| bad(&path, "min too large"))?,
            max.checked_mul(unit_ns)
                .ok_or_else(|| bad(&path, "max too large"))?,
        );
        let mut hist = new_histogram();
        let linear = match t.get("histogram") {
            None => None,
            Some(h) => {
                let h = h
                    .as_object()
                    .ok_or_else(|| bad(format!("{path}.histogram"), "not an object"))?;
                let mut pairs = Vec::with_capacity(h.len());
                for (k, c) in h {
                    let b: u64 = k.parse().map_err(|_| {
                        bad(
                            format!("{path}.histogram.{k}"),
                            "bucket keys must be numbers",
                        )
                    })?;
                    let c = c.as_u64().ok_or_else(|| {
                        bad(
                            format!("{path}.histogram.{k}"),
                            "count must be a non-negative integer",
                        )
                    })?;
                    pairs.push((b, c));
                }
                let top = pairs.iter().map(|(b, _)| b + 1).max().unwrap_or(0);
                let n = hist_range.unwrap_or(top).max(top);
                if n > 1_000_000 {
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
                let overflows = match t.get("overflows").and_then(Value::as_u64) {
                    Some(o) => o,
                    None => cycles.checked_sub(sum).ok_or_else(|| {
                        bad(
                            format!("{path}.histogram"),
                            format!("holds {sum} samples but cycles is {cycles}"),
                        )
                    })?,
                };
                if overflows > 0 {
                    let edge = n * unit_ns;
                    hist.saturating_record_n(edge.min(max_ns.max(edge)), overflows);
                    warnings.push(format!(
                        "thread {i}: {overflows} samples were beyond the histogram range ({n} buckets); stored at its edge: percentiles there are lower bounds (max is exact)"
                    ));
                }
                Some(LinearHistogram {
                    unit_ns,
                    buckets,
                    overflows,
                    overflow_cycles: Vec::new(),
                })
            }
        };
        if linear.is_none() && cycles > 0 {
            // Without a histogram only min, avg and max are known: keep them as three points so percentiles
            // are at least bounded by the real extremes.
            hist.saturating_record(min_ns);
            if cycles > 1 {
                hist.saturating_record(max_ns);
            }
            warnings.push(format!("thread {i}: no histogram (cyclictest ran without -h): only min, avg and max are known"));
        }
        let sum_ns = avg.map_or(0, |a| (a * unit_ns as f64 * cycles as f64).round() as u64);
        let mut latency = LatencyStats::from_parts(&hist, min_ns, max_ns, sum_ns, 0);
        latency.count = cycles;
        latency.mean_ns = avg.map_or(0.0, |a| a * unit_ns as f64);
        cpus.push(cpu);
        out.push(CyclicThread {
            index: i,
            tid: 0,
            interval_ns: interval_us * 1000,
            conditions: ThreadConditions {
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
            },
            node,
            cycles,
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
    let unknown = |e: &str| Setting {
        requested: false,
        achieved: false,
        error: Some(e.to_string()),
    };
    let result = CyclicResult {
        config: CyclicConfig {
            threads: out.len() as u32,
            interval_ns: interval_us * 1000,
            distance_ns: 0,
            policy,
            priority,
            priospread: false,
            cpus,
            duration_ns: None,
            loops: None,
            relative: false,
            skip_missed: true,
            hist_buckets: out
                .iter()
                .filter_map(|t| t.linear.as_ref())
                .map(|l| l.buckets.len() as u32)
                .max(),
            unit_ns,
            spike_threshold_ns: None,
            break_threshold_ns: None,
            timeline_interval_ns: 1_000_000_000,
        },
        conditions: ProcessConditions {
            mlockall: unknown("not recorded by cyclictest"),
            cpu_dma_latency_us: Setting {
                requested: None,
                achieved: None,
                error: Some("not recorded by cyclictest".into()),
            },
            cpu_dma_latency_before_us: None,
            main_affinity: Setting {
                requested: None,
                achieved: None,
                error: None,
            },
        },
        threads: out,
        spikes: Vec::new(),
        spikes_total: 0,
        stop_reason: StopReason::Duration,
        break_hit: None,
        elapsed_ns: 0,
        accounting: None,
    };
    let sys = v.get("sysinfo");
    let ss = |k: &str| {
        sys.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Ok(RunDocument {
        schema_version: rtgauge_model::SCHEMA_VERSION,
        tool: ToolInfo {
            name: "cyclictest".into(),
            version: s("rt_test_version:"),
        },
        command_line: cmdline.split_whitespace().map(String::from).collect(),
        started_at: rfc2822_to_3339(&s("start_time")),
        ended_at: rfc2822_to_3339(&s("end_time")),
        system: SystemInfo {
            sysname: ss("sysname"),
            nodename: ss("nodename"),
            release: ss("release"),
            version: ss("version"),
            machine: ss("machine"),
            realtime: sys.and_then(|x| x.get("realtime")).and_then(Value::as_i64) == Some(1),
            cpus_online: CpuSet::default(),
            clocksource: None,
        },
        probes: vec![ProbeResult::Cyclic(result)],
        status: RunStatus::Complete,
        warnings,
        label: None,
        tags: Default::default(),
        profile: None,
        fingerprint: None,
        audit: None,
        verdicts: Vec::new(),
        imported_from: Some(ImportSource {
            format: "cyclictest-json".into(),
            file: file.into(),
            resolution_ns: unit_ns,
        }),
    })
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

    #[test]
    fn imports_the_published_sample() {
        let d = parse_cyclictest_json(SAMPLE, "ct.json").unwrap();
        let ProbeResult::Cyclic(c) = &d.probes[0] else {
            panic!()
        };
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
            ("", "not JSON"),
            ("[]", "not a cyclictest"),
            (r#"{"thread": {"0": {"cycles": 1}}}"#, "thread.0.min"),
            (
                r#"{"thread": {"x": {"cycles": 1, "min": 1, "max": 1}}}"#,
                "thread.x",
            ),
            (
                r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"1": 5}}}}"#,
                "holds 5 samples",
            ),
            (
                r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"a": 1}}}}"#,
                "histogram.a",
            ),
            (
                r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"99999999": 1}}}}"#,
                "buckets",
            ),
            (
                r#"{"thread": {"0": {"cycles": 1, "min": 9, "max": 1}}}"#,
                "min 9 > max 1",
            ),
            (
                r#"{"resolution_in_ns": 7, "thread": {"0": {"cycles": 1, "min": 1, "max": 1}}}"#,
                "resolution_in_ns",
            ),
        ];
        for (text, what) in cases {
            let e = parse_cyclictest_json(text, "f").unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// 500 mutated or truncated versions of a real file: never a panic.
        #[test]
        fn mutated_files_never_panic(cut in 0usize..SAMPLE.len(), pos in 0usize..SAMPLE.len(), byte in proptest::num::u8::ANY) {
            let mut b = SAMPLE.as_bytes().to_vec();
            b[pos] = byte;
            b.truncate(cut.max(1));
            let _ = parse_cyclictest_json(&String::from_utf8_lossy(&b), "f");
        }
    }
}
