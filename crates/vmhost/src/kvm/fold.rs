//! A KVM/QEMU VM's host trace folded into per-vCPU intervals ([`VcpuFolder`], pure: trace lines in,
//! [`HostInterval`]s out): its vCPU threads followed through the host's scheduler, interrupts and VM exits.
//!
//! Per vCPU thread, from `sched_switch`, `sched_wakeup` and `sched_migrate_task` (every host CPU traced, as a
//! wake-up is recorded on the waker's CPU):
//! - switched out runnable (`prev_state=R`, preempted) or woken, until switched back in: *runnable but not
//!   running*; that stretch is laid over the spans of the CPU it waited on (the thread that ran instead, the
//!   IRQs, softirqs and vectors inside it, innermost first, as the guest side breaks a spike down) and each
//!   piece becomes an interval ([`HostKind::Preempted`] naming that thread with its policy and priority,
//!   [`HostKind::Irq`] …, [`HostKind::Waiting`] where nothing traced ran);
//! - while running: every host IRQ, softirq and vector on its CPU is an interval that took time from it;
//! - switched out asleep until woken: [`HostKind::Asleep`] (the guest halted or the thread blocked);
//! - `kvm_exit` → `kvm_entry` of its thread (where the kvm tracepoints exist): [`HostKind::Exit`] with the
//!   exit reason; every exit counts in the per-reason totals, those of at least [`EXIT_KEEP_NS`] are kept
//!   as intervals.
//!
//! Lines come in time order over all CPUs: the source merges the CPUs' pipes before it feeds them
//! ([`super::TracefsSource`]).
//!
//! Bounds: at most `max_intervals` intervals (oldest dropped, counted, and the record says from when it
//! covers), spans kept per CPU only while a vCPU waits there (at most [`MAX_SPANS_PER_CPU`]).

use rtgauge_analysis::vm_join::{host_kind_of_span, host_layer, layered};
use rtgauge_model::attribution::CauseKind;
use rtgauge_model::vm::{ExitTotal, HostInterval, HostKind};
use rtgauge_probe::trace::{parse_line, Event, Folder};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// VM exits shorter than this count in the totals only (the text trace's timestamps are µs).
pub const EXIT_KEEP_NS: u64 = 1_000;

/// Spans kept per host CPU for the stretches a vCPU waits there.
pub const MAX_SPANS_PER_CPU: usize = 100_000;

/// Distinct names (threads, IRQs, exit reasons) a record holds at most.
pub const MAX_NAMES: usize = 200_000;

/// Intervals a wake-up looks back through for what its waking vCPU lost: the newest ones, pushed as the
/// trace goes (a few per millisecond in the lab's 4,000 packets/s run: seconds back; what a longer stall's
/// waker lost before that is not chained).
pub const RECENT_SCAN: usize = 16_384;

/// Spans older than this are dropped even while a thread still waits (its switch-in lost, or it exited
/// runnable); a wait longer than this is `waiting` in its older part.
pub const SPAN_HORIZON_NS: u64 = 5_000_000_000;

/// `key=value` (up to the next space) in an event's fields; the key must start a field.
fn kv<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = fields[from..].find(key) {
        let at = from + i;
        if at == 0 || fields.as_bytes()[at - 1] == b' ' {
            let v = &fields[at + key.len()..];
            return Some(v.split(' ').next().unwrap_or(v));
        }
        from = at + key.len();
    }
    None
}

fn num(fields: &str, key: &str) -> Option<i64> {
    kv(fields, key)?.parse().ok()
}

/// The pid of the task that recorded a trace line (`comm-pid [cpu] …`; a comm may hold spaces and dashes).
pub fn line_pid(line: &str) -> Option<i64> {
    let head = line.get(..line.find(" [")?)?.trim_end();
    head.rsplit_once('-')?.1.parse().ok()
}

/// A `kvm_exit` line's reason: `reason EPT_VIOLATION rip …` (x86; `vcpu N` before it on newer kernels).
pub fn exit_reason(fields: &str) -> &str {
    let mut w = fields.split_whitespace();
    while let Some(x) = w.next() {
        if x == "reason" {
            return w.next().unwrap_or("?");
        }
    }
    "?"
}

/// How a waker's lost stretch reads: "its waker NAME waited while WHAT ran".
fn waker_phrase(kind: HostKind, waker: &str, what: &str) -> String {
    match kind {
        HostKind::Waiting => format!("its waker {waker} waited for its CPU"),
        HostKind::Irq => format!("its waker {waker} waited while IRQ {what} ran"),
        HostKind::Softirq => format!("its waker {waker} waited while softirq {what} ran"),
        HostKind::Work => format!("its waker {waker} waited while work {what} ran"),
        // A chain: the waker slept because its own waker was held ("its waker … waited while … ran").
        HostKind::WakerDelayed => format!("its waker {waker} slept and {what}"),
        _ => format!("its waker {waker} waited while {what} ran"),
    }
}

/// Where a vCPU waited: (host CPU, from, to).
type Stretch = (u32, u64, u64);

#[derive(Debug, Clone)]
enum SchedState {
    Unknown,
    Asleep {
        cpu: u32,
        since: u64,
    },
    Running {
        cpu: u32,
        since: u64,
    },
    /// Runnable, not running: the CPU it waits on since `since`, and the earlier CPUs it waited on.
    Waiting {
        cpu: u32,
        since: u64,
        before: Vec<Stretch>,
    },
}

