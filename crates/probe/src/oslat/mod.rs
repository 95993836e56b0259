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
//! The probe measures the platform, not itself: the slow path and the every-1024-iterations block
//! (stop flag, end, timeline entry, accumulator hand-over) are *bookkeeping*; the counter is read again
//! after them and the next gap starts there, so their cost (~60 ns a block, ~0.2 % of the loop's time
//! here) is not a gap. It is counted apart (blocks, total and largest ticks in `Accum`): gaps and
//! bookkeeping together tile the run. A block that took as long as a slow-path gap (1 µs) was interrupted
//! — the platform's noise, not rtgauge's — and is left in the next gap, as before, so no interruption of
//! 1 µs or more is hidden (a shorter one landing in a block is booked with it). (oslat has no such block; its per-iteration bucket division is in every gap alike.)
//!
//! Each measuring thread allocates and pre-faults its own memory (state, accumulators and their spares)
//! after pinning itself, so the kernel's first-touch placement puts it on the measured CPU's NUMA node.
//! The main thread — off the measured CPUs unless every allowed CPU is measured (`-C`) — sleeps between
//! drains, waking on tick boundaries.
//!
//! As in `cyclic`, nothing in the loop allocates, locks, prints or does I/O.

use crate::contention::CpuClaim;
use crate::counter::{self, Calibration, TickConverter};
use crate::handover::{self, Filler};
use crate::observe::ProbeObserver;
use crate::recorder::WindowRecorder;
use crate::rt::{self, DmaLatencyGuard};
use crate::stop::StopFlag;
use crate::time::{self, ClockId};
use crate::ProbeError;
use accum::{assemble_thread, bucket, find_worst_min, Accum, OslatCollector};
use rtgauge_model::kind::StopReason;
use rtgauge_model::latency::{self, TimelineEntry};
use rtgauge_model::oslat::{CounterInfo, Gap, OslatConfig, OslatResult, Workload};
use rtgauge_model::rt::{
    ProcessConditions, SchedPolicy, Setting, ThreadConditions, ThreadDisturbance,
};
use rtgauge_model::CpuSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

mod accum;

/// Most thresholds the loop tracks (gaps-per-second counts).
const MAX_THRESHOLDS: usize = 8;
/// Iterations between checks of the stop flag, end time and timeline.
const CHECK_MASK: u64 = 1023;

/// Everything needed to run the probe.
#[derive(Debug, Clone)]
pub struct OslatPlan {
    /// The measurement as the run document records it (CPUs, duration, buckets, thresholds).
    pub config: OslatConfig,
    /// NUMA node of each measured CPU, for the result.
    pub nodes: Vec<Option<u32>>,
    /// How often the main thread wakes to drain timelines and look for the end.
    pub tick: Duration,
}

/// Empty accumulators per thread in circulation besides the one being filled.
const SPARE_ACCUMS: usize = 3;

/// The threads' stop flag, alone on its cache lines (two: the adjacent-line prefetcher pairs them): the
/// loops read it every 1024 iterations, and nothing the main thread writes may share its line.
#[repr(align(128))]
#[derive(Default)]
struct LoopStop(AtomicBool);

