//! The host side of a VM in words and pictures: the host record `rtgauge vm observe` writes (what the host
//! did to each vCPU thread), and a guest run joined with it (`rtgauge vm join`): per episode what the host
//! did meanwhile, and one timeline per episode with both sides on the guest's clock.

use rtgauge_model::attribution::{Episode, Why};
use rtgauge_model::units::us;
use rtgauge_model::vm::{HostKind, HostRecord, HostVerdict};
use std::fmt::Write as _;

/// Host causes listed in the record's summary.
pub const RECORD_CAUSES: usize = 10;

/// Episodes drawn as a timeline in the HTML report.
pub const TIMELINES: usize = 10;

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The terminal summary of a host record.
pub fn render_record(r: &HostRecord) -> String {
    let mut s = String::new();
    let secs = r.ended_ns.saturating_sub(r.started_ns) as f64 / 1e9;
    let name =
        r.vm.name
            .as_deref()
            .map_or(String::new(), |n| format!(" ({n})"));
    let _ = writeln!(
        s,
        "VM pid {}{name} on {} ({}), {:.1} s observed: {} vCPU{} found by {}",
        r.vm.pid,
        r.host,
        r.kernel,
        secs,
        r.vcpus.len(),
        if r.vcpus.len() == 1 { "" } else { "s" },
        r.vm.found_by
    );
    for v in &r.vcpus {
        let _ = writeln!(
            s,
            "  vCPU {}: thread {} '{}', host CPUs {}",
            v.index, v.tid, v.comm, v.cpus_allowed
        );
    }
    let _ = writeln!(
        s,
        "  trace: host CPUs {}, {} events read, {} lost; kvm exits {}",
        r.trace.cpus,
        r.trace.events,
        r.trace.lost,
        if r.trace.kvm_events {
            "traced"
        } else {
            "not traced (no kvm tracepoints: TCG, or KVM not loaded)"
        }
    );
    let totals = rtgauge_analysis::vm_join::host_totals(r);
    let _ = writeln!(
        s,
        "  what the host took from the vCPUs ({} intervals{}):",
        r.intervals.len(),
        if r.dropped > 0 {
            format!(", {} older ones dropped", r.dropped)
        } else {
            String::new()
        }
    );
    if totals.is_empty() {
        let _ = writeln!(s, "    nothing");
    }
    for c in totals.iter().take(RECORD_CAUSES) {
        let _ = writeln!(s, "    {:>9} {:>6}×  {}", ms(c.ns), c.count, c.name);
    }
    let _ = writeln!(
        s,
        "  the vCPU threads slept {} in all (the guest halted, or blocked in the hypervisor: a cause only past a guest deadline)",
        ms(r.asleep_ns())
    );
    if !r.exits.is_empty() {
        let mut e = r.exits.clone();
        e.sort_by_key(|x| std::cmp::Reverse(x.ns));
        let parts: Vec<String> = e
            .iter()
            .take(6)
            .map(|x| format!("{} {} ({})", x.reason, x.count, ms(x.ns)))
            .collect();
        let _ = writeln!(s, "  VM exits: {}", parts.join(", "));
    }
    match &r.clock {
        Some(c) => match rtgauge_analysis::vm_join::best_sample(c) {
            Some(b) => {
                let drift = rtgauge_analysis::vm_join::drift_ppm(c)
                    .map_or(String::new(), |d| format!(", drift {d:+.1} ppm"));
                let _ = writeln!(
                    s,
                    "  clock ({}): {} bursts, best offset guest − host {:+.3} ms ± {:.3} ms{drift}; {} of {} exchanges failed",
                    c.channel,
                    c.samples.len(),
                    b.offset_ns() as f64 / 1e6,
                    b.bound_ns() as f64 / 1e6,
                    c.failed,
                    c.exchanges
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  clock ({}): no exchange answered ({} tried)",
                    c.channel, c.exchanges
                );
            }
        },
        None => {
            let _ = writeln!(
                s,
                "  clock: none (--clock): the record cannot be joined with a guest run"
            );
        }
    }
    let cpu_pct = if r.observer.wall_ns > 0 {
        r.observer.cpu_ns as f64 * 100.0 / r.observer.wall_ns as f64
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "  observer: {:.2} s CPU ({cpu_pct:.1} % of one CPU), peak RSS {:.1} MiB",
        r.observer.cpu_ns as f64 / 1e9,
        r.observer.max_rss_kib as f64 / 1024.0
    );
    for m in &r.missing {
        let _ = writeln!(s, "  missing: {m}");
    }
    s
}

