//! VMware `.vmx` linter (catalogue §10). The format: one `key = "value"` per line, keys case-insensitive,
//! `#` comments; booleans `"TRUE"`/`"FALSE"` in any case. Unquoted values (as typed in the vSphere UI and in the
//! seed documents) are accepted; a line without `=`, an empty key or an unterminated quote is malformed.
//!
//! Settings of the seed documents (VMware RAN guides) that are dropped or set to another value fail their
//! rule; keys whose semantics VMware does not document publicly are reported, not over-claimed.

use super::{finding, report, LintError, LintRule};
use rtgauge_model::audit::{AuditReport, Evidence, Finding, Severity, Status, Subject};
use std::collections::{BTreeMap, BTreeSet};

/// Parsed `.vmx`: lower-cased key → (value, 1-based line), and the lines that are not `key = "value"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vmx {
    pub entries: BTreeMap<String, (String, usize)>,
    /// `(1-based line, why)` of each malformed line; the rest of the file is still read.
    pub malformed: Vec<(usize, String)>,
}

impl Vmx {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .get(&key.to_ascii_lowercase())
            .map(|(v, _)| v.as_str())
    }
    pub fn line(&self, key: &str) -> Option<usize> {
        self.entries.get(&key.to_ascii_lowercase()).map(|(_, l)| *l)
    }
    pub fn is_true(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
    pub fn num(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(|v| v.trim().parse().ok())
    }
}

/// Parse a `.vmx` file's text. A malformed line is kept in [`Vmx::malformed`] and the rest is read; only a
/// text with no `key = "value"` line at all (not a .vmx) is an error, naming `file` and the first bad line.
pub fn parse_vmx(file: &str, text: &str) -> Result<Vmx, LintError> {
    let mut vmx = Vmx::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        match parse_line(l) {
            Ok((k, value)) => {
                vmx.entries.insert(k.to_ascii_lowercase(), (value, line));
            }
            Err(reason) => vmx.malformed.push((line, reason)),
        }
    }
    match vmx.malformed.first() {
        Some((line, reason)) if vmx.entries.is_empty() => Err(LintError::Malformed {
            file: file.to_string(),
            line: *line,
            reason: format!("{reason} (no line of this file is a .vmx setting)"),
        }),
        _ => Ok(vmx),
    }
}

/// One trimmed, non-comment line: `(key, value)`, or why it is not `key = "value"`.
fn parse_line(l: &str) -> Result<(&str, String), String> {
    let (k, v) = l
        .split_once('=')
        .ok_or_else(|| "expected key = \"value\"".to_string())?;
    let k = k.trim();
    if k.is_empty() || k.chars().any(|c| c.is_whitespace() || c == '"') {
        return Err(format!("invalid key '{k}'"));
    }
    let v = v.trim();
    let value = if let Some(rest) = v.strip_prefix('"') {
        let end = rest
            .find('"')
            .ok_or_else(|| "unterminated quoted value".to_string())?;
        let tail = rest[end + 1..].trim();
        if !tail.is_empty() && !tail.starts_with('#') {
            return Err(format!("unexpected text after the value: '{tail}'"));
        }
        rest[..end].to_string()
    } else {
        // Unquoted value, as typed in the UI: up to a comment.
        v.split('#').next().unwrap_or("").trim().to_string()
    };
    Ok((k, value))
}

/// A line that is not `key = "value"`: ESXi refuses to register or power on a VM whose .vmx it cannot
/// parse, and whatever the line meant to set is not set.
const R_SYNTAX: LintRule = LintRule {
    id: "vmx-syntax",
    severity: Severity::High,
    expected: "every line is key = \"value\" or a # comment",
    remediation:
        "Fix or remove the line (edit the VM's advanced settings rather than the file by hand).",
    source: "[V1]",
};

