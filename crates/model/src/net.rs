//! Result of the network-function capacity probe (`rtgauge net`): connections per second (a new TCP
//! connection, one HTTP/1.1 GET, the whole response, teardown — seed 004's "L4 CPS", or "L7 CPS" when the
//! target is a layer-7 proxy) and keep-alive throughput (seed 004's 128 KB objects).
//!
//! Invariants: every counter is exact (no sampling); every failed attempt is counted in exactly one
//! [`NetErrors`] field; `per_second` covers the whole measurement, one entry per started second, so that
//! a comparison can bootstrap a confidence interval from it.

use crate::latency::LatencyStats;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the load generator does with each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetMode {
    /// New connection, one GET with `Connection: close`, whole response, close.
    Cps,
    /// Keep-alive connections, one GET after another.
    Throughput,
}

impl NetMode {
    /// The name used on the command line and in documents ("cps", "throughput").
    pub fn as_str(self) -> &'static str {
        match self {
            NetMode::Cps => "cps",
            NetMode::Throughput => "throughput",
        }
    }
}

/// Who ends a CPS connection, and so who keeps the TIME_WAIT state (see docs/net.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseMode {
    /// Wait for the server's FIN, then close: the server holds TIME_WAIT, the client's ephemeral port is
    /// free at once. The default, and what `Connection: close` asks of a server.
    Server,
    /// Close as soon as the response is complete: the client holds TIME_WAIT (as wrk does).
    Client,
    /// Close with SO_LINGER {1, 0}: an RST instead of the FIN handshake, no TIME_WAIT anywhere. A different
    /// transaction: label it as such.
    Reset,
}

/// How the probe was configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetConfig {
    /// What is measured: new connections per second, or keep-alive throughput.
    pub mode: NetMode,
    /// The address loaded, `IP:PORT`.
    pub target: String,
    /// Request path, e.g. `/2b`.
    pub path: String,
    /// CPUs of the load generator, one pinned event loop each.
    pub cpus: Vec<u32>,
    /// CPS: connections in flight per CPU. Throughput: keep-alive connections in all.
    pub concurrency: u32,
    /// How long the load ran.
    #[serde(rename = "duration_ns")]
    pub duration: Nanos,
    /// A connection (CPS) or a request (throughput) that takes longer counts as a timeout.
    pub timeout_ns: u64,
    /// Who ends a CPS connection.
    pub close: CloseMode,
    /// Upper bound on completed transactions (the run also stops at `duration_ns`).
    pub max_transactions: u64,
    /// CPUs of rtgauge's own reference server when the probe started one, else `None` (external target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<Vec<u32>>,
}

/// Failed attempts, by kind. Each failed connection or request is counted once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NetErrors {
    /// ECONNREFUSED: nothing listens (or a firewall rejects).
    pub refused: u64,
    /// ECONNRESET / EPIPE: the peer reset the connection before the response was complete.
    pub reset: u64,
    /// No complete response within the timeout.
    pub timeout: u64,
    /// EADDRNOTAVAIL: no ephemeral port (or source address) left for a new connection.
    pub port_exhaustion: u64,
    /// ENETUNREACH / EHOSTUNREACH: no route to the target.
    pub unreachable: u64,
    /// The peer closed before the response was complete.
    pub closed_early: u64,
    /// Not an HTTP/1.x response.
    pub bad_response: u64,
    /// A complete response whose status was not 2xx.
    pub status: u64,
    /// Any other error (EMFILE, …).
    pub other: u64,
}

impl NetErrors {
    /// Failed attempts of every kind together.
    pub fn total(&self) -> u64 {
        self.kinds().iter().map(|k| k.1).sum()
    }

    /// Add the counts of `other` to these.
    pub fn add(&mut self, other: &NetErrors) {
        self.refused += other.refused;
        self.reset += other.reset;
        self.timeout += other.timeout;
        self.port_exhaustion += other.port_exhaustion;
        self.unreachable += other.unreachable;
        self.closed_early += other.closed_early;
        self.bad_response += other.bad_response;
        self.status += other.status;
        self.other += other.other;
    }

