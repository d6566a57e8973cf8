//! An exponential moving average of the weights (`train.ema`): the model a
//! run scores, keeps and writes when it is on.
//!
//! Why: the last step's weights carry the last batches' noise, and a
//! detector's thresholds sit where that noise moves boxes in and out.
//! Detector trainers (YOLOv5 on) ship the average instead.
//!
//! Every float the model holds is averaged, the parameters and BatchNorm's
//! running statistics alike (Burn visits both), so the average's statistics
//! follow averaged weights rather than the last step's. The decay ramps up
//! as TensorFlow's moving average does, `min(decay, (1 + t) / (10 + t))`
//! at update `t`, so the first updates do not pin the average to the
//! weights the run started from.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use grin_model::Detector;
use std::collections::HashMap;

/// The average of a run's weights so far.
pub(crate) struct Ema<B: Backend> {
    decay: f64,
    /// Updates so far: one a step, so a resumed run passes its step.
    updates: usize,
    model: Detector<B>,
}

impl<B: Backend> Ema<B> {
    /// An average that starts at `model`, `updates` steps into the run.
    pub(crate) fn new(decay: f64, model: Detector<B>, updates: usize) -> Ema<B> {
        Ema { decay, updates, model }
    }

    /// The weight the average keeps at the next update.
    pub(crate) fn decay_now(&self) -> f64 {
        let t = self.updates as f64;
        self.decay.min((1.0 + t) / (10.0 + t))
    }

    /// Moves the average toward `live` (the weights after a step). `live`
    /// must hold its own running statistics, as `valid()` gives: Burn maps
    /// a running state in place, so a clone's would be written too.
    pub(crate) fn update(&mut self, live: Detector<B>) {
        let keep = self.decay_now();
        let mut gather = Gather { values: HashMap::new() };
        self.model.visit(&mut gather);
        // Mapping the live model keeps its structure and ids; each value
        // becomes keep * average + (1 - keep) * live.
        self.model = live.map(&mut Blend { average: gather.values, keep });
        self.updates += 1;
    }

    /// The averaged weights.
    pub(crate) fn model(&self) -> &Detector<B> {
        &self.model
    }
}

/// Every float value of a model, flattened, by id.
struct Gather<B: Backend> {
    values: HashMap<ParamId, Tensor<B, 1>>,
}

impl<B: Backend> ModuleVisitor<B> for Gather<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let value = param.val();
        let n = value.shape().num_elements();
        self.values.insert(param.id, value.reshape([n]));
    }
}

/// Blends each value with the average's value of the same id.
struct Blend<B: Backend> {
    average: HashMap<ParamId, Tensor<B, 1>>,
    keep: f64,
}

