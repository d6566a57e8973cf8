//! What a layer keeps across steps (its activations, gradients and batch
//! statistics) and the views the passes read and write through.

use crate::net::Layer;
use grin_kernels::affine::Affine;

/// A layer's activations and gradients, kept across steps.
#[derive(Debug, Default)]
pub(crate) struct Act {
    pub height: usize,
    pub width: usize,
    pub batch: usize,
    /// Before BatchNorm (empty for a layer without one).
    pub z: Vec<f32>,
    /// The layer's output (empty when `deferred`).
    pub y: Vec<f32>,
    /// Each channel's BatchNorm, folded, when the layer leaves its output to
    /// its readers ([`crate::net::Net::deferred`]): they map `z` as they
    /// read it, and the output is never written.
    pub deferred: Option<Vec<Affine>>,
    /// The gradient at `y`; backward turns it, in place, into the gradient
    /// before BatchNorm and ReLU.
    pub dy: Vec<f32>,
    /// Whether `dy` holds a gradient yet this step (a tapped trunk layer
    /// gets one from its head and one from the next trunk layer).
    pub has_grad: bool,
    /// Batch statistics, per channel: mean, biased variance, 1/sqrt(var + eps).
    pub mean: Vec<f32>,
    pub var: Vec<f32>,
    pub inv_std: Vec<f32>,
}

impl Act {
    pub(crate) fn new(layer: &Layer, batch: usize, height: usize, width: usize, deferred: bool) -> Act {
        let len = layer.cout * batch * height * width;
        assert!(!deferred || layer.norm.is_some(), "only BatchNorm's output is left to its readers");
        let stats = if layer.norm.is_some() { layer.cout } else { 0 };
        Act {
            height,
            width,
            batch,
            z: vec![0.0; if layer.norm.is_some() { len } else { 0 }],
            y: vec![0.0; if deferred { 0 } else { len }],
            deferred: deferred.then(Vec::new),
            dy: vec![0.0; len],
            has_grad: false,
            mean: vec![0.0; stats],
            var: vec![0.0; stats],
            inv_std: vec![0.0; stats],
        }
    }

    pub(crate) fn row(&self) -> usize {
        self.batch * self.height * self.width
    }

    /// The layer's output as the next layer reads it.
    pub(crate) fn output(&self) -> Input<'_> {
        output_of(&self.z, &self.y, &self.deferred, self.height, self.width)
    }

    /// [`Act::output`] and the gradient there: split borrows of one layer.
    pub(crate) fn output_and_grad(&mut self) -> (Input<'_>, &mut [f32]) {
        let Act { z, y, deferred, dy, height, width, .. } = self;
        (output_of(z, y, deferred, *height, *width), dy)
    }
}

fn output_of<'a>(
    z: &'a [f32],
    y: &'a [f32],
    deferred: &'a Option<Vec<Affine>>,
    height: usize,
    width: usize,
) -> Input<'a> {
    match deferred {
        Some(maps) => Input { values: z, height, width, maps: Some(maps) },
        None => Input::new(y, height, width),
    }
}

/// A layer's input: values `[channels][batch][height * width]`, and each
/// channel's map to apply as they are read, when the layer before left its
/// output to its readers (only depthwise layers read such an input).
#[derive(Clone, Copy)]
pub(crate) struct Input<'a> {
    pub values: &'a [f32],
    pub height: usize,
    pub width: usize,
    pub maps: Option<&'a [Affine]>,
}

impl<'a> Input<'a> {
    /// Values as stored, read as they are.
    pub(crate) fn new(values: &'a [f32], height: usize, width: usize) -> Input<'a> {
        Input { values, height, width, maps: None }
    }

    /// Channel `c`'s map, if any.
    pub(super) fn map(&self, c: usize) -> Option<Affine> {
        self.maps.map(|m| m[c])
    }
}

/// Where the gradient at a layer's input goes: overwritten or added to.
pub(crate) struct InputGrad<'a> {
    pub values: &'a mut [f32],
    pub accumulate: bool,
}

/// A layer's parameter gradients and the batch statistics it normalised by.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerGrads {
    pub weight: Vec<f32>,
    /// The conv's own bias (output convs only).
    pub bias: Option<Vec<f32>>,
    /// BatchNorm's gamma and beta.
    pub norm: Option<(Vec<f32>, Vec<f32>)>,
    /// The batch mean and biased variance, for the running averages.
    pub stats: Option<(Vec<f32>, Vec<f32>)>,
}
