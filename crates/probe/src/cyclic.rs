//! The timer wake-up latency probe (cyclictest's measurement).
//!
//! Each measurement thread sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` until its next
//! intended wake-up `t_k = t_0 + k·interval`, reads the clock, and records `latency = now − t_k` in
//! nanoseconds.
//!
//! Honest deadlines (the default): the next intended time is always `t_k + interval`. A period that was
//! already over when the thread woke (`latency ≥ interval`) counts as a missed deadline, and because the
//! next sleep returns at once, every period of a long stall is measured with its real lateness. With
//! `skip_missed`, cyclictest's skip-ahead is reproduced (`while now > next: next += interval`), and the
//! periods it skips are counted instead of vanishing.
//!
//! Nothing in [`measure`] allocates, locks, prints or does I/O other than the two clock calls.

use crate::contention::CpuClaim;
use crate::handover::{self, Emptier, Filler};
use crate::observe::ProbeObserver;
use crate::recorder::WindowRecorder;
use crate::rt::{self, DmaLatencyGuard};
use crate::stop::StopFlag;
use crate::time::{self, ClockId};
use crate::ProbeError;
use rtgauge_model::cyclic::{CyclicConfig, CyclicResult, CyclicThread, LinearHistogram};
use rtgauge_model::kind::StopReason;
pub use rtgauge_model::latency::LiveThread;
use rtgauge_model::latency::Spike;
use rtgauge_model::latency::{self, Histogram, LatencyStats, TimelineEntry};
use rtgauge_model::rt::{ProcessConditions, Setting, ThreadConditions, ThreadDisturbance};
use rtgauge_model::CpuSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Duration;

/// Everything needed to run the probe; built and validated by the caller.
#[derive(Debug, Clone)]
pub struct CyclicPlan {
    /// The measurement as the run document records it (threads, interval, priorities, histogram).
    pub config: CyclicConfig,
    /// The clock the threads sleep on and read.
    pub clock: ClockId,
    /// Lock memory (`mlockall`) before measuring.
    pub mlockall: bool,
    /// `/dev/cpu_dma_latency` request in µs; `None` leaves the system as it is.
    pub dma_latency_us: Option<i32>,
    /// Affinity of the main thread, applied after the measurement threads start (cyclictest order).
    pub main_cpus: Option<CpuSet>,
    /// Capacity of the spike list per thread (cyclictest `--spike-nodes`).
    pub spike_nodes: usize,
    /// Samples at or above this are handed to the main thread as they happen (the observer's
    /// [`ProbeObserver::late`]), for spike episodes; `None` hands none over.
    pub late_floor_ns: Option<u64>,
    /// NUMA node of each thread's CPU, for the result.
    pub nodes: Vec<Option<u32>>,
    /// How often the main thread wakes to publish live figures and drain timelines.
    pub tick: Duration,
}

/// Relaxed atomics written by one measurement thread and read by the main thread. Padded to its own cache
/// lines so that threads do not disturb each other.
#[repr(align(128))]
#[derive(Default)]
struct Shared {
    tid: AtomicU64,
    priority: AtomicU64,
    cycles: AtomicU64,
    min: AtomicU64,
    last: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
    missed: AtomicU64,
    /// Largest sample since the main thread last took it (reset by [`Shared::snapshot`]).
    peak: AtomicU64,
    /// Set once by the thread before measuring, for checkpoints.
    conditions: std::sync::OnceLock<ThreadConditions>,
    /// The spare histograms the thread allocated once pinned, put in circulation after the start barrier.
    spares: handover::Spares<Histogram>,
}

impl Shared {
    fn snapshot(&self, interval_ns: u64) -> LiveThread {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LiveThread {
            tid: r(&self.tid) as i32,
            priority: r(&self.priority) as i32,
            interval_ns,
            cycles: r(&self.cycles),
            min_ns: r(&self.min),
            last_ns: r(&self.last),
            sum_ns: r(&self.sum),
            max_ns: r(&self.max),
            missed: r(&self.missed),
            peak_ns: self.peak.swap(0, Ordering::Relaxed),
        }
    }
}

/// State shared by all threads of one probe run.
struct CyclicRun {
    stop: StopFlag,
    finished: AtomicUsize,
    break_hit: AtomicBool,
    break_thread: AtomicU32,
    break_value: AtomicU64,
}

/// Per-thread parameters.
struct ThreadParams {
    index: usize,
    cpu: Option<u32>,
    priority: i32,
    interval_ns: u64,
    /// Time all timelines are measured from.
    t0_ns: u64,
}

/// The rings between one measurement thread and the main thread: timeline entries, and at each timeline
/// interval the histogram so far (see [`handover`]); the main thread merges it into its running total.
struct ThreadRings {
    timeline: rtrb::Producer<TimelineEntry>,
    hist: Filler<Histogram>,
    /// Late samples (at or above the plan's `late_floor_ns`), as they happen.
    late: Option<rtrb::Producer<Spike>>,
}

