//! A packet's way into a guest explained from both sides, in the kernel lab (crates/lab, docs/net.md):
//! this host sends a Sampled Values-like stream (raw frames, EtherType 0x88BA, 4,000/s) on a tap device
//! that is the guest's virtio NIC; the guest receives it with `rtgauge net latency --receive-only`, reading
//! this host's clock over the lab's clock channel (ttyS3 ↔ a unix socket, answered here by `rtgauge vm
//! clock-serve`), so that each packet's one-way latency is on one clock with the exchanges' bound.
//!
//! Under TCG without vhost, QEMU's main thread carries the NIC: it reads the tap, fills the virtqueue and
//! wakes the vCPU that takes the interrupt. It is pinned here to host CPU 0 and a SCHED_FIFO 50 thread named
//! `rtg-noise` takes that CPU three times; each time the guest sees a burst of late packets it cannot
//! explain (nothing ran on its receiving CPU), and `rtgauge vm join` — the guest's run with the record of
//! `rtgauge vm observe` (its clock: the guest's own exchanges) — names that thread for each burst: the
//! receiving vCPU asleep while the thread that would wake it waited for its CPU.
//!
//! Needs root on the host (a tap device, tracefs, SCHED_FIFO). One boot, ~60 s here. Latencies under TCG
//! mean nothing; the counts, the clock's bound and the attribution are real.
#![allow(clippy::unwrap_used)]

mod common;

use common::hostnoise::{boot_beside, fifo_bursts, pin, pin_vcpus};
use common::tap::Tap;
use rtgauge_lab::{Flavour, Guest, GuestTopology, Kernel, RunningGuest};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The stream: 4,000 frames/s for 12 s from host CPU 0 at FIFO 80 (above the noise), to the 9-2 LE
/// multicast group the guest's receiver subscribes its NIC to (the virtio-net driver programs QEMU's receive
/// filter).
const SV_GROUP: &str = "01:0c:cd:04:00:01";

const RATE: u64 = 4000;
const SEND_S: u64 = 12;

/// The noise on the main thread's CPU.
const BURSTS: usize = 3;
const BURST: Duration = Duration::from_millis(30);
const GAP: Duration = Duration::from_secs(2);

/// The guest: the NIC's modules, its link up, then the receiver on CPU 1 (traced, late past 8 ms) reading
/// the host's clock on ttyS3; a line on the console once it receives.
const SCRIPT: &str = r#"echo "rtgauge-lab-net: up"
modprobe virtio_net || echo "modprobe virtio_net failed"
ip link set eth0 up || echo "eth0 not up"
# The NIC's and the clock port's interrupts (and so NET_RX) on CPU 0, the receiving thread alone on CPU 1:
# under TCG one vCPU cannot take 4,000 packets/s through both.
for irq in $(grep -E 'virtio0|ttyS' /proc/interrupts | cut -d: -f1); do echo 1 > /proc/irq/$irq/smp_affinity; done
taskset -c 0 rtgauge net latency --receive-only --rx-dev eth0 --dst-mac 01:0c:cd:04:00:01 --clock /dev/ttyS3 --rate 4000 --burst 8 -D 12 --listen 120 --drain 1s --rx-cpu 1 -p 90 --deadline 8ms --trace --no-store --output $OUT/run.json > $OUT/run.txt 2>&1 &
probe=$!
until grep -qs "^rtgauge-nl-rx" /proc/[0-9]*/task/[0-9]*/comm; do usleep 20000; done
echo "rtgauge-lab-net: receiving"
wait $probe; echo "net latency exit $?"
grep -E 'virtio0|ttyS|CPU' /proc/interrupts
cat $OUT/run.txt
"#;

/// What the host side saw.
#[derive(Default)]
struct HostSide {
    /// The noise thread and each burst's (start, end), host CLOCK_MONOTONIC.
    noise: Option<(i32, Vec<(u64, u64)>)>,
    observer: String,
    sender: String,
    error: Option<String>,
}

