//! Kubernetes / OpenShift YAML linter (catalogue §11): pods and pod templates (Deployment, StatefulSet,
//! DaemonSet, Job, ReplicaSet), KubeletConfiguration and PerformanceProfile, one or more `---` documents.
//!
//! The YAML tree carries no positions, so evidence lines come from locating `key:` in the text after the
//! document's first line (good enough for hand-written manifests; "absent" when the key is not there).

use super::{report, run_rules, LintError, LintOutcome, LintRule};
use rtgauge_model::audit::{AuditReport, Evidence, Finding, Severity, Subject};
use rtgauge_model::CpuSet;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::{Yaml, YamlLoader};

/// Most nodes a YAML stream may hold once its aliases are expanded. A manifest has hundreds; YamlLoader
/// copies an aliased node at each use, so anchors that reference each other nine levels deep (a 12-line
/// "billion laughs") would otherwise build billions of nodes.
pub const MAX_YAML_NODES: u64 = 1_000_000;
/// Deepest nesting of mappings and sequences (manifests nest about ten deep; the tree built from the text
/// is dropped recursively).
pub const MAX_YAML_DEPTH: usize = 128;

/// Refuse a YAML stream whose expansion or nesting is beyond the bounds, before anything is built from it:
/// one pass over the parser's events, counting every alias at the size of the node it names. Syntax errors
/// are left to the loader, which reports them with their position.
pub fn check_yaml_bounds(file: &str, text: &str) -> Result<(), LintError> {
    let mut parser = Parser::new_from_str(text);
    let mut sizes: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
    let mut open: Vec<(usize, u64)> = Vec::new();
    let mut nodes: u64 = 0;
    loop {
        let Ok((event, mark)) = parser.next_token() else {
            return Ok(());
        };
        let refuse = |reason: String| LintError::Refused {
            file: file.to_string(),
            line: mark.line(),
            reason,
        };
        match event {
            Event::StreamEnd => return Ok(()),
            Event::Scalar(_, _, anchor, _) => {
                nodes += 1;
                if anchor > 0 {
                    sizes.insert(anchor, 1);
                }
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                nodes += 1;
                open.push((anchor, nodes));
                if open.len() > MAX_YAML_DEPTH {
                    return Err(refuse(format!(
                        "nested more than {MAX_YAML_DEPTH} levels deep"
                    )));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, start)) = open.pop() {
                    if anchor > 0 {
                        sizes.insert(anchor, nodes - start + 1);
                    }
                }
            }
            Event::Alias(anchor) => {
                nodes = nodes.saturating_add(sizes.get(&anchor).copied().unwrap_or(1));
            }
            _ => {}
        }
        if nodes > MAX_YAML_NODES {
            return Err(refuse(format!(
                "the YAML expands to more than {MAX_YAML_NODES} nodes through its aliases (an alias bomb)"
            )));
        }
    }
}

