//! The network-function capacity probe (`rtgauge net`) in every view: one text block per measurement (rate,
//! errors by kind, latency percentiles, per-second rates), the sweep table of seed 004's figure 3, and its
//! section of the run page (its measures). Pure functions of model data.

use super::KindView;
use crate::text::TextOptions;
use rtgauge_analysis::kind::KindData;
use rtgauge_model::kind::RunFacts;
use rtgauge_model::latency::LatencyStats;
use rtgauge_model::net::{CloseMode, NetMode, NetResult};
use rtgauge_model::units;
use rtgauge_model::CpuSet;

fn latency_row(s: &mut String, name: &str, l: &LatencyStats) {
    use std::fmt::Write as _;
    if l.count == 0 {
        let _ = writeln!(s, "  {name:<26} (none)");
        return;
    }
    let p = |q: f64| units::us(l.percentile(q).unwrap_or(0));
    let _ = writeln!(
        s,
        "  {name:<26} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.1}",
        units::us(l.min_ns),
        p(50.0),
        p(90.0),
        p(99.0),
        p(99.9),
        units::us(l.max_ns)
    );
}

/// One result as text: rate, errors by kind, latency percentiles, the per-second rates.
pub fn render_result(result: &NetResult) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let c = &result.config;
    let server = c
        .server_cpus
        .as_ref()
        .map(|s| {
            format!(
                ", reference server on CPUs {}",
                CpuSet::new(s.iter().copied())
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "\nnet {} http://{}{} — client CPUs {}{server}, {:.1} s",
        c.mode.as_str(),
        c.target,
        c.path,
        CpuSet::new(c.cpus.iter().copied()),
        result.elapsed_ns as f64 / 1e9
    );
    match c.mode {
        NetMode::Cps => {
            let _ = writeln!(
                s,
                "  {:.0} connections/s ({} complete of {} opened, {} in flight per CPU, closed by the {})",
                result.rate_per_s,
                result.transactions,
                result.connections,
                c.concurrency,
                match c.close {
                    CloseMode::Server => "server",
                    CloseMode::Client => "client",
                    CloseMode::Reset => "client with RST",
                }
            );
        }
        NetMode::Throughput => {
            let _ = writeln!(
                s,
                "  {:.2} Gbit/s, {:.0} requests/s ({} requests over {} connections)",
                result.bits_per_s / 1e9,
                result.rate_per_s,
                result.transactions,
                c.concurrency
            );
        }
    }
    let kinds: Vec<String> = result
        .errors
        .kinds()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        s,
        "  errors: {}{}",
        result.errors.total(),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    );
    let _ = writeln!(
        s,
        "  {:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "latency µs", "min", "p50", "p90", "p99", "p99.9", "max"
    );
    latency_row(&mut s, "connect", &result.connect);
    latency_row(&mut s, "time to first byte", &result.ttfb);
    latency_row(
        &mut s,
        match c.mode {
            NetMode::Cps => "connection (to last byte)",
            NetMode::Throughput => "request",
        },
        &result.total,
    );
    let rates: Vec<String> = result
        .per_second
        .iter()
        .map(|p| p.transactions.to_string())
        .collect();
    let _ = writeln!(s, "  per second: {}", rates.join(" "));
    s
}

