//! The virtualization tax explained from both sides, in the kernel lab (crates/lab, docs/vm.md): a guest
//! measures with a traced timer probe while, on this host, `rtgauge vm observe` follows QEMU's vCPU threads
//! (under TCG they are real host threads, `CPU n/TCG`, pinned here one per host CPU) and exchanges clock
//! probes with the guest's `rtgauge vm clock-serve` over a serial port (ttyS3 ↔ a unix socket).
//!
//! - With host noise — a SCHED_FIFO 50 thread named `rtg-noise` pinned to the host CPU of vCPU 1 taking it
//!   three times for 20 ms, the second time having made itself FIFO 50 only while it spins (every switch of
//!   it reads CFS) — the guest sees three stalls it cannot explain (unattributed), and the join names that
//!   host thread for each of them by the policy it held, with the clock's offset and bound.
//! - Without it, no episode is charged to a FIFO 50 host thread. (This development host is shared: other
//!   people's builds preempt the vCPU threads too, and the join names them, CFS; they are printed, not
//!   judged.)
//!
//! The stall reaches the guest two ways under TCG, and both are named: the vCPU thread runnable and kept
//! off its CPU (`preempted`), or asleep (halted) while the QEMU thread that runs the guest's timers and
//! wakes it was kept off its CPU (`waker_delayed`).
//!
//! Needs root on the host (tracefs, SCHED_FIFO). Two boots, ~30 s each here.
#![allow(clippy::unwrap_used)]

mod common;

use common::hostnoise::{boot_beside, burst, pin_vcpus, place};

use rtgauge_lab::{Flavour, Guest, GuestTopology, Kernel, RunningGuest};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The noise: bursts on one host CPU.
const BURSTS: u32 = 3;
const BURST: Duration = Duration::from_millis(20);
const GAP: Duration = Duration::from_millis(700);

/// The guest: a line on the console as the script starts (the host starts its observer from it), the clock responder on CPU 0, a traced timer probe on CPU 1 (its main thread on CPU 0), and a
/// line on the console once the probe's measuring thread exists (the host starts its noise from it).
const SCRIPT: &str = r#"echo "rtgauge-lab-vm: up"
taskset -c 0 rtgauge vm clock-serve /dev/ttyS3 > $OUT/clock-serve.txt 2>&1 &
cs=$!
rtgauge cyclic -m -p 90 -a 1 -i 1000 -D 7 --mainaffinity=0 --trace --spike 3000 --output $OUT/run.json > $OUT/run.txt 2>&1 &
probe=$!
until grep -qs "^rtgauge-cyc" /proc/[0-9]*/task/[0-9]*/comm; do usleep 20000; done
echo "rtgauge-lab-vm: measuring at $(cut -d' ' -f1 /proc/uptime) s"
wait $probe; echo "cyclic exit $?"
kill $cs; wait $cs
cat $OUT/clock-serve.txt
"#;

/// The burst made by a thread that makes itself SCHED_FIFO 50 only while it spins and SCHED_OTHER again
/// before it ends (issue 36's culprit): every switch of it reads CFS. The others are made by a thread that is
/// FIFO 50 throughout. Both are named `rtg-noise`.
const SELF_RAISED: usize = 1;

/// Threads named `rtg-noise` on host CPU `cpu`, spinning [`BURST`] [`BURSTS`] times [`GAP`] apart at
/// SCHED_FIFO 50 (burst [`SELF_RAISED`] by a second thread that raises itself to it while running): the tid
/// of each burst's thread and the burst's (start, end) on CLOCK_MONOTONIC.
fn noise(cpu: usize) -> Vec<(i32, (u64, u64))> {
    let fifo = std::thread::Builder::new()
        .name("rtg-noise".into())
        .spawn(move || {
            let tid = place(cpu, libc::SCHED_FIFO, 50);
            let mut out = Vec::new();
            for k in 0..BURSTS as usize {
                if k == SELF_RAISED {
                    // The other thread's turn: it starts now and this one waits a gap and a burst.
                    let raiser = std::thread::Builder::new()
                        .name("rtg-noise".into())
                        .spawn(move || {
                            let tid = place(cpu, libc::SCHED_OTHER, 0);
                            let p = libc::sched_param { sched_priority: 50 };
                            // SAFETY: plain libc call on the calling thread with valid arguments.
                            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
                            assert_eq!(rc, 0);
                            let b = burst(BURST);
                            let p = libc::sched_param { sched_priority: 0 };
                            // SAFETY: as above.
                            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
                            assert_eq!(rc, 0);
                            (tid, b)
                        })
                        .unwrap();
                    out.push(raiser.join().unwrap());
                } else {
                    out.push((tid, burst(BURST)));
                }
                std::thread::sleep(GAP);
            }
            out
        })
        .unwrap();
    fifo.join().unwrap()
}

