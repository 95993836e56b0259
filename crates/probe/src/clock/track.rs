//! One source followed over a run ([`Tracker`]): each poll's [`Reading`] turned into its lock state,
//! reference and state changes, holdovers, |offset| distribution and timeline.

use crate::recorder::LatencyRecorder;
use rtgauge_model::clock::{
    ClockEvent, ClockPoint, EventKind, Holdover, Reference, SourceKind, SourceResult, SourceStatus,
    LOCK_RUN, MAX_CLOCK_EVENTS,
};
use rtgauge_model::latency::push_bounded;

/// What one poll of a source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// The source's state (a ptp4l port state, chrony's leap status).
    pub state: String,
    /// Whether it follows a reference now (a PTP port in SLAVE with a grandmaster; chrony synchronised).
    pub has_reference: bool,
    /// Whether it is a reference itself, following none (a PTP port MASTER: a grandmaster).
    pub serving: bool,
    /// The reference, where it has one.
    pub reference: Option<Reference>,
    /// A new offset measured since the last poll, ns (`None`: nothing new).
    pub offset_ns: Option<i64>,
    /// Path delay, root delay or read bound, ns.
    pub delay_ns: Option<i64>,
    /// Frequency correction, ppb.
    pub freq_ppb: Option<f64>,
    /// chrony's RMS offset, ns.
    pub rms_offset_ns: Option<i64>,
    /// chrony's skew, ppb.
    pub skew_ppb: Option<f64>,
}

/// A source being followed.
#[derive(Debug, Clone)]
pub struct Tracker {
    kind: SourceKind,
    path: String,
    lock_ns: u64,
    polls: u64,
    measurements: u64,
    errors: u64,
    failing: bool,
    /// |offset| from the first lock on; before it, `converging`.
    locked_offsets: LatencyRecorder,
    converging: LatencyRecorder,
    max_all: u64,
    locked: bool,
    settle_ns: Option<u64>,
    run_in: u32,
    /// The |offset|s of the run in progress (they count from the first lock, which starts with them).
    run: [u64; LOCK_RUN as usize],
    run_start_ns: u64,
    unlocked_since_ns: u64,
    had_reference: bool,
    serving: bool,
    /// The id of the last reference it followed.
    last_reference_id: Option<String>,
    unlocks: u64,
    reference_changes: u64,
    holdovers: Vec<Holdover>,
    holdovers_dropped: u64,
    in_holdover: bool,
    events: Vec<ClockEvent>,
    events_dropped: u64,
    timeline: Vec<ClockPoint>,
    span_ns: u64,
    last: Option<SourceStatus>,
}

/// A timeline point's span at the start: one second, doubled as the run grows.
const FIRST_SPAN_NS: u64 = 1_000_000_000;

impl Tracker {
    /// A source of `kind` at `path`, locked within `lock_ns`.
    pub fn new(kind: SourceKind, path: &str, lock_ns: u64) -> Tracker {
        Tracker {
            kind,
            path: path.to_string(),
            lock_ns,
            polls: 0,
            measurements: 0,
            errors: 0,
            failing: false,
            locked_offsets: LatencyRecorder::new(),
            converging: LatencyRecorder::new(),
            max_all: 0,
            locked: false,
            settle_ns: None,
            run_in: 0,
            run: [0; LOCK_RUN as usize],
            run_start_ns: 0,
            unlocked_since_ns: 0,
            had_reference: false,
            serving: false,
            last_reference_id: None,
            unlocks: 0,
            reference_changes: 0,
            holdovers: Vec::new(),
            holdovers_dropped: 0,
            in_holdover: false,
            events: Vec::new(),
            events_dropped: 0,
            timeline: Vec::new(),
            span_ns: FIRST_SPAN_NS,
            last: None,
        }
    }

    fn event(&mut self, at_ns: u64, what: EventKind) {
        if self.events.len() < MAX_CLOCK_EVENTS {
            self.events.push(ClockEvent { at_ns, what });
        } else {
            self.events_dropped += 1;
        }
    }

    /// A poll that failed: the first of a run of failures is an event.
    pub fn failed(&mut self, at_ns: u64, error: String) {
        self.polls += 1;
        self.errors += 1;
        if !self.failing {
            self.failing = true;
            self.event(at_ns, EventKind::Unreadable { error });
        }
    }

