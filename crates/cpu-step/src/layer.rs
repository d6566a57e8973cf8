//! One conv layer with its BatchNorm and ReLU, forward and backward, fused:
//! each 3x3 channel is convolved, normalised and activated in one task
//! while its row is in cache, and backward turns the output gradient into
//! the pre-BatchNorm gradient, the tap gradients and the input gradient in
//! one task per channel too. 1x1 convs are matrix products ([`super::gemm`]),
//! with the BatchNorm passes per channel row right after.
//!
//! Layout: channel-major, `[channels][batch][height * width]`. A channel's
//! values for the whole batch are one contiguous row, which is what
//! BatchNorm's statistics reduce over, and a 1x1 conv over the batch is one
//! matrix product `[out, in] x [in, batch * points]`.

use super::gemm::matmul;
use super::net::{Kind, Layer};
use super::rows;
use super::view::View;
use grin_kernels::affine::Affine;
use grin_kernels::plane3x3::Plane3x3;
use rayon::prelude::*;

mod act;
pub use act::LayerGrads;
pub(crate) use act::{Act, Input, InputGrad};

/// Splits a channel-major buffer of `planes_per_channel` planes per channel
/// into each image's planes: entry `b` holds image `b`'s plane of every
/// channel, in channel order. How a dense conv's per-image tasks write.
fn planes_by_image(values: &mut [f32], plane: usize, batch: usize) -> Vec<Vec<&mut [f32]>> {
    let mut by_image: Vec<Vec<&mut [f32]>> = (0..batch).map(|_| Vec::new()).collect();
    for (i, p) in values.chunks_exact_mut(plane).enumerate() {
        by_image[i % batch].push(p);
    }
    by_image
}

/// Image `b`'s plane of each of `channels` channels of a channel-major buffer.
fn image_planes(values: &[f32], channels: usize, batch: usize, plane: usize, b: usize) -> Vec<&[f32]> {
    (0..channels).map(|c| &values[(c * batch + b) * plane..][..plane]).collect()
}

/// Stores each channel's batch statistics: (mean, biased variance,
/// 1/sqrt(var + epsilon)).
fn set_stats(mean: &mut [f32], var: &mut [f32], inv_std: &mut [f32], stats: Vec<(f32, f32, f32)>) {
    for (c, (m, v, s)) in stats.into_iter().enumerate() {
        (mean[c], var[c], inv_std[c]) = (m, v, s);
    }
}

/// The depthwise layer's forward, per channel: convolve, then normalise
/// while the channel's row is in cache.
fn depthwise_forward(layer: &Layer, x: Input, act: &mut Act, stride: usize) {
    let (row, batch) = (act.row(), act.batch);
    let Act { z, y, deferred, mean, var, inv_std, .. } = act;
    assert!(deferred.is_none(), "a depthwise layer's readers are 1x1 convs, which read its output");
    let plane = Plane3x3::new(x.height, x.width, stride);
    let in_row = batch * x.height * x.width;
    // Channel c's planes of every image, in one call.
    let conv = |c: usize, out: &mut [f32]| {
        let input = &x.values[c * in_row..][..in_row];
        plane.with_input(x.map(c)).forward(&[input], &layer.weight[c * 9..][..9], &mut [out]);
    };
    match &layer.norm {
        Some(n) => {
            let stats = z
                .par_chunks_mut(row)
                .zip(y.par_chunks_mut(row))
                .enumerate()
                .map(|(c, (z, y))| {
                    conv(c, z);
                    rows::normalise(None, z, Some(y), n.gamma[c], n.beta[c], n.epsilon, layer.relu)
                })
                .collect();
            set_stats(mean, var, inv_std, stats);
        }
        None => y.par_chunks_mut(row).enumerate().for_each(|(c, y)| {
            conv(c, y);
            rows::add_bias(y, layer.bias[c], layer.relu);
        }),
    }
}

