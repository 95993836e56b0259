//! Spike episodes from late samples, and what filled their windows.
//!
//! An *episode* is one stall as the probe saw it: the late samples whose windows (expected wake-up → actual
//! wake-up) overlap are one episode, so a 5 ms stall of a 1 ms timer is one episode of five late samples,
//! not five spikes ([`EpisodeTracker`]). Episodes above a threshold are explained: the profile's gate, an
//! explicit `--spike`, or else a rule on the run's own distribution ([`rule_threshold`]); an explained
//! episode's window is [`breakdown`] over the trace's spans.
//!
//! Pure arithmetic on intervals, so reports and tests can use it without tracefs; the session's "why"
//! observer feeds the tracker from the probe's main thread (never a measuring one).

use rtgauge_model::attribution::{Cause, CauseKind, Episode, Span};

/// Break the window `[start, end)` down over `spans`. Nested spans (an IRQ inside a thread's time, a softirq
/// inside an IRQ exit) are charged to the innermost one: spans are laid over each other in the order
/// thread < work < softirq < irq/vector, and each instant goes to the highest layer covering it. Whatever no
/// span covers is the unattributed remainder. The probe's own thread is not passed in.
pub fn breakdown(start: u64, end: u64, spans: &[Span]) -> Vec<Cause> {
    fn layer(k: CauseKind) -> u8 {
        match k {
            CauseKind::Thread => 0,
            CauseKind::Work => 1,
            CauseKind::Softirq => 2,
            CauseKind::Irq | CauseKind::Vector => 3,
            CauseKind::Unattributed | CauseKind::Host => 4,
        }
    }
    let inside: Vec<&Span> = spans
        .iter()
        .filter(|s| s.end_ns > start && s.start_ns < end && s.end_ns > s.start_ns)
        .collect();
    // Elementary intervals between every boundary inside the window.
    let mut cuts: Vec<u64> = vec![start, end];
    for s in &inside {
        cuts.push(s.start_ns.clamp(start, end));
        cuts.push(s.end_ns.clamp(start, end));
    }
    cuts.sort_unstable();
    cuts.dedup();
    // Each cause's place in `out`, by kind and name: a busy CPU's window names hundreds of threads.
    let mut out: Vec<Cause> = Vec::new();
    let mut at: std::collections::HashMap<(CauseKind, &str), usize> =
        std::collections::HashMap::new();
    let mut add = |kind: CauseKind, name, ns: u64| {
        let i = *at.entry((kind, name)).or_insert_with(|| {
            out.push(Cause {
                kind,
                name: name.to_string(),
                ns: 0,
                count: 0,
            });
            out.len() - 1
        });
        out[i].ns += ns;
        i
    };
    // A sweep over the cuts with the spans covering the current interval ordered by (layer, start, index):
    // the top one is the last. O(n log n): a long episode on a busy CPU has tens of thousands of spans
    // (an 8 s window in the lab's slow guest held ~15,000), where testing every span against every
    // interval took a minute of the guest's CPU.
    let key = |i: usize| (layer(inside[i].kind), inside[i].start_ns, i);
    let mut by_start: Vec<usize> = (0..inside.len()).collect();
    by_start.sort_unstable_by_key(|&i| inside[i].start_ns.max(start));
    let mut by_start = by_start.into_iter().peekable();
    let mut ending = std::collections::BinaryHeap::new();
    let mut covering = std::collections::BTreeSet::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        while let Some(i) = by_start.next_if(|&i| inside[i].start_ns.max(start) <= a) {
            covering.insert(key(i));
            ending.push(std::cmp::Reverse((inside[i].end_ns, i)));
        }
        // A span ending at or before `a` ends at a cut, so it does not cover [a, b]; one still in covers it.
        while let Some(std::cmp::Reverse((e, i))) = ending.peek().copied() {
            if e > a {
                break;
            }
            ending.pop();
            covering.remove(&key(i));
        }
        match covering.last() {
            Some(&(_, _, i)) => add(inside[i].kind, &inside[i].name, b - a),
            None => add(CauseKind::Unattributed, "", b - a),
        };
    }
    // How many spans each charged cause had in the window (a cause never on top is not listed).
    for s in &inside {
        if let Some(i) = at.get(&(s.kind, s.name.as_str())) {
            out[*i].count += 1;
        }
    }
    out.retain(|c| c.ns > 0);
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.kind.cmp(&b.kind)));
    out
}

