//! The `grin-detect` command line: finds faces and smiles in images with a
//! trained grin model. The binary is one call to [`main`]; the code lives in
//! the library so that what only the command uses stays `pub(crate)`.
//!
//! Exit status: 0 when every image was processed, 1 when any image failed
//! (each failure is one `error: <file>: ...` line on stderr, and the other
//! images are still processed), 2 when nothing could run (bad flags, a model
//! file that cannot be used). A reader that closes the pipe early
//! (`grin-detect *.png | head`) stops the run with the status it has so far.
//! A `--stream` exits 0 at its end and 130 when
//! Ctrl-C or SIGTERM ended it (within milliseconds, even when nobody reads
//! its stdout): its bad frames are counted in the summary, not failures.

mod bench;

use crate::draw;
use crate::report::ImageReport;
use crate::stream::{self, InputFormat, StreamOptions, TrackerConfig};
use crate::{ModelSource, PhotoSize, Runner, MAX_SIDE, MIN_SIDE, PHOTO_MAX_PIXELS};
use anyhow::{anyhow, Context, Result};
use clap::Parser;
use grin_image::{ImageBound, DEFAULT_MAX_PIXELS};
use grin_net::{score, DecodeFlags};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "grin-detect", version, about = "Find faces and smiles in images with a grin model (CPU).")]
// A negative number is a value (refused by its range: `--threshold -0.1`), not a flag.
#[command(allow_negative_numbers = true)]
struct Cli {
    /// Images to run on (PNG or JPEG).
    #[arg(required_unless_present = "stream", conflicts_with = "stream")]
    images: Vec<PathBuf>,
    /// Read frames continuously from a file or FIFO (`-` or nothing: standard input),
    /// one JSON line per frame, with face tracks and smile events.
    #[arg(long, value_name = "SOURCE", num_args = 0..=1, default_missing_value = "-", conflicts_with_all = ["bench", "draw"])]
    stream: Option<PathBuf>,
    /// Frame layout on the stream.
    #[arg(long, value_enum, default_value = "mjpeg", requires = "stream", conflicts_with = "images")]
    input_format: InputFormat,
    /// Frame size on the stream, e.g. 320x240: required for raw formats; with
    /// mjpeg, frames of another size are counted as bad.
    #[arg(long, value_name = "WxH", value_parser = grin_terms::parse_wxh, requires = "stream", conflicts_with = "images")]
    input_size: Option<(usize, usize)>,
    /// Process every frame in order instead of dropping stale ones. The default
    /// for a regular file; a pipe, FIFO or device drops stale frames unless this is given.
    #[arg(long, requires = "stream", conflicts_with = "images")]
    every_frame: bool,
    /// Print only the `smile_started` / `smile_ended` lines.
    #[arg(long, requires = "stream", conflicts_with = "images")]
    events_only: bool,
    /// Leave the wall-clock fields out of the stream's lines (reproducible output).
    #[arg(long, requires = "stream", conflicts_with = "images")]
    no_clock: bool,
    /// Smile probability that counts toward smiling.
    #[arg(long, default_value_t = 0.6, value_parser = score, requires = "stream", conflicts_with = "images")]
    smile_on: f32,
    /// Smile probability that counts toward not smiling (below --smile-on).
    #[arg(long, default_value_t = 0.4, value_parser = score, requires = "stream", conflicts_with = "images")]
    smile_off: f32,
    /// Frames in a row a smile change must last before it is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000), requires = "stream", conflicts_with = "images")]
    smile_hold: u32,
    /// Frames a face may go unseen before its track ends (at most 10000:
    /// over five minutes at 30 frames/s).
    #[arg(long, default_value_t = 5, requires = "stream", conflicts_with = "images", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    track_patience: u32,
    /// A `.grin` model file from `grin train` (default: the embedded model).
    #[arg(long)]
    model: Option<PathBuf>,
    /// One JSON object per line: per image, or the latency figures with
    /// `--bench` (a `--stream` writes JSON lines always).
    #[arg(long, conflicts_with = "stream")]
    json: bool,
    /// Write the image with boxes drawn (several images: OUT-1.png, OUT-2.png, ...).
    /// Not with `--bench`, which times detection and draws nothing.
    #[arg(long, value_name = "OUT.png", conflicts_with = "bench")]
    draw: Option<PathBuf>,
    /// Worker threads for the CPU kernels (default: all cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Size the network runs at, e.g. 320x240: images are scaled to fit it, keeping
    /// their aspect ratio. Default: an image file at 1.41 times its own size per side
    /// (twice its pixels, at most --photo-pixels), as a photo's small faces need the
    /// pixels; a stream at the model's run size (320x240), for frame rate. Boxes come
    /// back in image pixels.
    #[arg(long, value_name = "WxH", value_parser = grin_terms::parse_frame_size)]
    size: Option<(usize, usize)>,
    /// Most pixels an image file is searched at when --size is not given: a larger
    /// photo is shrunk by one factor to this many (default 1920x1080).
    #[arg(long, value_name = "N", default_value_t = PHOTO_MAX_PIXELS, value_parser = parse_photo_pixels, conflicts_with_all = ["size", "stream"])]
    photo_pixels: u64,
    #[command(flatten)]
    decode: DecodeFlags,
    /// Most pixels an image (or stream frame) may have; a larger one is
    /// refused before it is decoded, with one line naming it. Default:
    /// 64,000,000 for image files, 16,000,000 for a stream's frames.
    #[arg(long, value_name = "N", value_parser = parse_max_pixels)]
    max_pixels: Option<u64>,
    /// Time detection instead of printing it: median and p95 latency, frames/s.
    #[arg(long)]
    bench: bool,
    /// Timed runs with `--bench`, cycling over the images from the first
    /// (a multiple of their count times each one equally); at most a
    /// million (each keeps six timings: 96 MB).
    #[arg(long, default_value_t = 200, requires = "bench", conflicts_with = "stream", value_parser = clap::value_parser!(u32).range(1..=MAX_ITERATIONS))]
    iterations: u32,
    /// Untimed runs before timing with `--bench` (at most a million).
    #[arg(long, default_value_t = 10, requires = "bench", conflicts_with = "stream", value_parser = clap::value_parser!(u32).range(0..=MAX_ITERATIONS))]
    warmup: u32,
}

