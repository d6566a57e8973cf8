//! What must hold for any bytes given to grin's parsers: one function per
//! fuzz target, each panicking when a promise breaks. `fuzz/` (cargo-fuzz,
//! libFuzzer) calls them with generated inputs; this crate's tests replay
//! every input that ever broke one (`fuzz/regressions/`) and the seeds
//! (`fuzz/seeds/`) under plain `cargo test`.
//!
//! Test scaffolding: it may depend on any grin crate, and nothing but `fuzz/`
//! and its own tests depends on it.

#![forbid(unsafe_code)]

use grin_features::{AnnotationText, BadLines};
use grin_image::{decode_image, ImageBound, OnBadSample, SkipCounts};
use grin_infer::stream::{decode_frame, FrameReader, InputFormat};
use std::path::Path;

/// A `.grin` model file's header and weights: any bytes load or are refused
/// with a message, never a panic.
pub fn model_file(data: &[u8]) {
    let device = Default::default();
    if let Ok((spec, _model)) = grin_model::file::from_bytes::<burn_ndarray::NdArray<f32>>(data, &device) {
        // What loads is a model the runner may build: its header passed the config's ranges.
        assert!(spec.model.validate().is_ok());
    }
}

/// A model file with its checksums recomputed over whatever the fuzzer made
/// of it ([`grin_model::file::resigned`]), so that mutations reach the
/// shapes and weights behind them: the file is refused with a message, or
/// it loads into grin-detect's runner and runs a frame. Never a panic.
pub fn model_weights(data: &[u8]) {
    let Some(file) = grin_model::file::resigned(data) else { return };
    let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("a temporary folder");
    let path = dir.path().join("model.grin");
    std::fs::write(&path, file).unwrap();
    if let Ok(mut runner) = grin_infer::Runner::load(grin_infer::ModelSource::File(path)) {
        if runner.set_run_size(64, 48).is_ok() {
            let channels = runner.spec().channels;
            let image =
                image::DynamicImage::ImageLuma8(image::GrayImage::from_fn(64, 48, |x, y| image::Luma([(x * y) as u8])));
            let frame = grin_infer::Frame::new(&image, channels, 64, 48).expect("a 64x48 frame fits in memory");
            let detections = runner.detect(frame);
            assert!(
                detections.iter().all(|d| d.score.is_finite() && d.x0.is_finite()),
                "finite weights, finite detections"
            );
        }
    }
}

/// A precomputed dataset's manifest and shard: the input is a 2-byte
/// manifest length, `manifest.json`, then `shard-00000.bin`. Opening either
/// refuses it with a message or gives records that all read back.
pub fn store(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let n = (u16::from_le_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
    let (manifest, shard) = data[2..].split_at(n);
    let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("a temporary folder");
    std::fs::write(dir.path().join("manifest.json"), manifest).unwrap();
    std::fs::write(dir.path().join("shard-00000.bin"), shard).unwrap();
    if let Ok(store) = grin_store::Store::open(dir.path()) {
        let _ = store.check_checksums();
        for i in 0..store.len().min(64) {
            // Sizes were checked at open: every record of the manifest is there.
            store.record(i).expect("a record the manifest lists reads back");
        }
    }
}

/// Config TOML and `--set` overrides: the first line of the input is a
/// `--set key=value`, the rest the file. Any text gives a config within
/// every key's range, or one line naming the file.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (set, file) = text.split_once('\n').unwrap_or(("", text));
    let sets: Vec<String> = if set.contains('=') { vec![set.to_string()] } else { vec![] };
    match grin_train::parse_config(file, "fuzz.toml", &sets) {
        Ok(config) => assert!(config.validate().is_ok()),
        Err(e) => {
            let message = format!("{e:#}");
            assert!(message.contains("fuzz.toml") || message.starts_with("--set"), "{message}");
        }
    }
}

/// WIDER, CelebA and JSONL annotation files and Caltech's landmarks: the
/// first byte picks the parser and whether bad lines are errors or skips.
/// Any text parses, or fails naming the file and line; every box that
/// comes out is finite with a positive size.
pub fn annotations(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let skips = SkipCounts::default();
    let on_bad = if pick & 0x80 == 0 { OnBadSample::Error } else { OnBadSample::Skip };
    let problems = BadLines { on_bad, skips: &skips };
    let file = AnnotationText { text, path: Path::new("fuzz.txt") };
    let images = Path::new("images");
    let parsed = match pick % 4 {
        0 => grin_features::parse_wider(file, images, problems),
        1 => {
            // The boxes file, a NUL, then the attribute file.
            let (bbox, attr) = text.split_once('\0').unwrap_or((text, ""));
            let bbox = AnnotationText { text: bbox, path: Path::new("fuzz.txt") };
            let attr = AnnotationText { text: attr, path: Path::new("attr.txt") };
            grin_features::parse_celeba(bbox, attr, images, problems)
        }
        2 => grin_features::parse_jsonl(file, problems),
        _ => grin_features::parse_caltech(file, images, problems),
    };
    match parsed {
        Ok(entries) => {
            for entry in &entries {
                for b in entry.faces.iter().map(|a| a.face) {
                    assert!([b.x0, b.y0, b.x1, b.y1].iter().all(|v| v.is_finite()) && b.x1 > b.x0 && b.y1 > b.y0);
                }
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz.txt") || e.to_string().contains("attr.txt"), "{e}"),
    }
}

/// `grin-detect --stream`'s frame cutter (MJPEG and raw frames) and frame
/// decoder: the first bytes pick the format and the frame size, the rest
/// is the stream. Every frame is cut and decoded or refused as a bad frame;
/// the stream always ends; a decoded frame is within the size bound.
pub fn stream_frames(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let format =
        [InputFormat::Mjpeg, InputFormat::Gray8, InputFormat::Rgb24, InputFormat::Yuv420][data[0] as usize % 4];
    let size =
        (data[1] != 0 && data[2] != 0).then(|| (2 * (data[1] as usize % 32 + 1), 2 * (data[2] as usize % 32 + 1)));
    let bound = ImageBound::new(1 << 20, "--max-pixels").unwrap();
    let Ok(mut reader) = FrameReader::new(std::io::Cursor::new(data[3..].to_vec()), format, size, bound) else {
        return;
    };
    let mut frames = 0;
    while let Some(frame) = reader.next_frame() {
        frames += 1;
        assert!(frames <= data.len() + 2, "the cutter made more frames than there are bytes");
        if let Ok(bytes) = frame {
            if let Ok(image) = decode_frame(bytes, format, size, 1, bound) {
                assert!(image.width() as u64 * image.height() as u64 <= bound.max_pixels);
            }
        }
    }
}

/// Image headers through the size bound: any bytes decode to a picture
/// within the bound, or are refused before a pixel buffer past it exists
/// (libFuzzer's -malloc_limit_mb in scripts/fuzz.sh catches one that is made).
pub fn image(data: &[u8]) {
    let bound = ImageBound::new(4_000_000, "--max-pixels").unwrap();
    if let Ok(image) = decode_image(data, bound) {
        assert!(image.width() as u64 * image.height() as u64 <= bound.max_pixels);
    }
}
