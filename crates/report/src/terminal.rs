//! Terminal renderings of a stored run: the header (`runs show`, `report`), each probe's section (its kind's
//! `KindView`: the timer probe's table in the vPAC guide's layout, …), the accounting, the why, the
//! verdicts; and the comparison as a table.

use crate::text::TextOptions;
use rtgauge_analysis::kind::ProbeData;
use rtgauge_model::run::RunDocument;

/// `runs show`, `report`: conditions, results, warnings (the verdict block, [`render_verdict`], goes last,
/// after what the verb adds).
pub fn render_show(id: i64, doc: &RunDocument, opts: TextOptions) -> String {
    let mut s = format!(
        "run {id}: {} — profile {}, label {}, {} → {}\n",
        doc.status.as_str(),
        doc.profile.as_deref().unwrap_or("-"),
        doc.label.as_deref().unwrap_or("-"),
        doc.started_at,
        doc.ended_at
    );
    if !doc.tags.is_empty() {
        let t: Vec<String> = doc.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!("tags: {}\n", t.join(", ")));
    }
    if let Some(r) = &doc.repeat {
        s.push_str(&format!(
            "repeat: {} of {} (run --repeat; group {})\n",
            r.index, r.count, r.group
        ));
    }
    if doc.system.release.is_empty() && doc.imported_from.is_some() {
        // rt-tests text says nothing of the machine: no kernel to call PREEMPT_RT or not.
        s.push_str("host: unknown (the imported file does not name it)\n");
    } else {
        s.push_str(&format!(
            "host: {} {} {} ({}), CPUs {}, clocksource {}\n",
            doc.system.nodename,
            doc.system.sysname,
            doc.system.release,
            if doc.system.realtime {
                "PREEMPT_RT"
            } else {
                "not PREEMPT_RT"
            },
            doc.system.cpus_online,
            doc.system.clocksource.as_deref().unwrap_or("?")
        ));
    }
    if let Some(src) = &doc.imported_from {
        s.push_str(&format!(
            "imported from {} ({}, resolution {} ns)\n",
            src.file, src.format, src.resolution_ns
        ));
    }
    if let Some(a) = &doc.audit {
        let m = &a.summary;
        s.push_str(&format!(
            "audit: {} pass, {} warn, {} fail, {} n/a, {} unavailable\n",
            m.pass, m.warn, m.fail, m.not_applicable, m.unavailable
        ));
    }
    s.push_str(&render_summary(doc, opts));
    for w in &doc.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// The verdict block as the terminal's last lines (after a blank line): see [`crate::verdict`].
pub fn render_verdict(doc: &RunDocument, opts: TextOptions) -> String {
    format!(
        "\n{}",
        crate::verdict::text(&crate::verdict::block(doc), opts)
    )
}

/// The per-CPU tables (timer latency in the layout of the vPAC guide's result table, OS noise), what the
/// system did meanwhile, and why the spikes; the verdicts are the verdict block's ([`render_verdict`]).
pub fn render_summary(doc: &RunDocument, opts: TextOptions) -> String {
    let mut s = String::new();
    use std::fmt::Write as _;
    let facts = doc.facts();
    s.push_str(&render_unmet(doc));
    for p in &doc.probes {
        s.push_str(&crate::kind::view(p).terminal_section(&facts, opts));
        if let Some(a) = p.data().accounting() {
            s.push_str(&render_accounting(a, opts));
        }
        if let Some(l) = p.data().load() {
            let _ = writeln!(s, "load achieved: {}", l.summary());
        }
        s.push_str(&crate::spikes::render_why(p.data(), opts));
    }
    s
}

/// The run's unmet conditions, one line each, before any figure: `CONDITIONS NOT MET` when they bear on the
/// figures (a normal-priority thread is not what was asked to be measured), else a note.
pub fn render_unmet(doc: &RunDocument) -> String {
    if doc.unmet.is_empty() {
        return String::new();
    }
    let head = if rtgauge_model::conditions::degrades(&doc.unmet) {
        "CONDITIONS NOT MET: these figures are not of the run that was asked for"
    } else {
        "conditions not met (the figures stand; their explanation is incomplete)"
    };
    let mut s = format!("{head}:\n");
    for u in &doc.unmet {
        s.push_str(&format!("  {}\n", u.line()));
    }
    s
}

