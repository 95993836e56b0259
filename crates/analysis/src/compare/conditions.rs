//! The conditions runs were taken under, side by side: the loads, contention, probe settings, fingerprint
//! fields and audit findings that differ, and whether two runs were taken alike (a stored repeat).

use super::Difference;
use crate::kind::ProbeData;
use rtgauge_model::run::RunDocument;

/// Each probe's settings as a comparable text (its kind and its whole configuration).
fn probe_settings(d: &RunDocument) -> Vec<String> {
    d.probes
        .iter()
        .map(|p| format!("{} {}", p.name(), p.data().settings_json()))
        .collect()
}

/// The settings a reader compares at a glance: per timer-latency or OS-noise probe its CPUs, period or
/// priority, and duration.
fn settings_summary(d: &RunDocument) -> String {
    let parts: Vec<String> = d
        .probes
        .iter()
        .filter_map(|p| p.data().settings_line())
        .collect();
    parts.join("; ")
}

/// Whether two runs were taken under the same conditions, which makes a stored run a repeat: both carry a
/// fingerprint (an rt-tests import does not say under which conditions it was taken), no fingerprint field
/// or audit status differs, every probe ran with the same settings (CPUs, period, duration, …), the same load
/// was asked for (the achieved rates vary from run to run), and neither shared its CPUs with another measuring
/// run (that measured the other run too).
pub fn same_conditions(a: &RunDocument, b: &RunDocument) -> bool {
    if a.fingerprint.is_none() || b.fingerprint.is_none() || probe_settings(a) != probe_settings(b)
    {
        return false;
    }
    // A run whose threads were refused what they asked for measured something else.
    let degraded = |d: &RunDocument| rtgauge_model::conditions::degrades(&d.unmet);
    if degraded(a) != degraded(b) {
        return false;
    }
    // Per probe, the load asked for (spec, CPUs, command): what a repeat must share.
    let loads = |d: &RunDocument| -> Vec<String> {
        d.probes
            .iter()
            .map(|p| {
                p.data().load().map_or_else(String::new, |l| {
                    let command = l.command.as_ref().map(|c| c.command.as_str());
                    format!("{} on CPU {} {command:?}", l.spec, l.cpus)
                })
            })
            .collect()
    };
    loads(a) == loads(b)
        && differences(&[a, b])
            .iter()
            .all(|d| d.what.starts_with("load ") || d.what == "probe settings")
}

/// Fingerprint fields and audit findings that differ between the runs, e.g. `kernel.cmdline` or
/// `audit nohz_full: pass (nohz_full=2-5) / fail (none)`; first the loads, contention and probe settings the
/// runs were taken under.
pub(super) fn differences(runs: &[&RunDocument]) -> Vec<Difference> {
    let mut out = Vec::new();
    out.extend(load_difference(runs));
    out.extend(contention_difference(runs));
    out.extend(settings_difference(runs));
    out.extend(fingerprint_differences(runs));
    out.extend(audit_differences(runs));
    out
}

/// The achieved loads, when any run was loaded: runs are comparable as loaded alike only when their achieved
/// loads are, so they are shown side by side.
fn load_difference(runs: &[&RunDocument]) -> Option<Difference> {
    let loads: Vec<String> = runs
        .iter()
        .map(|d| {
            let l: Vec<String> = d
                .probes
                .iter()
                .filter_map(|p| p.data().load())
                .map(|l| l.summary())
                .collect();
            if l.is_empty() {
                "none (idle)".to_string()
            } else {
                l.join(" | ")
            }
        })
        .collect();
    loads
        .iter()
        .any(|l| l != "none (idle)")
        .then(|| Difference {
            what: "load (achieved; runs compare alike only under alike loads)".into(),
            values: loads,
        })
}

