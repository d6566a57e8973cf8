//! Writes a camera-like stream to stdout from still images, for trying
//! `grin-detect --stream` (and benchmarking it) without a camera: each frame
//! is the next image, scaled to the frame size and panned a little further
//! each frame, so faces move the way they do in front of a camera.
//! `--first-png OUT` also saves the first frame as an image (the
//! single-image path's input in `scripts/bench-stream.sh`).
//!
//!   cargo run --release -p grin-infer --example make_stream -- \
//!       --format gray8 --size 320x240 --frames 100 assets/test-scene.png > /tmp/scene.gray
//!   grin-detect --stream /tmp/scene.gray --input-format gray8 --input-size 320x240

use anyhow::{bail, Context, Result};
use grin_infer::stream::{encode_frame, InputFormat};
use image::imageops::FilterType;
use image::DynamicImage;
use std::io::Write;

fn main() -> Result<()> {
    let mut format = InputFormat::Gray8;
    let mut size = (320u32, 240u32);
    let mut frames = 100usize;
    let mut pan = 1u32;
    let mut first_png: Option<String> = None;
    let mut images = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--format" => {
                format = match value()?.as_str() {
                    "gray8" => InputFormat::Gray8,
                    "rgb24" => InputFormat::Rgb24,
                    "yuv420" => InputFormat::Yuv420,
                    "mjpeg" => InputFormat::Mjpeg,
                    other => bail!("--format {other}: gray8, rgb24, yuv420 or mjpeg"),
                }
            }
            "--size" => {
                let v = value()?;
                let (w, h) = v.split_once('x').with_context(|| format!("--size {v}: WxH"))?;
                size = (w.parse()?, h.parse()?);
            }
            "--frames" => frames = value()?.parse()?,
            "--pan" => pan = value()?.parse()?,
            "--first-png" => first_png = Some(value()?),
            path => images.push(image::open(path).with_context(|| format!("{path}: cannot read"))?),
        }
    }
    if images.is_empty() {
        bail!("usage: make_stream [--format F] [--size WxH] [--frames N] [--pan PX] [--first-png OUT] IMAGE...");
    }
    let (w, h) = size;
    // A frame is a window of the image scaled a little past the frame size,
    // moved `pan` px a frame and back again.
    let margin = if pan > 0 { 80 } else { 0 };
    let scaled: Vec<DynamicImage> =
        images.iter().map(|i| i.resize_exact(w + margin, h, FilterType::Triangle)).collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for i in 0..frames {
        let source = &scaled[i % scaled.len()];
        let span = source.width() - w;
        let step = (i as u32 * pan) % (2 * span.max(1));
        let x = if step > span { 2 * span - step } else { step };
        let frame = source.crop_imm(x, 0, w, h);
        if let (0, Some(path)) = (i, &first_png) {
            frame.save(path).with_context(|| format!("{path}: cannot write"))?;
        }
        out.write_all(&encode_frame(&frame, format))?;
    }
    out.flush()?;
    Ok(())
}
