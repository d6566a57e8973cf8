//! A hand-written CPU forward pass of the detector, several times faster
//! than Burn's ndarray kernels at these sizes: BatchNorm is folded into the
//! conv weights once at load, each conv fuses bias and ReLU, 1x1 convs are
//! register-blocked over 4 output channels, and no tensor is allocated per
//! operation beyond each layer's output.
//!
//! It mirrors `grin_model::detector` layer for layer, reading the weights in
//! the order Burn's module visitor gives them; a shape that does not fit is
//! refused at load, and `tests/parity.rs` checks outputs and detections
//! against the Burn model. Decoding is `grin_model::decode`, as on the Burn
//! path. Channels are split over rayon's global pool, so `--threads` applies.

use crate::model::CpuBackend;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use grin_model::detector::OUTPUTS;
use grin_model::DetectorSpec;
use rayon::prelude::*;

/// `BatchNormConfig`'s default epsilon, which `grin_model::layers` uses.
const BN_EPSILON: f32 = 1e-5;
/// Output channels per block of the 1x1 kernel.
const OC_BLOCK: usize = 4;
/// Pixels per tile of the 1x1 kernel: 4 accumulator rows stay in L1.
const TILE: usize = 128;

#[derive(Debug, Clone)]
struct Conv {
    cin: usize,
    cout: usize,
    /// 3 (pad 1) or 1.
    kernel: usize,
    stride: usize,
    depthwise: bool,
    /// `[cout, cin (1 when depthwise), kernel, kernel]`, BatchNorm folded in.
    weight: Vec<f32>,
    bias: Vec<f32>,
    relu: bool,
}

#[derive(Debug, Clone)]
struct Head {
    mix_depthwise: Conv,
    mix_pointwise: Conv,
    out: Conv,
}

/// A feature map, `[channels, height, width]`.
#[derive(Debug, Clone)]
pub struct Map {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

#[derive(Debug, Clone)]
pub struct FastDetector {
    stem: Conv,
    /// (depthwise, pointwise) pairs, as `grin_model::layers::DwSep`.
    blocks: Vec<(Conv, Conv)>,
    heads: Vec<Head>,
}

struct Collect(Vec<(Vec<usize>, Vec<f32>)>);

impl ModuleVisitor<CpuBackend> for Collect {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<CpuBackend, D>>) {
        let t = param.val();
        let dims = t.dims().to_vec();
        let values = t.into_data().convert::<f32>().to_vec::<f32>().expect("f32 weights");
        self.0.push((dims, values));
    }
}

struct Weights(std::vec::IntoIter<(Vec<usize>, Vec<f32>)>);

impl Weights {
    fn next(&mut self, shape: &[usize]) -> Result<Vec<f32>, String> {
        match self.0.next() {
            Some((dims, values)) if dims == shape => Ok(values),
            Some((dims, _)) => Err(format!("expected weights of shape {shape:?}, found {dims:?}")),
            None => Err(format!("weights end before one of shape {shape:?}")),
        }
    }

    /// Conv (no bias) + BatchNorm, folded: `w * g / sqrt(v + e)`, `b - m * g / sqrt(v + e)`.
    fn conv_bn(
        &mut self,
        cin: usize,
        cout: usize,
        kernel: usize,
        stride: usize,
        depthwise: bool,
    ) -> Result<Conv, String> {
        let per_out = if depthwise { 1 } else { cin };
        let mut weight = self.next(&[cout, per_out, kernel, kernel])?;
        let gamma = self.next(&[cout])?;
        let beta = self.next(&[cout])?;
        let mean = self.next(&[cout])?;
        let var = self.next(&[cout])?;
        let mut bias = vec![0.0; cout];
        let taps = per_out * kernel * kernel;
        for o in 0..cout {
            let scale = gamma[o] / (var[o] + BN_EPSILON).sqrt();
            weight[o * taps..(o + 1) * taps].iter_mut().for_each(|w| *w *= scale);
            bias[o] = beta[o] - mean[o] * scale;
        }
        Ok(Conv { cin, cout, kernel, stride, depthwise, weight, bias, relu: true })
    }