/// What a followed thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A vCPU (its index).
    Vcpu(u32),
    /// Another QEMU thread (its name's index): what it waits for is kept to explain a vCPU it wakes late.
    Helper(u32),
}

#[derive(Debug)]
struct Followed {
    role: Role,
    tid: i64,
    state: SchedState,
    exit: Option<(u64, u32)>,
}

/// What ran on a CPU: (start, end, kind, name).
type CpuSpan = (u64, u64, HostKind, Box<str>);

/// A stretch found inside a sleep: start, end, the host CPU, and the phrase naming it.
type Named = (u64, u64, u32, String);

/// A stretch a QEMU helper thread waited runnable: (tid, start, end, host CPU, what ran, its name).
type HelperWait = (i64, u64, u64, u32, HostKind, u32);

/// Folds host trace lines into the vCPU threads' intervals.
pub struct VcpuFolder {
    threads: Vec<Followed>,
    by_tid: HashMap<i64, usize>,
    folders: BTreeMap<u32, Folder>,
    /// What ran on each CPU lately: (start, end, kind, name). Names are interned only once an interval
    /// uses them: the table then grows with the intervals kept (bounded), not with every thread that ran.
    spans: BTreeMap<u32, VecDeque<CpuSpan>>,
    names: Vec<String>,
    name_ix: HashMap<String, u32>,
    /// The intervals so far, in the order they ended.
    pub intervals: VecDeque<HostInterval>,
    max: usize,
    /// Intervals dropped (the bound), and the latest end among them.
    pub dropped: (u64, u64),
    helper_waits: VecDeque<HelperWait>,
    exits: BTreeMap<u32, (u64, u64)>,
    /// Whether a kvm event of a vCPU thread was seen.
    pub kvm_seen: bool,
    latest: u64,
    /// How a real-time thread's policy is found (the host's /proc; tests give their own).
    pub policy: fn(i64) -> Option<&'static str>,
}

