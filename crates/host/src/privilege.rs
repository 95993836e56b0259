//! What this process may do to measure in real time, and why not where it may not: SCHED_FIFO at a
//! priority, `mlockall`, the CPUs it may run on. Read from `/proc/self/{status,limits,cgroup,mountinfo}`,
//! the cgroup files of its own groups and the kernel configuration, all through the [`HostRoot`], so a
//! captured tree is judged alike. The audit's process rules and a run's unmet conditions name their cause
//! and fix through [`Privilege`]'s `*_refusal` methods: one wording for both.
//!
//! The kernel's rules (kernel/sched/core.c `__sched_setscheduler`, mm/mlock.c): SCHED_FIFO/RR at priority P
//! needs CAP_SYS_NICE or `RLIMIT_RTPRIO` ≥ P; with RT group scheduling (CONFIG_RT_GROUP_SCHED) it is refused
//! (EPERM) in a cgroup whose `cpu.rt_runtime_us` is 0, which on cgroup v2 is every non-root cgroup with the
//! cpu controller (v2 has no RT budget file). `mlockall` needs CAP_IPC_LOCK or an `RLIMIT_MEMLOCK` that holds
//! the whole mapping (ENOMEM). `sched_setaffinity` to a CPU outside the cpuset is EINVAL.

use crate::parse::{parse_cap_has, parse_int, parse_status};
use crate::HostRoot;
use rtgauge_model::conditions::{Condition, Unmet};
use rtgauge_model::CpuSet;

/// CAP_IPC_LOCK (include/uapi/linux/capability.h).
const CAP_IPC_LOCK: u32 = 14;
/// CAP_SYS_NICE.
const CAP_SYS_NICE: u32 = 23;

/// A soft and hard resource limit (`/proc/self/limits`); `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The limit in force.
    pub soft: Option<u64>,
    /// What an unprivileged process may raise it to.
    pub hard: Option<u64>,
}

/// A cgroup of this process and the file read in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The cgroup's path in its hierarchy (`/docker/0c1f…`; `/` in a container's own namespace).
    pub path: String,
    /// The file read, on this host.
    pub file: String,
    /// Its value, trimmed; `None` when unreadable.
    pub value: Option<String>,
}

/// One cause found: what, the fix, and the values read with where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The cause in words.
    pub cause: String,
    /// How to remove it.
    pub fix: String,
    /// Whether what was read shows it for certain (else it is the likely cause, and says why it may not be).
    pub certain: bool,
}

/// What this process may do, as read.
#[derive(Debug, Clone, Default)]
pub struct Privilege {
    /// The effective user id (`Uid:` of `/proc/self/status`, its second field).
    pub euid: Option<u32>,
    /// `CapEff` of `/proc/self/status`, hex.
    pub cap_eff: Option<String>,
    /// `RLIMIT_RTPRIO`.
    pub rtprio: Option<Limit>,
    /// `RLIMIT_MEMLOCK`, bytes.
    pub memlock: Option<Limit>,
    /// `VmSize` of the process, KiB (what `mlockall(MCL_CURRENT)` locks at most).
    pub vm_size_kib: Option<u64>,
    /// `Cpus_allowed_list`: where it may run.
    pub allowed: Option<CpuSet>,
    /// Its cgroup v1 `cpu` group and `cpu.rt_runtime_us` there; `None` without a v1 cpu hierarchy.
    pub cpu_v1: Option<Group>,
    /// Its cgroup v2 group and its `cpu.weight`, present when the cpu controller is on for it; `None` without
    /// a v2 hierarchy, or when the cpu controller is in v1.
    pub cpu_v2: Option<Group>,
    /// `CONFIG_RT_GROUP_SCHED` of the kernel's configuration; `None` when not readable.
    pub rt_group_sched: Option<bool>,
    /// Its cpuset group and `cpuset.cpus` (v1) or `cpuset.cpus.effective` (v2) there.
    pub cpuset: Option<Group>,
}

