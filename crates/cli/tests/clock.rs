//! `rtgauge clock` against real daemons on this host, none of which touches its clock:
//! - chrony: a server (`local stratum 8`) and two clients on private ports and sockets, all `chronyd -x`
//!   (the clock is never steered); one client reaches the server, the other a port where nothing
//!   listens: synchronised and unsynchronised told apart, as `chronyc tracking` tells them;
//! - ptp4l: a grandmaster and a client in two network namespaces joined by a veth, both
//!   `free_running 1` (software timestamps, raw Ethernet): the client follows the grandmaster, which is
//!   then stopped: the port state, the grandmaster's identity as `pmc` reads it, the reference lost.
//!
//! Convergence and the faults on a clock of its own (a step on the master, a better grandmaster) are in
//! the kernel lab (lab_clock.rs), where the client is a guest with its own clock.
#![allow(clippy::unwrap_used)]

mod common;

use common::chrony::{events, start, trio, wait_for, Daemon};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `rtgauge clock ARGS --no-store`: its exit code, stdout and stderr, and the document it wrote.
fn clock(dir: &Path, args: &[&str]) -> (i32, String, String, Value) {
    let doc = dir.join("clock.json");
    let _ = std::fs::remove_file(&doc);
    let mut all = vec!["clock", "--no-store", "--output", doc.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, out, err) = common::run(&all);
    let v = std::fs::read_to_string(&doc)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (code, out, err, v)
}

/// The source whose path ends in `name`.
fn source<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["probes"][0]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no source {name} in {doc}"))
}

