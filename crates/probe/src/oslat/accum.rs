//! The accumulators of the busy-loop probe: what one thread counts between two hand-overs ([`Accum`]),
//! the main thread's end that merges them ([`OslatCollector`]), and the conversion of merged counts into a
//! thread's result. [`bucket`] and [`find_worst_min`] run in the measuring loop's slow path and allocate
//! nothing; merging may allocate and happens on the main thread only.

use super::{OslatPlan, MAX_THRESHOLDS};
use crate::counter::TickConverter;
use crate::handover::Emptier;
use crate::recorder::WindowRecorder;
use crate::rt;
use rtgauge_model::latency::{self, Histogram, LatencyStats, TimelineEntry};
use rtgauge_model::oslat::{Bookkeeping, Gap, OslatBuckets, OslatThread, ThresholdCount};
use rtgauge_model::rt::ThreadConditions;

/// Everything the loop counts. The thread fills one and hands it over at every timeline interval (see
/// [`crate::handover`]), so the main thread can merge completed intervals for checkpoints while the loop runs.
#[derive(Clone)]
pub(super) struct Accum {
    /// Count per gap length in ticks, for gaps below `small.len()` ticks.
    pub(super) small: Vec<u64>,
    pub(super) hist: Histogram,
    pub(super) slow_max: u64,
    pub(super) clamped: u64,
    pub(super) over: [u64; MAX_THRESHOLDS],
    pub(super) lost: u64,
    /// The largest gaps (at most `worst_cap`), unordered.
    pub(super) worst: Vec<Gap>,
    /// How many gaps `worst` keeps (`--worst`); not its capacity, which merging can grow.
    pub(super) worst_cap: usize,
    pub(super) worst_min: usize,
    pub(super) buckets: Vec<u64>,
    pub(super) overflow_sum: u64,
    /// Iterations (= gaps) and counter ticks accumulated here: the gaps and the bookkeeping blocks.
    pub(super) iterations: u64,
    pub(super) ticks: u64,
    /// The loop's own bookkeeping (slow path, every-1024-iterations block), timed apart from the gaps:
    /// blocks, their ticks in all and the longest.
    pub(super) book_count: u64,
    pub(super) book_ticks: u64,
    pub(super) book_max: u64,
    /// Blocks that took as long as a slow-path gap (interrupted), left in the next gap instead.
    pub(super) book_long: u64,
    /// Counter ticks of the slow-path gaps, exactly (the HDR histogram holds them at its precision).
    pub(super) slow_ticks: u64,
    /// Timeline offset, ns, up to which this holds the run (set at hand-over).
    pub(super) until_ns: u64,
}

impl Accum {
    pub(super) fn new(small_len: usize, worst: usize, buckets: usize) -> Box<Accum> {
        let mut a = Box::new(Accum {
            small: vec![0; small_len],
            hist: latency::new_histogram(),
            slow_max: 0,
            clamped: 0,
            over: [0; MAX_THRESHOLDS],
            lost: 0,
            worst: Vec::with_capacity(worst),
            worst_cap: worst,
            worst_min: 0,
            buckets: vec![0; buckets],
            overflow_sum: 0,
            iterations: 0,
            ticks: 0,
            book_count: 0,
            book_ticks: 0,
            book_max: 0,
            book_long: 0,
            slow_ticks: 0,
            until_ns: 0,
        });
        rt::prefault_vec(
            &mut a.worst,
            Gap {
                gap_ns: 0,
                monotonic_ns: 0,
            },
        );
        a.clear();
        a
    }

    /// Zero everything (writing every page, which also pre-faults it).
    pub(super) fn clear(&mut self) {
        for v in self.small.iter_mut().chain(self.buckets.iter_mut()) {
            // SAFETY: valid exclusive reference; volatile so the pre-fault write is kept.
            unsafe { std::ptr::write_volatile(v, 0) };
        }
        self.hist.reset();
        self.slow_max = 0;
        self.clamped = 0;
        self.over = [0; MAX_THRESHOLDS];
        self.lost = 0;
        self.worst.clear();
        self.worst_min = 0;
        self.overflow_sum = 0;
        self.iterations = 0;
        self.ticks = 0;
        self.book_count = 0;
        self.book_ticks = 0;
        self.book_max = 0;
        self.book_long = 0;
        self.slow_ticks = 0;
        self.until_ns = 0;
    }