/// Episodes a tracker keeps as candidates (the worst, with their trace pinned) while the run goes on: more
/// than [`rtgauge_model::attribution::MAX_EPISODES`], because the threshold that decides which are explained is known only at the end.
pub const TRACKED_EPISODES: usize = 256;

/// The threshold when neither a gate nor `--spike` gives one: `max(p50 + 10 × (p90 − p50), 3 × p90)` of the
/// run's own distribution. A sample that far above the body of the distribution is not jitter; the body
/// (p50–p90) is untouched by a few stalls even in a short run (thousands of samples), where p99.99 would be
/// the stall itself. On this project's 2-vCPU VM (p50 ≈ 15 µs, p90 ≈ 25 µs) it is ≈ 115 µs; on a tuned
/// PREEMPT_RT server (p50 ≈ 2 µs, p90 ≈ 3 µs) ≈ 12 µs. The `3 × p90` term keeps a very tight distribution
/// (p90 = p50) from calling every sample an episode.
pub fn rule_threshold(p50_ns: u64, p90_ns: u64) -> u64 {
    let spread = p90_ns.saturating_sub(p50_ns);
    p50_ns
        .saturating_add(spread.saturating_mul(10))
        .max(p90_ns.saturating_mul(3))
}

/// The words for [`rule_threshold`] in reports.
pub const RULE: &str = "max(p50 + 10 × (p90 − p50), 3 × p90)";

/// One late sample: its window on CLOCK_MONOTONIC (expected wake-up → actual wake-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late {
    /// The probe thread.
    pub thread: u32,
    /// The CPU it woke on.
    pub cpu: u32,
    /// Expected wake-up, ns.
    pub start_ns: u64,
    /// Actual wake-up, ns.
    pub end_ns: u64,
    /// Its latency, ns: `end_ns - start_ns` for one sample, less for samples merged into one window.
    pub worst_ns: u64,
}

impl Late {
    /// A probe's late sample (or samples merged into one window, [`Spike::absorb`]) woken on `cpu`.
    ///
    /// [`Spike::absorb`]: rtgauge_model::latency::Spike::absorb
    pub fn of(s: &rtgauge_model::latency::Spike, cpu: u32) -> Late {
        Late {
            thread: s.thread,
            cpu,
            start_ns: s.window_start_ns(),
            end_ns: s.monotonic_ns,
            worst_ns: s.latency_ns,
        }
    }
}

/// An episode while it is tracked: its window, worst sample and count of late samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Unique within a tracker (for pinning its trace).
    pub id: u64,
    /// The probe thread.
    pub thread: u32,
    /// The CPU of its first late sample.
    pub cpu: u32,
    /// Window start, ns.
    pub start_ns: u64,
    /// Window end, ns.
    pub end_ns: u64,
    /// Worst late sample, ns.
    pub worst_ns: u64,
    /// Late samples merged into it.
    pub samples: u64,
}

/// A candidate ordered by its worst sample (then its id, for a total order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ByWorst(Candidate);

impl Ord for ByWorst {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0.worst_ns, self.0.id).cmp(&(other.0.worst_ns, other.0.id))
    }
}

impl PartialOrd for ByWorst {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// What the tracker asks of the trace: keep the window of a candidate that is among the worst, or let go of
/// one that no longer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retain {
    /// Keep the trace of `[from, to]` under this id.
    Keep {
        /// The candidate's id.
        id: u64,
        /// Window start, ns.
        from: u64,
        /// Window end, ns.
        to: u64,
    },
    /// The candidate left the worst: its trace may go.
    Release(u64),
}

/// Groups a probe's late samples into episodes as they arrive (per thread, in time order): a sample whose
/// window overlaps the thread's open episode joins it, any other closes it and opens a new one. Memory is
/// bounded whatever the run's length: the [`TRACKED_EPISODES`] worst closed episodes are kept (their trace
/// pinned through [`Retain`]), and every episode's worst value is counted in a histogram, so the number
/// above any threshold is known at the end.
pub struct EpisodeTracker {
    open: Vec<Candidate>,
    /// The kept episodes, least bad on top: a run on a noisy platform closes an episode per sample (every
    /// sample is late), so whether a closed one enters must cost O(1), not a scan of the kept.
    worst: std::collections::BinaryHeap<std::cmp::Reverse<ByWorst>>,
    counts: hdrhistogram::Histogram<u64>,
    next_id: u64,
}

