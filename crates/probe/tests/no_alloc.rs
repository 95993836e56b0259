//! The measuring loops must not allocate: a counting global allocator tallies allocations made on the
//! probes' own threads (named `rtgauge-cyc*` for the timer probe, `rtgauge-osl*` for the busy loop), and
//! the tally must not depend on how long the loop ran.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use rtgauge_model::cyclic::CyclicConfig;
use rtgauge_model::oslat::{OslatConfig, Workload};
use rtgauge_model::rt::SchedPolicy;
use rtgauge_probe::cyclic::{self, CyclicPlan, LiveThread};
use rtgauge_probe::observe::Silent;
use rtgauge_probe::oslat::{self, OslatPlan};
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::time::ClockId;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

struct Counting;
/// Allocations on the timer probe's threads, and on the busy loop's (the two tests run at once).
static CYCLIC_ALLOCS: AtomicU64 = AtomicU64::new(0);
static OSLAT_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// Count an allocation made on a probe thread.
fn count() {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `name`; no allocation happens here.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    if name.starts_with(b"rtgauge-cyc") {
        CYCLIC_ALLOCS.fetch_add(1, Ordering::Relaxed);
    } else if name.starts_with(b"rtgauge-osl") {
        OSLAT_ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator; the bookkeeping neither allocates nor unwinds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
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
            duration: None,
            loops: Some(loops),
            relative: false,
            skip_missed: false,
            hist_buckets: Some(100),
            unit_ns: 1000,
            spike_threshold_ns: Some(0), // every sample is a spike: exercises the spike list
            break_threshold_ns: None,
            timeline_interval_ns: 10_000_000, // many timeline intervals: exercises the ring
        },
        clock: ClockId::Monotonic,
        mlockall: false,
        dma_latency_us: None,
        main_cpus: None,
        spike_nodes: 64,
        late_floor_ns: Some(0), // every sample is late: exercises the late-sample ring
        nodes: vec![None],
        tick: Duration::from_millis(10),
    };
    CYCLIC_ALLOCS.store(0, Ordering::Relaxed);
    let r = cyclic::run(
        &plan,
        &StopFlag::new(),
        &mut |_: Duration, _: &[LiveThread]| {},
    )
    .unwrap();
    assert_eq!(r.threads[0].cycles, loops);
    assert_eq!(r.spikes_total, loops);
    CYCLIC_ALLOCS.load(Ordering::Relaxed)
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

/// Allocations on the busy loop's threads over a run of `ms` on two CPUs: every gap takes the slow path
/// (worst-gap list, thresholds, buckets), a timeline interval ends and an accumulator is handed over every
/// millisecond, and the memmove workload runs.
fn oslat_allocations_for(ms: u64) -> u64 {
    let cpus: Vec<u32> = rtgauge_probe::rt::current_affinity()
        .iter()
        .take(2)
        .collect();
    let plan = OslatPlan {
        config: OslatConfig {
            cpus: cpus.clone(),
            main_cpu: None,
            duration: rtgauge_model::Nanos(ms * 1_000_000),
            rtprio: None,
            preheat_ns: 20_000_000,
            single_preheat: false,
            bucket_count: 32,
            bucket_width_ns: 1000,
            bias: false,
            workload: Workload::Memmove,
            workload_mem_bytes: 4096,
            trace_threshold_ns: None,
            availability_threshold_ns: 1_000,
            thresholds_ns: vec![1], // every gap is slow
            worst_count: 4,
            timeline_interval_ns: 1_000_000,
        },
        nodes: vec![None; cpus.len()],
        tick: Duration::from_millis(10),
    };
    OSLAT_ALLOCS.store(0, Ordering::Relaxed);
    let r = oslat::run(&plan, &StopFlag::new(), &mut Silent).unwrap();
    for t in &r.threads {
        assert_eq!(t.gaps.count, t.iterations);
        assert!(
            t.timeline.len() as u64 >= ms / 2,
            "{} intervals",
            t.timeline.len()
        );
    }
    OSLAT_ALLOCS.load(Ordering::Relaxed)
}

#[test]
fn busy_loop_does_not_allocate() {
    let short = oslat_allocations_for(20);
    let long = oslat_allocations_for(400);
    assert!(
        short > 0,
        "the counter must see the threads' own accumulators being allocated"
    );
    assert_eq!(
        short, long,
        "allocations on the busy loop's threads grew with the length of the run"
    );
}
