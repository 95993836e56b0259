//! The state of `rtgauge monitor`: the latency series of each watched CPU (exact histogram buckets, peaks
//! over a window, missed deadlines, samples above the gate, CPU time), and the audit's rules with their
//! drift from the first pass, and how a measured segment and an audit pass fold into them (updated by the
//! monitor's threads); the series of the kinds watched beside them, as each kind makes them ([`Family`]:
//! plain data); `rtgauge_formats::openmetrics` renders it.

use std::collections::{BTreeMap, VecDeque};

use rtgauge_model::latency::BucketCounts;
pub use rtgauge_model::latency::EXPORT_BUCKETS_NS as BUCKETS_NS;

/// Per-CPU latency series.
#[derive(Debug, Clone, Default)]
pub struct CpuSeries {
    /// The CPU measured.
    pub cpu: u32,
    /// The latency histogram in the export's buckets, with the exact count and sum.
    pub latency: BucketCounts,
    /// Missed deadlines.
    pub missed: u64,
    /// Samples at or above the gate.
    pub above_gate: u64,
    /// Largest sample per tick over the window.
    pub peaks: WindowPeaks,
    /// Steal time of the CPU since the monitor started, s (/proc/stat).
    pub steal_s: f64,
    /// Hard-IRQ time of the CPU since the monitor started, s.
    pub irq_s: f64,
    /// Softirq time of the CPU since the monitor started, s.
    pub softirq_s: f64,
    /// SMIs the CPU took since the monitor started (`MSR_SMI_COUNT`); `None` where not countable.
    pub smis: Option<u64>,
}

impl CpuSeries {
    /// An empty series for `cpu`.
    pub fn new(cpu: u32) -> CpuSeries {
        CpuSeries {
            cpu,
            ..CpuSeries::default()
        }
    }

    /// Add `count` samples of value `value_ns` to the histogram's buckets (count and sum are kept apart,
    /// exact, by the caller).
    pub fn add_bucket(&mut self, value_ns: u64, count: u64) {
        self.latency.buckets[BucketCounts::bucket_of(value_ns)] += count;
    }

    /// Record one tick's peak at `now_ns` and forget peaks older than `window_ns`.
    pub fn add_peak(&mut self, now_ns: u64, peak_ns: u64, window_ns: u64) {
        self.peaks.add(now_ns, peak_ns, window_ns);
    }

    /// The largest peak of the window, ns.
    pub fn window_max_ns(&self) -> u64 {
        self.peaks.max_ns()
    }
}

/// The largest value of each tick over a window, newest last: `(tick end in ns since start, peak)`.
#[derive(Debug, Clone, Default)]
pub struct WindowPeaks(VecDeque<(u64, u64)>);

impl WindowPeaks {
    /// Record one tick's peak at `now_ns` and forget peaks older than `window_ns`.
    pub fn add(&mut self, now_ns: u64, peak_ns: u64, window_ns: u64) {
        self.0.push_back((now_ns, peak_ns));
        while let Some(&(t, _)) = self.0.front() {
            if now_ns.saturating_sub(t) > window_ns {
                self.0.pop_front();
            } else {
                break;
            }
        }
    }

    /// The largest peak of the window, ns.
    pub fn max_ns(&self) -> u64 {
        self.0.iter().map(|&(_, p)| p).max().unwrap_or(0)
    }
}

/// A family of series as a watched kind hands it to the renderers (`rtgauge_formats::openmetrics`): its
/// name and help, and one value per label set, all of the family's type. Plain data, so that the renderers
/// name no kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name (`rtgauge_…`; a counter's without `_total`).
    pub name: &'static str,
    /// Its help text.
    pub help: &'static str,
    /// Its series, one per label set.
    pub values: Values,
}

