//! Load generators: measured, bounded, pinned workloads that run while a probe measures (or alone, for
//! `rtgauge load`), each counting the work it did so the achieved load is recorded, not just the requested.
//!
//! Every generator is a thread pinned to one CPU, SCHED_OTHER (nice 19 when it shares a measured CPU with a
//! real-time probe, so the probe's class must win), working in a duty cycle: busy for `level` % of each
//! 10 ms period, asleep for the rest.
//!
//! The generators run in a **worker process** (this binary again, started with [`WORKER_ARG`]), not in the
//! probe's: a fork write-protects every private page of the forking process and flushes the TLB of every
//! CPU running one of its threads, and unmapping a buffer does the same, so `fork` and `memory` generators
//! inside the probe sent the measured CPUs IPIs and write-protect faults that were rtgauge's own (median
//! p99 143.7 µs against 33.6 µs for the same load from another process: docs/load.md). The worker is
//! spawned without a fork of the probe (posix_spawn) before the measurement begins; it reads its stdin until
//! the probe closes it — at stop, or when the probe dies, kill -9 included — then reports what each
//! generator did on its stdout and exits. It ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT: a Ctrl-C or a
//! `timeout` reaching the whole process group must not end the load before the probe collects its figures.
//! `ipi` is the exception by design: its membarrier interrupts the CPUs running threads of *its* process,
//! the measured ones, which is the load it stands for; it stays a thread of the probe.
//!
//! `fork` children ask the kernel for SIGKILL when their generator dies (PR_SET_PDEATHSIG) and exit at once
//! anyway; `io` writes a scratch file in a directory named after the probe's pid, removed at the end, and a
//! directory left by a killed run is removed by the next start.

use crate::stop::StopFlag;
use rtgauge_model::load::{GeneratorResult, LoadKind, LoadResult};
use rtgauge_model::CpuSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest buffer of the memory generator: three of them stay under 400 MiB per loaded CPU even where
/// sysfs reports a huge shared L3 (480 MiB on the EPYC guests here), which 4 × would turn into gigabytes.
pub const MAX_MEMORY_BYTES: usize = 128 << 20;

/// Length of one duty cycle.
const PERIOD: Duration = Duration::from_millis(10);

/// The first argument that makes the rtgauge binary a load worker ([`worker_main`]); not a verb.
pub const WORKER_ARG: &str = "__load-worker";

/// What to start.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// The request as the user wrote it, for the result.
    pub spec: String,
    /// The load generators to run (CPU, memory, I/O, …).
    pub kinds: Vec<LoadKind>,
    /// Duty cycle, percent (1–100).
    pub level: u8,
    /// CPUs the generators run on.
    pub cpus: CpuSet,
    /// Generators share CPUs with a real-time probe: run them at nice 19.
    pub nice: bool,
    /// Bytes per buffer of the memory generator (three buffers; ≥ 4 × the last-level cache makes every
    /// pass go to DRAM; see [`MAX_MEMORY_BYTES`]).
    pub memory_bytes: usize,
    /// Where the io generator writes its scratch file.
    pub scratch: PathBuf,
}

/// Running generators: those of the worker process and the probe's own (`ipi`).
#[derive(Debug)]
pub struct Load {
    spec: String,
    cpus: CpuSet,
    started: Instant,
    worker: Option<LoadWorker>,
    local: Generators,
    scratch: Option<PathBuf>,
}

impl Load {
    /// Start one generator per kind and CPU; returns once every one is working.
    pub fn start(plan: &LoadPlan) -> std::io::Result<Load> {
        crate::scratch::clean_leftovers(&plan.scratch);
        let scratch = plan
            .kinds
            .contains(&LoadKind::Io)
            .then(|| crate::scratch::own_dir(&plan.scratch));
        if let Some(dir) = &scratch {
            std::fs::create_dir_all(dir)?;
        }
        let mut remote = Vec::new();
        let mut local = Vec::new();
        for cpu in plan.cpus.iter() {
            for &kind in &plan.kinds {
                let g = Generator {
                    kind,
                    cpu,
                    level: plan.level,
                    nice: plan.nice,
                    memory_bytes: plan.memory_bytes,
                    file: scratch.as_ref().map(|d| d.join(format!("{kind}-{cpu}"))),
                };
                if kind == LoadKind::Ipi {
                    local.push(g);
                } else {
                    remote.push(g);
                }
            }
        }
        let worker = if remote.is_empty() {
            None
        } else {
            Some(LoadWorker::start(&remote)?)
        };
        Ok(Load {
            spec: plan.spec.clone(),
            cpus: plan.cpus.clone(),
            started: Instant::now(),
            worker,
            local: Generators::start(local)?,
            scratch,
        })
    }

