//! One module per group of subcommands; each turns parsed arguments into
//! calls on the library crates.
pub mod config;
pub mod features;
pub mod simulate;
pub mod store;
pub mod train;
