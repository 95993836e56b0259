//! The real-time readiness audit: the host and guest rules of the catalogue (sections 1–8, plus the one
//! Kubernetes rule of section 11 that needs host facts), one file per rule group, all listed by [`rules`].
//!
//! Invariants:
//! - read-only: every input comes through the [`HostRoot`] (files) or read-only syscalls (CPUID,
//!   `adjtimex(modes=0)`); nothing is written;
//! - runtime truth beats configuration: a verdict comes from the runtime file when there is one, and a
//!   configuration that differs is reported as "configured but not effective";
//! - every finding carries its evidence; `info` rules never fail;
//! - sampled rules read their files twice, `interval` apart; the second sample is recorded under
//!   [`SAMPLE2_PREFIX`] so a captured tree replays the same deltas.

mod background;
mod env;
mod firmware;
mod guest;
mod irq;
mod isolation;
mod kubelet;
mod power;
mod process;
mod sched;
mod tasks;
mod time;

use rtgauge_host::cpu::{read_cpu_mask, CpuMask};
use rtgauge_host::fingerprint::{read_cmdline, read_fingerprint, read_topology, CpuTopo};
use rtgauge_host::parse::{key_value, parse_key_values, parse_proc_stat, parse_status, Cmdline};
use rtgauge_host::HostRoot;
use rtgauge_model::audit::{
    AuditReport, Evidence, Finding, Severity, Status, Subject, Summary, Target,
};
use rtgauge_model::fingerprint::Fingerprint;
use rtgauge_model::{CpuSet, Nanos};
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where the second sample of a sampled file is recorded in a capture.
pub const SAMPLE2_PREFIX: &str = "/.rtgauge/sample2";

/// Why a sampled rule is n/a: sampling was skipped, or a captured tree holds no second sample.
pub const NOT_SAMPLED: &str = "not sampled (--no-sample, or a tree captured without sampling)";

/// Files read twice by sampled rules.
pub const SAMPLED_FILES: [&str; 3] = ["/proc/interrupts", "/proc/softirqs", "/proc/stat"];

/// What the operator asked for.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// `None` = detect.
    pub target: Option<Target>,
    /// Operator-declared RT CPU set (highest priority source of I).
    pub isolated: Option<CpuSet>,
    /// Sampling interval; `None` skips sampled rules (`--no-sample`).
    pub sample: Option<Duration>,
    /// The real-time priority the measurement will ask for (`run`: its probes'; 0 when none asks for one);
    /// `None` = 99, the highest any built-in profile asks.
    pub rt_priority: Option<i32>,
    /// The CPUs the measurement will use (`run`: its measured and housekeeping CPUs); `None` = the RT CPU
    /// set I, where one is declared.
    pub measured: Option<CpuSet>,
}

/// The verdict a rule function returns; the registry adds id, default severity, expectation and source.
#[derive(Debug, Clone)]
pub struct RuleOutcome {
    /// Pass, warn, fail, n/a or unavailable.
    pub status: Status,
    /// One line saying what was found.
    pub summary: String,
    /// The values read and where they came from.
    pub evidence: Vec<Evidence>,
    /// A severity that overrides the rule's default for this finding; `None` keeps the default.
    pub severity: Option<Severity>,
}

