//! The one producer thread of every host feed: training's on-the-fly and
//! precomputed modes, and `grin store bench`'s feed row, so the bench
//! times the thread training takes. A source fills host batches in a fixed
//! order; the thread runs up to `prefetch` batches ahead through a bounded
//! queue (buffers absorb variance; they cannot raise the average rate), and
//! consumed batches come back through [`Producer::recycle`] to be refilled
//! (no allocation per step once the queue is warm).

use grin_features::HostBatch;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Anything that fills host batches in a fixed order on the producer thread.
pub(crate) trait BatchSource: Send + 'static {
    type Error: Send + 'static;
    /// An empty batch of this source's layout, the buffer a first fill uses.
    fn empty_batch(&self) -> HostBatch;
    /// Replaces `batch`'s records with the next batch's.
    fn fill(&mut self, batch: &mut HostBatch) -> Result<(), Self::Error>;
}

/// One batch off the queue, and how long the source took to fill it.
pub(crate) struct Produced {
    pub(crate) batch: HostBatch,
    pub(crate) took: Duration,
}

/// A source's batches, made ahead on a thread of their own. The first error
/// is delivered in order and ends the thread; after it, [`Producer::next`]
/// returns `None`.
pub(crate) struct Producer<E> {
    queue: Option<Receiver<Result<Produced, E>>>,
    recycle: Sender<HostBatch>,
    thread: Option<JoinHandle<()>>,
}

impl<E: Send + 'static> Producer<E> {
    /// Starts `source` on a thread called `name`, `prefetch` batches ahead (at least 1).
    pub(crate) fn start<S: BatchSource<Error = E>>(
        mut source: S,
        prefetch: usize,
        name: &str,
    ) -> std::io::Result<Self> {
        let (tx, queue) = mpsc::sync_channel(prefetch.max(1));
        let (recycle, recycled) = mpsc::channel::<HostBatch>();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || loop {
            let mut batch = recycled.try_recv().unwrap_or_else(|_| source.empty_batch());
            let started = Instant::now();
            let item = source.fill(&mut batch).map(|()| Produced { batch, took: started.elapsed() });
            let failed = item.is_err();
            // The consumer hung up (finished or failed), or the source did: stop.
            if tx.send(item).is_err() || failed {
                return;
            }
        })?;
        Ok(Producer { queue: Some(queue), recycle, thread: Some(thread) })
    }

    /// Gives a consumed batch's buffers back to be refilled.
    pub(crate) fn recycle(&self, batch: HostBatch) {
        // A stopped thread frees the buffers instead of reusing them.
        let _ = self.recycle.send(batch);
    }
}

impl<E> Iterator for Producer<E> {
    type Item = Result<Produced, E>;

    /// The next batch, waiting for it; `None` once the thread has stopped.
    fn next(&mut self) -> Option<Result<Produced, E>> {
        self.queue.as_ref()?.recv().ok()
    }
}

impl<E> Drop for Producer<E> {
    fn drop(&mut self) {
        // Closing the queue first fails a send the thread is blocked in.
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its fills and fails at `fail_at`; each batch's `len` is its number.
    struct Counting {
        next: usize,
        fail_at: usize,
        fresh: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl BatchSource for Counting {
        type Error = String;
        fn empty_batch(&self) -> HostBatch {
            self.fresh.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            HostBatch::with_capacity(1, 2, 2, 1)
        }
        fn fill(&mut self, batch: &mut HostBatch) -> Result<(), String> {
            if self.next == self.fail_at {
                return Err(format!("batch {} is bad", self.next));
            }
            batch.clear();
            batch.len = self.next;
            self.next += 1;
            Ok(())
        }
    }

    #[test]
    fn batches_come_in_order_recycled_and_the_error_ends_them() {
        let fresh = std::sync::Arc::default();
        let source = Counting { next: 0, fail_at: 50, fresh: std::sync::Arc::clone(&fresh) };
        let mut producer = Producer::start(source, 2, "test-producer").unwrap();
        for k in 0..50 {
            let produced = producer.next().expect("running").expect("a good batch");
            assert_eq!(produced.batch.len, k);
            producer.recycle(produced.batch);
        }
        let error = producer.next().expect("the error is delivered").err().expect("an error");
        assert_eq!(error, "batch 50 is bad");
        assert!(producer.next().is_none(), "nothing after the error");
        // The queue (2) and one in the thread's hands, plus one a recycle may not reach in time.
        let made = fresh.load(std::sync::atomic::Ordering::Relaxed);
        assert!(made <= 5, "{made} buffers for 50 batches: recycled ones are refilled");
    }

    #[test]
    fn dropping_a_producer_blocked_on_a_full_queue_returns() {
        let source = Counting { next: 0, fail_at: usize::MAX, fresh: std::sync::Arc::default() };
        let producer = Producer::start(source, 1, "test-producer").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(producer); // joins the thread: a hang here fails the test by timeout
    }
}
