//! VMware `.vmx` linter (catalogue §10). The format: one `key = "value"` per line, keys case-insensitive,
//! `#` comments; booleans `"TRUE"`/`"FALSE"` in any case. Unquoted values (as typed in the vSphere UI and in the
//! seed documents) are accepted; a line without `=`, an empty key or an unterminated quote is malformed.
//!
//! Settings of the seed documents (VMware RAN guides) that are dropped or set to another value fail their
//! rule; keys whose semantics VMware does not document publicly are reported, not over-claimed.

use super::{report, run_rules, LintError, LintOutcome, LintRule};
use rtgauge_model::audit::{AuditReport, Evidence, Severity, Subject};
use std::collections::{BTreeMap, BTreeSet};

/// Parsed `.vmx`: lower-cased key → (value, 1-based line), and the lines that are not `key = "value"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vmx {
    /// Lower-cased key → (value, 1-based line); a later line with the same key replaces an earlier one.
    pub entries: BTreeMap<String, (String, usize)>,
    /// `(1-based line, why)` of each malformed line; the rest of the file is still read.
    pub malformed: Vec<(usize, LineError)>,
}

/// Why a `.vmx` line is not `key = "value"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// No `=` on the line.
    #[error("expected key = \"value\"")]
    NoEquals,
    /// The key holds characters a `.vmx` key cannot.
    #[error("invalid key '{0}'")]
    InvalidKey(String),
    /// The quoted value has no closing quote.
    #[error("unterminated quoted value")]
    Unterminated,
    /// Text follows the closing quote.
    #[error("unexpected text after the value: '{0}'")]
    TextAfterValue(String),
}

