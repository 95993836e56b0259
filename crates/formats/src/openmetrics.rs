//! The monitor's state in the OpenMetrics text format (prometheus-client's encoder) and in the Prometheus
//! text format node_exporter's textfile collector reads, and which of the two `/metrics` serves a scraper
//! ([`render_metrics`], by what its `Accept` header takes). Series (all prefixed `rtgauge_`):
//! - `latency_seconds{cpu}`: histogram of timer wake-up latency, buckets 1 µs–100 ms. Exact (from the
//!   probe's HDR histograms), updated at the end of each measuring segment (10 s).
//! - `latency_window_max_seconds{cpu}`: the largest sample of the last `window` (default 15 s, at least a
//!   scrape interval), updated every probe tick (100 ms), so a spike shows at the next scrape and stays
//!   visible for a whole window whoever scrapes.
//! - `missed_deadlines_total{cpu}`, `samples_above_gate_total{cpu}` with `gate_seconds`.
//! - `cpu_steal_seconds_total{cpu}`, `cpu_irq_seconds_total{cpu}`, `cpu_softirq_seconds_total{cpu}` from
//!   /proc/stat, for `rate()`.
//! - `audit_finding{rule,severity,status}` = 1 for each rule's current status, `audit_drift{rule}` = 1 while
//!   a rule's status differs from the first audit's (the baseline), `audit_runs_total`,
//!   `audit_last_run_timestamp_seconds`.
//! - `condition_unmet{condition}` = 1 while the monitor's threads do not get what they ask for
//!   (`priority`: SCHED_FIFO refused, so the latency series are of a normal-priority thread; `affinity`,
//!   `mlockall`, …), else 0; the cause is in the monitor's log and its stored snapshots.
//! - the series of each kind watched beside the timer threads, where asked, as the kind makes them (its
//!   watch's families: `MonitorState::watched`, listed in docs/monitor.md and at each kind's families).
//! - `monitor_info{version,interval,cpus}`, `monitor_start_time_seconds`.
//! - `/metrics` only: `http_connections_total{outcome}` (how the endpoint's connections ended: answered,
//!   rejected, head_timeout, write_timeout, evicted, refused, client_closed), `http_open_connections`,
//!   `http_connection_cap`.

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use rtgauge_analysis::monitor::{CpuSeries, MonitorState, RuleState, Values, BUCKETS_NS};
use rtgauge_model::latency::BucketCounts;
use std::fmt::Write as _;

const NS_PER_S: f64 = 1e9;

/// Encode a family of constant-valued series, one per label set.
fn family<M: prometheus_client::encoding::EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (Vec<(&'static str, String)>, M)>,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, metric) in series {
        metric.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn cpu_label(c: &CpuSeries) -> Vec<(&'static str, String)> {
    vec![("cpu", c.cpu.to_string())]
}

impl prometheus_client::collector::Collector for MonitorCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.0;
        encode_monitor(s, &mut enc)?;
        encode_conditions(s, &mut enc)?;
        encode_latency(s, &mut enc)?;
        encode_cpu_time(s, &mut enc)?;
        encode_audit(s, &mut enc)?;
        encode_watched(s, &mut enc)?;
        encode_endpoint(s, &mut enc)
    }
}

/// `monitor_info` and `monitor_start_time_seconds`.
fn encode_monitor(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    family(
        enc,
        "rtgauge_monitor_info",
        "The monitor's version and settings.",
        MetricType::Gauge,
        [(
            vec![
                ("version", s.version.clone()),
                (
                    "interval_seconds",
                    format!("{}", s.interval_ns as f64 / NS_PER_S),
                ),
                ("cpus", s.cpus_text.clone()),
            ],
            ConstGauge::new(1i64),
        )],
    )?;
    family(
        enc,
        "rtgauge_monitor_start_time_seconds",
        "When the monitor started, Unix time.",
        MetricType::Gauge,
        [(vec![], ConstGauge::new(s.start_unix_s))],
    )?;
    Ok(())
}

/// `condition_unmet{condition}`: 1 for each condition the last segment did not get, 0 for the others.
fn encode_conditions(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    use rtgauge_model::conditions::Condition;
    family(
        enc,
        "rtgauge_condition_unmet",
        "1 while the monitor's measuring threads do not get a condition they ask for (priority: SCHED_FIFO refused; affinity; mlockall; cpu_dma_latency): their latency is not of what was asked.",
        MetricType::Gauge,
        Condition::ALL.into_iter().filter(|c| c.bears_on_figures()).map(|c| {
            let unmet = s.unmet.iter().any(|u| u.condition == c);
            (
                vec![("condition", c.as_str().to_string())],
                ConstGauge::new(i64::from(unmet)),
            )
        }),
    )
}

