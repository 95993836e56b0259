//! The host side of the VM lab tests: QEMU's vCPU threads (one host thread each with `Guest::vcpu_threads`)
//! pinned one per host CPU, and bursts of a SCHED_FIFO thread on a host CPU that take it from its vCPU.

#![allow(dead_code)]

use std::time::{Duration, Instant};

pub fn mono_ns() -> u64 {
    rtgauge_probe::time::now_ns(rtgauge_probe::time::ClockId::Monotonic)
}

/// QEMU's vCPU threads: (index, tid), once they exist.
pub fn vcpu_threads(pid: u32) -> Vec<(u32, i32)> {
    let mut v: Vec<(u32, i32)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| {
                    let tid = t.file_name().to_str()?.parse().ok()?;
                    let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                    let n = comm.strip_prefix("CPU ")?.split('/').next()?.parse().ok()?;
                    Some((n, tid))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Thread `tid` on host CPU `cpu` only.
pub fn pin(tid: i32, cpu: usize) {
    // SAFETY: plain libc calls with a valid, zeroed CPU set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pinning vCPU thread {tid} to host CPU {cpu}"
        );
    }
}

/// Wait (up to 30 s) for `n` vCPU threads of QEMU `pid` and pin vCPU k to host CPU k at nice 0 (QEMU's
/// own nice is the test's, which may be higher: the guest's collector must not starve on a loaded host).
pub fn pin_vcpus(pid: u32, n: usize, alive: impl Fn() -> bool) -> Result<Vec<(u32, i32)>, String> {
    let t = Instant::now();
    let mut vcpus = vcpu_threads(pid);
    while vcpus.len() < n && alive() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
        vcpus = vcpu_threads(pid);
    }
    if vcpus.len() < n {
        return Err(format!("vCPU threads: {vcpus:?}"));
    }
    for (k, tid) in &vcpus {
        pin(*tid, *k as usize);
        // SAFETY: setpriority on a thread id of QEMU, our child.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, *tid as libc::id_t, 0) };
    }
    Ok(vcpus)
}

/// The calling thread on host CPU `cpu` at `policy`, `prio`; its tid.
pub fn place(cpu: usize, policy: i32, prio: i32) -> i32 {
    // SAFETY: plain libc calls on the calling thread with valid arguments.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
        let p = libc::sched_param {
            sched_priority: prio,
        };
        assert_eq!(libc::sched_setscheduler(0, policy, &p), 0, "needs root");
        libc::gettid()
    }
}

/// Spin for `len`: the burst's (start, end) on CLOCK_MONOTONIC.
pub fn burst(len: Duration) -> (u64, u64) {
    let (t, a) = (Instant::now(), mono_ns());
    while t.elapsed() < len {
        std::hint::spin_loop();
    }
    (a, mono_ns())
}

/// A thread named `rtg-noise` at SCHED_FIFO 50 on host CPU `cpu` spinning `len` `n` times, `gap` apart:
/// its tid and each burst's (start, end).
pub fn fifo_bursts(cpu: usize, n: usize, len: Duration, gap: Duration) -> (i32, Vec<(u64, u64)>) {
    std::thread::Builder::new()
        .name("rtg-noise".into())
        .spawn(move || {
            let tid = place(cpu, libc::SCHED_FIFO, 50);
            let mut out = Vec::new();
            for k in 0..n {
                if k > 0 {
                    std::thread::sleep(gap);
                }
                out.push(burst(len));
            }
            (tid, out)
        })
        .unwrap()
        .join()
        .unwrap()
}

/// Boot `g` with `beside` run on the host while the guest runs (the test's host side): the boot and what
/// `beside` returned. With RTGAUGE_LAB_KEEP set, the guest's files and the host side's `keep` are copied
/// to KEEP/`name`.
pub fn boot_beside<S: Send>(
    g: &rtgauge_lab::Guest,
    beside: impl Fn(&rtgauge_lab::RunningGuest) -> S + Sync,
    name: &str,
    keep: &[std::path::PathBuf],
) -> (rtgauge_lab::Boot, S) {
    let side = std::sync::Mutex::new(None);
    let b = g
        .boot_with(&|r: &rtgauge_lab::RunningGuest| {
            *side.lock().unwrap() = Some(beside(r));
        })
        .unwrap();
    let side = side.into_inner().unwrap().unwrap();
    if let Some(k) = std::env::var_os("RTGAUGE_LAB_KEEP") {
        let dest = std::path::Path::new(&k).join(name);
        b.copy_to(&dest).unwrap();
        for f in keep {
            if let Some(n) = f.file_name() {
                let _ = std::fs::copy(f, dest.join(n));
            }
        }
    }
    (b, side)
}