impl VcpuFolder {
    /// Follow `vcpus` (index, host thread id) and QEMU's other threads `helpers` (tid, name), keeping at
    /// most `max` intervals.
    pub fn new(vcpus: &[(u32, i64)], helpers: &[(i64, String)], max: usize) -> VcpuFolder {
        let mut r = VcpuFolder {
            threads: Vec::new(),
            by_tid: HashMap::new(),
            folders: BTreeMap::new(),
            spans: BTreeMap::new(),
            names: Vec::new(),
            name_ix: HashMap::new(),
            intervals: VecDeque::new(),
            max: max.max(1),
            dropped: (0, 0),
            helper_waits: VecDeque::new(),
            exits: BTreeMap::new(),
            kvm_seen: false,
            latest: 0,
            policy: rtgauge_probe::trace::read_rt_policy,
        };
        let roles: Vec<(i64, Role)> = vcpus
            .iter()
            .map(|&(i, tid)| (tid, Role::Vcpu(i)))
            .chain(
                helpers
                    .iter()
                    .map(|(tid, name)| (*tid, Role::Helper(r.intern(&format!("{name}/{tid}"))))),
            )
            .collect();
        for (tid, role) in roles {
            if r.by_tid.contains_key(&tid) {
                continue;
            }
            r.by_tid.insert(tid, r.threads.len());
            r.threads.push(Followed {
                role,
                tid,
                state: SchedState::Unknown,
                exit: None,
            });
        }
        r
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.name_ix.get(s) {
            return i;
        }
        if self.names.len() >= MAX_NAMES {
            // Bounded: past it every new name reads as this one (the record says so in its names).
            return self.intern_full();
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        self.name_ix.insert(s.to_string(), i);
        i
    }

    fn intern_full(&mut self) -> u32 {
        const FULL: &str = "(another thread: the record's name table is full)";
        if let Some(&i) = self.name_ix.get(FULL) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(FULL.to_string());
        self.name_ix.insert(FULL.to_string(), i);
        i
    }

    fn push(&mut self, vcpu: u32, cpu: u32, start_ns: u64, end_ns: u64, kind: HostKind, name: u32) {
        if end_ns <= start_ns {
            return;
        }
        if self.intervals.len() >= self.max {
            if let Some(old) = self.intervals.pop_front() {
                self.dropped.0 += 1;
                self.dropped.1 = self.dropped.1.max(old.end_ns);
            }
        }
        self.intervals.push_back(HostInterval {
            vcpu,
            cpu,
            start_ns,
            end_ns,
            kind,
            name,
        });
    }

    /// Feed one trace line recorded on host CPU `cpu`. Lines must come in time order over all CPUs.
    pub fn feed(&mut self, cpu: u32, line: &str) {
        let Some(e) = parse_line(line) else {
            return;
        };
        let t = e.ts_ns;
        self.latest = self.latest.max(t);
        if !self.folders.contains_key(&cpu) {
            // Nothing excluded: a vCPU thread is a culprit too — for another vCPU on its CPU, and for the
            // QEMU thread that wakes a vCPU.
            let mut f = Folder::default();
            f.policy = self.policy;
            self.folders.insert(cpu, f);
        }
        self.fold_spans(cpu, &e);
        match e.name {
            "sched_switch" => self.on_switch(cpu, t, e.fields),
            "sched_wakeup" | "sched_wakeup_new" => self.on_wakeup(cpu, t, line, e.fields),
            "sched_migrate_task" => self.on_migrate(t, e.fields),
            "kvm_exit" | "kvm_entry" => self.on_kvm(cpu, t, line, e.name, e.fields),
            _ => {}
        }
    }

    /// The thread followed whose tid is the number after `key` in `fields`.
    fn followed(&self, fields: &str, key: &str) -> Option<usize> {
        num(fields, key).and_then(|p| self.by_tid.get(&p).copied())
    }

    /// The spans of host CPU `cpu` (interrupts, threads) that event `e` closes: kept per CPU, and where a vCPU
    /// was running there, charged to it.
    fn fold_spans(&mut self, cpu: u32, e: &Event<'_>) {
        let mut out = Vec::new();
        // kvm_exit/kvm_entry are not spans of the CPU: the folder would read `kvm_entry … kvm_exit` (the guest
        // running) as a vector.
        if let Some(folder) = self
            .folders
            .get_mut(&cpu)
            .filter(|_| !e.name.starts_with("kvm_"))
        {
            folder.feed(e, &mut out);
        }
        for s in out {
            if s.kind != CauseKind::Thread {
                // An interrupt of a vCPU running on this CPU took that time from its guest.
                let running = self.threads.iter().find_map(|v| match (v.role, &v.state) {
                    (Role::Vcpu(index), SchedState::Running { cpu: c, since })
                        if *c == cpu && *since < s.end_ns =>
                    {
                        Some((index, *since))
                    }
                    _ => None,
                });
                if let Some((index, since)) = running {
                    let name = self.intern(&s.name);
                    let kind = host_kind_of_span(s.kind);
                    self.push(index, cpu, s.start_ns.max(since), s.end_ns, kind, name);
                }
            }
            let q = self.spans.entry(cpu).or_default();
            if q.len() >= MAX_SPANS_PER_CPU {
                q.pop_front();
            }
            q.push_back((
                s.start_ns,
                s.end_ns,
                host_kind_of_span(s.kind),
                s.name.into_boxed_str(),
            ));
        }
    }

    /// `sched_switch` at `t` on `cpu`: the followed thread switched out waits or sleeps, the one switched in
    /// runs, and a vCPU's wait or sleep before it is resolved.
    fn on_switch(&mut self, cpu: u32, t: u64, fields: &str) {
        if let Some(i) = self.followed(fields, "prev_pid=") {
            let runnable = kv(fields, "prev_state=").is_some_and(|s| s.starts_with('R'));
            self.threads[i].state = if runnable {
                SchedState::Waiting {
                    cpu,
                    since: t,
                    before: Vec::new(),
                }
            } else {
                SchedState::Asleep { cpu, since: t }
            };
        }
        if let Some(i) = self.followed(fields, "next_pid=") {
            let was = std::mem::replace(
                &mut self.threads[i].state,
                SchedState::Running { cpu, since: t },
            );
            match was {
                SchedState::Waiting {
                    cpu: c,
                    since,
                    mut before,
                } => {
                    before.push((c, since, t));
                    for (c, a, b) in before {
                        self.resolve(i, c, a, b);
                    }
                }
                // Woken where the wake-up was not traced: asleep up to here.
                SchedState::Asleep { cpu: c, since } => {
                    if let Role::Vcpu(index) = self.threads[i].role {
                        let n = self.intern("");
                        self.push(index, c, since, t, HostKind::Asleep, n);
                    }
                }
                SchedState::Unknown | SchedState::Running { .. } => {}
            }
        }
    }

    /// `sched_wakeup` at `t`: a vCPU asleep since `since` is woken (by a QEMU thread: its own delays count).
    fn on_wakeup(&mut self, cpu: u32, t: u64, line: &str, fields: &str) {
        let Some(i) = self.followed(fields, "pid=") else {
            return;
        };
        let target = num(fields, "target_cpu=").map_or(cpu, |c| c as u32);
        match self.threads[i].state {
            SchedState::Asleep { cpu: c, since } => {
                if let Role::Vcpu(index) = self.threads[i].role {
                    let n = self.intern("");
                    self.push(index, c, since, t, HostKind::Asleep, n);
                    // Woken by a QEMU thread: what that thread waited for meanwhile woke it late. Another
                    // vCPU's thread wakes it for the guest (an IPI: a packet taken on one guest CPU wakes
                    // its reader on another): what that vCPU lost meanwhile did.
                    // Woken otherwise (a host timer, a vCPU that lost nothing): what QEMU's own threads were
                    // held back from meanwhile (the devices they carry reached the guest late).
                    let waker = line_pid(line).and_then(|p| self.by_tid.get(&p).copied());
                    let explained = match waker.map(|w| (self.threads[w].role, self.threads[w].tid))
                    {
                        Some((Role::Helper(wn), tid)) => {
                            self.waker_delays(index, tid, wn, since, t)
                        }
                        Some((Role::Vcpu(wi), tid)) if wi != index => {
                            self.vcpu_waker_delays(index, wi, tid, since, t)
                        }
                        _ => false,
                    };
                    if !explained {
                        self.helpers_held(index, since, t);
                    }
                }
            }
            SchedState::Unknown => {}
            SchedState::Running { .. } | SchedState::Waiting { .. } => return,
        }
        self.threads[i].state = SchedState::Waiting {
            cpu: target,
            since: t,
            before: Vec::new(),
        };
    }

    /// `sched_migrate_task` at `t`: a waiting thread moved to another CPU's queue.
    fn on_migrate(&mut self, t: u64, fields: &str) {
        let Some(i) = self.followed(fields, "pid=") else {
            return;
        };
        let dest = num(fields, "dest_cpu=").map(|c| c as u32);
        if let (
            SchedState::Waiting {
                cpu: c,
                since,
                before,
            },
            Some(d),
        ) = (&mut self.threads[i].state, dest)
        {
            if *c != d {
                before.push((*c, *since, t));
                *c = d;
                *since = t;
            }
        }
    }

    /// `kvm_exit`/`kvm_entry` at `t` on `cpu`: a vCPU's exits, counted by reason, the long ones kept.
    fn on_kvm(&mut self, cpu: u32, t: u64, line: &str, name: &str, fields: &str) {
        let Some(i) = line_pid(line).and_then(|p| self.by_tid.get(&p).copied()) else {
            return;
        };
        let Role::Vcpu(index) = self.threads[i].role else {
            return;
        };
        self.kvm_seen = true;
        if name == "kvm_exit" {
            let r = self.intern(exit_reason(fields));
            self.threads[i].exit = Some((t, r));
        } else if let Some((t0, r)) = self.threads[i].exit.take() {
            let ns = t.saturating_sub(t0);
            let tot = self.exits.entry(r).or_default();
            tot.0 += 1;
            tot.1 += ns;
            if ns >= EXIT_KEEP_NS {
                self.push(index, cpu, t0, t, HostKind::Exit, r);
            }
        }
    }

    /// vCPU `vcpu` asleep over `[a, b)` and woken by QEMU thread `waker` (named `wn`): the stretches that
    /// thread waited runnable inside it, each naming what ran instead. Whether it waited.
    fn waker_delays(&mut self, vcpu: u32, waker: i64, wn: u32, a: u64, b: u64) -> bool {
        let wname = self.name(wn);
        let found: Vec<Named> = self
            .helper_waits
            .iter()
            .filter(|w| w.0 == waker && w.2 > a && w.1 < b)
            .map(|&(_, x, y, c, kind, n)| (x, y, c, waker_phrase(kind, &wname, &self.name(n))))
            .collect();
        self.push_named(vcpu, HostKind::WakerDelayed, (a, b), found)
    }

    /// vCPU `vcpu` asleep over `[a, b)` and woken by no QEMU thread that waited: the stretches any QEMU
    /// helper thread waited runnable inside it, each naming that thread and what ran instead.
    fn helpers_held(&mut self, vcpu: u32, a: u64, b: u64) {
        // Newest first, back to what ended a horizon before the sleep: a wait is pushed when it ends and
        // cut at the horizon, so nothing older can lie inside it (each wake-up must stay cheap).
        let horizon = a.saturating_sub(SPAN_HORIZON_NS);
        let found: Vec<Named> = self
            .helper_waits
            .iter()
            .rev()
            .take_while(|w| w.2 >= horizon)
            .filter(|w| w.2 > a && w.1 < b)
            .filter_map(|&(tid, x, y, c, kind, n)| {
                let Some(Role::Helper(hn)) = self.by_tid.get(&tid).map(|&i| self.threads[i].role)
                else {
                    return None;
                };
                let helper = self.name(hn);
                let phrase = match kind {
                    HostKind::Waiting => format!("QEMU's {helper} waited for its CPU"),
                    _ => format!("QEMU's {helper} waited while {} ran", self.name(n)),
                };
                Some((x, y, c, phrase))
            })
            .collect();
        self.push_named(vcpu, HostKind::HelperHeld, (a, b), found);
    }

    /// vCPU `vcpu` asleep over `[a, b)` and woken by vCPU `waker`'s thread (`tid`): the time that vCPU lost
    /// on the host inside it (kept off its CPU, interrupted, or itself asleep while its own waker was
    /// held), each naming what ran instead.
    /// Whether it lost any.
    fn vcpu_waker_delays(&mut self, vcpu: u32, waker: u32, tid: i64, a: u64, b: u64) -> bool {
        let wname = format!("vCPU {waker}'s thread/{tid}");
        // The most recent intervals only (each wake-up must stay cheap: a scan of the whole record per guest
        // IPI tripled the observer's CPU time). A coincidence (`helper_held`) is not chained into a cause.
        let found: Vec<Named> = self
            .intervals
            .iter()
            .rev()
            .take(RECENT_SCAN)
            .filter(|i| {
                i.vcpu == waker
                    && i.end_ns > a
                    && i.start_ns < b
                    && !matches!(
                        i.kind,
                        HostKind::Asleep | HostKind::Exit | HostKind::HelperHeld
                    )
            })
            .map(|i| {
                let phrase = waker_phrase(i.kind, &wname, &self.name(i.name));
                (i.start_ns, i.end_ns, i.cpu, phrase)
            })
            .collect();
        self.push_named(vcpu, HostKind::WakerDelayed, (a, b), found)
    }

    /// An interned name (empty if unknown).
    fn name(&self, n: u32) -> String {
        self.names.get(n as usize).cloned().unwrap_or_default()
    }

    /// Push each stretch found, clipped to `[a, b)`, as `kind` on vCPU `vcpu`'s record under its phrase.
    /// Whether there was any.
    fn push_named(
        &mut self,
        vcpu: u32,
        kind: HostKind,
        (a, b): (u64, u64),
        found: Vec<Named>,
    ) -> bool {
        let any = !found.is_empty();
        for (x, y, c, phrase) in found {
            let name = self.intern(&phrase);
            self.push(vcpu, c, x.max(a), y.min(b), kind, name);
        }
        any
    }

    /// Thread `i` runnable on `cpu` over `[a, b)`: that stretch laid over what ran there — intervals of a
    /// vCPU, or the waits of a QEMU helper thread.
    fn resolve(&mut self, i: usize, cpu: u32, a: u64, b: u64) {
        if b <= a {
            return;
        }
        type Overlay = (u64, u64, u8, (HostKind, Box<str>));
        let mut around: Vec<Overlay> = vec![(a, b, 0, (HostKind::Waiting, "".into()))];
        if let Some(q) = self.spans.get(&cpu) {
            // Spans are kept in the order they closed: those that ended after `a` are the tail (a scan of
            // the whole queue per resolved wait was most of the observer's CPU time on a busy host).
            let from = q.partition_point(|s| s.1 <= a);
            for (x, y, k, n) in q.range(from..).filter(|s| s.0 < b) {
                around.push((*x, *y, host_layer(*k), (*k, n.clone())));
            }
        }
        if let Some(s) = self.folders.get_mut(&cpu).and_then(|f| f.running_span(b)) {
            around.push((
                s.start_ns,
                s.end_ns,
                1,
                (HostKind::Preempted, s.name.into()),
            ));
        }
        let pieces: Vec<(u64, u64, usize)> = {
            let keyed: Vec<(u64, u64, u8, usize)> = around
                .iter()
                .enumerate()
                .map(|(i, x)| (x.0, x.1, x.2, i))
                .collect();
            layered(a, b, &keyed)
        };
        let (role, tid) = (self.threads[i].role, self.threads[i].tid);
        for (x, y, k) in pieces {
            let kind = around[k].3 .0;
            let n = self.intern(&around[k].3 .1);
            match role {
                Role::Vcpu(index) => self.push(index, cpu, x, y, kind, n),
                Role::Helper(_) => {
                    if self.helper_waits.len() >= MAX_SPANS_PER_CPU {
                        self.helper_waits.pop_front();
                    }
                    self.helper_waits.push_back((tid, x, y, cpu, kind, n));
                }
            }
        }
    }

    /// Drop the spans no waiting thread needs any more, and helper waits older than a minute.
    pub fn prune(&mut self) {
        let horizon = self
            .threads
            .iter()
            .filter_map(|v| match &v.state {
                SchedState::Waiting { since, before, .. } => {
                    Some(before.first().map_or(*since, |b| b.1))
                }
                _ => None,
            })
            .min()
            .unwrap_or(self.latest)
            // A thread whose switch-in was lost (or that exited while runnable) must not hold every span.
            .max(self.latest.saturating_sub(SPAN_HORIZON_NS));
        for q in self.spans.values_mut() {
            while q.front().is_some_and(|s| s.1 < horizon) {
                q.pop_front();
            }
        }
        // A helper's waits matter while a vCPU it wakes sleeps; a guest never sleeps a minute unnoticed.
        let old = self.latest.saturating_sub(60_000_000_000);
        while self.helper_waits.front().is_some_and(|w| w.2 < old) {
            self.helper_waits.pop_front();
        }
    }

    /// Close what is open at `end_ns` (a vCPU still waiting) and hand the names, intervals, exit totals
    /// and drop counts over.
    pub fn finish(mut self, end_ns: u64) -> Folded {
        let open: Vec<(usize, Vec<Stretch>)> = self
            .threads
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v.role, Role::Vcpu(_)))
            .filter_map(|(i, v)| match &v.state {
                SchedState::Waiting { cpu, since, before } => {
                    let mut all = before.clone();
                    all.push((*cpu, *since, end_ns.max(*since)));
                    Some((i, all))
                }
                _ => None,
            })
            .collect();
        for (i, segs) in open {
            for (c, a, b) in segs {
                self.resolve(i, c, a, b);
            }
        }
        let exits = self
            .exits
            .iter()
            .map(|(&r, &(count, ns))| ExitTotal {
                reason: self.name(r),
                count,
                ns,
            })
            .collect();
        Folded {
            names: self.names,
            intervals: self.intervals.into(),
            dropped: self.dropped.0,
            dropped_before_ns: self.dropped.1,
            exits,
            kvm_seen: self.kvm_seen,
        }
    }
}

