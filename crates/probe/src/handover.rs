//! Boxes recycled between a measuring thread and the main thread, so the main thread can merge what the
//! thread has measured so far (checkpoints, time windows) while it keeps measuring.
//!
//! The thread fills its current value; at a hand-over it swaps the contents with an empty box (a few
//! words of headers move, the buffers stay where they are) and pushes the box to the main thread through
//! a wait-free ring: no allocation, no lock, no system call. The main thread takes full boxes, uses and
//! clears them, and gives them back. If no empty box is back yet, the thread simply keeps filling what it
//! has: nothing is lost, the hand-over is only later.

use rtrb::{Consumer, Producer, RingBuffer};

/// The measuring thread's end.
pub(crate) struct Filler<T> {
    full: Producer<Box<T>>,
    empty: Consumer<Box<T>>,
}

/// The main thread's end.
pub(crate) struct Emptier<T> {
    full: Consumer<Box<T>>,
    empty: Producer<Box<T>>,
}

/// Both ends, with room for `boxes` boxes (each ring has a slot for every box, so a push never fails) and
/// none in circulation yet: the measuring thread allocates its spares itself, after pinning, so that they
/// are first touched on its NUMA node, and passes them to the main thread, which puts them in with
/// [`Emptier::give_back`]. Until then hand-overs wait (nothing is lost).
pub(crate) fn channel_for<T>(boxes: usize) -> (Filler<T>, Emptier<T>) {
    let n = boxes.max(1);
    let (full_tx, full_rx) = RingBuffer::new(n);
    let (empty_tx, empty_rx) = RingBuffer::new(n);
    (
        Filler {
            full: full_tx,
            empty: empty_rx,
        },
        Emptier {
            full: full_rx,
            empty: empty_tx,
        },
    )
}

impl<T> Filler<T> {
    /// Hand the contents of `current` over, after `seal` has written its last fields, and go on with an
    /// empty box's. False, leaving `current` as it is (`seal` not called), when no empty box is back yet.
    #[inline]
    pub(crate) fn hand_over(&mut self, current: &mut T, seal: impl FnOnce(&mut T)) -> bool {
        match self.empty.pop() {
            Ok(mut b) => {
                seal(current);
                std::mem::swap(current, &mut *b);
                // Never full: the ring has a slot for every box.
                let _ = self.full.push(b);
                true
            }
            Err(_) => false,
        }
    }
}

impl<T> Emptier<T> {
    /// The next handed-over box, if any.
    pub(crate) fn take(&mut self) -> Option<Box<T>> {
        self.full.pop().ok()
    }

    /// Return a box (cleared by the caller) to the thread.
    pub(crate) fn give_back(&mut self, b: Box<T>) {
        // Never full: the ring has a slot for every box.
        let _ = self.empty.push(b);
    }
}

/// The spare boxes a measuring thread allocated once pinned, waiting for the main thread to put them in
/// circulation after a start barrier: each side locks it once, never while measuring.
pub(crate) struct Spares<T>(std::sync::Mutex<Vec<Box<T>>>);

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares(std::sync::Mutex::new(Vec::new()))
    }
}

impl<T> Spares<T> {
    /// The thread's side: keep `boxes` for the main thread.
    pub(crate) fn stock(&self, boxes: impl Iterator<Item = Box<T>>) {
        if let Ok(mut s) = self.0.lock() {
            s.extend(boxes);
        }
    }

    /// The main thread's side: put what was stocked in circulation through `to`.
    pub(crate) fn circulate(&self, to: &mut Emptier<T>) {
        if let Ok(mut s) = self.0.lock() {
            s.drain(..).for_each(|b| to.give_back(b));
        }
    }
}

/// The ring that carries one thread's timeline entries (one per `interval_ns`) to the main thread, which
/// drains it every `tick`: room for eight ticks and then some, so the thread never has to drop an entry
/// even if the main thread is starved for a while.
pub(crate) fn timeline_ring(
    tick: std::time::Duration,
    interval_ns: u64,
) -> (
    Producer<rtgauge_model::latency::TimelineEntry>,
    Consumer<rtgauge_model::latency::TimelineEntry>,
) {
    let cap = ((8 * tick.as_nanos() as u64) / interval_ns.max(1) + 64) as usize;
    RingBuffer::new(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_circulate_and_nothing_is_lost() {
        let (mut tx, mut rx) = channel_for(2);
        assert!(!tx.hand_over(&mut 0u64, |_| {}), "no spare yet");
        rx.give_back(Box::new(0u64));
        rx.give_back(Box::new(0));
        let mut current = 0u64;
        let mut collected = 0;
        for round in 1..=10u64 {
            current += round;
            if round % 3 == 0 {
                // The main thread is late: both spares are out, the thread keeps its value.
                assert!(tx.hand_over(&mut current, |_| {}));
                assert!(tx.hand_over(&mut current, |_| {}));
                assert!(!tx.hand_over(&mut current, |_| {}));
            } else {
                assert!(tx.hand_over(&mut current, |_| {}));
            }
            while let Some(mut b) = rx.take() {
                collected += *b;
                *b = 0;
                rx.give_back(b);
            }
        }
        assert_eq!(collected + current, (1..=10).sum::<u64>());
    }
}
