//! Checkpoints of a stored run while its probes measure: the run document is stored as `running` before
//! the first probe and updated every few seconds with the probe's result so far, so a run killed with
//! SIGKILL or by a reboot keeps its data up to the last checkpoint. Store errors are kept for one warning,
//! never fatal to the measurement.

use crate::{SessionObserver, Tick};
use rtgauge_model::run::{ProbeResult, RunDocument};
use rtgauge_store::RunStore;
use std::time::{Duration, Instant};

/// Stores a run's document now and then.
pub struct CheckpointWriter<'a> {
    /// The store the run is in.
    pub store: &'a mut dyn RunStore,
    id: i64,
    every: Duration,
    last: Instant,
    /// Checkpoints tried, and those the store refused.
    pub tried: u64,
    /// See `tried`.
    pub refused: u64,
    /// The first store error (later ones are counted, not kept).
    pub failed: Option<String>,
    /// Told the first error, when it happens (the run says it then, once).
    on_first: fn(&str),
}

impl<'a> CheckpointWriter<'a> {
    /// Checkpoints of run `id` every `every` (at least 1 s); `on_first` is told the first refusal.
    pub fn new(
        store: &'a mut dyn RunStore,
        id: i64,
        every: Duration,
        on_first: fn(&str),
    ) -> CheckpointWriter<'a> {
        CheckpointWriter {
            store,
            id,
            every: every.max(Duration::from_secs(1)),
            last: Instant::now(),
            tried: 0,
            refused: 0,
            failed: None,
            on_first,
        }
    }

    /// The stored run's id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Whether the checkpoint interval has passed since the last save.
    pub fn due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Save `base` plus the running probe's result so far; `now` is the document's new end time.
    pub fn checkpoint(&mut self, base: &RunDocument, probe: ProbeResult, now: String) {
        let mut d = base.clone();
        d.probes.push(probe);
        d.ended_at = now;
        self.save(&d);
    }

    /// Store `doc` as the run's document now ([`RunStore::checkpoint`]: without waiting long for a lock).
    /// A refusal is counted; the first is kept in [`CheckpointWriter::failed`] and told.
    pub fn save(&mut self, doc: &RunDocument) -> bool {
        self.last = Instant::now();
        self.tried += 1;
        match self.store.checkpoint(self.id, doc) {
            Ok(()) => true,
            Err(e) => {
                self.refused += 1;
                if self.failed.is_none() {
                    let e = rtgauge_model::error::one_line(&e);
                    (self.on_first)(&e);
                    self.failed = Some(e);
                }
                false
            }
        }
    }
}

/// Checkpoints a probe's result so far into the stored run while it measures, and shows each tick to
/// `progress` with the result of the checkpoint taken at that tick, if one was (so a progress line can use
/// its figures without building the result twice).
pub struct Checkpoints<'r, 'a> {
    /// The document before this probe (facts, earlier probes).
    pub base: &'r RunDocument,
    /// Where it goes.
    pub writer: &'r mut CheckpointWriter<'a>,
    /// The current time for the document's end, RFC 3339.
    pub now: fn() -> String,
    /// Called every tick.
    pub progress: &'r mut dyn FnMut(&Tick<'_>, Option<&ProbeResult>),
}

impl SessionObserver for Checkpoints<'_, '_> {
    fn tick(&mut self, tick: &Tick<'_>, checkpoint: Option<&mut dyn FnMut() -> ProbeResult>) {
        let due = checkpoint.filter(|_| self.writer.due());
        if let Some(checkpoint) = due {
            let p = checkpoint();
            (self.progress)(tick, Some(&p));
            self.writer.checkpoint(self.base, p, (self.now)());
        } else {
            (self.progress)(tick, None);
        }
    }
}