/// What a [`VcpuFolder`] hands over.
pub struct Folded {
    /// Interval names.
    pub names: Vec<String>,
    /// The intervals.
    pub intervals: Vec<HostInterval>,
    /// Intervals dropped.
    pub dropped: u64,
    /// The latest end of a dropped interval.
    pub dropped_before_ns: u64,
    /// Exits per reason.
    pub exits: Vec<ExitTotal>,
    /// Whether a kvm event was seen.
    pub kvm_seen: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_fields_and_pids() {
        let l = "     CPU 1/KVM-4250    [003] d..2.  100.000100: kvm_exit: vcpu 1 reason EPT_VIOLATION rip 0xffffffff81000000 info1 0x0000000000000181";
        assert_eq!(line_pid(l), Some(4250));
        let e = parse_line(l).unwrap();
        assert_eq!(exit_reason(e.fields), "EPT_VIOLATION");
        assert_eq!(exit_reason("reason HLT rip 0x1"), "HLT", "older kernels");
        assert_eq!(exit_reason("vcpu 1"), "?");
        assert_eq!(line_pid("no bracket"), None);
        let f = "prev_comm=CPU 1/TCG prev_pid=44 prev_prio=130 prev_state=R+ ==> next_comm=x next_pid=7 next_prio=120";
        assert_eq!(kv(f, "prev_pid="), Some("44"));
        assert_eq!(kv(f, "pid="), None, "pid= only where a field starts");
        assert_eq!(kv("comm=a pid=9 prio=1", "pid="), Some("9"));
        assert_eq!(kv(f, "prev_state="), Some("R+"));
    }

