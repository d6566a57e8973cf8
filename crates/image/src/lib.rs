//! grin-image: the one photo path, shared by the training sources, `grin
//! eval`, `grin calibrate` and `grin-detect` (which needs nothing else from
//! the feature pipeline): listing and decoding images within a size bound,
//! EXIF orientation, resampling, the letterbox, and errors that name the
//! file (and line) at fault, or count it as a skip.
//!
//! It depends on grin-output only, and on no Burn: grin-detect builds it.

#![forbid(unsafe_code)]

mod error;
mod io;
mod letterbox;
mod picture;
mod raster;

// Hostile and EXIF-turned image files, written by the tests of every crate.
pub mod fixtures;

pub use error::{skip_or_fail, BadInputKind, InputError, OnBadSample, SkipCounts};
pub use io::{
    decode, decode_image, is_image_path, list_images, load_all, open_file, read_image, read_text, too_large,
    DecodeError, ImageBound, DEFAULT_MAX_PIXELS,
};
pub use letterbox::{
    crop_square, letterbox, letterbox_image, letterbox_photo, Letterbox, LetterboxedPhoto, LookCuts, LETTERBOX_FILL,
};
pub use picture::{check_picture, encode_picture, picture_format};
pub use raster::{resample_region, reserved, resize, sub_raster, taps, to_u8, OutOfMemory, Raster, Tap, LUMA_SHARES};
