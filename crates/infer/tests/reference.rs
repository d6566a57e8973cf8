//! Burn's model as the runner's reference forward pass: the code training
//! runs, which the fast path is checked against. It lives here, not in the
//! Pi binary (docs/design.md, "The Pi binary").

use burn::tensor::{Tensor, TensorData};
use grin_infer::Reference;
use std::sync::{Arc, Mutex};

/// Plain f32 ndarray, no autodiff: inference only.
pub(crate) type Cpu = burn_ndarray::NdArray<f32>;

/// A Burn model to run in the fast path's place, as often as asked.
#[derive(Clone)]
pub(crate) struct BurnModel(Arc<Mutex<grin_model::Detector<Cpu>>>);

impl BurnModel {
    pub(crate) fn new(model: grin_model::Detector<Cpu>) -> BurnModel {
        BurnModel(Arc::new(Mutex::new(model)))
    }

    /// The model file at `bytes`, read as training reads it.
    pub(crate) fn from_bytes(bytes: &[u8]) -> BurnModel {
        BurnModel::new(grin_model::file::from_bytes::<Cpu>(bytes, &Default::default()).unwrap().1)
    }

    pub(crate) fn reference(&self) -> Reference {
        let model = self.0.clone();
        Box::new(move |pixels, [channels, height, width]| {
            let shape = [1, channels, height, width];
            let input = Tensor::<Cpu, 4>::from_data(TensorData::new(pixels.to_vec(), shape), &Default::default());
            let raw = model.lock().unwrap().forward(input).raw;
            raw.into_data().convert::<f32>().to_vec::<f32>().expect("f32 output")
        })
    }
}
