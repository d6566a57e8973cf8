//! Each kernel of the device step against Burn's ops, on wgpu (Mesa's
//! lavapipe in CI): the kernel on the device, the reference on ndarray
//! under Burn's autodiff, from the same values. The whole step is held to
//! grin's CPU step and Burn's autodiff in grin-train's `tests/wgpu.rs`.
//! Without a wgpu adapter each test says it skipped; under `CI=true` it fails.

use super::conv3x3::{self, Shape3x3};
use super::fuse::{self, FuseShape};
use super::loss::{self, LossShape, PointTable};
use super::norm::{self, NormGradsAt, NormParams, NormShape};
use super::pointwise::{self, Shape1x1};
use super::{Dev, Flat, Target};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Int, Tensor, TensorData, TensorPrimitive};
use burn_wgpu::{Wgpu, WgpuDevice, WgpuRuntime};
use grin_model::DetectorOutput;
use grin_model::LossWeights;
use grin_model::{assign, PointTensors};
use grin_net::Points;

type Gpu = Wgpu<f32, i32>;
type Ref = Autodiff<NdArray<f32>>;
type R = WgpuRuntime;

/// The default wgpu device, or `None` (the test skips, or fails under CI)
/// when there is no adapter: CubeCL panics when it finds none.
fn device(test: &str) -> Option<WgpuDevice> {
    let device = WgpuDevice::default();
    let found = std::panic::catch_unwind(|| Tensor::<Gpu, 1>::zeros([1], &WgpuDevice::default()).into_data());
    if found.is_ok() {
        return Some(device);
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: CI must have a wgpu adapter (Debian: mesa-vulkan-drivers)");
    eprintln!("{test}: skipped, no wgpu adapter");
    None
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    // A small LCG: the values only need to differ and be repeatable.
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn on_gpu(values: &[f32], shape: &[usize], device: &WgpuDevice) -> Dev<R> {
    let flat = Tensor::<Gpu, 1>::from_data(TensorData::new(values.to_vec(), [values.len()]), device);
    burn_cubecl::ops::reshape(flat.into_primitive().tensor(), burn::tensor::Shape::from(shape.to_vec()))
}

fn read(t: &Dev<R>) -> Vec<f32> {
    let n = t.meta.num_elements();
    Tensor::<Gpu, 1>::from_primitive(TensorPrimitive::Float(t.clone())).reshape([n]).into_data().to_vec().unwrap()
}

fn reference<const D: usize>(values: &[f32], shape: [usize; D]) -> Tensor<Ref, D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), &Default::default()).require_grad()
}

fn host<const D: usize>(t: Tensor<NdArray<f32>, D>) -> Vec<f32> {
    t.into_data().to_vec().unwrap()
}

/// Largest difference, relative to the reference's largest magnitude.
fn assert_close(what: &str, got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    let scale = want.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
    assert!(worst <= tolerance * scale, "{what}: off by {worst:.3e} (largest value {scale:.3e})");
}

/// Flat buffers of `len` values, every slot NaN: a slot a kernel should
/// have written shows.
fn flat(len: usize, device: &WgpuDevice) -> Flat<R> {
    let nan = vec![f32::NAN; len];
    Flat { grads: on_gpu(&nan, &[len], device), values: on_gpu(&nan, &[len], device) }
}

