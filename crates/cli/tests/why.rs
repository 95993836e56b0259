//! Why a spike happened (`--trace`): injected culprits must be named.
//! - a SCHED_FIFO 50 thread named `rtg-culprit`, above the probe's priority, takes CPU 1 for 5 ms three
//!   times: a default `--trace` run (no `--spike`: the rule's threshold) finds three episodes — one per
//!   stall, however many late samples each made — each charged to "rtg-culprit/… FIFO 50" with ≥ 90 % of
//!   its window; the same run without the culprit has no episode; one that makes itself FIFO 50 only for
//!   its spin (every switch of it at CFS priority) is named by the policy it held, never CFS;
//! - a timer storm (4000 timerfds armed on CPU 1 to expire at the same instant, 20 times) is a kernel-context
//!   culprit: spikes inside it are charged to the local timer interrupt;
//! - a traced run killed with SIGKILL leaves its instance behind, and the next run removes it.
//!
//! Needs root and tracefs (CI runs as root; the kernel events used exist on every distribution kernel).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, read_json, rtgauge_std};
use serde_json::Value;
use std::time::Duration;

/// The tests share CPU 1; they must not overlap.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn pin(cpu: usize) {
    // SAFETY: plain libc call on the calling thread with a valid set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// `rtgauge cyclic --trace` on CPU 1 at priority 10 for `secs`, with `extra` flags; the run document.
fn traced(secs: &str, extra: &[&str], during: impl FnOnce()) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("why.json");
    let child = rtgauge_std()
        .args([
            "cyclic", "-m", "-p", "10", "-a", "1", "-i", "1000", "-D", secs, "-q",
        ])
        .args(["--mainaffinity=0", "--trace", "--output"])
        .arg(&native)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    during();
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("episodes:"), "{text}");
    read_json(&native)
}

/// Run a scenario up to three times: this shared VM's host sometimes takes the vCPU away for a millisecond
/// or more inside an injected window, which is rightly reported as unattributed but is not the scenario under
/// test. Every attempt's failure is printed, so the noise stays visible.
fn attempts(what: &str, mut f: impl FnMut() -> Result<(), String>) {
    let mut errs = Vec::new();
    for i in 0..3 {
        match f() {
            Ok(()) => return,
            Err(e) => {
                eprintln!("{what}: attempt {} failed: {e}", i + 1);
                errs.push(e);
            }
        }
    }
    panic!("{what}: every attempt failed: {errs:#?}");
}

/// `Err(msg)` unless `cond`.
fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

