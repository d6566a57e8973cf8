//! grin-train: feeds the detector the fastest way that fits, and measures
//! whether the device is starving.
//!
//! One batch's way: [`plan`] resolves a [`GrinConfig`] into a [`RunPlan`]
//! (mode, store, run spec); [`build_feed`] turns its [`FeedPlan`] into
//! a [`Feed`] (on-the-fly, precomputed or in-VRAM, one file each under
//! `feed/`); [`train`] pulls a [`DeviceBatch`] from it every
//! step, runs forward + loss + backward, and accounts for the wait.
//!
//! The top of the library stack: it may depend on every grin crate but
//! grin-infer, grin-export and grin-simulate, and only the `grin` binary (and
//! the fuzz checks) depend on it.

#![forbid(unsafe_code)]

mod adamw;
mod balance;
mod best;
mod config;
mod device_batch;
mod ema;
mod eval;
mod feed;
mod finish;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod launches;
mod look;
mod metrics;
mod mine;
mod parallel;
mod photo_eval;
mod photo_plots;
mod plan;
mod precompute;
mod progress;
mod resume;
mod run;
mod run_folder;
mod step;
mod step_bench;
mod store_bench;
mod summary;
#[cfg(test)]
mod test_photos;
mod trainer;
mod validation;

// Modules that are the API as a whole: the backends with their devices,
// and the checkpoint file (`grin train --resume` reads it back).
pub mod backend;
pub mod checkpoint;

// A run: its config, its plan, its feed, the step and the loop, and what
// it leaves behind (the best model, the summary with the balance check's
// prediction).
pub use backend::TrainBackend;
pub use balance::Prediction;
pub use best::Best;
pub use config::{
    check_run_name, detector_spec, load_config, parse_config, set_model_keys, DeviceAugment, GrinConfig, LoadedConfig,
    Mode, TrainConfig, MAX_EVAL, MAX_STEPS,
};
pub use device_batch::{upload, DeviceBatch};
pub use feed::{build_feed, Feed, FeedPlan};
pub use finish::InterruptedScoring;
pub use plan::{plan, PlanRequest, RunPlan};
pub use run::{Interrupt, Phase, RunSpec};
pub use run_folder::{hold_run_of_model, run_files, run_model, run_of_model, RunLock};
pub use step::{optimizer, OptimizerImpl, PhaseTimes, Stepper};
pub use summary::Summary;
pub use trainer::{train, train_parallel, Interrupted};

// Around a run: writing a store, mining a model's false detections, the
// progress bars' switch.
pub use mine::{mine, MineOptions, Mined, MOST_FACES};
pub use precompute::{parse_shard_bytes, parse_shard_range, write_store, write_whole_store};
pub use progress::set_quiet;

// Data-parallel training's host path, which the wgpu tests count and check.
pub use parallel::{host_copies_on_this_thread, move_to};

/// Held-out scoring on synthetic scenes.
pub mod scenes {
    pub use crate::eval::{evaluate, evaluate_split, EvalReport};
}

/// Scoring on real photos: detection, smiles, the threshold's calibration
/// and the report's plots.
pub mod photos {
    pub use crate::photo_eval::{
        best_threshold, calibration_table, describe, evaluate_split, PhotoReport, PhotoScoring, SizeRecall,
        CALIBRATION_BETA,
    };
    pub use crate::photo_plots::{write_photo_report, PHOTO_REPORT_FILES};
}

/// What `grin bench` measures: the balance check, the step alone, the
/// store's reads.
pub mod bench {
    pub use crate::balance::{check, measure, Check, Figures};
    pub use crate::feed::precomputed::open_store;
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    pub use crate::launches::install_launch_counter;
    pub use crate::run_folder::{mark_as_its_own, refuse_a_run_not_its_own};
    pub use crate::step_bench::{bench_step, Launches, StepBench, StepTimes, Windows};
    pub use crate::store_bench::{batch_order, time_reads, warm_page_cache, write_order, Throughput, MAX_ORDER};
}
