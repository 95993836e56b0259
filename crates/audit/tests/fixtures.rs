//! Whole-machine fixture trees (tests/fixtures/<name>/) and definition files: golden findings, capture → root
//! replay, and the seed settings as .vmx / libvirt / pod files with one-setting variations.
#![allow(clippy::unwrap_used)]

use rtgauge_audit::{run_audit, AuditOptions};
use rtgauge_host::HostRoot;
use rtgauge_lint::{k8s::lint_k8s, libvirt::lint_libvirt, vmx::lint_vmx};
use rtgauge_model::audit::{AuditReport, Finding, Status};
use std::path::PathBuf;
use std::time::Duration;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn sampled() -> AuditOptions {
    AuditOptions {
        sample: Some(Duration::from_secs(2)),
        ..Default::default()
    }
}

/// Findings as stable text: status, id, summary, evidence.
fn render(r: &AuditReport) -> String {
    let mut s = format!(
        "target {:?} ({:?}); RT set {:?} from {:?}\n",
        r.target.map(|t| t.to_string()),
        r.target_source,
        r.isolated.as_ref().map(|i| i.to_string()),
        r.isolated_source
    );
    for f in &r.findings {
        s.push_str(&format!(
            "{} {} [{}]: {}\n",
            f.status, f.id, f.severity, f.summary
        ));
        for e in &f.evidence {
            s.push_str(&format!("    {} @ {} = {}\n", e.what, e.source, e.value));
        }
    }
    s
}

fn audit_fixture(name: &str) -> AuditReport {
    run_audit(&HostRoot::at(fixtures().join(name)), &sampled())
}

#[test]
fn golden_tuned_rt_2socket() {
    let r = audit_fixture("tuned-rt-2socket");
    assert!(!r.failed(), "{}", render(&r));
    insta::assert_snapshot!("tuned-rt-2socket", render(&r));
}

#[test]
fn golden_untuned_server() {
    let r = audit_fixture("untuned-server");
    assert!(r.failed());
    insta::assert_snapshot!("untuned-server", render(&r));
}

#[test]
fn golden_photon_rt_esxi_guest() {
    let r = audit_fixture("photon-rt-esxi-guest");
    assert!(!r.failed(), "{}", render(&r));
    assert_eq!(r.target.map(|t| t.to_string()).as_deref(), Some("rt-guest"));
    insta::assert_snapshot!("photon-rt-esxi-guest", render(&r));
}

#[test]
fn golden_kvm_guest() {
    let r = audit_fixture("kvm-guest");
    let status = |id: &str| r.findings.iter().find(|f| f.id == id).map(|f| f.status);
    assert_eq!(status("guest-steal-time"), Some(Status::Fail));
    assert_eq!(status("irq-activity-on-isolated"), Some(Status::Fail));
    insta::assert_snapshot!("kvm-guest", render(&r));
}

#[test]
fn golden_openshift_rt_node() {
    let r = audit_fixture("openshift-rt-node");
    assert!(!r.failed(), "{}", render(&r));
    assert_eq!(
        r.target.map(|t| t.to_string()).as_deref(),
        Some("k8s-rt-node")
    );
    let status = |id: &str| r.findings.iter().find(|f| f.id == id).map(|f| f.status);
    // isolcpus=managed_irq,<I> leaves the isolated file empty by design: not a failure.
    assert_eq!(status("cmdline-isolcpus"), Some(Status::Pass));
    assert_eq!(status("timer-migration"), Some(Status::Pass));
    assert_eq!(status("kubelet-reserved-vs-host"), Some(Status::Pass));
    insta::assert_snapshot!("openshift-rt-node", render(&r));
}

#[test]
fn golden_this_machine_capture() {
    let r = run_audit(&HostRoot::at(fixtures().join("this-machine")), &sampled());
    insta::assert_snapshot!("this-machine", render(&r));
}

