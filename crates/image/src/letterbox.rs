//! The one photo path: a whole photo becomes a network frame here, for
//! training sources that show whole photos, `grin eval`, `grin calibrate`
//! and `grin-detect` alike, so the threshold chosen on validation photos is
//! chosen on the frames the Pi sees.
//!
//! A photo is decoded within a size bound and turned by its EXIF
//! orientation ([`read_image`]), scaled by one factor to fit the frame
//! (faces keep their shape whatever the aspect ratio), centred, and the rest
//! filled with [`LETTERBOX_FILL`]. That is what the shipped model was
//! trained on: its real-photo crops fill with that grey wherever the window
//! leaves the photo, and place the photo anywhere in the window, centred on
//! average.

use crate::error::InputError;
use crate::io::{read_image, ImageBound};
use crate::raster::{resize, OutOfMemory, Raster};
use image::DynamicImage;
use std::path::Path;

/// Grey of the letterbox bars (the usual detector padding value, 114/255).
pub const LETTERBOX_FILL: u8 = 114;

/// Where a photo lies in its letterboxed frame: the scaled picture at
/// (`x`, `y`), `scaled_width` x `scaled_height`, in a `width` x `height`
/// frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Letterbox {
    pub source_width: u32,
    pub source_height: u32,
    pub width: u32,
    pub height: u32,
    pub x: u32,
    pub y: u32,
    pub scaled_width: u32,
    pub scaled_height: u32,
}

impl Letterbox {
    /// A `source_width` x `source_height` picture fitted into `width` x `height`.
    pub fn fit(source_width: u32, source_height: u32, width: u32, height: u32) -> Letterbox {
        let scale = (width as f32 / source_width as f32).min(height as f32 / source_height as f32);
        let scaled_width = ((source_width as f32 * scale).round() as u32).clamp(1, width);
        let scaled_height = ((source_height as f32 * scale).round() as u32).clamp(1, height);
        Letterbox {
            source_width,
            source_height,
            width,
            height,
            x: (width - scaled_width) / 2,
            y: (height - scaled_height) / 2,
            scaled_width,
            scaled_height,
        }
    }

    /// Frame pixels per source pixel, per axis (they differ only by the
    /// rounding of the scaled size).
    pub fn scale(&self) -> (f32, f32) {
        (self.scaled_width as f32 / self.source_width as f32, self.scaled_height as f32 / self.source_height as f32)
    }

    /// A box `[x0, y0, x1, y1]` in source pixels moved into the frame,
    /// clipped to the picture.
    pub fn to_frame(&self, b: [f32; 4]) -> [f32; 4] {
        let (sx, sy) = self.scale();
        let (x, y) = (self.x as f32, self.y as f32);
        let (x_end, y_end) = ((self.x + self.scaled_width) as f32, (self.y + self.scaled_height) as f32);
        [
            (b[0] * sx + x).clamp(x, x_end),
            (b[1] * sy + y).clamp(y, y_end),
            (b[2] * sx + x).clamp(x, x_end),
            (b[3] * sy + y).clamp(y, y_end),
        ]
    }

    /// A box in frame pixels moved back to source pixels, clipped to the
    /// photo; `None` when it lies wholly in the bars.
    pub fn to_source(&self, b: [f32; 4]) -> Option<[f32; 4]> {
        let (sx, sy) = self.scale();
        let (w, h) = (self.source_width as f32, self.source_height as f32);
        let x = |v: f32| ((v - self.x as f32) / sx).clamp(0.0, w);
        let y = |v: f32| ((v - self.y as f32) / sy).clamp(0.0, h);
        let out = [x(b[0]), y(b[1]), x(b[2]), y(b[3])];
        (out[2] > out[0] && out[3] > out[1]).then_some(out)
    }

    /// A window in frame pixels in source pixels, not clipped: a second
    /// look's cut ([`crop_square`]) may reach past the picture.
    pub fn window_to_source(&self, b: [f32; 4]) -> [f32; 4] {
        let (sx, sy) = self.scale();
        let (x, y) = (self.x as f32, self.y as f32);
        [(b[0] - x) / sx, (b[1] - y) / sy, (b[2] - x) / sx, (b[3] - y) / sy]
    }

    /// The second look's cut: `window` in frame pixels, cut from `source`
    /// (the picture this placement letterboxed) by [`crop_square`], and
    /// mirrored left to right when `mirrored` (the look's other view).
    pub fn cut(&self, source: &Raster, window: [f32; 4], side: u32, mirrored: bool) -> Raster {
        let cut = crop_square(source, self.window_to_source(window), side);
        if mirrored {
            cut.mirrored()
        } else {
            cut
        }
    }
}

/// One frame's second-look cuts, view by view, for every engine that looks
/// again (grin-detect's, `grin eval`'s): `grin_net::second_look` asks for
/// the plain view first, and the mirrored view is then those cuts' mirror
/// images, not cut and scaled again (a quarter of a view's time at 640x480:
/// docs/benchmarks.md). The same pixels as [`Letterbox::cut`] either way.
pub struct LookCuts<'a> {
    placement: Letterbox,
    source: &'a Raster,
    side: u32,
    cuts: Vec<Raster>,
    plain: bool,
}

