//! `grin train`, `eval`, `model-info`, `balance`, `bench modes`.

use crate::config::{self, GrinConfig, LoadedConfig};
use anyhow::{Context, Result};
use burn::tensor::backend::{AutodiffBackend, Backend};
use clap::{Args, Subcommand, ValueEnum};
use grin_features::pipeline::Pipeline;
use grin_features::Split;
use grin_model::{budget, file, DetectorSpec};
use grin_train::backend::{self, BackendChoice};
use grin_train::feed::Feed;
use grin_train::sources::Generated;
use grin_train::trainer::{self, RunSpec, Summary};
use grin_train::Mode;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    OnTheFly,
    Precomputed,
    InVram,
    Auto,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::OnTheFly => Mode::OnTheFly,
            ModeArg::Precomputed => Mode::Precomputed,
            ModeArg::InVram => Mode::InVram,
            ModeArg::Auto => Mode::Auto,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    Cpu,
    Cuda,
}

impl From<BackendArg> for BackendChoice {
    fn from(b: BackendArg) -> BackendChoice {
        match b {
            BackendArg::Cpu => BackendChoice::Cpu,
            BackendArg::Cuda => BackendChoice::Cuda,
        }
    }
}

/// Flags every config-reading command shares.
#[derive(Args, Clone)]
pub struct ConfigArgs {
    /// A grin config (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Override any config key, e.g. `--set train.lr=0.01` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

impl ConfigArgs {
    pub fn load(&self) -> Result<LoadedConfig> {
        config::load(&self.config, &self.sets)
    }
}

#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to feed the device (overrides `train.mode`).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Default: cuda when built with it and a GPU is present, else cpu.
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// GPUs to train on, data-parallel (e.g. `0,1`).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub devices: Vec<usize>,
    /// Run name (overrides `name`): output goes to `<runs-dir>/<name>/`.
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long, default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Continue from `<run>/checkpoint.ckpt` with the same data order and optimizer state.
    #[arg(long)]
    pub resume: bool,
    /// Train on a precomputed dataset even if its fingerprint differs from the config.
    #[arg(long)]
    pub allow_stale: bool,
    /// No progress bar (logs and CI).
    #[arg(long)]
    pub quiet: bool,
}

pub fn train(args: TrainArgs) -> Result<()> {
    let mut sets = args.config.sets.clone();
    if let Some(mode) = args.mode {
        sets.push(format!("train.mode={}", trainer::mode_name(mode.into())));
    }
    if let Some(name) = &args.name {
        sets.push(format!("name={name:?}"));
    }
    let loaded = config::load(&args.config.config, &sets)?;
    let (choice, why) = backend::resolve(args.backend.map(Into::into))?;
    eprintln!("{why}");
    let summary = match choice {
        BackendChoice::Cpu => {
            train_on::<backend::Cpu>(&args, &loaded, choice, vec![Default::default()])?
        }
        BackendChoice::Cuda => train_cuda(&args, &loaded, choice)?,
    };
    print_summary(&summary);
    Ok(())
}

#[cfg(feature = "cuda")]
fn train_cuda(args: &TrainArgs, loaded: &LoadedConfig, choice: BackendChoice) -> Result<Summary> {
    let devices = args.devices.iter().map(|&i| burn_cuda::CudaDevice::new(i)).collect();
    train_on::<backend::Gpu>(args, loaded, choice, devices)
}

#[cfg(not(feature = "cuda"))]
fn train_cuda(_: &TrainArgs, _: &LoadedConfig, _: BackendChoice) -> Result<Summary> {
    unreachable!("backend::resolve refuses cuda in a build without it")
}

fn train_on<B: AutodiffBackend>(
    args: &TrainArgs,
    loaded: &LoadedConfig,
    choice: BackendChoice,
    devices: Vec<B::Device>,
) -> Result<Summary> {
    let c = &loaded.config;
    let device = devices.first().cloned().context("--devices: no device given")?;
    let mode = c.train.mode;
    let run = RunSpec {
        name: c.name.clone(),
        run_dir: args.runs_dir.join(&c.name),
        features: c.features.clone(),
        model: c.model.clone(),
        train: c.train.clone(),
        mode,
        backend: choice.name().into(),
        resume: args.resume,
        config_toml: toml::to_string(c)?,
        show_progress: !args.quiet,
        evaluate: true,
    };
    eprintln!("mode {}: training {} for {} steps, batch {}", trainer::mode_name(mode), c.name, c.train.steps, c.train.batch_size);
    feed_and_train::<B>(&run, c, &device)
}

/// Builds the feed the mode asks for and runs the trainer on it.
pub fn feed_and_train<B: AutodiffBackend>(run: &RunSpec, c: &GrinConfig, device: &B::Device) -> Result<Summary> {
    match run.mode {
        Mode::OnTheFly => {
            let pipeline = Arc::new(Pipeline::new(&c.features, Split::Train)?);
            let (batch, prefetch) = (c.train.batch_size, c.train.prefetch);
            let summary = trainer::train::<B>(run, device, |start| {
                Ok(Feed::host(Generated::new(pipeline.clone(), batch, start), prefetch, device.clone()))
            })?;
            if let Some(skips) = pipeline.skips().summary() {
                eprintln!("{skips}");
            }
            Ok(summary)
        }
        other => anyhow::bail!("mode {} is not available in this build yet", trainer::mode_name(other)),
    }
}

