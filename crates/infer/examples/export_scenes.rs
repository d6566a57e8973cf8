//! Writes held-out scenes (the test split) as PNGs plus their ground truth,
//! for the latency/AP benchmark and the committed test image: synthetic
//! scenes from the project's own generator, or, with `--crops ROOT`,
//! SMILEsmileD crops composited into scenes (crops of the test split only).
//!
//! `cargo run --release -p grin-infer --example export_scenes -- --out DIR --count 50 --width 320 --height 240`
//!
//! With `--caltech ROOT`, `--celeba-images DIR --celeba-attr FILE` and/or
//! `--face-free DIR` (face-free images, source `face-free`) it
//! writes held-out real photos instead (the test split by file name, the
//! split every grin config uses), each letterboxed to the given size, so
//! grin-detect and a peer see identical pixels (`--original`: each at its
//! own size, decoded once and saved as PNG, so each detector reads it at
//! its own default). `--zoom 2` shows each
//! photo twice as large, cut to the size around its centre: faces as close
//! to the camera as a person leaning in to a robot (sources named `-x2`).
//!
//! `DIR/truth.json`: `{"width", "height", "seed", "scenes": [{"image", "boxes": [[x0,y0,x1,y1], ...],
//! "smile": [true|false|null, ...], "ignore": [[x0,y0,x1,y1], ...], "source", "portrait"}]}`;
//! `ignore` holds faces under `--min-face` px (and cut-off faces): a detection
//! on one is neither a hit nor a false positive.

use anyhow::{Context, Result};
use clap::Parser;
use grin_features::{photos_of_split, FeatureConfig, PhotoCrops, Pipeline, Sample, SourceConfig, Split};
use image::{GrayImage, RgbImage};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 50)]
    count: u64,
    #[arg(long, default_value_t = 320)]
    width: u32,
    #[arg(long, default_value_t = 240)]
    height: u32,
    #[arg(long, default_value_t = 1)]
    channels: u32,
    /// The demo config's seed; scenes come from the test split, which
    /// training never draws from.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[arg(long, default_value_t = 4)]
    max_faces: usize,
    #[arg(long, default_value_t = 16.0)]
    min_face: f32,
    #[arg(long, default_value_t = 160.0)]
    max_face: f32,
    #[arg(long, default_value_t = 1.0)]
    hard_negatives: f32,
    /// Composite crops from this `smile/` + `no_smile/` folder instead of
    /// drawing synthetic faces.
    #[arg(long)]
    crops: Option<PathBuf>,
    /// Rotation range of composited crops, in degrees.
    #[arg(long, default_value_t = 15.0)]
    rotation_deg: f32,
    /// First sample index, so disjoint sets can be drawn.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Held-out Caltech WebFaces photos from this folder.
    #[arg(long)]
    caltech: Option<PathBuf>,
    /// Held-out FDDB news photos from this FDDB root (`images/`, `FDDB-folds/`).
    #[arg(long)]
    fddb: Option<PathBuf>,
    /// Held-out CelebA aligned portraits from this folder ...
    #[arg(long, requires = "celeba_attr")]
    celeba_images: Option<PathBuf>,
    /// ... with this attribute file.
    #[arg(long, requires = "celeba_images")]
    celeba_attr: Option<PathBuf>,
    /// Held-out face-free images from this folder (a negatives source's
    /// `images`, `scripts/negatives.sh`): every detection on them is false.
    #[arg(long)]
    face_free: Option<PathBuf>,
    /// With photos: letterbox at this many times the size, then cut the
    /// size out of the middle.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    zoom: u32,
    /// With photos: the validation split (where settings are chosen)
    /// instead of the test split (what is reported).
    #[arg(long, conflicts_with = "training")]
    validation: bool,
    /// With photos: the training split (where a box rule is fitted).
    #[arg(long)]
    training: bool,
    /// With photos: each at its own size (no letterbox), for detectors run
    /// at their own defaults; `--width`/`--height` are not used.
    #[arg(long, conflicts_with = "zoom")]
    original: bool,
}

