//! The free-running counter read by the busy-loop probe, and its frequency.
//!
//! x86-64: `lfence; rdtsc` — the fence keeps the read from being reordered before earlier loads, as the
//! kernel's `rdtsc_ordered()` does. aarch64: `isb; mrs cntvct_el0`. Elsewhere: CLOCK_MONOTONIC_RAW in ns.
//! The frequency is measured against CLOCK_MONOTONIC_RAW (not slewed by NTP): five 50 ms windows, each
//! bracketed by the tightest of several clock/counter read pairs; the median is used and the spread kept.
//! After a run, [`Calibration::cross_check_ppm`] compares counter-derived and clock elapsed times.

use crate::time::{self, ClockId};

/// Name of the counter this build reads.
#[cfg(target_arch = "x86_64")]
pub const SOURCE: &str = "tsc";
#[cfg(target_arch = "aarch64")]
pub const SOURCE: &str = "cntvct_el0";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const SOURCE: &str = "clock_gettime";

/// Read the counter.
#[inline(always)]
pub fn read() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: lfence and rdtsc are available on every x86-64 CPU and have no memory effects.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: reading the virtual counter is permitted at EL0 on Linux.
        unsafe {
            core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack))
        };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        time::now_ns(ClockId::MonotonicRaw)
    }
}

/// Converts counter ticks to ns with one 128-bit multiply (no division in the loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickConverter {
    mult: u64,
}

impl TickConverter {
    /// A converter for a counter running at `frequency_hz`.
    pub fn new(frequency_hz: u64) -> TickConverter {
        let f = frequency_hz.max(1) as u128;
        TickConverter {
            mult: (((1_000_000_000u128) << 32) / f).min(u64::MAX as u128) as u64,
        }
    }
    /// Nanoseconds in `ticks` (rounded down).
    #[inline(always)]
    pub fn ns(&self, ticks: u64) -> u64 {
        ((ticks as u128 * self.mult as u128) >> 32) as u64
    }
    /// Ticks in `ns` (rounded down), for thresholds.
    pub fn ticks(&self, ns: u64) -> u64 {
        (((ns as u128) << 32) / self.mult.max(1) as u128).min(u64::MAX as u128) as u64
    }
}

/// A measured counter frequency.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Counter ticks per second.
    pub frequency_hz: u64,
    /// Spread of the calibration's measurements, parts per million.
    pub spread_ppm: f64,
    /// How the frequency was had (e.g. measured against CLOCK_MONOTONIC_RAW).
    pub method: String,
}

/// A (clock ns, counter) pair taken as close together as this machine allows.
fn paired_read() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let a = time::now_ns(ClockId::MonotonicRaw);
        let c = read();
        let b = time::now_ns(ClockId::MonotonicRaw);
        if b - a < best.0 {
            best = (b - a, a + (b - a) / 2, c);
        }
    }
    (best.1, best.2)
}

/// Measure the counter frequency (~250 ms).
pub fn calibrate() -> Calibration {
    if SOURCE == "clock_gettime" {
        return Calibration {
            frequency_hz: 1_000_000_000,
            spread_ppm: 0.0,
            method: "counter is CLOCK_MONOTONIC_RAW (ns)".into(),
        };
    }
    let mut f: Vec<f64> = (0..5)
        .map(|_| {
            let (n0, c0) = paired_read();
            std::thread::sleep(std::time::Duration::from_millis(50));
            let (n1, c1) = paired_read();
            (c1.wrapping_sub(c0)) as f64 * 1e9 / (n1.saturating_sub(n0)).max(1) as f64
        })
        .collect();
    f.sort_by(f64::total_cmp);
    let median = f[2];
    let spread_ppm = (f[4] - f[0]) / median * 1e6;
    Calibration {
        frequency_hz: median.round() as u64,
        spread_ppm,
        method: format!("{SOURCE} ticks over 5 x 50 ms of CLOCK_MONOTONIC_RAW, median"),
    }
}

impl Calibration {
    /// Relative error of counter-derived elapsed time over a run, ppm.
    pub fn cross_check_ppm(&self, ticks: u64, raw_ns: u64) -> f64 {
        if raw_ns == 0 {
            return 0.0;
        }
        let by_counter = ticks as f64 * 1e9 / self.frequency_hz.max(1) as f64;
        (by_counter - raw_ns as f64) / raw_ns as f64 * 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_agrees_with_the_clock() {
        let cal = calibrate();
        assert!(cal.frequency_hz > 1_000_000, "{cal:?}");
        assert!(cal.spread_ppm < 5_000.0, "{cal:?}");
        let (n0, c0) = paired_read();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (n1, c1) = paired_read();
        let ppm = cal.cross_check_ppm(c1 - c0, n1 - n0);
        assert!(ppm.abs() < 2_000.0, "{ppm} ppm");
    }

    #[test]
    fn converter_round_trips() {
        let c = TickConverter::new(2_600_000_000);
        assert_eq!(c.ns(2_600_000_000), 999_999_999); // floor of exactly 1 s
        assert!((c.ns(2600) as i64 - 1000).abs() <= 1);
        assert!((c.ticks(1000) as i64 - 2600).abs() <= 1);
        assert_eq!(TickConverter::new(1_000_000_000).ns(12345), 12345);
    }
}
