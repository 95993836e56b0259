//! The timer wake-up latency probe in the session: its live threads on every tick, its late samples handed
//! over as they happen (so the worst episodes are pinned in the trace while it runs), and its episodes
//! broken down at the end, with the `-b`/`--break-above` sample's trace.

use crate::why::{attribute, explain, rule_of, Scope, WhyOpts, WhyRun};
use crate::{KindProbe, Probe, SessionError, SessionObserver, Tick};
use rtgauge_model::attribution::{BreakTrace, EpisodeThreshold, BREAK_TRACE_NS};
use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::latency::LiveThread;
use rtgauge_model::latency::Spike;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::cyclic::CyclicPlan;
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::trace::TraceData;
use std::time::Duration;

/// Late samples below this are not handed over by the timer probe when the threshold is left to the rule:
/// the rule's threshold is at least 3 × p90, and no platform measured so far has a p90 under 2 µs.
pub const LATE_FLOOR_NS: u64 = 5_000;

/// The timer probe's floor for handing late samples over, as `why` asks (with `--trace` only).
pub fn late_floor_ns(why: &WhyOpts) -> Option<u64> {
    why.trace.then(|| {
        why.threshold
            .as_ref()
            .map_or(LATE_FLOOR_NS, |t| t.ns.min(LATE_FLOOR_NS))
    })
}

/// The threshold `--spike US` sets.
pub fn spike_threshold(us: u64) -> EpisodeThreshold {
    EpisodeThreshold {
        ns: rtgauge_model::Nanos::from_us(us).as_ns(),
        rule: "--spike".into(),
    }
}

/// The timer wake-up latency probe.
pub struct Cyclic<'a>(pub &'a CyclicPlan);

impl KindProbe for Cyclic<'_> {
    type Result = CyclicResult;
}

impl Probe for Cyclic<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.config.cpus.iter().flatten().copied())
    }

    fn why_scope(&self) -> Option<Scope> {
        Some(Scope {
            cpus: crate::why::observed_cpus(&self.0.config.cpus),
            interval_ns: self.0.config.timeline_interval_ns,
            live_episodes: true,
            finish: crate::why::finish_as::<CyclicResult>,
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        struct Adapter<'o> {
            inner: &'o mut dyn SessionObserver,
            cpus: &'o [Option<u32>],
        }
        impl rtgauge_probe::observe::ProbeObserver<CyclicResult, [LiveThread]> for Adapter<'_> {
            fn tick(
                &mut self,
                elapsed: Duration,
                threads: &[LiveThread],
                checkpoint: &mut dyn FnMut() -> CyclicResult,
            ) {
                let tick = Tick {
                    elapsed,
                    threads,
                    cpus: self.cpus,
                };
                self.inner.tick(&tick, Some(&mut || checkpoint().into()));
            }
            fn late(&mut self, late: &[Spike]) {
                self.inner.late(late);
            }
        }
        // The timer probe measures from its first period: the observers start with it.
        observer.start(None);
        let mut a = Adapter {
            inner: observer,
            cpus: &self.0.config.cpus,
        };
        let r = rtgauge_probe::cyclic::run(self.0, stop, &mut a).map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

impl crate::why::Explained for CyclicResult {
    /// Attach counters and episode breakdowns to a cyclic result: the episodes at or above the threshold
    /// (`threshold`, else the rule on the run's distribution), worst first, at most
    /// [`rtgauge_model::attribution::MAX_EPISODES`].
    fn explain(w: WhyRun, r: &mut CyclicResult, threshold: Option<&EpisodeThreshold>) {
        let mut e = w.end(r.elapsed_ns);
        if let Some(d) = &e.trace {
            let thr = threshold
                .cloned()
                .unwrap_or_else(|| rule_of(r.threads.iter().map(|t| &t.latency), 0));
            let candidates = e.episodes.above(thr.ns);
            explain(&mut e.why, d, candidates, thr);
            if let Some(t) = e.why.trace.as_mut() {
                t.late_dropped = r.threads.iter().map(|t| t.late_dropped).sum();
                t.late_coalesced = r.threads.iter().map(|t| t.late_coalesced).sum();
            }
            e.why.break_sample = break_trace(r, d);
        }
        r.why = Some(e.why());
    }
}

/// The `-b`/`--break-above` sample (the break thread's spike of the break value) and its CPU's trace before it.
fn break_trace(r: &CyclicResult, d: &TraceData) -> Option<BreakTrace> {
    let (thread, value) = r.break_hit?;
    let s = r
        .spikes
        .iter()
        .find(|s| s.thread == thread && s.latency_ns == value)?;
    let cpu = s
        .cpu
        .or_else(|| r.config.cpus.get(thread as usize).copied().flatten())?;
    let start = s.monotonic_ns.saturating_sub(s.latency_ns);
    let b = attribute(d, cpu, thread, start, s.monotonic_ns)?;
    let from = s.monotonic_ns.saturating_sub(BREAK_TRACE_NS);
    let spans = d
        .spans
        .get(&cpu)?
        .iter()
        .filter(|x| x.end_ns >= from && x.start_ns <= s.monotonic_ns)
        .cloned()
        .collect();
    Some(BreakTrace {
        breakdown: b,
        spans,
    })
}
