//! `--store-every`: the monitor's segments of one store period merged into one cyclic result, stored as a
//! run (a month of monitoring then reports and compares like a run).

use super::SEGMENT;
use rtgauge_flags::monitor::MonitorArgs;
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::{CyclicConfig, CyclicResult};
use rtgauge_model::run::RunStatus;
use rtgauge_probe::recorder::WindowRecorder;
use std::time::Instant;

/// The segments of one store period, merged into one cyclic result.
pub struct StorePeriod {
    pub started: Instant,
    started_at: String,
    before: rtgauge_host::accounting::AccountingSample,
    merged: Option<CyclicResult>,
    windows: Vec<WindowRecorder>,
    offset_ns: u64,
    /// Each thread's timeline bucket length, grown as the period's timeline is thinned.
    spans: Vec<u64>,
}

impl StorePeriod {
    pub fn new(config: &CyclicConfig) -> StorePeriod {
        StorePeriod {
            started: Instant::now(),
            started_at: crate::output::now_rfc3339(),
            before: rtgauge_host::accounting::read_sample(&HostRoot::live()),
            merged: None,
            windows: (0..config.threads)
                .map(|_| WindowRecorder::new(SEGMENT.as_nanos() as u64))
                .collect(),
            offset_ns: 0,
            spans: Vec::new(),
        }
    }

    pub fn absorb(&mut self, seg: CyclicResult) {
        for (w, t) in self.windows.iter_mut().zip(&seg.threads) {
            if let Ok(h) = t.latency.hdr.decode() {
                w.push(&h, 1);
            }
        }
        let offset = self.offset_ns;
        self.offset_ns += seg.elapsed_ns;
        match &mut self.merged {
            None => {
                let mut seg = seg;
                seg.spikes.clear();
                self.merged = Some(seg);
            }
            Some(m) => {
                let first = m.config.timeline_interval_ns.max(1);
                self.spans.resize(m.threads.len(), first);
                for ((a, b), span) in m.threads.iter_mut().zip(seg.threads).zip(&mut self.spans) {
                    a.absorb(b, offset, span);
                }
                m.elapsed_ns += seg.elapsed_ns;
                m.stop_reason = seg.stop_reason;
            }
        }
    }

    /// The period as a run document; `None` before the first segment ended. A snapshot is complete also
    /// when SIGTERM cut its period short: it holds every sample of the time it covers, and stopping is how a
    /// monitor ends.
    pub fn document(&mut self, a: &MonitorArgs) -> Option<rtgauge_model::run::RunDocument> {
        let root = HostRoot::live();
        let mut r = self.merged.take()?;
        for (t, w) in r.threads.iter_mut().zip(&self.windows) {
            t.windows = w.windows();
        }
        r.config.duration = Some(rtgauge_model::Nanos(r.elapsed_ns));
        r.accounting = Some(rtgauge_host::accounting::delta(
            &self.before,
            &rtgauge_host::accounting::read_sample(&root),
        ));
        let mut doc = crate::output::document(
            self.started_at.clone(),
            rtgauge_host::system::read_system_info(&root),
            vec![r.into()],
            RunStatus::Complete,
            Vec::new(),
        );
        doc.label = a.label.clone();
        doc.tags.insert("source".into(), "monitor".into());
        Some(doc)
    }
}