    /// A poll that read `r`, `at_ns` after the start.
    pub fn read(&mut self, at_ns: u64, r: Reading) {
        self.polls += 1;
        self.failing = false;
        let before = self.last.take();
        let state_before = before.as_ref().map(|s| s.state.clone()).unwrap_or_default();
        let measured = r.offset_ns.filter(|_| r.has_reference);
        let offset_ns = measured.or(before.as_ref().and_then(|s| s.offset_ns));
        if state_before != r.state {
            self.event(
                at_ns,
                EventKind::State {
                    from: state_before,
                    to: r.state.clone(),
                },
            );
        }
        let reference_before = before.and_then(|s| s.reference);
        if let Some(id) = r.reference.as_ref().map(|x| &x.id) {
            if self
                .last_reference_id
                .as_ref()
                .is_some_and(|last| last != id)
            {
                self.reference_changes += 1;
            }
            self.last_reference_id = Some(id.clone());
        }
        if reference_before != r.reference && (r.reference.is_some() || self.had_reference) {
            self.event(
                at_ns,
                EventKind::Reference {
                    from: reference_before,
                    to: r.reference.clone(),
                },
            );
        }
        self.reference_presence(at_ns, r.has_reference);
        self.serving = r.serving;
        if let Some(offset) = measured {
            self.measured(at_ns, offset, r.delay_ns);
        }
        self.last = Some(SourceStatus {
            state: r.state,
            reference: r.reference,
            offset_ns,
            freq_ppb: r.freq_ppb,
            delay_ns: r.delay_ns,
            rms_offset_ns: r.rms_offset_ns,
            skew_ppb: r.skew_ppb,
        });
    }

    /// A reference lost starts a holdover; one back ends it.
    fn reference_presence(&mut self, at_ns: u64, has: bool) {
        match (self.had_reference, has) {
            (true, false) => {
                self.event(at_ns, EventKind::ReferenceLost);
                self.in_holdover = true;
                if self.holdovers.len() < MAX_CLOCK_EVENTS {
                    self.holdovers.push(Holdover {
                        start_ns: at_ns,
                        end_ns: None,
                        drift_ns: None,
                    });
                } else {
                    self.holdovers_dropped += 1;
                }
                // Whatever it measures after is against a reference it must find again.
                if self.locked {
                    self.locked = false;
                    self.unlocked_since_ns = at_ns;
                }
                self.run_in = 0;
            }
            (false, true) => {
                self.in_holdover = false;
                if let Some(h) = self.holdovers.last_mut().filter(|h| h.end_ns.is_none()) {
                    h.end_ns = Some(at_ns);
                    let after_ns = at_ns - h.start_ns;
                    self.event(at_ns, EventKind::ReferenceBack { after_ns });
                }
            }
            _ => {}
        }
        self.had_reference = has;
    }

    /// One new offset: the holdover's drift when it is the first after one, the lock's state, the
    /// distribution and the timeline.
    fn measured(&mut self, at_ns: u64, offset_ns: i64, delay_ns: Option<i64>) {
        self.measurements += 1;
        if let Some(h) = self
            .holdovers
            .last_mut()
            .filter(|h| h.end_ns.is_some() && h.drift_ns.is_none())
        {
            h.drift_ns = Some(offset_ns);
        }
        let abs = offset_ns.unsigned_abs();
        self.max_all = self.max_all.max(abs);
        if self.settle_ns.is_some() {
            self.locked_offsets.record(abs);
        } else {
            // Taken into the locked distribution with its run when it is the run that first locks.
            self.converging.record(abs);
        }
        let within = abs <= self.lock_ns;
        if self.locked && !within {
            self.locked = false;
            self.unlocks += 1;
            self.unlocked_since_ns = at_ns;
            self.run_in = 0;
            self.event(at_ns, EventKind::Unlocked { offset_ns });
        } else if !self.locked && within {
            if self.run_in == 0 {
                self.run_start_ns = at_ns;
            }
            self.run[self.run_in as usize] = abs;
            self.run_in += 1;
            if self.run_in >= LOCK_RUN {
                self.locked = true;
                if self.settle_ns.is_none() {
                    self.settle_ns = Some(self.run_start_ns);
                    for v in self.run {
                        self.locked_offsets.record(v);
                    }
                }
                let after_ns = self.run_start_ns.saturating_sub(self.unlocked_since_ns);
                self.event(at_ns, EventKind::Locked { after_ns });
            }
        } else if !within {
            self.run_in = 0;
        }
        push_bounded(
            &mut self.timeline,
            &mut self.span_ns,
            ClockPoint {
                start_ns: at_ns,
                count: 1,
                offset_min_ns: offset_ns,
                offset_max_ns: offset_ns,
                delay_ns,
            },
        );
    }

