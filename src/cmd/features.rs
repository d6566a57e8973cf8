//! `grin features bench|preview`: what generation costs, and what it looks like.

use anyhow::Result;
use clap::{Args, Subcommand};
use grin_features::bench::{self, StageTiming, TgReport, Throughput};
use grin_features::{FeatureConfig, Pipeline, SceneClass, Split};
use grin_image::SkipCounts;
use std::path::PathBuf;

mod export_crops;
use export_crops::{export_crops, ExportCropsArgs};

#[derive(Subcommand)]
pub(crate) enum FeaturesCommand {
    /// Measure T_g per sample (median, p95) per source and stage, single-threaded and with C workers.
    Bench(BenchArgs),
    /// Write a contact sheet of generated samples with boxes and smile labels drawn.
    Preview(PreviewArgs),
    /// Write 64x64 face crops cut from synthetic scenes in the SMILEsmileD
    /// layout (smile/, no_smile/): bench input where the real data is absent.
    #[command(hide = true)]
    ExportCrops(ExportCropsArgs),
}

/// The config (its `[features]` table is used) and the split to generate from.
#[derive(Args)]
pub(crate) struct FeatureArgs {
    #[command(flatten)]
    pub config: super::ConfigArgs,
    /// Which split's inputs to generate from (augmentation runs on train only).
    #[arg(long, value_enum, default_value = "train")]
    pub split: Split,
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    pub common: FeatureArgs,
    /// Timed samples per measurement (warm-up comes on top).
    #[arg(long, default_value_t = 300, value_parser = super::count::<usize>(super::MAX_ITEMS))]
    pub samples: usize,
    /// Worker threads C for the parallel figure (default: the config's, 0 = all cores).
    #[arg(long, value_parser = super::count_or_zero::<usize>(grin_features::MAX_WORKERS as u64))]
    pub workers: Option<usize>,
    /// Print one JSON object instead of the table (for scripts).
    #[arg(long, hide = true)]
    pub json: bool,
}

#[derive(Args)]
pub(crate) struct PreviewArgs {
    #[command(flatten)]
    pub common: FeatureArgs,
    /// Output PNG.
    #[arg(long, value_name = super::OUT)]
    pub out: PathBuf,
    /// Samples drawn (the sheet is held in memory: at most 1024 of them).
    #[arg(long, default_value_t = 16, value_parser = super::count::<usize>(MAX_PREVIEW))]
    pub count: usize,
    /// Samples per row (at most 1024).
    #[arg(long, default_value_t = 4, value_parser = super::count::<usize>(MAX_PREVIEW))]
    pub cols: usize,
}

/// The most samples one preview sheet draws, or puts in a row: 1024 of
/// 640x480 RGB would be a 0.9 GB sheet.
const MAX_PREVIEW: u64 = 1024;

pub(crate) fn run(command: FeaturesCommand) -> Result<()> {
    match command {
        FeaturesCommand::Bench(args) => run_bench(args),
        FeaturesCommand::Preview(args) => run_preview(args),
        FeaturesCommand::ExportCrops(args) => export_crops(args),
    }
}

fn load_features(args: &FeatureArgs) -> Result<FeatureConfig> {
    Ok(args.config.load()?.config.features)
}

/// A pipeline over a freshly opened source, plus what that source skipped while loading.
fn open(cfg: &FeatureConfig, split: Split) -> Result<(Pipeline, SkipCounts)> {
    let opened = bench::open_source(cfg, split)?;
    let pipeline = Pipeline::from_source(cfg, split, opened.source)?;
    Ok((pipeline, opened.load_skips))
}

#[derive(serde::Serialize)]
struct BenchReport {
    source: String,
    split: String,
    width: u32,
    height: u32,
    channels: u32,
    tg: TgReport,
    stages: Vec<StageTiming>,
    single: Throughput,
    parallel: Throughput,
    balance_targets: Option<[f64; 3]>,
    skipped_at_load: u64,
    skipped_at_scene: u64,
}

fn run_bench(args: BenchArgs) -> Result<()> {
    let mut cfg = load_features(&args.common)?;
    if let Some(w) = args.workers {
        cfg.workers = w;
    }
    let split: Split = args.common.split;
    let samples = args.samples.max(1);
    let (parallel, load_skips) = open(&cfg, split)?;
    let source_name = parallel.source().name().to_string();
    let single_cfg = FeatureConfig { workers: 1, ..cfg.clone() };
    let single = Pipeline::from_source(&single_cfg, split, bench::open_source(&single_cfg, split)?.source)?;

    let tg = bench::measure_tg(&single, samples)?;
    let augment = if split == Split::Train { cfg.augment.clone() } else { grin_features::AugmentConfig::off() };
    let mut stages = bench::measure_stages(single.source(), &augment, cfg.seed, samples)?;
    if split != Split::Train {
        stages.truncate(1);
    }
    let batch = 32;
    let single_tp = best_of(ROUNDS, || bench::measure_throughput(&single, samples, batch))?;
    let parallel_samples = samples.max(parallel.workers() * batch);
    let parallel_tp = best_of(ROUNDS, || bench::measure_throughput(&parallel, parallel_samples, batch))?;
    let skipped_at_scene = single.skips().total() + parallel.skips().total();
    let report = BenchReport {
        source: source_name,
        split: format!("{split:?}").to_lowercase(),
        width: cfg.width,
        height: cfg.height,
        channels: cfg.channels,
        tg,
        stages,
        single: single_tp,
        parallel: parallel_tp,
        balance_targets: parallel.balancer().map(|b| b.targets()),
        skipped_at_load: load_skips.total(),
        skipped_at_scene,
    };
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    print_bench(&report)?;
    for (what, counts) in [
        ("loading", &load_skips),
        ("generation (1 worker)", single.skips()),
        ("generation (C workers)", parallel.skips()),
    ] {
        match counts.summary() {
            Some(s) => outln!("skips during {what}: {s}"),
            None => outln!("skips during {what}: none"),
        }
    }
    Ok(())
}

