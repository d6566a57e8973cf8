//! Frames out of a byte stream: fixed-size raw frames (what `rpicam-vid
//! --codec yuv420`, `libcamera-vid` and `ffmpeg -f rawvideo` write) or
//! concatenated JPEGs (MJPEG, what USB cameras and `ffmpeg -f mjpeg` write).
//!
//! The reader only cuts bytes into frames; decoding happens later, on the
//! frames that are not dropped, so a stale frame costs a copy and nothing
//! more. A frame the reader cannot cut cleanly comes back as a
//! [`BadFrame`] and the stream goes on from the next good frame.

mod codec;

pub use codec::{decode, encode_frame};
use grin_image::ImageBound;
use std::io::{BufRead, BufReader, ErrorKind, Read};

/// Layout of the frames on the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// One byte of luma per pixel.
    Gray8,
    /// Three bytes (R, G, B) per pixel.
    Rgb24,
    /// Planar I420: the luma plane, then quarter-size U and V planes.
    Yuv420,
    /// Concatenated JPEG files.
    Mjpeg,
}

impl InputFormat {
    /// Bytes of one raw frame; `None` for MJPEG, whose frames vary.
    pub(crate) fn frame_bytes(self, width: usize, height: usize) -> Option<usize> {
        match self {
            InputFormat::Gray8 => Some(width * height),
            InputFormat::Rgb24 => Some(width * height * 3),
            InputFormat::Yuv420 => Some(width * height + 2 * width.div_ceil(2) * height.div_ceil(2)),
            InputFormat::Mjpeg => None,
        }
    }
}

/// Why a frame was refused. The stream goes on after each of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadFrame {
    /// The stream ended part way through a frame.
    Truncated { got: usize, expected: Option<usize> },
    /// Bytes between frames that are not a JPEG start.
    StrayBytes(usize),
    /// A JPEG whose markers are broken, or that never ends before the next one starts.
    BrokenJpeg(String),
    /// A frame that decodes but not to the declared size.
    WrongSize { width: u32, height: u32, expected: (usize, usize) },
    /// A frame that does not decode.
    Undecodable(String),
    /// A JPEG frame whose header claims more pixels than `--max-pixels`.
    TooLarge(String),
    /// This many bytes in a row without a JPEG start: a raw stream read as
    /// MJPEG, most likely. Reported once a stream.
    NoJpegStart(usize),
    /// Reading the stream failed; it ends here.
    ReadError(String),
}

impl BadFrame {
    /// Short name used to count bad frames by kind in the summary.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            BadFrame::Truncated { .. } => "truncated",
            BadFrame::StrayBytes(_) => "stray_bytes",
            BadFrame::BrokenJpeg(_) => "broken_jpeg",
            BadFrame::WrongSize { .. } => "wrong_size",
            BadFrame::Undecodable(_) => "undecodable",
            BadFrame::TooLarge(_) => "too_large",
            BadFrame::NoJpegStart(_) => "no_jpeg_start",
            BadFrame::ReadError(_) => "read_error",
        }
    }
}

impl std::fmt::Display for BadFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadFrame::Truncated { got, expected: Some(n) } => {
                write!(f, "truncated frame: the stream ended after {got} of {n} bytes")
            }
            BadFrame::Truncated { got, expected: None } => {
                write!(f, "truncated JPEG: the stream ended after {got} bytes, before its end marker")
            }
            BadFrame::StrayBytes(n) => write!(f, "{n} stray bytes outside any JPEG frame"),
            BadFrame::BrokenJpeg(why) => write!(f, "broken JPEG: {why}"),
            BadFrame::WrongSize { width, height, expected: (w, h) } => {
                write!(f, "wrong frame size {width}x{height}, expected {w}x{h} (--input-size)")
            }
            BadFrame::Undecodable(why) => write!(f, "cannot decode frame: {why}"),
            BadFrame::TooLarge(why) => write!(f, "frame too large: {why}"),
            BadFrame::NoJpegStart(n) => write!(
                f,
                "no JPEG start marker (FF D8) in {n} bytes: not an MJPEG stream? Raw frames need \
                 --input-format gray8|rgb24|yuv420 and --input-size WxH"
            ),
            BadFrame::ReadError(why) => write!(f, "cannot read the stream: {why}; it ends here"),
        }
    }
}

/// Cuts a byte stream into frames.
pub struct FrameReader<R: Read> {
    bytes: BufReader<R>,
    format: InputFormat,
    size: Option<(usize, usize)>,
    /// A JPEG start already consumed while ending the previous frame.
    pending_start: bool,
    /// The last frame was refused part way: the bytes up to the next start
    /// are its rest, not stray bytes of their own.
    resync: bool,
    /// [`BadFrame::NoJpegStart`] was reported (once a stream).
    warned_no_start: bool,
    /// A read failed: reported as the last bad frame, then the stream ends.
    read_error: Option<String>,
    ended: bool,
}

