//! Catalogue §6: time keeping (clocksource, TSC, time synchronisation).

use super::{Ctx, Rule, RuleOutcome};
use rtgauge_model::audit::{Evidence, Severity};

/// Where a live `adjtimex(modes=0)` result is recorded in a capture (not a kernel file).
pub const ADJTIMEX_PATH: &str = "/.rtgauge/adjtimex";

pub static RULES: [Rule; 3] = [
    Rule {
        id: "clocksource",
        section: 6,
        severity: Severity::High,
        expected: "tsc (host, VMware guest; KVM guest with invariant TSC); kvm-clock acceptable in KVM guests; never hpet/acpi_pm",
        remediation: "Fix BIOS TSC synchronisation, expose invtsc to the guest, boot with clocksource=tsc.",
        source: "[K9f][L2]",
        sampled: false,
        check: clocksource,
    },
    Rule {
        id: "tsc-reliable",
        section: 6,
        severity: Severity::Low,
        expected: "tsc=reliable (or tsc=nowatchdog, or the tsc_reliable flag) with constant_tsc and nonstop_tsc present",
        remediation: "Add tsc=reliable (or tsc=nowatchdog) to the kernel command line, only on CPUs with constant_tsc nonstop_tsc.",
        source: "[T6][T1][O1][K1]",
        sampled: false,
        check: tsc_reliable,
    },
    Rule {
        id: "time-sync",
        section: 6,
        severity: Severity::Medium,
        expected: "exactly one daemon disciplines CLOCK_REALTIME; STA_UNSYNC clear, maxerror < 16 s",
        remediation: "Run one discipline chain: ptp4l + phc2sys, or chronyd with a PHC refclock.",
        source: "[LP]",
        sampled: false,
        check: time_sync,
    },
];

fn clocksource(c: &Ctx) -> RuleOutcome {
    let cur = c.fp.clock.current.clone();
    let ev = vec![
        Evidence::new(
            "current clocksource",
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            cur.clone().unwrap_or_else(|| "absent".into()),
        ),
        Evidence::new(
            "available",
            "/sys/devices/system/clocksource/clocksource0/available_clocksource",
            c.fp.clock.available.join(" "),
        ),
        Evidence::new(
            "TSC flags",
            "/proc/cpuinfo",
            c.fp.cpu.timing_flags.join(" "),
        ),
    ];
    let platform = c.fp.virt.platform.as_str();
    match cur.as_deref() {
        None => RuleOutcome::unavailable("clocksource unreadable"),
        Some("tsc") | Some("arch_sys_counter") => RuleOutcome::pass("clocksource tsc"),
        Some("kvm-clock") if c.is_guest() => RuleOutcome::warn(format!(
            "kvm-clock in a {platform} guest: acceptable, tsc needs invariant TSC exposed"
        )),
        Some("hyperv_clocksource_tsc_page") if c.is_guest() => {
            RuleOutcome::warn("Hyper-V TSC page clocksource: acceptable in a guest")
        }
        Some(s @ ("hpet" | "acpi_pm" | "jiffies" | "refined-jiffies")) => RuleOutcome::fail(
            format!("clocksource {s}: slow reads, usually a TSC marked unstable"),
        ),
        Some(s) => RuleOutcome::warn(format!("clocksource {s}")),
    }
    .evs(ev)
}

fn tsc_reliable(c: &Ctx) -> RuleOutcome {
    let flags = &c.fp.cpu.timing_flags;
    if !flags.iter().any(|f| f == "tsc") {
        return RuleOutcome::na("no TSC (not x86 or flags unreadable)");
    }
    let has = |f: &str| flags.iter().any(|x| x == f);
    let invariant = has("constant_tsc") && has("nonstop_tsc");
    let cmd = c.cmdline.get("tsc").map(str::to_string);
    let ev = vec![
        c.cmdline_ev("tsc"),
        Evidence::new("TSC flags", "/proc/cpuinfo", flags.join(" ")),
    ];
    let declared =
        matches!(cmd.as_deref(), Some("reliable") | Some("nowatchdog")) || has("tsc_reliable");
    match (declared, invariant) {
        (true, true) => RuleOutcome::pass("TSC marked reliable and invariant"),
        (true, false) => RuleOutcome::fail(
            "TSC marked reliable without constant_tsc + nonstop_tsc: hides a real problem",
        ),
        (false, true) => RuleOutcome::warn(
            "invariant TSC, but the clocksource watchdog still runs (no tsc=reliable)",
        ),
        (false, false) => RuleOutcome::warn("TSC neither invariant nor marked reliable"),
    }
    .evs(ev)
}

/// `adjtimex(modes=0)`: read-only; returns (status bits, maxerror µs).
#[allow(unused_unsafe)]
fn live_adjtimex() -> Option<(i32, i64)> {
    // SAFETY: timex is plain old data; modes = 0 makes adjtimex a pure read.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    tx.modes = 0;
    // SAFETY: `tx` is a valid, writable timex.
    let r = unsafe { libc::adjtimex(&mut tx) };
    (r >= 0).then_some((tx.status, tx.maxerror))
}

