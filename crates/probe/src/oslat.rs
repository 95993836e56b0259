//! The busy-loop OS-noise probe (oslat's measurement): one thread per CPU reads the counter in a tight
//! loop; every gap between consecutive reads is a sample. Anything that takes the CPU away from the loop —
//! an interrupt, a softirq, a kernel thread, a host preempting the vCPU — shows as a long gap, exactly what
//! a DPDK-style polling thread suffers.
//!
//! The loop is shorter than oslat's: a gap below `fast_limit` ticks (1 µs, or the smallest threshold) only
//! increments a per-tick counter (`small[ticks] += 1`: a compare and an add, no division); longer gaps take
//! the slow path, which converts to ns and updates the HDR histogram, the threshold counts, the lost time,
//! the worst-gap list (with CLOCK_MONOTONIC timestamps) and the rt-tests buckets. The per-tick table is
//! turned into ns exactly afterwards, so nothing is lost or rounded. The stop flag, the end time and the
//! timeline are checked every 1024 iterations.
//!
//! As in `cyclic`, nothing in the loop allocates, locks, prints or does I/O.

use crate::clock::{self, Clock};
use crate::counter::{self, Calibration, TickConverter};
use crate::rt::{self, DmaLatencyGuard};
use crate::stop::StopFlag;
use crate::ProbeError;
use rtgauge_model::cyclic::StopReason;
use rtgauge_model::latency::{self, Histogram, LatencyStats, TimelineEntry};
use rtgauge_model::oslat::{
    CounterInfo, Gap, OslatBuckets, OslatConfig, OslatResult, OslatThread, ThresholdCount, Workload,
};
use rtgauge_model::rt::{ProcessConditions, SchedPolicy, Setting, ThreadConditions};
use rtgauge_model::CpuSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Most thresholds the loop tracks (gaps-per-second counts).
const MAX_THRESHOLDS: usize = 8;
/// Iterations between checks of the stop flag, end time and timeline.
const CHECK_MASK: u64 = 1023;

/// Everything needed to run the probe.
#[derive(Debug, Clone)]
pub struct OslatPlan {
    pub config: OslatConfig,
    pub nodes: Vec<Option<u32>>,
    /// How often the main thread wakes to drain timelines and look for the end.
    pub tick: Duration,
}

/// Phases the caller may want to announce (oslat prints "Pre-heat…", "Test starts…").
pub trait Phases {
    fn preheat(&mut self) {}
    fn start(&mut self, _bias_ns: Option<u64>) {}
}

/// No announcements.
pub struct Silent;
impl Phases for Silent {}

struct Common {
    stop: StopFlag,
    finished: AtomicUsize,
    trace_hit: AtomicBool,
    trace_cpu: AtomicU32,
    trace_gap: AtomicU64,
    /// Smallest preheat gap per thread, ns (u64::MAX = did not preheat).
    preheat_min: Vec<AtomicU64>,
}

/// Thread-owned state, allocated and pre-faulted before measuring.
struct State {
    conv: TickConverter,
    /// Count per gap length in ticks, for gaps below `small.len()` ticks.
    small: Vec<u64>,
    hist: Histogram,
    slow_max: u64,
    clamped: u64,
    thresholds: [u64; MAX_THRESHOLDS],
    n_thresholds: usize,
    over: [u64; MAX_THRESHOLDS],
    avail_thr: u64,
    lost: u64,
    worst: Vec<Gap>,
    worst_min: usize,
    width: u64,
    bias: u64,
    buckets: Vec<u64>,
    overflow_sum: u64,
    trace_thr: Option<u64>,
    tl: TimelineEntry,
    tl_index: u64,
    tl_iter_start: u64,
    tl_dropped: u64,
    tl_interval_ns: u64,
    iterations: u64,
    ticks: u64,
    raw_ns: u64,
    /// (counter, CLOCK_MONOTONIC ns) at loop start, to timestamp gaps.
    base: (u64, u64),
    workload: Vec<u8>,
}

struct Output {
    index: usize,
    tid: i32,
    conditions: ThreadConditions,
    state: State,
}

