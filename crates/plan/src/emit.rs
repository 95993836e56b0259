//! The configuration files of a [`Plan`]: kernel command line, tuned variables, irqbalance, systemd
//! CPUAffinity, and per target libvirt domains, .vmx files, a Kubernetes PerformanceProfile and kubelet
//! configuration. Pure rendering: each file is a relative path, its text and one line on what it does.
//! Every generated VM and pod definition passes rtgauge's own linters (tested in `crates/cli/tests/plan.rs`).

use super::{Plan, PlanTarget, Smt, Vendor, VmPlan};

/// One emitted file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFile {
    /// Relative to the output directory.
    pub path: String,
    /// The file's whole content.
    pub text: String,
    /// Where it goes and what it does.
    pub about: String,
}

/// One kernel parameter and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The parameter as it goes on the command line (`key=value` or `key`).
    pub token: String,
    /// Why the plan sets it, one sentence.
    pub why: &'static str,
}

fn p(token: impl Into<String>, why: &'static str) -> Param {
    Param {
        token: token.into(),
        why,
    }
}

/// The kernel command line parameters of the plan.
pub fn kernel_params(plan: &Plan) -> Vec<Param> {
    let mut v = isolation_params(plan);
    // Only an invariant TSC may be trusted without the watchdog: on one that stops or drifts (no
    // nonstop_tsc, as under QEMU's TCG) tsc=reliable would keep a clocksource that is wrong.
    if matches!(plan.vendor, Vendor::Intel | Vendor::Amd) && plan.invariant_tsc {
        v.push(p(
            "tsc=reliable",
            "no clocksource watchdog re-checking the TSC from a timer on every CPU",
        ));
    }
    if !plan.target.is_guest() {
        v.extend(bare_metal_params(plan.vendor));
    }
    if plan.smt == Smt::Off && !plan.offline.is_empty() {
        v.push(p(
            "nosmt",
            "one thread per core online: no sibling shares the RT core's execution units",
        ));
    }
    v.extend(hugepage_params(plan));
    if plan.target == PlanTarget::KvmHost {
        v.extend(kvm_host_params(plan.vendor));
    }
    if plan.target == PlanTarget::K8s {
        v.push(p(
            format!("systemd.cpu_affinity={}", plan.housekeeping),
            "PID 1 and every service start on housekeeping CPUs",
        ));
    }
    v
}

/// What every plan sets: the isolated CPUs (I) kept free of load balancing, ticks, RCU callbacks, IRQs and
/// watchdogs, and no transparent huge pages.
fn isolation_params(plan: &Plan) -> Vec<Param> {
    let i = &plan.isolated;
    let h = &plan.housekeeping;
    vec![
        p(
            format!("isolcpus=managed_irq,domain,{i}"),
            "no scheduler load balancing onto I; kernel-managed IRQs (NVMe, multiqueue NICs) avoid I",
        ),
        p("nohz=on", "dynamic ticks"),
        p(
            format!("nohz_full={i}"),
            "no periodic tick on I while one task runs there",
        ),
        p(
            format!("rcu_nocbs={i}"),
            "RCU callbacks of I run on housekeeping CPUs (rcuo kthreads)",
        ),
        p(
            "rcupdate.rcu_normal_after_boot=1",
            "no expedited RCU grace periods (IPIs to I) after boot",
        ),
        p(
            format!("irqaffinity={h}"),
            "default IRQ affinity: housekeeping CPUs",
        ),
        p(
            "skew_tick=1",
            "per-CPU ticks offset: no lock contention on jiffies from all CPUs at once",
        ),
        p("nosoftlockup", "no soft-lockup watchdog thread waking on I"),
        p("nmi_watchdog=0", "no periodic NMI on every CPU for the hard-lockup detector"),
        p(
            "transparent_hugepage=never",
            "no khugepaged scans or compaction stalls; RT memory uses reserved huge pages instead",
        ),
    ]
}

