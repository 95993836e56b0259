//! Test hosts that are really remote to the controller: one network namespace per host, joined to the
//! controller (the test process, in the initial namespace) by its own veth link, with its own `sshd`
//! (Debian's openssh-server) listening only on the namespace's address, its own host key and an operator
//! account (`rtgauge-op`) that logs in with a key made for the test and becomes root through `sudo`.
//!
//! Namespaces share the filesystem, so each host gets its own directory for everything it writes (home,
//! install prefix, work directory), and its own /etc/passwd, group, shadow and sudoers through iproute2's
//! convention: `ip netns exec NS` bind-mounts /etc/netns/NS/FILE over /etc/FILE in a private mount namespace
//! for sshd and everything it starts. The operator account exists only there; the machine's /etc is never
//! changed.
//!
//! Everything is named after the test process (`rtgf<pid>h<n>`: namespace, controller-side link,
//! /etc/netns directory; `rtgf<pid>-…`: the temporary directory, which holds the sshd configurations and
//! the controller's SSH control sockets) and bounded: at most [`MAX_HOSTS`] per process, sshd drops silent
//! clients, every playbook runs under a deadline. [`Fleet`]'s Drop tears it all down, also when the test
//! fails; [`clean_stale`], called by every [`Fleet::start`], removes what a killed test process (no Drop)
//! left, found by the name prefix of a pid that no longer runs; [`leftovers`] lists what a process left.

#![allow(dead_code, clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The account Ansible logs in as on every host (it becomes root with sudo, like an operator's).
pub const USER: &str = "rtgauge-op";
/// Hosts one test process may create (each takes a /24 of the process' 10.A.0.0/16).
pub const MAX_HOSTS: u32 = 32;

/// What every name of test process `pid` starts with.
pub fn tag(pid: u32) -> String {
    format!("rtgf{pid}")
}

