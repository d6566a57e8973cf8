//! grin-train: feeds the detector the fastest way that fits, and measures
//! whether the device is starving.
//!
//! Data flows `source -> HostSource -> Feed -> DeviceBatch -> train step`;
//! in VRAM the first three collapse into a `DeviceDataset`.

pub mod backend;
pub mod balance;
pub mod checkpoint;
pub mod config;
pub mod device_batch;
pub mod eval;
pub mod feed;
pub mod metrics;
pub mod modes;
pub mod photo_eval;
pub mod sources;
pub mod trainer;

pub use config::{LossConfig, Mode, TrainConfig};
pub use trainer::{train, RunSpec, Summary};