impl LoopStop {
    #[inline(always)]
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// State shared by all threads of one probe run.
struct OslatRun {
    stop: LoopStop,
    finished: AtomicUsize,
    trace_hit: AtomicBool,
    trace_cpu: AtomicU32,
    trace_gap: AtomicU64,
    /// Smallest preheat gap per thread, ns (u64::MAX = did not preheat).
    preheat_min: Vec<AtomicU64>,
    /// Tid and achieved settings per thread, set once before measuring (for checkpoints).
    started: Vec<OnceLock<(i32, ThreadConditions)>>,
    /// The spare accumulators each thread allocated once pinned, for the main thread to put in circulation
    /// after the first barrier (locked once each, never while measuring).
    spares: Vec<handover::Spares<Accum>>,
}

/// Thread-owned state, allocated and pre-faulted before measuring.
struct OslatThreadState {
    conv: TickConverter,
    /// Held inline (not boxed): the loop's fast path reaches `acc.small` without a pointer hop.
    acc: Accum,
    thresholds: [u64; MAX_THRESHOLDS],
    n_thresholds: usize,
    avail_thr: u64,
    width: u64,
    bias: u64,
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
    state: OslatThreadState,
    /// Faults and preemptions from the first gap measured to the last (the preheat left out).
    disturbance: ThreadDisturbance,
}

/// Run the probe: calibrate the counter, preheat, measure until the duration or `stop`.
pub fn run(
    plan: &OslatPlan,
    stop: &StopFlag,
    observer: &mut dyn ProbeObserver<OslatResult>,
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
    let conv = TickConverter::new(cal.frequency_hz);
    // Another run measuring these CPUs at the same time disturbs this one and is disturbed by it.
    let mut claim = CpuClaim::claim(&CpuSet::new(cfg.cpus.iter().copied()));
    let mlock = rt::lock_memory(true);
    // oslat never touches /dev/cpu_dma_latency: the busy loop keeps its CPU out of idle anyway.
    let dma = DmaLatencyGuard::hold(None);
    let common = Arc::new(OslatRun {
        // The threads' own flag: set by the main thread (on `stop`, or at the end) or by a threshold hit,
        // never visible to the caller, whose `stop` means only "the user asked to stop".
        stop: LoopStop::default(),
        finished: AtomicUsize::new(0),
        trace_hit: AtomicBool::new(false),
        trace_cpu: AtomicU32::new(0),
        trace_gap: AtomicU64::new(0),
        preheat_min: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        started: (0..n).map(|_| OnceLock::new()).collect(),
        spares: (0..n).map(|_| handover::Spares::default()).collect(),
    });
    let barriers = Barriers {
        ready: Arc::new(Barrier::new(n + 1)),
        preheated: Arc::new(Barrier::new(n + 1)),
        go: Arc::new(Barrier::new(n + 1)),
    };
    // The main thread goes to its CPU first: what it allocates (rings, totals) is first touched there.
    let main_cpus = cfg.main_cpu.map(|c| CpuSet::new([c]));
    let mut conditions = rt::process_conditions(main_cpus.as_ref(), mlock, &dma);
    let (mut collectors, handles) = spawn_threads(plan, conv, &common, &barriers)?;

    barriers.ready.wait();
    // Every thread has pinned itself and allocated its spares on its own CPU: put them in circulation.
    for (spares, c) in common.spares.iter().zip(collectors.iter_mut()) {
        spares.circulate(&mut c.handed);
    }
    observer.preheat();
    barriers.preheated.wait();
    let bias = cfg.bias.then(|| global_preheat_min(&common));
    observer.start(bias);
    barriers.go.wait();
    let start = std::time::Instant::now();
    let tick_ns = (plan.tick.as_nanos() as u64).max(1);
    loop {
        // Blocked until the next tick boundary, counted from the start of the measurement (absolute: the
        // work below does not shift the wake-ups), or the end;
        // once the threads are due to end, every 10 ms (at most) until they have.
        let e = start.elapsed().as_nanos() as u64;
        let next = if e < cfg.duration.as_ns() {
            ((e / tick_ns + 1) * tick_ns).min(cfg.duration.as_ns())
        } else {
            e + tick_ns.min(10_000_000)
        };
        std::thread::sleep(Duration::from_nanos(next - e));
        collectors.iter_mut().for_each(OslatCollector::collect);
        let elapsed = start.elapsed();
        observer.tick(elapsed, &(), &mut || {
            checkpoint_result(
                plan,
                &cal,
                &conv,
                &common,
                &collectors,
                &conditions,
                bias.unwrap_or(0),
                elapsed,
            )
        });
        if common.finished.load(Ordering::Acquire) == n || common.stop.is_set() || stop.is_set() {
            break;
        }
    }
    let signalled = stop.is_set() && !common.trace_hit.load(Ordering::Relaxed);
    common.stop.set();
    let outputs = rt::join_all(handles)?;
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    drop(dma);
    conditions.contended = claim.contenders();
    Ok(finish(
        plan, &cal, &conv, &common, outputs, collectors, conditions, signalled, elapsed_ns,
    ))
}

/// The points every measurement thread waits at with the main thread: before the preheat, after it (so
/// `--bias` can use every thread's preheat minimum), and before measuring, once the main thread has set up
/// the observer (a `--trace` instance created and its events enabled while the loops measured would land
/// its own IPIs and kernel work in the run's first moments).
#[derive(Clone)]
struct Barriers {
    ready: Arc<Barrier>,
    preheated: Arc<Barrier>,
    go: Arc<Barrier>,
}

/// A thread's accumulators, allocated on its CPU, sized for this run.
fn new_accum(cfg: &OslatConfig, conv: &TickConverter) -> Box<Accum> {
    Accum::new(
        fast_limit(cfg, conv),
        cfg.worst_count as usize,
        cfg.bucket_count as usize,
    )
}

/// Start one measurement thread per CPU, which allocates its own accumulators once pinned, and return the
/// main thread's ends of their rings. The main thread's running totals are its own memory.
fn spawn_threads(
    plan: &OslatPlan,
    conv: TickConverter,
    common: &Arc<OslatRun>,
    barriers: &Barriers,
) -> Result<(Vec<OslatCollector>, Vec<JoinHandle<Output>>), ProbeError> {
    let cfg = &plan.config;
    let n = cfg.cpus.len();
    let t0_ns = time::now_ns(ClockId::Monotonic);
    let mut collectors = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (producer, timeline_rx) = handover::timeline_ring(plan.tick, cfg.timeline_interval_ns);
        // The thread allocates the spares itself, on its CPU ([`OslatRun::spares`]).
        let (handover, handed) = handover::channel_for(SPARE_ACCUMS);
        let interval_ns = timeline_interval_ns(cfg);
        collectors.push(OslatCollector {
            handed,
            total: new_accum(cfg, &conv),
            timeline: Vec::new(),
            span_ns: interval_ns,
            timeline_rx,
            windows: WindowRecorder::new(interval_ns),
            conv,
            interval_ns,
        });
        let (cfg2, common2, barriers2) = (cfg.clone(), Arc::clone(common), barriers.clone());
        handles.push(rt::spawn_thread(format!("rtgauge-osl{i}"), i, move || {
            thread_main(
                &cfg2, i, conv, t0_ns, &common2, &barriers2, producer, handover,
            )
        })?);
    }
    Ok((collectors, handles))
}

