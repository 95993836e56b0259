//! `rtgauge hwnoise --json`: hwlatdetect's figures in rt-tests' JSON envelope.

use super::{envelope, Envelope};
use rtgauge_model::hwnoise::HwnoiseResult;
use rtgauge_model::units::{us_f64, us_trunc};
use serde_json::{json, Map, Value};

/// `rtgauge hwnoise --json`: rt-tests' envelope; per CPU (`thread`, keyed by CPU) the windows whose gap
/// reached the threshold (`samples`), their smallest, mean and largest gap in µs (truncated, as hwlatdetect
/// prints them), the NMIs counted, and a histogram of gaps by whole µs (from the HDR histogram, 0.1 %
/// precision), so that `sum(histogram) == samples`; then `gaps`: the largest windows kept, as hwlatdetect's
/// report lists them (`ts` in s since the start, `inner`, `outer` in µs, `cpu`, `count`, `nmi_count`), with
/// `gaps_total` counting every one, and the thresholds it ran with.
pub fn render_json(result: &HwnoiseResult, run_envelope: &Envelope<'_>) -> Value {
    let mut m = envelope(run_envelope);
    let c = &result.config;
    m.insert("num_threads".into(), json!(result.cpus.len()));
    m.insert("threshold".into(), json!(us_trunc(c.threshold_ns)));
    m.insert("width".into(), json!(us_trunc(c.width_ns)));
    m.insert("window".into(), json!(us_trunc(c.window_ns)));
    m.insert("mode".into(), json!(c.mode));
    m.insert("tracer".into(), json!(c.tracer.as_str()));
    let mut threads = Map::new();
    for cpu in &result.cpus {
        let g = &cpu.gaps;
        // From the HDR histogram, which holds every reported window (`gaps` keeps the largest only).
        let mut histogram = std::collections::BTreeMap::<u64, u64>::new();
        for (ns, n) in g.sparse() {
            *histogram.entry(us_trunc(ns)).or_default() += n;
        }
        let h: Map<String, Value> = histogram
            .into_iter()
            .map(|(us, n)| (us.to_string(), json!(n)))
            .collect();
        let mut o = Map::new();
        o.insert("cpu".into(), json!(cpu.cpu));
        o.insert("samples".into(), json!(g.count));
        o.insert("min".into(), json!(us_trunc(g.min_ns)));
        o.insert(
            "avg".into(),
            json!((us_f64(g.mean_ns) * 100.0).round() / 100.0),
        );
        o.insert("max".into(), json!(us_trunc(g.max_ns)));
        o.insert("nmi_count".into(), json!(cpu.nmi_count));
        // osnoise's per-CPU totals, as rtla hwnoise prints them (µs, %).
        if let (Some(s), Some(n)) = (cpu.sampled_ns, cpu.noise_ns) {
            o.insert("runtime".into(), json!(us_trunc(s)));
            o.insert("noise".into(), json!(us_trunc(n)));
            if let Some(pct) = cpu.available_pct() {
                o.insert("cpu_available".into(), json!(pct));
            }
        }
        o.insert("histogram".into(), Value::Object(h));
        threads.insert(cpu.cpu.to_string(), Value::Object(o));
    }
    m.insert("thread".into(), Value::Object(threads));
    let gaps: Vec<Value> = result
        .gaps
        .iter()
        .map(|g| {
            json!({
                "ts": g.at_ns as f64 / 1e9,
                "inner": us_trunc(g.inner_ns),
                "outer": us_trunc(g.outer_ns),
                "cpu": g.cpu,
                "count": g.count,
                "nmi_count": g.nmi_count,
            })
        })
        .collect();
    m.insert("gaps".into(), Value::Array(gaps));
    m.insert("gaps_total".into(), json!(result.gaps_total));
    m.insert("lost".into(), json!(result.lost));
    Value::Object(m)
}