/// A check of the rules of one Kubernetes object.
type Check = fn(&Object<'_>) -> Vec<LintOutcome>;
/// A check of the whole file.
type FileCheck = fn(&YamlStream<'_>) -> Vec<LintOutcome>;

/// The file's rules: one finding per document that is not YAML.
const FILE_RULES: &[LintRule<FileCheck>] = &[LintRule {
    id: "k8s-yaml-syntax",
    severity: Severity::High,
    expected:
        "every document of the file is valid YAML (kubectl apply rejects the whole file otherwise)",
    remediation: "Fix the YAML at the line named (indentation, an unclosed bracket or quote).",
    source: "[K8s1]",
    check: syntax,
}];

/// The rules of a pod or a workload's pod template.
const POD_RULES: &[LintRule<Check>] = &[
    LintRule {
        id: "k8s-pod-guaranteed-qos",
        severity: Severity::High,
        expected: "Guaranteed QoS: every container has cpu and memory limits equal to requests",
        remediation: "Set resources.requests == resources.limits for cpu and memory in every container (and init container).",
        source: "[K8s1][C1]",
        check: guaranteed_qos,
    },
    LintRule {
        id: "k8s-pod-whole-cpus",
        severity: Severity::High,
        expected: "integer CPU requests (\"4\" or \"4000m\") so the static CPU manager grants exclusive CPUs",
        remediation: "Request whole cores: resources.requests.cpu: \"4\".",
        source: "[K8s1][C1][O2]",
        check: whole_cpus,
    },
    LintRule {
        id: "k8s-pod-rt-capabilities",
        severity: Severity::High,
        expected: "every container may use SCHED_FIFO and mlockall: securityContext.capabilities.add holds SYS_NICE and IPC_LOCK (or privileged: true)",
        remediation: "Add securityContext.capabilities.add: [\"SYS_NICE\", \"IPC_LOCK\"] to each real-time container (rtgauge's audit rules rt-priority-allowed and mlockall-allowed check the same from inside).",
        source: "[R4][O2]",
        check: rt_capabilities,
    },
    LintRule {
        id: "k8s-pod-hugepages",
        severity: Severity::Medium,
        expected: "hugepages-* requests == limits and a HugePages emptyDir volume",
        remediation: "Request hugepages-1Gi (requests == limits) and mount an emptyDir with medium: HugePages-1Gi.",
        source: "[K8s2][O1]",
        check: hugepages,
    },
    LintRule {
        id: "k8s-pod-runtimeclass",
        severity: Severity::High,
        expected: "spec.runtimeClassName naming a high-performance handler whenever crio.io annotations are used",
        remediation: "Set spec.runtimeClassName: performance-<profile> (a handler whose allowed_annotations list the crio.io keys).",
        source: "[O3]",
        check: runtime_class,
    },
    LintRule {
        id: "k8s-pod-crio-annotations",
        severity: Severity::Medium,
        expected: "cpu-load-balancing.crio.io, cpu-quota.crio.io, irq-load-balancing.crio.io = \"disable\"; cpu-c-states.crio.io disable or max_latency:N; cpu-freq-governor.crio.io performance",
        remediation: "Add the annotations under metadata.annotations (pod template metadata for workloads).",
        source: "[C1][O3]",
        check: crio_annotations,
    },
];

/// The rules of a KubeletConfiguration (or an OpenShift KubeletConfig's kubeletConfig).
const KUBELET_RULES: &[LintRule<Check>] = &[
    LintRule {
        id: "kubelet-cpu-manager",
        severity: Severity::High,
        expected: "cpuManagerPolicy: static with reservedSystemCPUs = H (full-pcpus-only with SMT)",
        remediation: "Set cpuManagerPolicy: static and reservedSystemCPUs; drain the node, remove cpu_manager_state, restart kubelet.",
        source: "[O2][K8s1]",
        check: cpu_manager,
    },
    LintRule {
        id: "kubelet-topology-memory-manager",
        severity: Severity::Medium,
        expected: "topologyManagerPolicy single-numa-node (or restricted); memoryManagerPolicy Static needs reservedMemory",
        remediation: "Set topologyManagerPolicy: single-numa-node, memoryManagerPolicy: Static with reservedMemory.",
        source: "[O2][K8s2][K8s3]",
        check: topology_memory_manager,
    },
    LintRule {
        id: "kubelet-reserved-vs-host",
        severity: Severity::Medium,
        expected: "reservedSystemCPUs ∩ I = ∅ and reservedSystemCPUs ∪ I = all online CPUs",
        remediation: "Align the kubelet reserved set with the host housekeeping set.",
        source: "[O4]",
        check: reserved_vs_host,
    },
];

/// The rules of a PerformanceProfile.
const PROFILE_RULES: &[LintRule<Check>] = &[
    LintRule {
        id: "performanceprofile-lint",
        severity: Severity::Medium,
        expected: "isolated/reserved disjoint and set; realTimeKernel.enabled for hard RT; highPowerConsumption and perPodPowerManagement not both; IRQ load balancing disabled globally or per pod",
        remediation: "Fix the PerformanceProfile spec.",
        source: "[O4][O1][O6][O3]",
        check: performance_profile,
    },
];

/// `reservedSystemCPUs` of a KubeletConfiguration, if the text is one.
pub fn kubelet_reserved_cpus(text: &str) -> Option<CpuSet> {
    check_yaml_bounds("", text).ok()?;
    let docs = YamlLoader::load_from_str(text).ok()?;
    docs.iter().find_map(|d| {
        d["reservedSystemCPUs"]
            .as_str()
            .and_then(|s| CpuSet::parse(s).ok())
    })
}

struct Doc<'a> {
    file: &'a str,
    lines: &'a [&'a str],
    /// 0-based index of the document's first line.
    start: usize,
    end: usize,
}

