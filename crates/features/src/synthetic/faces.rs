//! Cartoon faces (eyes, brows, nose, a mouth whose shape is the smile cue),
//! their occluders, and the face-like distractors that are not faces.

use super::canvas::{cover, mix, random_color, scale, segment_distance, Canvas, Ellipse, Rgb};
use crate::source::{uniform as uni, SampleRng};
use rand::Rng;

/// Skin tones from dark brown to pale, with a little hue jitter.
fn skin_color(rng: &mut SampleRng) -> Rgb {
    let t = rng.random::<f32>();
    let base = mix([70.0, 45.0, 32.0], [245.0, 210.0, 185.0], t);
    let j = uni(rng, 0.9, 1.1);
    [(base[0] * j).min(255.0), base[1], (base[2] / j).min(255.0)]
}

/// How a mouth is drawn, in the face's frame (px), centred on `(ox, my)`.
#[derive(Debug, Clone, Copy)]
enum Mouth {
    /// A stroke along `y = my + depth * (1 - (x/hw)^2) - depth/2`: corners up when depth > 0.
    Arc { hw: f32, depth: f32, thick: f32 },
    /// A filled open smile between two such curves.
    Open { hw: f32, depth: f32, thick: f32 },
    /// A small round open mouth (not smiling).
    Oval { rx: f32, ry: f32 },
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Occluder {
    x0: f32,
    y0: f32,
    x1: f32,
    y1: f32,
    c0: Rgb,
    c1: Rgb,
    period: f32,
}

#[derive(Debug, Clone)]
pub(super) struct FaceSpec {
    pub(super) ell: Ellipse,
    pub(super) smiling: bool,
    skin: Rgb,
    dark: Rgb,
    lips: Rgb,
    hair: Option<(f32, Rgb)>,
    rim: f32,
    yaw: f32,
    eye: (f32, f32),
    brow_tilt: f32,
    mouth: Mouth,
    my: f32,
    pub(super) occluder: Option<Occluder>,
}

impl FaceSpec {
    pub(super) fn random(ell: Ellipse, occlusion: f32, rng: &mut SampleRng) -> FaceSpec {
        let (a, b) = (ell.a, ell.b);
        let skin = skin_color(rng);
        let smiling = rng.random::<f32>() < 0.5;
        let stroke = (0.055 * b * 2.0).max(1.0);
        let mouth = if smiling {
            let hw = 0.45 * a * uni(rng, 0.95, 1.15);
            let depth = hw * uni(rng, 0.45, 0.65);
            if rng.random::<f32>() < 0.5 {
                Mouth::Arc { hw, depth, thick: stroke }
            } else {
                Mouth::Open { hw, depth: depth * 1.2, thick: stroke }
            }
        } else {
            let r = rng.random::<f32>();
            if r < 0.15 {
                Mouth::Oval { rx: (0.14 * a).max(1.0), ry: (0.1 * b).max(1.0) }
            } else {
                let hw = 0.45 * a * uni(rng, 0.7, 1.0);
                // Flat to slightly frowning: well away from the smile's curvature.
                let depth = -hw * uni(rng, -0.05, 0.25);
                Mouth::Arc { hw, depth, thick: stroke }
            }
        };
        let hair = if rng.random::<f32>() < 0.6 {
            Some((uni(rng, -0.7, -0.45), scale(random_color(rng), uni(rng, 0.2, 0.6))))
        } else {
            None
        };
        let occluder = if rng.random::<f32>() < occlusion { Some(random_occluder(&ell, rng)) } else { None };
        FaceSpec {
            ell,
            smiling,
            skin,
            dark: scale(skin, uni(rng, 0.15, 0.3)),
            lips: mix(scale(skin, 0.3), [120.0, 20.0, 30.0], uni(rng, 0.0, 0.5)),
            hair,
            rim: (0.06 * b).max(0.8),
            yaw: uni(rng, -0.12, 0.12) * a,
            eye: ((0.15 * a).max(0.9), (0.1 * b).max(0.8)),
            brow_tilt: uni(rng, -0.05, 0.05) * b,
            mouth,
            my: uni(rng, 0.42, 0.5) * b,
            occluder,
        }
    }
}

/// A textured rectangle over one side or the top of the face, at most ~30% of its box.
fn random_occluder(ell: &Ellipse, rng: &mut SampleRng) -> Occluder {
    let [x0, y0, x1, y1] = ell.bbox();
    let (bw, bh) = (x1 - x0, y1 - y0);
    let frac = uni(rng, 0.15, 0.3);
    let (ox0, oy0, ox1, oy1) = match rng.random_range(0..3) {
        0 => (x0 - 0.1 * bw, y0 + 0.05 * bh, x0 + frac * bw, y1 - 0.05 * bh),
        1 => (x1 - frac * bw, y0 + 0.05 * bh, x1 + 0.1 * bw, y1 - 0.05 * bh),
        _ => (x0 + 0.05 * bw, y0 - 0.1 * bh, x1 - 0.05 * bw, y0 + frac * bh),
    };
    Occluder {
        x0: ox0,
        y0: oy0,
        x1: ox1,
        y1: oy1,
        c0: random_color(rng),
        c1: random_color(rng),
        period: uni(rng, 2.0, 8.0),
    }
}

pub(super) fn draw_occluder(canvas: &mut Canvas, o: &Occluder) {
    let (x0, y0, x1, y1) = canvas.clip(o.x0, o.y0, o.x1, o.y1);
    let inv = 1.0 / o.period;
    for y in y0..y1 {
        for x in x0..x1 {
            let f = ((x + y) as f32 * inv).fract();
            let col = if f < 0.5 { o.c0 } else { o.c1 };
            canvas.blend(x, y, col, 1.0);
        }
    }
}

/// Mouth curve height at `x` (px from the mouth centre), relative to `my`.
#[inline]
fn mouth_curve(x: f32, hw: f32, depth: f32) -> f32 {
    let u = x / hw;
    depth * (1.0 - u * u) - 0.5 * depth
}

/// Distance (px) from (x, y) to the mouth curve stroke's centre line.
#[inline]
fn curve_distance(x: f32, y: f32, hw: f32, depth: f32) -> f32 {
    let xc = x.clamp(-hw, hw);
    let dy = y - mouth_curve(xc, hw, depth);
    let ex = x - xc;
    if ex != 0.0 {
        (ex * ex + dy * dy).sqrt()
    } else {
        let slope = -2.0 * depth * xc / (hw * hw);
        dy.abs() / (1.0 + slope * slope).sqrt()
    }
}

pub(super) fn draw_face(canvas: &mut Canvas, f: &FaceSpec) {
    let e = &f.ell;
    let [bx0, by0, bx1, by1] = e.bbox();
    let (x0, y0, x1, y1) = canvas.clip(bx0 - 1.0, by0 - 1.0, bx1 + 1.0, by1 + 1.0);
    let (a, b) = (e.a, e.b);
    let minab = a.min(b);
    let (erx, ery) = f.eye;
    let eye_x = 0.38 * a;
    let eye_y = -0.12 * b;
    let brow_y = -0.32 * b;
    let brow_hw = 0.2 * a;
    let brow_t = (0.05 * b).max(0.6);
    let nose_t = (0.035 * b).max(0.5);
    let brow_reach = f.brow_tilt.abs() + brow_t + 1.0;
    let (nose_y0, nose_y1) = (-0.02 * b - nose_t - 1.0, 0.2 * b + nose_t + 1.0);
    let nose_reach = 0.04 * a + nose_t + 1.0;
    let mouth_reach = match f.mouth {
        Mouth::Arc { hw, depth, thick } | Mouth::Open { hw, depth, thick } => {
            (hw + thick + 1.0, depth.abs() + thick + 1.0)
        }
        Mouth::Oval { rx, ry } => (rx + 1.0, ry + 1.0),
    };
    for y in y0..y1 {
        for x in x0..x1 {
            let (lx, ly) = e.local(x, y);
            let (nx, ny) = (lx / a, ly / b);
            let r2 = nx * nx + ny * ny;
            let r = r2.sqrt();
            let edge = (r - 1.0) * minab;
            let alpha = cover(edge);
            if alpha <= 0.0 {
                continue;
            }
            let mut col = scale(f.skin, 1.0 - 0.25 * r2);
            if let Some((hairline, hair)) = f.hair {
                if ny < hairline - 0.2 * nx * nx {
                    col = hair;
                }
            }
            col = mix(col, scale(col, 0.55), cover(-(edge + f.rim)));
            let fx = lx - f.yaw;
            // Each feature is evaluated only near its own rows: most face pixels are plain skin.
            let sx = fx.abs() - eye_x;
            if (ly - eye_y).abs() < ery + 1.0 {
                let ed = ((sx / erx).powi(2) + ((ly - eye_y) / ery).powi(2)).sqrt();
                col = mix(col, f.dark, cover((ed - 1.0) * erx.min(ery)));
            }
            if (ly - brow_y).abs() < brow_reach {
                let bd = segment_distance(sx, ly, -brow_hw, brow_y + f.brow_tilt, brow_hw, brow_y - f.brow_tilt);
                col = mix(col, f.dark, cover(bd - brow_t));
            }
            if ly > nose_y0 && ly < nose_y1 && fx.abs() < nose_reach {
                let nd = segment_distance(fx, ly, 0.0, -0.02 * b, 0.04 * a, 0.2 * b);
                col = mix(col, scale(f.skin, 0.6), 0.7 * cover(nd - nose_t));
            }
            let my = ly - f.my;
            if my.abs() < mouth_reach.1 && fx.abs() < mouth_reach.0 {
                match f.mouth {
                    Mouth::Arc { hw, depth, thick } => {
                        let d = curve_distance(fx, my, hw, depth);
                        col = mix(col, f.lips, cover(d - 0.5 * thick));
                    }
                    Mouth::Open { hw, depth, thick } => {
                        let lower = curve_distance(fx, my, hw, depth);
                        let upper_depth = 0.3 * depth;
                        let inside = fx.abs() < hw
                            && my > mouth_curve(fx, hw, upper_depth) + 0.2 * depth
                            && my < mouth_curve(fx, hw, depth);
                        let m = if inside { 1.0 } else { cover(lower - 0.5 * thick) };
                        col = mix(col, scale(f.lips, 0.6), m);
                    }
                    Mouth::Oval { rx, ry } => {
                        let od = ((fx / rx).powi(2) + (my / ry).powi(2)).sqrt();
                        col = mix(col, scale(f.lips, 0.6), cover((od - 1.0) * rx.min(ry)));
                    }
                }
            }
            canvas.blend(x, y, col, alpha);
        }
    }
}

/// A round or face-coloured thing that is not a face.
pub(super) fn draw_negative(canvas: &mut Canvas, e: &Ellipse, rng: &mut SampleRng) {
    let kind = rng.random_range(0..3);
    let base = if kind == 1 { random_color(rng) } else { skin_color(rng) };
    let rim = if rng.random::<f32>() < 0.5 { (0.06 * e.b).max(0.8) } else { 0.0 };
    // Ball highlight position in the normalised frame.
    let (hx, hy, hr) = (uni(rng, -0.5, 0.5), uni(rng, -0.6, -0.2), uni(rng, 0.12, 0.3));
    let mut marks = [(0.0f32, 0.0f32, 0.0f32); 3];
    let n_marks = if kind == 2 { rng.random_range(1..=3) } else { 0 };
    for m in marks.iter_mut().take(n_marks) {
        *m = (uni(rng, -0.6, 0.6), uni(rng, -0.6, 0.6), uni(rng, 0.06, 0.18));
    }
    let mark_col = scale(base, uni(rng, 0.2, 0.5));
    let [bx0, by0, bx1, by1] = e.bbox();
    let (x0, y0, x1, y1) = canvas.clip(bx0 - 1.0, by0 - 1.0, bx1 + 1.0, by1 + 1.0);
    let minab = e.a.min(e.b);
    for y in y0..y1 {
        for x in x0..x1 {
            let (lx, ly) = e.local(x, y);
            let (nx, ny) = (lx / e.a, ly / e.b);
            let r2 = nx * nx + ny * ny;
            let edge = (r2.sqrt() - 1.0) * minab;
            let alpha = cover(edge);
            if alpha <= 0.0 {
                continue;
            }
            let mut col = scale(base, 1.0 - 0.3 * r2);
            if rim > 0.0 {
                col = mix(col, scale(col, 0.55), cover(-(edge + rim)));
            }
            if kind == 1 {
                let (dx, dy) = (nx - hx, ny - hy);
                let hd = (dx * dx + dy * dy).sqrt() / hr;
                col = mix(col, [250.0, 250.0, 250.0], (1.0 - hd).clamp(0.0, 1.0));
            }
            for &(mx, my, mr) in marks.iter().take(n_marks) {
                let md = (((nx - mx).powi(2) + (ny - my).powi(2)).sqrt() - mr) * minab;
                col = mix(col, mark_col, cover(md));
            }
            canvas.blend(x, y, col, alpha);
        }
    }
}