#[test]
fn chrony_synchronised_and_unsynchronised_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let _chrony = trio(d);
    let (client, lonely) = (d.join("client.sock"), d.join("lonely.sock"));
    let (code, out, err, doc) = clock(
        d,
        &[
            "-D",
            "8s",
            "--rate",
            "4",
            "--lock",
            "100us",
            "--chrony",
            client.to_str().unwrap(),
            "--chrony",
            lonely.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let c = source(&doc, "client.sock");
    assert_eq!(c["kind"], "chrony");
    assert_eq!(c["last"]["state"], "normal", "{c}");
    assert_eq!(c["last"]["reference"]["id"], "127.0.0.1", "{c}");
    // The server's stratum 8, one more for its client.
    assert_eq!(c["last"]["reference"]["class"], 9, "{c}");
    assert_eq!(c["errors"], 0);
    // Each clock update of chrony's is one offset, however often it is polled (no more than the polls).
    let (measured, polls) = (
        c["measurements"].as_u64().unwrap(),
        c["polls"].as_u64().unwrap(),
    );
    assert!(polls >= 30, "{c}");
    assert!(
        (2..=polls).contains(&measured),
        "{measured} offsets in {polls} polls: {c}"
    );
    // Both daemons read this host's one clock: chrony's offsets are its own noise, far below 100 µs.
    assert!(c["offset_max_all_ns"].as_u64().unwrap() < 100_000, "{c}");
    let l = source(&doc, "lonely.sock");
    assert_eq!(l["last"]["state"], "unsynchronised", "{l}");
    assert!(l["last"]["reference"].is_null(), "{l}");
    assert_eq!(l["measurements"], 0);
    assert!(l["offset"].is_null());
    assert!(
        out.contains("chrony:") && out.contains("unsynchronised"),
        "{out}"
    );

    // A socket where no chronyd listens is refused before anything is measured, naming it.
    let none = d.join("none.sock");
    let (code, _, err, doc) = clock(d, &["-D", "2s", "--chrony", none.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("chrony:{}", none.display())), "{err}");
    assert!(doc.is_null());
}

/// Two namespaces joined by a veth, MACs 02:00:00:00:00:01 (the grandmaster's end) and …:02.
struct Pair {
    ns: [String; 2],
}

impl Pair {
    fn new() -> Pair {
        let tag = format!("rtgk{}", std::process::id());
        let p = Pair {
            ns: [format!("{tag}m"), format!("{tag}c")],
        };
        let ip = |args: &[&str]| {
            let o = common::program("ip").args(args).output().unwrap();
            assert!(
                o.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        for ns in &p.ns {
            let _ = common::program("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
        }
        ip(&[
            "link",
            "add",
            "rtgkm",
            "netns",
            &p.ns[0],
            "address",
            "02:00:00:00:00:01",
            "type",
            "veth",
            "peer",
            "name",
            "rtgkc",
            "netns",
            &p.ns[1],
            "address",
            "02:00:00:00:00:02",
        ]);
        for (ns, dev) in [(&p.ns[0], "rtgkm"), (&p.ns[1], "rtgkc")] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        p
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = common::program("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn ptp4l(pair: &Pair, i: usize, dev: &str, dir: &Path, conf: &str) -> Daemon {
    let name = ["master", "client"][i];
    let cfg = dir.join(format!("{name}.cfg"));
    std::fs::write(
        &cfg,
        format!(
            "[global]\nfree_running 1\nuds_address {}/{name}.sock\n{conf}",
            dir.display()
        ),
    )
    .unwrap();
    let mut c = common::program_in_netns("ptp4l", &pair.ns[i]);
    c.args(["-2", "-S", "-m", "-i", dev, "-f", cfg.to_str().unwrap()]);
    start(c, &dir.join(format!("{name}.log")))
}

#[test]
fn ptp4l_is_read_as_pmc_reads_it_and_a_stopped_grandmaster_is_a_lost_reference() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pair = Pair::new();
    let mut master = ptp4l(
        &pair,
        0,
        "rtgkm",
        d,
        "priority1 1\nmasterOnly 1\nclockClass 248\n",
    );
    let _client = ptp4l(&pair, 1, "rtgkc", d, "slaveOnly 1\n");
    let sock = d.join("client.sock");
    wait_for("ptp4l's socket", Duration::from_secs(10), || sock.exists());
    // The client follows within ~10 s (the master's own announce timeout, then two announces); the
    // master is stopped at 16 s and the client gives it up 4–8 s later (3 announce intervals + random).
    // Scoped: the grandmaster is stopped (and, dropped at the end, reaped) however the run ends.
    let (code, out, err, doc) = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(16));
            let _ = master.0.kill();
            let _ = master.0.wait();
        });
        clock(
            d,
            &[
                "-D",
                "30s",
                "--rate",
                "2",
                "--lock",
                "100us",
                "--ptp4l",
                sock.to_str().unwrap(),
            ],
        )
    });
    assert_eq!(code, 0, "{out}\n{err}");
    let s = source(&doc, "client.sock");
    assert_eq!(s["kind"], "ptp4l");
    assert_eq!(s["errors"], 0, "{s}");
    // What pmc reads of the same socket: the grandmaster the client still names (a slaveOnly clock
    // keeps its last parent), which rtgauge saw while it followed.
    let pmc = common::program("pmc")
        .args([
            "-u",
            "-b",
            "0",
            "-s",
            sock.to_str().unwrap(),
            "GET PARENT_DATA_SET",
        ])
        .output()
        .unwrap();
    let pmc = String::from_utf8_lossy(&pmc.stdout);
    let gm = pmc
        .lines()
        .find_map(|l| l.trim().strip_prefix("grandmasterIdentity"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("pmc: {pmc}"));
    assert_eq!(gm, "020000.fffe.000001");
    let refs = events(s, "reference");
    assert_eq!(refs[0]["to"]["id"], gm, "{s}");
    assert_eq!(refs[0]["to"]["class"], 248, "{s}");
    // Followed: UNCALIBRATED (a free-running client never reports SLAVE), offsets once per sync (1 s).
    let states: Vec<&str> = events(s, "state")
        .iter()
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert!(states.contains(&"UNCALIBRATED"), "{states:?}");
    let measured = s["measurements"].as_u64().unwrap();
    assert!((3..=14).contains(&measured), "{measured} offsets: {s}");
    // Both ends read this host's one clock: the offsets are the software stamps' noise.
    assert!(s["offset_max_all_ns"].as_u64().unwrap() < 1_000_000, "{s}");
    // The grandmaster stopped: the port falls back to LISTENING, the reference is lost and the holdover
    // runs to the end.
    assert_eq!(states.last(), Some(&"LISTENING"), "{states:?}");
    let lost = events(s, "reference_lost");
    assert_eq!(lost.len(), 1, "{s}");
    let at = lost[0]["at_ns"].as_u64().unwrap();
    assert!(
        (17_000_000_000..=27_000_000_000).contains(&at),
        "lost at {at} ns"
    );
    assert_eq!(s["holdovers"][0]["start_ns"].as_u64(), Some(at));
    assert!(s["holdovers"][0]["end_ns"].is_null());
    assert!(out.contains("holdover from"), "{out}");
}

#[test]
fn a_clock_stage_in_a_profile_is_judged_by_its_gates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let _chrony = trio(d);
    let db = d.join("runs.db");
    let profile = |name: &str, offset_max: &str| {
        let p = d.join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                "name = '{name}'\nduration = '5s'\n[[probe]]\nkind = 'clock'\nflags = '--rate 4 --lock 100us --chrony {}'\n\
                 [[gate]]\nmetric = 'clock.steps'\nmax = '0'\n[[gate]]\nmetric = 'clock.offset.max'\nmax = '{offset_max}'\n",
                d.join("client.sock").display()
            ),
        )
        .unwrap();
        p
    };
    let run = |p: &Path| {
        let label = p.file_stem().unwrap().to_str().unwrap();
        common::rtgauge_std()
            .args([
                "run",
                "--profile",
                p.to_str().unwrap(),
                "--no-sample",
                "--label",
                label,
                "--db",
                db.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    // chrony's offsets against a server on this host's own clock are far within 1 ms, and nothing steps it.
    let out = run(&profile("time", "1ms"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Time ("), "{text}");
    assert!(
        text.contains("clock steps") && text.contains("clock offset max"),
        "{text}"
    );
    // No offset is below 1 ns: the same run fails that gate, and says which.
    let out = run(&profile("strict", "1ns"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fail = text
        .lines()
        .find(|l| l.contains("clock offset max"))
        .unwrap_or_default();
    assert!(fail.contains("FAIL"), "{text}");

    // The record: the stored run's page has its time section with the source; compare has its measures.
    let db = db.to_str().unwrap();
    let page = d.join("record.html");
    let out = common::rtgauge_std()
        .args([
            "report",
            "--label",
            "time",
            "--db",
            db,
            "--html",
            page.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>Time</h2>"), "no time section");
    assert!(html.contains(&format!("chrony:{}", d.join("client.sock").display())));
    let c = common::compare_in(db, &["time", "strict"]);
    assert!(
        common::row(&c, "clock.chrony.offset.max").is_object(),
        "{c}"
    );
    assert!(common::row(&c, "clock.steps").is_object(), "{c}");
}

#[test]
fn the_hosts_clock_over_the_vm_channel_is_a_source() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The answering end, as a host runs it for its guest; here on loopback TCP, one clock at both ends.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let channel = format!("tcp:127.0.0.1:{port}");
    let mut serve = common::rtgauge_std();
    serve.args(["vm", "clock-serve", &channel, "-D", "30s"]);
    let _serve = start(serve, &d.join("serve.log"));
    let (code, out, err, doc) = clock(d, &["-D", "4s", "--rate", "4", "--host", &channel]);
    assert_eq!(code, 0, "{out}\n{err}");
    let s = source(&doc, &channel);
    assert_eq!(s["kind"], "host");
    assert_eq!(s["errors"], 0, "{s}");
    // Each poll is one burst of exchanges: one measurement.
    assert_eq!(s["measurements"], s["polls"], "{s}");
    assert!(s["polls"].as_u64().unwrap() >= 14, "{s}");
    // One clock at both ends: the drift since the first burst stays within the exchanges' own noise.
    let bound = s["last"]["delay_ns"].as_i64().unwrap();
    assert!(bound > 0 && bound < 5_000_000, "{s}");
    assert!(s["offset"]["max_ns"].as_u64().unwrap() < 1_000_000, "{s}");
    assert!(s["locked"].as_bool().unwrap(), "{s}");
    // What the readings cannot resolve is said: an |offset| within their largest bound shows as
    // "≤ figure + bound" (one clock at both ends: the true offset is 0).
    let largest = s["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["delay_ns"].as_i64())
        .max()
        .unwrap();
    let said = out.contains("≤: within the readings' ±");
    assert_eq!(said, out.contains("|offset| p50 ≤ "), "{out}");
    if s["offset"]["max_ns"].as_i64().unwrap() <= largest {
        assert!(
            said && out.contains(", max ≤ "),
            "bound {largest} ns:\n{out}"
        );
    }

    // Nothing answering: refused before anything is measured, naming the source and why.
    let dead = "tcp:127.0.0.1:1";
    let (code, _, err, _) = clock(d, &["-D", "2s", "--host", dead]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("host:{dead}")) && err.contains("refused"),
        "{err}"
    );
}