/// Run the probe: calibrate the counter, preheat, measure until the duration or `stop`.
pub fn run(
    plan: &OslatPlan,
    stop: &StopFlag,
    phases: &mut dyn Phases,
) -> Result<OslatResult, ProbeError> {
    let cfg = &plan.config;
    let n = cfg.cpus.len();
    if n == 0
        || cfg.bucket_count == 0
        || cfg.bucket_width_ns == 0
        || cfg.thresholds_ns.len() > MAX_THRESHOLDS
    {
        return Err(ProbeError::Config(format!(
            "{n} CPUs, {} buckets of {} ns, {} thresholds",
            cfg.bucket_count,
            cfg.bucket_width_ns,
            cfg.thresholds_ns.len()
        )));
    }
    let cal = counter::calibrate();
    let mlock = rt::lock_memory(true);
    // oslat never touches /dev/cpu_dma_latency: the busy loop keeps its CPU out of idle anyway.
    let dma = DmaLatencyGuard::hold(None);
    let common = Arc::new(Common {
        // The threads' own flag: set by the main thread (on `stop`, or at the end) or by a threshold hit,
        // never visible to the caller, whose `stop` means only "the user asked to stop".
        stop: StopFlag::new(),
        finished: AtomicUsize::new(0),
        trace_hit: AtomicBool::new(false),
        trace_cpu: AtomicU32::new(0),
        trace_gap: AtomicU64::new(0),
        preheat_min: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
    });
    let ready = Arc::new(Barrier::new(n + 1));
    let preheated = Arc::new(Barrier::new(n + 1));
    let t0_ns = clock::now_ns(Clock::Monotonic);
    let mut consumers = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let cap =
            ((8 * plan.tick.as_nanos() as u64) / cfg.timeline_interval_ns.max(1) + 64) as usize;
        let (producer, consumer) = rtrb::RingBuffer::<TimelineEntry>::new(cap);
        consumers.push(consumer);
        let (cfg2, common2, ready2, pre2) = (
            cfg.clone(),
            Arc::clone(&common),
            Arc::clone(&ready),
            Arc::clone(&preheated),
        );
        let freq = cal.frequency_hz;
        let h = std::thread::Builder::new()
            .name(format!("rtgauge-osl{i}"))
            .spawn(move || thread_main(&cfg2, i, freq, t0_ns, &common2, &ready2, &pre2, producer))
            .map_err(|source| ProbeError::Spawn { index: i, source })?;
        handles.push(h);
    }
    let main_affinity = match cfg.main_cpu {
        Some(c) => {
            let s = rt::set_affinity(&CpuSet::new([c]));
            Setting {
                requested: Some(CpuSet::new([c])),
                achieved: Some(s.achieved),
                error: s.error,
            }
        }
        None => Setting {
            requested: None,
            achieved: Some(rt::current_affinity()),
            error: None,
        },
    };

    ready.wait();
    phases.preheat();
    preheated.wait();
    let bias = cfg.bias.then(|| global_preheat_min(&common));
    phases.start(bias);
    let start = std::time::Instant::now();

    let mut timelines: Vec<Vec<TimelineEntry>> = vec![Vec::new(); n];
    loop {
        std::thread::sleep(plan.tick);
        drain(&mut consumers, &mut timelines);
        if common.finished.load(Ordering::Acquire) == n || common.stop.is_set() || stop.is_set() {
            break;
        }
    }
    let signalled = stop.is_set() && !common.trace_hit.load(Ordering::Relaxed);
    common.stop.set();
    let mut outputs = Vec::with_capacity(n);
    for (i, h) in handles.into_iter().enumerate() {
        outputs.push(h.join().map_err(|_| ProbeError::Thread {
            index: i,
            reason: "panicked".into(),
        })?);
    }
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    drain(&mut consumers, &mut timelines);
    let conditions = ProcessConditions {
        mlockall: mlock,
        cpu_dma_latency_us: dma.setting.clone(),
        cpu_dma_latency_before_us: dma.before,
        main_affinity,
    };
    drop(dma);
    let stop_reason = if common.trace_hit.load(Ordering::Relaxed) {
        StopReason::Break
    } else if signalled {
        StopReason::Signal
    } else {
        StopReason::Duration
    };
    let trace_hit = common.trace_hit.load(Ordering::Relaxed).then(|| {
        (
            common.trace_cpu.load(Ordering::Relaxed),
            common.trace_gap.load(Ordering::Relaxed),
        )
    });
    Ok(assemble(
        plan,
        &cal,
        outputs,
        timelines,
        conditions,
        stop_reason,
        trace_hit,
        elapsed_ns,
    ))
}

