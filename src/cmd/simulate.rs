use anyhow::{Context, Result};
use clap::Args;
use grin_simulate::{read_run, render_svg, report, resolve, simulate, Flags};
use std::path::PathBuf;

/// Every figure can come from a flag or, with `--from-run`, from the run's
/// `summary.json`; a flag given next to `--from-run` overrides the run.
#[derive(Args)]
pub(crate) struct SimulateArgs {
    /// Mean host time for one loader to produce one batch (ms).
    #[arg(long)]
    load_ms: Option<f64>,
    /// Standard deviation of the load time (ms); default 0, or the run's.
    #[arg(long)]
    load_jitter_ms: Option<f64>,
    /// Loader workers, each producing one batch at a time.
    #[arg(long)]
    loaders: Option<usize>,
    /// Consumer (GPU) time per training step (ms).
    #[arg(long)]
    step_ms: Option<f64>,
    /// Simulated time (s).
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Queue capacity in batches [default: 2 x loaders].
    #[arg(long)]
    queue: Option<usize>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Timeline picture (SVG) of the first --timeline-seconds.
    #[arg(long, value_name = super::OUT, default_value = "timeline.svg")]
    out: PathBuf,
    /// Length of the drawn part of the run (s).
    #[arg(long, default_value_t = 2.0, value_parser = positive_seconds)]
    timeline_seconds: f64,
    /// A training run folder (`runs/<name>`) whose summary.json supplies the figures.
    #[arg(long)]
    from_run: Option<PathBuf>,
}

/// A length of time that is a number > 0 (-3, 0 and NaN drew an empty
/// timeline without a word, issue 90 round 7).
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{text} must be a number of seconds > 0")),
    }
}

pub(crate) fn run(args: SimulateArgs) -> Result<()> {
    // A run folder is read, never written into (its summary or model was
    // replaced by the picture, issue 90).
    let inputs: Vec<&std::path::Path> = args.from_run.iter().map(PathBuf::as_path).collect();
    super::check_outputs(&[&args.out], &inputs)?;
    // What the file is must be what its name says (round 10: `--out x.png`
    // held an SVG).
    if !args.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
        anyhow::bail!("--out {}: the timeline is an SVG picture; name it .svg", args.out.display());
    }
    let figures = args.from_run.as_deref().map(read_run).transpose()?;
    let flags = Flags {
        load_ms: args.load_ms,
        load_jitter_ms: args.load_jitter_ms,
        loaders: args.loaders,
        step_ms: args.step_ms,
        seconds: args.seconds,
        queue: args.queue,
        seed: args.seed,
        timeline_ms: args.timeline_seconds * 1000.0,
    };
    let params = resolve(&flags, figures.as_ref())?;
    let result = simulate(&params)?;
    out!("{}", report(&result, figures.as_ref()));
    let svg = render_svg(&result)?;
    grin_output::write_file(&args.out, &inputs, svg.as_bytes()).context("cannot write the timeline")?;
    outln!("  timeline           {} (first {:.2} s)", args.out.display(), result.timeline.window_ms / 1000.0);
    Ok(())
}
