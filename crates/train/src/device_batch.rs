//! Batches on the device: uploaded from the host, or cut from a dataset that
//! already lives in device memory (the in-VRAM mode).

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Distribution, FloatDType, Int, Tensor, TensorData};
use grin_features::{HostBatch, MAX_BOXES};
use serde::{Deserialize, Serialize};

/// What one training step consumes.
#[derive(Debug, Clone)]
pub struct DeviceBatch<B: Backend> {
    /// `[B, C, H, W]`, 0..1.
    pub images: Tensor<B, 4>,
    /// `[B, MAX_BOXES, 4]` pixels.
    pub boxes: Tensor<B, 3>,
    /// `[B, MAX_BOXES]`: smile label, -1 unknown, -2 empty slot.
    pub labels: Tensor<B, 2, Int>,
}

/// u8 pixels `[N, H, W, C]` (as stored) to float `[N, C, H, W]` in 0..1.
fn pixels_to_images<B: Backend>(pixels: Tensor<B, 4, Int>) -> Tensor<B, 4> {
    pixels.cast(FloatDType::F32).permute([0, 3, 1, 2]) / 255.0
}

pub fn upload<B: Backend>(batch: &HostBatch, device: &B::Device) -> DeviceBatch<B> {
    let (pixels, boxes, labels) = upload_raw(batch, device);
    DeviceBatch { images: pixels_to_images(pixels), boxes, labels }
}

/// `[train.device_augment]`: the stages the in-VRAM mode runs on the
/// device, per batch. These four are the only ones that run there; the
/// records themselves were augmented on the host by `[features.augment]`
/// once, when the store was precomputed, and keep that augmentation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceAugment {
    /// Probability of a horizontal flip, per sample.
    pub flip: f32,
    /// Contrast factor drawn from `1 ± contrast`.
    pub contrast: f32,
    /// Brightness offset drawn from `± brightness` (0..1 scale).
    pub brightness: f32,
    /// Whole-batch translation of up to this many pixels each way.
    pub translate: usize,
}

impl Default for DeviceAugment {
    fn default() -> Self {
        DeviceAugment { flip: 0.5, contrast: 0.2, brightness: 0.1, translate: 8 }
    }
}

/// A whole precomputed set resident in device memory, as u8.
pub struct DeviceDataset<B: Backend> {
    pixels: Tensor<B, 4, Int>,
    boxes: Tensor<B, 3>,
    labels: Tensor<B, 2, Int>,
    pub len: usize,
    pub width: usize,
    pub height: usize,
}

impl<B: Backend> DeviceDataset<B> {
    /// Bytes the dataset takes on the device (pixels as u8, boxes f32, labels i32).
    pub fn device_bytes(len: usize, width: usize, height: usize, channels: usize) -> u64 {
        (len * (width * height * channels + MAX_BOXES * 4 * 4 + MAX_BOXES * 4)) as u64
    }

    pub fn upload(all: &HostBatch, device: &B::Device) -> Self {
        let b = upload_raw::<B>(all, device);
        DeviceDataset {
            pixels: b.0,
            boxes: b.1,
            labels: b.2,
            len: all.len,
            width: all.width as usize,
            height: all.height as usize,
        }
    }

    /// Cuts the batch at `indices` (`[B]`, already on the device) and
    /// augments it there: nothing crosses the host-device link but a few
    /// random numbers drawn on the device itself.
    pub fn batch(&self, indices: Tensor<B, 1, Int>, aug: &DeviceAugment, shift: (i64, i64)) -> DeviceBatch<B> {
        let n = indices.dims()[0];
        let device = indices.device();
        let mut images = pixels_to_images(self.pixels.clone().select(0, indices.clone()));
        let mut boxes = self.boxes.clone().select(0, indices.clone());
        let labels = self.labels.clone().select(0, indices);
        let w = self.width as f32;

        // Per-sample horizontal flip, chosen with a mask so the batch stays one tensor.
        let flip = Tensor::<B, 1>::random([n], Distribution::Bernoulli(aug.flip as f64), &device);
        let m4 = flip.clone().reshape([n, 1, 1, 1]);
        images = images.clone() * (m4.ones_like() - m4.clone()) + images.flip([3]) * m4;
        let coord = |t: &Tensor<B, 3>, i| t.clone().narrow(2, i, 1);
        let flipped = Tensor::cat(
            vec![coord(&boxes, 2).neg() + w, coord(&boxes, 1), coord(&boxes, 0).neg() + w, coord(&boxes, 3)],
            2,
        );
        let m3 = flip.reshape([n, 1, 1]);
        boxes = boxes * (m3.ones_like() - m3.clone()) + flipped * m3;

        // Per-sample brightness and contrast.
        let contrast = Tensor::<B, 1>::random(
            [n],
            Distribution::Uniform(1.0 - aug.contrast as f64, 1.0 + aug.contrast as f64),
            &device,
        );
        let bright =
            Tensor::<B, 1>::random([n], Distribution::Uniform(-aug.brightness as f64, aug.brightness as f64), &device);
        images = ((images - 0.5) * contrast.reshape([n, 1, 1, 1]) + 0.5 + bright.reshape([n, 1, 1, 1])).clamp(0.0, 1.0);

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

/// One upload per array; pixels travel as u8 (4x fewer bytes than f32).
fn upload_raw<B: Backend>(
    batch: &HostBatch,
    device: &B::Device,
) -> (Tensor<B, 4, Int>, Tensor<B, 3>, Tensor<B, 2, Int>) {
    let (n, h, w, c) = (batch.len, batch.height as usize, batch.width as usize, batch.channels as usize);
    (
        Tensor::from_data(TensorData::new(batch.pixels.clone(), [n, h, w, c]), (device, DType::U8)),
        Tensor::from_data(TensorData::new(batch.boxes.clone(), [n, MAX_BOXES, 4]), device),
        Tensor::<B, 2, Int>::from_data(TensorData::new(batch.labels.clone(), [n, MAX_BOXES]), (device, DType::I8))
            .cast(burn::tensor::IntDType::I32),
    )
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
