//! `grin model-set`: change a trained model's decision settings (threshold,
//! NMS, the second look, ...) in its file, without training: how a model is
//! given the settings its validation figures were measured with.

use anyhow::{bail, Result};
use clap::Args;
use grin_model::file;
use std::path::PathBuf;

#[derive(Args)]
pub(crate) struct ModelSetArgs {
    /// The model file to read.
    #[arg(long)]
    pub model: PathBuf,
    /// Where to write the changed model (default: MODEL, rewritten in place).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A decision setting, e.g. `--set model.second_look.below=0.65` (repeatable).
    #[arg(long = "set", value_name = "model.KEY=VALUE")]
    pub sets: Vec<String>,
}

pub(crate) fn run(args: ModelSetArgs) -> Result<()> {
    if args.sets.is_empty() {
        bail!("nothing to set: give --set model.KEY=VALUE (e.g. model.second_look.below=0.65)");
    }
    let device = Default::default();
    let (mut spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&args.model, &device)?;
    let changed = grin_train::set_model_keys(&spec.model, &args.sets)
        .map_err(|e| anyhow::anyhow!("{}: not changed: {e:#}", args.model.display()))?;
    let before = toml::to_string(&spec.model)?;
    spec.model = changed;
    let out = args.out.as_ref().unwrap_or(&args.model);
    file::save_model(out, &spec, &model)?;
    outln!("{}: {} with [model] now:", out.display(), args.model.display());
    let after = toml::to_string(&spec.model)?;
    // Each line of the new table, marked where it differs from the old one.
    for line in after.lines().filter(|l| !l.trim().is_empty()) {
        let mark = if before.lines().any(|b| b == line) { " " } else { "*" };
        outln!("{mark} {line}");
    }
    Ok(())
}
