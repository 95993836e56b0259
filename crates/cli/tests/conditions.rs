//! A platform that refuses what a run asks for, on real kernel state: a cgroup with no real-time budget, a
//! non-root user whose RLIMIT_RTPRIO is 0, root without CAP_SYS_NICE, and an RLIMIT_MEMLOCK too small for
//! mlockall without CAP_IPC_LOCK. Each run must say so first, one line per cause naming the cause and its
//! fix, head its sections with what was achieved, and give "not judged" (exit 3) instead of a verdict; the
//! audit before it must find the same cause. The same run unrestricted is judged as before.

#![allow(clippy::unwrap_used)]

mod common;
use common::{program, rtgauge_std};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One cyclic thread at SCHED_FIFO 95 with a gate it passes on any machine: only the conditions decide.
const PROFILE: &str = "name = 'gated'\nduration = '1s'\n[[probe]]\nkind = 'cyclic'\n\
    flags = '-m -p 95 -i 1000 -t 1 -a {cpu} -q'\n[[gate]]\nmetric = 'cyclic.max'\nmax = '1s'\n";

/// A world-writable directory (a non-root user writes its store there) holding the profile.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(dir.path().join("gated.toml"), PROFILE).unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `rtgauge run` of the gated profile, its store, page and document in the scratch directory.
    fn run_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            "run",
            "--profile",
            &self.path("gated.toml").display().to_string(),
            "--no-sample",
            "--db",
            &self.path("rtgauge.db").display().to_string(),
            "--html",
            &self.path("run.html").display().to_string(),
            "--output",
            &self.path("run.json").display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    fn doc(&self) -> Value {
        common::read_json(&self.path("run.json"))
    }

    fn html(&self) -> String {
        std::fs::read_to_string(self.path("run.html")).unwrap()
    }
}

/// `wrapper` (a program that ends by exec'ing its last arguments) running `rtgauge ARGS`: exit code,
/// stdout, stderr.
fn under(wrapper: Command, args: &[String]) -> (i32, String, String) {
    under_exe(wrapper, &assert_cmd::cargo::cargo_bin("rtgauge"), args)
}

/// [`under`] with the rtgauge executable at `exe`.
fn under_exe(mut wrapper: Command, exe: &Path, args: &[String]) -> (i32, String, String) {
    let o = wrapper.arg(exe).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What every refused run shows: exit 3; the cause said before anything was measured (by the audit) and
/// once after; the summary led by the unmet conditions, the section heading saying what was achieved, the
/// gate not judged; the page's verdict block led by them; the document holding them.
fn assert_not_judged(s: &Scratch, (code, out, err): &(i32, String, String), line: &str) {
    assert_eq!(*code, 3, "{out}\n{err}");
    let first = out.find("CONDITIONS NOT MET").expect(out);
    let table = out.find("timer latency (cyclic").expect(out);
    assert!(
        first < table,
        "the unmet conditions come before the figures:\n{out}"
    );
    assert!(out[first..table].contains(line), "{line}\nnot in:\n{out}");
    let row = common::gate_row(out, "cyclic max latency").expect(out);
    assert!(
        row[1] == "≤ 1000000.0 µs"
            && row.last().map(String::as_str) == Some("NOT JUDGED")
            && common::answer(out) == Some("NOT JUDGED"),
        "{out}"
    );
    // Said once per cause, not once per thread, and the per-thread warning of old is gone.
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("rtgauge: NOT MET: "))
        .collect();
    assert_eq!(said.iter().filter(|l| l.contains(line)).count(), 1, "{err}");
    assert!(!err.contains("requested fifo:95"), "{err}");
    let doc = s.doc();
    assert_eq!(doc["verdicts"][0]["outcome"], "not_judged", "{doc:#}");
    assert!(
        doc["unmet"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| line.starts_with(u["what"].as_str().unwrap())),
        "{:#}",
        doc["unmet"]
    );
    // The page: its verdict block says NOT JUDGED and names the cause before the gate table.
    let html = s.html();
    let block = &html[html.find("id=\"verdict\"").expect(&html)..];
    let block = &block[..block.find("</section>").unwrap()];
    assert!(block.contains("NOT JUDGED"), "{block}");
    let cause = block.find("Conditions not met.").expect(block);
    let gates = block.find("<table>").expect(block);
    assert!(cause < gates, "{block}");
    let escaped = line
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(block.contains(&escaped), "{escaped}\nnot in\n{block}");
}

