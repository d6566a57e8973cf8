//! CPU loops over plain `f32` slices: the depthwise 3x3 convolution of the
//! CPU backend's forward pass, the Pi's engine and the CPU training step.

pub mod depthwise;
pub mod lines;
pub(crate) mod plane3x3;
pub mod simd;