    /// vCPU 1 (tid 44) on host CPU 1: running, preempted by a FIFO 50 thread for 20 ms with a host IRQ
    /// inside, back; interrupted by the local timer while running; halted; woken on CPU 1 and kept waiting
    /// by a CFS thread; a VM exit.
    const LINES: &[(u32, &str)] = &[
        (1, " swapper/1-0 [001] d..2. 100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=CPU 1/TCG next_pid=44 next_prio=130"),
        (1, " CPU 1/TCG-44 [001] d.h1. 100.001000: local_timer_entry: vector=236"),
        (1, " CPU 1/TCG-44 [001] d.h1. 100.001010: local_timer_exit: vector=236"),
        (1, " CPU 1/TCG-44 [001] d..2. 100.010000: sched_switch: prev_comm=CPU 1/TCG prev_pid=44 prev_prio=130 prev_state=R+ ==> next_comm=rtg-noise next_pid=77 next_prio=49"),
        (1, " rtg-noise-77 [001] d.h1. 100.015000: irq_handler_entry: irq=9 name=acpi"),
        (1, " rtg-noise-77 [001] d.h1. 100.015200: irq_handler_exit: irq=9 ret=handled"),
        (1, " rtg-noise-77 [001] d..2. 100.030000: sched_switch: prev_comm=rtg-noise prev_pid=77 prev_prio=49 prev_state=S ==> next_comm=CPU 1/TCG next_pid=44 next_prio=130"),
        (1, " CPU 1/TCG-44 [001] d..2. 100.040000: sched_switch: prev_comm=CPU 1/TCG prev_pid=44 prev_prio=130 prev_state=S ==> next_comm=cc1 next_pid=90 next_prio=120"),
        (0, " qemu-system-x86-42 [000] d..2. 100.050000: sched_wakeup: comm=CPU 1/TCG pid=44 prio=130 target_cpu=001"),
        (1, " cc1-90 [001] d..2. 100.052000: sched_switch: prev_comm=cc1 prev_pid=90 prev_prio=120 prev_state=R+ ==> next_comm=CPU 1/TCG next_pid=44 next_prio=130"),
        (1, " CPU 1/TCG-44 [001] d..2. 100.060000: kvm_exit: vcpu 1 reason EPT_VIOLATION rip 0x1 info1 0x0"),
        (1, " CPU 1/TCG-44 [001] d..2. 100.060400: kvm_entry: vcpu 1, rip 0x1"),
        (1, " CPU 1/TCG-44 [001] d..2. 100.061000: kvm_exit: vcpu 1 reason HLT rip 0x1 info1 0x0"),
        (1, " CPU 1/TCG-44 [001] d..2. 100.061000: kvm_entry: vcpu 1, rip 0x1"),
    ];

