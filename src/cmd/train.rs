//! `grin train`, `eval`, `model-info`, `balance`, `bench modes`.

use crate::config::{self, GrinConfig, LoadedConfig};
use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use grin_model::{budget, file, DetectorSpec, TrainBackend};
use grin_train::backend::{self, BackendChoice};
use grin_train::trainer::{self, RunSpec, Summary};
use grin_train::{build_feed, FeedPlan, Mode, PlanRequest, RunPlan};
use std::path::PathBuf;

/// Runs `$body` with `$B` naming the chosen backend's type and `$device`
/// its first device: one generic code path, monomorphised per backend.
macro_rules! on_backend {
    ($choice:expr, $B:ident, $device:ident => $body:expr) => {
        match $choice {
            BackendChoice::Cpu => {
                type $B = backend::Cpu;
                let $device = Default::default();
                $body
            }
            #[cfg(feature = "cuda")]
            BackendChoice::Cuda => {
                type $B = backend::Gpu;
                let $device = burn_cuda::CudaDevice::new(0);
                $body
            }
            #[cfg(not(feature = "cuda"))]
            BackendChoice::Cuda => unreachable!("backend::resolve refuses cuda in a build without it"),
        }
    };
}

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
    /// Start afresh even if `runs/<name>` holds an interrupted run's checkpoint (it is replaced).
    #[arg(long, conflicts_with = "resume")]
    pub overwrite: bool,
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
        BackendChoice::Cpu => train_on::<backend::Cpu>(&args, &loaded, choice, vec![Default::default()])?,
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

fn train_on<B: TrainBackend>(
    args: &TrainArgs,
    loaded: &LoadedConfig,
    choice: BackendChoice,
    devices: Vec<B::Device>,
) -> Result<Summary> {
    let c = &loaded.config;
    let device = devices.first().cloned().context("--devices: no device given")?;
    if devices.len() > 1 {
        eprintln!("data-parallel over {} devices", devices.len());
    }
    let request = PlanRequest {
        config: c,
        config_path: &loaded.path,
        backend: choice,
        device_index: args.devices[0],
        runs_dir: args.runs_dir.clone(),
        resume: args.resume,
        overwrite: args.overwrite,
        allow_stale: args.allow_stale,
        show_progress: !args.quiet,
    };
    let RunPlan { run, feed } = grin_train::plan::<B>(&request, &device)?;
    eprintln!(
        "mode {}: training {} for {} steps, batch {}",
        trainer::mode_name(run.mode),
        c.name,
        c.train.steps,
        c.train.batch_size
    );
    trainer::train_parallel::<B>(&run, &devices, |start| build_feed::<B>(&feed, &device, start))
}

fn print_summary(s: &Summary) {
    let pct = |v: Option<f32>| v.map(|v| format!("{:.3}", v)).unwrap_or_else(|| "n/a".into());
    println!(
        "{}: {} steps in {:.1}s on {} ({}), {:.2} steps/s, {} busy {:.0}%, final loss {:.4}",
        s.name,
        s.steps,
        s.wall_s,
        s.backend,
        trainer::mode_name(s.mode),
        s.steps_per_s,
        // On the CPU backend the "device" shares cores with the feature workers.
        if s.backend == "cuda" { "GPU" } else { "device" },
        s.gpu_busy_pct,
        s.final_loss
    );
    println!("held-out scenes: face AP@0.5 {}  smile accuracy {}", pct(s.face_ap), pct(s.smile_accuracy));
    for report in &s.photos {
        println!("held-out photos: {}", grin_train::photo_eval::describe(report));
    }
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
    /// Held-out scenes to score (default: `train.eval_samples`; 0 skips them).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Held-out real photos to score per source (default: `train.eval_photos`; 0 skips them).
    #[arg(long)]
    pub photos: Option<usize>,
    /// Folder for `pr_curve.svg` and `photos.json`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Score photos at this size instead of the model's run size (e.g. `480x360`).
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    pub run_size: Option<(usize, usize)>,
}