/// `/proc/self/limits` (proc(5)): the row starting with `name` → its soft and hard limit; "unlimited" is
/// `None`.
pub fn parse_limit(text: &str, name: &str) -> Option<Limit> {
    let row = text.lines().find(|l| l.starts_with(name))?;
    let mut w = row[name.len()..].split_whitespace();
    let one = |v: &str| -> Option<Option<u64>> {
        match v {
            "unlimited" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some(Limit {
        soft: one(w.next()?)?,
        hard: one(w.next()?)?,
    })
}

/// `/proc/self/cgroup` (cgroups(7)): the path of the v1 hierarchy whose controller list holds `controller`,
/// or of the v2 hierarchy (`0::/path`) when `controller` is empty.
pub fn parse_cgroup_path(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, list, path) = (f.next()?, f.next()?, f.next()?);
        let hit = if controller.is_empty() {
            id == "0" && list.is_empty()
        } else {
            list.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_string())
    })
}

/// `/proc/self/mountinfo` (proc(5)): (mount root, mount point) of the cgroup v1 mount with `controller` in its
/// super options, or of the cgroup2 mount when `controller` is empty.
pub fn parse_cgroup_mount(text: &str, controller: &str) -> Option<(String, String)> {
    text.lines().find_map(|l| {
        let (head, tail) = l.split_once(" - ")?;
        let h: Vec<&str> = head.split_whitespace().collect();
        let t: Vec<&str> = tail.split_whitespace().collect();
        let (fstype, options) = (*t.first()?, t.get(2).copied().unwrap_or(""));
        let hit = if controller.is_empty() {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && options.split(',').any(|o| o == controller)
        };
        if !hit {
            return None;
        }
        Some((h.get(3)?.to_string(), h.get(4)?.to_string()))
    })
}

/// Where a cgroup of `path` lies under a mount of `mount_root` at `mount_point` (a path outside the mount's
/// root, as another cgroup namespace shows it, is taken as relative to the mount).
fn group_dir(mount_root: &str, mount_point: &str, path: &str) -> String {
    let base = mount_root.trim_end_matches('/');
    let rel = match path.strip_prefix(base) {
        Some(r) if base.is_empty() || r.is_empty() || r.starts_with('/') => r,
        _ => path,
    };
    format!(
        "{}/{}",
        mount_point.trim_end_matches('/'),
        rel.trim_start_matches('/')
    )
    .trim_end_matches('/')
    .to_string()
}

/// Read what this process (`/proc/self`) may do.
pub fn read_privilege(root: &HostRoot) -> Privilege {
    let status = root
        .read_optional("/proc/self/status")
        .map(|t| parse_status(&t))
        .unwrap_or_default();
    let limits = root.read_optional("/proc/self/limits").unwrap_or_default();
    let cgroup = root.read_optional("/proc/self/cgroup").unwrap_or_default();
    let mounts = root
        .read_optional("/proc/self/mountinfo")
        .unwrap_or_default();
    // This process's group of a v1 `controller` (v2 when empty) and `file` in it.
    let group = |controller: &str, file: &str| -> Option<Group> {
        let path = parse_cgroup_path(&cgroup, controller)?;
        let (mroot, point) = parse_cgroup_mount(&mounts, controller)?;
        let file = format!("{}/{file}", group_dir(&mroot, &point, &path));
        let value = root.read_optional(&file).map(|v| v.trim().to_string());
        Some(Group { path, file, value })
    };
    let cpu_v1 = group("cpu", "cpu.rt_runtime_us");
    // On v2 a group has cpu.weight when the cpu controller is on for it (the root cgroup never has it).
    let cpu_v2 = cpu_v1.is_none().then(|| group("", "cpu.weight")).flatten();
    // On v2 a group without the cpuset controller has no cpuset file: its nearest ancestor's set binds it.
    let cpuset = group("cpuset", "cpuset.cpus").or_else(|| {
        let (mroot, point) = parse_cgroup_mount(&mounts, "")?;
        let mut path = parse_cgroup_path(&cgroup, "")?;
        loop {
            let file = format!("{}/cpuset.cpus.effective", group_dir(&mroot, &point, &path));
            let value = root.read_optional(&file).map(|v| v.trim().to_string());
            if value.is_some() || path.len() <= 1 {
                return Some(Group { path, file, value });
            }
            path = match path.rsplit_once('/') {
                Some((up, _)) if !up.is_empty() => up.to_string(),
                _ => "/".to_string(),
            };
        }
    });
    let kconfig = crate::fingerprint::read_kconfig(root);
    Privilege {
        euid: status
            .get("Uid")
            .and_then(|v| v.split_whitespace().nth(1)?.parse().ok()),
        cap_eff: status.get("CapEff").cloned(),
        rtprio: parse_limit(&limits, "Max realtime priority"),
        memlock: parse_limit(&limits, "Max locked memory"),
        vm_size_kib: status
            .get("VmSize")
            .and_then(|v| v.split_whitespace().next()?.parse().ok()),
        allowed: status
            .get("Cpus_allowed_list")
            .and_then(|v| CpuSet::parse(v).ok()),
        cpu_v1,
        cpu_v2,
        rt_group_sched: (!kconfig.is_empty())
            .then(|| kconfig.get("CONFIG_RT_GROUP_SCHED").map(String::as_str) == Some("y")),
        cpuset,
    }
}

