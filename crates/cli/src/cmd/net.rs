//! `rtgauge net`: network-function capacity. `serve` runs the reference HTTP/1.1 server; `cps` measures new
//! connections per second (connect, one GET, the whole response, teardown); `throughput` measures
//! keep-alive GETs in Gbit/s and requests/s. `--sweep-cpus` repeats the measurement on growing CPU sets
//! (seed 004's figure 3); `cps --rate R,…` offers a fixed rate (open loop) and `--p99-max` finds the highest
//! rate whose p99 stays within a bound. Results are stored as a run, like `rtgauge run`, so `compare` can
//! put two platforms side by side. The flags and their plan are in `rtgauge_flags::net`.

use super::keep::{keep_run, open_store, Keep};
use anyhow::{bail, Context as _};
use rtgauge_flags::net::{
    cpu_list, resolve_addr, CpsArgs, NetCommand, ServeArgs, ThroughputArgs, TrafficArgs,
};
use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::net::NetResult;
use rtgauge_model::run::{ProbeResult, RunStatus};
use rtgauge_model::units::us;
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::net::server;
use rtgauge_report::kind::net::{render_result, render_sweep};
use std::io::Write as _;
use std::process::ExitCode;

/// Process-exit outcome of a set of results: 2 when nothing succeeded, 1 when errors exceed the tolerance.
pub fn outcome(results: &[NetResult], max_errors: u64) -> (ExitCode, Option<String>) {
    let errors: u64 = results.iter().map(|r| r.errors.total()).sum();
    if results.iter().any(|r| r.transactions == 0) {
        return (
            ExitCode::from(2),
            Some(format!(
                "no successful transaction ({errors} failed attempts): check the target"
            )),
        );
    }
    if errors > max_errors {
        return (
            ExitCode::from(1),
            Some(format!(
                "{errors} failed attempts (tolerated: --max-errors {max_errors})"
            )),
        );
    }
    (ExitCode::SUCCESS, None)
}

/// `rtgauge net serve|cps|throughput`.
pub fn run(command: &NetCommand) -> anyhow::Result<ExitCode> {
    match command {
        NetCommand::Serve(s) => serve(s),
        NetCommand::Cps(CpsArgs { load: l, .. })
        | NetCommand::Throughput(ThroughputArgs { load: l, .. }) => measure(l, command),
    }
}

fn serve(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let online = read_cpu_mask(&root, CpuMask::Online).context("reading the online CPUs")?;
    let listen = resolve_addr("--listen", &a.listen)?;
    let cpus = match &a.cpus {
        Some(t) => cpu_list("--cpus", t, &online)?,
        None => CpuSet::new([online.iter().next().unwrap_or(0)]),
    };
    if a.duration.is_some_and(|d| d.as_ns() == 0) {
        bail!("-D/--duration: must be longer than 0");
    }
    let stop = super::stop_on_signals()?;
    let h = server::start(
        &server::ServerPlan {
            listen,
            cpus: cpus.as_slice().to_vec(),
            duration: a.duration,
        },
        &stop,
    )
    .map_err(|e| anyhow::anyhow!("--listen {}: {e}", a.listen))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "listening on {} ({} event loops on CPUs {cpus}); paths /2b, /128k, /N[k|m]",
            h.addr,
            cpus.len()
        )?;
        out.flush()?;
    }
    let stats = h.join();
    println!(
        "served {} requests on {} connections, {} bytes, {} connection errors",
        stats.requests, stats.accepted, stats.bytes_sent, stats.errors
    );
    Ok(ExitCode::SUCCESS)
}

impl<'a> From<&'a TrafficArgs> for Keep<'a> {
    fn from(a: &'a TrafficArgs) -> Keep<'a> {
        Keep {
            store: &a.store,
            no_store: a.no_store,
            output: &a.output,
            label: &a.label,
        }
    }
}