#[test]
fn the_3x3_kernels_equal_burns_conv_and_its_gradients() {
    let Some(device) = device("the_3x3_kernels_equal_burns_conv_and_its_gradients") else { return };
    // (cin, cout, height, width, stride, depthwise): the stem and depthwise
    // layers, odd sizes, strides 1 and 2, a one-pixel side.
    for (cin, cout, height, width, stride, depthwise) in [
        (1, 8, 13, 17, 2, false),
        (3, 4, 6, 5, 1, false),
        (5, 5, 9, 12, 2, true),
        (4, 4, 7, 7, 1, true),
        (3, 3, 1, 5, 2, true),
    ] {
        let batch = 3;
        let s = Shape3x3::new(batch, cin, cout, height, width, stride);
        let wdims = [cout, if depthwise { 1 } else { cin }, 3, 3];
        let (xs, ws) = (random(batch * cin * height * width, 1), random(wdims.iter().product(), 2));
        let gs = random(batch * cout * s.out_height * s.out_width, 3);
        let held = random(batch * cin * height * width, 4);

        let (x, w) = (reference(&xs, [batch, cin, height, width]), reference(&ws, wdims));
        let options = ConvOptions::new([stride, stride], [1, 1], [1, 1], if depthwise { cin } else { 1 });
        let z = conv2d(x.clone(), w.clone(), None, options);
        let upstream = Tensor::<Ref, 4>::from_data(TensorData::new(gs.clone(), z.dims()), &Default::default());
        let grads = (z.clone() * upstream).sum().backward();
        let (dx, dw) = (host(x.grad(&grads).unwrap()), host(w.grad(&grads).unwrap()));

        let case = format!("{cin}->{cout} {height}x{width} stride {stride} depthwise {depthwise}");
        let (gx, gw, gg) = (
            on_gpu(&xs, &[batch, cin, height * width], &device),
            on_gpu(&ws, &wdims, &device),
            on_gpu(&gs, &[batch, cout, s.out_height * s.out_width], &device),
        );
        assert_close(
            &format!("forward {case}"),
            &read(&conv3x3::conv3x3(&gx, &gw, s, depthwise)),
            &host(z.inner()),
            1e-5,
        );
        let into = on_gpu(&held, &[batch, cin, height * width], &device);
        let added: Vec<f32> = dx.iter().zip(&held).map(|(d, h)| d + h).collect();
        assert_close(
            &format!("input gradient {case}"),
            &read(&conv3x3::input_grad(&gw, &gg, Target::AddTo(&into), s, depthwise)),
            &added,
            1e-5,
        );
        let offset = 64;
        let out = flat(offset + ws.len() + 7, &device);
        conv3x3::weight_grad(&gx, &gg, &gw, &out, offset, s, depthwise);
        let (grads, values) = (read(&out.grads), read(&out.values));
        assert_close(&format!("weight gradient {case}"), &grads[offset..offset + ws.len()], &dw, 1e-4);
        assert_eq!(&values[offset..offset + ws.len()], &ws[..], "the weights beside their gradient");
        assert!(grads[..offset].iter().chain(&grads[offset + ws.len()..]).all(|v| v.is_nan()), "outside its slot");
    }
}

#[test]
fn the_1x1_kernels_equal_burns_product_and_its_gradients() {
    let Some(device) = device("the_1x1_kernels_equal_burns_product_and_its_gradients") else { return };
    // (cin, cout, points, bias, band): a head's output conv writes a band
    // of a wider map; channel counts off the kernels' block of four.
    for (cin, cout, points, bias, band) in
        [(6, 7, 45, false, None), (5, 6, 12, true, Some((30, 9))), (13, 3, 1, true, None)]
    {
        let batch = 3;
        let (row, start) = band.unwrap_or((points, 0));
        let s = Shape1x1 { batch, cin, cout, points, row, start };
        let (xs, ws, bs) = (random(batch * cin * points, 5), random(cout * cin, 6), random(cout, 7));
        let gs = random(batch * cout * points, 8);

        let (x, w, b) =
            (reference(&xs, [batch, cin, points]), reference(&ws, [1, cout, cin]), reference(&bs, [1, cout, 1]));
        let z = w.clone().matmul(x.clone());
        let z = if bias { z + b.clone() } else { z };
        let autodiff = grads_of(&z, &gs);
        let (dx, dw) = (host(x.grad(&autodiff).unwrap()), host(w.grad(&autodiff).unwrap()));

        let case = format!("{cin}->{cout} x {points}, bias {bias}, band {band:?}");
        let (gx, gw, gb) = (
            on_gpu(&xs, &[batch, cin, points], &device),
            on_gpu(&ws, &[cout, cin, 1, 1], &device),
            on_gpu(&bs, &[cout], &device),
        );
        // The output, and its gradient, live in the band of a [batch, cout, row] map.
        let wide = on_gpu(&vec![0.0; batch * cout * row], &[batch, cout, row], &device);
        let band_of = |map: &[f32]| -> Vec<f32> {
            (0..batch * cout).flat_map(|r| map[r * row + start..r * row + start + points].to_vec()).collect()
        };
        let out = read(&pointwise::forward(&gx, &gw, bias.then_some(&gb), Some(&wide), s));
        assert_close(&format!("forward {case}"), &band_of(&out), &host(z.inner()), 1e-5);
        let mut wide_g = vec![0.0; batch * cout * row];
        for r in 0..batch * cout {
            wide_g[r * row + start..][..points].copy_from_slice(&gs[r * points..][..points]);
        }
        let gg = on_gpu(&wide_g, &[batch, cout, row], &device);
        assert_close(
            &format!("input gradient {case}"),
            &read(&pointwise::input_grad(&gw, &gg, Target::New, s)),
            &dx,
            1e-5,
        );
        let (weight_at, bias_at) = (128, 64);
        let out = flat(weight_at + ws.len() + 3, &device);
        pointwise::weight_grad(&gx, &gg, &gw, bias.then_some(&gb), &out, weight_at, bias.then_some(bias_at), s);
        let (grads, values) = (read(&out.grads), read(&out.values));
        assert_close(&format!("weight gradient {case}"), &grads[weight_at..weight_at + ws.len()], &dw, 1e-4);
        assert_eq!(&values[weight_at..weight_at + ws.len()], &ws[..], "the weights beside their gradient");
        if bias {
            let db = host(b.grad(&autodiff).unwrap());
            assert_close(&format!("bias gradient {case}"), &grads[bias_at..bias_at + cout], &db, 1e-4);
            assert_eq!(&values[bias_at..bias_at + cout], &bs[..]);
        }
    }
}