/// What only a kernel on the hardware sets (a guest's are the hypervisor's business): no corrected
/// machine-check polling, and the vendor's frequency and idle-state limits.
fn bare_metal_params(vendor: Vendor) -> Vec<Param> {
    let mut v = vec![p(
        "mce=ignore_ce",
        "no corrected-machine-check polling timer on every CPU",
    )];
    match vendor {
        Vendor::Intel => {
            v.push(p(
                "intel_pstate=disable",
                "acpi-cpufreq with the performance governor (tuned realtime's model): no P-state transitions",
            ));
            v.push(p(
                "processor.max_cstate=1",
                "ACPI idle: C1 at most (wake-up in ~1-2 µs)",
            ));
            v.push(p(
                "intel_idle.max_cstate=1",
                "intel_idle: C1 at most (C6 costs ~100-200 µs to leave)",
            ));
        }
        Vendor::Amd => {
            v.push(p(
                "amd_pstate=disable",
                "acpi-cpufreq with the performance governor: no CPPC frequency changes",
            ));
            v.push(p(
                "processor.max_cstate=1",
                "ACPI idle: C1 at most (AMD C2 costs hundreds of µs to leave)",
            ));
        }
        Vendor::Other => {}
    }
    v
}

/// The 1 GiB huge pages the plan reserves, per NUMA node; none when it reserves none.
fn hugepage_params(plan: &Plan) -> Vec<Param> {
    if plan.total_hugepages_1g() == 0 {
        return Vec::new();
    }
    let per_node: Vec<String> = plan
        .nodes
        .iter()
        .filter(|n| n.hugepages_1g > 0)
        .map(|n| format!("{}:{}", n.id, n.hugepages_1g))
        .collect();
    vec![
        p(
            "default_hugepagesz=1G",
            "1 GiB pages: no TLB misses walking RT memory",
        ),
        p("hugepagesz=1G", "reserve 1 GiB pages at boot"),
        p(
            format!("hugepages={}", per_node.join(",")),
            "pages per NUMA node (node:count), reserved where each RT consumer runs",
        ),
    ]
}

/// What a KVM host sets so its RT guests' vCPU threads are left alone.
fn kvm_host_params(vendor: Vendor) -> Vec<Param> {
    let mut v = vec![
        p(
            "kvm.kvmclock_periodic_sync=N",
            "no periodic kvmclock update work on the vCPU threads",
        ),
        p(
            "kvm.nx_huge_pages=N",
            "no huge-page splitting and recovery thread (iTLB multihit mitigation off: trusted guests only)",
        ),
    ];
    if vendor == Vendor::Intel {
        v.push(p(
            "kvm_intel.ple_gap=0",
            "no pause-loop exits: a spinning RT vCPU is not descheduled",
        ));
    }
    v
}