    /// Stop every generator and report what each achieved.
    pub fn stop(self) -> LoadResult {
        let elapsed = self.started.elapsed();
        let local = self.local.threads.len();
        let mut generators = self.local.stop();
        let mut lost = (generators.len() != local).then(|| {
            format!(
                "{} of {local} in-process generators reported",
                generators.len()
            )
        });
        if let Some(w) = self.worker {
            match w.stop() {
                Ok(mut g) => generators.append(&mut g),
                Err(e) => lost = Some(e.to_string()),
            }
        }
        generators.sort_by_key(|g| (g.kind, g.cpu));
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        LoadResult {
            spec: self.spec,
            cpus: self.cpus,
            elapsed_ns: elapsed.as_nanos() as u64,
            generators,
            command: None,
            lost,
        }
    }
}

/// Generator threads of one process, started together; stopped and joined when dropped (an error or a
/// panic in the probe must not leave an `ipi` storm behind).
#[derive(Debug)]
struct Generators {
    stop: StopFlag,
    threads: Vec<JoinHandle<GeneratorResult>>,
}

impl Generators {
    /// Start `gens`, each on its own thread; returns once each has its buffers ready.
    fn start(gens: Vec<Generator>) -> std::io::Result<Generators> {
        let mut started = Generators {
            stop: StopFlag::new(),
            threads: Vec::new(),
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        for g in gens {
            let s = started.stop.clone();
            let ready = ready_tx.clone();
            // On an error the ones already started are stopped by the drop.
            started.threads.push(
                std::thread::Builder::new()
                    .name(format!("rtg-load-{}", g.kind))
                    .spawn(move || g.run(&s, &ready))?,
            );
        }
        drop(ready_tx);
        for _ in 0..started.threads.len() {
            if ready_rx.recv().is_err() {
                break;
            }
        }
        Ok(started)
    }

    /// Stop them and collect what each did; a generator that panicked is missing (the caller counts).
    fn stop(mut self) -> Vec<GeneratorResult> {
        self.stop.set();
        self.threads
            .drain(..)
            .filter_map(|t| t.join().ok())
            .collect()
    }
}

impl Drop for Generators {
    fn drop(&mut self) {
        self.stop.set();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Set in the worker's environment: with [`WORKER_ARG`] it makes a process a worker, so that the argument
/// alone (typed by hand) is only an unknown verb. Its value is the protocol's version.
const WORKER_ENV: &str = "RTGAUGE_LOAD_WORKER";
/// How long the worker may take to report its generators ready (the memory generator fills three buffers
/// of up to 128 MiB per CPU first) and, after its stop, to report their figures.
const READY_WITHIN: Duration = Duration::from_secs(60);
const REPORT_WITHIN: Duration = Duration::from_secs(10);

/// The worker process running the generators outside the probe's address space. Dropped without
/// [`LoadWorker::stop`] (an error, a panic) it is told to stop and, if it does not within a second, killed.
#[derive(Debug)]
struct LoadWorker {
    child: std::process::Child,
    /// Closed to stop the worker.
    stdin: Option<std::process::ChildStdin>,
    lines: WorkerLines,
    /// Generators it runs (as many result lines are due).
    expected: usize,
    /// Waited for: nothing left to do when dropped.
    reaped: bool,
}

impl LoadWorker {
    /// Spawn the worker for `gens` and wait until its generators work.
    fn start(gens: &[Generator]) -> std::io::Result<LoadWorker> {
        // The binary by its path, so the worker's comm reads `rtgauge`; /proc/self/exe if it was replaced.
        let exe = std::env::current_exe()
            .ok()
            .filter(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
        // (Itself: not a program of the manifest.)
        let mut cmd = rtgauge_programs::command(&exe);
        cmd.arg(WORKER_ARG).env(WORKER_ENV, "1");
        for g in gens {
            cmd.arg(g.to_arg());
        }
        // No pre_exec: the standard library then spawns without forking the probe (posix_spawn), which
        // would write-protect the probe's pages like the fork load itself.
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let mut child = cmd.spawn()?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let Some(stdout) = stdout else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the load worker has no stdout"));
        };
        let mut w = LoadWorker {
            child,
            stdin,
            lines: WorkerLines {
                out: stdout,
                buf: Vec::new(),
            },
            expected: gens.len(),
            reaped: false,
        };
        match w.lines.next(Instant::now() + READY_WITHIN) {
            Ok(Some(line)) if line == "ready" => Ok(w),
            said => {
                let _ = w.child.kill();
                let status = w.child.wait()?;
                w.reaped = true;
                let said = match said {
                    Ok(Some(line)) => format!(": it said '{line}'"),
                    Ok(None) => String::new(),
                    Err(e) => format!(": {e} (within {} s)", READY_WITHIN.as_secs()),
                };
                Err(std::io::Error::other(format!(
                    "the load worker ({} {WORKER_ARG}) did not start ({status}){said}; a program that \
                     starts loads must call rtgauge_probe::load::worker_main first",
                    exe.display()
                )))
            }
        }
    }

    /// Close its stdin and read its generators' figures; why they are not all there otherwise.
    fn stop(mut self) -> Result<Vec<GeneratorResult>, WorkerError> {
        // Gone already: killed from outside while the probe measured.
        let early = self.child.try_wait().ok().flatten();
        drop(self.stdin.take());
        let deadline = Instant::now() + REPORT_WITHIN;
        let mut out = Vec::new();
        let mut bad = None;
        let mut late = None;
        loop {
            match self.lines.next(deadline) {
                Ok(Some(line)) => match parse_result(&line) {
                    Some(g) => out.push(g),
                    None => bad = Some(line),
                },
                Ok(None) => break,
                Err(e) => {
                    let _ = self.child.kill();
                    late = Some(e);
                    break;
                }
            }
        }
        let status = self
            .child
            .wait()
            .map_err(|e| WorkerError::Wait(e.to_string()))?;
        self.reaped = true;
        if let Some(st) = early {
            return Err(WorkerError::EndedEarly(st.to_string()));
        }
        if let Some(e) = late {
            return Err(WorkerError::Late {
                within_s: REPORT_WITHIN.as_secs(),
                cause: e,
            });
        }
        if let Some(line) = bad {
            return Err(WorkerError::Said(line));
        }
        if out.len() != self.expected {
            return Err(WorkerError::Missing {
                reported: out.len(),
                expected: self.expected,
                status: status.to_string(),
            });
        }
        Ok(out)
    }
}

impl Drop for LoadWorker {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        drop(self.stdin.take());
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The worker's stdout as lines, each waited for until a deadline (poll(2)), so that a hung worker cannot
/// hang the probe. (std's BufReader has no timeout.)
/// Why the load worker's figures are not all there.
#[derive(Debug, thiserror::Error)]
enum WorkerError {
    /// Waiting for it failed.
    #[error("{0}")]
    Wait(String),
    /// It was gone before it was stopped: killed from outside while the probe measured (its status).
    #[error("the worker ended before it was stopped ({0})")]
    EndedEarly(String),
    /// It did not report in time, and was killed.
    #[error(
        "the worker did not report its figures within {within_s} s of its stop ({cause}); killed"
    )]
    Late {
        /// How long it was given, s.
        within_s: u64,
        /// Why its output stopped.
        cause: WorkerRead,
    },
    /// It printed a line that is no generator's figures.
    #[error("the worker said '{0}'")]
    Said(String),
    /// Fewer generators reported than it ran.
    #[error("{reported} of the worker's {expected} generators reported ({status})")]
    Missing {
        /// Those that reported.
        reported: usize,
        /// Those it ran.
        expected: usize,
        /// How it exited.
        status: String,
    },
}

/// Why the worker's next line is not there.
#[derive(Debug, thiserror::Error)]
enum WorkerRead {
    /// Past the deadline.
    #[error("it did not answer in time")]
    Timeout,
    /// Reading its output failed.
    #[error("{0}")]
    Io(String),
}

#[derive(Debug)]
struct WorkerLines {
    out: std::process::ChildStdout,
    buf: Vec<u8>,
}

impl WorkerLines {
    /// The next line; None at the end of the output; an error past `deadline`.
    fn next(&mut self, deadline: Instant) -> Result<Option<String>, WorkerRead> {
        use std::io::Read as _;
        use std::os::fd::AsRawFd as _;
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(Some(String::from_utf8_lossy(&line).trim_end().to_string()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(WorkerRead::Timeout);
            }
            let mut pfd = libc::pollfd {
                fd: self.out.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as libc::c_int) };
            if n <= 0 {
                continue; // timed out this slice, or EINTR: look at the deadline again
            }
            let mut chunk = [0u8; 4096];
            match self.out.read(&mut chunk) {
                Ok(0) if self.buf.is_empty() => return Ok(None),
                Ok(0) => {
                    let line = String::from_utf8_lossy(&self.buf).trim_end().to_string();
                    self.buf.clear();
                    return Ok(Some(line));
                }
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(WorkerRead::Io(e.to_string())),
            }
        }
    }
}

/// The worker process: called first thing by the binary's `main`. None unless the first argument is
/// [`WORKER_ARG`]; then runs the generators its arguments name until its stdin closes, prints one line per
/// generator (`kind cpu ops rate cpu_percent`) and gives the exit code.
pub fn worker_main() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(WORKER_ARG))
        || std::env::var_os(WORKER_ENV).is_none()
    {
        return None;
    }
    let gens: Option<Vec<Generator>> = args.map(|a| Generator::from_arg(&a)).collect();
    let Some(gens) = gens.filter(|g| !g.is_empty()) else {
        let _ = writeln!(
            std::io::stdout(),
            "error: {WORKER_ARG}: expected KIND:CPU:LEVEL:NICE:BYTES[:FILE] arguments"
        );
        return Some(2);
    };
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: setting a signal's disposition to ignore; no handler runs.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // The worker's own thread waits on the generators' CPUs, never on a measured one it inherited.
    crate::rt::set_affinity(&CpuSet::new(gens.iter().map(|g| g.cpu)));
    crate::rt::reset_sched();
    let running = match Generators::start(gens) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(std::io::stdout(), "error: starting the generators: {e}");
            return Some(2);
        }
    };
    let mut out = std::io::stdout();
    if writeln!(out, "ready").and_then(|()| out.flush()).is_err() {
        return Some(2);
    }
    // Until the probe closes the pipe: at its stop, or when it dies (the kernel closes its end).
    let mut sink = [0u8; 64];
    loop {
        match std::io::Read::read(&mut std::io::stdin(), &mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // The probe may be gone (killed): a closed pipe is no error here, and println! would panic on it.
    let mut out = std::io::stdout().lock();
    for g in running.stop() {
        let _ = writeln!(
            out,
            "{} {} {} {} {}",
            g.kind, g.cpu, g.ops, g.rate, g.cpu_percent
        );
    }
    Some(0)
}

/// One worker result line, as [`worker_main`] prints it.
fn parse_result(line: &str) -> Option<GeneratorResult> {
    let mut w = line.split_whitespace();
    let kind = LoadKind::from_name(w.next()?)?;
    let r = GeneratorResult {
        kind,
        cpu: w.next()?.parse().ok()?,
        ops: w.next()?.parse().ok()?,
        rate: w.next()?.parse().ok()?,
        cpu_percent: w.next()?.parse().ok()?,
    };
    w.next().is_none().then_some(r)
}

/// One generator thread's parameters.
struct Generator {
    kind: LoadKind,
    cpu: u32,
    level: u8,
    nice: bool,
    memory_bytes: usize,
    file: Option<PathBuf>,
}

impl Generator {
    /// As one worker argument: `KIND:CPU:LEVEL:NICE:BYTES[:FILE]` (the file last, so it may hold colons;
    /// its bytes as they are, so any path the OS takes).
    fn to_arg(&self) -> std::ffi::OsString {
        let mut a = std::ffi::OsString::from(format!(
            "{}:{}:{}:{}:{}",
            self.kind,
            self.cpu,
            self.level,
            u8::from(self.nice),
            self.memory_bytes
        ));
        if let Some(f) = &self.file {
            a.push(":");
            a.push(f);
        }
        a
    }

    /// The generator [`Generator::to_arg`] wrote.
    fn from_arg(arg: &std::ffi::OsStr) -> Option<Generator> {
        use std::os::unix::ffi::OsStrExt as _;
        let mut p = arg.as_bytes().splitn(6, |&b| b == b':');
        let mut field = || std::str::from_utf8(p.next()?).ok();
        let kind = LoadKind::from_name(field()?)?;
        let cpu = field()?.parse().ok()?;
        let level = field()?.parse().ok().filter(|l| (1..=100).contains(l))?;
        let nice = field()? == "1";
        let memory_bytes = field()?.parse().ok()?;
        let file = p
            .next()
            .map(|f| PathBuf::from(std::ffi::OsStr::from_bytes(f)));
        Some(Generator {
            kind,
            cpu,
            level,
            nice,
            memory_bytes,
            file,
        })
    }
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl Generator {
    fn run(self, stop: &StopFlag, ready: &std::sync::mpsc::Sender<()>) -> GeneratorResult {
        crate::rt::pin_thread(Some(self.cpu));
        crate::rt::reset_sched();
        if self.nice {
            // SAFETY: setpriority on the calling thread (who = 0 is this thread on Linux).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
        }
        let mut work = Work::new(self.kind, self.cpu, self.memory_bytes, self.file.as_deref());
        let _ = ready.send(());
        // The busy part of each period is counted in this thread's CPU time, not wall time: preempted time
        // is not load, so the achieved CPU share is the level even on a CPU shared with others.
        let busy = PERIOD * u32::from(self.level) / 100;
        let cpu0 = thread_cpu_time();
        let t0 = Instant::now();
        let mut ops: u64 = 0;
        let mut next = t0;
        while !stop.is_set() {
            let cycle = Instant::now();
            let cycle_cpu = thread_cpu_time();
            while thread_cpu_time() - cycle_cpu < busy && cycle.elapsed() < PERIOD && !stop.is_set()
            {
                ops += work.chunk();
            }
            if self.level < 100 {
                next += PERIOD;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
        }
        let wall = t0.elapsed().as_secs_f64().max(1e-9);
        let cpu = (thread_cpu_time() - cpu0).as_secs_f64();
        let scale = match self.kind {
            LoadKind::Cpu => 1e-6,
            LoadKind::Memory => 1e-6,
            _ => 1.0,
        };
        drop(work);
        GeneratorResult {
            kind: self.kind,
            cpu: self.cpu,
            ops,
            rate: ops as f64 * scale / wall,
            cpu_percent: cpu / wall * 100.0,
        }
    }
}

/// The work of one generator, in small chunks (tens of µs) so the duty cycle is kept.
enum Work {
    Cpu {
        x: u64,
        f: f64,
    },
    /// STREAM triad a = b + s·c over three buffers; counts bytes moved (3 × 8 per element, as STREAM).
    Memory {
        a: Vec<f64>,
        b: Vec<f64>,
        c: Vec<f64>,
        at: usize,
    },
    Io {
        file: Option<std::fs::File>,
        block: Vec<u8>,
        written: u64,
    },
    Fork,
    Timer,
    /// One end of a socket pair; an echo thread pinned to the same CPU holds the other and ends when this
    /// end is closed (the Work is dropped).
    Msg {
        sock: Option<std::os::unix::net::UnixStream>,
        buf: [u8; MSG_BYTES],
    },
    /// Whether expedited membarrier (Linux ≥ 4.14) could be registered; without it the generator idles
    /// and counts nothing, so the achieved load says there was none.
    Ipi {
        membarrier: bool,
    },
}

/// hackbench's default message size.
const MSG_BYTES: usize = 100;
/// Linux membarrier commands (include/uapi/linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Elements of the memory generator per chunk (64 KiB of each buffer).
const MEM_CHUNK: usize = 8192;
/// Rounds of the cpu generator per chunk.
const CPU_CHUNK: u64 = 2_000;
/// The io generator's file is rewritten from its start after this many bytes.
const IO_WRAP: u64 = 64 << 20;

impl Work {
    fn new(kind: LoadKind, cpu: u32, memory_bytes: usize, file: Option<&Path>) -> Work {
        match kind {
            LoadKind::Cpu => Work::Cpu {
                x: 0x9e37_79b9_7f4a_7c15,
                f: 1.0,
            },
            LoadKind::Memory => {
                let n = (memory_bytes.min(MAX_MEMORY_BYTES) / 8).max(MEM_CHUNK);
                Work::Memory {
                    a: vec![0.0; n],
                    b: vec![1.0; n],
                    c: vec![2.0; n],
                    at: 0,
                }
            }
            LoadKind::Io => Work::Io {
                file: file.and_then(|p| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(true)
                        .write(true)
                        .open(p)
                        .ok()
                }),
                block: vec![0x5a; 4096],
                written: 0,
            },
            LoadKind::Fork => Work::Fork,
            LoadKind::Timer => Work::Timer,
            LoadKind::Msg => Work::Msg {
                sock: echo_pair(cpu),
                buf: [0x5a; MSG_BYTES],
            },
            LoadKind::Ipi => Work::Ipi {
                // SAFETY: membarrier with a command and flags 0 has no memory effects on our side.
                membarrier: unsafe {
                    libc::syscall(
                        libc::SYS_membarrier,
                        MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                        0,
                    )
                } == 0,
            },
        }
    }

    /// Do one chunk of work; the operations it counted.
    fn chunk(&mut self) -> u64 {
        match self {
            Work::Cpu { x, f } => {
                // Integer (xorshift), floating point (a contracting map) and a data-dependent branch.
                for _ in 0..CPU_CHUNK {
                    *x ^= *x << 13;
                    *x ^= *x >> 7;
                    *x ^= *x << 17;
                    *f = (*f * 1.000_001 + (*x & 0xff) as f64 * 1e-9).sqrt() + 0.5;
                    if *x & 1 == 0 {
                        *x = x.wrapping_add(0x9e37);
                    }
                }
                std::hint::black_box((*x, *f));
                CPU_CHUNK
            }
            Work::Memory { a, b, c, at } => {
                let n = a.len();
                let end = (*at + MEM_CHUNK).min(n);
                let s = 3.0;
                for i in *at..end {
                    a[i] = b[i] + s * c[i];
                }
                std::hint::black_box(&a[*at]);
                let done = (end - *at) as u64;
                *at = if end >= n { 0 } else { end };
                done * 24
            }
            Work::Io {
                file,
                block,
                written,
            } => {
                use std::io::{Seek as _, Write as _};
                let Some(f) = file.as_mut() else {
                    std::thread::sleep(Duration::from_millis(1));
                    return 0;
                };
                if *written >= IO_WRAP {
                    let _ = f.seek(std::io::SeekFrom::Start(0));
                    *written = 0;
                }
                if f.write_all(block).is_err() || f.sync_data().is_err() {
                    return 0;
                }
                *written += block.len() as u64;
                1
            }
            Work::Fork => {
                // SAFETY: the child only calls async-signal-safe functions (prctl, _exit).
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    // SAFETY: in the child; never returns.
                    unsafe {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        libc::_exit(0)
                    }
                }
                if pid < 0 {
                    return 0;
                }
                let mut status = 0;
                // SAFETY: waiting for the child we just forked.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                1
            }
            Work::Timer => {
                // A short relative sleep: one hrtimer interrupt and one wake-up on this CPU.
                std::thread::sleep(Duration::from_micros(20));
                1
            }
            Work::Msg { sock, buf } => {
                use std::io::{Read as _, Write as _};
                let Some(s) = sock.as_mut() else {
                    std::thread::sleep(Duration::from_millis(1));
                    return 0;
                };
                if s.write_all(&buf[..]).is_err() || s.read_exact(&mut buf[..]).is_err() {
                    *sock = None;
                    return 0;
                }
                1
            }
            Work::Ipi { membarrier } => {
                if !*membarrier {
                    std::thread::sleep(Duration::from_millis(1));
                    return 0;
                }
                // SAFETY: as above; an IPI to every CPU currently running a thread of this process.
                let r = unsafe {
                    libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0)
                };
                u64::from(r == 0)
            }
        }
    }
}