fn measure(a: &TrafficArgs, command: &NetCommand) -> anyhow::Result<ExitCode> {
    let root = HostRoot::live();
    let plan = command.plan(&root)?;
    let keep = Keep::from(a);
    let store = open_store(&keep)?;
    let stop = super::stop_on_signals()?;
    let system = rtgauge_host::system::read_system_info(&root);
    let started = crate::output::now_rfc3339();
    let probe = rtgauge_session::kind::net::Net {
        plan: &plan,
        sysctls: rtgauge_host::system::read_net_sysctls(&root),
    };
    let around = rtgauge_session::Around {
        load: a.load_request(),
        ..rtgauge_session::Around::default()
    };
    let (results, _) = super::measure_kind(&root, &stop, &probe, &around, &mut [])?;
    let (code, why) = outcome(&results, plan.max_errors);
    let status = if stop.is_set() || results.len() < plan.points.len() {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    };
    let mut doc = crate::output::document(
        started,
        system,
        results.iter().cloned().map(ProbeResult::from).collect(),
        status,
        Vec::new(),
    );
    if let Some(w) = &why {
        doc.warnings.push(w.clone());
    }
    keep_run(&keep, store, &mut doc, || {
        let shown = show(&results, command, code);
        if let Some(w) = why {
            eprintln!("rtgauge: net: {w}");
        }
        shown
    })
}

/// Print each point's result, the sweep and (cps) the open-loop table; the exit code as `open_loop` sets it.
fn show(results: &[NetResult], command: &NetCommand, code: ExitCode) -> std::io::Result<ExitCode> {
    for r in results {
        super::print_text(&render_result(r))?;
    }
    super::print_text(&render_sweep(results))?;
    match command {
        NetCommand::Cps(c) => open_loop(results, c.p99_max, code),
        _ => Ok(code),
    }
}

/// Whether an open-loop point meets `bound`: p99 within it and no start missed.
fn holds(r: &NetResult, bound: u64) -> bool {
    let p99 = r.total.percentile(99.0).unwrap_or(r.total.max_ns);
    p99 <= bound && r.open_loop.as_ref().is_some_and(|o| o.missed_starts == 0)
}

/// Print the offered-vs-achieved table with latency, and the capacity when `p99_max` is given; the exit
/// code becomes 1 when no rate holds.
fn open_loop(
    results: &[NetResult],
    p99_max: Option<Nanos>,
    code: ExitCode,
) -> std::io::Result<ExitCode> {
    let points: Vec<&NetResult> = results.iter().filter(|r| r.open_loop.is_some()).collect();
    if points.is_empty() {
        return Ok(code);
    }
    let us = |ns: u64| format!("{:.1}", us(ns));
    let mut t = String::from(
        "open loop: offered/s  achieved/s  ratio   missed     p50 µs     p99 µs     max µs\n",
    );
    for r in &points {
        let Some(o) = &r.open_loop else { continue };
        let p = |q: f64| r.total.percentile(q).unwrap_or(r.total.max_ns);
        t.push_str(&format!(
            "           {:>9.0}  {:>10.0}  {:>5.3}  {:>7}  {:>9}  {:>9}  {:>9}\n",
            o.offered_per_s,
            r.rate_per_s,
            r.rate_per_s / o.offered_per_s,
            o.missed_starts,
            us(p(50.0)),
            us(p(99.0)),
            us(r.total.max_ns),
        ));
    }
    let mut code = code;
    if let Some(bound) = p99_max {
        let best = points
            .iter()
            .filter(|r| holds(r, bound.as_ns()))
            .filter_map(|r| r.open_loop.as_ref().map(|o| o.offered_per_s))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        match best {
            Some(rate) => t.push_str(&format!(
                "capacity: {rate:.0} connections/s offered with p99 ≤ {bound}\n"
            )),
            None => {
                t.push_str(&format!("capacity: no offered rate holds p99 ≤ {bound}\n"));
                if code == ExitCode::SUCCESS {
                    code = ExitCode::from(1);
                }
            }
        }
    }
    super::print_text(&t)?;
    Ok(code)
}
