//! The network-function capacity probe's result (`rtgauge net`) as [`KindData`]: rates, errors and latency
//! distributions, with per-second replicates.

use super::*;
use rtgauge_model::net::*;

impl KindData for NetResult {
    fields!(load, elapsed, settings);

    /// The comparable figures: rate (with per-second replicates), bit rate for throughput, errors, and
    /// the latency distributions.
    fn measures(&self) -> Vec<Measure> {
        let p = self.key_prefix();
        let what = match self.config.mode {
            NetMode::Cps => "connections",
            NetMode::Throughput => "requests",
        };
        let secs = self.full_seconds();
        let mut out = vec![Measure::new(
            format!("{p}.rate"),
            format!("{what} per second"),
            MeasureUnit::PerSecond,
            self.rate_per_s,
            Better::Higher,
        )
        .with_replicates(secs.iter().map(|s| s.transactions as f64).collect())];
        if self.config.mode == NetMode::Throughput {
            out.push(
                Measure::new(
                    format!("{p}.bitrate"),
                    "throughput",
                    MeasureUnit::BitsPerSecond,
                    self.bits_per_s,
                    Better::Higher,
                )
                .with_replicates(secs.iter().map(|s| s.bytes as f64 * 8.0).collect()),
            );
        }
        out.push(Measure::new(
            format!("{p}.errors"),
            "failed attempts",
            MeasureUnit::Count,
            self.errors.total() as f64,
            Better::Lower,
        ));
        out.extend(latency_measures(
            &format!("{p}.latency"),
            "transaction time",
            std::iter::once(&self.total),
        ));
        out.extend(latency_measures(
            &format!("{p}.connect"),
            "connect time",
            std::iter::once(&self.connect),
        ));
        out.extend(latency_measures(
            &format!("{p}.ttfb"),
            "time to first byte",
            std::iter::once(&self.ttfb),
        ));
        out
    }

    fn export_rows(&self, _facts: &RunFacts) -> Vec<ExportRow<'_>> {
        // One row: the transaction-time distribution, failed attempts as "missed".
        vec![ExportRow {
            probe: self.key_prefix(),
            index: 0,
            cpu: None,
            stats: &self.total,
            missed: Some(self.errors.total()),
            over: None,
        }]
    }
}