impl RuleOutcome {
    fn new(status: Status, summary: impl Into<String>) -> RuleOutcome {
        RuleOutcome {
            status,
            summary: summary.into(),
            evidence: Vec::new(),
            severity: None,
        }
    }
    /// A passing verdict with this summary.
    pub fn pass(summary: impl Into<String>) -> RuleOutcome {
        RuleOutcome::new(Status::Pass, summary)
    }
    /// A warning: not failing, but worth a look.
    pub fn warn(summary: impl Into<String>) -> RuleOutcome {
        RuleOutcome::new(Status::Warn, summary)
    }
    /// A failing verdict with this summary.
    pub fn fail(summary: impl Into<String>) -> RuleOutcome {
        RuleOutcome::new(Status::Fail, summary)
    }
    /// Not applicable to this target or configuration; the summary says why.
    pub fn na(summary: impl Into<String>) -> RuleOutcome {
        RuleOutcome::new(Status::NotApplicable, summary)
    }
    /// The facts needed to judge are not readable here; the summary says which.
    pub fn unavailable(summary: impl Into<String>) -> RuleOutcome {
        RuleOutcome::new(Status::Unavailable, summary)
    }
    /// Add one piece of evidence.
    pub fn ev(mut self, what: &str, source: &str, value: impl Into<String>) -> RuleOutcome {
        self.evidence.push(Evidence::new(what, source, value));
        self
    }
    /// Add several pieces of evidence, in order.
    pub fn evs(mut self, evidence: Vec<Evidence>) -> RuleOutcome {
        self.evidence.extend(evidence);
        self
    }
    /// Override the rule's default severity (several rules depend on the target).
    pub fn sev(mut self, severity: Severity) -> RuleOutcome {
        self.severity = Some(severity);
        self
    }
}

/// A CPU set for a rule's summary or evidence: the list, `(empty)`, or `absent`.
fn set_or(set: &Option<CpuSet>) -> String {
    match set {
        Some(set) if set.is_empty() => "(empty)".into(),
        Some(set) => set.to_string(),
        None => "absent".into(),
    }
}

/// One catalogue rule.
pub struct Rule {
    /// Stable rule id (`cmdline-isolcpus`), as reports and profiles name it.
    pub id: &'static str,
    /// Catalogue section (1–8).
    pub section: u8,
    /// Default severity of a failure.
    pub severity: Severity,
    /// What a passing system looks like, in one line.
    pub expected: &'static str,
    /// How to fix a failure, in one line.
    pub remediation: &'static str,
    /// The source documents behind the rule (`[T1][K8]`), as listed in the catalogue.
    pub source: &'static str,
    /// Needs two samples; `n/a` with `--no-sample`.
    pub sampled: bool,
    /// The function that judges the rule on one host.
    pub check: fn(&Ctx) -> RuleOutcome,
}

/// All host and guest rules, in catalogue order.
pub fn rules() -> Vec<&'static Rule> {
    let mut v: Vec<&'static Rule> = Vec::new();
    v.extend(env::RULES.iter());
    v.extend(isolation::RULES.iter());
    v.extend(sched::RULES.iter());
    v.extend(process::RULES.iter());
    v.extend(power::RULES.iter());
    v.extend(time::RULES.iter());
    v.extend(background::RULES.iter());
    v.extend(firmware::RULES.iter());
    v.extend(guest::RULES.iter());
    v.extend(kubelet::RULES.iter());
    v
}

/// One thread of `/proc/<pid>/task/<tid>`.
#[derive(Debug, Clone)]
pub struct Task {
    /// Process id (thread group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Command name (`comm`), as the kernel truncates it.
    pub comm: String,
    /// `Cpus_allowed_list` of the thread; `None` when absent or malformed.
    pub allowed: Option<CpuSet>,
    /// A kernel thread: `Kthread: 1` in its status, or kthreadd (PID 2) or one of its children.
    pub kthread: bool,
    /// Its affinity is the kernel's to set (PF_NO_SETAFFINITY in proc(5) field 9 `flags`): `taskset` and
    /// cgroups get EINVAL, so no tuning can move it (6.1's workqueue rescuers, bound to every possible CPU).
    pub kernel_bound: bool,
    /// Scheduling policy (proc(5) field 41: 0 OTHER, 1 FIFO, 2 RR, 3 BATCH, 5 IDLE, 6 DEADLINE).
    pub policy: Option<u32>,
    /// Real-time priority (proc(5) field 40: `rt_priority`), 0 for normal policies.
    pub rt_priority: Option<u32>,
}