/// Throughput rounds; the best is reported, as other processes on a shared
/// machine only ever make a round slower.
const ROUNDS: usize = 3;

fn best_of(
    rounds: usize,
    mut measure: impl FnMut() -> Result<Throughput, grin_image::InputError>,
) -> Result<Throughput> {
    let mut best: Option<Throughput> = None;
    for _ in 0..rounds {
        let t = measure()?;
        if best.as_ref().is_none_or(|b| t.samples_per_s > b.samples_per_s) {
            best = Some(t);
        }
    }
    Ok(best.expect("at least one round"))
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

fn print_bench(r: &BenchReport) -> Result<()> {
    outln!(
        "grin features bench: source {} ({} split), {}x{}x{}, {} timed samples after {} warm-up",
        r.source,
        r.split,
        r.width,
        r.height,
        r.channels,
        r.tg.samples,
        r.tg.warmup
    );
    outln!(
        "T_g single-threaded (whole sample): median {}  p95 {}  mean {}",
        ms(r.tg.median_s),
        ms(r.tg.p95_s),
        ms(r.tg.mean_s)
    );
    outln!("{:<16} {:>6} {:>12} {:>12} {:>12}", "stage", "p", "median", "p95", "mean");
    for s in &r.stages {
        outln!(
            "{:<16} {:>6.2} {:>12} {:>12} {:>12}",
            s.stage,
            s.probability,
            ms(s.timing.median_s),
            ms(s.timing.p95_s),
            ms(s.timing.mean_s)
        );
    }
    outln!("(stage figures are per application; p is how often the pipeline applies it)");
    outln!("throughput, best of {ROUNDS} rounds through fill_batch in batches of 32:");
    for t in [&r.single, &r.parallel] {
        outln!(
            "  {} worker(s): {:.0} samples/s, {:.0} samples/s per core ({} samples in {:.2} s)",
            t.workers,
            t.samples_per_s,
            t.per_core,
            t.samples,
            t.wall_s
        );
    }
    outln!(
        "speed-up with {} workers: {:.2}x",
        r.parallel.workers,
        r.parallel.samples_per_s / r.single.samples_per_s.max(f64::MIN_POSITIVE)
    );
    let names = ["smiling", "non_smiling", "face_free"];
    debug_assert_eq!(SceneClass::ALL.map(|c| c.index()), [0, 1, 2]);
    let achieved: Vec<String> =
        names.iter().zip(r.parallel.class_fractions).map(|(n, f)| format!("{n} {f:.3}")).collect();
    match r.balance_targets {
        Some(t) => {
            let target: Vec<String> = names.iter().zip(t).map(|(n, f)| format!("{n} {f:.3}")).collect();
            outln!("balance: achieved {} (target {})", achieved.join(", "), target.join(", "));
        }
        None => outln!("scene classes (no balancing configured): {}", achieved.join(", ")),
    }
    Ok(())
}

fn run_preview(args: PreviewArgs) -> Result<()> {
    let cfg = load_features(&args.common)?;
    // Never over the config, a photo the sheet is drawn from (a preview
    // --out onto a training photo replaced it), anywhere in the source's
    // folders or a photo its annotations name outside them (`../`, an
    // absolute name; any split): checked now, and again by the write.
    let outside = grin_features::photos_named_outside(&cfg);
    let mut inputs = cfg.source.inputs();
    inputs.extend(outside.iter().map(PathBuf::as_path));
    inputs.push(&args.common.config.config);
    super::check_outputs(&[&args.out], &inputs)?;
    // The sheet's format and size, before a sample is made: a JPEG past its
    // side, or a sheet past the memory left, was found only after (issue
    // 90, round 9). Asked for at once: the samples, the sheet and its
    // encoding, as a sheet's worth each.
    let format = grin_image::picture_format(&args.out, "--out").map_err(anyhow::Error::msg)?;
    let size = grin_features::sheet_size(args.count, args.cols, (cfg.width, cfg.height));
    grin_image::check_picture(&args.out, "--out", format, size, 3).map_err(anyhow::Error::msg)?;
    let (pipeline, load_skips) = open(&cfg, args.common.split)?;
    let indices: Vec<u64> = (0..args.count.max(1) as u64).collect();
    let batch = pipeline.batch(&indices)?;
    let samples: Vec<_> = (0..batch.len).map(|i| batch.sample(i)).collect();
    let sheet = grin_features::contact_sheet(&samples, args.cols);
    let bytes = grin_image::encode_picture(&sheet, &args.out, format).map_err(anyhow::Error::msg)?;
    grin_output::write_file(&args.out, &inputs, &bytes)?;
    let faces: usize = samples.iter().map(|s| s.boxes.len()).sum();
    outln!(
        "wrote {} ({} samples, {} faces; green = smiling, red = not smiling, yellow = unknown)",
        args.out.display(),
        samples.len(),
        faces
    );
    for counts in [&load_skips, pipeline.skips()] {
        if let Some(s) = counts.summary() {
            outln!("{s}");
        }
    }
    Ok(())
}
