//! Progress on stderr for the slow stages (training, scoring scenes and
//! photos, the balance check): an indicatif bar on a terminal, a line every
//! few seconds otherwise (a log, `nohup`), nothing under `--quiet`. One
//! switch for the process, set once from the command line.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Seconds between progress lines when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// `--quiet`: no bar and no progress line from here on.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub(crate) fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A note on stderr about a slow stage starting, unless `--quiet`.
pub(crate) fn note(line: &str) {
    if !quiet() {
        eprintln!("{line}");
    }
}

/// One stage's progress: `len` units, named by `label`.
pub(crate) struct Progress {
    bar: ProgressBar,
    label: String,
    started: Instant,
    /// When the last line was printed (`None` on a terminal, or quiet).
    last_line: Option<Instant>,
}

impl Progress {
    pub(crate) fn new(len: usize, label: impl Into<String>) -> Progress {
        let label = label.into();
        let terminal = std::io::stderr().is_terminal();
        let bar = if quiet() || !terminal { ProgressBar::hidden() } else { ProgressBar::new(len as u64) };
        bar.set_length(len as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed} < {eta})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label.clone());
        let now = Instant::now();
        Progress { bar, label, started: now, last_line: (!quiet() && !terminal).then_some(now) }
    }

    /// A stage that shows nothing, whatever `--quiet` says (a benchmark's
    /// inner runs).
    pub(crate) fn hidden(label: impl Into<String>) -> Progress {
        Progress { bar: ProgressBar::hidden(), label: label.into(), started: Instant::now(), last_line: None }
    }

    /// The bar itself, for a message beside the count.
    pub(crate) fn bar(&self) -> &ProgressBar {
        &self.bar
    }

    pub(crate) fn set_position(&mut self, position: usize) {
        self.bar.set_position(position as u64);
        self.line_if_due();
    }

    pub(crate) fn inc(&mut self, n: usize) {
        self.bar.inc(n as u64);
        self.line_if_due();
    }

    fn line_if_due(&mut self) {
        let Some(last) = self.last_line else { return };
        if last.elapsed() < LINE_EVERY {
            return;
        }
        self.last_line = Some(Instant::now());
        eprintln!("{}", self.line());
    }

    /// `label: pos/len (pct%), elapsed, ETA, message`.
    fn line(&self) -> String {
        let (pos, len) = (self.bar.position(), self.bar.length().unwrap_or(0));
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = if pos > 0 { elapsed * (len.saturating_sub(pos)) as f64 / pos as f64 } else { f64::NAN };
        let message = self.bar.message();
        let message = if message.is_empty() { String::new() } else { format!(", {message}") };
        format!(
            "{}: {pos}/{len} ({:.0}%), {elapsed:.0} s, ETA {eta:.0} s{message}",
            self.label,
            100.0 * pos as f64 / len.max(1) as f64
        )
    }

    pub(crate) fn finish(self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_gives_count_share_and_eta() {
        let mut p = Progress::new(200, "scoring caltech photos");
        p.inc(50);
        p.bar().set_message("AP 0.9");
        let line = p.line();
        assert!(line.starts_with("scoring caltech photos: 50/200 (25%), "), "{line}");
        assert!(line.contains("ETA ") && line.ends_with(", AP 0.9"), "{line}");
    }
}
