//! Writing a precomputed dataset: the feature pipeline's samples into a
//! store's shards, with a progress bar. `grin precompute` and the planner
//! (`auto` without a dataset) both come here.

use anyhow::{Context, Result};
use grin_features::{FeatureConfig, HostBatch, Pipeline, Split};
use grin_store::{Event, Plan, Writer};
use indicatif::{ProgressBar, ProgressStyle};
use std::ops::Range;
use std::path::Path;

/// Writes `shards` of `plan` into `out` (finished shards are reused, so an
/// interrupted run picks up where it stopped).
pub fn write_store(
    features: &FeatureConfig,
    plan: Plan,
    shards: Range<u64>,
    out: &Path,
) -> Result<grin_store::Summary> {
    let writer = Writer::create(out, plan)?;
    // A store holds the generator's samples before class balance: the
    // store modes apply `[features.balance]` once, when they draw records
    // (`grin_store::BatchOrder`), as on-the-fly applies it once when it
    // generates.
    let unbalanced = FeatureConfig { balance: None, ..features.clone() };
    let pipeline = Pipeline::new(&unbalanced, Split::Train).context("features")?;
    let mut bar: Option<ProgressBar> = None;
    let mut progress = |event: Event| match event {
        Event::Plan { reused_shards, reused_records, pending_records, .. } => {
            if reused_shards > 0 {
                eprintln!("reusing {reused_shards} finished shards ({reused_records} samples)");
            }
            let b = ProgressBar::new(pending_records);
            b.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{wide_bar}] {pos}/{len} samples  {per_sec}  ETA {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar = Some(b);
        }
        Event::Redo { file, reason } => eprintln!("rewriting {file}: {reason}"),
        Event::Records(n) => {
            if let Some(b) = &bar {
                b.inc(n);
            }
        }
    };
    let fill = |indices: &[u64], batch: &mut HostBatch| pipeline.fill_batch(indices, batch);
    let summary = writer.run(shards, &fill, &mut progress);
    if let Some(b) = &bar {
        b.finish();
    }
    let summary = summary?;
    if let Some(skips) = pipeline.skips().summary() {
        eprintln!("{skips}");
    }
    Ok(summary)
}

/// A whole dataset of `samples` for `features` in `out`, default shard size.
pub fn write_whole_store(features: &FeatureConfig, samples: u64, out: &Path) -> Result<grin_store::Summary> {
    let plan = Plan::for_features(features, samples, grin_store::DEFAULT_SHARD_BYTES)?;
    let shards = 0..plan.shard_count;
    write_store(features, plan, shards, out)
}
