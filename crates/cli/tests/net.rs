//! End-to-end tests of `rtgauge net`. Load only ever goes to loopback or to hosts in network namespaces
//! the test creates (and always deletes, also on failure); every run is bounded by `-D` and checked to end
//! within `-D` + 5 s.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{assert_ok, assert_usage_errors, is_root, read_json, rtgauge, rtgauge_std};
use serde_json::Value;
use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Two network namespaces joined by a veth pair: `a` (10.X.0.1/24) and `b` (10.X.0.2/24), lo up in both.
/// Dropping it deletes both (which deletes the veth pair).
struct NsPair {
    a: String,
    b: String,
    addr_a: String,
    addr_b: String,
}

fn ip(args: &[&str]) {
    let out = common::program("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl NsPair {
    fn new() -> NsPair {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("rtg{}x{n}", pid % 100_000);
        // A subnet that depends on the pid, so parallel test processes do not share one.
        let net = 100 + (pid % 50) * 2 + n;
        let pair = NsPair {
            a: format!("{tag}a"),
            b: format!("{tag}b"),
            addr_a: format!("10.{net}.0.1"),
            addr_b: format!("10.{net}.0.2"),
        };
        // Built step by step: whatever was created is deleted by Drop if a later step fails.
        ip(&["netns", "add", &pair.a]);
        ip(&["netns", "add", &pair.b]);
        let (va, vb) = (format!("{tag}va"), format!("{tag}vb"));
        ip(&[
            "link", "add", &va, "netns", &pair.a, "type", "veth", "peer", "name", &vb, "netns",
            &pair.b,
        ]);
        for (ns, dev, addr) in [(&pair.a, &va, &pair.addr_a), (&pair.b, &vb, &pair.addr_b)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    /// `rtgauge ARGS` inside namespace `ns`.
    fn rtgauge(ns: &str) -> Command {
        let mut c = common::program("ip");
        c.args(["netns", "exec", ns]);
        c.arg(assert_cmd::cargo::cargo_bin("rtgauge"));
        c
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = common::program("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A server process that is killed and reaped when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `rtgauge net serve` from `cmd` and return it with the address it printed.
fn start_server(mut cmd: Command) -> (Child, String) {
    let mut child = Child(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.starts_with("listening on ") {
        let mut err = String::new();
        let _ = child.0.stderr.as_mut().unwrap().read_to_string(&mut err);
        panic!("server did not start: {line} {err}");
    }
    let addr = line["listening on ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    (child, addr)
}

fn probe(doc: &Value, i: usize) -> &Value {
    &doc["probes"][i]
}

fn error_total(p: &Value) -> u64 {
    p["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

#[test]
fn cps_and_throughput_across_a_veth_pair_between_two_namespaces() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let ns = NsPair::new();
    let mut serve = NsPair::rtgauge(&ns.a);
    serve.args([
        "net",
        "serve",
        "--listen",
        &format!("{}:8080", ns.addr_a),
        "-D",
        "30",
    ]);
    let (_server, addr) = start_server(serve);
    assert_eq!(addr, format!("{}:8080", ns.addr_a));

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cps.json");
    let db = dir.path().join("r.db");
    let t = Instant::now();
    let out = NsPair::rtgauge(&ns.b)
        .args([
            "net",
            "cps",
            "--target",
            &addr,
            "--concurrency",
            "8",
            "-D",
            "2",
        ])
        .args(["--label", "veth", "--db"])
        .arg(&db)
        .arg("--output")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_ok(&out);
    assert!(t.elapsed() < Duration::from_secs(7), "{:?}", t.elapsed());
    assert!(
        stdout.contains("connections/s") && stdout.contains("stored: run"),
        "{stdout}"
    );
    let doc = read_json(&json);
    let p = probe(&doc, 0);
    assert_eq!(p["probe"], "net");
    assert_eq!(p["config"]["mode"], "cps");
    assert!(p["rate_per_s"].as_f64().unwrap() > 0.0, "{p}");
    assert_eq!(error_total(p), 0, "{}", p["errors"]);
    assert!(p["transactions"].as_u64().unwrap() > 0);
    // Every connection is one complete exchange: opened = complete + cut off at the end.
    assert_eq!(
        p["connections"].as_u64().unwrap(),
        p["transactions"].as_u64().unwrap() + p["in_flight_at_end"].as_u64().unwrap()
    );
    for dist in ["connect", "ttfb", "total"] {
        let d = &p[dist];
        assert!(d["count"].as_u64().unwrap() > 0, "{dist}: {d}");
        let ps = d["percentiles"].as_array().unwrap();
        assert!(ps.iter().any(|x| x["percentile"] == 99.0), "{dist}");
        let p99 = ps.iter().find(|x| x["percentile"] == 99.0).unwrap()["value_ns"]
            .as_u64()
            .unwrap();
        assert!(
            p99 > 0 && p99 <= d["max_ns"].as_u64().unwrap(),
            "{dist}: {d}"
        );
    }
    // Per-second rates add up to the total.
    let per_s: u64 = p["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["transactions"].as_u64().unwrap())
        .sum();
    assert_eq!(per_s, p["transactions"].as_u64().unwrap());
    assert!(
        p["sysctls"]["net.ipv4.ip_local_port_range"].is_string(),
        "{p}"
    );

    // Keep-alive throughput over the same link, 64 KB objects.
    let out = NsPair::rtgauge(&ns.b)
        .args(["net", "throughput", "--target", &addr, "--path", "/64k"])
        .args([
            "--connections",
            "4",
            "-D",
            "1",
            "--no-store",
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let doc: Value = serde_json::from_str(&text[text.find("\n{").unwrap()..]).unwrap();
    let p = probe(&doc, 0);
    assert_eq!(p["config"]["mode"], "throughput");
    assert!(p["bits_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(error_total(p), 0, "{}", p["errors"]);
    // Every response carried the 64 KB body.
    assert!(p["bytes"].as_u64().unwrap() >= p["transactions"].as_u64().unwrap() * 65_536);
    // A request and its response cross the link both ways: never under 1 µs (a timestamp taken once per
    // batch of events counted a response read in the loop that sent its request as 0 ns, shown as 1 ns).
    for dist in ["ttfb", "total"] {
        let min = p[dist]["min_ns"].as_u64().unwrap();
        assert!(min >= 1_000, "{dist}: {}", p[dist]);
    }
}

/// Run a load that must fail: non-zero exit, the expected error kind counted, ended within -D + 5 s.
fn expect_failure(mut cmd: Command, kinds: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bad.json");
    let t = Instant::now();
    let out = cmd.arg("--output").arg(&json).output().unwrap();
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(took < Duration::from_secs(2 + 5), "took {took:?}");
    assert!(!out.status.success(), "{stdout}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("rtgauge: net: "), "{err}");
    let doc = read_json(&json);
    let p = probe(&doc, 0);
    let counted: u64 = kinds.iter().map(|k| p["errors"][k].as_u64().unwrap()).sum();
    assert!(counted > 0, "{kinds:?} not counted: {}", p["errors"]);
    assert!(stdout.contains("errors: "), "{stdout}");
    doc
}

#[test]
fn bad_targets_are_counted_and_fail_without_hanging() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let ns = NsPair::new();
    let base = |target: &str| {
        let mut c = NsPair::rtgauge(&ns.b);
        c.args([
            "net",
            "cps",
            "--target",
            target,
            "--concurrency",
            "4",
            "-D",
            "2",
        ])
        .args(["--timeout", "500ms", "--no-store"]);
        c
    };
    // Nothing listens on the peer's port: refused.
    let doc = expect_failure(base(&format!("{}:9", ns.addr_a)), &["refused"]);
    assert_eq!(probe(&doc, 0)["transactions"], 0);
    // No route to that network inside the namespace: unreachable.
    expect_failure(base("192.0.2.1:80"), &["unreachable"]);
    // On the link but nobody there (neighbour resolution fails): timeout or unreachable, never a hang.
    let absent = format!("{}.77:80", ns.addr_a.rsplit_once('.').unwrap().0);
    expect_failure(base(&absent), &["timeout", "unreachable"]);
    // The loopback of the namespace, a port nobody listens on.
    expect_failure(base("127.0.0.1:9"), &["refused"]);
}

#[test]
fn a_server_that_resets_is_counted_as_resets() {
    // A server on loopback that reads the request and answers with an RST (SO_LINGER 0), for 6 s at most.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        use std::os::fd::AsRawFd as _;
        let end = Instant::now() + Duration::from_secs(6);
        while Instant::now() < end {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = [0u8; 512];
                    let _ = s.read(&mut buf);
                    let l = libc::linger {
                        l_onoff: 1,
                        l_linger: 0,
                    };
                    // SAFETY: valid socket and option value of the size given.
                    unsafe {
                        libc::setsockopt(
                            s.as_raw_fd(),
                            libc::SOL_SOCKET,
                            libc::SO_LINGER,
                            &l as *const libc::linger as *const libc::c_void,
                            std::mem::size_of::<libc::linger>() as libc::socklen_t,
                        )
                    };
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    });
    let mut cmd = rtgauge_std();
    cmd.args([
        "net",
        "cps",
        "--target",
        &addr,
        "--concurrency",
        "2",
        "-D",
        "2",
    ])
    .args(["--cpus", "0", "--timeout", "1s", "--no-store"]);
    let doc = expect_failure(cmd, &["reset", "closed_early"]);
    let p = probe(&doc, 0);
    assert_eq!(p["transactions"], 0);
    server.join().unwrap();
}

#[test]
fn sweep_prints_cps_and_throughput_per_core_count() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let out = rtgauge()
        .args([
            "net",
            "cps",
            "--serve-cpus",
            "0",
            "--cpus",
            "0",
            "--sweep-cpus",
            "1",
        ])
        .args([
            "--and-throughput",
            "/64k",
            "--concurrency",
            "4",
            "-D",
            "1",
            "--no-store",
        ])
        .arg("--output")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_ok(&out);
    assert!(stdout.contains("server CPUs sweep:"), "{stdout}");
    let row = stdout
        .lines()
        .skip_while(|l| !l.contains("server CPUs sweep:"))
        .nth(2)
        .unwrap();
    assert!(
        row.trim_start().starts_with("1 ") && row.contains("1.00x"),
        "{row}"
    );
    let doc = read_json(&json);
    assert_eq!(probe(&doc, 0)["config"]["mode"], "cps");
    assert_eq!(probe(&doc, 0)["sweep_cpus"], 1);
    assert_eq!(probe(&doc, 1)["config"]["mode"], "throughput");
    assert_eq!(probe(&doc, 1)["config"]["path"], "/64k");
    assert_eq!(probe(&doc, 1)["config"]["server_cpus"][0], 0);
}

#[test]
fn bad_input_names_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["cps"], "--target"),
        (&["cps", "--target", "nohost"], "--target"),
        (
            &["cps", "--target", "127.0.0.1:1", "--serve-cpus", "0"],
            "--target",
        ),
        (
            &["cps", "--target", "127.0.0.1:1", "--cpus", "9999"],
            "--cpus",
        ),
        (
            &["cps", "--target", "127.0.0.1:1", "--sweep-cpus", "2,1"],
            "--sweep-cpus",
        ),
        (
            &["cps", "--serve-cpus", "0", "--sweep-cpus", "1,2,64"],
            "--sweep-cpus",
        ),
        (
            &["cps", "--target", "127.0.0.1:1", "--path", "2b"],
            "--path",
        ),
        (
            &["cps", "--target", "127.0.0.1:1", "--concurrency", "0"],
            "--concurrency",
        ),
        (
            &["cps", "--target", "127.0.0.1:1", "--close", "maybe"],
            "--close",
        ),
        (&["cps", "--target", "127.0.0.1:1", "-D", "0"], "--duration"),
        (
            &["cps", "--target", "127.0.0.1:1", "--timeout", "soon"],
            "--timeout",
        ),
        (
            &[
                "cps",
                "--target",
                "127.0.0.1:1",
                "--and-throughput",
                "/128k",
            ],
            "--and-throughput",
        ),
        (
            &[
                "throughput",
                "--target",
                "127.0.0.1:1",
                "--connections",
                "0",
            ],
            "--connections",
        ),
        (&["serve", "--listen", "bogus"], "--listen"),
        (
            &["serve", "--listen", "127.0.0.1:0", "--cpus", "x"],
            "--cpus",
        ),
    ];
    assert_usage_errors("net", &[], cases);
}

#[test]
fn a_profile_runs_net_probes_and_stores_them() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("nfv.toml");
    std::fs::write(
        &profile,
        "name = \"nfv\"\nduration = \"1s\"\n[[probe]]\nkind = \"net\"\n\
         flags = \"cps --serve-cpus {housekeeping} --cpus {cpu} --concurrency 4\"\n\
         [[probe]]\nkind = \"net\"\nflags = \"throughput --serve-cpus {housekeeping} --cpus {cpu} --connections 2\"\n",
    )
    .unwrap();
    let json = dir.path().join("run.json");
    let out = rtgauge()
        .args(["run", "--no-sample", "--cpus", "0", "--profile"])
        .arg(&profile)
        .arg("--db")
        .arg(dir.path().join("r.db"))
        .arg("--output")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_ok(&out);
    assert!(
        stdout.contains("connections/s") && stdout.contains("Gbit/s"),
        "{stdout}"
    );
    let doc = read_json(&json);
    assert_eq!(doc["status"], "complete");
    assert_eq!(probe(&doc, 0)["config"]["mode"], "cps");
    assert_eq!(probe(&doc, 1)["config"]["mode"], "throughput");
    assert!(probe(&doc, 0)["transactions"].as_u64().unwrap() > 0);
    // A profile cannot run the server alone.
    std::fs::write(
        &profile,
        "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"net\"\nflags = \"serve --listen 127.0.0.1:0\"\n",
    )
    .unwrap();
    let out = rtgauge()
        .args(["run", "--no-sample", "--profile"])
        .arg(&profile)
        .arg("--db")
        .arg(dir.path().join("r.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a measurement"));
}

/// A measurement is stored before anything is printed: with its stdout closed (`| head -0`), `net cps`
/// stops at its first write, quietly as for any closed pipe (exit 0), and the run is in the store.
#[test]
fn a_closed_stdout_does_not_lose_the_stored_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let mut child = rtgauge_std()
        .args(["net", "cps", "--serve-cpus", "0", "--cpus", "0"])
        .args([
            "--concurrency",
            "2",
            "-D",
            "1",
            "--label",
            "closed-stdout",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before rtgauge writes a byte
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("error"), "{err}");
    let list = rtgauge()
        .args(["runs", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_ok(&list);
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(
        list.lines()
            .any(|l| l.contains("closed-stdout") && l.contains("net")),
        "{list}"
    );
}
