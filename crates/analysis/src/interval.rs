//! The always-on counters' verdict on one interval: what rose above the CPU's typical interval, or that
//! nothing in this kernel did and where that points (the hypervisor, firmware/SMI, hardware).

use rtgauge_model::attribution::{IntervalCounters, Why};

/// One counter of an interval that rose above the CPU's typical interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Rise {
    /// "24 virtio0-input", "NET_RX", "IRQ time", "run-queue wait", ….
    pub name: String,
    /// Its value in the interval (a count, or ns for times).
    pub value: u64,
    /// Its median over the CPU's intervals, scaled to this interval's length.
    pub typical: u64,
    /// Whether `value` and `typical` are ns (times) rather than counts.
    pub time: bool,
}

/// What the counters say about one interval, against the CPU's typical interval.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalVerdict {
    /// What rose above typical (largest excess first); empty when nothing in this kernel did.
    pub risen: Vec<Rise>,
    /// Steal time the hypervisor reported for the interval, ns.
    pub steal_ns: u64,
    /// Whether the probe's run-queue wait was counted (else a thread that preempted it shows only in CPU
    /// time at tick resolution, or with `--trace`).
    pub run_delay_known: bool,
    /// SMIs the CPU took in the interval (`None`: not countable here).
    pub smis: Option<u64>,
    /// The CPU.
    pub cpu: u32,
}

/// Compare the interval of `cpu` containing `start_ns` with the CPU's typical interval (the median of
/// each counter over the run). A count rose when it is above twice its median plus 5; a time (IRQ or
/// softirq time, the probe's run-queue wait) when it exceeds its median by at least half of
/// `worst_ns`, the latency to explain — enough of the interval's time went there to matter.
pub fn explain_interval(
    why: &Why,
    cpu: u32,
    start_ns: u64,
    worst_ns: u64,
) -> Option<IntervalVerdict> {
    let c = why.interval(cpu, start_ns)?;
    let all: Vec<&IntervalCounters> = why.counters.iter().filter(|x| x.cpu == cpu).collect();
    let len = |x: &IntervalCounters| {
        if x.len_ns == 0 {
            1_000_000_000
        } else {
            x.len_ns
        }
    };
    // A counter's median over the run, scaled to this interval's length.
    let typical = |f: &dyn Fn(&IntervalCounters) -> u64| -> u64 {
        let mut rates: Vec<f64> = all.iter().map(|x| f(x) as f64 / len(x) as f64).collect();
        rates.sort_by(f64::total_cmp);
        let m = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
        (m * len(c) as f64).round() as u64
    };
    let named =
        |list: &[(String, u64)], n: &str| list.iter().find(|(m, _)| m == n).map_or(0, |(_, v)| *v);
    let mut risen = Vec::new();
    for (name, value) in c.irqs.iter().chain(&c.softirqs) {
        let in_irqs = c.irqs.iter().any(|(m, _)| m == name);
        let t = typical(&|x: &IntervalCounters| {
            named(if in_irqs { &x.irqs } else { &x.softirqs }, name)
        });
        if *value > 2 * t + 5 {
            risen.push(Rise {
                name: name.clone(),
                value: *value,
                typical: t,
                time: false,
            });
        }
    }
    if let Some(v) = c.sched_calls {
        let t = typical(&|x: &IntervalCounters| x.sched_calls.unwrap_or(0));
        if v > 2 * t + 5 {
            risen.push(Rise {
                name: "scheduler calls".into(),
                value: v,
                typical: t,
                time: false,
            });
        }
    }
    let mut time = |name: &str, v: u64, f: &dyn Fn(&IntervalCounters) -> u64| {
        let t = typical(f);
        if v > t && v - t >= worst_ns / 2 && v > 0 {
            risen.push(Rise {
                name: name.into(),
                value: v,
                typical: t,
                time: true,
            });
        }
    };
    time("IRQ time", c.irq_ns, &|x| x.irq_ns);
    time("softirq time", c.softirq_ns, &|x| x.softirq_ns);
    if let Some(d) = c.run_delay_ns {
        time("run-queue wait (another task held the CPU)", d, &|x| {
            x.run_delay_ns.unwrap_or(0)
        });
    }
    // Times first (they account for the latency directly), then counts; the largest excess first.
    risen.sort_by_key(|r| {
        (
            !r.time,
            std::cmp::Reverse(r.value.saturating_sub(r.typical)),
        )
    });
    Some(IntervalVerdict {
        risen,
        steal_ns: c.steal_ns,
        run_delay_known: c.run_delay_ns.is_some(),
        smis: c.smis,
        cpu,
    })
}

