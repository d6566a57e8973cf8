//! Where a run starts: fresh weights, `train.init`'s (with the fine-tune
//! surgery a new option needs), or an interrupted run's checkpoint; and the
//! checkpoint a run writes to continue from.

use crate::checkpoint::{self, Checkpoint, LoopState};
use crate::ema::Ema;
use crate::run::RunSpec;
use crate::step::{self, Optim};
use crate::TrainBackend;
use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use grin_model::InitDetector;
use grin_model::{file, Detector};
use grin_net::DetectorSpec;
use std::path::Path;

/// Where a run starts.
pub(crate) struct Start<B: TrainBackend> {
    pub(crate) model: Detector<B>,
    pub(crate) optim: Optim<B>,
    pub(crate) state: LoopState,
    /// The weights' moving average, when `train.ema` is on.
    pub(crate) ema: Option<Ema<B::InnerBackend>>,
}

/// The model, optimizer, loop state and average the run starts from.
pub(crate) fn start<B: TrainBackend>(
    run: &RunSpec,
    spec: &DetectorSpec,
    device: &B::Device,
    ckpt_path: &Path,
) -> Result<Start<B>> {
    let cfg = &run.train;
    let config_json = checkpoint::config_json(&run.features, &run.model, &run.train)?;
    let mut model: Detector<B> = spec.init_seeded(run.features.seed, device);
    let mut optim = step::optimizer::<B>(cfg);
    let mut state = LoopState {
        step: 0,
        config_json: config_json.clone(),
        history: vec![],
        wall_s: 0.0,
        watch: Default::default(),
        data: run.data.clone(),
    };

    if let (Some(init), false) = (&cfg.init, run.resume) {
        model = from_init(run, spec, init, model, device)?;
    }
    let mut ema = (cfg.ema > 0.0).then(|| Ema::new(cfg.ema, model.valid(), 0));
    if run.resume {
        let ck = checkpoint::load(ckpt_path)?;
        checkpoint::same_config(ckpt_path, &ck.state.config_json, &config_json)?;
        checkpoint::same_data(ckpt_path, ck.state.data.as_deref(), run.data.as_deref())?;
        let (_, loaded) =
            file::from_bytes::<B>(&ck.model, device).map_err(|e| anyhow::anyhow!("{}: {e}", ckpt_path.display()))?;
        model = loaded;
        let record = BinBytesRecorder::<FullPrecisionSettings>::default()
            .load(ck.optimizer, device)
            .with_context(|| format!("{}: optimizer state", ckpt_path.display()))?;
        optim = optim.load_record(record);
        state = ck.state;
        if cfg.ema > 0.0 {
            // The config hash matched, so the run that wrote it averaged too.
            if ck.average.is_empty() {
                bail!("{}: checkpoint holds no averaged model, yet train.ema is set", ckpt_path.display());
            }
            let (_, average) = file::from_bytes::<B::InnerBackend>(&ck.average, device)
                .map_err(|e| anyhow::anyhow!("{}: averaged model: {e}", ckpt_path.display()))?;
            ema = Some(Ema::new(cfg.ema, average, state.step));
        }
        eprintln!("resuming {} at step {}", run.name, state.step);
    }
    Ok(Start { model, optim, state, ema })
}

