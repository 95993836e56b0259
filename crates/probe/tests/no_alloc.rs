//! The measuring loop must not allocate: a counting global allocator tallies allocations made on the
//! probe's own threads (named `rtgauge-cyc*`), and the tally must not depend on how many periods ran.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use rtgauge_model::cyclic::CyclicConfig;
use rtgauge_model::rt::SchedPolicy;
use rtgauge_probe::clock::Clock;
use rtgauge_probe::cyclic::{self, CyclicPlan, LiveThread};
use rtgauge_probe::stop::StopFlag;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

struct Counting;
static PROBE_ALLOCS: AtomicU64 = AtomicU64::new(0);

fn on_probe_thread() -> bool {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `name`; no allocation happens here.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name.starts_with(b"rtgauge-cyc")
}

// SAFETY: forwards to the system allocator; the bookkeeping neither allocates nor unwinds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if on_probe_thread() {
            PROBE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if on_probe_thread() {
            PROBE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocations_for(loops: u64) -> u64 {
    let plan = CyclicPlan {
        config: CyclicConfig {
            threads: 1,
            interval_ns: 100_000,
            distance_ns: 0,
            policy: SchedPolicy::Other,
            priority: 0,
            priospread: false,
            cpus: vec![None],
            duration_ns: None,
            loops: Some(loops),
            relative: false,
            skip_missed: false,
            hist_buckets: Some(100),
            unit_ns: 1000,
            spike_threshold_ns: Some(0), // every sample is a spike: exercises the spike list
            break_threshold_ns: None,
            timeline_interval_ns: 10_000_000, // many timeline intervals: exercises the ring
        },
        clock: Clock::Monotonic,
        mlockall: false,
        dma_latency_us: None,
        main_cpus: None,
        spike_nodes: 64,
        late_floor_ns: Some(0), // every sample is late: exercises the late-sample ring
        nodes: vec![None],
        tick: Duration::from_millis(10),
    };
    PROBE_ALLOCS.store(0, Ordering::Relaxed);
    let r = cyclic::run(
        &plan,
        &StopFlag::new(),
        &mut |_: Duration, _: &[LiveThread]| {},
    )
    .unwrap();
    assert_eq!(r.threads[0].cycles, loops);
    assert_eq!(r.spikes_total, loops);
    PROBE_ALLOCS.load(Ordering::Relaxed)
}

#[test]
fn measuring_loop_does_not_allocate() {
    let short = allocations_for(50);
    let long = allocations_for(3_000);
    assert!(
        short > 0,
        "the counter must see the prepare phase's allocations"
    );
    assert_eq!(
        short, long,
        "allocations on the probe thread grew with the number of periods"
    );
}
