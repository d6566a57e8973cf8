//! `grin balance` (the balance equation's figures, measured) and `grin bench
//! modes` (the same model and data trained once per feeding mode).

use super::{BackendArg, ConfigArgs};
use anyhow::Result;
use clap::{Args, Subcommand};
use grin_train::backend::{self, BackendChoice};
use grin_train::bench::Windows;
use grin_train::LoadedConfig;
use grin_train::OptimizerImpl;
use grin_train::TrainBackend;
use grin_train::{build_feed, FeedPlan, Mode};
use grin_train::{train, RunSpec};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct BalanceArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub backend: BackendArg,
}

/// `grin balance`: the check every training run could do first, alone.
pub(crate) fn balance(args: BalanceArgs) -> Result<()> {
    let loaded = args.config.load()?;
    let (choice, why) = backend::resolve(args.backend.backend)?;
    eprintln!("{why}");
    on_backend!(choice, B, device => balance_on::<B>(&loaded, choice, &device))
}

fn balance_on<B: TrainBackend>(loaded: &LoadedConfig, choice: BackendChoice, device: &B::Device) -> Result<()> {
    let check = grin_train::bench::check::<B>(&loaded.config, choice, 0, true, true, device)?;
    outln!("{}", check.figures.report(choice.name(), check.fits_in_device));
    Ok(())
}

#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Train the same model on the same data once per mode; compare steps/s and device-busy %, measured and predicted.
    Modes(BenchModesArgs),
    /// Time the training step alone, phase by phase, on batches cut from a store in device memory.
    Step(BenchStepArgs),
}

#[derive(Args)]
pub(crate) struct BenchStepArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub backend: BackendArg,
    #[command(flatten)]
    pub stale: super::StaleArg,
    /// The precomputed dataset to cut batches from (built there from the config if missing).
    #[arg(long, default_value = "runs/bench-step/data")]
    pub store: PathBuf,
    /// Samples in the store when it has to be built [default: 1024].
    #[arg(long, value_parser = super::count::<u64>(grin_store::MAX_SAMPLES))]
    pub samples: Option<u64>,
    /// Untimed steps first (allocation, first touch, autotune).
    #[arg(long, default_value_t = 10, value_parser = super::count_or_zero::<usize>(super::MAX_STEPS))]
    pub warmup: usize,
    /// Steps per timed window.
    #[arg(long, default_value_t = 50, value_parser = super::count::<usize>(super::MAX_STEPS))]
    pub steps: usize,
    /// Timed windows; the figures are their medians.
    #[arg(long, default_value_t = 5, value_parser = super::count::<usize>(super::MAX_ITEMS))]
    pub repeats: usize,
    /// Also write the figures as JSON.
    #[arg(long, value_name = super::OUT)]
    pub json: Option<PathBuf>,
    /// The optimizer's implementation: grin's (what runs train with: flat
    /// tensors on a device, host loops on the CPU) or Burn's adaptor (the
    /// same arithmetic, parameter by parameter).
    #[arg(long, value_enum, default_value_t)]
    pub optimizer: OptimizerImpl,
    /// Also count the kernel launches of `--steps` steps after the timed
    /// windows, by kernel name (CUDA and wgpu; CubeCL's launch log is on
    /// for the whole run, so the times include its cost per launch).
    #[arg(long)]
    pub launches: bool,
}

#[derive(Args)]
pub(crate) struct BenchModesArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub backend: BackendArg,
    #[command(flatten)]
    pub stale: super::StaleArg,
    /// Training steps per mode.
    #[arg(long, default_value_t = 60, value_parser = super::count::<usize>(super::MAX_STEPS))]
    pub steps: usize,
    /// Samples in the precomputed dataset the store modes read, when it has
    /// to be built [default: 512].
    #[arg(long, value_parser = super::count::<u64>(grin_store::MAX_SAMPLES))]
    pub samples: Option<u64>,
    /// Folder of the store (`data`) and of one run per mode, each replaced.
    #[arg(long, value_name = super::OUT_DIR, default_value = "runs/bench-modes")]
    pub runs_dir: PathBuf,
    /// Modes to run, in order (default: all three).
    #[arg(long, value_delimiter = ',', value_parser = timed_mode)]
    pub modes: Vec<Mode>,
    /// Also write the rows (and the balance figures) as JSON.
    #[arg(long, value_name = super::OUT)]
    pub json: Option<PathBuf>,
}

/// A mode `grin bench modes` can time: `auto` asks the balance check to
/// pick one, so there is no `auto` run to time (it ran nothing and printed
/// an empty table, issue 90).
fn timed_mode(text: &str) -> Result<Mode, String> {
    let modes = [Mode::OnTheFly, Mode::Precomputed, Mode::InVram];
    match modes.into_iter().find(|m| m.name() == text.trim()) {
        Some(mode) => Ok(mode),
        None if text.trim() == Mode::Auto.name() => {
            Err("auto is what `grin train` asks the balance check to choose, not a mode to time: name \
                 on-the-fly, precomputed or in-vram (or leave --modes out for all three)"
                .into())
        }
        None => Err("expected on-the-fly, precomputed or in-vram".into()),
    }
}