    /// One bookkeeping block of `ticks` (measuring loop: no allocation).
    #[inline(always)]
    pub(super) fn bookkeeping(&mut self, ticks: u64) {
        self.book_count += 1;
        self.book_ticks += ticks;
        if ticks > self.book_max {
            self.book_max = ticks;
        }
    }

    /// Counter ticks spent in gaps: the accumulated time less the bookkeeping's.
    pub(super) fn gap_ticks(&self) -> u64 {
        self.ticks.saturating_sub(self.book_ticks)
    }

    /// Add `o` (a later or concurrent part of the same thread's run) into `self`. Main thread only: the
    /// worst-gap merge may allocate.
    pub(super) fn merge(&mut self, o: &Accum) {
        for (a, b) in self.small.iter_mut().zip(&o.small) {
            *a += b;
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        // Same bounds on both sides: cannot fail.
        let _ = self.hist.add(&o.hist);
        self.slow_max = self.slow_max.max(o.slow_max);
        self.clamped += o.clamped;
        for (a, b) in self.over.iter_mut().zip(o.over) {
            *a += b;
        }
        self.lost += o.lost;
        self.overflow_sum += o.overflow_sum;
        self.iterations += o.iterations;
        self.ticks += o.ticks;
        self.book_count += o.book_count;
        self.book_ticks += o.book_ticks;
        self.book_max = self.book_max.max(o.book_max);
        self.book_long += o.book_long;
        self.slow_ticks += o.slow_ticks;
        self.until_ns = self.until_ns.max(o.until_ns);
        self.worst.extend_from_slice(&o.worst);
        self.worst.sort_by_key(|g| std::cmp::Reverse(g.gap_ns));
        self.worst.truncate(self.worst_cap);
        self.worst_min = self.worst.len().saturating_sub(1);
    }

    /// Smallest gap, ns.
    pub(super) fn min_ns(&self, conv: &TickConverter) -> u64 {
        match self.small.iter().position(|&c| c > 0) {
            Some(t) => conv.ns(t as u64),
            None if self.hist.is_empty() => 0,
            None => self.hist.min(),
        }
    }
}

/// The main thread's ends, and what it has merged so far.
pub(super) struct OslatCollector {
    pub(super) handed: Emptier<Accum>,
    pub(super) total: Box<Accum>,
    pub(super) timeline: Vec<TimelineEntry>,
    /// The timeline's bucket length ([`rtgauge_model::latency::push_bounded`]).
    pub(super) span_ns: u64,
    pub(super) timeline_rx: rtrb::Consumer<TimelineEntry>,
    pub(super) windows: WindowRecorder,
    pub(super) conv: TickConverter,
    pub(super) interval_ns: u64,
}

impl OslatCollector {
    /// Add `a` (the intervals since the last hand-over) to the windows.
    pub(super) fn window(&mut self, a: &Accum) {
        let until = if a.until_ns == 0 {
            self.total.until_ns + self.interval_ns
        } else {
            a.until_ns
        };
        let intervals = until.saturating_sub(self.total.until_ns) / self.interval_ns;
        self.windows.push(&gap_histogram(a, &self.conv), intervals);
    }

