//! TensorBoard event files for a run's scalars: each record a TFRecord (u64
//! LE length, masked CRC32C of the length, payload, masked CRC32C of the
//! payload) holding a `tensorflow.Event` proto. The first record names the
//! format (`brain.Event:2`); each later one holds one step's scalars as
//! `Summary.Value.simple_value`, which TensorBoard's reader turns into its
//! scalar plugin's data. [`read`] parses a file back (checksums verified),
//! so a writer's output is checked without TensorBoard; a test also reads
//! it with TensorBoard's own `EventAccumulator`.
//!
//! A leaf: it depends on no grin crate and on no Burn.

#![forbid(unsafe_code)]

mod proto;
mod record;

pub use record::{encode, read, EventsError, Point, FILE_NAME};
