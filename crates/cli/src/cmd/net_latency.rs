//! `rtgauge net latency`: packet latency through the platform, measured as a periodic stream from a pinned
//! sender to a pinned receiver (one-way, split across a guest and its host, or round trip through `rtgauge
//! net reflect`), its unmet conditions said first, stored like a run. The flags and their plan are in
//! `rtgauge_flags::net_latency`.

use super::keep::{keep_run, open_store, Keep};
use anyhow::{bail, Context as _};
use rtgauge_flags::net::resolve_addr;
use rtgauge_flags::net_latency::{LatencyArgs, ReflectArgs};
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::run::{ProbeResult, RunStatus};
use std::io::Write as _;
use std::process::ExitCode;

impl<'a> From<&'a LatencyArgs> for Keep<'a> {
    fn from(a: &'a LatencyArgs) -> Keep<'a> {
        Keep {
            store: &a.store,
            no_store: a.no_store,
            output: &a.output,
            label: &a.label,
        }
    }
}

/// `rtgauge net latency`: the packet stream measured, its unmet conditions said first, stored like a run.
pub fn run(a: &LatencyArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let mut resolved = a.resolve(&root)?;
    let keep = Keep::from(a);
    let store = open_store(&keep)?;
    // Receive only with the sender's clock: read before the stream starts and every second while it runs.
    let peer = match &a.clock {
        Some(c) => {
            let channel = rtgauge_vmhost::channel::Channel::parse(c, "--clock")?;
            let rx_cpu = resolved.plan.config.rx_cpu;
            let reader = rtgauge_vmhost::channel::PeerReader::start(channel, "--clock", rx_cpu)?;
            resolved.plan.peer_shift_ns = Some(reader.realtime_shift_ns());
            Some(reader)
        }
        None => None,
    };
    let plan = &resolved.plan;
    let stop = super::stop_on_signals()?;
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::output::now_rfc3339();
    let around = rtgauge_session::Around {
        load: a.load.request(),
        why: Some(resolved.why.clone()),
        ..rtgauge_session::Around::default()
    };
    let probe = rtgauge_session::kind::net_latency::NetLatency(plan);
    let (mut result, warnings) = super::measure_one(&root, &stop, &probe, &around, &mut [])?;
    result.clock = match peer {
        Some(reader) => Some(Box::new(reader.finish())),
        None if plan.config.role == rtgauge_model::net_latency::StreamRole::Receive => {
            Some(Box::new(rtgauge_model::vm::PeerClock {
                method: "the sender's CLOCK_REALTIME, taken as this one's (no --clock)".into(),
                offset_ns: 0,
                bound_ns: None,
                wander_ns: 0,
                sync: None,
            }))
        }
        None => None,
    };
    result.unresolved = result.unresolved_figures();
    let status = if stop.is_set() {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    };
    // What the clock adds is known only now: said with the rest, before the figures.
    let mut warnings = warnings;
    for w in rtgauge_report::kind::net_latency::clock_shortfalls(&result) {
        if !warnings.contains(&w) {
            warnings.insert(0, w);
        }
    }
    let probe = ProbeResult::from(result.clone());
    let mut doc = crate::output::document(started, system, vec![probe], status, warnings.clone());
    // Nothing received (a send-only run: nothing sent) is a failed measurement.
    let send_only = plan.config.role == rtgauge_model::net_latency::StreamRole::Send;
    let code = if result.sent == 0 || (result.received == 0 && !send_only) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    keep_run(&keep, store, &mut doc, || {
        super::warn_all(&warnings);
        super::print_text(&rtgauge_report::kind::net_latency::render(&result))?;
        super::print_text(&rtgauge_report::spikes::render_why(
            &result,
            rtgauge_report::text::TextOptions::full(),
        ))?;
        Ok(code)
    })
}

/// `rtgauge net reflect`: echo datagrams until the duration or a signal.
pub fn reflect(a: &ReflectArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let online = read_cpu_mask(&root, CpuMask::Online).context("reading the online CPUs")?;
    let listen = resolve_addr("--listen", &a.listen)?;
    if let Some(c) = a.cpu.filter(|c| !online.contains(*c)) {
        bail!("--cpu {c}: CPU {c} is not online (online: {online})");
    }
    if a.duration.is_some_and(|d| d.as_ns() == 0) {
        bail!("-D/--duration: must be longer than 0");
    }
    let stop = super::stop_on_signals()?;
    let plan = rtgauge_probe::net_latency::ReflectPlan {
        listen,
        cpu: a.cpu,
        rtprio: (a.priority > 0).then_some(a.priority),
        duration: a.duration,
    };
    let r = rtgauge_probe::net_latency::reflect(&plan, &stop, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "reflecting on {addr}");
        let _ = out.flush();
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let c = &r.conditions;
    if !c.policy.ok() || !c.priority.ok() {
        eprintln!(
            "rtgauge: conditions: the reflector asked {} {} and ran at {} {}{}",
            c.policy.requested,
            c.priority.requested,
            c.policy.achieved,
            c.priority.achieved,
            c.policy
                .error
                .as_deref()
                .map_or(String::new(), |e| format!(" ({e})"))
        );
    }
    println!(
        "reflected {} packets, {} send errors, {} other datagrams ignored",
        r.echoed, r.errors, r.ignored
    );
    Ok(ExitCode::SUCCESS)
}