/// `rtgauge ARGS` in the background, its output in `log`.
fn spawn(args: &[&str], log: &Path) -> Child {
    common::rtgauge_std()
        .args(args)
        .stdout(std::fs::File::create(log.with_extension("out")).unwrap())
        .stderr(std::fs::File::create(log).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(what: impl Fn() -> bool, r: &RunningGuest, t: Instant) -> bool {
    while r.alive() && !what() && t.elapsed() < Duration::from_secs(200) {
        std::thread::sleep(Duration::from_millis(20));
    }
    what()
}

/// Beside the running guest: the clock's answering end, the vCPUs and the main thread pinned, the
/// observer, then the stream and the noise once the guest receives.
fn beside(r: &RunningGuest, dir: &Path) -> HostSide {
    let mut side = HostSide::default();
    let t = Instant::now();
    let channel = r.channel.clone().unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    if !wait_for(|| channel.exists(), r, t) {
        side.error = Some("QEMU's clock socket never appeared".into());
        return side;
    }
    let clock_log = dir.join("clock-serve.log");
    let unix = format!("unix:{}", channel.display());
    let mut clock = spawn(&["vm", "clock-serve", &unix, "-D", "300s"], &clock_log);
    if let Err(e) = pin_vcpus(r.qemu_pid, 2, || r.alive()) {
        side.error = Some(e);
        let _ = clock.kill();
        let _ = clock.wait();
        return side;
    }
    // QEMU's main thread (its tid is the pid) reads the tap: on host CPU 0, vCPU 1 (the receiver's) on 1.
    pin(r.qemu_pid as i32, 0);
    wait_for(|| r.console_text().contains("rtgauge-lab-net: up"), r, t);
    let obs_log = dir.join("observe.log");
    let pid = r.qemu_pid.to_string();
    let host_json = dir.join("host.json");
    let mut observer = spawn(
        &[
            "vm",
            "observe",
            "--pid",
            &pid,
            "--nice",
            "0",
            "--record",
            host_json.to_str().unwrap(),
        ],
        &obs_log,
    );
    // Off the receiving vCPU's CPU (a debug build's observer takes most of a CPU here); its threads,
    // started after, inherit it.
    pin(observer.id() as i32, 0);
    let ready = || {
        r.console_text().contains("rtgauge-lab-net: receiving")
            && read(&obs_log).contains("rtgauge: observing")
    };
    if wait_for(ready, r, t) {
        let tx_json = dir.join("tx.json");
        let (rate, secs) = (RATE.to_string(), format!("{SEND_S}s"));
        let sender = common::rtgauge_std()
            .args([
                "net",
                "latency",
                "--send-only",
                "--tx-dev",
                TAP,
                "--dst-mac",
                SV_GROUP,
            ])
            .args([
                "--rate",
                &rate,
                "--burst",
                "8",
                "-D",
                &secs,
                "--tx-cpu",
                "0",
                "-p",
                "80",
                "--no-store",
            ])
            .arg("--output")
            .arg(&tx_json)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        side.noise = Some(fifo_bursts(0, BURSTS, BURST, GAP));
        let out = sender.wait_with_output().unwrap();
        side.sender = format!(
            "{}{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        side.error = Some(format!(
            "the guest did not receive, or the observer did not start: {}",
            read(&obs_log)
        ));
    }
    // The observer and the clock's end stop with the VM.
    let status = observer.wait().unwrap();
    side.observer = format!("{status}{}", read(&obs_log));
    let _ = clock.wait();
    side.observer.push_str(&read(&clock_log));
    side
}

/// The joined episodes of guest CPU 1 whose window, on the host's clock, overlaps `(a, b)`.
fn overlapping(joined: &[Value], (a, b): (u64, u64)) -> Vec<&Value> {
    joined
        .iter()
        .filter(|e| {
            let h = &e["host"];
            let s = h["host_start_ns"].as_u64().unwrap_or(0);
            let w = e["window_ns"].as_u64().unwrap();
            e["cpu"] == 1 && h["verdict"] == "joined" && s < b && s + w > a
        })
        .collect()
}

const TAP: &str = "rtgnl0";

#[test]
fn late_packets_in_a_guest_are_named_by_the_host_thread_that_held_its_nic() {
    // Tried twice, as the other VM lab test: other work on this shared host sometimes stands between the
    // noise and the guest (the first attempt's failure is printed).
    common::twice("lab vm net", |_| one_boot());
}

/// One boot: the stream, the noise, the join.
fn one_boot() {
    let dir = tempfile::tempdir().unwrap();
    let _tap = Tap::create(TAP);
    let kernel = Kernel::fetch(Flavour::Rt).unwrap();
    let mut g = Guest::new(&kernel, GuestTopology::flat(2), SCRIPT);
    g.rtgauge = Some(assert_cmd::cargo::cargo_bin("rtgauge"));
    g.clock_channel = true;
    g.vcpu_threads = true;
    g.tap = Some(TAP.into());
    g.timeout = Duration::from_secs(240);
    g.label = "rt 2 CPUs, a virtio NIC on a host tap".into();
    let keep = ["host.json", "tx.json", "observe.log"].map(|f| dir.path().join(f));
    let (b, side) = boot_beside(&g, |r| beside(r, dir.path()), "vm-net", &keep);
    eprintln!(
        "lab vm net: guest:\n{}\nhost sender:\n{}\nhost observer:\n{}",
        b.log(),
        side.sender,
        side.observer
    );
    assert!(side.error.is_none(), "{:?}\n{}", side.error, b.console);
    assert_eq!(b.status, Some(0), "{}\n{}", b.log(), b.console);
    assert!(side.sender.starts_with("exit status: 0"), "{}", side.sender);

    // The host sent the whole schedule.
    let tx = common::read_json(&dir.path().join("tx.json"));
    let sent = tx["probes"][0]["sent"].as_u64().unwrap();
    assert_eq!(sent, RATE * SEND_S, "the sender's schedule");
    // The tap's driver stamps each frame it takes: the host's own stack is split off the path.
    let t = &tx["probes"][0];
    assert_eq!(
        t["tx_timestamps"]["kind"], "software",
        "{}",
        t["tx_timestamps"]
    );
    assert_eq!(t["send_stack"]["count"].as_u64(), Some(sent));
    eprintln!(
        "lab vm net: host send stack {}",
        t["send_stack"]["percentiles"]
    );

    // The guest received it, one-way on the host's clock with a bound.
    let guest_run = dir.path().join("run.json");
    std::fs::write(&guest_run, b.read("run.json")).unwrap();
    let run = common::read_json(&guest_run);
    let p = &run["probes"][0];
    assert_eq!(p["probe"], "net_latency", "{p}");
    let received = p["received"].as_u64().unwrap();
    assert!(
        received * 100 >= sent * 95,
        "received {received} of {sent} frames"
    );
    let bound = p["clock"]["bound_ns"].as_u64().unwrap();
    assert!(
        bound > 0 && bound < 10_000_000,
        "the clock's bound: {bound} ns"
    );
    assert!(
        p["late"].as_u64().unwrap() > 0,
        "the bursts made late packets"
    );

    // The join: each burst named by the noise thread.
    let joined = dir.path().join("joined.json");
    let out = common::rtgauge_std()
        .args(["vm", "join"])
        .arg(&guest_run)
        .arg(dir.path().join("host.json"))
        .arg("-o")
        .arg(&joined)
        .output()
        .unwrap();
    common::assert_ok(&out);
    eprintln!(
        "lab vm net: join:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc = common::read_json(&joined);
    let episodes = doc["probes"][0]["why"]["episodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let (tid, bursts) = side.noise.unwrap();
    let culprit = format!("rtg-noise/{tid}");
    let mut missed = Vec::new();
    for (k, &(a, z)) in bursts.iter().enumerate() {
        let named: Vec<String> = overlapping(&episodes, (a, z))
            .iter()
            .flat_map(|e| e["causes"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["kind"] == "host")
            .map(|c| c["name"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(
            !named.is_empty(),
            "burst {k}: no joined episode of guest CPU 1 over it"
        );
        if !named.iter().any(|n| n.contains(&culprit)) {
            missed.push(format!(
                "burst {k} ({} ms on host CPU 0): the joined episodes name {named:?}, not {culprit}",
                (z - a) / 1_000_000
            ));
        }
    }
    // Known gap (docs/net.md): now and then the receiving vCPU sleeps through a burst and is woken by
    // something the fold does not chain back to QEMU's held main thread; its episode is then charged to
    // `asleep`. Release runs named 3 of 3 bursts in each of 4 boots; debug ones 2 of 3 in 3 of 4 boots on
    // 2026-11-28, 3 of 3 in 4 of 4 on 2026-11-29.
    eprintln!(
        "lab vm net: {} of {BURSTS} bursts named {culprit}; {missed:?}",
        BURSTS - missed.len()
    );
    assert!(missed.len() <= 1, "{missed:#?}");
}
