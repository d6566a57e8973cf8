//! The phases of a training step, as both engines (grin-cpu-step,
//! grin-device-step) report their ends: what `grin bench step` times.

/// Which phase of the step just ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Forward,
    Loss,
    Backward,
}
