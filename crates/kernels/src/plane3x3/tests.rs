use super::*;
use proptest::prelude::prop_oneof;

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect()
}

/// The definition, one multiply at a time, for one plane: (y, dL/dx, dL/dw).
fn reference(x: &[f32], w: &[f32], g: &[f32], h: usize, wd: usize, s: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (oh, ow) = (h.div_ceil(s), wd.div_ceil(s));
    let (mut y, mut dx, mut dw) = (vec![0.0; oh * ow], vec![0.0; h * wd], vec![0.0; 9]);
    for i in 0..oh {
        for j in 0..ow {
            for ky in 0..3 {
                for kx in 0..3 {
                    let (r, c) = ((s * i + ky) as isize - 1, (s * j + kx) as isize - 1);
                    if r < 0 || c < 0 || r >= h as isize || c >= wd as isize {
                        continue;
                    }
                    let at = r as usize * wd + c as usize;
                    y[i * ow + j] += w[ky * 3 + kx] * x[at];
                    dx[at] += g[i * ow + j] * w[ky * 3 + kx];
                    dw[ky * 3 + kx] += g[i * ow + j] * x[at];
                }
            }
        }
    }
    (y, dx, dw)
}

fn close(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: sizes");
    let err = a.iter().zip(b).fold(0.0f32, |m, (p, q)| m.max((p - q).abs()));
    assert!(err < 1e-3, "{what}: off by {err}");
}

