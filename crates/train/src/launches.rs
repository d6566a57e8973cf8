//! Kernel launches counted by name, on any CubeCL device (CUDA, or wgpu on
//! a GPU or on lavapipe): what `grin bench step --launches` reports and the
//! launch budget test holds. A training step on a device is host-bound
//! when it is many small kernels, so their count is the figure to hold
//! down, and it needs no GPU to take.
//!
//! CubeCL logs each launch as `Executing <kernel>` when its profiling
//! logger runs at level `minimal`. [`install_launch_counter`] turns that logger on, routed
//! to the `log` crate, and counts the lines there, in this process: no log
//! file, whose appends outlive a run. CubeCL reads its configuration once,
//! when the first device starts, so it must run before that.

use anyhow::{anyhow, Result};
use burn_cubecl::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What CubeCL's logger writes before a launched kernel's name.
const PREFIX: &str = "Executing ";

static COUNTS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

struct Counter;

static COUNTER: Counter = Counter;

impl log::Log for Counter {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target().starts_with("cubecl")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = record.args().to_string();
        if let Some(name) = line.strip_prefix(PREFIX) {
            let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
            *counts.entry(short_name(name)).or_insert(0) += 1;
        }
    }

    fn flush(&self) {}
}

/// A kernel's name as CubeCL's balanced format gives it, less the
/// runtime's and the layout's parts: `KernelBinop | MulOp | WgpuRuntime`
/// -> `KernelBinop MulOp`, `ReduceKernel | TensorArgs | ...` ->
/// `ReduceKernel`; the first two parts at most.
fn short_name(name: &str) -> String {
    let parts = name.split(" | ").map(str::trim);
    let kept: Vec<&str> = parts.filter(|p| !p.ends_with("Runtime") && !p.ends_with("Args")).take(2).collect();
    kept.join(" ")
}

/// Turns CubeCL's launch log on and counts it. Call once, before any
/// device is used; the rest of CubeCL's configuration (a `cubecl.toml` in
/// this folder or above it, as gpu-bench writes for its kernel cache) is
/// kept. Counting costs the host a message per launch.
pub fn install_launch_counter() -> Result<()> {
    let config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    let mut value = toml::Value::try_from(&config).map_err(|e| anyhow!("CubeCL's configuration: {e}"))?;
    let logger = value
        .get_mut("profiling")
        .and_then(|p| p.get_mut("logger"))
        .and_then(|l| l.as_table_mut())
        .ok_or_else(|| anyhow!("CubeCL's configuration has no profiling.logger"))?;
    logger.insert("level".into(), "minimal".into());
    logger.insert("log".into(), "debug".into());
    let config: CubeClRuntimeConfig =
        value.try_into().map_err(|e| anyhow!("CubeCL's configuration with the launch log: {e}"))?;
    // Panics when CubeCL has read its configuration already: a caller bug.
    CubeClRuntimeConfig::set(config);
    log::set_logger(&COUNTER).map_err(|_| anyhow!("another logger is installed: launches cannot be counted"))?;
    log::set_max_level(log::LevelFilter::Debug);
    Ok(())
}

/// Launches by kernel name since the counts were last taken. The log is
/// written by a thread of CubeCL's: call after the device has synced, and
/// the lines still in flight are waited for (until none arrives for
/// `QUIET`).
pub(crate) fn take() -> BTreeMap<String, u64> {
    const QUIET: Duration = Duration::from_millis(100);
    const LIMIT: Duration = Duration::from_secs(10);
    let started = Instant::now();
    let total = || COUNTS.lock().unwrap_or_else(|e| e.into_inner()).values().sum::<u64>();
    let mut last = total();
    let mut since = Instant::now();
    while since.elapsed() < QUIET && started.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(10));
        let now = total();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    std::mem::take(&mut *COUNTS.lock().unwrap_or_else(|e| e.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn a_kernel_is_named_without_its_runtime_and_layout() {
        assert_eq!(short_name("SliceAssignKernel | WgpuRuntime"), "SliceAssignKernel");
        assert_eq!(short_name("KernelBinop | MulOp | WgpuRuntime"), "KernelBinop MulOp");
        assert_eq!(short_name("ReduceKernel | TensorArgs | WgpuRuntime"), "ReduceKernel");
        assert_eq!(short_name("norm_forward | CudaRuntime"), "norm_forward");
    }
}