/// A histogram family: one series per label set, of per-bucket counts in [`BUCKETS_NS`] (+Inf last).
fn histograms<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Vec<(&'static str, String)>, &'a BucketCounts)>,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        // Per bucket: the encoder makes them cumulative.
        let buckets: Vec<(f64, u64)> = BUCKETS_NS
            .iter()
            .map(|&b| b as f64 / NS_PER_S)
            .chain([f64::INFINITY])
            .zip(h.buckets)
            .collect();
        m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
            h.sum_ns as f64 / NS_PER_S,
            h.count,
            &buckets,
            None,
        )?;
    }
    Ok(())
}

/// The latency series: histogram, window maximum, missed deadlines, samples above the gate, the gate.
fn encode_latency(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    histograms(
        enc,
        "rtgauge_latency_seconds",
        "Timer wake-up latency (actual minus intended wake-up), per measured CPU.",
        s.cpus.iter().map(|c| (cpu_label(c), &c.latency)),
    )?;
    family(
        enc,
        "rtgauge_latency_window_max_seconds",
        "Largest timer wake-up latency in the last window (--window, default 15 s), per CPU.",
        MetricType::Gauge,
        s.cpus.iter().map(|c| {
            (
                cpu_label(c),
                ConstGauge::new(c.window_max_ns() as f64 / NS_PER_S),
            )
        }),
    )?;
    family(
        enc,
        "rtgauge_missed_deadlines",
        "Periods that were already over when the measuring thread woke.",
        MetricType::Counter,
        s.cpus
            .iter()
            .map(|c| (cpu_label(c), ConstCounter::new(c.missed))),
    )?;
    family(
        enc,
        "rtgauge_samples_above_gate",
        "Samples at or above the gate (rtgauge_gate_seconds).",
        MetricType::Counter,
        s.cpus
            .iter()
            .map(|c| (cpu_label(c), ConstCounter::new(c.above_gate))),
    )?;
    family(
        enc,
        "rtgauge_gate_seconds",
        "The latency bound samples are counted against (--gate).",
        MetricType::Gauge,
        [(vec![], ConstGauge::new(s.gate_ns as f64 / NS_PER_S))],
    )?;
    Ok(())
}

/// CPU time taken from the measured CPUs (/proc/stat steal, irq, softirq), as counters.
fn encode_cpu_time(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    for (name, help, get) in [
        (
            "rtgauge_cpu_steal_seconds",
            "Time the hypervisor ran something else while this CPU's vCPU wanted to run (/proc/stat steal).",
            (|c: &CpuSeries| c.steal_s) as fn(&CpuSeries) -> f64,
        ),
        (
            "rtgauge_cpu_irq_seconds",
            "Time in hard interrupt handlers on this CPU (/proc/stat irq).",
            |c: &CpuSeries| c.irq_s,
        ),
        (
            "rtgauge_cpu_softirq_seconds",
            "Time in softirqs on this CPU (/proc/stat softirq).",
            |c: &CpuSeries| c.softirq_s,
        ),
    ] {
        family(
            enc,
            name,
            help,
            MetricType::Counter,
            s.cpus
                .iter()
                .map(|c| (cpu_label(c), ConstCounter::new(get(c)))),
        )?;
    }
    // Only where countable: a CPU without the counter has no series rather than a zero.
    if s.cpus.iter().any(|c| c.smis.is_some()) {
        family(
            enc,
            "rtgauge_smis",
            "System Management Interrupts this CPU took since the monitor started (MSR_SMI_COUNT): firmware ran and no kernel saw it.",
            MetricType::Counter,
            s.cpus
                .iter()
                .filter_map(|c| Some((cpu_label(c), ConstCounter::new(c.smis?)))),
        )?;
    }
    Ok(())
}