impl Doc<'_> {
    /// 1-based line of the first `key:` at or after 0-based line `from` within this document.
    fn find(&self, key: &str, from: usize) -> Option<usize> {
        (from.max(self.start)..self.end)
            .find(|&i| {
                let l = self.lines[i].trim_start().trim_start_matches("- ");
                let l = l.trim_start_matches(['"', '\'']);
                l.strip_prefix(key)
                    .is_some_and(|r| r.trim_start_matches(['"', '\'']).starts_with(':'))
            })
            .map(|i| i + 1)
    }
    /// Line of a path of keys, each searched after the previous one.
    fn line_of(&self, path: &[&str]) -> Option<usize> {
        self.line_of_from(path, self.start)
    }
    /// Line of a path of keys, the first searched after line `from`.
    fn line_of_from(&self, path: &[&str], from: usize) -> Option<usize> {
        let mut at = from;
        let mut found = None;
        for k in path {
            let l = self.find(k, at)?;
            at = l;
            found = Some(l);
        }
        found
    }
    fn ev(&self, what: &str, path: &[&str], value: Option<String>) -> Evidence {
        match (self.line_of(path), value) {
            (Some(l), Some(v)) => Evidence::new(what, format!("{}:{l}", self.file), v),
            (Some(l), None) => Evidence::new(what, format!("{}:{l}", self.file), "present"),
            (None, Some(v)) => Evidence::new(what, self.file.to_string(), v),
            (None, None) => Evidence::new(what, self.file.to_string(), "absent"),
        }
    }
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Real(r) => Some(r.clone()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Kubernetes quantity → number of base units (CPU: millicores when `milli`; memory: bytes).
pub fn parse_quantity(text: &str, milli: bool) -> Option<u128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (num, suf) = text.split_at(split);
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let mult: f64 = match suf {
        "" => {
            if milli {
                1000.0
            } else {
                1.0
            }
        }
        "m" => {
            if milli {
                1.0
            } else {
                0.001
            }
        }
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        _ => return None,
    };
    let r = v * mult;
    (r < 1e30).then_some(r.round() as u128)
}

/// Lint a Kubernetes YAML text (all documents).
pub fn lint_k8s(file: &str, text: &str) -> Result<AuditReport, LintError> {
    check_yaml_bounds(file, text)?;
    let lines: Vec<&str> = text.lines().collect();
    let starts = document_starts(&lines);
    // Each document on its own, so that a syntax error in one is one finding and the others are linted.
    let mut docs = Vec::new();
    let mut stream = YamlStream {
        file,
        errors: Vec::new(),
    };
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(lines.len());
        let from = if start > 0 { start - 1 } else { 0 };
        let part = lines[from..end].join("\n");
        match YamlLoader::load_from_str(&part) {
            Ok(mut d) => docs.push(if d.is_empty() {
                Yaml::Null
            } else {
                d.remove(0)
            }),
            Err(e) => {
                stream.errors.push(SyntaxError {
                    line: from + e.marker().line().max(1),
                    reason: e.info().to_string(),
                    start,
                });
                docs.push(Yaml::BadValue);
            }
        }
    }
    if let (true, Some(first)) = (docs.iter().all(Yaml::is_badvalue), stream.errors.first()) {
        return Err(LintError::Malformed {
            file: file.to_string(),
            line: first.line,
            reason: first.reason.clone(),
        });
    }
    let mut objects = Vec::new();
    for (i, y) in docs.iter().enumerate() {
        if y.is_null() || y.is_badvalue() {
            continue;
        }
        let doc = Doc {
            file,
            lines: &lines,
            start: starts.get(i).copied().unwrap_or(0),
            end: starts.get(i + 1).copied().unwrap_or(lines.len()),
        };
        objects.extend(lint_object(&doc, y)?);
    }
    if objects.is_empty() {
        return Err(LintError::Malformed {
            file: file.to_string(),
            line: 1,
            reason: "no Kubernetes object in the file".into(),
        });
    }
    let mut findings = run_rules(FILE_RULES, |check| check(&stream));
    findings.extend(objects);
    Ok(report(Subject::K8s, file, findings))
}