impl Default for EpisodeTracker {
    fn default() -> Self {
        EpisodeTracker {
            open: Vec::new(),
            worst: std::collections::BinaryHeap::with_capacity(TRACKED_EPISODES),
            counts: rtgauge_model::latency::new_histogram(),
            next_id: 0,
        }
    }
}

impl EpisodeTracker {
    /// Add one late sample; what the trace should keep or release is pushed to `retain`.
    pub fn feed(&mut self, s: Late, retain: &mut Vec<Retain>) {
        let lat = s.worst_ns;
        if let Some(i) = self.open.iter().position(|c| c.thread == s.thread) {
            let c = &mut self.open[i];
            if s.start_ns <= c.end_ns {
                c.end_ns = c.end_ns.max(s.end_ns);
                c.worst_ns = c.worst_ns.max(lat);
                c.samples += 1;
                return;
            }
            let done = self.open.swap_remove(i);
            self.close(done, retain);
        }
        self.next_id += 1;
        self.open.push(Candidate {
            id: self.next_id,
            thread: s.thread,
            cpu: s.cpu,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            worst_ns: lat,
            samples: 1,
        });
    }

    /// Close the open episodes that ended before `before_ns`: a late sample that could still join one
    /// would have to be later by more than the time since, so the caller picks a `before_ns` that no
    /// hand-over takes that long. Closed, an episode among the worst is pinned at once, while its trace is
    /// still in the rolling window (an open one is only closed by its thread's next late sample, which on
    /// a quiet platform may come minutes later).
    pub fn close_ended(&mut self, before_ns: u64, retain: &mut Vec<Retain>) {
        let mut i = 0;
        while i < self.open.len() {
            if self.open[i].end_ns < before_ns {
                let c = self.open.swap_remove(i);
                self.close(c, retain);
            } else {
                i += 1;
            }
        }
    }

    /// Close every open episode (the probe has ended).
    pub fn finish(&mut self, retain: &mut Vec<Retain>) {
        for c in std::mem::take(&mut self.open) {
            self.close(c, retain);
        }
    }

    fn close(&mut self, c: Candidate, retain: &mut Vec<Retain>) {
        self.counts.saturating_record(c.worst_ns.max(1));
        let keep = Retain::Keep {
            id: c.id,
            from: c.start_ns,
            to: c.end_ns,
        };
        if self.worst.len() < TRACKED_EPISODES {
            retain.push(keep);
            self.worst.push(std::cmp::Reverse(ByWorst(c)));
            return;
        }
        if let Some(mut least) = self.worst.peek_mut() {
            if c.worst_ns > least.0 .0.worst_ns {
                retain.push(Retain::Release(least.0 .0.id));
                retain.push(keep);
                *least = std::cmp::Reverse(ByWorst(c));
            }
        }
    }

    /// The closed episodes at or above `threshold_ns`, worst first (at most [`TRACKED_EPISODES`]), and how
    /// many closed episodes are at or above it in all: exact while the kept ones include every episode above
    /// it, else from the histogram of every episode's worst value (3 significant digits).
    pub fn above(&self, threshold_ns: u64) -> (Vec<Candidate>, u64) {
        let mut kept: Vec<Candidate> = self
            .worst
            .iter()
            .map(|w| w.0 .0)
            .filter(|c| c.worst_ns >= threshold_ns)
            .collect();
        kept.sort_by_key(|c| (std::cmp::Reverse(c.worst_ns), c.start_ns));
        // Every episode above the threshold is among the kept unless all the kept ones are above it.
        if self.worst.len() < TRACKED_EPISODES || kept.len() < self.worst.len() {
            let n = kept.len() as u64;
            return (kept, n);
        }
        let counted: u64 = self
            .counts
            .iter_recorded()
            .filter(|v| v.value_iterated_to() >= threshold_ns)
            .map(|v| v.count_at_value())
            .sum();
        let n = counted.max(kept.len() as u64);
        (kept, n)
    }
}

