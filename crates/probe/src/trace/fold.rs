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
pub(super) fn thread_name(
    comm: &str,
    pid: i64,
    prio: i64,
    policy: Option<&str>,
    raised: Option<&str>,
) -> String {
    let base = match raised {
        Some(p) if prio >= 100 => {
            format!("{comm}/{pid} {p} (set while running; priority not traced)")
        }
        _ => format!("{comm}/{pid} {}", prio_name(prio, policy)),
    };
    let irq = comm.strip_prefix("irq/").and_then(|r| {
        let (n, dev) = r.split_once('-')?;
        let dev = dev.strip_prefix("s-").unwrap_or(dev);
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some((n, dev))
    });
    match irq {
        Some((n, dev)) => format!("{base} (threaded IRQ {n} {dev})"),
        None => base,
    }
}

/// Folds one CPU's events into spans.
#[derive(Debug)]
pub struct Folder {
    /// Open entry events: kind, name, start.
    pub(super) stack: Vec<(CauseKind, String, u64)>,
    /// The running thread since: (comm, pid, since, kernel priority at its switch-in).
    running: Option<(String, i64, u64, i64)>,
    /// The real-time policy a thread set itself while it ran (its sched_setscheduler), by pid, until its
    /// span closes at its next switch-out. Keyed by the caller's pid from the event's header, not by the
    /// recorded running thread: the switch into it can be missing from the trace.
    raised: std::collections::HashMap<i64, &'static str>,
    /// A real-time policy a thread asked for, until its sched_setscheduler returns (the entry event comes
    /// before the kernel decides: a refused one must not name it): (pid, policy).
    asked: Option<(i64, &'static str)>,
    /// Softirqs and work items open in a thread that was switched out, by pid: they run in thread context
    /// (every softirq on PREEMPT_RT, in ksoftirqd or in the thread that raised it; every work item in its
    /// kworker) and can be preempted or sleep, so each is charged only while its thread runs and goes on
    /// when the thread switches back in. Left open over the switch, a CFS ksoftirqd's SCHED softirq
    /// covered the FIFO 50 thread that preempted it and took 242 ms of its 250 ms burst.
    pub(super) suspended: std::collections::HashMap<i64, Vec<(CauseKind, String)>>,
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
    policies: std::collections::HashMap<i64, Option<&'static str>>,
}

impl Default for Folder {
    fn default() -> Self {
        Folder {
            stack: Vec::new(),
            running: None,
            raised: std::collections::HashMap::new(),
            asked: None,
            suspended: std::collections::HashMap::new(),
            exclude: Vec::new(),
            events: 0,
            policy: read_rt_policy,
            policies: std::collections::HashMap::new(),
        }
    }
}

impl Folder {
    /// Feed one event; finished spans are pushed to `out`.
    pub fn feed(&mut self, event: &Event<'_>, out: &mut Vec<Span>) {
        self.events += 1;
        let t = event.ts_ns;
        fn close(
            stack: &mut Vec<(CauseKind, String, u64)>,
            kind: CauseKind,
            t: u64,
            out: &mut Vec<Span>,
        ) {
            if let Some(i) = stack.iter().rposition(|(k, _, _)| *k == kind) {
                let (k, name, start) = stack.remove(i);
                out.push(Span {
                    start_ns: start,
                    end_ns: t,
                    kind: k,
                    name,
                });
            }
        }
        match event.name {
            "irq_handler_entry" => {
                let irq = field(event.fields, "irq=", None).unwrap_or("?");
                let name = field(event.fields, "name=", Some("\u{0}")).unwrap_or("");
                self.stack
                    .push((CauseKind::Irq, format!("{irq} {name}"), t));
            }
            "irq_handler_exit" => close(&mut self.stack, CauseKind::Irq, t, out),
            "softirq_entry" => {
                let name = field(event.fields, "action=", Some("]")).unwrap_or("?");
                self.open_alone(CauseKind::Softirq, name.to_string(), t);
            }
            "softirq_exit" => close(&mut self.stack, CauseKind::Softirq, t, out),
            "workqueue_execute_start" => {
                let name = field(event.fields, "function ", None).unwrap_or("?");
                self.open_alone(CauseKind::Work, name.to_string(), t);
            }
            "workqueue_execute_end" => close(&mut self.stack, CauseKind::Work, t, out),
            "nmi_handler" => {
                let d: u64 = field(event.fields, "delta_ns=", None)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let name = field(event.fields, "handler=", None).unwrap_or("?");
                out.push(Span {
                    start_ns: t.saturating_sub(d),
                    end_ns: t,
                    kind: CauseKind::Vector,
                    name: format!("NMI {name}"),
                });
            }
            "sched_switch" => {
                // Who ran up to this switch is what its prev_* fields say. The switch into that thread can be
                // missing from the trace (seen on this project's 6.18 guest kernel: an idle → task switch
                // after a wake-up from D state was not traced), so when the recorded thread is not the one
                // switching out, the one switching out is charged from the last recorded switch. A thread is
                // named at the highest priority it had at either end of its span: one that raised itself to
                // FIFO 50 while running switched in as CFS, and it held the CPU as FIFO 50. It is named by its
                // comm at the switch out: a new thread switches in under its parent's comm and names itself
                // while running (Rust's and glibc's named threads do), so the later name is the one it has.
                let num = |key: &str, default: i64| -> i64 {
                    field(event.fields, key, None)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(default)
                };
                let prev_pid = field(event.fields, "prev_pid=", None).and_then(|v| v.parse().ok());
                let prev_prio = num("prev_prio=", 120);
                let prev_comm = field(event.fields, "prev_comm=", Some(" prev_pid="));
                // The thread switching out takes its open thread-context spans with it (a piece each).
                if let Some(out_pid) = prev_pid.or(self.running.as_ref().map(|r| r.1)) {
                    self.suspend(out_pid, t, out);
                }
                if let Some((comm, pid, since, prio_in)) = self.running.take() {
                    let (comm, pid, prio) = match prev_pid {
                        Some(p) if p != pid => (prev_comm.unwrap_or("?").to_string(), p, prev_prio),
                        Some(_) => (
                            prev_comm.map_or(comm, str::to_string),
                            pid,
                            prio_in.min(prev_prio),
                        ),
                        None => (comm, pid, prio_in.min(prev_prio)),
                    };
                    let raised = self.raised.remove(&pid);
                    out.extend(self.thread_span(&comm, pid, prio, since, t, raised));
                }
                // A raise names only the span it happened in.
                if let Some(p) = prev_pid {
                    self.raised.remove(&p);
                }
                let comm = field(event.fields, "next_comm=", Some(" next_pid=")).unwrap_or("?");
                let pid = num("next_pid=", 0);
                if let Some(open) = self.suspended.remove(&pid) {
                    self.stack
                        .extend(open.into_iter().map(|(kind, name)| (kind, name, t)));
                }
                self.running = Some((comm.to_string(), pid, t, num("next_prio=", 120)));
            }
            n if n.starts_with("sys_sched_setscheduler(") => {
                self.on_setscheduler(event.pid, event.fields)
            }
            n if n.starts_with("sys_sched_setscheduler ->") => {
                self.on_setscheduler_exit(n, event.pid)
            }
            n => {
                if let Some(v) = n.strip_suffix("_entry") {
                    self.stack.push((CauseKind::Vector, v.to_string(), t));
                } else if n.ends_with("_exit") {
                    close(&mut self.stack, CauseKind::Vector, t, out);
                }
            }
        }
    }