/// The modes to time, in order: the three when none is named. A mode
/// named twice would be timed twice into one run folder, the second run
/// replacing the first: refused.
fn chosen_modes(modes: &[Mode]) -> Result<Vec<Mode>> {
    if let Some((i, twice)) = modes.iter().enumerate().find(|&(i, m)| modes[..i].contains(m)) {
        anyhow::bail!("--modes: {} is named twice (at {}); name each mode once", twice.name(), i + 1);
    }
    Ok(if modes.is_empty() { vec![Mode::OnTheFly, Mode::Precomputed, Mode::InVram] } else { modes.to_vec() })
}

/// The dataset a benchmark reads at `dir`, built there with `samples` (or
/// `default`) when missing. `--samples` given for a dataset that holds
/// another count would change nothing: refused, naming both counts.
fn bench_store(c: &grin_train::GrinConfig, dir: &Path, samples: Option<u64>, default: u64) -> Result<()> {
    if !dir.join(grin_store::MANIFEST_FILE).exists() {
        grin_train::write_whole_store(&c.features, samples.unwrap_or(default), dir)?;
        return Ok(());
    }
    let held = grin_store::Manifest::load(dir)?.samples;
    match samples {
        Some(asked) if asked != held => anyhow::bail!(
            "--samples {asked}: {} holds {held} samples already and is not rebuilt; leave --samples out, or give \
             another folder",
            dir.display()
        ),
        _ => Ok(()),
    }
}

pub(crate) fn bench(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Modes(args) => {
            let (choice, why) = backend::resolve(args.backend.backend)?;
            eprintln!("{why}");
            on_backend!(choice, B, device => bench_modes::<B>(&args, choice, &device))
        }
        BenchCommand::Step(args) => {
            if args.launches {
                install_launch_counter()?;
            }
            let (choice, why) = backend::resolve(args.backend.backend)?;
            if args.launches && choice == BackendChoice::Cpu {
                // The CPU step launches no kernels: a count of 0 would read as a result.
                anyhow::bail!(
                    "--launches counts CUDA and wgpu kernels; the {} backend launches none (--backend cuda or wgpu)",
                    choice.name()
                );
            }
            eprintln!("{why}");
            on_backend!(choice, B, device => bench_step::<B>(&args, &device))
        }
    }
}

fn bench_step<B: TrainBackend>(args: &BenchStepArgs, device: &B::Device) -> Result<()> {
    let loaded = args.config.load()?;
    // Never over what it reads (config, sources, store), checked before the work.
    let mut inputs = loaded.inputs();
    // The store is built where it is missing: never inside the config's
    // sources (a dataset landed in a photo folder, issue 90), nor over a file.
    super::check_dataset_folder("--store", &args.store, &inputs)?;
    inputs.push(&args.store);
    grin_output::refuse_stdout_on_inputs(&inputs)?;
    if let Some(path) = &args.json {
        super::check_json(path, &inputs)?;
    }
    let c = &loaded.config;
    bench_store(c, &args.store, args.samples, 1024)?;
    let store = grin_train::bench::open_store(&args.store, &c.features, args.stale.allow_stale)?;
    if let Some(path) = &args.json {
        // Again, now that a store built here is a folder: before the timing.
        super::check_outputs(&[path], &inputs)?;
    }
    let windows =
        Windows { warmup: args.warmup, steps: args.steps, repeats: args.repeats, count_launches: args.launches };
    let b = grin_train::bench::bench_step::<B>(c, store, windows, args.optimizer, device)?;
    let m = &b.median;
    outln!(
        "bench step: {} ({} threads), {}, batch {} at {}x{}, width {} ({} parameters)",
        b.engine,
        b.threads,
        b.optimizer.describe(),
        b.batch,
        b.width,
        b.height,
        b.width_mult,
        b.params
    );
    outln!(
        "median of {} windows of {} steps: {:.2} steps/s | ms per step: batch {:.2}, forward {:.2}, loss {:.2}, backward {:.2}, optimizer {:.2}",
        b.windows.len(),
        args.steps,
        m.steps_per_s,
        m.batch_ms,
        m.forward_ms,
        m.loss_ms,
        m.backward_ms,
        m.optimizer_ms
    );
    if let Some(l) = &b.launches {
        outln!(
            "kernel launches per step (mean of {}): {:.1} in the step, {:.1} cutting the batch; the step's:",
            l.steps,
            l.step_per_step,
            l.batch_per_step
        );
        for (name, count) in &l.by_kernel {
            outln!("  {:>8.1}  {name}", *count as f64 / l.steps as f64);
        }
    }
    if let Some(path) = &args.json {
        grin_output::write_file(path, &inputs, serde_json::to_string_pretty(&b)?.as_bytes())?;
    }
    Ok(())
}