/// Main-thread side of the rings, with everything collected so far.
struct CyclicCollector {
    timeline_rx: Vec<rtrb::Consumer<TimelineEntry>>,
    hist_rx: Vec<Emptier<Histogram>>,
    late_rx: Vec<rtrb::Consumer<Spike>>,
    /// Late samples drained since the observer last saw them.
    late: Vec<Spike>,
    timelines: Vec<Vec<TimelineEntry>>,
    /// Each timeline's bucket length ([`rtgauge_model::latency::push_bounded`]).
    spans: Vec<u64>,
    merged: Vec<Histogram>,
    windows: Vec<WindowRecorder>,
}

/// Empty histograms per thread in circulation besides the one being filled.
const SPARE_HISTS: usize = 2;

impl CyclicCollector {
    fn drain(&mut self) {
        for i in 0..self.timelines.len() {
            while let Ok(e) = self.timeline_rx[i].pop() {
                rtgauge_model::latency::push_bounded(&mut self.timelines[i], &mut self.spans[i], e);
            }
            if let Some(rx) = self.late_rx.get_mut(i) {
                while let Ok(s) = rx.pop() {
                    self.late.push(s);
                }
            }
            while let Some(mut h) = self.hist_rx[i].take() {
                // Both histograms have the same fixed bounds, so adding cannot fail or resize.
                let _ = self.merged[i].add(&*h);
                self.windows[i].push(&h, 1);
                h.reset();
                self.hist_rx[i].give_back(h);
            }
        }
    }
}

/// Thread-owned measurement state, allocated and pre-faulted before the loop.
struct ThreadState {
    hist: Box<Histogram>,
    min: u64,
    max: u64,
    sum: u64,
    clamped: u64,
    cycles: u64,
    missed: u64,
    skipped: u64,
    early: u64,
    last: u64,
    linear: Option<Linear>,
    spikes: Vec<Spike>,
    spikes_total: u64,
    tl_cur: TimelineEntry,
    tl_index: u64,
    tl_dropped: u64,
    /// Stalls handed over inside the window of the one waiting before them: the ring was full and
    /// [`LATE_WAITING`] stalls already waited.
    late_coalesced: u64,
    /// Late samples that found the ring full, waiting for room in time order ([`hand_late`]); allocated
    /// once at [`LATE_WAITING`], never grown.
    late_pending: std::collections::VecDeque<Spike>,
    /// Late samples merged into the one waiting (same stall), not handed over one by one.
    late_merged: u64,
}

struct Linear {
    unit_ns: u64,
    buckets: Vec<u64>,
    overflows: u64,
    overflow_cycles: Vec<u64>,
}

/// What a thread hands back when it ends.
struct ThreadOutput {
    index: usize,
    tid: i32,
    conditions: ThreadConditions,
    state: ThreadState,
    error: Option<String>,
    disturbance: ThreadDisturbance,
}

/// Run the probe until its duration or loop count is reached, or `stop` is set (signal, break threshold).
pub fn run(
    plan: &CyclicPlan,
    stop: &StopFlag,
    observer: &mut dyn ProbeObserver<CyclicResult, [LiveThread]>,
) -> Result<CyclicResult, ProbeError> {
    let cfg = &plan.config;
    let n = cfg.threads as usize;
    if n == 0 || cfg.cpus.len() != n || cfg.interval_ns == 0 {
        return Err(ProbeError::Config(format!(
            "{n} threads, {} CPU assignments, interval {} ns",
            cfg.cpus.len(),
            cfg.interval_ns
        )));
    }
    // Another run measuring these CPUs at the same time disturbs this one and is disturbed by it.
    let mut claim = CpuClaim::claim(&CpuSet::new(cfg.cpus.iter().flatten().copied()));
    let mlock = rt::lock_memory(plan.mlockall);
    let dma = DmaLatencyGuard::hold(plan.dma_latency_us);

    let common = Arc::new(CyclicRun {
        // The threads' own flag: set by the main thread (on `stop`, or at the end) or by a threshold hit,
        // never visible to the caller, whose `stop` means only "the user asked to stop".
        stop: StopFlag::new(),
        finished: AtomicUsize::new(0),
        break_hit: AtomicBool::new(false),
        break_thread: AtomicU32::new(0),
        break_value: AtomicU64::new(0),
    });
    let shared: Arc<Vec<Shared>> = Arc::new((0..n).map(|_| Shared::default()).collect());
    // One more party than threads: the main thread releases them all at once.
    let barrier = Arc::new(Barrier::new(n + 1));
    let intervals: Vec<u64> = (0..n)
        .map(|i| cfg.interval_ns + cfg.distance_ns * i as u64)
        .collect();
    let (mut col, handles) = spawn_threads(plan, &intervals, &common, &shared, &barrier)?;

    let mut conditions = rt::process_conditions(plan.main_cpus.as_ref(), mlock, &dma);
    barrier.wait();
    // Every thread has allocated its spares on its own CPU: put them in circulation.
    for (s, rx) in shared.iter().zip(col.hist_rx.iter_mut()) {
        s.spares.circulate(rx);
    }
    let start = std::time::Instant::now();
    drive(
        plan,
        stop,
        observer,
        &Live {
            common: &common,
            shared: &shared,
            intervals: &intervals,
            conditions: &conditions,
            start,
        },
        &mut col,
    );
    let signalled = stop.is_set() && !common.break_hit.load(Ordering::Relaxed);
    common.stop.set();

    let outputs = rt::join_all(handles)?;
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    col.drain();
    // A sample still waiting for room in its ring when its thread ended.
    col.late.extend(
        outputs
            .iter()
            .flat_map(|o| o.state.late_pending.iter().copied()),
    );
    // The last tick's late samples (the spike that hit --break, those after a signal) reach the observer too.
    if !col.late.is_empty() {
        observer.late(&col.late);
        col.late.clear();
    }
    // Closing the device drops the PM QoS request: the system value is back.
    drop(dma);

    let stop_reason = if common.break_hit.load(Ordering::Relaxed) {
        StopReason::Break
    } else if signalled {
        StopReason::Signal
    } else if cfg.loops.is_some() && cfg.duration.is_none() {
        StopReason::Loops
    } else {
        StopReason::Duration
    };
    conditions.contended = claim.contenders();
    Ok(assemble(
        plan,
        outputs,
        col,
        &common,
        stop_reason,
        elapsed_ns,
        conditions,
    ))
}

