//! Frames out of a byte stream: fixed-size raw frames (what `rpicam-vid
//! --codec yuv420`, `libcamera-vid` and `ffmpeg -f rawvideo` write) or
//! concatenated JPEGs (MJPEG, what USB cameras and `ffmpeg -f mjpeg` write).
//!
//! The reader only cuts bytes into frames; decoding happens later, on the
//! frames that are not dropped, so a stale frame costs a copy and nothing
//! more. A frame the reader cannot cut cleanly comes back as a
//! [`BadFrame`] and the stream goes on from the next good frame.

use grin_features::{decode_image, BadInputKind, ImageBound};
use image::{DynamicImage, GrayImage, RgbImage};
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
    pub fn kind(&self) -> &'static str {
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
            return Err(format!("--input-format {format:?}: give --input-size WxH (raw frames carry no size)"));
        }
        if let Some((w, h)) = size {
            if w == 0 || h == 0 {
                return Err(format!("--input-size {w}x{h}: a frame has at least one pixel a side"));
            }
            let side = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
            bound.check(side(w), side(h)).map_err(|e| format!("--input-size: a frame of {e}"))?;
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
        let mut frame = vec![0u8; n];
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

/// Decodes one frame's bytes into an image, checking its size. Raw frames
/// become the image without a copy.
pub fn decode(
    mut bytes: Vec<u8>,
    format: InputFormat,
    size: Option<(usize, usize)>,
    model_channels: usize,
    bound: ImageBound,
) -> Result<DynamicImage, BadFrame> {
    let raw_size = || size.map(|(w, h)| (w as u32, h as u32)).expect("raw formats have a size");
    match format {
        InputFormat::Gray8 => {
            let (w, h) = raw_size();
            Ok(DynamicImage::ImageLuma8(GrayImage::from_raw(w, h, bytes).expect("frame has w*h bytes")))
        }
        InputFormat::Rgb24 => {
            let (w, h) = raw_size();
            Ok(DynamicImage::ImageRgb8(RgbImage::from_raw(w, h, bytes).expect("frame has w*h*3 bytes")))
        }
        InputFormat::Yuv420 => {
            let (w, h) = raw_size();
            if model_channels == 1 {
                // A grey model reads the luma plane as it is.
                bytes.truncate((w * h) as usize);
                return Ok(DynamicImage::ImageLuma8(GrayImage::from_raw(w, h, bytes).expect("luma plane")));
            }
            Ok(DynamicImage::ImageRgb8(yuv420_to_rgb(&bytes, w as usize, h as usize)))
        }
        InputFormat::Mjpeg => {
            // The one decoder image files go through: the bound, EXIF orientation.
            let image = decode_image(&bytes, bound).map_err(|e| match e.kind {
                BadInputKind::ImageTooLarge => BadFrame::TooLarge(e.message),
                _ => BadFrame::Undecodable(e.message),
            })?;
            match size {
                Some((w, h)) if (image.width() as usize, image.height() as usize) != (w, h) => {
                    Err(BadFrame::WrongSize { width: image.width(), height: image.height(), expected: (w, h) })
                }
                _ => Ok(image),
            }
        }
    }
}

/// A frame as a camera (or `ffmpeg`) would write it: the inverse of
/// [`decode`], for tests, benchmarks and demos without a camera.
pub fn encode_frame(image: &DynamicImage, format: InputFormat) -> Vec<u8> {
    match format {
        InputFormat::Gray8 => image.to_luma8().into_raw(),
        InputFormat::Rgb24 => image.to_rgb8().into_raw(),
        InputFormat::Yuv420 => {
            let rgb = image.to_rgb8();
            let (w, h) = (rgb.width() as usize, rgb.height() as usize);
            let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
            let mut out = vec![0u8; w * h + 2 * cw * ch];
            let clamp = |v: f32| v.round().clamp(0.0, 255.0) as u8;
            for (i, p) in rgb.pixels().enumerate() {
                let [r, g, b] = p.0.map(|v| v as f32);
                out[i] = clamp(16.0 + 0.257 * r + 0.504 * g + 0.098 * b);
            }
            // Chroma of the top-left pixel of each 2x2 block.
            for cy in 0..ch {
                for cx in 0..cw {
                    let [r, g, b] = rgb.get_pixel((2 * cx) as u32, (2 * cy) as u32).0.map(|v| v as f32);
                    out[w * h + cy * cw + cx] = clamp(128.0 - 0.148 * r - 0.291 * g + 0.439 * b);
                    out[w * h + cw * ch + cy * cw + cx] = clamp(128.0 + 0.439 * r - 0.368 * g - 0.071 * b);
                }
            }
            out
        }
        InputFormat::Mjpeg => {
            // The JPEG encoder takes 8-bit grey or RGB only.
            let image = match image {
                DynamicImage::ImageLuma8(_) => image.clone(),
                _ => DynamicImage::ImageRgb8(image.to_rgb8()),
            };
            let mut out = Vec::new();
            image
                .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Jpeg)
                .expect("JPEG encoding into memory does not fail");
            out
        }
    }
}

