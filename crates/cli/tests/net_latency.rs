//! `rtgauge net latency` end to end: on loopback (one-way, and round trip through `rtgauge net reflect`),
//! and between two network namespaces joined by a veth pair that the test creates. (Loss and reordering
//! injected with `tc netem` are counted in `lab_net.rs`, in a guest: this host's kernel has no netem.)
//!
//! The namespaces are `rtgl<pid>tx`/`rtgl<pid>rx` (the test process's pid): [`Pair`]'s Drop deletes them
//! (and the veth link with them), also when the test fails; a killed test's leftovers (their pid gone) are
//! deleted by the next [`Pair::new`].

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use serde_json::Value;
use std::sync::atomic::{AtomicU32, Ordering};

fn ip(args: &[&str]) {
    let o = common::program("ip").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Two namespaces joined by a veth pair: the sender's end 10.213.N.1 in `tx`, the receiver's 10.213.N.2 in
/// `rx`.
struct Pair {
    tx: String,
    rx: String,
    rx_addr: String,
}

static PAIRS: AtomicU32 = AtomicU32::new(0);

impl Pair {
    fn new() -> Pair {
        Pair::clean_stale();
        let n = PAIRS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("rtgl{}n{n}", std::process::id());
        let (tx, rx) = (format!("{tag}tx"), format!("{tag}rx"));
        let pair = Pair {
            tx: tx.clone(),
            rx: rx.clone(),
            rx_addr: format!("10.213.{n}.2"),
        };
        ip(&["netns", "add", &tx]);
        ip(&["netns", "add", &rx]);
        ip(&[
            "link", "add", "rtglveth", "netns", &tx, "type", "veth", "peer", "name", "rtglpeer",
            "netns", &rx,
        ]);
        ip(&[
            "-n",
            &tx,
            "addr",
            "add",
            &format!("10.213.{n}.1/24"),
            "dev",
            "rtglveth",
        ]);
        ip(&[
            "-n",
            &rx,
            "addr",
            "add",
            &format!("{}/24", pair.rx_addr),
            "dev",
            "rtglpeer",
        ]);
        for (ns, dev) in [(&tx, "rtglveth"), (&rx, "rtglpeer")] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    /// Delete the namespaces of test processes that are gone.
    fn clean_stale() {
        let o = common::program("ip")
            .args(["netns", "list"])
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let pid = name
                .strip_prefix("rtgl")
                .and_then(|r| r.split('n').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid.filter(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
            {
                let _ = pid;
                let _ = common::program("ip").args(["netns", "del", name]).status();
            }
        }
    }

    /// `rtgauge net latency` one-way from `tx` to `rx`: the result.
    fn latency(&self, extra: &[&str]) -> Value {
        self.latency_to(&format!("{}:0", self.rx_addr), extra)
    }

    /// [`Pair::latency`] with the receiver bound to `bind` (a group, …).
    fn latency_to(&self, bind: &str, extra: &[&str]) -> Value {
        let mut args = vec![
            "net",
            "latency",
            "--tx-netns",
            &self.tx,
            "--rx-netns",
            &self.rx,
            "--bind",
            bind,
        ];
        args.extend_from_slice(extra);
        latency(&args)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.tx, &self.rx] {
            let _ = common::program("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// `rtgauge net latency ARGS` (not stored, SCHED_OTHER): its result, from the document it wrote.
fn latency(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("run.json");
    let out = common::rtgauge_std()
        .args(args)
        .args(["--no-store", "-p", "0", "--output", doc.to_str().unwrap()])
        .output()
        .unwrap();
    common::assert_ok(&out);
    common::read_json(&doc)["probes"][0].clone()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// Every packet sent came back from the error queue with its transmit timestamp, and the sender's stack
/// is part of the path: on one clock each packet's driver stamp precedes its receive stamp, so every
/// order statistic of the stack is at most the path's (HDR's 0.1 % forgiven).
fn assert_send_stack_within_path(p: &Value) {
    assert_eq!(
        p["tx_timestamps"]["kind"], "software",
        "{}",
        p["tx_timestamps"]
    );
    let (stack, path) = (&p["send_stack"], &p["path"]);
    assert_eq!(u(stack, "count"), u(p, "sent"));
    let at = |s: &Value, q: f64| {
        s["percentiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["percentile"] == q)
            .map(|x| u(x, "value_ns"))
            .unwrap()
    };
    for q in [50.0, 99.0] {
        assert!(
            at(stack, q) as f64 <= at(path, q) as f64 * 1.001,
            "p{q}: {stack} {path}"
        );
    }
    assert!(u(stack, "max_ns") <= u(path, "max_ns"), "{stack} {path}");
    assert!(u(stack, "min_ns") > 0);
}

#[test]
fn one_way_on_loopback_is_stored_with_its_split() {
    let db = tempfile::tempdir().unwrap();
    let db_path = db.path().join("runs.db");
    let db_arg = db_path.to_str().unwrap();
    let (code, stdout, stderr) = common::run(&[
        "net",
        "latency",
        "-D",
        "1s",
        "--rate",
        "2000",
        "--deadline",
        "1us",
        "--db",
        db_arg,
        "--label",
        "loopback",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("sent 2000"), "{stdout}");
    assert!(stdout.contains("path (send → kernel)"), "{stdout}");
    assert!(
        stdout.contains("late (≥ 1.0 µs deadline): 2000 of 2000 received"),
        "{stdout}"
    );
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("stored: run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let doc = common::export_json(db_arg, &id);
    let p = &doc["probes"][0];
    assert_eq!(p["probe"], "net_latency");
    assert_eq!(
        (u(p, "sent"), u(p, "received"), u(p, "lost")),
        (2000, 2000, 0)
    );
    assert_eq!(p["timestamps"]["kind"], "software");
    assert_eq!(u(&p["path"], "count"), 2000);
    assert_send_stack_within_path(p);
    assert!(stdout.contains("of it, sender stack"), "{stdout}");
    assert_eq!(
        p["sender"]["policy"]["achieved"], "fifo",
        "-p 80 by default, as root"
    );
}

#[test]
fn a_round_trip_through_the_reflector_comes_back_whole() {
    let mut refl = common::rtgauge_std()
        .args([
            "net",
            "reflect",
            "--listen",
            "127.0.0.1:0",
            "-D",
            "20s",
            "-p",
            "0",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(refl.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let addr = line
        .trim()
        .strip_prefix("reflecting on ")
        .unwrap()
        .to_string();
    let p = latency(&[
        "net",
        "latency",
        "--reflector",
        &addr,
        "-D",
        "1s",
        "--rate",
        "1000",
    ]);
    let _ = refl.kill();
    let _ = refl.wait();
    let p = &p;
    assert_eq!(p["config"]["round_trip"], true);
    assert_eq!((u(p, "sent"), u(p, "received")), (1000, 1000));
}

#[test]
fn between_namespaces_over_a_veth_every_packet_arrives_with_its_split() {
    let pair = Pair::new();
    let p = pair.latency(&["-D", "2s", "--rate", "4000", "--rx", "poll"]);
    assert_eq!(
        (u(&p, "sent"), u(&p, "received"), u(&p, "lost")),
        (8000, 8000, 0)
    );
    assert_eq!(p["config"]["rx_netns"], pair.rx.as_str());
    assert_eq!(
        p["config"]["target"],
        format!("{}:0", pair.rx_addr),
        "as asked"
    );
    let bound = p["bound"].as_str().unwrap();
    assert!(
        bound.starts_with(&format!("{}:", pair.rx_addr)) && !bound.ends_with(":0"),
        "the port the kernel picked: {bound}"
    );
    // A poller's packets are split too. (The kernel turns receive timestamps on for the whole stack from
    // a deferred work item: on a loaded host the first packet or two can come without one, and the run
    // says how many.)
    let split = u(&p["wakeup"], "count");
    let unstamped = match p["timestamps"]["kind"].as_str() {
        Some("partial") => u(&p["timestamps"], "missing"),
        _ => 0,
    };
    assert_eq!(split + unstamped, 8000, "{}", p["timestamps"]);
    assert!(split >= 7990, "{split} of 8,000 split");
    // veth's driver stamps every packet it transmits.
    assert_eq!(p["tx_timestamps"]["kind"], "software");
    assert_eq!(u(&p["send_stack"], "count"), 8000);
    assert_eq!(u(&p, "reordered"), 0);
}

/// UDP multicast between the namespaces: the receiver binds the group and joins it on the veth (the route
/// to 224.0.0.0/4 the test adds on each side), the sender sends to the group.
#[test]
fn a_multicast_group_between_namespaces_is_received_whole() {
    let pair = Pair::new();
    for (ns, dev) in [(&pair.tx, "rtglveth"), (&pair.rx, "rtglpeer")] {
        ip(&["-n", ns, "route", "add", "224.0.0.0/4", "dev", dev]);
    }
    let p = pair.latency_to("239.7.7.7:0", &["-D", "1s", "--rate", "2000"]);
    assert_eq!(
        (u(&p, "sent"), u(&p, "received"), u(&p, "lost")),
        (2000, 2000, 0),
        "{p}"
    );
    assert!(p["bound"].as_str().unwrap().starts_with("239.7.7.7:"));
    assert_eq!(u(&p["wakeup"], "count"), 2000, "timestamped");
}

#[test]
fn a_profile_gates_lost_packets_and_the_worst_latency() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("sv.toml");
    std::fs::write(
        &profile,
        "name = 'sv'\ndescription = 'a Sampled Values stream'\nduration = '1s'\n\
         [[probe]]\nkind = 'net_latency'\nflags = '--rate 1000 -p 0'\n\
         [[gate]]\nmetric = 'net.latency.lost'\nmax = '0'\n\
         [[gate]]\nmetric = 'net.latency.max'\nmax = '1us'\n",
    )
    .unwrap();
    let db = dir.path().join("runs.db");
    let (code, stdout, stderr) = common::run(&[
        "run",
        "--profile",
        profile.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "the 1 µs bound fails: {stdout}{stderr}");
    let lost = common::gate_row(&stdout, "net latency lost packets").expect(&stdout);
    assert_eq!(lost[1..], ["≤ 0", "0", "PASS"], "{stdout}");
    let max = common::gate_row(&stdout, "net latency max").expect(&stdout);
    assert!(
        max[1] == "≤ 1.0 µs" && max[3] == "FAIL" && common::answer(&stdout) == Some("NOT FIT"),
        "{stdout}"
    );
}

#[test]
fn raw_ethernet_frames_between_namespaces_plain_and_tagged() {
    let pair = Pair::new();
    // Plain, tagged, and to the 9-2 LE multicast group the receiver subscribes its interface to.
    for extra in [
        &[][..],
        &["--vlan", "100:4"][..],
        &["--dst-mac", "01:0c:cd:04:00:01", "--vlan", "100:4"][..],
    ] {
        let mut args = vec![
            "-D", "1s", "--rate", "4000", "--tx-dev", "rtglveth", "--rx-dev", "rtglpeer",
        ];
        args.extend_from_slice(extra);
        // No --bind: the frames go to the receiver's interface.
        let mut full = vec![
            "net",
            "latency",
            "--tx-netns",
            &pair.tx,
            "--rx-netns",
            &pair.rx,
        ];
        full.extend_from_slice(&args);
        let p = latency(&full);
        assert_eq!(
            (u(&p, "sent"), u(&p, "received"), u(&p, "lost")),
            (4000, 4000, 0),
            "{extra:?}"
        );
        assert_eq!(p["config"]["ethernet"]["ethertype"], 0x88ba);
        assert_eq!(
            p["timestamps"]["kind"], "software",
            "packet sockets are timestamped too"
        );
        assert_send_stack_within_path(&p);
        assert_eq!(u(&p, "foreign"), 0);
        if extra.contains(&"--dst-mac") {
            assert_eq!(p["config"]["ethernet"]["dst_mac"], "01:0c:cd:04:00:01");
        }
    }
    let (code, _, stderr) = common::run(&[
        "net",
        "latency",
        "--tx-dev",
        "nosuchdev0",
        "--rx-dev",
        "nosuchdev1",
        "-D",
        "1s",
        "--no-store",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--rx-dev nosuchdev1: interface nosuchdev1:"),
        "{stderr}"
    );
}

/// A SCHED_FIFO 50 thread (`rtg-noise`) takes the receiver's CPU for 5 ms three times while the receiver,
/// at FIFO 40 below it, waits for packets: each burst leaves packets waiting for their wake-up, and
/// `--trace` makes each burst one episode (the packets it held up, merged) charged to that thread.
#[test]
fn trace_names_the_thread_that_held_the_receivers_cpu() {
    let _busy = common::busy_cpu();
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("run.json");
    let run = common::rtgauge_std()
        .args([
            "net",
            "latency",
            "-D",
            "3s",
            "--rate",
            "4000",
            "--tx-cpu",
            "0",
            "--rx-cpu",
            "1",
            "-p",
            "40",
            "--deadline",
            "2ms",
            "--trace",
            "--no-store",
            "--output",
        ])
        .arg(&doc)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let (tid, bursts) = common::hostnoise::fifo_bursts(
        1,
        3,
        std::time::Duration::from_millis(5),
        std::time::Duration::from_millis(300),
    );
    let out = run.wait_with_output().unwrap();
    common::assert_ok(&out);
    let p = common::read_json(&doc)["probes"][0].clone();
    let why = &p["why"];
    let episodes = why["episodes"]
        .as_array()
        .unwrap_or_else(|| panic!("{why}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(u(&p, "late") >= 3, "each burst makes late packets: {text}");
    for (a, b) in &bursts {
        // The episodes of this burst: their windows overlap it.
        let of: Vec<&Value> = episodes
            .iter()
            .filter(|e| {
                let s = e["start_mono_ns"].as_u64().unwrap();
                s < *b && s + e["window_ns"].as_u64().unwrap() > *a
            })
            .collect();
        assert_eq!(
            of.len(),
            1,
            "the burst's late packets are one episode: {text}"
        );
        assert!(of[0]["samples"].as_u64().unwrap() >= 1, "{}", of[0]);
        let top = &of[0]["causes"][0];
        assert_eq!(top["kind"], "thread", "{top}");
        assert!(
            top["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("rtg-noise/{tid} ")),
            "the burst's episode is charged to rtg-noise/{tid}: {top}\n{text}"
        );
        assert_eq!(of[0]["cpu"], 1, "the wake-up waited on the receiver's CPU");
    }
}

/// A split stream on loopback: `--send-only` and `--receive-only` in two processes with the same stream
/// id, the receiver reading the sender's CLOCK_MONOTONIC through `rtgauge vm clock-serve` over TCP (what
/// a guest does over its serial port): every packet arrives, each latency carries the exchanges' bound,
/// and the sender's count is the receiver's.
#[test]
fn a_split_stream_is_received_whole_on_the_senders_clock() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let channel = format!("tcp:127.0.0.1:{port}");
    let mut serve = common::rtgauge_std()
        .args(["vm", "clock-serve", &channel, "-D", "20s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dest = {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        u.local_addr().unwrap().to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let rx_doc = dir.path().join("rx.json");
    // The clock's end listens once it has bound: the receiver retries its first burst three times.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let rx = common::rtgauge_std()
        .args([
            "net",
            "latency",
            "--receive-only",
            "--bind",
            &dest,
            "--clock",
            &channel,
        ])
        .args([
            "--stream", "77", "--rate", "2000", "-D", "1s", "--listen", "10s",
        ])
        .args([
            "--no-store",
            "-p",
            "0",
            "--output",
            rx_doc.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let tx = latency(&[
        "net",
        "latency",
        "--send-only",
        "--bind",
        &dest,
        "--stream",
        "77",
        "--rate",
        "2000",
        "-D",
        "1s",
    ]);
    let out = rx.wait_with_output().unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    common::assert_ok(&out);
    let rx = common::read_json(&rx_doc)["probes"][0].clone();
    assert_eq!(u(&tx, "sent"), 2000, "{tx}");
    assert_eq!(tx["config"]["role"], "send");
    assert_eq!(tx["latency"]["count"], 0, "the sender measures no latency");
    assert_eq!(u(&rx, "received"), 2000, "{rx}");
    assert_eq!(u(&rx, "lost"), 0);
    assert_eq!(u(&rx, "sent"), 2000, "up to the highest sequence number");
    assert_eq!(rx["config"]["role"], "receive");
    let bound = rx["clock"]["bound_ns"].as_u64().unwrap();
    assert!(bound > 0 && bound < 5_000_000, "bound {bound} ns");
    // One machine, one clock: the offset applied is within its bound of zero.
    let offset = rx["clock"]["offset_ns"].as_i64().unwrap();
    assert!(
        offset.unsigned_abs() <= bound,
        "offset {offset} ns ± {bound}"
    );
    assert!(!rx["clock"]["sync"]["samples"]
        .as_array()
        .unwrap()
        .is_empty());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("receive only (stream 77)") && text.contains("send times on this clock"),
        "{text}"
    );
    // What the clock cannot resolve is said: the document lists the figures within the bound, the
    // terminal marks them.
    let unresolved: Vec<&str> = rx["unresolved"]
        .as_array()
        .map_or(Vec::new(), |a| a.iter().filter_map(Value::as_str).collect());
    for (figure, ns) in [
        ("latency.min", u(&rx["latency"], "min_ns")),
        ("latency.max", u(&rx["latency"], "max_ns")),
    ] {
        assert_eq!(
            unresolved.contains(&figure),
            ns <= bound,
            "{figure} {ns} ns against the bound {bound} ns: {unresolved:?}"
        );
    }
    assert_eq!(
        text.contains("unresolved by the clock"),
        !unresolved.is_empty(),
        "{unresolved:?}\n{text}"
    );
    a_guests_stream_within_its_clocks_bound_is_unresolved(&rx_doc, dir.path());
}

/// The split stream's document as a guest's would read (docs/net.md: a one-way p50 of 0.51–0.91 ms beside
/// a clock bound of ± 0.52–1.77 ms): the bound set to 1.77 ms and the stored list removed, so that the views
/// must find what is unresolved themselves (as in a document written before the list). Every one-way
/// figure on loopback is within it: shown as "≤ figure + bound" in the terminal and on the page, and not
/// judged by compare; the wake-up (on this host's clock alone) is.
fn a_guests_stream_within_its_clocks_bound_is_unresolved(
    doc: &std::path::Path,
    dir: &std::path::Path,
) {
    let mut d = common::read_json(doc);
    // 1.77 ms, or beyond the run's worst packet should this host have stalled it longer.
    let worst = d["probes"][0]["latency"]["max_ns"].as_u64().unwrap();
    let min = d["probes"][0]["latency"]["min_ns"].as_u64().unwrap();
    let bound: u64 = 1_770_000u64.max(worst + 1);
    d["probes"][0]["clock"]["bound_ns"] = bound.into();
    d["probes"][0].as_object_mut().unwrap().remove("unresolved");
    let db = dir.join("runs.db");
    let db = db.to_str().unwrap();
    // Stored twice (the second under another uuid), to be compared.
    for copy in ["a", "b"] {
        if copy == "b" {
            d["uuid"] = "00000000-0000-4000-8000-0000000000b2".into();
        }
        let guest = dir.join(format!("guest-{copy}.json"));
        std::fs::write(&guest, d.to_string()).unwrap();
        let out = common::rtgauge_std()
            .args(["import", guest.to_str().unwrap(), "--db", db])
            .output()
            .unwrap();
        common::assert_ok(&out);
    }
    let out = common::rtgauge_std()
        .args(["runs", "show", "1", "--db", db])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let latency = text
        .lines()
        .find(|l| l.trim_start().starts_with("latency (one-way)"))
        .unwrap_or_else(|| panic!("no latency row:\n{text}"));
    let cells: Vec<&str> = latency.split_whitespace().skip(2).collect();
    assert_eq!(cells.len(), 6, "{latency}");
    assert!(
        cells[..5].iter().all(|c| c.starts_with('≤')),
        "every one-way figure within the bound is unresolved: {latency}"
    );
    assert!(
        text.contains(&format!(
            "≤: within the clock's ± {:.1} µs, unresolved by the clock",
            bound as f64 / 1000.0
        )),
        "{text}"
    );
    let html = dir.join("guest.html");
    let out = common::rtgauge_std()
        .args(["report", "1", "--db", db, "--html", html.to_str().unwrap()])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let page = std::fs::read_to_string(&html).unwrap();
    // The page's measures table: the min as "≤ min + bound".
    let cell = format!("≤ {:.2} µs", (min + bound) as f64 / 1000.0);
    assert!(
        page.contains(&cell),
        "the page marks unresolved figures: no {cell}"
    );
    let c = common::compare_in(db, &["1", "2"]);
    for key in ["net.latency.p50", "net.latency.max", "net.latency.path.p50"] {
        let r = common::row(&c, key);
        let v = &r["versus"][0]["verdict"];
        assert_eq!(v["verdict"], "unknown", "{key}: {r}");
        assert!(
            v["why"]
                .as_str()
                .is_some_and(|w| w.contains("bound") && w.contains("unresolved")),
            "{key}: {r}"
        );
        assert_eq!(
            r["unresolved_within"][0].as_f64(),
            Some(bound as f64),
            "{r}"
        );
    }
    let wakeup = common::row(&c, "net.latency.wakeup.p50");
    assert_ne!(
        wakeup["versus"][0]["verdict"]["verdict"], "unknown",
        "the wake-up is on one clock: judged ({wakeup})"
    );
}

#[test]
fn bad_flags_are_named_before_anything_is_sent() {
    common::assert_usage_errors(
        "net",
        &["-D", "1s", "--no-store"],
        &[
            (&["latency", "--rate", "0"], "--rate"),
            (&["latency", "--size", "8"], "--size"),
            (&["latency", "--bind", "0.0.0.0:0"], "--bind 0.0.0.0:0"),
            (&["latency", "--reflector", "127.0.0.1:0"], "--reflector"),
            (&["latency", "--rx", "spin"], "--rx"),
            (
                &[
                    "latency", "--vlan", "5000", "--tx-dev", "a", "--rx-dev", "b",
                ],
                "--vlan",
            ),
            (
                &[
                    "latency",
                    "--ethertype",
                    "0x10",
                    "--tx-dev",
                    "a",
                    "--rx-dev",
                    "b",
                ],
                "--ethertype",
            ),
            (&["latency", "--tx-dev", "a"], "--rx-dev"),
            (&["latency", "--stream", "3"], "--stream"),
            (
                &["latency", "--receive-only", "--bind", "127.0.0.1:0"],
                "--bind 127.0.0.1:0",
            ),
            (
                &[
                    "latency",
                    "--send-only",
                    "--tx-dev",
                    "lo",
                    "--dst-mac",
                    "zz",
                ],
                "--dst-mac zz",
            ),
            (&["latency", "--clock", "tcp:127.0.0.1:9"], "--receive-only"),
            (
                &[
                    "latency",
                    "--receive-only",
                    "--bind",
                    "127.0.0.1:9",
                    "--clock",
                    "tcp:127.0.0.1:1",
                ],
                "--clock tcp:127.0.0.1:1",
            ),
            (&["latency", "--tx-cpu", "4096"], "--tx-cpu 4096"),
            (
                &["latency", "--rx", "poll", "--tx-cpu", "1", "--rx-cpu", "1"],
                "--rx poll",
            ),
        ],
    );
    common::assert_usage_errors(
        "net",
        &["-D", "1s"],
        &[
            (&["reflect", "--listen", "nowhere"], "--listen"),
            (&["reflect"], "--listen"),
        ],
    );
}