/// Start one measurement thread per entry of `intervals` (each waits on `barrier`), with the main
/// thread's ends of their rings.
fn spawn_threads(
    plan: &CyclicPlan,
    intervals: &[u64],
    common: &Arc<CyclicRun>,
    shared: &Arc<Vec<Shared>>,
    barrier: &Arc<Barrier>,
) -> Result<(CyclicCollector, Vec<JoinHandle<ThreadOutput>>), ProbeError> {
    let cfg = &plan.config;
    let n = intervals.len();
    let t0 = time::now_ns(plan.clock);
    let mut col = CyclicCollector {
        timeline_rx: Vec::with_capacity(n),
        hist_rx: Vec::with_capacity(n),
        late_rx: Vec::with_capacity(n),
        late: Vec::new(),
        timelines: vec![Vec::new(); n],
        spans: vec![cfg.timeline_interval_ns; n],
        merged: (0..n).map(|_| latency::new_histogram()).collect(),
        windows: (0..n)
            .map(|_| WindowRecorder::new(cfg.timeline_interval_ns))
            .collect(),
    };
    let mut handles = Vec::with_capacity(n);
    for (i, &interval_ns) in intervals.iter().enumerate() {
        let (timeline, timeline_rx) = handover::timeline_ring(plan.tick, cfg.timeline_interval_ns);
        // The thread allocates the spares itself, on its CPU ([`Shared::spares`]).
        let (hist, hist_rx) = handover::channel_for(SPARE_HISTS);
        col.timeline_rx.push(timeline_rx);
        col.hist_rx.push(hist_rx);
        let late = plan.late_floor_ns.map(|_| {
            // Room for two seconds of every sample being late (20 ticks of the main thread), so a main
            // thread starved for that long loses none: in a 16-vCPU lab guest on two host CPUs, eight
            // ticks' room dropped thousands. 40 bytes a sample: 80 KB per thread at 1 kHz.
            let per_tick = plan.tick.as_nanos() as u64 / interval_ns.max(1);
            let (tx, rx) = rtrb::RingBuffer::new((20 * per_tick + 64).min(1 << 20) as usize);
            col.late_rx.push(rx);
            tx
        });
        let rings = ThreadRings {
            timeline,
            hist,
            late,
        };
        let priority = if cfg.priospread {
            (cfg.priority - i as i32).max(1)
        } else {
            cfg.priority
        };
        let params = ThreadParams {
            index: i,
            cpu: cfg.cpus[i],
            priority,
            interval_ns,
            t0_ns: t0,
        };
        let (plan2, common2, shared2, barrier2) = (
            plan.clone(),
            Arc::clone(common),
            Arc::clone(shared),
            Arc::clone(barrier),
        );
        handles.push(rt::spawn_thread(format!("rtgauge-cyc{i}"), i, move || {
            thread_main(&plan2, params, &common2, &shared2[i], &barrier2, rings)
        })?);
    }
    Ok((col, handles))
}

/// What the main thread reads while the probe runs.
struct Live<'a> {
    common: &'a CyclicRun,
    shared: &'a [Shared],
    intervals: &'a [u64],
    conditions: &'a ProcessConditions,
    start: std::time::Instant,
}

/// The main thread's loop while the threads measure: every tick, drain the rings, publish live figures
/// and offer a checkpoint; return when every thread has finished or a stop is asked for.
fn drive(
    plan: &CyclicPlan,
    stop: &StopFlag,
    observer: &mut dyn ProbeObserver<CyclicResult, [LiveThread]>,
    live: &Live,
    col: &mut CyclicCollector,
) {
    let n = live.intervals.len();
    let mut snaps = vec![LiveThread::default(); n];
    loop {
        std::thread::sleep(plan.tick);
        col.drain();
        if !col.late.is_empty() {
            observer.late(&col.late);
            col.late.clear();
        }
        for (i, s) in snaps.iter_mut().enumerate() {
            *s = live.shared[i].snapshot(live.intervals[i]);
        }
        let elapsed = live.start.elapsed();
        let mut checkpoint =
            || checkpoint_result(plan, live.shared, col, &snaps, live.conditions, elapsed);
        observer.tick(elapsed, &snaps, &mut checkpoint);
        let common = live.common;
        if common.finished.load(Ordering::Acquire) == n || common.stop.is_set() || stop.is_set() {
            break;
        }
    }
}

