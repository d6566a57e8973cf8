//! `grin-detect --stream`: the robot's loop. Frames come off a byte stream,
//! the newest one is detected, faces are tracked, and a JSON line goes out
//! per frame (plus one per smile event).
//!
//! Three threads: a reader that only cuts bytes into frames ([`input`]),
//! the detector, and a writer for the lines ([`output`]), so a reader of
//! stdout that stops reading cannot keep Ctrl-C from ending the loop. Between them sits a one-frame slot: when the reader has a
//! newer frame before the detector is free, the older one is dropped and
//! counted, so latency never builds up behind a slow detector. With
//! `every_frame` the reader waits instead (files, reproducible runs).

mod input;
mod lines;
mod output;
mod slot;
mod track;

use crate::bench::{self, Latency};
use crate::runner::Runner;
use anyhow::Result;
use grin_image::ImageBound;
use lines::{event_lines, frame_line};
use output::{Delivery, Output};
use serde::Serialize;
use slot::Slot;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use track::Tracker;

/// The frame cutter and decoder on their own: what `fuzz/` drives with any bytes.
pub use input::{decode as decode_frame, BadFrame, FrameReader};
pub use input::{encode_frame, InputFormat};
pub(crate) use track::TrackerConfig;

#[derive(Debug, Clone)]
pub(crate) struct StreamOptions {
    pub format: InputFormat,
    /// Frame size on the stream: required for raw formats; for MJPEG, frames
    /// of another size are refused when it is given.
    pub size: Option<(usize, usize)>,
    /// The size bound of a frame: raw frame sizes and JPEG headers past it
    /// are refused.
    pub bound: ImageBound,
    /// Process every frame, in order, making the reader wait: for files
    /// and reproducible runs. Off, stale frames are dropped.
    pub every_frame: bool,
    /// Print only the smile event lines.
    pub events_only: bool,
    /// Leave the wall-clock fields (`t_ms`, `latency_ms`) out of the lines,
    /// so two runs (or two CPUs) print identical output.
    pub no_clock: bool,
    pub tracker: TrackerConfig,
}

/// What the stream did, printed when it ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Summary {
    /// Frames cut from the stream, bad ones included.
    pub frames: u64,
    pub processed: u64,
    /// Good frames replaced by a newer one before the detector got to them.
    pub dropped: u64,
    /// Bad frames by kind (`truncated`, `broken_jpeg`, `wrong_size`, ...).
    pub bad: BTreeMap<&'static str, u64>,
    pub wall_s: f64,
    /// Frames over the time spent on them (decode, detect, track, print).
    pub processing_fps: f64,
    /// Frames processed over the wall time: what the robot gets.
    pub delivered_fps: f64,
    /// Frame read to its line written.
    pub latency: Option<Latency>,
    pub tracks: u64,
    pub smile_events: u64,
    /// Ended by Ctrl-C or SIGTERM rather than by the end of the stream.
    pub interrupted: bool,
    /// Lines given up when the stream was interrupted while stdout was not
    /// being read (a full pipe).
    pub unwritten_lines: u64,
    /// Frames read but neither processed, dropped nor bad when the stream
    /// was interrupted (round 18: counted nowhere).
    pub unprocessed: u64,
    /// What to do about a stream that gave no usable frame (`--input-format`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Summary {
    pub(crate) fn bad_total(&self) -> u64 {
        self.bad.values().sum()
    }

    pub(crate) fn to_text(&self) -> String {
        let bad: Vec<String> = self.bad.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let latency = self
            .latency
            .as_ref()
            .map(|l| format!("; latency median {:.1} ms, p95 {:.1} ms", l.median_ms, l.p95_ms))
            .unwrap_or_default();
        let hint = self.hint.as_ref().map(|h| format!("\nhint: {h}")).unwrap_or_default();
        let ended = match (self.interrupted, self.unwritten_lines) {
            (false, _) => String::new(),
            (true, 0) => "; interrupted".into(),
            (true, n) => format!("; interrupted, {n} lines not written (stdout was not being read)"),
        };
        let ended = match (self.unprocessed, ended.is_empty()) {
            (0, _) => ended,
            (n, true) => format!("; {n} frames read but not processed"),
            (n, false) => format!("{ended}, {n} frames read but not processed"),
        };
        format!(
            "stream: {} frames, {} processed, {} dropped, {} bad{}; {:.1} frames/s processing, {:.1} delivered{latency}; {} tracks, {} smile events{ended}{hint}",
            self.frames,
            self.processed,
            self.dropped,
            self.bad_total(),
            if bad.is_empty() { String::new() } else { format!(" ({})", bad.join(", ")) },
            self.processing_fps,
            self.delivered_fps,
            self.tracks,
            self.smile_events
        )
    }
}

