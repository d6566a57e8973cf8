//! Cutting one training scene out of a photo: the window around a face (or
//! clear of every face), its pixels, and the faces moved into it.

use crate::config::PhotoCrops;
use crate::sample::{FaceBox, Sample, Smile, MAX_BOXES};
use crate::source::{log_uniform, SampleRng};
use grin_image::{resize, sub_raster, Raster, LETTERBOX_FILL};
use rand::Rng;

/// One random crop of `image` around one of `faces`, at `width` x `height`.
pub(crate) fn crop_scene(
    image: &Raster,
    faces: &[FaceBox],
    width: u32,
    height: u32,
    crops: &PhotoCrops,
    rng: &mut SampleRng,
) -> Sample {
    let (iw, ih) = (image.width as f32, image.height as f32);
    if crops.background > 0.0 && rng.random::<f32>() < crops.background {
        let aspect = width as f32 / height as f32;
        if let Some(window) = background_window(faces, [iw, ih], aspect, width as f32 / crops.max_upscale, rng) {
            let scale = width as f32 / window[2];
            let pixels = render_window(image, window, width, height);
            let boxes = crop_boxes(faces, [window[0], window[1]], scale, width, height, crops, f32::INFINITY);
            return Sample { width, height, channels: image.channels, pixels, boxes };
        }
    }
    let learnable: Vec<&FaceBox> = faces.iter().filter(|f| f.smile.is_face()).collect();
    if crops.zoom_in > 0.0 && rng.random::<f32>() < crops.zoom_in {
        let face = learnable.get(rng.random_range(0..learnable.len().max(1)));
        if let Some(window) = face.and_then(|f| zoomed_in_window(f, [iw, ih], [width, height], crops, rng)) {
            let scale = width as f32 / window[2];
            let pixels = render_window(image, window, width, height);
            let boxes = crop_boxes(faces, [window[0], window[1]], scale, width, height, crops, crops.max_face);
            return Sample { width, height, channels: image.channels, pixels, boxes };
        }
    }
    // The scale that gives the chosen face its drawn size; a photo with no
    // face is shown whole at a random size.
    let (scale, target) = match learnable.get(rng.random_range(0..learnable.len().max(1))) {
        Some(face) => {
            let side = (face.x1 - face.x0).max(face.y1 - face.y0).max(1.0);
            let want = log_uniform(rng, crops.min_face, crops.max_face);
            let fill = (width as f32 / iw).min(height as f32 / ih);
            let scale = (want / side).max(fill / crops.max_zoom_out).min(crops.max_upscale);
            (scale, Some(**face))
        }
        None => ((width as f32 / iw).min(height as f32 / ih) * (0.5 + 0.5 * rng.random::<f32>()), None),
    };
    let (ww, wh) = (width as f32 / scale, height as f32 / scale);
    let mut wx = place(target.map(|f| (f.x0.max(0.0), f.x1.min(iw))), ww, iw, rng.random());
    let mut wy = place(target.map(|f| (f.y0.max(0.0), f.y1.min(ih))), wh, ih, rng.random());
    if let Some(face) = target.filter(|_| crops.cut > 0.0 && rng.random::<f32>() < crops.cut) {
        let edge = rng.random_range(0..4u8);
        let kept = CUT_KEPT.0 + (CUT_KEPT.1 - CUT_KEPT.0) * rng.random::<f32>();
        // Left, top, right or bottom edge of the window runs through the face.
        match edge {
            0 => wx = cut_start(face.x0, face.x1, kept),
            1 => wy = cut_start(face.y0, face.y1, kept),
            2 => wx = cut_start(face.x0, face.x1, 1.0 - kept) - ww,
            _ => wy = cut_start(face.y0, face.y1, 1.0 - kept) - wh,
        }
    }
    let pixels = render_window(image, [wx, wy, ww, wh], width, height);
    let boxes = crop_boxes(faces, [wx, wy], scale, width, height, crops, f32::INFINITY);
    Sample { width, height, channels: image.channels, pixels, boxes }
}

/// The share of the chosen face's extent a cut crop keeps inside, drawn
/// uniformly in this range; `crops.min_visible` then says which are faces.
const CUT_KEPT: (f32, f32) = (0.3, 1.0);

/// Where a window edge runs through the face span `a0..a1` with `kept` of
/// it after the edge.
fn cut_start(a0: f32, a1: f32, kept: f32) -> f32 {
    a1 - kept * (a1 - a0)
}

/// Most faces (annotated, or found by `crops.unannotated`) a photo may have
/// for a face-free crop to be cut from it: group photos are where faces go
/// un-annotated.
const BACKGROUND_MAX_FACES: usize = 2;