#[derive(Serialize)]
struct Scene {
    image: String,
    boxes: Vec<[f32; 4]>,
    smile: Vec<Option<bool>>,
    ignore: Vec<[f32; 4]>,
    source: String,
    portrait: bool,
}

#[derive(Serialize)]
struct Truth {
    width: u32,
    height: u32,
    seed: u64,
    scenes: Vec<Scene>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}: cannot create", args.out.display()))?;
    if args.caltech.is_some() || args.fddb.is_some() || args.celeba_images.is_some() || args.face_free.is_some() {
        return export_photos(&args);
    }
    let cfg = FeatureConfig {
        width: args.width,
        height: args.height,
        channels: args.channels,
        seed: args.seed,
        source: match &args.crops {
            Some(root) => SourceConfig::Crops {
                root: root.clone(),
                max_faces: args.max_faces,
                min_face: args.min_face,
                max_face: args.max_face,
                rotation_deg: args.rotation_deg,
                backgrounds: None,
            },
            None => SourceConfig::Synthetic {
                max_faces: args.max_faces,
                min_face: args.min_face,
                max_face: args.max_face,
                hard_negatives: args.hard_negatives,
            },
        },
        ..FeatureConfig::default()
    };
    let pipeline = Pipeline::new(&cfg, Split::Test)?;
    let mut scenes = Vec::new();
    for index in args.start..args.start + args.count {
        let s = pipeline.sample(index)?;
        let name = format!("scene-{index:04}.png");
        let path = args.out.join(&name);
        save(&s, &path)?;
        scenes.push(scene(name, &s, 0.0, pipeline.source().name(), false));
    }
    let truth = Truth { width: args.width, height: args.height, seed: args.seed, scenes };
    let path = args.out.join("truth.json");
    std::fs::write(&path, serde_json::to_string_pretty(&truth)?).with_context(|| format!("{}", path.display()))?;
    println!("wrote {} scenes and {}", truth.scenes.len(), path.display());
    Ok(())
}

fn save(s: &Sample, path: &std::path::Path) -> Result<()> {
    let saved = match s.channels {
        1 => GrayImage::from_raw(s.width, s.height, s.pixels.clone()).map(|i| i.save(path)),
        _ => RgbImage::from_raw(s.width, s.height, s.pixels.clone()).map(|i| i.save(path)),
    };
    saved.context("sample size does not match its pixels")?.with_context(|| format!("{}", path.display()))
}

/// The `width` x `height` window at the middle of a sample letterboxed to
/// a larger size (the letterbox centres the photo, so this is the photo's
/// middle). A face with less of its box inside the window than a training
/// crop keeps as a face (`crops.min_visible`'s default) becomes an ignore
/// region; the rest are faces cut by the frame, their boxes cut to it.
fn middle(s: &Sample, width: u32, height: u32) -> Sample {
    let c = s.channels as usize;
    let (x0, y0) = ((s.width - width) / 2, (s.height - height) / 2);
    let mut pixels = Vec::with_capacity((width * height) as usize * c);
    for y in y0..y0 + height {
        let row = (y * s.width + x0) as usize * c;
        pixels.extend_from_slice(&s.pixels[row..row + width as usize * c]);
    }
    let (fx0, fy0) = (x0 as f32, y0 as f32);
    let boxes = s
        .boxes
        .iter()
        .filter_map(|b| {
            let inside = grin_features::FaceBox {
                x0: (b.x0 - fx0).clamp(0.0, width as f32),
                y0: (b.y0 - fy0).clamp(0.0, height as f32),
                x1: (b.x1 - fx0).clamp(0.0, width as f32),
                y1: (b.y1 - fy0).clamp(0.0, height as f32),
                ..*b
            };
            let area = |f: &grin_features::FaceBox| (f.x1 - f.x0).max(0.0) * (f.y1 - f.y0).max(0.0);
            let kept = area(&inside) / area(b).max(1e-6);
            (kept > 0.0).then(|| {
                let smile =
                    if kept < PhotoCrops::default().min_visible { grin_features::Smile::Ignore } else { b.smile };
                grin_features::FaceBox { smile, ..inside }
            })
        })
        .collect();
    Sample { width, height, channels: s.channels, pixels, boxes }
}