/// A child of the root of the cgroup v1 hierarchy of `controller`, its `files` written in order, removed at
/// the end.
struct Group {
    dir: PathBuf,
    name: String,
}

impl Group {
    fn new(controller: &str, files: &[(&str, String)], why: &str) -> Group {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let (_, point) = rtgauge_host::privilege::parse_cgroup_mount(&mounts, controller)
            .unwrap_or_else(|| {
                panic!(
                    "a cgroup v1 {controller} controller (this VM mounts one under /sys/fs/cgroup)"
                )
            });
        let name = format!("rtgauge-test-{controller}-{}", std::process::id());
        let dir = Path::new(&point).join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        // Removed when dropped from here on, whatever fails next.
        let group = Group { dir, name };
        for (f, v) in files {
            let file = group.dir.join(f);
            if let Err(e) = std::fs::write(&file, v) {
                panic!("{}: {e} ({why})", file.display());
            }
        }
        group
    }

    /// A group with `cpu.rt_runtime_us` = 0.
    fn no_rt_budget() -> Group {
        Group::new(
            "cpu",
            &[("cpu.rt_runtime_us", "0".into())],
            "the kernel needs RT group scheduling, CONFIG_RT_GROUP_SCHED, as this VM's has",
        )
    }

    /// A cpuset of CPU `cpu` alone (and the root's memory nodes).
    fn cpuset_of(cpu: u32) -> Group {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let (_, point) = rtgauge_host::privilege::parse_cgroup_mount(&mounts, "cpuset").unwrap();
        let mems = std::fs::read_to_string(Path::new(&point).join("cpuset.mems")).unwrap();
        Group::new(
            "cpuset",
            &[
                ("cpuset.cpus", cpu.to_string()),
                ("cpuset.mems", mems.trim().to_string()),
            ],
            "a cpuset needs its CPUs and memory nodes before a task joins it",
        )
    }

    /// A shell that moves itself into the group, then execs its last arguments.
    fn wrapper(&self) -> Command {
        let mut sh = program("/bin/sh");
        sh.args([
            "-c",
            "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"",
            &self.dir.display().to_string(),
        ]);
        sh
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Its processes have exited; a cgroup directory is removed with rmdir.
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("leaving cgroup {} behind: {e}", self.dir.display());
        }
    }
}

#[test]
fn a_cgroup_without_a_real_time_budget_is_named_and_the_run_not_judged() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let cg = Group::no_rt_budget();
    let sh = cg.wrapper();
    let r = under(sh, &s.run_args(&[]));
    let cause = format!("this cgroup (/{}) has cpu.rt_runtime_us = 0", cg.name);
    assert!(
        r.2.contains(&format!(
            "NOT MET (found before measuring, audit rt-priority-allowed): SCHED_FIFO 95 will be refused: {cause} — run the container with --cpu-rt-runtime=950000"
        )),
        "{}",
        r.2
    );
    assert_not_judged(
        &s,
        &r,
        &format!("SCHED_FIFO 95 refused on the one thread (it ran at SCHED_OTHER): {cause} — run the container with --cpu-rt-runtime=950000"),
    );
    assert!(
        r.1.contains("timer latency (cyclic, interval 1000 µs; fifo 95 requested, ran at other 0)"),
        "{}",
        r.1
    );
    // Its worst interval is not blamed on the hypervisor or firmware: a normal thread waits for anyone.
    assert!(
        r.1.contains("(its real-time policy was refused)")
            && !r.1.contains("points outside this kernel"),
        "{}",
        r.1
    );
    let doc = s.doc();
    let rule = doc["audit"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "rt-priority-allowed")
        .unwrap()
        .clone();
    assert_eq!(rule["status"], "fail", "{rule:#}");
    assert!(
        rule["summary"].as_str().unwrap().contains(&cause),
        "{rule:#}"
    );
}

