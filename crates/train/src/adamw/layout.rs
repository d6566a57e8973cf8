//! The flat state's layout: each parameter's slot in the chunks
//! (`grin_device_step::FlatLayout`, the one a device step writes its
//! gradients in), the moments laid out from Burn's per-parameter records
//! and dissolved back into them.

use super::params::Entry;
use super::{FlatAdamW, Inner, ToRecord};
use crate::TrainBackend;
use burn::module::{AutodiffModule, ParamId};
use burn::tensor::{Int, Tensor, TensorData};
use grin_device_step::{FlatLayout, CHUNK};

/// One parameter's place in the flat tensors.
pub(super) struct Slot<B: TrainBackend> {
    pub(super) id: ParamId,
    pub(super) dims: Vec<usize>,
    /// First value and value count in the flat layout (a multiple of CHUNK
    /// apart from the next slot's start).
    pub(super) start: usize,
    pub(super) len: usize,
    /// Steps this parameter's moments have taken (Burn's `time`).
    pub(super) time: usize,
    pub(super) to_record: ToRecord<B>,
}

impl<B: TrainBackend> Clone for Slot<B> {
    fn clone(&self) -> Self {
        Slot {
            id: self.id,
            dims: self.dims.clone(),
            start: self.start,
            len: self.len,
            time: self.time,
            to_record: self.to_record,
        }
    }
}

/// The moments of every parameter that had a gradient, in chunks, with the
/// layout's constant index tensors.
#[derive(Clone)]
pub(super) struct Flat<B: TrainBackend> {
    pub(super) slots: Vec<Slot<B>>,
    /// `[chunks, CHUNK]`; the last chunk is padding (all zero gradients).
    pub(super) moment_1: Tensor<Inner<B>, 2>,
    pub(super) moment_2: Tensor<Inner<B>, 2>,
    /// Zeros that pad each slot to whole chunks (None where it fills them),
    /// and the last, all-padding chunk.
    pub(super) pads: Vec<Option<Tensor<Inner<B>, 1>>>,
    /// Each slot's chunks, padded with the last chunk to the longest
    /// slot's count: `[slots * widest]`.
    pub(super) slot_chunks: Tensor<Inner<B>, 1, Int>,
    pub(super) widest: usize,
    /// Each chunk's slot: `[chunks]`.
    pub(super) chunk_slot: Tensor<Inner<B>, 1, Int>,
    /// Each slot's (start, len), flattened: `[2 * slots]`.
    pub(super) spans: Tensor<Inner<B>, 1, Int>,
    pub(super) chunks: usize,
}

impl<M: AutodiffModule<B>, B: TrainBackend> FlatAdamW<M, B> {
    /// Moves the flat state back into per-parameter records.
    pub(super) fn dissolve(&mut self) {
        let Some(flat) = self.flat.take() else { return };
        let m = flat.moment_1.reshape([flat.chunks * CHUNK]);
        let v = flat.moment_2.reshape([flat.chunks * CHUNK]);
        for slot in &flat.slots {
            if slot.time == 0 {
                continue;
            }
            let range = slot.start..slot.start + slot.len;
            let record =
                (slot.to_record)(slot.time, m.clone().slice(range.clone()), v.clone().slice(range), &slot.dims);
            self.loose.insert(slot.id, record);
        }
    }

    /// The layout for `entries`, each slot's moments taken from its loose
    /// record (zero, time 0, without one).
    pub(super) fn lay_out(&mut self, entries: &[Entry<B>], device: &burn::tensor::Device<Inner<B>>) -> Flat<B> {
        let layout = FlatLayout::of(entries.iter().map(|e| e.value.shape().num_elements()));
        let chunks = layout.len / CHUNK;
        let mut slots = Vec::with_capacity(entries.len());
        let (mut m, mut v, mut pads) = (vec![], vec![], vec![]);
        let mut chunk_slot = vec![];
        for (i, (e, &start)) in entries.iter().zip(&layout.starts).enumerate() {
            let len = e.value.shape().num_elements();
            let (time, m1, m2) = match self.loose.remove(&e.id) {
                Some(record) => {
                    // A record may have been read onto another device (Burn's adaptor moves it too).
                    let (time, m1, m2) = (e.from_record)(record);
                    (time, m1.to_device(device), m2.to_device(device))
                }
                None => (0, Tensor::zeros([len], device), Tensor::zeros([len], device)),
            };
            let slot_chunks = len.div_ceil(CHUNK);
            let pad = slot_chunks * CHUNK - len;
            let pad = (pad > 0).then(|| Tensor::<Inner<B>, 1>::zeros([pad], device));
            m.push(m1);
            v.push(m2);
            m.extend(pad.clone());
            v.extend(pad.clone());
            pads.push(pad);
            chunk_slot.extend(std::iter::repeat_n(i as i64, slot_chunks));
            slots.push(Slot { id: e.id, dims: e.dims.clone(), start, len, time, to_record: e.to_record });
        }
        let last = Tensor::<Inner<B>, 1>::zeros([CHUNK], device);
        m.push(last.clone());
        v.push(last.clone());
        pads.push(Some(last));
        chunk_slot.push(0);
        let widest = slots.iter().map(|s| s.len.div_ceil(CHUNK)).max().unwrap_or(1);
        let mut slot_chunks = Vec::with_capacity(slots.len() * widest);
        for s in &slots {
            let (first, n) = (s.start / CHUNK, s.len.div_ceil(CHUNK));
            slot_chunks.extend((first..first + n).map(|c| c as i64));
            slot_chunks.extend(std::iter::repeat_n((chunks - 1) as i64, widest - n));
        }
        let spans = slots.iter().flat_map(|s| [s.start as i64, s.len as i64]).collect();
        let ints = |values: Vec<i64>| {
            let n = values.len();
            Tensor::<Inner<B>, 1, Int>::from_data(TensorData::new(values, [n]), device)
        };
        Flat {
            moment_1: Tensor::cat(m, 0).reshape([chunks, CHUNK]),
            moment_2: Tensor::cat(v, 0).reshape([chunks, CHUNK]),
            slot_chunks: ints(slot_chunks),
            chunk_slot: ints(chunk_slot),
            spans: ints(spans),
            slots,
            pads,
            widest,
            chunks,
        }
    }
}