/// What an episode's unattributed remainder points to: the three suspects, with the steal the hypervisor
/// admitted in the enclosing counter interval and the SMIs counted there (the interval is longer than the
/// window: an SMI in it is not shown to be at the stall).
pub fn unattributed(e: &Episode) -> String {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    match (e.smis, e.steal_ns) {
        (Some(n), s) if n > 0 => format!(
            "unattributed (hypervisor/firmware/hardware; {n} SMI{} on CPU {} in that interval, steal {})",
            if n == 1 { "" } else { "s" },
            e.cpu,
            ms(s)
        ),
        (Some(_), 0) => {
            "unattributed (hypervisor/firmware/hardware; no SMI counted in that interval)".into()
        }
        (Some(_), s) => format!(
            "unattributed (hypervisor/firmware/hardware; steal {} and no SMI in that interval)",
            ms(s)
        ),
        (None, 0) => "unattributed (hypervisor/firmware/hardware)".into(),
        (None, s) => format!(
            "unattributed (hypervisor/firmware/hardware; steal {} in that interval)",
            ms(s)
        ),
    }
}

/// "78 % thread rtg-culprit/1234 FIFO 95, 12 % IRQ 24 virtio0-input, 10 % unattributed".
pub fn sentence(e: &Episode) -> String {
    // Shares that round to 0 % say nothing in a sentence; the causes list keeps them.
    let parts: Vec<String> = e
        .causes
        .iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || e.pct(c) >= 0.5)
        .map(|(_, c)| c)
        .take(4)
        .map(|c| {
            if c.kind == CauseKind::Unattributed {
                format!("{:.0} % {}", e.pct(c), unattributed(e))
            } else {
                format!("{:.0} % {} {}", e.pct(c), c.kind.label(), c.name)
            }
        })
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(a: u64, b: u64, kind: CauseKind, name: &str) -> Span {
        Span {
            start_ns: a,
            end_ns: b,
            kind,
            name: name.into(),
        }
    }

    #[test]
    fn innermost_span_wins_and_the_rest_is_unattributed() {
        let spans = [
            span(0, 800, CauseKind::Thread, "rtg-culprit"),
            span(100, 150, CauseKind::Irq, "24 virtio0-input"),
            span(140, 160, CauseKind::Softirq, "NET_RX"),
            span(5000, 6000, CauseKind::Thread, "outside"),
        ];
        let c = breakdown(50, 1000, &spans);
        let total: u64 = c.iter().map(|c| c.ns).sum();
        assert_eq!(total, 950);
        assert_eq!(c[0].name, "rtg-culprit");
        assert_eq!(c[0].ns, 750 - 50 - 10);
        assert_eq!(c[1].kind, CauseKind::Unattributed);
        assert_eq!(c[1].ns, 200);
        let irq = c.iter().find(|c| c.kind == CauseKind::Irq).map(|c| c.ns);
        assert_eq!(irq, Some(50));
        let sirq = c
            .iter()
            .find(|c| c.kind == CauseKind::Softirq)
            .map(|c| c.ns);
        assert_eq!(sirq, Some(10));
        assert!(!c.iter().any(|c| c.name == "outside"));
    }

    /// Every instant of the window, charged as the breakdown's rule says, by testing every span: what the
    /// sweep must equal.
    fn by_every_instant(start: u64, end: u64, spans: &[Span]) -> Vec<(CauseKind, String, u64)> {
        let layer = |k: CauseKind| match k {
            CauseKind::Thread => 0,
            CauseKind::Work => 1,
            CauseKind::Softirq => 2,
            _ => 3,
        };
        let mut out: Vec<(CauseKind, String, u64)> = Vec::new();
        for t in start..end {
            let top = spans
                .iter()
                .filter(|s| s.start_ns <= t && s.end_ns > t)
                .max_by_key(|s| (layer(s.kind), s.start_ns));
            let (k, n) = top.map_or((CauseKind::Unattributed, ""), |s| (s.kind, s.name.as_str()));
            match out.iter_mut().find(|c| c.0 == k && c.1 == n) {
                Some(c) => c.2 += 1,
                None => out.push((k, n.to_string(), 1)),
            }
        }
        out.sort();
        out
    }

    #[test]
    fn the_sweep_charges_every_instant_as_testing_every_span_does() {
        // Overlapping, nested, touching and outlying spans of every layer, from a fixed pseudo-random walk
        // (ties in start and layer included: a later span wins them).
        let kinds = [
            CauseKind::Thread,
            CauseKind::Work,
            CauseKind::Softirq,
            CauseKind::Irq,
        ];
        let mut x: u64 = 0x9e37_79b9;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % m
        };
        // The edges on purpose: equal starts in one layer (the later span wins), a duplicate, a
        // zero-length span, spans ending at the window's start and starting at its end, one around it.
        let edges = [
            span(10, 60, CauseKind::Thread, "a"),
            span(10, 40, CauseKind::Thread, "b"),
            span(10, 40, CauseKind::Thread, "b"),
            span(30, 30, CauseKind::Irq, "empty"),
            span(0, 20, CauseKind::Softirq, "ends-at-start"),
            span(90, 120, CauseKind::Irq, "starts-at-end"),
            span(0, 200, CauseKind::Thread, "around"),
            span(40, 50, CauseKind::Work, "nested"),
        ];
        let mut got: Vec<(CauseKind, String, u64)> = breakdown(20, 90, &edges)
            .into_iter()
            .map(|c| (c.kind, c.name, c.ns))
            .collect();
        got.sort();
        assert_eq!(got, by_every_instant(20, 90, &edges));
        for round in 0..40 {
            let spans: Vec<Span> = (0..30)
                .map(|k| {
                    let a = next(400);
                    let kind = kinds[(k + round) % 4];
                    span(a, a + 1 + next(120), kind, &format!("{kind:?}{}", next(3)))
                })
                .collect();
            let (start, end) = (next(100), 250 + next(150));
            let mut got: Vec<(CauseKind, String, u64)> = breakdown(start, end, &spans)
                .into_iter()
                .map(|c| (c.kind, c.name, c.ns))
                .collect();
            got.sort();
            assert_eq!(got, by_every_instant(start, end, &spans), "round {round}");
        }
    }

    #[test]
    fn empty_window_and_no_spans() {
        assert!(breakdown(10, 10, &[]).is_empty());
        let c = breakdown(0, 100, &[]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].kind, CauseKind::Unattributed);
        let b = Episode {
            cpu: 1,
            thread: 0,
            start_mono_ns: 0,
            window_ns: 100,
            samples: 1,
            worst_ns: 100,
            causes: c,
            steal_ns: 0,
            smis: None,
            gaps: Vec::new(),
            host: None,
        };
        assert!(b.top().is_none());
        assert!(sentence(&b).starts_with("100 % unattributed"));
        let fired = Episode {
            smis: Some(1),
            ..b.clone()
        };
        assert!(
            sentence(&fired)
                .starts_with("100 % unattributed (hypervisor/firmware/hardware; 1 SMI on CPU"),
            "{}",
            sentence(&fired)
        );
        let stolen = Episode {
            steal_ns: 20_000_000,
            ..b
        };
        assert!(
            sentence(&stolen).ends_with("steal 20.0 ms in that interval)"),
            "{}",
            sentence(&stolen)
        );
    }

    fn late(thread: u32, start_ns: u64, end_ns: u64) -> Late {
        Late {
            thread,
            cpu: thread,
            start_ns,
            end_ns,
            worst_ns: end_ns - start_ns,
        }
    }

    #[test]
    fn the_late_samples_of_one_stall_are_one_episode() {
        // A 5 ms stall of a 1 ms timer: five late samples whose windows overlap (each woke at ~5.0 ms).
        let mut t = EpisodeTracker::default();
        let mut r = Vec::new();
        for k in 0..5u64 {
            t.feed(
                late(0, 300_000 + k * 1_000_000, 5_000_000 + k * 1_000),
                &mut r,
            );
        }
        // A second stall on the same thread, later, and one on another thread at the same time.
        t.feed(late(0, 500_000_000, 505_000_000), &mut r);
        t.feed(late(1, 300_000, 2_000_000), &mut r);
        t.finish(&mut r);
        let (eps, total) = t.above(1_000_000);
        assert_eq!(total, 3);
        assert_eq!(eps.len(), 3);
        let first = eps
            .iter()
            .find(|e| e.thread == 0 && e.start_ns == 300_000)
            .unwrap();
        assert_eq!(
            (first.samples, first.worst_ns, first.end_ns),
            (5, 4_700_000, 5_004_000)
        );
        assert_eq!(eps[0].worst_ns, 5_000_000, "worst first");
        assert_eq!(
            r.iter()
                .filter(|x| matches!(x, Retain::Keep { .. }))
                .count(),
            3
        );
        // Nothing above a threshold above every episode.
        assert_eq!(t.above(6_000_000), (Vec::new(), 0));
    }

    /// Two stalls a probe handed over merged into one window (its ring was full): one episode over both,
    /// its worst the worse sample's latency, not the window's length.
    #[test]
    fn samples_merged_by_the_probe_keep_their_worst_latency() {
        use rtgauge_model::latency::Spike;
        let mut first = Spike {
            thread: 0,
            cycle: 10,
            latency_ns: 2_000_000,
            monotonic_ns: 12_000_000,
            cpu: Some(3),
            window_ns: 0,
        };
        let second = Spike {
            cycle: 90,
            latency_ns: 3_000_000,
            monotonic_ns: 93_000_000,
            ..first
        };
        first.absorb(&second);
        let l = Late::of(&first, 3);
        assert_eq!(
            (l.start_ns, l.end_ns, l.worst_ns),
            (10_000_000, 93_000_000, 3_000_000)
        );
        let mut t = EpisodeTracker::default();
        let mut r = Vec::new();
        t.feed(l, &mut r);
        t.finish(&mut r);
        let (eps, total) = t.above(1);
        assert_eq!(total, 1);
        assert_eq!(
            (eps[0].start_ns, eps[0].end_ns, eps[0].worst_ns),
            (10_000_000, 93_000_000, 3_000_000)
        );
    }

    /// A lone stall is pinned a second after it ends, not when its thread is next late (minutes later on
    /// a quiet platform, when its trace would be gone); an episode still going on is left open.
    #[test]
    fn an_episode_over_for_a_while_is_closed_and_pinned_without_waiting_for_the_next() {
        let mut t = EpisodeTracker::default();
        let mut r = Vec::new();
        t.feed(late(0, 1_000_000, 3_000_000), &mut r);
        t.feed(late(1, 1_500_000_000, 1_600_000_000), &mut r);
        assert!(r.is_empty(), "both open: {r:?}");
        t.close_ended(1_000_000_000, &mut r);
        assert_eq!(
            r,
            vec![Retain::Keep {
                id: 1,
                from: 1_000_000,
                to: 3_000_000
            }]
        );
        // Thread 0's next sample opens a new episode; thread 1's still open one joins its overlapping one.
        t.feed(late(0, 2_000_000_000, 2_000_100_000), &mut r);
        t.feed(late(1, 1_599_000_000, 1_700_000_000), &mut r);
        t.finish(&mut r);
        let (eps, total) = t.above(1);
        assert_eq!(total, 3);
        assert!(
            eps.iter().any(|e| e.thread == 1 && e.samples == 2),
            "{eps:?}"
        );
    }

    #[test]
    fn the_tracker_keeps_the_worst_and_counts_the_rest() {
        let mut t = EpisodeTracker::default();
        let mut r = Vec::new();
        let n = TRACKED_EPISODES as u64 + 100;
        for k in 0..n {
            // Separate samples 1 ms apart; latency grows with k, so the first 100 are pushed out.
            t.feed(late(0, k * 1_000_000, k * 1_000_000 + 10_000 + k), &mut r);
        }
        t.finish(&mut r);
        let (eps, total) = t.above(0);
        assert_eq!(eps.len(), TRACKED_EPISODES);
        assert_eq!(total, n);
        assert_eq!(
            eps.last().unwrap().worst_ns,
            10_100,
            "the least of the kept is the 101st"
        );
        let released = r.iter().filter(|x| matches!(x, Retain::Release(_))).count();
        assert_eq!(released, 100);
        let (above, total) = t.above(10_000 + n - 10);
        assert_eq!(
            (above.len(), total),
            (10, 10),
            "exact while the kept include them all"
        );
    }

    #[test]
    fn the_rule_sits_well_above_the_body() {
        assert_eq!(rule_threshold(15_000, 25_000), 115_000);
        assert_eq!(rule_threshold(2_000, 3_000), 12_000);
        assert_eq!(
            rule_threshold(1_000, 1_000),
            3_000,
            "a tight distribution: 3 × p90"
        );
        assert_eq!(rule_threshold(u64::MAX, u64::MAX), u64::MAX);
    }
}