/// The kernel parameters as one line.
pub fn cmdline(plan: &Plan) -> String {
    kernel_params(plan)
        .into_iter()
        .map(|p| p.token)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runtime settings the plan needs beside the command line (tuned realtime's `[sysctl]` and `[vm]` groups),
/// as `(sysctl key, /proc/sys path, value, why)`.
pub fn sysctls() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    vec![
        (
            "kernel.nmi_watchdog",
            "/proc/sys/kernel/nmi_watchdog",
            "0",
            "no hard-lockup NMIs",
        ),
        (
            "kernel.soft_watchdog",
            "/proc/sys/kernel/soft_watchdog",
            "0",
            "no soft-lockup watchdog",
        ),
        (
            "kernel.watchdog",
            "/proc/sys/kernel/watchdog",
            "0",
            "both lockup detectors off",
        ),
        (
            "kernel.hung_task_timeout_secs",
            "/proc/sys/kernel/hung_task_timeout_secs",
            "600",
            "khungtaskd wakes rarely",
        ),
        (
            "vm.stat_interval",
            "/proc/sys/vm/stat_interval",
            "10",
            "vmstat per-CPU work every 10 s, not every second",
        ),
        (
            "kernel.timer_migration",
            "/proc/sys/kernel/timer_migration",
            "0",
            "timers stay on the CPU that armed them (static partition)",
        ),
        (
            "kernel.numa_balancing",
            "/proc/sys/kernel/numa_balancing",
            "0",
            "no periodic unmapping for NUMA hint faults",
        ),
    ]
}

fn sysctl_conf() -> String {
    let mut s = String::from("# Written by rtgauge plan: runtime settings of the RT partition (tuned realtime sets the same).\n");
    for (k, _, v, why) in sysctls() {
        s.push_str(&format!("# {why}\n{k} = {v}\n"));
    }
    s
}

/// systemd accepts the kernel list syntax with commas (systemd.exec(5) CPUAffinity=).
fn systemd_conf(plan: &Plan) -> String {
    format!(
        "# Written by rtgauge plan: PID 1 and every service it starts run on the housekeeping CPUs.\n\
         [Manager]\nCPUAffinity={}\n",
        plan.housekeeping
    )
}

fn tuned_variables(plan: &Plan) -> String {
    let mut s = format!(
        "# Written by rtgauge plan for the tuned {} profile.\n# RT CPUs: tuned derives isolcpus, nohz_full, rcu_nocbs and the IRQ/workqueue masks from it.\n\
         isolated_cores={}\n# isolcpus=managed_irq,...: kernel-managed IRQs avoid the isolated cores.\nisolate_managed_irq=Y\n",
        plan.target.tuned_profile(),
        plan.isolated
    );
    if plan.target == PlanTarget::KvmHost {
        s.push_str("# Huge pages are reserved per node on the kernel command line.\n");
    }
    s
}

/// The domain of one VM: `<cputune>` (vcpupin 1:1, emulatorpin to housekeeping of the node, FIFO vCPUs but
/// vCPU 0), `<numatune>` strict to the node, `<memoryBacking>` 1 GiB pages from the node, locked, not shared.
pub fn libvirt_domain(vm: &VmPlan) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "<!-- Written by rtgauge plan: RT guest {} on host NUMA node {}, vCPUs pinned 1:1 to isolated host CPUs,\n     emulator and I/O threads on the node's housekeeping CPUs, memory strict on the node in 1 GiB pages. -->\n",
        vm.name, vm.node
    ));
    s.push_str("<domain type='kvm'>\n");
    s.push_str(&format!("  <name>{}</name>\n", vm.name));
    s.push_str(&format!("  <memory unit='GiB'>{}</memory>\n", vm.mem_gib));
    s.push_str(&format!(
        "  <vcpu placement='static'>{}</vcpu>\n",
        vm.vcpu_pins.len()
    ));
    s.push_str("  <cputune>\n");
    for (i, c) in vm.vcpu_pins.iter().enumerate() {
        s.push_str(&format!("    <vcpupin vcpu='{i}' cpuset='{c}'/>\n"));
    }
    s.push_str(&format!("    <emulatorpin cpuset='{}'/>\n", vm.emulator));
    if vm.vcpu_pins.len() > 1 {
        // vCPU 0 keeps the guest's housekeeping (SCHED_OTHER), the others run the RT threads under FIFO 1.
        s.push_str(&format!(
            "    <vcpusched vcpus='1-{}' scheduler='fifo' priority='1'/>\n",
            vm.vcpu_pins.len() - 1
        ));
    }
    s.push_str("  </cputune>\n");
    s.push_str("  <memoryBacking>\n    <hugepages>\n");
    s.push_str(&format!(
        "      <page size='1' unit='G' nodeset='{}'/>\n",
        vm.node
    ));
    s.push_str("    </hugepages>\n    <locked/>\n    <nosharepages/>\n  </memoryBacking>\n");
    s.push_str(&format!(
        "  <memtune>\n    <hard_limit unit='GiB'>{}</hard_limit>\n  </memtune>\n",
        vm.mem_gib + 2
    ));
    s.push_str(&format!(
        "  <numatune>\n    <memory mode='strict' nodeset='{}'/>\n  </numatune>\n",
        vm.node
    ));
    s.push_str("  <features>\n    <acpi/>\n    <pmu state='off'/>\n    <kvm>\n      <hint-dedicated state='on'/>\n    </kvm>\n  </features>\n");
    s.push_str("  <cpu mode='host-passthrough' check='none' migratable='off'>\n");
    // threads='1' even when the pins are sibling pairs: an RT guest must not run SMT-aware scheduling
    // (the linter's libvirt-cpu-model-tsc rule, kvm-realtime kbase).
    s.push_str(&format!(
        "    <topology sockets='1' dies='1' cores='{}' threads='1'/>\n",
        vm.vcpu_pins.len()
    ));
    s.push_str("    <feature policy='require' name='tsc-deadline'/>\n    <feature policy='require' name='invtsc'/>\n  </cpu>\n");
    s.push_str("  <clock offset='utc'>\n    <timer name='hpet' present='no'/>\n  </clock>\n");
    s.push_str("  <devices>\n    <controller type='usb' model='none'/>\n    <memballoon model='none'/>\n    <serial type='pty'/>\n    <console type='pty'/>\n  </devices>\n");
    s.push_str("</domain>\n");
    s
}

