//! grin-cpu-step: grin's own training step on the CPU: forward, target
//! assignment, loss and backward for the whole detector, written out, with
//! every buffer kept from one step to the next.
//!
//! On burn-ndarray the same step composed from Burn ops was a few hundred
//! small ops, each allocating its output (and page-faulting it in), with
//! reshapes that copy, BatchNorm as a dozen passes and conv backward
//! through generic kernels: 0.42x PyTorch eager's speed on the same network.
//! Here each conv + BatchNorm + ReLU is one fused op per direction
//! ([`layer`]), 1x1 convs are GEMMs ([`gemm`]), and the loss is one pass per
//! image ([`loss`]). Burn still owns the parameters, the optimizer and the
//! checkpoints: [`CpuStep::gradients`] hands back Burn gradients, and GPU
//! backends run grin-device-step's step instead (`grin_train`'s `step`).
//!
//! Depends on grin-model (the detector, its layer list and wiring, the
//! loss's rule) and on the CPU kernels; never on grin-device-step, grin-train
//! or a GPU backend.

// The step against Burn's autodiff, in the lib's test binary: one binary
// less to link (each monomorphises the detector's training again). It
// builds its model on both sides from Burn's generator, so every test here
// that draws from it does so under grin's lock (`grin_model::seeded`).
#[cfg(test)]
mod autodiff_parity;
mod dots;
mod fuse;
mod gemm;
mod layer;
mod loss;
mod net;
mod rows;
mod view;

pub use layer::LayerGrads;
pub use loss::{Labels, LossValues};

use burn::module::Param;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use grin_model::LossWeights;
use grin_model::{Detector, Trainable};
use grin_model::{DetectorBackend, Phase};
use grin_net::Points;
use layer::{Act, Input, InputGrad};
use net::{Kind, Net};

/// A batch as the step reads it: images `[batch, channels, height, width]`
/// in 0..1, and their labelled boxes.
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    pub images: &'a [f32],
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub labels: Labels<'a>,
}

/// The step's buffers, kept while the shapes stay the same.
#[derive(Default)]
pub struct CpuStep {
    /// The shapes the buffers were made for: batch, channels, height,
    /// width, and each layer's output channels.
    key: Vec<usize>,
    /// The image, channel-major.
    input: Vec<f32>,
    acts: Vec<Act>,
    scratch: loss::LossScratch,
}

impl CpuStep {
    pub fn new() -> CpuStep {
        CpuStep::default()
    }

    /// Fits the buffers to `net` and `batch`, reallocating only when a shape changed.
    fn prepare(&mut self, net: &Net, batch: &Batch) {
        let mut key = vec![batch.batch, batch.channels, batch.height, batch.width];
        key.extend(net.layers.iter().map(|l| l.cout));
        key.extend(net.deferred.iter().map(|&d| d as usize));
        if key != self.key {
            let mut acts: Vec<Act> = Vec::with_capacity(net.layers.len());
            for (i, layer) in net.layers.iter().enumerate() {
                let (h, w) = match (layer.kind, net.inputs[i]) {
                    // Fusion's output has the size of the map it adds into.
                    (Kind::AddUp { skip }, _) => (acts[skip].height, acts[skip].width),
                    (_, None) => (batch.height, batch.width),
                    (_, Some(j)) => (acts[j].height, acts[j].width),
                };
                let s = layer.stride();
                acts.push(Act::new(layer, batch.batch, h.div_ceil(s), w.div_ceil(s), net.deferred[i]));
            }
            self.acts = acts;
            self.input = vec![0.0; batch.images.len()];
            self.key = key;
        }
        // [batch][channels][points] -> [channels][batch][points].
        let plane = batch.height * batch.width;
        assert_eq!(batch.images.len(), batch.batch * batch.channels * plane, "image batch size");
        for (i, image) in batch.images.chunks_exact(plane).enumerate() {
            let (b, c) = (i / batch.channels, i % batch.channels);
            self.input[(c * batch.batch + b) * plane..][..plane].copy_from_slice(image);
        }
    }

    /// Layer `i`'s input: the image or an earlier layer's output.
    fn input_of<'a>(net: &Net, input: &'a [f32], acts: &'a [Act], batch: &Batch, i: usize) -> Input<'a> {
        match net.inputs[i] {
            None => Input::new(input, batch.height, batch.width),
            Some(j) => acts[j].output(),
        }
    }

    /// Runs the network in training mode (batch statistics) on `batch`.
    fn forward(&mut self, net: &Net, batch: &Batch) {
        self.prepare(net, batch);
        for (i, layer) in net.layers.iter().enumerate() {
            let (done, rest) = self.acts.split_at_mut(i);
            let x = Self::input_of(net, &self.input, done, batch, i);
            match layer.kind {
                Kind::AddUp { skip } => fuse::forward(x, &done[skip].y, &mut rest[0]),
                _ => layer::forward(layer, x, &mut rest[0]),
            }
        }
    }

    fn loss(&mut self, net: &Net, batch: &Batch, points: &Points, weights: LossWeights) -> LossValues {
        // The raw gradients go into the output layers' `dy`: moved out for
        // the call, beside the outputs it reads.
        let mut grads: Vec<Vec<f32>> = net.outputs.iter().map(|&i| std::mem::take(&mut self.acts[i].dy)).collect();
        let levels: Vec<&[f32]> = net.outputs.iter().map(|&i| &self.acts[i].y[..]).collect();
        let mut views: Vec<&mut [f32]> = grads.iter_mut().map(|g| &mut g[..]).collect();
        let values = loss::loss(&mut self.scratch, &levels, &mut views, batch.batch, points, batch.labels, weights);
        for (&i, g) in net.outputs.iter().zip(grads) {
            self.acts[i].dy = g;
            self.acts[i].has_grad = true;
        }
        values
    }

