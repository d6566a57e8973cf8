//! On-the-fly: the feature pipeline's C workers make every batch while the
//! run trains.

use super::producer::BatchSource;
use anyhow::Result;
use grin_features::{HostBatch, Pipeline};
use std::sync::Arc;

/// Batch `k` is samples `k*B .. (k+1)*B` of the train split. A pure
/// function of `k`, so a resumed run sees the same data as an
/// uninterrupted one.
pub(crate) struct OnTheFly {
    pipeline: Arc<Pipeline>,
    batch_size: usize,
    next_batch: u64,
}

impl OnTheFly {
    pub(crate) fn new(pipeline: Arc<Pipeline>, batch_size: usize, start_batch: usize) -> Self {
        OnTheFly { pipeline, batch_size, next_batch: start_batch as u64 }
    }
}

impl BatchSource for OnTheFly {
    type Error = anyhow::Error;

    fn empty_batch(&self) -> HostBatch {
        let cfg = self.pipeline.config();
        HostBatch::with_capacity(self.batch_size, cfg.width, cfg.height, cfg.channels)
    }

    fn fill(&mut self, batch: &mut HostBatch) -> Result<()> {
        let first = self.next_batch * self.batch_size as u64;
        let indices: Vec<u64> = (first..first + self.batch_size as u64).collect();
        self.pipeline.fill_batch(&indices, batch)?;
        self.next_batch += 1;
        Ok(())
    }
}

impl Drop for OnTheFly {
    /// A run that skipped bad inputs says so when its data stream ends.
    fn drop(&mut self) {
        let loaded = self.pipeline.source().load_skips().and_then(|s| s.summary());
        for line in [loaded, self.pipeline.skips().summary()].into_iter().flatten() {
            eprintln!("{line}");
        }
    }
}
