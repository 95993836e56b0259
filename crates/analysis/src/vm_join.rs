//! The join of a guest's spike episodes with its host's record (`rtgauge vm join`): per guest episode, its
//! vCPU's host intervals laid over the episode's unattributed stretches (the guest's own trace explains the
//! rest), shifted onto the host clock; what the host explains becomes [`CauseKind::Host`] causes, the rest
//! stays unattributed. An episode shorter than the clock's uncertainty (2 × bound) is not joined: it says
//! so ([`HostVerdict::BoundTooWide`]).
//!
//! The clock between the two: each burst of exchanges keeps its one with the smallest round trip
//! (trace-cmd's ptp does the same); between bursts the offset is interpolated, so drift between the two
//! clocks is followed ([`to_host`]).
//!
//! Pure arithmetic on intervals; the data is `rtgauge_model::vm`, the tracing and the channel that gather
//! it are `rtgauge_vmhost`.

use crate::kind::KindData;
use rtgauge_model::attribution::{Cause, CauseKind, Episode, Span, Why};
use rtgauge_model::vm::{
    ClockSample, ClockSync, EpisodeHost, HostCause, HostInterval, HostJoin, HostKind, HostRecord,
    HostSegment, HostVerdict, OnHost, MAX_GAPS, MAX_SEGMENTS,
};

/// When one clock sample is all there is (no drift known), the drift assumed beyond it: 200 ppm, above
/// what a crystal or kvm-clock drifts.
pub const ASSUMED_DRIFT_PPM: f64 = 200.0;

/// Innermost wins where host intervals nest: an IRQ inside a culprit's time inside a VM exit.
pub fn host_layer(kind: HostKind) -> u8 {
    match kind {
        HostKind::Exit | HostKind::Asleep => 0,
        HostKind::Waiting | HostKind::Preempted | HostKind::WakerDelayed | HostKind::HelperHeld => {
            1
        }
        HostKind::Work => 2,
        HostKind::Softirq => 3,
        HostKind::Irq | HostKind::Vector => 4,
    }
}

/// The host kind of a host trace span.
pub fn host_kind_of_span(k: CauseKind) -> HostKind {
    match k {
        CauseKind::Irq => HostKind::Irq,
        CauseKind::Vector => HostKind::Vector,
        CauseKind::Softirq => HostKind::Softirq,
        CauseKind::Work => HostKind::Work,
        CauseKind::Thread => HostKind::Preempted,
        CauseKind::Unattributed | CauseKind::Host => HostKind::Waiting,
    }
}

