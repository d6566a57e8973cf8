//! What one training step consumes, and the one way host batches reach the
//! device (u8 pixels, converted there).

use burn::tensor::backend::Backend;
use burn::tensor::{DType, FloatDType, Int, Tensor, TensorData};
use grin_features::{HostBatch, MAX_BOXES};

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
pub(crate) fn pixels_to_images<B: Backend>(pixels: Tensor<B, 4, Int>) -> Tensor<B, 4> {
    pixels.cast(FloatDType::F32).permute([0, 3, 1, 2]) / 255.0
}

pub fn upload<B: Backend>(batch: &HostBatch, device: &B::Device) -> DeviceBatch<B> {
    let (pixels, boxes, labels) = upload_raw(batch, device);
    DeviceBatch { images: pixels_to_images(pixels), boxes, labels }
}

/// One upload per array; pixels travel as u8 (4x fewer bytes than f32).
pub(crate) fn upload_raw<B: Backend>(
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
