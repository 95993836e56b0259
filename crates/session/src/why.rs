//! The "why" of a latency probe, a [`SessionObserver`] driven from the probe's main thread (on its
//! housekeeping CPU): the always-on interval counters of the observed CPUs, and with `--trace` a kernel
//! trace of those CPUs whose spans break each spike episode's window down (see `rtgauge_probe::trace` for
//! the mechanism and its costs).
//!
//! Episodes: the timer probe hands its late samples over as they happen; [`EpisodeTracker`] groups those of
//! one stall into one episode and keeps the worst ones, whose trace is pinned so that a long run can still
//! explain them at the end, when the threshold is known (the profile's gate or `--spike`, else
//! [`rule_threshold`] on the run's own distribution).

use rtgauge_analysis::episodes::{
    breakdown, rule_threshold, Candidate, EpisodeTracker, Late, Retain, RULE,
};
use rtgauge_host::counters::Sampler;
use rtgauge_host::HostRoot;
use rtgauge_model::attribution::{Episode, EpisodeThreshold, TraceInfo, Why, MAX_EPISODES};
use rtgauge_model::latency::LatencyStats;
use rtgauge_model::latency::Spike;
use rtgauge_model::run::ProbeResult;
use rtgauge_model::CpuSet;
use rtgauge_probe::smi::MsrDriver;
use rtgauge_probe::trace::{kernel_tracers, TraceData, TraceSession, TRACEFS};
use std::time::Duration;

use crate::{SessionObserver, Tick};
use rtgauge_model::units::us;

/// Per-CPU ring buffer of the trace instance, KiB: ~30 s of a 1 kHz probe's CPU between two drains is far
/// more than the main thread's tick needs; the buffer lives in kernel memory only for the run.
const BUFFER_KB: u32 = 8192;

/// The trace kept for a probe whose episodes are found only at its end (oslat's gaps): the last minute.
const KEEP_NS_AT_END: u64 = 60_000_000_000;

/// An episode whose last late sample is older than this is closed (and pinned when among the worst): far
/// longer than a hand-over takes (a main-thread tick, 100 ms), far shorter than the trace's rolling window.
const CLOSE_AFTER_NS: u64 = 1_000_000_000;

/// What a latency probe collects besides its samples.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WhyOpts {
    /// Interval counters (on unless `--no-counters`, which exists for the overhead bench).
    pub counters: bool,
    /// `--trace` (or `--break-above`).
    pub trace: bool,
    /// Episodes at or above this are explained (`--spike`, a profile's gate); `None`: the rule.
    pub threshold: Option<EpisodeThreshold>,
    /// `--smi`: the SMI counts read every interval (each read interrupts the measured CPU), not only at
    /// the start and the end.
    pub smi_intervals: bool,
}

/// Collects the counters and the trace while a probe runs.
pub struct WhyRun {
    sampler: Option<Sampler>,
    interval_ns: u64,
    next_ns: u64,
    trace: Option<TraceSession>,
    missing: Option<String>,
    excluded: bool,
    episodes: EpisodeTracker,
    retain: Vec<Retain>,
    /// CLOCK_MONOTONIC time of the first counter sample (the counter intervals' origin).
    origin_ns: u64,
    /// The msr driver the SMI counts read through, held (and unloaded if this run loaded it) after the
    /// sampler's files are closed: the last field.
    _msr: Option<MsrDriver>,
}

impl WhyRun {
    /// Start sampling `cpus` every `interval_ns` (the timeline's interval), and tracing them when asked.
    /// `cpus` are the CPUs the probe's threads may run on: where they are pinned, or where an unpinned
    /// thread is allowed to go.
    pub fn start(cpus: &CpuSet, interval_ns: u64, opts: &WhyOpts, live_episodes: bool) -> WhyRun {
        let (counters, trace) = (opts.counters, opts.trace);
        let root = HostRoot::live();
        let msr = counters.then(MsrDriver::ensure);
        let sampler = counters.then(|| {
            let mut s = Sampler::start(&root, cpus, opts.smi_intervals);
            // Its buckets on the timeline's grid (see `Sampler::span_ns`).
            s.span_ns = interval_ns.max(1_000_000);
            if let Some(note) = msr.as_ref().and_then(|m| m.note.as_ref()) {
                s.smi_note = format!("{} ({note})", s.smi_note);
            }
            s
        });
        let mut missing = None;
        let session = if trace {
            let list: Vec<u32> = cpus.iter().collect();
            match TraceSession::start(&list, BUFFER_KB) {
                Ok(mut s) => {
                    if !live_episodes {
                        s.keep_ns = KEEP_NS_AT_END;
                    }
                    Some(s)
                }
                Err(e) => {
                    missing = Some(format!("--trace: {e}; counters only"));
                    None
                }
            }
        } else {
            None
        };
        WhyRun {
            sampler,
            interval_ns: interval_ns.max(1_000_000),
            next_ns: interval_ns.max(1_000_000),
            trace: session,
            missing,
            excluded: false,
            episodes: EpisodeTracker::default(),
            retain: Vec::new(),
            origin_ns: rtgauge_probe::time::now_ns(rtgauge_probe::time::ClockId::Monotonic),
            _msr: msr,
        }
    }