/// The measured CPU (1) outside the process's cpuset (CPU 0): the audit before says so for certain and the
/// thread's refused pin is named by that cpuset. The same CPU outside only the process's current mask
/// (`taskset -c 0`, as isolcpus narrows every process's mask at boot) is no refusal: the thread pins itself
/// there, the run is judged and nothing is said of conditions.
#[test]
fn a_cpuset_refuses_the_measured_cpu_and_a_narrowed_mask_does_not() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let cg = Group::cpuset_of(0);
    let r = under(cg.wrapper(), &s.run_args(&[]));
    let cause = format!(
        "CPUs 1 are outside this process's cpuset, 0 (cpuset /{}: cpuset.cpus)",
        cg.name
    );
    assert!(
        r.2.contains(&format!(
            "NOT MET (found before measuring, audit measured-cpus-allowed): {cause} — "
        )),
        "{}",
        r.2
    );
    assert_not_judged(&s, &r, "not pinned to CPUs 1 on the one thread");
    assert!(
        r.1.contains(&cause),
        "the refused pin is named by its cpuset:\n{}",
        r.1
    );
    drop(cg);

    let mut w = program("taskset");
    w.args(["-c", "0"]);
    let (code, out, err) = under(w, &s.run_args(&[]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        !out.contains("CONDITIONS NOT MET")
            && !err.contains("NOT MET")
            && !err.contains("may not be met"),
        "{out}\n{err}"
    );
    assert_eq!(common::answer(&out), Some("FIT"), "{out}");
    let doc = s.doc();
    let rule = doc["audit"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "measured-cpus-allowed")
        .unwrap()
        .clone();
    assert_eq!(rule["status"], "pass", "{rule:#}");
    let got = &doc["probes"][0]["threads"][0]["conditions"]["cpu"];
    assert_eq!(got["achieved"], 1, "{got:#}");
}

#[test]
fn a_user_whose_rtprio_limit_is_0_is_named() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let mut w = program("setpriv");
    w.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ]);
    w.arg(program("prlimit").get_program())
        .args(["--rtprio=0", "--memlock=65536"]);
    // The user runs a copy it may execute, from a directory it may write (a checkout under /root is not).
    use std::os::unix::fs::PermissionsExt as _;
    let exe = s.path("rtgauge");
    std::fs::copy(assert_cmd::cargo::cargo_bin("rtgauge"), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.current_dir(s.dir.path());
    let r = under_exe(w, &exe, &s.run_args(&[]));
    assert_not_judged(
        &s,
        &r,
        "SCHED_FIFO 95 refused on the one thread (it ran at SCHED_OTHER): this process lacks CAP_SYS_NICE and its RLIMIT_RTPRIO (hard) is 0, below priority 95 — give it CAP_SYS_NICE",
    );
    // Not root: memory locking and cpu_dma_latency are refused too, each on its own line.
    assert!(r.1.contains("memory not locked (mlockall refused; a page fault can land in a measurement): this process lacks CAP_IPC_LOCK and its RLIMIT_MEMLOCK is 64 KiB"), "{}", r.1);
    assert!(r.1.contains("/dev/cpu_dma_latency 0 µs not held (the CPUs may enter deeper idle states): this process runs as uid 65534, and the device opens for writing to root alone — run as root"), "{}", r.1);
}

#[test]
fn root_without_cap_sys_nice_is_named() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let mut w = program("setpriv");
    // Dropped from every set that could give it back across exec (bounding, inheritable, so ambient too).
    w.args(["--bounding-set=-sys_nice", "--inh-caps=-sys_nice"]);
    // A known limit: lowering it is always allowed (raising it past the hard one is not, in every sandbox).
    w.arg(program("prlimit").get_program()).arg("--rtprio=0");
    let r = under(w, &s.run_args(&[]));
    assert_not_judged(
        &s,
        &r,
        "SCHED_FIFO 95 refused on the one thread (it ran at SCHED_OTHER): this process lacks CAP_SYS_NICE and its RLIMIT_RTPRIO (hard) is 0, below priority 95",
    );
    assert!(
        !r.1.contains("mlockall refused"),
        "root keeps CAP_IPC_LOCK:\n{}",
        r.1
    );
}

#[test]
fn a_memlock_limit_too_small_is_named_and_allow_degraded_judges_it_saying_so() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let wrapper = || {
        let mut w = program("setpriv");
        w.args(["--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock"]);
        w.arg(program("prlimit").get_program())
            .arg("--memlock=65536");
        w
    };
    let r = under(wrapper(), &s.run_args(&[]));
    assert_not_judged(
        &s,
        &r,
        "memory not locked (mlockall refused; a page fault can land in a measurement): this process lacks CAP_IPC_LOCK and its RLIMIT_MEMLOCK is 64 KiB",
    );
    assert!(
        !r.1.contains("SCHED_FIFO 95 refused"),
        "root keeps CAP_SYS_NICE:\n{}",
        r.1
    );
    // Accepted by the flag: judged, and the verdict says on what.
    let (code, out, err) = under(wrapper(), &s.run_args(&["--allow-degraded"]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        common::answer(&out) == Some("FIT")
            && common::unwrapped(&out).contains("as --allow-degraded allows"),
        "{out}"
    );
    assert_eq!(s.doc()["degraded_allowed_by"], "--allow-degraded");
    assert!(s
        .html()
        .contains("judged anyway, as --allow-degraded allows"));
}