    #[test]
    fn what_the_host_did_to_a_vcpu_thread_becomes_its_intervals() {
        let mut r = VcpuFolder::new(&[(0, 43), (1, 44)], &[], 1000);
        r.policy = |pid| (pid == 77).then_some("FIFO");
        for (cpu, l) in LINES {
            r.feed(*cpu, l);
        }
        let f = r.finish(100_100_000_000);
        let got: Vec<(u64, u64, HostKind, &str)> = f
            .intervals
            .iter()
            .map(|i| {
                (
                    i.start_ns - 100_000_000_000,
                    i.end_ns - 100_000_000_000,
                    i.kind,
                    f.names[i.name as usize].as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1_000_000, 1_010_000, HostKind::Vector, "local_timer"),
                (
                    10_000_000,
                    15_000_000,
                    HostKind::Preempted,
                    "rtg-noise/77 FIFO 50"
                ),
                (15_000_000, 15_200_000, HostKind::Irq, "9 acpi"),
                (
                    15_200_000,
                    30_000_000,
                    HostKind::Preempted,
                    "rtg-noise/77 FIFO 50"
                ),
                (40_000_000, 50_000_000, HostKind::Asleep, ""),
                (50_000_000, 52_000_000, HostKind::Preempted, "cc1/90 CFS"),
                (60_000_000, 60_400_000, HostKind::Exit, "EPT_VIOLATION"),
            ],
        );
        assert!(f.intervals.iter().all(|i| i.vcpu == 1 && i.cpu == 1));
        assert!(f.kvm_seen);
        assert_eq!(
            f.exits,
            vec![
                ExitTotal {
                    reason: "EPT_VIOLATION".into(),
                    count: 1,
                    ns: 400_000
                },
                ExitTotal {
                    reason: "HLT".into(),
                    count: 1,
                    ns: 0
                },
            ],
            "every exit counted, the 0 µs one kept out of the intervals"
        );
    }

