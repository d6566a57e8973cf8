//! The drawing surface and the shapes faces are built from: colours,
//! anti-aliased coverage, rotated ellipses.

use crate::source::{uniform as uni, SampleRng};
use grin_image::to_u8;

pub(super) type Rgb = [f32; 3];

pub(super) fn scale(c: Rgb, k: f32) -> Rgb {
    [c[0] * k, c[1] * k, c[2] * k]
}

pub(super) fn mix(a: Rgb, b: Rgb, t: f32) -> Rgb {
    [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t]
}

pub(super) fn random_color(rng: &mut SampleRng) -> Rgb {
    [uni(rng, 0.0, 255.0), uni(rng, 0.0, 255.0), uni(rng, 0.0, 255.0)]
}

/// Coverage of a pixel whose centre is `d` px outside a shape edge (negative inside).
#[inline]
pub(super) fn cover(d: f32) -> f32 {
    (0.5 - d).clamp(0.0, 1.0)
}

#[inline]
pub(super) fn segment_distance(px: f32, py: f32, ax: f32, ay: f32, bx: f32, by: f32) -> f32 {
    let (dx, dy) = (bx - ax, by - ay);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 { (((px - ax) * dx + (py - ay) * dy) / len2).clamp(0.0, 1.0) } else { 0.0 };
    let (qx, qy) = (ax + t * dx - px, ay + t * dy - py);
    (qx * qx + qy * qy).sqrt()
}

/// The sample's pixels seen as a drawing surface.
pub(crate) struct Canvas<'a> {
    pub(crate) px: &'a mut [u8],
    pub(crate) w: usize,
    pub(crate) h: usize,
    pub(crate) c: usize,
}

impl Canvas<'_> {
    #[inline]
    pub(super) fn blend(&mut self, x: usize, y: usize, col: Rgb, alpha: f32) {
        let i = (y * self.w + x) * self.c;
        if self.c == 1 {
            let l = 0.299 * col[0] + 0.587 * col[1] + 0.114 * col[2];
            let p = &mut self.px[i];
            *p = to_u8(*p as f32 + (l - *p as f32) * alpha);
        } else {
            for (k, v) in col.iter().enumerate() {
                let p = &mut self.px[i + k];
                *p = to_u8(*p as f32 + (v - *p as f32) * alpha);
            }
        }
    }

    /// Clipped integer pixel range covering `[x0, x1) x [y0, y1)`.
    pub(super) fn clip(&self, x0: f32, y0: f32, x1: f32, y1: f32) -> (usize, usize, usize, usize) {
        let cx = |v: f32| (v.max(0.0) as usize).min(self.w);
        let cy = |v: f32| (v.max(0.0) as usize).min(self.h);
        (cx(x0.floor()), cy(y0.floor()), cx(x1.ceil()), cy(y1.ceil()))
    }
}

/// A rotated ellipse: centre, half axes (px) and rotation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ellipse {
    pub(super) cx: f32,
    pub(super) cy: f32,
    pub(super) a: f32,
    pub(super) b: f32,
    pub(super) sin: f32,
    pub(super) cos: f32,
}

impl Ellipse {
    pub(super) fn half_extent(&self) -> (f32, f32) {
        let (a2, b2) = (self.a * self.a, self.b * self.b);
        let (s2, c2) = (self.sin * self.sin, self.cos * self.cos);
        ((a2 * c2 + b2 * s2).sqrt(), (a2 * s2 + b2 * c2).sqrt())
    }

    pub(super) fn bbox(&self) -> [f32; 4] {
        let (ex, ey) = self.half_extent();
        [self.cx - ex, self.cy - ey, self.cx + ex, self.cy + ey]
    }

    /// Pixel centre (x, y) in the ellipse's own frame, px.
    #[inline]
    pub(super) fn local(&self, x: usize, y: usize) -> (f32, f32) {
        let dx = x as f32 + 0.5 - self.cx;
        let dy = y as f32 + 0.5 - self.cy;
        (dx * self.cos + dy * self.sin, -dx * self.sin + dy * self.cos)
    }
}
