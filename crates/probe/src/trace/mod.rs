//! Kernel trace events of the measured CPUs, for `--trace`: a private tracefs instance
//! (`instances/rtgauge-<pid>`, so the global buffer and other users are never disturbed), per-CPU ring
//! buffers with `trace_clock mono` (CLOCK_MONOTONIC, the probes' clock), read by the main thread on its
//! housekeeping CPU, never by a measured CPU: in binary from `per_cpu/cpuN/trace_pipe_raw` (pages decoded
//! in [`raw`] with the layouts the kernel publishes), or as text from `trace_pipe` where a layout cannot
//! be read and for readers of the text lines (the host side of a VM).
//!
//! Why trace_pipe_raw and not text, perf_event_open or eBPF: the text made the kernel format every event
//! for the reader and the reader parse it back (~5 µs of the housekeeping CPU per event on this project's
//! VM); the raw pages cost a copy and a few loads per record (~0.3 µs per event, reads included), and the
//! timestamp keeps its ns. It needs no BPF toolchain or kernel BTF and works on every kernel with tracefs;
//! the events are recorded by the kernel into the measured CPU's own ring buffer (tens of ns per event
//! there). Per-CPU buffers also scale: each CPU has its own ring, so the collection does not funnel every
//! CPU through one formatter the way rtla's tracefs mode does. The collector's CPU time is measured
//! ([`TraceSession::collector_ns`]) and printed with every traced run.
//!
//! The events are folded into [`Span`]s as they arrive (entry/exit pairs, sched_switch → running thread),
//! kept for a rolling window plus any range [`TraceSession::pin`]ned, and broken down per spike with
//! `rtgauge_analysis::episodes::breakdown`.
//!
//! Cleanup: dropping the session turns tracing off and removes the instance (and unmounts tracefs if it
//! was mounted here). A killed run leaves its instance (and its tracefs mount) behind;
//! [`TraceSession::start`] removes instances of dead `rtgauge-<pid>` processes first, and adopts a mount
//! whose owner (`/run/rtgauge/tracefs-mounted-by`) is dead, to unmount it at the end.

use rtgauge_model::attribution::{CauseKind, Span};
use std::collections::{BTreeMap, VecDeque};
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

mod fold;
mod raw;
pub use fold::{prio_name, read_rt_policy, Ev, Folder, Piece};

/// Where tracefs is (or is mounted).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Why tracing could not start; the probe then runs with counters only.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // The OS error is in each message (the session shows this error as its one-line --trace warning, never
    // as a chain) and is also the source, for a caller that inspects it.
    /// Tracefs could not be reached.
    #[error("tracefs at {TRACEFS} is not readable and mounting it failed ({0}): needs root")]
    NoTracefs(#[source] std::io::Error),
    /// Reading or writing a tracefs file failed.
    #[error("{path}: {source}")]
    Io {
        /// The tracefs file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The events enabled: (subsystem, event). Missing ones are skipped (older kernels, other architectures).
const EVENTS: &[(&str, &str)] = &[
    ("irq", "irq_handler_entry"),
    ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
    ("sched", "sched_switch"),
    // A thread that makes itself real-time while it runs shows no switch: its spans would read CFS at both
    // ends. (Enabling a syscall tracepoint sends every task's system calls through the kernel's traced
    // entry path, tens of ns each, for as long as the trace runs.)
    ("syscalls", "sys_enter_sched_setscheduler"),
    ("syscalls", "sys_exit_sched_setscheduler"),
    ("workqueue", "workqueue_execute_start"),
    ("workqueue", "workqueue_execute_end"),
    ("nmi", "nmi_handler"),
    ("irq_vectors", "local_timer_entry"),
    ("irq_vectors", "local_timer_exit"),
    ("irq_vectors", "call_function_entry"),
    ("irq_vectors", "call_function_exit"),
    ("irq_vectors", "call_function_single_entry"),
    ("irq_vectors", "call_function_single_exit"),
    ("irq_vectors", "reschedule_entry"),
    ("irq_vectors", "reschedule_exit"),
    ("irq_vectors", "irq_work_entry"),
    ("irq_vectors", "irq_work_exit"),
    ("irq_vectors", "x86_platform_ipi_entry"),
    ("irq_vectors", "x86_platform_ipi_exit"),
    ("irq_vectors", "thermal_apic_entry"),
    ("irq_vectors", "thermal_apic_exit"),
];

/// Where a run that mounted tracefs writes its pid, so that tracefs is unmounted even when that run is
/// killed: the next run that finds the pid dead adopts the mount and unmounts it when it ends.
const MOUNT_MARKER: &str = "/run/rtgauge/tracefs-mounted-by";

/// The pid in the mount marker, if any.
fn mount_owner() -> Option<u32> {
    std::fs::read_to_string(MOUNT_MARKER)
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn claim_mount() {
    let marker = Path::new(MOUNT_MARKER);
    if let Some(dir) = marker.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(marker, std::process::id().to_string());
}

/// Mount tracefs at [`TRACEFS`] unless it is there already (a freshly booted system has it unmounted).
/// `Ok(true)` when this process now owns the mount and should [`unmount_tracefs`] when done: it mounted it,
/// or the run that did was killed before it could unmount (its pid in the marker is gone).
pub fn mount_tracefs() -> Result<bool, TraceError> {
    if Path::new(TRACEFS).join("instances").exists() {
        let orphaned = mount_owner().is_some_and(|pid| !pid_alive(pid));
        if orphaned {
            claim_mount();
        }
        return Ok(orphaned);
    }
    let src = c"tracefs";
    let target = c"/sys/kernel/tracing";
    // SAFETY: NUL-terminated constant strings; no data argument.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(TraceError::NoTracefs(std::io::Error::last_os_error()));
    }
    claim_mount();
    Ok(true)
}

/// Unmount tracefs that [`mount_tracefs`] gave this process, and clear the marker. A busy tracefs (another
/// run's open files) stays mounted with the marker kept: that run adopts it when this one is gone.
pub fn unmount_tracefs() {
    let target = c"/sys/kernel/tracing";
    // SAFETY: NUL-terminated constant path.
    if unsafe { libc::umount(target.as_ptr()) } == 0 {
        let _ = std::fs::remove_file(MOUNT_MARKER);
    }
}

/// Whether the run that mounted tracefs is gone without unmounting it (killed, or it found tracefs busy).
fn mount_orphaned() -> bool {
    mount_owner().is_some_and(|pid| pid != std::process::id() && !pid_alive(pid))
}

/// Undo what killed runs left in the kernel's tracing, without mounting tracefs: their instances (still
/// recording, which would disturb any measurement) and tracefs mounted by a run that is gone. What was
/// undone, for the run to say.
pub fn clean_killed_runs() -> Vec<String> {
    let root = Path::new(TRACEFS);
    if !root.join("instances").exists() {
        return Vec::new();
    }
    let mut done = Vec::new();
    let n = clean_stale(root);
    if n > 0 {
        done.push(format!(
            "removed {n} tracing instance(s) of killed rtgauge runs"
        ));
    }
    if mount_orphaned() {
        claim_mount();
        unmount_tracefs();
        if !root.join("instances").exists() {
            done.push(format!(
                "unmounted {TRACEFS}, mounted by a killed rtgauge run"
            ));
        }
    }
    done
}

/// Which tracers the kernel offers beyond events (`available_tracers`): timerlat/osnoise split latency into
/// IRQ and thread context and report hardware (hypervisor) noise.
pub fn kernel_tracers(tracefs: &Path) -> (bool, bool) {
    let t = std::fs::read_to_string(tracefs.join("available_tracers")).unwrap_or_default();
    let has = |n: &str| t.split_whitespace().any(|x| x == n);
    (has("timerlat"), has("osnoise"))
}

/// Instances named `rtgauge-<pid>` whose process is gone (a killed run), from a directory listing.
pub fn stale_instances(names: &[String], alive: impl Fn(u32) -> bool) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            n.strip_prefix("rtgauge-")
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|pid| !alive(pid))
        })
        .cloned()
        .collect()
}

fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Remove the instances of dead rtgauge runs under `tracefs`; returns how many.
pub fn clean_stale(tracefs: &Path) -> usize {
    let dir = tracefs.join("instances");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    stale_instances(&names, pid_alive)
        .iter()
        // Only removed, never switched off first: a pid dead here may be a live run in another pid namespace
        // (a container), whose open files keep its instance busy, so rmdir fails and its tracing goes on. A
        // dead run holds no file open, and rmdir takes its instance whether it records or not.
        .filter(|n| std::fs::remove_dir(dir.join(n)).is_ok())
        .count()
}

/// One parsed trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<'a> {
    /// When the event happened, ns (the trace clock).
    pub ts_ns: u64,
    /// The event's name (e.g. `irq_handler_entry`).
    pub name: &'a str,
    /// The rest of the line: the event's fields, unparsed.
    pub fields: &'a str,
    /// The task the event happened in (the header's `comm-pid`), where it parses.
    pub pid: Option<i64>,
}

/// Parse one text line of trace_pipe: `comm-pid [cpu] flags secs.usecs: event: fields`. The timestamp is the
/// first `digits.digits:` word after the `[cpu]` field (a comm may hold spaces and colons).
pub fn parse_line(line: &str) -> Option<Event<'_>> {
    let after_cpu = line.find("] ")? + 2;
    let rest = line.get(after_cpu..)?;
    let mut pos = 0;
    for word in rest.split(' ') {
        let start = pos;
        pos += word.len() + 1;
        let Some(ts) = word.strip_suffix(':') else {
            continue;
        };
        let Some((s, frac)) = ts.split_once('.') else {
            continue;
        };
        if s.is_empty() || frac.is_empty() || frac.len() > 9 {
            continue;
        }
        let (Ok(secs), Ok(f)) = (s.parse::<u64>(), frac.parse::<u64>()) else {
            continue;
        };
        let scale = 10u64.pow(9 - frac.len() as u32);
        let ts_ns = secs.checked_mul(1_000_000_000)?.checked_add(f * scale)?;
        let tail = rest.get(start + word.len()..)?.trim_start();
        // A syscall's exit event has no fields: `sys_sched_setscheduler -> 0x0`.
        let (name, fields) = tail.split_once(':').unwrap_or((tail, ""));
        let head = line.get(..after_cpu - 2)?;
        let pid = head
            .get(..head.rfind(" [")?)
            .and_then(|h| h.trim_end().rsplit_once('-')?.1.parse().ok());
        return Some(Event {
            ts_ns,
            name: name.trim(),
            fields: fields.trim(),
            pid,
        });
    }
    None
}

/// Whole events out of trace_pipe's text, whose lines a comm holding a newline cuts in two (`echo name >
/// /proc/PID/comm` leaves one at its end): the header's comm (`   rtg-culprit⏎-1234 [001] …`) or a comm
/// field (`prev_comm=rtg-culprit⏎ prev_pid=1234 …`). A piece that is no event is the head of the next
/// line's header when it is no longer than the padded comm column, else the rest of the line before it when
/// it holds the `pid=` that follows every comm field of the traced events. The newline reads as `?` in the
/// joined line, as `ps` shows it; any other line passes as it is. The kernel hands trace_pipe's readers whole
/// events, so a read ends on one. One newline per comm is undone; a comm holding more stays cut.
#[derive(Default)]
struct Rejoin {
    /// The line before, held until the next piece shows it is whole.
    pending: Option<String>,
    /// The head of the next line's header.
    head: String,
}

impl Rejoin {
    /// The longest header head: the comm column is 16 wide (right-aligned, the comm at most 15 bytes).
    const HEAD: usize = 16;

    fn feed(&mut self, bytes: &[u8], f: &mut dyn FnMut(&str)) {
        for piece in String::from_utf8_lossy(bytes).lines() {
            let line = if self.head.is_empty() {
                piece.to_string()
            } else {
                format!("{}?{piece}", std::mem::take(&mut self.head))
            };
            if parse_line(&line).is_some() {
                if let Some(p) = self.pending.replace(line) {
                    f(&p);
                }
            } else if line.contains("pid=") && self.pending.is_some() {
                if let Some(p) = &mut self.pending {
                    p.push('?');
                    p.push_str(&line);
                }
            } else {
                if let Some(p) = self.pending.take() {
                    f(&p);
                }
                if line.len() <= Self::HEAD {
                    self.head = line;
                } else {
                    f(&line);
                }
            }
        }
        if let Some(p) = self.pending.take() {
            f(&p);
        }
    }
}

/// Read what `pipe` (a non-blocking `trace_pipe`) holds until it is empty, and hand `f` each stretch of
/// whole lines; a line cut by the read waits in `partial` for the next. The one reader of the event and
/// hwlat pipes.
pub(crate) fn read_whole_lines(
    pipe: &mut std::fs::File,
    buf: &mut [u8],
    partial: &mut Vec<u8>,
    f: &mut dyn FnMut(&[u8]),
) {
    while let Ok(n) = pipe.read(buf) {
        if n == 0 {
            break;
        }
        partial.extend_from_slice(&buf[..n]);
        let end = partial
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        f(&partial[..end]);
        partial.drain(..end);
    }
}

/// One measured CPU's reader.
struct CpuTrace {
    cpu: u32,
    pipe: std::fs::File,
    partial: Vec<u8>,
    lines: Rejoin,
    folder: Folder,
    spans: VecDeque<Piece>,
    /// Spans past the rolling window kept for a pin, with the pin's id.
    kept: Vec<(u64, Piece)>,
    last_ts: u64,
    /// Unpinned spans ending before this were dropped.
    pruned_before: u64,
}

/// How long the spans of each CPU are kept when no episode pins them, ns: the worst episodes are pinned
/// within about a second of their end (`rtgauge_session::why`), so this bounds the longest stall explained
/// whole (~9 s) and the window's memory — 24 bytes a span, ~2,000 spans per CPU per second of a 1 kHz probe:
/// ~0.5 MB per CPU, 120 MB for 256 CPUs (60 s, before, would have held 740 MB).
pub const KEEP_NS: u64 = 10_000_000_000;

/// A running trace of the measured CPUs.
pub struct TraceSession {
    dir: PathBuf,
    mounted: bool,
    cpus: Vec<CpuTrace>,
    buf: Vec<u8>,
    /// Spans older than this (ns before the newest event) are dropped unless pinned.
    pub keep_ns: u64,
    /// Ranges kept past the rolling window: (id, from, to).
    pins: Vec<(u64, u64, u64)>,
    /// Instances of killed runs removed at start.
    pub cleaned: usize,
    started_ns: u64,
    /// Events enabled beyond [`EVENTS`] ([`TraceSession::start_with`]), disabled again on drop.
    extra: Vec<(String, String)>,
    /// The page layout when the pipes are `trace_pipe_raw` (decoded in [`raw`]); `None`: text `trace_pipe`.
    layout: Option<raw::PageLayout>,
    /// Spans folded from one page, before they join their CPU's window (kept to reuse its memory).
    out: Vec<Piece>,
    /// CPU time this process spent reading and folding the trace ([`TraceSession::drain`]), ns.
    pub collector_ns: u64,
    /// The kernel drops the probe's own switches to and from idle ([`TraceSession::exclude`]).
    pub idle_switches_filtered: bool,
    /// The extra events whose filter the kernel refused (a filter of a page or more: a VM of ~220 threads),
    /// enabled unfiltered: every task's events are read, and the reader keeps those it follows.
    pub unfiltered: Vec<String>,
}

