//! The balance check: measure T_g, T_i, T_s and the feeding overheads, then
//! predict each mode's device-busy share before a single training step.
//!
//! A host-fed run is data-bound when producing a batch, T_g/C*B, takes longer
//! than the step T_s. Queues only absorb jitter; the slower side sets the pace.

use crate::backend::BackendChoice;
use crate::config::DeviceAugment;
use crate::config::GrinConfig;
use crate::config::TrainConfig;
use crate::device_batch::upload;
use crate::feed::in_vram::{fits_in_device, DeviceDataset};
use crate::feed::precomputed::open_store;
use crate::step::Stepper;
use crate::TrainBackend;
use anyhow::Result;
use burn::tensor::backend::Backend;
use grin_features::{bench::measure_tg, FeatureConfig, HostBatch, Pipeline, Split};
use grin_model::InitDetector;
use grin_net::DetectorSpec;
use grin_terms::median;
use serde::{Deserialize, Serialize};
use std::time::Instant;

mod predict;
pub use predict::Prediction;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Figures {
    /// Per-sample feature time, one core (median).
    pub tg_s: f64,
    pub workers: usize,
    pub batch: usize,
    /// Forward time of one batch.
    pub ti_s: f64,
    /// Forward + backward + optimizer step.
    pub ts_s: f64,
    /// Host-to-device upload of one batch.
    pub tu_s: f64,
    /// Cutting and augmenting one batch from a device-resident dataset.
    pub tc_s: f64,
    /// Reading one batch of records: from the store when there is one,
    /// otherwise from the same records encoded in memory (the store's read
    /// path with the page cache already warm).
    pub tr_s: f64,
    /// Where `tr_s` was timed: "store" or "in-memory records".
    #[serde(skip_deserializing)]
    pub tr_from: &'static str,
    /// The step `ti_s` and `ts_s` timed: grin's CPU step or Burn autodiff.
    #[serde(skip_deserializing)]
    pub step_path: &'static str,
}

const WARMUP: usize = 2;
const REPEATS: usize = 5;

/// Times `f` with a device sync inside each timed region, warm-up excluded.
/// What `f` returns lives until after the sync: a lazy backend (Burn's
/// fusion) need not compute a tensor dropped unread.
fn timed<B: Backend, R>(device: &B::Device, mut f: impl FnMut() -> R) -> f64 {
    let mut times = Vec::with_capacity(REPEATS);
    for i in 0..WARMUP + REPEATS {
        let _ = B::sync(device);
        let t = Instant::now();
        let out = f();
        let _ = B::sync(device);
        drop(out);
        if i >= WARMUP {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    median(&times)
}

/// The balance figures for a config, measured, and whether its precomputed
/// dataset (when one exists) fits in device memory.
pub struct Check {
    pub figures: Figures,
    pub fits_in_device: bool,
    /// The precomputed dataset, opened (and its shards hashed) once: `auto`
    /// trains from this same handle rather than hashing every shard again.
    pub store: Option<grin_store::Store>,
}

/// Measures a config's balance figures, with the store's read time and the
/// in-device fit when its precomputed dataset exists. A run that will not
/// read the store (`store_required` false: on-the-fly) is not refused for a
/// damaged or stale one: it is named in a warning and `T_r` is timed on
/// records in memory instead.
pub fn check<B: TrainBackend>(
    c: &GrinConfig,
    backend: BackendChoice,
    device_index: usize,
    allow_stale: bool,
    store_required: bool,
    device: &B::Device,
) -> Result<Check> {
    let dir = c.store_dir();
    let store = if !dir.join(grin_store::MANIFEST_FILE).exists() {
        None
    } else if store_required {
        Some(open_store(&dir, &c.features, allow_stale)?)
    } else {
        match open_store(&dir, &c.features, allow_stale) {
            Ok(store) => Some(store),
            Err(e) => {
                eprintln!("warning: {e:#} (this run does not read it: the store read is timed on records in memory)");
                None
            }
        }
    };
    let fits_in_device = store.as_ref().is_none_or(|s| fits_in_device(s, backend, device_index).fits);
    let figures =
        measure::<B>(&c.features, &c.detector_spec(), &c.train, store.as_ref(), &c.train.device_augment, device)?;
    Ok(Check { figures, fits_in_device, store })
}

pub fn measure<B: TrainBackend>(
    features: &FeatureConfig,
    spec: &DetectorSpec,
    train: &TrainConfig,
    store: Option<&grin_store::Store>,
    augment: &DeviceAugment,
    device: &B::Device,
) -> Result<Figures> {
    let batch = train.batch_size;
    crate::progress::note(&format!(
        "balance check: timing T_g on {} scenes, then upload, step and store read (a few seconds)",
        64.max(batch)
    ));
    let pipeline = Pipeline::new(features, Split::Train)?;
    let tg = measure_tg(&pipeline, 64.max(batch))?;
    let host: HostBatch = pipeline.batch(&(0..batch as u64).collect::<Vec<_>>())?;

    let mut model = spec.init_seeded::<B>(features.seed, device);
    let mut optim = crate::step::optimizer::<B>(train);
    let mut stepper = Stepper::<B>::new(spec, train.loss, std::slice::from_ref(device));
    let on_device = upload::<B>(&host, device);

    let tu_s = timed::<B, _>(device, || upload::<B>(&host, device));
    // T_i and T_s on the trainer's own step (`step.rs`): the same ops,
    // optimizer, weight decay and clipping as every training step.
    let mut failed = None;
    let ti_s = timed::<B, _>(device, || {
        if let Err(e) = stepper.forward(&model, &on_device) {
            failed.get_or_insert(e);
        }
    });
    let ts_s = timed::<B, _>(device, || match stepper.step(model.clone(), &mut optim, 1e-4, on_device.clone(), None) {
        Ok((next, _)) => model = next,
        Err(e) => {
            failed.get_or_insert(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let resident = DeviceDataset::<B>::upload(&host, device, B::HOST_MEMORY);
    let indices: Vec<u64> = (0..batch as u64).collect();
    let tc_s = timed::<B, _>(device, || resident.batch(&indices, augment, (augment.translate as i64, 0)));
    let mut b = HostBatch::default();
    let (tr_s, tr_from) = match store {
        Some(store) if !store.is_empty() => {
            let n = store.len();
            let t = timed::<B, _>(device, || {
                b.clear();
                for i in 0..batch as u64 {
                    // A stride that visits records out of order, like a shuffle.
                    let _ = store.read_into((i * 7919) % n, &mut b);
                }
            });
            (t, "store")
        }
        _ => {
            let layout = grin_store::RecordLayout::new(host.width, host.height, host.channels);
            let stride = layout.record_bytes as usize;
            // Eight batches of records, so the reads are not all cache hits.
            let n = 8 * batch;
            let mut records = vec![0u8; n * stride];
            let mut one = Vec::with_capacity(stride);
            for r in 0..n {
                one.clear();
                layout.encode(&host, r % host.len, &mut one);
                records[r * stride..r * stride + one.len()].copy_from_slice(&one);
            }
            let t = timed::<B, _>(device, || {
                b.clear();
                for i in 0..batch {
                    let r = (i * 7919) % n;
                    layout.decode_into(&records[r * stride..(r + 1) * stride], &mut b);
                }
            });
            (t, "in-memory records")
        }
    };
    let step_path = crate::step::engine_name::<B>();
    Ok(Figures {
        tg_s: tg.median_s,
        workers: pipeline.workers(),
        batch,
        ti_s,
        ts_s,
        tu_s,
        tc_s,
        tr_s,
        tr_from,
        step_path,
    })
}

#[cfg(test)]
mod tests;
