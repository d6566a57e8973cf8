//! What one training step consumes, and the one way host batches reach the
//! device (u8 pixels, converted there).

use burn::tensor::backend::Backend;
use burn::tensor::{DType, ElementConversion, Int, IntDType, Tensor, TensorData};
use grin_features::{HostBatch, MAX_BOXES};
use grin_terms::pixel;
use rayon::prelude::*;

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

/// Samples' u8 pixels on the device, one row per sample. Stored as u8
/// where the backend has it; where it has not (WGSL has no u8, and Burn
/// would widen each pixel to four bytes), packed four to an i32 and
/// unpacked on the device, so a resident dataset keeps the bytes of u8.
#[derive(Debug, Clone)]
pub(crate) struct DevicePixels<B: Backend> {
    /// `[N, row]`: `row` is `H * W * C` as u8, or that over 4 (rounded up) packed.
    rows: Tensor<B, 2, Int>,
    packed: bool,
    height: usize,
    width: usize,
    channels: usize,
}

impl<B: Backend> DevicePixels<B> {
    /// Pixels `[n, height, width, channels]` in that order, as stored.
    pub(crate) fn upload(pixels: &[u8], n: usize, [height, width, channels]: [usize; 3], device: &B::Device) -> Self {
        let per_sample = height * width * channels;
        let packed = !B::supports_dtype(device, DType::U8);
        let rows = if packed {
            let words = per_sample.div_ceil(4);
            let mut packed_rows = Vec::with_capacity(n * words);
            for sample in pixels.chunks_exact(per_sample).take(n) {
                packed_rows.extend(sample.chunks(4).map(|p| {
                    let mut word = [0u8; 4];
                    word[..p.len()].copy_from_slice(p);
                    i32::from_le_bytes(word)
                }));
            }
            Tensor::from_data(TensorData::new(packed_rows, [n, words]), (device, DType::I32))
        } else {
            Tensor::from_data(TensorData::new(pixels[..n * per_sample].to_vec(), [n, per_sample]), (device, DType::U8))
        };
        DevicePixels { rows, packed, height, width, channels }
    }

    /// The samples at `indices` (`[B]`, on the device).
    pub(crate) fn select(&self, indices: Tensor<B, 1, Int>) -> Self {
        DevicePixels { rows: self.rows.clone().select(0, indices), ..self.clone() }
    }

    /// Float `[N, C, H, W]` in 0..1.
    pub(crate) fn images(self) -> Tensor<B, 4> {
        let n = self.rows.dims()[0];
        let (h, w, c) = (self.height, self.width, self.channels);
        let bytes = if self.packed {
            // Byte k of each little-endian word; the mask also clears the
            // sign bits an arithmetic shift brings in.
            let words = self.rows.dims()[1];
            let byte =
                |k: i32| self.rows.clone().bitwise_right_shift_scalar((8 * k).elem()).bitwise_and_scalar(0xFF.elem());
            let unpacked: Tensor<B, 3, Int> = Tensor::stack((0..4).map(byte).collect(), 2);
            unpacked.reshape([n, words * 4]).narrow(1, 0, h * w * c)
        } else {
            self.rows
        };
        bytes.reshape([n, h, w, c]).float().permute([0, 3, 1, 2]) / pixel::MAX
    }

    /// Bytes on the device.
    pub(crate) fn device_bytes(n: usize, [height, width, channels]: [usize; 3]) -> u64 {
        (n * (height * width * channels).div_ceil(4) * 4) as u64
    }
}

pub fn upload<B: Backend>(batch: &HostBatch, device: &B::Device) -> DeviceBatch<B> {
    let (n, h, w, c) = (batch.len, batch.height as usize, batch.width as usize, batch.channels as usize);
    let (boxes, labels) = upload_boxes(batch, device);
    DeviceBatch { images: DevicePixels::upload(&batch.pixels, n, [h, w, c], device).images(), boxes, labels }
}

/// The boxes `[N, MAX_BOXES, 4]` and labels `[N, MAX_BOXES]` of `batch`.
pub(crate) fn upload_boxes<B: Backend>(batch: &HostBatch, device: &B::Device) -> (Tensor<B, 3>, Tensor<B, 2, Int>) {
    let n = batch.len;
    // Labels are a few bytes a sample: i8 where the backend has it, else widened on the host.
    let labels = if B::supports_dtype(device, DType::I8) {
        Tensor::<B, 2, Int>::from_data(TensorData::new(batch.labels.clone(), [n, MAX_BOXES]), (device, DType::I8))
            .cast(IntDType::I32)
    } else {
        let wide: Vec<i32> = batch.labels.iter().map(|&l| l as i32).collect();
        Tensor::from_data(TensorData::new(wide, [n, MAX_BOXES]), (device, DType::I32))
    };
    (Tensor::from_data(TensorData::new(batch.boxes.clone(), [n, MAX_BOXES, 4]), device), labels)
}

/// Samples `indices` of `bytes` (`[N, height, width, channels]` u8, as
/// stored) as [`DevicePixels::images`] makes them (`pixel::to_unit`,
/// `[B, C, H, W]`), sample `i` mirrored left to right where `flips[i]`: in
/// one pass, for a backend whose tensors live in host memory.
pub(crate) fn host_images<B: Backend>(
    bytes: &[u8],
    indices: &[u64],
    [height, width, channels]: [usize; 3],
    flips: &[bool],
    device: &B::Device,
) -> Tensor<B, 4> {
    let (h, w, c) = (height, width, channels);
    let per_sample = h * w * c;
    assert_eq!(flips.len(), indices.len(), "a flip for each sample");
    let mut out = vec![0.0f32; indices.len() * per_sample];
    // One sample per task: each writes its own planes, so the values do not
    // depend on the thread count.
    let samples = out.par_chunks_exact_mut(per_sample).zip(indices.par_iter()).zip(flips.par_iter());
    samples.for_each(|((planes, &i), &flip)| {
        let sample = &bytes[i as usize * per_sample..][..per_sample];
        for (ch, plane) in planes.chunks_exact_mut(h * w).enumerate() {
            for (src, dst) in sample.chunks_exact(w * c).zip(plane.chunks_exact_mut(w)) {
                for (x, v) in dst.iter_mut().enumerate() {
                    let from = if flip { w - 1 - x } else { x };
                    *v = pixel::to_unit(src[from * c + ch]);
                }
            }
        }
    });
    Tensor::from_data(TensorData::new(out, [indices.len(), c, h, w]), device)
}
