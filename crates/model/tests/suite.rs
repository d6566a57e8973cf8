//! Every integration test of grin-model, in one binary. Each test binary
//! links the crate and its dependencies and compiles its own copy of the
//! generic code it calls (Burn's ops, the detector, the training loop): as
//! binaries that cost CI minutes of release build (issue 78). Each file
//! is a module here and keeps its own name in the test paths.

#[path = "backend_ops.rs"]
mod backend_ops;
#[path = "seeded.rs"]
mod seeded;
