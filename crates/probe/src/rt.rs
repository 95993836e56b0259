//! Real-time and process setup: memory locking, scheduling policy and priority, CPU affinity,
//! `/dev/cpu_dma_latency`, signal masks, the open-file limit.
//! Each function applies a request, reads the result back from the kernel and returns a
//! [`Setting`] with requested versus achieved, so a probe can run (and say so) when a setting cannot be had.
//! Everything changed here is held only for the run: the latency guard restores the previous PM QoS request
//! when dropped, and threads return to SCHED_OTHER when they end.

use rtgauge_model::rt::{ProcessConditions, SchedPolicy, Setting, ThreadDisturbance};
use rtgauge_model::CpuSet;
use std::io::{Read, Write};

fn last_os_error() -> String {
    std::io::Error::last_os_error().to_string()
}

/// Whether this process holds an mlockall(MCL_CURRENT | MCL_FUTURE) made by [`lock_memory`].
static LOCKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `munlockall()`: for probes that measure unlocked memory, as lmbench does (ops).
pub fn unlock_memory() {
    // SAFETY: munlockall has no memory-safety preconditions.
    unsafe { libc::munlockall() };
    LOCKED.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// Under mlockall(MCL_FUTURE) every new mapping is populated and locked at once: a heap that malloc grows
/// and trims back, or a buffer above malloc's mmap threshold mapped and unmapped at each use, faults and
/// locks the same pages again and again (a third of `rtgauge monitor`'s fixed cost was brk). Keep up to
/// 64 MiB of freed heap, and serve blocks up to 32 MiB (glibc's largest threshold) from the heap.
fn keep_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters (glibc takes the arena lock: safe beside other threads).
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`: keeps page faults out of the measuring loop.
pub fn lock_memory(requested: bool) -> Setting<bool> {
    if !requested {
        return Setting {
            requested,
            achieved: false,
            error: None,
        };
    }
    // Once locked with MCL_FUTURE, every later mapping is locked too (until [`unlock_memory`]): a second
    // mlockall would only walk the whole address space again (a monitor's probe restarts every 10 s; the
    // walk was a tenth of its CPU time).
    if LOCKED.load(std::sync::atomic::Ordering::Relaxed) {
        return Setting {
            requested,
            achieved: true,
            error: None,
        };
    }
    // SAFETY: mlockall has no memory-safety preconditions.
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if r == 0 {
        LOCKED.store(true, std::sync::atomic::Ordering::Relaxed);
        keep_heap();
        Setting {
            requested,
            achieved: true,
            error: None,
        }
    } else {
        Setting {
            requested,
            achieved: false,
            error: Some(format!("mlockall: {}", last_os_error())),
        }
    }
}

fn policy_to_libc(p: SchedPolicy) -> libc::c_int {
    match p {
        SchedPolicy::Other => libc::SCHED_OTHER,
        SchedPolicy::Batch => libc::SCHED_BATCH,
        SchedPolicy::Idle => libc::SCHED_IDLE,
        SchedPolicy::Fifo => libc::SCHED_FIFO,
        SchedPolicy::Rr => libc::SCHED_RR,
        SchedPolicy::Deadline => 6, // SCHED_DEADLINE
    }
}

fn policy_from_libc(p: libc::c_int) -> SchedPolicy {
    match p {
        libc::SCHED_FIFO => SchedPolicy::Fifo,
        libc::SCHED_RR => SchedPolicy::Rr,
        libc::SCHED_BATCH => SchedPolicy::Batch,
        libc::SCHED_IDLE => SchedPolicy::Idle,
        6 => SchedPolicy::Deadline,
        _ => SchedPolicy::Other,
    }
}

/// Policy and priority of the calling thread, as the kernel reports them.
pub fn current_sched() -> (SchedPolicy, i32) {
    // SAFETY: 0 means the calling thread; `param` is a valid out-pointer.
    let policy = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above.
    unsafe { libc::sched_getparam(0, &mut param) };
    (
        policy_from_libc(policy & !libc::SCHED_RESET_ON_FORK),
        param.sched_priority,
    )
}

/// Set the calling thread's policy and priority. Without CAP_SYS_NICE the soft RLIMIT_RTPRIO is raised to
/// the hard limit first, as cyclictest does, so members of a `realtime` group can still get FIFO.
pub fn set_sched(policy: SchedPolicy, priority: i32) -> (Setting<SchedPolicy>, Setting<i32>) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: 0 means the calling thread; `param` is valid.
    let mut r = unsafe { libc::sched_setscheduler(0, policy_to_libc(policy), &param) };
    let mut err = (r != 0).then(last_os_error);
    if r != 0 && policy.is_realtime() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out-pointer / in-pointer to rlimit.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) == 0
                && lim.rlim_cur < priority as libc::rlim_t
            {
                lim.rlim_cur = lim.rlim_max.min(priority as libc::rlim_t);
                libc::setrlimit(libc::RLIMIT_RTPRIO, &lim);
                r = libc::sched_setscheduler(0, policy_to_libc(policy), &param);
                if r == 0 {
                    err = None;
                }
            }
        }
    }
    let (ap, aprio) = current_sched();
    let err = err.map(|e| format!("sched_setscheduler({policy}, {priority}): {e}"));
    (
        Setting {
            requested: policy,
            achieved: ap,
            error: err.clone(),
        },
        Setting {
            requested: priority,
            achieved: aprio,
            error: err,
        },
    )
}

/// SCHED_FIFO at `rtprio` for the calling thread, or (`None`) the normal policy it already has, as asked
/// and as got.
pub fn set_fifo_or_other(rtprio: Option<i32>) -> (Setting<SchedPolicy>, Setting<i32>) {
    match rtprio {
        Some(p) => set_sched(SchedPolicy::Fifo, p),
        None => {
            let (policy, prio) = current_sched();
            (
                Setting {
                    requested: SchedPolicy::Other,
                    achieved: policy,
                    error: None,
                },
                Setting {
                    requested: 0,
                    achieved: prio,
                    error: None,
                },
            )
        }
    }
}

/// The calling thread's faults and involuntary switches so far (getrusage RUSAGE_THREAD: one system call,
/// no allocation); [`ThreadDisturbance::since`] of two readings is what happened between them.
pub fn thread_disturbance() -> ThreadDisturbance {
    // SAFETY: rusage is plain data, filled by getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; RUSAGE_THREAD is the calling thread (Linux ≥ 2.6.26).
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return ThreadDisturbance::default();
    }
    ThreadDisturbance {
        minor_faults: ru.ru_minflt.max(0) as u64,
        major_faults: ru.ru_majflt.max(0) as u64,
        involuntary_switches: ru.ru_nivcsw.max(0) as u64,
    }
}

/// Drop the calling thread back to SCHED_OTHER (end of a measurement thread).
pub fn reset_sched() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: calling thread, valid param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
}

fn cpuset_to_libc(cpus: &CpuSet) -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus.iter() {
        if c as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return None;
        }
        // SAFETY: bounds checked above.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    Some(set)
}

/// CPUs the calling thread may run on.
pub fn current_affinity() -> CpuSet {
    // SAFETY: cpu_set_t is a plain bit array: all zeroes is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        // SAFETY: `set` is a live cpu_set_t and the size passed is its size: the kernel writes within it.
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            == 0;
    if !ok {
        return CpuSet::default();
    }
    let n = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: index < CPU_SETSIZE.
    CpuSet::new(
        (0..n)
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .map(|i| i as u32),
    )
}

/// Pin the calling thread to `cpus`; returns requested vs achieved affinity.
pub fn set_affinity(cpus: &CpuSet) -> Setting<CpuSet> {
    let err = match cpuset_to_libc(cpus) {
        None => Some(format!("CPU list {cpus} exceeds the cpu_set_t size")),
        Some(set) => {
            // SAFETY: `set` is a valid cpu_set_t of the size passed.
            let r =
                unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
            (r != 0).then(|| format!("sched_setaffinity({cpus}): {}", last_os_error()))
        }
    };
    Setting {
        requested: cpus.clone(),
        achieved: current_affinity(),
        error: err,
    }
}

/// Pin the calling thread to one CPU (or leave it unpinned when `cpu` is `None`).
pub fn pin_thread(cpu: Option<u32>) -> Setting<Option<u32>> {
    let Some(c) = cpu else {
        return Setting {
            requested: None,
            achieved: None,
            error: None,
        };
    };
    let s = set_affinity(&CpuSet::new([c]));
    let achieved = (s.achieved.len() == 1).then(|| s.achieved.as_slice()[0]);
    Setting {
        requested: Some(c),
        achieved,
        error: s.error,
    }
}

/// Block every signal in the calling thread, so SIGINT/SIGTERM are handled by the main thread and never
/// interrupt a measurement.
pub fn block_signals() {
    // SAFETY: `set` is initialised by sigfillset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit (every load generator does: its slots are file
/// descriptors); returns the soft limit then in force (1024, the usual default, if it cannot be read).
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    if r.rlim_cur < r.rlim_max {
        let want = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: `want` is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            r.rlim_cur = r.rlim_max;
        }
    }
    r.rlim_cur
}

/// Run `work` on a thread of its own, named `name`, and wait for its result: what a probe sets up for
/// itself (pinning, scheduling, unlocked memory) stays with that thread and ends with it.
pub fn on_own_thread<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, crate::ProbeError> {
    spawn_thread(name.into(), 0, work)?
        .join()
        .map_err(|_| crate::ProbeError::Thread {
            index: 0,
            reason: "panicked".into(),
        })
}

/// Kernel thread id of the calling thread (cyclictest prints it in `T: 0 (tid)`).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Touch `bytes` of stack so that its pages are mapped (and locked, with mlockall) before measuring.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 4096;
    let mut buf = [0u8; 64 * 1024];
    let n = bytes.min(buf.len());
    let mut i = 0;
    while i < n {
        // SAFETY: index within `buf`; volatile so the write is not optimised away.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 1) };
        i += CHUNK;
    }
    std::hint::black_box(&buf);
}

/// Write to every page of a vector's capacity, then empty it again, so that pushing up to the capacity never
/// faults in the measuring loop.
pub fn prefault_vec<T: Copy>(vec: &mut Vec<T>, fill: T) {
    let cap = vec.capacity();
    vec.resize(cap, fill);
    std::hint::black_box(vec.as_slice());
    vec.clear();
}

/// Holds a PM QoS request on `/dev/cpu_dma_latency` for as long as it lives (the kernel drops the request
/// when the file is closed, which restores the previous system value). Documentation/power/pm_qos_interface.rst.
#[derive(Debug)]
pub struct DmaLatencyGuard {
    _file: Option<std::fs::File>,
    /// The request as made and the value read back while held.
    pub setting: Setting<Option<i32>>,
    /// The value the device had before this request.
    pub before: Option<i32>,
}

const DMA_LATENCY: &str = "/dev/cpu_dma_latency";

fn read_dma_latency() -> Option<i32> {
    let mut f = std::fs::File::open(DMA_LATENCY).ok()?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b).ok()?;
    Some(i32::from_ne_bytes(b))
}

impl DmaLatencyGuard {
    /// Request `us` (None: do not touch the device, cyclictest's `--default-system`).
    pub fn hold(us: Option<i32>) -> DmaLatencyGuard {
        let before = read_dma_latency();
        let Some(v) = us else {
            return DmaLatencyGuard {
                _file: None,
                setting: Setting {
                    requested: None,
                    achieved: None,
                    error: None,
                },
                before,
            };
        };
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(DMA_LATENCY);
        match opened {
            Ok(mut f) => match f.write_all(&v.to_ne_bytes()) {
                Ok(()) => {
                    let achieved = read_dma_latency();
                    let error = (achieved != Some(v)).then(|| {
                        format!("{DMA_LATENCY} reads {achieved:?} after requesting {v} (another, lower request holds?)")
                    });
                    DmaLatencyGuard {
                        _file: Some(f),
                        setting: Setting {
                            requested: Some(v),
                            achieved,
                            error,
                        },
                        before,
                    }
                }
                Err(e) => Self::failed(v, before, format!("write {DMA_LATENCY}: {e}")),
            },
            Err(e) => Self::failed(v, before, format!("open {DMA_LATENCY}: {e}")),
        }
    }

    /// A request for `requested` µs that could not be made (the device holds no request of ours).
    fn failed(requested: i32, before: Option<i32>, error: String) -> DmaLatencyGuard {
        DmaLatencyGuard {
            _file: None,
            setting: Setting {
                requested: Some(requested),
                achieved: None,
                error: Some(error),
            },
            before,
        }
    }
}

/// Pin the calling (main, reporting) thread to `main_cpus` (None: leave it where it is) and gather the
/// process-wide settings a probe runs under. `contended` is left empty: it is known only at the end.
pub(crate) fn process_conditions(
    main_cpus: Option<&CpuSet>,
    mlockall: Setting<bool>,
    dma: &DmaLatencyGuard,
) -> ProcessConditions {
    let main_affinity = match main_cpus {
        Some(cpus) => {
            let s = set_affinity(cpus);
            Setting {
                requested: Some(cpus.clone()),
                achieved: Some(s.achieved),
                error: s.error,
            }
        }
        None => Setting {
            requested: None,
            achieved: Some(current_affinity()),
            error: None,
        },
    };
    ProcessConditions {
        mlockall,
        cpu_dma_latency_us: dma.setting.clone(),
        cpu_dma_latency_before_us: dma.before,
        main_affinity,
        contended: Vec::new(),
    }
}

/// Start a probe's thread `index` under `name` (what `top -H` and traces show); a failure is an error
/// naming its index.
pub(crate) fn spawn_thread<T: Send + 'static>(
    name: String,
    index: usize,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>, crate::ProbeError> {
    std::thread::Builder::new()
        .name(name)
        .spawn(body)
        .map_err(|cause| crate::ProbeError::Spawn { index, cause })
}

/// Join every measurement thread, in order; a thread that panicked is an error naming its index.
pub(crate) fn join_all<T>(
    handles: Vec<std::thread::JoinHandle<T>>,
) -> Result<Vec<T>, crate::ProbeError> {
    handles
        .into_iter()
        .enumerate()
        .map(|(index, h)| {
            h.join().map_err(|_| crate::ProbeError::Thread {
                index,
                reason: "panicked".into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raise_nofile_reaches_the_hard_limit() {
        let soft = raise_nofile();
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `r` is a valid out-pointer.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!((soft, r.rlim_cur), (r.rlim_max, r.rlim_max));
    }

    #[test]
    fn affinity_round_trip_on_cpu0() {
        let before = current_affinity();
        let s = std::thread::spawn(|| pin_thread(Some(0))).join().unwrap();
        assert_eq!(s.requested, Some(0));
        assert_eq!(s.achieved, Some(0), "{:?}", s.error);
        assert_eq!(
            current_affinity(),
            before,
            "pinning a child thread must not move this one"
        );
    }

    #[test]
    fn impossible_cpu_is_reported_not_fatal() {
        let s = std::thread::spawn(|| pin_thread(Some(4000)))
            .join()
            .unwrap();
        assert!(s.error.is_some());
        assert_ne!(s.achieved, Some(4000));
    }

    #[test]
    fn fifo_is_achieved_as_root_and_reset() {
        let (p, prio) = std::thread::spawn(|| {
            let r = set_sched(SchedPolicy::Fifo, 10);
            assert_eq!(current_sched(), (r.0.achieved, r.1.achieved));
            reset_sched();
            assert_eq!(current_sched().0, SchedPolicy::Other);
            r
        })
        .join()
        .unwrap();
        // As root (CI runs as root) FIFO must be achieved; otherwise the failure must be recorded.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(p.achieved, SchedPolicy::Fifo, "{:?}", p.error);
            assert_eq!(prio.achieved, 10);
        } else {
            assert!(p.error.is_some());
        }
    }

    #[test]
    fn dma_latency_is_held_and_released() {
        let g = DmaLatencyGuard::hold(Some(0));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(g.setting.achieved, Some(0), "{:?}", g.setting.error);
            let before = g.before;
            drop(g);
            assert_eq!(read_dma_latency(), before);
        } else {
            assert!(g.setting.error.is_some());
        }
        let none = DmaLatencyGuard::hold(None);
        assert_eq!(none.setting.requested, None);
    }
}