    /// `(name, count)` of every kind, in a fixed order.
    pub fn kinds(&self) -> [(&'static str, u64); 9] {
        [
            ("refused", self.refused),
            ("reset", self.reset),
            ("timeout", self.timeout),
            ("port_exhaustion", self.port_exhaustion),
            ("unreachable", self.unreachable),
            ("closed_early", self.closed_early),
            ("bad_response", self.bad_response),
            ("status", self.status),
            ("other", self.other),
        ]
    }
}

/// One second of the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NetSecond {
    /// Completed transactions (CPS: connections; throughput: requests).
    pub transactions: u64,
    /// Response bytes received (headers and body).
    pub bytes: u64,
    /// Failed attempts (every kind).
    pub errors: u64,
}

/// The whole probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetResult {
    /// How the probe was configured.
    pub config: NetConfig,
    /// Number of CPUs of this point of a `--sweep-cpus` run (server CPUs when rtgauge served, else client
    /// CPUs); `None` outside a sweep. Measure keys carry it (`net.cps.cpus4.rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_cpus: Option<u32>,
    /// Measured time, ns.
    pub elapsed_ns: u64,
    /// Connections opened (attempted).
    pub connections: u64,
    /// Successful transactions: CPS, closed connections that carried a complete 2xx response; throughput,
    /// complete 2xx responses.
    pub transactions: u64,
    /// Response bytes received, headers included.
    pub bytes: u64,
    /// transactions / elapsed.
    pub rate_per_s: f64,
    /// bytes · 8 / elapsed.
    pub bits_per_s: f64,
    /// Failed attempts, by kind.
    pub errors: NetErrors,
    /// From connect() to the connection being established.
    pub connect: LatencyStats,
    /// From the request being written to the first response byte.
    pub ttfb: LatencyStats,
    /// CPS: from connect() to the response complete; throughput: from the request written to the
    /// response complete.
    pub total: LatencyStats,
    /// Transactions, bytes and errors per second, in time order.
    pub per_second: Vec<NetSecond>,
    /// Kernel settings that bound CPS (ip_local_port_range, tcp_tw_reuse, somaxconn, …), as read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, String>,
    /// Connections still in flight when the time ran out (not errors: cut off by the end of the run).
    pub in_flight_at_end: u64,
    /// CPS at a fixed offered rate (`net cps --rate`), absent for the closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
    /// Background load while the point was measured (`--load`, `--load-cmd`), as achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::load::LoadResult>,
}

/// An open-loop (fixed-rate) CPS measurement: what was offered against what was achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// New connections per second offered, in all.
    pub offered_per_s: f64,
    /// Starts the schedule called for during the run.
    pub scheduled: u64,
    /// Scheduled starts not made because every connection slot was busy (raise --concurrency).
    pub missed_starts: u64,
}

impl NetResult {
    /// Key prefix of this result's measures: `net.cps`, `net.throughput`, `net.cps.cpus4`.
    pub fn key_prefix(&self) -> String {
        match self.sweep_cpus {
            Some(n) => format!("net.{}.cpus{n}", self.config.mode.as_str()),
            None => format!("net.{}", self.config.mode.as_str()),
        }
    }

    /// Full seconds only: a partial last second would bias the replicates low.
    pub fn full_seconds(&self) -> &[NetSecond] {
        let full = (self.elapsed_ns / 1_000_000_000) as usize;
        &self.per_second[..full.min(self.per_second.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_total_every_kind() {
        let e = NetErrors {
            refused: 1,
            reset: 2,
            timeout: 3,
            port_exhaustion: 4,
            unreachable: 5,
            closed_early: 6,
            bad_response: 7,
            status: 8,
            other: 9,
        };
        assert_eq!(e.total(), 45);
        assert_eq!(e.kinds().iter().map(|k| k.1).sum::<u64>(), 45);
        let mut f = NetErrors::default();
        f.add(&e);
        f.add(&e);
        assert_eq!(f.total(), 90);
    }
}