/// An event enabled beyond the spans' own ([`TraceSession::start_with`]), with an optional filter
/// (tracefs filter syntax: `pid == 42 || pid == 43`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraEvent {
    /// Its subsystem (`sched`, `kvm`).
    pub system: &'static str,
    /// Its name (`sched_wakeup`, `kvm_exit`).
    pub event: &'static str,
    /// Its filter, if any.
    pub filter: Option<String>,
}

impl TraceSession {
    /// Mount tracefs if needed, remove stale instances, create ours and start recording on `cpus`, to be
    /// folded into spans ([`TraceSession::drain`]): read in binary (`trace_pipe_raw`) where the kernel
    /// publishes the page layout, else as text.
    pub fn start(cpus: &[u32], buffer_kb: u32) -> Result<TraceSession, TraceError> {
        TraceSession::open(cpus, buffer_kb, &[], true)
    }

    /// [`TraceSession::start`] with `extra` events enabled too (those the kernel lacks are skipped: see
    /// [`TraceSession::has_event`]); for readers of the text lines ([`TraceSession::drain_lines`]).
    pub fn start_with(
        cpus: &[u32],
        buffer_kb: u32,
        extra: &[ExtraEvent],
    ) -> Result<TraceSession, TraceError> {
        TraceSession::open(cpus, buffer_kb, extra, false)
    }