    /// `sys_sched_setscheduler(pid: 0, policy: 1, param: …)`, its fields read after the name's first colon:
    /// the running thread asking for a policy of its own (pid 0, or its own), until the call returns. 6.1 prints every argument in hex
    /// without 0x; later kernels print integers in decimal and pointers with 0x.
    fn on_setscheduler(&mut self, caller: Option<i64>, fields: &str) {
        let radix = if fields.contains("0x") { 10 } else { 16 };
        let int = |v: &str| i64::from_str_radix(v.trim(), radix).ok();
        let target = fields.split(',').next().and_then(int);
        let policy = field(fields, "policy: ", Some(",")).and_then(int);
        // The caller is the header's task, else the thread recorded running here.
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

    /// `sys_sched_setscheduler -> 0x0` (the whole event is its name): what the caller asked for holds when
    /// the call returned 0.
    fn on_setscheduler_exit(&mut self, name: &str, caller: Option<i64>) {
        let ret = name.rsplit(' ').next().unwrap_or("");
        let ok = i64::from_str_radix(ret.trim_start_matches("0x"), 16) == Ok(0);
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
    fn open_alone(&mut self, kind: CauseKind, name: String, t: u64) {
        self.stack.retain(|(k, _, _)| *k != kind);
        self.stack.push((kind, name, t));
    }

    /// Close the softirqs and work items open on this CPU at `t`, a piece each, and keep them for `pid`'s
    /// next switch-in. Interrupts and vectors stay: they never span a switch.
    fn suspend(&mut self, pid: i64, t: u64, out: &mut Vec<Span>) {
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
            out.push(Span {
                start_ns: start,
                end_ns: t,
                kind,
                name: name.clone(),
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
    ) -> Option<Span> {
        if pid == 0 || self.exclude.contains(&pid) {
            return None;
        }
        let policy = self.policy_of(pid, prio);
        Some(Span {
            start_ns: start,
            end_ns: end,
            kind: CauseKind::Thread,
            name: thread_name(comm, pid, prio, policy, raised),
        })
    }

    /// The thread running now as a span up to `now` (for windows that end before its switch-out).
    pub fn running_span(&mut self, now: u64) -> Option<Span> {
        let (comm, pid, since, prio) = self.running.clone()?;
        let raised = self.raised.get(&pid).copied();
        self.thread_span(&comm, pid, prio, since, now, raised)
    }
}