/// Where the search for the next JPEG start stopped.
enum Seek {
    /// A start, after this many other bytes.
    Found(usize),
    /// [`NO_START_BYTES`] bytes without one (the search goes on at the next call).
    NotYet(usize),
    /// The end of the stream, after this many bytes without a start.
    End(usize),
}

/// Bytes without a JPEG start after which a stream is reported as not
/// MJPEG: far more than any camera frame holds (a raw 640x480 grey frame
/// is 300 KiB, a JPEG frame of it 20-60 KiB), so a real MJPEG stream never
/// gets there, and a raw stream read by mistake is told in a third of a
/// second at camera rates, not at its end.
pub(crate) const NO_START_BYTES: usize = 1 << 20;

/// Frames larger than this are not a camera's: the MJPEG cutter gives up on
/// one and looks for the next start rather than buffer without end.
const MAX_JPEG_BYTES: usize = 32 << 20;

impl<R: Read> FrameReader<R> {
    /// `size` is required for raw formats (it fixes the frame's byte count)
    /// and optional for MJPEG (frames of another size are then refused).
    /// A size with a zero side, or past `bound`, is refused: raw frames of
    /// it would be empty, or a buffer of gigabytes.
    pub fn new(
        reader: R,
        format: InputFormat,
        size: Option<(usize, usize)>,
        bound: ImageBound,
    ) -> Result<Self, String> {
        if format != InputFormat::Mjpeg && size.is_none() {
            let name = clap::ValueEnum::to_possible_value(&format).map(|v| v.get_name().to_owned()).unwrap_or_default();
            return Err(format!("--input-format {name}: give --input-size WxH (raw frames carry no size)"));
        }
        if let Some((w, h)) = size {
            if w == 0 || h == 0 {
                return Err(format!("--input-size {w}x{h}: a frame has at least one pixel a side"));
            }
            // Not clamped: a message quoting 4294967295 for 4294967616 (round 9).
            let (Ok(sw), Ok(sh)) = (u32::try_from(w), u32::try_from(h)) else {
                return Err(format!("--input-size {w}x{h}: a side is at most {} px", u32::MAX));
            };
            bound.check(sw, sh).map_err(|e| format!("--input-size: a frame of {e}"))?;
        }
        if let (InputFormat::Yuv420, Some((w, h))) = (format, size) {
            if w % 2 == 1 || h % 2 == 1 {
                return Err(format!("--input-size {w}x{h}: yuv420 frames have even sides"));
            }
        }
        Ok(FrameReader {
            bytes: BufReader::with_capacity(1 << 16, reader),
            format,
            size,
            pending_start: false,
            resync: false,
            warned_no_start: false,
            read_error: None,
            ended: false,
        })
    }

    /// The next frame's bytes, a bad frame, or `None` at the end of the
    /// stream. A read error is the last bad frame.
    pub fn next_frame(&mut self) -> Option<Result<Vec<u8>, BadFrame>> {
        let next = if self.ended {
            None
        } else {
            match self.format.frame_bytes(self.size.map_or(0, |s| s.0), self.size.map_or(0, |s| s.1)) {
                Some(n) => self.next_raw(n),
                None => self.next_jpeg(),
            }
        };
        match next {
            None => {
                self.ended = true;
                self.read_error.take().map(|e| Err(BadFrame::ReadError(e)))
            }
            frame => frame,
        }
    }

    fn failed(&mut self, e: std::io::Error) {
        self.read_error = Some(e.to_string());
        self.ended = true;
    }

    fn next_raw(&mut self, n: usize) -> Option<Result<Vec<u8>, BadFrame>> {
        // Reserved, not assumed: a frame within --max-pixels can still be
        // more than the process may have (65535x65535 rgb24 is 12.9 GB), and
        // a failed allocation aborted (issue 90, round 6).
        let mut frame = Vec::new();
        if frame.try_reserve_exact(n).is_err() {
            let why = format!("a frame of {n} bytes is more memory than this process may take (lower --input-size)");
            self.failed(std::io::Error::new(ErrorKind::OutOfMemory, why));
            return None;
        }
        frame.resize(n, 0);
        let mut got = 0;
        while got < n {
            match self.bytes.read(&mut frame[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.failed(e);
                    break;
                }
            }
        }
        match got {
            0 => None,
            g if g == n => Some(Ok(frame)),
            g => Some(Err(BadFrame::Truncated { got: g, expected: Some(n) })),
        }
    }

    fn byte(&mut self) -> Option<u8> {
        loop {
            match self.bytes.fill_buf() {
                Ok([]) => return None,
                Ok(buf) => {
                    let b = buf[0];
                    self.bytes.consume(1);
                    return Some(b);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.failed(e);
                    return None;
                }
            }
        }
    }

