//! The plan of a network measurement: its points (mode, path, client and server CPUs, slots), as the CLI's
//! flags resolve them, expanded over a CPU sweep, and checked against the file descriptors the process may
//! hold.

use rtgauge_model::net::{CloseMode, NetMode};
use rtgauge_model::Nanos;
use std::net::SocketAddr;

/// One measurement: mode, path, client CPUs and slots, and (optionally) the reference server's CPUs.
#[derive(Debug, Clone)]
pub struct Point {
    /// Connections per second or keep-alive throughput.
    pub mode: NetMode,
    /// The HTTP path requested.
    pub path: String,
    /// CPUs of the client's event loops.
    pub client_cpus: Vec<u32>,
    /// CPS: in flight per CPU; throughput: connections in all.
    pub concurrency: u32,
    /// CPUs of the reference server, when rtgauge serves.
    pub server_cpus: Option<Vec<u32>>,
    /// The CPU count of this point in a sweep (None: not a sweep).
    pub sweep: Option<u32>,
    /// Open-loop offered rate (CPS `--rate`), else closed loop.
    pub rate: Option<f64>,
}

/// Everything resolved before anything runs.
#[derive(Debug, Clone)]
pub struct NetPlan {
    /// `None` when every point serves itself (the reference server on loopback).
    pub target: Option<SocketAddr>,
    /// The measurements, in order.
    pub points: Vec<Point>,
    /// How long each point offers load.
    pub duration: Nanos,
    /// A transaction still unanswered after this long counts as a timeout, ns.
    pub timeout_ns: u64,
    /// How connections end (FIN or RST).
    pub close: CloseMode,
    /// Stop a point after this many successful transactions in all.
    pub max_transactions: u64,
    /// Failed attempts tolerated before the run counts as failed.
    pub max_errors: u64,
}

/// What one load command measures, once its flags are resolved and checked.
#[derive(Debug, Clone)]
pub struct PointsSpec {
    /// Connections per second or keep-alive throughput.
    pub mode: NetMode,
    /// The HTTP path requested.
    pub path: String,
    /// CPUs of the client's event loops.
    pub client_cpus: Vec<u32>,
    /// CPUs of the reference server, when rtgauge serves.
    pub server_cpus: Option<Vec<u32>>,
    /// CPU counts of a sweep, each within the CPUs it grows over (the server's when rtgauge serves, else
    /// the client's).
    pub sweep: Option<Vec<u32>>,
    /// CPS: in flight per CPU; throughput: connections in all.
    pub concurrency: u32,
    /// At each point, also measure keep-alive throughput of this path.
    pub and_throughput: Option<String>,
}

/// The points of a spec: one, or one per sweep count (the first K CPUs of the server, else of the client),
/// each followed by its throughput point when asked.
pub fn points(spec: &PointsSpec) -> Vec<Point> {
    let mut points = Vec::new();
    let mut push = |client_cpus: Vec<u32>, server_cpus: Option<Vec<u32>>, k: Option<u32>| {
        points.push(Point {
            mode: spec.mode,
            path: spec.path.clone(),
            client_cpus: client_cpus.clone(),
            concurrency: spec.concurrency,
            server_cpus: server_cpus.clone(),
            sweep: k,
            rate: None,
        });
        if let Some(p) = &spec.and_throughput {
            points.push(Point {
                mode: NetMode::Throughput,
                path: p.clone(),
                client_cpus,
                concurrency: (spec.concurrency / 2).max(1)
                    * server_cpus.as_ref().map_or(1, |s| s.len() as u32),
                server_cpus,
                sweep: k,
                rate: None,
            });
        }
    };
    let first = |cpus: &[u32], k: u32| cpus[..(k as usize).min(cpus.len())].to_vec();
    match (&spec.sweep, &spec.server_cpus) {
        (None, serve) => push(spec.client_cpus.clone(), serve.clone(), None),
        (Some(ks), Some(s)) => {
            for &k in ks {
                push(spec.client_cpus.clone(), Some(first(s, k)), Some(k));
            }
        }
        (Some(ks), None) => {
            for &k in ks {
                push(first(&spec.client_cpus, k), None, Some(k));
            }
        }
    }
    points
}

impl Point {
    /// File descriptors the point's connections hold: the client's, and as many again on a reference
    /// server in this process.
    pub fn descriptors(&self) -> (u64, u64) {
        let fds = match self.mode {
            NetMode::Cps => u64::from(self.concurrency) * self.client_cpus.len() as u64,
            NetMode::Throughput => u64::from(self.concurrency),
        };
        (fds, if self.server_cpus.is_some() { fds } else { 0 })
    }
}

impl NetPlan {
    /// The connections of the first point that needs more descriptors than `nofile` (RLIMIT_NOFILE)
    /// allows, with 64 kept for everything else.
    pub fn short_of_descriptors(&self, nofile: u64) -> Option<u64> {
        self.points.iter().find_map(|p| {
            let (fds, server_fds) = p.descriptors();
            (fds + server_fds + 64 > nofile).then_some(fds)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(sweep: Option<Vec<u32>>, serve: Option<Vec<u32>>, and: Option<&str>) -> PointsSpec {
        PointsSpec {
            mode: NetMode::Cps,
            path: "/2b".into(),
            client_cpus: vec![0, 1, 2, 3],
            server_cpus: serve,
            sweep,
            concurrency: 8,
            and_throughput: and.map(str::to_string),
        }
    }

    #[test]
    fn a_sweep_grows_the_server_when_rtgauge_serves_else_the_client() {
        let p = points(&spec(Some(vec![1, 2]), Some(vec![4, 5, 6]), None));
        let servers: Vec<_> = p.iter().map(|p| p.server_cpus.clone().unwrap()).collect();
        assert_eq!(servers, [vec![4], vec![4, 5]]);
        assert!(p.iter().all(|p| p.client_cpus == [0, 1, 2, 3]));
        let p = points(&spec(Some(vec![1, 4]), None, None));
        let clients: Vec<_> = p.iter().map(|p| p.client_cpus.clone()).collect();
        assert_eq!(clients, [vec![0], vec![0, 1, 2, 3]]);
        assert_eq!(
            p.iter().map(|p| p.sweep).collect::<Vec<_>>(),
            [Some(1), Some(4)]
        );
    }

    #[test]
    fn and_throughput_follows_each_point_with_slots_per_server_cpu() {
        let p = points(&spec(Some(vec![2]), Some(vec![4, 5]), Some("/128k")));
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[1].mode, p[1].path.as_str()),
            (NetMode::Throughput, "/128k")
        );
        assert_eq!(p[1].concurrency, 4 * 2);
    }

    #[test]
    fn descriptors_count_both_ends_of_a_served_point() {
        let plan = NetPlan {
            target: None,
            points: points(&spec(None, Some(vec![4]), None)),
            duration: Nanos(1),
            timeout_ns: 1,
            close: CloseMode::Server,
            max_transactions: 1,
            max_errors: 0,
        };
        assert_eq!(plan.points[0].descriptors(), (32, 32));
        assert_eq!(plan.short_of_descriptors(128), None);
        assert_eq!(plan.short_of_descriptors(127), Some(32));
    }
}
