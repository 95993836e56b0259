//! The "why" of a latency probe, driven from the probe's main thread (on its housekeeping CPU): the
//! always-on interval counters of the measured CPUs, and with `--trace` a kernel trace of those CPUs whose
//! spans break each spike's window down (see `rtgauge_probe::trace` for the mechanism and its costs).

use rtgauge_host::counters::Sampler;
use rtgauge_host::HostRoot;
use rtgauge_model::attribution::{
    breakdown, BreakTrace, SpikeBreakdown, TraceInfo, Why, BREAK_TRACE_NS,
};
use rtgauge_model::cyclic::CyclicResult;
use rtgauge_model::oslat::OslatResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::observe::Observer;
use rtgauge_probe::trace::{kernel_tracers, TraceData, TraceSession, TRACEFS};
use std::time::Duration;

/// Spikes broken down per probe (worst first).
const MAX_BREAKDOWNS: usize = 100;

/// Per-CPU ring buffer of the trace instance, KiB: ~30 s of a 1 kHz probe's CPU between two drains is far
/// more than the main thread's tick needs; the buffer lives in kernel memory only for the run.
const BUFFER_KB: u32 = 8192;

/// What a latency probe collects besides its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WhyOpts {
    /// Interval counters (on unless `--no-counters`, which exists for the overhead bench).
    pub counters: bool,
    /// `--trace` (or `--break-above`).
    pub trace: bool,
    /// Spikes above this are broken down (default p99.99).
    pub threshold_ns: Option<u64>,
}

/// Collects the counters and the trace while a probe runs.
pub struct WhyRun {
    sampler: Option<Sampler>,
    interval_ns: u64,
    next_ns: u64,
    trace: Option<TraceSession>,
    missing: Option<String>,
    excluded: bool,
    last_max: u64,
    /// CLOCK_MONOTONIC time of the first counter sample (the counter intervals' origin).
    origin_ns: u64,
}

impl WhyRun {
    /// Start sampling `cpus` every `interval_ns` (the timeline's interval), and tracing them when asked.
    pub fn start(cpus: &CpuSet, interval_ns: u64, counters: bool, trace: bool) -> WhyRun {
        let sampler = counters.then(|| Sampler::start(&HostRoot::live(), cpus));
        let mut missing = None;
        let session = if trace {
            let list: Vec<u32> = cpus.iter().collect();
            match TraceSession::start(&list, BUFFER_KB) {
                Ok(s) => Some(s),
                Err(e) => {
                    missing = Some(format!("--trace: {e}; counters only"));
                    None
                }
            }
        } else {
            None
        };
        if let Some(m) = &missing {
            eprintln!("rtgauge: warning: {m}");
        }
        WhyRun {
            sampler,
            interval_ns: interval_ns.max(1_000_000),
            next_ns: interval_ns.max(1_000_000),
            trace: session,
            missing,
            excluded: false,
            last_max: 0,
            origin_ns: rtgauge_probe::clock::now_ns(rtgauge_probe::clock::Clock::Monotonic),
        }
    }

    /// One main-thread tick: close finished counter intervals, drain the trace, and pin the trace around a
    /// new maximum so that it outlives the rolling window. `tids` are the probe's threads (never charged).
    pub fn tick(&mut self, elapsed: Duration, tids: &[i32], max_ns: u64) {
        let e = elapsed.as_nanos() as u64;
        if e >= self.next_ns {
            let start = e / self.interval_ns * self.interval_ns;
            if let Some(s) = self.sampler.as_mut() {
                s.sample(start);
            }
            self.next_ns = start + self.interval_ns;
        }
        if let Some(t) = self.trace.as_mut() {
            if !self.excluded && tids.iter().any(|&t| t > 0) {
                let v: Vec<i64> = tids.iter().map(|&t| i64::from(t)).collect();
                t.exclude(&v);
                self.excluded = true;
            }
            if max_ns > self.last_max {
                self.last_max = max_ns;
                let now = rtgauge_probe::clock::now_ns(rtgauge_probe::clock::Clock::Monotonic);
                t.pin(now.saturating_sub(2_000_000_000 + 2 * max_ns), now);
            }
            t.drain();
        }
    }

