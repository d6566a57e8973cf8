//! The best model on validation and early stopping: each validation score
//! (`train.eval_every`) is compared with the best so far; a better one
//! writes `best.grin`, and `train.patience` scores in a row without one
//! stop the run. The watch lives in the checkpoint's loop state, so a
//! resumed run keeps its best step and its count.

use serde::{Deserialize, Serialize};

/// File name of the best model in a run folder (`model.grin` is the last).
pub(crate) const BEST_MODEL: &str = "best.grin";

/// The step whose weights `best.grin` holds, and its validation face AP.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub step: usize,
    pub val_face_ap: f32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Watch {
    pub best: Option<Best>,
    /// Scores since the best one.
    pub stale: usize,
}

/// What one validation score means for the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Verdict {
    /// A new best: write `best.grin`.
    pub improved: bool,
    /// `patience` scores in a row without a new best: stop.
    pub exhausted: bool,
}

impl Watch {
    /// Records the score at `step`. Only a strictly higher AP is better,
    /// so a plateau keeps the earlier (less trained) weights. `patience`
    /// 0 never stops.
    pub(crate) fn observe(&mut self, step: usize, val_face_ap: f32, patience: usize) -> Verdict {
        let improved = self.best.is_none_or(|b| val_face_ap > b.val_face_ap);
        if improved {
            self.best = Some(Best { step, val_face_ap });
            self.stale = 0;
        } else {
            self.stale += 1;
        }
        Verdict { improved, exhausted: patience > 0 && self.stale >= patience }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_is_kept_and_patience_counts_scores_since_it() {
        let mut w = Watch::default();
        let seen: Vec<Verdict> = [(100, 0.5), (200, 0.6), (300, 0.6), (400, 0.55), (500, 0.7), (600, 0.1), (700, 0.2)]
            .into_iter()
            .map(|(step, ap)| w.observe(step, ap, 2))
            .collect();
        let improved: Vec<bool> = seen.iter().map(|v| v.improved).collect();
        assert_eq!(improved, [true, true, false, false, true, false, false]);
        let exhausted: Vec<bool> = seen.iter().map(|v| v.exhausted).collect();
        assert_eq!(exhausted, [false, false, false, true, false, false, true]);
        assert_eq!(w.best, Some(Best { step: 500, val_face_ap: 0.7 }));
        // Patience 0 never stops.
        let mut w = Watch::default();
        assert!((0..10).all(|i| !w.observe(i, 0.5, 0).exhausted));
    }
}