/// A byte count as people write limits: `64 KiB`, `8 MiB`.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

impl Privilege {
    /// Name the cause and fix of `u` where what was read shows one (a refused priority, memory lock or
    /// affinity); others keep theirs.
    pub fn explain(&self, u: &mut Unmet) {
        let found = match u.condition {
            Condition::Priority => self.fifo_refusal(u.priority.unwrap_or(1)),
            Condition::Mlockall => self.mlockall_refusal(),
            // Only a cpuset read is the cause of a refused pin; the current mask never is.
            Condition::Affinity => u
                .cpus
                .as_ref()
                .and_then(|c| self.cpus_refusal(c))
                .filter(|r| r.certain),
            Condition::CpuDmaLatency => self.dma_latency_refusal(u.error.as_deref()),
            Condition::Trace => None,
        };
        if let Some(c) = found {
            u.cause = Some(c.cause);
            u.fix = Some(c.fix);
        }
    }

    /// Whether capability bit `cap` is effective; `None` when `CapEff` was not read.
    fn cap(&self, cap: u32) -> Option<bool> {
        parse_cap_has(self.cap_eff.as_deref()?, cap)
    }

    /// Whether CAP_SYS_NICE is effective.
    pub fn cap_sys_nice(&self) -> Option<bool> {
        self.cap(CAP_SYS_NICE)
    }

    /// Whether CAP_IPC_LOCK is effective.
    pub fn cap_ipc_lock(&self) -> Option<bool> {
        self.cap(CAP_IPC_LOCK)
    }

    /// Why SCHED_FIFO at `priority` is refused to this process, where what was read shows it (the first
    /// cause in the kernel's order of checks); `None` when nothing read refuses it.
    pub fn fifo_refusal(&self, priority: i32) -> Option<Refusal> {
        let want = u64::try_from(priority.max(1)).unwrap_or(1);
        // rtgauge's threads (as cyclictest's) raise the soft limit to the hard one first: the hard one decides.
        if self.cap_sys_nice() == Some(false) {
            if let Some(Limit { hard: Some(h), .. }) = self.rtprio {
                if h < want {
                    return Some(Refusal {
                        cause: format!(
                            "this process lacks CAP_SYS_NICE and its RLIMIT_RTPRIO (hard) is {h}, below \
                             priority {priority}"
                        ),
                        fix: format!(
                            "give it CAP_SYS_NICE (pod: securityContext.capabilities.add [SYS_NICE]; docker: \
                             --cap-add=SYS_NICE), or raise RLIMIT_RTPRIO to {priority} (limits.conf rtprio, \
                             systemd LimitRTPRIO=, prlimit --rtprio)"
                        ),
                        certain: true,
                    });
                }
            }
        }
        if let Some(g) = &self.cpu_v1 {
            if g.value.as_deref().and_then(parse_int) == Some(0) {
                return Some(Refusal {
                    cause: format!("this cgroup ({}) has cpu.rt_runtime_us = 0", g.path),
                    fix: "run the container with --cpu-rt-runtime=950000 (and dockerd with --cpu-rt-runtime), \
                          give the cgroup a real-time budget (cpu.rt_runtime_us, parents first), or run on \
                          the host"
                        .into(),
                    certain: true,
                });
            }
        }
        if let Some(g) = self.cpu_v2.as_ref().filter(|g| g.value.is_some()) {
            let (certain, kernel) = match self.rt_group_sched {
                Some(true) => (true, "the kernel has RT group scheduling (CONFIG_RT_GROUP_SCHED=y)"),
                Some(false) => return None,
                None => (
                    false,
                    "if the kernel has RT group scheduling (CONFIG_RT_GROUP_SCHED; its configuration is not \
                     readable here)",
                ),
            };
            return Some(Refusal {
                cause: format!(
                    "this cgroup v2 group ({}) has the cpu controller, and {kernel}: real-time tasks may run \
                     only in the root cgroup",
                    g.path
                ),
                fix: "run it in the root cgroup (or with the cpu controller off above it), or on a kernel \
                      without RT group scheduling"
                    .into(),
                certain,
            });
        }
        None
    }

