//! Time for the hot loops: `clock_gettime` (vDSO, no syscall on x86-64 with a TSC clocksource) and
//! absolute `clock_nanosleep`. Times are u64 nanoseconds since the clock's epoch; `tv_sec` is never truncated.

/// The clocks a probe may measure with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockId {
    /// CLOCK_MONOTONIC: steady, slewed by NTP, what cyclictest measures with by default.
    Monotonic,
    /// CLOCK_REALTIME: wall-clock time, which can jump when it is set.
    Realtime,
    /// Not slewed by NTP: the reference for counter calibration.
    MonotonicRaw,
}

impl ClockId {
    /// The kernel's id of this clock, for `clock_gettime` and `clock_nanosleep`.
    pub fn id(self) -> libc::clockid_t {
        match self {
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
            ClockId::Realtime => libc::CLOCK_REALTIME,
            ClockId::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
        }
    }
    /// The clock's name as the run document records it.
    pub fn name(self) -> &'static str {
        match self {
            ClockId::Monotonic => "monotonic",
            ClockId::Realtime => "realtime",
            ClockId::MonotonicRaw => "monotonic_raw",
        }
    }
}

/// Current time of `clock`, ns.
#[inline(always)]
pub fn now_ns(clock: ClockId) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; clock ids are constants the kernel supports.
    unsafe { libc::clock_gettime(clock.id(), &mut ts) };
    ts_to_ns(&ts)
}

/// CPU time the calling thread has used (user and system), ns: what a housekeeping task costs.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_THREAD_CPUTIME_ID is always supported.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts_to_ns(&ts)
}

#[inline(always)]
fn ts_to_ns(ts: &libc::timespec) -> u64 {
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[inline(always)]
fn ns_to_ts(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleep until `deadline_ns` of `clock` (TIMER_ABSTIME). Returns 0 or the error number; EINTR is retried, since
/// an absolute deadline is unaffected by the interruption.
#[inline(always)]
pub fn sleep_until(clock: ClockId, deadline_ns: u64) -> i32 {
    let ts = ns_to_ts(deadline_ns);
    loop {
        // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null for TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(clock.id(), libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
        };
        if r != libc::EINTR {
            return r;
        }
    }
}

/// Sleep for `ns` relative to now (cyclictest `-r`). Returns 0 or the error number.
#[inline(always)]
pub fn sleep_for(clock: ClockId, ns: u64) -> i32 {
    let ts = ns_to_ts(ns);
    // SAFETY: as above; an interrupted relative sleep is not resumed (cyclictest does the same).
    unsafe { libc::clock_nanosleep(clock.id(), 0, &ts, std::ptr::null_mut()) }
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, ns: its change over a run is how far the wall clock was stepped or
/// slewed.
pub fn realtime_minus_monotonic() -> i64 {
    let m = now_ns(ClockId::Monotonic);
    let r = now_ns(ClockId::Realtime);
    let m2 = now_ns(ClockId::Monotonic);
    r as i64 - (m / 2 + m2 / 2) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances_and_absolute_sleep_is_not_early() {
        let a = now_ns(ClockId::Monotonic);
        let target = a + 2_000_000;
        assert_eq!(sleep_until(ClockId::Monotonic, target), 0);
        let b = now_ns(ClockId::Monotonic);
        assert!(b >= target, "woke {} ns early", target - b);
    }

    #[test]
    fn timespec_conversion_keeps_seconds() {
        let ns = 7 * 86_400 * 1_000_000_000 + 123;
        assert_eq!(ts_to_ns(&ns_to_ts(ns)), ns);
    }
}