/// What the system did during a probe: the tool's own cost and, per CPU (`-v`; else their sums and
/// ranges in one line), steal, interrupt time and counts.
fn render_accounting(a: &rtgauge_model::accounting::Accounting, opts: TextOptions) -> String {
    use std::fmt::Write as _;
    let secs = (a.wall_ns as f64 / 1e9).max(1e-9);
    let mut s = format!(
        "  during it: rtgauge used {:.2} s user + {:.2} s system CPU ({} voluntary, {} involuntary switches); {:.0} context switches/s system-wide\n",
        a.tool_user_ns as f64 / 1e9,
        a.tool_system_ns as f64 / 1e9,
        a.tool_voluntary_switches,
        a.tool_involuntary_switches,
        a.context_switches as f64 / secs
    );
    if !opts.verbose {
        if a.cpus.is_empty() {
            return s;
        }
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        let steal: u64 = a.cpus.iter().map(|c| c.steal_ns).sum();
        let stolen: Vec<_> = a.cpus.iter().filter(|c| c.steal_ns > 0).collect();
        let steal = match stolen.iter().max_by_key(|c| c.steal_ns) {
            None => "no steal".to_string(),
            Some(_) if stolen.len() <= 3 => {
                let each: Vec<String> = stolen
                    .iter()
                    .map(|c| format!("CPU {} {}", c.cpu, ms(c.steal_ns)))
                    .collect();
                format!("steal {} ({})", ms(steal), each.join(", "))
            }
            Some(c) => format!(
                "steal {} on {} CPUs (at most {} on CPU {})",
                ms(steal),
                stolen.len(),
                ms(c.steal_ns),
                c.cpu
            ),
        };
        let range = |f: &dyn Fn(&rtgauge_model::accounting::CpuAccounting) -> u64| {
            let lo = a.cpus.iter().map(f).min().unwrap_or(0) as f64 / secs;
            let hi = a.cpus.iter().map(f).max().unwrap_or(0) as f64 / secs;
            match format!("{lo:.0}") == format!("{hi:.0}") {
                true => format!("{lo:.0}"),
                false => format!("{lo:.0}–{hi:.0}"),
            }
        };
        let _ = writeln!(
            s,
            "  {steal}, IRQ time {}, softirq time {}; per CPU {} interrupts/s, {} softirqs/s",
            ms(a.cpus.iter().map(|c| c.irq_ns).sum()),
            ms(a.cpus.iter().map(|c| c.softirq_ns).sum()),
            range(&|c| c.interrupts),
            range(&|c| c.softirqs),
        );
        return s;
    }
    let _ = writeln!(
        s,
        "  {:>4} {:>9} {:>8} {:>11} {:>13} {:>11}",
        "CPU", "steal ms", "irq ms", "softirq ms", "interrupts/s", "softirqs/s"
    );
    for c in &a.cpus {
        let _ = writeln!(
            s,
            "  {:>4} {:>9.1} {:>8.1} {:>11.1} {:>13.0} {:>11.0}",
            c.cpu,
            c.steal_ns as f64 / 1e6,
            c.irq_ns as f64 / 1e6,
            c.softirq_ns as f64 / 1e6,
            c.interrupts as f64 / secs,
            c.softirqs as f64 / secs
        );
    }
    s
}

/// The comparison as a table: one row per measure, values per run, ratio to the baseline with its 95 %
/// interval, verdict; then the differences in platform and tuning.
pub fn render_compare(
    ids: &[i64],
    runs: &[&RunDocument],
    comparison: &rtgauge_analysis::compare::Comparison,
) -> String {
    use std::fmt::Write as _;
    let names: Vec<String> = ids
        .iter()
        .zip(runs)
        .enumerate()
        .map(|(i, (id, d))| crate::html::column_name(i, *id, d, comparison, false))
        .collect();
    let dur = comparison.durations_ns.iter().copied().max().unwrap_or(0);
    let notes = crate::html::no_interval_notes(comparison);
    let mut s = String::new();
    for n in crate::html::degraded_notes(&names, runs) {
        let _ = writeln!(s, "CONDITIONS NOT MET: run {n}");
    }
    let _ = write!(
        s,
        "baseline: run {}; margin ±{:.0} %; 95 % intervals\n\n",
        names[0],
        comparison.margin * 100.0
    );
    let w = comparison
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    let mut header = format!("{:<w$}", "measure");
    for n in &names {
        let _ = write!(header, " {n:>14}");
    }
    for n in names.iter().skip(1) {
        let _ = write!(header, "  {:<26} verdict", format!("{n} / baseline"));
    }
    let _ = writeln!(s, "{header}");
    for r in &comparison.rows {
        let _ = write!(s, "{:<w$}", r.label);
        for (i, v) in r.values.iter().enumerate() {
            let t = v.map_or("-".to_string(), |x| {
                crate::markup::fmt_measure(x, r.bounds(i), r.unit)
            });
            let _ = write!(s, " {t:>14}");
        }
        for v in &r.versus {
            match v {
                Some(v) => {
                    let _ = write!(
                        s,
                        "  {:<26} {}",
                        crate::html::fmt_ratio(v),
                        crate::html::verdict_cell(r, &v.verdict, dur, &notes)
                    );
                }
                None => {
                    let _ = write!(s, "  {:<26} -", "-");
                }
            }
        }
        let _ = writeln!(s);
    }
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(s, "[{}] {n}", i + 1);
    }
    if let Some(n) = rtgauge_analysis::compare::single_run_note(ids, comparison) {
        let _ = writeln!(s, "note: {n}");
    }
    if !comparison.differences.is_empty() {
        let _ = writeln!(s, "\ndifferences in platform and tuning:");
        for d in &comparison.differences {
            let vals: Vec<String> = names
                .iter()
                .zip(&d.values)
                .map(|(n, v)| format!("{n}: {v}"))
                .collect();
            let _ = writeln!(s, "  {}: {}", d.what, vals.join("; "));
        }
    }
    let why = crate::spikes::compare_sentences(&names, runs);
    if !why.is_empty() {
        let _ = writeln!(s, "\nwhy the spikes:");
        for w in why {
            let _ = writeln!(s, "  {w}");
        }
    }
    s
}