/// The audit series: each rule's status, its drift from the baseline, passes and the last pass's time.
fn encode_audit(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    // Labels per rule: its name, one more (label name and value), its current status.
    let per_rule =
        |other: &'static str, value: fn(&RuleState) -> &String, gauge: fn(&RuleState) -> i64| {
            s.rules.iter().map(move |(rule, r)| {
                (
                    vec![
                        ("rule", rule.clone()),
                        (other, value(r).clone()),
                        ("status", r.status.clone()),
                    ],
                    ConstGauge::new(gauge(r)),
                )
            })
        };
    family(
        enc,
        "rtgauge_audit_finding",
        "1 for each audit rule's current status.",
        MetricType::Gauge,
        per_rule("severity", |r| &r.severity, |_| 1),
    )?;
    family(
        enc,
        "rtgauge_audit_drift",
        "1 while an audit rule's status differs from the first audit pass of this monitor.",
        MetricType::Gauge,
        per_rule("baseline", |r| &r.baseline, |r| i64::from(r.drifted())),
    )?;
    family(
        enc,
        "rtgauge_audit_runs",
        "Audit passes completed.",
        MetricType::Counter,
        [(vec![], ConstCounter::new(s.audit_runs))],
    )?;
    family(
        enc,
        "rtgauge_audit_last_run_timestamp_seconds",
        "When the last audit pass ended, Unix time (0 before the first).",
        MetricType::Gauge,
        [(vec![], ConstGauge::new(s.audit_last_unix_s))],
    )?;
    Ok(())
}

/// The series of the kinds watched beside the timer threads, as each kind makes them: every family with
/// its descriptor, also one without series yet.
fn encode_watched(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    for f in s.watched.iter().flatten() {
        match &f.values {
            Values::Gauges(v) => family(
                enc,
                f.name,
                f.help,
                MetricType::Gauge,
                v.iter().map(|(l, x)| (l.clone(), ConstGauge::new(*x))),
            )?,
            Values::GaugesF(v) => family(
                enc,
                f.name,
                f.help,
                MetricType::Gauge,
                v.iter().map(|(l, x)| (l.clone(), ConstGauge::new(*x))),
            )?,
            Values::Counters(v) => family(
                enc,
                f.name,
                f.help,
                MetricType::Counter,
                v.iter().map(|(l, x)| (l.clone(), ConstCounter::new(*x))),
            )?,
            Values::Histograms(v) => {
                histograms(enc, f.name, f.help, v.iter().map(|(l, h)| (l.clone(), h)))?
            }
        }
    }
    Ok(())
}

/// The endpoint's own connections, where an endpoint serves the rendering.
fn encode_endpoint(s: &MonitorState, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let Some(e) = &s.endpoint else {
        return Ok(());
    };
    family(
        enc,
        "rtgauge_http_connections",
        "Connections to this /metrics endpoint that ended, by outcome: answered; rejected (a malformed request, or neither GET nor HEAD: answered 4xx); head_timeout (no whole request within the deadline); write_timeout (the answer not taken within the deadline); evicted (closed at the cap while still sending its request); refused (over the cap with none to evict); client_closed.",
        MetricType::Counter,
        e.ended
            .iter()
            .map(|(outcome, n)| (vec![("outcome", (*outcome).to_string())], ConstCounter::new(*n))),
    )?;
    family(
        enc,
        "rtgauge_http_open_connections",
        "Connections to this /metrics endpoint open now.",
        MetricType::Gauge,
        [(vec![], ConstGauge::new(e.open as i64))],
    )?;
    family(
        enc,
        "rtgauge_http_connection_cap",
        "The most connections this /metrics endpoint holds at once.",
        MetricType::Gauge,
        [(vec![], ConstGauge::new(e.cap as i64))],
    )
}

/// The monitor's state as a prometheus-client collector: a copy taken for one rendering.
#[derive(Debug)]
pub struct MonitorCollector(pub MonitorState);

/// The state in the OpenMetrics text format (what `/metrics` serves).
pub fn render_openmetrics(state: &MonitorState) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(MonitorCollector(state.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would only come from our own collector.
    if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
        out.clear();
        out.push_str("# EOF\n");
    }
    out
}

/// The same series in the Prometheus text format 0.0.4 that node_exporter's textfile collector parses:
/// counter families are named with their `_total` suffix, and the OpenMetrics-only `# UNIT`/`# EOF` lines
/// are dropped. (prometheus-client writes OpenMetrics only; this is the whole difference for our series.)
pub fn render_textfile(state: &MonitorState) -> String {
    let om = render_openmetrics(state);
    let mut counters = std::collections::HashSet::new();
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                counters.insert(name.to_string());
            }
        }
    }
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# TYPE ", "# HELP "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        let _ = writeln!(out, "{}", renamed.as_deref().unwrap_or(line));
    }
    out
}

/// Whether a scraper's `Accept` header value takes OpenMetrics (else it gets the Prometheus text format).
pub fn accepts_openmetrics(accept: &str) -> bool {
    accept.contains("application/openmetrics-text")
}