impl Vmx {
    /// The value of `key` (case-insensitive), if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .get(&key.to_ascii_lowercase())
            .map(|(v, _)| v.as_str())
    }
    /// The 1-based line that sets `key` (case-insensitive).
    pub fn line(&self, key: &str) -> Option<usize> {
        self.entries.get(&key.to_ascii_lowercase()).map(|(_, l)| *l)
    }
    /// Whether `key` is set to `TRUE` (any case).
    pub fn is_true(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
    /// The value of `key` as an integer, if set and numeric.
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
fn parse_line(l: &str) -> Result<(&str, String), LineError> {
    let (k, v) = l.split_once('=').ok_or(LineError::NoEquals)?;
    let k = k.trim();
    if k.is_empty() || k.chars().any(|c| c.is_whitespace() || c == '"') {
        return Err(LineError::InvalidKey(k.to_string()));
    }
    let v = v.trim();
    let value = if let Some(rest) = v.strip_prefix('"') {
        let end = rest.find('"').ok_or(LineError::Unterminated)?;
        let tail = rest[end + 1..].trim();
        if !tail.is_empty() && !tail.starts_with('#') {
            return Err(LineError::TextAfterValue(tail.to_string()));
        }
        rest[..end].to_string()
    } else {
        // Unquoted value, as typed in the UI: up to a comment.
        v.split('#').next().unwrap_or("").trim().to_string()
    };
    Ok((k, value))
}

/// A check of the `.vmx` rules.
type Check = fn(&Facts<'_>) -> Vec<LintOutcome>;

/// The `.vmx` rules, in report order.
const RULES: &[LintRule<Check>] = &[
    // A line that is not `key = "value"`: ESXi refuses to register or power on a VM whose .vmx it cannot
    // parse, and whatever the line meant to set is not set.
    LintRule {
        id: "vmx-syntax",
        severity: Severity::High,
        expected: "every line is key = \"value\" or a # comment",
        remediation:
            "Fix or remove the line (edit the VM's advanced settings rather than the file by hand).",
        source: "[V1]",
        check: syntax,
    },
    LintRule {
        id: "vmx-latency-sensitivity",
        severity: Severity::High,
        expected: "sched.cpu.latencySensitivity = \"high\" (or exclusive manual pinning of every vCPU)",
        remediation: "Edit Settings → VM Options → Advanced → Latency Sensitivity = High (sched.cpu.latencySensitivity = \"high\").",
        source: "[V2][V1][V8]",
        check: latency_sensitivity,
    },
    LintRule {
        id: "vmx-cpu-reservation",
        severity: Severity::High,
        expected: "sched.cpu.min = numvcpus × core MHz, no CPU limit (sched.cpu.max absent)",
        remediation: "Edit Settings → CPU → Reservation = full MHz of every vCPU, Limit = Unlimited.",
        source: "[V1][V7]",
        check: cpu_reservation,
    },
    LintRule {
        id: "vmx-mem-reservation",
        severity: Severity::High,
        expected: "sched.mem.min = memSize and/or sched.mem.pin = \"TRUE\" (reserve all guest memory, locked)",
        remediation: "Edit Settings → Memory → Reservation → Reserve all guest memory (All locked): sched.mem.min = <memSize>, sched.mem.pin = \"TRUE\".",
        source: "[V1][V7][seed]",
        check: mem_reservation,
    },
    LintRule {
        id: "vmx-vcpu-affinity",
        severity: Severity::Medium,
        expected: "with manual pinning: sched.vcpuN.affinity for every vCPU, distinct single pCPUs, sched.cpu.affinity.exclusive = \"TRUE\"",
        remediation: "Prefer Latency Sensitivity High; if pinning, set sched.vcpuN.affinity = \"<pcpu>\" for every vCPU (one per core) and sched.cpu.affinity.exclusive = \"TRUE\".",
        source: "[V9][V1][seed]",
        check: vcpu_affinity,
    },
    LintRule {
        id: "vmx-exclusive-nostats",
        severity: Severity::Low,
        expected: "sched.cpu.affinity.exclusiveNoStats = \"TRUE\"",
        remediation: "Add sched.cpu.affinity.exclusiveNoStats = \"TRUE\" (power-cycle the VM).",
        source: "[V5][V4][seed]",
        check: |f| seed_switch(f, "sched.cpu.affinity.exclusiveNoStats"),
    },
    LintRule {
        id: "vmx-force-mpti",
        severity: Severity::Low,
        expected: "monitor.forceEnableMPTI = \"TRUE\"",
        remediation: "Add monitor.forceEnableMPTI = \"TRUE\".",
        source: "[V5][seed]",
        check: |f| seed_switch(f, "monitor.forceEnableMPTI"),
    },
    LintRule {
        id: "vmx-timetracker-lowlatency",
        severity: Severity::Low,
        expected: "timeTracker.lowLatency = \"TRUE\"",
        remediation: "Add timeTracker.lowLatency = \"TRUE\" (power-cycle the VM).",
        source: "[V5][V4][seed]",
        check: |f| seed_switch(f, "timeTracker.lowLatency"),
    },
    LintRule {
        id: "vmx-mem-prealloc",
        severity: Severity::Low,
        expected: "sched.mem.prealloc = \"TRUE\" and sched.mem.prealloc.pinnedMainMem (or sched.mem.pinnedMainMem) = \"TRUE\"",
        remediation: "Add sched.mem.prealloc = \"TRUE\" and sched.mem.prealloc.pinnedMainMem = \"TRUE\".",
        source: "[V10][seed]",
        check: mem_prealloc,
    },
    LintRule {
        id: "vmx-1g-pages",
        severity: Severity::Medium,
        expected: "sched.mem.lpage.enable1GPage = \"TRUE\" with full memory reservation",
        remediation: "Reserve all guest memory, then add sched.mem.lpage.enable1GPage = \"TRUE\" (power-off needed).",
        source: "[V3][V4][seed]",
        check: gig_pages,
    },
    LintRule {
        id: "vmx-vtopology",
        severity: Severity::Low,
        expected: "CPU and memory hot-add off; VM inside one NUMA node (numa.nodeAffinity); coresPerSocket reported",
        remediation: "Disable CPU/memory hot-add (vcpu.hotadd = \"FALSE\", mem.hotadd = \"FALSE\"), size to one NUMA node, set numa.nodeAffinity.",
        source: "[V5][seed]",
        check: vtopology,
    },
    LintRule {
        id: "vmx-vnic-coalescing",
        severity: Severity::Low,
        expected: "ethernetX.virtualDev = \"vmxnet3\", ethernetX.coalescingScheme = \"disabled\" (automatic with Latency Sensitivity High)",
        remediation: "Set ethernetX.coalescingScheme = \"disabled\" on every vmxnet3 NIC.",
        source: "[V6][V1]",
        check: vnic_coalescing,
    },
    LintRule {
        id: "vmx-misc",
        severity: Severity::Info,
        expected: "evidence: logging = \"FALSE\", sched.swap.vmxSwapEnabled = \"FALSE\", recent virtualHW.version",
        remediation: "Adjust the keys (Edit Settings → VM Options → Advanced).",
        source: "[V4][V7][seed]",
        check: misc,
    },
];

/// Lint a `.vmx` text.
pub fn lint_vmx(file: &str, text: &str) -> Result<AuditReport, LintError> {
    let vmx = parse_vmx(file, text)?;
    let facts = Facts::of(file, text, &vmx);
    let findings = run_rules(RULES, |check| check(&facts));
    Ok(report(Subject::Vmx, file, findings))
}

/// What the rules read: the parsed file and the facts several rules share.
struct Facts<'a> {
    file: &'a str,
    text: &'a str,
    vmx: &'a Vmx,
    /// `sched.cpu.latencySensitivity = "high"`.
    ls_high: bool,
    /// `numvcpus`, at least 1.
    nvcpu: i64,
    pins: Pinning,
    /// All guest memory reserved (needed by the 1 GiB pages rule too).
    full_mem: bool,
}

/// Manual vCPU pinning (`sched.vcpuN.affinity`).
struct Pinning {
    /// vCPUs pinned to a single pCPU.
    pinned: Vec<i64>,
    problems: Vec<String>,
    evidence: Vec<Evidence>,
    /// `sched.cpu.affinity.exclusive = "TRUE"`.
    exclusive: bool,
    all_pinned: bool,
}

impl Pinning {
    fn of(file: &str, v: &Vmx, nvcpu: i64) -> Pinning {
        let mut pinned = Vec::new();
        let mut problems = Vec::new();
        let mut pcpus = BTreeSet::new();
        let mut evidence = Vec::new();
        for n in 0..nvcpu {
            let key = format!("sched.vcpu{n}.affinity");
            evidence.push(ev(file, v, &key));
            if let Some(a) = v.get(&key) {
                match a.trim().parse::<u32>() {
                    Ok(p) => {
                        if !pcpus.insert(p) {
                            problems.push(format!("vCPU {n} shares pCPU {p}"));
                        }
                        pinned.push(n);
                    }
                    Err(_) => {
                        problems.push(format!("vCPU {n} affinity '{a}' is not a single pCPU"))
                    }
                }
            }
        }
        let all_pinned = pinned.len() as i64 == nvcpu && problems.is_empty();
        Pinning {
            pinned,
            problems,
            evidence,
            exclusive: v.is_true("sched.cpu.affinity.exclusive"),
            all_pinned,
        }
    }
    /// Every vCPU pinned to its own pCPU, exclusively.
    fn manual_exclusive(&self) -> bool {
        self.all_pinned && self.exclusive
    }
}

impl<'a> Facts<'a> {
    fn of(file: &'a str, text: &'a str, v: &'a Vmx) -> Facts<'a> {
        let nvcpu = v.num("numvcpus").unwrap_or(1).max(1);
        let mem_size = v.num("memSize");
        let mem_min = v.num("sched.mem.min");
        // A minimum below memSize is a partial reservation even with pin set (the pin then locks only part).
        let partial = matches!((mem_min, mem_size), (Some(a), Some(b)) if a < b);
        let full_mem =
            !partial && (v.is_true("sched.mem.pin") || (mem_size.is_some() && mem_min == mem_size));
        Facts {
            file,
            text,
            vmx: v,
            ls_high: v
                .get("sched.cpu.latencySensitivity")
                .is_some_and(|s| s.eq_ignore_ascii_case("high")),
            nvcpu,
            pins: Pinning::of(file, v, nvcpu),
            full_mem,
        }
    }
    /// Evidence for one key.
    fn e(&self, key: &str) -> Evidence {
        ev(self.file, self.vmx, key)
    }
    /// Evidence for several keys.
    fn es(&self, keys: &[&str]) -> Vec<Evidence> {
        keys.iter().map(|k| self.e(k)).collect()
    }
}

/// Evidence for one key: `file:line` or `file (absent)`.
fn ev(file: &str, vmx: &Vmx, key: &str) -> Evidence {
    match vmx.line(key) {
        Some(l) => Evidence::new(key, format!("{file}:{l}"), vmx.get(key).unwrap_or("")),
        None => Evidence::new(key, file.to_string(), "absent"),
    }
}

fn syntax(f: &Facts) -> Vec<LintOutcome> {
    let file = f.file;
    f.vmx
        .malformed
        .iter()
        .map(|(line, reason)| {
            LintOutcome::fail(
                format!("{file}:{line}: {reason}"),
                vec![Evidence::new(
                    "line",
                    format!("{file}:{line}"),
                    f.text
                        .lines()
                        .nth(line - 1)
                        .unwrap_or("")
                        .trim()
                        .to_string(),
                )],
            )
        })
        .collect()
}

fn latency_sensitivity(f: &Facts) -> Vec<LintOutcome> {
    let key = "sched.cpu.latencySensitivity";
    let ls_val = f.vmx.get(key).unwrap_or("normal (absent)");
    vec![if f.ls_high {
        LintOutcome::pass("latency sensitivity high", vec![f.e(key)])
    } else if f.pins.manual_exclusive() {
        LintOutcome::pass(
            format!("latency sensitivity {ls_val}, but every vCPU is exclusively pinned"),
            f.es(&[key, "sched.cpu.affinity.exclusive"]),
        )
    } else {
        LintOutcome::fail(
            format!("latency sensitivity {ls_val} and no exclusive pinning"),
            vec![f.e(key)],
        )
    }]
}

fn cpu_reservation(f: &Facts) -> Vec<LintOutcome> {
    let cpu_max = f.vmx.get("sched.cpu.max");
    let ev = f.es(&[
        "sched.cpu.min",
        "sched.cpu.max",
        "sched.cpu.units",
        "numvcpus",
    ]);
    let limited = cpu_max.is_some_and(|m| m.trim() != "-1" && !m.eq_ignore_ascii_case("unlimited"));
    let nvcpu = f.nvcpu;
    vec![if limited {
        LintOutcome::fail(format!("CPU limit {} set", cpu_max.unwrap_or_default()), ev)
    } else {
        match f.vmx.num("sched.cpu.min") {
            Some(m) if m > 0 => LintOutcome::pass(format!("CPU reservation {m} MHz for {nvcpu} vCPU(s) (host MHz not known here: check it is the full amount)"), ev),
            _ if f.pins.manual_exclusive() && !f.ls_high => LintOutcome::warn("no CPU reservation (exclusive manual pinning holds the pCPUs)", ev),
            _ => LintOutcome::fail("no CPU reservation (Latency Sensitivity High requires a full one)", ev),
        }
    }]
}

fn mem_reservation(f: &Facts) -> Vec<LintOutcome> {
    let ev = f.es(&["memSize", "sched.mem.min", "sched.mem.pin"]);
    vec![if f.full_mem {
        LintOutcome::pass("all guest memory reserved", ev)
    } else {
        let s = match (f.vmx.num("sched.mem.min"), f.vmx.num("memSize")) {
            (Some(a), Some(b)) => format!("memory reservation {a} MB of {b} MB"),
            (None, _) => "no memory reservation".to_string(),
            (Some(a), None) => format!("memory reservation {a} MB, memSize absent"),
        };
        LintOutcome::fail(s, ev)
    }]
}

fn vcpu_affinity(f: &Facts) -> Vec<LintOutcome> {
    let p = &f.pins;
    let mut ev = p.evidence.clone();
    ev.push(f.e("sched.cpu.affinity.exclusive"));
    ev.push(f.e("sched.cpu.affinity.exclusiveType"));
    let nvcpu = f.nvcpu;
    vec![if p.pinned.is_empty() && p.problems.is_empty() {
        if f.ls_high {
            LintOutcome::pass(
                "no manual pinning; Latency Sensitivity High grants exclusive affinity",
                ev,
            )
        } else {
            LintOutcome::fail("no manual pinning and Latency Sensitivity not high", ev)
        }
    } else if !p.problems.is_empty() {
        LintOutcome::fail(p.problems.join("; "), ev)
    } else if !p.all_pinned {
        let missing: Vec<String> = (0..nvcpu)
            .filter(|n| !p.pinned.contains(n))
            .map(|n| n.to_string())
            .collect();
        LintOutcome::fail(format!("vCPU(s) {} not pinned", missing.join(",")), ev)
    } else if !p.exclusive {
        LintOutcome::fail(
            "every vCPU pinned but sched.cpu.affinity.exclusive is not TRUE",
            ev,
        )
    } else {
        let t = f
            .vmx
            .get("sched.cpu.affinity.exclusiveType")
            .map(|t| format!(" (exclusiveType {t}: reported, not judged)"))
            .unwrap_or_default();
        LintOutcome::pass(
            format!("{nvcpu} vCPU(s) pinned to distinct pCPUs, exclusive{t}"),
            ev,
        )
    }]
}

/// A switch of the seed documents: dropped or not TRUE fails.
fn seed_switch(f: &Facts, key: &str) -> Vec<LintOutcome> {
    let ev = vec![f.e(key)];
    vec![match f.vmx.get(key) {
        Some(_) if f.vmx.is_true(key) => LintOutcome::pass(format!("{key} = TRUE"), ev),
        Some(x) => LintOutcome::fail(format!("{key} = {x}"), ev),
        None => LintOutcome::fail(format!("{key} absent"), ev),
    }]
}

/// Memory preallocation: the seed 000 keys; spelling varies, so any present form counts.
fn mem_prealloc(f: &Facts) -> Vec<LintOutcome> {
    let v = f.vmx;
    let pre = "sched.mem.prealloc";
    let pinned_keys = [
        "sched.mem.prealloc.pinnedMainMem",
        "sched.mem.pinnedMainMem",
    ];
    let ev = f.es(&[pre, pinned_keys[0], pinned_keys[1]]);
    let falses: Vec<&str> = std::iter::once(pre)
        .chain(pinned_keys)
        .filter(|k| v.get(k).is_some() && !v.is_true(k))
        .collect();
    let pinned_main = pinned_keys.iter().any(|k| v.is_true(k));
    vec![if !falses.is_empty() {
        LintOutcome::fail(format!("{} not TRUE", falses.join(", ")), ev)
    } else if v.is_true(pre) && pinned_main {
        LintOutcome::pass("guest memory preallocated and pinned", ev)
    } else if v.is_true(pre) || pinned_main {
        LintOutcome::warn("only one of prealloc / pinnedMainMem set", ev)
    } else {
        LintOutcome::warn("memory preallocation keys absent", ev)
    }]
}

fn gig_pages(f: &Facts) -> Vec<LintOutcome> {
    let key = "sched.mem.lpage.enable1GPage";
    let ev = f.es(&[key, "sched.mem.min", "sched.mem.pin"]);
    let on = f.vmx.is_true(key);
    vec![match f.vmx.get(key) {
        Some(_) if on && f.full_mem => {
            LintOutcome::pass("1 GiB pages with full memory reservation", ev)
        }
        Some(_) if on => LintOutcome::fail(
            "1 GiB pages without full memory reservation: the VM will not power on",
            ev,
        ),
        Some(x) => LintOutcome::fail(format!("{key} = {x}"), ev),
        None => LintOutcome::fail(format!("{key} absent: guest RAM on small pages"), ev),
    }]
}

fn vtopology(f: &Facts) -> Vec<LintOutcome> {
    let ev = f.es(&[
        "cpuid.coresPerSocket",
        "numa.nodeAffinity",
        "numa.vcpu.preferHT",
        "vcpu.hotadd",
        "mem.hotadd",
    ]);
    let hot: Vec<&str> = ["vcpu.hotadd", "mem.hotadd"]
        .into_iter()
        .filter(|k| f.vmx.is_true(k))
        .collect();
    vec![if hot.is_empty() {
        LintOutcome::pass(
            format!(
                "hot-add off; coresPerSocket {}",
                f.vmx.get("cpuid.coresPerSocket").unwrap_or("default")
            ),
            ev,
        )
    } else {
        LintOutcome::fail(format!("{} on: hides vNUMA", hot.join(", ")), ev)
    }]
}

fn vnic_coalescing(f: &Facts) -> Vec<LintOutcome> {
    let v = f.vmx;
    let nics: Vec<&str> = v
        .entries
        .keys()
        .filter_map(|k| {
            let n = k.strip_prefix("ethernet")?.strip_suffix(".present")?;
            (n.chars().all(|c| c.is_ascii_digit()) && v.is_true(k)).then_some(n)
        })
        .collect();
    let mut ev = Vec::new();
    let mut bad = Vec::new();
    for n in &nics {
        let dev = format!("ethernet{n}.virtualDev");
        let co = format!("ethernet{n}.coalescingScheme");
        ev.push(f.e(&dev));
        ev.push(f.e(&co));
        let is_vmxnet3 = v
            .get(&dev)
            .is_some_and(|d| d.eq_ignore_ascii_case("vmxnet3"));
        let off = v
            .get(&co)
            .is_some_and(|d| d.eq_ignore_ascii_case("disabled"));
        if !is_vmxnet3 {
            bad.push(format!("ethernet{n} not vmxnet3"));
        } else if !off && !f.ls_high {
            bad.push(format!("ethernet{n} interrupt coalescing on"));
        }
    }
    vec![if nics.is_empty() {
        LintOutcome::na("no virtual NIC", ev)
    } else if bad.is_empty() {
        LintOutcome::pass(
            format!("{} vNIC(s) vmxnet3 without coalescing", nics.len()),
            ev,
        )
    } else {
        LintOutcome::warn(bad.join("; "), ev)
    }]
}

/// Evidence only (info): logging and VMX swap.
fn misc(f: &Facts) -> Vec<LintOutcome> {
    let ev = f.es(&["logging", "sched.swap.vmxSwapEnabled", "virtualHW.version"]);
    let off = |k: &str| {
        f.vmx
            .get(k)
            .is_some_and(|l| l.eq_ignore_ascii_case("false"))
    };
    let mut notes = Vec::new();
    if !off("logging") {
        notes.push("logging on");
    }
    if !off("sched.swap.vmxSwapEnabled") {
        notes.push("VMX swap on");
    }
    vec![if notes.is_empty() {
        LintOutcome::pass("logging and VMX swap off", ev)
    } else {
        LintOutcome::warn(notes.join(", "), ev)
    }]
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
        assert_eq!(b.malformed, [(2, LineError::NoEquals)]);
        assert_eq!(LineError::NoEquals.to_string(), "expected key = \"value\"");
        assert_eq!((b.get("a"), b.get("c")), (Some("1"), Some("3")));
        // Nothing readable at all: not a .vmx.
        let e = parse_vmx("c.vmx", "a = \"open\n").unwrap_err().to_string();
        assert!(e.starts_with("c.vmx:1: unterminated quoted value"), "{e}");
        let e = parse_vmx("d.vmx", " = \"x\"\n").unwrap_err().to_string();
        assert!(e.starts_with("d.vmx:1: invalid key ''"), "{e}");
        let e = parse_vmx("e.vmx", "a = \"x\" y\n").unwrap_err().to_string();
        assert!(
            e.starts_with("e.vmx:1: unexpected text after the value: 'y'"),
            "{e}"
        );
    }

    #[test]
    fn every_rule_reports_once_in_table_order() {
        let r = lint_vmx("a.vmx", "numvcpus = \"2\"\nbroken\n").unwrap();
        let ids: Vec<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
        let table: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        assert_eq!(ids, table);
    }

    proptest::proptest! {
        #[test]
        fn no_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = lint_vmx("x.vmx", &String::from_utf8_lossy(&bytes));
        }
    }
}