/// "host: joined with the record of h (VM pid 42 (rt)): 3 joined, 1 bound too wide; clock …".
pub fn join_line(why: &Why) -> Option<String> {
    let h = why.host.as_ref()?;
    let not = if h.not_joined.is_empty() {
        String::new()
    } else {
        format!(", not joined: {}", h.not_joined)
    };
    let drift = h.drift_ppb.map_or(String::new(), |d| {
        format!(", drift {:+.1} ppm", d as f64 / 1e3) // ppb → ppm: not a time
    });
    Some(format!(
        "host: joined with the record of {} (VM {}): {} episode{} joined{not}; clock {}{drift}",
        h.host,
        h.vm,
        h.joined,
        if h.joined == 1 { "" } else { "s" },
        h.clock
    ))
}

/// "host: vCPU 1 off its CPU: … for 19.8 ms; …" for a joined episode.
pub fn episode_line(e: &Episode) -> Option<String> {
    let h = e.host.as_ref()?;
    Some(format!(
        "host: {}",
        rtgauge_analysis::vm_join::episode_host_sentence(h, e.window_ns)
    ))
}

/// Colour of a host kind in the timelines.
fn colour(k: HostKind) -> &'static str {
    match k {
        HostKind::Preempted => "#8c564b",
        HostKind::Waiting => "#c49c94",
        HostKind::Irq => "#d62728",
        HostKind::Softirq => "#9467bd",
        HostKind::Vector => "#ff7f0e",
        HostKind::Work => "#2ca02c",
        HostKind::Exit => "#17becf",
        HostKind::Asleep => "#bcbd22",
        HostKind::WakerDelayed => "#e377c2",
        HostKind::HelperHeld => "#7f7f7f",
    }
}

/// One episode's timeline (SVG, 640 px): the guest's window on top — its own explanations blue, its
/// unattributed stretches grey — and below it what the host did, on the guest's clock, each piece titled
/// with its cause; the clock's bound hatched at both ends of the window.
fn timeline(e: &Episode) -> maud::Markup {
    const W: f64 = 640.0;
    const L: f64 = 60.0;
    let Some(h) = &e.host else {
        return maud::html! {};
    };
    let (a, z) = (e.start_mono_ns, e.start_mono_ns + e.window_ns);
    let pad = (e.window_ns / 20).max(h.bound_ns);
    let (from, to) = (a.saturating_sub(pad), z + pad);
    let x =
        |t: u64| L + (t.saturating_sub(from)) as f64 * (W - L - 4.0) / (to - from).max(1) as f64;
    let b = h.bound_ns;
    maud::html! {
        svg width=(W) height="62" role="img" {
            text x="0" y="14" font-size="11" { "guest" }
            text x="0" y="40" font-size="11" { "host" }
            rect x=(format!("{:.1}", x(a))) y="4" width=(format!("{:.1}", x(z) - x(a))) height="14" fill="#1f77b4" {
                title { "explained by the guest's own trace" }
            }
            @for g in &e.gaps {
                rect x=(format!("{:.1}", x(g[0]))) y="4" width=(format!("{:.1}", (x(g[1]) - x(g[0])).max(0.5))) height="14" fill="#7f7f7f" {
                    title { (format!("unattributed in the guest: {}", ms(g[1] - g[0]))) }
                }
            }
            @if e.gaps.is_empty() && e.causes.iter().all(|c| c.kind == rtgauge_model::attribution::CauseKind::Unattributed || c.kind == rtgauge_model::attribution::CauseKind::Host) {
                rect x=(format!("{:.1}", x(a))) y="4" width=(format!("{:.1}", x(z) - x(a))) height="14" fill="#7f7f7f" {
                    title { "unattributed in the guest" }
                }
            }
            @for s in &h.segments {
                @if let Some(c) = h.causes.get(s.cause as usize) {
                    rect x=(format!("{:.1}", x(s.start_ns))) y="30" width=(format!("{:.1}", (x(s.end_ns) - x(s.start_ns)).max(0.5))) height="14" fill=(colour(c.kind)) {
                        title { (format!("{} ({})", c.name, ms(s.end_ns - s.start_ns))) }
                    }
                }
            }
            @for edge in [a, z] {
                rect x=(format!("{:.1}", x(edge.saturating_sub(b)))) y="2" width=(format!("{:.1}", (x(edge + b) - x(edge.saturating_sub(b))).max(0.5))) height="44" fill="none" stroke="#000" stroke-dasharray="2,2" {
                    title { (format!("clock bound ±{:.3} ms", b as f64 / 1e6)) }
                }
            }
            text x=(L) y="58" font-size="10" { (format!("{:.3} s", a as f64 / 1e9)) }
            text x=(W - 70.0) y="58" font-size="10" { (format!("+{}", ms(e.window_ns))) }
        }
    }
}

