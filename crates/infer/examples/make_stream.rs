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
//!
//! Its flags have grin-detect's bounds, and its images are read as
//! grin-detect reads them (round 22 of issue 90: a 65535x65535 frame
//! aborted it, and `--first-png` replaced one of its own images).

use anyhow::{Context, Result};
use clap::Parser;
use grin_image::{read_image, ImageBound, DEFAULT_MAX_PIXELS};
use grin_infer::stream::{encode_frame, InputFormat};
use image::imageops::FilterType;
use image::DynamicImage;
use std::io::Write;
use std::path::PathBuf;

/// Most frames one stream holds: about nine hours at 30 fps.
const MAX_FRAMES: u64 = 1_000_000;

#[derive(Parser)]
#[command(about = "Writes a camera-like frame stream to stdout from still images, for grin-detect --stream")]
struct Args {
    /// Layout of each frame on the stream.
    #[arg(long, value_enum, default_value = "gray8")]
    format: InputFormat,
    /// Frame size, each side within grin-detect's bounds.
    #[arg(long, value_name = "WxH", default_value = "320x240", value_parser = grin_terms::parse_frame_size)]
    size: (usize, usize),
    /// Frames to write.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=MAX_FRAMES))]
    frames: u64,
    /// Pixels the window moves each frame.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pan: u32,
    /// Also save the first frame as this image (not one of the IMAGEs).
    #[arg(long, value_name = "OUT.png")]
    first_png: Option<PathBuf>,
    /// Still images, used in turn.
    #[arg(required = true)]
    images: Vec<PathBuf>,
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<()> {
    let inputs: Vec<&std::path::Path> = args.images.iter().map(PathBuf::as_path).collect();
    grin_output::refuse_stdout_on_inputs(&inputs)?;
    if let Some(path) = &args.first_png {
        // Before any work: the first frame must not land on an image.
        grin_output::check(path, &inputs)?;
    }
    let bound = ImageBound::new(DEFAULT_MAX_PIXELS, "an image of make_stream").map_err(anyhow::Error::msg)?;
    let images = args.images.iter().map(|p| read_image(p, bound)).collect::<Result<Vec<_>, _>>()?;
    let (w, h) = (args.size.0 as u32, args.size.1 as u32);
    // A frame is a window of the image scaled a little past the frame size,
    // moved `pan` px a frame and back again.
    let margin = if args.pan > 0 { 80 } else { 0 };
    let scaled: Vec<DynamicImage> =
        images.iter().map(|i| i.resize_exact(w + margin, h, FilterType::Triangle)).collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for i in 0..args.frames {
        let source = &scaled[(i % scaled.len() as u64) as usize];
        let span = u64::from(source.width() - w);
        let step = (i * u64::from(args.pan)) % (2 * span.max(1));
        let x = if step > span { 2 * span - step } else { step };
        let frame = source.crop_imm(x as u32, 0, w, h);
        if let (0, Some(path)) = (i, &args.first_png) {
            let mut png = std::io::Cursor::new(Vec::new());
            frame.write_to(&mut png, image::ImageFormat::Png)?;
            grin_output::write_file(path, &inputs, png.get_ref())?;
        }
        if !written(out.write_all(&encode_frame(&frame, args.format)))? {
            return Ok(());
        }
    }
    written(out.flush())?;
    Ok(())
}

/// Whether the stream still has a reader: one that closed it (`| head`)
/// has what it wanted, so the stream ends quietly, as grin-detect's does.
fn written(result: std::io::Result<()>) -> Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("cannot write the stream"),
    }
}
