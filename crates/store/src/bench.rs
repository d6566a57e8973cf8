//! Shuffled batch read throughput against the memcpy limit, with the data in
//! page cache. The Python peer (h5py, per-sample .npy) reads the same batches
//! from the order file written here.

use crate::error::{Result, StoreError};
use crate::loader::{BatchLoader, BatchOrder, Draws, LoaderOptions};
use crate::reader::Store;
use grin_features::HostBatch;
use std::hint::black_box;
use std::io::Write;
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

/// The shuffled batches of one benchmark run.
pub fn batch_order(store: &Store, batch_size: usize, batches: usize, seed: u64) -> Result<Vec<Vec<u64>>> {
    let options = LoaderOptions { batch_size, seed, draws: Draws::Shuffled, prefetch: 1, start_batch: 0 };
    let mut order = BatchOrder::new(store, &options)?;
    Ok((0..batches)
        .map(|_| {
            let mut b = Vec::new();
            order.next_batch(&mut b);
            b
        })
        .collect())
}

/// Writes the batches as little-endian u64 record indices, batch after batch.
pub fn write_order(path: &Path, order: &[Vec<u64>]) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| StoreError::io(path, e))?);
    for index in order.iter().flatten() {
        out.write_all(&index.to_le_bytes()).map_err(|e| StoreError::io(path, e))?;
    }
    out.flush().map_err(|e| StoreError::io(path, e))
}

/// Reads every record once so the timed passes find it in page cache and
/// mapped into this process.
pub fn warm(store: &Store) -> Result<u64> {
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
/// order, then grin's `read_into` and its prefetching loader on the same
/// shuffled batches.
pub fn run(store: &Store, order: &[Vec<u64>], repeats: usize, seed: u64) -> Result<Vec<Throughput>> {
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

    let options = LoaderOptions { batch_size, seed, draws: Draws::Shuffled, prefetch: 4, start_batch: 0 };
    results.push(best("grin loader (prefetch thread)", samples, bytes, repeats, || {
        let mut loader = BatchLoader::new(store, &options)?;
        for _ in 0..order.len() {
            let batch = loader.next().ok_or_else(|| StoreError::Usage("the loader thread stopped".into()))?;
            loader.recycle(black_box(batch));
        }
        Ok(())
    })?);
    Ok(results)
}
