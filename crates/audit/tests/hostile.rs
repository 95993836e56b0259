//! Hostile trees: arbitrary bytes in every file the audit and the fingerprint parse must never panic them, and
//! the audit still reports every rule.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rtgauge_audit::{rules, run_audit, AuditOptions};
use rtgauge_host::fingerprint::read_fingerprint;
use rtgauge_host::HostRoot;
use rtgauge_lint::{k8s::lint_k8s, libvirt::lint_libvirt, vmx::lint_vmx};
use std::time::Duration;

const FILES: [&str; 32] = [
    "/proc/cmdline",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/interrupts",
    "/proc/softirqs",
    "/proc/stat",
    "/proc/swaps",
    "/proc/1/status",
    "/proc/7/task/7/status",
    "/proc/7/task/7/stat",
    "/proc/7/environ",
    "/proc/self/status",
    "/proc/self/limits",
    "/proc/irq/5/effective_affinity_list",
    "/proc/irq/5/smp_affinity_list",
    "/proc/irq/default_smp_affinity",
    "/proc/sys/kernel/version",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/nohz_full",
    "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
    "/sys/devices/system/cpu/cpu0/cpuidle/state1/latency",
    "/sys/devices/system/node/node0/meminfo",
    "/sys/devices/virtual/workqueue/cpumask",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/etc/tuned/active_profile",
    "/etc/tuned/realtime-variables.conf",
    "/etc/tuned/bootcmdline",
    "/etc/sysconfig/irqbalance",
    "/dev/cpu_dma_latency",
];

const PSEUDO: [&str; 5] = [
    "/.rtgauge/adjtimex",
    "/.rtgauge/cpuid-hypervisor-vendor",
    "/.rtgauge/sample2/interval_ns",
    "/.rtgauge/sample2/proc/interrupts",
    "/.rtgauge/sample2/proc/stat",
];

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        // Mostly-plausible text: digits, separators and keywords mixed.
        "[0-9a-z ,:\\-\\[\\]()=\\n\\t\"^]{0,120}".prop_map(|s| s.into_bytes()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn audit_and_fingerprint_never_panic(contents in proptest::collection::vec(bytes(), FILES.len() + PSEUDO.len())) {
        let dir = tempfile::tempdir().unwrap();
        for (path, b) in FILES.iter().chain(PSEUDO.iter()).zip(&contents) {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b).unwrap();
        }
        let root = HostRoot::at(dir.path());
        let _ = read_fingerprint(&root);
        let r = run_audit(&root, &AuditOptions { sample: Some(Duration::from_secs(1)), ..Default::default() });
        prop_assert_eq!(r.findings.len(), rules().len());
    }

    #[test]
    fn linters_never_panic(b in bytes()) {
        let s = String::from_utf8_lossy(&b);
        let _ = lint_vmx("x.vmx", &s);
        let _ = lint_libvirt("x.xml", &format!("<domain><vcpu>{s}</vcpu><cputune><vcpupin vcpu='{s}' cpuset='{s}'/></cputune></domain>"));
        let _ = lint_k8s("x.yaml", &format!("kind: Pod\nmetadata:\n  annotations:\n    cpu-c-states.crio.io: \"{s}\"\nspec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        cpu: \"{s}\"\n"));
    }
}