/// 0-based first line of each document: after each line that is exactly `---` (possibly with a trailing
/// comment); a first document of only comments and blank lines before the first `---` is none.
fn document_starts(lines: &[&str]) -> Vec<usize> {
    let mut starts = vec![0usize];
    for (i, l) in lines.iter().enumerate() {
        if l.trim_end() == "---" || l.starts_with("--- ") {
            starts.push(i + 1);
        }
    }
    if starts.len() > 1
        && lines.iter().take(starts[1]).all(|l| {
            l.trim().is_empty() || l.trim_start().starts_with('#') || l.trim_end() == "---"
        })
    {
        starts.remove(0);
    }
    starts
}

/// The findings of one document, by its kind.
fn lint_object(d: &Doc, y: &Yaml) -> Result<Vec<Finding>, LintError> {
    let kind = y["kind"].as_str().unwrap_or("");
    let err = |reason: String| LintError::Malformed {
        file: d.file.to_string(),
        line: d.start + 1,
        reason,
    };
    let (rules, meta, spec) = match kind {
        "Pod" => (POD_RULES, &y["metadata"], &y["spec"]),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            let t = &y["spec"]["template"];
            if t.is_badvalue() {
                return Err(err(format!("{kind} without spec.template")));
            }
            (POD_RULES, &t["metadata"], &t["spec"])
        }
        "KubeletConfiguration" => (KUBELET_RULES, &Yaml::BadValue, y),
        "KubeletConfig" => (KUBELET_RULES, &Yaml::BadValue, &y["spec"]["kubeletConfig"]),
        "PerformanceProfile" => (PROFILE_RULES, &Yaml::BadValue, &y["spec"]),
        "" => return Err(err("document without kind".into())),
        k => return Err(err(format!("kind {k} is not linted (Pod, Deployment, StatefulSet, DaemonSet, Job, KubeletConfiguration, PerformanceProfile)"))),
    };
    let object = Object { d, meta, spec };
    Ok(run_rules(rules, |check| check(&object)))
}

/// A document that is not YAML.
struct SyntaxError {
    /// 1-based line of the error in the file.
    line: usize,
    reason: String,
    /// 0-based first line of the document.
    start: usize,
}

/// What the file rules read of the YAML stream (the file's documents): those that are not YAML.
struct YamlStream<'a> {
    file: &'a str,
    errors: Vec<SyntaxError>,
}

/// What an object's rules read: the document, and the object's metadata (pods) and spec (the pod spec, the
/// kubelet configuration, the PerformanceProfile spec).
struct Object<'a> {
    d: &'a Doc<'a>,
    meta: &'a Yaml,
    spec: &'a Yaml,
}

fn syntax(s: &YamlStream) -> Vec<LintOutcome> {
    let file = s.file;
    s.errors
        .iter()
        .map(|e| {
            LintOutcome::fail(
                format!("{file}:{}: {}", e.line, e.reason),
                vec![Evidence::new(
                    "document",
                    format!("{file}:{}", e.start + 1),
                    format!("YAML syntax error at line {}", e.line),
                )],
            )
        })
        .collect()
}

fn containers(spec: &Yaml) -> Vec<(&'static str, &Yaml)> {
    let mut v = Vec::new();
    for (key, label) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        if let Some(list) = spec[key].as_vec() {
            v.extend(list.iter().map(|c| (label, c)));
        }
    }
    v
}