fn global_preheat_min(common: &Common) -> u64 {
    common
        .preheat_min
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .min()
        .filter(|&m| m != u64::MAX)
        .unwrap_or(0)
}

fn drain(consumers: &mut [rtrb::Consumer<TimelineEntry>], timelines: &mut [Vec<TimelineEntry>]) {
    for (c, t) in consumers.iter_mut().zip(timelines.iter_mut()) {
        while let Ok(e) = c.pop() {
            t.push(e);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn thread_main(
    cfg: &OslatConfig,
    index: usize,
    freq: u64,
    t0_ns: u64,
    common: &Common,
    ready: &Barrier,
    preheated: &Barrier,
    mut timeline: rtrb::Producer<TimelineEntry>,
) -> Output {
    rt::block_signals();
    let tid = rt::gettid();
    let cpu = rt::pin_thread(Some(cfg.cpus[index]));
    let mut st = State::prepare(cfg, freq);
    rt::prefault_stack(32 * 1024);
    let (policy, priority) = match cfg.rtprio {
        Some(p) => rt::set_sched(SchedPolicy::Fifo, p),
        None => {
            let (p, prio) = rt::current_sched();
            (
                Setting {
                    requested: SchedPolicy::Other,
                    achieved: p,
                    error: None,
                },
                Setting {
                    requested: 0,
                    achieved: prio,
                    error: None,
                },
            )
        }
    };
    let conditions = ThreadConditions {
        policy,
        priority,
        cpu,
    };

    ready.wait();
    if !cfg.single_preheat || index == 0 {
        // The preheat gets the CPU to its running frequency and measures the smallest gap (for -B).
        let mut sink = rtrb::RingBuffer::<TimelineEntry>::new(1).0;
        st.measure(
            cfg.preheat_ns,
            None,
            t0_ns,
            common,
            cfg.cpus[index],
            &mut sink,
        );
        common.preheat_min[index].store(st.min_ns(), Ordering::Relaxed);
        st.reset();
    }
    preheated.wait();
    if cfg.bias {
        st.bias = global_preheat_min(common);
    }
    st.measure(
        cfg.duration_ns,
        cfg.trace_threshold_ns,
        t0_ns,
        common,
        cfg.cpus[index],
        &mut timeline,
    );
    if st.tl.count > 0 && timeline.push(st.tl).is_err() {
        st.tl_dropped += 1;
    }
    rt::reset_sched();
    common.finished.fetch_add(1, Ordering::Release);
    Output {
        index,
        tid,
        conditions,
        state: st,
    }
}

impl State {
    fn prepare(cfg: &OslatConfig, freq: u64) -> State {
        let conv = TickConverter::new(freq);
        let smallest_thr = cfg
            .thresholds_ns
            .iter()
            .copied()
            .chain([cfg.availability_threshold_ns, 1_000])
            .min()
            .unwrap_or(1_000);
        let fast_limit = conv.ticks(smallest_thr).clamp(1, 1 << 16);
        let mut thresholds = [u64::MAX; MAX_THRESHOLDS];
        for (t, v) in thresholds.iter_mut().zip(&cfg.thresholds_ns) {
            *t = *v;
        }
        let mut worst = Vec::with_capacity(cfg.worst_count as usize);
        rt::prefault_vec(
            &mut worst,
            Gap {
                gap_ns: 0,
                monotonic_ns: 0,
            },
        );
        let mut st = State {
            conv,
            small: vec![0; fast_limit as usize],
            hist: latency::new_histogram(),
            slow_max: 0,
            clamped: 0,
            thresholds,
            n_thresholds: cfg.thresholds_ns.len(),
            over: [0; MAX_THRESHOLDS],
            avail_thr: cfg.availability_threshold_ns,
            lost: 0,
            worst,
            worst_min: 0,
            width: cfg.bucket_width_ns.max(1),
            bias: 0,
            buckets: vec![0; cfg.bucket_count as usize],
            overflow_sum: 0,
            trace_thr: None,
            tl: TimelineEntry::default(),
            tl_index: 0,
            tl_iter_start: 0,
            tl_dropped: 0,
            tl_interval_ns: cfg.timeline_interval_ns.max(1_000_000),
            iterations: 0,
            ticks: 0,
            raw_ns: 0,
            base: (0, 0),
            workload: match cfg.workload {
                Workload::No => Vec::new(),
                Workload::Memmove => vec![0u8; cfg.workload_mem_bytes as usize * 2],
            },
        };
        st.reset();
        st
    }

    /// Zero everything (writing every page, which also pre-faults it).
    fn reset(&mut self) {
        for v in self.small.iter_mut().chain(self.buckets.iter_mut()) {
            // SAFETY: valid exclusive reference; volatile so the pre-fault write is kept.
            unsafe { std::ptr::write_volatile(v, 0) };
        }
        for b in self.workload.iter_mut() {
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        self.hist.reset();
        self.slow_max = 0;
        self.clamped = 0;
        self.over = [0; MAX_THRESHOLDS];
        self.lost = 0;
        self.worst.clear();
        self.worst_min = 0;
        self.overflow_sum = 0;
        self.tl = TimelineEntry::default();
        self.tl_index = 0;
        self.tl_iter_start = 0;
        self.iterations = 0;
        self.ticks = 0;
        self.raw_ns = 0;
    }

    /// Smallest gap seen, ns.
    fn min_ns(&self) -> u64 {
        match self.small.iter().position(|&c| c > 0) {
            Some(t) => self.conv.ns(t as u64),
            None => self.hist.min(),
        }
    }

    /// The measuring loop for `duration_ns` (or until the stop flag).
    fn measure(
        &mut self,
        duration_ns: u64,
        trace_thr: Option<u64>,
        t0_ns: u64,
        common: &Common,
        cpu: u32,
        timeline: &mut rtrb::Producer<TimelineEntry>,
    ) {
        self.trace_thr = trace_thr;
        let raw0 = clock::now_ns(Clock::MonotonicRaw);
        let mono0 = clock::now_ns(Clock::Monotonic);
        let start = counter::read();
        self.base = (start, mono0);
        let end = start.saturating_add(self.conv.ticks(duration_ns));
        let tl_interval = self.tl_interval_ns;
        let t_offset = mono0.saturating_sub(t0_ns);
        self.tl_index = t_offset / tl_interval;
        self.tl.start_ns = self.tl_index * tl_interval;
        let wl = self.workload.len() / 2;
        let mut prev = start;
        let mut n: u64 = 0;
        loop {
            if wl > 0 {
                let p = self.workload.as_mut_ptr();
                // SAFETY: both halves lie inside `workload` (len 2·wl); ptr::copy is memmove.
                unsafe { std::ptr::copy(p.add(wl), p, wl) };
            }
            let now = counter::read();
            let d = now.wrapping_sub(prev);
            if let Some(c) = self.small.get_mut(d as usize) {
                *c += 1;
            } else {
                self.slow(d, prev, common, cpu);
            }
            prev = now;
            n += 1;
            if n & CHECK_MASK == 0 {
                if common.stop.is_set() || now >= end {
                    break;
                }
                let idx = (t_offset + self.conv.ns(now - start)) / tl_interval;
                if idx != self.tl_index {
                    self.tl.count = n - self.tl_iter_start;
                    if timeline.push(self.tl).is_err() {
                        self.tl_dropped += 1;
                    }
                    self.tl = TimelineEntry {
                        start_ns: idx * tl_interval,
                        ..TimelineEntry::default()
                    };
                    self.tl_index = idx;
                    self.tl_iter_start = n;
                }
            }
        }
        self.tl.count = n - self.tl_iter_start;
        self.iterations = n;
        self.ticks = prev - start;
        self.raw_ns = clock::now_ns(Clock::MonotonicRaw) - raw0;
    }

    /// A gap of at least `small.len()` ticks that began at counter value `began`.
    #[inline(never)]
    fn slow(&mut self, ticks: u64, began: u64, common: &Common, cpu: u32) {
        let g = self.conv.ns(ticks);
        if g > latency::HIGHEST_NS {
            self.clamped += 1;
        }
        self.hist.saturating_record(g);
        if g > self.slow_max {
            self.slow_max = g;
        }
        for i in 0..self.n_thresholds {
            if g > self.thresholds[i] {
                self.over[i] += 1;
            }
        }
        if g > self.avail_thr {
            self.lost += g;
            self.tl.missed += 1;
        }
        if g > self.tl.max_ns {
            self.tl.max_ns = g;
        }
        self.bucket(g, 1);
        let gap = Gap {
            gap_ns: g,
            monotonic_ns: self.base.1 + self.conv.ns(began.wrapping_sub(self.base.0)),
        };
        if self.worst.len() < self.worst.capacity() {
            self.worst.push(gap);
            if self.worst.len() == self.worst.capacity() {
                self.find_worst_min();
            }
        } else if let Some(w) = self.worst.get_mut(self.worst_min) {
            if g > w.gap_ns {
                *w = gap;
                self.find_worst_min();
            }
        }
        if let Some(t) = self.trace_thr {
            if g >= t && !common.trace_hit.swap(true, Ordering::Relaxed) {
                common.trace_cpu.store(cpu, Ordering::Relaxed);
                common.trace_gap.store(g, Ordering::Relaxed);
                common.stop.set();
            }
        }
    }

    fn find_worst_min(&mut self) {
        self.worst_min = self
            .worst
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| w.gap_ns)
            .map_or(0, |(i, _)| i);
    }

    /// Add `count` gaps of `g` ns to the rt-tests buckets (oslat's `insert_bucket`, bias applied, last bucket
    /// includes overflows and the excess is summed in bucket widths).
    #[inline(always)]
    fn bucket(&mut self, g: u64, count: u64) {
        let v = g.saturating_sub(self.bias);
        let idx = v / self.width;
        let last = self.buckets.len() as u64 - 1;
        if idx > last {
            self.overflow_sum += (idx - last - 1) * count;
        }
        if let Some(b) = self.buckets.get_mut(idx.min(last) as usize) {
            *b += count;
        }
    }
}

/// Turn thread states into the result: fold the per-tick table into the histogram and rt-tests buckets
/// (exactly: each tick count maps to one ns value), compute the derived figures.
#[allow(clippy::too_many_arguments)]
fn assemble(
    plan: &OslatPlan,
    cal: &Calibration,
    outputs: Vec<Output>,
    timelines: Vec<Vec<TimelineEntry>>,
    conditions: ProcessConditions,
    stop_reason: StopReason,
    trace_hit: Option<(u32, u64)>,
    elapsed_ns: u64,
) -> OslatResult {
    let cfg = &plan.config;
    let mut threads = Vec::with_capacity(outputs.len());
    let mut ppm = Vec::new();
    for (out, timeline) in outputs.into_iter().zip(timelines) {
        let mut st = out.state;
        let small = std::mem::take(&mut st.small);
        for (t, &c) in small.iter().enumerate() {
            if c > 0 {
                let g = st.conv.ns(t as u64);
                st.hist.saturating_record_n(g, c);
                st.bucket(g, c);
            }
        }
        let min = small
            .iter()
            .position(|&c| c > 0)
            .map(|t| st.conv.ns(t as u64))
            .unwrap_or_else(|| if st.hist.is_empty() { 0 } else { st.hist.min() });
        let max = st.slow_max.max(
            small
                .iter()
                .rposition(|&c| c > 0)
                .map_or(0, |t| st.conv.ns(t as u64)),
        );
        let duration_ns = st.conv.ns(st.ticks);
        // The gaps tile the run: their sum is the elapsed counter time.
        let gaps = LatencyStats::from_parts(&st.hist, min, max, duration_ns, st.clamped);
        let secs = duration_ns as f64 / 1e9;
        let over_thresholds = cfg
            .thresholds_ns
            .iter()
            .enumerate()
            .map(|(i, &t)| ThresholdCount {
                threshold_ns: t,
                count: st.over[i],
                per_second: if secs > 0.0 {
                    st.over[i] as f64 / secs
                } else {
                    0.0
                },
            })
            .collect();
        let mut worst = st.worst.clone();
        worst.sort_by_key(|g| std::cmp::Reverse(g.gap_ns));
        ppm.push(cal.cross_check_ppm(st.ticks, st.raw_ns));
        threads.push(OslatThread {
            index: out.index as u32,
            cpu: cfg.cpus[out.index],
            tid: out.tid,
            node: plan.nodes.get(out.index).copied().flatten(),
            conditions: out.conditions,
            iterations: st.iterations,
            duration_ns,
            loop_ns: if st.iterations == 0 {
                0.0
            } else {
                duration_ns as f64 / st.iterations as f64
            },
            gaps,
            buckets: OslatBuckets {
                width_ns: st.width,
                bias_ns: st.bias,
                counts: st.buckets.clone(),
                overflow_sum: st.overflow_sum,
            },
            over_thresholds,
            lost_ns: st.lost,
            availability_pct: if duration_ns == 0 {
                0.0
            } else {
                100.0 * (1.0 - st.lost.min(duration_ns) as f64 / duration_ns as f64)
            },
            worst,
            timeline,
            timeline_dropped: st.tl_dropped,
        });
    }
    let cross_check_ppm = ppm
        .iter()
        .copied()
        .fold(0.0f64, |a, b| if b.abs() > a.abs() { b } else { a });
    OslatResult {
        config: cfg.clone(),
        counter: CounterInfo {
            source: counter::SOURCE.to_string(),
            frequency_hz: cal.frequency_hz,
            calibration: cal.method.clone(),
            calibration_spread_ppm: cal.spread_ppm,
            cross_check_ppm,
        },
        conditions,
        threads,
        stop_reason,
        trace_hit,
        elapsed_ns,
        accounting: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn config(cpus: Vec<u32>, duration_ms: u64) -> OslatConfig {
        OslatConfig {
            cpus,
            main_cpu: None,
            duration_ns: duration_ms * 1_000_000,
            rtprio: None,
            preheat_ns: 50_000_000,
            single_preheat: false,
            bucket_count: 32,
            bucket_width_ns: 1000,
            bias: false,
            workload: Workload::No,
            workload_mem_bytes: 0,
            trace_threshold_ns: None,
            availability_threshold_ns: 5_000,
            thresholds_ns: vec![1_000, 5_000, 10_000, 20_000],
            worst_count: 8,
            timeline_interval_ns: 100_000_000,
        }
    }

    fn plan(cfg: OslatConfig) -> OslatPlan {
        let n = cfg.cpus.len();
        OslatPlan {
            config: cfg,
            nodes: vec![None; n],
            tick: Duration::from_millis(20),
        }
    }

    #[test]
    fn counts_add_up_and_gaps_tile_the_run() {
        let r = run(
            &plan(config(vec![0, 1], 300)),
            &StopFlag::new(),
            &mut Silent,
        )
        .unwrap();
        assert_eq!(r.threads.len(), 2);
        for t in &r.threads {
            assert!(
                t.iterations > 100_000,
                "{} iterations in 300 ms",
                t.iterations
            );
            assert_eq!(t.gaps.count, t.iterations);
            assert_eq!(t.buckets.counts.iter().sum::<u64>(), t.iterations);
            let tl: u64 = t.timeline.iter().map(|e| e.count).sum();
            assert_eq!(tl, t.iterations, "timeline accounts for every iteration");
            assert!(
                (t.duration_ns as i64 - 300_000_000).abs() < 20_000_000,
                "{}",
                t.duration_ns
            );
            assert!(t.gaps.min_ns <= t.gaps.max_ns);
            assert!(t.loop_ns > 0.0 && t.loop_ns < 1_000.0);
            assert!(t.availability_pct > 0.0 && t.availability_pct <= 100.0);
            assert!(t.worst.windows(2).all(|w| w[0].gap_ns >= w[1].gap_ns));
        }
        assert!(r.counter.frequency_hz > 0);
        assert!(r.counter.cross_check_ppm.abs() < 2_000.0, "{:?}", r.counter);
    }

    #[test]
    fn trace_threshold_stops_and_reports() {
        let mut c = config(vec![1], 5_000);
        c.trace_threshold_ns = Some(1); // every slow-path gap crosses it
        c.thresholds_ns = vec![1];
        c.availability_threshold_ns = 1;
        let r = run(&plan(c), &StopFlag::new(), &mut Silent).unwrap();
        assert_eq!(r.stop_reason, StopReason::Break);
        assert_eq!(r.trace_hit.unwrap().0, 1);
        assert!(r.threads[0].duration_ns < 4_000_000_000);
    }

    #[test]
    fn bias_is_the_preheat_minimum() {
        let mut c = config(vec![1], 100);
        c.bias = true;
        let r = run(&plan(c), &StopFlag::new(), &mut Silent).unwrap();
        let t = &r.threads[0];
        assert!(
            t.buckets.bias_ns > 0 && t.buckets.bias_ns <= t.gaps.min_ns + 1_000,
            "{:?}",
            t.buckets
        );
    }

    #[test]
    fn bad_config_is_an_error() {
        let mut c = config(vec![], 10);
        assert!(run(&plan(c.clone()), &StopFlag::new(), &mut Silent).is_err());
        c.cpus = vec![0];
        c.bucket_count = 0;
        assert!(run(&plan(c), &StopFlag::new(), &mut Silent).is_err());
    }
}
