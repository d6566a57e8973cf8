//! The device step's view of the detector: each layer's parameters on
//! the device with the slots of the flat buffers its gradients go to, in
//! [`grin_model::graph`]'s order and wiring; and the point table, kept on each
//! device across steps.

use super::loss::PointTable;
use super::norm::NormParams;
use super::{Cube, Dev};
use crate::DeviceStep;
use burn::module::{Param, ParamId};
use burn::tensor::{Tensor, TensorData};
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};
use grin_model::graph::{Kind, Wiring};
use grin_model::{Detector, Trainable};
use grin_net::Points;
use std::collections::HashMap;

pub(super) type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;

pub(super) fn prim<R: Cube, F: FloatElement, I: IntElement, BT: BoolElement, const D: usize>(
    t: Tensor<B<R, F, I, BT>, D>,
) -> Dev<R> {
    t.into_primitive().tensor()
}

/// The point tables on the devices the step has run on, made once per run
/// (per device and point count: a data-parallel step runs on several).
pub(super) struct State<R: Cube> {
    tables: Vec<(R::Device, usize, PointTable<R>)>,
}

/// One layer's parameters on the device, and where its gradients go.
pub(super) struct Layer<R: Cube> {
    pub kind: Kind,
    pub weight: Option<Dev<R>>,
    pub bias: Option<Dev<R>>,
    pub norm: Option<Norm<R>>,
    pub relu: bool,
    pub weight_at: usize,
    pub bias_at: Option<usize>,
}

pub(super) struct Norm<R: Cube> {
    pub gamma: Dev<R>,
    pub beta: Dev<R>,
    pub running_mean: Dev<R>,
    pub running_var: Dev<R>,
    pub gamma_at: usize,
    pub beta_at: usize,
    pub epsilon: f32,
    pub momentum: f32,
}

impl<R: Cube> Norm<R> {
    pub(super) fn params(&self) -> NormParams<'_, R> {
        NormParams {
            gamma: &self.gamma,
            beta: &self.beta,
            running_mean: &self.running_mean,
            running_var: &self.running_var,
        }
    }
}

/// `model`'s layers on the device, each with its gradients' slots in the
/// flat layout (`starts`, by parameter), and how they connect.
pub(super) fn layers<R: Cube, F: FloatElement, I: IntElement, BT: BoolElement>(
    model: &Detector<B<R, F, I, BT>>,
    starts: &HashMap<ParamId, usize>,
) -> (Vec<Layer<R>>, Wiring) {
    let (trainables, heads) = model.trainables();
    let wiring = Wiring::of(&trainables, &heads);
    let at = |p: &Param<Tensor<B<R, F, I, BT>, 1>>| starts.get(&p.id).copied();
    let at4 = |p: &Param<Tensor<B<R, F, I, BT>, 4>>| starts.get(&p.id).copied();
    let layers = trainables
        .iter()
        .map(|t| match t {
            Trainable::ConvBn { conv, norm, relu } => Layer {
                kind: Kind::of(*conv),
                weight: Some(prim(conv.weight.val())),
                bias: conv.bias.as_ref().map(|b| prim(b.val())),
                norm: Some(Norm {
                    gamma: prim(norm.gamma.val()),
                    beta: prim(norm.beta.val()),
                    running_mean: prim(norm.running_mean.value()),
                    running_var: prim(norm.running_var.value()),
                    gamma_at: at(&norm.gamma).expect("gamma is trained"),
                    beta_at: at(&norm.beta).expect("beta is trained"),
                    epsilon: norm.epsilon as f32,
                    momentum: norm.momentum as f32,
                }),
                relu: *relu,
                weight_at: at4(&conv.weight).expect("conv weights are trained"),
                bias_at: conv.bias.as_ref().and_then(&at),
            },
            Trainable::Out(conv) | Trainable::Lateral { conv, .. } => Layer {
                kind: Kind::of(*conv),
                weight: Some(prim(conv.weight.val())),
                bias: conv.bias.as_ref().map(|b| prim(b.val())),
                norm: None,
                relu: false,
                weight_at: at4(&conv.weight).expect("conv weights are trained"),
                bias_at: conv.bias.as_ref().and_then(&at),
            },
            Trainable::AddUp { skip } => Layer {
                kind: Kind::AddUp { skip: *skip },
                weight: None,
                bias: None,
                norm: None,
                relu: false,
                weight_at: 0,
                bias_at: None,
            },
        })
        .collect();
    (layers, wiring)
}

/// The device's point table, made on first use and when the points change.
pub(super) fn table<R: Cube, F: FloatElement, I: IntElement, BT: BoolElement>(
    step: &mut DeviceStep,
    points: &Points,
    device: &burn::tensor::Device<B<R, F, I, BT>>,
) -> PointTable<R> {
    if !step.state.as_ref().is_some_and(|s| s.is::<State<R>>()) {
        step.state = Some(Box::new(State::<R> { tables: Vec::new() }));
    }
    let state = step.state.as_mut().and_then(|s| s.downcast_mut::<State<R>>()).expect("made above");
    let n = points.len();
    let held = state.tables.iter().position(|(d, len, _)| d == device && *len == n);
    let at = match held {
        Some(at) => at,
        None => {
            let column =
                |v: &[f32]| prim(Tensor::<B<R, F, I, BT>, 1>::from_data(TensorData::new(v.to_vec(), [n]), device));
            let table = PointTable {
                cx: column(&points.cx),
                cy: column(&points.cy),
                stride: column(&points.stride),
                size_lo: column(&points.size_lo),
                // Infinity does not survive every backend's comparisons; a huge size does.
                size_hi: column(&points.size_hi.iter().map(|h| h.min(1e9)).collect::<Vec<_>>()),
            };
            state.tables.retain(|(d, _, _)| d != device);
            state.tables.push((device.clone(), n, table));
            state.tables.len() - 1
        }
    };
    state.tables[at].2.clone()
}
