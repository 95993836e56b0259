//! The fleet view (`rtgauge fleet`): every host of a store with its latest run per profile, and the hosts that
//! stand out from the fleet's majority — in latency (a robust median/MAD rule), in audit findings
//! ("3 of 40 hosts: cpuidle-states fail") and in platform fingerprint fields (kernel, preemption model,
//! clocksource, isolation, …).
//!
//! One row per host and profile; a run without a profile (a single-probe verb, an rt-tests import) has its
//! probes (`cyclic`, `oslat`) in the profile's place, so a host's imported cyclictest and oslat runs are two
//! rows, not one hiding the other. A run whose host name is empty (a cyclictest text import says none) is
//! shown as [`UNKNOWN_HOST`], never as a blank cell.
//!
//! Pure: the caller picks the runs (the newest per [`group_key`]) and says how old each is, so the view is
//! a function of stored documents and can be tested and re-rendered without a clock or a database.

use crate::escape::visible_field;
use crate::units::us_label;
use maud::html;
use rtgauge_model::audit::Status;
use rtgauge_model::run::RunDocument;
use rtgauge_model::units::us;
use rtgauge_model::verdict::Outcome;
use serde::Serialize;
use std::collections::BTreeMap;

pub use rtgauge_model::run::{host_name, UNKNOWN_HOST};

/// What `fleet` keeps the newest run of: (host as shown, profile, the probes of a run without a profile).
/// `probes` is the comma-separated list of the run's probes (`cyclic,oslat`, as the store lists them).
pub fn group_key(
    nodename: &str,
    profile: Option<&str>,
    probes: &str,
) -> (String, Option<String>, Option<String>) {
    (
        host_name(nodename).to_string(),
        profile.map(str::to_string),
        profile.is_none().then(|| probes.to_string()),
    )
}

fn probes_of(doc: &RunDocument) -> String {
    doc.probes
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// The profile column: the profile, or a run's probes in parentheses when it has none (`(cyclic)`).
fn profile_text(profile: Option<&str>, probes: Option<&str>) -> String {
    match (profile, probes) {
        (Some(p), _) => p.to_string(),
        (None, Some(ps)) if !ps.is_empty() => format!("({ps})"),
        (None, _) => "-".to_string(),
    }
}

/// One run handed to [`aggregate`]: the newest run of its [`group_key`].
#[derive(Debug, Clone, Copy)]
pub struct FleetRun<'a> {
    /// The run's id in the store.
    pub id: i64,
    /// The run document.
    pub doc: &'a RunDocument,
    /// Seconds since the run ended (or started, while running); `None` when the timestamp is unreadable.
    pub age_s: Option<i64>,
}

/// One host and profile: its latest run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostEntry {
    /// The host's name ([`UNKNOWN_HOST`] when the run names none).
    pub host: String,
    /// The requirement profile the run was judged against, if any.
    pub profile: Option<String>,
    /// The run's probes (`cyclic,oslat`) when it has no profile: such runs are grouped by them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<String>,
    /// The run's id in the store.
    pub run: i64,
    /// The run's platform label, if any.
    pub label: Option<String>,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// The run's status as the store records it.
    pub status: String,
    /// Seconds since the run ended (or started, while running); `None` when unreadable.
    pub age_s: Option<i64>,
    /// `pass`, `fail` (a gate failed), `no data` (a gate had nothing to judge) or `no gates`.
    pub verdict: String,
    /// Largest timer latency of the run, ns (None: no cyclic probe).
    pub cyclic_max_ns: Option<u64>,
    /// Largest OS-noise gap of the run, ns (None: no oslat probe).
    pub oslat_max_ns: Option<u64>,
    /// Failed audit rules (ids); `None` when the run carries no audit.
    pub audit_failed: Option<Vec<String>>,
}

/// What makes a host an outlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutlierKind {
    /// A latency figure above the fleet's median by more than [`MAD_FACTOR`] robust deviations.
    Latency,
    /// An audit rule whose status differs from the one most hosts have.
    Audit,
    /// A fingerprint field whose value differs from the one most hosts have.
    Setting,
}