/// What `/metrics` serves: OpenMetrics to a scraper that accepts it, else the Prometheus 0.0.4 text format
/// (node_exporter's textfile format), with its content type.
pub fn render_metrics(state: &MonitorState, openmetrics: bool) -> (String, &'static str) {
    if openmetrics {
        (
            render_openmetrics(state),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (
            render_textfile(state),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn state() -> MonitorState {
        let mut c = CpuSeries::new(1);
        c.add_bucket(3_000, 10);
        c.add_bucket(150_000, 2);
        c.latency.count = 12;
        c.latency.sum_ns = 330_000;
        c.above_gate = 2;
        c.add_peak(1_000_000_000, 150_000, 15_000_000_000);
        c.missed = 1;
        let mut s = MonitorState {
            version: "0.1.0".into(),
            interval_ns: 1_000_000,
            cpus_text: "1".into(),
            gate_ns: 100_000,
            cpus: vec![c],
            ..MonitorState::default()
        };
        s.apply_audit([("cstate".into(), "high".into(), "pass".into())], 1.0);
        s
    }

    #[test]
    fn smis_are_a_counter_only_where_countable() {
        let mut s = state();
        assert!(!render_openmetrics(&s).contains("rtgauge_smis"));
        s.set_smis(&std::collections::BTreeMap::from([(1, 3)]));
        let t = render_openmetrics(&s);
        assert!(t.contains("rtgauge_smis_total{cpu=\"1\"} 3"), "{t}");
    }

    #[test]
    fn a_watched_stream_has_its_series_only_where_one_is_watched() {
        let mut s = state();
        assert!(!render_openmetrics(&s).contains("rtgauge_net"));
        let mut n = rtgauge_analysis::kind::net_latency::NetSeries {
            stream: 7,
            at: "10.0.0.2:7000".into(),
            gate_ns: 250_000,
            ..Default::default()
        };
        n.counts.received = 10;
        n.counts.lost = 2;
        n.counts.latency.buckets[BucketCounts::bucket_of(30_000)] = 10;
        n.counts.latency.count = 10;
        n.counts.latency.sum_ns = 300_000;
        n.peaks.add(1, 40_000, 15_000_000_000);
        s.watched.push(n.families());
        let t = render_textfile(&s);
        for line in [
            "rtgauge_net_stream_info{stream=\"7\",at=\"10.0.0.2:7000\"} 1",
            "rtgauge_net_latency_seconds_bucket{le=\"0.00005\",stream=\"7\",stage=\"total\"} 10",
            "rtgauge_net_latency_seconds_bucket{le=\"0.00002\",stream=\"7\",stage=\"total\"} 0",
            "rtgauge_net_latency_seconds_count{stream=\"7\",stage=\"path\"} 0",
            "rtgauge_net_packets_lost_total{stream=\"7\"} 2",
            "rtgauge_net_latency_window_max_seconds{stream=\"7\"} 0.00004",
            "rtgauge_net_gate_seconds{} 0.00025",
        ] {
            assert!(t.contains(line), "{line}: {t}");
        }
    }

    #[test]
    fn time_sources_have_their_series_only_where_they_are_followed() {
        use rtgauge_model::clock::*;
        let mut s = state();
        assert!(!render_openmetrics(&s).contains("rtgauge_clock"));
        let source = |path: &str, reference: Option<&str>, offset: i64| SourceResult {
            kind: SourceKind::Ptp4l,
            path: path.into(),
            lock_ns: 1_000,
            polls: 10,
            measurements: 5,
            errors: 1,
            offset: None,
            locked: true,
            locked_now: reference.is_some(),
            following: reference.is_some(),
            serving: false,
            readable: true,
            unlocks: 2,
            reference_changes: 1,
            settle_ns: Some(1),
            offset_max_all_ns: 9,
            holdovers: Vec::new(),
            holdovers_dropped: 0,
            in_holdover: reference.is_none(),
            events: Vec::new(),
            events_dropped: 0,
            timeline: Vec::new(),
            last: Some(SourceStatus {
                state: if reference.is_some() {
                    "SLAVE"
                } else {
                    "LISTENING"
                }
                .into(),
                reference: reference.map(|id| Reference {
                    id: id.into(),
                    class: Some(6),
                }),
                offset_ns: Some(offset),
                delay_ns: Some(400_000),
                ..SourceStatus::default()
            }),
        };
        let step = ClockStep {
            at_ns: 5,
            by_ns: -20_000_000,
            bound_ns: 50,
        };
        s.watched
            .push(rtgauge_analysis::kind::clock::monitor_families(
                &ClockResult {
                    config: ClockConfig {
                        rate_hz: 1.0,
                        duration: rtgauge_model::Nanos::from_secs(60),
                        lock_ns: None,
                        sources: Vec::new(),
                    },
                    stop_reason: rtgauge_model::kind::StopReason::Duration,
                    elapsed_ns: 1,
                    kernel: KernelClock {
                        steps: vec![step],
                        last_step: Some(step),
                        ..KernelClock::default()
                    },
                    sources: vec![
                        source("/a", Some("020000.fffe.000c02"), -250),
                        source("/b", None, 7),
                    ],
                    left_out: Vec::new(),
                },
            ));
        let t = render_textfile(&s);
        for line in [
            "rtgauge_clock_offset_seconds{source=\"ptp4l:/a\"} -2.5e-7",
            "rtgauge_clock_locked{source=\"ptp4l:/a\"} 1",
            "rtgauge_clock_locked{source=\"ptp4l:/b\"} 0",
            "rtgauge_clock_holdover{source=\"ptp4l:/b\"} 1",
            "rtgauge_clock_unlocks_total{source=\"ptp4l:/a\"} 2",
            "rtgauge_clock_poll_errors_total{source=\"ptp4l:/b\"} 1",
            "rtgauge_clock_reference_info{source=\"ptp4l:/a\",reference=\"020000.fffe.000c02\",class=\"6\"} 1",
            "rtgauge_clock_state_info{source=\"ptp4l:/b\",state=\"LISTENING\"} 1",
            "rtgauge_clock_steps_total{} 1",
            "rtgauge_clock_last_step_seconds{} -0.02",
            "rtgauge_clock_lock_bound_seconds{source=\"ptp4l:/a\"} 0.000001",
        ] {
            assert!(t.contains(line), "{line}: {t}");
        }
        assert!(
            !t.contains("rtgauge_clock_reference_info{source=\"ptp4l:/b\""),
            "{t}"
        );
    }

    #[test]
    fn endpoint_counters_only_where_an_endpoint_serves_them() {
        let mut s = state();
        assert!(!render_openmetrics(&s).contains("rtgauge_http"));
        s.endpoint = Some(rtgauge_analysis::monitor::EndpointCounts {
            open: 3,
            cap: 64,
            ended: vec![("answered", 7), ("head_timeout", 2)],
        });
        for t in [render_openmetrics(&s), render_textfile(&s)] {
            assert!(
                t.contains("rtgauge_http_connections_total{outcome=\"head_timeout\"} 2"),
                "{t}"
            );
            assert!(t.contains("rtgauge_http_open_connections{} 3"), "{t}");
            assert!(t.contains("rtgauge_http_connection_cap{} 64"), "{t}");
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_counters_end_in_total() {
        let t = render_openmetrics(&state());
        assert!(
            t.contains("rtgauge_latency_seconds_bucket{le=\"0.000005\",cpu=\"1\"} 10"),
            "{t}"
        );
        assert!(
            t.contains("rtgauge_latency_seconds_bucket{le=\"0.0002\",cpu=\"1\"} 12"),
            "{t}"
        );
        assert!(
            t.contains("rtgauge_latency_seconds_count{cpu=\"1\"} 12"),
            "{t}"
        );
        assert!(
            t.contains("rtgauge_samples_above_gate_total{cpu=\"1\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("rtgauge_latency_window_max_seconds{cpu=\"1\"} 0.00015"),
            "{t}"
        );
        assert!(t.ends_with("# EOF\n"));
        let p = render_textfile(&state());
        assert!(
            p.contains("# TYPE rtgauge_missed_deadlines_total counter"),
            "{p}"
        );
        assert!(!p.contains("# EOF"));
    }

    #[test]
    fn drift_flips_when_a_status_changes_and_back() {
        let mut s = state();
        let log = s.apply_audit([("cstate".into(), "high".into(), "fail".into())], 2.0);
        assert_eq!(log, ["drift: rule cstate: pass at start, fail now"]);
        assert!(render_openmetrics(&s)
            .contains("rtgauge_audit_drift{rule=\"cstate\",baseline=\"pass\",status=\"fail\"} 1"));
        let log = s.apply_audit([("cstate".into(), "high".into(), "pass".into())], 3.0);
        assert_eq!(log, ["drift ended: rule cstate: pass again"]);
        assert_eq!(s.audit_runs, 3);
    }
}
