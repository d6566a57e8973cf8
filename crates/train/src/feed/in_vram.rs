//! In-VRAM: the whole precomputed set is uploaded once, as u8, and every
//! batch is cut and augmented on the device (`[train.device_augment]`).

use crate::backend::BackendChoice;
use crate::config::DeviceAugment;
use crate::device_batch::{host_images, upload_boxes, DeviceBatch, DevicePixels};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use grin_features::{HostBatch, MAX_BOXES};
use grin_store::{BatchOrder, Store};
use rand::SeedableRng;
use std::time::{Duration, Instant};

/// Where a resident set's pixels live.
enum Pixels<B: Backend> {
    Device(DevicePixels<B>),
    /// The records' bytes `[N, H, W, C]`, for a backend whose tensors live
    /// in host memory: a batch is cut from them in one pass
    /// ([`host_images`]), where tensor ops made several on burn-ndarray.
    Host(Vec<u8>),
}

/// A whole precomputed set resident in device memory, as u8.
pub(crate) struct DeviceDataset<B: Backend> {
    pixels: Pixels<B>,
    channels: usize,
    boxes: Tensor<B, 3>,
    labels: Tensor<B, 2, Int>,
    len: usize,
    pub width: usize,
    pub height: usize,
}

impl<B: Backend> DeviceDataset<B> {
    /// Bytes the dataset takes on the device (pixels as u8, boxes f32,
    /// labels i32), and the largest of its tensors.
    pub(crate) fn device_bytes(len: usize, width: usize, height: usize, channels: usize) -> (u64, u64) {
        let pixels = DevicePixels::<B>::device_bytes(len, [height, width, channels]);
        let boxes = (len * MAX_BOXES * 4 * 4) as u64;
        (pixels + boxes + (len * MAX_BOXES * 4) as u64, pixels.max(boxes))
    }

    /// `host`: the backend keeps tensors in host memory
    /// (`DetectorBackend::HOST_MEMORY`), so the pixels stay bytes.
    pub(crate) fn upload(all: &HostBatch, device: &B::Device, host: bool) -> Self {
        let (width, height, channels) = (all.width as usize, all.height as usize, all.channels as usize);
        let pixels = if host {
            Pixels::Host(all.pixels[..all.len * width * height * channels].to_vec())
        } else {
            Pixels::Device(DevicePixels::upload(&all.pixels, all.len, [height, width, channels], device))
        };
        let (boxes, labels) = upload_boxes::<B>(all, device);
        DeviceDataset { pixels, channels, boxes, labels, len: all.len, width, height }
    }

