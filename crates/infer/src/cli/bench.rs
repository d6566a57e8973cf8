//! `grin-detect --bench`: the timed loop over the given photos, with
//! scaling into the frame, the network and decoding timed apart.

use super::{one_line, say, Cli};
use crate::bench::{self, Latency};
use crate::Runner;
use anyhow::Result;
use grin_image::read_image;
use image::DynamicImage;
use serde::Serialize;
use std::time::Instant;

#[derive(Serialize)]
struct BenchReport {
    width: usize,
    height: usize,
    threads: usize,
    images: usize,
    params: usize,
    mflops: f64,
    /// The whole timed section: scaling into the frame, the network, decoding.
    #[serde(flatten)]
    latency: Latency,
    /// All but the scaling, frame by frame: what a peer's network time is
    /// set against (a median of sums; the look's median alone is 0 when
    /// most frames have no box to look at).
    detection: Latency,
    /// Its parts: the photo scaled (grey, resized, letterboxed) into the frame,
    scaling: Latency,
    /// the network (every pyramid pass),
    network: Latency,
    /// decoding with NMS,
    decoding: Latency,
    /// and the second look at low-scoring boxes (0 when the model has none).
    second_look: Latency,
}

/// The images' count and the timed runs, checked: the runs said when they
/// time the images unequally, and the images refused when they run at two
/// frame sizes.
fn one_size(cli: &Cli, detector: &mut Runner, images: &[DynamicImage]) -> Result<(usize, usize)> {
    // Said, not silently uneven (round 20: `--iterations 1` over three
    // images timed one and reported three).
    let (count, iterations) = (images.len(), cli.iterations as usize);
    if iterations % count != 0 {
        eprintln!(
            "note: --iterations {iterations} is not a multiple of the {count} images: {} timed once more than the rest",
            match iterations % count {
                1 => "the first is".to_string(),
                n => format!("the first {n} are"),
            }
        );
    }
    // One frame size a bench: the report names one, with its MFLOPs (round
    // 21: images running at another size were timed under the last's).
    let mut sizes = images.iter().map(|image| {
        detector.size_for(image, cli.photo_size());
        detector.run_size()
    });
    let first = sizes.next().expect("at least one image");
    if let Some(other) = sizes.find(|size| *size != first) {
        anyhow::bail!(
            "--bench times one frame size, and these images run at {}x{} and {}x{} (each at its own size): give \
             --size WxH, or bench them one at a time",
            first.0,
            first.1,
            other.0,
            other.1
        );
    }
    Ok((count, iterations))
}

pub(crate) fn bench_images(cli: &Cli, detector: &mut Runner) -> Result<bool> {
    let mut ok = true;
    let mut images: Vec<DynamicImage> = Vec::new();
    for path in &cli.images {
        match read_image(path, cli.image_bound()) {
            Ok(image) => images.push(image),
            Err(e) => {
                eprintln!("error: {}", one_line(&e.into()));
                ok = false;
            }
        }
    }
    if images.is_empty() {
        return Ok(false);
    }
    let (count, iterations) = one_size(cli, detector, &images)?;
    // Timed: scaling into the frame, the network and decoding; file decoding
    // is not (the OpenCV peer is timed the same way).
    let mut samples = Vec::with_capacity(cli.iterations as usize);
    let (mut detection, mut scaling, mut network, mut decoding, mut look) =
        (samples.clone(), samples.clone(), samples.clone(), samples.clone(), samples.clone());
    // Warm-up and timed runs each cycle over the images from the first, as
    // the YuNet peer's driver does: the same frames are timed, and each
    // image equally when the iterations are a multiple of their count.
    let runs = (0..cli.warmup as usize).map(|k| (k, false)).chain((0..cli.iterations as usize).map(|k| (k, true)));
    for (k, timed) in runs {
        let image = &images[k % images.len()];
        // Not timed: the output points of a new size are built once per size.
        detector.size_for(image, cli.photo_size());
        let start = Instant::now();
        let frame = detector.frame(image)?;
        let scaled = start.elapsed();
        let (detections, phases) = detector.detect_timed(frame);
        let elapsed = start.elapsed();
        std::hint::black_box(detections);
        if timed {
            samples.push(elapsed);
            detection.push(elapsed - scaled);
            scaling.push(scaled);
            network.push(phases.network);
            decoding.push(phases.decoding);
            look.push(phases.look);
        }
    }
    let timed = "at least one timed iteration";
    let latency = bench::summarize(&samples).expect(timed);
    let (width, height) = detector.run_size();
    let budget = detector.budget();
    let report = BenchReport {
        width,
        height,
        threads: rayon::current_num_threads(),
        // The images timed: fewer than given when the iterations are.
        images: count.min(iterations),
        params: budget.params,
        mflops: budget.mflops,
        latency,
        detection: bench::summarize(&detection).expect(timed),
        scaling: bench::summarize(&scaling).expect(timed),
        network: bench::summarize(&network).expect(timed),
        decoding: bench::summarize(&decoding).expect(timed),
        second_look: bench::summarize(&look).expect(timed),
    };
    if cli.json {
        say!("{}", serde_json::to_string(&report).expect("numbers serialise"))?;
    } else {
        let l = &report.latency;
        say!(
            "grin-detect bench: {width}x{height} ({} params, {:.1} MFLOPs), {} thread{}, {} iterations over {} image{}: \
             median {:.3} ms, p95 {:.3} ms, {:.1} frames/s (medians: scaling {:.3} ms, network {:.3} ms, decoding {:.3} ms, \
             second look {:.3} ms)",
            report.params,
            report.mflops,
            report.threads,
            if report.threads == 1 { "" } else { "s" },
            l.iterations,
            report.images,
            if report.images == 1 { "" } else { "s" },
            l.median_ms,
            l.p95_ms,
            l.fps,
            report.scaling.median_ms,
            report.network.median_ms,
            report.decoding.median_ms,
            report.second_look.median_ms
        )?;
    }
    Ok(ok)
}