/// What to do about a stream that gave nothing usable, so that a wrong
/// flag or a camera command that never started is not just "0 frames":
/// - no bytes at all: the source wrote nothing (a camera command that
///   failed before its first frame, an empty file);
/// - read as MJPEG, no JPEG frame: raw video without `--input-format`;
/// - read as raw frames that are JPEGs: MJPEG given a raw `--input-format`.
fn hint(format: InputFormat, summary: &Summary, jpeg_in_raw: bool) -> Option<String> {
    if summary.frames == 0 && summary.bad_total() == 0 {
        // Stopped by Ctrl-C before the source wrote: the summary says
        // "interrupted", and the source may yet have been fine.
        return (!summary.interrupted).then(|| "the stream held no data: not a byte was read from it".into());
    }
    let no_start = summary.bad.contains_key(BadFrame::NoJpegStart(0).kind());
    // Bytes that would not cut into JPEGs; frames too large or of the wrong
    // size were JPEGs, and say so in their own warnings.
    let not_jpeg = [
        BadFrame::StrayBytes(0),
        BadFrame::BrokenJpeg(String::new()),
        BadFrame::Undecodable(String::new()),
        BadFrame::Truncated { got: 0, expected: None },
    ]
    .iter()
    .any(|b| summary.bad.contains_key(b.kind()));
    let nothing_decoded = summary.processed == 0 && summary.dropped == 0 && not_jpeg;
    if format == InputFormat::Mjpeg && (no_start || nothing_decoded) {
        return Some(
            "no usable JPEG frame was found; if the source sends raw frames, give --input-format \
             gray8|rgb24|yuv420 and --input-size WxH"
                .into(),
        );
    }
    jpeg_in_raw.then(|| JPEG_IN_RAW.into())
}

/// Said once when a raw frame starts as a JPEG file does.
const JPEG_IN_RAW: &str = "frames start with a JPEG start marker (FF D8 FF): the source sends MJPEG? \
     Read it with --input-format mjpeg";