fn spikes(doc: &Value) -> Vec<Value> {
    doc["probes"][0]["why"]["episodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Share (%) and name of a spike's largest cause, and of the cause of `kind` if any.
fn top(s: &Value) -> (String, String, f64) {
    let c = &s["causes"][0];
    let pct = c["ns"].as_f64().unwrap() * 100.0 / s["window_ns"].as_f64().unwrap();
    (
        c["kind"].as_str().unwrap().to_string(),
        c["name"].as_str().unwrap().to_string(),
        pct,
    )
}

#[test]
fn each_stall_of_a_fifo_culprit_is_one_episode_named_with_its_policy() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    attempts("rtg-culprit", || {
        let doc = traced("3", &[], || {
            std::thread::Builder::new()
                .name("rtg-culprit".into())
                .spawn(|| {
                    pin(1);
                    let p = libc::sched_param { sched_priority: 50 };
                    // SAFETY: valid parameters for the calling thread.
                    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
                    assert_eq!(rc, 0, "needs root");
                    std::thread::sleep(Duration::from_millis(700));
                    for _ in 0..3 {
                        let t = std::time::Instant::now();
                        while t.elapsed() < Duration::from_millis(5) {
                            std::hint::spin_loop();
                        }
                        std::thread::sleep(Duration::from_millis(500));
                    }
                })
                .unwrap()
                .join()
                .unwrap();
        });
        let why = &doc["probes"][0]["why"];
        let s = spikes(&doc);
        eprintln!("threshold {}, {} episodes", why["threshold"], s.len());
        for x in &s {
            eprintln!(
                "  episode: {} µs, {} late samples, {:?}",
                x["worst_ns"].as_u64().unwrap_or(0) / 1000,
                x["samples"],
                top(x)
            );
        }
        // The rule's threshold, not a flag's: far below a 5 ms stall, far above this VM's body.
        let thr = why["threshold"]["ns"].as_u64().unwrap();
        check(
            why["threshold"]["rule"]
                .as_str()
                .unwrap()
                .starts_with("max(p50"),
            || format!("{}", why["threshold"]),
        )?;
        check(thr < 2_000_000, || format!("threshold {thr} ns"))?;
        // One episode per stall. On a shared machine other episodes may come from a neighbour's threads
        // (named as such); none of them may be a piece of the culprit's stalls.
        let culprit: Vec<&Value> = s
            .iter()
            .filter(|x| top(x).1.starts_with("rtg-culprit/"))
            .collect();
        check(culprit.len() == 3, || {
            format!(
                "{} culprit episodes of {} ({} in all), 3 stalls",
                culprit.len(),
                s.len(),
                why["episodes_total"]
            )
        })?;
        for x in culprit {
            let (kind, name, pct) = top(x);
            check(kind == "thread" && name.starts_with("rtg-culprit/"), || {
                format!("{x}")
            })?;
            // Policy and priority while it held the CPU.
            check(name.ends_with(" FIFO 50"), || name.clone())?;
            check(pct >= 90.0, || format!("{pct:.1} % of {x}"))?;
            let us = x["worst_ns"].as_u64().unwrap() / 1000;
            check(us >= 3_000, || format!("{x}"))?;
            // One 5 ms stall of a 1 ms timer is several late samples, one episode.
            check(x["samples"].as_u64().unwrap() >= 2, || format!("{x}"))?;
        }
        Ok(())
    });
}

/// The culprit of issue 36: it makes itself SCHED_FIFO 50 only for its 5 ms spin and SCHED_OTHER again
/// before it sleeps (what `os.sched_setscheduler` around a busy loop does), so every switch of it reads
/// CFS. A CFS thread cannot keep a FIFO 10 thread off its CPU for 4 ms: each episode must name it by the
/// policy it held (its priority is not in the trace, and says so), never CFS.
#[test]
fn a_culprit_that_raises_itself_only_while_it_spins_is_named_by_the_policy_it_held() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    attempts("self-raising rtg-culprit", || {
        let doc = traced("3", &[], || {
            std::thread::Builder::new()
                .name("rtg-culprit".into())
                .spawn(|| {
                    pin(1);
                    std::thread::sleep(Duration::from_millis(700));
                    for _ in 0..3 {
                        let set = |policy, prio| {
                            let p = libc::sched_param {
                                sched_priority: prio,
                            };
                            // SAFETY: valid parameters for the calling thread.
                            let rc = unsafe { libc::sched_setscheduler(0, policy, &p) };
                            assert_eq!(rc, 0, "needs root");
                        };
                        set(libc::SCHED_FIFO, 50);
                        let t = std::time::Instant::now();
                        while t.elapsed() < Duration::from_millis(5) {
                            std::hint::spin_loop();
                        }
                        set(libc::SCHED_OTHER, 0);
                        std::thread::sleep(Duration::from_millis(500));
                    }
                })
                .unwrap()
                .join()
                .unwrap();
        });
        let s = spikes(&doc);
        let culprit: Vec<&Value> = s
            .iter()
            .filter(|x| top(x).1.starts_with("rtg-culprit/"))
            .collect();
        for x in &s {
            eprintln!(
                "  episode: {} µs, {:?}",
                x["worst_ns"].as_u64().unwrap_or(0) / 1000,
                top(x)
            );
        }
        check(culprit.len() == 3, || {
            format!(
                "{} culprit episodes of {}, 3 stalls",
                culprit.len(),
                s.len()
            )
        })?;
        for x in culprit {
            let (kind, name, pct) = top(x);
            check(kind == "thread", || format!("{x}"))?;
            check(
                name.ends_with(" FIFO (set while running; priority not traced)"),
                || name.clone(),
            )?;
            check(!name.contains("CFS"), || name.clone())?;
            check(pct >= 90.0, || format!("{pct:.1} % of {x}"))?;
        }
        Ok(())
    });
}

