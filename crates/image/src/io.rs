//! Reading inputs from disk: listing image folders, reading annotation
//! text, and decoding images. Every failure names the file at fault.

use crate::error::{skip_or_fail, BadInputKind, InputError, OnBadSample, SkipCounts};
use crate::raster::{OutOfMemory, Raster};
use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageReader};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// The image file types every source reads, lower case, without the dot.
pub(crate) const IMAGE_EXTENSIONS: [&str; 3] = ["jpg", "jpeg", "png"];

/// Whether `path` names an image by its extension (any case).
pub fn is_image_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Image files directly in `dir`, sorted so that every machine sees the same order.
pub fn list_images(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let unreadable = |e: std::io::Error| {
        InputError::bad(dir, None, BadInputKind::UnreadableFile, format!("cannot list folder: {e}"))
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if !is_image_path(&path) {
            continue;
        }
        // A FIFO, device or socket named like a photo is listed: its read
        // refuses it at once ([`open_file`]), so it is one bad file, named
        // or counted as any other. (Refused here, it cost the whole folder
        // under `on_bad_sample = "skip"`, issue 90.)
        files.push(path);
    }
    if files.is_empty() {
        let listed: Vec<String> = IMAGE_EXTENSIONS.iter().map(|e| format!(".{e}")).collect();
        return Err(InputError::bad(
            dir,
            None,
            BadInputKind::EmptyFolder,
            format!("no {} images in folder", listed.join("/")),
        ));
    }
    files.sort();
    Ok(files)
}

/// A whole annotation file as text, at most [`MAX_TEXT_BYTES`], a leading
/// byte-order mark dropped.
pub fn read_text(path: &Path) -> Result<String, InputError> {
    use std::io::Read;
    let unreadable =
        |e: std::io::Error| InputError::bad(path, None, BadInputKind::UnreadableFile, format!("cannot read: {e}"));
    let mut text = String::new();
    open_file(path)?.take(MAX_TEXT_BYTES + 1).read_to_string(&mut text).map_err(unreadable)?;
    if text.len() as u64 > MAX_TEXT_BYTES {
        let message = format!("more than {} MiB: not an annotation file", MAX_TEXT_BYTES >> 20);
        return Err(InputError::bad(path, None, BadInputKind::UnreadableFile, message));
    }
    // A NUL is in no annotation a person writes: a name holding one failed
    // where the photo was opened, printed raw and naming no line (round 10).
    if let Some(at) = text.find('\0') {
        let line = text[..at].matches('\n').count() + 1;
        let message = "holds a NUL byte: not an annotation text file";
        return Err(InputError::bad(path, Some(line), BadInputKind::MalformedAnnotation, message));
    }
    // A byte-order mark, as some editors save UTF-8: not part of line 1.
    match text.strip_prefix('\u{feff}') {
        Some(rest) => Ok(rest.to_string()),
        None => Ok(text),
    }
}

/// Largest annotation file read: CelebA's full attribute list is 26 MB, and
/// a 3 GB sparse file was read whole before it was refused (round 9).
const MAX_TEXT_BYTES: u64 = 256 << 20;

/// Opens an input file (a photo, an annotation file) for reading, without
/// ever waiting: a FIFO or a device is refused by name, where it is opened.
///
/// Every photo is opened here, listed from a folder or named by an
/// annotation file (Caltech's ground truth): a FIFO named there hung `grin
/// mine`, and `grin train`, which then could not honour SIGTERM (issue 90).
/// [`grin_output::open_plain`] says why nothing else is read.
pub fn open_file(path: &Path) -> Result<std::fs::File, InputError> {
    grin_output::open_plain(path).map_err(|e| {
        let message = match e.kind() {
            std::io::ErrorKind::InvalidInput => format!("{e}: grin reads its inputs from regular files"),
            _ => format!("cannot read: {e}"),
        };
        InputError::bad(path, None, BadInputKind::UnreadableFile, message)
    })
}