/// Two samples of the sampled files.
#[derive(Debug, Clone)]
pub struct Samples {
    /// Time between the two samples.
    pub interval: Nanos,
    /// Each sampled file's content at the first sample, by kernel path.
    pub first: BTreeMap<String, String>,
    /// Each sampled file's content at the second sample, by kernel path.
    pub second: BTreeMap<String, String>,
    /// cpuidle `usage` per (cpu, state) at the first sample.
    pub idle_first: BTreeMap<(u32, String), u64>,
    /// cpuidle `usage` per (cpu, state) at the second sample.
    pub idle_second: BTreeMap<(u32, String), u64>,
    /// `MSR_SMI_COUNT` per online CPU at the first sample, or why SMIs are not countable.
    pub smi_first: Result<BTreeMap<u32, u64>, String>,
    /// The same at the second sample.
    pub smi_second: Result<BTreeMap<u32, u64>, String>,
}

impl Samples {
    /// Evidence: the time between the two samples.
    pub fn interval_evidence(&self) -> Evidence {
        Evidence::new(
            "sample interval",
            "-",
            format!("{:.3} s", self.interval.as_secs_f64()),
        )
    }
}

/// Everything rules share: the root, the target, the RT set I and housekeeping set H, and lazily read facts.
pub struct Ctx<'a> {
    /// The root every read goes through.
    pub root: &'a HostRoot,
    /// The target being judged (rules differ between hosts, guests and containers).
    pub target: Target,
    /// The machine's fingerprint, read once before the rules run.
    pub fp: Fingerprint,
    /// The kernel command line.
    pub cmdline: Cmdline,
    /// The online CPUs.
    pub online: CpuSet,
    /// I: `None` when no RT CPU set is declared (isolation rules are then n/a).
    pub iso: Option<CpuSet>,
    /// Where I came from (`--isolated`, tuned, isolcpus, …), for the evidence.
    pub iso_source: Option<String>,
    /// H = online − I.
    pub hk: CpuSet,
    /// The two samples of the sampled files; `None` with `--no-sample` or a tree captured without them.
    pub samples: Option<Samples>,
    /// The real-time priority the measurement will ask for (0: none).
    pub rt_priority: i32,
    /// The CPUs the measurement will use, where known.
    pub measured: Option<CpuSet>,
    privilege: OnceCell<rtgauge_host::privilege::Privilege>,
    tasks: OnceCell<Vec<Task>>,
    topo: OnceCell<BTreeMap<u32, CpuTopo>>,
}

impl<'a> Ctx<'a> {
    /// Read a file, trimmed; `None` if absent or unreadable.
    pub fn read(&self, path: &str) -> Option<String> {
        self.root.read_optional(path).map(|s| s.trim().to_string())
    }
    /// A file's first integer.
    pub fn read_int(&self, path: &str) -> Option<i64> {
        self.read(path)
            .and_then(|s| rtgauge_host::parse::parse_int(&s))
    }
    /// Whether the fingerprint detected a hypervisor (the machine is a guest).
    pub fn is_guest(&self) -> bool {
        self.fp.virt.platform != "none"
    }
    /// Whether the fingerprint detected a container.
    pub fn in_container(&self) -> bool {
        self.fp.container.kind != "none"
    }
    /// Whether the kernel is PREEMPT_RT.
    pub fn is_rt_kernel(&self) -> bool {
        self.fp.kernel.preempt.model == rtgauge_model::fingerprint::PreemptModel::Rt
    }
    /// The RT set, or the `n/a` verdict every isolation rule returns without one.
    pub fn iso_or_na(&self) -> Result<&CpuSet, RuleOutcome> {
        self.iso.as_ref().ok_or_else(|| {
            RuleOutcome::na("no RT CPU set declared (use --isolated, tuned isolated_cores or isolcpus/nohz_full)")
        })
    }
    /// The CPUs a rule about the RT set judges: I, or every online CPU when none is declared.
    pub fn rt_or_online(&self) -> Vec<u32> {
        self.iso.as_ref().unwrap_or(&self.online).iter().collect()
    }
    /// Evidence line for the RT set.
    pub fn iso_evidence(&self) -> Evidence {
        Evidence::new(
            "RT CPU set I",
            self.iso_source.as_deref().unwrap_or("-"),
            self.iso.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        )
    }
    /// What this process may do (read once).
    pub fn privilege(&self) -> &rtgauge_host::privilege::Privilege {
        self.privilege
            .get_or_init(|| rtgauge_host::privilege::read_privilege(self.root))
    }
    /// Every thread on the system (read once).
    pub fn tasks(&self) -> &[Task] {
        self.tasks.get_or_init(|| read_tasks(self.root))
    }
    /// Whether a process with this comm runs.
    pub fn running(&self, comm: &str) -> bool {
        self.tasks()
            .iter()
            .any(|t| t.pid == t.tid && t.comm == comm)
    }
    /// CPU topology by CPU number (read once).
    pub fn topology(&self) -> &BTreeMap<u32, CpuTopo> {
        self.topo
            .get_or_init(|| read_topology(self.root, &self.online))
    }
    /// Cmdline evidence of a key (value or "absent").
    pub fn cmdline_ev(&self, key: &str) -> Evidence {
        Evidence::new(
            format!("kernel parameter {key}"),
            "/proc/cmdline",
            self.cmdline.token(key).unwrap_or_else(|| "absent".into()),
        )
    }
}