/// Label names and values, in order.
pub type Labels = Vec<(&'static str, String)>;

/// A family's series by its type (an integer gauge is written `1`, a float gauge as the float).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Gauges of whole numbers (a 0/1 state).
    Gauges(Vec<(Labels, i64)>),
    /// Gauges of measured values (seconds, a time stamp).
    GaugesF(Vec<(Labels, f64)>),
    /// Counters.
    Counters(Vec<(Labels, u64)>),
    /// Histograms in the export's buckets ([`BUCKETS_NS`]), each with its exact count and sum.
    Histograms(Vec<(Labels, BucketCounts)>),
}

impl Family {
    /// A family of integer gauges.
    pub fn gauges(
        name: &'static str,
        help: &'static str,
        v: impl IntoIterator<Item = (Labels, i64)>,
    ) -> Family {
        Family {
            name,
            help,
            values: Values::Gauges(v.into_iter().collect()),
        }
    }

    /// A family of float gauges.
    pub fn gauges_f(
        name: &'static str,
        help: &'static str,
        v: impl IntoIterator<Item = (Labels, f64)>,
    ) -> Family {
        Family {
            name,
            help,
            values: Values::GaugesF(v.into_iter().collect()),
        }
    }

    /// A family of counters.
    pub fn counters(
        name: &'static str,
        help: &'static str,
        v: impl IntoIterator<Item = (Labels, u64)>,
    ) -> Family {
        Family {
            name,
            help,
            values: Values::Counters(v.into_iter().collect()),
        }
    }

    /// A family of histograms.
    pub fn histograms(
        name: &'static str,
        help: &'static str,
        v: impl IntoIterator<Item = (Labels, BucketCounts)>,
    ) -> Family {
        Family {
            name,
            help,
            values: Values::Histograms(v.into_iter().collect()),
        }
    }
}

/// One audit rule as the monitor last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleState {
    /// The rule's severity.
    pub severity: String,
    /// Its status at the last pass.
    pub status: String,
    /// Status of the first audit pass.
    pub baseline: String,
}

impl RuleState {
    /// Whether the status differs from the first pass's.
    pub fn drifted(&self) -> bool {
        self.status != self.baseline
    }
}

/// Everything a scrape shows.
#[derive(Debug, Clone, Default)]
pub struct MonitorState {
    /// rtgauge's version.
    pub version: String,
    /// The timer probe's period, ns.
    pub interval_ns: u64,
    /// The CPUs watched, as a list.
    pub cpus_text: String,
    /// When the monitor started, Unix time, s.
    pub start_unix_s: f64,
    /// The latency gate samples are counted above, ns.
    pub gate_ns: u64,
    /// One series per watched CPU.
    pub cpus: Vec<CpuSeries>,
    /// Each audit rule as last seen.
    pub rules: BTreeMap<String, RuleState>,
    /// Audit passes so far.
    pub audit_runs: u64,
    /// When the last audit pass ran, Unix time, s.
    pub audit_last_unix_s: f64,
    /// What the last segment asked for and did not get (a real-time policy refused, …): its latency
    /// series are then not of what was asked.
    pub unmet: Vec<rtgauge_model::conditions::Unmet>,
    /// The series of each kind watched beside the timer threads, as its watch last made them, in the
    /// order the watches started.
    pub watched: Vec<Vec<Family>>,
    /// What the `/metrics` endpoint did with its connections, copied in for the rendering that serves
    /// them (absent from the textfile, which no endpoint serves).
    pub endpoint: Option<EndpointCounts>,
}

/// The `/metrics` endpoint's connections: how many are open, its cap, and how those that ended ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointCounts {
    /// Connections open now.
    pub open: u64,
    /// The most connections it holds at once (beyond it, the oldest still sending its request is closed).
    pub cap: u64,
    /// Connections ended since the monitor started, by outcome (`answered`, `rejected`, `head_timeout`,
    /// `write_timeout`, `evicted`, `refused`, `client_closed`), in a fixed order.
    pub ended: Vec<(&'static str, u64)>,
}