/// The .vmx keys of seeds 000/003 for one VM of `vcpus` vCPUs and `mem_mib` MiB, pinned to `pins` when the
/// host CPUs are known (an ESXi host's numbering is not visible from a guest: then exclusive affinity by
/// latency sensitivity alone).
pub fn vmx(name: &str, vcpus: usize, mem_mib: u64, pins: Option<&[u32]>) -> String {
    let mut s = String::new();
    s.push_str(".encoding = \"UTF-8\"\n");
    s.push_str(&format!(
        "# Written by rtgauge plan: RT VM {name}, {vcpus} vCPUs, {mem_mib} MiB (seeds 000/003 keys). Merge into the VM's .vmx.\n"
    ));
    s.push_str(&format!("displayName = \"{name}\"\n"));
    s.push_str(&format!("numvcpus = \"{vcpus}\"\n"));
    s.push_str(&format!("cpuid.coresPerSocket = \"{vcpus}\"\n"));
    s.push_str(&format!("memSize = \"{mem_mib}\"\n"));
    s.push_str("sched.cpu.latencySensitivity = \"high\"\n");
    // Latency sensitivity high needs a full CPU reservation (MHz); the host clock is not visible here.
    s.push_str(&format!(
        "# Full CPU reservation: {vcpus} vCPUs × 2000 MHz; set it to vCPUs × the host's core clock in MHz.\n"
    ));
    s.push_str(&format!("sched.cpu.min = \"{}\"\n", vcpus * 2000));
    s.push_str("sched.cpu.shares = \"high\"\n");
    if let Some(pins) = pins {
        for (i, c) in pins.iter().enumerate() {
            s.push_str(&format!("sched.vcpu{i}.affinity = \"{c}\"\n"));
        }
    }
    s.push_str("sched.cpu.affinity.exclusive = \"TRUE\"\n");
    s.push_str("sched.cpu.affinity.exclusiveNoStats = \"TRUE\"\n");
    s.push_str(&format!("sched.mem.min = \"{mem_mib}\"\n"));
    s.push_str("sched.mem.pin = \"TRUE\"\n");
    s.push_str("sched.mem.prealloc = \"TRUE\"\n");
    s.push_str("sched.mem.prealloc.pinnedMainMem = \"TRUE\"\n");
    s.push_str("sched.mem.lpage.enable1GPage = \"TRUE\"\n");
    s.push_str("monitor.forceEnableMPTI = \"TRUE\"\n");
    s.push_str("timeTracker.lowLatency = \"TRUE\"\n");
    s.push_str("ethernet0.coalescingScheme = \"disabled\"\n");
    s.push_str("logging = \"FALSE\"\n");
    s.push_str("sched.swap.vmxSwapEnabled = \"FALSE\"\n");
    s
}

fn performance_profile(plan: &Plan) -> String {
    let mut s = String::new();
    s.push_str("# Written by rtgauge plan: the same partition as a Node Tuning Operator PerformanceProfile.\n");
    s.push_str("apiVersion: performance.openshift.io/v2\nkind: PerformanceProfile\nmetadata:\n  name: rtgauge-plan\nspec:\n");
    s.push_str(&format!(
        "  cpu:\n    isolated: \"{}\"\n    reserved: \"{}\"\n",
        plan.isolated, plan.housekeeping
    ));
    if !plan.offline.is_empty() {
        s.push_str(&format!("    offlined: \"{}\"\n", plan.offline));
    }
    s.push_str("  realTimeKernel:\n    enabled: true\n");
    s.push_str("  globallyDisableIrqLoadBalancing: true\n");
    s.push_str("  workloadHints:\n    realTime: true\n    highPowerConsumption: true\n    perPodPowerManagement: false\n");
    let pages = plan.total_hugepages_1g();
    if pages > 0 {
        s.push_str("  hugepages:\n    defaultHugepagesSize: 1G\n    pages:\n");
        for n in plan.nodes.iter().filter(|n| n.hugepages_1g > 0) {
            s.push_str(&format!(
                "    - size: 1G\n      count: {}\n      node: {}\n",
                n.hugepages_1g, n.id
            ));
        }
    }
    s.push_str("  numa:\n    topologyPolicy: single-numa-node\n");
    s
}