/// include/linux/sched.h: "Userland is not allowed to meddle with cpus_mask".
const PF_NO_SETAFFINITY: u32 = 0x0400_0000;

/// All threads: `/proc/<pid>/task/<tid>/{status,stat}` (Documentation/filesystems/proc.rst).
pub fn read_tasks(root: &HostRoot) -> Vec<Task> {
    let mut out = Vec::new();
    for pid in root
        .list_dir("/proc")
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
    {
        for tid in root
            .list_dir(&format!("/proc/{pid}/task"))
            .iter()
            .filter_map(|t| t.parse::<u32>().ok())
        {
            let base = format!("/proc/{pid}/task/{tid}");
            let Some(status) = root.read_optional(&format!("{base}/status")) else {
                continue;
            };
            let st = parse_status(&status);
            let stat = root
                .read_optional(&format!("{base}/stat"))
                .unwrap_or_default();
            let parsed = parse_proc_stat(&stat);
            let field = |n: usize| -> Option<u32> {
                parsed
                    .as_ref()
                    .and_then(|(_, f)| f.get(n - 3))
                    .and_then(|v| v.parse().ok())
            };
            let ppid = st.get("PPid").and_then(|v| v.parse::<u32>().ok());
            let kthread =
                st.get("Kthread").map(|v| v == "1").unwrap_or(false) || pid == 2 || ppid == Some(2);
            out.push(Task {
                pid,
                tid,
                comm: st.get("Name").cloned().unwrap_or_default(),
                allowed: st
                    .get("Cpus_allowed_list")
                    .and_then(|v| CpuSet::parse(v).ok()),
                kthread,
                kernel_bound: field(9).is_some_and(|f| f & PF_NO_SETAFFINITY != 0),
                policy: field(41),
                rt_priority: field(40),
            });
        }
    }
    out
}

/// Detect the target when the operator gave none.
pub fn detect_target(root: &HostRoot, fingerprint: &Fingerprint) -> (Target, String) {
    if fingerprint.virt.platform != "none" {
        return (
            Target::RtGuest,
            format!(
                "auto: virtualization platform {}",
                fingerprint.virt.platform
            ),
        );
    }
    if root.exists(kubelet::KUBELET_CONFIG) || root.exists("/etc/kubernetes/kubelet.conf") {
        return (
            Target::K8sRtNode,
            "auto: kubelet configuration present".into(),
        );
    }
    if root.exists("/sys/module/kvm") || root.exists("/dev/kvm") {
        return (Target::KvmRtHost, "auto: kvm module loaded".into());
    }
    (
        Target::BareMetalRtHost,
        "auto: no hypervisor, no kvm".into(),
    )
}

