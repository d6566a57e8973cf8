//! Every integration test of grin-features, in one binary. Each test binary
//! links the crate and its dependencies and compiles its own copy of the
//! generic code it calls (Burn's ops, the detector, the training loop): as
//! 9 binaries that cost CI minutes of release build (issue 78). Each file
//! is a module here and keeps its own name in the test paths.

#[path = "annotations.rs"]
mod annotations;
#[path = "augment.rs"]
mod augment;
#[path = "bad_input.rs"]
mod bad_input;
#[path = "bench.rs"]
mod bench;
#[path = "class_balance.rs"]
mod class_balance;
#[path = "crops.rs"]
mod crops;
#[path = "photos.rs"]
mod photos;
#[path = "pipeline.rs"]
mod pipeline;
#[path = "synthetic.rs"]
mod synthetic;