/// `metadata.annotations` as (key, value) pairs.
fn annotations(meta: &Yaml) -> Vec<(String, String)> {
    meta["annotations"]
        .as_hash()
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), scalar(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Name of a container.
fn name(c: &Yaml) -> String {
    c["name"].as_str().unwrap_or("?").to_string()
}

fn guaranteed_qos(o: &Object) -> Vec<LintOutcome> {
    let (d, spec) = (o.d, o.spec);
    let conts = containers(spec);
    let mut problems = Vec::new();
    let mut ev = Vec::new();
    for (label, c) in &conts {
        let n = name(c);
        let r = &c["resources"];
        // Evidence lines: search the resources after the line that names this container.
        let name_line = (d.start..d.end).find(|&i| {
            let l = d.lines[i].trim_start().trim_start_matches("- ");
            l.starts_with("name:") && l.contains(n.as_str())
        });
        for res in ["cpu", "memory"] {
            let lim = scalar(&r["limits"][res]);
            let req = scalar(&r["requests"][res]).or_else(|| lim.clone());
            let src = name_line
                .and_then(|nl| d.line_of_from(&["limits", res], nl))
                .map(|l| format!("{}:{l}", d.file))
                .unwrap_or_else(|| d.file.to_string());
            ev.push(Evidence::new(
                format!("{n} limits.{res}"),
                src,
                lim.clone().unwrap_or_else(|| "absent".into()),
            ));
            match (&req, &lim) {
                (_, None) => problems.push(format!("{label} {n}: no {res} limit")),
                (Some(a), Some(b))
                    if parse_quantity(a, res == "cpu") != parse_quantity(b, res == "cpu") =>
                {
                    problems.push(format!("{label} {n}: {res} request {a} != limit {b}"))
                }
                _ => {}
            }
        }
    }
    vec![if conts.is_empty() {
        LintOutcome::fail(
            "no containers",
            vec![d.ev("containers", &["containers"], None)],
        )
    } else if problems.is_empty() {
        LintOutcome::pass(
            "Guaranteed QoS: limits == requests for cpu and memory everywhere",
            ev,
        )
    } else {
        LintOutcome::fail(problems.join("; "), ev)
    }]
}

fn rt_capabilities(o: &Object) -> Vec<LintOutcome> {
    let (d, spec) = (o.d, o.spec);
    let conts = containers(spec);
    let mut problems = Vec::new();
    let mut ev = Vec::new();
    for (label, c) in conts.iter().filter(|(l, _)| *l == "container") {
        let n = name(c);
        let sc = &c["securityContext"];
        let added: Vec<String> = sc["capabilities"]["add"]
            .as_vec()
            .map(|v| {
                v.iter()
                    .filter_map(|c| c.as_str())
                    .map(|c| c.trim_start_matches("CAP_").to_ascii_uppercase())
                    .collect()
            })
            .unwrap_or_default();
        ev.push(d.ev(
            &format!("{n} capabilities.add"),
            &["capabilities", "add"],
            (!added.is_empty()).then(|| added.join(", ")),
        ));
        if sc["privileged"].as_bool() == Some(true) {
            continue;
        }
        let missing: Vec<&str> = ["SYS_NICE", "IPC_LOCK"]
            .into_iter()
            .filter(|m| !added.iter().any(|a| a == m))
            .collect();
        if !missing.is_empty() {
            let refused: Vec<&str> = missing
                .iter()
                .map(|m| {
                    if *m == "SYS_NICE" {
                        "SCHED_FIFO"
                    } else {
                        "mlockall"
                    }
                })
                .collect();
            problems.push(format!(
                "{label} {n}: no {} ({} will be refused)",
                missing.join(" and "),
                refused.join(" and ")
            ));
        }
    }
    vec![if conts.is_empty() {
        LintOutcome::fail("no containers", ev)
    } else if problems.is_empty() {
        LintOutcome::pass("every container may use SCHED_FIFO and mlockall", ev)
    } else {
        LintOutcome::fail(problems.join("; "), ev)
    }]
}

fn whole_cpus(o: &Object) -> Vec<LintOutcome> {
    let (d, spec) = (o.d, o.spec);
    let conts = containers(spec);
    let mut problems = Vec::new();
    let mut ev = Vec::new();
    for (label, c) in conts.iter().filter(|(l, _)| *l == "container") {
        let n = name(c);
        let cpu = scalar(&c["resources"]["requests"]["cpu"])
            .or_else(|| scalar(&c["resources"]["limits"]["cpu"]));
        ev.push(d.ev(&format!("{n} cpu"), &["requests", "cpu"], cpu.clone()));
        match cpu.as_deref().map(|q| (q, parse_quantity(q, true))) {
            None => problems.push(format!("{label} {n}: no cpu request")),
            Some((q, None)) => problems.push(format!("{label} {n}: cpu '{q}' is not a quantity")),
            Some((q, Some(m))) if m == 0 || m % 1000 != 0 => problems.push(format!(
                "{label} {n}: cpu {q} is not a whole number of CPUs"
            )),
            _ => {}
        }
    }
    vec![if problems.is_empty() && !ev.is_empty() {
        LintOutcome::pass("integer CPU requests", ev)
    } else {
        LintOutcome::fail(
            if problems.is_empty() {
                "no containers".into()
            } else {
                problems.join("; ")
            },
            ev,
        )
    }]
}

fn hugepages(o: &Object) -> Vec<LintOutcome> {
    let (d, spec) = (o.d, o.spec);
    let conts = containers(spec);
    let mut hp = Vec::new();
    let mut problems = Vec::new();
    for (_, c) in &conts {
        let r = &c["resources"];
        for sect in ["requests", "limits"] {
            if let Some(h) = r[sect].as_hash() {
                for (k, _) in h {
                    if let Some(k) = k.as_str().filter(|k| k.starts_with("hugepages-")) {
                        if !hp.contains(&k.to_string()) {
                            hp.push(k.to_string());
                        }
                    }
                }
            }
        }
        for k in &hp {
            let req = scalar(&r["requests"][k.as_str()]);
            let lim = scalar(&r["limits"][k.as_str()]);
            if req.is_some() && req != lim {
                problems.push(format!("{}: {k} requests != limits", name(c)));
            }
        }
    }
    let vol = spec["volumes"].as_vec().is_some_and(|v| {
        v.iter().any(|x| {
            x["emptyDir"]["medium"]
                .as_str()
                .is_some_and(|m| m.starts_with("HugePages"))
        })
    });
    let ev = vec![
        d.ev(
            "hugepages resources",
            &["hugepages-"],
            (!hp.is_empty()).then(|| hp.join(" ")),
        ),
        d.ev(
            "HugePages emptyDir",
            &["medium"],
            vol.then(|| "HugePages".to_string()),
        ),
    ];
    vec![if hp.is_empty() {
        LintOutcome::na("no huge pages requested", ev)
    } else if !problems.is_empty() {
        LintOutcome::fail(problems.join("; "), ev)
    } else if !vol {
        LintOutcome::warn("huge pages requested but no HugePages emptyDir mounted", ev)
    } else {
        LintOutcome::pass(format!("{} requested and mounted", hp.join(", ")), ev)
    }]
}

fn runtime_class(o: &Object) -> Vec<LintOutcome> {
    let (d, spec) = (o.d, o.spec);
    let has_crio = annotations(o.meta)
        .iter()
        .any(|(k, _)| k.ends_with(".crio.io"));
    let rc = spec["runtimeClassName"].as_str().map(str::to_string);
    let ev = vec![d.ev("runtimeClassName", &["runtimeClassName"], rc.clone())];
    vec![match (&rc, !has_crio) {
        (Some(r), _) => LintOutcome::pass(
            format!("runtime class {r} (its handler must allow the crio.io annotations)"),
            ev,
        ),
        (None, false) => LintOutcome::fail(
            "crio.io annotations without a runtime class: ignored by CRI-O",
            ev,
        ),
        (None, true) => LintOutcome::warn("no high-performance runtime class", ev),
    }]
}

fn crio_annotations(o: &Object) -> Vec<LintOutcome> {
    let d = o.d;
    let anns = annotations(o.meta);
    let get = |k: &str| anns.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone());
    let mut ev = Vec::new();
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    for k in [
        "cpu-load-balancing.crio.io",
        "cpu-quota.crio.io",
        "irq-load-balancing.crio.io",
    ] {
        let v = get(k);
        ev.push(d.ev(k, &[k], v.clone()));
        match v.as_deref() {
            Some("disable") => {}
            Some("true") => warns.push(format!("{k}: \"true\" is deprecated, use \"disable\"")),
            Some(x) => fails.push(format!("{k}: {x}")),
            None => fails.push(format!("{k} absent")),
        }
    }
    let cs = get("cpu-c-states.crio.io");
    ev.push(d.ev(
        "cpu-c-states.crio.io",
        &["cpu-c-states.crio.io"],
        cs.clone(),
    ));
    match cs.as_deref() {
        None | Some("disable") => {}
        Some(x)
            if x.starts_with("max_latency:")
                && x["max_latency:".len()..].parse::<u32>().is_ok() => {}
        Some("enable") => warns.push("cpu-c-states.crio.io: enable allows all C-states".into()),
        Some(x) => fails.push(format!("cpu-c-states.crio.io: {x}")),
    }
    let gov = get("cpu-freq-governor.crio.io");
    ev.push(d.ev(
        "cpu-freq-governor.crio.io",
        &["cpu-freq-governor.crio.io"],
        gov.clone(),
    ));
    if let Some(g) = gov.filter(|g| g != "performance") {
        warns.push(format!("cpu-freq-governor.crio.io: {g}"));
    }
    vec![LintOutcome::of_problems(
        fails,
        warns,
        "CPU and IRQ load balancing and CFS quota disabled for the pod",
        ev,
    )]
}

