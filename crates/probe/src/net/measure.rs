//! The measuring loop of a network plan: per point, the reference server when asked for, the client's
//! event loops, and the point's result. The kernel settings that bound the measurement (sysctls) are read by
//! the caller and recorded with every result as given (the probe does not read the host).

use super::plan::NetPlan;
use super::{client, http, server};
use crate::stop::StopFlag;
use crate::ProbeError;
use rtgauge_model::net::{NetConfig, NetMode, NetResult, OpenLoop};
use rtgauge_model::Nanos;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Why a network plan could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The reference server could not start (why: the `source`).
    #[error("--serve-cpus: starting the reference server")]
    Server(#[source] ProbeError),
    /// A point has neither a target address nor a reference server to load.
    #[error("--target: required")]
    NoTarget,
    /// The load generator could not run.
    #[error(transparent)]
    Client(ProbeError),
}

/// How long the reference server outlives a point's duration at most (it is stopped when the point ends).
const SERVER_GRACE_NS: u64 = 10_000_000_000;

/// Run every point of the plan, in order; stops early when the stop flag is set. `sysctls` are recorded
/// with each result.
pub fn measure(
    plan: &NetPlan,
    stop: &StopFlag,
    sysctls: &BTreeMap<String, String>,
) -> Result<Vec<NetResult>, NetError> {
    let mut out = Vec::new();
    for p in &plan.points {
        if stop.is_set() {
            break;
        }
        // The reference server, when asked for, lives for this point only: its CPU set is the point's.
        let server_stop = StopFlag::new();
        let server = match &p.server_cpus {
            Some(cpus) => Some(
                server::start(
                    &server::ServerPlan {
                        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                        cpus: cpus.clone(),
                        duration: Some(Nanos(
                            plan.duration.as_ns().saturating_add(SERVER_GRACE_NS),
                        )),
                    },
                    &server_stop,
                )
                .map_err(NetError::Server)?,
            ),
            None => None,
        };
        let target = match (&server, plan.target) {
            (Some(s), _) => s.addr,
            (None, Some(t)) => t,
            (None, None) => return Err(NetError::NoTarget),
        };
        let (cpus, slots) = client_slots(&p.client_cpus, p.mode, p.concurrency);
        let host = target.to_string();
        let cplan = client::ClientPlan {
            mode: p.mode,
            target,
            request: http::build_request(&p.path, &host, p.mode == NetMode::Cps),
            cpus: cpus.clone(),
            slots,
            duration: plan.duration,
            timeout_ns: plan.timeout_ns,
            close: plan.close,
            max_transactions: plan.max_transactions,
            rate_per_s: p.rate,
        };
        let r = client::run(&cplan, stop);
        if let Some(s) = server {
            s.stop();
        }
        let r = r.map_err(NetError::Client)?;
        let secs = r.elapsed_ns as f64 / 1e9;
        out.push(NetResult {
            config: NetConfig {
                mode: p.mode,
                target: host,
                path: p.path.clone(),
                cpus,
                concurrency: p.concurrency,
                duration: plan.duration,
                timeout_ns: plan.timeout_ns,
                close: plan.close,
                max_transactions: plan.max_transactions,
                server_cpus: p.server_cpus.clone(),
            },
            sweep_cpus: p.sweep,
            elapsed_ns: r.elapsed_ns,
            connections: r.connections,
            transactions: r.transactions,
            bytes: r.bytes,
            rate_per_s: r.transactions as f64 / secs,
            bits_per_s: r.bytes as f64 * 8.0 / secs,
            errors: r.errors,
            connect: r.connect,
            ttfb: r.ttfb,
            total: r.total,
            per_second: r.per_second,
            sysctls: sysctls.clone(),
            in_flight_at_end: r.in_flight_at_end,
            open_loop: p.rate.map(|offered_per_s| OpenLoop {
                offered_per_s,
                scheduled: r.scheduled,
                missed_starts: r.missed_starts,
            }),
            load: None,
        });
    }
    Ok(out)
}

/// The client's event loops and the slots of each: CPS keeps `concurrency` in flight on every CPU;
/// throughput spreads `concurrency` connections over the CPUs (a CPU left with none runs no loop).
fn client_slots(cpus: &[u32], mode: NetMode, concurrency: u32) -> (Vec<u32>, Vec<u32>) {
    let loops = cpus.len() as u32;
    let slots: Vec<u32> = match mode {
        NetMode::Cps => vec![concurrency; loops as usize],
        NetMode::Throughput => (0..loops)
            .map(|i| concurrency / loops + u32::from(i < concurrency % loops))
            .collect(),
    };
    cpus.iter()
        .zip(slots)
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| (*c, n))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_spreads_connections_and_drops_idle_loops() {
        assert_eq!(
            client_slots(&[0, 1, 2], NetMode::Throughput, 2),
            (vec![0, 1], vec![1, 1])
        );
        assert_eq!(
            client_slots(&[0, 1], NetMode::Throughput, 5),
            (vec![0, 1], vec![3, 2])
        );
        assert_eq!(
            client_slots(&[4, 5], NetMode::Cps, 7),
            (vec![4, 5], vec![7, 7])
        );
    }
}
