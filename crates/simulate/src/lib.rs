//! `grin simulate`: will these loaders starve this GPU? A discrete-event
//! model of N loader workers, a bounded batch queue and one consumer, checked
//! against the closed-form steady state min(1, N·S/L) and, with `--from-run`,
//! against a real run's measured GPU-busy %.
//!
//! It depends on grin-terms only.

#![forbid(unsafe_code)]

mod report;
mod run;
mod sim;
mod timeline;

pub use report::report;
pub use run::{read_run, resolve, Flags, FromRun};
pub use sim::{simulate, LoaderInterval, LoaderState, SimParams, SimResult, Timeline};
pub use timeline::render_svg;
