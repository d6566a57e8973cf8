//! Every integration test of grin, in one binary. Each test binary
//! links the crate and its dependencies and compiles its own copy of the
//! generic code it calls (Burn's ops, the detector, the training loop): as
//! 13 binaries that cost CI minutes of release build (issue 78). Each file
//! is a module here and keeps its own name in the test paths.

#[path = "bad_runs.rs"]
mod bad_runs;
#[path = "balance.rs"]
mod balance;
#[path = "best_model.rs"]
mod best_model;
/// What the test files share, loaded once.
#[path = "common/mod.rs"]
mod common;
#[path = "config_cmd.rs"]
mod config_cmd;
#[path = "doc_examples.rs"]
mod doc_examples;
#[path = "export.rs"]
mod export;
#[path = "front_door.rs"]
mod front_door;
#[path = "house_rules.rs"]
mod house_rules;
#[path = "model_set.rs"]
mod model_set;
#[path = "outputs.rs"]
mod outputs;
#[path = "simulate.rs"]
mod simulate;
#[path = "store_resume.rs"]
mod store_resume;
#[path = "sweep.rs"]
mod sweep;
#[path = "train_resume.rs"]
mod train_resume;
#[path = "wgpu.rs"]
mod wgpu;
