//! The one-frame hand-over between the reader thread and the detector:
//! a newer frame replaces a stale one (counted as dropped), or with
//! `every_frame` the reader waits.

use super::input::{BadFrame, FrameReader};
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub(super) struct Incoming {
    pub(super) number: u64,
    pub(super) received: Instant,
    pub(super) bytes: Result<Vec<u8>, BadFrame>,
}

#[derive(Default)]
pub(super) struct Queue {
    items: VecDeque<Incoming>,
    ended: bool,
    /// Frames cut from the stream so far.
    pub(super) read: u64,
    pub(super) dropped: u64,
}

/// The hand-over between reader and detector.
pub(super) struct Slot {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Slot {
    /// Starts the reader thread: it cuts frames off `reader` into the slot
    /// until the stream ends or `stop` is set.
    pub(super) fn spawn_reader<R: Read + Send + 'static>(
        mut reader: FrameReader<R>,
        every_frame: bool,
        stop: Arc<AtomicBool>,
    ) -> Result<Arc<Slot>> {
        let slot = Arc::new(Slot { queue: Mutex::new(Queue::default()), changed: Condvar::new() });
        let ours = Arc::clone(&slot);
        std::thread::Builder::new()
            .name("stream-reader".into())
            .spawn(move || {
                let mut number = 0;
                while let Some(bytes) = reader.next_frame() {
                    ours.push(Incoming { number, received: Instant::now(), bytes }, every_frame, &stop);
                    number += 1;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                ours.end();
            })
            .context("cannot start the stream reader thread")?;
        Ok(slot)
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // A poisoned lock means the other thread panicked; the queue itself
        // is still consistent (every change is one push or pop).
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, item: Incoming, every_frame: bool, stop: &AtomicBool) {
        let mut q = self.lock();
        if every_frame {
            while q.items.len() >= 2 && !stop.load(Ordering::Relaxed) {
                q = self.changed.wait_timeout(q, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
            }
        } else if item.bytes.is_ok() {
            // Bad-frame reports stay (they are counted); stale good frames go.
            let before = q.items.len();
            q.items.retain(|i| i.bytes.is_err());
            q.dropped += (before - q.items.len()) as u64;
        }
        q.items.push_back(item);
        q.read += 1;
        self.changed.notify_all();
    }

    fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }

    /// The next frame; `None` once the stream ended (or `stop` was set) and
    /// nothing is left.
    pub(super) fn pop(&self, stop: &AtomicBool) -> Option<Incoming> {
        let mut q = self.lock();
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(item) = q.items.pop_front() {
                self.changed.notify_all();
                return Some(item);
            }
            if q.ended {
                return None;
            }
            // Wakes now and then to notice `stop` (Ctrl-C).
            q = self.changed.wait_timeout(q, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}
