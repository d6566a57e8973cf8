//! Data-parallel over several devices: moving tensors between them, keeping
//! a replica of the model on each, and summing what the replicas computed
//! onto the first device, which holds the master weights.
//!
//! Every move goes through [`move_to`]: a direct device-to-device copy where
//! the backend has one (CUDA), else a copy through the host (wgpu, whose
//! `to_device` between two devices panics in cubecl-runtime 0.10).
//!
//! BatchNorm normalises each shard with its own statistics, as PyTorch's
//! DistributedDataParallel does without SyncBatchNorm; the running averages
//! are then the shards' averages weighted by their share of the batch.

use crate::TrainBackend;
use anyhow::{Context, Result};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{BasicOps, Device, Tensor, TensorData};
use grin_model::{Detector, DetectorBackend};
use std::cell::Cell;
use std::collections::HashMap;
use std::marker::PhantomData;

thread_local! {
    /// Tensors this thread has moved between two devices through the host
    /// (gradients and batch shards; replicas always load through the host).
    static HOST_COPIES: Cell<usize> = const { Cell::new(0) };
}

/// Tensors copied between devices through the host on this thread so far:
/// how a test tells which path a data-parallel step took.
pub fn host_copies_on_this_thread() -> usize {
    HOST_COPIES.get()
}

/// `tensor` on `device`: directly where the backend copies between devices,
/// else through the host.
pub fn move_to<B: DetectorBackend, const D: usize, K: BasicOps<B>>(
    tensor: Tensor<B, D, K>,
    device: &B::Device,
) -> Tensor<B, D, K> {
    if tensor.device() == *device || B::COPIES_BETWEEN_DEVICES {
        return tensor.to_device(device);
    }
    HOST_COPIES.set(HOST_COPIES.get() + 1);
    Tensor::from_data(tensor.into_data(), device)
}

/// The master's weights and running averages as bytes, read once a step
/// and loaded into every replica (a record holds no device).
pub(crate) fn weights<B: TrainBackend>(model: &Detector<B>) -> Result<Vec<u8>> {
    BinBytesRecorder::<FullPrecisionSettings>::default()
        .record(model.clone().into_record(), ())
        .context("data-parallel: reading the master weights")
}

/// `replica` (on its own device) with the master's `weights`; parameter ids
/// come with them, so its gradients line up with the master's parameters.
pub(crate) fn refresh<B: TrainBackend>(
    replica: Detector<B>,
    weights: &[u8],
    device: &B::Device,
) -> Result<Detector<B>> {
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(weights.to_vec(), device)
        .context("data-parallel: loading the master weights into a replica")?;
    Ok(replica.load_record(record))
}

/// Sums every device's gradients onto `device`, parameter by parameter (each
/// is already weighted by its shard's share of the batch).
pub(crate) fn sum_gradients<B: TrainBackend>(
    model: &Detector<B>,
    parts: Vec<GradientsParams>,
    device: &Device<B::InnerBackend>,
) -> GradientsParams {
    struct Sum<'a, B: AutodiffBackend> {
        parts: Vec<GradientsParams>,
        total: GradientsParams,
        device: &'a Device<B::InnerBackend>,
    }
    impl<B: TrainBackend> ModuleVisitor<B> for Sum<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let mut sum: Option<Tensor<B::InnerBackend, D>> = None;
            for grads in &mut self.parts {
                if let Some(g) = grads.remove::<B::InnerBackend, D>(param.id) {
                    let g = move_to(g, self.device);
                    sum = Some(match sum {
                        None => g,
                        Some(s) => s + g,
                    });
                }
            }
            if let Some(sum) = sum {
                self.total.register(param.id, sum);
            }
        }
    }
    let mut visitor = Sum::<B> { parts, total: GradientsParams::new(), device };
    model.visit(&mut visitor);
    visitor.total
}

/// The master with each BatchNorm running average set to the replicas'
/// averages weighted by `shares` (the master, which ran the first shard,
/// first). A running average is the one float that is not trained: Burn
/// visits it as a parameter that does not require a gradient.
pub(crate) fn average_running_stats<B: TrainBackend>(
    model: Detector<B>,
    replicas: &[&Detector<B>],
    shares: &[f32],
) -> Detector<B> {
    type Values = HashMap<ParamId, TensorData>;
    struct Collect<B: Backend>(Values, PhantomData<B>);
    impl<B: Backend> ModuleVisitor<B> for Collect<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let value = param.val();
            if !value.is_require_grad() {
                self.0.insert(param.id, value.into_data());
            }
        }
    }
    // A forward pass leaves its running-average update pending inside
    // Burn's RunningState until something syncs it; a visitor does not, a
    // record does (the clones share the state).
    let _ = model.clone().into_record();
    let others: Vec<_> = replicas
        .iter()
        .map(|r| {
            let _ = (*r).clone().into_record();
            let mut c = Collect::<B>(HashMap::new(), PhantomData);
            r.visit(&mut c);
            c.0
        })
        .collect();
    struct Average<'a, B: Backend> {
        others: &'a [Values],
        shares: &'a [f32],
        _b: PhantomData<B>,
    }
    impl<B: Backend> ModuleMapper<B> for Average<'_, B> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            if param.val().is_require_grad() {
                return param;
            }
            let id = param.id;
            param.map(|own| {
                let device = own.device();
                let mut sum = own * self.shares[0];
                for (values, &share) in self.others.iter().zip(&self.shares[1..]) {
                    if let Some(v) = values.get(&id) {
                        sum = sum + Tensor::<B, D>::from_data(v.clone(), &device) * share;
                    }
                }
                sum
            })
        }
    }
    model.map(&mut Average::<B> { others: &others, shares, _b: PhantomData })
}