fn assemble(
    plan: &CyclicPlan,
    outputs: Vec<ThreadOutput>,
    col: CyclicCollector,
    common: &CyclicRun,
    stop_reason: StopReason,
    elapsed_ns: u64,
    conditions: ProcessConditions,
) -> CyclicResult {
    let cfg = &plan.config;
    let mut spikes = Vec::new();
    let mut spikes_total = 0;
    let mut threads = Vec::with_capacity(outputs.len());
    let CyclicCollector {
        timelines,
        mut merged,
        mut windows,
        ..
    } = col;
    for (((out, timeline), total), win) in outputs
        .into_iter()
        .zip(timelines)
        .zip(merged.iter_mut())
        .zip(windows.iter_mut())
    {
        let s = out.state;
        let _ = total.add(&*s.hist);
        win.push(&s.hist, 1);
        spikes.extend_from_slice(&s.spikes);
        spikes_total += s.spikes_total;
        let mut cond = out.conditions;
        if let Some(e) = out.error {
            cond.cpu.error.get_or_insert(e);
        }
        threads.push(CyclicThread {
            index: out.index as u32,
            tid: out.tid,
            interval_ns: cfg.interval_ns + cfg.distance_ns * out.index as u64,
            conditions: cond,
            node: plan.nodes.get(out.index).copied().flatten(),
            cycles: s.cycles,
            missed_deadlines: s.missed,
            skipped_periods: s.skipped,
            early_wakeups: s.early,
            last_ns: s.last,
            latency: LatencyStats::from_parts(total, s.min, s.max, s.sum, s.clamped),
            linear: s.linear.map(|l| LinearHistogram {
                unit_ns: l.unit_ns,
                buckets: l.buckets,
                overflows: l.overflows,
                overflow_cycles: l.overflow_cycles,
            }),
            timeline,
            windows: win.windows(),
            timeline_dropped: s.tl_dropped,
            late_dropped: 0,
            late_coalesced: s.late_coalesced,
            late_merged: s.late_merged,
            disturbance: Some(out.disturbance),
        });
    }
    spikes.sort_by_key(|s| (s.monotonic_ns, s.thread));
    let break_hit = common.break_hit.load(Ordering::Relaxed).then(|| {
        (
            common.break_thread.load(Ordering::Relaxed),
            common.break_value.load(Ordering::Relaxed),
        )
    });
    CyclicResult {
        config: cfg.clone(),
        conditions,
        threads,
        spikes,
        spikes_total,
        stop_reason,
        break_hit,
        elapsed_ns,
        accounting: None,
        why: None,
        load: None,
    }
}

/// The result so far, for a checkpoint: histograms of the completed intervals, timelines, live figures.
/// The rt-tests buckets and spikes stay with the threads until the end.
fn checkpoint_result(
    plan: &CyclicPlan,
    shared: &[Shared],
    col: &CyclicCollector,
    live: &[LiveThread],
    conditions: &ProcessConditions,
    elapsed: Duration,
) -> CyclicResult {
    let cfg = &plan.config;
    let threads = live
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let cond = shared[i]
                .conditions
                .get()
                .cloned()
                .unwrap_or_else(|| ThreadConditions {
                    policy: Setting {
                        requested: cfg.policy,
                        achieved: cfg.policy,
                        error: Some("not started".into()),
                    },
                    priority: Setting {
                        requested: cfg.priority,
                        achieved: 0,
                        error: Some("not started".into()),
                    },
                    cpu: Setting {
                        requested: cfg.cpus[i],
                        achieved: None,
                        error: Some("not started".into()),
                    },
                });
            let h = &col.merged[i];
            // Exact side figures are those of every sample so far; the histogram holds completed intervals.
            let mut latency = LatencyStats::from_parts(h, l.min_ns, l.max_ns, l.sum_ns, 0);
            latency.count = h.len();
            CyclicThread {
                index: i as u32,
                tid: l.tid,
                interval_ns: l.interval_ns,
                conditions: cond,
                node: plan.nodes.get(i).copied().flatten(),
                cycles: l.cycles,
                missed_deadlines: l.missed,
                skipped_periods: 0,
                early_wakeups: 0,
                last_ns: l.last_ns,
                latency,
                linear: None,
                timeline: col.timelines[i].clone(),
                windows: col.windows[i].windows(),
                timeline_dropped: 0,
                late_dropped: 0,
                late_coalesced: 0,
                late_merged: 0,
                disturbance: None,
            }
        })
        .collect();
    CyclicResult {
        config: cfg.clone(),
        conditions: conditions.clone(),
        threads,
        spikes: Vec::new(),
        spikes_total: 0,
        stop_reason: StopReason::Signal,
        break_hit: None,
        elapsed_ns: elapsed.as_nanos() as u64,
        accounting: None,
        why: None,
        load: None,
    }
}