impl IntervalVerdict {
    /// The verdict in one sentence: what rose, or that nothing in this kernel did and where that points.
    /// SMIs counted in the interval name firmware, whatever else rose: an SMI stops the CPU in firmware
    /// that no kernel counter sees.
    pub fn sentence(&self) -> String {
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        let smis = match self.smis {
            Some(n) if n > 0 => format!(
                "{n} SMI{} counted on CPU {} in that interval: firmware (System Management Mode) ran on it then, \
                 not shown to be at the worst sample (docs/why.md)",
                if n == 1 { "" } else { "s" },
                self.cpu
            ),
            _ => String::new(),
        };
        if !self.risen.is_empty() {
            let parts: Vec<String> = self
                .risen
                .iter()
                .take(4)
                .map(|r| {
                    if r.time {
                        format!("{} {} (typically {})", r.name, ms(r.value), ms(r.typical))
                    } else {
                        format!("{} {} (typically {})", r.name, r.value, r.typical)
                    }
                })
                .collect();
            let steal = if self.steal_ns > 0 {
                format!("; steal {}", ms(self.steal_ns))
            } else {
                String::new()
            };
            let smis = if smis.is_empty() {
                smis
            } else {
                format!("; {smis}")
            };
            return format!(
                "rose above the typical interval: {}{steal}{smis}",
                parts.join(", ")
            );
        }
        let looked = if self.run_delay_known {
            "interrupts, softirqs, IRQ time and the probe's run-queue wait"
        } else {
            "interrupts, softirqs and IRQ time; this kernel keeps no per-task run-queue wait, so a thread that held the CPU briefly would not show"
        };
        let counted = match self.smis {
            Some(0) => "no SMI counted, ",
            Some(_) => {
                return format!(
                    "nothing in this kernel rose above its typical interval ({looked}); {smis}; steal {}; --trace breaks a stall down",
                    ms(self.steal_ns)
                )
            }
            None => "",
        };
        let outside = if self.steal_ns > 0 {
            format!(
                "{counted}steal {} in that interval: the stall points outside this kernel — the hypervisor (it reported steal), firmware/SMI or hardware",
                ms(self.steal_ns)
            )
        } else {
            format!("{counted}no steal reported: the stall points outside this kernel — firmware/SMI, hardware, or a hypervisor that reports no steal")
        };
        format!("nothing in this kernel rose above its typical interval ({looked}); {outside}; --trace breaks a stall down")
    }
}

impl IntervalVerdict {
    /// The verdict in a few words, for the verdict block: the first two counters that rose, or that
    /// nothing in this kernel did and where that points.
    pub fn brief(&self) -> String {
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        let smis = match self.smis {
            Some(n) if n > 0 => Some(format!(
                "{n} SMI{} counted then (firmware)",
                if n == 1 { "" } else { "s" }
            )),
            _ => None,
        };
        if !self.risen.is_empty() {
            let parts: Vec<String> = self
                .risen
                .iter()
                .take(2)
                .map(|r| match r.time {
                    true => format!("{} {}", r.name, ms(r.value)),
                    false => format!("{} {} (typically {})", r.name, r.value, r.typical),
                })
                .collect();
            let mut s = format!("rose above the typical interval: {}", parts.join(", "));
            if self.steal_ns > 0 {
                s.push_str(&format!("; steal {}", ms(self.steal_ns)));
            }
            if let Some(m) = smis {
                s.push_str(&format!("; {m}"));
            }
            return s;
        }
        let outside = match smis {
            Some(m) => m,
            None if self.steal_ns > 0 => format!(
                "steal {} then: the hypervisor, firmware/SMI or hardware",
                ms(self.steal_ns)
            ),
            None => {
                "no steal reported: firmware/SMI, hardware or a hypervisor that reports none".into()
            }
        };
        format!("nothing in this kernel rose; {outside}")
    }