/// A cause as a sentence names it: "vCPU 1 off its CPU: rtg-noise/4123 FIFO 50 ran on host CPU 1".
pub fn host_cause_name(kind: HostKind, name: &str, vcpu: u32, cpu: u32) -> String {
    match kind {
        HostKind::Preempted => format!("vCPU {vcpu} off its CPU: {name} ran on host CPU {cpu}"),
        HostKind::Waiting => format!("vCPU {vcpu} runnable, waiting for host CPU {cpu}"),
        HostKind::Irq => format!("IRQ {name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Softirq => format!("softirq {name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Vector => format!("{name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Work => format!("work {name} on host CPU {cpu} (vCPU {vcpu})"),
        HostKind::Exit => format!("VM exit {name} (vCPU {vcpu})"),
        HostKind::Asleep => format!(
            "vCPU {vcpu}'s thread asleep on host CPU {cpu} (guest halted, or blocked in the hypervisor)"
        ),
        HostKind::WakerDelayed => format!("vCPU {vcpu} asleep, {name} on host CPU {cpu}"),
        HostKind::HelperHeld => format!("vCPU {vcpu} asleep; {name} on host CPU {cpu}"),
    }
}

/// Time per (vCPU, kind, name, CPU) over the whole record, largest first: what the host did to the VM.
/// The vCPU threads' sleep is left out (mostly the guest idling: see [`HostRecord::asleep_ns`]).
pub fn host_totals(record: &HostRecord) -> Vec<HostCause> {
    let mut out: Vec<HostCause> = Vec::new();
    for i in record
        .intervals
        .iter()
        .filter(|i| i.kind != HostKind::Asleep)
    {
        let name = host_cause_name(i.kind, record.name(i), i.vcpu, i.cpu);
        let ns = i.end_ns.saturating_sub(i.start_ns);
        match out.iter_mut().find(|c| c.kind == i.kind && c.name == name) {
            Some(c) => {
                c.ns += ns;
                c.count += 1;
            }
            None => out.push(HostCause {
                kind: i.kind,
                name,
                ns,
                count: 1,
            }),
        }
    }
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    out
}

/// Guest→host drift over the samples, ppm (guest seconds per host second − 1), when there are two.
pub fn drift_ppm(clock: &ClockSync) -> Option<f64> {
    let (a, b) = (clock.samples.first()?, clock.samples.last()?);
    let dt = b.host_send_ns as f64 - a.host_send_ns as f64;
    (clock.samples.len() >= 2 && dt > 0.0)
        .then(|| (b.offset_ns() as f64 - a.offset_ns() as f64) / dt * 1e6)
}

/// The sample with the smallest bound.
pub fn best_sample(clock: &ClockSync) -> Option<&ClockSample> {
    clock.samples.iter().min_by_key(|s| s.bound_ns())
}

/// `guest_ns` on the host clock: the offset interpolated between the samples around it (their larger
/// bound), or beyond the first/last sample extrapolated with the drift and the bound widened by what the
/// drift could add over that distance ([`ASSUMED_DRIFT_PPM`] when a single sample gives none).
pub fn to_host(clock: &ClockSync, guest_ns: u64) -> Option<OnHost> {
    if clock.samples.is_empty() {
        return None;
    }
    let mut s: Vec<&ClockSample> = clock.samples.iter().collect();
    s.sort_by_key(|x| x.guest_ns);
    let at = s.partition_point(|x| x.guest_ns <= guest_ns);
    let (offset, bound) = if at > 0 && at < s.len() {
        let (a, b) = (s[at - 1], s[at]);
        let span = (b.guest_ns - a.guest_ns) as f64;
        let w = if span > 0.0 {
            (guest_ns - a.guest_ns) as f64 / span
        } else {
            0.0
        };
        let o = a.offset_ns() as f64 + w * (b.offset_ns() as f64 - a.offset_ns() as f64);
        (o.round() as i64, a.bound_ns().max(b.bound_ns()))
    } else {
        let near = if at == 0 { s[0] } else { s[s.len() - 1] };
        let dt = (guest_ns as i128 - near.guest_ns as i128) as f64;
        let drift = drift_ppm(clock);
        let o = near.offset_ns() as f64 + drift.unwrap_or(0.0) * 1e-6 * dt;
        // What the drift estimate may be off by, over that distance.
        let slack = drift.map_or(ASSUMED_DRIFT_PPM, |d| d.abs() * 0.1 + 1.0) * 1e-6 * dt.abs();
        (
            o.round() as i64,
            near.bound_ns().saturating_add(slack.ceil() as u64),
        )
    };
    let host = guest_ns as i128 - offset as i128;
    Some(OnHost {
        host_ns: u64::try_from(host).ok()?,
        offset_ns: offset,
        bound_ns: bound,
    })
}

/// "vCPU 1 off its CPU for 19.8 ms: rtg-noise/4123 FIFO 50 ran on host CPU 1; …; clock ±0.4 ms" or why
/// it was not joined.
pub fn episode_host_sentence(h: &EpisodeHost, window_ns: u64) -> String {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let bound = format!("{:.2} ms", h.bound_ns as f64 / 1e6);
    match h.verdict {
        HostVerdict::BoundTooWide => format!(
            "not joined: the clock's uncertainty ±{bound} is wider than this {} episode",
            ms(window_ns)
        ),
        HostVerdict::NotCovered => {
            "not joined: the host record does not cover this episode".to_string()
        }
        HostVerdict::NoVcpu => format!("not joined: the host record has no vCPU {}", h.vcpu),
        HostVerdict::NoClock => {
            "not joined: the host record has no guest clock (vm observe --clock)".to_string()
        }
        HostVerdict::Joined if h.causes.is_empty() => format!(
            "the host did nothing to vCPU {} then (clock ±{bound}): {} stays unattributed",
            h.vcpu,
            ms(h.guest_unattributed_ns)
        ),
        HostVerdict::Joined => {
            let parts: Vec<String> = h
                .causes
                .iter()
                .take(4)
                .map(|c| format!("{} for {}", c.name, ms(c.ns)))
                .collect();
            let [lo, hi] = h.explained_range_ns;
            let left = h.guest_unattributed_ns.saturating_sub(h.explained_ns);
            format!(
                "{}; {} of the guest's {} unattributed explained ({}–{} within the clock's ±{bound}), {} left",
                parts.join("; "),
                ms(h.explained_ns),
                ms(h.guest_unattributed_ns),
                ms(lo),
                ms(hi),
                ms(left)
            )
        }
    }
}

/// The stretches of `[start, end)` no span covers: where the guest's own trace explains nothing. At most
/// [`MAX_GAPS`], the longest, in time order.
pub fn uncovered(start: u64, end: u64, spans: &[Span]) -> Vec<[u64; 2]> {
    let mut inside: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.end_ns > start && s.start_ns < end && s.end_ns > s.start_ns)
        .map(|s| (s.start_ns.max(start), s.end_ns.min(end)))
        .collect();
    inside.sort_unstable();
    let mut gaps = Vec::new();
    let mut at = start;
    for (a, b) in inside {
        if a > at {
            gaps.push([at, a]);
        }
        at = at.max(b);
    }
    if at < end {
        gaps.push([at, end]);
    }
    if gaps.len() > MAX_GAPS {
        gaps.sort_by_key(|g| std::cmp::Reverse(g[1] - g[0]));
        gaps.truncate(MAX_GAPS);
        gaps.sort_unstable();
    }
    gaps
}

/// Elementary pieces of `[start, end)` under `intervals` (start, end, layer, key): each piece goes to the
/// covering interval of the highest layer (the latest start among equals); pieces nothing covers are
/// left out. Adjacent pieces of one key merge.
pub fn layered<K: Copy + PartialEq>(
    start: u64,
    end: u64,
    intervals: &[(u64, u64, u8, K)],
) -> Vec<(u64, u64, K)> {
    let inside: Vec<&(u64, u64, u8, K)> = intervals
        .iter()
        .filter(|s| s.1 > start && s.0 < end && s.1 > s.0)
        .collect();
    let mut cuts: Vec<u64> = vec![start, end];
    for s in &inside {
        cuts.push(s.0.clamp(start, end));
        cuts.push(s.1.clamp(start, end));
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<(u64, u64, K)> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let top = inside
            .iter()
            .filter(|s| s.0 <= a && s.1 >= b)
            .max_by_key(|s| (s.2, s.0));
        if let Some(s) = top {
            match out.last_mut() {
                Some(l) if l.1 == a && l.2 == s.3 => l.1 = b,
                _ => out.push((a, b, s.3)),
            }
        }
    }
    out
}

/// A host interval's cause: its kind, name index and host CPU.
type Key = (HostKind, u32, u32);

/// One vCPU's intervals, sorted by start, with the longest one's length (to find those overlapping a
/// window by binary search).
struct VcpuIntervals<'a> {
    list: Vec<&'a HostInterval>,
    longest: u64,
}

impl<'a> VcpuIntervals<'a> {
    fn new(record: &'a HostRecord, vcpu: u32) -> VcpuIntervals<'a> {
        let mut list: Vec<&HostInterval> =
            record.intervals.iter().filter(|i| i.vcpu == vcpu).collect();
        list.sort_by_key(|i| i.start_ns);
        let longest = list
            .iter()
            .map(|i| i.end_ns.saturating_sub(i.start_ns))
            .max()
            .unwrap_or(0);
        VcpuIntervals { list, longest }
    }

    fn overlapping(&self, a: u64, b: u64) -> impl Iterator<Item = &&'a HostInterval> {
        let from = self
            .list
            .partition_point(|i| i.start_ns < a.saturating_sub(self.longest));
        self.list[from..]
            .iter()
            .take_while(move |i| i.start_ns < b)
            .filter(move |i| i.end_ns > a)
    }

    /// What the host did over the host-clock stretches `gaps`: causes keyed by the interval's (kind, name,
    /// CPU), with their time and how many intervals made them.
    fn explain(&self, gaps: &[(u64, u64)]) -> Vec<(Key, u64, u64)> {
        self.explain_with(gaps, &mut |_, _, _| {})
    }

    /// [`VcpuIntervals::explain`], handing each piece (host start, end, key) to `piece` too.
    fn explain_with(
        &self,
        gaps: &[(u64, u64)],
        piece: &mut dyn FnMut(u64, u64, Key),
    ) -> Vec<(Key, u64, u64)> {
        let mut by: Vec<(Key, u64, u64)> = Vec::new();
        for &(a, b) in gaps {
            let around: Vec<(u64, u64, u8, Key)> = self
                .overlapping(a, b)
                .map(|i| {
                    (
                        i.start_ns,
                        i.end_ns,
                        host_layer(i.kind),
                        (i.kind, i.name, i.cpu),
                    )
                })
                .collect();
            for (x, y, k) in layered(a, b, &around) {
                piece(x, y, k);
                match by.iter_mut().find(|c| c.0 == k) {
                    Some(c) => c.1 += y - x,
                    None => by.push((k, y - x, 0)),
                }
            }
            for c in by.iter_mut() {
                c.2 += around.iter().filter(|s| s.3 == c.0).count() as u64;
            }
        }
        by
    }
}

/// The guest's unattributed stretches of an episode: its recorded gaps, or the whole window when the
/// guest explained nothing, or (an episode broken down before gaps were recorded) the whole window with
/// the host's share capped at the unattributed time (returned as the cap).
fn guest_gaps(e: &Episode) -> (Vec<(u64, u64)>, u64) {
    let unattributed: u64 = e
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Unattributed)
        .map(|c| c.ns)
        .sum();
    let window = (e.start_mono_ns, e.start_mono_ns.saturating_add(e.window_ns));
    if !e.gaps.is_empty() {
        return (e.gaps.iter().map(|g| (g[0], g[1])).collect(), unattributed);
    }
    (vec![window], unattributed)
}