/// Decodes every file in parallel; bad files are counted and left out under
/// `Skip`, and the first bad file (in file order) is the error under `Error`.
pub fn load_all(
    files: &[PathBuf],
    channels: u32,
    bound: ImageBound,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Raster>, InputError> {
    let decoded: Vec<Result<Raster, InputError>> = files.par_iter().map(|p| decode(p, channels, bound)).collect();
    let mut images = Vec::with_capacity(decoded.len());
    for result in decoded {
        match result {
            Ok(image) => images.push(image),
            Err(e) => skip_or_fail(on_bad, skips, e)?,
        }
    }
    Ok(images)
}

/// An image decoded but past the memory left for its conversion, as the
/// error naming the file.
pub fn too_large(path: &Path, image: &DynamicImage, e: OutOfMemory) -> InputError {
    let (w, h) = (image.width(), image.height());
    InputError::bad(path, None, BadInputKind::ImageTooLarge, format!("image {w}x{h}: {e}"))
}

/// Reads and decodes one image into `channels` (1 = luma, 3 = RGB).
pub fn decode(path: &Path, channels: u32, bound: ImageBound) -> Result<Raster, InputError> {
    let image = read_image(path, bound)?;
    Raster::from_image(&image, channels).map_err(|e| too_large(path, &image, e))
}

/// The default of [`ImageBound::max_pixels`]: 64 megapixels, past any phone
/// or camera photo in ordinary use (12-50 MP), and at most about 0.6 GB of
/// decoding on a Pi with 1-8 GB.
pub const DEFAULT_MAX_PIXELS: u64 = 64_000_000;

/// The most the decoders may allocate for what an image file holds besides
/// its pixels (a colour profile, text, EXIF), and for a PNG's rows: 16 MiB.
/// A real colour profile is a few KB, EXIF at most 64 KB in a JPEG; a
/// larger one, like a zlib bomb in one, is dropped (the PNG decoder skips a
/// profile it cannot inflate) or refused, never inflated whole.
const METADATA_BYTES: u64 = 16 << 20;

/// Pixel buffers larger than this are asked for before decoding
/// (`decode_image`); a photo's few megabytes are not probed on every decode.
const PROBE_ABOVE: usize = 64 << 20;

/// The largest side an image may have: the most a JPEG header can state (a
/// PNG header may state two billion).
pub(crate) const MAX_IMAGE_SIDE: u32 = 65_535;

/// How large an image may be decoded. A header is read before anything is
/// allocated for the pixels, so an image whose header claims 65500x65500 is
/// refused at once instead of taking gigabytes (the image crate's own
/// default bounds only its allocations, at 512 MiB, and some of its decoders
/// ignore that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBound {
    /// Most pixels (width x height) an image may have.
    pub max_pixels: u64,
    /// The setting that raises the bound, named in the error (`--max-pixels`,
    /// `features.max_image_pixels`).
    pub knob: &'static str,
}

impl ImageBound {
    /// A bound of `max_pixels`, raised by the setting `knob`; refused when
    /// it is 0 or past the largest image there can be (65535 px a side).
    pub fn new(max_pixels: u64, knob: &'static str) -> Result<ImageBound, String> {
        let most = MAX_IMAGE_SIDE as u64 * MAX_IMAGE_SIDE as u64;
        if !(1..=most).contains(&max_pixels) {
            return Err(format!("{max_pixels} must be within 1..={most} pixels"));
        }
        Ok(ImageBound { max_pixels, knob })
    }

