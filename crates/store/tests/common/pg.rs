//! A real, private PostgreSQL server for tests: `initdb` into a temporary directory, then the Debian
//! package's `postgres` (/usr/lib/postgresql/*/bin) listening on 127.0.0.1 at a free port, with its socket in
//! that directory; [`PgServer::start_reachable`] also listens on given addresses of this machine (the
//! controller's ends of veth links to test namespaces) and trusts clients from one subnet. PostgreSQL
//! refuses to run as root and the suite runs as root, so as root the server runs as the `postgres` user the
//! package creates. The server is stopped when the value is dropped, even when the test fails (a panic
//! unwinds through Drop). Shared by the store and CLI tests (`#[path]`).
#![allow(dead_code)]

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PgServer {
    /// Kept so the directory lives as long as the server.
    _dir: tempfile::TempDir,
    data: PathBuf,
    port: u16,
    bin: PathBuf,
    ids: Option<(u32, u32)>,
    tls: bool,
    /// `listen_addresses`: 127.0.0.1 and any addresses given to [`PgServer::start_reachable`].
    listen: String,
    child: Option<Child>,
}

/// The newest installed PostgreSQL's bin directory.
fn bin_dir() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (/usr/lib/postgresql; scripts/test installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("postgres").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
        .expect("a PostgreSQL server binary under /usr/lib/postgresql/*/bin")
}

/// uid and gid of the `postgres` user, from /etc/passwd.
fn postgres_ids() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("the postgres user (created by the postgresql package)");
    let f: Vec<&str> = line.split(':').collect();
    (f[2].parse().expect("uid"), f[3].parse().expect("gid"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn chown(path: &Path, ids: Option<(u32, u32)>) {
    if let Some((u, g)) = ids {
        std::os::unix::fs::chown(path, Some(u), Some(g)).expect("chown to postgres");
    }
}

impl PgServer {
    /// initdb and start; returns once the server accepts connections.
    pub fn start() -> PgServer {
        Self::start_with(false, &[], None)
    }

    /// Like [`start`](Self::start), also listening on `addrs` (addresses this machine holds, such as the
    /// controller's ends of veth links, which must exist already) and trusting clients from `clients` (a
    /// CIDR, e.g. the test namespaces' subnet). Nothing else is let in: the server listens on no other
    /// address and pg_hba.conf names no other network.
    pub fn start_reachable(addrs: &[&str], clients: &str) -> PgServer {
        Self::start_with(false, addrs, Some(clients))
    }

    /// Like [`start`](Self::start), with TLS on: a self-signed certificate for 127.0.0.1 (made with the
    /// openssl command), which is also the CA to trust: [`ca`](Self::ca).
    pub fn start_tls() -> PgServer {
        Self::start_with(true, &[], None)
    }

    /// The certificate a TLS server presents (self-signed: its own CA).
    pub fn ca(&self) -> PathBuf {
        self.data.join("server.crt")
    }

    fn start_with(tls: bool, addrs: &[&str], clients: Option<&str>) -> PgServer {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let ids = (unsafe { libc::geteuid() } == 0).then(postgres_ids);
        let dir = tempfile::Builder::new()
            .prefix("rtgauge-pg")
            .tempdir()
            .expect("temp dir");
        chown(dir.path(), ids);
        let data = dir.path().join("data");
        let bin = bin_dir();
        let mut cmd = program(bin.join("initdb"));
        cmd.args(["-A", "trust", "-U", "rtgauge", "--no-sync", "-E", "UTF8"])
            .arg("-D")
            .arg(&data)
            .stdout(Stdio::null());
        if let Some((u, g)) = ids {
            cmd.uid(u).gid(g);
        }
        let out = cmd.output().expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(net) = clients {
            use std::io::Write as _;
            let mut hba = std::fs::OpenOptions::new()
                .append(true)
                .open(data.join("pg_hba.conf"))
                .expect("pg_hba.conf");
            writeln!(hba, "host all all {net} trust").expect("write pg_hba.conf");
        }
        if tls {
            let out = program("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args([
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1",
                ])
                .arg("-keyout")
                .arg(data.join("server.key"))
                .arg("-out")
                .arg(data.join("server.crt"))
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "openssl: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            for f in ["server.key", "server.crt"] {
                chown(&data.join(f), ids);
            }
            std::fs::set_permissions(
                data.join("server.key"),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )
            .expect("chmod server.key");
        }
        let mut s = PgServer {
            _dir: dir,
            data,
            port: free_port(),
            bin,
            ids,
            tls,
            listen: std::iter::once("127.0.0.1")
                .chain(addrs.iter().copied())
                .collect::<Vec<_>>()
                .join(","),
            child: None,
        };
        s.resume();
        s
    }

    /// `postgresql://` URL of the `postgres` database as the superuser `rtgauge` (trust authentication).
    pub fn url(&self) -> String {
        format!(
            "postgresql://rtgauge@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// The URL of [`url`](Self::url) at another address the server listens on.
    pub fn url_at(&self, addr: &str) -> String {
        self.url().replace("@127.0.0.1:", &format!("@{addr}:"))
    }

    /// A new, empty database on this server, and its URL.
    pub fn new_database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(&self.url(), postgres::NoTls).expect("connect");
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        self.url().replace("/postgres?", &format!("/{name}?"))
    }

    /// A direct client, for the checks a test makes behind the store's back.
    pub fn client(&self, url: &str) -> postgres::Client {
        postgres::Client::connect(url, postgres::NoTls).expect("connect")
    }

    /// Stop the server (fast shutdown: open connections are closed), keeping its data.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SIGINT = "fast shutdown" (postgres(1)).
            // SAFETY: kill(2) takes plain integers; the pid is our own child's, not yet waited for, so it
            // cannot have been reused by another process.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
        }
    }

    /// Start the (stopped) server again on the same port and data.
    pub fn resume(&mut self) {
        let mut cmd = program(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(&self.data)
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.data.parent().expect("data has a parent"))
            .args([
                "-c",
                &format!("listen_addresses={}", self.listen),
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=16MB",
            ])
            .args(["-c", if self.tls { "ssl=on" } else { "ssl=off" }])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((u, g)) = self.ids {
            cmd.uid(u).gid(g);
        }
        self.child = Some(cmd.spawn().expect("postgres starts"));
        let t0 = Instant::now();
        loop {
            if postgres::Client::connect(&self.url(), postgres::NoTls).is_ok() {
                return;
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    panic!("postgres exited during start: {st}");
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "postgres did not accept connections within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A command that starts `path`, whose program must be listed in deps/programs.tsv (the manifest
/// scripts/test installs from).
fn program(path: impl AsRef<std::path::Path>) -> Command {
    let p = path.as_ref();
    assert!(
        rtgauge_programs::entry(&p.to_string_lossy()).is_some(),
        "{} is started by a test but not listed in deps/programs.tsv",
        p.display()
    );
    rtgauge_programs::command(p)
}
