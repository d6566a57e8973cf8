//! grin-infer: runs a trained grin detector on a CPU, as the `grin-detect`
//! binary does on a Raspberry Pi.
//!
//! Data flow: an image file is decoded ([`frame::load_image`]), letterboxed
//! to the run size ([`frame::Frame`]), pushed through the network (a
//! hand-written CPU pass, [`fast`], or the Burn model definition training
//! uses; they agree to 1e-4), decoded by `grin_model::decode` (the one
//! decoder of the project), and the boxes are mapped back to the original
//! image's pixels. [`report`] rounds them for printing. [`stream`] runs the
//! same path on a live camera stream, with tracking and smile events.

pub mod bench;
pub mod draw;
pub mod fast;
pub mod frame;
pub mod model;
pub mod report;
pub mod stream;

pub use frame::{load_image, Frame};
pub use model::{Detector, Engine, ModelSource, DEFAULT_MODEL};