/// Without an injected stall no episode is caused by anything the test or rtgauge runs: no SCHED_FIFO thread
/// (the stall tests' spinner is one, and so would be a probe or tracing thread that disturbed its own CPU), no
/// rtgauge thread; and the rule threshold leaves ordinary samples alone (at most 1 % of them form episodes).
/// This shared VM's host does stall the vCPU for 0.1–2 ms at times, and those are real spikes: they appear
/// as episodes charged to "unattributed" (outside this kernel), as they should.
#[test]
fn a_run_without_a_stall_has_no_episode_of_its_own() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    attempts("no stall", || {
        let doc = traced("3", &[], || {});
        let why = &doc["probes"][0]["why"];
        let s = spikes(&doc);
        check(why["threshold"]["ns"].as_u64().is_some(), || {
            format!("{why}")
        })?;
        let samples: u64 = doc["probes"][0]["threads"]
            .as_array()
            .map_or(0, |t| t.iter().filter_map(|t| t["cycles"].as_u64()).sum());
        let total = why["episodes_total"].as_u64().unwrap_or(0);
        // A rule that took ordinary samples would take a tenth of them or more (everything above p90);
        // this shared VM's host now and then puts 1.5–2 % of a quiet run's samples beyond the rule
        // (45–61 episodes in 3,000 cycles, the binary before and after alike, 2026-11-28): 5 % is the bar.
        check(samples >= 2000 && total * 20 <= samples, || {
            format!(
                "{total} episodes in {samples} cycles: the rule threshold takes ordinary samples"
            )
        })?;
        let own: Vec<&Value> = s
            .iter()
            .flat_map(|e| e["causes"].as_array().into_iter().flatten())
            .filter(|c| {
                let name = c["name"].as_str().unwrap_or("");
                c["kind"] == "thread"
                    && (name.contains("FIFO")
                        || name.starts_with("rtg")
                        || name.starts_with("cyclic"))
            })
            .collect();
        check(own.is_empty(), || {
            format!("episodes without a stall charged to a FIFO or rtgauge thread: {own:?}")
        })
    });
}

#[test]
fn a_timer_storm_is_charged_to_the_local_timer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    attempts("timer storm", storm);
}