    /// Skips to the next SOI (FF D8), counting the bytes skipped.
    fn seek_start(&mut self) -> Seek {
        if std::mem::take(&mut self.pending_start) {
            return Seek::Found(0);
        }
        let mut skipped = 0usize;
        let mut prev_ff = false;
        loop {
            let Some(b) = self.byte() else { return Seek::End(skipped) };
            if prev_ff && b == 0xD8 {
                return Seek::Found(skipped - 1);
            }
            prev_ff = b == 0xFF;
            skipped += 1;
            if skipped >= NO_START_BYTES && !self.warned_no_start && !prev_ff {
                self.warned_no_start = true;
                return Seek::NotYet(skipped);
            }
        }
    }

    /// Walks the JPEG's segments (lengths for headers, byte-stuffed entropy
    /// data after each SOS) to its EOI: a thumbnail inside an EXIF segment
    /// cannot end the frame early, and a frame cut short by the next SOI is
    /// caught.
    fn next_jpeg(&mut self) -> Option<Result<Vec<u8>, BadFrame>> {
        let frame = self.cut_jpeg()?;
        // A broken frame's rest is skipped with it, unless the break was the
        // next frame's start.
        self.resync = matches!(frame, Err(BadFrame::BrokenJpeg(_))) && !self.pending_start;
        Some(frame)
    }

    fn cut_jpeg(&mut self) -> Option<Result<Vec<u8>, BadFrame>> {
        let skipped = match self.seek_start() {
            Seek::Found(n) => n,
            Seek::NotYet(n) => return Some(Err(BadFrame::NoJpegStart(n))),
            // Bytes after the last frame are stray too (unless they are the
            // rest of a broken one): a stream of nothing but them is not
            // "0 frames, 0 bad".
            Seek::End(n) if n > 0 && !self.resync => return Some(Err(BadFrame::StrayBytes(n))),
            Seek::End(_) => return None,
        };
        if skipped > 0 && !self.resync {
            // The start just found is kept for the next call.
            self.pending_start = true;
            return Some(Err(BadFrame::StrayBytes(skipped)));
        }
        let mut out = vec![0xFF, 0xD8];
        let truncated = |out: &Vec<u8>| Some(Err(BadFrame::Truncated { got: out.len(), expected: None }));
        // A marker code the scan data ended at, not yet handled.
        let mut pending: Option<u8> = None;
        loop {
            if out.len() > MAX_JPEG_BYTES {
                return Some(Err(BadFrame::BrokenJpeg(format!("no end marker within {MAX_JPEG_BYTES} bytes"))));
            }
            let code = match pending.take() {
                Some(code) => code,
                None => {
                    // A marker: FF, optional FF fill bytes, then the code.
                    let Some(b) = self.byte() else { return truncated(&out) };
                    if b != 0xFF {
                        return Some(Err(BadFrame::BrokenJpeg(format!("byte {b:#04x} where a marker belongs"))));
                    }
                    let Some(code) = self.marker_code() else { return truncated(&out) };
                    code
                }
            };
            out.extend([0xFF, code]);
            match code {
                0xD9 => return Some(Ok(out)),
                0xD8 => {
                    self.pending_start = true;
                    return Some(Err(BadFrame::BrokenJpeg("a new frame starts before this one ends".into())));
                }
                0x01 | 0xD0..=0xD7 => continue,
                0x00 => return Some(Err(BadFrame::BrokenJpeg("marker code 0x00 outside scan data".into()))),
                _ => {}
            }
            let (Some(hi), Some(lo)) = (self.byte(), self.byte()) else { return truncated(&out) };
            let len = u16::from_be_bytes([hi, lo]) as usize;
            if len < 2 {
                return Some(Err(BadFrame::BrokenJpeg(format!("segment length {len}"))));
            }
            out.extend([hi, lo]);
            for _ in 0..len - 2 {
                let Some(b) = self.byte() else { return truncated(&out) };
                out.push(b);
            }
            if code == 0xDA {
                // Entropy-coded data runs to the first FF not followed by
                // 00 (stuffing) or a restart code: the next marker, handled
                // above (EOI, the next scan of a progressive JPEG, ...).
                loop {
                    if out.len() > MAX_JPEG_BYTES {
                        break;
                    }
                    let Some(b) = self.byte() else { return truncated(&out) };
                    if b != 0xFF {
                        out.push(b);
                        continue;
                    }
                    let Some(next) = self.marker_code() else { return truncated(&out) };
                    if matches!(next, 0x00 | 0xD0..=0xD7) {
                        out.extend([b, next]);
                    } else {
                        pending = Some(next);
                        break;
                    }
                }
            }
        }
    }

    /// The code after a marker's FF, past any FF fill bytes.
    fn marker_code(&mut self) -> Option<u8> {
        loop {
            match self.byte()? {
                0xFF => continue,
                code => return Some(code),
            }
        }
    }
}

#[cfg(test)]
mod tests;