fn parse_photo_pixels(s: &str) -> Result<u64, String> {
    let least = (MIN_SIDE * MIN_SIDE) as u64;
    let most = (MAX_SIDE * MAX_SIDE) as u64;
    match s.trim().parse::<u64>() {
        Ok(n) if (least..=most).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a pixel count in {least}..={most}")),
    }
}

fn parse_max_pixels(s: &str) -> Result<u64, String> {
    let n = s.trim().parse::<u64>().map_err(|_| format!("`{s}` is not a pixel count"))?;
    ImageBound::new(n, MAX_PIXELS_FLAG).map(|b| b.max_pixels)
}

const MAX_PIXELS_FLAG: &str = "--max-pixels";

/// The default bound on a stream's frames: past a Raspberry Pi HQ camera's
/// 12.3 megapixels and 4K video's 8.3. A stream holds several frames at
/// once (the one being read, the one detected on, its grey copy), so at
/// 64 megapixels, the image files' default, an 8000x8000 RGB stream
/// needed more than a Pi's 1 GB and aborted (issue 90, E28); a 4000x4000
/// one peaks at 120 MB and runs under a 1 GB address-space limit.
const STREAM_MAX_PIXELS: u64 = 16_000_000;

/// The most timed (or warm-up) runs of `--bench`: `--iterations
/// 4294967295` reserved 68 GB for its timings and aborted (issue 90).
const MAX_ITERATIONS: i64 = 1_000_000;

/// Exit status of a stream ended by Ctrl-C or SIGTERM.
const INTERRUPTED: i32 = 130;

impl Cli {
    fn image_bound(&self) -> ImageBound {
        let default = if self.stream.is_some() { STREAM_MAX_PIXELS } else { DEFAULT_MAX_PIXELS };
        ImageBound { max_pixels: self.max_pixels.unwrap_or(default), knob: MAX_PIXELS_FLAG }
    }