fn thread_main(
    plan: &CyclicPlan,
    p: ThreadParams,
    common: &CyclicRun,
    shared: &Shared,
    barrier: &Barrier,
    mut rings: ThreadRings,
) -> ThreadOutput {
    rt::block_signals();
    let tid = rt::gettid();
    // Pin first, then allocate, so that first-touch places every buffer on the thread's own NUMA node.
    let cpu = rt::pin_thread(p.cpu);
    let cfg = &plan.config;
    let mut state = ThreadState::prepare(cfg, plan.spike_nodes);
    shared.spares.stock((0..SPARE_HISTS).map(|_| {
        let mut h = Box::new(latency::new_histogram());
        h.reset(); // maps its pages now, on this thread's node
        h
    }));
    rt::prefault_stack(32 * 1024);
    let (policy, priority) = rt::set_sched(cfg.policy, p.priority);
    shared.tid.store(tid as u64, Ordering::Relaxed);
    shared
        .priority
        .store(priority.achieved as u64, Ordering::Relaxed);
    shared.min.store(u64::MAX, Ordering::Relaxed);
    let conditions = ThreadConditions {
        policy,
        priority,
        cpu,
    };
    let _ = shared.conditions.set(conditions.clone());

    barrier.wait();
    let before = rt::thread_disturbance();
    let error = measure(plan, &p, common, shared, &mut state, &mut rings);
    let disturbance = rt::thread_disturbance().since(&before);
    // Flush the interval in progress; a full ring is counted, never waited on.
    if state.tl_cur.count > 0 && rings.timeline.push(state.tl_cur).is_err() {
        state.tl_dropped += 1;
    }
    rt::reset_sched();
    common.finished.fetch_add(1, Ordering::Release);
    ThreadOutput {
        index: p.index,
        tid,
        conditions,
        state,
        error,
        disturbance,
    }
}

impl ThreadState {
    fn prepare(cfg: &CyclicConfig, spike_nodes: usize) -> ThreadState {
        let mut hist = Box::new(latency::new_histogram());
        // `reset` writes every counter, which maps the pages now rather than in the loop.
        hist.reset();
        let linear = cfg.hist_buckets.map(|b| {
            let b = b as usize;
            let mut overflow_cycles = Vec::with_capacity(b);
            rt::prefault_vec(&mut overflow_cycles, 0);
            Linear {
                unit_ns: cfg.unit_ns.max(1),
                buckets: vec![0; b],
                overflows: 0,
                overflow_cycles,
            }
        });
        let mut spikes = Vec::with_capacity(if cfg.spike_threshold_ns.is_some() {
            spike_nodes
        } else {
            0
        });
        rt::prefault_vec(
            &mut spikes,
            Spike {
                thread: 0,
                cycle: 0,
                latency_ns: 0,
                monotonic_ns: 0,
                cpu: None,
                window_ns: 0,
            },
        );
        let mut s = ThreadState {
            hist,
            min: u64::MAX,
            max: 0,
            sum: 0,
            clamped: 0,
            cycles: 0,
            missed: 0,
            skipped: 0,
            early: 0,
            last: 0,
            linear,
            spikes,
            spikes_total: 0,
            tl_cur: TimelineEntry::default(),
            tl_index: 0,
            tl_dropped: 0,
            late_coalesced: 0,
            late_pending: std::collections::VecDeque::with_capacity(LATE_WAITING),
            late_merged: 0,
        };
        if let Some(l) = s.linear.as_mut() {
            for b in l.buckets.iter_mut() {
                // SAFETY: valid exclusive reference; volatile so the pre-fault write is kept.
                unsafe { std::ptr::write_volatile(b, 0) };
            }
        }
        s
    }

    /// Account one sample. Integer arithmetic on owned data only.
    #[inline(always)]
    fn record(&mut self, lat: u64, cycle: u64, woke_ns: u64, index: u32, cfg: &CyclicConfig) {
        if lat < self.min {
            self.min = lat;
        }
        if lat > self.max {
            self.max = lat;
        }
        self.sum = self.sum.saturating_add(lat);
        if lat > latency::HIGHEST_NS {
            self.clamped += 1;
        }
        self.hist.saturating_record(lat);
        if let Some(l) = self.linear.as_mut() {
            let b = (lat / l.unit_ns) as usize;
            if let Some(slot) = l.buckets.get_mut(b) {
                *slot += 1;
            } else {
                l.overflows += 1;
                if l.overflow_cycles.len() < l.overflow_cycles.capacity() {
                    l.overflow_cycles.push(cycle);
                }
            }
        }
        if let Some(thr) = cfg.spike_threshold_ns {
            if lat > thr {
                self.spikes_total += 1;
                if self.spikes.len() < self.spikes.capacity() {
                    self.spikes.push(Spike {
                        thread: index,
                        cycle,
                        latency_ns: lat,
                        monotonic_ns: woke_ns,
                        cpu: None,
                        window_ns: 0,
                    });
                }
            }
        }
        self.last = lat;
    }