/// The pid a name made by [`tag`] carries (`rtgf123h0` → 123, `rtgf123-x` → 123).
fn tag_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("rtgf")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after = rest[digits.len()..].chars().next();
    matches!(after, Some('h' | '-'))
        .then(|| digits.parse().ok())
        .flatten()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    let out = crate::common::program("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ip ARGS`'s stdout ("" when it fails).
fn ip_text(args: &[&str]) -> String {
    let out = crate::common::program("ip").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Network namespaces by name.
fn netns_names() -> Vec<String> {
    ip_text(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Links of the initial namespace by name (without the `@peer` part).
fn link_names() -> Vec<String> {
    ip_text(&["-o", "link", "show"])
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Processes whose command line contains `needle`: (pid, command line).
fn processes_with(needle: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        if pid != me && line.contains(needle) {
            found.push((pid, line.trim().to_string()));
        }
    }
    found
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a plain pid and signal number.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Tell every SSH control master whose socket is in `dir` to exit (Ansible's shared connections).
fn exit_masters(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let _ = crate::common::program("ssh")
            .args(["-F", "none", "-O", "exit", "-o"])
            .arg(format!("ControlPath={}", e.path().display()))
            .arg("controlled-host")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .output();
    }
}

/// Kill every process in namespace `ns` (sshd's sessions, a run still measuring) until none is left (5 s at
/// most), then delete the namespace with its veth link and its /etc/netns directory.
fn remove_netns(ns: &str) {
    let start = Instant::now();
    loop {
        let pids: Vec<u32> = ip_text(&["netns", "pids", ns])
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() || start.elapsed() > Duration::from_secs(5) {
            break;
        }
        for p in pids {
            kill(p, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Deleting either end of a veth pair deletes both; the namespace's end also goes with the namespace.
    let _ = crate::common::program("ip")
        .args(["link", "del", ns])
        .stderr(Stdio::null())
        .output();
    let _ = crate::common::program("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(ns));
    // Empty once no test holds a host there; another process' hosts keep it (remove_dir refuses).
    let _ = std::fs::remove_dir("/etc/netns");
}

/// The processes descending from `pid`, zombies it has not reaped included: (pid, parent), from each
/// process' /proc/PID/stat.
fn descendants(pid: u32) -> Vec<(u32, u32)> {
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // "PID (COMM) STATE PPID …": COMM may hold spaces and parentheses, so read after the last ')'.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found: Vec<(u32, u32)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for &(p, pp) in all.iter().filter(|(_, pp)| *pp == parent) {
            found.push((p, pp));
            parents.push(p);
        }
    }
    found
}

/// Remove what test processes that no longer run left behind (killed: their Drop never ran): namespaces and
/// the processes in them, controller-side links, /etc/netns directories, SSH control masters and processes
/// started from their temporary directories, and those directories.
pub fn clean_stale() {
    let stale = |name: &str| tag_pid(name).is_some_and(|p| !alive(p));
    for ns in netns_names().into_iter().filter(|n| stale(n)) {
        remove_netns(&ns);
    }
    for link in link_names().into_iter().filter(|n| stale(n)) {
        let _ = crate::common::program("ip")
            .args(["link", "del", &link])
            .output();
    }
    if let Ok(dirs) = std::fs::read_dir("/etc/netns") {
        for d in dirs.flatten() {
            if stale(&d.file_name().to_string_lossy()) {
                let _ = std::fs::remove_dir_all(d.path());
            }
        }
        let _ = std::fs::remove_dir("/etc/netns");
    }
    if let Ok(dirs) = std::fs::read_dir(std::env::temp_dir()) {
        for d in dirs.flatten() {
            let name = d.file_name().to_string_lossy().into_owned();
            if !stale(&name) || !name.contains('-') {
                continue;
            }
            exit_masters(&d.path().join("cp"));
            for (pid, _) in processes_with(&d.path().to_string_lossy()) {
                kill(pid, libc::SIGKILL);
            }
            let _ = std::fs::remove_dir_all(d.path());
        }
    }
}

/// Everything test process `pid` made that still exists, one line each (empty: nothing left): its
/// namespaces, controller-side links, /etc/netns directories, processes started from its temporary
/// directory (sshd, SSH control masters, runs) and that directory.
pub fn leftovers(pid: u32) -> Vec<String> {
    let t = tag(pid);
    let hosts = format!("{t}h");
    let mut left = Vec::new();
    for ns in netns_names().into_iter().filter(|n| n.starts_with(&hosts)) {
        left.push(format!("namespace {ns}"));
    }
    for l in link_names().into_iter().filter(|n| n.starts_with(&hosts)) {
        left.push(format!("link {l}"));
    }
    if let Ok(dirs) = std::fs::read_dir("/etc/netns") {
        for d in dirs.flatten() {
            if d.file_name().to_string_lossy().starts_with(&hosts) {
                left.push(format!("/etc/netns/{}", d.file_name().to_string_lossy()));
            }
        }
    }
    let dir_prefix = std::env::temp_dir().join(format!("{t}-"));
    for (p, line) in processes_with(&dir_prefix.to_string_lossy()) {
        left.push(format!("process {p}: {line}"));
    }
    if let Ok(dirs) = std::fs::read_dir(std::env::temp_dir()) {
        for d in dirs.flatten() {
            if d.path()
                .to_string_lossy()
                .starts_with(&*dir_prefix.to_string_lossy())
            {
                left.push(format!("directory {}", d.path().display()));
            }
        }
    }
    left
}

/// Processes named `sshd` on this machine, zombies included (what `pgrep sshd` lists): their
/// /proc/PID/stat lines (pid, state, parent, …).
pub fn sshd_processes() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == "sshd")
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .map(|s| s.split_whitespace().take(8).collect::<Vec<_>>().join(" "))
        .collect()
}

/// One host: a namespace, its link to the controller and its sshd.
pub struct Host {
    /// The inventory name.
    pub name: String,
    /// The namespace, and the name of the controller's end of its link.
    pub ns: String,
    /// The host's address (its end of the link, `uplink`).
    pub addr: String,
    /// The controller's address on this host's link (where the host reaches the controller's PostgreSQL).
    pub gateway: String,
    /// This host's directory: sshd's files, the operator's home, the install prefix, the work directory.
    pub dir: PathBuf,
    sshd: Option<Child>,
}

impl Host {
    /// Where the role installs the binary on this host (a prefix of its own: namespaces share the
    /// filesystem, and the binary must be copied, not found on a shared path).
    pub fn bin(&self) -> PathBuf {
        self.dir.join("prefix/bin/rtgauge")
    }

    /// The host's work directory (its SQLite store is `rtgauge.db` there).
    pub fn workdir(&self) -> PathBuf {
        self.dir.join("work")
    }

    pub fn db(&self) -> PathBuf {
        self.workdir().join("rtgauge.db")
    }

    /// Take the host's uplink down or up, inside its namespace: the controller and the central store are
    /// then unreachable from it (and it from them).
    pub fn set_uplink(&self, up: bool) {
        ip(&[
            "-n",
            &self.ns,
            "link",
            "set",
            "uplink",
            if up { "up" } else { "down" },
        ]);
        if up {
            // The controller's neighbour entry for the host failed while the link was down, and the kernel
            // answers "No route to host" from it for a while: forget it, and wait (bounded) until the
            // host's sshd answers, as an operator would before re-running the play.
            let _ = crate::common::program("ip")
                .args(["neigh", "flush", "dev", &self.ns])
                .output();
            let sock: std::net::SocketAddr = format!("{}:22", self.addr).parse().unwrap();
            let start = Instant::now();
            while std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(1)).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "{}: sshd unreachable 20 s after its link came back",
                    self.name
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    fn teardown(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            // End its sessions while it lives to reap them, leaves first (a session's unprivileged child,
            // then its monitor), so that each is reaped by its parent: a process orphaned by its parent
            // goes to init, which may leave it a zombie that `pgrep sshd` counts for many seconds. Sessions
            // whose client ended (the control masters were told to exit) end on their own; one whose
            // client is cut off (a link down) would only after ClientAliveInterval x ClientAliveCountMax.
            let start = Instant::now();
            loop {
                let sessions = descendants(c.id());
                if sessions.is_empty() || start.elapsed() > Duration::from_secs(8) {
                    break;
                }
                if start.elapsed() > Duration::from_secs(1) {
                    for (p, _) in sessions
                        .iter()
                        .filter(|(p, _)| !sessions.iter().any(|(_, parent)| parent == p))
                    {
                        kill(*p, libc::SIGKILL);
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            kill(c.id(), libc::SIGTERM);
            let _ = c.wait();
        }
        remove_netns(&self.ns);
    }
}

/// A set of namespace hosts reachable over SSH only, torn down on Drop.
pub struct Fleet {
    pub hosts: Vec<Host>,
    /// The hosts' subnet (every host's /24 in it), for PostgreSQL's pg_hba.conf.
    pub subnet: String,
    key: PathBuf,
    known_hosts: PathBuf,
    dir: tempfile::TempDir,
}

impl Fleet {
    /// Hosts named `names`, each with sshd answering on its address. Removes what killed test processes
    /// left first.
    pub fn start(names: &[&str]) -> Fleet {
        assert!(
            crate::common::is_root(),
            "namespace hosts need root (network namespaces, sshd, veth links)"
        );
        clean_stale();
        let pid = std::process::id();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", tag(pid)))
            .tempdir()
            .unwrap();
        // The operator account of each host must reach its home under here.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // sshd's privilege-separation directory (Debian's sshd makes it at boot through systemd; it is not
        // there on a machine where sshd never ran).
        std::fs::create_dir_all("/run/sshd").unwrap();
        std::fs::set_permissions("/run/sshd", std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("cp")).unwrap();
        let key = dir.path().join("id_ed25519");
        keygen(&key, "rtgauge-controller");
        let known_hosts = dir.path().join("known_hosts");
        std::fs::write(&known_hosts, "").unwrap();
        let mut fleet = Fleet {
            hosts: Vec::new(),
            subnet: format!("10.{}.0.0/16", net_octet(pid)),
            key,
            known_hosts,
            dir,
        };
        for name in names {
            fleet.add(name);
        }
        fleet
    }

    fn add(&mut self, name: &str) {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(
            n < MAX_HOSTS,
            "at most {MAX_HOSTS} namespace hosts a process"
        );
        let pid = std::process::id();
        let a = net_octet(pid);
        let dir = self.dir.path().join("hosts").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(
            dir.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Registered before anything exists, so Drop undoes a half-made host too.
        self.hosts.push(Host {
            name: name.to_string(),
            ns: format!("{}h{n}", tag(pid)),
            addr: format!("10.{a}.{n}.2"),
            gateway: format!("10.{a}.{n}.1"),
            dir: dir.clone(),
            sshd: None,
        });
        let h = self.hosts.last().unwrap();
        let (ns, addr, gateway) = (h.ns.clone(), h.addr.clone(), h.gateway.clone());
        let uid = operator_uid();
        let home = dir.join("home");
        write_etc(&ns, uid, &home);

        ip(&["netns", "add", &ns]);
        ip(&[
            "link", "add", &ns, "type", "veth", "peer", "name", "uplink", "netns", &ns,
        ]);
        ip(&["addr", "add", &format!("{gateway}/24"), "dev", &ns]);
        ip(&["link", "set", &ns, "up"]);
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            "uplink",
        ]);
        ip(&["-n", &ns, "link", "set", "uplink", "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);

        // The operator's home with the controller's key authorised (sshd's StrictModes holds: the home and
        // ~/.ssh belong to the operator and nobody else may write there).
        let ssh_dir = home.join(".ssh");
        std::fs::create_dir_all(&ssh_dir).unwrap();
        std::fs::copy(
            self.key.with_extension("pub"),
            ssh_dir.join("authorized_keys"),
        )
        .unwrap();
        for (p, mode) in [
            (&home, 0o755),
            (&ssh_dir, 0o700),
            (&ssh_dir.join("authorized_keys"), 0o600),
        ] {
            std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }

        let host_key = dir.join("ssh_host_ed25519_key");
        keygen(&host_key, name);
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {addr}\n\
                 Port 22\n\
                 HostKey {key}\n\
                 PidFile none\n\
                 UsePAM no\n\
                 PermitRootLogin no\n\
                 AllowUsers {USER}\n\
                 AuthenticationMethods publickey\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 AuthorizedKeysFile .ssh/authorized_keys\n\
                 Subsystem sftp {sftp}\n\
                 LoginGraceTime 20\n\
                 ClientAliveInterval 5\n\
                 ClientAliveCountMax 3\n\
                 MaxStartups 20\n",
                key = host_key.display(),
                sftp = crate::common::program_line("/usr/lib/openssh/sftp-server", "").trim(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
        // `ip netns exec` execs sshd in place: the child is sshd itself.
        let child = crate::common::program_in_netns("/usr/sbin/sshd", &ns)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.hosts.last_mut().unwrap().sshd = Some(child);

        // Up when it answers on its address, from the controller's side of the link.
        let sock: std::net::SocketAddr = format!("{addr}:22").parse().unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect_timeout(&sock, Duration::from_millis(200)).is_err() {
            let h = self.hosts.last_mut().unwrap();
            if let Some(st) = h.sshd.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "sshd of {name} exited ({st}): {}",
                    std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "sshd of {name} does not answer on {sock}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let public = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.known_hosts)
            .unwrap();
        let mut words = public.split_whitespace();
        writeln!(
            f,
            "{addr} {} {}",
            words.next().unwrap(),
            words.next().unwrap()
        )
        .unwrap();
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap()
    }

    /// The fleet's temporary directory (playbook temp files, fetched runs, controller store may go here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where Ansible keeps its shared SSH connections (ANSIBLE_SSH_CONTROL_PATH_DIR).
    pub fn control_dir(&self) -> PathBuf {
        self.dir.path().join("cp")
    }

    /// The inventory's connection variables for every host (YAML, indented for `rtgauge: vars:`): SSH as
    /// the operator with the test's key, the host key checked against the keys made for the test, no
    /// ~/.ssh/config or /etc/ssh/ssh_config of the machine, Python where Debian puts it.
    pub fn connection_vars(&self) -> String {
        format!(
            "    ansible_user: {USER}\n\
             \x20   ansible_ssh_private_key_file: {key}\n\
             \x20   ansible_ssh_common_args: >-\n\
             \x20     -F none -o IdentitiesOnly=yes -o BatchMode=yes\n\
             \x20     -o StrictHostKeyChecking=yes -o UserKnownHostsFile={known}\n\
             \x20   ansible_python_interpreter: /usr/bin/python3\n",
            key = self.key.display(),
            known = self.known_hosts.display(),
        )
    }

    /// A host's inventory entry (indented by eight spaces, for a group's `hosts:`): its name, address,
    /// install prefix, work directory and async job directory, then `extra` (more variables, each line
    /// indented by ten spaces).
    pub fn inventory_host(&self, name: &str, extra: &str) -> String {
        let h = self.host(name);
        format!(
            "        {name}:\n\
             \x20         ansible_host: {addr}\n\
             \x20         rtgauge_bin: {bin}\n\
             \x20         rtgauge_workdir: {work}\n\
             \x20         ansible_async_dir: {dir}/async\n{extra}",
            addr = h.addr,
            bin = h.bin().display(),
            work = h.workdir().display(),
            dir = h.dir.display(),
        )
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        exit_masters(&self.control_dir());
        for h in self.hosts.iter_mut().rev() {
            h.teardown();
        }
        // The links go with their namespaces, which the kernel frees in the background: wait (briefly) so
        // that the caller's check finds nothing.
        let start = Instant::now();
        while self.hosts.iter().any(|h| link_names().contains(&h.ns))
            && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Processes started from the directory that outlived their namespace's end (a control master
        // whose socket was already gone): end them before the directory goes.
        for (pid, _) in processes_with(&self.dir.path().to_string_lossy()) {
            kill(pid, libc::SIGKILL);
        }
    }
}

/// The second octet of test process `pid`'s 10.A.0.0/16: 210–249, apart from net.rs' 10.100–10.199.
fn net_octet(pid: u32) -> u32 {
    210 + pid % 40
}

/// A uid that no account of this machine has: the operator's, named only in the hosts' /etc/netns files.
fn operator_uid() -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let used: Vec<u32> = passwd
        .lines()
        .filter_map(|l| l.split(':').nth(2)?.parse().ok())
        .collect();
    (61_000..65_000).find(|u| !used.contains(u)).unwrap()
}

/// The host's own /etc/passwd, group and shadow (the machine's accounts plus the operator) and sudoers
/// (root, and the operator without a password, as fleets' automation accounts usually are), in
/// /etc/netns/NS where `ip netns exec` mounts them over /etc's.
fn write_etc(ns: &str, uid: u32, home: &Path) {
    let etc = Path::new("/etc/netns").join(ns);
    std::fs::create_dir_all(&etc).unwrap();
    let read = |f: &str| std::fs::read_to_string(Path::new("/etc").join(f)).unwrap();
    let files = [
        (
            "passwd",
            format!(
                "{}{USER}:x:{uid}:{uid}:rtgauge test operator:{}:/bin/sh\n",
                read("passwd"),
                home.display()
            ),
            0o644,
        ),
        (
            "group",
            format!("{}{USER}:x:{uid}:\n", read("group")),
            0o644,
        ),
        // Only the accounts that log in or become: no copy of the machine's password hashes.
        (
            "shadow",
            format!("root:*:19000:0:99999:7:::\n{USER}:*:19000:0:99999:7:::\n"),
            0o640,
        ),
        (
            "sudoers",
            format!(
                "Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n{USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"
            ),
            0o440,
        ),
    ];
    for (name, text, mode) in files {
        let p = etc.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

fn keygen(path: &Path, comment: &str) {
    let out = crate::common::program("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .unwrap();
    crate::common::assert_ok(&out);
}

/// A finished command: its exit code, stdout and stderr, and how long it ran.
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub seconds: f64,
}

/// Run `cmd` in its own process group, its output into files of `dir`; past `limit` the whole group is
/// killed and the test fails showing what it printed (a hung SSH connection must not hang the suite).
pub fn run_bounded(mut cmd: Command, dir: &Path, label: &str, limit: Duration) -> Finished {
    let out_path = dir.join(format!("{label}.out"));
    let err_path = dir.join(format!("{label}.err"));
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            // SAFETY: signalling the process group of our own child.
            unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "{label} ran past {limit:?} and was killed:\n{}\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Finished {
        code: status.code(),
        stdout: std::fs::read_to_string(&out_path).unwrap(),
        stderr: std::fs::read_to_string(&err_path).unwrap(),
        seconds: start.elapsed().as_secs_f64(),
    }
}

#[test]
fn names_carry_their_pid() {
    assert_eq!(tag_pid("rtgf123h0"), Some(123));
    assert_eq!(tag_pid("rtgf123-abc"), Some(123));
    assert_eq!(tag_pid(&format!("{}h7", tag(4_194_304))), Some(4_194_304));
    for other in ["rtgf", "rtgfh0", "rtgf12", "rtgf12x", "rtg123h0", "eth0"] {
        assert_eq!(tag_pid(other), None, "{other}");
    }
    // A link name is at most 15 bytes: the largest pid and host number fit.
    assert!(format!("{}h{}", tag(4_194_304), MAX_HOSTS - 1).len() <= 15);
}
