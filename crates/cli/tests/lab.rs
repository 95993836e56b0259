//! Truth on real kernels: Debian's PREEMPT_RT and standard kernels booted in the kernel lab (crates/lab,
//! docs/lab.md) with real SMT/NUMA topologies, rtgauge running inside.
//!
//! - fingerprint and audit across 1 socket without SMT, 2 sockets × SMT on 2 nodes, 4 nodes, on both kernels:
//!   sockets, cores, siblings, nodes, the preemption model and the isolation rules as the kernel reports them;
//! - the planner's closed loop on a 2-socket SMT RT kernel: `plan` inside the guest, a second boot with the
//!   planned command line, `audit` (the isolation rules pass) and `run` (its threads on the planned CPUs);
//! - root cause on PREEMPT_RT: an injected FIFO culprit and an interrupt storm (a threaded handler) named by
//!   `cyclic --trace`, and the same culprit seen by `rtla timerlat`;
//! - many CPUs: a traced `run` with one thread per CPU on a 16-vCPU, 2-node guest completes;
//! - a guest stuck before init is killed at its init bound and booted again.
//!
//! Under TCG latencies mean nothing (the vCPUs take turns on one host thread of a shared 2-CPU machine);
//! what is asserted is the kernel's behaviour. Every boot prints the clocksource it found (stderr). Needs no
//! root on the host (QEMU runs unprivileged); the guests run everything as root.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use rtgauge_lab::{Boot, Flavour, Guest, GuestTopology, Kernel};
use serde_json::Value;
use std::sync::OnceLock;
use std::time::Duration;

fn kernel(f: Flavour) -> &'static Kernel {
    static RT: OnceLock<Kernel> = OnceLock::new();
    static STD: OnceLock<Kernel> = OnceLock::new();
    static BPO: OnceLock<Kernel> = OnceLock::new();
    let cell = match f {
        Flavour::Rt => &RT,
        Flavour::Standard => &STD,
        Flavour::RtBackports => &BPO,
    };
    cell.get_or_init(|| Kernel::fetch(f).unwrap_or_else(|e| panic!("fetching {f:?}: {e}")))
}

/// A guest of `f` on `topo` running `script` with this build's rtgauge inside.
fn guest(f: Flavour, topo: GuestTopology, script: &str) -> Guest {
    let mut g = Guest::new(kernel(f), topo, script);
    g.rtgauge = Some(assert_cmd::cargo::cargo_bin("rtgauge"));
    // Three times the lab's default: on a host ~1.6× slower than this one (two CPU hogs beside QEMU) the
    // 2-socket inspection's script ended at 92.6 s and its captured tree (528 files) was still crossing
    // the serial port at 120 s, and the boot was killed.
    g.timeout = Duration::from_secs(360);
    g
}

/// Boot; the script must have run to its end with status 0. With `RTGAUGE_LAB_KEEP=DIR` the files handed
/// back are also copied to DIR/<label> (they are removed with the `Boot` otherwise).
fn boot(g: &Guest) -> Boot {
    // A stuck boot (init never started, or a stall the guest's kernel reports) is booted again by the lab,
    // up to `Guest::boots` (3) boots. A script that ran past the timeout is booted again here, up to three
    // boots: with a host thread per vCPU (the lab's TCG until 2026-11-27) the 16-vCPU traced run finished
    // in 21-35 s of guest time in some runs and never in others, and stuck boots came in runs (docs/lab.md:
    // multi-threaded TCG); single-threaded, none has been seen, and the retry stays as a safety net. Every
    // other failure, and a third timeout, fails the test.
    let mut boots = 1;
    let b = loop {
        match g.boot() {
            Err(e @ rtgauge_lab::LabError::Timeout { .. }) if boots < 3 => {
                boots += 1;
                eprintln!(
                    "lab: {e}\nlab: booting {} again (boot {boots} of 3)",
                    g.label
                );
            }
            r => break r.unwrap_or_else(|e| panic!("{}: {e}", g.label)),
        }
    };
    if let Some(keep) = std::env::var_os("RTGAUGE_LAB_KEEP") {
        let base = std::path::Path::new(&keep).join(g.label.replace([' ', '×', ','], "_"));
        // A second boot of the same guest (the closed loop's) keeps its files beside the first's.
        let dest = (1..)
            .map(|n| match n {
                1 => base.clone(),
                n => base.with_extension(n.to_string()),
            })
            .find(|d| !d.exists())
            .unwrap();
        b.copy_to(&dest).unwrap();
        eprintln!("lab: files of {} kept in {}", g.label, dest.display());
    }
    assert_eq!(
        b.status,
        Some(0),
        "{}: script failed:\n{}\nconsole:\n{}",
        g.label,
        b.log(),
        b.console
    );
    b
}

fn json(b: &Boot, name: &str) -> Value {
    let text = b.read(name);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{name}: {e}:\n{text}\nscript log:\n{}", b.log()))
}

