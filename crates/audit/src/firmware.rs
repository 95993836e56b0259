//! Firmware noise: System Management Interrupts seen during the audit's sample (`MSR_SMI_COUNT` of every
//! online CPU, read at both samples; `rtgauge_host::smi`). An SMI stops the CPU in firmware for 10–500 µs on
//! servers (BIOS power/thermal management, USB legacy emulation, firmware updaters), and no kernel tuning
//! removes it: the fix is in the BIOS.

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_host::smi::{SmiPlatform, SmiReader};
use rtgauge_host::HostRoot;
use rtgauge_model::audit::{Evidence, Severity};
use rtgauge_model::CpuSet;
use std::collections::BTreeMap;

pub static RULES: [Rule; 1] = [Rule {
    id: "smi-during-sample",
    section: 7,
    severity: Severity::High,
    expected: "no System Management Interrupt on the audited CPUs between the two samples",
    remediation: "In the BIOS: a performance/low-latency system profile (SpeedStep/P-states, C-states and \
        Energy Efficient Turbo disabled, as the VMware relay guide's host settings), USB legacy support \
        off, vendor power/thermal monitoring off; no firmware updater running (systemctl disable --now \
        fwupd-refresh.timer); on a guest, count on the host: a guest sees only its virtual firmware's SMIs.",
    source: "[O1][seed]",
    sampled: true,
    check: smis,
}];

/// Where the counts of one sample are recorded in a capture ("CPU COUNT" lines, or "not countable: why").
pub const SMI_FILE: &str = "/.rtgauge/smi-count";

/// The SMI counts of every online CPU now (live), or as recorded in a captured tree (`path`: [`SMI_FILE`],
/// or its second-sample twin); recorded when live.
pub fn sample(root: &HostRoot, online: &CpuSet, path: &str) -> Result<BTreeMap<u32, u64>, String> {
    if !root.is_live() {
        let text = root
            .read_optional(path)
            .ok_or_else(|| "a tree captured without SMI counts".to_string())?;
        if let Some(why) = text.strip_prefix("not countable: ") {
            return Err(why.trim().to_string());
        }
        return Ok(text
            .lines()
            .filter_map(|l| {
                let (c, n) = l.split_once(' ')?;
                Some((c.parse().ok()?, n.trim().parse().ok()?))
            })
            .collect());
    }
    let counts = SmiReader::open(root, online.iter()).map(|r| r.opened);
    let text = match &counts {
        Ok(m) => m.iter().map(|(c, n)| format!("{c} {n}\n")).collect(),
        Err(why) => format!("not countable: {why}\n"),
    };
    root.record(path, text.as_bytes());
    counts
}

fn smis(c: &Ctx) -> RuleOutcome {
    let Some(s) = &c.samples else {
        return RuleOutcome::na(super::NOT_SAMPLED);
    };
    let (a, b) = match (&s.smi_first, &s.smi_second) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(why), _) | (_, Err(why)) => {
            return RuleOutcome::unavailable(format!("SMIs not countable: {why}"))
        }
    };
    let cpus = c.rt_or_online();
    let rose: Vec<String> = cpus
        .iter()
        .filter_map(|cpu| {
            let d = rtgauge_host::smi::smi_delta(*b.get(cpu)?, *a.get(cpu)?);
            (d > 0).then(|| format!("CPU {cpu}: {d} SMI{}", if d == 1 { "" } else { "s" }))
        })
        .collect();
    let guest = matches!(
        rtgauge_host::smi::read_platform(c.root),
        SmiPlatform::IntelGuest
    );
    let ev = vec![
        c.iso_evidence(),
        s.interval_evidence(),
        Evidence::new(
            "SMIs between the samples",
            "/dev/cpu/N/msr (MSR_SMI_COUNT, 0x34)",
            if rose.is_empty() {
                "none".into()
            } else {
                rose.join("; ")
            },
        ),
    ];
    let scope = if guest {
        " (this guest's virtual firmware only: count the host's on the host)"
    } else {
        ""
    };
    if rose.is_empty() {
        RuleOutcome::pass(format!("no SMI on the audited CPUs{scope}")).evs(ev)
    } else {
        RuleOutcome::fail(format!(
            "SMIs on {} audited CPU(s) in {:.1} s{scope}: firmware took them",
            rose.len(),
            s.interval.as_secs_f64()
        ))
        .evs(ev)
    }
}