impl MonitorState {
    /// Set each watched CPU's steal, IRQ and softirq seconds since boot: (cpu → (steal, irq, softirq)).
    pub fn set_cpu_times<T: Copy + Into<(f64, f64, f64)>>(&mut self, times: &BTreeMap<u32, T>) {
        for c in &mut self.cpus {
            if let Some(&t) = times.get(&c.cpu) {
                (c.steal_s, c.irq_s, c.softirq_s) = t.into();
            }
        }
    }

    /// Set each watched CPU's SMIs since the monitor started (cpu → count).
    pub fn set_smis(&mut self, smis: &BTreeMap<u32, u64>) {
        for c in &mut self.cpus {
            if let Some(&n) = smis.get(&c.cpu) {
                c.smis = Some(n);
            }
        }
    }

    /// Fold one segment's exact histograms and counters into the exported series.
    pub fn fold_segment(&mut self, r: &rtgauge_model::cyclic::CyclicResult, gate_ns: u64) {
        for (c, t) in self.cpus.iter_mut().zip(&r.threads) {
            c.missed += t.missed_deadlines;
            c.latency.count += t.latency.count;
            c.latency.sum_ns += u128::from(t.latency.sum_ns);
            let Ok(h) = t.latency.hdr.decode() else {
                continue;
            };
            // Each HDR bucket is counted at its highest equivalent value: a sample is never put in a lower
            // Prometheus bucket than its own (HDR's 3 significant digits make the difference < 0.1 %).
            for v in h.iter_recorded() {
                c.add_bucket(v.value_iterated_to(), v.count_at_value());
            }
            c.above_gate += h.count_between(gate_ns, u64::MAX);
        }
    }

    /// Fold one audit pass in: `(rule, severity, status)`. Returns the rules whose drift state changed, as
    /// log lines.
    pub fn apply_audit(
        &mut self,
        findings: impl IntoIterator<Item = (String, String, String)>,
        now_unix_s: f64,
    ) -> Vec<String> {
        let mut log = Vec::new();
        for (rule, severity, status) in findings {
            match self.rules.get_mut(&rule) {
                None => {
                    self.rules.insert(
                        rule,
                        RuleState {
                            severity,
                            baseline: status.clone(),
                            status,
                        },
                    );
                }
                Some(r) => {
                    if r.status != status {
                        let was = r.drifted();
                        r.status = status;
                        r.severity = severity;
                        if r.drifted() {
                            log.push(format!(
                                "drift: rule {rule}: {} at start, {} now",
                                r.baseline, r.status
                            ));
                        } else if was {
                            log.push(format!("drift ended: rule {rule}: {} again", r.status));
                        }
                    }
                }
            }
        }
        self.audit_runs += 1;
        self.audit_last_unix_s = now_unix_s;
        log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_flips_when_a_status_changes_and_back() {
        let mut s = MonitorState::default();
        s.apply_audit([("cstate".into(), "high".into(), "pass".into())], 1.0);
        let log = s.apply_audit([("cstate".into(), "high".into(), "fail".into())], 2.0);
        assert_eq!(log, ["drift: rule cstate: pass at start, fail now"]);
        assert!(s.rules["cstate"].drifted());
        let log = s.apply_audit([("cstate".into(), "high".into(), "pass".into())], 3.0);
        assert_eq!(log, ["drift ended: rule cstate: pass again"]);
        assert_eq!(s.audit_runs, 3);
    }

    #[test]
    fn window_max_forgets_old_peaks() {
        let mut c = CpuSeries::new(0);
        c.add_peak(0, 5_000_000, 15_000_000_000);
        c.add_peak(10_000_000_000, 20_000, 15_000_000_000);
        assert_eq!(c.window_max_ns(), 5_000_000);
        c.add_peak(16_000_000_000, 10_000, 15_000_000_000);
        assert_eq!(c.window_max_ns(), 20_000);
    }
}
