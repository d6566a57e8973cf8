//! A source turns an index into an un-augmented scene.

use crate::error::{FeatureError, SkipCounts};
use crate::sample::Sample;

/// All randomness of one sample comes from one of these, seeded by the
/// pipeline from (seed, split, index): that is what makes output identical
/// whatever the worker count.
pub type SampleRng = rand_pcg::Pcg64Mcg;

pub trait Source: Send + Sync {
    /// Short name for reports (`synthetic`, `crops`, `wider`, ...).
    fn name(&self) -> &'static str;
    /// Distinct base items in this source's split, or `None` for a generative source.
    fn len(&self) -> Option<usize>;
    /// The scene for `index` at the configured output size.
    fn scene(&self, index: u64, rng: &mut SampleRng) -> Result<Sample, FeatureError>;
    fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
    /// Inputs skipped while the source loaded (under `on_bad_sample = "skip"`).
    fn load_skips(&self) -> Option<&SkipCounts> {
        None
    }
}
