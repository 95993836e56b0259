//! Daemons of the time-keeping tests: chronyd on this host, never steering its clock (`-x`), and a guard
//! that kills what a test started, also when it fails; a clock source's events by kind.

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A daemon this test started: killed and reaped when dropped, also when the test fails.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start(mut c: std::process::Command, log: &Path) -> Daemon {
    let f = std::fs::File::create(log).unwrap();
    Daemon(
        c.stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap(),
    )
}

/// `chronyd -x` (no clock control) in the foreground, as root (no ownership rules on the directory),
/// with `conf`.
pub fn chronyd(dir: &Path, name: &str, conf: &str) -> Daemon {
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).unwrap();
    let mut c = super::program("chronyd");
    c.args(["-x", "-d", "-u", "root", "-f", path.to_str().unwrap()]);
    start(c, &dir.join(format!("{name}.log")))
}

pub fn wait_for(what: &str, t: Duration, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < t, "{what}: not within {t:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// chrony on this host: a server (`local stratum 8`) on a private port, a client of it and a client of a
/// port where nothing listens, each with its command socket `NAME.sock` in `d`; all `-x`.
pub fn trio(d: &Path) -> [Daemon; 3] {
    // chronyd checks the command socket's directory: at most 0770, its own.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o750)).unwrap();
    let [port, nobody] = free_udp_ports();
    let common_conf = |name: &str| {
        format!(
            "cmdport 0\nbindcmdaddress {0}/{name}.sock\npidfile {0}/{name}.pid\n",
            d.display()
        )
    };
    let client = |name: &str, port: u16| {
        chronyd(
            d,
            name,
            &format!(
                "server 127.0.0.1 port {port} iburst minpoll -4 maxpoll -4\nport 0\n{}",
                common_conf(name)
            ),
        )
    };
    let trio = [
        chronyd(
            d,
            "server",
            &format!(
                "local stratum 8\nallow 127.0.0.1\nport {port}\n{}",
                common_conf("server")
            ),
        ),
        client("client", port),
        client("lonely", nobody),
    ];
    for n in ["server", "client", "lonely"] {
        wait_for(n, Duration::from_secs(10), || {
            d.join(format!("{n}.sock")).exists()
        });
    }
    trio
}

/// Two distinct UDP ports on loopback that nothing holds now (both held while they are chosen).
fn free_udp_ports() -> [u16; 2] {
    let held = [(); 2].map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    held.map(|s| s.local_addr().unwrap().port())
}

/// A clock source's (`rtgauge clock`'s document) events of `kind` (`locked`, `reference`, …).
pub fn events<'a>(s: &'a Value, kind: &str) -> Vec<&'a Value> {
    s["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == kind)
        .collect()
}