/// The HTML part of a joined run: the join, what the host did over the record, and a timeline per joined
/// episode (the worst [`TIMELINES`]); empty when the run was not joined.
pub fn html(why: &Why) -> maud::Markup {
    let Some(h) = &why.host else {
        return maud::html! {};
    };
    let joined: Vec<&Episode> = why
        .episodes
        .iter()
        .filter(|e| {
            e.host
                .as_ref()
                .is_some_and(|x| x.verdict == HostVerdict::Joined)
        })
        .take(TIMELINES)
        .collect();
    maud::html! {
        h3 { "The host side: what the VM's host did meanwhile" }
        @if let Some(l) = join_line(why) { p { (l) } }
        @for m in &h.missing { p { "Host record: " (m) } }
        @if !h.host_totals.is_empty() {
            table {
                tr { th { "what the host took from the vCPUs, whole record (their sleep left out)" } th { "ms" } th { "times" } }
                @for c in &h.host_totals {
                    tr { td { (c.name) } td.n { (format!("{:.2}", c.ns as f64 / 1e6)) } td.n { (c.count) } }
                }
            }
        }
        @for e in &joined {
            h4 { (format!("CPU {} at {:.3} s, {:.1} µs", e.cpu, e.start_mono_ns as f64 / 1e9, us(e.worst()))) }
            p { (rtgauge_analysis::episodes::sentence(e)) }
            @if let Some(l) = episode_line(e) { p { (l) } }
            (timeline(e))
        }
        @if !joined.is_empty() {
            p { "Timelines: guest on top (blue: its own trace explains it, grey: unattributed in the guest); host below on the guest's clock (brown: another host thread ran, light brown: waiting, red: host IRQ, purple: softirq, orange: vector, green: work, teal: VM exit, olive: the vCPU thread asleep, pink: asleep while the QEMU thread that wakes it was kept off its CPU); dashed: the clock's bound at the window's edges." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::attribution::{Cause, CauseKind};
    use rtgauge_model::vm::{EpisodeHost, HostCause, HostJoin, HostSegment};

    fn joined() -> Why {
        let host = EpisodeHost {
            verdict: HostVerdict::Joined,
            vcpu: 1,
            host_start_ns: 10_000_000_000,
            offset_ns: 5_000_000_000,
            bound_ns: 50_000,
            guest_unattributed_ns: 20_000_000,
            explained_ns: 19_800_000,
            explained_range_ns: [19_700_000, 19_800_000],
            causes: vec![HostCause {
                kind: HostKind::Preempted,
                name: "vCPU 1 off its CPU: <b>rtg-noise/77 FIFO 50</b> ran on host CPU 1".into(),
                ns: 19_800_000,
                count: 1,
            }],
            segments: vec![HostSegment {
                start_ns: 15_000_000_000,
                end_ns: 15_019_800_000,
                cause: 0,
            }],
        };
        Why {
            episodes: vec![Episode {
                cpu: 1,
                thread: 0,
                start_mono_ns: 15_000_000_000,
                window_ns: 20_000_000,
                samples: 20,
                worst_ns: 20_000_000,
                causes: vec![
                    Cause {
                        kind: CauseKind::Host,
                        name: host.causes[0].name.clone(),
                        ns: 19_800_000,
                        count: 1,
                    },
                    Cause {
                        kind: CauseKind::Unattributed,
                        name: String::new(),
                        ns: 200_000,
                        count: 0,
                    },
                ],
                steal_ns: 0,
                smis: None,
                gaps: vec![[15_000_000_000, 15_020_000_000]],
                host: Some(host),
            }],
            host: Some(HostJoin {
                host: "h".into(),
                vm: "pid 42 (g)".into(),
                clock: "unix:/x: 5 bursts".into(),
                drift_ppb: Some(12_300),
                joined: 1,
                not_joined: "1 bound too wide".into(),
                host_totals: vec![],
                missing: vec![],
            }),
            ..Why::default()
        }
    }

    #[test]
    fn an_untraced_guests_joined_episodes_are_printed_and_its_worst_interval_points_to_the_host() {
        // A guest measured with --spike only (the VMware-like case): no trace, its counters show nothing,
        // the host's record explains the stall.
        let mut why = joined();
        assert!(why.trace.is_none());
        let counters = |start_ns| rtgauge_model::attribution::IntervalCounters {
            cpu: 1,
            start_ns,
            len_ns: 1_000_000_000,
            ..Default::default()
        };
        why.counters = vec![counters(0), counters(1_000_000_000)];
        let tl = |start_ns, max_ns| rtgauge_model::latency::TimelineEntry {
            start_ns,
            count: 1000,
            max_ns,
            missed: 0,
        };
        let timeline = [tl(0, 40_000), tl(1_000_000_000, 20_000_000)];
        let text = crate::spikes::render_why_of(
            &why,
            &vec![(1, &timeline[..])],
            false,
            crate::text::TextOptions::default(),
        );
        assert!(
            text.contains("worst interval CPU 1 at 1 s (max 20000.0 µs): nothing in the guest's kernel rose; its host's record explains it: vCPU 1 off its CPU"),
            "{text}"
        );
        assert!(!text.contains("points outside this kernel"), "{text}");
        assert!(
            text.contains("episodes: 0 episodes, 1 explained (the guest was not traced: what its host's record shows)"),
            "{text}"
        );
        assert!(
            text.contains("    CPU 1 at 15.000 s, 20000.0 µs (20 late samples): "),
            "{text}"
        );
        assert!(text.contains("      host: vCPU 1 off its CPU"), "{text}");
    }

    #[test]
    fn a_joined_episode_in_words_and_as_a_timeline() {
        let w = joined();
        assert_eq!(
            join_line(&w).unwrap(),
            "host: joined with the record of h (VM pid 42 (g)): 1 episode joined, not joined: 1 bound too wide; clock unix:/x: 5 bursts, drift +12.3 ppm"
        );
        let l = episode_line(&w.episodes[0]).unwrap();
        assert!(l.starts_with("host: vCPU 1 off its CPU: <b>rtg-noise/77 FIFO 50</b> ran on host CPU 1 for 19.8 ms;"), "{l}");
        let h = html(&w).into_string();
        assert!(!h.contains("<b>rtg"), "names are escaped");
        assert!(h.contains("&lt;b&gt;rtg-noise/77 FIFO 50"), "{h}");
        // The host's piece spans 99 % of the window's width; the window sits inside the padding.
        assert!(h.contains(r##"fill="#8c564b""##), "{h}");
        assert!(h.contains("clock bound ±0.050 ms"), "{h}");
        assert_eq!(html(&Why::default()).into_string(), "");
    }
}