    /// One main-thread tick: close finished counter intervals and drain the trace. `threads` are the
    /// probe's threads, (tid, CPU it is pinned to): never charged in the trace, and their run-queue wait
    /// counted per CPU.
    pub fn tick(&mut self, elapsed: Duration, threads: &[(i32, Option<u32>)]) {
        if !self.excluded && threads.iter().any(|&(t, _)| t > 0) {
            self.excluded = true;
            if let Some(t) = self.trace.as_mut() {
                let v: Vec<i64> = threads.iter().map(|&(t, _)| i64::from(t)).collect();
                t.exclude(&v);
            }
            if let Some(s) = self.sampler.as_mut() {
                let pinned: Vec<(u32, i32)> = threads
                    .iter()
                    .filter_map(|&(t, cpu)| Some((cpu?, t)))
                    .collect();
                s.set_threads(&pinned);
            }
        }
        let e = elapsed.as_nanos() as u64;
        if e >= self.next_ns {
            let start = e / self.interval_ns * self.interval_ns;
            if let Some(s) = self.sampler.as_mut() {
                s.sample(start);
            }
            self.next_ns = start + self.interval_ns;
        }
        if self.trace.is_some() {
            // Episodes over for a second are closed, so that the worst are pinned before the rolling window
            // lets their trace go; then the trace is read.
            let now = rtgauge_probe::time::now_ns(rtgauge_probe::time::ClockId::Monotonic);
            self.episodes
                .close_ended(now.saturating_sub(CLOSE_AFTER_NS), &mut self.retain);
            self.apply_retain();
        }
        if let Some(t) = self.trace.as_mut() {
            t.drain();
        }
    }

    /// The timer probe's late samples since the last call (each says the CPU it woke on): grouped into
    /// episodes, and the trace of the worst ones pinned.
    pub fn late(&mut self, late: &[Spike]) {
        for s in late {
            let cpu = s.cpu.unwrap_or(0);
            self.episodes.feed(Late::of(s, cpu), &mut self.retain);
        }
        self.apply_retain();
    }

    fn apply_retain(&mut self) {
        for r in self.retain.drain(..) {
            let Some(t) = self.trace.as_mut() else {
                continue;
            };
            match r {
                // A little trace on both sides of the window: what was already running when it began.
                Retain::Keep { id, from, to } => t.pin(id, from.saturating_sub(1_000_000), to),
                Retain::Release(id) => t.unpin(id),
            }
        }
    }

    /// End the collection at `end_ns` (the probe's elapsed time): the counters' last interval closed, the
    /// trace read to its end, the episodes the probe handed over closed; for the kind's finisher to explain
    /// them and attach the result ([`Ended::why`]).
    pub fn end(mut self, end_ns: u64) -> Ended {
        self.episodes.finish(&mut self.retain);
        self.apply_retain();
        let interval = self.interval_ns;
        if let Some(s) = self.sampler.as_mut() {
            s.sample(end_ns / interval * interval);
        }
        let data = self.trace.take().map(TraceSession::finish);
        let mut missing = self.missing;
        if self.sampler.as_ref().is_some_and(|s| !s.available()) {
            missing = Some("the observed CPUs have no /proc counters".into());
        }
        let why = Why {
            counters: self
                .sampler
                .as_mut()
                .map(|s| std::mem::take(&mut s.intervals))
                .unwrap_or_default(),
            trace: data.as_ref().map(|d| TraceInfo {
                mechanism: mechanism(d.binary, d.idle_switches_filtered),
                events: d.events,
                lost: d.lost,
                not_retained: 0,
                late_dropped: 0,
                late_coalesced: 0,
                collector_ns: d.collector_ns,
                symbols_ns: d.symbols_ns,
                traced_ns: d.traced_ns,
                cpus: d.spans.len() as u64,
            }),
            missing,
            smi: self.sampler.as_ref().map(|s| s.smi_note.clone()),
            smis: self
                .sampler
                .as_ref()
                .map(Sampler::smi_totals)
                .unwrap_or_default(),
            ..Why::default()
        };
        Ended {
            why,
            trace: data,
            episodes: self.episodes,
            origin_ns: self.origin_ns,
            interval_ns: self.interval_ns,
        }
    }
}