impl<B: Backend> ModuleMapper<B> for Blend<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, live, mapper) = param.consume();
        // An id the average lacks cannot occur (the average is a map of
        // the same model); the live value is the right start if it did.
        let blended = match self.average.remove(&id) {
            Some(average) => {
                let average: Tensor<B, D> = average.reshape(live.shape());
                average.mul_scalar(self.keep) + live.mul_scalar(1.0 - self.keep)
            }
            None => live,
        };
        Param::from_mapped_value(id, blended, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, NdArray};
    use burn::module::AutodiffModule;
    use grin_model::values_of;
    use grin_model::InitDetector;
    use grin_net::{DetectorSpec, ModelConfig};

    type B = NdArray<f32>;

    fn values(model: &Detector<B>) -> Vec<Vec<f32>> {
        let mut gather = Gather { values: HashMap::new() };
        model.visit(&mut gather);
        let mut ids: Vec<_> = gather.values.keys().copied().collect();
        ids.sort_by_key(|id| id.val());
        ids.iter().map(|id| values_of(gather.values[id].clone())).collect()
    }

    /// One run's weights at two steps: the same ids, every value 0.5 apart.
    fn two_models() -> (Detector<B>, Detector<B>) {
        let spec = DetectorSpec { model: ModelConfig::default(), width: 32, height: 32, channels: 1 };
        let trained: Detector<Autodiff<B>> = spec.init_seeded(1, &Default::default());
        // `valid` gives each copy its own running statistics (a clone would
        // share them, and a map writes them in place).
        (trained.valid(), trained.valid().map(&mut Shift(0.5)))
    }

    /// Adds a constant to every value.
    struct Shift(f32);

    impl ModuleMapper<B> for Shift {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, t, mapper) = param.consume();
            Param::from_mapped_value(id, t.add_scalar(self.0), mapper)
        }
    }

    #[test]
    fn every_value_moves_by_the_ramped_decay() {
        let (start, live) = two_models();
        let mut ema = Ema::new(0.99, start.clone(), 0);
        assert!((ema.decay_now() - 0.1).abs() < 1e-12, "the first update keeps a tenth");
        let target = values(&live);
        ema.update(live);
        let (before, after) = (values(&start), values(ema.model()));
        assert_eq!(before.len(), after.len());
        for ((b, a), t) in before.iter().zip(&after).zip(&target) {
            for ((b, a), t) in b.iter().zip(a).zip(t) {
                let want = 0.1 * b + 0.9 * t;
                assert!((t - b - 0.5).abs() < 1e-6, "{t} {b}");
                assert!((a - want).abs() < 1e-5, "{a} against {want}");
            }
        }
    }

    #[test]
    fn the_decay_ramps_to_its_setting_and_stays() {
        let (start, _) = two_models();
        let at = |updates| Ema::new(0.999, start.clone(), updates).decay_now();
        assert!((at(90) - 0.91).abs() < 1e-12);
        assert!(at(10_000) == 0.999, "capped at the setting");
        assert!(at(100) < at(1000));
    }

    /// A checkpoint carries the average, and a resumed run continues it:
    /// its values, and its place on the decay's ramp.
    #[test]
    fn a_resumed_run_continues_the_average_it_checkpointed() {
        type Cpu = crate::backend::Cpu;
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::GrinConfig::default();
        (config.features.width, config.features.height, config.model.width_mult) = (32, 32, 0.5);
        config.train.ema = 0.99;
        let mut run =
            crate::RunSpec::new(&config, crate::Mode::OnTheFly, crate::backend::BackendChoice::Cpu, dir.path().into())
                .unwrap();
        let (spec, device, ckpt) = (run.detector_spec(), Default::default(), dir.path().join("checkpoint.ckpt"));
        let fresh = crate::resume::start::<Cpu>(&run, &spec, &device, &ckpt).unwrap();
        let mut ema = fresh.ema.expect("train.ema is set");
        ema.update(fresh.model.valid().map(&mut Shift(0.5)));
        let state = crate::checkpoint::LoopState { step: 7, ..fresh.state };
        crate::resume::save(&ckpt, &state, &spec, &fresh.model, &fresh.optim, Some(&ema)).unwrap();

        run.resume = true;
        let resumed = crate::resume::start::<Cpu>(&run, &spec, &device, &ckpt).unwrap();
        let average = resumed.ema.expect("train.ema is set");
        assert_eq!(values(average.model()), values(ema.model()), "the average, not the weights");
        assert_ne!(values(average.model()), values(&resumed.model.valid()));
        assert_eq!(average.decay_now(), Ema::new(0.99, ema.model().clone(), 7).decay_now());

        // A checkpoint without the average (written by hand: the config's
        // hash keeps a run from meeting one) is refused, naming the file.
        crate::resume::save(&ckpt, &state, &spec, &fresh.model, &fresh.optim, None).unwrap();
        let e = crate::resume::start::<Cpu>(&run, &spec, &device, &ckpt).err().expect("refused").to_string();
        assert!(e.contains("checkpoint.ckpt") && e.contains("no averaged model"), "{e}");
    }
}