fn storm() -> Result<(), String> {
    let doc = traced("4", &["--spike", "200"], || {
        std::thread::spawn(|| {
            pin(1);
            // SAFETY: timerfd calls with valid arguments; every fd is closed at the end.
            unsafe {
                // Enough timers that one storm outlasts the probe's 1 ms period, so every storm hits a wake-up.
                let lim = libc::rlimit {
                    rlim_cur: 8192,
                    rlim_max: 8192,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                let fds: Vec<i32> = (0..4000)
                    .map(|_| libc::timerfd_create(libc::CLOCK_MONOTONIC, 0))
                    .filter(|&fd| fd >= 0)
                    .collect();
                assert!(fds.len() >= 3000, "timerfds: {}", fds.len());
                std::thread::sleep(Duration::from_millis(300));
                for _ in 0..20 {
                    let mut now: libc::timespec = std::mem::zeroed();
                    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
                    let mut at = now;
                    at.tv_nsec += 50_000_000;
                    if at.tv_nsec >= 1_000_000_000 {
                        at.tv_nsec -= 1_000_000_000;
                        at.tv_sec += 1;
                    }
                    let spec = libc::itimerspec {
                        it_interval: std::mem::zeroed(),
                        it_value: at,
                    };
                    for &fd in &fds {
                        libc::timerfd_settime(
                            fd,
                            libc::TFD_TIMER_ABSTIME,
                            &spec,
                            std::ptr::null_mut(),
                        );
                    }
                    std::thread::sleep(Duration::from_millis(150));
                }
                for fd in fds {
                    libc::close(fd);
                }
            }
        })
        .join()
        .unwrap();
    });
    let s = spikes(&doc);
    let timer: Vec<(String, String, f64)> = s
        .iter()
        .map(top)
        .filter(|(k, n, _)| k == "vector" && n == "local_timer")
        .collect();
    eprintln!(
        "timer-storm spikes: {} of {}: {timer:?}",
        timer.len(),
        s.len()
    );
    for x in &s {
        eprintln!("  {} {:?}", x["window_ns"], top(x));
    }
    check(timer.iter().any(|t| t.2 >= 50.0), || {
        format!("no spike charged mostly to the local timer: {s:?}")
    })
}

#[test]
fn a_killed_traced_run_is_cleaned_up_by_the_next() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let global = std::fs::read_to_string(common::tracefs().join("tracing_on")).unwrap();
    let mut child = rtgauge_std()
        .args([
            "cyclic", "-m", "-p", "10", "-a", "1", "-i", "1000", "-D", "30", "-q", "--trace",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let inst = common::tracefs()
        .join("instances")
        .join(format!("rtgauge-{}", child.id()));
    let t = std::time::Instant::now();
    while !inst.join("tracing_on").exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read_to_string(inst.join("tracing_on"))
            .unwrap()
            .trim(),
        "1"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        inst.exists(),
        "SIGKILL cannot clean up: the instance stays until the next run"
    );
    let out = rtgauge_std()
        .args([
            "cyclic", "-m", "-a", "1", "-i", "1000", "-D", "1", "-q", "--trace",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(
        !inst.exists(),
        "the next traced run removed the dead run's instance"
    );
    let left: Vec<String> = std::fs::read_dir(common::tracefs().join("instances"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rtgauge-"))
        .collect();
    assert!(left.is_empty(), "no rtgauge instance left behind: {left:?}");
    assert_eq!(
        std::fs::read_to_string(common::tracefs().join("tracing_on")).unwrap(),
        global,
        "the global buffer's switch is never touched"
    );
}

/// The culprit of the first test, started after `delay`: one `ms` ms stall.
fn culprit_once(delay: Duration, ms: u64) {
    std::thread::Builder::new()
        .name("rtg-culprit".into())
        .spawn(move || {
            pin(1);
            let p = libc::sched_param { sched_priority: 50 };
            // SAFETY: valid parameters for the calling thread.
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
            assert_eq!(rc, 0, "needs root");
            std::thread::sleep(delay);
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(ms) {
                std::hint::spin_loop();
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn break_above_stops_at_the_first_sample_and_keeps_its_trace() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    attempts("break-above", || {
        // The shared VM has host stalls of several ms when loaded; 15 ms is above most of them and below
        // the 20 ms stall (an attempt broken by a host stall is retried).
        let doc = traced("5", &["--break-above", "15000"], || {
            culprit_once(Duration::from_millis(800), 20)
        });
        let p = &doc["probes"][0];
        assert_eq!(p["stop_reason"], "break", "{}", p["stop_reason"]);
        let (thread, value) = (
            p["break_hit"][0].as_u64().unwrap(),
            p["break_hit"][1].as_u64().unwrap(),
        );
        assert_eq!(thread, 0);
        assert!(value > 15_000_000, "{value}");
        let spike = p["spikes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["latency_ns"].as_u64() == Some(value))
            .unwrap();
        // Stopped within one period of the break sample: it is the last (or next to last) period measured.
        let cycles = p["threads"][0]["cycles"].as_u64().unwrap();
        assert!(
            cycles <= spike["cycle"].as_u64().unwrap() + 2,
            "{cycles} cycles, break at {spike}"
        );
        assert!(
            p["elapsed_ns"].as_u64().unwrap() < 4_000_000_000,
            "stopped early"
        );
        let b = &p["why"]["break_sample"];
        let spans = b["spans"].as_array().unwrap();
        assert!(!spans.is_empty(), "the trace before the break is stored");
        let first = spans
            .iter()
            .map(|s| s["end_ns"].as_u64().unwrap())
            .min()
            .unwrap();
        let end = spike["monotonic_ns"].as_u64().unwrap();
        assert!(
            end - first <= 20_000_000 + value,
            "only the 20 ms before the break are kept"
        );
        let (kind, name, pct) = top(&b["breakdown"]);
        eprintln!(
            "break sample: {} µs, {pct:.1} % {kind} {name}",
            value / 1000
        );
        check(kind == "thread" && name.starts_with("rtg-culprit/"), || {
            format!("{b}")
        })?;
        check(pct >= 90.0, || format!("{pct}"))?;
        check(
            spans
                .iter()
                .any(|s| s["name"].as_str().unwrap().starts_with("rtg-culprit/")),
            || "culprit in the stored trace".into(),
        )
    });
}

#[test]
fn an_interrupted_traced_run_turns_tracing_off_and_removes_its_instance() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (out, _) = common::interrupt(
        &[
            "cyclic", "-m", "-a", "1", "-i", "1000", "-D", "30", "-q", "--trace",
        ],
        Duration::from_millis(1500),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("episodes:"),
        "the run ends through the normal path: {text}"
    );
    let left: Vec<String> = std::fs::read_dir(common::tracefs().join("instances"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rtgauge-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn oslat_gaps_are_broken_down_the_same_way() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    attempts("oslat rtg-culprit", || {
        let dir = tempfile::tempdir().unwrap();
        let native = dir.path().join("oslat-why.json");
        // The probe runs SCHED_OTHER (no RT throttling gaps); calibration and preheat take ~1.3 s.
        let child = rtgauge_std()
            .args([
                "oslat", "-c", "1", "-C", "0", "-D", "3", "-q", "--trace", "--output",
            ])
            .arg(&native)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        culprit_once(Duration::from_millis(2500), 5);
        let out = child.wait_with_output().unwrap();
        assert_ok(&out);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains("episodes:"), "{text}");
        let doc = read_json(&native);
        let s = spikes(&doc);
        assert!(!s.is_empty(), "the worst gaps are broken down");
        for x in &s {
            let sum: u64 = x["causes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["ns"].as_u64().unwrap())
                .sum();
            assert_eq!(
                sum,
                x["window_ns"].as_u64().unwrap(),
                "causes add up to the gap: {x}"
            );
            let own = doc["probes"][0]["threads"][0]["tid"].as_i64().unwrap();
            let own = format!("/{own} ");
            assert!(
                x["causes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| !c["name"].as_str().unwrap().contains(&own)),
                "the busy loop never charges itself: {x}"
            );
        }
        let unattributed = s.iter().filter(|x| top(x).0 == "unattributed").count();
        eprintln!(
            "oslat: {} gaps broken down, {unattributed} mostly unattributed (host/firmware)",
            s.len()
        );
        let c = s
            .iter()
            .find(|x| top(x).1.starts_with("rtg-culprit/"))
            .ok_or_else(|| format!("no gap charged to rtg-culprit: {s:?}"))?;
        let (_, name, pct) = top(c);
        eprintln!(
            "oslat culprit gap: {} µs, {pct:.1} % {name}",
            c["window_ns"].as_u64().unwrap() / 1000
        );
        check(pct >= 90.0, || format!("{pct:.1} % of {c}"))
    });
}

#[test]
fn the_trace_reader_stays_off_the_measured_cpus() {
    let dry = |extra: &[&str]| -> Value {
        let out = rtgauge_std()
            .args(["cyclic", "-a", "1", "--dry-run"])
            .args(extra)
            .output()
            .unwrap();
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(
        dry(&[])["main_cpus"],
        "0",
        "the main thread (counters every second) runs off the measured CPU"
    );
    assert_eq!(
        dry(&["--trace"])["main_cpus"],
        "0",
        "with --trace it moves off the measured CPU"
    );
    assert_eq!(
        dry(&["--trace", "--mainaffinity=1"])["main_cpus"],
        "1",
        "an explicit --mainaffinity is kept"
    );
}

#[test]
fn without_root_the_run_keeps_its_counters_and_says_what_is_missing() {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: chmod of our own temporary directory so that the unprivileged child can write its output.
    unsafe {
        let c = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(libc::chmod(c.as_ptr(), 0o777), 0);
    }
    let native = dir.path().join("unpriv.json");
    let mut cmd = rtgauge_std();
    cmd.args([
        "cyclic", "-a", "1", "-i", "1000", "-D", "1", "-q", "--trace", "--output",
    ])
    .arg(&native);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("--trace")).collect();
    assert_eq!(lines.len(), 1, "one line says what is missing: {err}");
    assert!(
        lines[0].contains("needs root") && lines[0].contains("counters only"),
        "{err}"
    );
    let doc = read_json(&native);
    let why = &doc["probes"][0]["why"];
    assert!(
        why["missing"].as_str().unwrap().contains("counters only"),
        "{why}"
    );
    assert!(
        !why["counters"].as_array().unwrap().is_empty(),
        "counters are kept: {why}"
    );
    assert!(why.get("trace").is_none(), "{why}");
}

/// A stall nobody in this kernel caused (a hypervisor's): the run's counters show the worst interval like
/// every other, with steal. The counters of a real run are set to what such a stall leaves — the usual tick,
/// nothing risen, 6 ms of steal in the worst interval — stored, and the report (terminal and HTML) says the
/// stall points outside this kernel with the steal, instead of listing the ordinary counts as its cause.
#[test]
fn a_worst_interval_with_nothing_risen_is_reported_outside_this_kernel() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("run.json");
    let out = rtgauge_std()
        .args([
            "cyclic", "-m", "-a", "1", "-i", "1000", "-D", "4", "-q", "--output",
        ])
        .arg(&native)
        .output()
        .unwrap();
    assert_ok(&out);
    let mut doc = read_json(&native);
    let p = &mut doc["probes"][0];
    let timeline = p["threads"][0]["timeline"].as_array().unwrap().clone();
    assert!(timeline.len() >= 3, "{timeline:?}");
    let worst = timeline
        .iter()
        .max_by_key(|e| e["max_ns"].as_u64().unwrap())
        .unwrap()["start_ns"]
        .as_u64()
        .unwrap();
    let counters = p["why"]["counters"].as_array_mut().unwrap();
    assert!(
        counters.len() >= 3,
        "the run sampled its counters: {counters:?}"
    );
    for c in counters.iter_mut() {
        let at_worst = c["start_ns"].as_u64() == Some(worst);
        c["irqs"] = serde_json::json!([["LOC", 250], ["RES", 3]]);
        c["softirqs"] = serde_json::json!([["TIMER", 250]]);
        c["irq_ns"] = 0.into();
        c["softirq_ns"] = 0.into();
        c["steal_ns"] = if at_worst { 6_000_000 } else { 0 }.into();
        c["run_delay_ns"] = 40_000.into();
    }
    std::fs::write(&native, doc.to_string()).unwrap();
    let db = dir.path().join("runs.db");
    let db = db.to_str().unwrap();
    assert_ok(
        &common::rtgauge()
            .args(["import", native.to_str().unwrap(), "--db", db])
            .output()
            .unwrap(),
    );
    let text = common::rtgauge()
        .args(["report", "--db", db])
        .output()
        .unwrap();
    assert_ok(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("worst interval CPU 1"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("nothing in this kernel rose above its typical interval")
            && line.contains("steal 6.0 ms")
            && line.contains("outside this kernel")
            && line.contains("--trace"),
        "{line}"
    );
    assert!(
        !line.contains("LOC 250"),
        "normal counts are not named as a cause: {line}"
    );
    let page = dir.path().join("run.html");
    assert_ok(
        &common::rtgauge()
            .args(["report", "--html", page.to_str().unwrap(), "--db", db])
            .output()
            .unwrap(),
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("outside this kernel"), "the page says it too");
}

/// Threads that are not pinned (cyclictest without -a) are observed on every CPU they may run on: their
/// counters and trace cover the process's allowed CPUs, and each late sample says where it woke.
#[test]
fn unpinned_threads_are_observed_where_they_may_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("unpinned.json");
    let out = rtgauge_std()
        .args([
            "cyclic", "-m", "-p", "10", "-i", "1000", "-D", "3", "-t", "-q", "--trace", "--output",
        ])
        .arg(&native)
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("no /proc counters"), "{text}");
    let doc = read_json(&native);
    let why = &doc["probes"][0]["why"];
    let cpus: std::collections::BTreeSet<u64> = why["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cpu"].as_u64().unwrap())
        .collect();
    let online = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(
        cpus.len() as u64,
        online,
        "every allowed CPU observed: {cpus:?}"
    );
    assert!(why["trace"]["events"].as_u64().unwrap() > 0, "{why}");
    assert!(why["threshold"]["ns"].as_u64().is_some(), "{why}");
    for e in why["episodes"].as_array().into_iter().flatten() {
        assert!(
            cpus.contains(&e["cpu"].as_u64().unwrap()),
            "an episode on an observed CPU: {e}"
        );
    }
}