    fn open(
        cpus: &[u32],
        buffer_kb: u32,
        extra: &[ExtraEvent],
        binary: bool,
    ) -> Result<TraceSession, TraceError> {
        let root = PathBuf::from(TRACEFS);
        let mounted = mount_tracefs()?;
        let cleaned = clean_stale(&root);
        let dir = root
            .join("instances")
            .join(format!("rtgauge-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        let mut s = TraceSession {
            dir: dir.clone(),
            mounted,
            cpus: Vec::new(),
            buf: vec![0; 1 << 16],
            keep_ns: KEEP_NS,
            pins: Vec::new(),
            cleaned,
            started_ns: crate::time::now_ns(crate::time::ClockId::Monotonic),
            extra: extra
                .iter()
                .map(|e| (e.system.to_string(), e.event.to_string()))
                .collect(),
            unfiltered: Vec::new(),
            layout: None,
            out: Vec::new(),
            collector_ns: 0,
            idle_switches_filtered: false,
        };
        // From here on, Drop removes the instance whatever fails.
        let w = |p: &str, v: &str| -> Result<(), TraceError> {
            let path = dir.join(p);
            std::fs::write(&path, v).map_err(io(&path))
        };
        w("tracing_on", "0")?;
        w("trace_clock", "mono")?;
        // Only the measured CPUs record, each into a buffer of `buffer_kb`; the instance's other CPUs keep
        // the smallest buffer the kernel gives (a page each) instead of `buffer_kb` apiece: 2 measured
        // CPUs of a 256-CPU host hold 16 MiB of kernel memory, not 2 GiB.
        let measured = rtgauge_model::CpuSet::new(cpus.iter().copied());
        w("tracing_cpumask", &measured.hex_mask())?;
        w("buffer_size_kb", "1")?;
        for &cpu in cpus {
            w(
                &format!("per_cpu/cpu{cpu}/buffer_size_kb"),
                &buffer_kb.to_string(),
            )?;
        }
        for (sys, ev) in EVENTS {
            let _ = std::fs::write(dir.join("events").join(sys).join(ev).join("enable"), "1");
        }
        for e in extra {
            let d = dir.join("events").join(e.system).join(e.event);
            if let Some(f) = &e.filter {
                if std::fs::write(d.join("filter"), f).is_err() && d.exists() {
                    s.unfiltered.push(format!("{}:{}", e.system, e.event));
                }
            }
            let _ = std::fs::write(d.join("enable"), "1");
        }
        if binary {
            s.layout = raw::PageLayout::load(&dir, EVENTS);
        }
        if let Some(l) = &s.layout {
            s.buf.resize(s.buf.len().max(l.page), 0);
        }
        let file = if s.layout.is_some() {
            "trace_pipe_raw"
        } else {
            "trace_pipe"
        };
        for &cpu in cpus {
            let p = dir.join(format!("per_cpu/cpu{cpu}/{file}"));
            let pipe = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(io(&p))?;
            s.cpus.push(CpuTrace {
                cpu,
                pipe,
                partial: Vec::new(),
                lines: Rejoin::default(),
                folder: Folder::default(),
                spans: VecDeque::new(),
                kept: Vec::new(),
                last_ts: 0,
                pruned_before: 0,
            });
        }
        w("tracing_on", "1")?;
        Ok(s)
    }

    /// The instance directory (for tests and messages).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the kernel has event `system/event` (and it is enabled in this instance).
    pub fn has_event(&self, system: &str, event: &str) -> bool {
        std::fs::read_to_string(
            self.dir
                .join("events")
                .join(system)
                .join(event)
                .join("enable"),
        )
        .is_ok_and(|v| v.trim() == "1")
    }

    /// Read what the kernel has buffered on every CPU (non-blocking) and hand each whole line to `f` with
    /// its CPU, unfolded: for readers that fold the events themselves (the host side of a VM).
    pub fn drain_lines(&mut self, f: &mut dyn FnMut(u32, &str)) {
        for c in &mut self.cpus {
            let (cpu, events, lines) = (c.cpu, &mut c.folder.events, &mut c.lines);
            read_whole_lines(&mut c.pipe, &mut self.buf, &mut c.partial, &mut |whole| {
                lines.feed(whole, &mut |line| {
                    *events += 1;
                    f(cpu, line);
                });
            });
        }
    }

    /// Stop recording (the buffers keep what they hold for a last drain).
    pub fn stop_recording(&self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
    }

    /// Lines read so far, over every CPU.
    pub fn events(&self) -> u64 {
        self.cpus.iter().map(|c| c.folder.events).sum()
    }

    /// Events the kernel dropped so far (ring buffer overruns), over every CPU.
    pub fn lost(&self) -> u64 {
        self.cpus
            .iter()
            .map(|c| {
                parse_overrun(
                    &std::fs::read_to_string(self.dir.join(format!("per_cpu/cpu{}/stats", c.cpu)))
                        .unwrap_or_default(),
                )
            })
            .sum()
    }

    /// Threads never charged (the probe's own). Their switches to and from the idle task — two of the four
    /// events a 1 kHz timer thread makes each cycle on an idle CPU, with the timer interrupt's entry and
    /// exit — say nothing of what delayed them (neither is charged), so the kernel is told to drop them
    /// (the instance's `sched_switch` filter): ~40 % fewer events at 1 kHz reach the reader. Every
    /// switch with any other thread is kept, so what ran is still known. A filter the kernel refuses
    /// leaves the events unfiltered (`idle_switches_filtered` false).
    pub fn exclude(&mut self, tids: &[i64]) {
        for c in &mut self.cpus {
            c.folder.exclude = tids.to_vec();
        }
        if let Some(f) = idle_switch_filter(tids) {
            let p = self.dir.join("events/sched/sched_switch/filter");
            self.idle_switches_filtered = std::fs::write(p, f).is_ok();
        }
    }

    /// Keep the spans in `[from, to]` (CLOCK_MONOTONIC ns) past the rolling window, under `id`.
    pub fn pin(&mut self, id: u64, from: u64, to: u64) {
        self.pins.push((id, from, to));
    }

    /// Let the spans kept for pin `id` go (those no other pin holds).
    pub fn unpin(&mut self, id: u64) {
        self.pins.retain(|p| p.0 != id);
        for c in &mut self.cpus {
            c.kept.retain(|(i, _)| *i != id);
        }
    }

    /// Whether the trace is read in binary (`trace_pipe_raw`), not as text.
    pub fn binary(&self) -> bool {
        self.layout.is_some()
    }

    /// Read what the kernel has buffered on every CPU (non-blocking) and fold it.
    pub fn drain(&mut self) {
        let cpu0 = crate::time::thread_cpu_ns();
        for c in &mut self.cpus {
            let (last_ts, folder, spans, out) =
                (&mut c.last_ts, &mut c.folder, &mut c.spans, &mut self.out);
            match &self.layout {
                Some(layout) => {
                    // One read hands over one page (or what a page the kernel is still filling holds).
                    while let Ok(n @ 1..) = c.pipe.read(&mut self.buf) {
                        layout.page(&self.buf[..n], &mut |ts, pid, e| {
                            *last_ts = (*last_ts).max(ts);
                            folder.feed_ev(ts, pid, e, out);
                        });
                        spans.extend(out.drain(..));
                    }
                }
                None => {
                    let lines = &mut c.lines;
                    read_whole_lines(&mut c.pipe, &mut self.buf, &mut c.partial, &mut |whole| {
                        lines.feed(whole, &mut |line| {
                            if let Some(e) = parse_line(line) {
                                *last_ts = (*last_ts).max(e.ts_ns);
                                folder.feed_ev(e.ts_ns, e.pid, &Ev::from_text(&e), out);
                            }
                        });
                        spans.extend(out.drain(..));
                    });
                }
            }
            let horizon = c.last_ts.saturating_sub(self.keep_ns);
            while c.spans.front().is_some_and(|s| s.end_ns < horizon) {
                if let Some(s) = c.spans.pop_front() {
                    c.pruned_before = c.pruned_before.max(s.end_ns);
                    for &(id, a, b) in &self.pins {
                        if s.end_ns >= a && s.start_ns <= b {
                            c.kept.push((id, s));
                        }
                    }
                }
            }
            if c.folder.names_grown() {
                let held = c.spans.iter_mut().map(|p| &mut p.name);
                c.folder
                    .compact(held.chain(c.kept.iter_mut().map(|k| &mut k.1.name)));
            }
        }
        self.collector_ns += crate::time::thread_cpu_ns().saturating_sub(cpu0);
    }

    /// Stop recording and return every CPU's retained spans (the running thread closed at the last event),
    /// the events read and the events the kernel lost, then remove the instance.
    pub fn finish(mut self) -> TraceData {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        self.drain();
        let mut data = TraceData::default();
        for c in &mut self.cpus {
            let stats =
                std::fs::read_to_string(self.dir.join(format!("per_cpu/cpu{}/stats", c.cpu)))
                    .unwrap_or_default();
            data.lost += parse_overrun(&stats);
            data.events += c.folder.events;
            // A span kept for two overlapping pins is kept once.
            let folder = &c.folder;
            let mut spans: Vec<Span> = std::mem::take(&mut c.kept)
                .into_iter()
                .map(|k| folder.span(&k.1))
                .collect();
            spans.sort_by(|a, b| {
                (a.start_ns, a.end_ns, &a.name).cmp(&(b.start_ns, b.end_ns, &b.name))
            });
            spans.dedup();
            spans.extend(c.spans.drain(..).map(|p| folder.span(&p)));
            spans.extend(c.folder.running_span(c.last_ts));
            data.pruned_before.insert(c.cpu, c.pruned_before);
            data.spans.insert(c.cpu, spans);
        }
        // Naming kernel functions is a cost paid once, at the end, whatever the run's length: timed on
        // its own (/proc/kallsyms is ~120,000 lines the kernel formats: ~30 ms of system time alone on a
        // 6.18 kernel), so that the per-second figure is the drains'.
        let cpu0 = crate::time::thread_cpu_ns();
        let mut read_kallsyms = false;
        if self.layout.is_some() {
            read_kallsyms =
                raw::resolve_symbols(data.spans.values_mut().flatten().filter_map(|s| {
                    let named = match s.kind {
                        CauseKind::Work => s.name.starts_with("0x"),
                        CauseKind::Vector => s.name.starts_with("NMI 0x"),
                        _ => false,
                    };
                    named.then_some(&mut s.name)
                }));
        }
        // Nothing to name, nothing said (not a "0.0 ms").
        if read_kallsyms {
            data.symbols_ns = crate::time::thread_cpu_ns().saturating_sub(cpu0);
        }
        data.collector_ns = self.collector_ns;
        data.traced_ns =
            crate::time::now_ns(crate::time::ClockId::Monotonic).saturating_sub(self.started_ns);
        data.binary = self.layout.is_some();
        data.idle_switches_filtered = self.idle_switches_filtered;
        data.started_ns = self.started_ns;
        data.pins = self.pins.iter().map(|&(_, a, b)| (a, b)).collect();
        data
    }
}

/// The `sched_switch` filter that drops the switches between the idle task (pid 0) and the threads
/// `tids`, keeping every other: per run of consecutive tids a range test, so that a probe's threads, made
/// one after another, cost one clause whatever their number. `None` with no tid, or when the filter would
/// not fit the page the kernel takes it in.
fn idle_switch_filter(tids: &[i64]) -> Option<String> {
    let mut sorted: Vec<i64> = tids.iter().copied().filter(|&t| t > 0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for t in sorted {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == t => *end = t,
            _ => runs.push((t, t)),
        }
    }
    if runs.is_empty() {
        return None;
    }
    // "field is none of the tids": each run excluded in turn.
    let none_of = |field: &str| {
        runs.iter()
            .map(|&(a, b)| {
                if a == b {
                    format!("{field} != {a}")
                } else {
                    format!("({field} < {a} || {field} > {b})")
                }
            })
            .collect::<Vec<_>>()
            .join(" && ")
    };
    let f = format!(
        "(prev_pid != 0 || ({})) && (next_pid != 0 || ({}))",
        none_of("next_pid"),
        none_of("prev_pid")
    );
    (f.len() < 4000).then_some(f)
}

/// `overrun:` (events overwritten before being read) of a per-CPU stats file.
pub fn parse_overrun(stats: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix("overrun:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// What a finished session hands back.
#[derive(Debug, Default)]
pub struct TraceData {
    /// What ran on each CPU instead of the probe: spans per CPU, in time order.
    pub spans: BTreeMap<u32, Vec<Span>>,
    /// CLOCK_MONOTONIC time tracing started.
    pub started_ns: u64,
    /// Per CPU: unpinned spans ending before this time were dropped by the rolling window.
    pub pruned_before: BTreeMap<u32, u64>,
    /// Ranges kept past the rolling window.
    pub pins: Vec<(u64, u64)>,
    /// Events read from the trace buffer.
    pub events: u64,
    /// Events the kernel dropped because the buffer was full.
    pub lost: u64,
    /// CPU time spent reading and folding the trace, ns.
    pub collector_ns: u64,
    /// CPU time spent once at the end naming kernel functions (`/proc/kallsyms`), ns.
    pub symbols_ns: u64,
    /// How long the trace ran, ns.
    pub traced_ns: u64,
    /// Read in binary (`trace_pipe_raw`), not as text.
    pub binary: bool,
    /// The probe's switches to and from idle were dropped in the kernel ([`TraceSession::exclude`]).
    pub idle_switches_filtered: bool,
}

impl TraceData {
    /// Whether the trace of `cpu` covers the window `[start, end]` whole.
    pub fn covers(&self, cpu: u32, start: u64, end: u64) -> bool {
        let Some(&pruned) = self.pruned_before.get(&cpu) else {
            return false;
        };
        start >= self.started_ns
            && (start >= pruned || self.pins.iter().any(|&(a, b)| a <= start && end <= b))
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let extra = self.extra.iter().map(|(s, e)| (s.as_str(), e.as_str()));
        for (sys, ev) in EVENTS.iter().copied().chain(extra) {
            let _ = std::fs::write(
                self.dir.join("events").join(sys).join(ev).join("enable"),
                "0",
            );
        }
        // The pipes must be closed before the instance can be removed.
        self.cpus.clear();
        let _ = std::fs::remove_dir(&self.dir);
        if self.mounted || mount_orphaned() {
            unmount_tracefs();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fold::thread_name;
    use super::*;
    use rtgauge_analysis::episodes::breakdown;
    use rtgauge_model::attribution::CauseKind;

    const LINES: &str = "\
            bash-6488    [001] d..2.  4718.530003: sched_switch: prev_comm=bash prev_pid=6488 prev_prio=120 prev_state=R ==> next_comm=rtg culprit next_pid=77 next_prio=4
     rtg culprit-77      [001] d.h1.  4718.530100: local_timer_entry: vector=236
     rtg culprit-77      [001] d.h1.  4718.530110: local_timer_exit: vector=236
     rtg culprit-77      [001] d.h1.  4718.530200: irq_handler_entry: irq=24 name=virtio0-input.0
     rtg culprit-77      [001] d.h1.  4718.530210: irq_handler_exit: irq=24 ret=handled
     rtg culprit-77      [001] ..s1.  4718.530210: softirq_entry: vec=3 [action=NET_RX]
     rtg culprit-77      [001] ..s1.  4718.530230: softirq_exit: vec=3 [action=NET_RX]
     rtg culprit-77      [001] d..2.  4718.535003: sched_switch: prev_comm=rtg culprit prev_pid=77 prev_prio=4 prev_state=S ==> next_comm=probe next_pid=9 next_prio=1
";

    /// Every line of `lines` (each must parse) folded by a fresh folder that finds policies with `policy`.
    fn fold(lines: &str, policy: fn(i64) -> Option<&'static str>) -> (Folder, Vec<Span>) {
        let mut f = Folder::default();
        f.policy = policy;
        let mut out = Vec::new();
        for l in lines.lines() {
            f.feed(&parse_line(l).expect(l), &mut out);
        }
        (f, out)
    }

    #[test]
    fn a_thread_that_makes_itself_fifo_while_running_is_not_named_cfs() {
        // Python's os.sched_setscheduler around a 5 ms spin: switched in and out at CFS priority, FIFO 50
        // in between. The 6.1 format (hex, no 0x) and the later one (decimal, pointers with 0x).
        for (raise, drop) in [
            (
                "pid: 0, policy: 1, param: 0x7ffe388a8434",
                "pid: 0, policy: 0, param: 0x7ffe388a8434",
            ),
            (
                "pid: 4d, policy: 40000001, param: 7ffe388a8434",
                "pid: 0, policy: 0, param: 7ffe388a8434",
            ),
        ] {
            let lines = format!(
                "\
      bash-6488    [001] d..2.  4718.530003: sched_switch: prev_comm=bash prev_pid=6488 prev_prio=120 prev_state=S ==> next_comm=rtg-culprit next_pid=77 next_prio=120
 rtg-culprit-77    [001] .....  4718.530100: sys_sched_setscheduler({raise})
 rtg-culprit-77    [001] .....  4718.530101: sys_sched_setscheduler -> 0x0
 rtg-culprit-77    [001] .....  4718.535100: sys_sched_setscheduler({drop})
 rtg-culprit-77    [001] .....  4718.535101: sys_sched_setscheduler -> 0x0
 rtg-culprit-77    [001] d..2.  4718.535200: sched_switch: prev_comm=rtg-culprit prev_pid=77 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=9 next_prio=89
     probe-9       [001] d..2.  4718.535300: sched_switch: prev_comm=probe prev_pid=9 prev_prio=89 prev_state=S ==> next_comm=rtg-culprit next_pid=77 next_prio=120
 rtg-culprit-77    [001] d..2.  4718.536000: sched_switch: prev_comm=rtg-culprit prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=6488 next_prio=120
"
            );
            let (_, spans) = fold(&lines, |_| None);
            let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
            // Refused (EPERM): it ran at CFS, and is named so.
            let refused = lines.replacen(
                "sys_sched_setscheduler -> 0x0",
                "sys_sched_setscheduler -> 0xffffffffffffffff",
                1,
            );
            let (_, r) = fold(&refused, |_| None);
            assert_eq!(r[0].name, "rtg-culprit/77 CFS", "{raise}");
            // Its switch-in missing from the trace (seen on 6.18): charged from the last recorded switch
            // at its switch-out's CFS priority, still named by the policy it set, from the events' header.
            let missing = lines.replacen(
                "next_comm=rtg-culprit next_pid=77 next_prio=120",
                "next_comm=kworker/1:1 next_pid=50 next_prio=120",
                1,
            );
            let (_, m) = fold(&missing, |_| None);
            assert!(
                m.iter()
                    .any(|s| s.name
                        == "rtg-culprit/77 FIFO (set while running; priority not traced)"),
                "{raise}: {m:?}"
            );
            assert_eq!(
                names,
                [
                    "rtg-culprit/77 FIFO (set while running; priority not traced)",
                    "probe/9 RT 10",
                    // Its next turn, after the drop, is CFS again.
                    "rtg-culprit/77 CFS",
                ],
                "{raise}"
            );
        }
    }

    #[test]
    fn lines_fold_into_spans_and_break_down() {
        let mut f = Folder::default();
        f.exclude = vec![9];
        f.policy = |_| None;
        let mut out = Vec::new();
        for l in LINES.lines() {
            let e = parse_line(l).expect(l);
            f.feed(&e, &mut out);
        }
        assert_eq!(f.events, 8);
        let names: Vec<&str> = out.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "local_timer",
                "24 virtio0-input.0",
                "NET_RX",
                "rtg culprit/77 RT 95"
            ],
            "bash ran before the first event: no span"
        );
        assert!(
            f.running_span(4_718_540_000_000).is_none(),
            "the probe itself is excluded"
        );
        // Window: expected wake-up at .530050, observed at .535010.
        let c = breakdown(4_718_530_050_000, 4_718_535_010_000, &out);
        assert_eq!(c[0].name, "rtg culprit/77 RT 95");
        let total: u64 = c.iter().map(|c| c.ns).sum();
        assert_eq!(total, 4_960_000);
        assert!(c[0].ns * 100 / total >= 98);
        let net = c
            .iter()
            .find(|c| c.kind == CauseKind::Softirq)
            .map(|c| c.ns);
        assert_eq!(net, Some(20_000));
        let rest = c
            .iter()
            .find(|c| c.kind == CauseKind::Unattributed)
            .map(|c| c.ns);
        assert_eq!(rest, Some(7_000), "switch at .535003, observed at .535010");
    }

    #[test]
    fn a_softirq_preempted_in_its_thread_is_charged_only_while_it_runs() {
        // PREEMPT_RT: ksoftirqd (CFS) enters SCHED, a FIFO 50 thread preempts it for 250 ms, ksoftirqd comes
        // back and leaves the softirq. The burst is the thread's, not the softirq's (as on the lab guest,
        // where the open softirq covered 242 ms of a culprit's burst).
        let lines = "\
 ksoftirqd/1-29 [001] ..s.. 100.000000: softirq_entry: vec=7 [action=SCHED]
 ksoftirqd/1-29 [001] d..2. 100.001000: sched_switch: prev_comm=ksoftirqd/1 prev_pid=29 prev_prio=120 prev_state=R ==> next_comm=spinner next_pid=4242 next_prio=49
 spinner-4242 [001] d..2. 100.251000: sched_switch: prev_comm=spinner prev_pid=4242 prev_prio=49 prev_state=S ==> next_comm=ksoftirqd/1 next_pid=29 next_prio=120
 ksoftirqd/1-29 [001] ..s.. 100.251500: softirq_exit: vec=7 [action=SCHED]";
        let (f, out) = fold(lines, |pid| (pid == 4242).then_some("FIFO"));
        let c = breakdown(100_000_000_000, 100_252_000_000, &out);
        assert_eq!(c[0].name, "spinner/4242 FIFO 50", "{c:?}");
        assert_eq!(c[0].ns, 250_000_000);
        let sched = c.iter().find(|c| c.kind == CauseKind::Softirq).unwrap();
        assert_eq!(
            (sched.ns, sched.count),
            (1_500_000, 2),
            "two stretches of SCHED"
        );
        assert!(
            f.suspended.is_empty(),
            "resumed and closed: {:?}",
            f.suspended
        );
    }

    #[test]
    fn a_work_item_left_open_by_a_migrated_kworker_is_not_charged_for_what_follows() {
        // kworker/u4:1 sleeps in its item on CPU 1 and finishes it on CPU 0 (not in this CPU's trace); back
        // on CPU 1 it starts another item: the first one is stale, not the name of everything it runs.
        let lines = "\
 kworker/u4:1-50 [001] ..... 100.000000: workqueue_execute_start: work struct 0000: function flush_to_ldisc
 kworker/u4:1-50 [001] d..2. 100.001000: sched_switch: prev_comm=kworker/u4:1 prev_pid=50 prev_prio=120 prev_state=D ==> next_comm=swapper/1 next_pid=0 next_prio=120
 swapper/1-0 [001] d..2. 100.100000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/u4:1 next_pid=50 next_prio=120
 kworker/u4:1-50 [001] ..... 100.100100: workqueue_execute_start: work struct 0001: function vmstat_update
 kworker/u4:1-50 [001] ..... 100.100200: workqueue_execute_end: work struct 0001: function vmstat_update
 kworker/u4:1-50 [001] d..2. 100.105000: sched_switch: prev_comm=kworker/u4:1 prev_pid=50 prev_prio=120 prev_state=I ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        let (f, out) = fold(lines, |_| None);
        let c = breakdown(100_100_000_000, 100_105_000_000, &out);
        assert_eq!(c[0].name, "kworker/u4:1/50 CFS", "{c:?}");
        assert_eq!(c[0].ns, 4_900_000);
        assert!(
            !c.iter().any(|c| c.name == "flush_to_ldisc"),
            "the stale item: {c:?}"
        );
        assert!(f.stack.is_empty() && f.suspended.is_empty());
    }

    #[test]
    fn a_thread_whose_switch_in_was_not_traced_is_charged_from_its_switch_out() {
        // As traced on a 6.18 guest: the FIFO 50 spinner's switch in (idle → bash) is missing; its switch out
        // names it, and the time since the last recorded switch is its own, not the idle task's.
        let lines = "\
 rcu_preempt-15 [001] d..2. 17722.609578: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=swapper/1 next_pid=0 next_prio=120
 bash-13251 [001] d..2. 17722.614540: sched_switch: prev_comm=bash prev_pid=13251 prev_prio=49 prev_state=Z ==> next_comm=rtgauge-cyc0 next_pid=13253 next_prio=89";
        let (_, out) = fold(lines, |_| Some("FIFO"));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].name, "bash/13251 FIFO 50");
        assert_eq!(out[0].end_ns - out[0].start_ns, 4_962_000);
        assert_eq!(out[0].kind, CauseKind::Thread);
    }

    #[test]
    fn a_thread_that_raised_its_priority_while_running_is_named_at_it() {
        // Switched in as CFS, made itself FIFO 50 while running (no switch), switched out at prio 49: it held
        // the CPU over the probe as FIFO 50, not as the CFS thread it was at its switch-in.
        let lines = "\
 swapper/1-0 [001] d..2. 100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=spinner next_pid=4242 next_prio=120
 spinner-4242 [001] d..2. 100.005000: sched_switch: prev_comm=spinner prev_pid=4242 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        let (_, out) = fold(lines, |pid| (pid == 4242).then_some("FIFO"));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].name, "spinner/4242 FIFO 50");
        // The same with its sched_setscheduler traced: the policy it set names it, whatever /proc says by
        // the time the span is read (it may be back at SCHED_OTHER).
        let lines = "\
 swapper/1-0 [001] d..2. 100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=spinner next_pid=4242 next_prio=120
 spinner-4242 [001] ..... 100.000100: sys_sched_setscheduler(pid: 0, policy: 1, param: 0x7ffe388a8434)
 spinner-4242 [001] ..... 100.000101: sys_sched_setscheduler -> 0x0
 spinner-4242 [001] d..2. 100.005000: sched_switch: prev_comm=spinner prev_pid=4242 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        let (_, out) = fold(lines, |_| None);
        assert_eq!(out[0].name, "spinner/4242 FIFO 50");
    }

    #[test]
    fn a_thread_that_named_itself_while_running_is_named_by_its_new_comm() {
        // A new thread switches in under its parent's comm and names itself before it spins (seen in the
        // host+guest lab: the noise thread charged as its parent's comm): its span carries the new name.
        let lines = "\
 swapper/1-0 [001] d..2. 100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a_guest_stall_i next_pid=7033 next_prio=120
 rtg-noise-7033 [001] d..2. 100.020000: sched_switch: prev_comm=rtg-noise prev_pid=7033 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        let (_, out) = fold(lines, |pid| (pid == 7033).then_some("FIFO"));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].name, "rtg-noise/7033 FIFO 50");
    }

    #[test]
    fn a_comm_with_a_newline_does_not_cut_its_events() {
        // `echo rtg-culprit > /proc/PID/comm` leaves a newline at the comm's end: trace_pipe's text cuts
        // the header and each comm field there. The spans read as if the comm were whole.
        let text = "   rtg-culprit
-1234 [001] d..2. 100.000000: sched_switch: prev_comm=rtg-culprit
 prev_pid=1234 prev_prio=49 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0 [001] d..2. 100.100000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtg-culprit
 next_pid=1234 next_prio=49
CPU:1 [LOST 3 EVENTS]
   rtg-culprit
-1234 [001] d..2. 100.300000: sched_switch: prev_comm=rtg-culprit
 prev_pid=1234 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
";
        let mut lines = Vec::new();
        Rejoin::default().feed(text.as_bytes(), &mut |l| lines.push(l.to_string()));
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert_eq!(lines[2], "CPU:1 [LOST 3 EVENTS]");
        let mut f = Folder::default();
        f.policy = |pid| (pid == 1234).then_some("FIFO");
        let mut out = Vec::new();
        for l in &lines {
            if let Some(e) = parse_line(l) {
                f.feed(&e, &mut out);
            }
        }
        let names: Vec<_> = out
            .iter()
            .map(|s| (s.name.as_str(), s.end_ns - s.start_ns))
            .collect();
        assert_eq!(
            names,
            [("rtg-culprit?/1234 FIFO 50", 200_000_000)],
            "{out:?}"
        );
    }

    #[test]
    fn a_threaded_interrupt_handler_names_its_irq() {
        // As traced on Debian's 6.1 PREEMPT_RT kernel in the lab (crates/cli/tests/lab.rs): a storm on ttyS2.
        let lines = "\
 cat-201 [001] d..2. 16.660100: sched_switch: prev_comm=cat prev_pid=201 prev_prio=120 prev_state=R+ ==> next_comm=irq/5-ttyS2 next_pid=165 next_prio=49
 irq/5-ttyS2-165 [001] d..2. 16.661100: sched_switch: prev_comm=irq/5-ttyS2 prev_pid=165 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        let (_, out) = fold(lines, |_| Some("FIFO"));
        assert_eq!(out.len(), 1, "cat ran before the first event: {out:?}");
        assert_eq!(out[0].kind, CauseKind::Thread);
        assert_eq!(
            out[0].name,
            "irq/5-ttyS2/165 FIFO 50 (threaded IRQ 5 ttyS2)"
        );
        assert_eq!(out[0].end_ns - out[0].start_ns, 1_000_000);
        assert_eq!(
            thread_name("irq/24-s-virtio0", 7, 49, None, None),
            "irq/24-s-virtio0/7 RT 50 (threaded IRQ 24 virtio0)"
        );
        // Not an interrupt thread: no IRQ named.
        for comm in ["irq/x-ttyS2", "irq/-a", "irqbalance", "irq/5"] {
            assert!(
                !thread_name(comm, 1, 120, None, None).contains("IRQ"),
                "{comm}"
            );
        }
    }

    #[test]
    fn the_policy_of_a_live_thread_is_read_from_proc() {
        // This test's own thread: SCHED_OTHER, so no real-time policy.
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        assert_eq!(read_rt_policy(i64::from(tid)), None);
        let t = std::thread::spawn(|| {
            let p = libc::sched_param { sched_priority: 5 };
            // SAFETY: valid parameters for the calling thread.
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_RR, &p) };
            assert_eq!(rc, 0, "needs root");
            // SAFETY: gettid has no preconditions.
            read_rt_policy(i64::from(unsafe { libc::gettid() }))
        });
        assert_eq!(t.join().unwrap(), Some("RR"));
    }

    #[test]
    fn hostile_lines_and_helpers() {
        for l in [
            "",
            "x",
            "] : :",
            "a [001] 1.: x",
            "a [001] .5: x: y",
            "a [0] 99999999999999999999.1: e: f",
        ] {
            let _ = parse_line(l);
        }
        let e = parse_line("a-1 [000] .... 12.5: ev: f=1").expect("short fraction");
        assert_eq!(e.ts_ns, 12_500_000_000);
        assert_eq!(prio_name(4, None), "RT 95");
        assert_eq!(prio_name(49, Some("FIFO")), "FIFO 50");
        assert_eq!(prio_name(120, Some("FIFO")), "CFS");
        assert_eq!(prio_name(-1, None), "DEADLINE");
        assert_eq!(read_rt_policy(i64::from(i32::MAX)), None, "no such thread");
        assert_eq!(parse_overrun("entries: 1\noverrun: 42\n"), 42);
        let names = vec![
            "rtgauge-1".to_string(),
            "rtgauge-2".into(),
            "other".into(),
            "rtgauge-x".into(),
        ];
        assert_eq!(
            stale_instances(&names, |p| p == 1),
            vec!["rtgauge-2".to_string()]
        );
    }

    #[test]
    fn timerlat_and_osnoise_are_detected_where_offered() {
        let dir = std::env::temp_dir().join(format!("rtgauge-tracers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("available_tracers"),
            "timerlat osnoise hwlat function nop\n",
        )
        .unwrap();
        assert_eq!(kernel_tracers(&dir), (true, true));
        std::fs::write(dir.join("available_tracers"), "blk function nop\n").unwrap();
        assert_eq!(kernel_tracers(&dir), (false, false));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            kernel_tracers(&dir),
            (false, false),
            "no tracefs: nothing offered"
        );
        // This machine's kernel (the development VM) offers neither; where it does, say so.
        let (t, o) = kernel_tracers(Path::new(TRACEFS));
        let offered = std::fs::read_to_string(Path::new(TRACEFS).join("available_tracers"))
            .unwrap_or_default();
        assert_eq!(t, offered.split_whitespace().any(|x| x == "timerlat"));
        assert_eq!(o, offered.split_whitespace().any(|x| x == "osnoise"));
    }

    /// nmi_handler's text is `%ps() delta_ns: %lld handled: %d`: the span ends at the event and lasts
    /// delta_ns.
    #[test]
    fn an_nmi_line_is_a_span_of_its_handler() {
        let (_, out) = fold(
            "          <idle>-0       [001] d.Z1.   100.000010: nmi_handler: perf_event_nmi_handler() delta_ns: 2345 handled: 1\n",
            |_| None,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].name, "NMI perf_event_nmi_handler");
        assert_eq!(
            (out[0].start_ns, out[0].end_ns),
            (100_000_010_000 - 2_345, 100_000_010_000)
        );
    }

    /// A host that starts processes all the time gives the folder a new name per pid: the names no piece
    /// refers to any more are forgotten, and the ones still held keep naming the same threads.
    #[test]
    fn names_no_piece_refers_to_are_forgotten() {
        let mut f = Folder::default();
        f.policy = |_| None;
        let mut pieces = Vec::new();
        // A switch into thread `pid` of comm "short" at `t`: the thread before it becomes a piece.
        let switch_to = |f: &mut Folder, pieces: &mut Vec<Piece>, t: u64, pid: i64| {
            let ev = Ev::Switch {
                prev_comm: None,
                prev_pid: None,
                prev_prio: 120,
                next_comm: "short",
                next_pid: pid,
                next_prio: 120,
            };
            f.feed_ev(t, None, &ev, pieces);
        };
        for pid in 1..=5_000i64 {
            switch_to(&mut f, &mut pieces, pid as u64 * 1_000, pid);
        }
        assert_eq!(pieces.len(), 4_999);
        assert!(f.names_grown());
        let mut held: Vec<Piece> = pieces[4_990..].to_vec();
        let before: Vec<String> = held.iter().map(|p| f.span(p).name).collect();
        f.compact(held.iter_mut().map(|p| &mut p.name));
        assert!(!f.names_grown());
        let after: Vec<String> = held.iter().map(|p| f.span(p).name).collect();
        assert_eq!(before, after);
        assert_eq!(after[0], "short/4991 CFS");
        // Interning goes on from the kept table: a name held is found again, a new one added.
        switch_to(&mut f, &mut pieces, 9_000_000, 4_991);
        let last = pieces.last().expect("the last thread's span");
        assert_eq!(f.span(last).name, "short/5000 CFS");
        assert_eq!(f.names.len(), 10, "9 held + the running thread's");
    }

    /// A thread whose switch-in the trace lacks (6.18 leaves out some idle → task switches; the probe's
    /// own idle switches are filtered out in the kernel) is charged from the last event recorded in
    /// another task, not from the last recorded switch: the idle time and the probe's wake-up between
    /// are not its.
    #[test]
    fn a_thread_whose_switch_in_is_missing_is_charged_from_the_last_event_of_another_task() {
        let mut f = Folder::default();
        f.policy = |_| None;
        let mut pieces = Vec::new();
        let to_idle = |f: &mut Folder, pieces: &mut Vec<Piece>, t: u64| {
            let ev = Ev::Switch {
                prev_comm: Some("kworker/1:1"),
                prev_pid: Some(41),
                prev_prio: 120,
                next_comm: "swapper/1",
                next_pid: 0,
                next_prio: 120,
            };
            f.feed_ev(t, Some(41), &ev, pieces);
        };
        to_idle(&mut f, &mut pieces, 100_000);
        // A timer interrupt from `t` to `end` in the context of task `pid`.
        let interrupt = |f: &mut Folder, pieces: &mut Vec<Piece>, t: u64, end: u64, pid: i64| {
            f.feed_ev(t, Some(pid), &Ev::VectorEntry("local_timer"), pieces);
            f.feed_ev(end, Some(pid), &Ev::VectorExit, pieces);
        };
        // Idle: the probe's timer interrupt (its own switches filtered out).
        interrupt(&mut f, &mut pieces, 200_000, 210_000, 0);
        // The kworker runs (its switch-in not traced): an interrupt in its context, then it sleeps.
        interrupt(&mut f, &mut pieces, 500_000, 505_000, 41);
        to_idle(&mut f, &mut pieces, 600_000);
        let threads: Vec<(u64, u64, String)> = pieces
            .iter()
            .filter(|p| p.kind == CauseKind::Thread)
            .map(|p| (p.start_ns, p.end_ns, f.span(p).name))
            .collect();
        assert_eq!(
            threads,
            vec![(210_000, 600_000, "kworker/1:1/41 CFS".to_string())],
            "from the idle task's last event, not from its own switch-out at 100 µs"
        );
    }

    /// The live sessions of this process share one instance name (`rtgauge-<pid>`): one at a time.
    static LIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The binary reader folds what the text one does: one recording, read as text (the per-CPU `trace`
    /// file, which does not consume) and then in binary (trace_pipe_raw), gives the same spans to the µs
    /// (the text's resolution, rounded), with the same names.
    #[test]
    fn the_binary_reader_folds_what_the_text_reader_does() {
        let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let s = TraceSession::start(&[0], 4096).expect("tracefs (the tests run as root)");
        assert!(s.binary());
        // Something to fold on CPU 0: a named thread that sleeps and wakes, and a work item now and then.
        let worker = std::thread::Builder::new()
            .name("rtg-fold-eq".into())
            .spawn(|| {
                let _ = crate::rt::pin_thread(Some(0));
                for _ in 0..150 {
                    std::thread::sleep(std::time::Duration::from_micros(700));
                }
            })
            .expect("thread");
        worker.join().expect("worker");
        s.stop_recording();
        let text = std::fs::read_to_string(s.dir().join("per_cpu/cpu0/trace")).expect("trace");
        let mut f = Folder::default();
        let mut text_spans = Vec::new();
        let mut last = 0;
        for line in text.lines() {
            if let Some(e) = parse_line(line) {
                last = last.max(e.ts_ns);
                f.feed(&e, &mut text_spans);
            }
        }
        text_spans.extend(f.running_span(last));
        let d = s.finish();
        let raw_spans = &d.spans[&0];
        let us = |v: &[Span]| -> Vec<(u64, u64, CauseKind, String)> {
            v.iter()
                // The text rounds to the nearest µs (the kernel's ns2usecs).
                .map(|s| {
                    (
                        (s.start_ns + 500) / 1000,
                        (s.end_ns + 500) / 1000,
                        s.kind,
                        s.name.clone(),
                    )
                })
                .collect()
        };
        let (a, b) = (us(&text_spans), us(raw_spans));
        assert!(a.len() > 100, "the worker's wake-ups folded: {}", a.len());
        assert!(
            a.iter().any(|s| s.3.starts_with("rtg-fold-eq/")),
            "the worker named: {a:?}"
        );
        assert_eq!(d.events, f.events, "as many events read both ways");
        if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
            let around = |v: &[(u64, u64, CauseKind, String)]| {
                v[i.saturating_sub(2)..(i + 3).min(v.len())].to_vec()
            };
            panic!(
                "span {i} of {}/{} differs: text {:?}, binary {:?}",
                a.len(),
                b.len(),
                around(&a),
                around(&b)
            );
        }
    }

    #[test]
    fn the_idle_switch_filter_names_each_run_of_tids_once() {
        assert_eq!(idle_switch_filter(&[]), None);
        assert_eq!(
            idle_switch_filter(&[42]).as_deref(),
            Some("(prev_pid != 0 || (next_pid != 42)) && (next_pid != 0 || (prev_pid != 42))")
        );
        let f = idle_switch_filter(&[12, 10, 11, 40, 13, 11]).unwrap();
        assert_eq!(
            f,
            "(prev_pid != 0 || ((next_pid < 10 || next_pid > 13) && next_pid != 40)) && \
             (next_pid != 0 || ((prev_pid < 10 || prev_pid > 13) && prev_pid != 40))"
        );
        // 256 threads made one after another: one clause.
        let many: Vec<i64> = (5000..5256).collect();
        assert!(idle_switch_filter(&many).unwrap().len() < 150);
        // Scattered tids that would not fit a page: no filter rather than a refused one.
        let scattered: Vec<i64> = (0..400).map(|k| 1000 + 2 * k).collect();
        assert_eq!(idle_switch_filter(&scattered), None);
    }

    /// The kernel takes the filter, and drops exactly the excluded thread's switches to and from idle:
    /// another thread's are read, and it is still named.
    #[test]
    fn the_kernel_drops_the_probe_threads_idle_switches_only() {
        let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = TraceSession::start(&[0], 4096).expect("tracefs (the tests run as root)");
        let sleeper = |name: &str| {
            let (tx, rx) = std::sync::mpsc::channel();
            let go = std::sync::Arc::new(std::sync::Barrier::new(2));
            let g = go.clone();
            let h = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let _ = crate::rt::pin_thread(Some(0));
                    tx.send(i64::from(crate::rt::gettid())).unwrap();
                    g.wait();
                    for _ in 0..150 {
                        std::thread::sleep(std::time::Duration::from_micros(700));
                    }
                })
                .expect("thread");
            (rx.recv().expect("tid"), go, h)
        };
        let (probe, probe_go, probe_h) = sleeper("rtg-filt-probe");
        let (other, other_go, other_h) = sleeper("rtg-filt-other");
        s.exclude(&[probe]);
        assert!(s.idle_switches_filtered, "the kernel took the filter");
        // Switches before this (the threads parking at their barrier) may be in the trace unfiltered.
        let filtered_from = crate::time::now_ns(crate::time::ClockId::Monotonic);
        probe_go.wait();
        other_go.wait();
        probe_h.join().expect("probe");
        other_h.join().expect("other");
        s.stop_recording();
        let text = std::fs::read_to_string(s.dir().join("per_cpu/cpu0/trace")).expect("trace");
        let switch = |prev: i64, next: i64| {
            text.lines().any(|l| {
                let at = l
                    .split_once(": sched_switch:")
                    .and_then(|(head, _)| head.split_whitespace().last())
                    .and_then(|t| t.parse::<f64>().ok())
                    .map(|t| (t * 1e9) as u64);
                at.is_some_and(|t| t > filtered_from)
                    && l.contains(&format!(" prev_pid={prev} "))
                    && l.contains(&format!(" next_pid={next} "))
            })
        };
        assert!(!switch(probe, 0), "probe → idle dropped");
        assert!(!switch(0, probe), "idle → probe dropped");
        assert!(switch(other, 0), "other → idle kept");
        let d = s.finish();
        assert!(
            d.spans[&0]
                .iter()
                .any(|sp| sp.name.starts_with(&format!("rtg-filt-other/{other} "))),
            "the other thread named"
        );
        assert!(
            !d.spans[&0]
                .iter()
                .any(|sp| sp.name.contains(&format!("/{probe} "))),
            "the probe never charged"
        );
    }

    #[test]
    fn live_session_records_the_cpu_and_cleans_up() {
        let _one = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = TraceSession::start(&[0], 1024).expect("tracefs (the tests run as root)");
        let dir = s.dir().to_path_buf();
        assert!(dir.exists());
        assert!(
            s.binary(),
            "the page layout of {} reads: {:?}",
            dir.display(),
            raw::PageLayout::load(&dir, EVENTS)
        );
        let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
            s.drain();
        }
        let d = s.finish();
        assert!(d.events > 0, "some events on CPU 0 in 200 ms");
        assert!(!dir.exists(), "the instance is removed");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            if let Some(e) = parse_line(&s) {
                Folder::default().feed(&e, &mut Vec::new());
            }
        }
    }
}
