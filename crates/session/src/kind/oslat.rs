//! The busy-loop OS-noise probe in the session: its worst gaps are its episodes (a stall is one gap of a
//! busy loop), found at its end and broken down from the trace of the last minute.

use super::Threadless;
use crate::why::{count_at_or_above, explain, rule_of, Scope, WhyRun};
use crate::{KindProbe, Probe, SessionError, SessionObserver};
use rtgauge_analysis::episodes::{EpisodeTracker, Late};
use rtgauge_model::attribution::EpisodeThreshold;
use rtgauge_model::oslat::OslatResult;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::oslat::OslatPlan;
use rtgauge_probe::stop::StopFlag;

/// A busy loop's gaps are its own cost (tens of ns) in the body of their distribution, so the rule alone
/// would call every timer tick an episode: an oslat episode is at least this long.
pub const EPISODE_FLOOR_NS: u64 = 10_000;

/// The busy-loop OS-noise probe.
pub struct Oslat<'a>(pub &'a OslatPlan);

impl KindProbe for Oslat<'_> {
    type Result = OslatResult;
}

impl Probe for Oslat<'_> {
    fn measured(&self) -> CpuSet {
        CpuSet::new(self.0.config.cpus.iter().copied())
    }

    fn why_scope(&self) -> Option<Scope> {
        Some(Scope {
            cpus: self.measured(),
            interval_ns: self.0.config.timeline_interval_ns,
            live_episodes: false,
            finish: crate::why::finish_as::<OslatResult>,
        })
    }

    fn run(
        &self,
        stop: &StopFlag,
        observer: &mut dyn SessionObserver,
    ) -> Result<Vec<ProbeResult>, SessionError> {
        let r = rtgauge_probe::oslat::run(self.0, stop, &mut Threadless(observer))
            .map_err(SessionError::probe)?;
        Ok(vec![r.into()])
    }
}

impl crate::why::Explained for OslatResult {
    /// Attach counters and the breakdowns of the gaps at or above the threshold to an oslat result.
    fn explain(w: WhyRun, r: &mut OslatResult, threshold: Option<&EpisodeThreshold>) {
        let mut e = w.end(r.elapsed_ns);
        if let Some(d) = e.trace.as_mut() {
            let thr = threshold
                .cloned()
                .unwrap_or_else(|| rule_of(r.threads.iter().map(|t| &t.gaps), EPISODE_FLOOR_NS));
            // The busy loop's own thread runs through every gap: what it did not do is not a cause.
            let own: Vec<String> = r.threads.iter().map(|t| format!("/{} ", t.tid)).collect();
            for spans in d.spans.values_mut() {
                spans.retain(|s| !own.iter().any(|o| s.name.contains(o.as_str())));
            }
            let mut tracker = EpisodeTracker::default();
            let mut retain = Vec::new();
            for (i, t) in r.threads.iter().enumerate() {
                // The tracker takes each thread's gaps in time order (the worst list is by length).
                let mut gaps: Vec<_> = t.worst.iter().collect();
                gaps.sort_by_key(|g| g.monotonic_ns);
                for g in gaps {
                    tracker.feed(
                        Late {
                            thread: i as u32,
                            cpu: t.cpu,
                            start_ns: g.monotonic_ns,
                            end_ns: g.monotonic_ns + g.gap_ns,
                            worst_ns: g.gap_ns,
                        },
                        &mut retain,
                    );
                }
            }
            tracker.finish(&mut retain);
            let (kept, _) = tracker.above(thr.ns);
            // Every gap at or above the threshold, counted from the histograms (the worst list is short).
            let total = r
                .threads
                .iter()
                .map(|t| count_at_or_above(&t.gaps, thr.ns))
                .sum::<u64>()
                .max(kept.len() as u64);
            explain(&mut e.why, d, (kept, total), thr);
        }
        r.why = Some(e.why());
    }
}