/// Captured in the kernel lab (`audit --capture` inside Debian's 6.1 PREEMPT_RT kernel on a 2-socket ×
/// 4-core × 2-thread, 2-node QEMU guest; crates/cli/tests/lab.rs with RTGAUGE_LAB_KEEP): as booted, and
/// after `rtgauge plan`'s command line, IRQ script and sysctls (sampled 2 s). Real kernel files, not made by
/// hand: the planned one is a real tuned RT host, with TCG's limits (no nonstop_tsc, no daemons).
#[test]
fn golden_lab_rt_2socket_smt() {
    let r = audit_fixture("lab-rt-2socket-smt");
    let status = |id: &str| r.findings.iter().find(|f| f.id == id).map(|f| f.status);
    assert_eq!(status("kernel-preempt-rt"), Some(Status::Pass));
    assert_eq!(status("cmdline-isolcpus"), Some(Status::Fail));
    insta::assert_snapshot!("lab-rt-2socket-smt", render(&r));
    let r = audit_fixture("lab-rt-2socket-smt-planned");
    assert_eq!(
        r.isolated.as_ref().map(|i| i.to_string()).as_deref(),
        Some("2-7,10-15")
    );
    for id in [
        "cmdline-isolcpus",
        "cmdline-nohz-full",
        "irq-affinity-isolated",
        "workqueue-cpumask",
        "tasks-on-isolated",
        "smt-siblings",
    ] {
        let f = r.findings.iter().find(|f| f.id == id).unwrap();
        assert_eq!(f.status, Status::Pass, "{}", render(&r));
    }
    insta::assert_snapshot!("lab-rt-2socket-smt-planned", render(&r));
}

fn replay_equals(root: HostRoot, opts: &AuditOptions) {
    let rec = root.recording();
    let first = run_audit(&rec, opts);
    let dir = tempfile::tempdir().unwrap();
    rec.write_capture(dir.path()).unwrap();
    let second = run_audit(&HostRoot::at(dir.path()), opts);
    let strip = |r: &AuditReport| -> Vec<Finding> { r.findings.clone() };
    assert_eq!(strip(&first), strip(&second));
    assert_eq!(first.isolated, second.isolated);
    assert_eq!(first.target, second.target);
}

#[test]
fn capture_then_root_reproduces_fixture_findings() {
    for name in [
        "tuned-rt-2socket",
        "untuned-server",
        "photon-rt-esxi-guest",
        "kvm-guest",
        "openshift-rt-node",
        "this-machine",
        "lab-rt-2socket-smt",
        "lab-rt-2socket-smt-planned",
    ] {
        replay_equals(HostRoot::at(fixtures().join(name)), &sampled());
    }
}

#[test]
fn capture_then_root_reproduces_live_findings() {
    replay_equals(HostRoot::live(), &AuditOptions::default());
    replay_equals(
        HostRoot::live(),
        &AuditOptions {
            sample: Some(Duration::from_millis(50)),
            ..Default::default()
        },
    );
}

#[test]
fn fixture_trees_have_no_empty_directories() {
    // git drops empty directories; a fixture must replay the same after a clone.
    fn walk(p: &std::path::Path, bad: &mut Vec<String>) {
        let entries: Vec<_> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap()).collect();
        if entries.is_empty() {
            bad.push(p.display().to_string());
        }
        for e in entries {
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), bad);
            }
        }
    }
    let mut bad = Vec::new();
    walk(&fixtures(), &mut bad);
    assert!(bad.is_empty(), "empty directories: {bad:?}");
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(fixtures().join(rel)).unwrap()
}

fn status_of(r: &AuditReport, id: &str) -> Status {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id}"))
        .status
}

/// Apply one edit (the old text must be present) and check that rule `id` fails.
fn variation_fails(
    lint: fn(&str, &str) -> Result<AuditReport, rtgauge_lint::LintError>,
    base: &str,
    old: &str,
    new: &str,
    id: &str,
) {
    assert!(base.contains(old), "fixture lacks {old:?}");
    let r = lint("variant", &base.replacen(old, new, 1)).unwrap();
    assert_eq!(
        status_of(&r, id),
        Status::Fail,
        "{old:?} → {new:?} should fail {id}:\n{}",
        render(&r)
    );
}

/// Every case `(old, new, id)` of a table: the edit must fail its rule.
fn variations_fail(
    lint: fn(&str, &str) -> Result<AuditReport, rtgauge_lint::LintError>,
    base: &str,
    cases: &[(&str, &str, &str)],
) {
    for (old, new, id) in cases {
        variation_fails(lint, base, old, new, id);
    }
}

#[test]
fn seed_vmx_files_pass() {
    for f in [
        "vmx/seed000-ran-exclusive-pinning.vmx",
        "vmx/seed003-latency-sensitivity-high.vmx",
    ] {
        let r = lint_vmx(f, &read(f)).unwrap();
        assert!(!r.failed(), "{f}:\n{}", render(&r));
        insta::assert_snapshot!(f.replace('/', "_"), render(&r));
    }
}