/// What a probe's counters and trace collected, at its end: what its kind's finisher explains and attaches
/// (its module in [`crate::kind`]).
pub struct Ended {
    /// The counters and what the trace was, without episodes yet.
    pub why: Why,
    /// The trace, when one was taken.
    pub trace: Option<TraceData>,
    /// The episodes of the late samples the probe handed over while it ran (the timer probe's).
    pub episodes: EpisodeTracker,
    origin_ns: u64,
    interval_ns: u64,
}

impl Ended {
    /// The "why" to attach: each episode given the steal and SMIs of its CPU's counter interval (what the
    /// hypervisor admits to having taken around it, tick resolution; what firmware took).
    pub fn why(mut self) -> Why {
        let (origin_ns, interval_ns) = (self.origin_ns, self.interval_ns);
        let why = &mut self.why;
        let found: Vec<(u64, Option<u64>)> = why
            .episodes
            .iter()
            .map(|b| {
                let k = b.start_mono_ns.saturating_sub(origin_ns) / interval_ns * interval_ns;
                why.interval(b.cpu, k)
                    .map_or((0, None), |c| (c.steal_ns, c.smis))
            })
            .collect();
        for (b, (steal, smis)) in why.episodes.iter_mut().zip(found) {
            b.steal_ns = steal;
            b.smis = smis;
        }
        self.why
    }
}

/// Break the episodes down (at most [`MAX_EPISODES`], worst first) and record the threshold and the total.
pub fn explain(
    why: &mut Why,
    d: &TraceData,
    (candidates, total): (Vec<Candidate>, u64),
    thr: EpisodeThreshold,
) {
    let mut not_retained = 0;
    for c in candidates.iter().take(MAX_EPISODES) {
        match attribute(d, c.cpu, c.thread, c.start_ns, c.end_ns) {
            Some(mut e) => {
                e.samples = c.samples;
                e.worst_ns = c.worst_ns;
                why.episodes.push(e);
            }
            None => not_retained += 1,
        }
    }
    if let Some(t) = why.trace.as_mut() {
        t.not_retained = not_retained;
    }
    why.episodes_total = total;
    why.threshold = Some(thr);
}

/// The rule's threshold over the merged distributions (at least `floor_ns`), with its words.
pub fn rule_of<'a>(
    stats: impl Iterator<Item = &'a LatencyStats>,
    floor_ns: u64,
) -> EpisodeThreshold {
    let mut merged = rtgauge_model::latency::new_histogram();
    for s in stats {
        if let Ok(h) = s.hdr.decode() {
            let _ = merged.add(&h);
        }
    }
    let (p50, p90) = (merged.value_at_quantile(0.5), merged.value_at_quantile(0.9));
    let ns = rule_threshold(p50, p90).max(floor_ns);
    let floor = if floor_ns > 0 && ns == floor_ns {
        format!(", at least {:.0} µs", us(floor_ns))
    } else {
        String::new()
    };
    EpisodeThreshold {
        ns,
        rule: format!(
            "{RULE} of this run: p50 {:.1} µs, p90 {:.1} µs{floor}",
            us(p50),
            us(p90)
        ),
    }
}

/// Samples at or above `ns` in a distribution (HDR precision).
pub fn count_at_or_above(s: &LatencyStats, ns: u64) -> u64 {
    if s.max_ns < ns {
        return 0;
    }
    s.hdr.decode().map_or(1, |h| {
        h.iter_recorded()
            .filter(|v| v.value_iterated_to() >= ns)
            .map(|v| v.count_at_value())
            .sum()
    })
}

/// The CPUs a probe's threads may run on: their pinned CPUs, and where any is unpinned, every CPU the
/// process may use (its affinity), so that an unpinned thread is observed wherever it runs.
pub fn observed_cpus(pinned: &[Option<u32>]) -> CpuSet {
    let set = CpuSet::new(pinned.iter().flatten().copied());
    if pinned.iter().any(Option::is_none) {
        // Called before the main thread's own affinity is set: this is what the threads inherit.
        let allowed = rtgauge_probe::rt::current_affinity();
        return CpuSet::new(set.iter().chain(allowed.iter()));
    }
    set
}