    /// What explains the interval, without its figures: the names of what rose, and whether steal, SMIs
    /// and the run-queue wait were seen. CPUs whose worst intervals are of one class share a sentence.
    pub fn class(&self) -> String {
        let mut names: Vec<&str> = self.risen.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        format!(
            "{}|steal {}|smis {:?}|run delay {}",
            names.join(","),
            self.steal_ns > 0,
            self.smis.map(|n| n > 0),
            self.run_delay_known
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(
        start_s: u64,
        loc: u64,
        net_rx: u64,
        steal_ms: u64,
        run_delay_ms: Option<u64>,
    ) -> IntervalCounters {
        IntervalCounters {
            cpu: 1,
            start_ns: start_s * 1_000_000_000,
            len_ns: 1_000_000_000,
            irqs: vec![("LOC".into(), loc)],
            softirqs: vec![("NET_RX".into(), net_rx)],
            steal_ns: steal_ms * 1_000_000,
            run_delay_ns: run_delay_ms.map(|m| m * 1_000_000),
            ..IntervalCounters::default()
        }
    }

    #[test]
    fn a_worst_interval_like_the_others_points_outside_the_kernel() {
        // Ten ordinary seconds; the worst (at 4 s) has the usual tick and a little more, and 6 ms of steal.
        let mut counters: Vec<IntervalCounters> =
            (0..10).map(|s| iv(s, 250, 2, 0, Some(1))).collect();
        counters[4] = iv(4, 271, 3, 6, Some(1));
        let why = Why {
            counters,
            ..Why::default()
        };
        let v = explain_interval(&why, 1, 4_000_000_000, 6_890_000).unwrap();
        assert!(v.risen.is_empty(), "{:?}", v.risen);
        let s = v.sentence();
        assert!(
            s.starts_with("nothing in this kernel rose above its typical interval"),
            "{s}"
        );
        assert!(
            s.contains("steal 6.0 ms")
                && s.contains("outside this kernel")
                && s.contains("hypervisor"),
            "{s}"
        );
        assert!(s.contains("--trace"), "{s}");
    }

    #[test]
    fn smis_in_the_interval_name_firmware_and_a_counted_zero_is_said() {
        let mut counters: Vec<IntervalCounters> = (0..10)
            .map(|s| IntervalCounters {
                smis: Some(0),
                ..iv(s, 250, 2, 0, Some(1))
            })
            .collect();
        counters[3].smis = Some(2);
        let why = Why {
            counters,
            ..Why::default()
        };
        let s = explain_interval(&why, 1, 3_000_000_000, 400_000)
            .unwrap()
            .sentence();
        assert!(
            s.starts_with("nothing in this kernel rose")
                && s.contains("2 SMIs counted on CPU 1 in that interval: firmware"),
            "{s}"
        );
        let s = explain_interval(&why, 1, 4_000_000_000, 400_000)
            .unwrap()
            .sentence();
        assert!(s.contains("no SMI counted, no steal reported"), "{s}");
        // Where SMIs are not countable nothing is said of them.
        let mut why = why;
        why.counters.iter_mut().for_each(|c| c.smis = None);
        let s = explain_interval(&why, 1, 3_000_000_000, 400_000)
            .unwrap()
            .sentence();
        assert!(!s.contains("SMI counted") && !s.contains("SMIs on"), "{s}");
    }

    #[test]
    fn what_rose_is_named_against_its_typical_value() {
        let mut counters: Vec<IntervalCounters> =
            (0..10).map(|s| iv(s, 250, 2, 0, Some(1))).collect();
        // A network storm and a thread that held the CPU for 5 ms.
        counters[7] = iv(7, 260, 500, 0, Some(6));
        let why = Why {
            counters,
            ..Why::default()
        };
        let v = explain_interval(&why, 1, 7_000_000_000, 5_000_000).unwrap();
        let names: Vec<&str> = v.risen.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["run-queue wait (another task held the CPU)", "NET_RX"],
            "{v:?}"
        );
        let s = v.sentence();
        assert!(
            s.starts_with("rose above the typical interval: run-queue wait (another task held the CPU) 6.0 ms (typically 1.0 ms), NET_RX 500 (typically 2)"),
            "{s}"
        );
        assert!(!s.contains("outside this kernel"), "{s}");
        // No steal and no per-task wait: the sentence says what could not be seen.
        let quiet: Vec<IntervalCounters> = (0..3).map(|s| iv(s, 250, 2, 0, None)).collect();
        let why = Why {
            counters: quiet,
            ..Why::default()
        };
        let s = explain_interval(&why, 1, 0, 1_000_000).unwrap().sentence();
        assert!(
            s.contains("no per-task run-queue wait") && s.contains("no steal reported"),
            "{s}"
        );
        assert!(
            explain_interval(&why, 2, 0, 1).is_none(),
            "no counters for that CPU"
        );
    }
}