    #[test]
    fn a_vcpu_that_migrates_while_waiting_is_charged_on_each_cpu_and_the_bound_holds() {
        let lines: &[(u32, &str)] = &[
            (0, " a-5 [000] d..2. 10.000000: sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=S ==> next_comm=b next_pid=6 next_prio=120"),
            (1, " x-3 [001] d..2. 10.000000: sched_switch: prev_comm=x prev_pid=3 prev_prio=120 prev_state=S ==> next_comm=CPU 0/KVM next_pid=43 next_prio=120"),
            (1, " CPU 0/KVM-43 [001] d..2. 10.001000: sched_switch: prev_comm=CPU 0/KVM prev_pid=43 prev_prio=120 prev_state=R ==> next_comm=hog next_pid=8 next_prio=120"),
            (1, " hog-8 [001] d..2. 10.003000: sched_migrate_task: comm=CPU 0/KVM pid=43 prio=120 orig_cpu=1 dest_cpu=0"),
            (0, " b-6 [000] d..2. 10.004000: sched_switch: prev_comm=b prev_pid=6 prev_prio=120 prev_state=R+ ==> next_comm=CPU 0/KVM next_pid=43 next_prio=120"),
        ];
        let mut r = VcpuFolder::new(&[(0, 43)], &[], 2);
        r.policy = |_| None;
        for (cpu, l) in lines {
            r.feed(*cpu, l);
        }
        let f = r.finish(11_000_000_000);
        let got: Vec<(u32, u64, u64, &str)> = f
            .intervals
            .iter()
            .map(|i| {
                (
                    i.cpu,
                    i.start_ns - 10_000_000_000,
                    i.end_ns - 10_000_000_000,
                    f.names[i.name as usize].as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 1_000_000, 3_000_000, "hog/8 CFS"),
                (0, 3_000_000, 4_000_000, "b/6 CFS")
            ]
        );
        // Three would have been made with a bound of 2: none here, so nothing dropped.
        assert_eq!(f.dropped, 0);
        let mut r = VcpuFolder::new(&[(1, 44)], &[], 3);
        r.policy = |_| None;
        for (cpu, l) in LINES {
            r.feed(*cpu, l);
        }
        let f = r.finish(100_100_000_000);
        assert_eq!(f.intervals.len(), 3);
        assert_eq!(f.dropped, 4);
        assert_eq!(
            f.dropped_before_ns, 100_030_000_000,
            "the newest dropped ended there"
        );
    }

    #[test]
    fn a_vcpu_woken_late_because_its_waker_was_preempted_names_who_ran_instead() {
        // Under TCG the main loop (tid 42) runs the guest's timers and wakes the halted vCPU 1 (tid 44).
        // rtg-noise takes CPU 1 from the main loop for 20 ms; the vCPU sleeps through it.
        let lines: &[(u32, &str)] = &[
            (1, " CPU 1/TCG-44 [001] d..2. 100.000000: sched_switch: prev_comm=CPU 1/TCG prev_pid=44 prev_prio=130 prev_state=S ==> next_comm=qemu-system-x86 next_pid=42 next_prio=130"),
            (1, " qemu-system-x86-42 [001] d..2. 100.001000: sched_switch: prev_comm=qemu-system-x86 prev_pid=42 prev_prio=130 prev_state=R+ ==> next_comm=rtg-noise next_pid=77 next_prio=49"),
            (1, " rtg-noise-77 [001] d..2. 100.021000: sched_switch: prev_comm=rtg-noise prev_pid=77 prev_prio=49 prev_state=S ==> next_comm=qemu-system-x86 next_pid=42 next_prio=130"),
            (1, " qemu-system-x86-42 [001] d..2. 100.021100: sched_wakeup: comm=CPU 1/TCG pid=44 prio=130 target_cpu=001"),
            (1, " qemu-system-x86-42 [001] d..2. 100.021200: sched_switch: prev_comm=qemu-system-x86 prev_pid=42 prev_prio=130 prev_state=S ==> next_comm=CPU 1/TCG next_pid=44 next_prio=130"),
        ];
        let mut r = VcpuFolder::new(&[(1, 44)], &[(42, "qemu-system-x86".into())], 100);
        r.policy = |pid| (pid == 77).then_some("FIFO");
        for (cpu, l) in lines {
            r.feed(*cpu, l);
        }
        let f = r.finish(101_000_000_000);
        let got: Vec<(u64, u64, HostKind, &str)> = f
            .intervals
            .iter()
            .map(|i| {
                (
                    i.start_ns - 100_000_000_000,
                    i.end_ns - 100_000_000_000,
                    i.kind,
                    f.names[i.name as usize].as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 21_100_000, HostKind::Asleep, ""),
                (
                    1_000_000,
                    21_000_000,
                    HostKind::WakerDelayed,
                    "its waker qemu-system-x86/42 waited while rtg-noise/77 FIFO 50 ran"
                ),
                (
                    21_100_000,
                    21_200_000,
                    HostKind::Preempted,
                    "qemu-system-x86/42 CFS"
                ),
            ]
        );
        assert_eq!(
            rtgauge_analysis::vm_join::host_cause_name(HostKind::WakerDelayed, got[1].3, 1, 1),
            "vCPU 1 asleep, its waker qemu-system-x86/42 waited while rtg-noise/77 FIFO 50 ran on host CPU 1"
        );
    }