/// The result, once every thread has ended: the last accumulators merged into each thread's total.
#[allow(clippy::too_many_arguments)]
fn finish(
    plan: &OslatPlan,
    cal: &Calibration,
    conv: &TickConverter,
    common: &OslatRun,
    outputs: Vec<Output>,
    collectors: Vec<OslatCollector>,
    conditions: ProcessConditions,
    signalled: bool,
    elapsed_ns: u64,
) -> OslatResult {
    let cfg = &plan.config;
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
    let mut threads = Vec::with_capacity(outputs.len());
    let mut ppm = Vec::with_capacity(outputs.len());
    for (out, mut col) in outputs.into_iter().zip(collectors) {
        col.collect();
        let st = out.state;
        col.window(&st.acc);
        col.total.merge(&st.acc);
        debug_assert_eq!(col.total.iterations, st.iterations);
        ppm.push(cal.cross_check_ppm(st.ticks, st.raw_ns));
        let (tid, cond) = started(common, cfg, out.index);
        let mut t = assemble_thread(
            plan,
            conv,
            out.index,
            tid,
            cond,
            &col.total,
            st.bias,
            col.timeline,
            st.tl_dropped,
        );
        t.windows = col.windows.windows();
        t.disturbance = Some(out.disturbance);
        threads.push(t);
    }
    // The cross-check furthest from zero.
    let cross_check_ppm = ppm
        .iter()
        .copied()
        .fold(0.0f64, |a, b| if b.abs() > a.abs() { b } else { a });
    OslatResult {
        config: cfg.clone(),
        counter: counter_info(cal, cross_check_ppm),
        conditions,
        threads,
        stop_reason,
        trace_hit,
        elapsed_ns,
        accounting: None,
        why: None,
        load: None,
    }
}

fn counter_info(cal: &Calibration, cross_check_ppm: f64) -> CounterInfo {
    CounterInfo {
        source: counter::SOURCE.to_string(),
        frequency_hz: cal.frequency_hz,
        calibration: cal.method.clone(),
        calibration_spread_ppm: cal.spread_ppm,
        cross_check_ppm,
    }
}

