//! A source turns an index into an un-augmented scene.

use crate::sample::Sample;
use grin_image::{InputError, SkipCounts};
use rand::Rng;
use std::path::Path;

/// All randomness of one sample comes from one of these, seeded by the
/// pipeline from (seed, split, index): that is what makes output identical
/// whatever the worker count.
pub(crate) type SampleRng = rand_pcg::Pcg64Mcg;

/// A uniform draw in `lo..hi` (one rng call).
pub(crate) fn uniform(rng: &mut SampleRng, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * rng.random::<f32>()
}

/// A log-uniform draw in `lo..hi`: sizes, where halving matters as much as doubling.
pub(crate) fn log_uniform(rng: &mut SampleRng, lo: f32, hi: f32) -> f32 {
    uniform(rng, lo.ln(), hi.ln()).exp()
}

pub trait Source: Send + Sync {
    /// Short name for reports (`synthetic`, `crops`, `wider`, ...).
    fn name(&self) -> &'static str;
    /// Distinct base items in this source's split, or `None` for a generative source.
    fn len(&self) -> Option<usize>;
    /// The scene for `index` at the configured output size.
    fn scene(&self, index: u64, rng: &mut SampleRng) -> Result<Sample, InputError>;
    fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
    /// Inputs skipped while the source loaded (under `on_bad_sample = "skip"`).
    fn load_skips(&self) -> Option<&SkipCounts> {
        None
    }
    /// The files this source shows (photos, face crops, face-free images),
    /// for a mix's rule that each file belongs to one part.
    fn files(&self) -> Vec<&Path> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests;