impl<'a> LookCuts<'a> {
    /// Cuts of `source` (the picture `placement` letterboxed), `side` px square.
    pub fn new(placement: Letterbox, source: &'a Raster, side: u32) -> LookCuts<'a> {
        LookCuts { placement, source, side, cuts: Vec::new(), plain: false }
    }

    /// The cuts at `windows` (frame pixels), mirrored when `mirrored`.
    pub fn view(&mut self, windows: &[[f32; 4]], mirrored: bool) -> &[Raster] {
        if mirrored && self.plain && self.cuts.len() == windows.len() {
            self.cuts = std::mem::take(&mut self.cuts).into_iter().map(Raster::mirrored).collect();
        } else {
            self.cuts = windows.iter().map(|&w| self.placement.cut(self.source, w, self.side, mirrored)).collect();
        }
        self.plain = !mirrored;
        &self.cuts
    }
}

/// The frame's canvas: [`LETTERBOX_FILL`] wherever no picture is pasted.
impl Raster {
    /// A `width` x `height` raster of [`LETTERBOX_FILL`].
    pub(crate) fn filled(width: u32, height: u32, channels: u32) -> Raster {
        Raster { width, height, channels, pixels: vec![LETTERBOX_FILL; (width * height * channels) as usize] }
    }

    /// The raster mirrored left to right, in place: the second look's other
    /// view (`grin_net::SecondLook::mirror`).
    pub fn mirrored(mut self) -> Raster {
        let c = self.channels as usize;
        for row in self.pixels.chunks_exact_mut(self.width as usize * c) {
            // Reversing a row reverses its pixels and each pixel's channels;
            // reversing each pixel puts its channels back in order.
            row.reverse();
            row.chunks_exact_mut(c).for_each(<[u8]>::reverse);
        }
        self
    }