    /// Add the sample whose intended time is `intended_ns` to the timeline, publishing finished intervals.
    #[inline(always)]
    fn timeline(
        &mut self,
        intended_ns: u64,
        t0_ns: u64,
        tl_ns: u64,
        lat: u64,
        missed: bool,
        rings: &mut ThreadRings,
    ) {
        let idx = intended_ns.saturating_sub(t0_ns) / tl_ns;
        if idx != self.tl_index && self.tl_cur.count > 0 {
            if rings.timeline.push(self.tl_cur).is_err() {
                self.tl_dropped += 1;
            }
            self.tl_cur = TimelineEntry::default();
            rings.hist.hand_over(&mut self.hist, |_| {});
        }
        if self.tl_cur.count == 0 {
            self.tl_index = idx;
            self.tl_cur.start_ns = idx * tl_ns;
        }
        self.tl_cur.count += 1;
        if lat > self.tl_cur.max_ns {
            self.tl_cur.max_ns = lat;
        }
        if missed {
            self.tl_cur.missed += 1;
        }
    }
}

use rtgauge_model::cyclic::LATE_WAITING;

/// Hand a late sample to the main thread. When the ring is full (the main thread starved, or a stall of
/// seconds whose catch-up wakes the thread thousands of times at once), the sample waits in the state; the
/// next ones of the same stall (windows overlapping it) are merged into it — its window stretched to
/// their end, its latency the worst of them ([`Spike::absorb`]), counted in `late_merged` — and the
/// measuring loop hands the waiting ones over, oldest first, at its first cycles with room (or at the
/// thread's end): each stall reaches the episode tracker as one window. A later stall waits beside the
/// earlier ones, up to [`LATE_WAITING`]; one arriving when that many wait is merged into the newest
/// (`late_coalesced`): its episode's window then spans both, never lost. No allocation (the queue's room
/// is reserved before the loop), no system call. The caller has offered the waiting ones the ring first
/// ([`send_waiting`]).
#[inline]
fn hand_late(tx: &mut rtrb::Producer<Spike>, st: &mut ThreadState, s: Spike) {
    let room = st.late_pending.len() < LATE_WAITING;
    let Some(p) = st.late_pending.back_mut() else {
        if let Err(rtrb::PushError::Full(s)) = tx.push(s) {
            st.late_pending.push_back(s);
        }
        return;
    };
    if s.window_start_ns() <= p.monotonic_ns {
        p.absorb(&s);
        st.late_merged += 1;
    } else if room {
        st.late_pending.push_back(s);
    } else {
        p.absorb(&s);
        st.late_coalesced += 1;
    }
}

/// Hand the late samples waiting for room ([`hand_late`]) over, oldest first, as far as the ring has room.
#[inline]
fn send_waiting(tx: &mut rtrb::Producer<Spike>, st: &mut ThreadState) {
    while let Some(&p) = st.late_pending.front() {
        if tx.push(p).is_err() {
            break;
        }
        st.late_pending.pop_front();
    }
}