#[test]
fn the_same_run_unrestricted_is_judged_and_says_nothing_of_conditions() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let o = rtgauge_std().args(s.run_args(&[])).output().unwrap();
    common::assert_ok(&o);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        !out.contains("CONDITIONS NOT MET") && !err.contains("NOT MET"),
        "{out}\n{err}"
    );
    assert!(
        out.contains("timer latency (cyclic, interval 1000 µs):"),
        "{out}"
    );
    assert_eq!(common::answer(&out), Some("FIT"), "{out}");
    let doc = s.doc();
    assert!(doc.get("unmet").is_none(), "{:#}", doc["unmet"]);
    assert_eq!(doc["verdicts"][0]["outcome"], "pass");
}

#[test]
fn compare_refuses_a_run_that_holds_no_measurement_naming_it() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let db = s.path("rtgauge.db").display().to_string();
    let o = rtgauge_std()
        .args(s.run_args(&["--label", "bare"]))
        .output()
        .unwrap();
    common::assert_ok(&o);
    // Run 2 is killed while it measures: stored, with no probe finished.
    let mut child = rtgauge_std()
        .args([
            "run",
            "--duration",
            "60s",
            "--no-sample",
            "--label",
            "vm",
            "--db",
            &db,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    assert!(lines.any(|l| l.unwrap().starts_with("audit:")));
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, out, err) = common::run(&["compare", "1", "2", "--db", &db]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("run 2 (vm) holds no measurement (stored interrupted): nothing to compare"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

#[test]
fn the_monitor_says_it_runs_without_real_time_priority_in_its_log_metric_and_snapshot() {
    let _busy = common::busy_cpu();
    let s = Scratch::new();
    let cg = Group::no_rt_budget();
    let prom = s.path("prom");
    std::fs::create_dir(&prom).unwrap();
    let db = s.path("rtgauge.db").display().to_string();
    let sh = cg.wrapper();
    let args: Vec<String> = [
        "monitor",
        "--cpus",
        "1",
        "--interval",
        "1ms",
        "--listen",
        "off",
        "--duration",
        "2s",
        "--audit-every",
        "0",
        "--store-every",
        "1h",
        "--label",
        "watch",
        "--db",
        &db,
        "--textfile",
        &prom.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, out, err) = under(sh, &args);
    assert_eq!(code, 0, "{out}\n{err}");
    let cause = format!("this cgroup (/{}) has cpu.rt_runtime_us = 0", cg.name);
    assert!(
        err.contains("rtgauge monitor: NOT MET: SCHED_FIFO")
            && err.contains(&format!("(it ran at SCHED_OTHER): {cause}")),
        "{err}"
    );
    let text = std::fs::read_to_string(prom.join("rtgauge.prom")).unwrap();
    assert!(
        text.contains("rtgauge_condition_unmet{condition=\"priority\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("rtgauge_condition_unmet{condition=\"mlockall\"} 0"),
        "{text}"
    );
    let doc = common::export_json(&db, "watch");
    assert_eq!(
        doc["unmet"][0]["condition"], "priority",
        "{:#}",
        doc["unmet"]
    );
    assert!(doc["unmet"][0]["cause"].as_str().unwrap().contains(&cause));
}

#[test]
fn capacity_without_real_time_priority_searches_nothing_and_is_not_judged() {
    let _busy = common::busy_cpu();
    let cg = Group::no_rt_budget();
    let sh = cg.wrapper();
    let args: Vec<String> = [
        "capacity",
        "--gate",
        "cyclic.max<=10ms",
        "--load",
        "cpu",
        "--levels",
        "0,50",
        "--repeat",
        "1",
        "-D",
        "300ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, out, err) = under(sh, &args);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains("NOT MET: SCHED_FIFO")
            && err.contains(&format!(
                "this cgroup (/{}) has cpu.rt_runtime_us = 0",
                cg.name
            )),
        "{err}"
    );
    assert!(err.contains("capacity: not judged"), "{err}");
    assert!(
        !err.contains("level 50 %"),
        "the search stopped at its first run: {err}"
    );
}
