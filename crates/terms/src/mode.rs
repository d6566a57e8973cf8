//! How batches reach the device and which device trains: the words configs,
//! `--mode`, `--backend`, the summary and the simulator share.

use serde::{Deserialize, Serialize};

/// How batches reach the device; `Auto` is a request (the balance check
/// picks one of the three), never the mode a run trains in. `--mode` takes
/// these values itself (clap's `ValueEnum`, behind the `cli` feature), as
/// configs do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    OnTheFly,
    Precomputed,
    InVram,
    Auto,
}

impl Mode {
    /// The name configs and `--mode` use.
    pub fn name(self) -> &'static str {
        match self {
            Mode::OnTheFly => "on-the-fly",
            Mode::Precomputed => "precomputed",
            Mode::InVram => "in-vram",
            Mode::Auto => "auto",
        }
    }
}

/// Which backend trains: `--backend`'s values, and the run summary's
/// `backend` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Cpu,
    Cuda,
    Wgpu,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Wgpu => "wgpu",
        }
    }
}