/// Runs `layer` on `x` into `act` (training mode: batch statistics).
pub(crate) fn forward(layer: &Layer, x: Input, act: &mut Act) {
    let (row, batch) = (act.row(), act.batch);
    let in_plane = x.height * x.width;
    assert_eq!(x.values.len(), layer.cin * batch * in_plane, "layer input size");
    if let Kind::Depthwise { stride } = layer.kind {
        return depthwise_forward(layer, x, act, stride);
    }
    let Act { z, y, deferred, mean, var, inv_std, .. } = act;
    assert!(x.maps.is_none(), "a {:?} layer reads its input as stored", layer.kind);
    // The conv writes `z` when a BatchNorm follows, else the output itself.
    let conv_out: &mut Vec<f32> = if layer.norm.is_some() { z } else { y };
    // Each channel's moments, when measured while the conv's output was in cache.
    let mut known: Option<Vec<rows::Moments>> = None;
    match layer.kind {
        Kind::Pointwise => {
            let w = View::rows(&layer.weight, layer.cout, layer.cin);
            matmul(w, View::rows(x.values, layer.cin, row), conv_out, false);
        }
        Kind::Dense { stride } => {
            // Each image's input planes are padded once for every output channel.
            let plane = Plane3x3::new(x.height, x.width, stride);
            let measured: Vec<Vec<rows::Moments>> = planes_by_image(conv_out, plane.out_len(), batch)
                .into_par_iter()
                .enumerate()
                .map(|(b, mut outs)| {
                    plane.forward(&image_planes(x.values, layer.cin, batch, in_plane, b), &layer.weight, &mut outs);
                    // The stem's channel rows are the longest (1.2 MB at batch 64),
                    // past the caches: measured here, each image's planes are read
                    // from cache, and BatchNorm reads the rows once instead of three times.
                    match layer.norm {
                        Some(_) => outs.iter().map(|p| rows::moments(p)).collect(),
                        None => Vec::new(),
                    }
                })
                .collect();
            if layer.norm.is_some() {
                // Joined in image order: the same sums on any thread count.
                let channel = |c: usize| measured.iter().map(|m| m[c]).reduce(rows::Moments::join).expect("a batch");
                known = Some((0..layer.cout).map(channel).collect());
            }
        }
        Kind::Depthwise { .. } => unreachable!("run above"),
        Kind::AddUp { .. } => unreachable!("a weightless layer: `fuse::forward`"),
    }
    let Some(norm) = &layer.norm else {
        y.par_chunks_mut(row).enumerate().for_each(|(c, y)| rows::add_bias(y, layer.bias[c], layer.relu));
        return;
    };
    let stats = |c: usize, z: &[f32], y: Option<&mut [f32]>| {
        let (gamma, beta) = (norm.gamma[c], norm.beta[c]);
        rows::normalise(known.as_ref().map(|k| k[c]), z, y, gamma, beta, norm.epsilon, layer.relu)
    };
    match deferred {
        // The statistics alone (none of the row's passes when measured
        // already), and the maps the readers apply.
        Some(maps) => {
            set_stats(mean, var, inv_std, z.par_chunks(row).enumerate().map(|(c, z)| stats(c, z, None)).collect());
            *maps = (0..layer.cout)
                .map(|c| Affine::batch_norm(mean[c], inv_std[c], norm.gamma[c], norm.beta[c], layer.relu))
                .collect();
        }
        None => {
            let stats =
                z.par_chunks(row).zip(y.par_chunks_mut(row)).enumerate().map(|(c, (z, y))| stats(c, z, Some(y)));
            set_stats(mean, var, inv_std, stats.collect());
        }
    }
}