/// The runs that shared their CPUs with another measuring run, when any did: such a run measured that run
/// too, not the platform alone.
fn contention_difference(runs: &[&RunDocument]) -> Option<Difference> {
    let contended: Vec<String> = runs
        .iter()
        .map(|d| {
            let with: Vec<String> = d
                .probes
                .iter()
                .filter_map(|p| p.data().process_conditions().map(|c| &c.contended))
                .flatten()
                .map(|c| format!("pid {} on CPU {}", c.pid, c.cpus))
                .collect();
            if with.is_empty() {
                "no".to_string()
            } else {
                format!("yes, with {}", with.join(", "))
            }
        })
        .collect();
    contended.iter().any(|c| c != "no").then(|| Difference {
        what: "contended (another run measured the same CPUs)".into(),
        values: contended,
    })
}

/// The probes' settings (CPUs, period, priority, duration), when they differ.
fn settings_difference(runs: &[&RunDocument]) -> Option<Difference> {
    let settings: Vec<String> = runs.iter().map(|d| settings_summary(d)).collect();
    settings
        .iter()
        .any(|s| s != &settings[0])
        .then(|| Difference {
            what: "probe settings".into(),
            values: settings,
        })
}

/// Every fingerprint field whose value differs, by its flattened name (`kernel.cmdline`), in name order;
/// `—` where a run lacks the field. Free memory and evidence change from run to run and are left out.
fn fingerprint_differences(runs: &[&RunDocument]) -> Vec<Difference> {
    let flat: Vec<Vec<(String, String)>> = runs
        .iter()
        .map(|d| {
            let mut v = Vec::new();
            if let Some(f) = &d.fingerprint {
                if let Ok(j) = serde_json::to_value(f) {
                    flatten("", &j, &mut v);
                }
            }
            v
        })
        .collect();
    let mut keys: Vec<&String> = flat.iter().flatten().map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        // Free memory changes every second: not a property of the platform.
        if k.contains("free") || k.contains("available") || k.contains("evidence") {
            continue;
        }
        let values: Vec<String> = flat
            .iter()
            .map(|f| {
                f.iter()
                    .find(|(x, _)| x == k)
                    .map_or_else(|| "—".to_string(), |(_, v)| v.clone())
            })
            .collect();
        if values.iter().any(|v| v != &values[0]) {
            out.push(Difference {
                what: k.clone(),
                values,
            });
        }
    }
    out
}

/// Every audit rule whose status differs (`audit RULE`), in rule order, each value its status and
/// evidence; `—` where a run has no finding for the rule.
fn audit_differences(runs: &[&RunDocument]) -> Vec<Difference> {
    let audits: Vec<Vec<(String, String)>> = runs
        .iter()
        .map(|d| {
            d.audit
                .as_ref()
                .map(|a| {
                    a.findings
                        .iter()
                        .map(|f| {
                            let ev = f
                                .evidence
                                .iter()
                                .map(|e| format!("{}={}", e.what, e.value))
                                .collect::<Vec<_>>()
                                .join(", ");
                            (f.id.clone(), format!("{} ({ev})", f.status.as_str()))
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let mut ids: Vec<&String> = audits.iter().flatten().map(|(k, _)| k).collect();
    ids.sort();
    ids.dedup();
    let mut out = Vec::new();
    for id in ids {
        let status: Vec<Option<&String>> = audits
            .iter()
            .map(|a| a.iter().find(|(k, _)| k == id).map(|(_, v)| v))
            .collect();
        let word = |s: &Option<&String>| s.map(|v| v.split(' ').next().unwrap_or("").to_string());
        if status.iter().any(|s| word(s) != word(&status[0])) {
            out.push(Difference {
                what: format!("audit {id}"),
                values: status
                    .iter()
                    .map(|s| s.cloned().unwrap_or_else(|| "—".into()))
                    .collect(),
            });
        }
    }
    out
}

/// A JSON value as `(dotted.path, value)` rows (objects and arrays of objects descend; `null` reads
/// "none"), for fingerprint tables and differences.
pub fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().any(|x| x.is_object()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        serde_json::Value::Null => out.push((prefix.to_string(), "none".into())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}
