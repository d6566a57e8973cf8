//! One module per group of subcommands; each parses arguments, calls the
//! library crates, and prints what they return. The flags several commands
//! share, and the backend dispatch, live here.

use anyhow::Result;
use clap::Args;
use grin_train::LoadedConfig;
use std::path::{Path, PathBuf};

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
                type $B = backend::Cuda;
                let $device = backend::cuda_devices(&[0]).remove(0);
                $body
            }
            #[cfg(feature = "wgpu")]
            BackendChoice::Wgpu => {
                type $B = backend::Wgpu;
                let $device = backend::wgpu_devices(&[0])?.remove(0);
                $body
            }
            #[allow(unreachable_patterns)]
            other => unreachable!("backend::resolve refuses {} in a build without it", other.name()),
        }
    };
}

/// `println!` for a command's output, through [`out::write`]: `?` on a
/// closed pipe, never a panic. Use in functions returning `anyhow::Result`.
macro_rules! outln {
    () => {
        $crate::cmd::out::write(format_args!("\n"))?
    };
    ($($arg:tt)*) => {
        $crate::cmd::out::write(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

/// `print!` through [`out::write`], as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cmd::out::write(format_args!($($arg)*))?
    };
}

/// `--set`, declared once: every command that reads a config takes it.
#[derive(Args, Clone)]
pub(crate) struct SetArgs {
    /// Override any config key, e.g. `--set train.lr=0.01` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// Flags every command that needs a config shares.
#[derive(Args, Clone)]
pub(crate) struct ConfigArgs {
    /// A grin config (TOML).
    #[arg(long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
}

impl ConfigArgs {
    pub(crate) fn load(&self) -> Result<LoadedConfig> {
        load_config(&self.config, &self.set.sets)
    }
}

/// A config with `sets` applied, as every command reads one: standard
/// output onto one of its inputs (the config, a source's files) is refused
/// before the work (round 27 of issue 90: `grin model-info --config d.toml
/// >> d.toml`, `grin precompute --plan … >> caltech/ground-truth.txt`).
pub(crate) fn load_config(path: &Path, sets: &[String]) -> Result<LoadedConfig> {
    let loaded = grin_train::load_config(path, sets)?;
    grin_output::refuse_stdout_on_inputs(&loaded.inputs())?;
    Ok(loaded)
}

/// [`ConfigArgs`] for the commands that can do without a config (their
/// built-in defaults, a run folder's own config, or another input): the
/// same two flags, `--config` optional.
#[derive(Args, Clone)]
pub(crate) struct OptionalConfigArgs {
    /// A grin config (TOML); the command's help says what it uses without one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub set: SetArgs,
}

impl OptionalConfigArgs {
    /// The config at `--config` with the `--set`s applied, if one is given.
    pub(crate) fn load(&self) -> Result<Option<LoadedConfig>> {
        match &self.config {
            Some(path) => load_config(path, &self.set.sets).map(Some),
            None => Ok(None),
        }
    }

    /// [`Self::load`]'s config, or without `--config` the built-in defaults
    /// with the `--set`s applied to them by the same rules (round 9 of
    /// issue 90: `grin model-info --set ...` dropped them without a word).
    pub(crate) fn load_or_defaults(&self) -> Result<grin_train::GrinConfig> {
        match self.load()? {
            Some(loaded) => Ok(loaded.config),
            None => grin_train::parse_config("", "the built-in defaults", &self.set.sets),
        }
    }
}

/// The value parser of every count option (`--batches`, `--repeats`,
/// `--steps`, ...): 1 to `most`, so a 0 is refused naming the option
/// before anything runs, never blamed on another figure downstream, and so
/// is a count past its stated bound (`--samples 1e11` filled the disk).
pub(crate) fn count<T>(most: u64) -> clap::builder::RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    clap::builder::RangedU64ValueParser::new().range(1..=most)
}

/// [`count`] for options where 0 means something (none, or all): 0 to `most`.
pub(crate) fn count_or_zero<T>(most: u64) -> clap::builder::RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    clap::builder::RangedU64ValueParser::new().range(0..=most)
}

