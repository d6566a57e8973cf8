//! Image file -> network input, and network boxes -> image pixels.
//!
//! Images are letterboxed: scaled by one factor to fit the run size, placed
//! at the top-left, and the rest is padded with mid grey. One factor keeps
//! faces undistorted whatever the image's aspect ratio; top-left placement
//! makes mapping a box back a plain division.

use anyhow::{anyhow, bail, Result};
use grin_model::Detection;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageReader};
use std::path::Path;

/// Value of the letterbox padding, in 0..1.
const PAD: f32 = 0.5;

/// Decodes an image file by its content (the extension is only a fallback).
/// The error does not repeat the path: callers prefix it.
///
/// A JPEG without its end-of-image marker is refused: the decoder would fill
/// the missing scan with grey and report faces on half a picture. (Training
/// refuses the same files.) A JPEG whose scan data is scrambled but whose
/// end marker is intact decodes to noise in both; nothing in the format
/// tells it apart from a real picture.
pub fn load_image(path: &Path) -> Result<DynamicImage> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("cannot open: {e}"))?;
    let reader = ImageReader::new(std::io::Cursor::new(&bytes));
    let mut reader = reader.with_guessed_format().map_err(|e| anyhow!("cannot read: {e}"))?;
    if reader.format().is_none() {
        reader.set_format(
            image::ImageFormat::from_path(path)
                .map_err(|_| anyhow!("not an image (unrecognised content and extension)"))?,
        );
    }
    if reader.format() == Some(image::ImageFormat::Jpeg) && !ends_with_jpeg_eoi(&bytes) {
        bail!("truncated JPEG: no end-of-image marker");
    }
    let mut decoder = reader.into_decoder().map_err(|e| anyhow!("cannot decode image: {e}"))?;
    // A phone photo is stored sideways with an EXIF tag saying so; boxes are
    // given in the picture as viewers show it. An unreadable tag is ignored,
    // as viewers ignore it.
    let orientation = decoder.orientation().unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(|e| anyhow!("cannot decode image: {e}"))?;
    image.apply_orientation(orientation);
    Ok(image)
}

/// EOI (FF D9) among the last bytes: encoders may pad after it, never before.
fn ends_with_jpeg_eoi(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(64)..];
    tail.windows(2).any(|w| w == [0xFF, 0xD9])
}

/// One network input, `[channels, height, width]` values in 0..1.
#[derive(Debug, Clone)]
pub struct Frame {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub pixels: Vec<f32>,
    pub mapping: Mapping,
}

/// How frame pixels relate to source-image pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mapping {
    pub source_width: u32,
    pub source_height: u32,
    /// Frame pixels per source pixel, per axis (they differ only by rounding
    /// of the scaled size).
    pub scale_x: f32,
    pub scale_y: f32,
}

impl Mapping {
    /// The detection in source pixels, or `None` when it lies entirely in
    /// the letterbox padding.
    pub fn to_source(&self, d: Detection) -> Option<Detection> {
        let (w, h) = (self.source_width as f32, self.source_height as f32);
        let x = |v: f32| (v / self.scale_x).clamp(0.0, w);
        let y = |v: f32| (v / self.scale_y).clamp(0.0, h);
        let out = Detection { x0: x(d.x0), y0: y(d.y0), x1: x(d.x1), y1: y(d.y1), ..d };
        (out.x1 > out.x0 && out.y1 > out.y0).then_some(out)
    }
}

impl Frame {
    /// `channels` is 1 (luma) or 3 (RGB).
    pub fn new(image: &DynamicImage, channels: usize, width: usize, height: usize) -> Frame {
        let (w0, h0) = (image.width(), image.height());
        let fit = (width as f64 / w0 as f64).min(height as f64 / h0 as f64);
        let nw = ((w0 as f64 * fit).round() as usize).clamp(1, width);
        let nh = ((h0 as f64 * fit).round() as usize).clamp(1, height);
        let mut pixels = vec![PAD; channels * width * height];
        let plane = width * height;
        let scaled = |img: DynamicImage| {
            if (nw, nh) == (w0 as usize, h0 as usize) {
                img
            } else {
                // Triangle widens with the downscale factor, so it averages
                // instead of skipping pixels (no aliasing on big photos).
                img.resize_exact(nw as u32, nh as u32, FilterType::Triangle)
            }
        };
        if channels == 1 {
            let luma = match image {
                DynamicImage::ImageLuma8(_) => scaled(image.clone()).into_luma8(),
                _ => scaled(DynamicImage::ImageLuma8(image.to_luma8())).into_luma8(),
            };
            for (y, row) in luma.rows().enumerate() {
                for (x, p) in row.enumerate() {
                    pixels[y * width + x] = p.0[0] as f32 / 255.0;
                }
            }
        } else {
            let rgb = scaled(DynamicImage::ImageRgb8(image.to_rgb8())).into_rgb8();
            for (y, row) in rgb.rows().enumerate() {
                for (x, p) in row.enumerate() {
                    for (c, v) in p.0.iter().enumerate() {
                        pixels[c * plane + y * width + x] = *v as f32 / 255.0;
                    }
                }
            }
        }
        Frame {
            width,
            height,
            channels,
            pixels,
            mapping: Mapping {
                source_width: w0,
                source_height: h0,
                scale_x: nw as f32 / w0 as f32,
                scale_y: nh as f32 / h0 as f32,
            },
        }
    }

    pub fn mapping(&self) -> Mapping {
        self.mapping
    }

    /// The frame at half size (2x2 means), for the pyramid's next pass. The
    /// mapping stays the full frame's: passes' boxes are scaled back first.
    pub fn halved(&self) -> Frame {
        Frame {
            width: self.width / 2,
            height: self.height / 2,
            channels: self.channels,
            pixels: grin_model::halve(&self.pixels, self.channels, self.width, self.height),
            mapping: self.mapping,
        }
    }
}
