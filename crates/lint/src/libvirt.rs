//! libvirt domain XML linter (catalogue §9; element names from libvirt docs/formatdomain.rst and the
//! kvm-realtime kbase). Evidence names `file:line` of the element read.

use super::{report, run_rules, LintError, LintOutcome, LintRule};
use roxmltree::{Document, Node};
use rtgauge_model::audit::{AuditReport, Evidence, Severity, Subject};
use rtgauge_model::cpuset::CpuSetError;
use rtgauge_model::CpuSet;
use std::collections::BTreeSet;

/// What the rules read: the domain and the facts several rules share.
struct Facts<'a, 'i> {
    file: &'a str,
    doc: &'a Document<'i>,
    /// The `<domain>` element.
    domain: Node<'a, 'i>,
    /// The host's RT CPU set, when the operator gave it.
    host_isolated: Option<&'a CpuSet>,
    /// `<vcpu>` count (1 when absent).
    vcpus: u32,
    cputune: Option<Node<'a, 'i>>,
    pins: Pinning,
    /// `<cpu mode>`.
    cpu_mode: &'a str,
}

/// `<vcpupin>` read against the vCPU count.
struct Pinning {
    /// Why the pinning is not 1:1 (empty when it is).
    problems: Vec<String>,
    evidence: Vec<Evidence>,
    /// Every host CPU a vCPU is pinned to.
    vcpu_pcpus: CpuSet,
}

impl<'a, 'i> Facts<'a, 'i> {
    fn line(&self, n: Node) -> u32 {
        self.doc.text_pos_at(n.range().start).row
    }
    /// Evidence for an element (its attributes and text), or "absent".
    fn ev(&self, what: &str, n: Option<Node>) -> Evidence {
        match n {
            Some(n) => {
                let attrs: Vec<String> = n
                    .attributes()
                    .map(|a| format!("{}='{}'", a.name(), a.value()))
                    .collect();
                let text = n
                    .text()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .unwrap_or("");
                let mut v = format!(
                    "<{}{}{}>",
                    n.tag_name().name(),
                    if attrs.is_empty() { "" } else { " " },
                    attrs.join(" ")
                );
                if !text.is_empty() {
                    v.push_str(text);
                }
                Evidence::new(what, format!("{}:{}", self.file, self.line(n)), v)
            }
            None => Evidence::new(what, self.file.to_string(), "absent"),
        }
    }
}

fn child<'a, 'i>(n: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    n.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a, 'i>(n: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    n.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn path<'a, 'i>(n: Node<'a, 'i>, names: &[&str]) -> Option<Node<'a, 'i>> {
    names.iter().try_fold(n, |n, name| child(n, name))
}

/// libvirt cpusets accept `^N` exclusions (formatdomain.rst, "cpuset").
pub fn parse_libvirt_cpuset(text: &str) -> Result<CpuSet, CpuSetError> {
    let mut inc = Vec::new();
    let mut exc = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if let Some(x) = item.strip_prefix('^') {
            exc.extend(CpuSet::parse(x)?.iter());
        } else {
            inc.extend(CpuSet::parse(item)?.iter());
        }
    }
    Ok(CpuSet::new(inc).difference(&CpuSet::new(exc)))
}

/// Lint a domain XML text.
pub fn lint_libvirt(file: &str, text: &str) -> Result<AuditReport, LintError> {
    lint_libvirt_on_host(file, text, None)
}

/// Deepest element nesting accepted (a domain definition nests about six deep). roxmltree's tokenizer
/// recurses once per level, so a file nested thousands deep would exhaust the stack before any limit of
/// its own applies.
pub const MAX_XML_DEPTH: usize = 256;

