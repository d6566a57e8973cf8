//! The stream's lines go out on a thread of their own. A reader that stops
//! reading (a robot's supervisor stopping its pipeline) fills the pipe, and
//! a write to a full pipe blocks until someone reads: on the loop's thread
//! that kept Ctrl-C and SIGTERM from ending the stream at all. Here the
//! loop hands each line over through a bounded queue, and when `stop` is
//! set while the queue is full it gives up on the lines still waiting.

use anyhow::{anyhow, Context, Result};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Lines the loop may run ahead of the writer: a few frames' worth, so a
/// momentarily slow reader costs nothing and a stalled one is noticed.
const QUEUE_LINES: usize = 64;

/// How often a loop waiting on a full queue looks at `stop`: well under the
/// second within which Ctrl-C must end the stream.
const POLL: Duration = Duration::from_millis(5);

/// Whether every line was handed over (or written), or `stop` came first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    Done,
    Stopped,
}

pub(crate) struct Output {
    lines: Option<SyncSender<String>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    /// Lines handed to the writer.
    queued: u64,
    /// Lines the writer has flushed to `out`.
    delivered: Arc<AtomicU64>,
    /// Lines never handed over: `stop` came while the queue was full.
    given_up: u64,
}

impl Output {
    /// Starts the writer thread on `out`.
    pub(crate) fn spawn<W: Write + Send + 'static>(out: W) -> Result<Output> {
        let (lines, queue) = sync_channel::<String>(QUEUE_LINES);
        let delivered = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&delivered);
        let writer = std::thread::Builder::new()
            .name("stream-output".into())
            .spawn(move || write_all(out, queue, &counter))
            .context("cannot start the stream output thread")?;
        Ok(Output { lines: Some(lines), writer: Some(writer), queued: 0, delivered, given_up: 0 })
    }

    /// Lines sent (or given up) that never reached `out`.
    pub(crate) fn undelivered(&self) -> u64 {
        self.given_up + self.queued - self.delivered.load(Ordering::Relaxed)
    }

    /// Counts `n` lines the caller gives up on without sending.
    pub(crate) fn give_up(&mut self, n: u64) {
        self.given_up += n;
    }

    /// Queues one line, waiting while the queue is full until `stop` is set.
    /// An error when the writer has failed (stdout closed).
    pub(crate) fn send(&mut self, line: String, stop: &AtomicBool) -> Result<Delivery> {
        let lines = self.lines.as_ref().expect("send after finish");
        let mut line = line;
        loop {
            match lines.try_send(line) {
                Ok(()) => {
                    self.queued += 1;
                    return Ok(Delivery::Done);
                }
                Err(TrySendError::Full(back)) => {
                    if stop.load(Ordering::Relaxed) {
                        self.given_up += 1;
                        return Ok(Delivery::Stopped);
                    }
                    line = back;
                    std::thread::sleep(POLL);
                }
                Err(TrySendError::Disconnected(_)) => return Err(self.writer_error()),
            }
        }
    }

    /// Waits until every queued line is written, or until `stop` is set
    /// while the writer is still blocked (then its lines are given up).
    pub(crate) fn finish(&mut self, stop: &AtomicBool) -> Result<Delivery> {
        // Dropping the sender ends the writer's loop once the queue is empty.
        self.lines = None;
        let Some(writer) = self.writer.take() else { return Ok(Delivery::Done) };
        while !writer.is_finished() {
            if stop.load(Ordering::Relaxed) {
                // Left blocked in its write: the process ends without it.
                return Ok(Delivery::Stopped);
            }
            std::thread::sleep(POLL);
        }
        match writer.join() {
            Ok(result) => result.context("cannot write to stdout").map(|()| Delivery::Done),
            Err(_) => Err(anyhow!("the stream output thread panicked")),
        }
    }

    fn writer_error(&mut self) -> anyhow::Error {
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => anyhow!(e).context("cannot write to stdout"),
            _ => anyhow!("cannot write to stdout: the output thread ended"),
        }
    }
}

/// The writer thread: each line as it comes, flushed whenever the queue is
/// empty (one flush per frame, not per line, when lines come together).
fn write_all<W: Write>(out: W, queue: Receiver<String>, delivered: &AtomicU64) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    while let Ok(line) = queue.recv() {
        writeln!(out, "{line}")?;
        let mut lines = 1;
        while let Ok(more) = queue.try_recv() {
            writeln!(out, "{more}")?;
            lines += 1;
        }
        out.flush()?;
        delivered.fetch_add(lines, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer whose writes block until `open` is set, as a full pipe does.
    struct Stalled {
        open: Arc<AtomicBool>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Stalled {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            while !self.open.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.written.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_arrive_in_order_and_finish_waits_for_them() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = Stalled { open: Arc::new(AtomicBool::new(true)), written: Arc::clone(&written) };
        let mut output = Output::spawn(sink).unwrap();
        let stop = AtomicBool::new(false);
        for i in 0..1000 {
            assert_eq!(output.send(format!("line {i}"), &stop).unwrap(), Delivery::Done);
        }
        assert_eq!(output.finish(&stop).unwrap(), Delivery::Done);
        assert_eq!(output.undelivered(), 0);
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        let expected: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(text, expected);
    }

    #[test]
    fn a_stalled_writer_does_not_hold_up_stop() {
        let open = Arc::new(AtomicBool::new(false));
        let sink = Stalled { open: Arc::clone(&open), written: Arc::new(Mutex::new(Vec::new())) };
        let mut output = Output::spawn(sink).unwrap();
        // The writer takes what is queued and blocks writing it; the queue
        // fills behind it, and then a send with `stop` set gives up at once.
        let stop = AtomicBool::new(true);
        let sent =
            (0..10 * QUEUE_LINES).take_while(|i| output.send(format!("line {i}"), &stop).unwrap() == Delivery::Done);
        let sent = sent.count();
        assert!(sent < 10 * QUEUE_LINES, "the queue never filled");
        // Every line sent is still waiting, and the refused one is counted too.
        assert_eq!(output.undelivered(), sent as u64 + 1);
        assert_eq!(output.finish(&stop).unwrap(), Delivery::Stopped);
        open.store(true, Ordering::Relaxed);
    }

    #[test]
    fn a_failed_writer_is_an_error_naming_stdout() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut output = Output::spawn(Closed).unwrap();
        let stop = AtomicBool::new(false);
        let mut error = None;
        for i in 0..10_000 {
            if let Err(e) = output.send(format!("line {i}"), &stop) {
                error = Some(e);
                break;
            }
        }
        let error = match error {
            Some(e) => e,
            None => output.finish(&stop).unwrap_err(),
        };
        assert!(format!("{error:#}").contains("cannot write to stdout"), "{error:#}");
    }
}