    #[test]
    fn a_vcpu_woken_late_by_another_vcpu_kept_off_its_cpu_names_who_ran_instead() {
        // Guest CPU 0 takes the packet and wakes its reader on guest CPU 1 (an IPI: vCPU 0's thread 43
        // wakes vCPU 1's, 44); rtg-noise holds host CPU 0 from vCPU 0 for 20 ms meanwhile.
        let lines: &[(u32, &str)] = &[
            (1, " CPU 1/TCG-44 [001] d..2. 100.000000: sched_switch: prev_comm=CPU 1/TCG prev_pid=44 prev_prio=130 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"),
            (0, " CPU 0/TCG-43 [000] d..2. 100.001000: sched_switch: prev_comm=CPU 0/TCG prev_pid=43 prev_prio=130 prev_state=R+ ==> next_comm=rtg-noise next_pid=77 next_prio=49"),
            (0, " rtg-noise-77 [000] d..2. 100.021000: sched_switch: prev_comm=rtg-noise prev_pid=77 prev_prio=49 prev_state=S ==> next_comm=CPU 0/TCG next_pid=43 next_prio=130"),
            (0, " CPU 0/TCG-43 [000] d..2. 100.021100: sched_wakeup: comm=CPU 1/TCG pid=44 prio=130 target_cpu=001"),
            (1, " swapper/1-0 [001] d..2. 100.021200: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=CPU 1/TCG next_pid=44 next_prio=130"),
        ];
        let mut r = VcpuFolder::new(&[(0, 43), (1, 44)], &[], 100);
        r.policy = |pid| (pid == 77).then_some("FIFO");
        for (cpu, l) in lines {
            r.feed(*cpu, l);
        }
        let f = r.finish(101_000_000_000);
        let delayed: Vec<(u32, u64, u64, &str)> = f
            .intervals
            .iter()
            .filter(|i| i.kind == HostKind::WakerDelayed)
            .map(|i| {
                (
                    i.vcpu,
                    i.start_ns - 100_000_000_000,
                    i.end_ns - 100_000_000_000,
                    f.names[i.name as usize].as_str(),
                )
            })
            .collect();
        assert_eq!(
            delayed,
            vec![(
                1,
                1_000_000,
                21_000_000,
                "its waker vCPU 0's thread/43 waited while rtg-noise/77 FIFO 50 ran"
            )]
        );
    }

    #[test]
    fn a_vcpu_asleep_while_the_main_loop_was_held_names_who_held_it() {
        // vCPU 1 (44) sleeps; a packet for it waits in the main loop (42), which rtg-noise keeps off host
        // CPU 0 for 20 ms; a host timer (no QEMU thread) wakes the vCPU afterwards.
        let lines: &[(u32, &str)] = &[
            (1, " CPU 1/TCG-44 [001] d..2. 100.000000: sched_switch: prev_comm=CPU 1/TCG prev_pid=44 prev_prio=130 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"),
            (0, " qemu-system-x86-42 [000] d..2. 100.001000: sched_switch: prev_comm=qemu-system-x86 prev_pid=42 prev_prio=130 prev_state=R+ ==> next_comm=rtg-noise next_pid=77 next_prio=49"),
            (0, " rtg-noise-77 [000] d..2. 100.021000: sched_switch: prev_comm=rtg-noise prev_pid=77 prev_prio=49 prev_state=S ==> next_comm=qemu-system-x86 next_pid=42 next_prio=130"),
            (1, " <idle>-0 [001] dNh2. 100.021500: sched_wakeup: comm=CPU 1/TCG pid=44 prio=130 target_cpu=001"),
            (1, " swapper/1-0 [001] d..2. 100.021600: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=CPU 1/TCG next_pid=44 next_prio=130"),
        ];
        let mut r = VcpuFolder::new(&[(1, 44)], &[(42, "qemu-system-x86".into())], 100);
        r.policy = |pid| (pid == 77).then_some("FIFO");
        for (cpu, l) in lines {
            r.feed(*cpu, l);
        }
        let f = r.finish(101_000_000_000);
        let held: Vec<(u64, u64, &str)> = f
            .intervals
            .iter()
            .filter(|i| i.kind == HostKind::HelperHeld)
            .map(|i| {
                (
                    i.start_ns - 100_000_000_000,
                    i.end_ns - 100_000_000_000,
                    f.names[i.name as usize].as_str(),
                )
            })
            .collect();
        assert_eq!(
            held,
            vec![(
                1_000_000,
                21_000_000,
                "QEMU's qemu-system-x86/42 waited while rtg-noise/77 FIFO 50 ran"
            )]
        );
    }

    #[test]
    fn hostile_lines_never_panic() {
        let mut r = VcpuFolder::new(&[(0, 1)], &[(2, "main".into())], 10);
        for l in [
            "",
            "x",
            " a-1 [000] d..2. 1.0: sched_switch: prev_pid=1 prev_state=",
            " a-1 [000] d..2. 1.0: sched_wakeup: pid=1 target_cpu=99999999999",
            " a-1 [000] d..2. 1.0: sched_migrate_task: pid=1 dest_cpu=-1",
            " a-1 [000] d..2. 1.0: kvm_entry: vcpu 0",
            " a-1 [000] d..2. 0.5: sched_switch: prev_pid=2 prev_state=R ==> next_pid=1",
        ] {
            r.feed(0, l);
        }
        let _ = r.finish(0);
    }
}