/// tuned profiles whose `isolated_cores` declares I (catalogue §0).
const TUNED_ISO_PROFILES: [&str; 4] = [
    "realtime",
    "realtime-virtual-host",
    "realtime-virtual-guest",
    "cpu-partitioning",
];

/// Derive I in the catalogue's order; returns the set and the source used.
pub fn derive_isolated(
    root: &HostRoot,
    cmdline: &Cmdline,
    online: &CpuSet,
    operator: Option<&CpuSet>,
) -> Option<(CpuSet, String)> {
    if let Some(s) = operator {
        return Some((s.clone(), "operator (--isolated)".into()));
    }
    let active = root
        .read_optional("/etc/tuned/active_profile")
        .unwrap_or_default();
    for p in TUNED_ISO_PROFILES {
        if !active.split_whitespace().any(|a| a == p) {
            continue;
        }
        let path = format!("/etc/tuned/{p}-variables.conf");
        if let Some(t) = root.read_optional(&path) {
            if let Some(v) = key_value(&parse_key_values(&t), "isolated_cores") {
                if let Ok(s) = CpuSet::parse(v) {
                    if !s.is_empty() {
                        return Some((s, format!("{path} isolated_cores")));
                    }
                }
            }
        }
    }
    for key in ["nohz_full", "isolcpus", "rcu_nocbs"] {
        if let Some(v) = cmdline.get(key) {
            let set = if key == "isolcpus" {
                rtgauge_host::parse::parse_isolcpus(v).ok().map(|(_, s)| s)
            } else {
                rtgauge_host::parse::parse_cpu_list_param(v, online).ok()
            };
            if let Some(s) = set.filter(|s| !s.is_empty()) {
                return Some((s, format!("/proc/cmdline {key}")));
            }
        }
    }
    if let Some(t) = root.read_optional(kubelet::KUBELET_CONFIG) {
        if let Some(reserved) = rtgauge_lint::k8s::kubelet_reserved_cpus(&t) {
            let s = online.difference(&reserved);
            if !s.is_empty() {
                return Some((
                    s,
                    "/var/lib/kubelet/config.yaml reservedSystemCPUs complement".into(),
                ));
            }
        }
    }
    None
}

fn take_samples(root: &HostRoot, online: &CpuSet, interval: Duration) -> Samples {
    let read_all = |second: bool| {
        SAMPLED_FILES
            .iter()
            .filter_map(|p| {
                let text = if second && !root.is_live() {
                    root.read_optional(&format!("{SAMPLE2_PREFIX}{p}"))
                        .or_else(|| root.read_optional(p))
                } else {
                    root.read_optional(p)
                };
                Some((p.to_string(), text?))
            })
            .collect::<BTreeMap<_, _>>()
    };
    let idle = |second: bool| {
        let mut m = BTreeMap::new();
        for cpu in online.iter() {
            let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
            for state in root.list_dir(&base) {
                let p = format!("{base}/{state}/usage");
                let text = if second && !root.is_live() {
                    root.read_optional(&format!("{SAMPLE2_PREFIX}{p}"))
                        .or_else(|| root.read_optional(&p))
                } else {
                    root.read_optional(&p)
                };
                if let Some(v) = text.and_then(|t| t.trim().parse().ok()) {
                    m.insert((cpu, state), v);
                }
            }
        }
        m
    };
    let smi2 = format!("{SAMPLE2_PREFIX}{}", firmware::SMI_FILE);
    let first = read_all(false);
    let idle_first = idle(false);
    let smi_first = firmware::sample(root, online, firmware::SMI_FILE);
    if root.is_live() {
        std::thread::sleep(interval);
    }
    let second = read_all(true);
    let idle_second = idle(true);
    let smi_second = firmware::sample(root, online, &smi2);
    if root.is_live() {
        // Keep the first sample under the real path and the second under the pseudo path, for --capture.
        for (p, t) in &first {
            root.record(p, t.as_bytes());
        }
        for (p, t) in &second {
            root.record(&format!("{SAMPLE2_PREFIX}{p}"), t.as_bytes());
        }
        for ((cpu, state), v) in &idle_first {
            let p = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/{state}/usage");
            root.record(&p, format!("{v}\n").as_bytes());
            if let Some(v2) = idle_second.get(&(*cpu, state.clone())) {
                root.record(
                    &format!("{SAMPLE2_PREFIX}{p}"),
                    format!("{v2}\n").as_bytes(),
                );
            }
        }
    }
    let interval = if root.is_live() {
        Nanos(interval.as_nanos() as u64)
    } else {
        root.read_optional(&format!("{SAMPLE2_PREFIX}/interval_ns"))
            .and_then(|s| s.trim().parse().ok())
            .map(Nanos)
            .unwrap_or(Nanos(interval.as_nanos() as u64))
    };
    if root.is_live() {
        root.record(
            &format!("{SAMPLE2_PREFIX}/interval_ns"),
            interval.0.to_string().as_bytes(),
        );
    }
    Samples {
        interval,
        first,
        second,
        idle_first,
        idle_second,
        smi_first,
        smi_second,
    }
}