/// Back-propagates `act.dy` through `layer`: returns the parameter
/// gradients and writes the gradient at the input into `dx` (the stem's
/// input is the image, which needs none: `None`).
pub(crate) fn backward(layer: &Layer, x: Input, act: &mut Act, dx: Option<InputGrad>) -> LayerGrads {
    let (row, batch) = (act.row(), act.batch);
    let in_plane = x.height * x.width;
    let Act { z, y, dy, mean, var, inv_std, .. } = act;
    let (z, y, mean, var, inv_std) = (&z[..], &y[..], &mean[..], &var[..], &inv_std[..]);
    let mut dx = dx;
    assert!(
        dx.is_none() || !matches!(layer.kind, Kind::Dense { .. }),
        "a dense 3x3 conv reads the image, which takes no gradient"
    );

    // The gradient before BatchNorm and ReLU, in place, per channel: returns
    // (gamma's, beta's) gradients, or (0, the bias's) without BatchNorm.
    let through_norm = |c: usize, dz: &mut [f32]| -> [f32; 2] {
        match &layer.norm {
            Some(norm) => {
                let zs = &z[c * row..][..row];
                let (dgamma, dbeta) =
                    rows::norm_backward(dz, zs, (mean[c], inv_std[c]), (norm.gamma[c], norm.beta[c]), layer.relu);
                [dgamma, dbeta]
            }
            None => {
                if layer.relu {
                    rows::mask(dz, &y[c * row..][..row]);
                }
                [0.0, rows::sum(dz)]
            }
        }
    };

    let (sums, weight): (Vec<[f32; 2]>, Vec<f32>) = match layer.kind {
        Kind::Depthwise { stride } => {
            depthwise_backward(layer, &x, batch, Plane3x3::new(x.height, x.width, stride), dy, dx.take(), &through_norm)
        }
        _ if x.maps.is_some() => unreachable!("only a depthwise layer reads an input left to its readers"),
        Kind::Dense { stride } => {
            let sums = dy.par_chunks_mut(row).enumerate().map(|(c, dz)| through_norm(c, dz)).collect();
            // Per image (its input planes padded once), then summed.
            let plane = Plane3x3::new(x.height, x.width, stride);
            let out_plane = plane.out_len();
            let taps = layer.cout * layer.cin * 9;
            let dy = &dy[..];
            let weight = (0..batch)
                .into_par_iter()
                .map(|b| {
                    let xs = image_planes(x.values, layer.cin, batch, in_plane, b);
                    let gs = image_planes(dy, layer.cout, batch, out_plane, b);
                    let mut partial = vec![0.0f32; taps];
                    plane.weight_grad(&xs, &gs, &mut partial);
                    partial
                })
                // Collected, then added in image order: rayon's `reduce`
                // pairs partial sums as its threads happen to split the
                // work, so two runs on 2 threads differed from step 20
                // (issue 80); a fixed order gives the same bits every run.
                .collect::<Vec<Vec<f32>>>()
                .into_iter()
                .fold(vec![0.0f32; taps], |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect());
            (sums, weight)
        }
        Kind::Pointwise => {
            let sums = dy.par_chunks_mut(row).enumerate().map(|(c, dz)| through_norm(c, dz)).collect();
            // dW = dz x^T and dx (+)= W^T dz, over the whole batch at once.
            let dz = View::rows(dy, layer.cout, row);
            let mut weight = vec![0.0f32; layer.cout * layer.cin];
            matmul(dz, View::rows(x.values, layer.cin, row).t(), &mut weight, false);
            if let Some(InputGrad { values, accumulate }) = dx {
                matmul(View::rows(&layer.weight, layer.cout, layer.cin).t(), dz, values, accumulate);
            }
            (sums, weight)
        }
        Kind::AddUp { .. } => unreachable!("a weightless layer: `fuse::backward`"),
    };
    let (gammas, betas): (Vec<f32>, Vec<f32>) = sums.iter().map(|[g, b]| (*g, *b)).unzip();
    match layer.norm {
        Some(_) => {
            LayerGrads { weight, bias: None, norm: Some((gammas, betas)), stats: Some((mean.to_vec(), var.to_vec())) }
        }
        None => LayerGrads { weight, bias: Some(betas), norm: None, stats: None },
    }
}

/// The depthwise layer's backward, per channel while its rows are in cache:
/// through BatchNorm (`through_norm`), then the taps' gradient and the
/// input's. Returns each channel's norm sums and the 9 taps per channel.
fn depthwise_backward(
    layer: &Layer,
    x: &Input,
    batch: usize,
    plane: Plane3x3,
    dy: &mut [f32],
    input_grad: Option<InputGrad>,
    through_norm: &(impl Fn(usize, &mut [f32]) -> [f32; 2] + Sync),
) -> (Vec<[f32; 2]>, Vec<f32>) {
    let in_plane = x.height * x.width;
    let in_row = batch * in_plane;
    let out_plane = plane.out_len();
    let row = batch * out_plane;
    let accumulate = input_grad.as_ref().is_some_and(|d| d.accumulate);
    let mut dx_rows: Vec<Option<&mut [f32]>> = match input_grad {
        Some(InputGrad { values, .. }) => {
            assert_eq!(values.len(), layer.cin * in_row, "input gradient size");
            values.chunks_exact_mut(in_row).map(Some).collect()
        }
        None => (0..layer.cout).map(|_| None).collect(),
    };
    let per: Vec<([f32; 2], [f32; 9])> = dy
        .par_chunks_mut(row)
        .zip(dx_rows.par_iter_mut())
        .enumerate()
        .map(|(c, (dz, dx_row))| {
            let sums = through_norm(c, dz);
            let w = &layer.weight[c * 9..][..9];
            let input = &x.values[c * in_row..][..in_row];
            let mut taps = [0.0f32; 9];
            plane.with_input(x.map(c)).weight_grad(&[input], &[dz], &mut taps);
            if let Some(dx_row) = dx_row {
                plane.input_grad(dz, w, dx_row, accumulate);
            }
            (sums, taps)
        })
        .collect();
    let weight = per.iter().flat_map(|(_, taps)| *taps).collect();
    (per.into_iter().map(|(sums, _)| sums).collect(), weight)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod timing;
