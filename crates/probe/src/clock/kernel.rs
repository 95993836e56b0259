//! The kernel's own view of its clock: `adjtimex(2)`'s state (read-only, no privilege) and the steps of
//! CLOCK_REALTIME. A frequency correction moves CLOCK_REALTIME and CLOCK_MONOTONIC alike; only a set
//! (`clock_settime`, `ADJ_SETOFFSET`, a leap second) moves one against the other, so any change of their
//! difference beyond the readings' own bound is a step.

use rtgauge_model::clock::{Adjtimex, ClockStep, KernelClock, MAX_STEPS};

/// A change of REALTIME − MONOTONIC beyond the readings' bounds by at least this is a step, ns.
pub const STEP_FLOOR_NS: u64 = 1_000;

/// Readings tried for the tightest bound.
const TRIES: usize = 4;

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, ns, with its uncertainty: REALTIME is read between two
/// MONOTONIC reads, and the tightest of a few tries is kept.
pub fn realtime_offset() -> (i64, u64) {
    use crate::time::{now_ns, ClockId};
    let mut best = (0i64, u64::MAX);
    for _ in 0..TRIES {
        let m1 = now_ns(ClockId::Monotonic);
        let r = now_ns(ClockId::Realtime);
        let m2 = now_ns(ClockId::Monotonic);
        let half = m2.saturating_sub(m1).div_ceil(2);
        if half < best.1 {
            let mid = m1 / 2 + m2 / 2;
            best = (r as i64 - mid as i64, half);
        }
    }
    best
}

/// `adjtimex(2)` with no change asked.
pub fn adjtimex() -> std::io::Result<Adjtimex> {
    // SAFETY: an all-zero timex is a valid "read only" request (modes 0).
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable timex.
    let state = unsafe { libc::adjtimex(&mut t) };
    if state < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let nano = t.status & libc::STA_NANO != 0;
    Ok(Adjtimex {
        state,
        status: t.status as u32,
        offset_ns: if nano { t.offset } else { t.offset * 1000 },
        // ppm with a 16-bit fraction.
        freq_ppb: t.freq * 1000 / 65_536,
        maxerror_us: t.maxerror,
        esterror_us: t.esterror,
        tai_s: t.tai,
    })
}

/// The kernel's clock followed over a run.
#[derive(Debug, Clone, Default)]
pub struct KernelTracker {
    k: KernelClock,
    previous: Option<(i64, u64)>,
}

impl KernelTracker {
    /// One poll, `at_ns` after the start.
    pub fn poll(&mut self, at_ns: u64) {
        let now = realtime_offset();
        self.k.polls += 1;
        self.k.read_bound_max_ns = self.k.read_bound_max_ns.max(now.1);
        if let Some((before, bound)) = self.previous {
            let by_ns = now.0 - before;
            let bound_ns = bound + now.1;
            if by_ns.unsigned_abs() >= bound_ns + STEP_FLOOR_NS {
                let step = ClockStep {
                    at_ns,
                    by_ns,
                    bound_ns,
                };
                self.k.last_step = Some(step);
                if self.k.steps.len() < MAX_STEPS {
                    self.k.steps.push(step);
                } else {
                    self.k.steps_dropped += 1;
                }
            }
        }
        self.previous = Some(now);
        if let Ok(a) = adjtimex() {
            if !a.synchronised() {
                self.k.unsynchronised_polls += 1;
            }
            self.k.first.get_or_insert(a);
            self.k.last = Some(a);
        }
    }

    /// TAI − UTC at the last poll, s (0 where unknown).
    pub fn tai_s(&self) -> i32 {
        self.k.last.map_or(0, |a| a.tai_s)
    }

    /// What it saw so far.
    pub fn result(&self) -> KernelClock {
        self.k.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_against_monotonic_reads_the_same_twice() {
        let (a, ba) = realtime_offset();
        let (b, bb) = realtime_offset();
        assert!(ba < 1_000_000 && bb < 1_000_000, "bounds {ba} {bb}");
        assert!((a - b).unsigned_abs() <= ba + bb + STEP_FLOOR_NS, "{a} {b}");
    }

    #[test]
    fn adjtimex_reads_without_privilege_and_no_poll_sees_a_step_on_a_still_clock() {
        let a = adjtimex().unwrap();
        assert!((0..=5).contains(&a.state), "{a:?}");
        let mut k = KernelTracker::default();
        for i in 0..20 {
            k.poll(i);
        }
        let r = k.result();
        assert_eq!(r.polls, 20);
        assert_eq!(r.step_count(), 0, "{r:?}");
        assert!(r.last.is_some());
    }
}
