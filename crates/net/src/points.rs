//! The detector's output locations: one point per cell of each level.
//!
//! Each level owns a range of face sizes, so a 16 px face is found at
//! stride 8 and a 160 px face at stride 32.

/// Output side of a 3x3 (pad 1) or 1x1 conv with the given stride.
pub fn conv_out(side: usize, stride: usize) -> usize {
    side.div_ceil(stride)
}

/// Output strides, finest first.
pub const STRIDES: [usize; 3] = [8, 16, 32];

/// Face sizes (longest side, pixels) each level is trained on. The ranges
/// overlap so a face near a boundary is learned by both levels.
pub const SIZE_RANGES: [(f32, f32); 3] = [(0.0, 48.0), (32.0, 96.0), (80.0, f32::INFINITY)];

/// Positives are points within this many strides of a face's centre.
pub const CENTER_RADIUS: f32 = 1.5;

#[derive(Debug, Clone, PartialEq)]
pub struct Points {
    pub width: usize,
    pub height: usize,
    /// `(rows, cols)` of each level.
    pub levels: Vec<(usize, usize)>,
    pub cx: Vec<f32>,
    pub cy: Vec<f32>,
    pub stride: Vec<f32>,
    pub size_lo: Vec<f32>,
    pub size_hi: Vec<f32>,
}

impl Points {
    /// The points of a `width` x `height` frame, each level learning the
    /// face sizes of [`SIZE_RANGES`].
    pub fn new(width: usize, height: usize) -> Points {
        Points::with_level_scale(width, height, 1.0)
    }

    /// As [`Points::new`], each level's face sizes times `level_scale`
    /// (`model.level_scale`).
    pub fn with_level_scale(width: usize, height: usize, level_scale: f32) -> Points {
        let mut p = Points {
            width,
            height,
            levels: vec![],
            cx: vec![],
            cy: vec![],
            stride: vec![],
            size_lo: vec![],
            size_hi: vec![],
        };
        // Mirror the backbone's chain of stride-2 convs exactly.
        let (mut h, mut w) = (height, width);
        let mut stride = 1;
        for (level, &target) in STRIDES.iter().enumerate() {
            while stride < target {
                h = conv_out(h, 2);
                w = conv_out(w, 2);
                stride *= 2;
            }
            p.levels.push((h, w));
            for row in 0..h {
                for col in 0..w {
                    p.cx.push((col as f32 + 0.5) * stride as f32);
                    p.cy.push((row as f32 + 0.5) * stride as f32);
                    p.stride.push(stride as f32);
                    p.size_lo.push(SIZE_RANGES[level].0 * level_scale);
                    p.size_hi.push(SIZE_RANGES[level].1 * level_scale);
                }
            }
        }
        p
    }

    pub fn len(&self) -> usize {
        self.cx.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cx.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_scale_moves_every_levels_face_sizes_and_nothing_else() {
        let (plain, scaled) = (Points::new(64, 48), Points::with_level_scale(64, 48, 1.63));
        assert_eq!(
            (plain.levels.clone(), plain.cx.clone(), plain.stride.clone()),
            (scaled.levels, scaled.cx, scaled.stride)
        );
        for i in 0..plain.len() {
            assert_eq!(scaled.size_lo[i], plain.size_lo[i] * 1.63);
            assert_eq!(scaled.size_hi[i], plain.size_hi[i] * 1.63);
        }
        assert_eq!(plain.size_hi[0], SIZE_RANGES[0].1, "the default is the ranges as set");
    }
}
