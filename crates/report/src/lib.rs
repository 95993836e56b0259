//! The views: terminal tables, HTML pages and charts, comparisons; each a pure function of model data
//! (`render_*`), so it can be golden-tested and re-rendered from stored runs. File formats (rt-tests, CSV)
//! are rtgauge-formats'.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
pub mod capacity;
pub mod charts;
pub mod compare;
pub mod escape;
pub mod fingerprint;
pub mod fleet;
pub mod html;
pub mod mem;
pub mod net;
pub mod numa;
pub mod ops;
pub mod plan;
pub mod record;
pub mod shortfalls;
pub mod spikes;
pub mod terminal;
pub mod threads;
mod units;
pub mod verdict;
pub mod vm;

/// A JSON value as `(dotted.path, value)` rows (objects and arrays of objects descend; `null` reads
/// "none"), for fingerprint tables and differences.
pub(crate) fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().any(|x| x.is_object()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        serde_json::Value::Null => out.push((prefix.to_string(), "none".into())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// A timer-latency probe's period for titles: "1000 µs", or "unknown" for an imported rt-tests histogram
/// that did not state it (0).
pub fn interval_text(interval_ns: u64) -> String {
    if interval_ns == 0 {
        "unknown".to_string()
    } else {
        format!("{} µs", interval_ns / 1000)
    }
}
