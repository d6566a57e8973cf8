use super::*;
use crate::net::Norm;

/// The median wall time of `runs` calls of `f`, in milliseconds.
fn median_ms(runs: usize, f: &mut dyn FnMut()) -> f64 {
    let v: Vec<f64> = (0..runs)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    grin_terms::median(&v)
}

/// The batch the timings run at: `GRIN_TIMING_BATCH`, 16 by default
/// (bench-train also runs 64).
fn timing_batch() -> usize {
    std::env::var("GRIN_TIMING_BATCH").ok().and_then(|b| b.parse().ok()).unwrap_or(16)
}

/// Width 1.0's trunk at 160x120, in run order, from the detector's own
/// widths: (kind, in, out, input height, input width) per conv.
fn trunk_at_width_1() -> Vec<(Kind, usize, usize, usize, usize)> {
    let spec = grin_net::DetectorSpec {
        model: grin_net::ModelConfig { width_mult: 1.0, ..grin_net::ModelConfig::default() },
        width: 160,
        height: 120,
        channels: 1,
    };
    let c = spec.widths();
    let (mut h, mut w) = (spec.height, spec.width);
    let mut layers = vec![(Kind::Dense { stride: 2 }, spec.channels, c[0], h, w)];
    (h, w) = (h.div_ceil(2), w.div_ceil(2));
    for stage in 1..c.len() {
        layers.push((Kind::Depthwise { stride: 2 }, c[stage - 1], c[stage - 1], h, w));
        (h, w) = (h.div_ceil(2), w.div_ceil(2));
        layers.push((Kind::Pointwise, c[stage - 1], c[stage], h, w));
        layers.push((Kind::Depthwise { stride: 1 }, c[stage], c[stage], h, w));
        layers.push((Kind::Pointwise, c[stage], c[stage], h, w));
    }
    layers
}

/// `cargo test --release -p grin-model --lib cpu::layer::timing -- --ignored --nocapture`
#[test]
#[ignore]
fn time_layers() {
    let batch = timing_batch();
    let mut total = (0.0, 0.0);
    for (kind, cin, cout, h, w) in trunk_at_width_1() {
        let k = if kind == Kind::Pointwise { 1 } else { 9 };
        let per = if matches!(kind, Kind::Depthwise { .. }) { 1 } else { cin };
        let layer = Layer {
            kind,
            cin,
            cout,
            weight: (0..cout * per * k).map(|i| (i as f32 * 0.37).sin()).collect(),
            bias: vec![0.0; cout],
            norm: Some(Norm { gamma: vec![1.0; cout], beta: vec![0.1; cout], epsilon: 1e-5 }),
            relu: true,
        };
        let x: Vec<f32> = (0..cin * batch * h * w).map(|i| (i as f32 * 0.013).cos()).collect();
        let s = layer.stride();
        let mut act = Act::new(&layer, batch, h.div_ceil(s), w.div_ceil(s), false);
        let input = Input::new(&x, h, w);
        let mut dx = vec![0.0; x.len()];
        let time = |f: &mut dyn FnMut()| median_ms(201, f);
        let f = time(&mut || forward(&layer, input, &mut act));
        // Backward overwrites its output gradient: each run starts from a
        // copy, whose time is taken apart and subtracted (a copy, not the
        // sines themselves, which took longer than the layers at batch 64
        // and drowned them in the difference).
        let dy: Vec<f32> = (0..act.dy.len()).map(|i| (i as f32 * 0.7).sin()).collect();
        let b = time(&mut || {
            act.dy.copy_from_slice(&dy);
            let dx = (!matches!(kind, Kind::Dense { .. })).then(|| InputGrad { values: &mut dx, accumulate: false });
            backward(&layer, input, &mut act, dx);
        });
        let fill = time(&mut || act.dy.copy_from_slice(&dy));
        println!("{kind:?} {cin}->{cout} {h}x{w}: forward {f:.3} ms, backward {:.3} ms", b - fill);
        total = (total.0 + f, total.1 + b - fill);
    }
    println!("batch {batch}, the trunk: forward {:.3} ms, backward {:.3} ms", total.0, total.1);
}

#[test]
#[ignore]
fn time_products() {
    use crate::gemm::matmul;
    use crate::view::View;
    let batch = timing_batch();
    // Width 1.0's 1x1 convs: (out, in, points per image).
    for (cout, cin, points) in [(32, 32, 1200), (48, 48, 300), (80, 80, 80), (112, 112, 20), (6, 48, 300), (48, 80, 80)]
    {
        let row = batch * points;
        let w: Vec<f32> = (0..cout * cin).map(|i| (i as f32).sin()).collect();
        let x: Vec<f32> = (0..cin * row).map(|i| (i as f32 * 0.1).cos()).collect();
        let dz: Vec<f32> = (0..cout * row).map(|i| (i as f32 * 0.3).cos()).collect();
        let time = |f: &mut dyn FnMut()| median_ms(101, f);
        let mut y = vec![0.0; cout * row];
        let f = time(&mut || matmul(View::rows(&w, cout, cin), View::rows(&x, cin, row), &mut y, false));
        let mut dw = vec![0.0; cout * cin];
        let g = time(&mut || matmul(View::rows(&dz, cout, row), View::rows(&x, cin, row).t(), &mut dw, false));
        let h = time(&mut || crate::dots::dots(View::rows(&dz, cout, row), View::rows(&x, cin, row), &mut dw));
        let mut dx = vec![0.0; cin * row];
        let d = time(&mut || matmul(View::rows(&w, cout, cin).t(), View::rows(&dz, cout, row), &mut dx, false));
        println!(
            "{cin}->{cout} at {points} points: forward {f:.3} ms, weight grad {g:.3} ms (dots on one thread {h:.3}), input grad {d:.3} ms"
        );
    }
}

#[test]
#[ignore]
fn time_input_grads() {
    let batch = timing_batch();
    for (stride, h, w) in [(2, 60, 80), (2, 30, 40), (1, 30, 40)] {
        let plane = Plane3x3::new(h, w, stride);
        let g: Vec<f32> = (0..batch * plane.out_len()).map(|i| (i as f32 * 0.7).sin()).collect();
        let mut dx = vec![0.0; batch * h * w];
        let taps = [0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
        let t = median_ms(201, &mut || plane.input_grad(&g, &taps, &mut dx, false));
        let f = median_ms(201, &mut || plane.forward(&[&dx], &taps, &mut [&mut g.clone()[..]]));
        println!(
            "stride {stride} {h}x{w}, one channel of batch {batch}: input grad {t:.4} ms, forward+clone {f:.4} ms"
        );
    }
}
