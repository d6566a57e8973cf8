//! `grin train`: plan the run (grin_train::plan), train it, print the summary.

use super::{BackendArg, ConfigArgs};
use anyhow::{Context, Result};
use clap::Args;
use grin_train::backend::{self, BackendChoice};
use grin_train::LoadedConfig;
use grin_train::TrainBackend;
use grin_train::{build_feed, PlanRequest, RunPlan};
use grin_train::{train_parallel, Interrupt, Phase, Summary};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args)]
pub(crate) struct TrainArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to feed the device (overrides `train.mode`).
    #[arg(long, value_enum)]
    pub mode: Option<grin_train::Mode>,
    #[command(flatten)]
    pub backend: BackendArg,
    /// Devices to train on, data-parallel (e.g. `0,1`): CUDA GPUs, or wgpu adapters in the order
    /// `--backend wgpu` lists them (one adapter named twice is two devices on it).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub devices: Vec<usize>,
    /// Run name (overrides `name`): output goes to `<runs-dir>/<name>/`.
    #[arg(long)]
    pub name: Option<String>,
    /// Folder of the run folders.
    #[arg(long, value_name = super::OUT_DIR, default_value = "runs")]
    pub runs_dir: PathBuf,
    /// Continue from `<run>/checkpoint.ckpt` with the same data order and optimizer state.
    #[arg(long)]
    pub resume: bool,
    /// Start afresh even if `runs/<name>` holds an interrupted run's checkpoint or a finished
    /// run (either is replaced).
    #[arg(long, conflicts_with = "resume")]
    pub overwrite: bool,
    #[command(flatten)]
    pub stale: super::StaleArg,
    /// Skip the balance check before the run (it takes a few seconds); refused in mode auto, which picks by it.
    #[arg(long)]
    pub no_balance: bool,
}

pub(crate) fn train(args: TrainArgs) -> Result<()> {
    let mut sets = args.config.set.sets.clone();
    if let Some(mode) = args.mode {
        sets.push(format!("train.mode={}", mode.name()));
    }
    if let Some(name) = &args.name {
        // Named as the flag the user gave, not as the `--set` it becomes.
        grin_train::check_run_name(name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
        sets.push(format!("name={name:?}"));
    }
    let loaded = super::load_config(&args.config.config, &sets)?;
    if args.no_balance && loaded.config.train.mode == grin_terms::Mode::Auto {
        // It was dropped without a word (issue 90, round 23).
        anyhow::bail!(
            "--no-balance: mode auto picks the mode by the balance check, so it always runs; name a mode \
             (--mode on-the-fly, precomputed or in-vram) to skip it"
        );
    }
    check_run_folder(&args.runs_dir.join(&loaded.config.name), &loaded)?;
    let (choice, why) = backend::resolve(args.backend.backend)?;
    eprintln!("{why}");
    if choice == BackendChoice::Cpu && args.devices != [0] {
        // Said, not ignored: the run would have trained on one device anyway.
        anyhow::bail!(
            "--devices {:?}: the cpu backend trains on one device (the host's cores); leave --devices out, or give \
             --backend cuda or wgpu",
            args.devices
        );
    }
    let summary = match choice {
        BackendChoice::Cpu => train_on::<backend::Cpu>(&args, &loaded, choice, vec![Default::default()])?,
        #[cfg(feature = "cuda")]
        BackendChoice::Cuda => train_on::<backend::Cuda>(&args, &loaded, choice, backend::cuda_devices(&args.devices))?,
        #[cfg(feature = "wgpu")]
        BackendChoice::Wgpu => {
            train_on::<backend::Wgpu>(&args, &loaded, choice, backend::wgpu_devices(&args.devices)?)?
        }
        #[allow(unreachable_patterns)]
        other => unreachable!("backend::resolve refuses {} in a build without it", other.name()),
    };
    print_summary(&summary)?;
    Ok(())
}

/// Refuses a run folder inside what the run reads (a photo folder, the
/// dataset it trains from), and a `--config` that is the run folder's own
/// `config.toml` unless the run would write it back as it is (a `--resume`
/// from the run's saved config): the run writes its resolved config there.
///
/// Round 8 of issue 90: the config and `train.init` are inputs too (a
/// config kept in the run folder, or named like a run's file, was replaced;
/// an init model in the folder `--overwrite` empties was lost), and every
/// file the run writes there is checked against them now, before training:
/// one that is a link to an input (`metrics.csv -> the config`) is refused.
fn check_run_folder(run_dir: &Path, loaded: &LoadedConfig) -> Result<()> {
    let mut inputs = loaded.data_inputs();
    let store = loaded.config.store_dir();
    inputs.push(&store);
    let own = run_dir.join("config.toml");
    let is_own = grin_output::is_same_file(&own, &loaded.path);
    if !is_own {
        inputs.push(&loaded.path);
    }
    if let Some(init) = &loaded.config.train.init {
        inputs.push(init);
    }
    // The run's own files: the check for outputs, without the refusal of
    // a run folder's files (`check_outputs`), which these are.
    grin_output::check(run_dir, &inputs)?;
    for name in grin_train::run_files() {
        grin_output::check(&run_dir.join(name), &inputs)?;
    }
    if is_own {
        let read = std::fs::read_to_string(&own).with_context(|| format!("{}: cannot read", own.display()))?;
        if read != toml::to_string(&loaded.config)? {
            anyhow::bail!(
                "{}: is the run's own config.toml, which the run rewrites as resolved (defaults and --set \
                 applied): refusing to change it; copy it elsewhere and give that as --config",
                own.display()
            );
        }
    }
    Ok(())
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
        sets: &args.config.set.sets,
        backend: choice,
        device_index: args.devices[0],
        runs_dir: args.runs_dir.clone(),
        resume: args.resume,
        overwrite: args.overwrite,
        allow_stale: args.stale.allow_stale,
        show_progress: true,
        balance: !args.no_balance,
    };
    // Answered from here on, the plan's balance check and dataset build
    // included (round 14: a SIGTERM there ended it by the signal, 143).
    let stop = stop_on_interrupt(&request.runs_dir.join(&c.name))?;
    let RunPlan { mut run, feed } = grin_train::plan::<B>(&request, &device)?;
    run.stop = Some(stop);
    eprintln!(
        "mode {}: training {} for {} steps, batch {}",
        run.mode.name(),
        c.name,
        c.train.steps,
        c.train.batch_size
    );
    train_parallel::<B>(&run, &devices, &mut |start| build_feed::<B>(&feed, &device, start))
}

