//! Pictures grin writes: a drawing of detections (`grin-detect --draw`), a
//! sheet of training samples (`grin features preview --out`). The format is
//! the file's extension, and it is checked, with the picture's size, before
//! the work that makes the picture: a name grin cannot write is refused at
//! once, naming the flag (issue 90, round 9: a `.gif` sheet failed only
//! after its samples were made, naming neither file nor flag).

use crate::raster::{reserved, OutOfMemory};
use image::{ImageFormat, RgbImage};
use std::path::Path;

/// JPEG's header holds each side in 16 bits.
const JPEG_MAX_SIDE: u64 = u16::MAX as u64;

/// The format of the picture `flag` names at `target`: PNG or JPEG, by its
/// extension. A name that is no file's in an existing folder
/// (`grin_output::check_file_place`), or another extension, is refused.
pub fn picture_format(target: &Path, flag: &str) -> Result<ImageFormat, String> {
    let named = format!("{flag} {}", target.display());
    grin_output::check_file_place(target).map_err(|e| format!("{flag} {e}"))?;
    match ImageFormat::from_path(target) {
        Ok(format @ (ImageFormat::Png | ImageFormat::Jpeg)) => Ok(format),
        _ => Err(format!("{named}: grin writes pictures as .png or .jpg")),
    }
}

/// Whether a `width`x`height` RGB picture can be written as `format`, with
/// `copies` buffers of its size at once (the picture, a conversion into it,
/// its encoding): JPEG's sides stop at 65,535 px, and the buffers are asked
/// for, so a picture past the memory left is an error, not an abort.
pub fn check_picture(
    target: &Path,
    flag: &str,
    format: ImageFormat,
    (width, height): (u64, u64),
    copies: usize,
) -> Result<(), String> {
    let named = format!("{flag} {}", target.display());
    if format == ImageFormat::Jpeg && width.max(height) > JPEG_MAX_SIDE {
        return Err(format!(
            "{named}: a {width}x{height} picture is past JPEG's {JPEG_MAX_SIDE} px a side; name it .png"
        ));
    }
    let bytes = width.saturating_mul(height).saturating_mul(3).saturating_mul(copies as u64);
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    reserved::<u8>(bytes).map(drop).map_err(|e: OutOfMemory| format!("{named}: a {width}x{height} picture {e}"))
}

/// `picture` encoded as `format` (from [`picture_format`]); an error names
/// the file.
pub fn encode_picture(picture: &RgbImage, target: &Path, format: ImageFormat) -> Result<Vec<u8>, String> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    picture
        .write_to(&mut bytes, format)
        .map_err(|e| format!("{}: cannot encode the picture as {format:?}: {e}", target.display()))?;
    Ok(bytes.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_grin_cannot_write_folders_and_missing_folders_are_refused_by_flag() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        assert_eq!(picture_format(&at("a.png"), "--out"), Ok(ImageFormat::Png));
        assert_eq!(picture_format(&at("a.JPG"), "--out"), Ok(ImageFormat::Jpeg));
        for name in ["a.gif", "a.bmp", "a.webp", "a", "a.xyz"] {
            let e = picture_format(&at(name), "--draw").unwrap_err();
            assert_eq!(e, format!("--draw {}: grin writes pictures as .png or .jpg", at(name).display()));
        }
        let e = picture_format(dir.path(), "--out").unwrap_err();
        assert!(e.ends_with("is a folder: name a file"), "{e}");
        let e = picture_format(&at("absent/a.png"), "--out").unwrap_err();
        let absent = format!("--out {}: {} does not exist", at("absent/a.png").display(), at("absent").display());
        assert!(e.starts_with(&absent), "{e}");
        std::fs::write(at("file"), b"x").unwrap();
        assert!(picture_format(&at("file/a.png"), "--out").unwrap_err().contains("is not a folder"));
        // Round 10: a trailing slash failed only when the picture was written.
        let e = picture_format(Path::new("o.png/"), "--draw").unwrap_err();
        assert_eq!(e, "--draw o.png/: ends in /, so names a folder: name a file");
        // A bare file name is in the working folder.
        assert_eq!(picture_format(Path::new("a.png"), "--out"), Ok(ImageFormat::Png));
    }

    #[test]
    fn a_jpeg_past_its_side_and_a_picture_past_memory_are_refused_before_the_work() {
        let target = Path::new("sheet.jpg");
        let e = check_picture(target, "--out", ImageFormat::Jpeg, (168, 126_980), 2).unwrap_err();
        assert_eq!(e, "--out sheet.jpg: a 168x126980 picture is past JPEG's 65535 px a side; name it .png");
        assert_eq!(check_picture(Path::new("s.png"), "--out", ImageFormat::Png, (168, 126_980), 2), Ok(()));
        let e = check_picture(target, "--draw", ImageFormat::Png, (u64::MAX, 2), 2).unwrap_err();
        assert!(e.starts_with("--draw sheet.jpg: a 18446744073709551615x2 picture needs"), "{e}");
    }

    #[test]
    fn an_encoding_error_names_the_file() {
        let picture = RgbImage::new(2, 2);
        assert!(encode_picture(&picture, Path::new("a.png"), ImageFormat::Png).is_ok());
        let e = encode_picture(&picture, Path::new("a.gif"), ImageFormat::Gif).unwrap_err();
        assert!(e.starts_with("a.gif: cannot encode the picture as Gif: "), "{e}");
    }
}