/// The sweep table (seed 004, figure 3): rate per core count, per core, and scaling against the first.
pub fn render_sweep(results: &[NetResult]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let ks: Vec<u32> = {
        let mut v: Vec<u32> = results.iter().filter_map(|r| r.sweep_cpus).collect();
        v.dedup();
        v
    };
    if ks.is_empty() {
        return s;
    }
    let find = |k: u32, m: NetMode| {
        results
            .iter()
            .find(|r| r.sweep_cpus == Some(k) && r.config.mode == m)
    };
    let has_cps = results.iter().any(|r| r.config.mode == NetMode::Cps);
    let has_tp = results.iter().any(|r| r.config.mode == NetMode::Throughput);
    let who = if results.iter().any(|r| r.config.server_cpus.is_some()) {
        "server"
    } else {
        "client"
    };
    let _ = writeln!(s, "\n{who} CPUs sweep:");
    let mut head = format!("  {:>5}", "CPUs");
    if has_cps {
        let _ = write!(head, " {:>12} {:>12} {:>8}", "CPS", "CPS/CPU", "scaling");
    }
    if has_tp {
        let _ = write!(
            head,
            " {:>9} {:>11} {:>8}",
            "Gbit/s", "requests/s", "scaling"
        );
    }
    let _ = write!(head, " {:>7}", "errors");
    let _ = writeln!(s, "{head}");
    let first_cps = ks
        .first()
        .and_then(|k| find(*k, NetMode::Cps))
        .map(|r| r.rate_per_s);
    let first_tp = ks
        .first()
        .and_then(|k| find(*k, NetMode::Throughput))
        .map(|r| r.bits_per_s);
    for k in ks {
        let mut line = format!("  {k:>5}");
        let mut errors = 0;
        if has_cps {
            match find(k, NetMode::Cps) {
                Some(r) => {
                    errors += r.errors.total();
                    let scale = first_cps
                        .filter(|f| *f > 0.0)
                        .map_or(0.0, |f| r.rate_per_s / f);
                    let _ = write!(
                        line,
                        " {:>12.0} {:>12.0} {:>7.2}x",
                        r.rate_per_s,
                        r.rate_per_s / f64::from(k),
                        scale
                    );
                }
                None => line.push_str(&format!(" {:>12} {:>12} {:>8}", "-", "-", "-")),
            }
        }
        if has_tp {
            match find(k, NetMode::Throughput) {
                Some(r) => {
                    errors += r.errors.total();
                    let scale = first_tp
                        .filter(|f| *f > 0.0)
                        .map_or(0.0, |f| r.bits_per_s / f);
                    let _ = write!(
                        line,
                        " {:>9.2} {:>11.0} {:>7.2}x",
                        r.bits_per_s / 1e9,
                        r.rate_per_s,
                        scale
                    );
                }
                None => line.push_str(&format!(" {:>9} {:>11} {:>8}", "-", "-", "-")),
            }
        }
        let _ = writeln!(s, "{line} {errors:>7}");
    }
    s
}

impl KindView for NetResult {
    fn data(&self) -> &dyn KindData {
        self
    }

    fn section_title(&self) -> String {
        "Network capacity (net)".to_string()
    }

    fn terminal_section(&self, _facts: &RunFacts, _opts: TextOptions) -> String {
        render_result(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::latency::new_histogram;
    use rtgauge_model::net::{NetConfig, NetErrors};

    fn point(mode: NetMode, k: u32, rate: f64, bits: f64) -> NetResult {
        let empty = LatencyStats::from_parts(&new_histogram(), 0, 0, 0, 0);
        NetResult {
            config: NetConfig {
                mode,
                target: "127.0.0.1:1".into(),
                path: "/2b".into(),
                cpus: vec![3],
                concurrency: 8,
                duration: rtgauge_model::Nanos(1_000_000_000),
                timeout_ns: 1_000_000_000,
                close: CloseMode::Server,
                max_transactions: 1000,
                server_cpus: Some((0..k).collect()),
            },
            sweep_cpus: Some(k),
            elapsed_ns: 1_000_000_000,
            connections: rate as u64,
            transactions: rate as u64,
            bytes: (bits / 8.0) as u64,
            rate_per_s: rate,
            bits_per_s: bits,
            errors: NetErrors {
                reset: u64::from(k == 2),
                ..Default::default()
            },
            connect: empty.clone(),
            ttfb: empty.clone(),
            total: empty,
            per_second: Vec::new(),
            sysctls: Default::default(),
            in_flight_at_end: 0,
            open_loop: None,
            load: None,
        }
    }

    #[test]
    fn sweep_table_scales_against_the_first_point() {
        let t = render_sweep(&[
            point(NetMode::Cps, 1, 100.0, 0.0),
            point(NetMode::Throughput, 1, 50.0, 2e9),
            point(NetMode::Cps, 2, 190.0, 0.0),
            point(NetMode::Throughput, 2, 90.0, 3e9),
        ]);
        let rows: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(rows[0], "server CPUs sweep:");
        assert!(
            rows[1].contains("CPS/CPU") && rows[1].contains("Gbit/s"),
            "{t}"
        );
        let two: Vec<&str> = rows[3].split_whitespace().collect();
        assert_eq!(
            two,
            ["2", "190", "95", "1.90x", "3.00", "90", "1.50x", "2"],
            "{t}"
        );
        assert!(render_sweep(&[point(NetMode::Cps, 1, 1.0, 0.0)]).contains("1.00x"));
    }

    #[test]
    fn a_result_names_its_errors_and_empty_distributions() {
        let mut r = point(NetMode::Cps, 1, 0.0, 0.0);
        r.errors.refused = 7;
        let t = render_result(&r);
        assert!(t.contains("errors: 7 (refused 7)"), "{t}");
        assert!(t.contains("connect") && t.contains("(none)"), "{t}");
    }
}
