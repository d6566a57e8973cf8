//! Several sources as one: each scene comes from one part, drawn with the
//! config's weights (real multi-face scenes, portraits for smiles, ...).

use crate::annotations::PhotoKey;
use crate::sample::Sample;
use crate::source::{SampleRng, Source};
use grin_image::{InputError, SkipCounts};
use rand::Rng;
use std::collections::HashMap;
use std::path::Path;

pub(crate) struct MixSource {
    parts: Vec<Box<dyn Source>>,
    /// Running sums of the normalised weights; the last is 1.
    cumulative: Vec<f32>,
    load_skips: SkipCounts,
}

impl std::fmt::Debug for MixSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.parts.iter().map(|p| p.name()).collect();
        f.debug_struct("MixSource").field("parts", &names).field("cumulative", &self.cumulative).finish()
    }
}

impl MixSource {
    pub(crate) fn new(parts: Vec<Box<dyn Source>>, weights: &[f32]) -> Result<MixSource, InputError> {
        check_weights(weights, parts.len())?;
        one_part_a_file(&parts)?;
        let total: f32 = weights.iter().sum();
        let mut sum = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                sum += w / total;
                sum
            })
            .collect();
        let load_skips = SkipCounts::default();
        for part in &parts {
            if let Some(skips) = part.load_skips() {
                load_skips.absorb(skips);
            }
        }
        Ok(MixSource { parts, cumulative, load_skips })
    }
}

/// Each file (by identity: a link is the file it names) is shown by one
/// part: a photo with faces listed as a face-free image, or a photo two
/// annotation files label, would teach two answers for one picture (round
/// 25 of issue 90).
fn one_part_a_file(parts: &[Box<dyn Source>]) -> Result<(), InputError> {
    let mut owner: HashMap<PhotoKey, (usize, &Path)> = HashMap::new();
    for (i, part) in parts.iter().enumerate() {
        for file in part.files() {
            let (j, first) = *owner.entry(PhotoKey::of(file)).or_insert((i, file));
            if j != i {
                return Err(InputError::Config(format!(
                    "{}: shown by parts[{j}] ({}) and by parts[{i}] ({}) of `features.source` (as {}); each file \
                     belongs to one part of a mix: a face-free image holds no face, and one photo's faces are \
                     given in one annotation file",
                    file.display(),
                    parts[j].name(),
                    part.name(),
                    first.display()
                )));
            }
        }
    }
    Ok(())
}

/// One weight a part, each finite and non-negative, with a positive sum.
pub(crate) fn check_weights(weights: &[f32], parts: usize) -> Result<(), InputError> {
    if parts == 0 {
        return Err(InputError::Config("key `features.source.parts`: a mix needs at least one part".into()));
    }
    if weights.len() != parts {
        return Err(InputError::Config(format!(
            "key `features.source.weights`: {} weights for {parts} parts",
            weights.len()
        )));
    }
    if weights.iter().any(|w| !w.is_finite() || *w < 0.0) || weights.iter().sum::<f32>() <= 0.0 {
        return Err(InputError::Config(format!(
            "key `features.source.weights`: {weights:?} must be non-negative with a positive sum"
        )));
    }
    Ok(())
}

impl Source for MixSource {
    fn name(&self) -> &'static str {
        "mix"
    }

    fn len(&self) -> Option<usize> {
        None
    }

    fn scene(&self, index: u64, rng: &mut SampleRng) -> Result<Sample, InputError> {
        let u: f32 = rng.random();
        let part = self.cumulative.iter().position(|&c| u < c).unwrap_or(self.parts.len() - 1);
        self.parts[part].scene(index, rng)
    }

    fn load_skips(&self) -> Option<&SkipCounts> {
        Some(&self.load_skips)
    }

    fn files(&self) -> Vec<&Path> {
        self.parts.iter().flat_map(|p| p.files()).collect()
    }
}