/// Turns CubeCL's launch log on, before any device starts.
fn install_launch_counter() -> Result<()> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    return grin_train::bench::install_launch_counter();
    #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
    anyhow::bail!("--launches counts CUDA and wgpu kernels: this grin was built without either")
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
    let chosen = chosen_modes(&args.modes)?;
    let dir = args.runs_dir.join("data");
    let runs: Vec<PathBuf> = chosen.iter().map(|m| args.runs_dir.join(m.name())).collect();
    // Its store and runs are scratch, replaced each time: never inside what
    // it reads. The JSON goes over none of it, nor over what the runs wrote;
    // checked before the runs, and again when it is written after them.
    super::check_out_folder("--runs-dir", &args.runs_dir, &loaded.inputs())?;
    for run in &runs {
        grin_train::bench::refuse_a_run_not_its_own(run)?;
    }
    let mut inputs = loaded.inputs();
    inputs.extend([args.runs_dir.as_path(), dir.as_path()]);
    inputs.extend(runs.iter().map(PathBuf::as_path));
    grin_output::refuse_stdout_on_inputs(&inputs)?;
    if let Some(path) = &args.json {
        super::check_json(path, &inputs)?;
    }
    let mut c = loaded.config.clone();
    c.train.steps = args.steps;
    c.train.log_every = (args.steps / 4).max(1);
    c.train.checkpoint_every = 0;
    bench_store(&c, &dir, args.samples, 512)?;
    let store = grin_train::bench::open_store(&dir, &c.features, args.stale.allow_stale)?;
    if let Some(path) = &args.json {
        // Again, now that a store built here is a folder: before the runs.
        super::check_outputs(&[path], &inputs)?;
    }
    let figures = grin_train::bench::measure::<B>(
        &c.features,
        &c.detector_spec(),
        &c.train,
        Some(&store),
        &c.train.device_augment,
        device,
    )?;
    let predicted = figures.predicted_busy();
    let mut rows = Vec::new();
    for mode in chosen {
        let plan = FeedPlan::new(mode, &c.features, &c.train, (mode != Mode::OnTheFly).then(|| store.clone()));
        let mut run = RunSpec::new(&c, mode, choice, args.runs_dir.join(mode.name()))?;
        run.name = mode.name().into();
        // Benchmark runs are scratch: each one replaces the last.
        run.overwrite = true;
        run.show_progress = false;
        run.evaluate = false;
        eprintln!("bench: {} for {} steps", mode.name(), args.steps);
        // Marked before it trains: a bench stopped mid-run leaves a folder
        // the next bench replaces (round 14: it was refused as not its own).
        grin_train::bench::mark_as_its_own(&run.run_dir)?;
        let s = train::<B>(&run, device, &mut |start| build_feed::<B>(&plan, device, start))?;
        let s = s.run;
        let simulated = if s.loaders == 0 {
            100.0 * s.step_ms / (s.step_ms + s.load_ms_per_batch).max(1e-9)
        } else {
            let summary = run.run_dir.join(grin_terms::summary::SUMMARY_FILE);
            let from_run = grin_simulate::FromRun { summary, figures: s.clone() };
            let flags = grin_simulate::Flags { seconds: 60.0, timeline_ms: 0.0, ..Default::default() };
            let params = grin_simulate::resolve(&flags, Some(&from_run))?;
            100.0 * grin_simulate::simulate(&params)?.gpu_busy
        };
        rows.push(ModeRow {
            mode: mode.name(),
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
    print_mode_rows(&rows, choice, c.train.batch_size, args.steps)?;
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
        grin_output::write_file(path, &inputs, serde_json::to_string_pretty(&json)?.as_bytes())?;
    }
    Ok(())
}

/// `grin bench modes`' table: one row per mode, steps/s against on-the-fly's.
fn print_mode_rows(rows: &[ModeRow], choice: BackendChoice, batch_size: usize, steps: usize) -> Result<()> {
    let base = rows.iter().find(|r| r.mode == "on-the-fly").map(|r| r.steps_per_s);
    outln!(
        "bench modes on {} (batch {}, {} steps each, first log interval excluded; busy = share of wall time not waiting on data)",
        choice.name(),
        batch_size,
        steps
    );
    outln!(
        "{:<12} {:>9} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10} {:>8} {:>7}",
        "mode",
        "steps/s",
        "samples/s",
        "wait ms",
        "step ms",
        "busy %",
        "balance %",
        "simulate %",
        "loaders",
        "vs otf"
    );
    for r in rows {
        let ratio = base.map(|b| format!("{:.2}x", r.steps_per_s / b)).unwrap_or_else(|| "-".into());
        outln!(
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
    Ok(())
}
