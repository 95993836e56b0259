//! `net cps --rate R[,R…] [--p99-max TIME]`: the open-loop (fixed offered rate) mode of the CPS probe, and
//! the network capacity it gives: the highest offered rate whose p99 connection latency stays within a
//! bound. A closed loop measures how fast the server goes when pushed; an open loop measures the latency
//! a client sees at a given arrival rate, which is what a network function's requirement is written in.

use super::net::NetPlan;
use rtgauge_model::net::NetResult;
use rtgauge_model::Nanos;
use std::process::ExitCode;

/// Offered rates, connections per second, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub Vec<f64>);

pub fn parse_rates(s: &str) -> Result<Rates, String> {
    let mut v = Vec::new();
    for t in s.split(',').map(str::trim) {
        let r: f64 = t
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite() && *r >= 1.0 && *r <= 10_000_000.0)
            .ok_or_else(|| {
                format!("rate '{t}' is not a number of connections per second (1 to 10000000)")
            })?;
        v.push(r);
    }
    Ok(Rates(v))
}

/// One point per offered rate for each point of the plan (closed loop when no rate is given).
pub fn expand(mut plan: NetPlan, rates: Option<&Rates>) -> NetPlan {
    let Some(rates) = rates else {
        return plan;
    };
    plan.points = plan
        .points
        .iter()
        .flat_map(|p| {
            rates.0.iter().map(move |&r| {
                let mut q = p.clone();
                // `--and-throughput` points stay closed-loop: the rate is for new connections.
                if q.mode == rtgauge_model::net::NetMode::Cps {
                    q.rate = Some(r);
                }
                q
            })
        })
        .collect();
    plan.points.dedup_by(|a, b| {
        a.rate.is_none() && b.rate.is_none() && a.mode == b.mode && a.sweep == b.sweep
    });
    plan
}

/// Whether an open-loop point meets `bound`: p99 within it and no start missed.
fn holds(r: &NetResult, bound: u64) -> bool {
    let p99 = r.total.percentile(99.0).unwrap_or(r.total.max_ns);
    p99 <= bound && r.open_loop.as_ref().is_some_and(|o| o.missed_starts == 0)
}

/// Print the offered-vs-achieved table with latency, and the capacity when `p99_max` is given; the exit
/// code becomes 1 when no rate holds.
pub fn report(
    results: &[NetResult],
    p99_max: Option<Nanos>,
    code: ExitCode,
) -> std::io::Result<ExitCode> {
    let points: Vec<&NetResult> = results.iter().filter(|r| r.open_loop.is_some()).collect();
    if points.is_empty() {
        return Ok(code);
    }
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        assert_eq!(
            parse_rates("500, 1000").expect("valid"),
            Rates(vec![500.0, 1000.0])
        );
        assert!(parse_rates("0").is_err());
        assert!(parse_rates("fast").is_err());
        assert!(parse_rates("1,,2").is_err());
    }
}
