//! `grin precompute`, `grin verify`, `grin store bench|info`: the
//! precomputed-dataset commands.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use grin_features::SceneClass;
use grin_store::{Plan, Store};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// `grin store bench`'s order is held in memory: its bound, per flag too.
const MAX_ORDER: u64 = grin_train::bench::MAX_ORDER as u64;

#[derive(Args)]
pub(crate) struct PrecomputeArgs {
    /// The config's `[features]` table decides every sample (`--config` is
    /// required unless `--merge` is given).
    #[command(flatten)]
    pub config: super::OptionalConfigArgs,
    /// Dataset folder [default: `train.store` of the config, else data/<name>].
    #[arg(long, value_name = super::OUT_DIR)]
    pub out: Option<PathBuf>,
    /// Training samples to write [default: `train.store_samples`; at most a billion].
    #[arg(long, value_parser = super::count::<u64>(grin_store::MAX_SAMPLES))]
    pub samples: Option<u64>,
    /// Write only shards A..B (half-open) and a part manifest, for one job of
    /// an array; `--merge` joins the parts.
    #[arg(long, value_name = "A..B")]
    pub shards: Option<String>,
    /// Shard file size: bytes, or with a K/M/G suffix.
    // A hyphen value reaches the parser, which names it (`-5M` was "unexpected argument").
    #[arg(long, default_value = "128M", value_parser = grin_train::parse_shard_bytes, allow_hyphen_values = true)]
    pub shard_size: u64,
    /// Print the shard count for these settings and exit (to size a job array).
    #[arg(long, conflicts_with = "shards")]
    pub plan: bool,
    /// Join the part manifests in DIR into DIR/manifest.json, checking that they agree.
    // The parts were written with their own settings: every flag that
    // would change one is refused beside it (round 14: `--shard-size` and
    // `--set` were dropped without a word).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["config", "sets", "out", "samples", "shards", "shard_size", "plan"]
    )]
    pub merge: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The dataset folder (`grin precompute --out`).
    pub dir: PathBuf,
}

#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Shuffled batch read throughput against memcpy, with the data in page cache.
    Bench(BenchArgs),
    /// A dataset's layout, class counts, shards and fingerprint.
    Info(InfoArgs),
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// The dataset folder.
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, default_value_t = 256, value_parser = super::count::<usize>(MAX_ORDER))]
    pub batch: usize,
    /// Batches per timed pass [default: one epoch's worth].
    #[arg(long, value_parser = super::count::<usize>(MAX_ORDER))]
    pub batches: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Timed passes per reader; the best is reported.
    #[arg(long, default_value_t = 3, value_parser = super::count::<usize>(super::MAX_ITEMS))]
    pub repeats: usize,
    /// Write the shuffled batches here (u64 LE record indices) for the Python peer.
    #[arg(long, value_name = super::OUT)]
    pub order_out: Option<PathBuf>,
    /// Write the figures here as JSON (for scripts/bench-store.sh).
    #[arg(long, value_name = super::OUT)]
    pub json: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct InfoArgs {
    pub dir: PathBuf,
}

pub(crate) fn precompute(args: PrecomputeArgs) -> Result<()> {
    if let Some(dir) = &args.merge {
        let manifest = grin_store::merge(dir)?;
        outln!(
            "merged {} shards ({} samples) into {}; check every byte with `grin verify {}`",
            manifest.shards.len(),
            manifest.samples,
            dir.join(grin_store::MANIFEST_FILE).display(),
            dir.display()
        );
        return Ok(());
    }
    let loaded = args.config.load()?.context("--config is required (or --merge DIR)")?;
    let config = &loaded.config;
    let samples = args.samples.unwrap_or(config.train.store_samples as u64);
    let out = args.out.clone().unwrap_or_else(|| config.store_dir());
    // Never into a folder it reads photos from, nor over the config.
    super::check_dataset_folder("--out", &out, &loaded.inputs())?;
    let plan = Plan::for_features(&config.features, samples, args.shard_size)?;
    let describe = format!(
        "{} samples of {}x{}x{} in {} shards of {} records ({} bytes each)",
        plan.samples,
        plan.layout.width,
        plan.layout.height,
        plan.layout.channels,
        plan.shard_count,
        plan.records_per_shard,
        plan.layout.record_bytes
    );
    if args.plan {
        outln!("{describe}");
        outln!("shards: {}", plan.shard_count);
        return Ok(());
    }
    let range = match &args.shards {
        Some(text) => grin_train::parse_shard_range(text, plan.shard_count)?,
        None => 0..plan.shard_count,
    };
    eprintln!("precompute: {describe} -> {} (shards {}..{})", out.display(), range.start, range.end);
    super::quit_on_interrupt(
        "precompute",
        format!("the shards it finished in {} are kept, and the same command goes on from them", out.display()),
    )?;
    // Its errors name the dataset folder or the data file at fault; the
    // config's name in front would blame the config for a locked folder.
    let summary = grin_train::write_store(&config.features, plan, range, &out)?;
    outln!(
        "wrote {} shards, reused {}: {} ({})",
        summary.written_shards,
        summary.reused_shards,
        summary.manifest.display(),
        summary.class_counts
    );
    Ok(())
}

