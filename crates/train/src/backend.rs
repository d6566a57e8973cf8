//! Backend choice and device setup. The automatic order is CUDA, then a
//! wgpu GPU, then the CPU; a CPU driver behind wgpu (Mesa's lavapipe) is
//! never chosen automatically, only with `--backend wgpu`.

use anyhow::{bail, Result};
use burn::tensor::backend::AutodiffBackend;
use grin_device_step::StepKernels;
use grin_model::DetectorBackend;

/// A backend the trainer can use: autodiff over a detector backend, whose
/// inner backend (evaluation, `model.valid()`, the device step) is one too,
/// with its own step kernels where it has them.
pub trait TrainBackend: DetectorBackend + AutodiffBackend<InnerBackend: StepKernels> {}
impl<B: DetectorBackend + AutodiffBackend<InnerBackend: StepKernels>> TrainBackend for B {}

/// The CPU training backend; also what tests and CI run.
pub type Cpu = burn::backend::Autodiff<burn_ndarray::NdArray<f32>>;
/// The CUDA training backend (build with `--features cuda`).
#[cfg(feature = "cuda")]
pub type Cuda = burn::backend::Autodiff<burn_cuda::Cuda<f32, i32>>;
/// The wgpu training backend (build with `--features wgpu`): the same
/// burn-cubecl kernels as CUDA, compiled to WGSL.
#[cfg(feature = "wgpu")]
pub type Wgpu = burn::backend::Autodiff<burn_wgpu::Wgpu<f32, i32>>;

pub use grin_terms::BackendChoice;

pub(crate) const CUDA_COMPILED: bool = cfg!(feature = "cuda");
pub(crate) const WGPU_COMPILED: bool = cfg!(feature = "wgpu");

/// A GPU is visible when the NVIDIA driver's device nodes exist.
pub(crate) fn gpu_present() -> bool {
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
        Some(BackendChoice::Wgpu) if !WGPU_COMPILED => {
            bail!("--backend wgpu: this grin was built without wgpu; rebuild with `cargo build --release --features wgpu`")
        }
        Some(BackendChoice::Wgpu) => {
            let adapters = adapters::list();
            match adapters.first() {
                None => bail!("--backend wgpu: {}", adapters::NONE_FOUND),
                Some(first) => Ok((BackendChoice::Wgpu, format!("backend wgpu (asked for; device 0: {first})"))),
            }
        }
        Some(choice) => Ok((choice, format!("backend {} (asked for)", choice.name()))),
        None if CUDA_COMPILED && gpu_present() => Ok((BackendChoice::Cuda, "backend cuda (GPU found)".into())),
        None => match adapters::list().into_iter().find(|a| !a.cpu) {
            Some(gpu) => Ok((BackendChoice::Wgpu, format!("backend wgpu (GPU adapter {gpu})"))),
            None if CUDA_COMPILED || WGPU_COMPILED => {
                Ok((BackendChoice::Cpu, "backend cpu (built with a GPU backend, but no GPU found)".into()))
            }
            None => Ok((BackendChoice::Cpu, "backend cpu (built without a GPU backend)".into())),
        },
    }
}

/// CUDA devices by index (`--devices`).
#[cfg(feature = "cuda")]
pub fn cuda_devices(indices: &[usize]) -> Vec<burn_cuda::CudaDevice> {
    indices.iter().map(|&i| burn_cuda::CudaDevice::new(i)).collect()
}

/// wgpu devices by adapter index (`--devices`, indexing [`adapters::list`]).
#[cfg(feature = "wgpu")]
pub fn wgpu_devices(indices: &[usize]) -> Result<Vec<burn_wgpu::WgpuDevice>> {
    adapters::open(indices)
}

/// The wgpu adapters grin can train on, listed before CubeCL is asked for
/// one (it panics when none is found), and the devices opened on them.
pub mod adapters {
    use std::fmt;

    /// What a run on no adapter is told.
    pub const NONE_FOUND: &str = "no wgpu adapter found (Vulkan, Metal or DX12); on Linux install a Vulkan \
         driver (Debian: mesa-vulkan-drivers; its CPU driver, lavapipe, works without a GPU)";