/// Run every host/guest rule.
pub fn run_audit(root: &HostRoot, options: &AuditOptions) -> AuditReport {
    let fp = read_fingerprint(root);
    let cmdline = read_cmdline(root);
    let online = read_cpu_mask(root, CpuMask::Online).unwrap_or_default();
    let (target, target_source) = match options.target {
        Some(t) => (t, "operator".to_string()),
        None => detect_target(root, &fp),
    };
    let derived = derive_isolated(root, &cmdline, &online, options.isolated.as_ref());
    let (iso, iso_source) = match derived {
        Some((s, src)) => (Some(s), Some(src)),
        None => (None, None),
    };
    let hk = iso
        .as_ref()
        .map(|i| online.difference(i))
        .unwrap_or_else(|| online.clone());
    // A captured tree replays samples only if it was captured with sampling (it then holds the second sample
    // and its interval); otherwise the sampled rules are n/a rather than judged on zero deltas.
    let replayable = root.is_live() || root.exists(&format!("{SAMPLE2_PREFIX}/interval_ns"));
    let samples = options
        .sample
        .filter(|_| replayable)
        .map(|d| take_samples(root, &online, d));
    let measured = options.measured.clone().or_else(|| iso.clone());
    let ctx = Ctx {
        root,
        target,
        fp,
        cmdline,
        online,
        iso,
        iso_source,
        hk,
        samples,
        rt_priority: options.rt_priority.unwrap_or(99),
        measured,
        privilege: OnceCell::new(),
        tasks: OnceCell::new(),
        topo: OnceCell::new(),
    };
    let findings: Vec<Finding> = rules().into_iter().map(|r| evaluate(r, &ctx)).collect();
    AuditReport {
        subject: Subject::Host,
        location: root.path("/").display().to_string(),
        target: Some(target),
        target_source: Some(target_source),
        isolated: ctx.iso.clone(),
        isolated_source: ctx.iso_source.clone(),
        sample_interval: ctx.samples.as_ref().map(|s| s.interval),
        summary: Summary::of(&findings),
        findings,
    }
}