/// What the counters and the trace of a probe watch, and how what they collected joins its result.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The CPUs its threads may run on (see [`observed_cpus`]).
    pub cpus: CpuSet,
    /// The timeline's interval: one counter interval each.
    pub interval_ns: u64,
    /// Attaches the collected counters and episodes to the probe's result: its kind's own finisher (in its
    /// module of [`crate::kind`]), from [`WhyRun::end`].
    pub finish: Finish,
    /// The probe hands its late samples over as they happen ([`WhyRun::late`]: the timer probe), so the
    /// worst episodes are pinned while the run goes and the trace keeps a short window
    /// ([`rtgauge_probe::trace::KEEP_NS`]); the others' episodes are found at the end, within a minute's.
    pub live_episodes: bool,
}

/// How a latency kind attaches what was collected while it ran to its result, explaining the episodes at
/// or above the threshold: [`finish_as`] of the kind's result type.
pub type Finish = fn(WhyRun, &mut ProbeResult, Option<&EpisodeThreshold>);

/// A result type whose kind has a "why": how what the counters and the trace collected joins it (in the
/// kind's module of [`crate::kind`]).
pub trait Explained: rtgauge_model::kind::Kind {
    /// Attach what `w` collected to `r`, explaining the episodes at or above `threshold` (else the
    /// kind's rule).
    fn explain(w: WhyRun, r: &mut Self, threshold: Option<&EpisodeThreshold>);
}

/// The [`Finish`] of kind `R`: its [`Explained::explain`], on a result of that kind.
pub fn finish_as<R: Explained>(
    w: WhyRun,
    r: &mut ProbeResult,
    threshold: Option<&EpisodeThreshold>,
) {
    if let Some(r) = r.downcast_mut::<R>() {
        R::explain(w, r, threshold);
    }
}

/// The interval counters and the trace of a latency probe, as an observer: started with the measurement
/// (after oslat's preheat, so their intervals line up with the timeline's), attached to its result at the
/// end.
pub struct WhyObserver {
    opts: WhyOpts,
    scope: Scope,
    run: Option<WhyRun>,
    threads: Vec<(i32, Option<u32>)>,
}

impl WhyObserver {
    /// Watch `scope` as `opts` asks.
    pub fn new(opts: WhyOpts, scope: Scope) -> WhyObserver {
        WhyObserver {
            opts,
            scope,
            run: None,
            threads: Vec::new(),
        }
    }
}

impl SessionObserver for WhyObserver {
    fn start(&mut self, _bias_ns: Option<u64>) {
        self.run = Some(WhyRun::start(
            &self.scope.cpus,
            self.scope.interval_ns,
            &self.opts,
            self.scope.live_episodes,
        ));
    }

    fn tick(&mut self, tick: &Tick<'_>, _checkpoint: Option<&mut dyn FnMut() -> ProbeResult>) {
        if let Some(w) = self.run.as_mut() {
            // The timer probe's threads are never charged; the busy loops' are left out at the end (their
            // tids are in the result).
            self.threads.clear();
            self.threads
                .extend(tick.threads.iter().zip(tick.cpus).map(|(t, c)| (t.tid, *c)));
            w.tick(tick.elapsed, &self.threads);
        }
    }

    fn late(&mut self, late: &[Spike]) {
        if let Some(w) = self.run.as_mut() {
            w.late(late);
        }
    }

    fn finish(&mut self, result: &mut ProbeResult) {
        let Some(w) = self.run.take() else {
            return;
        };
        (self.scope.finish)(w, result, self.opts.threshold.as_ref());
    }
}

/// "tracefs events", naming the richer tracers the kernel has (used where present is future work).
fn mechanism(binary: bool, idle_filtered: bool) -> String {
    let (timerlat, osnoise) = kernel_tracers(std::path::Path::new(TRACEFS));
    let pipe = if binary {
        "trace_pipe_raw"
    } else {
        "trace_pipe"
    };
    let filtered = if idle_filtered {
        "; the probe's switches to and from idle dropped in the kernel"
    } else {
        ""
    };
    let mut m = format!("tracefs events (instance, trace_clock mono, per-CPU {pipe}{filtered})");
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

/// One window's breakdown, or `None` when the trace of that CPU does not reach back to it.
pub fn attribute(d: &TraceData, cpu: u32, thread: u32, start: u64, end: u64) -> Option<Episode> {
    let spans = d.spans.get(&cpu)?;
    if !d.covers(cpu, start, end) {
        return None;
    }
    Some(Episode {
        cpu,
        thread,
        start_mono_ns: start,
        window_ns: end.saturating_sub(start),
        samples: 1,
        worst_ns: end.saturating_sub(start),
        causes: breakdown(start, end, spans),
        steal_ns: 0,
        smis: None,
        gaps: rtgauge_analysis::vm_join::uncovered(start, end, spans),
        host: None,
    })
}