/// The gradients of `Σ z · upstream`.
fn grads_of(z: &Tensor<Ref, 3>, upstream: &[f32]) -> burn::backend::autodiff::grads::Gradients {
    let upstream = Tensor::<Ref, 3>::from_data(TensorData::new(upstream.to_vec(), z.dims()), &Default::default());
    (z.clone() * upstream).sum().backward()
}

#[test]
fn batch_norm_kernels_equal_burns_batch_norm_and_its_gradients() {
    let Some(device) = device("batch_norm_kernels_equal_burns_batch_norm_and_its_gradients") else { return };
    let (batch, channels, points, epsilon, momentum) = (4, 6, 45, 1e-5, 0.1);
    for relu in [false, true] {
        let zs: Vec<f32> = random(batch * channels * points, 9).iter().map(|v| 2.0 * v + 0.5).collect();
        let (gammas, betas) = (random(channels, 10), random(channels, 11));
        let (means, vars) =
            (random(channels, 12), random(channels, 13).iter().map(|v| v.abs() + 0.5).collect::<Vec<_>>());
        let gs = random(batch * channels * points, 14);

        let settings = grin_model::backend::NormSettings { epsilon, relu };
        let (z, gamma, beta) =
            (reference(&zs, [batch, channels, points]), reference(&gammas, [channels]), reference(&betas, [channels]));
        let prim = |t: &Tensor<Ref, 1>| t.clone().into_primitive().tensor();
        let out = grin_model::backend::burn_ops::batch_norm_train::<Ref>(
            z.clone().into_primitive().tensor(),
            prim(&gamma),
            prim(&beta),
            settings,
        );
        let y = Tensor::<Ref, 3>::from_primitive(TensorPrimitive::Float(out.output));
        let grads = grads_of(&y, &gs);
        let stat = |t| host(Tensor::<Ref, 1>::from_primitive(TensorPrimitive::Float(t)).inner());
        let (batch_mean, batch_var) = (stat(out.mean), stat(out.var));

        let s = NormShape { batch, channels, points, epsilon: epsilon as f32, momentum };
        let dev = |v: &[f32]| on_gpu(v, &[v.len()], &device);
        let (gz, gg, gb, gm, gv) =
            (on_gpu(&zs, &[batch, channels, points], &device), dev(&gammas), dev(&betas), dev(&means), dev(&vars));
        let params = NormParams { gamma: &gg, beta: &gb, running_mean: &gm, running_var: &gv };
        let forward = norm::forward(&gz, &params, s, relu);
        assert_close(&format!("output, relu {relu}"), &read(&forward.y), &host(y.clone().inner()), 1e-5);
        let moved = |old: &[f32], batch: &[f32]| -> Vec<f32> {
            old.iter().zip(batch).map(|(o, b)| (1.0 - momentum) * o + momentum * b).collect()
        };
        assert_close("running mean", &read(&forward.running_mean), &moved(&means, &batch_mean), 1e-5);
        assert_close("running variance", &read(&forward.running_var), &moved(&vars, &batch_var), 1e-5);

        let out = flat(3 * 64, &device);
        let into = NormGradsAt { flat: &out, gamma_at: 64, beta_at: 128 };
        let dz = norm::backward(
            &on_gpu(&gs, &[batch, channels, points], &device),
            &gz,
            &forward.stats,
            &params,
            into,
            s,
            relu,
        );
        assert_close(&format!("input gradient, relu {relu}"), &read(&dz), &host(z.grad(&grads).unwrap()), 1e-4);
        let (grads_flat, values) = (read(&out.grads), read(&out.values));
        assert_close("gamma gradient", &grads_flat[64..64 + channels], &host(gamma.grad(&grads).unwrap()), 1e-4);
        assert_close("beta gradient", &grads_flat[128..128 + channels], &host(beta.grad(&grads).unwrap()), 1e-4);
        assert_eq!((&values[64..64 + channels], &values[128..128 + channels]), (&gammas[..], &betas[..]));
    }
}

