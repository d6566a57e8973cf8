//! `grin store bench`: shuffled batch read throughput against the memcpy
//! limit, with the data in page cache, ending with the path training's
//! precomputed feed takes (its reader on its producer thread). The Python
//! peer (h5py, per-sample .npy) reads the same batches from the order file
//! written here. It lives beside the feed, not in grin-store, because that
//! last row is the feed's.

use crate::feed::precomputed::Precomputed;
use crate::feed::producer::Producer;
use anyhow::{Context, Result};
use grin_features::HostBatch;
use grin_store::{BatchOrder, Draws, OrderOptions, Store};
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    pub name: String,
    pub samples: u64,
    pub bytes: u64,
    pub seconds: f64,
}

impl Throughput {
    pub fn samples_per_s(&self) -> f64 {
        self.samples as f64 / self.seconds
    }

    pub fn gb_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e9
    }
}

/// The bench's order: every record once per epoch, from the first batch. The
/// order file and the feed row both follow it, so every row reads the same batches.
fn shuffled(batch_size: usize, seed: u64) -> OrderOptions {
    OrderOptions { batch_size, seed, draws: Draws::Shuffled, start_batch: 0 }
}

/// The most record indices one benchmark run's order holds: 256 MiB of
/// u64s, where `--batches 10^11` asked for 2.4 TB and aborted.
pub const MAX_ORDER: usize = 1 << 25;

/// The shuffled batches of one benchmark run.
pub fn batch_order(store: &Store, batch_size: usize, batches: usize, seed: u64) -> Result<Vec<Vec<u64>>> {
    let mut order = BatchOrder::new(store, &shuffled(batch_size, seed))?;
    Ok((0..batches)
        .map(|_| {
            let mut b = Vec::new();
            order.next_batch(&mut b);
            b
        })
        .collect())
}

/// Writes the batches as little-endian u64 record indices, batch after batch,
/// through the one output writer: never into `store`'s folder (truncating a
/// mapped shard killed the benchmark with SIGBUS, issue 80).
pub fn write_order(path: &Path, store: &Path, order: &[Vec<u64>]) -> Result<()> {
    grin_output::write_with(path, &[store], |out| {
        order.iter().flatten().try_for_each(|index| out.write_all(&index.to_le_bytes()))
    })
    .context("cannot write the batch order")
}

/// Reads every record once so the timed passes find it in page cache and
/// mapped into this process.
pub fn warm_page_cache(store: &Store) -> Result<u64> {
    let mut sum = 0u64;
    for index in 0..store.len() {
        let record = store.record(index)?;
        sum = sum.wrapping_add(record.iter().step_by(512).map(|&b| b as u64).sum::<u64>());
    }
    Ok(black_box(sum))
}

/// Best of `repeats` timings of `pass` (the least disturbed one).
fn best(
    name: &str,
    samples: u64,
    bytes: u64,
    repeats: usize,
    mut pass: impl FnMut() -> Result<()>,
) -> Result<Throughput> {
    let mut seconds = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        pass()?;
        seconds = seconds.min(start.elapsed().as_secs_f64());
    }
    Ok(Throughput { name: name.into(), samples, bytes, seconds })
}

/// (a) memcpy of the same records in record order and in the shuffled
/// order, then grin's `read_into`, then training's precomputed feed (its
/// reader on its producer thread) on the same shuffled batches.
pub fn time_reads(store: &Store, order: &[Vec<u64>], repeats: usize, seed: u64) -> Result<Vec<Throughput>> {
    let record_bytes = store.layout().record_bytes as usize;
    let batch_size = order.first().map_or(0, |b| b.len());
    let samples: u64 = order.iter().map(|b| b.len() as u64).sum();
    let bytes = samples * record_bytes as u64;
    let mut buf = vec![0u8; batch_size * record_bytes];
    let mut results = Vec::new();

    results.push(best("memcpy, record order", samples, bytes, repeats, || {
        let mut next = 0u64;
        for batch in order {
            for slot in buf.chunks_exact_mut(record_bytes).take(batch.len()) {
                slot.copy_from_slice(store.record(next)?);
                next = (next + 1) % store.len();
            }
            black_box(&mut buf);
        }
        Ok(())
    })?);
    results.push(best("memcpy, shuffled", samples, bytes, repeats, || {
        for batch in order {
            for (slot, &index) in buf.chunks_exact_mut(record_bytes).zip(batch) {
                slot.copy_from_slice(store.record(index)?);
            }
            black_box(&mut buf);
        }
        Ok(())
    })?);

    let layout = *store.layout();
    let mut batch = HostBatch::with_capacity(batch_size, layout.width, layout.height, layout.channels);
    results.push(best("grin read_into, shuffled", samples, bytes, repeats, || {
        for indices in order {
            batch.clear();
            for &index in indices {
                store.read_into(index, &mut batch)?;
            }
            black_box(&mut batch);
        }
        Ok(())
    })?);

    let options = shuffled(batch_size, seed);
    // As far ahead as a training run's producer goes by default (`train.prefetch`).
    let prefetch = crate::TrainConfig::default().prefetch;
    results.push(best("grin feed (producer thread)", samples, bytes, repeats, || {
        let mut feed = Producer::start(Precomputed::new(store, &options)?, prefetch, "grin-feed")?;
        for _ in 0..order.len() {
            let produced = feed.next().context("the feed thread stopped")??;
            feed.recycle(black_box(produced.batch));
        }
        Ok(())
    })?);
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_features::FeatureConfig;

    #[test]
    fn every_row_reads_every_batch_of_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let features = FeatureConfig { width: 32, height: 32, ..FeatureConfig::default() };
        crate::precompute::write_whole_store(&features, 40, &dir.path().join("store")).unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        // 7 batches of 8 over 40 records: the order wraps into a second epoch.
        let order = batch_order(&store, 8, 7, 1).unwrap();
        assert!(order.iter().all(|b| b.len() == 8));
        let path = dir.path().join("order.bin");
        write_order(&path, &dir.path().join("store"), &order).unwrap();
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), 56 * 8, "u64 per index");
        assert_eq!(u64::from_le_bytes(written[..8].try_into().unwrap()), order[0][0]);
        warm_page_cache(&store).unwrap();
        let rows = time_reads(&store, &order, 2, 1).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["memcpy, record order", "memcpy, shuffled", "grin read_into, shuffled", "grin feed (producer thread)"]
        );
        for r in &rows {
            assert_eq!((r.samples, r.bytes), (56, 56 * store.layout().record_bytes), "{}", r.name);
            assert!(r.seconds.is_finite() && r.seconds > 0.0, "{}: {} s", r.name, r.seconds);
        }
    }

    #[test]
    fn an_order_file_that_cannot_be_written_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-folder").join("order.bin");
        let err = format!("{:#}", write_order(&path, dir.path(), &[vec![1, 2]]).unwrap_err());
        assert!(err.starts_with("cannot write the batch order: ") && err.contains("missing-folder"), "{err}");
    }

    #[test]
    fn an_order_file_inside_the_store_is_refused_and_the_store_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let features = FeatureConfig { width: 32, height: 32, ..FeatureConfig::default() };
        let store = dir.path().join("store");
        crate::precompute::write_whole_store(&features, 8, &store).unwrap();
        for name in ["shard-00000.bin", "manifest.json", "order.bin"] {
            let err = format!("{:#}", write_order(&store.join(name), &store, &[vec![1, 2]]).unwrap_err());
            assert!(err.contains("is inside an input folder"), "{name}: {err}");
        }
        Store::open(&store).unwrap().check_checksums().unwrap();
    }
}