    /// Bytes the decoders may allocate: the pixels at 8 bytes each (16-bit
    /// RGBA, the widest pixel PNG decodes to) plus room for their buffers:
    /// 576 MiB at the default bound of 64 megapixels, within a Pi's memory
    /// (1-8 GB). Also the largest file read: no image within the bound is
    /// larger.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_pixels.saturating_mul(8).saturating_add(64 << 20)
    }

    /// Refuses a `width` x `height` image past the bound: `WxH (N
    /// megapixels) is over the bound of ...`, naming the setting that raises it.
    pub fn check(&self, width: u32, height: u32) -> Result<(), String> {
        let pixels = width as u64 * height as u64;
        if pixels > self.max_pixels || width.max(height) > MAX_IMAGE_SIDE {
            return Err(format!(
                "{width}x{height} ({:.1} megapixels) is over the bound of {:.1} megapixels and \
                 {MAX_IMAGE_SIDE} px a side ({} raises it)",
                pixels as f64 / 1e6,
                self.max_pixels as f64 / 1e6,
                self.knob
            ));
        }
        Ok(())
    }

    /// The image crate's limits for the pixels: [`Self::max_bytes`] in all,
    /// and no side past [`MAX_IMAGE_SIDE`].
    fn limits(&self) -> image::Limits {
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(MAX_IMAGE_SIDE);
        limits.max_image_height = Some(MAX_IMAGE_SIDE);
        limits.max_alloc = Some(self.max_bytes());
        limits
    }
}

/// Why bytes did not decode into an image; callers add the file or frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub kind: BadInputKind,
    pub message: String,
}

/// Reads and decodes an image file within `bound`: the one way every part
/// of grin (training sources, `grin eval`, `grin calibrate`, `grin-detect`)
/// opens an image. Errors name the file.
pub fn read_image(path: &Path, bound: ImageBound) -> Result<DynamicImage, InputError> {
    use std::io::Read;
    let unreadable =
        |e: std::io::Error| InputError::bad(path, None, BadInputKind::UnreadableFile, format!("cannot read: {e}"));
    let file = open_file(path)?;
    // Read at most one byte past the bound: `/dev/zero` or a 10 GB file is
    // refused after a bounded read, never loaded whole.
    let mut bytes = Vec::new();
    file.take(bound.max_bytes() + 1).read_to_end(&mut bytes).map_err(unreadable)?;
    if bytes.len() as u64 > bound.max_bytes() {
        return Err(InputError::bad(
            path,
            None,
            BadInputKind::ImageTooLarge,
            format!(
                "file is over {} MiB, more than an image within the bound of {:.1} megapixels takes ({} raises it)",
                bound.max_bytes() >> 20,
                bound.max_pixels as f64 / 1e6,
                bound.knob
            ),
        ));
    }
    decode_image(&bytes, bound).map_err(|e| InputError::bad(path, None, e.kind, e.message))
}