fn cpu_manager(o: &Object) -> Vec<LintOutcome> {
    let (d, k) = (o.d, o.spec);
    let pol = k["cpuManagerPolicy"].as_str().map(str::to_string);
    let reserved = k["reservedSystemCPUs"].as_str().map(str::to_string);
    let opts = k["cpuManagerPolicyOptions"]["full-pcpus-only"]
        .as_str()
        .map(str::to_string)
        .or_else(|| scalar(&k["cpuManagerPolicyOptions"]["full-pcpus-only"]));
    let ev = vec![
        d.ev("cpuManagerPolicy", &["cpuManagerPolicy"], pol.clone()),
        d.ev(
            "reservedSystemCPUs",
            &["reservedSystemCPUs"],
            reserved.clone(),
        ),
        d.ev("full-pcpus-only", &["full-pcpus-only"], opts.clone()),
    ];
    vec![match (pol.as_deref(), &reserved) {
        (Some("static"), Some(r)) if CpuSet::parse(r).is_ok() => LintOutcome::pass(
            format!(
                "static CPU manager, reserved {r}{}",
                if opts.as_deref() == Some("true") {
                    ", full-pcpus-only"
                } else {
                    ""
                }
            ),
            ev,
        ),
        (Some("static"), Some(r)) => {
            LintOutcome::fail(format!("reservedSystemCPUs '{r}' is not a CPU list"), ev)
        }
        (Some("static"), None) => {
            LintOutcome::fail("static CPU manager without reservedSystemCPUs", ev)
        }
        (p, _) => LintOutcome::fail(
            format!("cpuManagerPolicy {}", p.unwrap_or("none (default)")),
            ev,
        ),
    }]
}