/// The bound of the step counts of the benchmarks (`--steps`, `--warmup`):
/// training's own bound on `train.steps`.
pub(crate) const MAX_STEPS: u64 = grin_train::MAX_STEPS as u64;

/// The bound of a small count of things drawn or written one by one
/// (`--count`, `--cols`, `--per-photo`, `--repeats`): a million.
pub(crate) const MAX_ITEMS: u64 = 1_000_000;

/// The value name of every command-line option that names a file a
/// command writes, and of every option naming a folder it writes into.
/// `tests/outputs.rs` finds the options by these names in each command's
/// help, and runs each one aimed at the command's own inputs: a refusal is
/// expected, and the input unchanged. An option that takes a path under
/// any other name is refused by that test until it is classified.
pub(crate) const OUT: &str = "OUT";
/// See [`OUT`].
pub(crate) const OUT_DIR: &str = "OUT_DIR";

/// Refuses, before any work, every output file among `outputs` that names
/// no file in an existing folder, is one of `inputs` or lies inside an
/// input folder, or is already a file of a run's or dataset's folder
/// (`grin_output::check_file`); the writes themselves check again.
pub(crate) fn check_outputs(outputs: &[&Path], inputs: &[&Path]) -> Result<()> {
    grin_output::refuse_stdout_on_inputs(inputs)?;
    // Two outputs on one place: the second would replace the first.
    for (i, a) in outputs.iter().enumerate() {
        if let Some(b) = outputs[i + 1..].iter().find(|b| grin_output::is_same_place(a, b)) {
            anyhow::bail!("{} and {} name one file: give each output its own", a.display(), b.display());
        }
    }
    for out in outputs {
        grin_output::check_file(out, inputs)?;
        // A new file under a name a run or a dataset writes, in such a
        // folder, would be taken for its own (round 11: `model-set --out
        // R/best.grin`, which `eval --best` then scored; round 14: a
        // `manifest.json` or `shard-00009.json` in a dataset's folder).
        let name = out.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let grins = grin_train::run_files().any(|f| f == name) || grin_store::is_dataset_file_name(name);
        if grins && is_kept_folder(folder_of(out)) {
            anyhow::bail!(
                "{}: {name} is a file grin writes in a run's or dataset's folder, and this is one (it holds {}): \
                 name another output",
                out.display(),
                grin_output::LOCK_FILE
            );
        }
    }
    Ok(())
}

/// Refuses an output whose name does not end in `.ext`, the kind of file
/// written there: a graph, a model or JSON figures under a config's or a
/// photo's name replaced it (issue 90, rounds 15 to 17).
pub(crate) fn check_kind(flag: &str, path: &Path, kind: &str, ext: &str) -> Result<()> {
    // `.onnx` alone is a hidden file with no extension: it is refused too.
    if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case(ext)) {
        anyhow::bail!("{flag} {}: {kind} goes in a file named NAME.{ext}; name it so", path.display());
    }
    Ok(())
}

/// A `--json` output: [`check_outputs`], then [`check_kind`].
pub(crate) fn check_json(path: &Path, inputs: &[&Path]) -> Result<()> {
    check_outputs(&[path], inputs)?;
    check_kind("--json", path, "JSON", "json")
}

/// A folder grin keeps for a run or a dataset: one holding its lock file.
fn is_kept_folder(folder: &Path) -> bool {
    folder.join(grin_output::LOCK_FILE).symlink_metadata().is_ok()
}

/// The folder a file output lands in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// [`check_out_folder`] for a folder of `what` (`eval --out`'s report,
/// `mine --out`'s crops): never a run's or a dataset's own folder, whose
/// files these would replace (round 11: `eval --out OTHER_RUN` replaced its
/// `pr_curve.svg`).
pub(crate) fn check_report_folder(flag: &str, folder: &Path, inputs: &[&Path], what: &str) -> Result<()> {
    check_out_folder(flag, folder, inputs)?;
    if is_kept_folder(folder) {
        anyhow::bail!(
            "{flag} {}: is a grin run's or dataset's folder (it holds {}): name a new folder for the {what}, \
             such as {}",
            folder.display(),
            grin_output::LOCK_FILE,
            folder.join(what).display()
        );
    }
    // A link there under a report's name is written through: one into a
    // run's folder replaced that run's summary (round 24 of issue 90).
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
            grin_output::refuse_a_kept_file(&entry.path())?;
        }
    }
    Ok(())
}

