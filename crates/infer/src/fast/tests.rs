use super::*;
use grin_net::{FoldedFuse, FoldedHead};

/// Deterministic values in -1..1.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn conv(cin: usize, cout: usize, kernel: usize, stride: usize, depthwise: bool, relu: bool, seed: u64) -> FoldedConv {
    let per_out = if depthwise { 1 } else { cin } * kernel * kernel;
    FoldedConv {
        in_channels: cin,
        out_channels: cout,
        kernel,
        stride,
        depthwise,
        weight: values(cout * per_out, seed),
        bias: values(cout, seed + 1),
        relu,
    }
}

/// The definition, one multiply at a time, in f64.
fn reference_conv(c: &FoldedConv, x: &Map) -> Map {
    let (h, w, s) = (x.height, x.width, c.stride);
    let (oh, ow) = (h.div_ceil(s), w.div_ceil(s));
    let mut data = vec![0.0f32; c.out_channels * oh * ow];
    for oc in 0..c.out_channels {
        for i in 0..oh {
            for j in 0..ow {
                let mut sum = c.bias[oc] as f64;
                let inputs: Vec<usize> = if c.depthwise { vec![oc] } else { (0..c.in_channels).collect() };
                for (k, &ic) in inputs.iter().enumerate() {
                    for ky in 0..c.kernel {
                        for kx in 0..c.kernel {
                            let pad = c.kernel / 2;
                            let (r, q) = ((s * i + ky) as isize - pad as isize, (s * j + kx) as isize - pad as isize);
                            if r < 0 || q < 0 || r >= h as isize || q >= w as isize {
                                continue;
                            }
                            let wi = ((oc * inputs.len() + k) * c.kernel + ky) * c.kernel + kx;
                            let xi = (ic * h + r as usize) * w + q as usize;
                            sum += c.weight[wi] as f64 * x.data[xi] as f64;
                        }
                    }
                }
                data[(oc * oh + i) * ow + j] = if c.relu { sum.max(0.0) } else { sum } as f32;
            }
        }
    }
    Map { channels: c.out_channels, height: oh, width: ow, data }
}

fn reference(net: &FoldedDetector, input: &Map) -> Vec<f32> {
    let mut outs = vec![input.clone()];
    for c in &net.trunk {
        outs.push(reference_conv(c, outs.last().unwrap()));
    }
    let outs = &outs[1..];
    let mut levels = Vec::new();
    for head in &net.heads {
        let mut x = outs[head.after].clone();
        if let Some(fuse) = &head.fuse {
            let coarse = reference_conv(&fuse.lateral, &outs[fuse.from]);
            for c in 0..x.channels {
                for y in 0..x.height {
                    for col in 0..x.width {
                        x.data[(c * x.height + y) * x.width + col] +=
                            coarse.data[(c * coarse.height + y / 2) * coarse.width + col / 2];
                    }
                }
            }
        }
        levels.push(head.convs.iter().fold(x, |y, c| reference_conv(c, &y)));
    }
    let total: usize = levels.iter().map(|l| l.height * l.width).sum();
    let outputs = levels[0].channels;
    let mut raw = vec![0.0; outputs * total];
    let mut offset = 0;
    for l in &levels {
        let n = l.height * l.width;
        for k in 0..outputs {
            raw[k * total + offset..][..n].copy_from_slice(&l.data[k * n..][..n]);
        }
        offset += n;
    }
    raw
}