    /// How an image file is sized: `--size`, or by its own size within `--photo-pixels`.
    fn photo_size(&self) -> PhotoSize {
        match self.size {
            Some(_) => PhotoSize::RunSize,
            None => PhotoSize::Own { max_pixels: self.photo_pixels },
        }
    }
}

/// Parses the command line, runs it, and gives the exit status above.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// Prints one line on standard output, where `println!` would panic when
/// the reader has closed the pipe: see [`said`].
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        $crate::cli::said(writeln!(std::io::stdout().lock(), $($arg)*))
    }};
}
pub(crate) use say;

/// `Ok(true)` when the line was written, `Ok(false)` when the reader went
/// away (`grin-detect … | head`: it has what it wanted, so the run stops
/// with the status it has so far), and an error naming standard output for
/// any other failed write.
pub(crate) fn said(written: std::io::Result<()>) -> Result<bool> {
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context("standard output")),
    }
}

/// `Ok(false)` when some image failed.
fn run(cli: &Cli) -> Result<bool> {
    let read: Vec<&Path> = draw_inputs(cli).into_iter().chain(cli.stream.as_deref()).collect();
    grin_output::refuse_stdout_on_inputs(&read)?;
    if let Some(n) = cli.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n as usize)
            .build_global()
            .map_err(|e| anyhow!("--threads {n}: {e}"))?;
    }
    if let Some(out) = &cli.draw {
        // Before anything runs: a drawing never lands on a photo or on the
        // model file (`--draw MODEL` replaced the model, issue 90).
        let inputs = draw_inputs(cli);
        for i in 0..cli.images.len() {
            let target = draw::output_path(out, i, cli.images.len());
            // An input named first: the worse mistake. (A folder is no
            // drawing's file, whatever it holds: `format_of` says so.)
            if !target.is_dir() {
                grin_output::check(&target, &inputs)?;
                grin_output::refuse_a_kept_file(&target)?;
            }
            draw::format_of(&target)?;
        }
    }
    let source = cli.model.clone().map_or(ModelSource::Embedded, ModelSource::File);
    let mut detector = Runner::load(source)?;
    if let Some((w, h)) = cli.size {
        detector.set_run_size(w, h)?;
    }
    let model = cli.decode.apply(&detector.spec().model).map_err(|e| anyhow!(e))?;
    detector.set_model(model)?;
    if let Some(source) = &cli.stream {
        run_stream(cli, &detector, source)
    } else if cli.bench {
        bench::bench_images(cli, &mut detector)
    } else {
        detect_images(cli, &mut detector)
    }
}

/// What a drawing must never be written over: the photos and the model file.
fn draw_inputs(cli: &Cli) -> Vec<&Path> {
    cli.images.iter().chain(&cli.model).map(PathBuf::as_path).collect()
}

/// Whether `e` is standard output's reader having gone away.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Decoders' messages may end in or contain newlines; an error is one line.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `running at 640x480 + 320x240 + ...`: every pass of the run size.
fn passes_text(detector: &Runner) -> String {
    let passes: Vec<String> = detector.pass_sizes().iter().map(|(w, h)| format!("{w}x{h}")).collect();
    format!("running at {}", passes.join(" + "))
}