/// Faces of at least `min_face` px are scored; the rest are ignore regions.
fn scene(image: String, s: &Sample, min_face: f32, source: &str, portrait: bool) -> Scene {
    let scored = |b: &&grin_features::FaceBox| b.smile.is_face() && (b.x1 - b.x0).max(b.y1 - b.y0) >= min_face;
    Scene {
        image,
        boxes: s.boxes.iter().filter(scored).map(|b| b.corners()).collect(),
        smile: s.boxes.iter().filter(scored).map(|b| b.smile.smiling()).collect(),
        ignore: s.boxes.iter().filter(|b| !scored(b)).map(|b| b.corners()).collect(),
        source: source.into(),
        portrait,
    }
}

/// Held-out real photos, `--count` per source, letterboxed to the size.
fn export_photos(args: &Args) -> Result<()> {
    let mut parts = Vec::new();
    if let Some(root) = &args.caltech {
        parts.push(SourceConfig::Caltech { root: root.clone(), crops: PhotoCrops::default() });
    }
    if let Some(root) = &args.fddb {
        parts.push(SourceConfig::Fddb { root: root.clone(), crops: PhotoCrops::default() });
    }
    if let (Some(images), Some(attr)) = (&args.celeba_images, &args.celeba_attr) {
        parts.push(SourceConfig::CelebaAligned {
            images: images.clone(),
            attr: attr.clone(),
            crops: PhotoCrops::default(),
        });
    }
    if let Some(images) = &args.face_free {
        parts.push(SourceConfig::Negatives { images: Some(images.clone()), mined: None, graphics: 0.0, zoom_in: 0.0 });
    }
    let cfg = FeatureConfig {
        channels: args.channels,
        source: SourceConfig::Mix { weights: vec![1.0; parts.len()], parts },
        ..FeatureConfig::default()
    };
    let mut scenes = Vec::new();
    let split = match (args.validation, args.training) {
        (true, _) => Split::Val,
        (_, true) => Split::Train,
        _ => Split::Test,
    };
    for set in photos_of_split(&cfg, split, args.count as usize)? {
        let source = if args.zoom == 1 { set.name.to_string() } else { format!("{}-x{}", set.name, args.zoom) };
        for i in 0..set.len() {
            let (width, height) = if args.original {
                let bound = grin_image::ImageBound::new(grin_image::DEFAULT_MAX_PIXELS, "--original")
                    .map_err(anyhow::Error::msg)?;
                let photo = grin_image::read_image(set.image_path(i), bound)?;
                (photo.width(), photo.height())
            } else {
                (args.width * args.zoom, args.height * args.zoom)
            };
            let s = set.letterboxed(i, width, height, args.channels)?;
            let s = if args.zoom == 1 { s } else { middle(&s, args.width, args.height) };
            let name = format!("{source}-{i:04}.png");
            save(&s, &args.out.join(&name))?;
            scenes.push(scene(name, &s, args.min_face, &source, set.portraits));
        }
    }
    // Photos at their own sizes have no one frame size: 0 x 0 says so.
    let (width, height) = if args.original { (0, 0) } else { (args.width, args.height) };
    let truth = Truth { width, height, seed: args.seed, scenes };
    let path = args.out.join("truth.json");
    std::fs::write(&path, serde_json::to_string_pretty(&truth)?).with_context(|| format!("{}", path.display()))?;
    println!("wrote {} held-out photos and {}", truth.scenes.len(), path.display());
    Ok(())
}