    /// What it measured so far.
    pub fn result(&self) -> SourceResult {
        let offsets = if self.settle_ns.is_some() {
            &self.locked_offsets
        } else {
            &self.converging
        };
        let stats = offsets.stats();
        SourceResult {
            kind: self.kind,
            path: self.path.clone(),
            lock_ns: self.lock_ns,
            polls: self.polls,
            measurements: self.measurements,
            errors: self.errors,
            offset: (stats.count > 0).then_some(stats),
            locked: self.settle_ns.is_some(),
            locked_now: self.locked && !self.failing,
            following: self.had_reference && !self.failing,
            serving: self.serving && !self.failing,
            readable: !self.failing && self.polls > 0,
            unlocks: self.unlocks,
            reference_changes: self.reference_changes,
            settle_ns: self.settle_ns,
            offset_max_all_ns: self.max_all,
            holdovers: self.holdovers.clone(),
            holdovers_dropped: self.holdovers_dropped,
            in_holdover: self.in_holdover && !self.failing,
            events: self.events.clone(),
            events_dropped: self.events_dropped,
            timeline: self.timeline.clone(),
            last: self.last.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(offset: Option<i64>, has: bool, gm: &str) -> Reading {
        Reading {
            state: if has { "SLAVE" } else { "LISTENING" }.into(),
            has_reference: has,
            reference: has.then(|| Reference {
                id: gm.into(),
                class: Some(248),
            }),
            offset_ns: offset,
            ..Reading::default()
        }
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn it_locks_after_a_run_within_the_bound_and_counts_only_what_follows() {
        let mut t = Tracker::new(SourceKind::Ptp4l, "/x", 1000);
        let offsets = [
            90_000, -40_000, 5_000, 900, -800, 700, 600, -500, 2_500, 100,
        ];
        for (i, o) in offsets.iter().enumerate() {
            t.read(i as u64 * S, reading(Some(*o), true, "a"));
        }
        let r = t.result();
        // 900 at 3 s starts the run of four; the 2,500 at 8 s unlocks it. The distribution counts from
        // 3 s: the run and the three after it.
        assert_eq!(r.settle_ns, Some(3 * S));
        assert!(r.locked);
        assert_eq!(r.offset_max_all_ns, 90_000);
        let s = r.offset.clone().unwrap();
        assert_eq!((s.count, s.min_ns, s.max_ns), (7, 100, 2_500));
        assert_eq!(r.unlocks, 1);
        assert!(!r.locked_now);
        assert!(r
            .events
            .iter()
            .any(|e| e.what == EventKind::Locked { after_ns: 3 * S }));
    }

    #[test]
    fn a_holdover_runs_from_the_reference_lost_to_the_first_offset_after_it() {
        let mut t = Tracker::new(SourceKind::Ptp4l, "/x", 1000);
        for i in 0..5 {
            t.read(i * S, reading(Some(10), true, "a"));
        }
        t.read(5 * S, reading(None, false, ""));
        t.read(6 * S, reading(None, false, ""));
        t.read(7 * S, reading(Some(-7_000), true, "b"));
        let r = t.result();
        assert_eq!(
            r.holdovers,
            vec![Holdover {
                start_ns: 5 * S,
                end_ns: Some(7 * S),
                drift_ns: Some(-7_000)
            }]
        );
        let refs: Vec<_> = r
            .events
            .iter()
            .filter(|e| matches!(e.what, EventKind::Reference { .. }))
            .collect();
        // a at the start, a → none, none → b: one change of reference (a to b).
        assert_eq!(refs.len(), 3);
        assert_eq!(r.reference_changes, 1);
        assert!(!r.in_holdover && r.following);
        assert!(r
            .events
            .iter()
            .any(|e| e.what == EventKind::ReferenceBack { after_ns: 2 * S }));
    }

    #[test]
    fn failures_are_one_event_per_run_of_them() {
        let mut t = Tracker::new(SourceKind::Chrony, "/x", 1000);
        t.failed(0, "refused".into());
        t.failed(S, "refused".into());
        t.read(2 * S, reading(Some(1), true, "a"));
        t.failed(3 * S, "gone".into());
        let r = t.result();
        assert_eq!((r.polls, r.errors), (4, 3));
        let n = r
            .events
            .iter()
            .filter(|e| matches!(e.what, EventKind::Unreadable { .. }))
            .count();
        assert_eq!(n, 2);
    }
}