/// A window `[x, y, w, h]` of aspect `aspect` inside a photo of size
/// `photo`, at least `min_width` wide (so it is not upscaled past the
/// limit), that keeps well clear of every face, ignore regions included
/// (each grown by half its side), or `None`.
fn background_window(
    faces: &[FaceBox],
    [iw, ih]: [f32; 2],
    aspect: f32,
    min_width: f32,
    rng: &mut SampleRng,
) -> Option<[f32; 4]> {
    if faces.len() > BACKGROUND_MAX_FACES {
        return None;
    }
    let (full_w, full_h) = if iw / ih > aspect { (ih * aspect, ih) } else { (iw, iw / aspect) };
    for _ in 0..8 {
        let f = 0.2 + 0.6 * rng.random::<f32>();
        let (ww, wh) = (full_w * f, full_h * f);
        if ww < min_width {
            continue;
        }
        let (wx, wy) = (rng.random::<f32>() * (iw - ww), rng.random::<f32>() * (ih - wh));
        let clear = faces.iter().all(|b| {
            let grow = 0.5 * (b.x1 - b.x0).max(b.y1 - b.y0);
            b.x1 + grow <= wx || b.x0 - grow >= wx + ww || b.y1 + grow <= wy || b.y0 - grow >= wy + wh
        });
        if clear {
            return Some([wx, wy, ww, wh]);
        }
    }
    None
}

/// Headroom above `max_face` for the face of a zoomed-in crop, so that it is
/// plainly too large to learn rather than on the border.
const ZOOM_IN_MARGIN: f32 = 1.2;

/// A window `[x, y, w, h]` near `face` at a scale that draws the face larger
/// than `max_face` (by [`ZOOM_IN_MARGIN`]) and the photo at most
/// `zoom_in_upscale` times its size, or `None` when no scale does both. Its
/// centre lies within a face side of the face box, so that it shows the
/// face's surroundings (hair, neck, background), which is where a small
/// photo run at a large size is searched at that enlargement.
fn zoomed_in_window(
    face: &FaceBox,
    [iw, ih]: [f32; 2],
    [width, height]: [u32; 2],
    crops: &PhotoCrops,
    rng: &mut SampleRng,
) -> Option<[f32; 4]> {
    let side = (face.x1 - face.x0).max(face.y1 - face.y0).max(1.0);
    let lo = crops.max_face * ZOOM_IN_MARGIN / side;
    if lo >= crops.zoom_in_upscale {
        return None;
    }
    let scale = log_uniform(rng, lo, crops.zoom_in_upscale);
    let (ww, wh) = (width as f32 / scale, height as f32 / scale);
    let centre = |a0: f32, a1: f32, extent: f32, window: f32, u: f32| {
        let c = a0 - side + (a1 - a0 + 2.0 * side) * u;
        let start = c - window / 2.0;
        if window <= extent {
            start.clamp(0.0, extent - window)
        } else {
            (extent - window) / 2.0
        }
    };
    let wx = centre(face.x0, face.x1, iw, ww, rng.random());
    let wy = centre(face.y0, face.y1, ih, wh, rng.random());
    Some([wx, wy, ww, wh])
}

/// Where a window of length `window` starts on an axis of length `extent`:
/// on the photo as much as it can be, with the face span `face` inside it,
/// at position `u` (0..1) of the range that allows.
fn place(face: Option<(f32, f32)>, window: f32, extent: f32, u: f32) -> f32 {
    let (mut lo, mut hi) = if window <= extent { (0.0, extent - window) } else { (extent - window, 0.0) };
    if let Some((f0, f1)) = face {
        let (face_lo, face_hi) = (f1 - window, f0);
        if face_lo > face_hi {
            // A face wider than the window: centre it.
            return (f0 + f1 - window) / 2.0;
        }
        lo = lo.max(face_lo);
        hi = hi.min(face_hi);
        if lo > hi {
            (lo, hi) = (face_lo, face_hi);
        }
    }
    lo + (hi - lo) * u
}

/// The window `[x, y, w, h]` of `image` (photo pixels) resampled to
/// `width` x `height`, letterbox grey where it leaves the photo.
fn render_window(image: &Raster, window: [f32; 4], width: u32, height: u32) -> Vec<u8> {
    let [wx, wy, ww, wh] = window;
    let (sx, sy) = (width as f32 / ww, height as f32 / wh);
    let c = image.channels as usize;
    let mut out = vec![LETTERBOX_FILL; (width * height) as usize * c];
    // The photo's whole-pixel part inside the window, and where it lands.
    let x0 = wx.max(0.0).floor() as u32;
    let y0 = wy.max(0.0).floor() as u32;
    let x1 = ((wx + ww).min(image.width as f32).ceil() as u32).min(image.width);
    let y1 = ((wy + wh).min(image.height as f32).ceil() as u32).min(image.height);
    if x1 <= x0 || y1 <= y0 {
        return out;
    }
    let dx0 = ((x0 as f32 - wx) * sx).round() as i64;
    let dy0 = ((y0 as f32 - wy) * sy).round() as i64;
    let dw = (((x1 - x0) as f32 * sx).round() as u32).max(1);
    let dh = (((y1 - y0) as f32 * sy).round() as u32).max(1);
    let sub = sub_raster(image, x0, y0, x1 - x0, y1 - y0);
    let resized = resize(&sub, dw, dh);
    let row = dw as usize * c;
    for y in 0..dh as i64 {
        let ty = dy0 + y;
        if !(0..height as i64).contains(&ty) {
            continue;
        }
        // Columns of this row that land inside the output.
        let start = (-dx0).max(0) as usize;
        let end = ((width as i64 - dx0).min(dw as i64)).max(0) as usize;
        if start >= end {
            continue;
        }
        let src = &resized[y as usize * row + start * c..y as usize * row + end * c];
        let at = (ty as usize * width as usize + (dx0 + start as i64) as usize) * c;
        out[at..at + src.len()].copy_from_slice(src);
    }
    out
}