    /// Writes `part` (`width` px wide, the same channels, interleaved) with
    /// its top left at (`x`, `y`); it must fit.
    pub(crate) fn paste(&mut self, part: &[u8], width: u32, x: u32, y: u32) {
        let c = self.channels as usize;
        let row = width as usize * c;
        for (r, line) in part.chunks_exact(row).enumerate() {
            let at = ((y as usize + r) * self.width as usize + x as usize) * c;
            self.pixels[at..at + row].copy_from_slice(line);
        }
    }
}

/// `image` letterboxed into a `width` x `height` frame.
pub fn letterbox(image: &Raster, width: u32, height: u32) -> (Raster, Letterbox) {
    let placement = Letterbox::fit(image.width, image.height, width, height);
    let Letterbox { x, y, scaled_width: nw, scaled_height: nh, .. } = placement;
    // Triangle widens with the downscale factor, so a big photo is averaged,
    // not sampled (no aliasing).
    let resized = resize(image, nw, nh);
    if (nw, nh) == (width, height) {
        // No bars (a 4:3 camera frame into a 4:3 run size): the frame is the resized picture.
        return (Raster { width, height, channels: image.channels, pixels: resized }, placement);
    }
    let mut frame = Raster::filled(width, height, image.channels);
    frame.paste(&resized, nw, x, y);
    (frame, placement)
}

/// The square `window` (`[x0, y0, x1, y1]` in `image`'s pixels) cut from
/// `image` and scaled to `side` x `side`, for a second look at a box
/// (`grin_net::second_look`). The window may reach past the picture:
/// what lies outside is [`LETTERBOX_FILL`], as in every frame. Only the
/// part inside is scaled, so a window many times the picture costs no more
/// than the picture.
pub fn crop_square(image: &Raster, window: [f32; 4], side: u32) -> Raster {
    let mut cut = Raster::filled(side, side, image.channels);
    let scale = side as f32 / (window[2] - window[0]).max(1.0);
    // The picture's pixels the window touches, and where they land in the cut.
    let (x0, y0) = (window[0].max(0.0).floor() as u32, window[1].max(0.0).floor() as u32);
    let x1 = (window[2].max(0.0).ceil() as u32).min(image.width);
    let y1 = (window[3].max(0.0).ceil() as u32).min(image.height);
    if x1 <= x0 || y1 <= y0 {
        return cut;
    }
    let at = |v: u32, from: f32| (((v as f32 - from) * scale).round().max(0.0) as u32).min(side - 1);
    let (ax, ay) = (at(x0, window[0]), at(y0, window[1]));
    let w = (((x1 - x0) as f32 * scale).round() as u32).clamp(1, side - ax);
    let h = (((y1 - y0) as f32 * scale).round() as u32).clamp(1, side - ay);
    let c = image.channels as usize;
    let row = |y: u32| &image.pixels[((y * image.width + x0) as usize) * c..((y * image.width + x1) as usize) * c];
    let mut pixels = Vec::with_capacity(((x1 - x0) * (y1 - y0)) as usize * c);
    // Row by row as slices, not byte by byte: the look cuts on every frame.
    (y0..y1).for_each(|y| pixels.extend_from_slice(row(y)));
    let part = Raster { width: x1 - x0, height: y1 - y0, channels: image.channels, pixels };
    cut.paste(&resize(&part, w, h), w, ax, ay);
    cut
}

/// A decoded image (a camera frame, a photo already read) letterboxed into
/// a `channels`-plane `width` x `height` frame: [`Raster::from_image`],
/// kept as the source, then [`letterbox`].
pub fn letterbox_image(
    image: &DynamicImage,
    channels: u32,
    width: u32,
    height: u32,
) -> Result<LetterboxedPhoto, OutOfMemory> {
    let source = Raster::from_image(image, channels)?;
    let (frame, placement) = letterbox(&source, width, height);
    Ok(LetterboxedPhoto { source, frame, placement })
}

/// A photo as the network sees it, with the picture kept for what needs
/// its own pixels (a second look cuts from it).
#[derive(Debug, Clone)]
pub struct LetterboxedPhoto {
    /// The photo as decoded and turned upright, in the frame's channels.
    pub source: Raster,
    pub frame: Raster,
    pub placement: Letterbox,
}

/// Reads `path` within `bound`, turns it by its EXIF orientation and
/// letterboxes it into a `channels`-plane `width` x `height` frame.
pub fn letterbox_photo(
    path: &Path,
    channels: u32,
    width: u32,
    height: u32,
    bound: ImageBound,
) -> Result<LetterboxedPhoto, InputError> {
    let image = read_image(path, bound)?;
    letterbox_image(&image, channels, width, height).map_err(|e| crate::io::too_large(path, &image, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_go_into_the_frame_and_back() {
        // 16:9 into 4:3: bars above and below.
        let l = Letterbox::fit(1280, 720, 320, 240);
        assert_eq!((l.x, l.y, l.scaled_width, l.scaled_height), (0, 30, 320, 180));
        let face = [100.0, 200.0, 300.0, 400.0];
        let framed = l.to_frame(face);
        assert_eq!(framed, [25.0, 80.0, 75.0, 130.0]);
        assert_eq!(l.to_source(framed), Some(face));
        // In the bars only: nothing to report.
        assert_eq!(l.to_source([10.0, 2.0, 50.0, 29.0]), None);
        // Overhanging the picture: clipped to the photo.
        assert_eq!(l.to_source([-5.0, 200.0, 330.0, 239.0]), Some([0.0, 680.0, 1280.0, 720.0]));
        // A window is moved, never clipped.
        assert_eq!(l.window_to_source([-5.0, 0.0, 25.0, 80.0]), [-20.0, -120.0, 100.0, 200.0]);
    }

    #[test]
    fn a_mirror_image_swaps_left_and_right_pixel_by_pixel() {
        let rgb = Raster { width: 3, height: 2, channels: 3, pixels: (0..18).collect() };
        let m = rgb.clone().mirrored();
        assert_eq!(m.pixels, [6, 7, 8, 3, 4, 5, 0, 1, 2, 15, 16, 17, 12, 13, 14, 9, 10, 11]);
        assert_eq!((m.width, m.height, m.channels), (3, 2, 3));
        assert_eq!(m.mirrored(), rgb);
    }

    #[test]
    fn the_picture_is_centred_on_grey() {
        let image = Raster { width: 8, height: 2, channels: 1, pixels: vec![200; 16] };
        let (frame, l) = letterbox(&image, 8, 6);
        assert_eq!((l.x, l.y), (0, 2));
        let rows: Vec<&[u8]> = frame.pixels.chunks(8).collect();
        assert!(rows[..2].iter().chain(&rows[4..]).all(|r| r.iter().all(|&v| v == LETTERBOX_FILL)));
        assert!(rows[2..4].iter().all(|r| r.iter().all(|&v| v == 200)));
    }

    #[test]
    fn a_cut_keeps_the_picture_where_it_lies_and_fills_past_its_edge() {
        // A 6x4 ramp; a 4 px window hanging 2 px off the left and top.
        let image = Raster { width: 6, height: 4, channels: 1, pixels: (0..24).collect() };
        let cut = crop_square(&image, [-2.0, -2.0, 2.0, 2.0], 4);
        #[rustfmt::skip]
        let expected = [
            114, 114, 114, 114,
            114, 114, 114, 114,
            114, 114, 0, 1,
            114, 114, 6, 7,
        ];
        assert_eq!(cut.pixels, expected);
        // Inside the picture at scale 1 it is the picture's own pixels.
        assert_eq!(crop_square(&image, [2.0, 1.0, 5.0, 4.0], 3).pixels, [8, 9, 10, 14, 15, 16, 20, 21, 22]);
        // A window far larger than the picture scales only the picture.
        let wide = crop_square(&image, [-600.0, -600.0, 606.0, 604.0], 120);
        assert_eq!(wide.pixels.len(), 120 * 120);
        assert_eq!(wide.pixels.iter().filter(|&&v| v != LETTERBOX_FILL).count(), 1, "6x4 px become one");
    }
}
