//! The device step on runtime `R`: the layers of [`grin_model::graph`] forward,
//! the loss, and back, each through this module's kernels, the gradients
//! and the parameters written into the flat buffers
//! ([`crate::FlatLayout`]).

use super::conv3x3::{self, Shape3x3};
use super::fuse::{self, FuseShape};
use super::loss::{self, LossShape};
use super::net::{layers, prim, table, Layer, Norm, B};
use super::norm::{self, NormGradsAt, NormShape};
use super::pointwise::{self, Shape1x1};
use super::{Cube, Dev, Flat, Target};
use crate::{DeviceBatch, DeviceOutput, DeviceStep};
use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{BoolElement, FloatElement, IntElement};
use grin_model::graph::{Kind, Wiring};
use grin_model::Detector;
use grin_model::LossWeights;
use grin_model::Phase;
use grin_net::Points;
use grin_terms::output::OUTPUTS;

/// A layer's activations: its size, the conv's output `z` (before
/// BatchNorm), the output `y`, BatchNorm's (mean, 1/std) and the moved
/// running averages.
struct Act<R: Cube> {
    height: usize,
    width: usize,
    channels: usize,
    z: Dev<R>,
    y: Dev<R>,
    stats: Option<Dev<R>>,
    running: Option<(Dev<R>, Dev<R>)>,
}

/// One step's network on the device: its layers and their wiring, the
/// batch's images and the raw output's layout.
struct Net<R: Cube> {
    layers: Vec<Layer<R>>,
    wiring: Wiring,
    images: Dev<R>,
    /// Images, channels, height, width.
    batch: usize,
    channels: usize,
    height: usize,
    width: usize,
    /// Points of all levels, and each level's first point.
    points: usize,
    level_starts: Vec<usize>,
}

/// The device step; see [the crate's own docs].
pub(crate) fn run<R: Cube, F: FloatElement, I: IntElement, BT: BoolElement>(
    step: &mut DeviceStep,
    model: &Detector<B<R, F, I, BT>>,
    batch: DeviceBatch<'_, B<R, F, I, BT>>,
    points: &Points,
    weights: LossWeights,
    scale: f32,
    phase: &mut dyn FnMut(Phase),
) -> DeviceOutput<B<R, F, I, BT>> {
    let (layers, wiring) = layers(model, &step.starts);
    let [n, channels, height, width] = batch.images.dims();
    let net = Net {
        layers,
        wiring,
        images: prim(batch.images.clone()),
        batch: n,
        channels,
        height,
        width,
        points: points.len(),
        level_starts: level_starts(points),
    };
    let table = table::<R, F, I, BT>(step, points, &batch.images.device());
    let (acts, raw) = net.forward();
    phase(Phase::Forward);

    let shape = LossShape::new(n, net.points, batch.labels.dims()[1], weights, scale);
    let labels = batch.labels.clone().into_primitive();
    let out = loss::loss(&raw, &prim(batch.boxes.clone()), &labels, &table, shape);
    phase(Phase::Loss);

    let flat = Flat { grads: super::empty(&raw, [step.layout.len]), values: super::empty(&raw, [step.layout.len]) };
    net.backward(&acts, &out.draw, &flat);
    phase(Phase::Backward);

    let float = |t: Dev<R>| Tensor::<B<R, F, I, BT>, 1>::from_primitive(TensorPrimitive::Float(t));
    let running = acts.into_iter().map(|a| a.running.map(|(m, v)| (float(m), float(v)))).collect();
    DeviceOutput { grads: float(flat.grads), values: float(flat.values), running, parts: out.parts.map(float) }
}

impl<R: Cube> Net<R> {
    /// Layer `i`'s input: the image or an earlier layer's output, with its
    /// height, width and channels.
    fn input(&self, acts: &[Act<R>], i: usize) -> (Dev<R>, usize, usize, usize) {
        match self.wiring.inputs[i] {
            None => (self.images.clone(), self.height, self.width, self.channels),
            Some(j) => (acts[j].y.clone(), acts[j].height, acts[j].width, acts[j].channels),
        }
    }

    /// A 1x1 layer's shape: an output layer writes its level's band of the
    /// raw output, `[batch, OUTPUTS, points]`.
    fn shape1x1(&self, i: usize, cin: usize, cout: usize, points: usize) -> Shape1x1 {
        let (row, start) = match self.wiring.outputs.iter().position(|&o| o == i) {
            Some(level) => (self.points, self.level_starts[level]),
            None => (points, 0),
        };
        Shape1x1 { batch: self.batch, cin, cout, points, row, start }
    }