const R_LS: LintRule = LintRule {
    id: "vmx-latency-sensitivity",
    severity: Severity::High,
    expected: "sched.cpu.latencySensitivity = \"high\" (or exclusive manual pinning of every vCPU)",
    remediation: "Edit Settings → VM Options → Advanced → Latency Sensitivity = High (sched.cpu.latencySensitivity = \"high\").",
    source: "[V2][V1][V8]",
};
const R_CPU: LintRule = LintRule {
    id: "vmx-cpu-reservation",
    severity: Severity::High,
    expected: "sched.cpu.min = numvcpus × core MHz, no CPU limit (sched.cpu.max absent)",
    remediation: "Edit Settings → CPU → Reservation = full MHz of every vCPU, Limit = Unlimited.",
    source: "[V1][V7]",
};
const R_MEM: LintRule = LintRule {
    id: "vmx-mem-reservation",
    severity: Severity::High,
    expected: "sched.mem.min = memSize and/or sched.mem.pin = \"TRUE\" (reserve all guest memory, locked)",
    remediation: "Edit Settings → Memory → Reservation → Reserve all guest memory (All locked): sched.mem.min = <memSize>, sched.mem.pin = \"TRUE\".",
    source: "[V1][V7][seed]",
};
const R_AFF: LintRule = LintRule {
    id: "vmx-vcpu-affinity",
    severity: Severity::Medium,
    expected: "with manual pinning: sched.vcpuN.affinity for every vCPU, distinct single pCPUs, sched.cpu.affinity.exclusive = \"TRUE\"",
    remediation: "Prefer Latency Sensitivity High; if pinning, set sched.vcpuN.affinity = \"<pcpu>\" for every vCPU (one per core) and sched.cpu.affinity.exclusive = \"TRUE\".",
    source: "[V9][V1][seed]",
};
const R_NOSTATS: LintRule = LintRule {
    id: "vmx-exclusive-nostats",
    severity: Severity::Low,
    expected: "sched.cpu.affinity.exclusiveNoStats = \"TRUE\"",
    remediation: "Add sched.cpu.affinity.exclusiveNoStats = \"TRUE\" (power-cycle the VM).",
    source: "[V5][V4][seed]",
};
const R_MPTI: LintRule = LintRule {
    id: "vmx-force-mpti",
    severity: Severity::Low,
    expected: "monitor.forceEnableMPTI = \"TRUE\"",
    remediation: "Add monitor.forceEnableMPTI = \"TRUE\".",
    source: "[V5][seed]",
};
const R_TT: LintRule = LintRule {
    id: "vmx-timetracker-lowlatency",
    severity: Severity::Low,
    expected: "timeTracker.lowLatency = \"TRUE\"",
    remediation: "Add timeTracker.lowLatency = \"TRUE\" (power-cycle the VM).",
    source: "[V5][V4][seed]",
};
const R_PREALLOC: LintRule = LintRule {
    id: "vmx-mem-prealloc",
    severity: Severity::Low,
    expected: "sched.mem.prealloc = \"TRUE\" and sched.mem.prealloc.pinnedMainMem (or sched.mem.pinnedMainMem) = \"TRUE\"",
    remediation: "Add sched.mem.prealloc = \"TRUE\" and sched.mem.prealloc.pinnedMainMem = \"TRUE\".",
    source: "[V10][seed]",
};
const R_1G: LintRule = LintRule {
    id: "vmx-1g-pages",
    severity: Severity::Medium,
    expected: "sched.mem.lpage.enable1GPage = \"TRUE\" with full memory reservation",
    remediation: "Reserve all guest memory, then add sched.mem.lpage.enable1GPage = \"TRUE\" (power-off needed).",
    source: "[V3][V4][seed]",
};
const R_TOPO: LintRule = LintRule {
    id: "vmx-vtopology",
    severity: Severity::Low,
    expected: "CPU and memory hot-add off; VM inside one NUMA node (numa.nodeAffinity); coresPerSocket reported",
    remediation: "Disable CPU/memory hot-add (vcpu.hotadd = \"FALSE\", mem.hotadd = \"FALSE\"), size to one NUMA node, set numa.nodeAffinity.",
    source: "[V5][seed]",
};
const R_NIC: LintRule = LintRule {
    id: "vmx-vnic-coalescing",
    severity: Severity::Low,
    expected: "ethernetX.virtualDev = \"vmxnet3\", ethernetX.coalescingScheme = \"disabled\" (automatic with Latency Sensitivity High)",
    remediation: "Set ethernetX.coalescingScheme = \"disabled\" on every vmxnet3 NIC.",
    source: "[V6][V1]",
};
const R_MISC: LintRule = LintRule {
    id: "vmx-misc",
    severity: Severity::Info,
    expected: "evidence: logging = \"FALSE\", sched.swap.vmxSwapEnabled = \"FALSE\", recent virtualHW.version",
    remediation: "Adjust the keys (Edit Settings → VM Options → Advanced).",
    source: "[V4][V7][seed]",
};

