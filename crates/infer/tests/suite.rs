//! Every integration test of grin-infer, in one binary. Each test binary
//! links the crate and its dependencies and compiles its own copy of the
//! generic code it calls (Burn's ops, the detector, the training loop): as
//! 6 binaries that cost CI minutes of release build (issue 78). Each file
//! is a module here and keeps its own name in the test paths.

#[path = "cli.rs"]
mod cli;
#[path = "frame.rs"]
mod frame;
#[path = "look.rs"]
mod look;
#[path = "parity.rs"]
mod parity;
#[path = "pyramid.rs"]
mod pyramid;
#[path = "reference.rs"]
mod reference;
#[path = "stream.rs"]
mod stream;