    /// One adapter as `--devices` numbers it.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Adapter {
        pub index: usize,
        pub name: String,
        /// A CPU driver (lavapipe, SwiftShader), never chosen automatically.
        pub cpu: bool,
        pub kind: String,
        pub api: String,
        /// The largest buffer, and the largest one a kernel may bind: an
        /// in-VRAM dataset's tensors must each fit both.
        pub max_buffer_bytes: u64,
        pub max_binding_bytes: u64,
    }

    impl fmt::Display for Adapter {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{} ({}, {})", self.name, self.kind, self.api)
        }
    }

    /// The adapters, in the order `--devices` indexes them; none in a build
    /// without wgpu.
    pub fn list() -> Vec<Adapter> {
        #[cfg(feature = "wgpu")]
        {
            let (_, adapters) = wgpu_impl::enumerate();
            adapters.iter().enumerate().map(|(index, a)| wgpu_impl::describe(index, a)).collect()
        }
        #[cfg(not(feature = "wgpu"))]
        Vec::new()
    }

    #[cfg(feature = "wgpu")]
    pub(super) use wgpu_impl::open;

    #[cfg(feature = "wgpu")]
    mod wgpu_impl {
        use super::{Adapter, NONE_FOUND};
        use anyhow::{bail, Result};
        use burn_wgpu::graphics::{AutoGraphicsApi, GraphicsApi};
        use burn_wgpu::{RuntimeOptions, WgpuDevice, WgpuSetup};

        /// The graphics API CubeCL compiles for on this platform (Vulkan on
        /// Linux), and its adapters.
        pub(super) fn enumerate() -> (wgpu::Instance, Vec<wgpu::Adapter>) {
            let backend = AutoGraphicsApi::backend();
            let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
                backends: backend.into(),
                ..wgpu::InstanceDescriptor::new_without_display_handle()
            });
            let adapters = futures_lite::future::block_on(instance.enumerate_adapters(backend.into()));
            (instance, adapters)
        }

        pub(super) fn describe(index: usize, adapter: &wgpu::Adapter) -> Adapter {
            let info = adapter.get_info();
            let limits = adapter.limits();
            Adapter {
                index,
                name: info.name,
                cpu: info.device_type == wgpu::DeviceType::Cpu,
                kind: format!("{:?}", info.device_type),
                api: format!("{:?}", info.backend),
                max_buffer_bytes: limits.max_buffer_size,
                max_binding_bytes: limits.max_storage_buffer_binding_size,
            }
        }

        /// Opens one wgpu device (with its own queue) per entry of
        /// `indices`, each registered with CubeCL under a fresh device id:
        /// the same adapter named twice gives two devices, which is how two
        /// devices run data-parallel on one GPU, or on lavapipe.
        pub(in crate::backend) fn open(indices: &[usize]) -> Result<Vec<WgpuDevice>> {
            let (instance, adapters) = enumerate();
            if adapters.is_empty() {
                bail!("--backend wgpu: {NONE_FOUND}");
            }
            let mut devices = Vec::with_capacity(indices.len());
            for &index in indices {
                let Some(adapter) = adapters.get(index) else {
                    let listed: Vec<String> =
                        adapters.iter().enumerate().map(|(i, a)| format!("{i}: {}", describe(i, a))).collect();
                    bail!("--devices {index}: there are {} wgpu adapter(s): {}", adapters.len(), listed.join("; "));
                };
                // As CubeCL's own WGSL setup asks (cubecl-wgpu's
                // `backend/wgsl.rs`), less the experimental features, which
                // its WGSL kernels never use.
                let wanted = adapter.features()
                    - wgpu::Features::MAPPABLE_PRIMARY_BUFFERS
                    - wgpu::Features::all_experimental_mask();
                let request = adapter.request_device(&wgpu::DeviceDescriptor {
                    label: Some("grin"),
                    required_features: wanted,
                    required_limits: adapter.limits(),
                    memory_hints: wgpu::MemoryHints::MemoryUsage,
                    trace: wgpu::Trace::Off,
                    experimental_features: wgpu::ExperimentalFeatures::disabled(),
                });
                let (device, queue) = futures_lite::future::block_on(request)
                    .map_err(|e| anyhow::anyhow!("--devices {index}: cannot open {}: {e}", describe(index, adapter)))?;
                let setup = WgpuSetup {
                    instance: instance.clone(),
                    adapter: adapter.clone(),
                    device,
                    queue,
                    backend: adapter.get_info().backend,
                };
                devices.push(burn_wgpu::init_device(setup, RuntimeOptions::default()));
            }
            Ok(devices)
        }
    }
}