pub(crate) fn verify(args: VerifyArgs) -> Result<()> {
    grin_output::refuse_stdout_on_inputs(&[&args.dir])?;
    let manifest = grin_store::Manifest::load(&args.dir)?;
    let total: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("verify [{wide_bar}] {bytes}/{total_bytes}  {bytes_per_sec}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let report = grin_store::verify(&args.dir, &mut |n| bar.inc(n));
    bar.finish_and_clear();
    let report = report?;
    for bad in &report.bad {
        outln!("BAD {bad}");
    }
    if !report.ok() {
        bail!(
            "{}: {} problem(s) in {} shard(s); rerun `grin precompute` with the same config to rewrite them",
            args.dir.display(),
            report.bad.len(),
            report.bad.iter().map(|b| &b.file).collect::<std::collections::BTreeSet<_>>().len()
        );
    }
    outln!(
        "ok: {} shards, {} records, {:.1} MB, layout {}x{}x{} ({} bytes/record), every checksum matches",
        report.shards,
        report.manifest.samples,
        report.bytes as f64 / 1e6,
        report.manifest.layout.width,
        report.manifest.layout.height,
        report.manifest.layout.channels,
        report.manifest.layout.record_bytes
    );
    Ok(())
}

pub(crate) fn run(command: StoreCommand) -> Result<()> {
    match command {
        StoreCommand::Bench(args) => bench(args),
        StoreCommand::Info(args) => info(args),
    }
}

fn info(args: InfoArgs) -> Result<()> {
    grin_output::refuse_stdout_on_inputs(&[&args.dir])?;
    let store = Store::open(&args.dir)?;
    let m = store.manifest();
    outln!("{}", args.dir.display());
    outln!(
        "  {} records of {}x{}x{}, {} bytes each ({:.1} MB), {} shards of {} records",
        m.samples,
        m.layout.width,
        m.layout.height,
        m.layout.channels,
        m.layout.record_bytes,
        store.data_bytes() as f64 / 1e6,
        m.shards.len(),
        m.records_per_shard
    );
    for class in SceneClass::ALL {
        let n = m.class_counts.get(class);
        outln!("  {class}: {n} ({:.1}%)", 100.0 * n as f64 / m.samples as f64);
    }
    if m.skipped_inputs > 0 {
        outln!("  made without {} inputs the source skipped while it loaded", m.skipped_inputs);
    }
    outln!("  fingerprint {}: {}", m.fingerprint.hash, grin_store::fingerprint::canonical(&m.fingerprint.config));
    Ok(())
}

fn bench(args: BenchArgs) -> Result<()> {
    // The input first: a missing `--dir` is the mistake to name, not an
    // output inside it (round 17 blamed `--order-out`).
    let store = Store::open(&args.dir)?;
    // Both outputs are checked before any timing, not after it (issue 90).
    let outputs: Vec<&Path> = args.order_out.iter().chain(&args.json).map(PathBuf::as_path).collect();
    super::check_outputs(&outputs, &[&args.dir])?;
    if let Some(json) = &args.json {
        super::check_kind("--json", json, "JSON", "json")?;
    }
    // A batch holds its records in memory at once: never more than the
    // store has (--batch 1000000 on 64 records reserved 19.5 GB, round 8).
    let mut args = args;
    if store.is_empty() {
        anyhow::bail!("{}: holds no records to time", args.dir.display());
    }
    if args.batch as u64 > store.len() {
        eprintln!(
            "note: --batch {}: {} holds {} records; batches of {}",
            args.batch,
            args.dir.display(),
            store.len(),
            store.len()
        );
        args.batch = store.len() as usize;
    }
    let batches = args.batches.unwrap_or_else(|| (store.len() as usize).div_ceil(args.batch));
    // The order lives in memory (8 bytes an index): bounded before it is drawn.
    if batches.saturating_mul(args.batch) > grin_train::bench::MAX_ORDER {
        anyhow::bail!(
            "--batches {batches} of --batch {}: more than the {} record indices a benchmark holds in memory",
            args.batch,
            grin_train::bench::MAX_ORDER
        );
    }
    let order = grin_train::bench::batch_order(&store, args.batch, batches, args.seed)?;
    if let Some(path) = &args.order_out {
        grin_train::bench::write_order(path, &args.dir, &order)?;
    }
    grin_train::bench::warm_page_cache(&store)?;
    let results = grin_train::bench::time_reads(&store, &order, args.repeats, args.seed)?;
    outln!(
        "{}: {} records of {} bytes, {} shuffled batches of {} (data in page cache, best of {})",
        args.dir.display(),
        store.len(),
        store.layout().record_bytes,
        batches,
        args.batch,
        args.repeats
    );
    let limit = results.iter().find(|r| r.name == "memcpy, shuffled").map_or(f64::NAN, |r| r.samples_per_s());
    outln!("{:<32} {:>12} {:>8} {:>10}", "reader", "samples/s", "GB/s", "of memcpy");
    for r in &results {
        outln!(
            "{:<32} {:>12.0} {:>8.2} {:>9.0}%",
            r.name,
            r.samples_per_s(),
            r.gb_per_s(),
            100.0 * r.samples_per_s() / limit
        );
    }
    if let Some(path) = &args.json {
        let rows: Vec<serde_json::Value> = results
            .iter()
            .map(|r| {
                serde_json::json!({"name": r.name, "samples": r.samples, "bytes": r.bytes, "seconds": r.seconds,
                    "samples_per_s": r.samples_per_s(), "gb_per_s": r.gb_per_s()})
            })
            .collect();
        let doc = serde_json::json!({"dir": args.dir, "batch": args.batch, "batches": batches,
            "record_bytes": store.layout().record_bytes, "results": rows});
        grin_output::write_file(path, &[&args.dir], &serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(())
}
