//! Writes held-out scenes (the test split) as PNGs plus their ground truth,
//! for the latency/AP benchmark and the committed test image: synthetic
//! scenes from the project's own generator, or, with `--crops ROOT`,
//! SMILEsmileD crops composited into scenes (crops of the test split only).
//!
//! `cargo run --release -p grin-infer --example export_scenes -- --out DIR --count 50 --width 320 --height 240`
//!
//! `DIR/truth.json`: `{"width", "height", "seed", "scenes": [{"image", "boxes": [[x0,y0,x1,y1], ...], "smile": [true|false|null, ...]}]}`.

use anyhow::{Context, Result};
use clap::Parser;
use grin_features::{FeatureConfig, Pipeline, Smile, SourceConfig, Split};
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
}

#[derive(Serialize)]
struct Scene {
    image: String,
    boxes: Vec<[f32; 4]>,
    smile: Vec<Option<bool>>,
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
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}: cannot create", args.out.display()))?;
    let mut scenes = Vec::new();
    for index in args.start..args.start + args.count {
        let s = pipeline.sample(index)?;
        let name = format!("scene-{index:04}.png");
        let path = args.out.join(&name);
        let saved = match s.channels {
            1 => GrayImage::from_raw(s.width, s.height, s.pixels).map(|i| i.save(&path)),
            _ => RgbImage::from_raw(s.width, s.height, s.pixels).map(|i| i.save(&path)),
        };
        saved.context("sample size does not match its pixels")?.with_context(|| format!("{}", path.display()))?;
        scenes.push(Scene {
            image: name,
            boxes: s.boxes.iter().map(|b| [b.x0, b.y0, b.x1, b.y1]).collect(),
            smile: s
                .boxes
                .iter()
                .map(|b| match b.smile {
                    Smile::Yes => Some(true),
                    Smile::No => Some(false),
                    Smile::Unknown => None,
                })
                .collect(),
        });
    }
    let truth = Truth { width: args.width, height: args.height, seed: args.seed, scenes };
    let path = args.out.join("truth.json");
    std::fs::write(&path, serde_json::to_string_pretty(&truth)?).with_context(|| format!("{}", path.display()))?;
    println!("wrote {} scenes and {}", truth.scenes.len(), path.display());
    Ok(())
}
