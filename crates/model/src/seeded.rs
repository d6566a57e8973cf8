//! Seeded draws from Burn's random generator, one at a time.
//!
//! A Burn backend draws random tensors from one generator for the whole
//! process (burn-ndarray's and burn-cubecl's alike, whatever the device),
//! and a fresh parameter draws its values at its first use, not when its
//! module is made. So a run's initial weights depend on its seed alone only
//! when the generator is seeded and every parameter drawn at once, with no
//! other draw in between: not the in-VRAM feed's augmentation draws (each
//! batch reseeds), nor another run's in the same process (the training tests
//! run several at a time). Every seeded draw in grin goes through
//! [`seeded`]; a draw that never seeds (a test's random input, a model made
//! and used without a seed) is not kept out.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use std::sync::Mutex;

/// Held from a seeding until its draws are done.
static GENERATOR: Mutex<()> = Mutex::new(());

/// Seeds `B`'s generator on `device` with `seed` and runs `draw`, with no
/// other seeded draw of this process in between. `draw` must draw all it
/// needs before it returns: a lazy parameter drawn later draws from
/// whatever the generator holds then ([`draw_now`]).
pub fn seeded<B: Backend, T>(device: &B::Device, seed: u64, draw: impl FnOnce() -> T) -> T {
    // A panic in another draw leaves nothing behind that this one reads.
    let _only = GENERATOR.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    B::seed(device, seed);
    draw()
}

/// Draws every parameter of `module` not yet drawn.
pub(crate) fn draw_now<B: Backend, M: Module<B>>(module: &M) {
    module.visit(&mut DrawNow);
}

struct DrawNow;

impl<B: Backend> ModuleVisitor<B> for DrawNow {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        param.val();
    }
}
