//! Recording a latency distribution while a probe measures: the histogram with exact side counters
//! ([`LatencyRecorder`], called per sample from the measuring threads: `#[inline]`, no allocation), and the
//! time windows a comparison resamples, built on the main thread ([`WindowRecorder`]). They produce the run
//! document's `LatencyStats` and `Windows`.

use rtgauge_model::latency::{
    histogram_of, new_histogram, sparse, sparse_add, HdrBlob, Histogram, LatencyStats, Sparse,
    Windows, HIGHEST_NS, MAX_WINDOWS,
};

/// A latency distribution being recorded: the histogram plus exact minimum, maximum and sum (the
/// histogram clamps at [`HIGHEST_NS`], the side counters do not).
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    h: Histogram,
    min: u64,
    max: u64,
    sum: u64,
    clamped: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> LatencyRecorder {
        LatencyRecorder {
            h: new_histogram(),
            min: u64::MAX,
            max: 0,
            sum: 0,
            clamped: 0,
        }
    }

    /// Record one value (0 counts as 1 ns, the histogram's lowest).
    #[inline]
    pub fn record(&mut self, value_ns: u64) {
        let v = value_ns.max(1);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum = self.sum.saturating_add(v);
        if v > HIGHEST_NS {
            self.clamped += 1;
        }
        // Within bounds after the clamp: cannot fail.
        let _ = self.h.record(v.min(HIGHEST_NS));
    }

    /// Add everything `other` recorded (histogram and exact side counters).
    pub fn merge(&mut self, other: &LatencyRecorder) {
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum = self.sum.saturating_add(other.sum);
        self.clamped += other.clamped;
        let _ = self.h.add(&other.h);
    }

    /// The statistics of everything recorded: exact count, min, max, mean and the default percentiles.
    pub fn stats(&self) -> LatencyStats {
        LatencyStats::from_parts(&self.h, self.min, self.max, self.sum, self.clamped)
    }
}

/// Builds [`Windows`] from consecutive interval histograms, on the main thread (it allocates).
#[derive(Debug, Clone)]
pub struct WindowRecorder {
    interval_ns: u64,
    per_window: u64,
    windows: Vec<Sparse>,
    fill: Vec<u64>,
}

impl WindowRecorder {
    /// A recorder for timeline intervals of `interval_ns` each (one window per interval to start with).
    pub fn new(interval_ns: u64) -> WindowRecorder {
        WindowRecorder {
            interval_ns: interval_ns.max(1),
            per_window: 1,
            windows: Vec::new(),
            fill: Vec::new(),
        }
    }

    /// Add the next `intervals` timeline intervals' histogram.
    #[inline] // as `sparse`: the collector thread calls it every interval
    pub fn push(&mut self, histogram: &Histogram, intervals: u64) {
        if histogram.is_empty() && intervals == 0 {
            return;
        }
        let s = sparse(histogram);
        match (self.windows.last_mut(), self.fill.last_mut()) {
            (Some(w), Some(f)) if *f < self.per_window => {
                *w = sparse_add(w, &s);
                *f += intervals.max(1);
            }
            _ => {
                self.windows.push(s);
                self.fill.push(intervals.max(1));
            }
        }
        if self.windows.len() > MAX_WINDOWS {
            let ws = std::mem::take(&mut self.windows);
            let fs = std::mem::take(&mut self.fill);
            for (w, f) in ws.chunks(2).zip(fs.chunks(2)) {
                self.windows.push(match w {
                    [a, b] => sparse_add(a, b),
                    [a] => a.clone(),
                    _ => Vec::new(),
                });
                self.fill.push(f.iter().sum());
            }
            self.per_window *= 2;
        }
    }

    /// The windows so far, each serialised as a histogram.
    pub fn windows(&self) -> Windows {
        Windows {
            window_ns: self.interval_ns * self.per_window,
            hdr: self
                .windows
                .iter()
                .map(|w| HdrBlob::encode(&histogram_of(w)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_keeps_exact_side_counters_and_merges() {
        let (mut a, mut b) = (LatencyRecorder::new(), LatencyRecorder::new());
        a.record(0);
        a.record(5_000);
        b.record(HIGHEST_NS + 7);
        a.merge(&b);
        let s = a.stats();
        assert_eq!((s.count, s.min_ns, s.max_ns), (3, 1, HIGHEST_NS + 7));
        assert_eq!((s.sum_ns, s.clamped), (1 + 5_000 + HIGHEST_NS + 7, 1));
        assert_eq!(LatencyRecorder::new().stats().count, 0);
    }

    #[test]
    fn windows_merge_pairwise_and_keep_every_sample() {
        let mut r = WindowRecorder::new(1_000_000_000);
        for i in 0..200u64 {
            let mut h = new_histogram();
            h.record(1_000 + i).unwrap();
            h.record(5_000).unwrap();
            r.push(&h, 1);
        }
        let w = r.windows();
        assert!(
            w.hdr.len() <= MAX_WINDOWS && w.hdr.len() > MAX_WINDOWS / 2,
            "{}",
            w.hdr.len()
        );
        assert_eq!(
            w.window_ns, 4_000_000_000,
            "200 intervals in ≤ 64 windows: 4 per window"
        );
        let total: u64 = w.hdr.iter().map(|b| b.decode().unwrap().len()).sum();
        assert_eq!(total, 400);
        let first = w.hdr[0].decode().unwrap();
        assert_eq!(first.len(), 8, "the first window holds 4 intervals");
    }
}
