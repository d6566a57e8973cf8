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
        grin_train::load_config(&self.config, &self.set.sets)
    }
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
            Some(path) => grin_train::load_config(path, &self.set.sets).map(Some),
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

/// Refuses, before any work, every output among `outputs` that is one of
/// `inputs` or lies inside an input folder (`grin_output::check`), or that
/// is already a file of a run's or dataset's folder
/// (`grin_output::refuse_a_kept_file`); the writes themselves check again.
pub(crate) fn check_outputs(outputs: &[&Path], inputs: &[&Path]) -> Result<()> {
    for out in outputs {
        grin_output::check(out, inputs)?;
        grin_output::refuse_a_kept_file(out)?;
    }
    Ok(())
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
