use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{s, Distribution, Tensor};
use std::time::Instant;

fn dw<B: AutodiffBackend>(x: Tensor<B, 4>, w: Tensor<B, 2>, stride: usize) -> Tensor<B, 4> {
    let [b, c, h, wd] = x.dims();
    let x = x.pad((1, 1, 1, 1), burn::tensor::ops::PadMode::Constant(0.0));
    let (oh, ow) = (h.div_ceil(stride), wd.div_ceil(stride));
    let mut out: Option<Tensor<B, 4>> = None;
    for ky in 0..3 {
        for kx in 0..3 {
            let sl = x.clone().slice(s![.., .., ky..ky + (oh - 1) * stride + 1; stride as isize, kx..kx + (ow - 1) * stride + 1; stride as isize]);
            let k = w.clone().narrow(1, ky * 3 + kx, 1).reshape([1, c, 1, 1]);
            let term = sl * k;
            out = Some(match out { None => term, Some(o) => o + term });
        }
    }
    let _ = b;
    out.unwrap()
}

fn pw<B: AutodiffBackend>(x: Tensor<B, 4>, w: Tensor<B, 2>) -> Tensor<B, 4> {
    let [b, c, h, wd] = x.dims();
    let co = w.dims()[0];
    let y = w.unsqueeze_dim::<3>(0).matmul(x.reshape([b, c, h * wd]));
    y.reshape([b, co, h, wd])
}

fn run<B: AutodiffBackend>(name: &str) {
    let d = B::Device::default();
    let x = Tensor::<B, 4>::random([16, 32, 60, 80], Distribution::Default, &d).require_grad();
    let wd = Tensor::<B, 2>::random([32, 9], Distribution::Default, &d).require_grad();
    let wp = Tensor::<B, 2>::random([32, 32], Distribution::Default, &d).require_grad();
    for (label, which) in [("dw", 0), ("dw s2", 2), ("pw", 1)] {
        let mut f = 0.0; let mut bw = 0.0;
        for i in 0..4 {
            let t = Instant::now();
            let y = match which { 0 => dw(x.clone(), wd.clone(), 1), 2 => dw(x.clone(), wd.clone(), 2), _ => pw(x.clone(), wp.clone()) };
            let _ = y.clone().sum().into_scalar();
            let tf = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let g = y.sum().backward();
            let gw = if which == 1 { wp.grad(&g).unwrap() } else { wd.grad(&g).unwrap() };
            let _ = gw.sum().into_scalar();
            let tb = t.elapsed().as_secs_f64();
            if i > 0 { f += tf / 3.0; bw += tb / 3.0; }
        }
        println!("{name} {label}: fwd {f:.4}s bwd {bw:.4}s");
    }
}

fn main() {
    run::<burn::backend::Autodiff<burn_ndarray::NdArray<f32>>>("nd");
    run::<burn::backend::Autodiff<burn_flex::Flex>>("flex");
}