fn print_summary(s: &Summary) {
    let pct = |v: Option<f32>| v.map(|v| format!("{:.3}", v)).unwrap_or_else(|| "n/a".into());
    println!(
        "{}: {} steps in {:.1}s on {} ({}), {:.2} steps/s, GPU busy {:.0}%, final loss {:.4}",
        s.name,
        s.steps,
        s.wall_s,
        s.backend,
        trainer::mode_name(s.mode),
        s.steps_per_s,
        s.gpu_busy_pct,
        s.final_loss
    );
    println!("face AP@0.5 {}  smile accuracy {}", pct(s.face_ap), pct(s.smile_accuracy));
}

#[derive(Args)]
pub struct EvalArgs {
    /// A run folder (`runs/<name>`): uses its model.grin and config.toml.
    #[arg(long, conflicts_with_all = ["model", "config"])]
    pub run: Option<PathBuf>,
    /// A model file; needs --config for the held-out data.
    #[arg(long, requires = "config")]
    pub model: Option<PathBuf>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Held-out samples to score (default: `train.eval_samples`).
    #[arg(long)]
    pub samples: Option<usize>,
}

pub fn eval(args: EvalArgs) -> Result<()> {
    let (model_path, config_path) = match (&args.run, &args.model, &args.config) {
        (Some(run), _, _) => (run.join("model.grin"), run.join("config.toml")),
        (None, Some(m), Some(c)) => (m.clone(), c.clone()),
        _ => anyhow::bail!("give --run runs/<name>, or --model FILE --config FILE"),
    };
    let loaded = config::load(&config_path, &args.sets)?;
    let device = Default::default();
    let (spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&model_path, &device)?;
    check_input_matches(&spec, &loaded.config, &model_path)?;
    let samples = args.samples.unwrap_or(loaded.config.train.eval_samples);
    let r = grin_train::eval::evaluate(&model, &spec, &loaded.config.features, samples, &device)?;
    println!("held-out {} images, {} faces", r.images, r.faces);
    println!(
        "face AP@0.5 {:.3}  smile accuracy {}",
        r.face_ap,
        r.smile_accuracy.map(|a| format!("{a:.3}")).unwrap_or_else(|| "n/a (no labelled smiles matched)".into())
    );
    Ok(())
}

fn check_input_matches(spec: &DetectorSpec, c: &GrinConfig, model_path: &Path) -> Result<()> {
    let want = (c.features.width as usize, c.features.height as usize, c.features.channels as usize);
    if (spec.width, spec.height, spec.channels) != want {
        anyhow::bail!(
            "{}: model takes {}x{}x{}, the config's features are {}x{}x{}",
            model_path.display(),
            spec.width,
            spec.height,
            spec.channels,
            want.0,
            want.1,
            want.2
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct ModelInfoArgs {
    /// Config to read `[model]` and the input size from (default: the built-in defaults, 320x240x1).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// The default model's budget (issue: at most 100k parameters, 150 MFLOPs at 320x240).
pub const PARAM_BUDGET: usize = 100_000;
pub const MFLOP_BUDGET: f64 = 150.0;

pub fn model_info(args: ModelInfoArgs) -> Result<()> {
    let c = match &args.config {
        Some(path) => config::load(path, &args.sets)?.config,
        None => GrinConfig::default(),
    };
    let spec = DetectorSpec {
        model: c.model.clone(),
        width: c.features.width as usize,
        height: c.features.height as usize,
        channels: c.features.channels as usize,
    };
    let model = spec.init::<burn_ndarray::NdArray<f32>>(&Default::default());
    let b = budget(&spec, &model);
    let points = spec.points();
    println!("grin detector, width_mult {}, input {}x{}x{}", spec.model.width_mult, spec.width, spec.height, spec.channels);
    println!("  channels per stage   {:?}", spec.widths());
    println!("  output levels        {:?} (rows, cols) at strides 8/16/32, {} points", points.levels, points.len());
    println!("  parameters           {}  (budget {PARAM_BUDGET}: {})", b.params, verdict(b.params as f64 <= PARAM_BUDGET as f64));
    println!("  MFLOPs per frame     {:.1}  (budget {MFLOP_BUDGET} at 320x240: {})", b.mflops, verdict(b.mflops * 320.0 * 240.0 / (spec.width * spec.height) as f64 <= MFLOP_BUDGET));
    Ok(())
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "within"
    } else {
        "OVER"
    }
}

#[derive(Args)]
pub struct BalanceArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn balance(_args: BalanceArgs) -> Result<()> {
    anyhow::bail!("grin balance: in progress")
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Train the same model once per mode and compare steps/s and GPU-busy %.
    Modes(BalanceArgs),
}

pub fn bench(_command: BenchCommand) -> Result<()> {
    anyhow::bail!("grin bench: in progress")
}

#[allow(dead_code)]
fn sync<B: Backend>(device: &B::Device) {
    let _ = B::sync(device);
}
