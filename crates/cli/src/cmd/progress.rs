//! A measuring stage's progress on stderr: a bar on a terminal, else one line every 10 s, from the timer
//! probe's live figures or the noise probe's latest checkpoint.

use rtgauge_model::run::ProbeResult;
use rtgauge_model::units::us;
use rtgauge_session::Tick;
use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

/// One line every 10 s (or a bar on a terminal) of progress for a probe.
pub struct Progress {
    what: String,
    bar: Option<indicatif::ProgressBar>,
    total: Duration,
    last_line: Instant,
    /// The noise probe's figures from its last checkpoint (it has no live figures).
    last: String,
}

impl Progress {
    /// Progress of `what` over `total`.
    pub fn new(what: &str, total: Duration) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(total.as_secs().max(1));
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {elapsed_precise}/{duration_precise} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(what.to_string());
            b
        });
        Progress {
            what: what.to_string(),
            bar,
            total,
            last_line: Instant::now(),
            last: String::new(),
        }
    }

    /// One probe tick: the timer probe's live figures, or the figures of the checkpoint taken now.
    pub fn tick(&mut self, tick: &Tick<'_>, checkpoint: Option<&ProbeResult>) {
        if !tick.threads.is_empty() {
            self.cyclic(tick.elapsed, tick.threads);
            return;
        }
        if let Some(line) = checkpoint.and_then(|p| rtgauge_report::kind::view(p).progress_line()) {
            self.last = line;
        }
        self.update(tick.elapsed, self.last.clone());
    }

    /// Timer-probe progress from the threads' live figures.
    fn cyclic(&mut self, elapsed: Duration, live: &[rtgauge_model::latency::LiveThread]) {
        let min = live
            .iter()
            .filter(|t| t.cycles > 0)
            .map(|t| t.min_ns)
            .min()
            .unwrap_or(0);
        let max = live.iter().map(|t| t.max_ns).max().unwrap_or(0);
        let (sum, n) = live
            .iter()
            .fold((0u64, 0u64), |(s, n), t| (s + t.sum_ns, n + t.cycles));
        let missed: u64 = live.iter().map(|t| t.missed).sum();
        let msg = format!(
            "min {:.1} avg {:.1} max {:.1} µs, missed {missed}",
            us(min),
            us(sum.checked_div(n).unwrap_or(0)),
            us(max)
        );
        self.update(elapsed, msg);
    }

    fn update(&mut self, elapsed: Duration, msg: String) {
        match &self.bar {
            Some(b) => {
                b.set_position(elapsed.as_secs());
                b.set_message(msg);
            }
            None if self.last_line.elapsed() >= Duration::from_secs(10) => {
                self.last_line = Instant::now();
                eprintln!(
                    "{} {:>6.0}/{:.0} s: {msg}",
                    self.what,
                    elapsed.as_secs_f64(),
                    self.total.as_secs_f64()
                );
            }
            None => {}
        }
    }

    /// Clear the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