/// Gaps below this many ticks take the fast path (the per-tick table).
fn fast_limit(cfg: &OslatConfig, conv: &TickConverter) -> usize {
    let smallest_thr = cfg
        .thresholds_ns
        .iter()
        .copied()
        .chain([cfg.availability_threshold_ns, 1_000])
        .min()
        .unwrap_or(1_000);
    conv.ticks(smallest_thr).clamp(1, 1 << 16) as usize
}

/// The timeline interval the loop uses (at least 1 ms).
fn timeline_interval_ns(cfg: &OslatConfig) -> u64 {
    cfg.timeline_interval_ns.max(1_000_000)
}

fn global_preheat_min(common: &OslatRun) -> u64 {
    common
        .preheat_min
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .min()
        .filter(|&m| m != u64::MAX)
        .unwrap_or(0)
}

/// Tid and settings of thread `i`, or "not started" ones if it never got that far.
fn started(common: &OslatRun, cfg: &OslatConfig, i: usize) -> (i32, ThreadConditions) {
    common.started[i].get().cloned().unwrap_or_else(|| {
        let not = || Some("not started".to_string());
        (
            0,
            ThreadConditions {
                policy: Setting {
                    requested: if cfg.rtprio.is_some() {
                        SchedPolicy::Fifo
                    } else {
                        SchedPolicy::Other
                    },
                    achieved: SchedPolicy::Other,
                    error: not(),
                },
                priority: Setting {
                    requested: cfg.rtprio.unwrap_or(0),
                    achieved: 0,
                    error: not(),
                },
                cpu: Setting {
                    requested: Some(cfg.cpus[i]),
                    achieved: None,
                    error: not(),
                },
            },
        )
    })
}

/// The result of the intervals handed over so far (a checkpoint). The counter cross-check is only known
/// at the end and reads 0 here.
#[allow(clippy::too_many_arguments)]
fn checkpoint_result(
    plan: &OslatPlan,
    cal: &Calibration,
    conv: &TickConverter,
    common: &OslatRun,
    collectors: &[OslatCollector],
    conditions: &ProcessConditions,
    bias: u64,
    elapsed: Duration,
) -> OslatResult {
    let cfg = &plan.config;
    let threads = collectors
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (tid, cond) = started(common, cfg, i);
            // Only the intervals the histograms hold.
            let timeline = c
                .timeline
                .iter()
                .filter(|e| e.start_ns < c.total.until_ns)
                .copied()
                .collect();
            let mut t = assemble_thread(plan, conv, i, tid, cond, &c.total, bias, timeline, 0);
            t.windows = c.windows.windows();
            t
        })
        .collect();
    OslatResult {
        config: cfg.clone(),
        counter: counter_info(cal, 0.0),
        conditions: conditions.clone(),
        threads,
        stop_reason: StopReason::Signal,
        trace_hit: None,
        elapsed_ns: elapsed.as_nanos() as u64,
        accounting: None,
        why: None,
        load: None,
    }
}

#[allow(clippy::too_many_arguments)]
fn thread_main(
    cfg: &OslatConfig,
    index: usize,
    conv: TickConverter,
    t0_ns: u64,
    common: &OslatRun,
    barriers: &Barriers,
    mut timeline: rtrb::Producer<TimelineEntry>,
    mut handover: Filler<Accum>,
) -> Output {
    rt::block_signals();
    let tid = rt::gettid();
    let cpu = rt::pin_thread(Some(cfg.cpus[index]));
    // Pinned: everything allocated and pre-faulted from here on is first touched on the measured CPU.
    let mut st = OslatThreadState::prepare(cfg, conv, new_accum(cfg, &conv));
    // The main thread puts them in circulation once every thread is at the first barrier.
    common.spares[index].stock((0..SPARE_ACCUMS).map(|_| new_accum(cfg, &conv)));
    rt::prefault_stack(32 * 1024);
    let (policy, priority) = rt::set_fifo_or_other(cfg.rtprio);
    let _ = common.started[index].set((
        tid,
        ThreadConditions {
            policy,
            priority,
            cpu,
        },
    ));

    barriers.ready.wait();
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
            None,
        );
        common.preheat_min[index].store(st.acc.min_ns(&st.conv), Ordering::Relaxed);
        st.reset();
    }
    barriers.preheated.wait();
    if cfg.bias {
        st.bias = global_preheat_min(common);
    }
    barriers.go.wait();
    let before = rt::thread_disturbance();
    st.measure(
        cfg.duration.as_ns(),
        cfg.trace_threshold_ns,
        t0_ns,
        common,
        cfg.cpus[index],
        &mut timeline,
        Some(&mut handover),
    );
    let disturbance = rt::thread_disturbance().since(&before);
    if st.tl.count > 0 && timeline.push(st.tl).is_err() {
        st.tl_dropped += 1;
    }
    rt::reset_sched();
    common.finished.fetch_add(1, Ordering::Release);
    Output {
        index,
        state: st,
        disturbance,
    }
}

