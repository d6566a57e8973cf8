//! Pasting one face crop into a scene: its scale and rotation, its face box,
//! and the feathered elliptical blend.

use crate::sample::{FaceBox, Smile};
use grin_image::Raster;

/// Fraction of the ellipse radius over which the mask fades to zero.
const FEATHER: f32 = 0.2;

/// Scale and rotation of one pasted crop, and the half extents of its face box.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    /// Output pixels per crop pixel.
    pub scale: f32,
    pub cos: f32,
    pub sin: f32,
    /// Semi-axes of the face ellipse in output pixels.
    pub axis_x: f32,
    pub axis_y: f32,
    pub half_w: f32,
    pub half_h: f32,
}

impl Placement {
    /// `side` is the face's width in output pixels before rotation.
    pub(crate) fn new(crop: &Raster, side: f32, angle: f32) -> Placement {
        let scale = side / crop.width as f32;
        let axis_x = side / 2.0;
        let axis_y = crop.height as f32 * scale / 2.0;
        let (sin, cos) = angle.sin_cos();
        // Bounding box of a rotated ellipse: exact, so the box stays tight.
        let half_w = ((axis_x * cos).powi(2) + (axis_y * sin).powi(2)).sqrt();
        let half_h = ((axis_x * sin).powi(2) + (axis_y * cos).powi(2)).sqrt();
        Placement { scale, cos, sin, axis_x, axis_y, half_w, half_h }
    }

    pub(crate) fn face_box(&self, cx: f32, cy: f32, smile: Smile) -> FaceBox {
        FaceBox { x0: cx - self.half_w, y0: cy - self.half_h, x1: cx + self.half_w, y1: cy + self.half_h, smile }
    }
}

/// Blends `crop` into `dst` centred at (cx, cy) through a feathered ellipse.
#[allow(clippy::too_many_arguments)]
pub(crate) fn paste_face(
    dst: &mut [u8],
    width: u32,
    height: u32,
    channels: u32,
    crop: &Raster,
    p: &Placement,
    cx: f32,
    cy: f32,
) {
    let c = channels as usize;
    debug_assert_eq!(crop.channels, channels);
    let y_start = (cy - p.half_h).floor().max(0.0) as usize;
    let y_end = ((cy + p.half_h).ceil() as usize).min(height as usize);
    let (cw, ch) = (crop.width as usize, crop.height as usize);
    let inv_scale = 1.0 / p.scale;
    let (ia2, ib2) = (1.0 / (p.axis_x * p.axis_x), 1.0 / (p.axis_y * p.axis_y));
    let half_cw = cw as f32 / 2.0 - 0.5;
    let half_ch = ch as f32 / 2.0 - 0.5;
    let (max_x, max_y) = ((cw - 1) as f32, (ch - 1) as f32);
    let row_stride = width as usize * c;
    let src = &crop.pixels;
    // r^2 of the rotated ellipse is a quadratic in dx for a fixed dy:
    // qa dx^2 + qb dx + qc, so each row's span inside it is solved, not searched.
    let qa = p.cos * p.cos * ia2 + p.sin * p.sin * ib2;
    let qb_per_dy = 2.0 * p.cos * p.sin * (ia2 - ib2);
    let qc_per_dy2 = p.sin * p.sin * ia2 + p.cos * p.cos * ib2;
    for y in y_start..y_end {
        let dy = y as f32 + 0.5 - cy;
        let (qb, qc) = (qb_per_dy * dy, qc_per_dy2 * dy * dy);
        let disc = qb * qb - 4.0 * qa * (qc - 1.0);
        if disc <= 0.0 {
            continue;
        }
        let root = disc.sqrt();
        let left = cx + (-qb - root) / (2.0 * qa);
        let right = cx + (-qb + root) / (2.0 * qa);
        let x_start = (left - 0.5).ceil().max(0.0) as usize;
        let x_end = ((right - 0.5).floor() as isize + 1).clamp(0, width as isize) as usize;
        let row = &mut dst[y * row_stride..(y + 1) * row_stride];
        for x in x_start..x_end {
            let dx = x as f32 + 0.5 - cx;
            // Inverse rotation: output pixel -> face frame.
            let u = p.cos * dx + p.sin * dy;
            let v = -p.sin * dx + p.cos * dy;
            let r2 = u * u * ia2 + v * v * ib2;
            if r2 >= 1.0 {
                continue;
            }
            let alpha = ((1.0 - r2.sqrt()) * (1.0 / FEATHER)).min(1.0);
            let sx = (u * inv_scale + half_cw).clamp(0.0, max_x);
            let sy = (v * inv_scale + half_ch).clamp(0.0, max_y);
            let (x0, y0) = (sx as usize, sy as usize);
            let (x1, y1) = ((x0 + 1).min(cw - 1), (y0 + 1).min(ch - 1));
            let (fx, fy) = (sx - x0 as f32, sy - y0 as f32);
            let (i00, i01, i10, i11) = ((y0 * cw + x0) * c, (y0 * cw + x1) * c, (y1 * cw + x0) * c, (y1 * cw + x1) * c);
            for (k, out) in row[x * c..x * c + c].iter_mut().enumerate() {
                let (p00, p01) = (src[i00 + k] as f32, src[i01 + k] as f32);
                let (p10, p11) = (src[i10 + k] as f32, src[i11 + k] as f32);
                let top = p00 + (p01 - p00) * fx;
                let bottom = p10 + (p11 - p10) * fx;
                let face = top + (bottom - top) * fy;
                let bg = *out as f32;
                *out = (bg + (face - bg) * alpha + 0.5) as u8;
            }
        }
    }
}