/// `train.init`'s weights, made to fit this run's model (`fresh`, its
/// own draws, gives a widened head its new channels): grey to colour, a
/// wider stride-8 head, top-down fusion added.
fn from_init<B: TrainBackend>(
    run: &RunSpec,
    spec: &DetectorSpec,
    init: &Path,
    fresh: Detector<B>,
    device: &B::Device,
) -> Result<Detector<B>> {
    let (init_spec, loaded) =
        file::load_model::<B>(init, device).map_err(|e| anyhow::anyhow!("key `train.init`: {e}"))?;
    // A grey model reads colour from where it was: the one change of
    // input it can start from.
    let to_colour = init_spec.channels == 1 && spec.channels == 3;
    if (init_spec.channels != spec.channels && !to_colour) || init_spec.widths() != spec.widths() {
        bail!(
            "key `train.init`: {} has {} channel(s) and widths {:?}; this run's model has {} and {:?}",
            init.display(),
            init_spec.channels,
            init_spec.widths(),
            spec.channels,
            spec.widths()
        );
    }
    let loaded = if to_colour {
        eprintln!(
            "{}: {} reads grey; its first conv is split between R, G and B by their share of the luma",
            run.name,
            init.display()
        );
        loaded.with_colour_input(grin_image::LUMA_SHARES).expect("a one-channel model's first conv")
    } else {
        loaded
    };
    let loaded = if init_spec.head_widths() == spec.head_widths() {
        loaded
    } else {
        eprintln!(
            "{}: widening the stride-8 head of {} to {} channels (the new ones start with no say)",
            run.name,
            init.display(),
            spec.head_widths()[0]
        );
        // A fresh model of this run's architecture gives the new channels' draws.
        loaded.with_fine_head_of(fresh).map_err(|e| anyhow::anyhow!("key `train.init`: {}: {e}", init.display()))?
    };
    let model = match (init_spec.model.top_down, spec.model.top_down) {
        (false, true) => {
            eprintln!("{}: adding top-down fusion (starting as a no-op) to {}", run.name, init.display());
            loaded.with_top_down(spec, device)
        }
        (true, false) => bail!(
            "key `train.init`: {} has top-down fusion; this run's model has none (set model.top_down = true)",
            init.display()
        ),
        _ => loaded,
    };
    eprintln!("{}: starting from the weights of {}", run.name, init.display());
    let left = settings_left_behind(&init_spec.model, &spec.model);
    if !left.is_empty() {
        // Said, not carried over: the run's model is its config's, and
        // a folded setting is trained over (round 18: silently dropped).
        eprintln!(
            "note: {}: {}'s own {} are not carried over: this run's model takes its config's",
            run.name,
            init.display(),
            left.join(", ")
        );
    }
    Ok(model)
}

/// The settings of `init`'s model file (its threshold, second look, what
/// `model-set` folded in) that differ from this run's `model`, as
/// `model.KEY VALUE`; the architecture's own changes are said where made.
fn settings_left_behind(init: &grin_net::ModelConfig, model: &grin_net::ModelConfig) -> Vec<String> {
    let (Ok(serde_json::Value::Object(init)), Ok(model)) = (serde_json::to_value(init), serde_json::to_value(model))
    else {
        return Vec::new();
    };
    let architecture = ["width_mult", "top_down", "fine_head"];
    init.iter()
        .filter(|(key, value)| !architecture.contains(&key.as_str()) && model.get(key.as_str()) != Some(*value))
        .map(|(key, value)| format!("model.{key} {value}"))
        .collect()
}

/// Writes the checkpoint a run continues from: `state`, the weights, the
/// optimizer's moments and the weights' average.
pub(crate) fn save<B: TrainBackend>(
    ckpt_path: &Path,
    state: &LoopState,
    spec: &DetectorSpec,
    model: &Detector<B>,
    optim: &Optim<B>,
    ema: Option<&Ema<B::InnerBackend>>,
) -> Result<()> {
    let optimizer = BinBytesRecorder::<FullPrecisionSettings>::default().record(optim.to_record(), ())?;
    let average = ema.map_or_else(Vec::new, |e| file::to_bytes(spec, e.model()));
    let ck = Checkpoint { state: state.clone(), model: file::to_bytes(spec, model), optimizer, average };
    checkpoint::save(ckpt_path, &ck)
}

#[cfg(test)]
mod tests {
    /// Issue 90, round 18: a model's threshold and folded box scale were
    /// dropped by `train.init` without a word.
    #[test]
    fn the_settings_an_init_model_leaves_behind_are_named() {
        let run = grin_net::ModelConfig::default();
        assert!(super::settings_left_behind(&run, &run).is_empty());
        let init = grin_net::ModelConfig { score_threshold: 0.5, top_down: !run.top_down, ..run.clone() };
        assert_eq!(super::settings_left_behind(&init, &run), ["model.score_threshold 0.5"]);
    }
}