    /// Every layer in order, and the raw output the heads wrote.
    fn forward(&self) -> (Vec<Act<R>>, Dev<R>) {
        let raw = super::empty(&self.images, [self.batch, OUTPUTS, self.points]);
        let mut acts: Vec<Act<R>> = Vec::with_capacity(self.layers.len());
        for (i, layer) in self.layers.iter().enumerate() {
            let (x, h, w, cin) = self.input(&acts, i);
            let act = match layer.kind {
                Kind::AddUp { skip } => {
                    let s = &acts[skip];
                    let shape = fuse_shape(self.batch, s, h, w);
                    let y = fuse::forward(&s.y, &x, shape);
                    Act {
                        height: s.height,
                        width: s.width,
                        channels: s.channels,
                        z: y.clone(),
                        y,
                        stats: None,
                        running: None,
                    }
                }
                Kind::Dense { stride } | Kind::Depthwise { stride } => {
                    let weight = layer.weight.as_ref().expect("a conv");
                    let s = Shape3x3::new(self.batch, cin, weight.meta.shape()[0], h, w, stride);
                    let z = conv3x3::conv3x3(&x, weight, s, matches!(layer.kind, Kind::Depthwise { .. }));
                    normed(layer, z, s.cout, s.out_height, s.out_width, self.batch)
                }
                Kind::Pointwise => {
                    let weight = layer.weight.as_ref().expect("a conv");
                    let s = self.shape1x1(i, cin, weight.meta.shape()[0], h * w);
                    let band = self.wiring.outputs.contains(&i).then_some(&raw);
                    let z = pointwise::forward(&x, weight, layer.bias.as_ref(), band, s);
                    normed(layer, z, s.cout, h, w, self.batch)
                }
            };
            acts.push(act);
        }
        (acts, raw)
    }

    /// Every layer back, last first (a tapped trunk layer holds its head's
    /// gradient before the trunk layer after it adds its own), from `draw`,
    /// the loss's gradient at the raw output.
    fn backward(&self, acts: &[Act<R>], draw: &Dev<R>, flat: &Flat<R>) {
        let mut dys: Vec<Option<Dev<R>>> = (0..self.layers.len()).map(|_| None).collect();
        for &o in &self.wiring.outputs {
            dys[o] = Some(draw.clone());
        }
        for i in (0..self.layers.len()).rev() {
            let (layer, act, input) = (&self.layers[i], &acts[i], self.wiring.inputs[i]);
            let g = dys[i].take().unwrap_or_else(|| panic!("layer {i} got no gradient: its output feeds nothing"));
            let (x, h, w, cin) = self.input(acts, i);
            if let Kind::AddUp { skip } = layer.kind {
                let j = input.expect("fusion reads its lateral conv");
                dys[j] = Some(fuse::coarse_grad(&g, target(&dys[j]), fuse_shape(self.batch, act, h, w)));
                match &dys[skip] {
                    Some(held) => fuse::add_to(held, &g),
                    None => dys[skip] = Some(g),
                }
                continue;
            }
            let dz = match (&layer.norm, &act.stats) {
                (Some(norm), Some(stats)) => {
                    let s = norm_shape(norm, self.batch, act.channels, act.height * act.width);
                    let into = NormGradsAt { flat, gamma_at: norm.gamma_at, beta_at: norm.beta_at };
                    norm::backward(&g, &act.z, stats, &norm.params(), into, s, layer.relu)
                }
                _ => g,
            };
            let weight = layer.weight.as_ref().expect("a conv");
            let dx = match layer.kind {
                Kind::Dense { stride } | Kind::Depthwise { stride } => {
                    let depthwise = matches!(layer.kind, Kind::Depthwise { .. });
                    let s = Shape3x3::new(self.batch, cin, act.channels, h, w, stride);
                    conv3x3::weight_grad(&x, &dz, weight, flat, layer.weight_at, s, depthwise);
                    input.map(|j| conv3x3::input_grad(weight, &dz, target(&dys[j]), s, depthwise))
                }
                Kind::Pointwise => {
                    let s = self.shape1x1(i, cin, act.channels, h * w);
                    let bias = layer.bias.as_ref();
                    pointwise::weight_grad(&x, &dz, weight, bias, flat, layer.weight_at, layer.bias_at, s);
                    input.map(|j| pointwise::input_grad(weight, &dz, target(&dys[j]), s))
                }
                Kind::AddUp { .. } => unreachable!("handled above"),
            };
            if let (Some(j), Some(dx)) = (input, dx) {
                dys[j] = Some(dx);
            }
        }
    }
}

/// Fusion into `fine` of a coarse map of `coarse_height` x `coarse_width`.
fn fuse_shape<R: Cube>(batch: usize, fine: &Act<R>, coarse_height: usize, coarse_width: usize) -> FuseShape {
    FuseShape { batch, channels: fine.channels, height: fine.height, width: fine.width, coarse_height, coarse_width }
}

fn target<R: Cube>(held: &Option<Dev<R>>) -> Target<'_, R> {
    match held {
        Some(t) => Target::AddTo(t),
        None => Target::New,
    }
}

fn norm_shape<R: Cube>(norm: &Norm<R>, batch: usize, channels: usize, points: usize) -> NormShape {
    NormShape { batch, channels, points, epsilon: norm.epsilon, momentum: norm.momentum }
}

/// `z` through the layer's BatchNorm (+ ReLU) when it has one.
fn normed<R: Cube>(layer: &Layer<R>, z: Dev<R>, channels: usize, height: usize, width: usize, batch: usize) -> Act<R> {
    match &layer.norm {
        Some(norm) => {
            let s = norm_shape(norm, batch, channels, height * width);
            let out = norm::forward(&z, &norm.params(), s, layer.relu);
            Act {
                height,
                width,
                channels,
                z,
                y: out.y,
                stats: Some(out.stats),
                running: Some((out.running_mean, out.running_var)),
            }
        }
        None => Act { height, width, channels, z: z.clone(), y: z, stats: None, running: None },
    }
}

/// Each level's first point in the raw output.
fn level_starts(points: &Points) -> Vec<usize> {
    let mut start = 0;
    points
        .levels
        .iter()
        .map(|(h, w)| {
            let s = start;
            start += h * w;
            s
        })
        .collect()
}