#[test]
fn seed000_vmx_variations_fail_their_rule() {
    let base = read("vmx/seed000-ran-exclusive-pinning.vmx");
    let cases = [
        ("sched.vcpu3.affinity = \"8\"\n", "", "vmx-vcpu-affinity"),
        (
            "sched.vcpu3.affinity = \"8\"",
            "sched.vcpu3.affinity = \"6\"",
            "vmx-vcpu-affinity",
        ),
        (
            "sched.cpu.affinity.exclusive = \"TRUE\"",
            "sched.cpu.affinity.exclusive = \"FALSE\"",
            "vmx-vcpu-affinity",
        ),
        (
            "sched.cpu.affinity.exclusive = \"TRUE\"\n",
            "",
            "vmx-latency-sensitivity",
        ),
        (
            "sched.mem.min = \"16384\"",
            "sched.mem.min = \"8192\"",
            "vmx-mem-reservation",
        ),
        (
            "sched.mem.min = \"16384\"\nsched.mem.pin = \"TRUE\"\n",
            "",
            "vmx-mem-reservation",
        ),
        (
            "sched.mem.prealloc = \"TRUE\"",
            "sched.mem.prealloc = \"FALSE\"",
            "vmx-mem-prealloc",
        ),
        (
            "sched.mem.prealloc.pinnedMainMem = \"TRUE\"",
            "sched.mem.prealloc.pinnedMainMem = \"FALSE\"",
            "vmx-mem-prealloc",
        ),
        (
            "sched.mem.lpage.enable1GPage = \"TRUE\"\n",
            "",
            "vmx-1g-pages",
        ),
        (
            "sched.mem.min = \"16384\"\nsched.mem.pin = \"TRUE\"\n",
            "",
            "vmx-1g-pages",
        ),
        (
            "sched.cpu.affinity.exclusiveNoStats = \"TRUE\"\n",
            "",
            "vmx-exclusive-nostats",
        ),
        (
            "monitor.forceEnableMPTI = \"TRUE\"",
            "monitor.forceEnableMPTI = \"FALSE\"",
            "vmx-force-mpti",
        ),
        (
            "timeTracker.lowLatency = \"TRUE\"\n",
            "",
            "vmx-timetracker-lowlatency",
        ),
        (
            "cpuid.coresPerSocket = \"1\"",
            "cpuid.coresPerSocket = \"1\"\nvcpu.hotadd = \"TRUE\"",
            "vmx-vtopology",
        ),
    ];
    variations_fail(lint_vmx, &base, &cases);
}

#[test]
fn seed003_vmx_variations_fail_their_rule() {
    let base = read("vmx/seed003-latency-sensitivity-high.vmx");
    let cases = [
        (
            "sched.cpu.latencySensitivity = \"high\"",
            "sched.cpu.latencySensitivity = \"normal\"",
            "vmx-latency-sensitivity",
        ),
        (
            "sched.cpu.latencySensitivity = \"high\"\n",
            "",
            "vmx-vcpu-affinity",
        ),
        ("sched.cpu.min = \"8800\"\n", "", "vmx-cpu-reservation"),
        (
            "sched.cpu.units = \"mhz\"",
            "sched.cpu.units = \"mhz\"\nsched.cpu.max = \"4000\"",
            "vmx-cpu-reservation",
        ),
        (
            "sched.mem.min = \"16384\"\nsched.mem.pin = \"TRUE\"\n",
            "",
            "vmx-mem-reservation",
        ),
        (
            "sched.mem.lpage.enable1GPage = \"TRUE\"",
            "sched.mem.lpage.enable1GPage = \"FALSE\"",
            "vmx-1g-pages",
        ),
        (
            "sched.cpu.affinity.exclusiveNoStats = \"TRUE\"",
            "sched.cpu.affinity.exclusiveNoStats = \"FALSE\"",
            "vmx-exclusive-nostats",
        ),
        ("monitor.forceEnableMPTI = \"TRUE\"\n", "", "vmx-force-mpti"),
        (
            "timeTracker.lowLatency = \"TRUE\"",
            "timeTracker.lowLatency = \"false\"",
            "vmx-timetracker-lowlatency",
        ),
        (
            "numvcpus = \"4\"",
            "numvcpus = \"4\"\nmem.hotadd = \"TRUE\"",
            "vmx-vtopology",
        ),
    ];
    variations_fail(lint_vmx, &base, &cases);
}