/// Apply one rule, enforcing the invariants (sampling, `info` never fails).
pub fn evaluate(rule: &Rule, context: &Ctx) -> Finding {
    let v = if rule.sampled && context.samples.is_none() {
        RuleOutcome::na(NOT_SAMPLED)
    } else {
        (rule.check)(context)
    };
    let severity = v.severity.unwrap_or(rule.severity);
    let status = if severity == Severity::Info && v.status == Status::Fail {
        Status::Warn
    } else {
        v.status
    };
    Finding {
        id: rule.id.to_string(),
        status,
        severity,
        summary: v.summary,
        evidence: v.evidence,
        expected: rule.expected.to_string(),
        remediation: rule.remediation.to_string(),
        source: rule.source.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A fixture-tree builder for rule tests.
    use super::*;

    pub struct Fx {
        pub dir: tempfile::TempDir,
    }

    impl Fx {
        pub fn new() -> Fx {
            let fx = Fx {
                dir: tempfile::tempdir().unwrap(),
            };
            fx.file("/sys/devices/system/cpu/online", "0-3\n")
                .file("/proc/sys/kernel/osrelease", "6.12.0-rt\n")
                .file("/proc/cmdline", "ro quiet\n")
        }
        pub fn file(self, path: &str, text: &str) -> Fx {
            let p = self.dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }
        pub fn dir(self, path: &str) -> Fx {
            std::fs::create_dir_all(self.dir.path().join(path.trim_start_matches('/'))).unwrap();
            self
        }
        pub fn root(&self) -> HostRoot {
            HostRoot::at(self.dir.path())
        }
        /// Run the audit with `target` and return the finding of rule `id`.
        pub fn finding(&self, id: &str, target: Target) -> Finding {
            self.finding_with(id, target, None)
        }
        pub fn finding_with(&self, id: &str, target: Target, iso: Option<&str>) -> Finding {
            let r = run_audit(
                &self.root(),
                &AuditOptions {
                    target: Some(target),
                    isolated: iso.map(|s| CpuSet::parse(s).unwrap()),
                    sample: Some(Duration::from_millis(0)),
                    ..Default::default()
                },
            );
            r.findings.into_iter().find(|f| f.id == id).unwrap()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::Fx;
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_cover_sections_1_to_8() {
        let ids: Vec<&str> = rules().iter().map(|r| r.id).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
        for s in 1..=8 {
            assert!(rules().iter().any(|r| r.section == s), "section {s}");
        }
    }

    #[test]
    fn isolated_set_source_order() {
        let fx = Fx::new()
            .file(
                "/proc/cmdline",
                "isolcpus=managed_irq,domain,2-3 nohz_full=1-3\n",
            )
            .file("/etc/tuned/active_profile", "realtime\n")
            .file(
                "/etc/tuned/realtime-variables.conf",
                "# x\nisolated_cores=3\n",
            );
        let root = fx.root();
        let c = read_cmdline(&root);
        let online = CpuSet::parse("0-3").unwrap();
        let op = CpuSet::parse("1").unwrap();
        assert_eq!(
            derive_isolated(&root, &c, &online, Some(&op)).unwrap().0,
            op
        );
        let (s, src) = derive_isolated(&root, &c, &online, None).unwrap();
        assert_eq!(
            (s.to_string().as_str(), src.contains("isolated_cores")),
            ("3", true)
        );
        let fx = Fx::new().file(
            "/proc/cmdline",
            "isolcpus=managed_irq,domain,2-3 nohz_full=1-3\n",
        );
        let root = fx.root();
        let c = read_cmdline(&root);
        let (s, src) = derive_isolated(&root, &c, &online, None).unwrap();
        assert_eq!(
            (s.to_string(), src),
            ("1-3".to_string(), "/proc/cmdline nohz_full".to_string())
        );
        let fx = Fx::new();
        let c = read_cmdline(&fx.root());
        assert!(derive_isolated(&fx.root(), &c, &online, None).is_none());
    }

    #[test]
    fn sampled_rules_are_na_without_sampling() {
        let fx = Fx::new();
        let r = run_audit(
            &fx.root(),
            &AuditOptions {
                target: Some(Target::RtGuest),
                isolated: Some(CpuSet::parse("1").unwrap()),
                sample: None,
                ..Default::default()
            },
        );
        let f = r
            .findings
            .iter()
            .find(|f| f.id == "irq-activity-on-isolated")
            .unwrap();
        assert_eq!(f.status, Status::NotApplicable);
        assert!(f.summary.contains("--no-sample"));
    }
}