impl OslatThreadState {
    /// Called on the pinned thread: `acc` was allocated there, the workload buffer is, and `reset`
    /// pre-faults both.
    fn prepare(cfg: &OslatConfig, conv: TickConverter, acc: Box<Accum>) -> OslatThreadState {
        let mut thresholds = [u64::MAX; MAX_THRESHOLDS];
        for (t, v) in thresholds.iter_mut().zip(&cfg.thresholds_ns) {
            *t = *v;
        }
        let mut st = OslatThreadState {
            conv,
            acc: *acc,
            thresholds,
            n_thresholds: cfg.thresholds_ns.len(),
            avail_thr: cfg.availability_threshold_ns,
            width: cfg.bucket_width_ns.max(1),
            bias: 0,
            trace_thr: None,
            tl: TimelineEntry::default(),
            tl_index: 0,
            tl_iter_start: 0,
            tl_dropped: 0,
            tl_interval_ns: timeline_interval_ns(cfg),
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

    /// Zero everything (writing every page, which also pre-faults it), the preheat's timeline drops included:
    /// they are not the run's.
    fn reset(&mut self) {
        self.acc.clear();
        for b in self.workload.iter_mut() {
            // SAFETY: valid exclusive reference; volatile so the pre-fault write is kept.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        self.tl = TimelineEntry::default();
        self.tl_index = 0;
        self.tl_iter_start = 0;
        self.tl_dropped = 0;
        self.iterations = 0;
        self.ticks = 0;
        self.raw_ns = 0;
    }

    /// The measuring loop for `duration_ns` (or until the stop flag). With `handover`, the accumulator is
    /// handed to the main thread at every timeline interval.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &mut self,
        duration_ns: u64,
        trace_thr: Option<u64>,
        t0_ns: u64,
        common: &OslatRun,
        cpu: u32,
        timeline: &mut rtrb::Producer<TimelineEntry>,
        mut handover: Option<&mut Filler<Accum>>,
    ) {
        self.trace_thr = trace_thr;
        let raw0 = time::now_ns(ClockId::MonotonicRaw);
        let mono0 = time::now_ns(ClockId::Monotonic);
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
        // Where the current accumulator began (iteration, counter).
        let (mut acc_n, mut acc_t) = (0u64, start);
        loop {
            if wl > 0 {
                let p = self.workload.as_mut_ptr();
                // SAFETY: both halves lie inside `workload` (len 2·wl); ptr::copy is memmove.
                unsafe { std::ptr::copy(p.add(wl), p, wl) };
            }
            let now = counter::read();
            let d = now.wrapping_sub(prev);
            if let Some(c) = self.acc.small.get_mut(d as usize) {
                *c += 1;
                prev = now;
            } else {
                self.slow(d, prev, common, cpu);
                // The slow path is bookkeeping: the next gap starts after it.
                prev = self.end_bookkeeping(now);
            }
            n += 1;
            if n & CHECK_MASK == 0 {
                // `prev`: the end of the last gap (or of the slow path after it), where this block begins.
                let now = prev;
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
                    if let Some(h) = handover.as_deref_mut() {
                        let until = self.tl.start_ns;
                        let sealed = h.hand_over(&mut self.acc, |a| {
                            a.iterations = n - acc_n;
                            a.ticks = now - acc_t;
                            a.until_ns = until;
                        });
                        if sealed {
                            (acc_n, acc_t) = (n, now);
                        }
                    }
                }
                // Bookkeeping, not a gap: the next gap starts after it. Its cost goes into the accumulator
                // that now spans it (the new one after a hand-over).
                prev = self.end_bookkeeping(now);
            }
        }
        self.tl.count = n - self.tl_iter_start;
        self.acc.iterations = n - acc_n;
        self.acc.ticks = prev - acc_t;
        self.iterations = n;
        self.ticks = prev - start;
        self.raw_ns = time::now_ns(ClockId::MonotonicRaw) - raw0;
    }

    /// The end of a bookkeeping block that began at counter value `began`: where the next gap starts. A
    /// block as long as a slow-path gap (`small.len()` ticks) was interrupted: it stays in the next gap.
    #[inline(always)]
    fn end_bookkeeping(&mut self, began: u64) -> u64 {
        let now = counter::read();
        let ticks = now.wrapping_sub(began);
        if ticks < self.acc.small.len() as u64 {
            self.acc.bookkeeping(ticks);
            now
        } else {
            self.acc.book_long += 1;
            began
        }
    }

    /// A gap of at least `small.len()` ticks that began at counter value `began`.
    #[inline(never)]
    fn slow(&mut self, ticks: u64, began: u64, common: &OslatRun, cpu: u32) {
        let g = self.conv.ns(ticks);
        let (bias, width) = (self.bias, self.width);
        let a = &mut self.acc;
        a.slow_ticks += ticks;
        if g > latency::HIGHEST_NS {
            a.clamped += 1;
        }
        a.hist.saturating_record(g);
        if g > a.slow_max {
            a.slow_max = g;
        }
        for i in 0..self.n_thresholds {
            if g > self.thresholds[i] {
                a.over[i] += 1;
            }
        }
        if g > self.avail_thr {
            a.lost += g;
            self.tl.missed += 1;
        }
        if g > self.tl.max_ns {
            self.tl.max_ns = g;
        }
        bucket(&mut a.buckets, &mut a.overflow_sum, bias, width, g, 1);
        let gap = Gap {
            gap_ns: g,
            monotonic_ns: self.base.1 + self.conv.ns(began.wrapping_sub(self.base.0)),
        };
        if a.worst.len() < a.worst_cap {
            a.worst.push(gap);
            if a.worst.len() == a.worst_cap {
                find_worst_min(a);
            }
        } else if let Some(w) = a.worst.get_mut(a.worst_min) {
            if g > w.gap_ns {
                *w = gap;
                find_worst_min(a);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Silent;

    pub(crate) fn config(cpus: Vec<u32>, duration_ms: u64) -> OslatConfig {
        OslatConfig {
            cpus,
            main_cpu: None,
            duration: rtgauge_model::Nanos(duration_ms * 1_000_000),
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
            assert!(t.availability_pct.is_some_and(|a| a > 0.0 && a <= 100.0));
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
    fn checkpoints_hold_the_handed_over_intervals() {
        struct Checkpoints(Vec<(u64, u64, u64)>);
        impl ProbeObserver<OslatResult> for Checkpoints {
            fn tick(&mut self, _: Duration, _: &(), checkpoint: &mut dyn FnMut() -> OslatResult) {
                let r = checkpoint();
                let t = &r.threads[0];
                let tl: u64 = t.timeline.iter().map(|e| e.count).sum();
                self.0.push((t.iterations, t.gaps.count, tl));
            }
        }
        let mut c = config(vec![1], 1_000);
        c.timeline_interval_ns = 100_000_000;
        let mut seen = Checkpoints(Vec::new());
        let r = run(&plan(c), &StopFlag::new(), &mut seen).unwrap();
        let fin = r.threads[0].iterations;
        let its: Vec<u64> = seen.0.iter().map(|x| x.0).collect();
        assert!(
            its.windows(2).all(|w| w[0] <= w[1]),
            "checkpoints only grow: {its:?}"
        );
        for (iters, hist, tl) in &seen.0 {
            assert_eq!(
                iters, hist,
                "a checkpoint's histogram holds exactly its iterations"
            );
            assert_eq!(iters, tl, "and its timeline the same intervals");
        }
        // Near the end a checkpoint holds most of the 1 s run (all but the interval being filled).
        let last = *its.last().unwrap();
        assert!(
            last > fin / 2 && last <= fin,
            "last checkpoint {last} of {fin}"
        );
        // The final result still accounts for every iteration after all the hand-overs.
        let t = &r.threads[0];
        assert_eq!(t.gaps.count, fin);
        assert_eq!(t.buckets.counts.iter().sum::<u64>(), fin);
        assert_eq!(t.timeline.iter().map(|e| e.count).sum::<u64>(), fin);
    }

    /// One thread's state prepared on the calling thread, with the shared state of a one-thread run.
    fn one_thread(c: &OslatConfig) -> (OslatThreadState, OslatRun) {
        let conv = TickConverter::new(counter::calibrate().frequency_hz);
        let st = OslatThreadState::prepare(c, conv, new_accum(c, &conv));
        let common = OslatRun {
            stop: LoopStop::default(),
            finished: AtomicUsize::new(0),
            trace_hit: AtomicBool::new(false),
            trace_cpu: AtomicU32::new(0),
            trace_gap: AtomicU64::new(0),
            preheat_min: vec![AtomicU64::new(u64::MAX)],
            started: vec![OnceLock::new()],
            spares: vec![handover::Spares::default()],
        };
        (st, common)
    }

    #[test]
    fn bookkeeping_is_timed_apart_from_the_gaps() {
        let c = config(vec![0], 0);
        let (mut st, common) = one_thread(&c);
        let (mut tx, _rx) = rtrb::RingBuffer::<TimelineEntry>::new(1024);
        st.measure(300_000_000, None, 0, &common, 0, &mut tx, None);
        let a = &st.acc;
        let slow = a.hist.len();
        assert!(st.iterations > 10 * 1024, "{} iterations", st.iterations);
        // One block per slow gap and per 1024 iterations, less the block that ended the loop (untimed);
        // the few interrupted ones were left in the gaps.
        assert_eq!(st.iterations % 1024, 0);
        assert_eq!(a.book_count + a.book_long, slow + st.iterations / 1024 - 1);
        assert!(
            a.book_long <= a.book_count / 10,
            "{} of {}",
            a.book_long,
            a.book_count
        );
        assert!(a.book_ticks > 0 && a.book_max > 0 && a.book_max <= a.book_ticks);
        assert!(
            a.book_max < a.small.len() as u64,
            "a block is bookkeeping only while shorter than a slow-path gap"
        );
        // The gaps and the blocks tile the run exactly: the per-tick table, the slow gaps and the
        // bookkeeping add up to the elapsed ticks (a block counted twice, or lost, breaks it by its length).
        let fast: u64 = a.small.iter().enumerate().map(|(t, &k)| t as u64 * k).sum();
        assert_eq!(
            fast + a.slow_ticks + a.book_ticks,
            st.ticks,
            "gaps ({fast} fast + {} slow) + bookkeeping {} ticks against the run's",
            a.slow_ticks,
            a.book_ticks
        );
        assert_eq!(a.gap_ticks(), st.ticks - a.book_ticks);
    }

    #[test]
    fn reset_after_the_preheat_forgets_its_counts() {
        let mut c = config(vec![0], 0);
        c.timeline_interval_ns = 1_000_000;
        let (mut st, common) = one_thread(&c);
        // The preheat's sink holds one entry: every later interval is dropped.
        let mut sink = rtrb::RingBuffer::<TimelineEntry>::new(1).0;
        st.measure(20_000_000, None, 0, &common, 0, &mut sink, None);
        assert!(st.tl_dropped > 0, "the preheat dropped its intervals");
        assert!(st.acc.book_count > 0);
        st.reset();
        assert_eq!(st.tl_dropped, 0, "preheat drops are not the run's");
        assert_eq!(
            (st.acc.book_count, st.acc.book_ticks, st.acc.book_max),
            (0, 0, 0)
        );
        assert_eq!(
            (st.iterations, st.acc.iterations, st.acc.hist.len()),
            (0, 0, 0)
        );
    }

    #[test]
    fn the_stop_flag_has_its_cache_lines_to_itself() {
        assert_eq!(std::mem::align_of::<LoopStop>(), 128);
        assert_eq!(std::mem::size_of::<LoopStop>(), 128);
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
