//! Class balancing by rejection resampling (`[features.balance]`), in the manner of tf.data's
//! `rejection_resample`: each output index first draws the scene class it
//! wants from the target distribution, then candidate scenes are drawn until
//! one of that class turns up.
//!
//! Every output index is handled on its own (its wanted class and its
//! candidates derive only from the seed and the index), so results do not
//! depend on the order or the thread in which indices are generated.

use crate::config::ClassBalanceConfig;
use crate::sample::SceneClass;
use grin_image::InputError;
use std::sync::atomic::{AtomicU64, Ordering};

/// Candidates tried per output index before settling for the last one.
pub(crate) const MAX_ATTEMPTS: u64 = 64;

/// Keeps the class draw independent of the scene generator's seeds.
const CLASS_SALT: u64 = 0x6261_6c61_6e63_6521;

#[derive(Debug)]
pub struct ClassBalancer {
    seed: u64,
    /// Normalised target fractions, indexed by [`SceneClass::index`].
    targets: [f64; 3],
    achieved: [AtomicU64; 3],
    /// Outputs that hit [`MAX_ATTEMPTS`] without finding their class.
    misses: AtomicU64,
}

/// Each fraction finite and non-negative, at least one above 0 (they are normalised).
pub(crate) fn check_balance(cfg: &ClassBalanceConfig) -> Result<(), InputError> {
    let raw = [("smiling", cfg.smiling), ("non_smiling", cfg.non_smiling), ("face_free", cfg.face_free)];
    for (key, v) in raw {
        if !(v.is_finite() && v >= 0.0) {
            return Err(InputError::Config(format!(
                "key `features.balance.{key}`: {v} must be a finite, non-negative fraction"
            )));
        }
    }
    if raw.iter().all(|(_, v)| *v == 0.0) {
        return Err(InputError::Config(
            "key `features.balance`: at least one of smiling, non_smiling, face_free must be > 0".into(),
        ));
    }
    Ok(())
}

impl ClassBalancer {
    pub(crate) fn new(cfg: &ClassBalanceConfig, seed: u64) -> Result<ClassBalancer, InputError> {
        check_balance(cfg)?;
        let raw = cfg.fractions();
        let sum: f64 = raw.iter().map(|v| *v as f64).sum();
        let targets = [raw[0] as f64 / sum, raw[1] as f64 / sum, raw[2] as f64 / sum];
        Ok(ClassBalancer { seed, targets, achieved: Default::default(), misses: AtomicU64::new(0) })
    }

    /// Normalised target fractions, in [`SceneClass::ALL`] order.
    pub fn targets(&self) -> [f64; 3] {
        self.targets
    }

    /// The class output `index` asks for, drawn from the targets.
    pub(crate) fn wanted(&self, index: u64) -> SceneClass {
        let h = splitmix64(splitmix64(self.seed ^ CLASS_SALT) ^ index);
        // 53 random bits as a uniform in [0, 1).
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        let mut acc = 0.0;
        for class in SceneClass::ALL {
            acc += self.targets[class.index()];
            if u < acc && self.targets[class.index()] > 0.0 {
                return class;
            }
        }
        // Rounding left u above the last sum: take the last class with a share.
        *SceneClass::ALL.iter().rev().find(|c| self.targets[c.index()] > 0.0).unwrap_or(&SceneClass::FaceFree)
    }

    /// The source index of candidate `attempt` for output `index`; disjoint
    /// ranges per output index, so no scene is shared between outputs.
    pub(crate) fn candidate(index: u64, attempt: u64) -> u64 {
        index.wrapping_mul(MAX_ATTEMPTS).wrapping_add(attempt)
    }

    /// Counts one produced sample; `found` is false when the cap was hit.
    pub(crate) fn record(&self, class: SceneClass, found: bool) {
        self.achieved[class.index()].fetch_add(1, Ordering::Relaxed);
        if !found {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
    }

    // The counters are read by the tests, which check them against the
    // output; `grin features bench` counts the classes it was handed.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> [u64; 3] {
        [0, 1, 2].map(|i| self.achieved[i].load(Ordering::Relaxed))
    }

    /// Achieved fractions so far, in [`SceneClass::ALL`] order (zeros before any sample).
    /// Every produced sample counts, so generating an index twice counts it twice.
    #[cfg(test)]
    pub(crate) fn achieved(&self) -> [f64; 3] {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return [0.0; 3];
        }
        counts.map(|c| c as f64 / total as f64)
    }

    #[cfg(test)]
    pub(crate) fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// `balance over N samples: smiling 33.4% (target 33.3%), ...`.
    #[cfg(test)]
    pub(crate) fn report(&self) -> String {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        let achieved = self.achieved();
        let names = ["smiling", "non-smiling", "face-free"];
        let parts: Vec<String> = (0..3)
            .map(|i| format!("{} {:.1}% (target {:.1}%)", names[i], 100.0 * achieved[i], 100.0 * self.targets[i]))
            .collect();
        let mut line = format!("balance over {total} samples: {}", parts.join(", "));
        let misses = self.misses();
        if misses > 0 {
            line.push_str(&format!("; {misses} samples took a wrong-class scene after {MAX_ATTEMPTS} tries"));
        }
        line
    }
}

/// SplitMix64's finaliser: a cheap, well-mixed 64-bit hash step.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
