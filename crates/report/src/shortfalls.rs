//! Settings that were requested but not achieved, as sentences: one warning each, printed by the verb and
//! stored with the run. A measurement never stops for these; it says what it did not get. Each kind says
//! its own (`KindView::shortfalls`: a timeline reader starved, a NUMA cell on the wrong node, …); here are
//! the dispatch and the sentences every kind shares, of the process (another run on the same CPUs, the main
//! thread not placed) and of a measuring thread (page faults). The conditions a run asked for and did not
//! get (a real-time policy, a CPU, mlockall, cpu_dma_latency) are not warnings but the run's unmet
//! conditions (`rtgauge_analysis::conditions`), said once per cause with that cause, before the figures.

use rtgauge_model::rt::{ProcessConditions, ThreadDisturbance};
use rtgauge_model::run::ProbeResult;

/// Every shortfall of one probe's result: its kind's, and a load whose figures did not all come back.
pub fn of_probe(p: &ProbeResult) -> Vec<String> {
    let view = crate::kind::view(p);
    let mut w = view.shortfalls();
    if let Some(l) = view.data().load() {
        if let Some(lost) = &l.lost {
            w.push(format!(
                "load {}: {lost}: what the load achieved is not known, and it may not have covered the run",
                l.spec
            ));
        }
    }
    w
}

/// One warning per process-wide shortfall that is not an unmet condition: another run measuring the same
/// CPUs, the main thread not placed.
pub fn process(c: &ProcessConditions) -> Vec<String> {
    let mut w = Vec::new();
    for other in &c.contended {
        w.push(format!(
            "CPU {} measured at the same time by pid {} ({}): the two runs disturbed each other",
            other.cpus,
            other.pid,
            if other.command.is_empty() {
                "?"
            } else {
                &other.command
            }
        ));
    }
    if let Some(e) = &c.main_affinity.error {
        w.push(format!("main thread affinity not achieved: {e}"));
    }
    w
}

/// A warning when measurement thread `who` took page faults while it measured: the probe touches its
/// memory before the first sample, so a fault is a disturbance (a fork of the probe, memory not locked,
/// NUMA balancing), and its handling was counted as latency. (Preemptions are the platform's to show, not
/// a shortfall of the run.)
pub fn disturbance(who: &str, d: Option<&ThreadDisturbance>) -> Option<String> {
    let d = d?;
    let faults = d.minor_faults + d.major_faults;
    (faults > 0).then(|| {
        format!(
            "{who}: {faults} page faults while it measured ({} major); their handling counts as latency",
            d.major_faults
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::rt::Setting;

    fn setting<T: Clone>(requested: T, achieved: T, error: Option<&str>) -> Setting<T> {
        Setting {
            requested,
            achieved,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn conditions_are_not_warnings_here_and_a_contender_reads_as_a_sentence() {
        let mut c = ProcessConditions {
            mlockall: setting(true, false, Some("mlockall: Cannot allocate memory")),
            cpu_dma_latency_us: setting(Some(0), None, Some("Permission denied (os error 13)")),
            cpu_dma_latency_before_us: None,
            main_affinity: setting(None, None, None),
            contended: Vec::new(),
        };
        assert!(process(&c).is_empty(), "{:?}", process(&c));
        c.contended.push(rtgauge_model::rt::Contender {
            pid: 7,
            command: "cyclictest".into(),
            cpus: rtgauge_model::CpuSet::parse("1").unwrap(),
        });
        assert_eq!(
            process(&c),
            ["CPU 1 measured at the same time by pid 7 (cyclictest): the two runs disturbed each other"]
        );
    }

    #[test]
    fn faults_while_measuring_are_a_shortfall_and_preemptions_are_not() {
        let d = |minor, major, inv| ThreadDisturbance {
            minor_faults: minor,
            major_faults: major,
            involuntary_switches: inv,
        };
        assert_eq!(
            disturbance("thread 0", Some(&d(19_727, 1, 0))).as_deref(),
            Some("thread 0: 19728 page faults while it measured (1 major); their handling counts as latency")
        );
        assert_eq!(disturbance("thread 0", Some(&d(0, 0, 40))), None);
        assert_eq!(disturbance("thread 0", None), None, "an imported result");
    }
}