/// `status=<int> maxerror=<µs>` as recorded in a capture.
pub fn parse_adjtimex_record(text: &str) -> Option<(i32, i64)> {
    let mut status = None;
    let mut maxerror = None;
    for w in text.split_whitespace() {
        if let Some(v) = w.strip_prefix("status=") {
            status = v.parse().ok();
        } else if let Some(v) = w.strip_prefix("maxerror=") {
            maxerror = v.parse().ok();
        }
    }
    Some((status?, maxerror?))
}

fn time_sync(c: &Ctx) -> RuleOutcome {
    let daemons: Vec<&str> = [
        "chronyd",
        "ntpd",
        "ptp4l",
        "phc2sys",
        "ts2phc",
        "systemd-timesyn",
    ]
    .into_iter()
    .filter(|d| c.running(d))
    .collect();
    let adj = if c.root.is_live() {
        let a = live_adjtimex();
        if let Some((s, m)) = a {
            c.root.record(
                ADJTIMEX_PATH,
                format!("status={s} maxerror={m}\n").as_bytes(),
            );
        }
        a
    } else {
        c.root
            .read_optional(ADJTIMEX_PATH)
            .and_then(|t| parse_adjtimex_record(&t))
    };
    const STA_UNSYNC: i32 = 0x0040;
    let mut ev = vec![Evidence::new(
        "time daemons",
        "/proc/*/comm",
        if daemons.is_empty() {
            "none".into()
        } else {
            daemons.join(" ")
        },
    )];
    if let Some((s, m)) = adj {
        ev.push(Evidence::new(
            "adjtimex status, maxerror",
            "adjtimex(modes=0)",
            format!("status=0x{s:x} maxerror={m} µs"),
        ));
    }
    let disciplined = daemons.iter().any(|d| *d != "ptp4l" && *d != "ts2phc");
    if !disciplined {
        return RuleOutcome::fail("no daemon disciplines the system clock").evs(ev);
    }
    if let Some((s, m)) = adj {
        if s & STA_UNSYNC != 0 || m >= 16_000_000 {
            return RuleOutcome::fail(
                "kernel reports the clock unsynchronised (STA_UNSYNC or maxerror >= 16 s)",
            )
            .evs(ev);
        }
    }
    if daemons.contains(&"chronyd") && daemons.contains(&"phc2sys") {
        return RuleOutcome::warn(
            "chronyd and phc2sys both run: check that only one steers CLOCK_REALTIME",
        )
        .evs(ev);
    }
    if adj.is_none() {
        return RuleOutcome::pass(format!(
            "{} running (kernel sync state not available)",
            daemons.join(" ")
        ))
        .evs(ev);
    }
    RuleOutcome::pass(format!(
        "{} keeps the clock synchronised",
        daemons.join(" ")
    ))
    .evs(ev)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Fx;
    use rtgauge_model::audit::{Status, Target};

    const T: Target = Target::BareMetalRtHost;
    const CS: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

    #[test]
    fn clocksource_by_platform() {
        assert_eq!(
            Fx::new().file(CS, "tsc\n").finding("clocksource", T).status,
            Status::Pass
        );
        assert_eq!(
            Fx::new()
                .file(CS, "hpet\n")
                .finding("clocksource", T)
                .status,
            Status::Fail
        );
        let kvm = Fx::new()
            .file(CS, "kvm-clock\n")
            .file("/sys/class/dmi/id/sys_vendor", "QEMU\n");
        assert_eq!(
            kvm.finding("clocksource", Target::RtGuest).status,
            Status::Warn
        );
        assert_eq!(
            Fx::new().finding("clocksource", T).status,
            Status::Unavailable
        );
    }

    #[test]
    fn tsc_reliable_needs_invariant_tsc() {
        let info = |flags: &str| format!("processor : 0\nflags : fpu {flags}\n");
        let fx = Fx::new()
            .file("/proc/cpuinfo", &info("tsc constant_tsc nonstop_tsc"))
            .file("/proc/cmdline", "tsc=reliable\n");
        assert_eq!(fx.finding("tsc-reliable", T).status, Status::Pass);
        let fx = Fx::new()
            .file("/proc/cpuinfo", &info("tsc"))
            .file("/proc/cmdline", "tsc=reliable\n");
        assert_eq!(fx.finding("tsc-reliable", T).status, Status::Fail);
        let fx = Fx::new().file("/proc/cpuinfo", &info("tsc constant_tsc nonstop_tsc"));
        assert_eq!(fx.finding("tsc-reliable", T).status, Status::Warn);
        assert_eq!(
            Fx::new().finding("tsc-reliable", T).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn time_sync_daemons_and_kernel_state() {
        assert_eq!(Fx::new().finding("time-sync", T).status, Status::Fail);
        let fx = Fx::new()
            .file("/proc/3/task/3/status", "Name:\tchronyd\nPPid:\t1\n")
            .file(super::ADJTIMEX_PATH, "status=8193 maxerror=1000\n");
        assert_eq!(fx.finding("time-sync", T).status, Status::Pass);
        let fx = fx.file(super::ADJTIMEX_PATH, "status=64 maxerror=16000000\n");
        assert_eq!(fx.finding("time-sync", T).status, Status::Fail);
        let fx = fx
            .file(super::ADJTIMEX_PATH, "status=0 maxerror=10\n")
            .file("/proc/4/task/4/status", "Name:\tphc2sys\nPPid:\t1\n");
        assert_eq!(fx.finding("time-sync", T).status, Status::Warn);
        assert_eq!(super::parse_adjtimex_record("garbage"), None);
    }
}