/// `WxH` as two pixel counts (the bounds `train.run_size` has).
fn parse_size(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{text}`: expected WxH, for example 320x240");
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (usize, usize) = (w.trim().parse().map_err(|_| bad())?, h.trim().parse().map_err(|_| bad())?);
    if !(32..=4096).contains(&w) || !(32..=4096).contains(&h) {
        return Err(format!("`{text}`: each side must be between 32 and 4096 pixels"));
    }
    Ok((w, h))
}

pub fn eval(args: EvalArgs) -> Result<()> {
    let (model_path, config_path) = match (&args.run, &args.model, &args.config) {
        (Some(run), _, _) => (run.join("model.grin"), run.join("config.toml")),
        (None, Some(m), Some(c)) => (m.clone(), c.clone()),
        _ => anyhow::bail!("give --run runs/<name>, or --model FILE --config FILE"),
    };
    let loaded = config::load(&config_path, &args.sets)?;
    let c = &loaded.config;
    let device = Default::default();
    let (mut run_spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&model_path, &device)?;
    if let Some((w, h)) = args.run_size {
        (run_spec.width, run_spec.height) = (w, h);
    }
    if run_spec.channels != c.features.channels as usize {
        anyhow::bail!(
            "{}: model takes {} channel(s), the config's features have {}",
            model_path.display(),
            run_spec.channels,
            c.features.channels
        );
    }
    // Scenes are scored at the features' size, photos at the size the model runs at.
    let scene_spec =
        DetectorSpec { width: c.features.width as usize, height: c.features.height as usize, ..run_spec.clone() };
    let samples = args.samples.unwrap_or(c.train.eval_samples);
    if samples > 0 {
        let r = grin_train::eval::evaluate(&model, &scene_spec, &c.features, samples, &device)?;
        let ap = r.face_ap.map(|a| format!("{a:.3}")).unwrap_or_else(|| "undefined (no faces in the split)".into());
        let smile =
            r.smile_accuracy.map(|a| format!("{a:.3}")).unwrap_or_else(|| "n/a (no labelled smiles matched)".into());
        println!("held-out scenes: {} images, {} faces: face AP@0.5 {ap}  smile accuracy {smile}", r.images, r.faces);
    }
    let photos = args.photos.unwrap_or(c.train.eval_photos);
    if photos > 0 {
        let (w, h) = (run_spec.width, run_spec.height);
        let reports = grin_train::photo_eval::evaluate_photos(
            &model,
            &run_spec,
            &c.features,
            photos,
            c.train.eval_min_face,
            &device,
        )?;
        if reports.is_empty() {
            println!("held-out photos: none (the config's source has no real photos)");
        }
        for r in &reports {
            println!("held-out photos at {w}x{h}: {}", grin_train::photo_eval::describe(r));
        }
        if let Some(out) = &args.out {
            std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
            grin_train::photo_eval::plot_pr(&out.join("pr_curve.svg"), &reports)?;
            std::fs::write(out.join("photos.json"), serde_json::to_string_pretty(&reports)?)?;
            println!("wrote {}/pr_curve.svg and photos.json", out.display());
        }
    }
    Ok(())
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// A run folder (`runs/<name>`): its model.grin is rewritten with the chosen threshold.
    #[arg(long)]
    pub run: PathBuf,
    /// Validation photos per real source (default: all of them).
    #[arg(long, default_value_t = 0)]
    pub photos: usize,
}

/// Picks the face-score threshold with the best mean F1 over the real
/// sources' *validation* photos (the test split stays unseen, so the
/// reported figures are not tuned on), and writes it into model.grin.
pub fn calibrate(args: CalibrateArgs) -> Result<()> {
    use grin_train::photo_eval::{at_threshold, best_threshold, evaluate_split};
    let model_path = args.run.join("model.grin");
    let loaded = config::load(&args.run.join("config.toml"), &[])?;
    let c = &loaded.config;
    let device = Default::default();
    let (mut spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&model_path, &device)?;
    let reports = evaluate_split(
        &model,
        &spec,
        &c.features,
        grin_features::Split::Val,
        args.photos,
        c.train.eval_min_face,
        &device,
    )?;
    let Some((threshold, f1)) = best_threshold(&reports) else {
        anyhow::bail!("{}: the config's source has no real photos to calibrate on", args.run.display());
    };
    println!("validation photos at {}x{}:", spec.width, spec.height);
    for r in &reports {
        println!("  {}", grin_train::photo_eval::describe(r));
    }
    println!(
        "threshold  {}",
        reports.iter().map(|r| format!("{:>26}", format!("{} P / R / F1", r.source))).collect::<String>()
    );
    for k in (2..19).step_by(2) {
        let t = k as f32 * 0.05;
        let cells: String = reports
            .iter()
            .map(|r| {
                let (p, rc, f) = at_threshold(&r.curve, t);
                format!("{:>26}", format!("{p:.3} / {rc:.3} / {f:.3}"))
            })
            .collect();
        println!("{t:>9.2}  {cells}");
    }
    let before = spec.model.score_threshold;
    spec.model.score_threshold = threshold;
    file::save_model(&model_path, &spec, &model).with_context(|| format!("{}: cannot write", model_path.display()))?;
    println!(
        "{}: score_threshold {before:.2} -> {threshold:.2} (mean F1 {f1:.3} on validation photos)",
        model_path.display()
    );
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
    let spec = c.detector_spec();
    let model = spec.init::<burn_ndarray::NdArray<f32>>(&Default::default());
    let b = budget(&spec, &model);
    let points = spec.points();
    println!(
        "grin detector, width_mult {}, input {}x{}x{}",
        spec.model.width_mult, spec.width, spec.height, spec.channels
    );
    println!("  channels per stage   {:?}", spec.widths());
    println!("  output levels        {:?} (rows, cols) at strides 8/16/32, {} points", points.levels, points.len());
    println!(
        "  parameters           {}  (budget {PARAM_BUDGET}: {})",
        b.params,
        verdict(b.params as f64 <= PARAM_BUDGET as f64)
    );
    println!(
        "  MFLOPs per frame     {:.1}  (budget {MFLOP_BUDGET} at 320x240: {})",
        b.mflops,
        verdict(b.mflops * 320.0 * 240.0 / (spec.width * spec.height) as f64 <= MFLOP_BUDGET)
    );
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
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
}

/// `grin balance`: the check every training run could do first, alone.
pub fn balance(args: BalanceArgs) -> Result<()> {
    let loaded = args.config.load()?;
    let (choice, why) = backend::resolve(args.backend.map(Into::into))?;
    eprintln!("{why}");
    on_backend!(choice, B, device => balance_on::<B>(&loaded, choice, &device))
}

fn balance_on<B: TrainBackend>(loaded: &LoadedConfig, choice: BackendChoice, device: &B::Device) -> Result<()> {
    let check = grin_train::balance::check::<B>(&loaded.config, choice, 0, true, device)?;
    println!("{}", check.figures.report(choice.name(), check.fits_in_device));
    Ok(())
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Train the same model on the same data once per mode; compare steps/s and device-busy %, measured and predicted.
    Modes(BenchModesArgs),
}

#[derive(Args)]
pub struct BenchModesArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// Training steps per mode.
    #[arg(long, default_value_t = 60)]
    pub steps: usize,
    /// Samples in the precomputed dataset the store modes read.
    #[arg(long, default_value_t = 512)]
    pub samples: u64,
    #[arg(long, default_value = "runs/bench-modes")]
    pub runs_dir: PathBuf,
    /// Modes to run, in order (default: all three).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub modes: Vec<ModeArg>,
    /// Also write the rows (and the balance figures) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn bench(command: BenchCommand) -> Result<()> {
    let BenchCommand::Modes(args) = command;
    let (choice, why) = backend::resolve(args.backend.map(Into::into))?;
    eprintln!("{why}");
    on_backend!(choice, B, device => bench_modes::<B>(&args, choice, &device))
}

/// One mode's measured and predicted figures.
#[derive(serde::Serialize)]
struct ModeRow {
    mode: &'static str,
    steps_per_s: f64,
    samples_per_s: f64,
    wait_ms_per_step: f64,
    step_ms: f64,
    busy_pct: f64,
    /// `grin balance`'s prediction from the measured T_g, T_s, T_u, T_c, T_r.
    balance_busy_pct: f64,
    /// `grin simulate --from-run` on this run (host modes), or the serial
    /// closed form step / (step + cut) in VRAM.
    simulated_busy_pct: f64,
    loaders: usize,
    load_ms_per_batch: f64,
    run_dir: PathBuf,
}

fn bench_modes<B: TrainBackend>(args: &BenchModesArgs, choice: BackendChoice, device: &B::Device) -> Result<()> {
    let loaded = args.config.load()?;
    let mut c = loaded.config.clone();
    c.train.steps = args.steps;
    c.train.log_every = (args.steps / 4).max(1);
    c.train.checkpoint_every = 0;
    let dir = args.runs_dir.join("data");
    if !dir.join("manifest.json").exists() {
        grin_train::precompute::write_whole_store(&c.features, args.samples, &dir)?;
    }
    let store = grin_train::feed::precomputed::open_store(&dir, &c.features, false)?;
    let figures = grin_train::balance::measure::<B>(
        &c.features,
        &c.detector_spec(),
        c.train.batch_size,
        c.train.loss.weights(),
        Some(&store),
        &c.train.device_augment,
        device,
    )?;
    let predicted = figures.predicted_busy();
    let chosen: Vec<Mode> = if args.modes.is_empty() {
        vec![Mode::OnTheFly, Mode::Precomputed, Mode::InVram]
    } else {
        args.modes.iter().map(|&m| m.into()).filter(|m| *m != Mode::Auto).collect()
    };
    let mut rows = Vec::new();
    for mode in chosen {
        let plan = FeedPlan::new(mode, &c.features, &c.train, (mode != Mode::OnTheFly).then(|| store.clone()));
        let mut run = RunSpec::new(&c, mode, choice, args.runs_dir.join(trainer::mode_name(mode)))?;
        run.name = trainer::mode_name(mode).into();
        // Benchmark runs are scratch: each one replaces the last.
        run.overwrite = true;
        run.show_progress = false;
        run.evaluate = false;
        eprintln!("bench: {} for {} steps", trainer::mode_name(mode), args.steps);
        let s = trainer::train::<B>(&run, device, |start| build_feed::<B>(&plan, device, start))?;
        let simulated = if s.loaders == 0 {
            100.0 * s.step_ms / (s.step_ms + s.load_ms_per_batch).max(1e-9)
        } else {
            let figures = grin_simulate::read_run(&run.run_dir)?;
            let flags = grin_simulate::Flags { seconds: 60.0, timeline_ms: 0.0, ..Default::default() };
            let params = grin_simulate::resolve(&flags, Some(&figures))?;
            100.0 * grin_simulate::simulate(&params)?.gpu_busy
        };
        rows.push(ModeRow {
            mode: trainer::mode_name(mode),
            steps_per_s: s.steps_per_s,
            samples_per_s: s.samples_per_s,
            wait_ms_per_step: s.wait_ms_per_step,
            step_ms: s.step_ms,
            busy_pct: s.gpu_busy_pct,
            balance_busy_pct: predicted.iter().find(|(m, _)| *m == mode).map(|p| p.1).unwrap_or(f64::NAN),
            simulated_busy_pct: simulated,
            loaders: s.loaders,
            load_ms_per_batch: s.load_ms_per_batch,
            run_dir: run.run_dir.clone(),
        });
    }
    let base = rows.iter().find(|r| r.mode == "on-the-fly").map(|r| r.steps_per_s);
    println!(
        "bench modes on {} (batch {}, {} steps each, first log interval excluded; busy = share of wall time not waiting on data)",
        choice.name(),
        c.train.batch_size,
        args.steps
    );
    println!(
        "{:<12} {:>9} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10} {:>8} {:>7}",
        "mode", "steps/s", "samples/s", "wait ms", "step ms", "busy %", "balance %", "simulate %", "loaders", "vs otf"
    );
    for r in &rows {
        let ratio = base.map(|b| format!("{:.2}x", r.steps_per_s / b)).unwrap_or_else(|| "-".into());
        println!(
            "{:<12} {:>9.2} {:>10.1} {:>9.2} {:>9.2} {:>8.1} {:>10.1} {:>10.1} {:>8} {:>7}",
            r.mode,
            r.steps_per_s,
            r.samples_per_s,
            r.wait_ms_per_step,
            r.step_ms,
            r.busy_pct,
            r.balance_busy_pct,
            r.simulated_busy_pct,
            r.loaders,
            ratio
        );
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "backend": choice.name(),
            "batch_size": c.train.batch_size,
            "steps": args.steps,
            "width": c.features.width,
            "height": c.features.height,
            "balance": figures,
            "rows": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(())
}
