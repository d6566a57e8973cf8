//! The three ways to feed the device, one file each, behind one `next()`:
//!
//! - [`on_the_fly`]: the feature pipeline makes every batch during the run;
//! - [`precomputed`]: batches are read from a store written once;
//! - [`in_vram`]: the store is uploaded once and batches are cut on the device.
//!
//! The two host modes run on the one producer thread ([`producer`]: a
//! bounded queue ahead of the trainer, buffers recycled), then one upload
//! per batch.

pub(crate) mod in_vram;
pub(crate) mod on_the_fly;
pub(crate) mod precomputed;
pub(crate) mod producer;

use crate::config::DeviceAugment;
use crate::config::{Mode, TrainConfig};
use crate::device_batch::{upload, DeviceBatch};
use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use grin_features::{FeatureConfig, Pipeline, Split};
use grin_model::DetectorBackend;
use grin_store::{BatchOrder, Store};
use in_vram::InVram;
use on_the_fly::OnTheFly;
use precomputed::Precomputed;
use producer::{BatchSource, Produced, Producer};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything [`build_feed`] needs besides the device: the resolved mode
/// (never `Auto`) and, for the store modes, the opened store.
pub struct FeedPlan {
    pub mode: Mode,
    pub features: FeatureConfig,
    pub batch_size: usize,
    pub prefetch: usize,
    pub store: Option<Store>,
    /// What the in-VRAM mode runs on the device (`train.device_augment`).
    pub device_augment: DeviceAugment,
}

impl FeedPlan {
    /// The plan for `mode`, with the feeding settings of `train`.
    pub fn new(mode: Mode, features: &FeatureConfig, train: &TrainConfig, store: Option<Store>) -> FeedPlan {
        FeedPlan {
            mode,
            features: features.clone(),
            batch_size: train.batch_size,
            prefetch: train.prefetch,
            store,
            device_augment: train.device_augment,
        }
    }
}

/// The feed for `plan.mode`, starting at training step `start`.
pub fn build_feed<B: DetectorBackend>(plan: &FeedPlan, device: &B::Device, start: usize) -> Result<Feed<B>> {
    let store = || plan.store.as_ref().with_context(|| format!("{} mode needs a store", plan.mode.name()));
    match plan.mode {
        Mode::OnTheFly => {
            let pipeline = Arc::new(Pipeline::new(&plan.features, Split::Train)?);
            let loaders = pipeline.workers();
            Feed::host(OnTheFly::new(pipeline, plan.batch_size, start), loaders, plan.prefetch, device.clone())
        }
        Mode::Precomputed => {
            let order = precomputed::batch_order(&plan.features, plan.batch_size, start);
            let source = Precomputed::new(store()?, &order)?;
            Feed::host(source, 1, plan.prefetch, device.clone())
        }
        Mode::InVram => {
            // The one upload of the run; batches are cut on the device from here on.
            let store = store()?;
            let data = in_vram::upload_store(store, device, B::HOST_MEMORY)?;
            let order = BatchOrder::new(store, &precomputed::batch_order(&plan.features, plan.batch_size, start))?;
            let cutter = InVram::new(data, order, plan.features.seed, plan.device_augment, device.clone());
            Ok(Feed(Source::InVram(cutter)))
        }
        Mode::Auto => bail!("auto must be resolved to a mode before training"),
    }
}

/// Where the time of one `next()` went.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FeedTiming {
    /// Blocked on the host queue plus the upload (host modes), or cutting
    /// and augmenting the batch (in-VRAM): time the training step waits on data.
    pub wait: Duration,
    /// How long the producer took to make this batch (host modes).
    pub produce: Duration,
}

/// Batches for the trainer, one per step, in whichever of the three ways
/// [`build_feed`] chose.
pub struct Feed<B: Backend>(Source<B>);

enum Source<B: Backend> {
    /// On-the-fly or precomputed: the producer thread and its bounded queue;
    /// `loaders` workers make each batch side by side (what `grin simulate`
    /// calls loaders).
    Host {
        producer: Producer<anyhow::Error>,
        loaders: usize,
        device: B::Device,
    },
    InVram(InVram<B>),
}

impl<B: Backend> Feed<B> {
    fn host(
        source: impl BatchSource<Error = anyhow::Error>,
        loaders: usize,
        prefetch: usize,
        device: B::Device,
    ) -> Result<Self> {
        let producer = Producer::start(source, prefetch, "grin-feed").context("cannot start the feed thread")?;
        Ok(Feed(Source::Host { producer, loaders, device }))
    }

    /// Loaders making batches side by side; 0 in VRAM, where the batch is
    /// cut on the training thread itself.
    pub(crate) fn loaders(&self) -> usize {
        match &self.0 {
            Source::Host { loaders, .. } => *loaders,
            Source::InVram(_) => 0,
        }
    }

    /// The batch for training step `step` (steps must come in order).
    pub(crate) fn next(&mut self, step: usize) -> Result<(DeviceBatch<B>, FeedTiming)> {
        match &mut self.0 {
            Source::Host { producer, device, .. } => {
                let started = Instant::now();
                let Produced { batch: host, took } = producer.next().context("feed thread stopped")??;
                let batch = upload(&host, device);
                producer.recycle(host);
                Ok((batch, FeedTiming { wait: started.elapsed(), produce: took }))
            }
            Source::InVram(cutter) => {
                let (batch, cut) = cutter.cut(step);
                Ok((batch, FeedTiming { wait: cut, produce: cut }))
            }
        }
    }
}
