//! Trace events of one CPU folded into [`Span`]s as they arrive: entry/exit pairs (interrupts, softirqs,
//! work items, vectors), `sched_switch` into the running thread's span, named by its policy and the highest
//! priority it held (its traced `sched_setscheduler` where it changed its own policy while running), and
//! thread-context softirqs and work items suspended while their thread is switched out.

use super::Event;
use rtgauge_model::attribution::{CauseKind, Span};

/// `key=value` from an event's fields (value up to the next space, or to `until` when given).
pub(super) fn field<'a>(fields: &'a str, key: &str, until: Option<&str>) -> Option<&'a str> {
    let at = fields.find(key)? + key.len();
    let v = fields.get(at..)?;
    let end = match until {
        Some(u) => v.find(u).unwrap_or(v.len()),
        None => v.find(' ').unwrap_or(v.len()),
    };
    v.get(..end)
}

/// Kernel priority (0–139, −1 for SCHED_DEADLINE) as a policy word: below 100 is real-time (rt priority
/// 99 − prio) under `policy` ("FIFO", "RR"; "RT" when unknown).
pub fn prio_name(prio: i64, policy: Option<&str>) -> String {
    if prio < 0 {
        "DEADLINE".to_string()
    } else if prio < 100 {
        format!("{} {}", policy.unwrap_or("RT"), 99 - prio)
    } else {
        "CFS".to_string()
    }
}

/// The real-time policy of thread `tid` now ("FIFO", "RR"), from `/proc/<tid>/stat` (field 41, `policy`,
/// proc(5)); `None` for other policies or a thread that is gone.
pub fn read_rt_policy(tid: i64) -> Option<&'static str> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // The comm (field 2) may hold spaces and parentheses: count fields after its closing one.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    match rest.split_whitespace().nth(41 - 3)? {
        "1" => Some("FIFO"),
        "2" => Some("RR"),
        _ => None,
    }
}

/// A thread as spans name it: `comm/pid FIFO 50` (or `RT 50` when the policy is unknown, `CFS`), at the
/// highest priority it had over the span. A thread that set itself a real-time policy while it ran
/// (`raised`, from its sched_setscheduler) and shows CFS at both ends is named by that policy, its priority
/// said not to be in the trace (the system call's argument is a pointer the tracepoint does not follow):
/// `comm/pid FIFO (set while running; priority not traced)`, never CFS, which could not have kept a
/// real-time thread off its CPU. A threaded interrupt handler (`irq/N-name`, every device IRQ on
/// PREEMPT_RT, `threadirqs` elsewhere; `irq/N-s-name` for a secondary handler) also names its IRQ the way a
/// hard handler's span does (`5 ttyS2`), so that a storm reads as that interrupt on both kinds of kernel:
/// `irq/5-ttyS2/165 FIFO 50 (threaded IRQ 5 ttyS2)`. The span stays a thread span: softirqs, vectors and
/// IRQs nested inside it are still charged to themselves. The comm is cut at 15 bytes by the kernel, so a
/// long device name may be cut too; the number is whole.
#[cfg(test)]
pub(super) fn thread_name(
    comm: &str,
    pid: i64,
    prio: i64,
    policy: Option<&str>,
    raised: Option<&str>,
) -> String {
    let mut s = String::new();
    write_thread_name(&mut s, comm, pid, prio, policy, raised);
    s
}

/// [`thread_name`] written into `s` (no allocation once `s` has grown).
fn write_thread_name(
    s: &mut String,
    comm: &str,
    pid: i64,
    prio: i64,
    policy: Option<&str>,
    raised: Option<&str>,
) {
    use std::fmt::Write as _;
    let _ = match raised {
        Some(p) if prio >= 100 => {
            write!(
                s,
                "{comm}/{pid} {p} (set while running; priority not traced)"
            )
        }
        _ if prio < 0 => write!(s, "{comm}/{pid} DEADLINE"),
        _ if prio < 100 => write!(s, "{comm}/{pid} {} {}", policy.unwrap_or("RT"), 99 - prio),
        _ => write!(s, "{comm}/{pid} CFS"),
    };
    let irq = comm.strip_prefix("irq/").and_then(|r| {
        let (n, dev) = r.split_once('-')?;
        let dev = dev.strip_prefix("s-").unwrap_or(dev);
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some((n, dev))
    });
    if let Some((n, dev)) = irq {
        let _ = write!(s, " (threaded IRQ {n} {dev})");
    }
}