/// BT.601 limited range, as cameras write it.
fn yuv420_to_rgb(bytes: &[u8], w: usize, h: usize) -> RgbImage {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let (y_plane, chroma) = bytes.split_at(w * h);
    let (u_plane, v_plane) = chroma.split_at(cw * ch);
    let mut rgb = RgbImage::new(w as u32, h as u32);
    for (i, px) in rgb.pixels_mut().enumerate() {
        let (x, y) = (i % w, i / w);
        let c = (y / 2) * cw + x / 2;
        let yy = 1.164 * (y_plane[i] as f32 - 16.0);
        let (u, v) = (u_plane[c] as f32 - 128.0, v_plane[c] as f32 - 128.0);
        let clamp = |v: f32| v.round().clamp(0.0, 255.0) as u8;
        px.0 = [clamp(yy + 1.596 * v), clamp(yy - 0.392 * u - 0.813 * v), clamp(yy + 2.017 * u)];
    }
    rgb
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: ImageBound = ImageBound { max_pixels: grin_features::DEFAULT_MAX_PIXELS, knob: "--max-pixels" };

    /// A busy picture, so most of the file is scan data (where the tests cut).
    fn jpeg(w: u32, h: u32, value: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let pixel = |x: u32, y: u32| image::Luma([((x * 37 + y * y * 11 + x * y) as u8).wrapping_add(value)]);
        DynamicImage::ImageLuma8(GrayImage::from_fn(w, h, pixel))
            .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Jpeg)
            .unwrap();
        out
    }

    fn frames(bytes: &[u8], format: InputFormat, size: Option<(usize, usize)>) -> Vec<Result<Vec<u8>, BadFrame>> {
        let mut reader = FrameReader::new(bytes, format, size, BOUND).unwrap();
        std::iter::from_fn(|| reader.next_frame()).collect()
    }

    #[test]
    fn raw_frames_are_cut_by_size_and_a_short_tail_is_truncated() {
        let bytes: Vec<u8> = (0..(2 * 12 + 5)).map(|i| i as u8).collect();
        let got = frames(&bytes, InputFormat::Gray8, Some((4, 3)));
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_ref().unwrap(), &(0..12).collect::<Vec<u8>>());
        assert_eq!(got[1].as_ref().unwrap(), &(12..24).collect::<Vec<u8>>());
        assert_eq!(got[2], Err(BadFrame::Truncated { got: 5, expected: Some(12) }));
        assert_eq!(InputFormat::Yuv420.frame_bytes(4, 2), Some(8 + 2 + 2));
    }

    #[test]
    fn mjpeg_frames_are_cut_at_their_end_markers() {
        let (a, b) = (jpeg(16, 8, 40), jpeg(16, 8, 200));
        let stream = [a.clone(), b.clone()].concat();
        let got = frames(&stream, InputFormat::Mjpeg, None);
        assert_eq!(got, vec![Ok(a), Ok(b)]);
    }

    #[test]
    fn stray_bytes_cut_frames_and_a_missing_end_are_reported_and_skipped() {
        let (a, b) = (jpeg(64, 48, 40), jpeg(64, 48, 200));
        // Past the headers, inside the scan data.
        let cut = &a[..a.len() - a.len() / 4];
        let stream = [b"junk".to_vec(), cut.to_vec(), b.clone(), a[..a.len() - 3].to_vec()].concat();
        let got = frames(&stream, InputFormat::Mjpeg, None);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], Err(BadFrame::StrayBytes(4)));
        assert!(matches!(got[1], Err(BadFrame::BrokenJpeg(_))), "{:?}", got[1]);
        assert_eq!(got[2], Ok(b));
        assert!(matches!(got[3], Err(BadFrame::Truncated { expected: None, .. })), "{:?}", got[3]);
    }

    #[test]
    fn decode_checks_the_declared_size_and_reads_luma_from_yuv() {
        let a = jpeg(16, 8, 40);
        assert!(decode(a.clone(), InputFormat::Mjpeg, Some((16, 8)), 1, BOUND).is_ok());
        assert_eq!(
            decode(a.clone(), InputFormat::Mjpeg, Some((32, 8)), 1, BOUND).unwrap_err(),
            BadFrame::WrongSize { width: 16, height: 8, expected: (32, 8) }
        );
        assert!(matches!(decode(a[..20].to_vec(), InputFormat::Mjpeg, None, 1, BOUND), Err(BadFrame::Undecodable(_))));
        let yuv: Vec<u8> = [vec![100u8; 8], vec![128u8; 4]].concat();
        let grey = decode(yuv.clone(), InputFormat::Yuv420, Some((4, 2)), 1, BOUND).unwrap().into_luma8();
        assert!(grey.pixels().all(|p| p.0[0] == 100));
        let rgb = decode(yuv, InputFormat::Yuv420, Some((4, 2)), 3, BOUND).unwrap().into_rgb8();
        assert!(rgb.pixels().all(|p| p.0[0] == p.0[1] && p.0[1] == p.0[2]), "neutral chroma is grey");
    }

    /// Gives its bytes, then fails: a camera unplugged, a disk error.
    struct Failing(std::io::Cursor<Vec<u8>>);

    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(std::io::Error::other("device gone")),
                n => Ok(n),
            }
        }
    }

    #[test]
    fn a_read_error_is_the_last_bad_frame_not_a_silent_end() {
        let a = jpeg(16, 8, 40);
        for (format, size, bytes) in
            [(InputFormat::Mjpeg, None, a.clone()), (InputFormat::Gray8, Some((16, 8)), vec![7u8; 16 * 8])]
        {
            let mut reader =
                FrameReader::new(Failing(std::io::Cursor::new(bytes.clone())), format, size, BOUND).unwrap();
            let got: Vec<_> = std::iter::from_fn(|| reader.next_frame()).collect();
            assert_eq!(got, vec![Ok(bytes), Err(BadFrame::ReadError("device gone".into()))], "{format:?}");
        }
    }

    #[test]
    fn frame_sizes_are_checked_before_reading() {
        let new = |size| FrameReader::new(&b""[..], InputFormat::Gray8, Some(size), BOUND).err();
        assert_eq!(new((0, 0)).unwrap(), "--input-size 0x0: a frame has at least one pixel a side");
        assert!(new((100_000, 100_000)).unwrap().contains("over the bound"));
        assert!(new((8000, 8000)).is_none(), "64 megapixels is within the default bound");
    }
}