    fn backward(&mut self, net: &Net, batch: &Batch) -> Vec<LayerGrads> {
        for (i, act) in self.acts.iter_mut().enumerate() {
            act.has_grad = net.outputs.contains(&i);
        }
        let mut grads: Vec<Option<LayerGrads>> = vec![None; net.layers.len()];
        // Heads first (they come last), so a tapped trunk layer holds its
        // head's gradient before the trunk layer after it adds its own.
        for i in (0..net.layers.len()).rev() {
            let (before, rest) = self.acts.split_at_mut(i);
            let act = &mut rest[0];
            assert!(act.has_grad, "layer {i} got no gradient: its output feeds nothing");
            if let Kind::AddUp { skip } = net.layers[i].kind {
                let j = net.inputs[i].expect("fusion reads its lateral conv");
                let [lateral, target] = before.get_disjoint_mut([j, skip]).expect("two earlier layers");
                let grad = |a: &mut layer::Act| {
                    let accumulate = a.has_grad;
                    a.has_grad = true;
                    accumulate
                };
                let (acc_dx, acc_skip) = (grad(lateral), grad(target));
                let x = Input::new(&lateral.y[..], lateral.height, lateral.width);
                grads[i] = Some(fuse::backward(
                    act,
                    x,
                    InputGrad { values: &mut lateral.dy[..], accumulate: acc_dx },
                    InputGrad { values: &mut target.dy[..], accumulate: acc_skip },
                ));
                continue;
            }
            let (x, dx) = match net.inputs[i] {
                None => (Input::new(&self.input[..], batch.height, batch.width), None),
                Some(j) => {
                    let prev = &mut before[j];
                    let accumulate = prev.has_grad;
                    prev.has_grad = true;
                    let (x, values) = prev.output_and_grad();
                    (x, Some(InputGrad { values, accumulate }))
                }
            };
            grads[i] = Some(layer::backward(&net.layers[i], x, act, dx));
        }
        grads.into_iter().map(|g| g.expect("every layer ran backward")).collect()
    }

    /// Loss and gradients of one batch, with each phase reported to `phase`
    /// as it ends (for timing); the layers' gradients are in
    /// [`Detector::trainables`] order.
    pub fn run<B: DetectorBackend>(
        &mut self,
        model: &Detector<B>,
        batch: Batch,
        points: &Points,
        weights: LossWeights,
        phase: &mut dyn FnMut(Phase),
    ) -> (LossValues, Vec<LayerGrads>) {
        // The parameters as plain data: ~100K values, copied once a step.
        let net = Net::new(model);
        on_pool(|| self.forward(&net, &batch));
        phase(Phase::Forward);
        let values = on_pool(|| self.loss(&net, &batch, points, weights));
        phase(Phase::Loss);
        let grads = on_pool(|| self.backward(&net, &batch));
        phase(Phase::Backward);
        (values, grads)
    }

    /// The training forward pass alone (batch statistics, no loss): `T_i`
    /// timed on the ops the step runs.
    pub fn forward_only<B: DetectorBackend>(&mut self, model: &Detector<B>, batch: Batch) {
        self.forward(&Net::new(model), &batch);
    }

    /// [`CpuStep::run`] as Burn's optimizer takes it: gradients keyed by
    /// parameter, and the BatchNorm running averages updated as Burn's
    /// `BatchNorm` updates them in training.
    pub fn gradients<B: AutodiffBackend + DetectorBackend>(
        &mut self,
        model: &Detector<B>,
        batch: Batch,
        points: &Points,
        weights: LossWeights,
        device: &B::Device,
        phase: &mut dyn FnMut(Phase),
    ) -> (LossValues, GradientsParams) {
        let (values, layers) = self.run(model, batch, points, weights, phase);
        let mut grads = GradientsParams::new();
        let (trainables, _) = model.trainables();
        for (t, g) in trainables.iter().zip(layers) {
            let (conv, norm) = match t {
                Trainable::ConvBn { conv, norm, .. } => (*conv, Some(*norm)),
                Trainable::Out(conv) | Trainable::Lateral { conv, .. } => (*conv, None),
                Trainable::AddUp { .. } => continue,
            };
            register(&mut grads, &conv.weight, g.weight, device);
            if let (Some(bias), Some(values)) = (&conv.bias, g.bias) {
                register(&mut grads, bias, values, device);
            }
            if let (Some(norm), Some((gamma, beta)), Some((mean, var))) = (norm, g.norm, g.stats) {
                register(&mut grads, &norm.gamma, gamma, device);
                register(&mut grads, &norm.beta, beta, device);
                grin_model::running::update(&norm.running_mean, mean, norm.momentum, device);
                grin_model::running::update(&norm.running_var, var, norm.momentum, device);
            }
        }
        (values, grads)
    }
}

/// Runs `op` on one of rayon's workers, so that the phase's parallel loops
/// (a hundred or so a step) start from that worker's own queue: from any
/// other thread each loop is injected into the pool and waited for on a
/// lock, which wakes and parks threads around every layer.
fn on_pool<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| op())
}

/// Registers `values` as the gradient of `param` (the inner backend's
/// tensor, as Burn's optimizers take them).
fn register<B: AutodiffBackend, const D: usize>(
    grads: &mut GradientsParams,
    param: &Param<Tensor<B, D>>,
    values: Vec<f32>,
    device: &B::Device,
) {
    let dims = param.val().shape();
    let tensor = Tensor::<B::InnerBackend, D>::from_data(TensorData::new(values, dims), device);
    grads.register(param.id, tensor);
}
