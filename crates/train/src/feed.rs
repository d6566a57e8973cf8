//! The three ways to feed the device, behind one `next()`.
//!
//! Host modes run a producer thread that fills batches ahead of the trainer
//! through a bounded queue (buffers absorb variance; they cannot raise the
//! average rate). In-VRAM cuts batches from a device-resident dataset.

use crate::device_batch::{upload, DeviceAugment, DeviceBatch, DeviceDataset};
use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use grin_features::HostBatch;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Anything that yields host batches in a fixed order from a given batch number.
pub trait HostSource: Send + 'static {
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
    Host {
        queue: Receiver<Result<(HostBatch, Duration)>>,
        producer: Option<JoinHandle<()>>,
        loaders: usize,
        device: B::Device,
    },
    Device {
        data: DeviceDataset<B>,
        batch_size: usize,
        seed: u64,
        augment: DeviceAugment,
        epoch: Option<(usize, Tensor<B, 1, Int>)>,
        device: B::Device,
    },
}

impl<B: Backend> Feed<B> {
    pub fn host(mut source: impl HostSource, prefetch: usize, device: B::Device) -> Self {
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

    pub fn in_device(
        data: DeviceDataset<B>,
        batch_size: usize,
        seed: u64,
        augment: DeviceAugment,
        device: B::Device,
    ) -> Self {
        Feed::Device { data, batch_size, seed, augment, epoch: None, device }
    }

    /// Loaders making batches side by side; 0 in VRAM, where the batch is
    /// cut on the training thread itself.
    pub fn loaders(&self) -> usize {
        match self {
            Feed::Host { loaders, .. } => *loaders,
            Feed::Device { .. } => 0,
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
            Feed::Device { data, batch_size, seed, augment, epoch, device } => {
                let started = Instant::now();
                let per_epoch = (data.len / *batch_size).max(1);
                let (e, position) = (step / per_epoch, step % per_epoch);
                if epoch.as_ref().map(|(n, _)| *n) != Some(e) {
                    // One small upload per epoch: the order, never the samples.
                    let order = permutation(data.len, *seed, e as u64);
                    let order = Tensor::from_data(TensorData::new(order, [data.len]), &*device);
                    *epoch = Some((e, order));
                }
                let order = &epoch.as_ref().expect("set above").1;
                let take = (*batch_size).min(data.len);
                let indices = order.clone().narrow(0, position * take, take);
                B::seed(device, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step as u64);
                let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(*seed ^ (step as u64).rotate_left(17));
                let t = augment.translate as i64;
                let shift = if t > 0 {
                    (rand::Rng::random_range(&mut rng, -t..=t), rand::Rng::random_range(&mut rng, -t..=t))
                } else {
                    (0, 0)
                };
                let batch = data.batch(indices, augment, shift);
                // Without a sync this is the time to queue the cut (all of it
                // on the CPU backend); on a GPU the cut itself runs later,
                // inside the step's measured time.
                let cut = started.elapsed();
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

/// The sample order of one epoch: a fresh seeded shuffle, the same on every run.
pub fn permutation(len: usize, seed: u64, epoch: u64) -> Vec<i32> {
    let mut order: Vec<i32> = (0..len as i32).collect();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed ^ epoch.wrapping_mul(0xD1B5_4A32_D192_ED03));
    order.shuffle(&mut rng);
    order
}
