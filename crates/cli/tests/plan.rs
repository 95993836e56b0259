//! End-to-end tests of `rtgauge plan`: golden outputs on the 2-socket, 4-node and SMT fixture trees, the
//! closed loop (plan → --apply-to-tree → audit --root passes every rule the plan addresses), the generated
//! libvirt, .vmx and Kubernetes files pass rtgauge's own linters, impossible requests exit 2 with one line,
//! and `plan --numa` on the 2-node fixture.
#![allow(clippy::unwrap_used)]

use rtgauge_plan::emit::ADDRESSED;
use serde_json::Value;
use std::path::Path;

mod common;
use common::{fixture, run};

/// Every file of an output directory, sorted by path, as one text for a snapshot.
fn dump(dir: &Path) -> String {
    fn walk(base: &Path, d: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|(p, _)| p != "plan.json")
        .map(|(p, t)| format!("===== {p}\n{t}"))
        .collect()
}

/// Plan `fixture` with `args` into a temp dir, apply it to a copy, audit the copy with `target`; return the
/// output dir's dump, the audit findings and the isolated set.
fn closed_loop(
    name: &str,
    args: &[&str],
    target: &str,
) -> (String, Vec<(String, String)>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let tree = tmp.path().join("tree");
    let root = fixture(name);
    let mut a = vec![
        "plan",
        "--root",
        &root,
        "--config-dir",
        out.to_str().unwrap(),
    ];
    a.extend_from_slice(&["--apply-to-tree", tree.to_str().unwrap()]);
    a.extend_from_slice(args);
    let (code, stdout, stderr) = run(&a);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("rtgauge audit --root"), "{stderr}");
    let (code, json, err) = run(&[
        "audit",
        "--root",
        tree.to_str().unwrap(),
        "--target",
        target,
        "--no-sample",
        "--format",
        "json",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    let findings = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (dump(&out), findings, tmp)
}

fn assert_addressed_pass(findings: &[(String, String)], allow_na: &[&str]) {
    for id in ADDRESSED {
        let (_, st) = findings
            .iter()
            .find(|(i, _)| i == id)
            .unwrap_or_else(|| panic!("rule {id} missing"));
        assert!(
            st == "pass" || (st == "n/a" && allow_na.contains(&id)),
            "{id}: {st} (all: {findings:?})"
        );
    }
}

#[test]
fn two_socket_kvm_host_golden_and_closed_loop() {
    let (files, findings, tmp) = closed_loop(
        "tuned-rt-2socket",
        &["--for", "kvm-host", "--vm", "vdu:8:16", "--vm", "cu:4"],
        "kvm-rt-host",
    );
    insta::assert_snapshot!("plan-2socket-kvm-host", files);
    assert_addressed_pass(&findings, &[]);
    // The libvirt domains pass the linter against the planned RT set.
    let iso = files
        .lines()
        .find_map(|l| l.strip_prefix("isolated_cores="))
        .unwrap()
        .to_string();
    for vm in ["vdu", "cu"] {
        let p = tmp.path().join(format!("out/libvirt/{vm}.xml"));
        let (code, out, err) = run(&[
            "audit",
            "--libvirt",
            p.to_str().unwrap(),
            "--isolated",
            &iso,
        ]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("11 pass, 0 warn, 0 fail"), "{out}");
    }
}

#[test]
fn four_node_nic_golden_and_closed_loop() {
    let (files, findings, _tmp) = closed_loop(
        "plan-4node-nic",
        &["--nic", "ens1f0", "--rt-cpus", "12", "--mem", "8"],
        "bare-metal-rt-host",
    );
    insta::assert_snapshot!("plan-4node-nic-host", files);
    assert_addressed_pass(&findings, &[]);
    // The NIC is on node 2 (CPUs 16-23): 7 RT cores there (16 stays housekeeping), the rest on node 3, the
    // other node of the same socket; huge pages follow the RT CPUs.
    assert!(files.contains("isolated_cores=17-23,25-29\n"), "{files}");
    assert!(files.contains("hugepages=2:5,3:3"), "{files}");
}

#[test]
fn smt_k8s_golden_and_closed_loop() {
    let (files, findings, tmp) = closed_loop(
        "untuned-server",
        &["--for", "k8s", "--rt-cpus", "8", "--mem", "4"],
        "k8s-rt-node",
    );
    insta::assert_snapshot!("plan-smt-k8s", files);
    assert_addressed_pass(&findings, &[]);
    // Whole cores: 4 cores and their siblings (c, c+8).
    assert!(files.contains("isolated: \"1-4,9-12\""), "{files}");
    for f in ["k8s/performanceprofile.yaml", "k8s/kubelet-config.yaml"] {
        let p = tmp.path().join("out").join(f);
        let (code, out, err) = run(&["audit", "--k8s", p.to_str().unwrap()]);
        assert_eq!(code, 0, "{f}: {out}{err}");
        assert!(out.contains(" 0 fail"), "{out}");
    }
}

#[test]
fn smt_off_and_guests_close_the_loop() {
    // A KVM host whose tree has the kvm module: its parameters follow the command line.
    let (files, findings, _t) = closed_loop(
        "untuned-server",
        &["--for", "kvm-host", "--vm", "rt1:4"],
        "kvm-rt-host",
    );
    assert!(files.contains("kvm.nx_huge_pages=N"), "{files}");
    assert_addressed_pass(&findings, &[]);
    assert!(findings.contains(&("kvm-host-params".to_string(), "pass".to_string())));
    let (files, findings, _t) =
        closed_loop("untuned-server", &["--smt", "off"], "bare-metal-rt-host");
    assert!(files.contains(" nosmt "), "{files}");
    assert_addressed_pass(&findings, &[]);
    let guest_na = [
        "pstate-driver",
        "cpufreq-governor-epb",
        "mce-corrected-errors",
        "hugepages-pool",
        "numa-balancing",
        "smt-siblings",
        "cpuidle-states",
    ];
    let (files, findings, tmp) = closed_loop(
        "photon-rt-esxi-guest",
        &["--for", "vmware-guest"],
        "rt-guest",
    );
    assert_addressed_pass(&findings, &guest_na);
    assert!(files.contains("numvcpus = \"4\""), "{files}");
    let vmx = tmp.path().join("out/vmx/guest.vmx");
    let (code, out, err) = run(&["audit", "--vmx", vmx.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(" 0 fail"), "{out}");
    let (_, findings, _t) = closed_loop("kvm-guest", &["--for", "kvm-guest"], "rt-guest");
    assert_addressed_pass(&findings, &guest_na);
}

#[test]
fn impossible_requests_are_one_line_exit_2() {
    let root = fixture("openshift-rt-node");
    let (code, out, err) = run(&["plan", "--root", &root, "--rt-cpus", "20"]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot place 20 RT CPUs on this 8-CPU machine: at most 7 remain"),
        "{err}"
    );
    assert!(out.is_empty());
    for (args, want) in [
        (
            vec!["--rt-per-node", "9"],
            "--rt-per-node 9: node 0 has 7 CPUs left",
        ),
        (vec!["--nic", "eth9"], "--nic eth9: no such interface"),
        (
            vec!["--housekeeping", "8"],
            "--housekeeping 8: leaves no CPU",
        ),
        (
            vec!["--for", "kvm-host", "--vm", "big:12"],
            "VM big needs 12 vCPUs on one NUMA node",
        ),
        (
            vec!["--vm", "x:2"],
            "--vm: VMs are placed only with --for kvm-host",
        ),
        (
            vec!["--for", "kvm-host", "--vm", "a b:2"],
            "the VM name must be",
        ),
        (vec!["--mem", "100"], "needs 100 GiB of huge pages"),
    ] {
        let mut a = vec!["plan", "--root", &root];
        a.extend(args.iter().copied());
        let (code, _, err) = run(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    // A tree that already exists is not overwritten.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("keep"), "x").unwrap();
    let (code, _, err) = run(&[
        "plan",
        "--root",
        &root,
        "--apply-to-tree",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("exists and is not empty"), "{err}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("keep")).unwrap(),
        "x"
    );
    // A copy inside the tree it copies is refused (it would copy itself without end).
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(src.path().join("sys/devices/system/cpu")).unwrap();
    std::fs::write(src.path().join("sys/devices/system/cpu/online"), "0-3\n").unwrap();
    let inside = src.path().join("after");
    let (code, _, err) = run(&[
        "plan",
        "--root",
        src.path().to_str().unwrap(),
        "--apply-to-tree",
        inside.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("inside the --root tree"), "{err}");
    assert!(!inside.exists());
    // A tree without topology files: each CPU is a core, no panic.
    let (code, out, err) = run(&[
        "plan",
        "--root",
        src.path().to_str().unwrap(),
        "--rt-cpus",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("RT CPUs (I)           1-3"), "{out}");
    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&["plan", "--root", empty.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("no online CPU found"), "{err}");
}

#[test]
fn apply_to_tree_creates_parents_and_a_refused_request_writes_nothing() {
    let root = fixture("openshift-rt-node");
    let tmp = tempfile::tempdir().unwrap();
    // A nested new directory is created as `mkdir -p` would, and the copy audits like any other.
    let tree = tmp.path().join("new/deeper/after");
    let out = tmp.path().join("out");
    let (code, _, err) = run(&[
        "plan",
        "--root",
        &root,
        "--config-dir",
        out.to_str().unwrap(),
        "--apply-to-tree",
        tree.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(tree.join("proc/cmdline").is_file(), "{err}");
    assert!(out.join("cmdline.txt").is_file());
    // Each refused request (a bad --apply-to-tree, a bad --config-dir, an impossible plan) leaves no
    // --config-dir directory and prints no plan.
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), "x").unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out2 = tmp.path().join("out2");
    let o2 = out2.to_str().unwrap();
    let inside = format!("{root}/after");
    let file_child = file.join("after");
    let out_in_tree = tmp.path().join("t/out");
    let t = tmp.path().join("t");
    for (args, want) in [
        (
            vec![
                "--config-dir",
                o2,
                "--apply-to-tree",
                full.to_str().unwrap(),
            ],
            "exists and is not empty",
        ),
        (
            vec!["--config-dir", o2, "--apply-to-tree", &inside],
            "inside the --root tree",
        ),
        (
            vec![
                "--config-dir",
                o2,
                "--apply-to-tree",
                file_child.to_str().unwrap(),
            ],
            "is not a directory",
        ),
        (
            vec![
                "--config-dir",
                out_in_tree.to_str().unwrap(),
                "--apply-to-tree",
                t.to_str().unwrap(),
            ],
            "is inside it",
        ),
        (
            vec!["--config-dir", o2, "--rt-cpus", "20"],
            "cannot place 20 RT CPUs",
        ),
        (
            vec!["--config-dir", file_child.to_str().unwrap()],
            "--config-dir",
        ),
    ] {
        let mut a = vec!["plan", "--root", &root];
        a.extend(args.iter().copied());
        let (code, stdout, err) = run(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(!out2.exists(), "{args:?} wrote {}", out2.display());
        assert!(!t.exists(), "{args:?} wrote {}", t.display());
    }
    assert_eq!(std::fs::read_to_string(full.join("keep")).unwrap(), "x");
    assert!(!Path::new(&inside).exists());
}

#[test]
fn an_online_list_out_of_range_is_named_with_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let cpu = tmp.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    let root = tmp.path().to_str().unwrap();
    for (list, want) in [
        (
            "0-99999",
            "/sys/devices/system/cpu/online: out of range: CPU 99999 is above the supported maximum 65535",
        ),
        (
            "0-3,99999999999999999999",
            "out of range: CPU 99999999999999999999 is above the supported maximum 65535",
        ),
        (
            "0-3,x",
            "/sys/devices/system/cpu/online: 'x' is not a CPU number or range",
        ),
        ("", "no online CPU found"),
    ] {
        std::fs::write(cpu.join("online"), format!("{list}\n")).unwrap();
        let (code, stdout, err) = run(&["plan", "--root", root]);
        assert_eq!(code, 2, "{list}: {err}");
        assert!(err.contains(&format!("--root {root}: ")), "{err}");
        assert!(err.contains(want), "{list}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(stdout.is_empty());
    }
    // The largest list accepted is planned.
    std::fs::write(cpu.join("online"), "0-65535\n").unwrap();
    let (code, stdout, err) = run(&["plan", "--root", root, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["online"], "0-65535", "{stdout:.300}");
}

#[test]
fn numa_names_non_local_work_and_the_gain() {
    let (code, out, err) = run(&[
        "plan",
        "--numa",
        "--root",
        &fixture("numa-2node"),
        "--matrix",
        &fixture("plan-numa/matrix-2node.json"),
    ]);
    assert_eq!(code, 0, "{err}");
    // dbserver: 3 MiB on node 0, 1 MiB on node 1, runs on node 0: 75 % local; 0.75·90 + 0.25·145 = 103.75 ns
    // → 90 ns is −13.3 %; bandwidth 1/(0.75/11 + 0.25/7) = 9.625 GB/s → 11 is +14.3 %.
    assert!(out.contains("pid 100 dbserver — 75.0 % local"), "{out}");
    assert!(
        out.contains("memory stall time −13.3 %, read bandwidth +14.3 %"),
        "{out}"
    );
    // dbworker: all of its memory on node 1, runs on node 0.
    assert!(out.contains("pid 101 dbworker — 0.0 % local"), "{out}");
    assert!(out.contains("migratepages 101 all 0"), "{out}");
    assert!(
        out.contains("memory stall time −37.9 %, read bandwidth +57.1 %"),
        "{out}"
    );
    assert!(out.contains("pid 200 vdu — 89.0 % local"), "{out}");
    assert!(
        out.contains("cgroup /kubepods/podA/c1 — 37.5 % local"),
        "{out}"
    );
    assert!(
        out.contains("echo 0 > /sys/fs/cgroup/kubepods/podA/c1/cpuset.mems"),
        "{out}"
    );
    // spread may run on both nodes: its memory is local wherever it is.
    assert!(!out.contains("spread"), "{out}");
    // Without a matrix and without SLIT distances: named, gain not estimated.
    let (code, out, _) = run(&["plan", "--numa", "--root", &fixture("numa-2node")]);
    assert_eq!(code, 0);
    assert!(
        out.contains("gains not estimated") && out.contains("dbworker"),
        "{out}"
    );
    // SLIT distances of the 4-node fixture give a relative estimate.
    let (code, out, _) = run(&[
        "plan",
        "--numa",
        "--root",
        &fixture("plan-4node-nic"),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["matrix"]["source"], "Slit", "{out}");
    // A matrix file without NUMA cells is one clear line, exit 2.
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("m.json");
    std::fs::write(&bad, "{\"probes\": []}").unwrap();
    let (code, _, err) = run(&[
        "plan",
        "--numa",
        "--root",
        &fixture("numa-2node"),
        "--matrix",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no NUMA matrix"), "{err}");
}

#[test]
fn numa_refuses_a_matrix_without_usable_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let cell = |c: u32, m: u32, lat: &str, err: &str| {
        format!(
            "{{\"cpu_node\": {c}, \"mem_node\": {m}, \"cpu\": 0, \"verified_node\": null, \"latency_ns\": {lat}, \"read_bytes_per_sec\": 1e10{err}}}"
        )
    };
    let failed = r#", "error": "mbind: Operation not permitted""#;
    let out = tmp.path().join("out");
    for (i, (cells, want)) in [
        (String::new(), "the NUMA matrix is empty"),
        (
            [cell(0, 0, "0", failed), cell(0, 1, "0", failed)].join(","),
            "none of its 2 NUMA cells holds a measurement",
        ),
        (
            [cell(0, 0, "90", ""), cell(1, 1, "90", "")].join(","),
            "hold no node's local and remote cost",
        ),
        (
            [cell(0, 0, "90", ""), cell(0, 3, "140", "")].join(","),
            "this machine has nodes 0-1",
        ),
        (
            [cell(0, 0, "90", ""), cell(0, 1, "1e308", "")].join(","),
            "cell 0→1: latency_ns 1e308 is impossible",
        ),
        (
            [cell(0, 0, "-90", ""), cell(0, 1, "140", "")].join(","),
            "cell 0→0: latency_ns -90 is impossible",
        ),
        (
            [
                cell(0, 0, "90", ""),
                cell(0, 1, "140", ""),
                cell(0, 1, "100", ""),
            ]
            .join(","),
            "two cells for 0→1",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let file = tmp.path().join(format!("m{i}.json"));
        std::fs::write(&file, format!("{{\"numa\": [{cells}]}}")).unwrap();
        let (code, stdout, err) = run(&[
            "plan",
            "--numa",
            "--root",
            &fixture("numa-2node"),
            "--matrix",
            file.to_str().unwrap(),
            "--config-dir",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{cells}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("--matrix {}: ", file.display())) && err.contains(want),
            "{err}"
        );
        assert!(stdout.is_empty() && !out.exists(), "{stdout}");
    }
    // Half the cells failed: accepted with a warning; the gains the measured half allows are given.
    let file = tmp.path().join("half.json");
    let cells = [
        cell(0, 0, "90", ""),
        cell(0, 1, "145", ""),
        cell(1, 1, "0", failed),
        cell(1, 0, "0", failed),
    ];
    std::fs::write(&file, format!("{{\"numa\": [{}]}}", cells.join(","))).unwrap();
    let (code, stdout, err) = run(&[
        "plan",
        "--numa",
        "--root",
        &fixture("numa-2node"),
        "--matrix",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 of 4 NUMA cells failed"), "{err}");
    assert!(stdout.contains("memory stall time −13.3 %"), "{stdout}");
    assert!(
        stdout.contains("not estimated (the matrix has no cost for these nodes)"),
        "{stdout}"
    );
    // Remote cheaper than local (as measured): binding local costs time, printed with its sign.
    let file = tmp.path().join("inverted.json");
    let cells = [cell(0, 0, "100", ""), cell(0, 1, "80", "")];
    std::fs::write(&file, format!("{{\"numa\": [{}]}}", cells.join(","))).unwrap();
    let (code, stdout, err) = run(&[
        "plan",
        "--numa",
        "--root",
        &fixture("numa-2node"),
        "--matrix",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // dbserver: 0.75·100 + 0.25·80 = 95 ns → 100 ns: +5.3 % (bandwidth equal: ±0.0 %).
    assert!(
        stdout.contains("memory stall time +5.3 %, read bandwidth ±0.0 %"),
        "{stdout}"
    );
    assert!(!stdout.contains("−-") && !stdout.contains("+-"), "{stdout}");
}

/// A copy of fixture `name` under `tmp`, to break one file of it.
fn fixture_copy(tmp: &Path, name: &str) -> std::path::PathBuf {
    let dst = tmp.join(name);
    let st = common::program("cp")
        .args(["-r", &fixture(name), dst.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    dst
}

#[test]
fn malformed_topology_files_are_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let cpu = "sys/devices/system/cpu";
    // (fixture, file to break, its new text, extra arguments, the message)
    let cases: [(&str, String, &str, &[&str], &str); 5] = [
        (
            "tuned-rt-2socket",
            format!("{cpu}/cpu0/topology/thread_siblings_list"),
            "0,16,70000\n",
            &[],
            "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list: out of range: CPU 70000",
        ),
        (
            "plan-4node-nic",
            "sys/devices/system/node/node1/cpulist".into(),
            "0-70000\n",
            &[],
            "/sys/devices/system/node/node1/cpulist: out of range: CPU 70000",
        ),
        (
            "plan-4node-nic",
            "sys/class/net/ens1f0/device/numa_node".into(),
            "99999\n",
            &["--nic", "ens1f0"],
            "/sys/class/net/ens1f0/device/numa_node: node 99999 is not a NUMA node of this machine (nodes: 0, 1, 2, 3)",
        ),
        (
            "openshift-rt-node",
            format!("{cpu}/online"),
            "0-15\n",
            &[],
            "/sys/devices/system/cpu/online: lists CPU(s) 8-15 that have no /sys/devices/system/cpu/cpuN directory",
        ),
        (
            "untuned-server",
            format!("{cpu}/cpu3/topology/core_id"),
            "three\n",
            &[],
            "/sys/devices/system/cpu/cpu3/topology/core_id: 'three' is not a number",
        ),
    ];
    for (i, (name, file, text, extra, want)) in cases.iter().enumerate() {
        let case = tmp.path().join(i.to_string());
        std::fs::create_dir_all(&case).unwrap();
        let root = fixture_copy(&case, name);
        // Unbroken, the tree plans.
        let r = root.to_str().unwrap();
        let mut a = vec!["plan", "--root", r];
        a.extend(extra.iter().copied());
        let (code, _, err) = run(&a);
        assert_eq!(code, 0, "{name}: {err}");
        std::fs::write(root.join(file), text).unwrap();
        let out = case.join("out");
        a.extend(["--config-dir", out.to_str().unwrap()]);
        let (code, stdout, err) = run(&a);
        assert_eq!(code, 2, "{name} {file}: {err}");
        assert!(err.contains(want), "{name} {file}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(!out.exists());
    }
}

#[test]
fn fingerprint_and_audit_warn_on_a_malformed_topology_file_and_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_copy(tmp.path(), "tuned-rt-2socket");
    let r = root.to_str().unwrap();
    let (code_before, audit_before, _) = run(&["audit", "--root", r, "--no-sample"]);
    for c in [0, 16] {
        std::fs::write(
            root.join(format!(
                "sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
            )),
            "0,16,70000\n",
        )
        .unwrap();
    }
    let want = "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list: out of range: CPU 70000 is above the supported maximum 65535 (read as absent)";
    let (code, out, err) = run(&["fingerprint", "--root", r, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("rtgauge: warning: --root ") && err.contains(want),
        "{err}"
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cpu"]["online"], "0-31", "{out:.400}");
    let (code, out, err) = run(&["audit", "--root", r, "--no-sample"]);
    assert_eq!(code, code_before, "{err}");
    assert!(err.contains(want), "{err}");
    assert!(!out.is_empty() && !audit_before.is_empty());
}