/// A socket pair whose far end is echoed by a thread pinned to `cpu` (hackbench's sender and receiver on
/// one CPU); None if the pair or the thread cannot be had (the generator then counts nothing).
fn echo_pair(cpu: u32) -> Option<std::os::unix::net::UnixStream> {
    use std::io::{Read as _, Write as _};
    let (a, mut b) = std::os::unix::net::UnixStream::pair().ok()?;
    std::thread::Builder::new()
        .name("rtg-load-echo".into())
        .spawn(move || {
            crate::rt::pin_thread(Some(cpu));
            let mut buf = [0u8; MSG_BYTES];
            // Ends when the generator's end closes (read_exact fails on EOF).
            while b.read_exact(&mut buf).is_ok() && b.write_all(&buf).is_ok() {}
        })
        .ok()?;
    Some(a)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_generator_does_work_and_stops() {
        // In this process: the worker that runs them in rtgauge is tested through the binary
        // (crates/cli/tests/load.rs); a unit test binary is not a worker.
        let dir = tempfile::tempdir().unwrap();
        let gens = LoadKind::ALL
            .into_iter()
            .map(|kind| Generator {
                kind,
                cpu: 0,
                level: 50,
                nice: true,
                memory_bytes: 1 << 20,
                file: Some(dir.path().join(format!("{kind}-0"))),
            })
            .collect();
        let running = Generators::start(gens).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let r = running.stop();
        assert_eq!(r.len(), LoadKind::ALL.len());
        for g in &r {
            assert!(g.ops > 0, "{g:?}");
            assert!(g.rate > 0.0, "{g:?}");
        }
    }

    #[test]
    fn worker_arguments_and_results_read_back() {
        let g = Generator {
            kind: LoadKind::Io,
            cpu: 3,
            level: 25,
            nice: true,
            memory_bytes: 64 << 20,
            file: Some(PathBuf::from("/tmp/a:b/io-3")),
        };
        let back = Generator::from_arg(&g.to_arg()).unwrap();
        assert_eq!(
            (
                back.kind,
                back.cpu,
                back.level,
                back.nice,
                back.memory_bytes
            ),
            (LoadKind::Io, 3, 25, true, 64 << 20)
        );
        assert_eq!(back.file.as_deref(), Some(Path::new("/tmp/a:b/io-3")));
        use std::os::unix::ffi::OsStrExt as _;
        let odd = std::ffi::OsStr::from_bytes(b"/tmp/\xff/io-3");
        let g = Generator {
            file: Some(PathBuf::from(odd)),
            ..g
        };
        let back = Generator::from_arg(&g.to_arg()).unwrap();
        assert_eq!(
            back.file.as_deref(),
            Some(Path::new(odd)),
            "a non-UTF-8 path"
        );
        assert!(
            Generator::from_arg("fork:0:0:0:1".as_ref()).is_none(),
            "level 0"
        );
        assert!(Generator::from_arg("gpu:0:50:0:1".as_ref()).is_none());
        let r = parse_result("fork 1 2036 2036.5 99.25").unwrap();
        assert_eq!((r.kind, r.cpu, r.ops), (LoadKind::Fork, 1, 2036));
        assert_eq!((r.rate, r.cpu_percent), (2036.5, 99.25));
        assert!(parse_result("fork 1 2036 2036.5").is_none());
        assert!(parse_result("error: starting the generators").is_none());
    }
}