    /// Merge every handed-over accumulator and timeline entry, and hand the accumulators back empty. The
    /// thread pushes an interval's timeline entry before its accumulator, so draining accumulators first
    /// and the timeline second never leaves the timeline behind the histograms.
    pub(super) fn collect(&mut self) {
        while let Some(mut a) = self.handed.take() {
            self.window(&a);
            self.total.merge(&a);
            a.clear();
            self.handed.give_back(a);
        }
        while let Ok(e) = self.timeline_rx.pop() {
            rtgauge_model::latency::push_bounded(&mut self.timeline, &mut self.span_ns, e);
        }
    }
}

pub(super) fn find_worst_min(a: &mut Accum) {
    a.worst_min = a
        .worst
        .iter()
        .enumerate()
        .min_by_key(|(_, w)| w.gap_ns)
        .map_or(0, |(i, _)| i);
}

/// Add `count` gaps of `g` ns to the rt-tests buckets (oslat's `insert_bucket`, bias applied, last bucket
/// includes overflows and the excess is summed in bucket widths).
#[inline(always)]
pub(super) fn bucket(
    buckets: &mut [u64],
    overflow_sum: &mut u64,
    bias: u64,
    width: u64,
    g: u64,
    count: u64,
) {
    let v = g.saturating_sub(bias);
    let idx = v / width;
    let last = buckets.len() as u64 - 1;
    if idx > last {
        *overflow_sum += (idx - last - 1) * count;
    }
    if let Some(b) = buckets.get_mut(idx.min(last) as usize) {
        *b += count;
    }
}

/// Every gap of `acc` as one histogram: the per-tick table mapped to ns exactly, plus the slow-path gaps.
pub(super) fn gap_histogram(acc: &Accum, conv: &TickConverter) -> Histogram {
    let mut hist = acc.hist.clone();
    for (t, &c) in acc.small.iter().enumerate() {
        if c > 0 {
            hist.saturating_record_n(conv.ns(t as u64), c);
        }
    }
    hist
}

/// One thread's result from its accumulated counts: the per-tick table is folded into the histogram and
/// rt-tests buckets exactly (each tick count maps to one ns value) and the derived figures computed.
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble_thread(
    plan: &OslatPlan,
    conv: &TickConverter,
    index: usize,
    tid: i32,
    conditions: ThreadConditions,
    acc: &Accum,
    bias: u64,
    timeline: Vec<TimelineEntry>,
    timeline_dropped: u64,
) -> OslatThread {
    let cfg = &plan.config;
    let width = cfg.bucket_width_ns.max(1);
    let hist = gap_histogram(acc, conv);
    let mut buckets = acc.buckets.clone();
    let mut overflow_sum = acc.overflow_sum;
    for (t, &c) in acc.small.iter().enumerate() {
        if c > 0 {
            bucket(
                &mut buckets,
                &mut overflow_sum,
                bias,
                width,
                conv.ns(t as u64),
                c,
            );
        }
    }
    let min = acc.min_ns(conv);
    let max = acc.slow_max.max(
        acc.small
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |t| conv.ns(t as u64)),
    );
    let duration_ns = conv.ns(acc.ticks);
    // The gaps and the bookkeeping blocks tile the run: the gaps' sum is the elapsed counter time less the
    // bookkeeping's.
    let gaps = LatencyStats::from_parts(&hist, min, max, conv.ns(acc.gap_ticks()), acc.clamped);
    let secs = duration_ns as f64 / 1e9;
    let over_thresholds = cfg
        .thresholds_ns
        .iter()
        .enumerate()
        .map(|(i, &t)| ThresholdCount {
            threshold_ns: t,
            count: acc.over[i],
            per_second: if secs > 0.0 {
                acc.over[i] as f64 / secs
            } else {
                0.0
            },
        })
        .collect();
    let mut worst = acc.worst.clone();
    worst.sort_by_key(|g| std::cmp::Reverse(g.gap_ns));
    OslatThread {
        index: index as u32,
        cpu: cfg.cpus[index],
        tid,
        node: plan.nodes.get(index).copied().flatten(),
        conditions,
        iterations: acc.iterations,
        duration_ns,
        loop_ns: if acc.iterations == 0 {
            0.0
        } else {
            duration_ns as f64 / acc.iterations as f64
        },
        gaps,
        buckets: OslatBuckets {
            width_ns: width,
            bias_ns: bias,
            counts: buckets,
            overflow_sum,
        },
        over_thresholds,
        lost_ns: acc.lost,
        availability_pct: Some(if duration_ns == 0 {
            0.0
        } else {
            100.0 * (1.0 - acc.lost.min(duration_ns) as f64 / duration_ns as f64)
        }),
        worst,
        timeline,
        windows: Default::default(),
        timeline_dropped,
        bookkeeping: Some(Bookkeeping {
            blocks: acc.book_count,
            total_ns: conv.ns(acc.book_ticks),
            max_ns: conv.ns(acc.book_max),
            interrupted: acc.book_long,
        }),
        disturbance: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_the_requested_number_of_worst_gaps() {
        // Merging grows the total's vector past its capacity; the limit must stay --worst (a run with
        // --worst 2 and 60 hand-overs once reported 110 gaps).
        let mut total = Accum::new(4, 2, 4);
        for round in 0..20u64 {
            let mut part = Accum::new(4, 2, 4);
            for k in 0..2 {
                part.worst.push(Gap {
                    gap_ns: round * 10 + k,
                    monotonic_ns: 0,
                });
            }
            total.merge(&part);
            assert!(
                total.worst.len() <= 2,
                "round {round}: {}",
                total.worst.len()
            );
        }
        let kept: Vec<u64> = total.worst.iter().map(|g| g.gap_ns).collect();
        assert_eq!(kept, [191, 190]);
    }
}