/// Decodes an image held in memory (a file's bytes, an MJPEG frame), turned
/// the way its EXIF orientation says, within `bound`.
///
/// The JPEG decoder fills a truncated scan with grey instead of failing, so
/// a JPEG without its end-of-image marker is refused: it would teach, or
/// report faces on, half a picture. Bytes after the marker are allowed:
/// phones append a video to a motion photo that way. A JPEG whose scan data is scrambled but
/// whose end marker is intact decodes to noise; nothing in the format tells
/// it from a real picture.
///
/// A phone photo is stored sideways with an EXIF tag saying so; it is turned
/// as viewers show it, and annotations and reported boxes are in that
/// picture. An unreadable tag is ignored, as viewers ignore it.
pub fn decode_image(bytes: &[u8], bound: ImageBound) -> Result<DynamicImage, DecodeError> {
    let corrupt = |message: String| DecodeError { kind: BadInputKind::CorruptImage, message };
    let format = image::guess_format(bytes).map_err(|_| corrupt("not an image (unrecognised content)".into()))?;
    if format == image::ImageFormat::Jpeg && jpeg_end(bytes).is_none() {
        return Err(corrupt("truncated JPEG: no end-of-image marker".into()));
    }
    let failed = |e: image::ImageError| match e {
        image::ImageError::Limits(e) => DecodeError {
            kind: BadInputKind::ImageTooLarge,
            message: format!(
                "decoding needs more than the bound of {} MiB ({e}; {} raises it)",
                bound.max_bytes() >> 20,
                bound.knob
            ),
        },
        // A format the image crate knows but grin does not decode (BMP,
        // TIFF, ...): not corrupt, just not read here.
        image::ImageError::Unsupported(_) => {
            corrupt(format!("{} images are not read (grin reads PNG and JPEG): convert it first", format_name(format)))
        }
        e => corrupt(format!("corrupt or truncated image: {e}")),
    };
    // Headers only, under their own bound: what the decoder reads before the
    // pixels (a colour profile, text, EXIF) is at most METADATA_BYTES, since
    // the PNG decoder keeps the limit it is made with for every chunk it
    // inflates (a 1.2 MB PNG whose profile inflated under the pixels'
    // budget reserved 1.1 GB, issue 90). The size is checked here, before
    // any pixel buffer exists.
    let mut reader = ImageReader::with_format(std::io::Cursor::new(bytes), format);
    let mut header_limits = image::Limits::default();
    header_limits.max_alloc = Some(METADATA_BYTES);
    reader.limits(header_limits);
    let mut decoder = reader.into_decoder().map_err(failed)?;
    let (width, height) = decoder.dimensions();
    if width == 0 || height == 0 {
        return Err(corrupt("image has zero size".into()));
    }
    bound
        .check(width, height)
        .map_err(|e| DecodeError { kind: BadInputKind::ImageTooLarge, message: format!("image {e}") })?;
    let mut limits = bound.limits();
    limits.reserve(decoder.total_bytes()).map_err(failed)?;
    decoder.set_limits(limits).map_err(failed)?;
    // Within the bound is not within memory: a ~100-byte PNG claiming
    // 65535x65535 under the largest --max-pixels aborted when its 4.3 GB
    // buffer could not be had (issue 90, round 6). Asked for first, the
    // answer is an error naming the image.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    // Turning a photo upright copies its pixels: the two at once.
    let copies = if orientation == Orientation::NoTransforms { 1 } else { 2 };
    let total = usize::try_from(decoder.total_bytes()).unwrap_or(usize::MAX).saturating_mul(copies);
    if total > PROBE_ABOVE && crate::reserved::<u8>(total).is_err() {
        return Err(DecodeError {
            kind: BadInputKind::ImageTooLarge,
            message: format!(
                "image {width}x{height} needs {:.1} GB, more memory than this process may take",
                total as f64 / 1e9
            ),
        });
    }
    let mut image = DynamicImage::from_decoder(decoder).map_err(failed)?;
    image.apply_orientation(orientation);
    Ok(image)
}

/// Where a JPEG's end-of-image marker (FF D9) ends, found by walking its
/// segments, or None when the file ends first. A search for FF D9 would not
/// do: an EXIF thumbnail carries an end marker of its own inside APP1.
fn jpeg_end(bytes: &[u8]) -> Option<usize> {
    if bytes.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut at = 2;
    loop {
        if *bytes.get(at)? != 0xFF {
            return None;
        }
        // A marker may follow any number of FF fill bytes.
        while *bytes.get(at)? == 0xFF {
            at += 1;
        }
        let marker = bytes[at];
        at += 1;
        match marker {
            0xD9 => return Some(at),
            // Standalone markers: no length follows.
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let length = u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]) as usize;
        if length < 2 {
            return None;
        }
        at += length;
        if marker == 0xDA {
            at = scan_end(bytes, at)?;
        }
    }
}

/// The end of a scan's entropy-coded data: the first FF that is neither a
/// stuffed zero (FF 00) nor a restart marker (FF D0..D7).
fn scan_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let ff = at + bytes.get(at..)?.iter().position(|&b| b == 0xFF)?;
        match *bytes.get(ff + 1)? {
            0x00 | 0xD0..=0xD7 => at = ff + 2,
            _ => return Some(ff),
        }
    }
}

/// `BMP`, `TIFF`, ...: the format's usual name, from its first extension.
fn format_name(format: image::ImageFormat) -> String {
    // One family, several extensions: a PPM was called a PBM (round 9).
    if format == image::ImageFormat::Pnm {
        return "PNM (PBM, PGM, PPM)".into();
    }
    format.extensions_str().first().map(|e| e.to_uppercase()).unwrap_or_else(|| format!("{format:?}"))
}

#[cfg(test)]
mod tests;