#[test]
fn libvirt_rt_guest_passes_and_variations_fail() {
    let base = read("libvirt/rt-guest.xml");
    let r = lint_libvirt("rt-guest.xml", &base).unwrap();
    assert!(!r.failed(), "{}", render(&r));
    assert_eq!(r.summary.warn, 0);
    insta::assert_snapshot!("libvirt_rt-guest", render(&r));
    let cases = [
        (
            "    <vcpupin vcpu='3' cpuset='5'/>\n",
            "",
            "libvirt-vcpupin",
        ),
        (
            "<vcpupin vcpu='3' cpuset='5'/>",
            "<vcpupin vcpu='3' cpuset='4-5'/>",
            "libvirt-vcpupin",
        ),
        (
            "<vcpu placement='static'>4</vcpu>",
            "<vcpu placement='auto'>4</vcpu>",
            "libvirt-vcpupin",
        ),
        (
            "    <emulatorpin cpuset='1'/>\n",
            "",
            "libvirt-emulator-iothread-pin",
        ),
        (
            "<emulatorpin cpuset='1'/>",
            "<emulatorpin cpuset='1-2'/>",
            "libvirt-emulator-iothread-pin",
        ),
        (
            "<vcpusched vcpus='1-3'",
            "<vcpusched vcpus='1-4'",
            "libvirt-vcpusched",
        ),
        (
            "scheduler='fifo' priority='1'",
            "scheduler='other'",
            "libvirt-vcpusched",
        ),
        (
            "    <hugepages>\n      <page size='1' unit='G' nodeset='0'/>\n    </hugepages>\n",
            "",
            "libvirt-hugepages",
        ),
        ("    <locked/>\n", "", "libvirt-locked-noshare"),
        ("    <nosharepages/>\n", "", "libvirt-locked-noshare"),
        (
            "<memory mode='strict' nodeset='0'/>",
            "<memory placement='auto'/>",
            "libvirt-numatune",
        ),
        (
            "    <feature policy='require' name='tsc-deadline'/>\n",
            "",
            "libvirt-cpu-model-tsc",
        ),
        ("<pmu state='off'/>", "<pmu state='on'/>", "libvirt-pmu-off"),
        (
            "<hint-dedicated state='on'/>",
            "<hint-dedicated state='off'/>",
            "libvirt-hint-dedicated",
        ),
        (
            "<cpu mode='host-passthrough'",
            "<cpu mode='host-model'",
            "libvirt-hint-dedicated",
        ),
        (
            "<memballoon model='none'/>",
            "<memballoon model='virtio'/>",
            "libvirt-memballoon-none",
        ),
        (
            "<controller type='usb' model='none'/>",
            "<controller type='usb' model='none'/>\n    <graphics type='vnc'/>",
            "libvirt-strip-devices",
        ),
    ];
    variations_fail(lint_libvirt, &base, &cases);
    // migratable on is a warning, not a failure.
    let r = lint_libvirt(
        "x",
        &base.replacen("migratable='off'", "migratable='on'", 1),
    )
    .unwrap();
    assert_eq!(status_of(&r, "libvirt-cpu-model-tsc"), Status::Warn);
}

