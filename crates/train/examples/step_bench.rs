use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use grin_features::{pipeline::Pipeline, FeatureConfig, Split};
use grin_model::{assign, loss, DetectorSpec, LossWeights, ModelConfig, PointTensors};
use grin_train::device_batch::upload;
use std::time::Instant;

fn bench<B: AutodiffBackend>(name: &str, w: u32, h: u32, batch: usize) {
    let device = B::Device::default();
    let mut f = FeatureConfig::default();
    f.width = w;
    f.height = h;
    let p = Pipeline::new(&f, Split::Train).unwrap();
    let hb = p.batch(&(0..batch as u64).collect::<Vec<_>>()).unwrap();
    let spec = DetectorSpec { model: ModelConfig::default(), width: w as usize, height: h as usize, channels: 1 };
    let mut model = spec.init::<B>(&device);
    let mut optim = AdamWConfig::new().init::<B, _>();
    let points = PointTensors::<B>::new(&spec.points(), &device);
    let wts = LossWeights { focal_alpha: 0.25, focal_gamma: 2.0, box_weight: 2.0, smile_weight: 1.0 };
    let mut times = vec![];
    for i in 0..6 {
        let t = Instant::now();
        let b = upload::<B>(&hb, &device);
        let t_fwd = Instant::now();
        let out = model.forward(b.images.clone());
        let _ = out.raw.clone().sum().into_scalar();
        let fwd = t_fwd.elapsed();
        let t_l = Instant::now();
        let targets = assign(&points, b.boxes, b.labels);
        let parts = loss(&out, &targets, &points, wts);
        let _ = parts.total.clone().into_scalar();
        let tl = t_l.elapsed().as_secs_f64();
        let t_b = Instant::now();
        let g = if std::env::var("SUMONLY").is_ok() { out.raw.clone().sum().backward() } else { parts.total.backward() };
        let grads = GradientsParams::from_grads(g, &model);
        let tb = t_b.elapsed().as_secs_f64();
        let t_o = Instant::now();
        model = optim.step(1e-3, model, grads);
        let _ = model.forward(b.images.clone().narrow(0,0,1)).raw.sum().into_scalar();
        let to = t_o.elapsed().as_secs_f64();
        if i > 0 { println!("  loss {tl:.3} bwd {tb:.3} opt+1fwd {to:.3}"); }
        if i > 0 { times.push((t.elapsed().as_secs_f64(), fwd.as_secs_f64())); }
    }
    let s: f64 = times.iter().map(|t| t.0).sum::<f64>() / times.len() as f64;
    let fw: f64 = times.iter().map(|t| t.1).sum::<f64>() / times.len() as f64;
    println!("{name} {w}x{h} b{batch}: step {:.3}s fwd {:.3}s", s, fw);
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    if which.contains("nd") { bench::<burn::backend::Autodiff<burn_ndarray::NdArray<f32>>>("ndarray", 160, 120, 16); }
    if which.contains("flex") { bench::<burn::backend::Autodiff<burn_flex::Flex>>("flex", 160, 120, 16); }
}
