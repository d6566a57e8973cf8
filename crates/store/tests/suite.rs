//! Every integration test of grin-store, in one binary. Each test binary
//! links the crate and its dependencies and compiles its own copy of the
//! generic code it calls (Burn's ops, the detector, the training loop): as
//! 7 binaries that cost CI minutes of release build (issue 78). Each file
//! is a module here and keeps its own name in the test paths.

#[path = "class_draws.rs"]
mod class_draws;
/// What the test files share, loaded once.
#[path = "common/mod.rs"]
mod common;
#[path = "fingerprint.rs"]
mod fingerprint;
#[path = "locking.rs"]
mod locking;
#[path = "merge.rs"]
mod merge;
#[path = "resume.rs"]
mod resume;
#[path = "roundtrip.rs"]
mod roundtrip;
#[path = "safety.rs"]
mod safety;
