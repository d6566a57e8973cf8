//! Training-mode BatchNorm, optionally followed by ReLU, and its backward
//! pass, as loops over `[batch, channels, points]` `f32` slices.
//!
//! Composed from Burn ops on the CPU backend, one BatchNorm+ReLU took about
//! fifteen full passes over the activations forward and backward, several of
//! them broadcasts or a freshly filled tensor of ones; here it is three
//! passes forward and three backward. Statistics are per channel (parallel
//! over channels), outputs per plane (parallel over planes).

use rayon::prelude::*;

/// `[batch, channels, points]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub batch: usize,
    pub channels: usize,
    pub points: usize,
}

impl Shape {
    fn len(&self) -> usize {
        self.batch * self.channels * self.points
    }

    /// Values each channel's statistics are taken over.
    fn count(&self) -> f32 {
        (self.batch * self.points) as f32
    }

    /// The slices of channel `c`, one per image.
    fn planes<'a>(&self, values: &'a [f32], c: usize) -> impl Iterator<Item = &'a [f32]> + 'a {
        let (channels, points) = (self.channels, self.points);
        (0..self.batch).map(move |b| &values[(b * channels + c) * points..][..points])
    }
}

/// What the forward pass gives: the output and the batch statistics (the
/// biased variance, as Burn's BatchNorm uses for both normalising and its
/// running average).
#[derive(Debug, Clone, PartialEq)]
pub struct Forward {
    pub output: Vec<f32>,
    pub mean: Vec<f32>,
    pub var: Vec<f32>,
}

/// Gradients with respect to the input, gamma and beta.
#[derive(Debug, Clone, PartialEq)]
pub struct Backward {
    pub input: Vec<f32>,
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// Sum over eight lanes, so the compiler can vectorise it.
fn sum_by(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for k in 0..8 {
            lanes[k] += f(chunk[k]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn check(shape: Shape, x: usize, gamma: usize, beta: usize) {
    assert_eq!(x, shape.len(), "batch norm input size");
    assert_eq!(gamma, shape.channels, "batch norm gamma size");
    assert_eq!(beta, shape.channels, "batch norm beta size");
}

pub fn forward(x: &[f32], gamma: &[f32], beta: &[f32], epsilon: f32, relu: bool, shape: Shape) -> Forward {
    check(shape, x.len(), gamma.len(), beta.len());
    let n = shape.count();
    // Two passes (mean, then squared deviations) keep the variance exact
    // where one pass of sum and sum of squares would cancel.
    let stats: Vec<(f32, f32)> = (0..shape.channels)
        .into_par_iter()
        .map(|c| {
            let mean = shape.planes(x, c).map(|p| sum_by(p, |v| v)).sum::<f32>() / n;
            let var = shape.planes(x, c).map(|p| sum_by(p, |v| (v - mean) * (v - mean))).sum::<f32>() / n;
            (mean, var)
        })
        .collect();
    let mut output = vec![0.0f32; x.len()];
    output.par_chunks_mut(shape.points).enumerate().for_each(|(plane, out)| {
        let c = plane % shape.channels;
        let (mean, var) = stats[c];
        let scale = gamma[c] / (var + epsilon).sqrt();
        let shift = beta[c] - mean * scale;
        let input = &x[plane * shape.points..][..shape.points];
        for (o, &v) in out.iter_mut().zip(input) {
            let y = v * scale + shift;
            *o = if relu { y.max(0.0) } else { y };
        }
    });
    let (mean, var) = stats.into_iter().unzip();
    Forward { output, mean, var }
}

/// `output` is the forward output (it gives ReLU's mask), `grad` the
/// gradient arriving at it.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    x: &[f32],
    gamma: &[f32],
    output: &[f32],
    grad: &[f32],
    (mean, var): (&[f32], &[f32]),
    epsilon: f32,
    relu: bool,
    shape: Shape,
) -> Backward {
    check(shape, x.len(), gamma.len(), mean.len());
    assert_eq!((output.len(), grad.len(), var.len()), (x.len(), x.len(), shape.channels), "batch norm sizes");
    let n = shape.count();
    let inv_std: Vec<f32> = var.iter().map(|v| 1.0 / (v + epsilon).sqrt()).collect();
    // dL/d(pre-ReLU), which is grad where the output is positive.
    let dz = |o: f32, g: f32| if relu && o <= 0.0 { 0.0 } else { g };
    let sums: Vec<(f32, f32)> = (0..shape.channels)
        .into_par_iter()
        .map(|c| {
            let (mut dbeta, mut dgamma) = (0.0f32, 0.0f32);
            let planes = shape.planes(x, c).zip(shape.planes(output, c)).zip(shape.planes(grad, c));
            for ((xs, os), gs) in planes {
                for ((&v, &o), &g) in xs.iter().zip(os).zip(gs) {
                    let d = dz(o, g);
                    dbeta += d;
                    dgamma += d * (v - mean[c]) * inv_std[c];
                }
            }
            (dgamma, dbeta)
        })
        .collect();
    let mut input = vec![0.0f32; x.len()];
    input.par_chunks_mut(shape.points).enumerate().for_each(|(plane, dx)| {
        let c = plane % shape.channels;
        let (dgamma, dbeta) = sums[c];
        let at = plane * shape.points;
        let (xs, os, gs) = (&x[at..][..shape.points], &output[at..][..shape.points], &grad[at..][..shape.points]);
        let k = gamma[c] * inv_std[c];
        let (mean_dz, mean_dz_xhat) = (dbeta / n, dgamma / n);
        for (((d, &v), &o), &g) in dx.iter_mut().zip(xs).zip(os).zip(gs) {
            let xhat = (v - mean[c]) * inv_std[c];
            *d = k * (dz(o, g) - mean_dz - xhat * mean_dz_xhat);
        }
    });
    let (gamma, beta) = sums.into_iter().unzip();
    Backward { input, gamma, beta }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 250.0 - 2.0).collect()
    }

    /// The loss sum(output * weights), in f64, as a function of x, gamma, beta.
    fn loss(x: &[f32], gamma: &[f32], beta: &[f32], weights: &[f32], relu: bool, s: Shape) -> f64 {
        let out = forward(x, gamma, beta, 1e-5, relu, s).output;
        out.iter().zip(weights).map(|(&o, &w)| o as f64 * w as f64).sum()
    }

    #[test]
    fn forward_normalises_each_channel() {
        let s = Shape { batch: 3, channels: 2, points: 37 };
        let x = values(s.len(), 1);
        let f = forward(&x, &[1.0, 1.0], &[0.0, 0.0], 1e-5, false, s);
        for c in 0..2 {
            let ys: Vec<f32> = s.planes(&f.output, c).flatten().copied().collect();
            let mean = ys.iter().sum::<f32>() / ys.len() as f32;
            let var = ys.iter().map(|y| (y - mean).powi(2)).sum::<f32>() / ys.len() as f32;
            assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3, "channel {c}: mean {mean}, var {var}");
        }
        let relu = forward(&x, &[1.0, 1.0], &[0.0, 0.0], 1e-5, true, s).output;
        assert!(relu.iter().zip(&f.output).all(|(r, o)| *r == o.max(0.0)));
    }

