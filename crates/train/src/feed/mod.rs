//! The three ways to feed the device, one file each, behind one `next()`:
//!
//! - [`on_the_fly`]: the feature pipeline makes every batch during the run;
//! - [`precomputed`]: batches are read from a store written once;
//! - [`in_vram`]: the store is uploaded once and batches are cut on the device.
//!
//! The two host modes share one producer thread that fills a bounded queue
//! ahead of the trainer (buffers absorb variance; they cannot raise the
//! average rate), then one upload per batch.

pub mod in_vram;
pub mod on_the_fly;
pub mod precomputed;

use crate::config::{Mode, TrainConfig};
use crate::device_batch::{upload, DeviceBatch};
use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use grin_features::{FeatureConfig, HostBatch, Pipeline, Split};
use grin_store::{BatchOrder, Store};
use in_vram::{DeviceAugment, InVram};
use on_the_fly::OnTheFly;
use precomputed::Precomputed;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
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
pub fn build_feed<B: Backend>(plan: &FeedPlan, device: &B::Device, start: usize) -> Result<Feed<B>> {
    let store = || plan.store.as_ref().with_context(|| format!("{} mode needs a store", plan.mode.name()));
    match plan.mode {
        Mode::OnTheFly => {
            let pipeline = Arc::new(Pipeline::new(&plan.features, Split::Train)?);
            Ok(Feed::host(OnTheFly::new(pipeline, plan.batch_size, start), plan.prefetch, device.clone()))
        }
        Mode::Precomputed => {
            let source = Precomputed::new(store()?, &plan.features, plan.batch_size, start)?;
            Ok(Feed::host(source, plan.prefetch, device.clone()))
        }
        Mode::InVram => {
            // The one upload of the run; batches are cut on the device from here on.
            let store = store()?;
            let data = in_vram::upload_store(store, device)?;
            let order = BatchOrder::new(store, &precomputed::batch_order(&plan.features, plan.batch_size, start))?;
            let cutter = InVram::new(data, order, plan.features.seed, plan.device_augment, device.clone());
            Ok(Feed::InVram(cutter))
        }
        Mode::Auto => bail!("auto must be resolved to a mode before training"),
    }
}

/// Anything that yields host batches in a fixed order from a given batch number.
pub(crate) trait HostSource: Send + 'static {
    fn next_batch(&mut self) -> Result<HostBatch>;
    /// Workers that make batches side by side (what `grin simulate` calls loaders).
    fn loaders(&self) -> usize {
        1
    }
}

/// Where the time of one `next()` went.
#[derive(Debug, Clone, Copy, Default)]
pub struct FeedTiming {
    /// Blocked on the host queue plus the upload (host modes), or cutting
    /// and augmenting the batch (in-VRAM): time the training step waits on data.
    pub wait: Duration,
    /// How long the producer took to make this batch (host modes).
    pub produce: Duration,
}

pub enum Feed<B: Backend> {
    /// On-the-fly or precomputed: a producer thread and a bounded queue.
    Host {
        queue: Receiver<Result<(HostBatch, Duration)>>,
        producer: Option<JoinHandle<()>>,
        loaders: usize,
        device: B::Device,
    },
    InVram(InVram<B>),
}

impl<B: Backend> Feed<B> {
    pub(crate) fn host(mut source: impl HostSource, prefetch: usize, device: B::Device) -> Self {
        let loaders = source.loaders();
        let (tx, rx) = sync_channel(prefetch.max(1));
        let producer = std::thread::Builder::new()
            .name("grin-feed".into())
            .spawn(move || loop {
                let started = Instant::now();
                let item = source.next_batch().map(|b| (b, started.elapsed()));
                let failed = item.is_err();
                // The trainer hung up (finished or failed): stop producing.
                if tx.send(item).is_err() || failed {
                    return;
                }
            })
            .expect("spawn feed thread");
        Feed::Host { queue: rx, producer: Some(producer), loaders, device }
    }

    /// Loaders making batches side by side; 0 in VRAM, where the batch is
    /// cut on the training thread itself.
    pub fn loaders(&self) -> usize {
        match self {
            Feed::Host { loaders, .. } => *loaders,
            Feed::InVram(_) => 0,
        }
    }

    /// The batch for training step `step` (steps must come in order).
    pub fn next(&mut self, step: usize) -> Result<(DeviceBatch<B>, FeedTiming)> {
        match self {
            Feed::Host { queue, device, .. } => {
                let started = Instant::now();
                let (host, produce) = queue.recv().context("feed thread stopped")??;
                let batch = upload(&host, device);
                Ok((batch, FeedTiming { wait: started.elapsed(), produce }))
            }
            Feed::InVram(cutter) => {
                let (batch, cut) = cutter.cut(step);
                Ok((batch, FeedTiming { wait: cut, produce: cut }))
            }
        }
    }
}

impl<B: Backend> Drop for Feed<B> {
    fn drop(&mut self) {
        if let Feed::Host { queue, producer, .. } = self {
            // Unblock a producer waiting on a full queue, then join it.
            while queue.try_recv().is_ok() {}
            let (_, dead) = sync_channel(1);
            drop(std::mem::replace(queue, dead));
            if let Some(handle) = producer.take() {
                let _ = handle.join();
            }
        }
    }
}