/// The measuring loop. Returns an error description if the clock failed (the samples so far are kept).
fn measure(
    plan: &CyclicPlan,
    p: &ThreadParams,
    common: &CyclicRun,
    shared: &Shared,
    st: &mut ThreadState,
    rings: &mut ThreadRings,
) -> Option<String> {
    let cfg = &plan.config;
    let clk = plan.clock;
    let interval = p.interval_ns;
    let tl_ns = cfg.timeline_interval_ns.max(1);
    let index = p.index as u32;
    let start = time::now_ns(clk);
    let mut next = start + interval;
    let end = cfg.duration.map(|d| start.saturating_add(d.as_ns()));
    let max_cycles = cfg.loops.unwrap_or(u64::MAX);

    while !common.stop.is_set() {
        let r = if cfg.relative {
            let before = time::now_ns(clk);
            next = before + interval;
            time::sleep_for(clk, interval)
        } else {
            time::sleep_until(clk, next)
        };
        let now = time::now_ns(clk);
        if r != 0 && r != libc::EINTR {
            return Some(format!("clock_nanosleep failed with error {r}"));
        }
        let lat = if now >= next {
            now - next
        } else {
            st.early += 1;
            0
        };
        let cycle = st.cycles;
        st.record(lat, cycle, now, index, cfg);
        if let (Some(floor), Some(tx)) = (plan.late_floor_ns, rings.late.as_mut()) {
            // A sample waiting for room goes as soon as there is some, late sample or not.
            send_waiting(tx, st);
            if lat >= floor {
                // An unpinned thread says where it woke (vDSO getcpu, no system call); a pinned one's CPU
                // is in the plan.
                let cpu = match p.cpu {
                    Some(c) => c,
                    // SAFETY: sched_getcpu has no preconditions.
                    None => unsafe { libc::sched_getcpu() }.max(0) as u32,
                };
                let s = Spike {
                    thread: index,
                    cycle,
                    latency_ns: lat,
                    monotonic_ns: now,
                    cpu: Some(cpu),
                    window_ns: 0,
                };
                hand_late(tx, st, s);
            }
        }
        let missed = lat >= interval;
        if missed {
            st.missed += 1;
        }
        st.timeline(next, p.t0_ns, tl_ns, lat, missed, rings);
        st.cycles += 1;

        shared.cycles.store(st.cycles, Ordering::Relaxed);
        shared.last.store(lat, Ordering::Relaxed);
        shared.min.store(st.min, Ordering::Relaxed);
        shared.max.store(st.max, Ordering::Relaxed);
        // One writer: a load and a store, no read-modify-write. A reset by the main thread between the two
        // only moves this sample into the next tick's peak.
        if lat > shared.peak.load(Ordering::Relaxed) {
            shared.peak.store(lat, Ordering::Relaxed);
        }
        shared.sum.store(st.sum, Ordering::Relaxed);
        shared.missed.store(st.missed, Ordering::Relaxed);

        if let Some(thr) = cfg.break_threshold_ns {
            if lat > thr && !common.break_hit.swap(true, Ordering::Relaxed) {
                common.break_thread.store(index, Ordering::Relaxed);
                common.break_value.store(lat, Ordering::Relaxed);
                common.stop.set();
            }
        }

        if !cfg.relative {
            next += interval;
            if cfg.skip_missed {
                // cyclictest's skip-ahead, but the periods it skips are counted.
                while now > next {
                    next += interval;
                    st.skipped += 1;
                    st.missed += 1;
                    st.tl_cur.missed += 1;
                }
                shared.missed.store(st.missed, Ordering::Relaxed);
            }
        }
        if st.cycles >= max_cycles {
            break;
        }
        if let Some(e) = end {
            // Stop once the next intended wake-up lies beyond the duration: exactly duration/interval periods.
            if next > e {
                break;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::rt::SchedPolicy;
    use rtgauge_model::Nanos;

    /// A stall's catch-up burst finds the main thread's ring full: the burst still reaches it as one
    /// stall (its first window to its last wake-up, its worst latency); later stalls wait beside it, and
    /// one arriving when LATE_WAITING already wait is merged into the newest: none is lost.
    #[test]
    fn late_samples_of_one_stall_are_merged_when_the_ring_is_full_and_later_stalls_wait() {
        let mut st = ThreadState::prepare(&plan(1, 1000, 1).config, 1);
        let room = st.late_pending.capacity();
        assert!(room >= LATE_WAITING);
        let (mut tx, mut rx) = rtrb::RingBuffer::<Spike>::new(2);
        // A 10 ms stall of a 1 ms timer: ten wake-ups at its end, each 1 ms later expected.
        let at = |k: u64, end: u64| Spike {
            thread: 0,
            cycle: k,
            latency_ns: end - k * 1_000_000,
            monotonic_ns: end,
            cpu: Some(1),
            window_ns: 0,
        };
        // As the measuring loop does: the waiting sample offered first, then the new one.
        let cycle = |tx: &mut rtrb::Producer<Spike>, st: &mut ThreadState, s: Spike| {
            send_waiting(tx, st);
            hand_late(tx, st, s);
        };
        for k in 0..10 {
            cycle(&mut tx, &mut st, at(k, 10_000_000 + k * 1_000));
        }
        assert_eq!((st.late_merged, st.late_coalesced), (7, 0));
        assert_eq!(st.late_pending.len(), 1);
        let waiting = st.late_pending[0];
        assert_eq!(
            waiting.monotonic_ns, 10_009_000,
            "stretched to the burst's last wake-up"
        );
        assert_eq!(
            waiting.window_start_ns(),
            2_000_000,
            "from its own window's start"
        );
        assert_eq!(waiting.latency_ns, 8_002_000, "the worst sample merged");
        // More stalls, 60 ms apart, while the ring is still full: they wait beside it, in order, until
        // LATE_WAITING do; the one after that joins the newest waiting one.
        for k in 1..=LATE_WAITING as u64 {
            cycle(&mut tx, &mut st, at(60 * k, 60_000_000 * k + 500_000));
        }
        assert_eq!(st.late_pending.len(), LATE_WAITING);
        assert_eq!(st.late_pending.capacity(), room, "never grown");
        assert_eq!((st.late_merged, st.late_coalesced), (7, 1));
        let newest = st.late_pending[LATE_WAITING - 1];
        let last = LATE_WAITING as u64;
        assert_eq!(
            (
                newest.window_start_ns(),
                newest.monotonic_ns,
                newest.latency_ns
            ),
            (
                60_000_000 * (last - 1),
                60_000_000 * last + 500_000,
                500_000
            ),
            "both stalls' window, the worst latency of the two"
        );
        // Room for two again: the oldest waiting go first, in order (the burst from cycle 2, then the
        // stall at 60).
        assert_eq!(rx.pop().map(|s| s.cycle), Ok(0));
        assert_eq!(rx.pop().map(|s| s.cycle), Ok(1));
        send_waiting(&mut tx, &mut st);
        assert_eq!(st.late_pending.len(), LATE_WAITING - 2);
        assert_eq!(rx.pop().map(|s| s.cycle), Ok(2));
        assert_eq!(rx.pop().map(|s| s.cycle), Ok(60));
        assert!(rx.pop().is_err());
    }

    fn plan(threads: u32, interval_us: u64, loops: u64) -> CyclicPlan {
        CyclicPlan {
            config: CyclicConfig {
                threads,
                interval_ns: Nanos::from_us(interval_us).as_ns(),
                distance_ns: 0,
                policy: SchedPolicy::Other,
                priority: 0,
                priospread: false,
                cpus: vec![None; threads as usize],
                duration: None,
                loops: Some(loops),
                relative: false,
                skip_missed: false,
                hist_buckets: Some(50),
                unit_ns: 1000,
                spike_threshold_ns: None,
                break_threshold_ns: None,
                timeline_interval_ns: 10_000_000,
            },
            clock: ClockId::Monotonic,
            mlockall: false,
            dma_latency_us: None,
            main_cpus: None,
            spike_nodes: 16,
            late_floor_ns: None,
            nodes: vec![None; threads as usize],
            tick: Duration::from_millis(20),
        }
    }

    #[test]
    fn loops_bound_cycles_and_counts_add_up() {
        let p = plan(2, 500, 200);
        let mut ticks = 0;
        let r = run(
            &p,
            &StopFlag::new(),
            &mut |_: Duration, _: &[LiveThread]| ticks += 1,
        )
        .unwrap();
        assert_eq!(r.threads.len(), 2);
        for t in &r.threads {
            assert_eq!(t.cycles, 200);
            assert_eq!(t.latency.count, 200);
            let l = t.linear.as_ref().unwrap();
            assert_eq!(l.buckets.iter().sum::<u64>() + l.overflows, 200);
            let tl: u64 = t.timeline.iter().map(|e| e.count).sum();
            assert_eq!(tl, 200, "timeline must account for every sample");
            assert!(t.latency.min_ns <= t.latency.max_ns);
        }
        assert_eq!(r.stop_reason, StopReason::Loops);
        assert!(ticks >= 1);
    }

    #[test]
    fn duration_gives_duration_over_interval_cycles() {
        let mut p = plan(1, 1000, 0);
        p.config.loops = None;
        p.config.duration = Some(rtgauge_model::Nanos(200_000_000));
        let r = run(
            &p,
            &StopFlag::new(),
            &mut |_: Duration, _: &[LiveThread]| {},
        )
        .unwrap();
        assert_eq!(r.threads[0].cycles, 200);
        assert_eq!(r.stop_reason, StopReason::Duration);
    }

    #[test]
    fn stop_flag_ends_the_run_early() {
        let mut p = plan(1, 1000, 0);
        p.config.loops = None;
        p.config.duration = Some(rtgauge_model::Nanos(60_000_000_000));
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let r = run(&p, &stop, &mut move |e: Duration, _: &[LiveThread]| {
            if e > Duration::from_millis(100) {
                s2.set()
            }
        })
        .unwrap();
        assert!(r.threads[0].cycles > 50 && r.threads[0].cycles < 5_000);
        assert_eq!(r.stop_reason, StopReason::Signal);
    }

    #[test]
    fn break_threshold_stops_and_names_the_thread() {
        let mut p = plan(1, 200, 1_000_000);
        p.config.break_threshold_ns = Some(1); // any real wake-up is later than 1 ns
        let r = run(
            &p,
            &StopFlag::new(),
            &mut |_: Duration, _: &[LiveThread]| {},
        )
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::Break);
        let (t, v) = r.break_hit.unwrap();
        assert_eq!(t, 0);
        assert!(v > 1);
        assert!(r.threads[0].cycles < 1_000_000);
    }

    struct Checkpoints(Vec<(u64, u64)>);
    impl ProbeObserver<CyclicResult, [LiveThread]> for Checkpoints {
        fn tick(
            &mut self,
            _: Duration,
            live: &[LiveThread],
            checkpoint: &mut dyn FnMut() -> CyclicResult,
        ) {
            let r = checkpoint();
            let t = &r.threads[0];
            let tl: u64 = t.timeline.iter().map(|e| e.count).sum();
            assert!(t.latency.count <= live[0].cycles && tl <= live[0].cycles);
            self.0.push((t.latency.count, tl));
        }
    }

    #[test]
    fn checkpoints_hold_every_completed_interval() {
        let mut p = plan(1, 500, 2_000);
        p.config.timeline_interval_ns = 100_000_000;
        let mut ck = Checkpoints(Vec::new());
        let r = run(&p, &StopFlag::new(), &mut ck).unwrap();
        assert_eq!(r.threads[0].latency.count, 2_000);
        assert!(
            ck.0.windows(2).all(|w| w[0].0 <= w[1].0),
            "checkpoints only grow: {:?}",
            ck.0
        );
        let last = ck.0.last().unwrap();
        assert!(
            last.0 >= 1_600,
            "a checkpoint near the end holds most of the 1 s run: {:?}",
            ck.0
        );
        // While measuring, the histogram of a checkpoint holds the samples of the intervals it has (the
        // sample that opens an interval is counted with the previous one).
        let during = &ck.0[..ck.0.len() - 1];
        assert!(
            during.iter().all(|(h, tl)| h.abs_diff(*tl) <= 1),
            "{:?}",
            ck.0
        );
    }

    #[test]
    fn zero_threads_is_a_config_error() {
        let mut p = plan(1, 1000, 1);
        p.config.threads = 0;
        assert!(matches!(
            run(
                &p,
                &StopFlag::new(),
                &mut |_: Duration, _: &[LiveThread]| {}
            ),
            Err(ProbeError::Config(_))
        ));
    }
}
