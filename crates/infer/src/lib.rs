//! grin-infer: runs a trained grin detector on a CPU, as the `grin-detect`
//! binary does on a Raspberry Pi. It builds no Burn: the model file is read
//! by grin-net and run by the fast path here (docs/design.md, "The Pi
//! binary").
//!
//! Data flow: an image file is decoded and letterboxed to the run size (a
//! still photo: its own size, within [`PHOTO_MAX_PIXELS`]) by
//! grin-image's one photo path (`letterbox_photo`, what training and
//! evaluation use), made a [`Frame`], pushed through the network by a
//! [`Runner`] (a hand-written CPU pass, `fast.rs`, which its tests hold to
//! the Burn model training uses, within 1e-4), decoded by
//! `grin_net::decode` (the one decoder of the project), and the boxes are
//! mapped back to the original image's pixels. [`report`] rounds them for
//! printing. [`stream`] runs the same path on a live camera stream, with
//! tracking and smile events.
//!
//! It may depend on grin-net, grin-kernels, grin-image, grin-terms and
//! grin-output only: never on Burn or a training crate (`cargo tree -p
//! grin-infer -e normal` lists none; the Burn reference is in its tests).

pub mod bench;
pub mod cli;
pub mod draw;
mod fast;
mod frame;
pub mod report;
mod runner;
pub mod stream;

pub use frame::{Frame, Mapping};
pub use runner::{
    own_size, ModelSource, PhotoSize, Reference, Runner, DEFAULT_MODEL, MAX_SIDE, MIN_SIDE, PHOTO_MAX_PIXELS,
};
