//! Choosing and building the feed for a mode: fingerprint checks on the
//! store, the in-VRAM fit check with its fallback, and `auto`.

use crate::backend::BackendChoice;
use crate::config::Mode;
use crate::device_batch::{DeviceAugment, DeviceDataset};
use crate::feed::Feed;
use crate::sources::{Generated, StoreBatches};
use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use grin_features::{pipeline::Pipeline, FeatureConfig, HostBatch};
use grin_store::{format_stale, Balance, Store};
use std::path::Path;
use std::sync::Arc;

/// Opens a precomputed dataset and refuses it when it was built from other
/// feature settings, unless the user said `--allow-stale`.
pub fn open_store(dir: &Path, features: &FeatureConfig, allow_stale: bool) -> Result<Store> {
    let store = Store::open(dir).with_context(|| format!("{}: cannot open precomputed dataset", dir.display()))?;
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
            bail!("{}: {why}; rebuild it with `grin precompute`, or pass --allow-stale", dir.display());
        }
        eprintln!("warning: {}: {why} (training anyway: --allow-stale)", dir.display());
    }
    Ok(store)
}

pub fn store_balance(features: &FeatureConfig) -> Balance {
    match &features.balance {
        Some(b) => Balance::Fractions([b.smiling, b.non_smiling, b.face_free]),
        None => Balance::Off,
    }
}

/// Free memory where the in-VRAM dataset would live: the GPU's (from
/// nvidia-smi) or, for the CPU backend, the host's available memory.
pub fn free_device_bytes(backend: BackendChoice, device_index: usize) -> Option<u64> {
    match backend {
        BackendChoice::Cuda => {
            let out = std::process::Command::new("nvidia-smi")
                .args(["--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", &device_index.to_string()])
                .output()
                .ok()?;
            let mib: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
            Some(mib * 1024 * 1024)
        }
        BackendChoice::Cpu => {
            let info = std::fs::read_to_string("/proc/meminfo").ok()?;
            let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        }
    }
}

/// Whether a store fits in device memory, leaving half the free memory for
/// the model's activations and the allocator's slack.
pub fn fits_in_device(store: &Store, backend: BackendChoice, device_index: usize) -> (bool, u64, Option<u64>) {
    let l = store.layout();
    let need = DeviceDataset::<burn_ndarray::NdArray>::device_bytes(
        store.len() as usize,
        l.width as usize,
        l.height as usize,
        l.channels as usize,
    );
    let free = free_device_bytes(backend, device_index);
    (free.map(|f| need <= f / 2).unwrap_or(true), need, free)
}

/// Everything `build_feed` needs besides the device.
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
    pub fn new(mode: Mode, features: &FeatureConfig, train: &crate::TrainConfig, store: Option<Store>) -> FeedPlan {
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
    let seed = plan.features.seed;
    match plan.mode {
        Mode::OnTheFly => {
            let pipeline = Arc::new(Pipeline::new(&plan.features, grin_features::Split::Train)?);
            Ok(Feed::host(Generated::new(pipeline, plan.batch_size, start), plan.prefetch, device.clone()))
        }
        Mode::Precomputed => {
            let store = plan.store.as_ref().context("precomputed mode needs a store")?;
            let source =
                StoreBatches::new(store, plan.batch_size, seed, store_balance(&plan.features), plan.prefetch, start)?;
            Ok(Feed::host(source, plan.prefetch, device.clone()))
        }
        Mode::InVram => {
            let store = plan.store.as_ref().context("in-VRAM mode needs a store")?;
            let l = store.layout();
            let mut all = HostBatch::with_capacity(store.len() as usize, l.width, l.height, l.channels);
            for i in 0..store.len() {
                store.read_into(i, &mut all)?;
            }
            // The one upload of the run; batches are cut on the device from here on.
            let data = DeviceDataset::upload(&all, device);
            Ok(Feed::in_device(data, plan.batch_size, seed, plan.device_augment, device.clone()))
        }
        Mode::Auto => bail!("auto must be resolved to a mode before training"),
    }
}