    fn conv_bias(&mut self, cin: usize, cout: usize) -> Result<Conv, String> {
        let weight = self.next(&[cout, cin, 1, 1])?;
        let bias = self.next(&[cout])?;
        Ok(Conv { cin, cout, kernel: 1, stride: 1, depthwise: false, weight, bias, relu: false })
    }
}

impl FastDetector {
    /// Copies the model's weights into the fast layout; `Err` says why the
    /// model does not fit this architecture.
    pub fn new(spec: &DetectorSpec, model: &grin_model::Detector<CpuBackend>) -> Result<FastDetector, String> {
        let mut collect = Collect(Vec::new());
        model.visit(&mut collect);
        let mut weights = Weights(collect.0.into_iter());
        let w = spec.widths();
        let stem = weights.conv_bn(spec.channels, w[0], 3, 2, false)?;
        let mut blocks = Vec::new();
        for stage in 1..5 {
            for (cin, cout, stride) in [(w[stage - 1], w[stage], 2), (w[stage], w[stage], 1)] {
                let depthwise = weights.conv_bn(cin, cin, 3, stride, true)?;
                let pointwise = weights.conv_bn(cin, cout, 1, 1, false)?;
                blocks.push((depthwise, pointwise));
            }
        }
        let mut heads = Vec::new();
        for c in [w[2], w[3], w[4]] {
            heads.push(Head {
                mix_depthwise: weights.conv_bn(c, c, 3, 1, true)?,
                mix_pointwise: weights.conv_bn(c, c, 1, 1, false)?,
                out: weights.conv_bias(c, OUTPUTS)?,
            });
        }
        if let Some((dims, _)) = weights.0.next() {
            return Err(format!("unexpected extra weights of shape {dims:?}"));
        }
        Ok(FastDetector { stem, blocks, heads })
    }

    /// Raw outputs `[OUTPUTS, points]` row-major, in `grin_model::Points` order.
    pub fn forward(&self, input: Map) -> Vec<f32> {
        let mut x = self.stem.apply(&input);
        let mut levels = Vec::with_capacity(self.heads.len());
        for (i, (depthwise, pointwise)) in self.blocks.iter().enumerate() {
            x = pointwise.apply(&depthwise.apply(&x));
            if grin_model::detector::is_tapped(i) {
                let head = &self.heads[levels.len()];
                levels.push(head.out.apply(&head.mix_pointwise.apply(&head.mix_depthwise.apply(&x))));
            }
        }
        let total: usize = levels.iter().map(|l| l.height * l.width).sum();
        let mut raw = vec![0.0; OUTPUTS * total];
        let mut offset = 0;
        for level in &levels {
            let n = level.height * level.width;
            for k in 0..OUTPUTS {
                raw[k * total + offset..k * total + offset + n].copy_from_slice(&level.data[k * n..(k + 1) * n]);
            }
            offset += n;
        }
        raw
    }
}

impl Conv {
    fn apply(&self, x: &Map) -> Map {
        assert_eq!(x.channels, self.cin, "layer input channels");
        if self.kernel == 1 {
            self.pointwise(x)
        } else {
            self.conv3x3(x)
        }
    }

    fn finish(&self, out: &mut [f32], oc: usize) {
        let b = self.bias[oc];
        if self.relu {
            out.iter_mut().for_each(|v| *v = (*v + b).max(0.0));
        } else {
            out.iter_mut().for_each(|v| *v += b);
        }
    }