/// Join every episode of `why` with `record`: see the module documentation. Episodes already joined are
/// joined afresh (their host causes go back to unattributed first).
pub fn join(why: &mut Why, record: &HostRecord) {
    let mut counts = [0u64; 5];
    for e in why.episodes.iter_mut() {
        unjoin(e);
        let h = join_episode(e, record);
        counts[h.verdict as usize] += 1;
        if h.verdict == HostVerdict::Joined {
            let mut left = h.explained_ns;
            if let Some(u) = e
                .causes
                .iter_mut()
                .find(|c| c.kind == CauseKind::Unattributed)
            {
                let take = left.min(u.ns);
                u.ns -= take;
                left = take;
            }
            let mut given = 0;
            for c in &h.causes {
                let ns = c.ns.min(left - given);
                given += ns;
                if ns > 0 {
                    e.causes.push(Cause {
                        kind: CauseKind::Host,
                        name: c.name.clone(),
                        ns,
                        count: c.count,
                    });
                }
            }
            e.causes.retain(|c| c.ns > 0);
            e.causes
                .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.kind.cmp(&b.kind)));
        }
        e.host = Some(h);
    }
    let clock = match &record.clock {
        Some(c) => match best_sample(c) {
            Some(b) => format!(
                "{}: {} bursts of min-RTT exchanges ({} of {} exchanges failed); best offset {:+.3} ms ± {:.3} ms",
                c.channel,
                c.samples.len(),
                c.failed,
                c.exchanges,
                b.offset_ns() as f64 / 1e6,
                b.bound_ns() as f64 / 1e6
            ),
            None => format!("{}: no exchange answered ({} tried)", c.channel, c.exchanges),
        },
        None => "none (vm observe without --clock)".to_string(),
    };
    let names = [
        "joined",
        "bound too wide",
        "not covered",
        "no vCPU",
        "no clock",
    ];
    let not_joined: Vec<String> = (1..5)
        .filter(|&i| counts[i] > 0)
        .map(|i| format!("{} {}", counts[i], names[i]))
        .collect();
    let mut totals = host_totals(record);
    totals.truncate(10);
    why.host = Some(HostJoin {
        host: record.host.clone(),
        vm: match &record.vm.name {
            Some(n) => format!("pid {} ({n})", record.vm.pid),
            None => format!("pid {}", record.vm.pid),
        },
        clock,
        drift_ppb: record
            .clock
            .as_ref()
            .and_then(drift_ppm)
            .map(|d| (d * 1e3).round() as i64),
        joined: counts[0],
        not_joined: not_joined.join(", "),
        host_totals: totals,
        missing: record.missing.clone(),
    });
}