/// A group of hosts that differ from the fleet's majority in one respect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlier {
    /// What makes these hosts outliers.
    pub kind: OutlierKind,
    /// The measure (`cyclic.max`), audit rule id or fingerprint field.
    pub what: String,
    /// The profile, for a latency outlier.
    pub profile: Option<String>,
    /// The outlying hosts.
    pub hosts: Vec<String>,
    /// Hosts compared.
    pub of: usize,
    /// The outliers' value(s), as text.
    pub value: String,
    /// The majority's value (for latency: the median, and the bound).
    pub majority: String,
    /// One line for people: `3 of 40 hosts: cpuidle-states fail (majority pass): C-states deeper than C1 enabled`.
    pub message: String,
}

/// The fleet view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fleet {
    /// Hosts in the fleet.
    pub hosts: usize,
    /// Each host's latest run per profile.
    pub entries: Vec<HostEntry>,
    /// Hosts that differ from the majority, one entry per respect.
    pub outliers: Vec<Outlier>,
}

/// Robust deviations above the median that make a latency outlier.
pub const MAD_FACTOR: f64 = 3.0;
/// Hosts needed before anything is called an outlier: with two, neither is the majority.
pub const MIN_HOSTS: usize = 3;

/// The fingerprint fields compared across hosts (JSON pointers into the fingerprint): the settings that decide
/// real-time behaviour and should be the same on every host of a fleet. Free memory, CPU counts and other
/// per-machine facts are left out on purpose.
pub const FINGERPRINT_FIELDS: &[(&str, &str)] = &[
    ("kernel.release", "/kernel/release"),
    ("kernel.preempt.model", "/kernel/preempt/model"),
    ("clock.current", "/clock/current"),
    ("cpu.model_name", "/cpu/model_name"),
    ("cpu.microcode", "/cpu/microcode"),
    ("cpu.smt_active", "/cpu/smt_active"),
    ("isolation.isolated", "/isolation/isolated"),
    ("isolation.nohz_full", "/isolation/nohz_full"),
    ("tuned.active_profile", "/tuned/active_profile"),
    ("virt.platform", "/virt/platform"),
    ("memory.thp", "/memory/thp"),
];

fn verdict_word(doc: &RunDocument) -> &'static str {
    if doc.verdicts.is_empty() {
        "no gates"
    } else if doc.verdicts.iter().any(|v| v.outcome == Outcome::NotJudged) {
        "not judged"
    } else if doc.verdicts.iter().any(|v| v.outcome == Outcome::Fail) {
        "fail"
    } else if doc.verdicts.iter().any(|v| v.outcome == Outcome::NoData)
        || rtgauge_model::verdict::all_skipped(&doc.verdicts)
    {
        "no data"
    } else {
        "pass"
    }
}