fn kubelet_config(plan: &Plan) -> String {
    let mut s = String::new();
    s.push_str("# Written by rtgauge plan: kubelet settings for Guaranteed RT pods on whole isolated cores.\n");
    s.push_str("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n");
    s.push_str("cpuManagerPolicy: static\ncpuManagerPolicyOptions:\n  full-pcpus-only: \"true\"\ncpuManagerReconcilePeriod: 5s\n");
    s.push_str(&format!("reservedSystemCPUs: \"{}\"\n", plan.housekeeping));
    s.push_str("topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\nmemoryManagerPolicy: Static\n");
    // The Static memory manager needs reserved memory per node equal to kube/system reserved + eviction.
    s.push_str("reservedMemory:\n");
    for n in &plan.nodes {
        s.push_str(&format!(
            "- numaNode: {}\n  limits:\n    memory: {}\n",
            n.id,
            if n.id == 0 { "1100Mi" } else { "100Mi" }
        ));
    }
    s.push_str("kubeReserved:\n  memory: 500Mi\nsystemReserved:\n  memory: 500Mi\nevictionHard:\n  memory.available: 100Mi\n");
    s
}

/// Every file of the plan. `guest_mem_mib`: the guest's memory for a VMware guest's own .vmx.
pub fn files(plan: &Plan, guest_mem_mib: Option<u64>) -> Vec<OutFile> {
    let profile = plan.target.tuned_profile();
    let line = cmdline(plan);
    let mut out = vec![
        OutFile {
            path: "cmdline.txt".into(),
            text: format!("{line}\n"),
            about: "kernel parameters: add to GRUB_CMDLINE_LINUX (grubby --update-kernel=ALL --args=...), reboot"
                .into(),
        },
        OutFile {
            path: format!("tuned/{profile}-variables.conf"),
            text: tuned_variables(plan),
            about: format!(
                "/etc/tuned/{profile}-variables.conf, then `tuned-adm profile {profile}` (applies the masks and \
                 the boot parameters, holds /dev/cpu_dma_latency)"
            ),
        },
        OutFile {
            path: "tuned/bootcmdline".into(),
            text: format!("TUNED_BOOT_CMDLINE=\"{line}\"\n"),
            about: "what tuned's bootloader plugin puts on the command line (/etc/tuned/bootcmdline)".into(),
        },
        OutFile {
            path: "irqbalance".into(),
            text: format!(
                "# Written by rtgauge plan: irqbalance never moves an IRQ onto the RT CPUs.\nIRQBALANCE_BANNED_CPULIST={}\n",
                plan.isolated
            ),
            about: "/etc/sysconfig/irqbalance (Debian: /etc/default/irqbalance), then restart irqbalance".into(),
        },
        OutFile {
            path: "systemd/system.conf.d/50-rtgauge-cpuaffinity.conf".into(),
            text: systemd_conf(plan),
            about: "/etc/systemd/system.conf.d/: services start on housekeeping CPUs (after reboot)".into(),
        },
        OutFile {
            path: "sysctl.d/50-rtgauge-rt.conf".into(),
            text: sysctl_conf(),
            about: "/etc/sysctl.d/: lockup detectors, hung-task and vmstat intervals, timer migration, NUMA balancing (sysctl --system)".into(),
        },
        OutFile {
            path: "irq-affinity.sh".into(),
            text: format!(
                "#!/bin/sh\n# Written by rtgauge plan: move every IRQ to the housekeeping CPUs now (irqaffinity= does it at boot).\n\
                 echo {} > /proc/irq/default_smp_affinity\nfor d in /proc/irq/[0-9]*; do echo {} > \"$d/smp_affinity_list\" 2>/dev/null; done\n\
                 # Every workqueue's own mask too: a kernel keeps the per-workqueue masks it booted with (6.1: blkcg_punt_bio).\n\
                 for f in /sys/devices/virtual/workqueue/cpumask /sys/devices/virtual/workqueue/*/cpumask /sys/bus/workqueue/devices/writeback/cpumask; do echo {} > \"$f\" 2>/dev/null; done\n\
                 # Kernel threads and tasks allowed on more than one CPU (rescuers, kcompactd, …) to the housekeeping CPUs:\n\
                 # before 6.10 a new workqueue mask does not move rescuers. Per-CPU kthreads refuse, and stay.\n\
                 for t in /proc/[0-9]*/task/[0-9]*; do case $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' \"$t/status\" 2>/dev/null) in *[-,]*) taskset -p -c {} \"${{t##*/}}\" > /dev/null 2>&1;; esac; done\n",
                plan.housekeeping.hex_mask(),
                plan.housekeeping,
                plan.housekeeping.hex_mask(),
                plan.housekeeping
            ),
            about: "run once as root (before the RT workload starts): IRQ, default IRQ, workqueue and unbound-task affinity to housekeeping without a reboot"
                .into(),
        },
    ];
    match plan.target {
        PlanTarget::KvmHost => {
            for vm in &plan.vms {
                out.push(OutFile {
                    path: format!("libvirt/{}.xml", vm.name),
                    text: libvirt_domain(vm),
                    about: format!(
                        "libvirt domain of {} (virsh define; merge <cputune>/<numatune>/<memoryBacking> into an existing one)",
                        vm.name
                    ),
                });
            }
        }
        PlanTarget::VmwareGuest => {
            let vcpus = plan.online.len();
            out.push(OutFile {
                path: "vmx/guest.vmx".into(),
                text: vmx(
                    "rt-guest",
                    vcpus,
                    guest_mem_mib.unwrap_or(4096).max(1024),
                    None,
                ),
                about: format!(
                    "the .vmx keys for this guest ({vcpus} vCPUs): edit with the VM powered off"
                ),
            });
            for vm in &plan.vms {
                out.push(OutFile {
                    path: format!("vmx/{}.vmx", vm.name),
                    text: vmx(
                        &vm.name,
                        vm.vcpu_pins.len(),
                        u64::from(vm.mem_gib) * 1024,
                        None,
                    ),
                    about: format!("the .vmx keys of VM {}", vm.name),
                });
            }
        }
        PlanTarget::K8s => {
            out.push(OutFile {
                path: "k8s/performanceprofile.yaml".into(),
                text: performance_profile(plan),
                about: "OpenShift / Node Tuning Operator: oc apply -f (replaces the tuned, irqbalance and systemd files)"
                    .into(),
            });
            out.push(OutFile {
                path: "k8s/kubelet-config.yaml".into(),
                text: kubelet_config(plan),
                about: "plain Kubernetes: merge into /var/lib/kubelet/config.yaml (CPU manager static, topology manager single-numa-node)"
                    .into(),
            });
        }
        PlanTarget::Host | PlanTarget::KvmGuest => {}
    }
    out
}

