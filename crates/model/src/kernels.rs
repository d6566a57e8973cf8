//! CPU loops behind the CPU backend's [`crate::backend::DetectorBackend`]
//! ops: plain `f32` slices in, `Vec<f32>` out, parallel on rayon's pool.
//! The depthwise forward is public: the Pi's engine runs it too.

pub(crate) mod batch_norm;
pub mod depthwise;
