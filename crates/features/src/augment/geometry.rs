//! Geometric stages: the pixels move and the boxes move with them.

use crate::sample::{FaceBox, Sample};
use grin_image::{taps, to_u8, Tap};
use std::cell::RefCell;

/// Boxes narrower or shorter than this (px) after a geometric stage are dropped:
/// nothing below it is a learnable face.
pub(crate) const MIN_BOX_SIDE: f32 = 2.0;

thread_local! {
    /// A pixel buffer per worker thread, swapped with the sample's so that
    /// resampling stages allocate only on a thread's first sample.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Mirrors the image left to right; a box `[x0, x1)` becomes `[W - x1, W - x0)`.
pub(crate) fn flip(sample: &mut Sample) {
    let (w, c) = (sample.width as usize, sample.channels as usize);
    for row in sample.pixels.chunks_exact_mut(w * c) {
        if c == 1 {
            row.reverse();
        } else {
            for x in 0..w / 2 {
                let (l, r) = (x * c, (w - 1 - x) * c);
                for k in 0..c {
                    row.swap(l + k, r + k);
                }
            }
        }
    }
    let wf = sample.width as f32;
    for b in &mut sample.boxes {
        let (x0, x1) = (wf - b.x1, wf - b.x0);
        b.x0 = x0;
        b.x1 = x1;
    }
}

/// Cuts `window` (`[x0, y0, x1, y1]` in pixels, may reach outside the image,
/// where edge pixels repeat) and scales it back to the sample size with
/// bilinear sampling. Boxes follow; a box losing more than `drop_fraction` of
/// its area to the window edge is dropped, the others are clipped.
pub(crate) fn crop(sample: &mut Sample, window: [f32; 4], drop_fraction: f32) {
    let (w, h) = (sample.width as f32, sample.height as f32);
    let sx = (window[2] - window[0]) / w;
    let sy = (window[3] - window[1]) / h;
    resample_axis_aligned(sample, window[0], window[1], sx, sy);
    let map = |b: &FaceBox| FaceBox {
        x0: (b.x0 - window[0]) / sx,
        y0: (b.y0 - window[1]) / sy,
        x1: (b.x1 - window[0]) / sx,
        y1: (b.y1 - window[1]) / sy,
        smile: b.smile,
    };
    let boxes: Vec<FaceBox> = sample.boxes.iter().map(map).collect();
    sample.boxes = keep_visible(boxes, w, h, drop_fraction);
}

/// Rotates the image by `degrees` (counter-clockwise on screen) about its
/// centre; uncovered corners repeat the edge pixels.
///
/// Face boxes are tight boxes of roughly elliptical faces, so the new box is
/// the bounding box of the rotated inscribed ellipse: rotating the corners
/// would inflate every box by up to `sin(angle)` of the other side.
pub(crate) fn rotate(sample: &mut Sample, degrees: f32, drop_fraction: f32) {
    let (w, h) = (sample.width as f32, sample.height as f32);
    let (cx, cy) = (w / 2.0, h / 2.0);
    let (sin, cos) = degrees.to_radians().sin_cos();
    // Output pixel p comes from R(-angle) (p - c) + c; on screen (y down) a
    // positive angle turns the content counter-clockwise.
    resample(sample, |x, y| {
        let (dx, dy) = (x - cx, y - cy);
        (cx + dx * cos - dy * sin, cy + dx * sin + dy * cos)
    });
    let boxes: Vec<FaceBox> = sample
        .boxes
        .iter()
        .map(|b| {
            let (bx, by) = ((b.x0 + b.x1) / 2.0 - cx, (b.y0 + b.y1) / 2.0 - cy);
            // Forward map is the inverse of the sampling map above.
            let (nx, ny) = (cx + bx * cos + by * sin, cy - bx * sin + by * cos);
            let (a, e) = ((b.x1 - b.x0) / 2.0, (b.y1 - b.y0) / 2.0);
            let hx = (a * a * cos * cos + e * e * sin * sin).sqrt();
            let hy = (a * a * sin * sin + e * e * cos * cos).sqrt();
            FaceBox { x0: nx - hx, y0: ny - hy, x1: nx + hx, y1: ny + hy, smile: b.smile }
        })
        .collect();
    sample.boxes = keep_visible(boxes, w, h, drop_fraction);
}

/// Clips boxes to the image, dropping those that lose more than
/// `drop_fraction` of their area or end up thinner than [`MIN_BOX_SIDE`].
fn keep_visible(boxes: Vec<FaceBox>, w: f32, h: f32, drop_fraction: f32) -> Vec<FaceBox> {
    boxes
        .into_iter()
        .filter_map(|b| {
            let area = (b.x1 - b.x0) * (b.y1 - b.y0);
            let c = FaceBox { x0: b.x0.max(0.0), y0: b.y0.max(0.0), x1: b.x1.min(w), y1: b.y1.min(h), smile: b.smile };
            let (cw, ch) = (c.x1 - c.x0, c.y1 - c.y0);
            if cw < MIN_BOX_SIDE || ch < MIN_BOX_SIDE || area <= 0.0 {
                return None;
            }
            let lost = 1.0 - cw * ch / area;
            (lost <= drop_fraction).then_some(c)
        })
        .collect()
}

/// Axis-aligned resampling of the window starting at `(x0, y0)` with
/// `(sx, sy)` source pixels per output pixel: the taps are computed once per
/// column and once per row instead of once per pixel.
fn resample_axis_aligned(sample: &mut Sample, x0: f32, y0: f32, sx: f32, sy: f32) {
    // A compile-time channel count lets the inner loop unroll.
    if sample.channels == 1 {
        resample_axis_aligned_c::<1>(sample, x0, y0, sx, sy)
    } else {
        resample_axis_aligned_c::<3>(sample, x0, y0, sx, sy)
    }
}

fn resample_axis_aligned_c<const C: usize>(sample: &mut Sample, x0: f32, y0: f32, sx: f32, sy: f32) {
    let (w, h, c) = (sample.width as usize, sample.height as usize, C);
    let cols: Vec<Tap> = taps(w, w, x0, sx).collect();
    SCRATCH.with(|scratch| {
        let mut out = scratch.borrow_mut();
        out.clear();
        out.resize(w * h * c, 0);
        let src = &sample.pixels;
        for (Tap { i0: ya, i1: yb, t: ty }, dst) in taps(h, h, y0, sy).zip(out.chunks_exact_mut(w * c)) {
            let (ra, rb) = (&src[ya * w * c..(ya + 1) * w * c], &src[yb * w * c..(yb + 1) * w * c]);
            for (x, &Tap { i0: xa, i1: xb, t: tx }) in cols.iter().enumerate() {
                for k in 0..c {
                    let (a0, a1) = (ra[xa * c + k] as f32, ra[xb * c + k] as f32);
                    let (b0, b1) = (rb[xa * c + k] as f32, rb[xb * c + k] as f32);
                    let top = a0 + (a1 - a0) * tx;
                    let bottom = b0 + (b1 - b0) * tx;
                    dst[x * c + k] = to_u8(top + (bottom - top) * ty);
                }
            }
        }
        std::mem::swap(&mut *out, &mut sample.pixels);
    });
}

/// Rebuilds every output pixel from the source position `map(x, y)` (pixel
/// centres, in pixels) with bilinear sampling and edge clamping.
fn resample(sample: &mut Sample, map: impl Fn(f32, f32) -> (f32, f32)) {
    if sample.channels == 1 {
        resample_c::<1>(sample, map)
    } else {
        resample_c::<3>(sample, map)
    }
}

fn resample_c<const C: usize>(sample: &mut Sample, map: impl Fn(f32, f32) -> (f32, f32)) {
    let (w, h, c) = (sample.width as usize, sample.height as usize, C);
    SCRATCH.with(|scratch| {
        let mut out = scratch.borrow_mut();
        out.clear();
        out.resize(w * h * c, 0);
        let src = &sample.pixels;
        let (maxx, maxy) = ((w - 1) as f32, (h - 1) as f32);
        for y in 0..h {
            for x in 0..w {
                let (fx, fy) = map(x as f32 + 0.5, y as f32 + 0.5);
                let fx = (fx - 0.5).clamp(0.0, maxx);
                let fy = (fy - 0.5).clamp(0.0, maxy);
                let (x0, y0) = (fx as usize, fy as usize);
                let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
                let (tx, ty) = (fx - x0 as f32, fy - y0 as f32);
                let (i00, i01) = ((y0 * w + x0) * c, (y0 * w + x1) * c);
                let (i10, i11) = ((y1 * w + x0) * c, (y1 * w + x1) * c);
                let o = (y * w + x) * c;
                for k in 0..c {
                    let top = src[i00 + k] as f32 + (src[i01 + k] as f32 - src[i00 + k] as f32) * tx;
                    let bottom = src[i10 + k] as f32 + (src[i11 + k] as f32 - src[i10 + k] as f32) * tx;
                    out[o + k] = to_u8(top + (bottom - top) * ty);
                }
            }
        }
        std::mem::swap(&mut *out, &mut sample.pixels);
    });
}