    /// 3x3, pad 1, stride 1 or 2; full (the stem) or depthwise.
    fn conv3x3(&self, x: &Map) -> Map {
        let (h, w, s) = (x.height, x.width, self.stride);
        let (oh, ow) = (h.div_ceil(s), w.div_ceil(s));
        // One zero border: the inner loops need no bounds tests.
        let (ph, pw) = (h + 2, w + 2);
        let mut padded = vec![0.0f32; x.channels * ph * pw];
        for c in 0..x.channels {
            for y in 0..h {
                let src = &x.data[(c * h + y) * w..(c * h + y + 1) * w];
                padded[(c * ph + y + 1) * pw + 1..(c * ph + y + 1) * pw + 1 + w].copy_from_slice(src);
            }
        }
        let mut out = vec![0.0f32; self.cout * oh * ow];
        out.par_chunks_mut(oh * ow).enumerate().for_each(|(oc, plane)| {
            let inputs = if self.depthwise { oc..oc + 1 } else { 0..self.cin };
            let taps = if self.depthwise { 9 } else { self.cin * 9 };
            for (j, ic) in inputs.enumerate() {
                let src = &padded[ic * ph * pw..(ic + 1) * ph * pw];
                for ky in 0..3 {
                    for kx in 0..3 {
                        let k = self.weight[oc * taps + j * 9 + ky * 3 + kx];
                        for oy in 0..oh {
                            let row = &src[(oy * s + ky) * pw + kx..];
                            let dst = &mut plane[oy * ow..(oy + 1) * ow];
                            if s == 1 {
                                dst.iter_mut().zip(&row[..ow]).for_each(|(d, v)| *d += k * v);
                            } else {
                                dst.iter_mut().zip(row.iter().step_by(s)).for_each(|(d, v)| *d += k * v);
                            }
                        }
                    }
                }
            }
            self.finish(plane, oc);
        });
        Map { channels: self.cout, height: oh, width: ow, data: out }
    }

    /// 1x1: each input row is loaded once per 4 output channels.
    fn pointwise(&self, x: &Map) -> Map {
        let p = x.height * x.width;
        let cin = self.cin;
        let mut out = vec![0.0f32; self.cout * p];
        out.par_chunks_mut(OC_BLOCK * p).enumerate().for_each(|(block, rows)| {
            let oc0 = block * OC_BLOCK;
            let n = rows.len() / p;
            if n == OC_BLOCK {
                let mut acc = [[0.0f32; TILE]; OC_BLOCK];
                for t0 in (0..p).step_by(TILE) {
                    let len = TILE.min(p - t0);
                    acc.iter_mut().for_each(|a| a[..len].fill(0.0));
                    let [a0, a1, a2, a3] = &mut acc;
                    for ic in 0..cin {
                        let xs = &x.data[ic * p + t0..ic * p + t0 + len];
                        let w = |j: usize| self.weight[(oc0 + j) * cin + ic];
                        let (w0, w1, w2, w3) = (w(0), w(1), w(2), w(3));
                        for ((((v, a0), a1), a2), a3) in
                            xs.iter().zip(&mut a0[..len]).zip(&mut a1[..len]).zip(&mut a2[..len]).zip(&mut a3[..len])
                        {
                            *a0 += w0 * v;
                            *a1 += w1 * v;
                            *a2 += w2 * v;
                            *a3 += w3 * v;
                        }
                    }
                    for (j, a) in acc.iter().enumerate() {
                        rows[j * p + t0..j * p + t0 + len].copy_from_slice(&a[..len]);
                    }
                }
            } else {
                for (j, row) in rows.chunks_mut(p).enumerate() {
                    for ic in 0..cin {
                        let w = self.weight[(oc0 + j) * cin + ic];
                        row.iter_mut().zip(&x.data[ic * p..(ic + 1) * p]).for_each(|(d, v)| *d += w * v);
                    }
                }
            }
            for (j, row) in rows.chunks_mut(p).enumerate() {
                self.finish(row, oc0 + j);
            }
        });
        Map { channels: self.cout, height: x.height, width: x.width, data: out }
    }
}