#[test]
fn fusion_kernels_repeat_each_coarse_value_and_sum_back_its_block() {
    let Some(device) = device("fusion_kernels_repeat_each_coarse_value_and_sum_back_its_block") else { return };
    // An odd fine map cuts the last row and column of its coarse blocks.
    let (batch, channels, height, width) = (2usize, 3usize, 5usize, 7usize);
    let (ch, cw) = (height.div_ceil(2), width.div_ceil(2));
    let s = FuseShape { batch, channels, height, width, coarse_height: ch, coarse_width: cw };
    let (skips, coarses, gs) = (
        random(batch * channels * height * width, 15),
        random(batch * channels * ch * cw, 16),
        random(batch * channels * height * width, 17),
    );
    let (mut ys, mut dcoarse) = (skips.clone(), vec![0.0f32; coarses.len()]);
    for plane in 0..batch * channels {
        for y in 0..height {
            for x in 0..width {
                let (fine, coarse) = ((plane * height + y) * width + x, (plane * ch + y / 2) * cw + x / 2);
                ys[fine] += coarses[coarse];
                dcoarse[coarse] += gs[fine];
            }
        }
    }
    let (skip, coarse) = (
        on_gpu(&skips, &[batch, channels, height * width], &device),
        on_gpu(&coarses, &[batch, channels, ch * cw], &device),
    );
    assert_close("forward", &read(&fuse::forward(&skip, &coarse, s)), &ys, 1e-6);
    let g = on_gpu(&gs, &[batch, channels, height * width], &device);
    assert_close("coarse gradient", &read(&fuse::coarse_grad(&g, Target::New, s)), &dcoarse, 1e-6);
    fuse::add_to(&skip, &g);
    let sum: Vec<f32> = skips.iter().zip(&gs).map(|(a, b)| a + b).collect();
    assert_close("added in place", &read(&skip), &sum, 1e-6);
}

#[test]
fn the_loss_kernels_equal_burns_loss_and_its_autodiff_gradient() {
    let Some(device) = device("the_loss_kernels_equal_burns_loss_and_its_autodiff_gradient") else { return };
    let weights = LossWeights { focal_alpha: 0.25, focal_gamma: 2.0, box_weight: 2.0, smile_weight: 5.0 };
    let points = Points::new(96, 72);
    let (batch, n) = (2, points.len());
    // Labels that put every term in play; raw outputs wide enough that some
    // log-distances fall outside the clamp's range.
    let (boxes, labels, slots) = grin_model::fixtures::labelled_boxes(batch);
    let raws: Vec<f32> = random(batch * 6 * n, 18).iter().map(|v| 4.0 * v).collect();

    let table = PointTensors::<Ref>::new(&points, &Default::default());
    let box_t = Tensor::<Ref, 3>::from_data(TensorData::new(boxes.clone(), [batch, slots, 4]), &Default::default());
    let label_t =
        Tensor::<Ref, 2, Int>::from_data(TensorData::new(labels.clone(), [batch, slots]), &Default::default());
    let raw = reference(&raws, [batch, 6, n]);
    let parts =
        grin_model::loss(&DetectorOutput { raw: raw.clone() }, &assign(&table, box_t, label_t), &table, weights);
    let draw = host(raw.grad(&parts.total.backward()).unwrap());
    let want = [&parts.total, &parts.face, &parts.boxes, &parts.smile].map(|t| t.clone().into_scalar());

    let column = |v: &[f32]| on_gpu(v, &[v.len()], &device);
    let gpu_table = PointTable {
        cx: column(&points.cx),
        cy: column(&points.cy),
        stride: column(&points.stride),
        size_lo: column(&points.size_lo),
        size_hi: column(&points.size_hi.iter().map(|h| h.min(1e9)).collect::<Vec<_>>()),
    };
    let labels32: Vec<i32> = labels.iter().map(|&l| l as i32).collect();
    let gpu_labels =
        Tensor::<Gpu, 2, Int>::from_data(TensorData::new(labels32, [batch, slots]), &device).into_primitive();
    let gpu_boxes = on_gpu(&boxes, &[batch, slots, 4], &device);
    let out = loss::loss(
        &on_gpu(&raws, &[batch, 6, n], &device),
        &gpu_boxes,
        &gpu_labels,
        &gpu_table,
        LossShape::new(batch, n, slots, weights, 1.0),
    );
    let got: Vec<f32> = out.parts.iter().map(|p| read(p)[0]).collect();
    assert_close("loss parts (total, face, boxes, smile)", &got, &want, 1e-5);
    // The kernel differentiates the terms by hand, Burn's autodiff through
    // its composed ops: through exp and GIoU's divisions two f32 orders part
    // by a few ulps of each input (3.6e-5 of the largest gradient, seen in
    // the workspace's build; 1e-5 held in grin-model's own).
    assert_close("gradient at the raw output", &read(&out.draw), &draw, 1e-4);
}