/// Signals closer together than this are one interrupt: a parent-death
/// signal (what `scripts/sweep` asks for, so a killed sweep's trial stops)
/// is sent once per thread of the dying parent, microseconds apart.
const ONE_INTERRUPT: Duration = Duration::from_millis(250);

/// Ctrl-C or SIGTERM (what `kill` and job schedulers send) raises the flag
/// the training loop checks after every step, so the run stops with a fresh
/// checkpoint instead of losing the steps since the last periodic one.
/// Before the loop runs there is nothing to checkpoint, and after it the
/// model is written and only scored: either way it quits at once. A second
/// interrupt quits at once too.
fn stop_on_interrupt(run_dir: &Path) -> Result<Arc<Interrupt>> {
    let stop = Arc::new(Interrupt::default());
    let flag = stop.clone();
    let run_dir = run_dir.to_path_buf();
    let mut first: Option<Instant> = None;
    ctrlc::set_handler(move || match first {
        None => match flag.request() {
            Phase::Before => {
                eprintln!("\ninterrupt: quitting (the run had not started its steps; nothing to checkpoint)");
                std::process::exit(130);
            }
            Phase::Loop => {
                first = Some(Instant::now());
                eprintln!("\ninterrupt: stopping after this step with a checkpoint (interrupt again to quit at once)");
            }
            Phase::Scoring => {
                let run = run_dir.display();
                eprintln!("\ninterrupt: quitting the held-out scoring; {run}/model.grin is written, `grin eval --run {run}` scores it");
                std::process::exit(130);
            }
        },
        Some(at) if at.elapsed() < ONE_INTERRUPT => {}
        Some(_) => {
            eprintln!("\nsecond interrupt: quitting now");
            std::process::exit(130);
        }
    })
    .context("cannot install the interrupt handler")?;
    Ok(stop)
}

fn print_summary(summary: &Summary) -> Result<()> {
    let s = &summary.run;
    let pct = |v: Option<f32>| v.map(|v| format!("{:.3}", v)).unwrap_or_else(|| "n/a".into());
    outln!(
        "{}: {} steps in {:.1}s on {} ({}), {:.2} steps/s, {} busy {:.0}%, final loss {:.4}",
        s.name,
        s.steps,
        s.wall_s,
        s.backend.name(),
        s.mode.name(),
        s.steps_per_s,
        // On the CPU backend the "device" shares cores with the feature workers, and wgpu's
        // device may be a CPU driver.
        if s.backend == BackendChoice::Cuda { "GPU" } else { "device" },
        s.gpu_busy_pct,
        s.final_loss
    );
    if let Some(b) = &summary.balance {
        outln!(
            "balance check: predicted device busy {:.0}%, measured {:.0}% ({})",
            b.predicted_busy_pct,
            s.gpu_busy_pct,
            b.mode.name()
        );
    }
    outln!("held-out scenes: face AP@0.5 {}  smile accuracy {}", pct(s.face_ap), pct(s.smile_accuracy));
    for report in &summary.photos {
        outln!("held-out photos: {}", grin_train::photos::describe(report));
    }
    Ok(())
}