/// What the host side of one boot saw.
#[derive(Default)]
struct HostSide {
    /// Each burst's thread and (start, end).
    bursts: Vec<(i32, (u64, u64))>,
    observer: String,
    error: Option<String>,
}

/// Beside the running guest: pin the vCPU threads, observe, and make noise on `noise_cpu` once the guest
/// measures.
fn beside(r: &RunningGuest, noise_cpu: Option<usize>, host_json: &Path) -> HostSide {
    let mut side = HostSide::default();
    let t = Instant::now();
    if let Err(e) = pin_vcpus(r.qemu_pid, 2, || r.alive()) {
        side.error = Some(e);
        return side;
    }
    // The observer starts once the guest's script does: observing a TCG boot took a whole host CPU (191 s
    // boots on a busy CI host), and the boot is not under test.
    let console = |line: &str| {
        while r.alive()
            && !r.console_text().contains(line)
            && t.elapsed() < Duration::from_secs(150)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    console("rtgauge-lab-vm: up");
    let channel = format!("unix:{}", r.channel.as_ref().unwrap().display());
    let log = host_json.with_extension("log");
    let observer = common::rtgauge_std()
        .args([
            "vm",
            "observe",
            "--pid",
            &r.qemu_pid.to_string(),
            "--clock",
            &channel,
            "--record",
        ])
        .arg(host_json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    console("rtgauge-lab-vm: measuring");
    // The noise only once the observer traces (its first line says so).
    let observing =
        || std::fs::read_to_string(&log).is_ok_and(|l| l.contains("rtgauge: observing"));
    while r.alive() && !observing() && t.elapsed() < Duration::from_secs(150) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if r.alive() && observing() {
        if let Some(cpu) = noise_cpu {
            std::thread::sleep(Duration::from_millis(1500));
            side.bursts = noise(cpu);
        }
    } else if r.alive() {
        side.error = Some(format!(
            "the observer did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        ));
    } else {
        side.error = Some("the guest ended before it measured".into());
    }
    // The observer ends with the VM.
    let out = observer.wait_with_output().unwrap();
    side.observer = format!(
        "{}{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    side
}

/// Boot the guest with the host noise on `noise_cpu` (or none); the guest's run, the host record and the
/// joined run.
fn boot(noise_cpu: Option<usize>, dir: &Path) -> (Value, Value, Value, HostSide) {
    let kernel = Kernel::fetch(Flavour::Rt).unwrap();
    let mut g = Guest::new(&kernel, GuestTopology::flat(2), SCRIPT);
    g.rtgauge = Some(assert_cmd::cargo::cargo_bin("rtgauge"));
    g.clock_channel = true;
    // The observer follows each vCPU as a host thread of its own.
    g.vcpu_threads = true;
    g.timeout = Duration::from_secs(180);
    g.label = match noise_cpu {
        Some(c) => format!("rt 2 CPUs, host noise on host CPU {c}"),
        None => "rt 2 CPUs, no host noise".into(),
    };
    let host_json = dir.join("host.json");
    let (b, side) = boot_beside(
        &g,
        |r| beside(r, noise_cpu, &host_json),
        &format!("vm-noise-{noise_cpu:?}"),
        std::slice::from_ref(&host_json),
    );
    assert!(side.error.is_none(), "{:?}\n{}", side.error, b.console);
    assert_eq!(b.status, Some(0), "{}\n{}", b.log(), b.console);
    assert!(
        side.observer.starts_with("exit status: 0"),
        "{}",
        side.observer
    );
    let guest_run = dir.join("run.json");
    std::fs::write(&guest_run, b.read("run.json")).unwrap();
    let joined = dir.join("joined.json");
    let html = dir.join("joined.html");
    let out = common::rtgauge_std()
        .args(["vm", "join"])
        .args([&guest_run, &host_json])
        .arg("-o")
        .arg(&joined)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    common::assert_ok(&out);
    eprintln!(
        "lab vm (noise on host CPU {noise_cpu:?}): guest:\n{}\nhost:\n{}\njoin:\n{}",
        b.log(),
        side.observer,
        String::from_utf8_lossy(&out.stdout)
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.contains("The host side"),
        "the HTML report has the join"
    );
    if noise_cpu.is_some() {
        assert!(
            html.contains("rtg-noise/") && html.contains("clock bound ±"),
            "the HTML timelines name the culprit and the bound"
        );
        // compare: a bare-metal run (this host, 1 s) against the joined guest run, both stored.
        let db = dir.join("runs.db");
        let bare = common::rtgauge_std()
            .args([
                "cyclic", "-m", "-p", "90", "-a", "1", "-i", "1000", "-D", "1", "-q",
            ])
            .arg("--output")
            .arg(dir.join("bare.json"))
            .output()
            .unwrap();
        common::assert_ok(&bare);
        let import = common::rtgauge_std()
            .arg("import")
            .arg(dir.join("bare.json"))
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        common::assert_ok(&import);
        let store = common::rtgauge_std()
            .args(["vm", "join", "--store", "--db"])
            .arg(&db)
            .args([&guest_run, &host_json])
            .output()
            .unwrap();
        common::assert_ok(&store);
        let text = common::compare_text(db.to_str().unwrap(), &["1", "2"]);
        assert!(
            text.contains("cyclic host: joined with the record of"),
            "compare names the host side:\n{text}"
        );
        eprintln!(
            "lab vm compare (bare metal vs joined guest):\n{}",
            text.lines()
                .filter(|l| l.contains("run "))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    (
        common::read_json(&guest_run),
        common::read_json(&host_json),
        common::read_json(&joined),
        side,
    )
}

fn episodes(doc: &Value) -> Vec<Value> {
    doc["probes"][0]["why"]["episodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn share(e: &Value, kind: &str) -> f64 {
    let w = e["window_ns"].as_f64().unwrap();
    e["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == kind)
        .map(|c| c["ns"].as_f64().unwrap())
        .sum::<f64>()
        / w
}

/// The joined episodes of guest CPU 1 whose window, on the host's clock, overlaps `(a, b)`: their index.
fn overlapping(joined: &[Value], (a, b): (u64, u64)) -> Vec<usize> {
    (0..joined.len())
        .filter(|&i| {
            let e = &joined[i];
            let h = &e["host"];
            let s = h["host_start_ns"].as_u64().unwrap_or(0);
            let w = e["window_ns"].as_u64().unwrap();
            e["cpu"] == 1 && h["verdict"] == "joined" && s < b && s + w > a
        })
        .collect()
}

#[test]
fn a_guest_stall_is_named_by_the_host_thread_that_preempted_its_vcpu() {
    // Both boots take the lab's lock in turn; the noise thread runs on this host's CPUs 0 and 1.
    let dir = tempfile::tempdir().unwrap();

    // With noise on vCPU 1's host CPU. Tried twice: other work on this shared host sometimes stands between
    // the noise and the vCPU (the first attempt's failure is printed).
    common::twice("lab vm: the noisy boot", |attempt| {
        let noisy = dir.path().join(format!("noisy{attempt}"));
        std::fs::create_dir(&noisy).unwrap();
        noisy_boot(&noisy);
    });
    quiet_boot(dir.path());
}

/// The boot with the host noise: every burst is named by the join.
fn noisy_boot(noisy: &Path) {
    let (guest, host, joined, side) = boot(Some(1), noisy);
    let clock = &host["clock"];
    let samples = clock["samples"].as_array().unwrap();
    // Measured again during the run, not only at its start: the join interpolates between samples. (A
    // burst each second while the guest serves; a starved CI host once left two.)
    assert!(samples.len() >= 2, "clock samples: {clock}");
    let guest_eps = episodes(&guest);
    let joined_eps = episodes(&joined);
    assert_eq!(guest_eps.len(), joined_eps.len());
    let mut skipped = 0;
    for (k, (tid, burst)) in side.bursts.iter().enumerate() {
        // The self-raising thread reads FIFO without a traced priority when every switch of it the trace
        // saw was while it was CFS; when its CPU was switched away from it mid-burst, while FIFO, that
        // switch traced its priority and it reads FIFO 50 (both tries of one fresh-clone run on a busy
        // host): either names the right thread with its policy, never CFS (asserted below).
        let names = match k {
            SELF_RAISED => vec![
                format!("rtg-noise/{tid} FIFO (set while running; priority not traced)"),
                format!("rtg-noise/{tid} FIFO 50"),
            ],
            _ => vec![format!("rtg-noise/{tid} FIFO 50")],
        };
        let name = names.join(" or ");
        let hits = overlapping(&joined_eps, *burst);
        assert!(
            !hits.is_empty(),
            "burst {k} at host {:.3} s: no guest episode on CPU 1 overlaps it; episodes: {joined_eps:#?}",
            burst.0 as f64 / 1e9
        );
        // The stall itself: the longest episode over the burst.
        let i = *hits
            .iter()
            .max_by_key(|&&i| joined_eps[i]["window_ns"].as_u64().unwrap())
            .unwrap();
        let (g, j) = (&guest_eps[i], &joined_eps[i]);
        let window_ms = j["window_ns"].as_f64().unwrap() / 1e6;
        assert!(window_ms >= 15.0, "burst {k}: a {window_ms:.1} ms episode");
        // The guest alone cannot explain it. Under TCG the vCPU thread can be taken while the guest is in
        // its own timer interrupt, and the guest then charges the stall to that vector (a 22 ms
        // local_timer, seen twice in twelve bursts here): what it saw is the join's to keep, so such a
        // burst is printed, not judged — once, and never the self-raised one, which is under test.
        let guest_unattributed = share(g, "unattributed");
        if guest_unattributed < 0.6 && g["causes"][0]["kind"] == "vector" && k != SELF_RAISED {
            eprintln!("lab vm burst {k}: the guest charged it to its own vector, not judged: {g}");
            skipped += 1;
            assert!(skipped <= 1, "two bursts the guest charged to itself");
            continue;
        }
        assert!(
            guest_unattributed >= 0.6,
            "burst {k}: the guest alone explains {:.0} %: {g}",
            (1.0 - guest_unattributed) * 100.0
        );
        assert!(g["causes"][0]["kind"] == "unattributed", "{g}");
        // The host names the thread — it held the vCPU's CPU, or the CPU of the QEMU thread that wakes it —
        // for most of the burst, and for no more than it ran (an episode can also hold another, real, host
        // stall around the burst: that keeps its own name).
        let burst_ms = (burst.1 - burst.0) as f64 / 1e6;
        let mut noise_ms = 0.0;
        let mut bound_ms: f64 = 0.0;
        for &x in &hits {
            let h = &joined_eps[x]["host"];
            bound_ms = bound_ms.max(h["bound_ns"].as_f64().unwrap() / 1e6);
            for c in h["causes"].as_array().unwrap() {
                let cname = c["name"].as_str().unwrap();
                // Named CFS only for what it ran before it raised itself (tens of µs), never for the burst.
                let cfs = format!("rtg-noise/{tid} CFS");
                assert!(
                    !cname.contains(&cfs) || c["ns"].as_f64().unwrap() < 1e6,
                    "burst {k}: a CFS thread cannot hold a FIFO 90 guest off for {window_ms:.1} ms: {c}"
                );
                if names.iter().any(|n| cname.contains(n.as_str())) {
                    assert!(
                        c["kind"] == "preempted" || c["kind"] == "waker_delayed",
                        "burst {k}: {c}"
                    );
                    noise_ms += c["ns"].as_f64().unwrap() / 1e6;
                }
            }
        }
        let h = &j["host"];
        assert!(
            noise_ms >= 0.6 * burst_ms,
            "burst {k}: {name} charged {noise_ms:.1} ms of its {burst_ms:.1} ms: {h}"
        );
        assert!(
            noise_ms <= burst_ms + 2.0 * bound_ms + 1.0,
            "burst {k}: {name} charged {noise_ms:.1} ms, more than it ran ({burst_ms:.1} ms ± {bound_ms:.2} ms): {h}"
        );
        assert_eq!(j["causes"][0]["kind"], "host", "{j}");
        assert!(share(j, "unattributed") < guest_unattributed - 0.5, "{j}");
        assert!(bound_ms < window_ms / 2.0, "{h}");
        let top = &h["causes"][0];
        eprintln!(
            "lab vm burst {k} ({burst_ms:.1} ms on host CPU 1): guest episode {window_ms:.1} ms ({:.0} % unattributed in the guest alone); {name} charged {noise_ms:.1} ms; top host cause {} for {:.1} ms; {:.0} % left unattributed; offset guest − host {:+.3} ms ± {:.3} ms",
            guest_unattributed * 100.0,
            top["name"].as_str().unwrap(),
            top["ns"].as_f64().unwrap() / 1e6,
            share(j, "unattributed") * 100.0,
            h["offset_ns"].as_f64().unwrap() / 1e6,
            h["bound_ns"].as_f64().unwrap() / 1e6,
        );
    }
}

/// The boot without host noise: nothing is charged to a FIFO 50 host thread.
fn quiet_boot(dir: &Path) {
    let quiet = dir.join("quiet");
    std::fs::create_dir(&quiet).unwrap();
    let (_, _, joined, _) = boot(None, &quiet);
    let eps = episodes(&joined);
    let mut named = std::collections::BTreeMap::new();
    for e in &eps {
        let h = &e["host"];
        assert!(
            h["verdict"].is_string(),
            "every episode went through the join: {e}"
        );
        for c in h["causes"].as_array().into_iter().flatten() {
            let n = c["name"].as_str().unwrap();
            assert!(
                !n.contains("FIFO 50"),
                "no noise, yet a FIFO 50 host thread: {e}"
            );
            *named.entry(n.to_string()).or_insert(0.0) += c["ns"].as_f64().unwrap() / 1e6;
        }
    }
    let joined_count = eps
        .iter()
        .filter(|e| e["host"]["verdict"] == "joined")
        .count();
    eprintln!(
        "lab vm control: {} episodes ({joined_count} joined), none charged to a FIFO 50 host thread; host causes named (ms): {named:?}",
        eps.len()
    );
}