/// [`check_outputs`] for the folder `flag` names, which a command writes
/// its files into (made when missing): no file, and it must not be, nor lie
/// inside, nor hold an input (`grin_output::check`). Before any work
/// (round 10: `mine --out FILE` failed after the model loaded, "File exists").
pub(crate) fn check_out_folder(flag: &str, folder: &Path, inputs: &[&Path]) -> Result<()> {
    // An input named first: the worse mistake.
    grin_output::check(folder, inputs)?;
    if folder.symlink_metadata().is_ok() && !folder.is_dir() {
        anyhow::bail!(
            "{flag} {}: is not a folder; {flag} names the folder its files are written into",
            folder.display()
        );
    }
    Ok(())
}

/// [`check_out_folder`] for the folder a dataset is built in: never a run's
/// folder, which the two shared (round 11 of issue 90; `bench step --store`
/// built one in a run, and the run could not be resumed, round 23).
pub(crate) fn check_dataset_folder(flag: &str, folder: &Path, inputs: &[&Path]) -> Result<()> {
    check_out_folder(flag, folder, inputs)?;
    if let Some(name) = grin_train::run_files().find(|name| folder.join(name).symlink_metadata().is_ok()) {
        anyhow::bail!(
            "{flag} {}: holds {name}, a grin run's file: a dataset needs a folder of its own",
            folder.display()
        );
    }
    Ok(())
}

/// A `--set model.*` for a command that runs a model file as the file
/// holds it changed the config read for the data and nothing else (eval,
/// round 21 of issue 90; mine, round 25). `own` says what the command
/// takes instead.
pub(crate) fn refuse_model_sets(sets: &[String], command: &str, own: &str) -> Result<()> {
    let model_key = |set: &&String| set.trim_start().starts_with("model.") || set.trim_start().starts_with("model=");
    match sets.iter().find(model_key) {
        Some(set) => anyhow::bail!(
            "--set {set}: {command} the model as its file holds it; {own}, or change the file with grin model-set"
        ),
        None => Ok(()),
    }
}

/// Ctrl-C or SIGTERM ends a command that keeps no checkpoint at once, as
/// before, but saying what it leaves: it died by the signal (143) without
/// a word (round 25 of issue 90). It quits with 130, the code of an
/// interrupt; its locks go with the process, and a temporary file it was
/// writing is removed by the next write into that folder.
pub(crate) fn quit_on_interrupt(command: &'static str, left: String) -> Result<()> {
    use anyhow::Context;
    ctrlc::set_handler(move || {
        eprintln!("\ninterrupt: {command} quits; {left}");
        std::process::exit(130);
    })
    .context("cannot install the interrupt handler")
}

/// `--backend`, declared once: training, the balance check and the benchmarks take it.
#[derive(Args, Clone, Copy)]
pub(crate) struct BackendArg {
    /// Default: cuda when built with it and a GPU is present, then a wgpu GPU adapter, else cpu.
    #[arg(long, value_enum)]
    pub backend: Option<grin_train::backend::BackendChoice>,
}

/// `--allow-stale`, declared once: what the stale-dataset refusal advises,
/// so every command that may refuse one takes it (bench step and bench
/// modes advised it and rejected it, issue 90 round 7).
#[derive(Args, Clone, Copy)]
pub(crate) struct StaleArg {
    /// Read a precomputed dataset even if its fingerprint differs from the
    /// config (never one of another record size).
    #[arg(long)]
    pub allow_stale: bool,
}

pub(crate) mod bench;
pub(crate) mod config_cmd;
pub(crate) mod eval;
pub(crate) mod export;
pub(crate) mod features;
pub(crate) mod mine;
pub(crate) mod model_info;
pub(crate) mod model_set;
pub(crate) mod out;
pub(crate) mod simulate;
pub(crate) mod store;
pub(crate) mod train;