/// Faces moved into the crop: kept when enough of the box is inside and it
/// is big enough to learn, an ignore region when it is cut off or tiny,
/// dropped when it is outside. A face whose side comes out above `too_large`
/// (px) is an ignore region too. Learnable faces come first, largest first,
/// so that [`MAX_BOXES`] keeps the ones that matter.
fn crop_boxes(
    faces: &[FaceBox],
    origin: [f32; 2],
    scale: f32,
    width: u32,
    height: u32,
    crops: &PhotoCrops,
    too_large: f32,
) -> Vec<FaceBox> {
    let (w, h) = (width as f32, height as f32);
    let mut out: Vec<FaceBox> = Vec::new();
    for f in faces {
        let moved = [
            (f.x0 - origin[0]) * scale,
            (f.y0 - origin[1]) * scale,
            (f.x1 - origin[0]) * scale,
            (f.y1 - origin[1]) * scale,
        ];
        let clipped = [moved[0].max(0.0), moved[1].max(0.0), moved[2].min(w), moved[3].min(h)];
        let (cw, ch) = (clipped[2] - clipped[0], clipped[3] - clipped[1]);
        if cw < 1.0 || ch < 1.0 {
            continue;
        }
        let visible = (cw * ch) / ((moved[2] - moved[0]) * (moved[3] - moved[1])).max(1e-6);
        let side = (moved[2] - moved[0]).max(moved[3] - moved[1]);
        let learnable =
            f.smile.is_face() && visible >= crops.min_visible && cw.max(ch) >= crops.min_learnable && side <= too_large;
        let smile = if learnable { f.smile } else { Smile::Ignore };
        out.push(FaceBox { x0: clipped[0], y0: clipped[1], x1: clipped[2], y1: clipped[3], smile });
    }
    keep_the_largest(out)
}

/// Learnable faces first, largest first, at most [`MAX_BOXES`].
fn keep_the_largest(mut boxes: Vec<FaceBox>) -> Vec<FaceBox> {
    let area = |b: &FaceBox| (b.x1 - b.x0) * (b.y1 - b.y0);
    boxes.sort_by(|a, b| b.smile.is_face().cmp(&a.smile.is_face()).then(area(b).total_cmp(&area(a))));
    boxes.truncate(MAX_BOXES);
    boxes
}

/// The crops of a mosaic's quarters: faces drawn at half the sizes of
/// `crops` (no smaller than it can learn), and no mosaic within a mosaic.
pub(crate) fn quarter_crops(crops: &PhotoCrops) -> PhotoCrops {
    let min_face = (crops.min_face / 2.0).max(crops.min_learnable).max(2.0);
    let max_face = (crops.max_face / 2.0).max(min_face);
    PhotoCrops { min_face, max_face, mosaic: 0.0, ..crops.clone() }
}

/// Four scenes of `width / 2` x `height / 2` tiled 2x2 into one of
/// `width` x `height` (top left, top right, bottom left, bottom right),
/// their faces moved with them; an odd side's last line stays letterbox grey.
pub(crate) fn tile(quarters: [Sample; 4], width: u32, height: u32, channels: u32) -> Sample {
    let (qw, qh, c) = (width as usize / 2, height as usize / 2, channels as usize);
    let mut pixels = vec![LETTERBOX_FILL; width as usize * height as usize * c];
    let mut boxes = Vec::new();
    for (k, q) in quarters.into_iter().enumerate() {
        debug_assert_eq!((q.width as usize, q.height as usize, q.channels), (qw, qh, channels));
        let (ox, oy) = ((k % 2) * qw, (k / 2) * qh);
        for (y, row) in q.pixels.chunks_exact(qw * c).enumerate() {
            let at = ((oy + y) * width as usize + ox) * c;
            pixels[at..at + row.len()].copy_from_slice(row);
        }
        let (dx, dy) = (ox as f32, oy as f32);
        boxes.extend(q.boxes.iter().map(|b| FaceBox {
            x0: b.x0 + dx,
            y0: b.y0 + dy,
            x1: b.x1 + dx,
            y1: b.y1 + dy,
            ..*b
        }));
    }
    Sample { width, height, channels, pixels, boxes: keep_the_largest(boxes) }
}