fn topology_memory_manager(o: &Object) -> Vec<LintOutcome> {
    let (d, k) = (o.d, o.spec);
    let topo = k["topologyManagerPolicy"].as_str().map(str::to_string);
    let mem = k["memoryManagerPolicy"].as_str().map(str::to_string);
    let has_resv_mem = k["reservedMemory"].as_vec().is_some_and(|v| !v.is_empty());
    let ev = vec![
        d.ev(
            "topologyManagerPolicy",
            &["topologyManagerPolicy"],
            topo.clone(),
        ),
        d.ev(
            "topologyManagerScope",
            &["topologyManagerScope"],
            k["topologyManagerScope"].as_str().map(str::to_string),
        ),
        d.ev("memoryManagerPolicy", &["memoryManagerPolicy"], mem.clone()),
        d.ev(
            "reservedMemory",
            &["reservedMemory"],
            has_resv_mem.then(|| "present".to_string()),
        ),
    ];
    vec![match (topo.as_deref(), mem.as_deref()) {
        (_, Some("Static")) if !has_resv_mem => {
            LintOutcome::fail("memoryManagerPolicy Static without reservedMemory", ev)
        }
        (Some("single-numa-node" | "restricted"), _) => LintOutcome::pass(
            format!("topology manager {}", topo.clone().unwrap_or_default()),
            ev,
        ),
        (t, _) => LintOutcome::fail(
            format!("topologyManagerPolicy {}", t.unwrap_or("none (default)")),
            ev,
        ),
    }]
}

fn reserved_vs_host(o: &Object) -> Vec<LintOutcome> {
    let reserved = o.spec["reservedSystemCPUs"].as_str().map(str::to_string);
    vec![LintOutcome::na(
        "needs the host's isolated and online CPUs, which a definition file does not carry",
        vec![o
            .d
            .ev("reservedSystemCPUs", &["reservedSystemCPUs"], reserved)],
    )]
}