fn detect_images(cli: &Cli, detector: &mut Runner) -> Result<bool> {
    if !cli.json {
        let spec = detector.spec();
        let sizing = match cli.photo_size() {
            PhotoSize::RunSize => passes_text(detector),
            PhotoSize::Own { max_pixels } => format!("each photo at twice its own pixels (at most {max_pixels})"),
        };
        if !say!(
            "model: {} (trained at {}x{}x{}), {sizing}",
            detector.source(),
            spec.width,
            spec.height,
            spec.channels
        )? {
            return Ok(true);
        }
    }
    let mut ok = true;
    for (i, path) in cli.images.iter().enumerate() {
        let (image, frame) = match detector.read_photo(path, cli.image_bound(), cli.photo_size()) {
            Ok(read) => read,
            Err(e) => {
                // The error names the file already.
                eprintln!("error: {}", one_line(&e.into()));
                ok = false;
                continue;
            }
        };
        let detections = detector.detect(frame);
        let report = ImageReport::new(path.display().to_string(), image.width(), image.height(), &detections);
        let written = if cli.json {
            say!("{}", report.to_json())?
        } else {
            let own = matches!(cli.photo_size(), PhotoSize::Own { .. });
            (!own || say!("{}: {}", path.display(), passes_text(detector))?) && say!("{}", report.to_text())?
        };
        if !written {
            return Ok(ok);
        }
        if let Some(out) = &cli.draw {
            let target = draw::output_path(out, i, cli.images.len());
            let inputs = draw_inputs(cli);
            match draw::save(&image, &detections, &target, &inputs) {
                // On standard error, so that --json's standard output stays one line per image.
                Ok(()) => eprintln!("{}", draw::wrote(&target, &detections)),
                Err(e) => {
                    eprintln!("error: {}", one_line(&e));
                    ok = false;
                }
            }
        }
    }
    Ok(ok)
}

fn run_stream(cli: &Cli, detector: &Runner, source: &Path) -> Result<bool> {
    if cli.smile_off >= cli.smile_on {
        anyhow::bail!("--smile-off {} must be below --smile-on {}", cli.smile_off, cli.smile_on);
    }
    let input = if source == Path::new("-") {
        std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned().context("standard input")?)
    } else {
        std::fs::File::open(source).map_err(|e| {
            // A socket cannot be opened as a file (ENXIO, "No such device
            // or address", round 11): say what it is and what works.
            use std::os::unix::fs::FileTypeExt;
            if std::fs::metadata(source).is_ok_and(|m| m.file_type().is_socket()) {
                anyhow!("{}: is a socket, which grin cannot open as a stream; pipe it in (`nc -U {0} | grin-detect --stream - …`)", source.display())
            } else {
                anyhow!("{}: cannot open: {e}", source.display())
            }
        })?
    };
    let metadata = input.metadata().ok();
    // Opening a folder succeeds and reading it fails: it would be an empty stream.
    if metadata.as_ref().is_some_and(|m| m.is_dir()) {
        let name = if source == Path::new("-") { "standard input".into() } else { source.display().to_string() };
        anyhow::bail!("{name}: is a folder; --stream reads a file, a FIFO or standard input");
    }
    // A regular file is not live: nothing goes stale while it waits.
    let is_file = metadata.is_some_and(|m| m.is_file());
    let options = StreamOptions {
        format: cli.input_format,
        size: cli.input_size,
        bound: cli.image_bound(),
        every_frame: cli.every_frame || is_file,
        events_only: cli.events_only,
        no_clock: cli.no_clock,
        tracker: TrackerConfig {
            on: cli.smile_on,
            off: cli.smile_off,
            hold: cli.smile_hold,
            patience: cli.track_patience,
            ..TrackerConfig::default()
        },
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        // Ctrl-C and SIGTERM end the loop; the summary still prints.
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| anyhow!("cannot install the Ctrl-C handler: {e}"))?;
    }
    // Its own handle on stdout: the output thread may be left blocked in a
    // write to a pipe nobody reads, and must not hold std's stdout lock then.
    let out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().context("standard output")?);
    let summary = match stream::run(input, detector, &options, out, stop) {
        Ok(summary) => summary,
        // The reader went away (`| head -1`): it has what it wanted, so the
        // stream ends quietly with status 0, as an image run does (it ended
        // with `error: ... Broken pipe`, exit 2, issue 90).
        Err(e) if closed_pipe(&e) => return Ok(true),
        Err(e) => return Err(e),
    };
    eprintln!("{}", summary.to_text());
    eprintln!("{}", serde_json::json!({ "summary": summary }));
    if summary.interrupted {
        // 128 + SIGINT, as shells report a job ended by Ctrl-C; the output
        // thread, if still blocked on a full pipe, ends with the process.
        std::process::exit(INTERRUPTED);
    }
    Ok(true)
}
