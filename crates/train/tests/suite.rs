//! Every integration test of grin-train, in one binary. Each test binary
//! links the crate and its dependencies and compiles its own copy of the
//! generic code it calls (Burn's ops, the detector, the training loop): as
//! 3 binaries that cost CI minutes of release build (issue 78). Each file
//! is a module here and keeps its own name in the test paths.

/// What the test files share, loaded once.
#[path = "common/mod.rs"]
mod common;
#[path = "learns.rs"]
mod learns;
#[path = "store_balance.rs"]
mod store_balance;
#[path = "wgpu.rs"]
mod wgpu;