fn performance_profile(o: &Object) -> Vec<LintOutcome> {
    let (d, s) = (o.d, o.spec);
    let iso = s["cpu"]["isolated"].as_str().map(str::to_string);
    let res = s["cpu"]["reserved"].as_str().map(str::to_string);
    let rt = s["realTimeKernel"]["enabled"].as_bool();
    let hp = s["workloadHints"]["highPowerConsumption"]
        .as_bool()
        .unwrap_or(false);
    let ppm = s["workloadHints"]["perPodPowerManagement"]
        .as_bool()
        .unwrap_or(false);
    let irq = s["globallyDisableIrqLoadBalancing"].as_bool();
    let ev = vec![
        d.ev("cpu.isolated", &["cpu", "isolated"], iso.clone()),
        d.ev("cpu.reserved", &["cpu", "reserved"], res.clone()),
        d.ev(
            "realTimeKernel.enabled",
            &["realTimeKernel", "enabled"],
            rt.map(|b| b.to_string()),
        ),
        d.ev(
            "workloadHints.highPowerConsumption",
            &["highPowerConsumption"],
            Some(hp.to_string()),
        ),
        d.ev(
            "workloadHints.perPodPowerManagement",
            &["perPodPowerManagement"],
            Some(ppm.to_string()),
        ),
        d.ev(
            "globallyDisableIrqLoadBalancing",
            &["globallyDisableIrqLoadBalancing"],
            irq.map(|b| b.to_string()),
        ),
    ];
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    match (
        iso.as_deref().map(CpuSet::parse),
        res.as_deref().map(CpuSet::parse),
    ) {
        (Some(Ok(i)), Some(Ok(r))) => {
            let both = i.intersection(&r);
            if !both.is_empty() {
                fails.push(format!("isolated and reserved overlap on {both}"));
            }
        }
        (Some(Err(e)), _) | (_, Some(Err(e))) => fails.push(format!("CPU list invalid: {e}")),
        _ => fails.push("spec.cpu.isolated and spec.cpu.reserved are required".to_string()),
    }
    if rt != Some(true) {
        fails.push("realTimeKernel.enabled is not true".to_string());
    }
    if hp && ppm {
        fails.push(
            "highPowerConsumption and perPodPowerManagement are mutually exclusive".to_string(),
        );
    }
    if irq != Some(true) {
        warns.push(
            "globallyDisableIrqLoadBalancing not true: pods need irq-load-balancing.crio.io"
                .to_string(),
        );
    }
    vec![LintOutcome::of_problems(
        fails,
        warns,
        "isolated/reserved disjoint, RT kernel, IRQ balancing disabled",
        ev,
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("4", true), Some(4000));
        assert_eq!(parse_quantity("4000m", true), Some(4000));
        assert_eq!(parse_quantity("500m", true), Some(500));
        assert_eq!(parse_quantity("1Gi", false), Some(1 << 30));
        assert_eq!(parse_quantity("x", false), None);
        assert_eq!(parse_quantity("1e999", false), None);
    }

    #[test]
    fn malformed_yaml_names_the_line() {
        let e = lint_k8s("p.yaml", "kind: Pod\nspec:\n  containers: [\n").unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:"), "{e}");
        let e = lint_k8s("p.yaml", "kind: Service\n").unwrap_err();
        assert!(e.to_string().contains("not linted"));
        assert!(lint_k8s("p.yaml", "").is_err());
    }

    #[test]
    fn kubelet_reserved() {
        assert_eq!(
            kubelet_reserved_cpus("reservedSystemCPUs: \"0-1\"\n")
                .unwrap()
                .to_string(),
            "0-1"
        );
        assert!(kubelet_reserved_cpus("a: [").is_none());
    }

    proptest::proptest! {
        #[test]
        fn no_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let s = String::from_utf8_lossy(&bytes);
            let _ = lint_k8s("x.yaml", &s);
            let _ = lint_k8s("x.yaml", &format!("kind: Pod\nspec:\n  containers:\n  - name: a\n    {s}\n"));
        }
    }
}
