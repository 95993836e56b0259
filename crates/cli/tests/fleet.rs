//! The fleet end to end: the real Ansible playbook (deploy/ansible/site.yml) against an inventory of three
//! hosts on the local connection, each with its own inventory name, label and work directory; the runs are
//! fetched back and imported into the controller's SQLite store, and `rtgauge fleet` lists them. Also:
//! the playbooks pass `ansible-playbook --syntax-check` and `ansible-lint`, and the Kubernetes manifests pass
//! rtgauge's own `audit --k8s`. Push mode: the same playbook with `rtgauge_push_url` set to a real
//! PostgreSQL server started by the test (../../store/tests/common/pg.rs), each host running the built-in
//! `quick` profile and pushing its run there itself.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
#[path = "../../store/tests/common/pg.rs"]
mod pg;

use common::{assert_ok, rtgauge};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ansible_dir() -> PathBuf {
    repo().join("deploy/ansible")
}

/// `ansible-playbook -i DIR/inventory.yml PLAY` from deploy/ansible, with its temporary files under `dir`.
fn playbook(dir: &Path, play: &str) -> Command {
    let mut c = common::program("ansible-playbook");
    c.current_dir(ansible_dir())
        .env("ANSIBLE_CONFIG", ansible_dir().join("ansible.cfg"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", dir.join("ansible-tmp"))
        .args(["-i", dir.join("inventory.yml").to_str().unwrap(), play]);
    c
}

/// A profile of one 2 s timer-latency probe; `max` is its gate on the max latency.
fn profile(name: &str, max: &str) -> String {
    format!(
        r#"name = "{name}"
duration = "2s"
[[probe]]
kind = "cyclic"
flags = "-m -p90 -i 500 -h 200 -a {{cpus}} -t --mainaffinity={{housekeeping}} -q"
[[gate]]
metric = "cyclic.max"
max = "{max}"
"#
    )
}

#[test]
fn the_playbook_qualifies_three_hosts_and_fleet_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let bin = assert_cmd::cargo::cargo_bin("rtgauge");
    std::fs::write(t.join("ok.toml"), profile("tiny", "10s")).unwrap();
    // A gate no machine meets: that host's play must fail with a clear message, its run still gathered.
    std::fs::write(t.join("strict.toml"), profile("tiny", "1us")).unwrap();
    let db = t.join("fleet.db");
    let inventory = format!(
        r#"rtgauge:
  vars:
    ansible_connection: local
    ansible_become: false
    ansible_python_interpreter: /usr/bin/python3
    rtgauge_binary_src: {bin}
    rtgauge_workdir: "{t}/hosts/{{{{ inventory_hostname }}}}"
    rtgauge_bin: "{{{{ rtgauge_workdir }}}}/rtgauge"
    rtgauge_cpus: "1"
    rtgauge_run_extra_args: ["--no-sample"]
    rtgauge_poll_s: 1
    rtgauge_run_timeout_s: 300
    rtgauge_fetch_dir: {t}/runs
    rtgauge_controller_bin: {bin}
    rtgauge_controller_db: {db}
  children:
    du:
      vars:
        rtgauge_profile_file: {t}/ok.toml
        rtgauge_label: du-cell
        rtgauge_tags:
          site: north
      hosts:
        cell-a:
        cell-b:
    strict:
      vars:
        rtgauge_profile_file: {t}/strict.toml
        rtgauge_label: strict-cell
      hosts:
        cell-c:
"#,
        bin = bin.display(),
        t = t.display(),
        db = db.display()
    );
    std::fs::write(t.join("inventory.yml"), inventory).unwrap();

    let start = std::time::Instant::now();
    let out = playbook(t, "site.yml").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "ansible-playbook (3 hosts): {:.1} s, {}",
        start.elapsed().as_secs_f64(),
        out.status
    );
    // cell-c failed its gate: the play fails (ansible-playbook exits 2 when a host failed)...
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("rtgauge run on cell-c: a requirement gate of profile strict.toml failed"),
        "{stdout}"
    );
    // ...and only cell-c failed.
    let recap: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("PLAY RECAP"))
        .collect();
    for (host, failed) in [("cell-a", 0), ("cell-b", 0), ("cell-c", 1)] {
        let line = recap.iter().find(|l| l.starts_with(host)).unwrap();
        assert!(line.contains(&format!("failed={failed}")), "{line}");
    }

    // Every run was fetched and imported (the failed one too), each under its inventory name.
    let html = t.join("fleet.html");
    let out = rtgauge()
        .args(["fleet", "--format", "json", "--db", db.to_str().unwrap()])
        .args(["--html", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ok(&out);
    let page = std::fs::read_to_string(&html).unwrap();
    for h in ["cell-a", "cell-b", "cell-c"] {
        assert!(page.contains(&format!("<td>{h}</td>")), "{page}");
    }
    let f: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(f["hosts"], 3, "{f:#}");
    let got: Vec<(String, String, String)> = f["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["host"].as_str().unwrap().to_string(),
                e["verdict"].as_str().unwrap().to_string(),
                e["label"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("cell-a", "pass", "du-cell"),
        ("cell-b", "pass", "du-cell"),
        ("cell-c", "fail", "strict-cell"),
    ]
    .map(|(h, v, l)| (h.to_string(), v.to_string(), l.to_string()));
    assert_eq!(got, want, "{f:#}");
    for e in f["entries"].as_array().unwrap() {
        assert!(e["cyclic_max_ns"].as_u64().unwrap() > 0, "{e:#}");
    }
    // --profile keeps that profile's runs only.
    for (profile, hosts) in [("tiny", 3), ("ran", 0)] {
        let out = rtgauge()
            .args(["fleet", "--format", "json", "--profile", profile])
            .args(["--db", db.to_str().unwrap()])
            .output()
            .unwrap();
        assert_ok(&out);
        let f: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(f["hosts"], hosts, "--profile {profile}: {f:#}");
    }
    // The inventory's tags reached the runs.
    let a = common::export_json(db.to_str().unwrap(), "du-cell");
    assert_eq!(a["tags"]["site"], "north", "{a:#}");

    // compare --host puts two hosts side by side.
    let out = rtgauge()
        .args([
            "compare",
            "--host",
            "cell-a",
            "--host",
            "cell-c",
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(du-cell)") && text.contains("(strict-cell)"),
        "{text}"
    );
    let out = rtgauge()
        .args(["compare", "--host", "cell-a", "--host", "nowhere"])
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "rtgauge: error: --host nowhere: no run of this host in the store\n"
    );
}

/// Push mode end to end: a real PostgreSQL, the real site.yml against three local hosts (distinct inventory
/// names and labels), each running the built-in `quick` profile shortened by `rtgauge_duration` and pushing
/// its run with `rtgauge push`; `rtgauge fleet` on the central store lists the three with their verdicts.
#[test]
fn the_playbook_pushes_three_quick_runs_to_postgresql_and_fleet_lists_them() {
    let srv = pg::PgServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let bin = assert_cmd::cargo::cargo_bin("rtgauge");
    let hosts = [
        ("edge-1", "edge-north"),
        ("edge-2", "edge-south"),
        ("edge-3", "edge-west"),
    ];
    let host_lines: String = hosts
        .iter()
        .map(|(h, l)| format!("    {h}:\n      rtgauge_label: {l}\n"))
        .collect();
    let inventory = format!(
        r#"rtgauge:
  vars:
    ansible_connection: local
    ansible_become: false
    ansible_python_interpreter: /usr/bin/python3
    rtgauge_binary_src: {bin}
    rtgauge_workdir: "{t}/hosts/{{{{ inventory_hostname }}}}"
    rtgauge_bin: "{{{{ rtgauge_workdir }}}}/rtgauge"
    rtgauge_profile: quick
    rtgauge_duration: 2s
    rtgauge_cpus: "1"
    rtgauge_run_extra_args: ["--no-sample"]
    rtgauge_audit_extra_args: ["--no-sample"]
    rtgauge_poll_s: 1
    rtgauge_run_timeout_s: 300
    rtgauge_push_url: "{url}"
    # Push mode must not need these: a fetch or an import would fail on them.
    rtgauge_fetch_dir: /nonexistent/runs
    rtgauge_controller_bin: /nonexistent/rtgauge
  hosts:
{host_lines}"#,
        bin = bin.display(),
        t = t.display(),
    );
    std::fs::write(t.join("inventory.yml"), inventory).unwrap();

    let start = std::time::Instant::now();
    let out = playbook(t, "site.yml").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "ansible-playbook (3 hosts, quick 2 s, push): {:.1} s, {}",
        start.elapsed().as_secs_f64(),
        out.status
    );
    assert_ok(&out);
    let recap: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("PLAY RECAP"))
        .collect();
    // Each host's push task ran and reported a change (a run went); the fetch and import were skipped.
    let task = |name: &str| -> Vec<&str> {
        stdout
            .lines()
            .skip_while(|l| !l.starts_with(&format!("TASK [rtgauge : {name}]")))
            .skip(1)
            .take_while(|l| !l.starts_with("TASK ") && !l.starts_with("PLAY "))
            .collect()
    };
    let pushed = task("Push the host's runs to the central store");
    let fetched = task("Fetch the run document to the controller");
    for (host, _) in hosts {
        let line = recap.iter().find(|l| l.starts_with(host)).unwrap();
        assert!(line.contains("failed=0"), "{line}");
        assert!(
            pushed.contains(&format!("changed: [{host}]").as_str()),
            "{pushed:?}"
        );
        assert!(
            fetched.contains(&format!("skipping: [{host}]").as_str()),
            "{fetched:?}"
        );
    }

    // The central store holds exactly the three runs, one per host, each under its inventory name.
    let mut c = srv.client(&url);
    let n: i64 = c
        .query_one("SELECT count(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
    let rows = c
        .query(
            "SELECT host, label, profile, status FROM runs ORDER BY host",
            &[],
        )
        .unwrap();
    let got: Vec<(String, String, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let want: Vec<(String, String, String, String)> = hosts
        .iter()
        .map(|(h, l)| {
            (
                h.to_string(),
                l.to_string(),
                "quick".into(),
                "complete".into(),
            )
        })
        .collect();
    assert_eq!(got, want);

    let out = rtgauge()
        .args(["fleet", "--format", "json", "--db", &url])
        .output()
        .unwrap();
    assert_ok(&out);
    let f: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(f["hosts"], 3, "{f:#}");
    let entries = f["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{f:#}");
    for ((host, label), e) in hosts.iter().zip(entries) {
        assert_eq!(e["host"], *host, "{e:#}");
        assert_eq!(e["label"], *label, "{e:#}");
        assert_eq!(e["profile"], "quick", "{e:#}");
        assert_eq!(e["status"], "complete", "{e:#}");
        assert!(e["cyclic_max_ns"].as_u64().unwrap() > 0, "{e:#}");
        assert!(e["oslat_max_ns"].as_u64().unwrap() > 0, "{e:#}");
        // The verdict is the run's own: the host's store, read by the same verb, gives the same one.
        let host_db = t.join(format!("hosts/{host}/rtgauge.db"));
        let out = rtgauge()
            .args([
                "fleet",
                "--format",
                "json",
                "--db",
                host_db.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_ok(&out);
        let local: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(local["hosts"], 1, "{local:#}");
        let v = e["verdict"].as_str().unwrap();
        assert!(
            ["pass", "fail", "no data", "no gates"].contains(&v),
            "{e:#}"
        );
        assert_eq!(local["entries"][0]["verdict"], v, "{host}: {local:#}");
        // The pushed document is the host's, whole, measured for rtgauge_duration.
        let central = common::export_json(&url, label);
        assert_eq!(
            central,
            common::export_json(host_db.to_str().unwrap(), "latest")
        );
        assert_eq!(central["system"]["nodename"], *host);
        let argv: Vec<&str> = central["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            argv.windows(2).any(|w| w == ["--duration", "2s"]),
            "{argv:?}"
        );
        assert!(
            argv.windows(2).any(|w| w == ["--profile", "quick"]),
            "{argv:?}"
        );
    }

    // Pushing again from a host stores nothing twice.
    let host_db = t.join("hosts/edge-1/rtgauge.db");
    let out = rtgauge()
        .args(["push", "--to", &url, "--db", host_db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("push: 0 runs pushed to "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let n: i64 = c
        .query_one("SELECT count(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
}

#[test]
fn the_audit_playbook_fails_the_hosts_with_failed_rules_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let bin = assert_cmd::cargo::cargo_bin("rtgauge");
    // The rules this machine fails, from the audit itself: the playbook must name each (an untuned VM fails
    // isolation at least; on a host whose audit passes, the play must pass).
    let out = rtgauge()
        .args(["audit", "--no-sample", "--format", "json"])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "fail")
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        out.status.code(),
        Some(if failed.is_empty() { 0 } else { 1 })
    );
    let inventory = format!(
        r#"rtgauge:
  vars:
    ansible_connection: local
    ansible_become: false
    ansible_python_interpreter: /usr/bin/python3
    rtgauge_binary_src: {bin}
    rtgauge_workdir: "{t}/hosts/{{{{ inventory_hostname }}}}"
    rtgauge_bin: "{{{{ rtgauge_workdir }}}}/rtgauge"
    rtgauge_audit_extra_args: ["--no-sample"]
  hosts:
    relay-1:
    relay-2:
"#,
        bin = bin.display(),
        t = t.display(),
    );
    std::fs::write(t.join("inventory.yml"), inventory).unwrap();
    let out = playbook(t, "audit.yml").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if failed.is_empty() {
        assert_ok(&out);
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    for host in ["relay-1", "relay-2"] {
        let line = stdout
            .lines()
            .find(|l| l.contains(&format!("\"msg\": \"rtgauge audit on {host} failed (")))
            .unwrap_or_else(|| panic!("{stdout}"));
        for id in &failed {
            assert!(line.contains(&format!("{id}: ")), "{id} not named: {line}");
        }
    }
}

/// The run is detached from the controller: kill ansible-playbook (its whole process group, as a dropped SSH
/// session or a dead controller would end it) while the host measures, and the run still completes and is
/// stored on the host.
#[test]
fn a_run_outlives_the_controller_killed_mid_run() {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let bin = assert_cmd::cargo::cargo_bin("rtgauge");
    std::fs::write(t.join("p.toml"), profile("tiny", "10s").replace("2s", "6s")).unwrap();
    let host_db = t.join("hosts/far-1/rtgauge.db");
    let inventory = format!(
        r#"rtgauge:
  vars:
    ansible_connection: local
    ansible_become: false
    ansible_python_interpreter: /usr/bin/python3
    rtgauge_binary_src: {bin}
    rtgauge_workdir: "{t}/hosts/{{{{ inventory_hostname }}}}"
    rtgauge_bin: "{{{{ rtgauge_workdir }}}}/rtgauge"
    rtgauge_profile_file: {t}/p.toml
    rtgauge_cpus: "1"
    rtgauge_audit: false
    rtgauge_run_extra_args: ["--no-sample"]
    rtgauge_poll_s: 1
    rtgauge_fetch_dir: {t}/runs
    rtgauge_controller_bin: {bin}
    rtgauge_controller_db: {t}/fleet.db
  hosts:
    far-1:
"#,
        bin = bin.display(),
        t = t.display(),
    );
    std::fs::write(t.join("inventory.yml"), inventory).unwrap();
    let mut child = playbook(t, "site.yml")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let list = || {
        let out = rtgauge()
            .args(["runs", "list", "--db", host_db.to_str().unwrap()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // Wait until the host measures (its run is stored as running), then kill the controller.
    let start = std::time::Instant::now();
    while !(host_db.exists() && list().contains(" running ")) {
        assert!(start.elapsed().as_secs() < 60, "the run never started");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let killed_at = std::time::Instant::now();
    while !list().contains(" complete ") {
        assert!(
            killed_at.elapsed().as_secs() < 60,
            "the run did not complete: {}",
            list()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // Nothing was gathered (the controller died first), and the host's run is whole: push or the next play
    // gathers it.
    assert!(!t.join("fleet.db").exists());
    let doc = common::export_json(host_db.to_str().unwrap(), "latest");
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["system"]["nodename"], "far-1");
    assert_eq!(doc["verdicts"][0]["outcome"], "pass");
}

#[test]
fn an_empty_store_is_an_empty_fleet_and_a_bad_store_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    // A store that does not exist is refused (a mistyped --db), one that holds no run is an empty fleet.
    let out = rtgauge()
        .args(["fleet", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!db.exists());
    rtgauge_store::SqliteStore::open(&db).unwrap();
    let out = rtgauge()
        .args(["fleet", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0 hosts, 0 latest runs (one per host and profile)\n\n\
         host  profile       run  status       verdict    cyclic µs    oslat µs       age  audit fail\n\n\
         outliers: none (needs at least 3 hosts)\n"
    );
    let bad = dir.path().join("not-a-db");
    std::fs::write(
        &bad,
        "this is not SQLite, nothing like it at all, not even close",
    )
    .unwrap();
    let out = rtgauge()
        .args(["fleet", "--db", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("rtgauge: error: --db ") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn imported_rt_tests_runs_each_keep_a_row_and_a_nameless_host_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("imports.db");
    let db = db.to_str().unwrap();
    let f = |n: &str| common::fixture(&format!("rt-tests/{n}"));
    // Host `vm` (the JSON files say so): a cyclictest and an oslat run, no profile. The text files name no host.
    let out = rtgauge()
        .args(["import", "--db", db])
        .args([
            f("cyclictest-h400.json"),
            f("oslat-2core.json"),
            f("cyclictest-h20.txt"),
            f("oslat-2core.txt"),
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .args(["fleet", "--format", "json", "--db", db])
        .output()
        .unwrap();
    assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<(String, String, i64)> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["host"].as_str().unwrap().to_string(),
                e["probes"].as_str().unwrap().to_string(),
                e["run"].as_i64().unwrap(),
            )
        })
        .collect();
    // Every imported run is a row of its own, each (host, probes) once, no blank host.
    assert_eq!(
        rows,
        [
            ("(unknown host)".into(), "cyclic".into(), 3),
            ("(unknown host)".into(), "oslat".into(), 4),
            ("vm".into(), "cyclic".into(), 1),
            ("vm".into(), "oslat".into(), 2),
        ]
    );
    assert_eq!(v["hosts"], 2);
    let out = rtgauge().args(["fleet", "--db", db]).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("vm              (oslat)         2  complete")),
        "{text}"
    );
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("host "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 4, "{text}");
    assert!(
        table.iter().all(|l| !l.starts_with(' ')),
        "a row with a blank host:\n{text}"
    );
    // A later run of the same host and probes supersedes the earlier one, as with a profile.
    let out = rtgauge()
        .args(["import", "--db", db])
        .arg(f("cyclictest-N-H50.json"))
        .output()
        .unwrap();
    assert_ok(&out);
    let out = rtgauge()
        .args(["fleet", "--format", "json", "--db", db])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let vm_cyclic: Vec<i64> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["host"] == "vm" && e["probes"] == "cyclic")
        .map(|e| e["run"].as_i64().unwrap())
        .collect();
    assert_eq!(vm_cyclic, [5]);
    // `compare --host` takes the name `fleet` shows.
    let out = rtgauge()
        .args([
            "compare",
            "--host",
            "(unknown host)",
            "--host",
            "vm",
            "--db",
            db,
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("baseline: run 4"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn the_playbooks_pass_syntax_check_and_ansible_lint() {
    for play in ["site.yml", "audit.yml", "push.yml"] {
        let out = common::program("ansible-playbook")
            .current_dir(ansible_dir())
            .env("ANSIBLE_CONFIG", ansible_dir().join("ansible.cfg"))
            .args(["-i", "inventory.example.yml", "--syntax-check", play])
            .output()
            .unwrap();
        assert_ok(&out);
    }
    let out = common::program("ansible-lint")
        .current_dir(ansible_dir())
        .env("ANSIBLE_CONFIG", ansible_dir().join("ansible.cfg"))
        .args([
            "--nocolor",
            "site.yml",
            "audit.yml",
            "push.yml",
            "roles/rtgauge",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let all =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(all.contains("0 failure(s), 0 warning(s)"), "{all}");
}

#[test]
fn the_kubernetes_manifests_pass_rtgauge_audit_k8s() {
    let dir = repo().join("deploy/k8s");
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    manifests.sort();
    let names: Vec<String> = manifests
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(names, ["monitor-daemonset.yaml", "qualify-job.yaml"]);
    for m in &manifests {
        let out = rtgauge()
            .args(["audit", "--k8s", m.to_str().unwrap(), "--format", "json"])
            .output()
            .unwrap();
        assert_ok(&out);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["summary"]["fail"], 0, "{}: {r:#}", m.display());
        assert_eq!(r["summary"]["warn"], 0, "{}: {r:#}", m.display());
        for rule in [
            "k8s-pod-guaranteed-qos",
            "k8s-pod-whole-cpus",
            "k8s-pod-runtimeclass",
            "k8s-pod-crio-annotations",
            "k8s-pod-rt-capabilities",
        ] {
            let f = r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["id"] == rule)
                .unwrap();
            assert_eq!(f["status"], "pass", "{}: {f:#}", m.display());
        }
        // Capabilities instead of privileged, and no host PID namespace.
        let text = std::fs::read_to_string(m).unwrap();
        let keys: Vec<&str> = text
            .lines()
            .map(str::trim_start)
            .filter(|l| !l.starts_with('#'))
            .collect();
        assert!(keys.contains(&"privileged: false"), "{}", m.display());
        assert!(!keys.contains(&"privileged: true"), "{}", m.display());
        assert!(
            !keys.iter().any(|l| l.starts_with("hostPID:")),
            "{}",
            m.display()
        );
        assert!(text.contains(r#"add: ["SYS_NICE", "IPC_LOCK", "SYS_RAWIO"]"#));
    }
}
