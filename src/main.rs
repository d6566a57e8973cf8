//! `grin`: train fast face + smile detectors and see whether the GPU starves.

#![forbid(unsafe_code)]

mod cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "grin", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bars or progress lines (training, scoring, the balance check).
    #[arg(long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Train the detector.
    Train(cmd::train::TrainArgs),
    /// Score a checkpoint on the held-out split: face AP@0.5 and smile accuracy.
    Eval(cmd::eval::EvalArgs),
    /// Choose a model's deployment threshold on the validation photos and write it into model.grin.
    Calibrate(cmd::eval::CalibrateArgs),
    /// Write a model's confident false detections on the training photos as hard negatives.
    Mine(cmd::mine::MineArgs),
    /// Write a model as an ONNX graph (OpenCV DNN, onnxruntime, ...).
    Export(cmd::export::ExportArgs),
    /// Change a trained model's decision settings (threshold, NMS, second look) in its file.
    ModelSet(cmd::model_set::ModelSetArgs),
    /// Print the detector's parameter count and MFLOPs per frame.
    ModelInfo(cmd::model_info::ModelInfoArgs),
    /// Measure T_g, T_i, T_s and say whether the run would starve the GPU.
    Balance(cmd::bench::BalanceArgs),
    /// Benchmarks that compare modes.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// Feature generation: benchmark and preview.
    #[command(subcommand)]
    Features(cmd::features::FeaturesCommand),
    /// Run the feature pipeline once and write a precomputed dataset.
    Precompute(cmd::store::PrecomputeArgs),
    /// Check a precomputed dataset's layout and every checksum.
    Verify(cmd::store::VerifyArgs),
    /// Precomputed-store tools.
    #[command(subcommand)]
    Store(cmd::store::StoreCommand),
    /// Discrete-event simulation of loaders, queue and GPU.
    Simulate(cmd::simulate::SimulateArgs),
    /// Print a config as resolved (defaults filled in, `--set` applied), one value, or every key.
    Config(cmd::config_cmd::ConfigCmdArgs),
}

/// Every command and subcommand reads a negative number as a value, which
/// its range then refuses by name (`--threshold -0.1` was "unexpected
/// argument '-0'", issue 90 round 8): the rule held here, once.
fn negative_numbers_are_values(command: clap::Command) -> clap::Command {
    command.allow_negative_numbers(true).mut_subcommands(negative_numbers_are_values)
}

fn main() {
    let matches = negative_numbers_are_values(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    grin_train::set_quiet(cli.quiet);
    let result = match cli.command {
        Command::Train(args) => cmd::train::train(args),
        Command::Eval(args) => cmd::eval::eval(args),
        Command::Calibrate(args) => cmd::eval::calibrate(args),
        Command::Mine(args) => cmd::mine::run(args),
        Command::Export(args) => cmd::export::export(args),
        Command::ModelSet(args) => cmd::model_set::run(args),
        Command::ModelInfo(args) => cmd::model_info::model_info(args),
        Command::Balance(args) => cmd::bench::balance(args),
        Command::Bench(command) => cmd::bench::bench(command),
        Command::Features(command) => cmd::features::run(command),
        Command::Precompute(args) => cmd::store::precompute(args),
        Command::Verify(args) => cmd::store::verify(args),
        Command::Store(command) => cmd::store::run(command),
        Command::Simulate(args) => cmd::simulate::run(args),
        Command::Config(args) => cmd::config_cmd::run(args),
    };
    if let Err(error) = result {
        // The reader of our output went away (`| head`): it has what it wanted.
        if error.downcast_ref::<cmd::out::ClosedPipe>().is_some() {
            return;
        }
        // One line, outermost context first: "file: key: problem".
        eprintln!("error: {error:#}");
        // 130, as a shell reports a Ctrl-C: scripts can tell "stopped, resumable" from "failed".
        let interrupted = error.downcast_ref::<grin_train::Interrupted>().is_some()
            || error.downcast_ref::<grin_train::InterruptedScoring>().is_some();
        std::process::exit(if interrupted { 130 } else { 2 });
    }
}