/// The explanation of each kernel parameter and each file, for `plan.txt`.
pub fn explain(plan: &Plan, files: &[OutFile]) -> String {
    let mut s = String::from("\nkernel command line\n");
    for p in kernel_params(plan) {
        s.push_str(&format!("  {:<44} {}\n", p.token, p.why));
    }
    s.push_str("\nfiles\n");
    for f in files {
        s.push_str(&format!("  {:<50} {}\n", f.path, f.about));
    }
    s.push_str("\noutside the plan (audit rules it does not settle)\n");
    for (rule, what) in NOT_ADDRESSED {
        s.push_str(&format!("  {rule:<28} {what}\n"));
    }
    s
}

/// Audit rules the plan settles once its files are installed and the machine rebooted: the closed-loop
/// tests require each to pass on a tree the plan was applied to (host rules may be `n/a` on a guest).
pub const ADDRESSED: [&str; 24] = [
    "kernel-nohz-full-support",
    "tuned-bootcmdline-applied",
    "cmdline-isolcpus",
    "cmdline-nohz-full",
    "rcu-offload-and-normal",
    "isolation-sets-consistent",
    "housekeeping-capacity",
    "smt-siblings",
    "irq-affinity-isolated",
    "irqbalance-banned-cpus",
    "workqueue-cpumask",
    "systemd-cpuaffinity",
    "tasks-on-isolated",
    "net-rps-and-queues",
    "lockup-detectors",
    "sysctl-hung-task-and-vmstat",
    "timer-migration",
    "numa-balancing",
    "thp",
    "pstate-driver",
    "cpufreq-governor-epb",
    "cpuidle-states",
    "mce-corrected-errors",
    "hugepages-pool",
];

/// Audit rules a plan does not settle, and what does.
pub const NOT_ADDRESSED: [(&str, &str); 6] = [
    (
        "kernel-preempt-rt",
        "install and boot a PREEMPT_RT kernel (kernel-rt, linux-image-rt)",
    ),
    (
        "sched-rt-runtime, stalld",
        "kernel.sched_rt_runtime_us=-1 only together with stalld",
    ),
    (
        "cpu-dma-latency",
        "held by tuned while it runs (force_latency), or by the RT application",
    ),
    (
        "tuned-profile-active",
        "passes once tuned runs the profile (tuned-adm profile ...)",
    ),
    (
        "irq-activity-on-isolated",
        "sampled: measure after the reboot (rtgauge audit without --no-sample)",
    ),
    (
        "swap, fwupd, time-sync",
        "site choices: mlockall / swapoff, disable fwupd-refresh.timer, PTP/chrony",
    ),
];