    /// Cuts the batch at `indices` and augments it on the device: nothing
    /// crosses the host-device link but the indices (one small upload) and
    /// a few random numbers drawn on the device itself.
    pub(crate) fn batch(&self, indices: &[u64], aug: &DeviceAugment, shift: (i64, i64)) -> DeviceBatch<B> {
        let n = indices.len();
        let device = self.boxes.device();
        debug_assert!(indices.iter().all(|&i| i < self.len as u64), "indices inside the set");
        // One small upload per step: B record indices, never the samples
        // (upload_store refused a dataset past i32 records).
        let ids: Vec<i32> = indices.iter().map(|&i| i as i32).collect();
        let ids = Tensor::<B, 1, Int>::from_data(TensorData::new(ids, [n]), &device);
        let mut boxes = self.boxes.clone().select(0, ids.clone());
        let labels = self.labels.clone().select(0, ids.clone());
        let w = self.width as f32;

        // Stages set to 0 are skipped, not run as identities: on the CPU
        // backend each one is a few passes over the batch.
        let flip = (aug.flip > 0.0)
            .then(|| Tensor::<B, 1>::random([n], Distribution::Bernoulli(aug.flip as f64), &device).greater_elem(0.5));
        let mut images = match &self.pixels {
            // The coins read back (host memory: a copy), then one pass: the
            // same values as the tensor ops below.
            Pixels::Host(bytes) => {
                let flips = match &flip {
                    Some(f) => f.clone().into_data().into_vec::<bool>().expect("bool coins"),
                    None => vec![false; n],
                };
                host_images::<B>(bytes, indices, [self.height, self.width, self.channels], &flips, &device)
            }
            Pixels::Device(pixels) => {
                let images = pixels.select(ids).images();
                match &flip {
                    // Per-sample horizontal flip, chosen with a mask so the batch stays one tensor.
                    Some(flip) => {
                        let [_, c, h, wi] = images.dims();
                        let m4 = flip.clone().reshape([n, 1, 1, 1]).expand([n, c, h, wi]);
                        images.clone().mask_where(m4, images.flip([3]))
                    }
                    None => images,
                }
            }
        };
        if let Some(flip) = flip {
            let coord = |t: &Tensor<B, 3>, i| t.clone().narrow(2, i, 1);
            let flipped = Tensor::cat(
                vec![coord(&boxes, 2).neg() + w, coord(&boxes, 1), coord(&boxes, 0).neg() + w, coord(&boxes, 3)],
                2,
            );
            let m3 = flip.reshape([n, 1, 1]).expand([n, MAX_BOXES, 4]);
            boxes = boxes.mask_where(m3, flipped);
        }

        // Per-sample contrast (around 0.5) and brightness.
        let uniform = |half: f32, centre: f64| {
            Tensor::<B, 1>::random([n], Distribution::Uniform(centre - half as f64, centre + half as f64), &device)
                .reshape([n, 1, 1, 1])
        };
        if aug.contrast > 0.0 {
            images = (images - 0.5) * uniform(aug.contrast, 1.0) + 0.5;
        }
        if aug.brightness > 0.0 {
            images = images + uniform(aug.brightness, 0.0);
        }
        if aug.contrast > 0.0 || aug.brightness > 0.0 {
            images = images.clamp(0.0, 1.0);
        }

        // Whole-batch translation with zero fill.
        if shift != (0, 0) {
            images = translate(images, shift.0, shift.1);
            let offset = Tensor::<B, 1>::from_data(
                TensorData::new(vec![shift.0 as f32, shift.1 as f32, shift.0 as f32, shift.1 as f32], [4]),
                &device,
            )
            .reshape([1, 1, 4]);
            let limits = Tensor::<B, 1>::from_data(
                TensorData::new(vec![w, self.height as f32, w, self.height as f32], [4]),
                &device,
            )
            .reshape([1, 1, 4]);
            boxes = (boxes + offset).clamp_min(0.0).min_pair(limits.expand([n, MAX_BOXES, 4]));
        }
        DeviceBatch { images, boxes, labels }
    }
}

/// Uploads every record of `store` once.
/// `host`: the backend keeps tensors in host memory ([`DeviceDataset::upload`]).
pub(crate) fn upload_store<B: Backend>(
    store: &Store,
    device: &B::Device,
    host: bool,
) -> anyhow::Result<DeviceDataset<B>> {
    // Record indices travel to the device as i32 (Burn's Int on every backend).
    anyhow::ensure!(
        store.len() <= i32::MAX as u64,
        "{}: {} records are past the {} the in-VRAM mode can index",
        store.dir().display(),
        store.len(),
        i32::MAX
    );
    let l = store.layout();
    let mut all = HostBatch::with_capacity(store.len() as usize, l.width, l.height, l.channels);
    for i in 0..store.len() {
        store.read_into(i, &mut all)?;
    }
    Ok(DeviceDataset::upload(&all, device, host))
}

/// Cuts the batch of every step from a device-resident dataset: the record
/// indices come from the store's [`BatchOrder`], the one the precomputed
/// mode reads by (same seed, class draws and resume point), then
/// `[train.device_augment]` runs on the device.
pub(crate) struct InVram<B: Backend> {
    data: DeviceDataset<B>,
    order: BatchOrder,
    indices: Vec<u64>,
    seed: u64,
    augment: DeviceAugment,
    device: B::Device,
}