    /// Why `/dev/cpu_dma_latency` could not be held, from the error opening it (`error`): the device is
    /// root's (mode 0600) on a default system, and this process is not root.
    pub fn dma_latency_refusal(&self, error: Option<&str>) -> Option<Refusal> {
        let uid = self.euid.filter(|u| *u != 0)?;
        error?.contains("Permission denied").then(|| Refusal {
            cause: format!("this process runs as uid {uid}, and the device opens for writing to root alone"),
            fix: "run as root, or hold the value outside the run (tuned force_latency, a root helper) and \
                  measure with --default-system"
                .into(),
            certain: true,
        })
    }

    /// Why `mlockall(MCL_CURRENT|MCL_FUTURE)` is refused to this process, where what was read shows it:
    /// without CAP_IPC_LOCK only an unlimited RLIMIT_MEMLOCK is sure to hold a measuring process, whose
    /// threads and histograms map more than it does before it measures.
    pub fn mlockall_refusal(&self) -> Option<Refusal> {
        if self.cap_ipc_lock() != Some(false) {
            return None;
        }
        let limit = self.memlock?.soft?;
        let size = self.vm_size_kib.map(|k| k.saturating_mul(1024));
        Some(Refusal {
            cause: format!(
                "this process lacks CAP_IPC_LOCK and its RLIMIT_MEMLOCK is {}{}",
                bytes(limit),
                size.filter(|s| *s > limit)
                    .map_or(String::new(), |s| format!(
                        ", less than the {} MiB it maps",
                        s.div_ceil(1 << 20)
                    ))
            ),
            fix: "give it CAP_IPC_LOCK (pod: securityContext.capabilities.add [IPC_LOCK]; docker: \
                  --cap-add=IPC_LOCK), or raise RLIMIT_MEMLOCK to unlimited (ulimit -l unlimited, systemd \
                  LimitMEMLOCK=infinity, docker --ulimit memlock=-1)"
                .into(),
            certain: size.is_some_and(|s| s > limit),
        })
    }

    /// Why `cpus` cannot all be used by this process's threads. Its cpuset bounds where a thread may pin
    /// itself (`sched_setaffinity` outside it is EINVAL); its current mask does not (isolcpus' default
    /// affinity, `taskset`, systemd's `CPUAffinity=` narrow it, and a thread may widen it again within the
    /// cpuset). So CPUs outside the cpuset are refused for certain; with no cpuset read, CPUs outside the
    /// current mask may be. `None` when none is outside, or neither was read.
    pub fn cpus_refusal(&self, cpus: &CpuSet) -> Option<Refusal> {
        let fix = |allowed: &CpuSet| {
            format!(
                "give the pod guaranteed QoS with whole CPUs (static CPU manager policy) or the container \
                 --cpuset-cpus, or measure --cpus {allowed}"
            )
        };
        if let Some((g, set)) = self.cpuset_cpus() {
            let outside = cpus.difference(&set);
            let name = g.file.rsplit('/').next().unwrap_or("cpuset.cpus");
            return (!outside.is_empty()).then(|| Refusal {
                cause: format!(
                    "CPUs {outside} are outside this process's cpuset, {set} (cpuset {}: {name})",
                    g.path
                ),
                fix: fix(&set),
                certain: true,
            });
        }
        let allowed = self.allowed.as_ref()?;
        let outside = cpus.difference(allowed);
        (!outside.is_empty()).then(|| Refusal {
            cause: format!(
                "CPUs {outside} are outside this process's current CPUs, {allowed}, and its cpuset was not \
                 readable (a cpuset refuses them; a mask set by isolcpus or taskset does not)"
            ),
            fix: fix(allowed),
            certain: false,
        })
    }

