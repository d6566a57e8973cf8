//! Frame bytes to an image and back: the raw layouts and MJPEG.

use super::{BadFrame, InputFormat};
use grin_image::{decode_image, BadInputKind, ImageBound};
use image::{DynamicImage, GrayImage, RgbImage};

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