/// A network of the folded detector's kinds of layer at widths that are
/// no multiple of the kernels' blocks: a dense stem, stride-2 and
/// stride-1 depthwise convs, 1x1 chains, a head that reads between a
/// depthwise conv and its pointwise one, three levels, and the finest
/// level fused with a coarser tap.
fn network(channels: usize) -> FoldedDetector {
    let head = |c: usize, seed: u64| FoldedHead {
        after: 0,
        fuse: None,
        convs: vec![
            conv(c, c, 3, 1, true, true, seed),
            conv(c, c, 1, 1, false, true, seed + 2),
            conv(c, 6, 1, 1, false, false, seed + 4),
        ],
    };
    let trunk = vec![
        conv(channels, 5, 3, 2, false, true, 10),
        conv(5, 5, 3, 2, true, true, 20),
        conv(5, 13, 1, 1, false, true, 30),
        conv(13, 13, 3, 1, true, true, 40),
        conv(13, 7, 1, 1, false, true, 50),
        conv(7, 9, 1, 1, false, true, 60),
        conv(9, 9, 3, 2, true, true, 70),
        conv(9, 17, 1, 1, false, true, 80),
    ];
    let heads = vec![
        // Fused from layer 7 (stride 8) into layer 5 (stride 4), as
        // top-down fusion reads a tap one level coarser.
        FoldedHead {
            after: 5,
            fuse: Some(FoldedFuse { from: 7, lateral: conv(17, 9, 1, 1, false, false, 400) }),
            ..head(9, 100)
        },
        FoldedHead { after: 6, ..head(9, 200) },
        FoldedHead { after: 7, fuse: None, convs: vec![conv(17, 6, 1, 1, false, false, 300)] },
    ];
    FoldedDetector { trunk, heads }
}

fn check(channels: usize, height: usize, width: usize) -> Vec<f32> {
    check_at(channels, height, width, ("best", pulp::Arch::new()), 7)
}

/// The engine dispatched to `level` against the definition.
fn check_at(channels: usize, height: usize, width: usize, level: (&str, pulp::Arch), seed: u64) -> Vec<f32> {
    let net = network(channels);
    let input = Map {
        channels,
        height,
        width,
        data: values(channels * height * width, seed).iter().map(|v| v.abs()).collect(),
    };
    let mut engine = FastDetector::new(net.clone());
    (engine.arch, engine.lanes) = (level.1, level.1.dispatch(Lanes));
    let fast = engine.forward(input.clone());
    let want = reference(&net, &input);
    let what = format!("{width}x{height}x{channels} at {}", level.0);
    assert_eq!(fast.len(), want.len(), "{what}: output size");
    for (i, (a, b)) in fast.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{what}: output {i}: {a} vs {b}");
    }
    fast
}

#[test]
fn every_kind_of_layer_matches_the_definition_at_every_edge() {
    // Sides under one vector, odd and even, and rows of several vectors
    // with a remainder, at stride 1 and 2, at every dispatch level.
    for (h, w) in [(1, 1), (3, 5), (8, 7), (17, 11), (30, 41), (64, 48)] {
        for channels in [1, 3] {
            for level in grin_kernels::dispatch_levels() {
                check_at(channels, h, w, level, 7);
            }
        }
    }
}

proptest::proptest! {
    /// Any frame size (height 1, odd sides, widths around the vector
    /// lanes), grey or colour, at every dispatch level the host has:
    /// the 3x3 bands at stride 1 and 2, the pointwise bands and the fusion.
    #[test]
    fn the_engine_matches_the_definition_at_any_size_and_level(
        h in 1usize..40,
        w in proptest::prop_oneof![1usize..20, 28usize..40, 60usize..72],
        colour in proptest::bool::ANY,
        seed in 0u64..1000,
    ) {
        for level in grin_kernels::dispatch_levels() {
            check_at(if colour { 3 } else { 1 }, h, w, level, seed);
        }
    }
}

#[test]
fn bands_split_over_threads_give_the_same_bits() {
    let one = check(1, 90, 70);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let net = network(1);
    let input = Map { channels: 1, height: 90, width: 70, data: values(90 * 70, 7).iter().map(|v| v.abs()).collect() };
    let three = pool.install(|| FastDetector::new(net).forward(input));
    assert_eq!(one, three);
}

#[test]
fn layers_group_around_the_taps() {
    let det = FastDetector::new(network(1));
    let shape: Vec<(bool, usize)> = det.trunk.iter().map(|g| (g.conv3x3.is_some(), g.pointwise.len())).collect();
    // The head after layer 5 cuts after the 1x1 chain; the one after
    // layer 6 cuts between the depthwise conv and its 1x1.
    assert_eq!(shape, [(true, 0), (true, 1), (true, 2), (true, 0), (false, 1)]);
    assert_eq!(det.heads.iter().map(|h| h.after).collect::<Vec<_>>(), [2, 3, 4]);
}