    #[test]
    fn backward_matches_finite_differences() {
        for relu in [false, true] {
            let s = Shape { batch: 2, channels: 3, points: 11 };
            let (x, weights) = (values(s.len(), 1), values(s.len(), 2));
            let (gamma, beta) = (vec![0.7, 1.3, -0.4], vec![0.1, -0.2, 0.3]);
            let f = forward(&x, &gamma, &beta, 1e-5, relu, s);
            let g = backward(&x, &gamma, &f.output, &weights, (&f.mean, &f.var), 1e-5, relu, s);
            let h = 1e-3f32;
            // Loose enough for a ReLU kink inside the +-h step, tight enough
            // for a wrong term (each is of order one).
            let near = |numeric: f64, ours: f32| (numeric - ours as f64).abs() < 2e-2 + 1e-2 * numeric.abs();
            let numeric = |bump: &dyn Fn(f32) -> f64| (bump(h) - bump(-h)) / (2.0 * h as f64);
            for i in [0, 5, 17, 40, 65] {
                let d = numeric(&|e| {
                    let mut x2 = x.clone();
                    x2[i] += e;
                    loss(&x2, &gamma, &beta, &weights, relu, s)
                });
                assert!(near(d, g.input[i]), "relu {relu} dx[{i}]: numeric {d}, ours {}", g.input[i]);
            }
            for c in 0..3 {
                let dg = numeric(&|e| {
                    let mut g2 = gamma.clone();
                    g2[c] += e;
                    loss(&x, &g2, &beta, &weights, relu, s)
                });
                let db = numeric(&|e| {
                    let mut b2 = beta.clone();
                    b2[c] += e;
                    loss(&x, &gamma, &b2, &weights, relu, s)
                });
                assert!(near(dg, g.gamma[c]), "relu {relu} dgamma[{c}]: {dg} vs {}", g.gamma[c]);
                assert!(near(db, g.beta[c]), "relu {relu} dbeta[{c}]: {db} vs {}", g.beta[c]);
            }
        }
    }
}
