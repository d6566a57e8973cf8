use burn::module::Module;
use burn::nn::conv::Conv2dConfig;
use burn::nn::PaddingConfig2d;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor};
use std::time::Instant;

fn one<B: AutodiffBackend>(name: &str, groups: usize, c: usize, k: usize) {
    let d = B::Device::default();
    let conv = Conv2dConfig::new([c, c], [k, k]).with_groups(groups).with_padding(PaddingConfig2d::Explicit(k/2,k/2,k/2,k/2)).init::<B>(&d);
    let x = Tensor::<B, 4>::random([16, c, 60, 80], Distribution::Default, &d).require_grad();
    let mut f = 0.0; let mut b = 0.0;
    for i in 0..4 {
        let t = Instant::now();
        let y = conv.forward(x.clone());
        let _ = y.clone().sum().into_scalar();
        let tf = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let g = y.sum().backward();
        let gw = conv.weight.grad(&g).unwrap();
        let _ = gw.sum().into_scalar();
        let tb = t.elapsed().as_secs_f64();
        if i > 0 { f += tf / 3.0; b += tb / 3.0; }
    }
    println!("{name} groups={groups} c={c} k={k}: fwd {:.4}s bwd {:.4}s  params {}", f, b, conv.num_params());
}

fn main() {
    type Nd = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
    type Fx = burn::backend::Autodiff<burn_flex::Flex>;
    one::<Nd>("nd dw", 32, 32, 3);
    one::<Nd>("nd dense", 1, 32, 3);
    one::<Nd>("nd pw", 1, 32, 1);
    one::<Fx>("flex dw", 32, 32, 3);
    one::<Fx>("flex dense", 1, 32, 3);
    one::<Fx>("flex pw", 1, 32, 1);
}