impl<B: Backend> InVram<B> {
    pub(crate) fn new(
        data: DeviceDataset<B>,
        order: BatchOrder,
        seed: u64,
        augment: DeviceAugment,
        device: B::Device,
    ) -> Self {
        InVram { data, order, indices: Vec::new(), seed, augment, device }
    }

    /// The batch for training step `step` and the time it took to cut it.
    /// Steps come in order from the order's start batch.
    pub(crate) fn cut(&mut self, step: usize) -> (DeviceBatch<B>, Duration) {
        let started = Instant::now();
        assert_eq!(self.order.batches(), step as u64, "in-VRAM batches are cut in step order");
        self.order.next_batch(&mut self.indices);
        let seed = self.seed;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed ^ (step as u64).rotate_left(17));
        let t = self.augment.translate as i64;
        let shift = if t > 0 {
            (rand::Rng::random_range(&mut rng, -t..=t), rand::Rng::random_range(&mut rng, -t..=t))
        } else {
            (0, 0)
        };
        // The augmentation's coins come from the backend's generator.
        let device_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step as u64;
        let batch = grin_model::seeded::<B, _>(&self.device, device_seed, || {
            self.data.batch(&self.indices, &self.augment, shift)
        });
        // Without a sync this is the time to queue the cut (all of it on the
        // CPU backend); on a GPU the cut itself runs later, inside the
        // step's measured time.
        (batch, started.elapsed())
    }
}

/// Whether a store fits in device memory, and what that was judged on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fit {
    pub fits: bool,
    /// Bytes the dataset needs on the device.
    pub need: u64,
    /// Free device memory, where the backend reports it.
    pub free: Option<u64>,
    /// What was assumed or checked beyond free memory (wgpu's limits).
    pub note: Option<String>,
}

/// Host memory available now: the device memory of the CPU backend and of
/// a CPU driver behind wgpu.
fn host_available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Whether a store fits in device memory, leaving half the free memory for
/// the model's activations and the allocator's slack. wgpu reports no free
/// memory: a GPU adapter is assumed to have room (and the note says so),
/// a CPU driver has the host's; on wgpu every tensor must also fit the
/// adapter's largest buffer and binding.
pub(crate) fn fits_in_device(store: &Store, backend: BackendChoice, device_index: usize) -> Fit {
    let l = store.layout();
    let (need, largest) = DeviceDataset::<burn_ndarray::NdArray>::device_bytes(
        store.len() as usize,
        l.width as usize,
        l.height as usize,
        l.channels as usize,
    );
    let mut note = None;
    let free = match backend {
        BackendChoice::Cuda => {
            let out = std::process::Command::new("nvidia-smi")
                .args(["--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", &device_index.to_string()])
                .output()
                .ok();
            out.and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().ok())
                .map(|mib| mib * 1024 * 1024)
        }
        BackendChoice::Cpu => host_available_bytes(),
        BackendChoice::Wgpu => {
            let adapter = crate::backend::adapters::list().into_iter().nth(device_index);
            match adapter {
                None => {
                    note = Some(format!("wgpu adapter {device_index} not found"));
                    return Fit { fits: false, need, free: None, note };
                }
                Some(a) => {
                    let limit = a.max_buffer_bytes.min(a.max_binding_bytes);
                    if largest > limit {
                        note = Some(format!(
                            "its largest tensor ({:.1} MB) is over {}'s buffer limit ({:.1} MB)",
                            largest as f64 / 1e6,
                            a.name,
                            limit as f64 / 1e6
                        ));
                        return Fit { fits: false, need, free: None, note };
                    }
                    if a.cpu {
                        host_available_bytes()
                    } else {
                        note = Some(format!(
                            "wgpu reports no free memory: assumed {} has room for it (each tensor is within its {:.1} MB buffer limit)",
                            a.name,
                            limit as f64 / 1e6
                        ));
                        None
                    }
                }
            }
        }
    };
    Fit { fits: free.map(|f| need <= f / 2).unwrap_or(true), need, free, note }
}