/// A span as the rolling window keeps it: its name an index into its [`Folder`]'s names, so that the
/// window holds 24 bytes per span and no allocation of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Start, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// End (exclusive), ns.
    pub end_ns: u64,
    /// What ran.
    pub kind: CauseKind,
    /// Its name: [`Folder::name`].
    pub name: u32,
}

/// Folds one CPU's events into spans.
#[derive(Debug)]
pub struct Folder {
    /// Open entry events: kind, name, start.
    pub(super) stack: Vec<(CauseKind, u32, u64)>,
    /// The running thread since: (comm, pid, since, kernel priority at its switch-in).
    running: Option<(String, i64, u64, i64)>,
    /// The task the latest events were recorded in (their header's pid) and the time of the last event
    /// recorded in another task before them: a thread whose switch-in the trace lacks ran only after
    /// that ([`Ev::Switch`]).
    context: (i64, u64),
    /// Time of the latest event.
    last_ts: u64,
    /// The real-time policy a thread set itself while it ran (its sched_setscheduler), by pid, until its
    /// span closes at its next switch-out. Keyed by the caller's pid from the event's header, not by the
    /// recorded running thread: the switch into it can be missing from the trace.
    raised: foldhash::HashMap<i64, &'static str>,
    /// A real-time policy a thread asked for, until its sched_setscheduler returns (the entry event comes
    /// before the kernel decides: a refused one must not name it): (pid, policy).
    asked: Option<(i64, &'static str)>,
    /// Softirqs and work items open in a thread that was switched out, by pid: they run in thread context
    /// (every softirq on PREEMPT_RT, in ksoftirqd or in the thread that raised it; every work item in its
    /// kworker) and can be preempted or sleep, so each is charged only while its thread runs and goes on
    /// when the thread switches back in. Left open over the switch, a CFS ksoftirqd's SCHED softirq
    /// covered the FIFO 50 thread that preempted it and took 242 ms of its 250 ms burst.
    pub(super) suspended: foldhash::HashMap<i64, Vec<(CauseKind, u32)>>,
    /// Threads not to charge (the probe's own) and the idle task (pid 0) are left out.
    pub exclude: Vec<i64>,
    /// Events folded so far.
    pub events: u64,
    /// How a real-time thread's policy is found (FIFO or RR: the trace gives only the priority).
    pub policy: fn(i64) -> Option<&'static str>,
    /// Policies found so far, by pid. On PREEMPT_RT the per-CPU ktimers, rcuc and irq threads switch out
    /// thousands of times a second, and each `/proc/<tid>/stat` read is three system calls: uncached, they
    /// kept a 16-vCPU lab guest's collector busy in the kernel for over a minute after a 5 s run. A pid
    /// reused by a thread of another policy within one run would keep the first one's.
    policies: foldhash::HashMap<i64, Option<&'static str>>,
    /// Every name a span of this CPU has had, once; [`Piece::name`] indexes it.
    pub(super) names: Vec<String>,
    ids: foldhash::HashMap<String, u32>,
    /// Where a name is written before it is looked up.
    scratch: String,
    /// Names kept by the last [`Folder::compact`].
    names_kept: usize,
}

impl Default for Folder {
    fn default() -> Self {
        Folder {
            stack: Vec::new(),
            running: None,
            context: (-1, 0),
            last_ts: 0,
            raised: foldhash::HashMap::default(),
            asked: None,
            suspended: foldhash::HashMap::default(),
            exclude: Vec::new(),
            events: 0,
            policy: read_rt_policy,
            policies: foldhash::HashMap::default(),
            names: Vec::new(),
            ids: foldhash::HashMap::default(),
            scratch: String::new(),
            names_kept: 0,
        }
    }
}

/// One trace event as the folder needs it, whether read as text ([`Ev::from_text`]) or decoded from the
/// ring buffer's binary records (`raw`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev<'a> {
    /// `irq_handler_entry`: the IRQ number and its action's name.
    IrqEntry {
        /// The IRQ number.
        irq: Option<i64>,
        /// The handler's name.
        name: &'a str,
    },
    /// `irq_handler_exit`.
    IrqExit,
    /// `softirq_entry`, by its action's name (`NET_RX`).
    SoftirqEntry(&'a str),
    /// `softirq_exit`.
    SoftirqExit,
    /// `workqueue_execute_start`, by its function's name.
    WorkStart(&'a str),
    /// `workqueue_execute_end`.
    WorkEnd,
    /// `nmi_handler`: the handler's name and how long it ran.
    Nmi {
        /// The handler's name.
        handler: &'a str,
        /// Its duration, ns.
        delta_ns: u64,
    },
    /// `sched_switch`.
    Switch {
        /// The thread switching out: comm, pid (where known), kernel priority.
        prev_comm: Option<&'a str>,
        /// Its pid.
        prev_pid: Option<i64>,
        /// Its kernel priority.
        prev_prio: i64,
        /// The thread switching in.
        next_comm: &'a str,
        /// Its pid.
        next_pid: i64,
        /// Its kernel priority.
        next_prio: i64,
    },
    /// `sys_enter_sched_setscheduler`: the target pid (0: the caller) and the policy asked for.
    SetschedEnter {
        /// Its `pid` argument.
        target: Option<i64>,
        /// Its `policy` argument.
        policy: Option<i64>,
    },
    /// `sys_exit_sched_setscheduler`: whether it returned 0.
    SetschedExit {
        /// The call succeeded.
        ok: bool,
    },
    /// An `irq_vectors` entry event, by its vector's name (`local_timer`).
    VectorEntry(&'a str),
    /// An `irq_vectors` exit event.
    VectorExit,
    /// Anything else (counted, not folded).
    Other,
}

impl<'a> Ev<'a> {
    /// The typed event of one text line of trace_pipe.
    pub fn from_text(event: &Event<'a>) -> Ev<'a> {
        let f = event.fields;
        let num = |key: &str, default: i64| -> i64 {
            field(f, key, None)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        match event.name {
            "irq_handler_entry" => Ev::IrqEntry {
                irq: field(f, "irq=", None).and_then(|v| v.parse().ok()),
                name: field(f, "name=", Some("\u{0}")).unwrap_or(""),
            },
            "irq_handler_exit" => Ev::IrqExit,
            "softirq_entry" => Ev::SoftirqEntry(field(f, "action=", Some("]")).unwrap_or("?")),
            "softirq_exit" => Ev::SoftirqExit,
            "workqueue_execute_start" => Ev::WorkStart(field(f, "function ", None).unwrap_or("?")),
            "workqueue_execute_end" => Ev::WorkEnd,
            // `perf_event_nmi_handler() delta_ns: 2345 handled: 1` (the kernel's `%ps() delta_ns: %lld`).
            "nmi_handler" => Ev::Nmi {
                handler: f.split_once("()").map_or("?", |(h, _)| h.trim()),
                delta_ns: field(f, "delta_ns: ", None)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            },
            "sched_switch" => Ev::Switch {
                prev_comm: field(f, "prev_comm=", Some(" prev_pid=")),
                prev_pid: field(f, "prev_pid=", None).and_then(|v| v.parse().ok()),
                prev_prio: num("prev_prio=", 120),
                next_comm: field(f, "next_comm=", Some(" next_pid=")).unwrap_or("?"),
                next_pid: num("next_pid=", 0),
                next_prio: num("next_prio=", 120),
            },
            // `sys_sched_setscheduler(pid: 0, policy: 1, param: …)`, its fields read after the name's first
            // colon. 6.1 prints every argument in hex without 0x; later kernels print integers in decimal
            // and pointers with 0x.
            n if n.starts_with("sys_sched_setscheduler(") => {
                let radix = if f.contains("0x") { 10 } else { 16 };
                let int = |v: &str| i64::from_str_radix(v.trim(), radix).ok();
                Ev::SetschedEnter {
                    target: f.split(',').next().and_then(int),
                    policy: field(f, "policy: ", Some(",")).and_then(int),
                }
            }
            // `sys_sched_setscheduler -> 0x0` (the whole event is its name).
            n if n.starts_with("sys_sched_setscheduler ->") => {
                let ret = n.rsplit(' ').next().unwrap_or("");
                Ev::SetschedExit {
                    ok: i64::from_str_radix(ret.trim_start_matches("0x"), 16) == Ok(0),
                }
            }
            n => {
                if let Some(v) = n.strip_suffix("_entry") {
                    Ev::VectorEntry(v)
                } else if n.ends_with("_exit") {
                    Ev::VectorExit
                } else {
                    Ev::Other
                }
            }
        }
    }
}

impl Folder {
    /// Feed one text event; finished spans are pushed to `out`.
    pub fn feed(&mut self, event: &Event<'_>, out: &mut Vec<Span>) {
        let mut pieces = Vec::new();
        self.feed_ev(event.ts_ns, event.pid, &Ev::from_text(event), &mut pieces);
        out.extend(pieces.iter().map(|p| self.span(p)));
    }

    /// The id of the name `write` writes, added to the names when new.
    fn intern(&mut self, write: impl FnOnce(&mut String)) -> u32 {
        self.scratch.clear();
        write(&mut self.scratch);
        if let Some(&id) = self.ids.get(self.scratch.as_str()) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(self.scratch.clone());
        self.ids.insert(self.scratch.clone(), id);
        id
    }

    /// Whether the names table has grown enough to be worth [`Folder::compact`]ing: twice what the last
    /// compaction kept, and at least 4,096 (each new thread or pid is a new name).
    pub fn names_grown(&self) -> bool {
        self.names.len() > (2 * self.names_kept).max(4096)
    }

    /// Forget the names nothing refers to any more: `held` are the names of the caller's pieces (the
    /// window and the pinned ones), renumbered in place with the folder's own open ones. Keeps memory
    /// bounded on a host that starts new processes all the time.
    pub fn compact<'a>(&mut self, held: impl Iterator<Item = &'a mut u32>) {
        let mut map = vec![u32::MAX; self.names.len()];
        let mut names = Vec::new();
        let mut renumber = |id: &mut u32| {
            let Some(m) = map.get_mut(*id as usize) else {
                return;
            };
            if *m == u32::MAX {
                *m = names.len() as u32;
                names.push(std::mem::take(&mut self.names[*id as usize]));
            }
            *id = *m;
        };
        held.for_each(&mut renumber);
        self.stack.iter_mut().for_each(|e| renumber(&mut e.1));
        self.suspended
            .values_mut()
            .flatten()
            .for_each(|e| renumber(&mut e.1));
        self.ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        self.names_kept = names.len();
        self.names = names;
    }

    /// The name of id `id` ([`Piece::name`]).
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }

    /// A piece as a span, named.
    pub fn span(&self, p: &Piece) -> Span {
        Span {
            start_ns: p.start_ns,
            end_ns: p.end_ns,
            kind: p.kind,
            name: self.name(p.name).to_string(),
        }
    }

    /// Feed one event at `t` (ns) in task `pid` (the record's, where known); finished spans are pushed to
    /// `out`.
    pub fn feed_ev(&mut self, t: u64, pid: Option<i64>, event: &Ev<'_>, out: &mut Vec<Piece>) {
        use std::fmt::Write as _;
        self.events += 1;
        if let Some(p) = pid {
            if p != self.context.0 {
                self.context = (p, self.last_ts);
            }
        }
        self.last_ts = t;
        fn close(
            stack: &mut Vec<(CauseKind, u32, u64)>,
            kind: CauseKind,
            t: u64,
            out: &mut Vec<Piece>,
        ) {
            if let Some(i) = stack.iter().rposition(|(k, _, _)| *k == kind) {
                let (k, name, start) = stack.remove(i);
                out.push(Piece {
                    start_ns: start,
                    end_ns: t,
                    kind: k,
                    name,
                });
            }
        }
        match *event {
            Ev::IrqEntry { irq, name } => {
                let id = self.intern(|s| {
                    let _ = match irq {
                        Some(n) => write!(s, "{n} {name}"),
                        None => write!(s, "? {name}"),
                    };
                });
                self.stack.push((CauseKind::Irq, id, t));
            }
            Ev::IrqExit => close(&mut self.stack, CauseKind::Irq, t, out),
            Ev::SoftirqEntry(name) => {
                let id = self.intern(|s| s.push_str(name));
                self.open_alone(CauseKind::Softirq, id, t)
            }
            Ev::SoftirqExit => close(&mut self.stack, CauseKind::Softirq, t, out),
            Ev::WorkStart(name) => {
                let id = self.intern(|s| s.push_str(name));
                self.open_alone(CauseKind::Work, id, t)
            }
            Ev::WorkEnd => close(&mut self.stack, CauseKind::Work, t, out),
            Ev::Nmi { handler, delta_ns } => {
                let id = self.intern(|s| {
                    let _ = write!(s, "NMI {handler}");
                });
                out.push(Piece {
                    start_ns: t.saturating_sub(delta_ns),
                    end_ns: t,
                    kind: CauseKind::Vector,
                    name: id,
                })
            }
            Ev::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                next_comm,
                next_pid,
                next_prio,
            } => {
                // Who ran up to this switch is what its prev_* fields say. The switch into that thread can be
                // missing from the trace (seen on this project's 6.18 guest kernel: an idle → task switch
                // after a wake-up from D state was not traced), so when the recorded thread is not the one
                // switching out, the one switching out is charged from the last recorded switch. A thread is
                // named at the highest priority it had at either end of its span: one that raised itself to
                // FIFO 50 while running switched in as CFS, and it held the CPU as FIFO 50. It is named by its
                // comm at the switch out: a new thread switches in under its parent's comm and names itself
                // while running (Rust's and glibc's named threads do), so the later name is the one it has.
                // The thread switching out takes its open thread-context spans with it (a piece each).
                if let Some(out_pid) = prev_pid.or(self.running.as_ref().map(|r| r.1)) {
                    self.suspend(out_pid, t, out);
                }
                // The comm's buffer is reused for the thread switching in.
                let mut buf = String::new();
                if let Some((comm, pid, mut since, prio_in)) = self.running.take() {
                    let (name, pid, prio) = match prev_pid {
                        Some(p) if p != pid => {
                            // Its switch-in is missing: it ran no earlier than the last event recorded
                            // in another task (6.18 leaves out some idle → task switches: from the last
                            // recorded switch, a thread was charged for the idle time and the probe's
                            // wake-ups before it).
                            if self.context.0 == p {
                                since = since.max(self.context.1);
                            }
                            (prev_comm.unwrap_or("?"), p, prev_prio)
                        }
                        Some(_) => (prev_comm.unwrap_or(&comm), pid, prio_in.min(prev_prio)),
                        None => (comm.as_str(), pid, prio_in.min(prev_prio)),
                    };
                    let raised = self.raised.remove(&pid);
                    out.extend(self.thread_span(name, pid, prio, since, t, raised));
                    buf = comm;
                }
                // A raise names only the span it happened in.
                if let Some(p) = prev_pid {
                    self.raised.remove(&p);
                }
                if let Some(open) = self.suspended.remove(&next_pid) {
                    self.stack
                        .extend(open.into_iter().map(|(kind, name)| (kind, name, t)));
                }
                buf.clear();
                buf.push_str(next_comm);
                self.running = Some((buf, next_pid, t, next_prio));
            }
            Ev::SetschedEnter { target, policy } => self.on_setscheduler(pid, target, policy),
            Ev::SetschedExit { ok } => self.on_setscheduler_exit(ok, pid),
            Ev::VectorEntry(v) => {
                let id = self.intern(|s| s.push_str(v));
                self.stack.push((CauseKind::Vector, id, t))
            }
            Ev::VectorExit => close(&mut self.stack, CauseKind::Vector, t, out),
            Ev::Other => {}
        }
    }

    /// The running thread asking for a policy of its own (`target` 0, or its own pid), held until the call
    /// returns.
    fn on_setscheduler(&mut self, caller: Option<i64>, target: Option<i64>, policy: Option<i64>) {
        // The caller is the record's task, else the thread recorded running here.
        let Some(pid) = caller.or(self.running.as_ref().map(|r| r.1)) else {
            return;
        };
        if !target.is_some_and(|t| t == 0 || t == pid) {
            return;
        }
        // SCHED_RESET_ON_FORK may be or'ed in. Held until the call returns.
        self.asked = match policy.map(|p| p & 0xff) {
            Some(1) => Some((pid, "FIFO")),
            Some(2) => Some((pid, "RR")),
            _ => None,
        };
    }

    /// The call returned: what the caller asked for holds when it returned 0.
    fn on_setscheduler_exit(&mut self, ok: bool, caller: Option<i64>) {
        match self.asked.take() {
            Some((pid, w)) if ok && caller.is_none_or(|p| p == pid) => {
                self.raised.insert(pid, w);
                // What it set is its policy at real-time priorities from now on: read from /proc at drain
                // time instead, a thread that drops back to SCHED_OTHER reads as neither.
                self.policies.insert(pid, Some(w));
            }
            _ => {}
        }
    }

    /// Open a softirq or a work item. Neither nests in its own kind on one CPU (softirqs are not re-entered,
    /// a kworker runs one item at a time), so one still open is stale — its thread ran on, or finished it,
    /// on another CPU, or its end was lost — and is dropped rather than charged for what follows.
    fn open_alone(&mut self, kind: CauseKind, name: u32, t: u64) {
        self.stack.retain(|(k, _, _)| *k != kind);
        self.stack.push((kind, name, t));
    }

    /// Close the softirqs and work items open on this CPU at `t`, a piece each, and keep them for `pid`'s
    /// next switch-in. Interrupts and vectors stay: they never span a switch.
    fn suspend(&mut self, pid: i64, t: u64, out: &mut Vec<Piece>) {
        let threaded = |k: CauseKind| matches!(k, CauseKind::Softirq | CauseKind::Work);
        if !self.stack.iter().any(|(k, _, _)| threaded(*k)) {
            return;
        }
        let mut kept = Vec::new();
        for (kind, name, start) in std::mem::take(&mut self.stack) {
            if !threaded(kind) {
                kept.push((kind, name, start));
                continue;
            }
            out.push(Piece {
                start_ns: start,
                end_ns: t,
                kind,
                name,
            });
            self.suspended.entry(pid).or_default().push((kind, name));
        }
        self.stack = kept;
    }

    /// The real-time policy of `pid` at kernel priority `prio` (none asked for a non-RT one), read once
    /// per pid.
    fn policy_of(&mut self, pid: i64, prio: i64) -> Option<&'static str> {
        if !(0..100).contains(&prio) {
            return None;
        }
        let read = self.policy;
        *self.policies.entry(pid).or_insert_with(|| read(pid))
    }

    /// `pid` running from `start` to `end` as a thread span, named with its policy; none for the idle task
    /// and the excluded threads.
    fn thread_span(
        &mut self,
        comm: &str,
        pid: i64,
        prio: i64,
        start: u64,
        end: u64,
        raised: Option<&'static str>,
    ) -> Option<Piece> {
        if pid == 0 || self.exclude.contains(&pid) {
            return None;
        }
        let policy = self.policy_of(pid, prio);
        let name = self.intern(|s| write_thread_name(s, comm, pid, prio, policy, raised));
        Some(Piece {
            start_ns: start,
            end_ns: end,
            kind: CauseKind::Thread,
            name,
        })
    }

    /// The thread running now as a span up to `now` (for windows that end before its switch-out).
    pub fn running_span(&mut self, now: u64) -> Option<Span> {
        let (comm, pid, since, prio) = self.running.clone()?;
        let raised = self.raised.get(&pid).copied();
        let p = self.thread_span(&comm, pid, prio, since, now, raised)?;
        Some(self.span(&p))
    }
}