    /// Each breakdown's steal: the steal delta of its CPU's counter interval (what the hypervisor admits to
    /// having taken around the spike; tick resolution).
    fn steal(why: &mut Why, origin_ns: u64, interval_ns: u64) {
        let steals: Vec<u64> = why
            .spikes
            .iter()
            .map(|b| {
                let k = b.start_mono_ns.saturating_sub(origin_ns) / interval_ns * interval_ns;
                why.interval(b.cpu, k).map_or(0, |c| c.steal_ns)
            })
            .collect();
        for (b, s) in why.spikes.iter_mut().zip(steals) {
            b.steal_ns = s;
        }
    }

    fn finish(mut self, end_ns: u64) -> (Why, Option<TraceData>) {
        let interval = self.interval_ns;
        if let Some(s) = self.sampler.as_mut() {
            s.sample(end_ns / interval * interval);
        }
        let data = self.trace.take().map(TraceSession::finish);
        let mut missing = self.missing;
        if self.sampler.as_ref().is_some_and(|s| !s.available()) {
            missing = Some("no /proc counters for the measured CPUs".into());
        }
        let why = Why {
            counters: self
                .sampler
                .as_mut()
                .map(|s| std::mem::take(&mut s.intervals))
                .unwrap_or_default(),
            trace: data.as_ref().map(|d| TraceInfo {
                mechanism: mechanism(),
                events: d.events,
                lost: d.lost,
                not_retained: 0,
            }),
            spikes: Vec::new(),
            break_sample: None,
            missing,
        };
        (why, data)
    }

    /// Attach counters and breakdowns to a cyclic result: the spikes above `threshold_ns` (default p99.99),
    /// worst first. The probe's start on CLOCK_MONOTONIC is the first spike's reference.
    pub fn finish_cyclic(self, r: &mut CyclicResult, threshold_ns: Option<u64>) {
        let (origin, interval) = (self.origin_ns, self.interval_ns);
        let (mut why, data) = self.finish(r.elapsed_ns);
        if let Some(d) = data {
            let thr = threshold_ns.unwrap_or_else(|| {
                r.threads
                    .iter()
                    .filter_map(|t| t.latency.percentile(99.99))
                    .min()
                    .unwrap_or(0)
            });
            let mut spikes: Vec<_> = r.spikes.iter().filter(|s| s.latency_ns >= thr).collect();
            spikes.sort_by_key(|s| std::cmp::Reverse(s.latency_ns));
            let mut not_retained = 0;
            for s in spikes {
                let Some(cpu) = r.config.cpus.get(s.thread as usize).copied().flatten() else {
                    continue;
                };
                let start = s.monotonic_ns.saturating_sub(s.latency_ns);
                match attribute(&d, cpu, s.thread, start, s.monotonic_ns) {
                    Some(b) if why.spikes.len() < MAX_BREAKDOWNS => why.spikes.push(b),
                    Some(_) => {}
                    None => not_retained += 1,
                }
            }
            if let Some(t) = why.trace.as_mut() {
                t.not_retained = not_retained;
            }
            why.break_sample = break_trace(r, &d);
        }
        Self::steal(&mut why, origin, interval);
        r.why = Some(why);
    }

