//! A real PTP domain in the kernel lab (crates/lab, docs/clock.md): this host's `ptp4l -S` is the
//! grandmaster on a bridge that holds the tap of a guest's virtio NIC; the guest, with its own clock, runs
//! `ptp4l -S` as a client (slaveOnly, linuxptp's defaults: it steps its clock at the start only) and
//! `rtgauge clock` reading it. The guest's clock converges (its first sync steps it: a step in the guest's
//! kernel), then the host makes the faults, each seen by the guest:
//! 1. the master's clock steps +20 ms (this host's CLOCK_REALTIME, ADJ_SETOFFSET): the guest's offset
//!    jumps, its lock is lost, its servo slews (no step in its kernel) and it locks again: the time to
//!    re-converge;
//! 2. the grandmaster stops: the guest's port falls back to LISTENING, a holdover starts; the grandmaster
//!    starts again: the holdover ends with the drift the first offset shows;
//! 3. a second grandmaster with a better clockClass (6 against 248) joins the bridge: the guest follows
//!    it, the grandmaster's identity changes.
//!
//! This host's clock is stepped, and stepped back when the guest is done (a guard restores it on every
//! path): the test binary holds this one test. Needs root (a bridge, taps, veths, clock_adjtime). One boot, ~3.5 min
//! under TCG; the offsets mean nothing for hardware (software timestamps, an emulated NIC), the
//! convergence, the faults and their order do.
#![allow(clippy::unwrap_used)]

mod common;

use common::chrony::events;
use common::hostnoise::boot_beside;
use common::tap::Tap;
use rtgauge_lab::{Flavour, Guest, GuestTopology, Kernel, RunningGuest};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const TAP: &str = "rtgck0";
const BRIDGE: &str = "rtgckbr";
/// The guest measures for this long.
const MEASURE_S: u64 = 170;
/// The step of the master's clock.
const STEP_NS: i64 = 20_000_000;
/// When each fault is made, s after the guest said it measures.
/// (The client locked 23–24 s after it started and again 23 s after the step, in two boots: each fault
/// leaves room for twice that.)
const STEP_AT: u64 = 50;
const GM_STOP_AT: u64 = 100;
const GM_START_AT: u64 = 120;
const GM2_AT: u64 = 140;

/// The guest: its NIC up, its ptp4l client, then `rtgauge clock` for [`MEASURE_S`].
const SCRIPT: &str = r#"echo "rtgauge-lab-clock: up"
modprobe virtio_net || echo "modprobe virtio_net failed"
ip link set eth0 up || echo "eth0 not up"
mkdir -p /var/run
ptp4l -2 -S -i eth0 -f /etc/ptp4l.cfg -m > $OUT/ptp4l.log 2>&1 &
until [ -S /var/run/ptp4l ]; do usleep 100000; done
echo "rtgauge-lab-clock: measuring"
rtgauge clock -D MEASURE_Ss --rate 4 --lock 5ms --ptp4l /var/run/ptp4l --no-store --output $OUT/clock.json > $OUT/clock.txt 2>&1
echo "clock exit $?"
cat $OUT/clock.txt
tail -40 $OUT/ptp4l.log
"#;

/// The guest's ptp4l: a client with linuxptp's defaults (E2E, 1 sync/s, announce every 2 s, timeout 3; it
/// steps the clock on its first sync beyond 20 µs, and slews after). With `step_threshold` set, 3.1.1's
/// servo stayed unlocked (s0) for as long as the master's step lasted here: it never stepped back in.
const CLIENT_CFG: &str = "[global]\nslaveOnly 1\n";

/// A process this test started, killed and reaped when dropped.
struct Daemon(Option<Child>);

impl Daemon {
    fn stop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let o = common::program("ip").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The bridge with the guest's tap and one veth per grandmaster (`rtgckgN` on this host, its peer in the
/// bridge), removed when dropped.
struct Segment;

impl Segment {
    fn new() -> Segment {
        Segment::remove();
        ip(&[
            "link",
            "add",
            BRIDGE,
            "type",
            "bridge",
            "forward_delay",
            "0",
            "mcast_snooping",
            "0",
        ]);
        let s = Segment;
        ip(&["link", "set", TAP, "master", BRIDGE]);
        for (i, mac) in ["02:00:00:00:0c:01", "02:00:00:00:0c:02"]
            .iter()
            .enumerate()
        {
            let (dev, peer) = (format!("rtgckg{i}"), format!("rtgckp{i}"));
            ip(&[
                "link", "add", &dev, "address", mac, "type", "veth", "peer", "name", &peer,
            ]);
            ip(&["link", "set", &peer, "master", BRIDGE]);
            ip(&["link", "set", &peer, "up"]);
            ip(&["link", "set", &dev, "up"]);
        }
        ip(&["link", "set", BRIDGE, "up"]);
        s
    }