    /// The cpuset group read and its CPUs, when its value parses.
    pub fn cpuset_cpus(&self) -> Option<(&Group, CpuSet)> {
        let g = self.cpuset.as_ref()?;
        Some((g, CpuSet::parse(g.value.as_deref()?).ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max locked memory         65536                65536                bytes     \n\
        Max realtime priority     0                    unlimited                      \n";

    #[test]
    fn limits_and_cgroups_parse_and_garbage_reads_as_absent() {
        assert_eq!(
            parse_limit(LIMITS, "Max realtime priority"),
            Some(Limit {
                soft: Some(0),
                hard: None
            })
        );
        assert_eq!(
            parse_limit(LIMITS, "Max locked memory").and_then(|l| l.soft),
            Some(65536)
        );
        assert_eq!(
            parse_limit("Max realtime priority x y", "Max realtime priority"),
            None
        );
        assert_eq!(parse_limit("", "Max locked memory"), None);
        let cg = "12:cpu,cpuacct:/docker/ab\n4:cpuset:/docker/ab\n0::/user.slice\n";
        assert_eq!(parse_cgroup_path(cg, "cpu").as_deref(), Some("/docker/ab"));
        assert_eq!(
            parse_cgroup_path(cg, "cpuacct").as_deref(),
            Some("/docker/ab")
        );
        assert_eq!(parse_cgroup_path(cg, "").as_deref(), Some("/user.slice"));
        assert_eq!(parse_cgroup_path(cg, "memory"), None);
        assert_eq!(parse_cgroup_path(":::\n\n", "cpu"), None);
        let mi =
            "32 31 0:29 /docker/ab /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                  50 31 0:40 / /x rw - cgroup cgroup rw,cpuset\n";
        assert_eq!(
            parse_cgroup_mount(mi, "cpu"),
            Some(("/docker/ab".into(), "/sys/fs/cgroup/cpu,cpuacct".into()))
        );
        assert_eq!(
            parse_cgroup_mount(mi, ""),
            Some(("/".into(), "/sys/fs/cgroup/unified".into()))
        );
        assert_eq!(parse_cgroup_mount("garbage - \n", "cpu"), None);
        // A container's namespace: its group is the mount's root.
        assert_eq!(
            group_dir("/docker/ab", "/sys/fs/cgroup/cpu", "/docker/ab"),
            "/sys/fs/cgroup/cpu"
        );
        assert_eq!(
            group_dir("/", "/sys/fs/cgroup/cpu", "/rtg"),
            "/sys/fs/cgroup/cpu/rtg"
        );
    }

    fn p() -> Privilege {
        Privilege {
            cap_eff: Some("000001ffffffffff".into()),
            rtprio: Some(Limit {
                soft: Some(0),
                hard: Some(0),
            }),
            memlock: Some(Limit {
                soft: Some(65536),
                hard: Some(65536),
            }),
            vm_size_kib: Some(200 * 1024),
            allowed: CpuSet::parse("0-1").ok(),
            ..Privilege::default()
        }
    }

    #[test]
    fn each_refusal_names_its_cause_in_the_kernels_order() {
        let mut x = p();
        assert_eq!(x.fifo_refusal(95), None, "root with every capability");
        assert_eq!(x.mlockall_refusal(), None);
        x.cpu_v1 = Some(Group {
            path: "/rtg".into(),
            file: "/sys/fs/cgroup/cpu/rtg/cpu.rt_runtime_us".into(),
            value: Some("0".into()),
        });
        assert_eq!(
            x.fifo_refusal(95).unwrap().cause,
            "this cgroup (/rtg) has cpu.rt_runtime_us = 0"
        );
        x.cap_eff = Some("0000000000000000".into());
        let c = x.fifo_refusal(95).unwrap();
        assert_eq!(
            c.cause,
            "this process lacks CAP_SYS_NICE and its RLIMIT_RTPRIO (hard) is 0, below priority 95"
        );
        assert!(c.fix.contains("SYS_NICE"), "{}", c.fix);
        x.rtprio = Some(Limit {
            soft: Some(99),
            hard: Some(99),
        });
        assert!(x
            .fifo_refusal(95)
            .unwrap()
            .cause
            .contains("cpu.rt_runtime_us = 0"));
        assert_eq!(
            x.mlockall_refusal().unwrap().cause,
            "this process lacks CAP_IPC_LOCK and its RLIMIT_MEMLOCK is 64 KiB, less than the 200 MiB it maps"
        );
        x.vm_size_kib = Some(10);
        let r = x.mlockall_refusal().unwrap();
        assert!(
            !r.certain,
            "a finite limit above what it maps now may not hold the run"
        );
        assert_eq!(
            r.cause,
            "this process lacks CAP_IPC_LOCK and its RLIMIT_MEMLOCK is 64 KiB"
        );
        x.memlock = Some(Limit {
            soft: None,
            hard: None,
        });
        assert_eq!(x.mlockall_refusal(), None, "unlimited");
        // The mask alone (no cpuset read): CPUs outside it may be refused, not for certain.
        let two = CpuSet::parse("1-3").unwrap();
        let r = x.cpus_refusal(&two).unwrap();
        assert!(!r.certain);
        assert!(
            r.cause
                .starts_with("CPUs 2-3 are outside this process's current CPUs, 0-1,"),
            "{}",
            r.cause
        );
        assert_eq!(x.cpus_refusal(&CpuSet::parse("0").unwrap()), None);
        // The cpuset decides: a mask narrower than it (isolcpus, taskset) refuses nothing within it.
        x.cpuset = Some(Group {
            path: "/".into(),
            file: "/sys/fs/cgroup/cpuset/cpuset.cpus".into(),
            value: Some("0-2".into()),
        });
        let r = x.cpus_refusal(&two).unwrap();
        assert!(r.certain);
        assert_eq!(
            r.cause,
            "CPUs 3 are outside this process's cpuset, 0-2 (cpuset /: cpuset.cpus)"
        );
        assert_eq!(x.cpus_refusal(&CpuSet::parse("1-2").unwrap()), None);
        // An affinity that failed is explained only by the cpuset.
        let mut u = Unmet::new(Condition::Affinity, "not pinned");
        u.cpus = Some(two);
        x.explain(&mut u);
        assert_eq!(
            u.cause.as_deref(),
            Some("CPUs 3 are outside this process's cpuset, 0-2 (cpuset /: cpuset.cpus)")
        );
    }

    #[test]
    fn cgroup_v2_refuses_only_with_rt_group_scheduling_and_the_cpu_controller() {
        let mut x = p();
        x.cpu_v2 = Some(Group {
            path: "/".into(),
            file: "/sys/fs/cgroup/cpu.weight".into(),
            value: Some("100".into()),
        });
        let r = x.fifo_refusal(50).unwrap();
        assert!(
            !r.certain && r.cause.contains("if the kernel has RT group scheduling"),
            "{r:?}"
        );
        x.rt_group_sched = Some(true);
        let r = x.fifo_refusal(50).unwrap();
        assert!(r.certain && r.cause.contains("root cgroup"), "{r:?}");
        x.rt_group_sched = Some(false);
        assert_eq!(x.fifo_refusal(50), None);
        x.rt_group_sched = Some(true);
        x.cpu_v2.as_mut().unwrap().value = None;
        assert_eq!(x.fifo_refusal(50), None, "no cpu controller on the group");
    }
}