    /// Attach counters and breakdowns of the worst gaps to an oslat result.
    pub fn finish_oslat(self, r: &mut OslatResult) {
        let (origin, interval) = (self.origin_ns, self.interval_ns);
        let (mut why, data) = self.finish(r.elapsed_ns);
        if let Some(d) = data {
            let mut gaps: Vec<(u32, u32, u64, u64)> = r
                .threads
                .iter()
                .enumerate()
                .flat_map(|(i, t)| {
                    let cpu = r.config.cpus.get(i).copied().unwrap_or(0);
                    t.worst
                        .iter()
                        .map(move |g| (cpu, i as u32, g.monotonic_ns, g.gap_ns))
                })
                .collect();
            gaps.sort_by_key(|g| std::cmp::Reverse(g.3));
            let mut not_retained = 0;
            // The busy loop's own thread runs through every gap: what it did not do is not a cause.
            let own: Vec<String> = r.threads.iter().map(|t| format!("/{} ", t.tid)).collect();
            let mut d = d;
            for spans in d.spans.values_mut() {
                spans.retain(|s| !own.iter().any(|o| s.name.contains(o.as_str())));
            }
            for (cpu, thread, start, len) in gaps.into_iter().take(MAX_BREAKDOWNS) {
                match attribute(&d, cpu, thread, start, start + len) {
                    Some(b) => why.spikes.push(b),
                    None => not_retained += 1,
                }
            }
            if let Some(t) = why.trace.as_mut() {
                t.not_retained = not_retained;
            }
        }
        Self::steal(&mut why, origin, interval);
        r.why = Some(why);
    }
}

/// Wraps an oslat probe's phases: the counters (and the trace) start with the measurement, after the preheat,
/// so their intervals line up with the timeline's.
pub struct OslatWhy<'a> {
    pub inner: &'a mut dyn Observer<OslatResult>,
    cpus: CpuSet,
    interval_ns: u64,
    trace: bool,
    why: Option<WhyRun>,
}

impl<'a> OslatWhy<'a> {
    pub fn new(
        inner: &'a mut dyn Observer<OslatResult>,
        r: &rtgauge_probe::oslat::OslatPlan,
        trace: bool,
    ) -> Self {
        OslatWhy {
            inner,
            cpus: CpuSet::new(r.config.cpus.iter().copied()),
            interval_ns: r.config.timeline_interval_ns,
            trace,
            why: None,
        }
    }

    /// Attach what was collected to the result.
    pub fn finish(self, r: &mut OslatResult) {
        if let Some(w) = self.why {
            w.finish_oslat(r);
        }
    }
}

impl Observer<OslatResult> for OslatWhy<'_> {
    fn preheat(&mut self) {
        self.inner.preheat();
    }
    fn start(&mut self, bias_ns: Option<u64>) {
        self.why = Some(WhyRun::start(
            &self.cpus,
            self.interval_ns,
            true,
            self.trace,
        ));
        self.inner.start(bias_ns);
    }
    fn tick(&mut self, elapsed: Duration, live: &(), checkpoint: &mut dyn FnMut() -> OslatResult) {
        if let Some(w) = self.why.as_mut() {
            // The busy loops' own threads are left out at the end (their tids are in the result).
            w.tick(elapsed, &[], 0);
        }
        self.inner.tick(elapsed, live, checkpoint);
    }
}

/// "tracefs events", naming the richer tracers the kernel has (used where present is future work).
fn mechanism() -> String {
    let (timerlat, osnoise) = kernel_tracers(std::path::Path::new(TRACEFS));
    let mut m = "tracefs events (instance, trace_clock mono, per-CPU trace_pipe)".to_string();
    if timerlat || osnoise {
        m.push_str("; kernel also offers");
        if timerlat {
            m.push_str(" timerlat");
        }
        if osnoise {
            m.push_str(" osnoise");
        }
    }
    m
}

/// The `-b`/`--break-above` sample (the break thread's spike of the break value) and its CPU's trace before it.
fn break_trace(r: &CyclicResult, d: &TraceData) -> Option<BreakTrace> {
    let (thread, value) = r.break_hit?;
    let s = r
        .spikes
        .iter()
        .find(|s| s.thread == thread && s.latency_ns == value)?;
    let cpu = r.config.cpus.get(thread as usize).copied().flatten()?;
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

/// One window's breakdown, or `None` when the trace of that CPU does not reach back to it.
fn attribute(d: &TraceData, cpu: u32, thread: u32, start: u64, end: u64) -> Option<SpikeBreakdown> {
    let spans = d.spans.get(&cpu)?;
    if !d.covers(cpu, start, end) {
        return None;
    }
    Some(SpikeBreakdown {
        cpu,
        thread,
        start_mono_ns: start,
        window_ns: end.saturating_sub(start),
        causes: breakdown(start, end, spans),
        steal_ns: 0,
    })
}