    fn remove() {
        for dev in ["rtgckg0", "rtgckg1", BRIDGE] {
            let _ = common::program("ip").args(["link", "del", dev]).output();
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        Segment::remove();
    }
}

/// A grandmaster on veth `rtgckgN`: masterOnly, with `class`; its log in `dir`.
fn grandmaster(n: usize, class: u8, dir: &Path) -> Daemon {
    let cfg = dir.join(format!("gm{n}.cfg"));
    std::fs::write(
        &cfg,
        format!(
            "[global]\nmasterOnly 1\nclockClass {class}\nuds_address {}/gm{n}.sock\n",
            dir.display()
        ),
    )
    .unwrap();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("gm{n}.log")))
        .unwrap();
    let child = common::program("ptp4l")
        .args([
            "-2",
            "-S",
            "-m",
            "-i",
            &format!("rtgckg{n}"),
            "-f",
            cfg.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Daemon(Some(child))
}

/// CLOCK_REALTIME moved by `ns` (ADJ_SETOFFSET: relative, so moving it back by −ns restores it exactly).
fn step_realtime(ns: i64) -> std::io::Result<()> {
    // SAFETY: an all-zero timex, then the fields ADJ_SETOFFSET | ADJ_NANO read.
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    t.modes = libc::ADJ_SETOFFSET | libc::ADJ_NANO;
    t.time.tv_sec = ns.div_euclid(1_000_000_000);
    t.time.tv_usec = ns.rem_euclid(1_000_000_000);
    // SAFETY: `t` is a valid timex for the call.
    if unsafe { libc::clock_adjtime(libc::CLOCK_REALTIME, &mut t) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// This host's clock stepped by `STEP_NS` and not yet back: stepped back when dropped.
struct Stepped(bool);

impl Drop for Stepped {
    fn drop(&mut self) {
        if self.0 {
            if let Err(e) = step_realtime(-STEP_NS) {
                eprintln!(
                    "lab clock: THIS HOST'S CLOCK IS LEFT +20 ms OFF: stepping it back failed: {e}"
                );
            }
        }
    }
}

/// What the host did, s after the guest said it measures.
#[derive(Default, Debug)]
struct Faults {
    done: Vec<(&'static str, f64)>,
    error: Option<String>,
}

fn beside(r: &RunningGuest, dir: &Path, gm1: &mut Daemon) -> Faults {
    let mut f = Faults::default();
    let t = Instant::now();
    while r.alive() && !r.console_text().contains("rtgauge-lab-clock: measuring") {
        if t.elapsed() > Duration::from_secs(200) {
            f.error = Some("the guest never started measuring".into());
            return f;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    let at = |s: u64| {
        while t0.elapsed() < Duration::from_secs(s) && r.alive() {
            std::thread::sleep(Duration::from_millis(20));
        }
        t0.elapsed().as_secs_f64()
    };
    let mut stepped = Stepped(false);
    at(STEP_AT);
    if let Err(e) = step_realtime(STEP_NS) {
        f.error = Some(format!("stepping this host's clock: {e}"));
        return f;
    }
    stepped.0 = true;
    f.done.push(("step", t0.elapsed().as_secs_f64()));
    let s = at(GM_STOP_AT);
    gm1.stop();
    f.done.push(("grandmaster stopped", s));
    let s = at(GM_START_AT);
    *gm1 = grandmaster(0, 248, dir);
    f.done.push(("grandmaster started", s));
    let s = at(GM2_AT);
    let gm2 = grandmaster(1, 6, dir);
    f.done.push(("better grandmaster", s));
    while r.alive() {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(gm2);
    drop(stepped);
    f
}

#[test]
fn a_guests_ptp_client_converges_and_reports_a_step_a_holdover_and_a_new_grandmaster() {
    // Tried twice, as the other VM lab tests: other work on this shared host sometimes stands between the
    // guest and its timing (the first attempt's failure is printed).
    common::twice("lab clock", |_| one_boot());
}

/// One boot: the domain, the faults, the guest's record of them.
fn one_boot() {
    let dir = tempfile::tempdir().unwrap();
    let _tap = Tap::create(TAP);
    let _segment = Segment::new();
    let mut gm1 = grandmaster(0, 248, dir.path());
    let kernel = Kernel::fetch(Flavour::Rt).unwrap();
    let script = SCRIPT.replace("MEASURE_S", &MEASURE_S.to_string());
    let mut g = Guest::new(&kernel, GuestTopology::flat(1), &script);
    g.rtgauge = Some(assert_cmd::cargo::cargo_bin("rtgauge"));
    g.guest_program("ptp4l");
    g.files
        .push(("etc/ptp4l.cfg".into(), CLIENT_CFG.as_bytes().to_vec()));
    g.tap = Some(TAP.into());
    g.timeout = Duration::from_secs(MEASURE_S + 150);
    g.label =
        "rt 1 CPU, ptp4l -S client on a virtio NIC bridged to this host's grandmasters".into();
    let gm1_cell = std::sync::Mutex::new(&mut gm1);
    let (b, faults) = boot_beside(
        &g,
        |r| beside(r, dir.path(), &mut gm1_cell.lock().unwrap()),
        "clock",
        &[dir.path().join("gm0.log"), dir.path().join("gm1.log")],
    );
    eprintln!("lab clock: guest:\n{}\nhost: {faults:?}", b.log());
    assert!(faults.error.is_none(), "{:?}\n{}", faults.error, b.console);
    assert_eq!(b.status, Some(0), "{}\n{}", b.log(), b.console);
    let doc_path = dir.path().join("clock.json");
    std::fs::write(&doc_path, b.read("clock.json")).unwrap();
    let doc = common::read_json(&doc_path);
    check(&doc["probes"][0], &faults);
}

fn secs(v: &Value) -> f64 {
    v.as_u64().unwrap() as f64 / 1e9
}

/// Each fault in the guest's record, in the order and near the time the host made it.
fn check(p: &Value, faults: &Faults) {
    let when = |what: &str| faults.done.iter().find(|d| d.0 == what).unwrap().1;
    let s = &p["sources"][0];
    assert_eq!(s["kind"], "ptp4l", "{p}");
    // Converged before the first fault.
    let settle = secs(&s["settle_ns"]);
    assert!(settle < when("step"), "locked after {settle} s: {s}");
    eprintln!(
        "lab clock: locked after {settle:.1} s; offsets {}",
        s["offset"]["percentiles"]
    );

    // The guest's first sync stepped its clock; nothing after: the servo slews.
    let steps = p["kernel"]["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "no step at the start: {}", p["kernel"]);
    assert!(
        steps.iter().all(|x| secs(&x["at_ns"]) <= settle + 2.0),
        "a step after the lock: {steps:?}"
    );
    // The master's step: the offsets just after it are about the step (the largest of the first buckets
    // from the second before it: the servo slews from the first sync on; TCG's own noise reaches a few
    // ms, now and then 14), and the source locked again before the grandmaster stopped: the time to
    // re-converge. (Whether the lock was held at the step depends on that noise: not asserted.)
    let from = when("step").floor() - 1.0;
    let jump = s["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| (from..from + 4.0).contains(&secs(&x["start_ns"])))
        .filter_map(|x| x["offset_min_ns"].as_i64())
        .min()
        .unwrap_or(0);
    assert!(
        (STEP_NS * 3 / 4..STEP_NS * 5 / 4).contains(&jump.abs()),
        "the offsets after the step: {jump} ns at most"
    );
    let relocked = events(s, "locked")
        .into_iter()
        .find(|e| (when("step")..when("grandmaster stopped")).contains(&secs(&e["at_ns"])))
        .unwrap_or_else(|| panic!("not locked again after the step: {s}"));
    eprintln!(
        "lab clock: the master's step seen as {:.3} ms, locked again {:.1} s after the step",
        jump as f64 / 1e6,
        secs(&relocked["at_ns"]) - when("step")
    );

    // The grandmaster stopped: a holdover, ended when it came back, with the drift over the outage.
    let h = &s["holdovers"][0];
    let (start, end) = (secs(&h["start_ns"]), secs(&h["end_ns"]));
    assert!(
        start > when("grandmaster stopped") && start < when("grandmaster stopped") + 15.0,
        "{h}"
    );
    assert!(
        end > when("grandmaster started") && end < when("better grandmaster"),
        "{h}"
    );
    assert!(h["drift_ns"].is_i64(), "{h}");
    eprintln!(
        "lab clock: holdover {:.1} s, drift {} ns",
        end - start,
        h["drift_ns"]
    );
    assert!(events(s, "state")
        .iter()
        .any(|e| e["to"] == "LISTENING" && secs(&e["at_ns"]) > start - 1.0));

    // The better grandmaster: the reference moves from the first (class 248) to it (class 6).
    let refs = events(s, "reference");
    let changed = refs
        .iter()
        .find(|e| e["from"]["id"] == "020000.fffe.000c01" && e["to"]["id"] == "020000.fffe.000c02")
        .unwrap_or_else(|| panic!("no change of grandmaster: {refs:?}"));
    assert_eq!(changed["to"]["class"], 6);
    assert!(
        secs(&changed["at_ns"]) > when("better grandmaster"),
        "{changed}"
    );
}
