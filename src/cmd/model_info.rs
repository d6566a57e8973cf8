//! `grin model-info`: the detector's parameter and FLOP budget, counted on
//! its architecture (`grin_net::Budget`, the list of convs the model is
//! built from).

use anyhow::Result;
use clap::Args;
use grin_net::{Budget, DetectorSpec};

/// `[model]` and the input size come from `--config`, or without one from
/// the built-in defaults (320x240x1), `--set` applied over either.
#[derive(Args)]
pub(crate) struct ModelInfoArgs {
    #[command(flatten)]
    pub config: super::OptionalConfigArgs,
}

/// The default model's budget (issue: at most 100k parameters, 150 MFLOPs at 320x240).
pub(crate) const PARAM_BUDGET: usize = 100_000;
pub(crate) const MFLOP_BUDGET: f64 = 150.0;
/// The frame size (width, height) the MFLOP budget is stated at.
const BUDGET_SIZE: (usize, usize) = (320, 240);

pub(crate) fn model_info(args: ModelInfoArgs) -> Result<()> {
    let c = args.config.load_or_defaults()?;
    let spec = c.detector_spec();
    let b = Budget::of(&spec);
    let points = spec.points();
    outln!(
        "grin detector, width_mult {}, input {}x{}x{}",
        spec.model.width_mult,
        spec.width,
        spec.height,
        spec.channels
    );
    outln!("  channels per stage   {:?}", spec.widths());
    outln!("  output levels        {:?} (rows, cols) at strides 8/16/32, {} points", points.levels, points.len());
    outln!(
        "  parameters           {}  (budget {PARAM_BUDGET}: {})",
        b.params,
        verdict(b.params as f64 <= PARAM_BUDGET as f64)
    );
    // The budget is stated at 320x240: a config at another input size gets
    // its own figure and the budget's, counted from the same layers.
    let at_size = DetectorSpec { width: BUDGET_SIZE.0, height: BUDGET_SIZE.1, ..spec.clone() };
    let at_budget = Budget::of(&at_size).mflops;
    let within = verdict(at_budget <= MFLOP_BUDGET);
    if (spec.width, spec.height) == BUDGET_SIZE {
        outln!("  MFLOPs per frame     {:.1}  (budget {MFLOP_BUDGET} at 320x240: {within})", b.mflops);
    } else {
        outln!(
            "  MFLOPs per frame     {:.1} at {}x{}, {at_budget:.1} at 320x240  (budget {MFLOP_BUDGET} at 320x240: {within})",
            b.mflops,
            spec.width,
            spec.height
        );
    }
    Ok(())
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "within"
    } else {
        "OVER"
    }
}