/// Evidence for one key: `file:line` or `file (absent)`.
fn ev(file: &str, vmx: &Vmx, key: &str) -> Evidence {
    match vmx.line(key) {
        Some(l) => Evidence::new(key, format!("{file}:{l}"), vmx.get(key).unwrap_or("")),
        None => Evidence::new(key, file.to_string(), "absent"),
    }
}

/// Lint a `.vmx` text.
pub fn lint_vmx(file: &str, text: &str) -> Result<AuditReport, LintError> {
    let vmx = parse_vmx(file, text)?;
    let mut findings: Vec<Finding> = vmx
        .malformed
        .iter()
        .map(|(line, reason)| {
            finding(
                &R_SYNTAX,
                Status::Fail,
                format!("{file}:{line}: {reason}"),
                vec![Evidence::new(
                    "line",
                    format!("{file}:{line}"),
                    text.lines().nth(line - 1).unwrap_or("").trim().to_string(),
                )],
            )
        })
        .collect();
    findings.extend(lint_parsed(file, &vmx));
    Ok(report(Subject::Vmx, file, findings))
}

fn lint_parsed(file: &str, v: &Vmx) -> Vec<Finding> {
    let e = |k: &str| ev(file, v, k);
    let mut out = Vec::new();
    let ls_high = v
        .get("sched.cpu.latencySensitivity")
        .is_some_and(|s| s.eq_ignore_ascii_case("high"));
    let nvcpu = v.num("numvcpus").unwrap_or(1).max(1);

    // vCPU pinning, needed by several rules.
    let mut pinned = Vec::new();
    let mut pin_problems = Vec::new();
    let mut pcpus = BTreeSet::new();
    let mut pin_ev = Vec::new();
    for n in 0..nvcpu {
        let key = format!("sched.vcpu{n}.affinity");
        pin_ev.push(e(&key));
        if let Some(a) = v.get(&key) {
            match a.trim().parse::<u32>() {
                Ok(p) => {
                    if !pcpus.insert(p) {
                        pin_problems.push(format!("vCPU {n} shares pCPU {p}"));
                    }
                    pinned.push(n);
                }
                Err(_) => {
                    pin_problems.push(format!("vCPU {n} affinity '{a}' is not a single pCPU"))
                }
            }
        }
    }
    let exclusive = v.is_true("sched.cpu.affinity.exclusive");
    let all_pinned = pinned.len() as i64 == nvcpu && pin_problems.is_empty();
    let manual_exclusive = all_pinned && exclusive;

    // Latency sensitivity.
    let ls_val = v
        .get("sched.cpu.latencySensitivity")
        .unwrap_or("normal (absent)")
        .to_string();
    out.push(if ls_high {
        finding(
            &R_LS,
            Status::Pass,
            "latency sensitivity high",
            vec![e("sched.cpu.latencySensitivity")],
        )
    } else if manual_exclusive {
        finding(
            &R_LS,
            Status::Pass,
            format!("latency sensitivity {ls_val}, but every vCPU is exclusively pinned"),
            vec![
                e("sched.cpu.latencySensitivity"),
                e("sched.cpu.affinity.exclusive"),
            ],
        )
    } else {
        finding(
            &R_LS,
            Status::Fail,
            format!("latency sensitivity {ls_val} and no exclusive pinning"),
            vec![e("sched.cpu.latencySensitivity")],
        )
    });

    // CPU reservation.
    let cpu_min = v.num("sched.cpu.min");
    let cpu_max = v.get("sched.cpu.max").map(str::to_string);
    let cpu_ev = vec![
        e("sched.cpu.min"),
        e("sched.cpu.max"),
        e("sched.cpu.units"),
        e("numvcpus"),
    ];
    let limited = cpu_max
        .as_deref()
        .is_some_and(|m| m.trim() != "-1" && !m.eq_ignore_ascii_case("unlimited"));
    out.push(if limited {
        finding(&R_CPU, Status::Fail, format!("CPU limit {} set", cpu_max.unwrap_or_default()), cpu_ev)
    } else {
        match cpu_min {
            Some(m) if m > 0 => finding(&R_CPU, Status::Pass, format!("CPU reservation {m} MHz for {nvcpu} vCPU(s) (host MHz not known here: check it is the full amount)"), cpu_ev),
            _ if manual_exclusive && !ls_high => finding(&R_CPU, Status::Warn, "no CPU reservation (exclusive manual pinning holds the pCPUs)", cpu_ev),
            _ => finding(&R_CPU, Status::Fail, "no CPU reservation (Latency Sensitivity High requires a full one)", cpu_ev),
        }
    });

    // Memory reservation.
    let mem_size = v.num("memSize");
    let mem_min = v.num("sched.mem.min");
    let pin = v.is_true("sched.mem.pin");
    // A minimum below memSize is a partial reservation even with pin set (the pin then locks only part).
    let partial = matches!((mem_min, mem_size), (Some(a), Some(b)) if a < b);
    let full_mem = !partial && (pin || (mem_size.is_some() && mem_min == mem_size));
    let mem_ev = vec![e("memSize"), e("sched.mem.min"), e("sched.mem.pin")];
    out.push(if full_mem {
        finding(&R_MEM, Status::Pass, "all guest memory reserved", mem_ev)
    } else {
        let s = match (mem_min, mem_size) {
            (Some(a), Some(b)) => format!("memory reservation {a} MB of {b} MB"),
            (None, _) => "no memory reservation".to_string(),
            (Some(a), None) => format!("memory reservation {a} MB, memSize absent"),
        };
        finding(&R_MEM, Status::Fail, s, mem_ev)
    });

    // vCPU affinity.
    let mut aff_ev = pin_ev;
    aff_ev.push(e("sched.cpu.affinity.exclusive"));
    aff_ev.push(e("sched.cpu.affinity.exclusiveType"));
    out.push(if pinned.is_empty() && pin_problems.is_empty() {
        if ls_high {
            finding(
                &R_AFF,
                Status::Pass,
                "no manual pinning; Latency Sensitivity High grants exclusive affinity",
                aff_ev,
            )
        } else {
            finding(
                &R_AFF,
                Status::Fail,
                "no manual pinning and Latency Sensitivity not high",
                aff_ev,
            )
        }
    } else if !pin_problems.is_empty() {
        finding(&R_AFF, Status::Fail, pin_problems.join("; "), aff_ev)
    } else if !all_pinned {
        let missing: Vec<String> = (0..nvcpu)
            .filter(|n| !pinned.contains(n))
            .map(|n| n.to_string())
            .collect();
        finding(
            &R_AFF,
            Status::Fail,
            format!("vCPU(s) {} not pinned", missing.join(",")),
            aff_ev,
        )
    } else if !exclusive {
        finding(
            &R_AFF,
            Status::Fail,
            "every vCPU pinned but sched.cpu.affinity.exclusive is not TRUE",
            aff_ev,
        )
    } else {
        let t = v
            .get("sched.cpu.affinity.exclusiveType")
            .map(|t| format!(" (exclusiveType {t}: reported, not judged)"))
            .unwrap_or_default();
        finding(
            &R_AFF,
            Status::Pass,
            format!("{nvcpu} vCPU(s) pinned to distinct pCPUs, exclusive{t}"),
            aff_ev,
        )
    });

    // Seed switches: dropped or not TRUE fails.
    for (rule, key) in [
        (&R_NOSTATS, "sched.cpu.affinity.exclusiveNoStats"),
        (&R_MPTI, "monitor.forceEnableMPTI"),
        (&R_TT, "timeTracker.lowLatency"),
    ] {
        out.push(match v.get(key) {
            Some(_) if v.is_true(key) => {
                finding(rule, Status::Pass, format!("{key} = TRUE"), vec![e(key)])
            }
            Some(x) => finding(rule, Status::Fail, format!("{key} = {x}"), vec![e(key)]),
            None => finding(rule, Status::Fail, format!("{key} absent"), vec![e(key)]),
        });
    }

    // Memory preallocation: the seed 000 keys; spelling varies, so any present form counts.
    let pre = "sched.mem.prealloc";
    let pinned_keys = [
        "sched.mem.prealloc.pinnedMainMem",
        "sched.mem.pinnedMainMem",
    ];
    let mut pre_ev = vec![e(pre)];
    pre_ev.extend(pinned_keys.iter().map(|k| e(k)));
    let falses: Vec<&str> = std::iter::once(pre)
        .chain(pinned_keys)
        .filter(|k| v.get(k).is_some() && !v.is_true(k))
        .collect();
    let pinned_main = pinned_keys.iter().any(|k| v.is_true(k));
    out.push(if !falses.is_empty() {
        finding(
            &R_PREALLOC,
            Status::Fail,
            format!("{} not TRUE", falses.join(", ")),
            pre_ev,
        )
    } else if v.is_true(pre) && pinned_main {
        finding(
            &R_PREALLOC,
            Status::Pass,
            "guest memory preallocated and pinned",
            pre_ev,
        )
    } else if v.is_true(pre) || pinned_main {
        finding(
            &R_PREALLOC,
            Status::Warn,
            "only one of prealloc / pinnedMainMem set",
            pre_ev,
        )
    } else {
        finding(
            &R_PREALLOC,
            Status::Warn,
            "memory preallocation keys absent",
            pre_ev,
        )
    });

    // 1 GiB pages.
    let key1g = "sched.mem.lpage.enable1GPage";
    let mut ev1g = vec![e(key1g)];
    ev1g.extend([e("sched.mem.min"), e("sched.mem.pin")]);
    out.push(match v.get(key1g) {
        Some(_) if v.is_true(key1g) && full_mem => finding(
            &R_1G,
            Status::Pass,
            "1 GiB pages with full memory reservation",
            ev1g,
        ),
        Some(_) if v.is_true(key1g) => finding(
            &R_1G,
            Status::Fail,
            "1 GiB pages without full memory reservation: the VM will not power on",
            ev1g,
        ),
        Some(x) => finding(&R_1G, Status::Fail, format!("{key1g} = {x}"), ev1g),
        None => finding(
            &R_1G,
            Status::Fail,
            format!("{key1g} absent: guest RAM on small pages"),
            ev1g,
        ),
    });

    // vTopology.
    let topo_ev = vec![
        e("cpuid.coresPerSocket"),
        e("numa.nodeAffinity"),
        e("numa.vcpu.preferHT"),
        e("vcpu.hotadd"),
        e("mem.hotadd"),
    ];
    let hot: Vec<&str> = ["vcpu.hotadd", "mem.hotadd"]
        .into_iter()
        .filter(|k| v.is_true(k))
        .collect();
    out.push(if hot.is_empty() {
        finding(
            &R_TOPO,
            Status::Pass,
            format!(
                "hot-add off; coresPerSocket {}",
                v.get("cpuid.coresPerSocket").unwrap_or("default")
            ),
            topo_ev,
        )
    } else {
        finding(
            &R_TOPO,
            Status::Fail,
            format!("{} on: hides vNUMA", hot.join(", ")),
            topo_ev,
        )
    });

    // vNICs.
    let mut nics = Vec::new();
    for (k, _) in v.entries.iter() {
        if let Some(n) = k
            .strip_prefix("ethernet")
            .and_then(|r| r.strip_suffix(".present"))
        {
            if n.chars().all(|c| c.is_ascii_digit()) && v.is_true(k) {
                nics.push(n.to_string());
            }
        }
    }
    let mut nic_ev = Vec::new();
    let mut nic_bad = Vec::new();
    for n in &nics {
        let dev = format!("ethernet{n}.virtualDev");
        let co = format!("ethernet{n}.coalescingScheme");
        nic_ev.push(e(&dev));
        nic_ev.push(e(&co));
        let is_vmxnet3 = v
            .get(&dev)
            .is_some_and(|d| d.eq_ignore_ascii_case("vmxnet3"));
        let off = v
            .get(&co)
            .is_some_and(|d| d.eq_ignore_ascii_case("disabled"));
        if !is_vmxnet3 {
            nic_bad.push(format!("ethernet{n} not vmxnet3"));
        } else if !off && !ls_high {
            nic_bad.push(format!("ethernet{n} interrupt coalescing on"));
        }
    }
    out.push(if nics.is_empty() {
        finding(&R_NIC, Status::NotApplicable, "no virtual NIC", nic_ev)
    } else if nic_bad.is_empty() {
        finding(
            &R_NIC,
            Status::Pass,
            format!("{} vNIC(s) vmxnet3 without coalescing", nics.len()),
            nic_ev,
        )
    } else {
        finding(&R_NIC, Status::Warn, nic_bad.join("; "), nic_ev)
    });

    // Misc (info).
    let misc_ev = vec![
        e("logging"),
        e("sched.swap.vmxSwapEnabled"),
        e("virtualHW.version"),
    ];
    let mut notes = Vec::new();
    if !v
        .get("logging")
        .is_some_and(|l| l.eq_ignore_ascii_case("false"))
    {
        notes.push("logging on");
    }
    if !v
        .get("sched.swap.vmxSwapEnabled")
        .is_some_and(|l| l.eq_ignore_ascii_case("false"))
    {
        notes.push("VMX swap on");
    }
    out.push(if notes.is_empty() {
        finding(&R_MISC, Status::Pass, "logging and VMX swap off", misc_ev)
    } else {
        finding(&R_MISC, Status::Warn, notes.join(", "), misc_ev)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_quotes_case_and_errors() {
        let v = parse_vmx("a.vmx", ".encoding = \"UTF-8\"\n# c\nSched.Mem.Pin = \"TRUE\"\nsched.cpu.affinity.exclusive=TRUE # note\n").unwrap();
        assert!(v.is_true("sched.mem.pin"));
        assert_eq!(v.line("SCHED.MEM.PIN"), Some(3));
        assert!(v.is_true("sched.cpu.affinity.exclusive"));
        // A malformed line is kept with its line number; the rest is read.
        let b = parse_vmx("b.vmx", "a = \"1\"\nbroken line\nc = \"3\"\n").unwrap();
        assert_eq!(b.malformed, [(2, "expected key = \"value\"".to_string())]);
        assert_eq!((b.get("a"), b.get("c")), (Some("1"), Some("3")));
        // Nothing readable at all: not a .vmx.
        let e = parse_vmx("c.vmx", "a = \"open\n").unwrap_err().to_string();
        assert!(e.starts_with("c.vmx:1: unterminated quoted value"), "{e}");
        assert!(parse_vmx("d.vmx", " = \"x\"\n").is_err());
        assert!(parse_vmx("e.vmx", "a = \"x\" y\n").is_err());
    }

    proptest::proptest! {
        #[test]
        fn no_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = lint_vmx("x.vmx", &String::from_utf8_lossy(&bytes));
        }
    }
}
