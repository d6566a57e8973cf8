//! grin-train: feeds the detector the fastest way that fits, and measures
//! whether the device is starving.
//!
//! One batch's way: [`plan`] resolves a [`GrinConfig`] into a [`RunPlan`]
//! (mode, store, run spec); [`feed::build_feed`] turns its [`FeedPlan`] into
//! a [`Feed`] (on-the-fly, precomputed or in-VRAM, one file each under
//! `feed/`); [`train`] pulls a [`DeviceBatch`] from it every
//! step, runs forward + loss + backward, and accounts for the wait.

#![forbid(unsafe_code)]

mod adamw;
pub mod backend;
pub mod balance;
mod best;
pub mod checkpoint;
mod config;
mod device_batch;
mod ema;
pub mod eval;
pub mod feed;
mod finish;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub mod launches;
mod look;
mod metrics;
pub mod mine;
pub mod parallel;
pub mod photo_eval;
pub mod photo_plots;
mod plan;
pub mod precompute;
pub mod progress;
mod resume;
mod run;
mod run_folder;
pub mod step;
pub mod step_bench;
pub mod store_bench;
mod summary;
#[cfg(test)]
mod test_photos;
pub mod trainer;
mod validation;

pub use best::Best;
pub use config::{
    detector_spec, load_config, parse_config, set_model_keys, DeviceAugment, GrinConfig, LoadedConfig, Mode,
    TrainConfig,
};
pub use device_batch::{upload, DeviceBatch};
pub use feed::{build_feed, Feed, FeedPlan};
pub use plan::{plan, PlanRequest, RunPlan};
pub use run::{Interrupt, RunSpec};
pub use run_folder::{run_model, RunLock};
pub use summary::Summary;
pub use trainer::train;
