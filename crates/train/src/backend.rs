//! Backend choice: CUDA when compiled in and a GPU is present, else the CPU.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// The CPU training backend; also what tests and CI run.
pub type Cpu = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
/// The CUDA training backend (build with `--features cuda`).
#[cfg(feature = "cuda")]
pub type Gpu = burn::backend::Autodiff<burn_cuda::Cuda<f32, i32>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendChoice {
    Cpu,
    Cuda,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
        }
    }
}

pub const CUDA_COMPILED: bool = cfg!(feature = "cuda");

/// A GPU is visible when the NVIDIA driver's device nodes exist.
pub fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists() || std::path::Path::new("/dev/nvidia0").exists()
}

/// Resolves `--backend` (or its absence) and says why.
pub fn resolve(requested: Option<BackendChoice>) -> Result<(BackendChoice, String)> {
    match requested {
        Some(BackendChoice::Cuda) if !CUDA_COMPILED => {
            bail!("--backend cuda: this grin was built without CUDA; rebuild with `cargo build --release --features cuda`")
        }
        // cudarc panics when it cannot load libcuda: refuse here, in words.
        Some(BackendChoice::Cuda) if !gpu_present() => {
            bail!("--backend cuda: no NVIDIA GPU is visible (no /dev/nvidiactl); use --backend cpu")
        }
        Some(choice) => Ok((choice, format!("backend {} (asked for)", choice.name()))),
        None if CUDA_COMPILED && gpu_present() => Ok((BackendChoice::Cuda, "backend cuda (GPU found)".into())),
        None if CUDA_COMPILED => Ok((BackendChoice::Cpu, "backend cpu (built with CUDA, but no GPU found)".into())),
        None => Ok((BackendChoice::Cpu, "backend cpu (built without CUDA)".into())),
    }
}