#[test]
fn k8s_definitions_pass_and_variations_fail() {
    for f in [
        "k8s/rt-pod.yaml",
        "k8s/kubelet-config.yaml",
        "k8s/performanceprofile.yaml",
    ] {
        let r = lint_k8s(f, &read(f)).unwrap();
        assert!(!r.failed(), "{f}:\n{}", render(&r));
        insta::assert_snapshot!(f.replace('/', "_"), render(&r));
    }
    let pod = read("k8s/rt-pod.yaml");
    let cases = [
        (
            "      requests:\n        cpu: \"4\"",
            "      requests:\n        cpu: \"3\"",
            "k8s-pod-guaranteed-qos",
        ),
        (
            "      limits:\n        cpu: \"4\"\n        memory: \"8Gi\"\n",
            "      limits:\n        cpu: \"4\"\n",
            "k8s-pod-guaranteed-qos",
        ),
        (
            "      requests:\n        cpu: \"4\"",
            "      requests:\n        cpu: \"3500m\"",
            "k8s-pod-whole-cpus",
        ),
        (
            "        hugepages-1Gi: \"4Gi\"\n    volumeMounts",
            "        hugepages-1Gi: \"2Gi\"\n    volumeMounts",
            "k8s-pod-hugepages",
        ),
        (
            "  runtimeClassName: performance-rt\n",
            "",
            "k8s-pod-runtimeclass",
        ),
        (
            "    irq-load-balancing.crio.io: \"disable\"\n",
            "",
            "k8s-pod-crio-annotations",
        ),
        (
            "    cpu-quota.crio.io: \"disable\"",
            "    cpu-quota.crio.io: \"enable\"",
            "k8s-pod-crio-annotations",
        ),
        (
            "add: [\"SYS_NICE\", \"IPC_LOCK\"]",
            "add: [\"IPC_LOCK\"]",
            "k8s-pod-rt-capabilities",
        ),
        (
            "add: [\"SYS_NICE\", \"IPC_LOCK\"]",
            "add: [\"SYS_NICE\"]",
            "k8s-pod-rt-capabilities",
        ),
    ];
    variations_fail(lint_k8s, &pod, &cases);
    let kubelet = read("k8s/kubelet-config.yaml");
    let cases = [
        (
            "cpuManagerPolicy: static",
            "cpuManagerPolicy: none",
            "kubelet-cpu-manager",
        ),
        ("reservedSystemCPUs: \"0-1\"\n", "", "kubelet-cpu-manager"),
        (
            "topologyManagerPolicy: single-numa-node",
            "topologyManagerPolicy: best-effort",
            "kubelet-topology-memory-manager",
        ),
        (
            "reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1100Mi\n",
            "",
            "kubelet-topology-memory-manager",
        ),
    ];
    variations_fail(lint_k8s, &kubelet, &cases);
    let pp = read("k8s/performanceprofile.yaml");
    let cases = [
        (
            "reserved: \"0-1\"",
            "reserved: \"0-2\"",
            "performanceprofile-lint",
        ),
        (
            "  realTimeKernel:\n    enabled: true",
            "  realTimeKernel:\n    enabled: false",
            "performanceprofile-lint",
        ),
        (
            "perPodPowerManagement: false",
            "perPodPowerManagement: true",
            "performanceprofile-lint",
        ),
    ];
    variations_fail(lint_k8s, &pp, &cases);
}

#[test]
fn lint_evidence_names_the_line() {
    let r = lint_vmx("s.vmx", &read("vmx/seed003-latency-sensitivity-high.vmx")).unwrap();
    let f = r
        .findings
        .iter()
        .find(|f| f.id == "vmx-latency-sensitivity")
        .unwrap();
    assert_eq!(f.evidence[0].source, "s.vmx:20");
    let r = lint_libvirt("d.xml", &read("libvirt/rt-guest.xml")).unwrap();
    let f = r
        .findings
        .iter()
        .find(|f| f.id == "libvirt-pmu-off")
        .unwrap();
    assert_eq!(f.evidence[0].source, "d.xml:30");
    let r = lint_k8s("p.yaml", &read("k8s/rt-pod.yaml")).unwrap();
    let f = r
        .findings
        .iter()
        .find(|f| f.id == "k8s-pod-runtimeclass")
        .unwrap();
    assert_eq!(f.evidence[0].source, "p.yaml:13");
}

#[test]
fn docs_list_every_rule_id() {
    let doc = std::fs::read_to_string(fixtures().join("../../docs/audit.md")).unwrap();
    let mut ids: Vec<String> = rtgauge_audit::rules()
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    for (lint, f) in [
        (
            lint_vmx as fn(&str, &str) -> _,
            "vmx/seed000-ran-exclusive-pinning.vmx",
        ),
        (lint_libvirt, "libvirt/rt-guest.xml"),
        (lint_k8s, "k8s/rt-pod.yaml"),
        (lint_k8s, "k8s/kubelet-config.yaml"),
        (lint_k8s, "k8s/performanceprofile.yaml"),
    ] {
        let r: AuditReport = lint(f, &read(f)).unwrap();
        ids.extend(r.findings.iter().map(|x| x.id.clone()));
    }
    for id in ids {
        assert!(
            doc.contains(&format!("`{id}`")),
            "docs/audit.md does not list {id}"
        );
    }
}

#[test]
fn golden_fingerprints() {
    for name in [
        "tuned-rt-2socket",
        "untuned-server",
        "photon-rt-esxi-guest",
        "kvm-guest",
        "openshift-rt-node",
        "this-machine",
        "lab-rt-2socket-smt",
        "lab-rt-2socket-smt-planned",
    ] {
        let fp = rtgauge_host::fingerprint::read_fingerprint(&HostRoot::at(fixtures().join(name)));
        insta::assert_json_snapshot!(format!("fingerprint-{name}"), fp);
    }
}
