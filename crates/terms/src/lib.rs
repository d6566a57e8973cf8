//! The terms every grin crate shares, each defined once and imported
//! everywhere else. Nearly a leaf: it depends on no other grin crate but
//! grin-output (a run's summary is read as a plain file only).
//!
//! - [`median`] and [`percentile`]: what every timing and benchmark figure
//!   reports (step times, T_g, latency, a sweep's windows).
//! - [`output`]: what the network writes at every point, in channel order,
//!   which training's loss, decoding, the Pi's engine and the ONNX export
//!   all read.
//! - [`label`]: the label codes of a box (smile, unknown, ignore region,
//!   empty slot), which samples, datasets, target assignment and the loss
//!   read.
//! - [`Mode`] and [`BackendChoice`]: how batches reach the device and which
//!   one trains (configs, `--mode`, `--backend`, summaries).
//! - [`summary`]: a finished run's figures (`summary.json`) and their one
//!   reader.
//! - [`MIN_SIDE`] and [`MAX_SIDE`]: the sides a frame the network runs on
//!   may have (`train.run_size`, the features' size, `--size`,
//!   `--run-size`, a model file's header), and [`parse_wxh`], how a size
//!   flag is read.
//! - [`photo`]: the size a still photo is searched at (`grin-detect`'s
//!   photo default, `grin mine --own-size`).
//! - [`boxes`]: box overlap (IoU), which matching, NMS, tracking and scene
//!   layout all use.
//! - [`pixel`]: how a stored u8 pixel becomes the network's 0..1 input.

#![forbid(unsafe_code)]

pub mod boxes;
mod mode;
pub mod photo;
pub mod summary;

pub use mode::{BackendChoice, Mode};

/// Smallest side of a frame the network runs on: below the coarsest stride
/// (32) every level is one cell.
pub const MIN_SIDE: usize = 32;
/// Largest side of a frame the network runs on: beyond it one frame's
/// activations stop being a Pi-sized amount of memory.
pub const MAX_SIDE: usize = 4096;

/// `WxH` (`320x240`; `x` or `X`) as (width, height): how every size flag is
/// read.
pub fn parse_wxh(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{text}` is not WxH (e.g. 320x240)");
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    // A side of twenty digits is a size, only too large to hold: say so
    // rather than "not WxH".
    let side = |part: &str| {
        part.trim().parse::<usize>().map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow => format!("`{text}`: a side is at most {} px", usize::MAX),
            _ => bad(),
        })
    };
    Ok((side(w)?, side(h)?))
}

/// [`parse_wxh`] for a frame the network runs on (`--size`, `--run-size`):
/// each side in [`MIN_SIDE`]..=[`MAX_SIDE`].
pub fn parse_frame_size(text: &str) -> Result<(usize, usize), String> {
    let (w, h) = parse_wxh(text)?;
    if !(MIN_SIDE..=MAX_SIDE).contains(&w) || !(MIN_SIDE..=MAX_SIDE).contains(&h) {
        return Err(format!("`{text}`: each side must be between {MIN_SIDE} and {MAX_SIDE} pixels"));
    }
    Ok((w, h))
}

pub mod label {
    //! A box's label as the batches carry it: one `i8` per box slot.

    /// Label value of an unused box slot in a batch's labels (`grin_features::HostBatch::labels`).
    pub const LABEL_PADDING: i8 = -2;

    /// Label value of an ignore region in a batch's labels (`grin_features::HostBatch::labels`) (see [`Smile::Ignore`]).
    pub const LABEL_IGNORE: i8 = -3;

    /// Label of one box. `Unknown` is a face whose smile is masked out of the
    /// smile loss; `Ignore` is no face to learn from at all.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Smile {
        No,
        Yes,
        Unknown,
        /// A region the loss must not call background: a face that is cut off by
        /// a crop, too small to learn, or otherwise unreliable. Its points are
        /// neither positives nor negatives, and evaluation neither counts it as a
        /// face nor a detection on it as a false positive.
        Ignore,
    }

    impl Smile {
        /// The label's value in a batch's labels (`grin_features::HostBatch::labels`): 0, 1, -1 for unknown, [`LABEL_IGNORE`].
        pub fn as_label(self) -> i8 {
            match self {
                Smile::No => 0,
                Smile::Yes => 1,
                Smile::Unknown => -1,
                Smile::Ignore => LABEL_IGNORE,
            }
        }

        /// The smile as a yes/no answer, when the label gives one.
        pub fn smiling(self) -> Option<bool> {
            match self {
                Smile::Yes => Some(true),
                Smile::No => Some(false),
                Smile::Unknown | Smile::Ignore => None,
            }
        }

        /// A face to learn from and to score (every label but [`Smile::Ignore`]).
        pub fn is_face(self) -> bool {
            self != Smile::Ignore
        }

        pub fn from_label(label: i8) -> Option<Smile> {
            match label {
                0 => Some(Smile::No),
                1 => Some(Smile::Yes),
                -1 => Some(Smile::Unknown),
                LABEL_IGNORE => Some(Smile::Ignore),
                _ => None,
            }
        }
    }
}

pub mod pixel {
    //! A pixel as the network sees it: every u8 (a store's record, a
    //! decoded photo, a camera frame) divided by 255, on the host and on
    //! the device alike, so training and inference see the same values.

    /// The divisor: a u8 pixel's largest value.
    pub const MAX: f32 = 255.0;

    /// `v` as a value in 0..=1.
    #[inline]
    pub fn to_unit(v: u8) -> f32 {
        v as f32 / MAX
    }
}

pub mod output {
    //! The detector's output at every point: `OUTPUTS` channels, in this
    //! order.

    /// Channels per point.
    pub const OUTPUTS: usize = 6;
    /// The face logit.
    pub const FACE: usize = 0;
    /// The first of four distances from the point to the box's left, top,
    /// right and bottom edges (channels `DISTANCE..DISTANCE + 4`), each
    /// `log(distance / stride)`.
    pub const DISTANCE: usize = 1;
    /// The smile logit.
    pub const SMILE: usize = 5;
    /// The range the log-distances are clamped to before `exp`: an early
    /// bad training step cannot overflow, and no box is wider than `e^5`
    /// strides.
    pub const LOG_DISTANCE_RANGE: (f32, f32) = (-4.0, 5.0);
}

/// The median: the middle value, or the mean of the two middle values of
/// an even count; 0 for none. NaN sorts last (`total_cmp`).
pub fn median(values: &[f64]) -> f64 {
    let sorted = sorted(values);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The nearest-rank `q`-quantile (`q` in 0..=1): the smallest value with at
/// least a share `q` of the values at or below it; 0 for none. So the p95
/// of 20 timings is the 19th fastest, never a value between two.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    let sorted = sorted(values);
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts_and_of_none() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.95), 19.0);
        assert_eq!(percentile(&v, 1.0), 20.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 0.5), 10.0);
        assert_eq!(percentile(&[7.0], 0.95), 7.0);
        assert_eq!(percentile(&[], 0.95), 0.0);
    }
}