/// Shifts `[B, C, H, W]` by (dx, dy) pixels, filling with zeros.
fn translate<B: Backend>(x: Tensor<B, 4>, dx: i64, dy: i64) -> Tensor<B, 4> {
    let [b, c, h, w] = x.dims();
    let device = x.device();
    let shift_axis = |t: Tensor<B, 4>, axis: usize, by: i64, size: usize| {
        let k = by.unsigned_abs() as usize;
        if k == 0 || k >= size {
            return t;
        }
        let mut zeros_shape = [b, c, h, w];
        zeros_shape[axis] = k;
        let zeros = Tensor::<B, 4>::zeros(zeros_shape, &device);
        if by > 0 {
            Tensor::cat(vec![zeros, t.narrow(axis, 0, size - k)], axis)
        } else {
            Tensor::cat(vec![t.narrow(axis, k, size - k), zeros], axis)
        }
    };
    let x = shift_axis(x, 3, dx, w);
    shift_axis(x, 2, dy, h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    /// The cut made in host memory (one pass) and by tensor ops give the
    /// same batch bit for bit, every stage on, in one and three channels.
    #[test]
    fn the_host_cut_equals_the_tensor_cut() {
        type B = NdArray<f32>;
        let device = Default::default();
        let aug = DeviceAugment { flip: 0.5, contrast: 0.2, brightness: 0.1, translate: 2 };
        for channels in [1u32, 3] {
            let (n, w, h) = (6, 7u32, 5u32);
            let mut all = HostBatch::with_capacity(n, w, h, channels);
            all.len = n;
            all.pixels = (0..n * (w * h * channels) as usize).map(|i| (i * 37 % 251) as u8).collect();
            all.boxes = (0..n * MAX_BOXES * 4).map(|i| (i % 7) as f32).collect();
            all.labels = (0..n * MAX_BOXES).map(|i| (i % 3) as i8 - 1).collect();
            let sets = [true, false].map(|host| DeviceDataset::<B>::upload(&all, &device, host));
            let indices = [4, 0, 5, 2, 2];
            let cut = |host: bool| {
                let data = &sets[usize::from(!host)];
                grin_model::seeded::<B, _>(&device, 9, || data.batch(&indices, &aug, (1, -1)))
            };
            let (a, b) = (cut(true), cut(false));
            let values = |t: Tensor<B, 4>| t.into_data().to_vec::<f32>().expect("f32");
            let (va, vb) = (values(a.images), values(b.images));
            assert_eq!(va.len(), 5 * (w * h * channels) as usize);
            assert!(
                va.iter().zip(&vb).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{channels} channels: {va:?} vs {vb:?}"
            );
            assert_eq!(a.boxes.into_data(), b.boxes.into_data());
            assert_eq!(values(cut(true).images), va, "the cut repeats from its seed");

            // Flip alone: each sample is the straight one or its mirror, and
            // both occur (else the comparison above says nothing of flips).
            let only = |flip| DeviceAugment { flip, contrast: 0.0, brightness: 0.0, translate: 0 };
            let cut = |aug: DeviceAugment| {
                values(grin_model::seeded::<B, _>(&device, 9, || sets[0].batch(&indices, &aug, (0, 0))).images)
            };
            let (flipped, straight) = (cut(only(0.5)), cut(only(0.0)));
            let row = w as usize;
            let mirrored: Vec<f32> = straight.chunks(row).flat_map(|r| r.iter().rev().copied()).collect();
            let per = (w * h * channels) as usize;
            let kinds: Vec<bool> = (0..5)
                .map(|i| {
                    let (f, s, m) =
                        (&flipped[i * per..][..per], &straight[i * per..][..per], &mirrored[i * per..][..per]);
                    assert!(f == s || f == m, "sample {i} is neither straight nor mirrored");
                    f == m
                })
                .collect();
            assert!(kinds.contains(&true) && kinds.contains(&false), "flips {kinds:?}");
        }
    }
}