/// One case at one dispatch level: forward, tap and input gradients
/// (overwritten and added) against the definition.
fn check(h: usize, w: usize, s: usize, level: (&str, Arch), seed: u32) {
    let p = Plane3x3::new(h, w, s).with_arch(level.1);
    let (x, taps, g) = (values(h * w, seed), values(9, seed + 1), values(p.out_len(), seed + 2));
    let (y, dx, dw) = reference(&x, &taps, &g, h, w, s);
    let what = format!("{h}x{w} stride {s} at {}", level.0);
    let mut ours = vec![7.0; p.out_len()];
    p.forward(&[&x], &taps, &mut [&mut ours]);
    close(&format!("{what}: forward"), &ours, &y);
    let mut ours_dw = vec![1.0; 9];
    p.weight_grad(&[&x], &[&g], &mut ours_dw);
    close(&format!("{what}: taps"), &ours_dw, &dw.iter().map(|v| v + 1.0).collect::<Vec<_>>());
    let mut ours_dx = vec![7.0; h * w];
    p.input_grad(&g, &taps, &mut ours_dx, false);
    close(&format!("{what}: input"), &ours_dx, &dx);
    p.input_grad(&g, &taps, &mut ours_dx, true);
    close(&format!("{what}: input, added"), &ours_dx, &dx.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
}

#[test]
fn kernels_match_the_definition_at_every_size_and_stride() {
    // Sides down to 1, odd and even, rows shorter and longer than a vector.
    for (h, w) in [(1, 1), (2, 3), (5, 4), (7, 19), (6, 17), (9, 33), (3, 8)] {
        for s in [1, 2] {
            for level in crate::dispatch_levels() {
                check(h, w, s, level, 1);
            }
        }
    }
}

proptest::proptest! {
    /// Any shape, at every dispatch level the host has: widths around
    /// the vector lanes (4 or 8 f32s, 16 for the stride-2 column split),
    /// height 1 and odd sides.
    #[test]
    fn kernels_match_the_definition_at_any_shape_and_level(
        h in 1usize..24,
        w in prop_oneof![1usize..20, 28usize..40, 60usize..70],
        s in 1usize..=2,
        seed in 0u32..1000,
    ) {
        for level in crate::dispatch_levels() {
            check(h, w, s, level, seed);
        }
    }
}

#[test]
fn a_dense_conv_sums_its_input_planes_for_each_output() {
    let p = Plane3x3::new(6, 11, 2);
    let (a, b) = (values(66, 4), values(66, 5));
    // Two outputs of two inputs each.
    let taps = values(36, 6);
    let n = p.out_len();
    let (mut o0, mut o1) = (vec![0.0; n], vec![0.0; n]);
    p.forward(&[&a, &b], &taps, &mut [&mut o0, &mut o1]);
    for (o, out) in [o0, o1].iter().enumerate() {
        let (mut first, mut second) = (vec![0.0; n], vec![0.0; n]);
        p.forward(&[&a], &taps[o * 18..][..9], &mut [&mut first]);
        p.forward(&[&b], &taps[o * 18 + 9..][..9], &mut [&mut second]);
        close("dense", out, &first.iter().zip(&second).map(|(x, y)| x + y).collect::<Vec<_>>());
    }
    let (g0, g1) = (values(n, 7), values(n, 8));
    let mut dw = vec![0.0; 36];
    p.weight_grad(&[&a, &b], &[&g0, &g1], &mut dw);
    let mut each = Vec::new();
    for g in [&g0, &g1] {
        for x in [&a, &b] {
            let mut d = vec![0.0; 9];
            p.weight_grad(&[x], &[g], &mut d);
            each.extend(d);
        }
    }
    close("dense taps", &dw, &each);
}

/// A batch row (several images' planes back to back) gives, bit for bit,
/// what one call per image gives: forward, taps (summed over the images)
/// and the input gradient, overwritten and added, at every level.
#[test]
fn several_images_in_one_call_are_each_image_in_turn() {
    for (h, w, s) in [(7, 19, 1), (6, 17, 2), (3, 40, 1), (5, 9, 2)] {
        for level in crate::dispatch_levels() {
            let p = Plane3x3::new(h, w, s).with_arch(level.1);
            let (n_in, n_out, images) = (p.in_len(), p.out_len(), 3);
            let (x, g, taps) = (values(images * n_in, 11), values(images * n_out, 12), values(9, 13));
            let what = format!("{h}x{w} stride {s} at {}", level.0);
            let mut row = vec![0.0; images * n_out];
            p.forward(&[&x], &taps, &mut [&mut row]);
            let (mut row_dw, mut each_dw) = (vec![0.0; 9], vec![0.0; 9]);
            p.weight_grad(&[&x], &[&g], &mut row_dw);
            let mut row_dx = values(images * n_in, 14);
            p.input_grad(&g, &taps, &mut row_dx, true);
            for b in 0..images {
                let (xb, gb) = (&x[b * n_in..][..n_in], &g[b * n_out..][..n_out]);
                let mut y = vec![0.0; n_out];
                p.forward(&[xb], &taps, &mut [&mut y]);
                assert_eq!(&row[b * n_out..][..n_out], &y[..], "{what}: forward of image {b}");
                let mut dx = values(images * n_in, 14)[b * n_in..][..n_in].to_vec();
                p.input_grad(gb, &taps, &mut dx, true);
                assert_eq!(&row_dx[b * n_in..][..n_in], &dx[..], "{what}: input gradient of image {b}");
                let mut dw = vec![0.0; 9];
                p.weight_grad(&[xb], &[gb], &mut dw);
                each_dw.iter_mut().zip(&dw).for_each(|(a, d)| *a += d);
            }
            close(&format!("{what}: taps"), &row_dw, &each_dw);
        }
    }
}

/// An input read through a BatchNorm map gives what the mapped input
/// itself gives, bit for bit, at every level: forward and the taps'
/// gradient (the input's gradient reads no input).
#[test]
fn an_input_read_through_a_map_is_the_mapped_input() {
    let map = Affine { scale: 1.7, shift: -0.3, relu: true };
    for (h, w, s) in [(7, 19, 1), (6, 17, 2), (3, 40, 1), (1, 3, 2)] {
        for level in crate::dispatch_levels() {
            let p = Plane3x3::new(h, w, s).with_arch(level.1);
            let images = 2;
            let (x, g, taps) = (values(images * p.in_len(), 21), values(images * p.out_len(), 22), values(9, 23));
            let mut mapped = vec![0.0; x.len()];
            for (from, to) in x.chunks(p.in_len()).zip(mapped.chunks_mut(p.in_len())) {
                for (a, b) in from.iter().zip(to.iter_mut()) {
                    *b = a.mul_add(map.scale, map.shift).max(0.0);
                }
            }
            let what = format!("{h}x{w} stride {s} at {}", level.0);
            let (mut want, mut got) = (vec![0.0; g.len()], vec![0.0; g.len()]);
            p.forward(&[&mapped], &taps, &mut [&mut want]);
            p.with_input(Some(map)).forward(&[&x], &taps, &mut [&mut got]);
            close(&format!("{what}: forward"), &got, &want);
            let (mut want_dw, mut got_dw) = (vec![0.0; 9], vec![0.0; 9]);
            p.weight_grad(&[&mapped], &[&g], &mut want_dw);
            p.with_input(Some(map)).weight_grad(&[&x], &[&g], &mut got_dw);
            close(&format!("{what}: taps"), &got_dw, &want_dw);
            // The input gradient ignores the map.
            let (mut want_dx, mut got_dx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            p.input_grad(&g, &taps, &mut want_dx, false);
            p.with_input(Some(map)).input_grad(&g, &taps, &mut got_dx, false);
            assert_eq!(got_dx, want_dx, "{what}: input gradient");
        }
    }
}