/// Refuse XML nested deeper than [`MAX_XML_DEPTH`], by a scan that knows tags, quoted attribute values,
/// comments, CDATA, processing instructions and declarations (so that `/>` inside a value cannot hide a
/// level). Malformed text is left to the parser, which reports it with its position.
pub fn check_xml_depth(file: &str, text: &str) -> Result<(), LintError> {
    let b = text.as_bytes();
    let find = |from: usize, pat: &[u8]| -> usize {
        b[from.min(b.len())..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map_or(b.len(), |p| from + p + pat.len())
    };
    let (mut i, mut depth) = (0usize, 0usize);
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            i = find(i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = find(i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            i = find(i + 2, b"?>");
        } else if rest.starts_with(b"<!") {
            i = find(i + 2, b">");
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            i = find(i + 2, b">");
        } else {
            // An opening tag: skip quoted values up to its '>'; "/>" closes it at once.
            let mut j = i + 1;
            let mut last = b'<';
            while j < b.len() && b[j] != b'>' {
                if b[j] == b'"' || b[j] == b'\'' {
                    let q = b[j];
                    j += 1;
                    while j < b.len() && b[j] != q {
                        j += 1;
                    }
                }
                if j < b.len() && !b[j].is_ascii_whitespace() {
                    last = b[j];
                }
                j += 1;
            }
            if last != b'/' {
                depth += 1;
                if depth > MAX_XML_DEPTH {
                    return Err(LintError::Refused {
                        file: file.to_string(),
                        line: text[..i].matches('\n').count() + 1,
                        reason: format!("elements nested more than {MAX_XML_DEPTH} deep"),
                    });
                }
            }
            i = j + 1;
        }
    }
    Ok(())
}

/// Lint a domain XML text against the host's RT CPU set `host_isolated` (when known): vCPUs must be pinned
/// inside it and the emulator and IOThreads outside it ("not in the isolcpus reserved set", kvm-realtime kbase).
pub fn lint_libvirt_on_host(
    file: &str,
    text: &str,
    host_isolated: Option<&CpuSet>,
) -> Result<AuditReport, LintError> {
    check_xml_depth(file, text)?;
    // Bounded: a domain definition has hundreds of nodes; DTDs (entity expansion) stay refused.
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: 1_000_000,
    };
    let doc = Document::parse_with_options(text, opts).map_err(|e| LintError::Malformed {
        file: file.to_string(),
        line: e.pos().row as usize,
        reason: e.to_string(),
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "domain" {
        return Err(LintError::Malformed {
            file: file.to_string(),
            line: doc.text_pos_at(root.range().start).row as usize,
            reason: format!(
                "root element is <{}>, expected <domain>",
                root.tag_name().name()
            ),
        });
    }
    let facts = Facts::of(file, &doc, root, host_isolated);
    let findings = run_rules(RULES, |check| check(&facts));
    Ok(report(Subject::Libvirt, file, findings))
}

/// A check of the libvirt rules.
type Check = fn(&Facts<'_, '_>) -> Vec<LintOutcome>;

/// The libvirt domain rules, in report order.
const RULES: &[LintRule<Check>] = &[
    LintRule {
        id: "libvirt-vcpupin",
        severity: Severity::High,
        expected: "one <vcpupin> per vCPU 0..N-1, each a single distinct host CPU; no placement='auto'",
        remediation: "Add <vcpupin vcpu='k' cpuset='<pcpu>'/> for every vCPU under <cputune>.",
        source: "[L1][L2]",
        check: vcpupin,
    },
    LintRule {
        id: "libvirt-emulator-iothread-pin",
        severity: Severity::High,
        expected: "<emulatorpin> present and disjoint from the vCPU pCPUs; every IOThread pinned off the RT pCPUs",
        remediation: "Add <emulatorpin cpuset='<housekeeping CPUs>'/> and <iothreadpin iothread='n' cpuset='…'/>.",
        source: "[L1][L2]",
        check: emulator_iothread_pin,
    },
    LintRule {
        id: "libvirt-vcpusched",
        severity: Severity::Medium,
        expected: "<vcpusched vcpus='<rt vcpus>' scheduler='fifo' priority='1'/> with vcpus inside 0..N-1",
        remediation: "Add <vcpusched vcpus='<rt vcpus>' scheduler='fifo' priority='1'/> under <cputune>.",
        source: "[L1][L2][R3]",
        check: vcpusched,
    },
    LintRule {
        id: "libvirt-hugepages",
        severity: Severity::Medium,
        expected: "guest RAM on huge pages (<memoryBacking><hugepages>), ideally 1 GiB on the pinned NUMA node",
        remediation: "Add <memoryBacking><hugepages><page size='1' unit='G' nodeset='…'/></hugepages></memoryBacking>.",
        source: "[L1][L2][R1]",
        check: hugepages,
    },
    LintRule {
        id: "libvirt-locked-noshare",
        severity: Severity::Medium,
        expected: "<locked/> and <nosharepages/> in <memoryBacking>, with a sized <memtune><hard_limit>",
        remediation: "Add <locked/>, <nosharepages/> and <memtune><hard_limit unit='KiB'>…</hard_limit></memtune>.",
        source: "[L1][L2]",
        check: locked_noshare,
    },
    LintRule {
        id: "libvirt-numatune",
        severity: Severity::Medium,
        expected: "<numatune><memory mode='strict' nodeset='N'/></numatune>, not placement='auto'",
        remediation: "Add <numatune><memory mode='strict' nodeset='N'/></numatune> (N = node of the pinned pCPUs).",
        source: "[L1][L2]",
        check: numatune,
    },
    LintRule {
        id: "libvirt-cpu-model-tsc",
        severity: Severity::Medium,
        expected: "<cpu mode='host-passthrough' migratable='off'> with topology threads='1' and <feature policy='require' name='tsc-deadline'/> (invtsc for a tsc clocksource)",
        remediation: "Set <cpu mode='host-passthrough' migratable='off'>, threads='1', <feature policy='require' name='tsc-deadline'/> and name='invtsc'.",
        source: "[L1][L2][R1]",
        check: cpu_model_tsc,
    },
    LintRule {
        id: "libvirt-pmu-off",
        severity: Severity::Medium,
        expected: "<features><pmu state='off'/></features> (default is on)",
        remediation: "Add <pmu state='off'/> under <features>.",
        source: "[L1][L3][R3][L2]",
        check: pmu_off,
    },
    LintRule {
        id: "libvirt-hint-dedicated",
        severity: Severity::Low,
        expected: "<features><kvm><hint-dedicated state='on'/></kvm></features> with 1:1 pinning and host-passthrough",
        remediation: "Add <kvm><hint-dedicated state='on'/></kvm> under <features> (only with 1:1 pinning).",
        source: "[L3][L4]",
        check: hint_dedicated,
    },
    LintRule {
        id: "libvirt-memballoon-none",
        severity: Severity::Low,
        expected: "<memballoon model='none'/>",
        remediation: "Set <memballoon model='none'/> under <devices>.",
        source: "[L1]",
        check: memballoon_none,
    },
    LintRule {
        id: "libvirt-strip-devices",
        severity: Severity::Low,
        expected: "<controller type='usb' model='none'/>, no <graphics>, no <rng>, no USB <hostdev>",
        remediation: "Remove graphics, RNG and USB host devices; set the USB controller model to none.",
        source: "[L1][R1]",
        check: strip_devices,
    },
];

impl<'a, 'i> Facts<'a, 'i> {
    fn of(
        file: &'a str,
        doc: &'a Document<'i>,
        domain: Node<'a, 'i>,
        host_isolated: Option<&'a CpuSet>,
    ) -> Facts<'a, 'i> {
        let vcpus = child(domain, "vcpu")
            .and_then(|v| v.text())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(1);
        let mut facts = Facts {
            file,
            doc,
            domain,
            host_isolated,
            vcpus,
            cputune: child(domain, "cputune"),
            pins: Pinning {
                problems: Vec::new(),
                evidence: Vec::new(),
                vcpu_pcpus: CpuSet::default(),
            },
            cpu_mode: child(domain, "cpu")
                .and_then(|x| x.attribute("mode"))
                .unwrap_or("custom (default)"),
        };
        facts.pins = facts.pinning();
        facts
    }

    /// Read the `<vcpupin>`s: one single, distinct host CPU per vCPU.
    fn pinning(&self) -> Pinning {
        let (n, vcpu) = (self.vcpus, child(self.domain, "vcpu"));
        let pins: Vec<(u32, Result<CpuSet, CpuSetError>, Node)> = self
            .cputune
            .map(|ct| {
                children(ct, "vcpupin")
                    .map(|p| {
                        let v = p
                            .attribute("vcpu")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(u32::MAX);
                        (
                            v,
                            parse_libvirt_cpuset(p.attribute("cpuset").unwrap_or("")),
                            p,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut evidence = vec![self.ev("vcpu", vcpu)];
        evidence.extend(pins.iter().map(|(_, _, p)| self.ev("vcpupin", Some(*p))));
        let mut problems = Vec::new();
        if vcpu.and_then(|v| v.attribute("placement")) == Some("auto") {
            problems.push("placement='auto'".to_string());
        }
        let mut used = BTreeSet::new();
        for k in 0..n {
            match pins.iter().find(|(v, _, _)| *v == k) {
                None => problems.push(format!("vCPU {k} not pinned")),
                Some((_, Err(e), p)) => problems.push(format!(
                    "vCPU {k} cpuset invalid at line {}: {e}",
                    self.line(*p)
                )),
                Some((_, Ok(s), _)) if s.len() != 1 => {
                    problems.push(format!("vCPU {k} pinned to {s}, not one CPU"))
                }
                Some((_, Ok(s), _)) => {
                    let p = s.as_slice()[0];
                    if !used.insert(p) {
                        problems.push(format!("vCPU {k} shares host CPU {p}"));
                    }
                }
            }
        }
        let mut vcpu_pcpus = CpuSet::default();
        for (v, s, _) in &pins {
            if *v >= n {
                let v = if *v == u32::MAX {
                    "?".to_string()
                } else {
                    v.to_string()
                };
                problems.push(format!("vcpupin for vCPU {v} beyond {n} vCPU(s)"));
            }
            if let Ok(s) = s {
                vcpu_pcpus = CpuSet::new(vcpu_pcpus.iter().chain(s.iter()));
            }
        }
        Pinning {
            problems,
            evidence,
            vcpu_pcpus,
        }
    }
}

fn vcpupin(c: &Facts) -> Vec<LintOutcome> {
    let mut ev = c.pins.evidence.clone();
    let mut problems = c.pins.problems.clone();
    let vcpu_pcpus = &c.pins.vcpu_pcpus;
    if let Some(iso) = c.host_isolated {
        ev.push(Evidence::new(
            "host RT CPU set",
            "--isolated",
            iso.to_string(),
        ));
        let outside = vcpu_pcpus.difference(iso);
        if !outside.is_empty() {
            problems.push(format!(
                "vCPUs pinned to host CPUs {outside} outside the host's RT set {iso}"
            ));
        }
    }
    let n = c.vcpus;
    vec![if problems.is_empty() {
        LintOutcome::pass(
            format!("{n} vCPU(s) pinned 1:1 to host CPUs {vcpu_pcpus}"),
            ev,
        )
    } else {
        LintOutcome::fail(problems.join("; "), ev)
    }]
}

fn emulator_iothread_pin(c: &Facts) -> Vec<LintOutcome> {
    let (d, cputune, vcpu_pcpus) = (c.domain, c.cputune, &c.pins.vcpu_pcpus);
    let emu = cputune.and_then(|ct| child(ct, "emulatorpin"));
    let mut ev = vec![c.ev("emulatorpin", emu)];
    let mut problems = Vec::new();
    match emu.map(|e| parse_libvirt_cpuset(e.attribute("cpuset").unwrap_or(""))) {
        None => problems.push("no <emulatorpin>: QEMU threads may run on the RT pCPUs".to_string()),
        Some(Err(e)) => problems.push(format!("emulatorpin cpuset invalid: {e}")),
        Some(Ok(s)) if !s.intersection(vcpu_pcpus).is_empty() => problems.push(format!(
            "emulatorpin overlaps the vCPU pCPUs on {}",
            s.intersection(vcpu_pcpus)
        )),
        Some(Ok(s)) => {
            if let Some(on) = c
                .host_isolated
                .map(|i| s.intersection(i))
                .filter(|x| !x.is_empty())
            {
                problems.push(format!("emulatorpin on host RT CPUs {on}"));
            }
        }
    }
    let iothreads: u32 = child(d, "iothreads")
        .and_then(|t| t.text())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    if iothreads > 0 {
        ev.push(c.ev("iothreads", child(d, "iothreads")));
        for i in 1..=iothreads {
            let pin = cputune.and_then(|ct| {
                children(ct, "iothreadpin")
                    .find(|p| p.attribute("iothread") == Some(&i.to_string()))
            });
            ev.push(c.ev("iothreadpin", pin));
            match pin.map(|p| parse_libvirt_cpuset(p.attribute("cpuset").unwrap_or(""))) {
                None => problems.push(format!("IOThread {i} not pinned")),
                Some(Ok(s)) if !s.intersection(vcpu_pcpus).is_empty() => {
                    problems.push(format!("IOThread {i} on vCPU pCPUs"))
                }
                Some(Err(e)) => problems.push(format!("IOThread {i} cpuset invalid: {e}")),
                Some(Ok(_)) => {}
            }
        }
    }
    vec![if problems.is_empty() {
        LintOutcome::pass("emulator (and IOThreads) pinned off the vCPU pCPUs", ev)
    } else {
        LintOutcome::fail(problems.join("; "), ev)
    }]
}

fn vcpusched(c: &Facts) -> Vec<LintOutcome> {
    let (cputune, n) = (c.cputune, c.vcpus);
    let scheds: Vec<Node> = cputune
        .map(|ct| children(ct, "vcpusched").collect())
        .unwrap_or_default();
    let ev: Vec<Evidence> = if scheds.is_empty() {
        vec![c.ev("vcpusched", None)]
    } else {
        scheds.iter().map(|s| c.ev("vcpusched", Some(*s))).collect()
    };
    let mut problems = Vec::new();
    for s in &scheds {
        let sch = s.attribute("scheduler").unwrap_or("");
        if !matches!(sch, "fifo" | "rr") {
            problems.push(format!(
                "line {}: scheduler '{sch}' is not fifo/rr",
                c.line(*s)
            ));
        }
        match s.attribute("priority").map(|p| p.parse::<u32>()) {
            Some(Ok(p)) if (1..=99).contains(&p) => {}
            Some(_) => problems.push(format!("line {}: priority outside 1-99", c.line(*s))),
            None if matches!(sch, "fifo" | "rr") => {
                problems.push(format!("line {}: fifo/rr without priority", c.line(*s)))
            }
            None => {}
        }
        if let Some(v) = s.attribute("vcpus") {
            match parse_libvirt_cpuset(v) {
                Ok(set) => {
                    let out_of = CpuSet::new(set.iter().filter(|x| *x >= n));
                    if !out_of.is_empty() {
                        problems.push(format!(
                            "line {}: vcpus='{v}' names vCPU(s) {out_of} of a {n}-vCPU guest",
                            c.line(*s)
                        ));
                    }
                }
                Err(e) => problems.push(format!("line {}: vcpus invalid: {e}", c.line(*s))),
            }
        }
    }
    vec![if scheds.is_empty() {
        LintOutcome::fail("no <vcpusched>: vCPU threads run SCHED_OTHER", ev)
    } else if problems.is_empty() {
        LintOutcome::pass("RT vCPUs scheduled fifo/rr", ev)
    } else {
        LintOutcome::fail(problems.join("; "), ev)
    }]
}

fn hugepages(c: &Facts) -> Vec<LintOutcome> {
    let d = c.domain;
    let mb = child(d, "memoryBacking");
    let hp = mb.and_then(|m| child(m, "hugepages"));
    let page = hp.and_then(|h| child(h, "page"));
    let ev = vec![c.ev("hugepages", hp), c.ev("page", page)];
    vec![match (hp, page) {
        (None, _) => LintOutcome::fail("guest RAM on small pages", ev),
        (Some(_), Some(p)) => {
            let size = p.attribute("size").unwrap_or("");
            let unit = p.attribute("unit").unwrap_or("KiB");
            let gig = (size == "1" && unit.eq_ignore_ascii_case("G"))
                || (size == "1048576" && unit.eq_ignore_ascii_case("KiB"));
            if gig {
                LintOutcome::pass("guest RAM on 1 GiB pages", ev)
            } else {
                LintOutcome::pass(
                    format!("guest RAM on {size} {unit} pages (1 GiB preferred)"),
                    ev,
                )
            }
        }
        (Some(_), None) => LintOutcome::pass("guest RAM on default-size huge pages", ev),
    }]
}

fn locked_noshare(c: &Facts) -> Vec<LintOutcome> {
    let d = c.domain;
    let mb = child(d, "memoryBacking");
    let locked = mb.and_then(|m| child(m, "locked"));
    let noshare = mb.and_then(|m| child(m, "nosharepages"));
    let hard = path(d, &["memtune", "hard_limit"]);
    let ev = vec![
        c.ev("locked", locked),
        c.ev("nosharepages", noshare),
        c.ev("hard_limit", hard),
    ];
    vec![match (locked, noshare, hard) {
        (Some(_), Some(_), Some(_)) => {
            LintOutcome::pass("memory locked, KSM off, hard_limit set", ev)
        }
        (Some(_), Some(_), None) => LintOutcome::warn(
            "<locked/> without <hard_limit>: memlock limit removed entirely",
            ev,
        ),
        (None, _, _) => LintOutcome::fail("guest memory not locked", ev),
        (_, None, _) => LintOutcome::fail("no <nosharepages/>: KSM may merge guest pages", ev),
    }]
}

fn numatune(c: &Facts) -> Vec<LintOutcome> {
    let d = c.domain;
    let mem = path(d, &["numatune", "memory"]);
    let ev = vec![c.ev("numatune memory", mem)];
    vec![match mem {
        None => LintOutcome::fail("no <numatune>: guest memory may come from any node", ev),
        Some(m) if m.attribute("placement") == Some("auto") => {
            LintOutcome::fail("placement='auto'", ev)
        }
        Some(m)
            if m.attribute("mode").unwrap_or("strict") == "strict"
                && m.attribute("nodeset").is_some() =>
        {
            LintOutcome::pass(
                format!(
                    "memory strict on node(s) {}",
                    m.attribute("nodeset").unwrap_or("")
                ),
                ev,
            )
        }
        Some(m) => LintOutcome::warn(
            format!(
                "mode '{}' / nodeset {}",
                m.attribute("mode").unwrap_or("strict"),
                m.attribute("nodeset").unwrap_or("absent")
            ),
            ev,
        ),
    }]
}

fn cpu_model_tsc(c: &Facts) -> Vec<LintOutcome> {
    let d = c.domain;
    let cpu = child(d, "cpu");
    let topo = cpu.and_then(|x| child(x, "topology"));
    let feat = |name: &str| {
        cpu.and_then(|x| children(x, "feature").find(|f| f.attribute("name") == Some(name)))
    };
    let tscd = feat("tsc-deadline");
    let invtsc = feat("invtsc");
    let ev = vec![
        c.ev("cpu", cpu),
        c.ev("topology", topo),
        c.ev("feature tsc-deadline", tscd),
        c.ev("feature invtsc", invtsc),
    ];
    let required = |f: Option<Node>| {
        f.is_some_and(|f| {
            matches!(
                f.attribute("policy").unwrap_or("require"),
                "require" | "force"
            )
        })
    };
    let mut problems = Vec::new();
    let mut warns = Vec::new();
    match c.cpu_mode {
        "host-passthrough" => {
            if cpu.and_then(|x| x.attribute("migratable")) != Some("off") {
                warns.push("migratable is not 'off': invariant TSC is stripped".to_string());
            }
        }
        "host-model" => warns.push("host-model (host-passthrough preferred)".to_string()),
        m => problems.push(format!("cpu mode '{m}'")),
    }
    if !required(tscd) {
        problems.push("tsc-deadline not required".to_string());
    }
    if !required(invtsc) {
        warns.push("invtsc not required: guest clocksource will be kvm-clock".to_string());
    }
    if let Some(t) = topo.and_then(|t| t.attribute("threads")) {
        if t != "1" {
            warns.push(format!("topology threads='{t}'"));
        }
    }
    vec![LintOutcome::of_problems(
        problems,
        warns,
        "host-passthrough, migratable off, tsc-deadline and invtsc required",
        ev,
    )]
}

fn pmu_off(c: &Facts) -> Vec<LintOutcome> {
    let d = c.domain;
    let pmu = path(d, &["features", "pmu"]);
    let ev = vec![c.ev("pmu", pmu)];
    vec![match pmu.and_then(|p| p.attribute("state")) {
        Some("off") => LintOutcome::pass("vPMU off", ev),
        Some(s) => LintOutcome::fail(format!("vPMU {s}"), ev),
        None => LintOutcome::fail("vPMU on (default when absent)", ev),
    }]
}

fn hint_dedicated(c: &Facts) -> Vec<LintOutcome> {
    let (d, mode, one_to_one) = (c.domain, c.cpu_mode, c.pins.problems.is_empty());
    let hint = path(d, &["features", "kvm", "hint-dedicated"]);
    let ev = vec![c.ev("hint-dedicated", hint)];
    vec![match hint.and_then(|h| h.attribute("state")) {
        Some("on") if mode != "host-passthrough" => LintOutcome::fail(
            "hint-dedicated needs cpu mode host-passthrough (libvirt rejects it)",
            ev,
        ),
        Some("on") if !one_to_one => LintOutcome::warn("hint-dedicated without 1:1 pinning", ev),
        Some("on") => LintOutcome::pass("hint-dedicated on with 1:1 pinning", ev),
        _ => LintOutcome::fail(
            "hint-dedicated not on: guest cannot use haltpoll / drops no PV spinlocks",
            ev,
        ),
    }]
}

fn memballoon_none(c: &Facts) -> Vec<LintOutcome> {
    let d = c.domain;
    let devices = child(d, "devices");
    let balloon = devices.and_then(|x| child(x, "memballoon"));
    let ev = vec![c.ev("memballoon", balloon)];
    vec![match balloon.and_then(|b| b.attribute("model")) {
        Some("none") => LintOutcome::pass("no balloon device", ev),
        Some(m) => LintOutcome::fail(format!("balloon model {m}"), ev),
        None => LintOutcome::fail(
            "no <memballoon model='none'/>: libvirt adds a virtio balloon",
            ev,
        ),
    }]
}

fn strip_devices(c: &Facts) -> Vec<LintOutcome> {
    let devices = child(c.domain, "devices");
    let mut ev = Vec::new();
    let mut found = Vec::new();
    if let Some(dev) = devices {
        for ctl in children(dev, "controller").filter(|x| x.attribute("type") == Some("usb")) {
            ev.push(c.ev("usb controller", Some(ctl)));
            if ctl.attribute("model") != Some("none") {
                found.push(format!("USB controller (line {})", c.line(ctl)));
            }
        }
        for name in ["graphics", "rng"] {
            for g in children(dev, name) {
                ev.push(c.ev(name, Some(g)));
                found.push(format!("<{name}> (line {})", c.line(g)));
            }
        }
        for h in children(dev, "hostdev").filter(|x| x.attribute("type") == Some("usb")) {
            ev.push(c.ev("usb hostdev", Some(h)));
            found.push(format!("USB hostdev (line {})", c.line(h)));
        }
    }
    vec![if found.is_empty() {
        LintOutcome::pass("no graphics, RNG or USB devices", ev)
    } else {
        LintOutcome::fail(found.join(", "), ev)
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::audit::Status;

    #[test]
    fn malformed_xml_names_the_line() {
        let e =
            lint_libvirt("d.xml", "<domain>\n<vcpu>2</vcpu>\n<cputune>\n</domain>\n").unwrap_err();
        assert!(e.to_string().starts_with("d.xml:4:"), "{e}");
        let e = lint_libvirt("d.xml", "<pod/>").unwrap_err();
        assert!(e.to_string().contains("expected <domain>"));
    }

    #[test]
    fn host_rt_set_cross_check() {
        let xml = "<domain><vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/>\
                   <emulatorpin cpuset='1'/></cputune></domain>";
        let st = |iso: &str, id: &str| {
            let iso = CpuSet::parse(iso).unwrap();
            let r = lint_libvirt_on_host("d.xml", xml, Some(&iso)).unwrap();
            r.findings.iter().find(|f| f.id == id).unwrap().status
        };
        assert_eq!(st("2-3", "libvirt-vcpupin"), Status::Pass);
        assert_eq!(st("3", "libvirt-vcpupin"), Status::Fail);
        assert_eq!(st("2-3", "libvirt-emulator-iothread-pin"), Status::Pass);
        assert_eq!(st("1-3", "libvirt-emulator-iothread-pin"), Status::Fail);
    }

    #[test]
    fn cpuset_with_exclusions() {
        assert_eq!(
            parse_libvirt_cpuset("0-5,^3").unwrap().to_string(),
            "0-2,4-5"
        );
        assert!(parse_libvirt_cpuset("x").is_err());
    }

    #[test]
    fn kbase_vcpusched_out_of_range_trap() {
        let xml = "<domain type='kvm'><vcpu>4</vcpu><cputune><vcpusched vcpus='0-4' scheduler='fifo' priority='1'/></cputune></domain>";
        let r = lint_libvirt("k.xml", xml).unwrap();
        let f = r
            .findings
            .iter()
            .find(|f| f.id == "libvirt-vcpusched")
            .unwrap();
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("vCPU(s) 4"), "{}", f.summary);
    }

    proptest::proptest! {
        #[test]
        fn no_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = lint_libvirt("x.xml", &String::from_utf8_lossy(&bytes));
            let s = format!("<domain>{}</domain>", String::from_utf8_lossy(&bytes));
            let _ = lint_libvirt("x.xml", &s);
        }
    }
}
