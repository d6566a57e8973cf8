//! Precomputed: memory-mapped shards written once by `grin precompute`,
//! read in a seeded order (optionally class-balanced draws) on the feed's
//! one producer thread.

use super::producer::BatchSource;
use anyhow::{bail, Context, Result};
use grin_features::{FeatureConfig, HostBatch};
use grin_store::{format_stale, BatchReader, Draws, OrderOptions, Store};
use std::path::Path;

/// Opens a precomputed dataset and refuses it when it was built from other
/// feature settings, unless the user said `--allow-stale`, or when a shard
/// no longer hashes to its checksum (every byte is read once: under a
/// second a GB from the page cache: docs/benchmarks.md has the figure).
pub fn open_store(dir: &Path, features: &FeatureConfig, allow_stale: bool) -> Result<Store> {
    let store = Store::open(dir).with_context(|| format!("{}: cannot open precomputed dataset", dir.display()))?;
    let started = std::time::Instant::now();
    store.check_checksums().with_context(|| format!("{}: refusing to train on a damaged dataset", dir.display()))?;
    eprintln!(
        "{}: {} shard(s), {:.2} GB, match their checksums ({:.2} s)",
        dir.display(),
        store.manifest().shards.len(),
        store.data_bytes() as f64 / 1e9,
        started.elapsed().as_secs_f64()
    );
    // --allow-stale may waive a changed recipe, never records this model cannot take.
    let l = store.layout();
    if (l.width, l.height, l.channels) != (features.width, features.height, features.channels) {
        bail!(
            "{}: records are {}x{}x{}, the config's features are {}x{}x{}; rebuild it with `grin precompute` (--allow-stale cannot waive a size)",
            dir.display(),
            l.width,
            l.height,
            l.channels,
            features.width,
            features.height,
            features.channels
        );
    }
    // The sample count is the store's business: any size may train.
    if let Err(keys) = store.check_fingerprint(features, store.len()) {
        let why = format_stale(&keys);
        if !allow_stale {
            // `why` already says what to do: rerun precompute, or --allow-stale.
            bail!("{}: {why}", dir.display());
        }
        eprintln!("warning: {}: {why} (training anyway: --allow-stale)", dir.display());
    }
    Ok(store)
}

/// How records are drawn from the store: `[features.balance]`'s class
/// fractions applied at read time, else every record once per epoch.
fn class_draws(features: &FeatureConfig) -> Draws {
    match &features.balance {
        Some(b) => Draws::ClassFractions(*b),
        None => Draws::Shuffled,
    }
}

/// Batches read from the store, resumed at batch `start`, on the feed's
/// producer thread.
pub(crate) struct Precomputed {
    reader: BatchReader,
}

impl Precomputed {
    pub(crate) fn new(store: &Store, order: &OrderOptions) -> Result<Self> {
        Ok(Precomputed { reader: BatchReader::new(store, order)? })
    }
}

/// The one batch order of both modes that read a store (precomputed reads
/// its records on the host, in-VRAM cuts the same records on the device):
/// seeded by `features.seed`, class fractions from `[features.balance]`,
/// from batch `start_batch` on.
pub(crate) fn batch_order(features: &FeatureConfig, batch_size: usize, start_batch: usize) -> OrderOptions {
    OrderOptions { batch_size, seed: features.seed, draws: class_draws(features), start_batch: start_batch as u64 }
}

impl BatchSource for Precomputed {
    type Error = anyhow::Error;

    fn empty_batch(&self) -> HostBatch {
        self.reader.empty_batch()
    }

    fn fill(&mut self, batch: &mut HostBatch) -> Result<()> {
        Ok(self.reader.read_next(batch)?)
    }
}