/// Status of audit rule `id`.
fn status(audit: &Value, id: &str) -> String {
    audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .map(|f| f["status"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no finding {id}"))
}

fn summary(audit: &Value) -> String {
    let mut n = std::collections::BTreeMap::new();
    for f in audit["findings"].as_array().unwrap() {
        *n.entry(f["status"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    format!(
        "{} pass, {} warn, {} fail, {} n/a",
        n.get("pass").unwrap_or(&0),
        n.get("warn").unwrap_or(&0),
        n.get("fail").unwrap_or(&0),
        n.get("n/a").unwrap_or(&0)
    )
}

/// The guest's `audit --capture` tree, audited here with `--root`, gives the findings the guest's own audit
/// gave (the capture holds everything a rule read on the real kernel). `args` as the guest's audit had them.
fn replayed_equals_live(b: &Boot, live: &Value, args: &[&str]) {
    let tree = b.dir().join("tree");
    let out = common::rtgauge()
        .args(["audit", "--format", "json", "--root"])
        .arg(&tree)
        .args(args)
        .output()
        .unwrap();
    let replayed: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let rows = |a: &Value| -> Vec<String> {
        a["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| format!("{} {} {}", f["id"], f["status"], f["summary"]))
            .collect()
    };
    assert_eq!(
        rows(&replayed),
        rows(live),
        "audit --root {}",
        tree.display()
    );
    assert_eq!(replayed["isolated"], live["isolated"]);
}

/// The rules that need an RT CPU set: what a partition is judged by.
const ISOLATION_RULES: &[&str] = &[
    "cmdline-isolcpus",
    "cmdline-nohz-full",
    "rcu-offload-and-normal",
    "isolation-sets-consistent",
    "housekeeping-capacity",
    "smt-siblings",
    "irq-affinity-isolated",
    "irqbalance-banned-cpus",
    "workqueue-cpumask",
    "systemd-cpuaffinity",
    "net-rps-and-queues",
];

const INSPECT: &str = "rtgauge fingerprint --format json > $OUT/fingerprint.json
rtgauge audit --no-sample --format json --capture $OUT/tree > $OUT/audit.json; echo \"audit exit $?\"
rtgauge plan --config-dir $OUT/plan > /dev/null
cat /sys/kernel/realtime > $OUT/realtime 2>/dev/null
for c in /sys/devices/system/cpu/cpu[0-9]*; do echo \"${c##*/} $(cat $c/topology/physical_package_id) $(cat $c/topology/thread_siblings_list)\"; done > $OUT/topology
";

/// Boot `topo` on `f`, fingerprint and audit; check every figure against the topology asked for and the
/// kernel booted, and print the row of docs/lab.md's table.
fn inspect(f: Flavour, topo: GuestTopology) -> Boot {
    let b = boot(&guest(f, topo, INSPECT));
    let fp = json(&b, "fingerprint.json");
    let audit = json(&b, "audit.json");
    replayed_equals_live(&b, &audit, &["--no-sample"]);
    let cpu = &fp["cpu"];
    let label = format!("{} {topo}", f.short());
    // Topology as the kernel enumerated it.
    assert_eq!(cpu["sockets"], topo.sockets, "{label}: {cpu}");
    assert_eq!(cpu["cores"], topo.sockets * topo.cores, "{label}: {cpu}");
    assert_eq!(cpu["threads"], topo.cpus(), "{label}: {cpu}");
    assert_eq!(cpu["threads_per_core"], topo.threads, "{label}: {cpu}");
    assert_eq!(cpu["smt_active"], topo.threads > 1, "{label}: {cpu}");
    let nodes = fp["numa"].as_array().unwrap();
    assert_eq!(nodes.len() as u32, topo.nodes, "{label}: {nodes:?}");
    for (i, n) in nodes.iter().enumerate() {
        let (a, z) = topo.node_cpus(i as u32);
        let want = if a == z {
            a.to_string()
        } else {
            format!("{a}-{z}")
        };
        assert_eq!(n["cpus"], want, "{label}: node {i}");
    }
    // Siblings and packages, CPU by CPU, from sysfs.
    for line in b.read("topology").lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let n: u32 = w[0].trim_start_matches("cpu").parse().unwrap();
        assert_eq!(w[1], topo.socket_of(n).to_string(), "{label}: {line}");
        let sib: Vec<String> = topo.siblings(n).iter().map(|c| c.to_string()).collect();
        let want = if sib.len() == 1 {
            sib[0].clone()
        } else {
            format!("{}-{}", sib[0], sib[sib.len() - 1])
        };
        assert_eq!(w[2], want, "{label}: {line}");
    }
    // The preemption model.
    let preempt = &fp["kernel"]["preempt"];
    let rt = f == Flavour::Rt;
    assert_eq!(preempt["sys_kernel_realtime"], rt, "{label}: {preempt}");
    assert_eq!(b.read("realtime").trim() == "1", rt, "{label}");
    assert_eq!(
        status(&audit, "kernel-preempt-rt"),
        if rt { "pass" } else { "fail" },
        "{label}"
    );
    // Nothing is isolated on a plain boot: the partition fails and the rules that need it are n/a; SMT
    // without a declared RT set is a warning.
    assert_eq!(status(&audit, "cmdline-isolcpus"), "fail", "{label}");
    for id in [
        "housekeeping-capacity",
        "irq-affinity-isolated",
        "tasks-on-isolated",
    ] {
        assert_eq!(status(&audit, id), "n/a", "{label}: {id}");
    }
    assert_eq!(
        status(&audit, "smt-siblings"),
        if topo.threads > 1 { "warn" } else { "pass" },
        "{label}"
    );
    // The plan keeps a housekeeping core on every node.
    let plan = json(&b, "plan/plan.json");
    let hk = rtgauge_model::CpuSet::parse(plan["housekeeping"].as_str().unwrap()).unwrap();
    for node in 0..topo.nodes {
        let (a, z) = topo.node_cpus(node);
        assert!(
            (a..=z).any(|c| hk.contains(c)),
            "{label}: node {node} has no housekeeping CPU in {hk}"
        );
    }
    eprintln!(
        "| {} {} | {topo} | {} / {} / {} / {} | {} | {} | {} | {} | {} |",
        f.short(),
        fp["kernel"]["release"].as_str().unwrap_or("?"),
        cpu["sockets"],
        cpu["cores"],
        cpu["threads"],
        nodes.len(),
        preempt["model"].as_str().unwrap_or("?"),
        b.clocksource,
        summary(&audit),
        plan["isolated"].as_str().unwrap_or("?"),
        b.wall.as_secs_f64().round(),
    );
    b
}

#[test]
fn fingerprint_and_audit_on_real_kernels_and_topologies() {
    let t0 = std::time::Instant::now();
    for (f, topo) in [
        (Flavour::Rt, GuestTopology::new(1, 4, 1, 1).unwrap()),
        (Flavour::Rt, GuestTopology::new(2, 4, 1, 4).unwrap()),
        (Flavour::Standard, GuestTopology::new(1, 4, 1, 1).unwrap()),
        (Flavour::Standard, GuestTopology::new(2, 2, 2, 2).unwrap()),
        (Flavour::Standard, GuestTopology::new(2, 4, 1, 4).unwrap()),
    ] {
        let b = inspect(f, topo);
        if f == Flavour::Standard {
            // Debian's standard kernel is PREEMPT_DYNAMIC: the mode is read from debugfs.
            let fp = json(&b, "fingerprint.json");
            assert_eq!(fp["kernel"]["preempt"]["dynamic"], true, "{fp}");
        }
    }
    eprintln!("lab: 5 boots in {:.0} s", t0.elapsed().as_secs_f64());
}

/// The closed loop on a real 2-socket SMT PREEMPT_RT kernel: plan inside the guest, reboot with the planned
/// command line and the plan's run-once script and sysctls, then the isolation rules pass and a probe's
/// threads run on the planned RT CPUs, its reporting thread on a housekeeping one.
#[test]
fn the_plan_closes_the_loop_on_a_2_socket_smt_rt_kernel() {
    let topo = GuestTopology::new(2, 4, 2, 2).unwrap();
    let first = inspect(Flavour::Rt, topo);
    let plan = json(&first, "plan/plan.json");
    let cmdline = first.read("plan/cmdline.txt").trim().to_string();
    let isolated = plan["isolated"].as_str().unwrap().to_string();
    let iso = rtgauge_model::CpuSet::parse(&isolated).unwrap();
    assert!(!iso.is_empty(), "{plan}");
    // Whole cores: every RT CPU's sibling is RT too.
    for c in iso.iter() {
        for s in topo.siblings(c) {
            assert!(iso.contains(s), "{isolated}: {c}'s sibling {s}");
        }
    }
    let mut files = Vec::new();
    for f in ["irq-affinity.sh", "sysctl.d/50-rtgauge-rt.conf"] {
        files.push((
            format!("plan/{f}"),
            std::fs::read(first.dir().join("plan").join(f)).unwrap(),
        ));
    }
    // A 10 ms period: what is judged is where the threads run. At 1 ms, 12 threads' wakeups outran
    // single-threaded TCG's 16 vCPUs (a 10 s probe took 33 s of wall time, its latencies seconds, and the
    // shell on vCPU 0 that counts the threads seldom ran).
    let profile =
        "name = \"lab\"\ndescription = \"timer latency on the measured CPUs\"\nduration = \"10s\"\n\
                   [[probe]]\nkind = \"cyclic\"\n\
                   flags = \"-m -p95 -i 10000 -a {cpus} -t --mainaffinity={housekeeping} -q\"\n";
    files.push(("lab/profile.toml".into(), profile.as_bytes().to_vec()));
    let script = format!(
        "sh /plan/irq-affinity.sh
grep -v '^#' /plan/sysctl.d/50-rtgauge-rt.conf | while read -r kv; do [ -n \"$kv\" ] && sysctl -w \"$(echo $kv | tr -d ' ')\" > /dev/null; done
rtgauge audit --format json --capture $OUT/tree > $OUT/audit.json
rtgauge audit --no-sample > $OUT/audit.txt
rtgauge run --profile /lab/profile.toml --no-sample --db /root/rtgauge.db --output $OUT/run.json > $OUT/run.txt 2>&1 &
pid=$!
# Snapshot once there is a measuring thread pinned to one CPU per planned RT CPU (a fixed 3 s once caught 10
# of 12 under a busy host; waiting for the count to hold for 1 s once outlasted the run; a thread is named
# before it pins itself), for as long as the run lives: a bound of 20 s once ran out on CI's slower host
# before the probe began. What is kept is the pass that counted most (the snapshot when all were found): a
# last pass after the probe had ended once left only the main thread to show.
best=-1
: > $OUT/threads
while [ -d /proc/$pid ]; do
  c=0
  pass=
  for t in /proc/$pid/task/*; do
    # Shell builtins only: under TCG a fork costs milliseconds, and a pass of three per thread outlasted the
    # measuring threads of a 4 s run on a host ~4.6× slower than docs/lab.md's (boot 52-76 s, not 11 s).
    # A thread gone mid-pass is skipped, not reported with the previous thread's values.
    comm=; allowed=; st=
    read -r comm < $t/comm || continue
    # (A while loop's status is its last test's: not a sign that the file was gone.)
    while read -r k v; do [ \"$k\" = Cpus_allowed_list: ] && allowed=$v; done < $t/status
    read -r st < $t/stat || continue
    set -- $st; shift 38
    pass=\"$pass$comm $1 $allowed
\"
    case $comm in rtgauge-cyc*) case $allowed in ''|*[,-]*) ;; *) c=$((c+1)) ;; esac ;; esac
  done
  [ $c -gt $best ] && {{ best=$c; printf '%s' \"$pass\" > $OUT/threads; }}
  [ $c -ge {want} ] && break
  usleep 100000
done
wait $pid; echo \"run exit $?\"
",
        want = iso.len()
    );
    let mut g = guest(Flavour::Rt, topo, &script);
    g.cmdline = cmdline.clone();
    g.files = files;
    let b = boot(&g);
    let audit = json(&b, "audit.json");
    assert_eq!(
        audit["isolated"], isolated,
        "the audit finds the planned set"
    );
    // Its capture (kept as tests/fixtures/lab-rt-2socket-smt-planned) replays to the same findings.
    replayed_equals_live(&b, &audit, &[]);
    let mut passed = Vec::new();
    for id in ISOLATION_RULES {
        let s = status(&audit, id);
        assert!(
            s == "pass",
            "{id}: {s}\n{}\ncmdline {cmdline}",
            b.read("audit.txt")
        );
        passed.push(*id);
    }
    // TCG's TSC is not invariant (no nonstop_tsc): the plan leaves tsc=reliable out, so the audit cannot
    // fail it for trusting a TSC that may stop.
    assert!(!cmdline.contains("tsc=reliable"), "{cmdline}");
    assert_ne!(
        status(&audit, "tsc-reliable"),
        "fail",
        "{}",
        b.read("audit.txt")
    );
    // tasks-on-isolated: on 6.1 the workqueue rescuers are bound to every possible CPU by the kernel
    // (kthread_bind_mask sets PF_NO_SETAFFINITY: taskset gets EINVAL; 6.10 moves them with the workqueue
    // mask). The rule passes once every movable thread is off I and names those the kernel alone places.
    let tasks = audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "tasks-on-isolated")
        .unwrap();
    assert_eq!(tasks["status"], "pass", "{tasks}");
    let summary_t = tasks["summary"].as_str().unwrap();
    // The probe's measuring threads ran on the planned RT CPUs, one each; its main thread on housekeeping.
    let run = json(&b, "run.json");
    let cyc = &run["probes"][0];
    let threads = b.read("threads");
    let mut seen = Vec::new();
    for line in threads.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w.len(), 3, "a thread of the running probe: {threads}");
        let (comm, cpu, allowed) = (w[0], w[1].parse::<u32>().unwrap(), w[2]);
        // A measuring thread is named before it pins itself: one caught between the two is not judged.
        if comm.starts_with("rtgauge-cyc") && allowed.parse::<u32>().is_ok() {
            assert!(iso.contains(cpu), "{line}: not on {isolated}");
            assert_eq!(allowed, cpu.to_string(), "{line}: pinned to its CPU");
            seen.push(cpu);
        } else if comm == "rtgauge" {
            assert!(!iso.contains(cpu), "{line}: main thread on an RT CPU");
        }
    }
    seen.sort_unstable();
    // The process's mask is the housekeeping set (isolcpus narrows init's and so every child's), its cpuset
    // every CPU: no condition is refused, and none may be said to be.
    let run_txt = b.read("run.txt");
    assert!(
        !run_txt.contains("NOT MET") && !run_txt.contains("may not be met"),
        "{run_txt}"
    );
    // Seen from outside: every measuring thread the shell caught was pinned to an RT CPU of its own. Not
    // all twelve at once: under a starved guest one pass over /proc took seconds, and CI's best pass of a
    // 10 s run caught seven (the others not yet made when it began, the run over at the next).
    let mut distinct = seen.clone();
    distinct.dedup();
    assert!(
        !seen.is_empty() && distinct.len() == seen.len(),
        "measuring threads pinned, one per planned RT CPU:\n{threads}\n{run_txt}"
    );
    // Seen from inside, for every thread: the run document's achieved CPU is the one planned, one thread
    // per planned RT CPU.
    let mut achieved: Vec<u32> = cyc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let c = &t["conditions"]["cpu"];
            assert_eq!(c["achieved"], c["requested"], "{t}");
            c["achieved"].as_u64().unwrap() as u32
        })
        .collect();
    achieved.sort_unstable();
    assert_eq!(achieved, iso.iter().collect::<Vec<_>>(), "{cyc}");
    eprintln!(
        "lab closed loop: planned `{cmdline}`; isolated {isolated}; passing: {}; tasks-on-isolated: {summary_t}; after: {}",
        passed.join(", "),
        summary(&audit)
    );
}

/// A FIFO 50 shell named `rtg-culprit` on measured CPU 1, started 1.5 s after a task whose name starts with
/// `$2` exists (the probe's measuring thread: rtgauge's `rtgauge-cyc`, rtla's `timerlat/`): bursts of `$1`
/// centiseconds of guest time (a loop on /proc/uptime, so that TCG's speed does not change their length),
/// 0.6 s apart: three, or with `$3` = `while` for as long as such a task exists (rtla hist, which is judged:
/// every burst of its 8 s falls inside its histogram, whenever its tracing begins). Named with `echo`, as
/// people do: the comm ends in a newline, which cuts every trace line naming the task in two; the trace
/// reader joins them (the name reads `rtg-culprit?`, as in `ps`). It is made FIFO 50 (by a helper, through a
/// file in $OUT) only after its first check for the task and its 1.5 s wait: forked from a FIFO 50 shell, the
/// check's `chrt` ran at FIFO 50 until it set itself to SCHED_OTHER, and under TCG its exec held CPU 1 for
/// 75–113 ms of a measured episode on a slow host. The check inside the loop (`while`) runs its grep at
/// SCHED_OTHER for the same reason.
const CULPRIT: &str = r#"culprit() {
  sh -c 'echo rtg-culprit > /proc/$$/comm
    alive() { chrt -o 0 grep -qs "^'"$2"'" /proc/[0-9]*/task/[0-9]*/comm; }
    until alive; do usleep 50000; done
    usleep 1500000
    : > $OUT/raise.$$
    while [ -e $OUT/raise.$$ ]; do usleep 10000; done
    n=0
    while if [ "'"$3"'" = while ]; then alive; else [ $n -lt 3 ]; fi; do
      n=$((n+1))
      read u _ < /proc/uptime; end=$(( ${u%.*}${u#*.} + '"$1"' ))
      while :; do read u _ < /proc/uptime; [ ${u%.*}${u#*.} -ge $end ] && break; done
      usleep 600000
    done' &
  c=$!
  taskset -p -c 1 $c > /dev/null
  ( until [ -e $OUT/raise.$c ]; do usleep 20000; done; chrt -f -p 50 $c; rm -f $OUT/raise.$c ) &
}
# What rtla's `-P f:10` asks for: its timerlat/ threads at FIFO 10, below the culprit. rtla 6.1 applies -P
# right after selecting the tracer, before the tracer's threads exist, so it reaches none: in this guest
# timerlat/1 stayed at the kernel's FIFO 95 through `rtla timerlat hist -P f:10` (chrt -p at 9.2, 11.6 and
# 14.1 s), where no FIFO 50 burst can delay it and hist saw 4-9 ms, not the bursts.
timerlat_prio() {
  ( n=0; until grep -qs '^timerlat/' /proc/[0-9]*/task/[0-9]*/comm || [ $n -ge 400 ]; do usleep 50000; n=$((n+1)); done
    for c in /proc/[0-9]*/task/[0-9]*/comm; do
      grep -qs '^timerlat/' $c && { t=${c%/comm}; chrt -f -p 10 ${t##*/}; }
    done ) &
}
"#;

/// Root cause on PREEMPT_RT (threaded interrupts, softirqs in ktimers/ksoftirqd), and rtla beside rtgauge.
#[test]
fn spikes_on_preempt_rt_are_named_and_rtla_agrees() {
    let script = format!(
        "{CULPRIT}
up() {{ echo \"[$(cut -d' ' -f1 /proc/uptime) s] $*\"; }}
up culprit
culprit 25 rtgauge-cyc
time -v rtgauge cyclic -m -p 10 -a 1 -i 2000 -D 7 --mainaffinity=0 --trace --spike 20000 --output $OUT/culprit.json -q > $OUT/culprit.txt 2> $OUT/culprit.time
wait
up storm
echo 1 > /proc/irq/5/smp_affinity_list
( until ls /sys/kernel/tracing/instances 2>/dev/null | grep -q .; do usleep 50000; done
  usleep 1500000; taskset -c 2 timeout 1 cat /dev/zero > /dev/ttyS2 ) &
rtgauge cyclic -m -p 10 -a 1 -i 2000 -D 6 --mainaffinity=0 --trace --spike 20000 --output $OUT/storm.json -q > $OUT/storm.txt
wait
grep -E ' 5:' /proc/interrupts > $OUT/irq5
up rtla top
mount -t tracefs tracefs /sys/kernel/tracing
culprit 25 timerlat/
timerlat_prio
cd $OUT && time -v rtla timerlat top -c 1 -d 15 -P f:10 -a 100000 -t -q > $OUT/rtla_top.txt 2> $OUT/rtla_top.time
wait
up rtla hist
# rtla top's timerlat/ threads can outlive it for a moment: the next culprit must wait for hist's own.
n=0; while grep -qs '^timerlat/' /proc/[0-9]*/task/[0-9]*/comm && [ $n -lt 100 ]; do usleep 50000; n=$((n+1)); done
echo \"timerlat/ threads gone after $n polls\"
culprit 25 timerlat/ while
timerlat_prio
time -v rtla timerlat hist -c 1 -d 8 -P f:10 > $OUT/rtla_hist.txt 2> $OUT/rtla_hist.time
wait
up done
"
    );
    // Tried twice, the first attempt's failure printed: a scenario of injected noise on a shared host.
    common::twice("lab spikes", |_| spikes_and_rtla(&script));
}

/// One boot of the spikes scenario (`script`): rtgauge names the culprit and the storm, and rtla agrees.
fn spikes_and_rtla(script: &str) {
    let mut g = guest(Flavour::Rt, GuestTopology::flat(4), script);
    g.guest_program("rtla").guest_program("chrt");
    let b = boot(&g);
    // When each stage began, guest time: on a slow host the traced runs' own work stretches them.
    let stages: Vec<&str> = b.console.lines().filter(|l| l.contains(" s] ")).collect();
    eprintln!(
        "lab spikes: {}\nrtgauge cyclic (culprit):\n{}",
        stages.join("; "),
        b.read("culprit.time")
    );

    // The probe wakes every 2 ms, not 1: under single-threaded TCG every vCPU waits while another runs,
    // and at 1 ms the tracing main thread's share of the emulator starved CPU 1 on a slow host (gaps of
    // 3.7 ms every 4 ms) so far that the probe never caught up (p50 197 ms over the whole run) and the
    // culprit's bursts began after the run had ended.
    // The culprit: its three bursts are charged to it by name with its policy, in the episodes whose
    // largest attributed cause is a thread named rtg-culprit. How many episodes they make depends on the
    // host: the probe catches up between bursts (0.6 s apart) on a fast one, three episodes; on a slow one
    // it has not caught up when the next burst comes and two bursts are one episode (CI: 1,456 ms with
    // 503 ms of the culprit, then a 444 ms one with 245 ms). So the bursts are judged together: what the
    // culprit-led episodes charge to it at FIFO 50 is its 750 ms, give or take (TCG's turns stretch a
    // burst a little, a lost vCPU turn trims it), and most of what those episodes attribute.
    // TCG's own stalls make other windows the guest cannot attribute: printed, not judged.
    let doc = json(&b, "culprit.json");
    let spikes = doc["probes"][0]["why"]["episodes"]
        .as_array()
        .unwrap()
        .clone();
    let top_attributed = |s: &Value| -> Option<(String, f64)> {
        let c = s["causes"]
            .as_array()?
            .iter()
            .find(|c| c["kind"] != "unattributed")?;
        Some((c["name"].as_str()?.to_string(), c["ns"].as_f64()?))
    };
    let mut by_size: Vec<Value> = spikes
        .iter()
        .filter(|s| top_attributed(s).is_some_and(|(n, _)| n.starts_with("rtg-culprit")))
        .cloned()
        .collect();
    by_size.sort_by(|a, b| {
        let ns = |s: &Value| top_attributed(s).map_or(0.0, |c| c.1);
        ns(b).total_cmp(&ns(a))
    });
    for s in spikes.iter().filter(|s| !by_size.contains(s)).take(5) {
        eprintln!(
            "lab spikes: another episode, {:.1} ms: {:?}",
            s["window_ns"].as_f64().unwrap_or(0.0) / 1e6,
            top_attributed(s)
        );
    }
    // Judged on what the guest's trace attributes. The rest of a window is time CPU 1 did not run at all:
    // single-threaded TCG runs the vCPUs in turn, and on a slow host the probe's vCPU waits for its turn
    // after a burst (gaps of ~3.7 ms every ~4 ms in the episode's unattributed stretches, 200-930 ms of
    // 0.5-1.4 s windows on a host whose boots took 52-115 s where docs/lab.md's took 11 s). That time is
    // the emulator's, not the culprit's, and is left unattributed, as on a real hypervisor.
    const BURST_NS: f64 = 250e6;
    let (mut charged, mut attributed_there) = (0.0, 0.0);
    for s in &by_size {
        let causes = s["causes"].as_array().unwrap();
        let c = causes.iter().find(|c| c["kind"] != "unattributed").unwrap();
        let attributed: f64 = causes
            .iter()
            .filter(|c| c["kind"] != "unattributed")
            .map(|c| c["ns"].as_f64().unwrap())
            .sum();
        let ns = c["ns"].as_f64().unwrap();
        let name = c["name"].as_str().unwrap();
        eprintln!(
            "lab culprit spike: {:.1} ms, {:.0} % of it attributed; {:.0} % of that ({:.0} ms; a burst is {:.0} ms) {} {name}",
            s["window_ns"].as_f64().unwrap() / 1e6,
            attributed * 100.0 / s["window_ns"].as_f64().unwrap(),
            ns * 100.0 / attributed,
            ns / 1e6,
            BURST_NS / 1e6,
            c["kind"]
        );
        assert_eq!(c["kind"], "thread", "{s}");
        if name.ends_with("FIFO 50") {
            charged += ns;
            attributed_there += attributed;
        } else {
            // The shell before its raise (its check and its wait, at SCHED_OTHER) can lead a small
            // window; its bursts cannot be there. On a starved host that check (forks and execs of chrt,
            // grep and usleep under TCG) held CPU 1 for 25.1 and 31.3 ms of two windows (a fresh-clone run
            // beside two other guests); a burst is 250 ms.
            assert!(
                ns < 0.4 * BURST_NS,
                "the culprit's burst at its policy: {s}"
            );
        }
    }
    assert!(
        (0.8 * 3.0 * BURST_NS..=1.2 * 3.0 * BURST_NS).contains(&charged),
        "the culprit's three bursts: {:.0} ms charged to it at FIFO 50 in {} episodes of {}: {}",
        charged / 1e6,
        by_size.len(),
        spikes.len(),
        b.read("culprit.txt")
    );
    assert!(
        charged >= 0.5 * attributed_there,
        "the culprit is most of what its episodes attribute: {:.0} of {:.0} ms",
        charged / 1e6,
        attributed_there / 1e6
    );
    let culprit_max_ms = by_size[0]["window_ns"].as_f64().unwrap() / 1e6;

    // The storm: a threaded handler on CPU 1, named with its IRQ.
    let irq5 = b.read("irq5");
    let cpu1: u64 = irq5.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(cpu1 > 100, "IRQ 5 fired on CPU 1: {irq5}");
    // (The thread itself is gone once the port is closed: free_irq ends it.)
    let doc = json(&b, "storm.json");
    let spikes = doc["probes"][0]["why"]["episodes"]
        .as_array()
        .unwrap()
        .clone();
    let worst = spikes
        .iter()
        .max_by_key(|s| s["window_ns"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("no spike: {}", b.read("storm.txt")));
    // The largest attributed cause, as for the culprit above (the emulator's turns are unattributed).
    let c = worst["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] != "unattributed")
        .unwrap_or_else(|| panic!("nothing attributed: {worst}"));
    let name = c["name"].as_str().unwrap();
    eprintln!(
        "lab storm spike: {:.1} ms, {:.0} % {} {name}",
        worst["window_ns"].as_f64().unwrap() / 1e6,
        c["ns"].as_f64().unwrap() * 100.0 / worst["window_ns"].as_f64().unwrap(),
        c["kind"]
    );
    assert!(
        name.starts_with("irq/5-ttyS2/") && name.ends_with("(threaded IRQ 5 ttyS2)"),
        "{worst}"
    );
    assert!(name.contains("FIFO 50"), "{worst}");

    // rtla timerlat (Debian's 6.1) on the same culprit: it stops on the threshold with the thread-context
    // latency of the burst while the IRQ-context latency stays small: a thread, not an interrupt, held the CPU.
    // It names no thread: auto-analysis arrived in rtla 6.3, and the trace 6.1 saves with -t holds the
    // second after the stop, not the burst (docs/why.md).
    // (Until the script set the timerlat threads below the culprit, as -P asks, both rtla runs mostly saw
    // 4-9 ms: see `timerlat_prio`.)
    let top = b.read("rtla_top.txt");
    assert!(top.contains("rtla timerlat hit stop tracing"), "{top}");
    let row = top
        .lines()
        .find(|l| l.trim_start().starts_with("1 #"))
        .unwrap_or_else(|| panic!("no CPU 1 row: {top}"));
    // The IRQ's and the thread's maxima, the last figure of each part; `-` where a part has no sample.
    let maxima: Vec<Option<f64>> = row
        .split('|')
        .skip(1)
        .map(|part| part.split_whitespace().last()?.parse().ok())
        .collect();
    assert_eq!(maxima.len(), 2, "{row}");
    let thread_max = maxima[1].unwrap_or_else(|| panic!("no thread latency: {row}"));
    assert!(
        thread_max >= 100_000.0,
        "rtla top stopped on the thread latency: {row}"
    );
    // The IRQ's latency a fifth of the thread's at most: under TCG on a slow host the timer IRQ itself waits
    // for the vCPU's turn (12.7 ms against the thread's 124.9 ms here, a tenth was too tight). rtla can
    // stop on the first activation's thread sample before it counts that activation's IRQ (`1 #0 | - - - - |
    // 478065 …` on a slow CI host): no IRQ sample, so none late.
    if let Some(irq_max) = maxima[0] {
        assert!(irq_max < thread_max / 5.0, "with the IRQ not late: {row}");
    }
    let hist = b.read("rtla_hist.txt");
    let max = hist
        .lines()
        .find_map(|l| l.strip_prefix("max:"))
        .unwrap_or_else(|| panic!("{hist}"));
    let v: Vec<f64> = max
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (max_irq, max_thr) = (v[0], v[1]);
    assert!(
        max_thr >= 200_000.0,
        "rtla's hist sees the bursts as thread latency: {max_thr} µs\n{hist}"
    );
    assert!(
        max_irq < max_thr / 5.0,
        "the timer IRQ itself was not late: {max_irq} µs\n{hist}"
    );
    eprintln!(
        "lab rtla: hist thread max {:.1} ms; rtgauge culprit max {culprit_max_ms:.1} ms\n{top}\n{hist}\nrtla top:\n{}\nrtla hist:\n{}\nrtgauge cyclic:\n{}",
        max_thr / 1000.0,
        b.read("rtla_top.time"),
        b.read("rtla_hist.time"),
        b.read("culprit.time")
    );
}

/// A guest stuck before init (here one whose init only sleeps, never printing init's first line) is killed
/// at its init bound and booted again, up to its boots, and the error says so: what the lab does with a TCG
/// guest that never reaches init, instead of waiting out the script's bound.
#[test]
fn a_guest_that_never_reaches_init_is_killed_and_booted_again() {
    let mut g = Guest::new(kernel(Flavour::Rt), GuestTopology::flat(2), "true");
    g.accel = Some(rtgauge_lab::Accel::Tcg);
    g.files.push((
        "bin/stuck".into(),
        b"#!/bin/busybox sh\n/bin/busybox sleep 600\n".to_vec(),
    ));
    g.cmdline = "rdinit=/bin/stuck".into();
    g.init_bound = Duration::from_secs(15);
    g.timeout = Duration::from_secs(600);
    g.boots = 2;
    // How long each QEMU lived (the lab calls this once per QEMU start; the wait for the lab's boot lock,
    // behind other tests' guests, is not in it).
    let lives = std::sync::Mutex::new(Vec::new());
    let e = g
        .boot_with(&|r: &rtgauge_lab::RunningGuest| {
            let t = std::time::Instant::now();
            while r.alive() {
                std::thread::sleep(Duration::from_millis(100));
            }
            lives.lock().unwrap().push(t.elapsed());
        })
        .expect_err("a guest whose init sleeps cannot hand files back");
    assert!(
        matches!(e, rtgauge_lab::LabError::NoInit { secs: 15, .. }),
        "{e}"
    );
    assert!(e.is_stuck());
    // Two boots, each killed at its 15 s bound, far from the 600 s one.
    let lives = lives.into_inner().unwrap();
    assert_eq!(lives.len(), 2, "{lives:?}");
    for l in &lives {
        assert!(
            *l >= Duration::from_secs(14) && *l < Duration::from_secs(60),
            "{lives:?}"
        );
    }
    eprintln!("lab stuck guest: QEMU lived {lives:?}");
}

/// Many CPUs: a traced `run` with one thread per CPU on 16 vCPUs and 2 nodes completes, every CPU measured
/// and traced, the kernel's lost events counted.
#[test]
fn a_traced_run_on_16_cpus_completes() {
    let profile =
        "name = \"lab\"\ndescription = \"timer latency on every CPU\"\nduration = \"5s\"\n\
                   [[probe]]\nkind = \"cyclic\"\nflags = \"-m -p95 -i 1000 -a {cpus} -t -q\"\n";
    let script = "rtgauge run --profile /lab/profile.toml --cpus 0-15 --trace --no-sample --db /root/rtgauge.db \
                  --output $OUT/run.json --html $OUT/report.html > $OUT/run.txt 2>&1; echo \"run exit $?\"";
    let mut g = guest(Flavour::Rt, GuestTopology::new(2, 4, 2, 2).unwrap(), script);
    g.files
        .push(("lab/profile.toml".into(), profile.as_bytes().to_vec()));
    // Single-threaded TCG runs the 16 vCPUs in turn: a 3 s traced cyclic on 16 CPUs took up to 125 s of
    // guest time in the single-threaded boots of docs/lab.md ("The reported stall").
    g.timeout = Duration::from_secs(360);
    let b = boot(&g);
    let run = json(&b, "run.json");
    let p = &run["probes"][0];
    assert_eq!(
        p["threads"].as_array().map(Vec::len),
        Some(16),
        "{}",
        b.read("run.txt")
    );
    let why = &p["why"];
    assert!(why["trace"]["events"].as_u64().unwrap() > 0, "{why}");
    assert!(why["trace"]["lost"].is_u64(), "{why}");
    let html = std::fs::metadata(b.dir().join("report.html"))
        .unwrap()
        .len();
    assert!(html > 10_000, "report {html} bytes");
    eprintln!(
        "lab 16 CPUs: {} events, {} lost, report {html} bytes, run.json {} bytes",
        why["trace"]["events"],
        why["trace"]["lost"],
        b.read("run.json").len()
    );
}