/// The fleet view of `runs` (the newest run per host and profile).
pub fn aggregate(runs: &[FleetRun<'_>]) -> Fleet {
    assemble(runs.iter().map(entry_of).collect(), runs)
}

/// The value of the gate metric a profile names `name` in a run (as its gate would judge it).
fn observed(name: &str, doc: &RunDocument) -> Option<u64> {
    let metric = rtgauge_analysis::kind::parse_metric(name, None).ok()?;
    rtgauge_analysis::judge::observe(&metric, doc)
}

fn entry_of(r: &FleetRun<'_>) -> HostEntry {
    HostEntry {
        host: host_name(&r.doc.system.nodename).to_string(),
        profile: r.doc.profile.clone(),
        probes: r.doc.profile.is_none().then(|| probes_of(r.doc)),
        run: r.id,
        label: r.doc.label.clone(),
        started_at: r.doc.started_at.clone(),
        status: r.doc.status.as_str().to_string(),
        age_s: r.age_s,
        verdict: verdict_word(r.doc).to_string(),
        cyclic_max_ns: observed("cyclic.max", r.doc),
        oslat_max_ns: observed("oslat.max", r.doc),
        audit_failed: r.doc.audit.as_ref().map(|a| {
            a.findings
                .iter()
                .filter(|f| f.status == Status::Fail)
                .map(|f| f.id.clone())
                .collect()
        }),
    }
}

/// The view from the entries (one per run, in `runs` order) and the runs they came from.
fn assemble(mut entries: Vec<HostEntry>, runs: &[FleetRun<'_>]) -> Fleet {
    entries.sort_by(|a, b| {
        (&a.host, &a.profile, &a.probes, a.run).cmp(&(&b.host, &b.profile, &b.probes, b.run))
    });

    let mut outliers = latency_outliers(&entries);

    // Settings are per host: judge each host by its newest run that carries them (highest id), separately
    // for the audit and the fingerprint — an imported run carries neither, and must not hide the host's
    // outliers once it is the newest.
    let newest_with = |has: fn(&RunDocument) -> bool| {
        let mut newest: BTreeMap<&str, &FleetRun<'_>> = BTreeMap::new();
        for r in runs.iter().filter(|r| has(r.doc)) {
            let e = newest.entry(host_name(&r.doc.system.nodename)).or_insert(r);
            if r.id > e.id {
                *e = r;
            }
        }
        newest
    };
    let hosts = newest_with(|_| true).len();
    outliers.extend(audit_outliers(&newest_with(|d| d.audit.is_some())));
    outliers.extend(setting_outliers(&newest_with(|d| d.fingerprint.is_some())));
    Fleet {
        hosts,
        entries,
        outliers,
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Latency outliers per profile and measure: a host whose max is above `median + MAD_FACTOR × scale`, where
/// scale is the MAD scaled to a standard deviation (×1.4826), floored at 5 % of the median and 1 µs so that a
/// fleet of near-identical hosts (MAD ≈ 0) does not turn every few hundred ns into an outlier.
fn latency_outliers(entries: &[HostEntry]) -> Vec<Outlier> {
    let mut out = Vec::new();
    type Pick = fn(&HostEntry) -> Option<u64>;
    let measures: [(&str, Pick); 2] = [
        ("cyclic.max", |e| e.cyclic_max_ns),
        ("oslat.max", |e| e.oslat_max_ns),
    ];
    // A group: a profile, or the probes of runs without one (one entry per host in each).
    let mut groups: Vec<(&Option<String>, &Option<String>)> =
        entries.iter().map(|e| (&e.profile, &e.probes)).collect();
    // Entries come host by host: each group once, whatever the order.
    groups.sort();
    groups.dedup();
    for (profile, probes) in groups {
        for (name, pick) in measures {
            let xs: Vec<(&str, f64)> = entries
                .iter()
                .filter(|e| &e.profile == profile && &e.probes == probes)
                .filter_map(|e| pick(e).map(|v| (e.host.as_str(), v as f64)))
                .collect();
            if xs.len() < MIN_HOSTS {
                continue;
            }
            let mut v: Vec<f64> = xs.iter().map(|x| x.1).collect();
            v.sort_by(f64::total_cmp);
            let m = median(&v);
            let mut dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
            dev.sort_by(f64::total_cmp);
            let scale = (median(&dev) * 1.4826).max(m * 0.05).max(1000.0);
            let bound = m + MAD_FACTOR * scale;
            let high: Vec<(&str, f64)> = xs.iter().copied().filter(|x| x.1 > bound).collect();
            if high.is_empty() {
                continue;
            }
            let value = high
                .iter()
                .map(|(h, x)| format!("{h} {}", us_label(*x)))
                .collect::<Vec<_>>()
                .join(", ");
            let majority = format!("median {}, bound {}", us_label(m), us_label(bound));
            out.push(Outlier {
                kind: OutlierKind::Latency,
                what: name.to_string(),
                profile: profile.clone(),
                hosts: high.iter().map(|x| x.0.to_string()).collect(),
                of: xs.len(),
                message: format!(
                    "{} of {} hosts: {name} above the fleet (profile {}): {value} ({majority})",
                    high.len(),
                    xs.len(),
                    profile_text(profile.as_deref(), probes.as_deref()),
                ),
                value,
                majority,
            });
        }
    }
    out
}

/// Hosts grouped by a value; the majority value is the one more than half of the hosts share.
fn minority_groups<'a>(
    values: &BTreeMap<&'a str, String>,
) -> Option<(String, BTreeMap<String, Vec<&'a str>>)> {
    let n = values.len();
    if n < MIN_HOSTS {
        return None;
    }
    let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (h, v) in values {
        groups.entry(v.clone()).or_default().push(h);
    }
    let (major, count) = groups
        .iter()
        .map(|(v, hs)| (v.clone(), hs.len()))
        .max_by_key(|x| x.1)?;
    if count * 2 <= n || count == n {
        return None;
    }
    groups.remove(&major);
    Some((major, groups))
}

fn audit_outliers(newest: &BTreeMap<&str, &FleetRun<'_>>) -> Vec<Outlier> {
    // rule id → host → status (and the finding's summary, to say what differs)
    let mut by_rule: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
    let mut summary: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for (host, r) in newest {
        let Some(a) = &r.doc.audit else { continue };
        for f in &a.findings {
            // "unavailable" says the host could not tell, not that it is set differently.
            if f.status == Status::Unavailable {
                continue;
            }
            by_rule
                .entry(f.id.as_str())
                .or_default()
                .insert(host, f.status.as_str().to_string());
            summary.insert((f.id.as_str(), host), f.summary.as_str());
        }
    }
    let mut out = Vec::new();
    for (rule, statuses) in &by_rule {
        let Some((major, minor)) = minority_groups(statuses) else {
            continue;
        };
        for (status, hosts) in minor {
            let what = hosts
                .first()
                .and_then(|h| summary.get(&(*rule, *h)))
                .copied()
                .unwrap_or("");
            out.push(Outlier {
                kind: OutlierKind::Audit,
                what: rule.to_string(),
                profile: None,
                message: format!(
                    "{} of {} hosts: {rule} {status} (majority {major}){}{}",
                    hosts.len(),
                    statuses.len(),
                    if what.is_empty() { "" } else { ": " },
                    what
                ),
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                of: statuses.len(),
                value: status,
                majority: major.clone(),
            });
        }
    }
    out
}

fn setting_outliers(newest: &BTreeMap<&str, &FleetRun<'_>>) -> Vec<Outlier> {
    let prints: Vec<(&str, serde_json::Value)> = newest
        .iter()
        .filter_map(|(h, r)| {
            let f = r.doc.fingerprint.as_ref()?;
            serde_json::to_value(f).ok().map(|v| (*h, v))
        })
        .collect();
    let mut out = Vec::new();
    for (name, pointer) in FINGERPRINT_FIELDS {
        let values: BTreeMap<&str, String> = prints
            .iter()
            .map(|(h, v)| {
                let text = match v.pointer(pointer) {
                    None | Some(serde_json::Value::Null) => "none".to_string(),
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                };
                (*h, text)
            })
            .collect();
        let Some((major, minor)) = minority_groups(&values) else {
            continue;
        };
        for (value, hosts) in minor {
            out.push(Outlier {
                kind: OutlierKind::Setting,
                what: name.to_string(),
                profile: None,
                message: format!(
                    "{} of {} hosts: {name} = {value} (majority {major})",
                    hosts.len(),
                    values.len()
                ),
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                of: values.len(),
                value,
                majority: major.clone(),
            });
        }
    }
    out
}

/// `3d 4h`, `12m`, `40s`.
pub fn age_text(age_s: Option<i64>) -> String {
    let Some(s) = age_s else {
        return "-".into();
    };
    let s = s.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

fn opt_us(v: Option<u64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}", us(x)))
}

fn audit_text(a: &Option<Vec<String>>) -> String {
    match a {
        None => "-".into(),
        Some(v) if v.is_empty() => "0".into(),
        Some(v) => format!("{} ({})", v.len(), v.join(",")),
    }
}

/// The terminal table and the outliers.
pub fn render_text(fleet: &Fleet) -> String {
    use std::fmt::Write as _;
    let w = fleet
        .entries
        .iter()
        .map(|e| visible_field(&e.host).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut s = format!(
        "{} host{}, {} latest run{} (one per host and profile)\n\n",
        fleet.hosts,
        if fleet.hosts == 1 { "" } else { "s" },
        fleet.entries.len(),
        if fleet.entries.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "{:<w$}  {:<10}  {:>5}  {:<11}  {:<8}  {:>10}  {:>10}  {:>8}  audit fail",
        "host", "profile", "run", "status", "verdict", "cyclic µs", "oslat µs", "age"
    );
    for e in &fleet.entries {
        let _ = writeln!(
            s,
            "{:<w$}  {:<10}  {:>5}  {:<11}  {:<8}  {:>10}  {:>10}  {:>8}  {}",
            visible_field(&e.host),
            visible_field(&profile_text(e.profile.as_deref(), e.probes.as_deref())),
            e.run,
            e.status,
            e.verdict,
            opt_us(e.cyclic_max_ns),
            opt_us(e.oslat_max_ns),
            age_text(e.age_s),
            audit_text(&e.audit_failed)
        );
    }
    s.push('\n');
    if fleet.outliers.is_empty() {
        let _ = writeln!(
            s,
            "outliers: none{}",
            if fleet.hosts < MIN_HOSTS {
                format!(" (needs at least {MIN_HOSTS} hosts)")
            } else {
                String::new()
            }
        );
    } else {
        let _ = writeln!(s, "outliers:");
        for o in &fleet.outliers {
            let _ = writeln!(s, "  {}: {}", visible_field(&o.hosts.join(", ")), o.message);
        }
    }
    s
}

/// A self-contained HTML page: the table and the outliers.
pub fn render_html(fleet: &Fleet) -> String {
    let body = html! {
        p { (fleet.hosts) " hosts, " (fleet.entries.len()) " latest runs (one per host and profile)." }
        h2 { "Outliers" }
        @if fleet.outliers.is_empty() {
            p.muted { "none" }
        } @else {
            ul {
                @for o in &fleet.outliers {
                    li { span.warn { (format!("{:?}", o.kind).to_lowercase()) } " " (o.message)
                        " — " (o.hosts.join(", ")) }
                }
            }
        }
        h2 { "Hosts" }
        table {
            tr { th { "host" } th { "profile" } th { "run" } th { "status" } th { "verdict" }
                 th { "cyclic max µs" } th { "oslat max µs" } th { "age" } th { "audit fail" } }
            @for e in &fleet.entries {
                tr {
                    td { (e.host) }
                    td { (profile_text(e.profile.as_deref(), e.probes.as_deref())) }
                    td.n { (e.run) }
                    td { (e.status) }
                    td class=(match e.verdict.as_str() { "pass" => "pass", "fail" => "fail", _ => "warn" }) { (e.verdict) }
                    td.n { (opt_us(e.cyclic_max_ns)) }
                    td.n { (opt_us(e.oslat_max_ns)) }
                    td.n { (age_text(e.age_s)) }
                    td { (audit_text(&e.audit_failed)) }
                }
            }
        }
    };
    crate::html::page("rtgauge fleet", body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rtgauge_model::audit::{AuditReport, Finding, Severity, Subject, Summary};

    fn doc(host: &str, max_ns: u64, cstates: Status, release: &str) -> (RunDocument, u64) {
        let mut d: RunDocument = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "tool": {"name": "rtgauge", "version": "0"},
            "command_line": [],
            "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:00:10Z",
            "system": {"sysname": "Linux", "nodename": host, "release": release, "version": "",
                       "machine": "x86_64", "realtime": false, "cpus_online": "0-3", "clocksource": null},
            "probes": [],
            "status": "complete",
            "profile": "quick"
        }))
        .unwrap();
        let mut fp = rtgauge_model::fingerprint::Fingerprint::default();
        fp.kernel.release = release.into();
        d.fingerprint = Some(fp);
        let findings = vec![Finding {
            id: "cpuidle-states".into(),
            status: cstates,
            severity: Severity::High,
            summary: if cstates == Status::Fail {
                "C-states deeper than C1 enabled".into()
            } else {
                "only C0/C1".into()
            },
            evidence: vec![],
            expected: String::new(),
            remediation: String::new(),
            source: String::new(),
        }];
        d.audit = Some(AuditReport {
            subject: Subject::Host,
            location: "/".into(),
            target: None,
            target_source: None,
            isolated: None,
            isolated_source: None,
            sample_interval: None,
            summary: Summary::of(&findings),
            findings,
        });
        (d, max_ns)
    }

    /// The view of `docs`, each with the cyclic max given beside it (a whole cyclic result is a long
    /// literal; the end-to-end test in crates/cli/tests/fleet.rs covers the extraction from real runs).
    fn fleet(docs: &[(RunDocument, u64)]) -> Fleet {
        let runs: Vec<FleetRun<'_>> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| FleetRun {
                id: i as i64 + 1,
                doc: &d.0,
                age_s: Some(90),
            })
            .collect();
        let entries = runs
            .iter()
            .zip(docs)
            .map(|(r, d)| HostEntry {
                cyclic_max_ns: Some(d.1),
                ..entry_of(r)
            })
            .collect();
        assemble(entries, &runs)
    }

    #[test]
    fn three_of_forty_with_c_states_enabled_are_named() {
        let docs: Vec<(RunDocument, u64)> = (0..40)
            .map(|i| {
                let st = if [3, 17, 31].contains(&i) {
                    Status::Fail
                } else {
                    Status::Pass
                };
                doc(&format!("cell{i:02}"), 10_000 + i * 10, st, "6.6.0-rt")
            })
            .collect();
        let f = fleet(&docs);
        assert_eq!(f.hosts, 40);
        let audit: Vec<&Outlier> = f
            .outliers
            .iter()
            .filter(|o| o.kind == OutlierKind::Audit)
            .collect();
        assert_eq!(audit.len(), 1, "{:#?}", f.outliers);
        assert_eq!(audit[0].hosts, ["cell03", "cell17", "cell31"]);
        assert_eq!(
            audit[0].message,
            "3 of 40 hosts: cpuidle-states fail (majority pass): C-states deeper than C1 enabled"
        );
        // 10.0–10.39 µs: no latency outlier (within the 1 µs / 5 % floor), no setting outlier.
        assert!(f.outliers.iter().all(|o| o.kind == OutlierKind::Audit));
    }

    #[test]
    fn a_slow_host_and_a_different_kernel_stand_out() {
        let mut docs: Vec<(RunDocument, u64)> = (0..9)
            .map(|i| doc(&format!("h{i}"), 12_000 + i * 300, Status::Pass, "6.6.0-rt"))
            .collect();
        docs.push(doc("slow", 95_000, Status::Pass, "6.1.0"));
        let f = fleet(&docs);
        let lat = f
            .outliers
            .iter()
            .find(|o| o.kind == OutlierKind::Latency)
            .unwrap();
        assert_eq!(lat.hosts, ["slow"]);
        assert_eq!(lat.what, "cyclic.max");
        let set = f
            .outliers
            .iter()
            .find(|o| o.kind == OutlierKind::Setting)
            .unwrap();
        assert_eq!(set.what, "kernel.release");
        assert_eq!(
            set.message,
            "1 of 10 hosts: kernel.release = 6.1.0 (majority 6.6.0-rt)"
        );
        let text = render_text(&f);
        assert!(
            text.contains("slow: 1 of 10 hosts: cyclic.max above the fleet"),
            "{text}"
        );
        assert!(render_html(&f).contains("kernel.release = 6.1.0"));
    }

    #[test]
    fn an_import_newer_than_the_audited_run_keeps_the_hosts_outliers() {
        let mut docs: Vec<(RunDocument, u64)> = (0..5)
            .map(|i| doc(&format!("h{i}"), 10_000, Status::Pass, "6.6.0-rt"))
            .collect();
        docs.push(doc("odd", 10_000, Status::Fail, "6.1.0"));
        // The odd host's newest run (highest id) is an import: no audit, no fingerprint, no profile.
        let mut import = doc("odd", 10_000, Status::Pass, "6.6.0-rt");
        import.0.audit = None;
        import.0.fingerprint = None;
        import.0.profile = None;
        docs.push(import);
        let f = fleet(&docs);
        assert_eq!(f.hosts, 6);
        let of = |k: OutlierKind| {
            f.outliers
                .iter()
                .filter(|o| o.kind == k)
                .map(|o| (o.what.clone(), o.hosts.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of(OutlierKind::Audit),
            [("cpuidle-states".to_string(), vec!["odd".to_string()])]
        );
        assert_eq!(
            of(OutlierKind::Setting),
            [("kernel.release".to_string(), vec!["odd".to_string()])]
        );
    }

    #[test]
    fn two_hosts_have_no_majority_and_no_outlier() {
        let docs = vec![
            doc("a", 10_000, Status::Pass, "6.6"),
            doc("b", 900_000, Status::Fail, "6.1"),
        ];
        let f = fleet(&docs);
        assert!(f.outliers.is_empty());
        assert!(render_text(&f).contains("outliers: none (needs at least 3 hosts)"));
        assert_eq!(
            f.entries[1].audit_failed,
            Some(vec!["cpuidle-states".into()])
        );
        assert_eq!(f.entries[0].verdict, "no gates");
    }

    #[test]
    fn runs_without_a_profile_are_judged_within_their_probes_and_a_nameless_host_is_named() {
        // Four hosts, each with a cyclic-only and an oslat-only run without a profile; one host's oslat gap is
        // far above the others'. Grouped by probes, each host counts once per group (4 of 4, not 8 values
        // with the oslat runs' cyclic figure missing), and the outlier names its group.
        let mut docs: Vec<(RunDocument, u64)> = Vec::new();
        for (i, h) in ["a", "b", "c", ""].iter().enumerate() {
            for _probe in ["cyclic", "oslat"] {
                let (mut d, _) = doc(h, 0, Status::Pass, "6.6");
                d.profile = None;
                docs.push((d, 10_000 + i as u64 * 100));
            }
        }
        let runs: Vec<FleetRun<'_>> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| FleetRun {
                id: i as i64 + 1,
                doc: &d.0,
                age_s: None,
            })
            .collect();
        let entries = runs
            .iter()
            .zip(&docs)
            .enumerate()
            .map(|(i, (r, d))| {
                let cyclic = i % 2 == 0;
                HostEntry {
                    probes: Some(if cyclic { "cyclic" } else { "oslat" }.into()),
                    cyclic_max_ns: cyclic.then_some(d.1),
                    oslat_max_ns: (!cyclic).then_some(if i == 5 { 900_000 } else { d.1 }),
                    ..entry_of(r)
                }
            })
            .collect();
        let f = assemble(entries, &runs);
        assert_eq!(f.hosts, 4);
        assert_eq!(f.entries.len(), 8);
        assert!(f.entries.iter().all(|e| !e.host.is_empty()));
        assert_eq!(
            f.entries.iter().filter(|e| e.host == UNKNOWN_HOST).count(),
            2
        );
        let lat: Vec<&Outlier> = f
            .outliers
            .iter()
            .filter(|o| o.kind == OutlierKind::Latency)
            .collect();
        assert_eq!(lat.len(), 1, "{:#?}", f.outliers);
        assert_eq!(
            (lat[0].hosts.as_slice(), lat[0].of),
            (&["c".to_string()][..], 4)
        );
        assert!(
            lat[0]
                .message
                .contains("oslat.max above the fleet (profile (oslat))"),
            "{}",
            lat[0].message
        );
        let text = render_text(&f);
        assert!(text.contains("(unknown host)  (cyclic)"), "{text}");
        assert!(render_html(&f).contains("<td>(unknown host)</td>"));
        assert_eq!(host_name(" "), UNKNOWN_HOST);
        assert_eq!(
            group_key("", None, "cyclic"),
            (UNKNOWN_HOST.to_string(), None, Some("cyclic".to_string()))
        );
        assert_eq!(
            group_key("h", Some("ran"), "cyclic"),
            ("h".to_string(), Some("ran".to_string()), None)
        );
    }

    #[test]
    fn age_reads_in_the_largest_units() {
        assert_eq!(age_text(Some(42)), "42s");
        assert_eq!(age_text(Some(3 * 86400 + 4 * 3600 + 5)), "3d 4h");
        assert_eq!(age_text(None), "-");
    }
}