/// Undo an earlier join of `e`: its host causes go back to the unattributed remainder.
fn unjoin(e: &mut Episode) {
    let back: u64 = e
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Host)
        .map(|c| c.ns)
        .sum();
    e.causes.retain(|c| c.kind != CauseKind::Host);
    if back > 0 {
        match e
            .causes
            .iter_mut()
            .find(|c| c.kind == CauseKind::Unattributed)
        {
            Some(u) => u.ns += back,
            None => e.causes.push(Cause {
                kind: CauseKind::Unattributed,
                name: String::new(),
                ns: back,
                count: 0,
            }),
        }
        e.causes
            .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.kind.cmp(&b.kind)));
    }
    e.host = None;
}

fn join_episode(e: &Episode, record: &HostRecord) -> EpisodeHost {
    let (gaps, unattributed) = guest_gaps(e);
    let mut h = EpisodeHost {
        verdict: HostVerdict::NoClock,
        vcpu: e.cpu,
        host_start_ns: 0,
        offset_ns: 0,
        bound_ns: 0,
        guest_unattributed_ns: unattributed,
        explained_ns: 0,
        explained_range_ns: [0, 0],
        causes: Vec::new(),
        segments: Vec::new(),
    };
    let Some(on) = record
        .clock
        .as_ref()
        .and_then(|c| to_host(c, e.start_mono_ns))
    else {
        return h;
    };
    h.host_start_ns = on.host_ns;
    h.offset_ns = on.offset_ns;
    h.bound_ns = on.bound_ns;
    if record.vcpu(e.cpu).is_none() {
        h.verdict = HostVerdict::NoVcpu;
        return h;
    }
    if on.bound_ns.saturating_mul(2) >= e.window_ns {
        h.verdict = HostVerdict::BoundTooWide;
        return h;
    }
    let to_host =
        |g: u64, shift: i64| (g as i128 - on.offset_ns as i128 + shift as i128).max(0) as u64;
    let (first, last) = (
        to_host(e.start_mono_ns, 0),
        to_host(e.start_mono_ns.saturating_add(e.window_ns), 0),
    );
    let b = on.bound_ns;
    if !record.covers(first.saturating_sub(b), last.saturating_add(b)) {
        h.verdict = HostVerdict::NotCovered;
        return h;
    }
    h.verdict = HostVerdict::Joined;
    let vi = VcpuIntervals::new(record, e.cpu);
    let shifted = |shift: i64| -> Vec<(u64, u64)> {
        gaps.iter()
            .map(|&(a, z)| (to_host(a, shift), to_host(z, shift)))
            .collect()
    };
    let total = |by: &[(Key, u64, u64)]| by.iter().map(|c| c.1).sum::<u64>();
    let mut pieces: Vec<(u64, u64, Key)> = Vec::new();
    let by = vi.explain_with(&shifted(0), &mut |x, y, k| pieces.push((x, y, k)));
    // The same over offsets spread across the bound: how much the answer depends on the clock.
    let mut lo = total(&by);
    let mut hi = lo;
    let bi = i64::try_from(b).unwrap_or(i64::MAX / 4);
    for k in [-4i64, -3, -2, -1, 1, 2, 3, 4] {
        let t = total(&vi.explain(&shifted(bi * k / 4)));
        lo = lo.min(t);
        hi = hi.max(t);
    }
    let cap = unattributed;
    let mut causes: Vec<HostCause> = by
        .iter()
        .map(|&((kind, name, cpu), ns, count)| HostCause {
            kind,
            name: host_cause_name(
                kind,
                record.names.get(name as usize).map_or("?", |s| s),
                e.cpu,
                cpu,
            ),
            ns,
            count,
        })
        .collect();
    causes.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    h.explained_ns = total(&by).min(cap);
    h.explained_range_ns = [lo.min(cap), hi.min(cap)];
    // The pieces on the guest's clock, each naming its cause, for a timeline of both sides; the longest
    // MAX_SEGMENTS when there are more.
    let guest = |x: u64| (x as i128 + on.offset_ns as i128).max(0) as u64;
    if pieces.len() > MAX_SEGMENTS {
        pieces.sort_by_key(|p| std::cmp::Reverse(p.1 - p.0));
        pieces.truncate(MAX_SEGMENTS);
        pieces.sort_unstable_by_key(|p| p.0);
    }
    h.segments = pieces
        .iter()
        .filter_map(|&(x, y, (kind, name, cpu))| {
            let n = host_cause_name(
                kind,
                record.names.get(name as usize).map_or("?", |s| s),
                e.cpu,
                cpu,
            );
            let cause = causes.iter().position(|c| c.name == n)?;
            Some(HostSegment {
                start_ns: guest(x),
                end_ns: guest(y),
                cause: cause as u32,
            })
        })
        .collect();
    h.causes = causes;
    h
}

