//! `grin model-set`: change a trained model's decision settings (threshold,
//! NMS, the second look, ...) in its file, without training: how a model is
//! given the settings its validation figures were measured with.

use anyhow::{bail, Result};
use clap::Args;
use grin_model::{file, parse_level_thresholds, scales_for_box, shift_between};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct ModelSetArgs {
    /// The model file to read.
    #[arg(long)]
    pub model: PathBuf,
    /// Where to write the changed model (default: MODEL, rewritten in place).
    #[arg(long, value_name = super::OUT)]
    pub out: Option<PathBuf>,
    /// The decision settings to change: `--set` as every command takes it,
    /// here only `model.` keys (e.g. `--set model.second_look.below=0.65`).
    #[command(flatten)]
    pub set: super::SetArgs,
    /// Face-score thresholds per output level, finest first (strides 8, 16,
    /// 32), e.g. `0.47,0.40,0.35`: folded into each head's face bias, with
    /// the file's own threshold set to 0.5, so every tool that reads the
    /// file (grin eval, grin-detect, the ONNX export) applies them. The file
    /// records them: given again, they replace the ones folded before.
    #[arg(long, value_name = "T8,T16,T32")]
    pub level_thresholds: Option<String>,
    /// Scales for the predicted box's left, top, right and bottom sides,
    /// each measured from the point that predicts it, e.g. `1.1,2.05,1.1,1.24`:
    /// folded into the heads' distance biases. Moves a model's boxes to another
    /// box definition (docs/design.md, "The face box"). The file records
    /// them: given again, they replace the ones folded before.
    #[arg(long, value_name = "L,T,R,B", value_parser = scales_for_box)]
    pub box_scale: Option<grin_net::BoxScale>,
}

pub(crate) fn run(args: ModelSetArgs) -> Result<()> {
    if args.set.sets.is_empty() && args.level_thresholds.is_none() && args.box_scale.is_none() {
        bail!(
            "nothing to set: give --set model.KEY=VALUE (e.g. model.second_look.below=0.65), --level-thresholds \
             T8,T16,T32 or --box-scale L,T,R,B"
        );
    }
    // Checked before the model is read: a bad list is the flag's error, not the file's.
    let thresholds = match &args.level_thresholds {
        Some(text) => Some(parse_level_thresholds(text).map_err(|e| anyhow::anyhow!("--level-thresholds {e}"))?),
        None => None,
    };
    // Rewritten in place: held (locked, its content noted) before it is
    // read, written back only if no one changed it meanwhile, and a second
    // model-set or calibrate on it refused while this one runs (two
    // model-sets lost one of their changes, issue 90).
    let out = args.out.as_ref().unwrap_or(&args.model);
    let in_place = args.out.is_none() || grin_output::is_same_file(out, &args.model);
    // A second name of the same file (a hard link, not a symbolic one): the
    // rewrite replaces --model's name with a new file, so --out would keep
    // the old settings while the command said it held the new ones (issue 90).
    if in_place && args.out.is_some() && out.canonicalize().ok() != args.model.canonicalize().ok() {
        bail!(
            "--out {} is another name (a hard link) of --model {}: a rewrite would part them; leave --out out to \
             change the model in place, or name a new file",
            out.display(),
            args.model.display()
        );
    }
    // A new file: checked as every output is, before the work (round 11:
    // `--out` another run's model, config, checkpoint or a dataset's
    // manifest replaced it).
    let inputs: Vec<&Path> =
        std::iter::once(args.model.as_path()).chain(grin_train::run_of_model(&args.model)).collect();
    if !in_place {
        super::check_outputs(&[out], &inputs)?;
        // A model under another kind of file's name (a config, a photo)
        // replaced that file (round 15 of issue 90), as `export` refuses
        // an ONNX graph under a model's name.
        super::check_kind("--out", out, "a model", "grin")?;
    }
    let held = if in_place { Some(grin_output::hold(&args.model)?) } else { None };
    // And a run's model, its run folder: a live run writes its models.
    let _run = if in_place { grin_train::hold_run_of_model(&args.model)? } else { None };
    let device = Default::default();
    let (mut spec, mut model) = file::load_model::<burn_ndarray::NdArray<f32>>(&args.model, &device)?;
    let mut changed = grin_train::set_model_keys(&spec.model, &args.set.sets)
        .map_err(|e| anyhow::anyhow!("{}: not changed: {e:#}", args.model.display()))?;
    if let Some(thresholds) = thresholds {
        if changed.score_threshold != spec.model.score_threshold {
            bail!("--level-thresholds sets the file's own threshold to 0.5; leave model.score_threshold out");
        }
        // The folded shifts are relative to 0.5: a logit of 0 is the threshold at every level.
        changed.score_threshold = 0.5;
        // From what the weights already hold, recorded in the file: given
        // twice, the thresholds apply once (6 faces became 18, issue 90).
        model = model.shift_face_logits(shift_between(spec.model.level_thresholds, thresholds));
        changed.level_thresholds = Some(thresholds);
    }
    if let Some(scale) = args.box_scale {
        // From what the weights already hold, as for the thresholds.
        model = model.scale_box_sides(spec.model.box_scale, scale);
        changed.box_scale = Some(scale);
    }
    let before = toml::to_string(&spec.model)?;
    spec.model = changed;
    let bytes = file::to_bytes(&spec, &model);
    match &held {
        Some(held) => held.write_back(&bytes)?,
        // A new file: never inside the run folder --model sits in (its
        // config and summary are the run's, as `grin export` holds too).
        None => grin_output::write_file(out, &inputs, &bytes)?,
    }
    outln!("{}: {} with [model] now:", out.display(), args.model.display());
    let after = toml::to_string(&spec.model)?;
    // Each line of the new table, marked where it differs from the old one.
    for line in after.lines().filter(|l| !l.trim().is_empty()) {
        let mark = if before.lines().any(|b| b == line) { " " } else { "*" };
        outln!("{mark} {line}");
    }
    Ok(())
}