impl super::KindTables for NetResult {
    /// The one-run floors (`crate::compare::one_run`): per measure of `net cps` and `net throughput` (any core
    /// count of `--sweep-cpus`), the largest ratio (either way) between two idle runs of one platform, rounded
    /// up to two significant digits — `bench/compare_aa_probes floors 12` of 2026-11-28 on this project's 2-vCPU
    /// VM: 12 idle runs of `cps --concurrency 16` and `throughput --connections 8` against rtgauge's reference
    /// server on loopback (server CPU 0, client CPU 1, 5 s each), 66 pairs. Rates: the larger of two sessions;
    /// times: the second session's, after a fix to their timestamps. Failed attempts never moved (0 in every run;
    /// counts compare as (B + 1)/(A + 1)): the margin decides them.
    const ONE_RUN_FLOORS: &'static [(&'static str, f64)] = &[
        ("net.cps.*.rate", 1.4),
        ("net.cps.*.errors", 1.0),
        ("net.cps.*.latency.min", 2.2),
        ("net.cps.*.latency.p50", 1.4),
        ("net.cps.*.latency.p99", 2.6),
        ("net.cps.*.latency.p99.9", 2.9),
        ("net.cps.*.latency.p99.99", 3.2),
        ("net.cps.*.latency.max", 3.2),
        ("net.cps.*.connect.min", 1.4),
        ("net.cps.*.connect.p50", 1.3),
        ("net.cps.*.connect.p99", 1.4),
        ("net.cps.*.connect.p99.9", 2.4),
        ("net.cps.*.connect.p99.99", 4.0),
        ("net.cps.*.connect.max", 4.6),
        ("net.cps.*.ttfb.min", 2.6),
        ("net.cps.*.ttfb.p50", 1.3),
        ("net.cps.*.ttfb.p99", 2.7),
        ("net.cps.*.ttfb.p99.9", 2.9),
        ("net.cps.*.ttfb.p99.99", 3.2),
        ("net.cps.*.ttfb.max", 3.2),
        ("net.throughput.*.rate", 2.3),
        ("net.throughput.*.bitrate", 2.3),
        ("net.throughput.*.errors", 1.0),
        ("net.throughput.*.latency.min", 2.1),
        ("net.throughput.*.latency.p50", 2.5),
        ("net.throughput.*.latency.p99", 2.1),
        ("net.throughput.*.latency.p99.9", 5.8),
        ("net.throughput.*.latency.p99.99", 3.4),
        ("net.throughput.*.latency.max", 3.5),
        ("net.throughput.*.connect.min", 2.3),
        ("net.throughput.*.connect.p50", 1.8),
        ("net.throughput.*.connect.p99", 1.7),
        ("net.throughput.*.connect.p99.9", 1.7),
        ("net.throughput.*.connect.p99.99", 1.7),
        ("net.throughput.*.connect.max", 1.7),
        ("net.throughput.*.ttfb.min", 1.8),
        ("net.throughput.*.ttfb.p50", 2.4),
        ("net.throughput.*.ttfb.p99", 2.0),
        ("net.throughput.*.ttfb.p99.9", 6.1),
        ("net.throughput.*.ttfb.p99.99", 3.5),
        ("net.throughput.*.ttfb.max", 3.5),
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::latency::new_histogram;
    use std::collections::BTreeMap;

    fn stats(v: &[u64]) -> LatencyStats {
        let mut h = new_histogram();
        for x in v {
            h.record(*x).unwrap();
        }
        let (min, max) = (*v.iter().min().unwrap(), *v.iter().max().unwrap());
        LatencyStats::from_parts(&h, min, max, v.iter().sum(), 0)
    }

    fn result(mode: NetMode, sweep: Option<u32>) -> NetResult {
        NetResult {
            config: NetConfig {
                mode,
                target: "127.0.0.1:80".into(),
                path: "/2b".into(),
                cpus: vec![1],
                concurrency: 4,
                duration: rtgauge_model::Nanos(3_000_000_000),
                timeout_ns: 2_000_000_000,
                close: CloseMode::Server,
                max_transactions: 1_000_000,
                server_cpus: None,
            },
            sweep_cpus: sweep,
            elapsed_ns: 2_500_000_000,
            connections: 30,
            transactions: 25,
            bytes: 2500,
            rate_per_s: 10.0,
            bits_per_s: 8000.0,
            errors: NetErrors {
                reset: 2,
                timeout: 1,
                ..Default::default()
            },
            connect: stats(&[1_000, 2_000]),
            ttfb: stats(&[3_000]),
            total: stats(&[5_000, 9_000]),
            per_second: vec![
                NetSecond {
                    transactions: 10,
                    bytes: 1000,
                    errors: 1,
                },
                NetSecond {
                    transactions: 11,
                    bytes: 1100,
                    errors: 2,
                },
                NetSecond {
                    transactions: 4,
                    bytes: 400,
                    errors: 0,
                },
            ],
            sysctls: BTreeMap::new(),
            in_flight_at_end: 0,
            open_loop: None,
            load: None,
        }
    }

    #[test]
    fn cps_measures_have_stable_keys_and_full_second_replicates() {
        let m = result(NetMode::Cps, None).measures();
        let rate = m.iter().find(|m| m.key == "net.cps.rate").unwrap();
        assert_eq!(rate.better, Better::Higher);
        // The partial third second is left out.
        assert_eq!(rate.replicates, vec![10.0, 11.0]);
        let errors = m.iter().find(|m| m.key == "net.cps.errors").unwrap();
        assert_eq!(errors.value, 3.0);
        assert!(m.iter().any(|m| m.key == "net.cps.latency.p99"));
        assert!(m.iter().any(|m| m.key == "net.cps.connect.p50"));
        assert!(m.iter().any(|m| m.key == "net.cps.ttfb.max"));
        assert!(!m.iter().any(|m| m.key.contains("bitrate")));
    }

    #[test]
    fn throughput_and_sweep_keys() {
        let m = result(NetMode::Throughput, Some(4)).measures();
        let bits = m
            .iter()
            .find(|m| m.key == "net.throughput.cpus4.bitrate")
            .unwrap();
        assert_eq!(bits.unit, MeasureUnit::BitsPerSecond);
        assert_eq!(bits.replicates, vec![8000.0, 8800.0]);
        assert!(m.iter().any(|m| m.key == "net.throughput.cpus4.rate"));
    }
}