/// The "why" of a guest's result to join with the host: its traced episodes as they are, or (a result
/// measured without `--trace` that kept its late samples, `--spike`) episodes made from those, wholly
/// unattributed from the guest's side; `None` when it has neither.
pub fn joinable_why(p: &mut dyn KindData) -> Option<&mut Why> {
    if p.why().is_some_and(|w| w.trace.is_some()) {
        return p.why_slot()?.as_mut();
    }
    let late = p.late_samples()?;
    let thr = late.threshold_ns.filter(|_| !late.spikes.is_empty())?;
    let (episodes, total) = episodes_from_spikes(
        late.spikes,
        |t| late.cpus.get(t as usize).copied().flatten(),
        thr,
    );
    let why = p.why_slot()?.get_or_insert_with(Default::default);
    why.episodes = episodes;
    why.episodes_total = total;
    why.threshold = Some(rtgauge_model::attribution::EpisodeThreshold {
        ns: thr,
        rule: "--spike (the guest was not traced: its late samples only)".into(),
    });
    Some(why)
}

/// A guest run measured without `--trace` (a VMware guest, or to keep the probe undisturbed): its late
/// samples (`--spike`) grouped into episodes, each wholly unattributed from the guest's side, so that the
/// host can still explain them. `cpu_of` gives a thread's CPU where a late sample does not say; the worst
/// [`rtgauge_model::attribution::MAX_EPISODES`] at or above `threshold_ns` are kept, with the count of all.
pub fn episodes_from_spikes(
    spikes: &[rtgauge_model::latency::Spike],
    cpu_of: impl Fn(u32) -> Option<u32>,
    threshold_ns: u64,
) -> (Vec<Episode>, u64) {
    use crate::episodes::{EpisodeTracker, Late};
    use rtgauge_model::attribution::MAX_EPISODES;
    let mut t = EpisodeTracker::default();
    let mut retain = Vec::new();
    let mut sorted: Vec<&rtgauge_model::latency::Spike> = spikes.iter().collect();
    sorted.sort_by_key(|s| (s.thread, s.monotonic_ns));
    for s in sorted {
        let Some(cpu) = s.cpu.or_else(|| cpu_of(s.thread)) else {
            continue;
        };
        t.feed(Late::of(s, cpu), &mut retain);
    }
    t.finish(&mut retain);
    let (kept, total) = t.above(threshold_ns);
    let episodes = kept
        .iter()
        .take(MAX_EPISODES)
        .map(|c| {
            let w = c.end_ns.saturating_sub(c.start_ns);
            Episode {
                cpu: c.cpu,
                thread: c.thread,
                start_mono_ns: c.start_ns,
                window_ns: w,
                samples: c.samples,
                worst_ns: c.worst_ns,
                causes: vec![Cause {
                    kind: CauseKind::Unattributed,
                    name: String::new(),
                    ns: w,
                    count: 0,
                }],
                steal_ns: 0,
                smis: None,
                gaps: vec![[c.start_ns, c.end_ns]],
                host: None,
            }
        })
        .collect();
    (episodes, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::vm::{VcpuThread, VmIdent, HOST_RECORD_KIND, HOST_SCHEMA_VERSION};

    fn sample(send: u64, guest: u64, recv: u64) -> ClockSample {
        ClockSample {
            host_send_ns: send,
            guest_ns: guest,
            host_recv_ns: recv,
        }
    }

    #[test]
    fn offsets_are_interpolated_and_extrapolated_with_the_drift() {
        // Guest = host × (1 + 100 ppm) + 1 s: samples each second, each with 10 µs round trip.
        let truth = |h: u64| h + 1_000_000_000 + h / 10_000;
        let samples: Vec<ClockSample> = (1..=5)
            .map(|k| {
                let h = k * 1_000_000_000;
                sample(h - 5_000, truth(h), h + 5_000)
            })
            .collect();
        let c = ClockSync {
            samples,
            ..ClockSync::default()
        };
        let d = drift_ppm(&c).unwrap();
        assert!((d - 100.0).abs() < 1.0, "{d}");
        for host in [1_500_000_000u64, 3_250_000_000, 7_000_000_000, 200_000_000] {
            let on = to_host(&c, truth(host)).unwrap();
            let err = (on.host_ns as i64 - host as i64).unsigned_abs();
            assert!(
                err <= on.bound_ns,
                "{host}: error {err} > bound {}",
                on.bound_ns
            );
        }
        // Inside: the samples' bound; 2 s past the last sample: wider.
        assert_eq!(to_host(&c, truth(2_500_000_000)).unwrap().bound_ns, 5_000);
        assert!(to_host(&c, truth(7_000_000_000)).unwrap().bound_ns > 5_000);
        // One sample: the assumed drift widens the bound with distance.
        let one = ClockSync {
            samples: vec![sample(1_000, 2_000, 1_200)],
            ..ClockSync::default()
        };
        assert_eq!(to_host(&one, 2_000).unwrap().bound_ns, 100);
        assert_eq!(
            to_host(&one, 1_000_002_000).unwrap().bound_ns,
            100 + 200_000,
            "200 ppm of 1 s"
        );
        assert!(to_host(&ClockSync::default(), 5).is_none());
    }

    #[test]
    fn uncovered_stretches_are_what_no_span_covers() {
        let span = |a, b| Span {
            start_ns: a,
            end_ns: b,
            kind: CauseKind::Irq,
            name: "x".into(),
        };
        assert_eq!(uncovered(0, 100, &[]), vec![[0, 100]]);
        assert_eq!(
            uncovered(0, 100, &[span(10, 20), span(15, 30), span(90, 200)]),
            vec![[0, 10], [30, 90]]
        );
        assert!(uncovered(0, 100, &[span(0, 100)]).is_empty());
        // Many gaps: the longest MAX_GAPS, in time order.
        let many: Vec<Span> = (0..200)
            .map(|i| span(i * 10 + 1 + i % 3, i * 10 + 10))
            .collect();
        let g = uncovered(0, 2_000, &many);
        assert_eq!(g.len(), MAX_GAPS);
        assert!(g.windows(2).all(|w| w[0][0] < w[1][0]));
        assert!(g.iter().all(|x| x[1] - x[0] == 3), "{g:?}");
    }

    #[test]
    fn layers_give_each_instant_to_the_innermost_interval() {
        let iv = [(0u64, 100u64, 0u8, 'e'), (10, 60, 1, 'p'), (20, 25, 4, 'i')];
        assert_eq!(
            layered(0, 100, &iv),
            vec![
                (0, 10, 'e'),
                (10, 20, 'p'),
                (20, 25, 'i'),
                (25, 60, 'p'),
                (60, 100, 'e')
            ]
        );
        assert_eq!(layered(200, 300, &iv), vec![]);
        assert_eq!(layered(50, 70, &iv), vec![(50, 60, 'p'), (60, 70, 'e')]);
    }

    /// A record of vCPU 1 preempted for 20 ms by a FIFO 50 thread at host 10.000 s, a host IRQ inside, a
    /// guest 5 s ahead of the host, measured with ±50 µs.
    fn record() -> HostRecord {
        let iv = |start_ns, end_ns, kind, name| HostInterval {
            vcpu: 1,
            cpu: 1,
            start_ns,
            end_ns,
            kind,
            name,
        };
        HostRecord {
            kind: HOST_RECORD_KIND.into(),
            schema_version: HOST_SCHEMA_VERSION,
            host: "h".into(),
            vm: VmIdent {
                pid: 42,
                name: Some("g".into()),
                found_by: "thread names".into(),
                accel: Some("TCG".into()),
            },
            vcpus: vec![
                VcpuThread {
                    index: 0,
                    tid: 43,
                    comm: "CPU 0/TCG".into(),
                    cpus_allowed: "0".into(),
                    sched: None,
                },
                VcpuThread {
                    index: 1,
                    tid: 44,
                    comm: "CPU 1/TCG".into(),
                    cpus_allowed: "1".into(),
                    sched: None,
                },
            ],
            started_ns: 1_000_000_000,
            ended_ns: 30_000_000_000,
            names: vec!["rtg-noise/77 FIFO 50".into(), "9 acpi".into()],
            intervals: vec![
                iv(10_000_000_000, 10_020_000_000, HostKind::Preempted, 0),
                iv(10_005_000_000, 10_005_200_000, HostKind::Irq, 1),
            ],
            clock: Some(ClockSync {
                channel: "unix:/x".into(),
                samples: vec![
                    sample(2_000_000_000, 7_000_050_000, 2_000_100_000),
                    sample(20_000_000_000, 25_000_050_000, 20_000_100_000),
                ],
                ..ClockSync::default()
            }),
            ..HostRecord::default()
        }
    }

    fn episode(
        cpu: u32,
        start: u64,
        window: u64,
        causes: Vec<Cause>,
        gaps: Vec<[u64; 2]>,
    ) -> Episode {
        Episode {
            cpu,
            thread: 0,
            start_mono_ns: start,
            window_ns: window,
            samples: 20,
            worst_ns: window,
            causes,
            smis: None,
            steal_ns: 0,
            gaps,
            host: None,
        }
    }

    fn unattributed(ns: u64) -> Cause {
        Cause {
            kind: CauseKind::Unattributed,
            name: String::new(),
            ns,
            count: 0,
        }
    }

    #[test]
    fn a_guest_stall_is_charged_to_the_host_thread_that_preempted_its_vcpu() {
        // Guest 15.000 s = host 10.000 s: the guest saw 20.5 ms, 0.5 ms of it its own local timer.
        let timer = Cause {
            kind: CauseKind::Vector,
            name: "local_timer".into(),
            ns: 500_000,
            count: 1,
        };
        let e = episode(
            1,
            14_999_900_000,
            20_500_000,
            vec![unattributed(20_000_000), timer],
            vec![
                [14_999_900_000, 15_010_000_000],
                [15_010_500_000, 15_020_400_000],
            ],
        );
        let mut why = Why {
            episodes: vec![e.clone()],
            ..Why::default()
        };
        let r = record();
        // Stored as rows, read back whole.
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.contains(r#"[1,1,10000000000,10020000000,"preempted",0]"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<HostRecord>(&text).unwrap(), r);
        join(&mut why, &r);
        let j = &why.episodes[0];
        let h = j.host.as_ref().unwrap();
        assert_eq!(h.verdict, HostVerdict::Joined);
        assert_eq!(h.bound_ns, 50_000);
        assert_eq!(h.offset_ns, 5_000_000_000);
        assert_eq!(
            h.causes[0].name,
            "vCPU 1 off its CPU: rtg-noise/77 FIFO 50 ran on host CPU 1"
        );
        assert_eq!(
            h.causes[0].ns, 19_300_000,
            "20 ms − the IRQ − the guest's own timer"
        );
        assert_eq!(h.causes[1].name, "IRQ 9 acpi on host CPU 1 (vCPU 1)");
        assert_eq!(h.explained_ns, 19_500_000);
        // The timeline: preempted, the IRQ, preempted again (on the guest's clock), the guest's own timer
        // between the two gaps left out.
        let seg: Vec<(u64, u64, u32)> = h
            .segments
            .iter()
            .map(|s| (s.start_ns, s.end_ns, s.cause))
            .collect();
        assert_eq!(
            seg,
            vec![
                (15_000_000_000, 15_005_000_000, 0),
                (15_005_000_000, 15_005_200_000, 1),
                (15_005_200_000, 15_010_000_000, 0),
                (15_010_500_000, 15_020_000_000, 0),
            ]
        );
        assert!(h.explained_range_ns[0] <= 19_500_000 && h.explained_range_ns[1] >= 19_500_000);
        assert!(
            h.explained_range_ns[1] - h.explained_range_ns[0] <= 100_000,
            "{h:?}"
        );
        // The guest's causes: the host's share replaces unattributed; the whole still sums to the window.
        assert_eq!(j.causes[0].kind, CauseKind::Host);
        assert_eq!(j.causes.iter().map(|c| c.ns).sum::<u64>(), 20_500_000);
        let left = j
            .causes
            .iter()
            .find(|c| c.kind == CauseKind::Unattributed)
            .unwrap()
            .ns;
        assert_eq!(left, 500_000);
        assert!(
            crate::episodes::sentence(j).starts_with("94 % host vCPU 1 off its CPU: rtg-noise/77"),
            "{}",
            crate::episodes::sentence(j)
        );
        assert!(episode_host_sentence(h, j.window_ns)
            .contains("19.5 ms of the guest's 20.0 ms unattributed explained"));
        let info = why.host.as_ref().unwrap();
        assert_eq!(info.joined, 1);
        assert_eq!(info.host_totals[0].ns, 20_000_000);
        assert_eq!(r.asleep_ns(), 0);
        // Joining again changes nothing.
        let once = why.clone();
        join(&mut why, &r);
        assert_eq!(why, once);
    }

    #[test]
    fn what_the_host_did_not_do_stays_unattributed_and_nothing_is_guessed() {
        let r = record();
        // A stall on vCPU 0: the host preempted vCPU 1, not 0.
        let mut why = Why {
            episodes: vec![episode(
                0,
                14_999_900_000,
                20_000_000,
                vec![unattributed(20_000_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &r);
        let j = &why.episodes[0];
        let h = j.host.as_ref().unwrap();
        assert_eq!(h.verdict, HostVerdict::Joined);
        assert!(h.causes.is_empty());
        assert_eq!(j.causes, vec![unattributed(20_000_000)]);
        assert!(episode_host_sentence(h, j.window_ns).contains("the host did nothing to vCPU 0"));
        // A stall on vCPU 1 a second later: nothing either.
        let mut why = Why {
            episodes: vec![episode(
                1,
                16_000_000_000,
                20_000_000,
                vec![unattributed(20_000_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &r);
        assert!(why.episodes[0].host.as_ref().unwrap().causes.is_empty());
        // An episode of 80 µs against a ±50 µs clock: refused.
        let mut why = Why {
            episodes: vec![episode(
                1,
                15_005_000_000,
                80_000,
                vec![unattributed(80_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &r);
        let j = &why.episodes[0];
        assert_eq!(j.host.as_ref().unwrap().verdict, HostVerdict::BoundTooWide);
        assert_eq!(j.causes, vec![unattributed(80_000)], "nothing guessed");
        assert!(episode_host_sentence(j.host.as_ref().unwrap(), 80_000).contains("wider than this"));
        // Before the observation; no vCPU 7; no clock.
        for (cpu, start, rec, want) in [
            (1, 5_100_000_000, r.clone(), HostVerdict::NotCovered),
            (7, 15_000_000_000, r.clone(), HostVerdict::NoVcpu),
            (
                1,
                15_000_000_000,
                HostRecord {
                    clock: None,
                    ..r.clone()
                },
                HostVerdict::NoClock,
            ),
        ] {
            let mut why = Why {
                episodes: vec![episode(
                    cpu,
                    start,
                    20_000_000,
                    vec![unattributed(20_000_000)],
                    vec![],
                )],
                ..Why::default()
            };
            join(&mut why, &rec);
            assert_eq!(why.episodes[0].host.as_ref().unwrap().verdict, want);
            assert_eq!(why.episodes[0].causes, vec![unattributed(20_000_000)]);
        }
    }

    #[test]
    fn late_samples_of_an_untraced_guest_become_unattributed_episodes() {
        let spike = |thread, latency_ns, monotonic_ns| rtgauge_model::latency::Spike {
            thread,
            cycle: 0,
            latency_ns,
            monotonic_ns,
            cpu: None,
            window_ns: 0,
        };
        // Thread 0 on CPU 1: one 20 ms stall seen by 20 late 1 ms periods, and a lone 50 µs sample.
        let mut s: Vec<_> = (0..20)
            .map(|k| spike(0, 20_000_000 - k * 1_000_000, 15_020_000_000))
            .collect();
        s.push(spike(0, 50_000, 16_000_000_000));
        let (e, total) = episodes_from_spikes(&s, |t| (t == 0).then_some(1), 1_000_000);
        assert_eq!((e.len(), total), (1, 1));
        assert_eq!(
            (e[0].cpu, e[0].samples, e[0].window_ns),
            (1, 20, 20_000_000)
        );
        assert_eq!(e[0].gaps, vec![[15_000_000_000, 15_020_000_000]]);
        let mut why = Why {
            episodes: e,
            ..Why::default()
        };
        join(&mut why, &record());
        assert_eq!(
            why.episodes[0].top().map(|c| c.kind),
            Some(CauseKind::Host),
            "{:?}",
            why.episodes[0]
        );
        // A thread whose CPU is unknown is left out.
        assert_eq!(episodes_from_spikes(&s, |_| None, 1).1, 0);
    }

    #[test]
    fn an_episode_without_gaps_caps_the_host_share_at_its_unattributed_time() {
        // A document broken down before gaps were kept: 15 ms of thread, 5 ms unattributed.
        let thread = Cause {
            kind: CauseKind::Thread,
            name: "x/1 CFS".into(),
            ns: 15_000_000,
            count: 1,
        };
        let mut why = Why {
            episodes: vec![episode(
                1,
                15_000_000_000,
                20_000_000,
                vec![thread, unattributed(5_000_000)],
                vec![],
            )],
            ..Why::default()
        };
        join(&mut why, &record());
        let j = &why.episodes[0];
        assert_eq!(j.host.as_ref().unwrap().explained_ns, 5_000_000);
        assert_eq!(j.causes.iter().map(|c| c.ns).sum::<u64>(), 20_000_000);
        assert!(j.causes.iter().all(|c| c.kind != CauseKind::Unattributed));
    }
}
