//! The photo default: the size a still photo is searched at when no run
//! size is asked for. `grin-detect` reads photos at it, and `grin mine
//! --own-size` mines at it, so that hard negatives are found where users
//! meet them.

use crate::{MAX_SIDE, MIN_SIDE};

/// Most pixels a still photo is searched at by default: Full HD,
/// 1920x1080. Past it a photo is shrunk by one factor. Why this bound:
/// - the network finds faces from about 10 px, so a 12-megapixel phone
///   photo shrunk to it (2.4 times per side) still gives every face of 24 px
///   and more in the original enough pixels;
/// - the cost is linear in pixels (the pyramid adds a third), and YuNet, which
///   reads a photo at its own size, pays for all of it: at this bound grin
///   costs less than YuNet on every photo (`scripts/bench-latency.sh`'s photo
///   row);
/// - one frame's activations stay a few tens of MB, a Pi-sized amount.
pub const PHOTO_MAX_PIXELS: u64 = 1920 * 1080;

/// A photo within the bound is searched at its own size times this, per
/// side: twice its pixels. Small faces gain the most: on 300 validation
/// Caltech photos (most under 100,000 pixels), AP@0.3 was 0.944 at the
/// photo's own size, 0.964 at 1.41 times and 0.959 at 2 times it (recall
/// of faces under 24 px 0.68, 0.88, 0.90), and twice the pixels at grin's
/// 0.36-0.42x of YuNet's time per pixel still costs less than YuNet at the
/// photo's own size.
pub(crate) const PHOTO_UPSCALE: f64 = std::f64::consts::SQRT_2;

/// The photo's own `(width, height)` times [`PHOTO_UPSCALE`], or scaled by
/// one smaller factor to hold at most `max_pixels` pixels, and kept within
/// [`MIN_SIDE`]..=[`MAX_SIDE`] a side (the letterbox fills what a clamp leaves
/// over).
pub fn own_size(width: u32, height: u32, max_pixels: u64) -> (usize, usize) {
    let (w, h) = (width.max(1) as f64, height.max(1) as f64);
    let scale = (max_pixels as f64 / (w * h)).sqrt().min(PHOTO_UPSCALE);
    let side = |v: f64| ((v * scale).floor() as usize).clamp(MIN_SIDE, MAX_SIDE);
    (side(w), side(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_photo_within_the_bound_gets_twice_its_pixels() {
        assert_eq!(own_size(600, 440, PHOTO_MAX_PIXELS), (848, 622));
    }

    #[test]
    fn a_large_photo_is_shrunk_to_the_bound_by_one_factor() {
        let (w, h) = own_size(4000, 3000, PHOTO_MAX_PIXELS);
        assert!((w * h) as u64 <= PHOTO_MAX_PIXELS, "{w}x{h}");
        assert!((w as f64 / h as f64 - 4.0 / 3.0).abs() < 0.01, "the aspect is kept: {w}x{h}");
        assert!((w * h) as u64 > PHOTO_MAX_PIXELS * 99 / 100, "and the bound is used: {w}x{h}");
    }

    #[test]
    fn sides_stay_within_the_network_bounds() {
        assert_eq!(own_size(10, 5000, PHOTO_MAX_PIXELS).0, MIN_SIDE);
        assert_eq!(own_size(0, 0, PHOTO_MAX_PIXELS), (MIN_SIDE, MIN_SIDE), "an empty photo is no division by zero");
        assert_eq!(own_size(100_000, 40, u64::MAX).0, MAX_SIDE);
    }
}
