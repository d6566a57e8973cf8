//! Image -> network input, and network boxes -> image pixels.
//!
//! The frame is made by grin-features' one photo path (the function
//! training's whole-photo sources, `grin eval` and `grin calibrate` use):
//! scaled by one factor to fit the run size, centred on grey bars. Here it
//! only becomes f32 planes, and boxes are mapped back through the same
//! placement.

use grin_image::{letterbox_image, Letterbox, OutOfMemory, Raster};
use grin_net::Detection;
use grin_terms::pixel;
use image::DynamicImage;

/// One network input, `[channels, height, width]` values in 0..1.
#[derive(Debug, Clone)]
pub struct Frame {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub pixels: Vec<f32>,
    pub mapping: Mapping,
    /// The picture the frame was made from, in its channels: what a second
    /// look at a box cuts from (none for a pyramid pass's halved frame).
    pub(crate) source: Option<Raster>,
}

/// How frame pixels relate to source-image pixels: the letterbox placement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mapping(pub Letterbox);

impl Mapping {
    /// The detection in source pixels, or `None` when it lies entirely in
    /// the letterbox bars.
    pub fn to_source(&self, d: Detection) -> Option<Detection> {
        let [x0, y0, x1, y1] = self.0.to_source(d.corners())?;
        Some(Detection { x0, y0, x1, y1, ..d })
    }
}

impl Frame {
    /// `image` letterboxed into a `width` x `height` frame of `channels`
    /// (1: luma, 3: RGB).
    /// Its picture's buffer is asked for: an image past the memory left is
    /// an error, not an abort.
    pub fn new(image: &DynamicImage, channels: usize, width: usize, height: usize) -> Result<Frame, OutOfMemory> {
        let photo = letterbox_image(image, channels as u32, width as u32, height as u32)?;
        // The frame's floats, asked for before they are made.
        let floats = channels * width * height;
        if Vec::<f32>::new().try_reserve_exact(floats).is_err() {
            return Err(OutOfMemory { bytes: floats * std::mem::size_of::<f32>() });
        }
        Ok(Frame::from_letterboxed(&photo.frame, photo.placement, Some(photo.source)))
    }

    /// A frame from the photo path's u8 pixels (interleaved), as planes of
    /// values in 0..1 (`grin_terms::pixel`, as training's batches).
    pub(crate) fn from_letterboxed(frame: &Raster, placement: Letterbox, source: Option<Raster>) -> Frame {
        let (width, height, channels) = (frame.width as usize, frame.height as usize, frame.channels as usize);
        let plane = width * height;
        let pixels = if channels == 1 {
            // One plane is the pixels in order: a loop the compiler vectorises.
            frame.pixels.iter().map(|&v| pixel::to_unit(v)).collect()
        } else {
            let mut pixels = vec![0.0; channels * plane];
            for (i, px) in frame.pixels.chunks_exact(channels).enumerate() {
                for (c, &v) in px.iter().enumerate() {
                    pixels[c * plane + i] = pixel::to_unit(v);
                }
            }
            pixels
        };
        Frame { width, height, channels, pixels, mapping: Mapping(placement), source }
    }

    pub fn mapping(&self) -> Mapping {
        self.mapping
    }

    /// The frame at half size (2x2 means), for the pyramid's next pass. The
    /// mapping stays the full frame's: passes' boxes are scaled back first.
    pub(crate) fn halved(&self) -> Frame {
        Frame {
            width: self.width / 2,
            height: self.height / 2,
            channels: self.channels,
            pixels: grin_net::halve(&self.pixels, self.channels, self.width, self.height),
            mapping: self.mapping,
            source: None,
        }
    }
}