/// A raw frame whose first bytes are a JPEG's start marker and the first
/// byte of the next marker: a camera's pixels begin so about once in 16
/// million frames, an MJPEG stream always.
fn starts_as_jpeg(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// Hands `lines` to the writer; `Stopped` (the rest counted as given up)
/// when `stop` came while stdout was not being read.
fn send_lines(out: &mut Output, lines: Vec<String>, stop: &AtomicBool) -> Result<Delivery> {
    let total = lines.len() as u64;
    for (sent, line) in lines.into_iter().enumerate() {
        if out.send(line, stop)? == Delivery::Stopped {
            out.give_up(total - sent as u64 - 1);
            return Ok(Delivery::Stopped);
        }
    }
    Ok(Delivery::Done)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// Runs the loop until the stream ends or `stop` is set; bad frames are
/// reported on stderr as `warning: frame N: ...` and counted. Errors are
/// only for output that cannot be written. The lines go to `out` from a
/// thread of its own: when `stop` is set while `out` is not being read, the
/// loop ends within milliseconds and the summary counts the lines given up
/// (that thread is left blocked; the process ending ends it).
pub(crate) fn run<R: Read + Send + 'static, W: Write + Send + 'static>(
    input: R,
    detector: &Runner,
    options: &StreamOptions,
    out: W,
    stop: Arc<AtomicBool>,
) -> Result<Summary> {
    let mut out = Output::spawn(out)?;
    let reader = FrameReader::new(input, options.format, options.size, options.bound).map_err(anyhow::Error::msg)?;
    let slot = Slot::spawn_reader(reader, options.every_frame, Arc::clone(&stop))?;
    let start = Instant::now();

    let clock = |t: Instant| (!options.no_clock).then(|| ms(t - start));
    let mut tracker = Tracker::new(options.tracker);
    let mut summary = Summary::default();
    let mut latencies = Vec::new();
    let mut busy = Duration::ZERO;
    let mut last_frame = 0;
    let mut jpeg_in_raw = false;
    while let Some(item) = slot.pop(&stop) {
        let began = Instant::now();
        last_frame = item.number;
        let channels = detector.spec().channels;
        if options.format != InputFormat::Mjpeg && !jpeg_in_raw && item.bytes.as_ref().is_ok_and(|b| starts_as_jpeg(b))
        {
            jpeg_in_raw = true;
            eprintln!("warning: frame {}: {JPEG_IN_RAW}", item.number);
        }
        let image = item.bytes.and_then(|b| input::decode(b, options.format, options.size, channels, options.bound));
        let image = match image {
            Ok(image) => image,
            Err(bad) => {
                eprintln!("warning: frame {}: {bad}", item.number);
                *summary.bad.entry(bad.kind()).or_default() += 1;
                continue;
            }
        };
        let frame = match detector.frame(&image) {
            Ok(frame) => frame,
            Err(e) => {
                // Read, but past the memory left for its picture: told and
                // counted as a frame too large, as one past --max-pixels is.
                let bad = BadFrame::TooLarge(format!("{}x{} frame: {e}", image.width(), image.height()));
                eprintln!("warning: frame {}: {bad}", item.number);
                *summary.bad.entry(bad.kind()).or_default() += 1;
                continue;
            }
        };
        let detections = detector.detect(frame);
        let (faces, events) = tracker.update(&detections);
        summary.smile_events += events.len() as u64;
        let mut lines = Vec::with_capacity(1 + events.len());
        if !options.events_only {
            let line = frame_line(
                item.number,
                clock(item.received),
                (!options.no_clock).then(|| ms(item.received.elapsed())),
                (image.width(), image.height()),
                &faces,
            );
            lines.push(serde_json::to_string(&line)?);
        }
        lines.extend(event_lines(&events, item.number, clock(item.received))?);
        let delivery = send_lines(&mut out, lines, &stop)?;
        latencies.push(item.received.elapsed());
        busy += began.elapsed();
        summary.processed += 1;
        if delivery == Delivery::Stopped {
            break;
        }
    }
    let ending = tracker.finish();
    summary.smile_events += ending.len() as u64;
    let ending = event_lines(&ending, last_frame, clock(Instant::now()))?;
    if send_lines(&mut out, ending, &stop)? == Delivery::Done {
        out.finish(&stop)?;
    }
    summary.interrupted = stop.load(Ordering::Relaxed);
    summary.unwritten_lines = out.undelivered();

    (summary.frames, summary.dropped) = {
        let q = slot.lock();
        (q.read, q.dropped)
    };
    summary.unprocessed = summary.frames.saturating_sub(summary.processed + summary.dropped + summary.bad_total());
    summary.tracks = tracker.tracks_started();
    summary.wall_s = start.elapsed().as_secs_f64();
    summary.processing_fps = if busy.is_zero() { 0.0 } else { summary.processed as f64 / busy.as_secs_f64() };
    summary.delivered_fps = if summary.wall_s > 0.0 { summary.processed as f64 / summary.wall_s } else { 0.0 };
    summary.latency = bench::summarize(&latencies);
    summary.hint = hint(options.format, &summary, jpeg_in_raw);
    Ok(summary)
}

#[cfg(test)]
mod summary_tests {
    use super::Summary;

    /// Issue 90, round 18: frames read when a stream was stopped were
    /// counted as neither processed, dropped nor bad.
    #[test]
    fn frames_read_but_not_processed_are_said() {
        let stopped = Summary { frames: 8, processed: 5, unprocessed: 3, interrupted: true, ..Summary::default() };
        assert!(stopped.to_text().contains("8 frames, 5 processed, 0 dropped, 0 bad"));
        assert!(stopped.to_text().contains("; interrupted, 3 frames read but not processed"), "{}", stopped.to_text());
        let whole = Summary { frames: 8, processed: 8, ..Summary::default() };
        assert!(!whole.to_text().contains("not processed"));
    }
}
