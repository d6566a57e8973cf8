//! Reading inputs from disk: listing image folders, reading annotation
//! text, and decoding images. Every failure names the file at fault.

use crate::config::OnBadSample;
use crate::error::{skip_or_fail, BadInputKind, FeatureError, SkipCounts};
use crate::raster::Raster;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// The image file types every source reads, lower case, without the dot.
pub(crate) const IMAGE_EXTENSIONS: [&str; 4] = ["jpg", "jpeg", "png", "bmp"];

/// Whether `path` names an image by its extension (any case).
pub(crate) fn is_image_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Image files directly in `dir`, sorted so that every machine sees the same order.
pub(crate) fn list_images(dir: &Path) -> Result<Vec<PathBuf>, FeatureError> {
    let unreadable = |e: std::io::Error| {
        FeatureError::bad(dir, None, BadInputKind::UnreadableFile, format!("cannot list folder: {e}"))
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if is_image_path(&path) {
            files.push(path);
        }
    }
    if files.is_empty() {
        let listed: Vec<String> = IMAGE_EXTENSIONS.iter().map(|e| format!(".{e}")).collect();
        return Err(FeatureError::bad(
            dir,
            None,
            BadInputKind::EmptyFolder,
            format!("no {} images in folder", listed.join("/")),
        ));
    }
    files.sort();
    Ok(files)
}

/// A whole annotation file as text.
pub(crate) fn read_text(path: &Path) -> Result<String, FeatureError> {
    std::fs::read_to_string(path)
        .map_err(|e| FeatureError::bad(path, None, BadInputKind::UnreadableFile, format!("cannot read: {e}")))
}

/// Decodes every file in parallel; bad files are counted and left out under
/// `Skip`, and the first bad file (in file order) is the error under `Error`.
pub(crate) fn load_all(
    files: &[PathBuf],
    channels: u32,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Raster>, FeatureError> {
    let decoded: Vec<Result<Raster, FeatureError>> = files.par_iter().map(|p| decode(p, channels)).collect();
    let mut images = Vec::with_capacity(decoded.len());
    for result in decoded {
        match result {
            Ok(image) => images.push(image),
            Err(e) => skip_or_fail(on_bad, skips, e)?,
        }
    }
    Ok(images)
}

/// Reads and decodes one image into `channels` (1 = luma, 3 = RGB).
pub(crate) fn decode(path: &Path, channels: u32) -> Result<Raster, FeatureError> {
    let bytes = std::fs::read(path)
        .map_err(|e| FeatureError::bad(path, None, BadInputKind::UnreadableFile, format!("cannot read: {e}")))?;
    decode_bytes(path, &bytes, channels)
}

/// Decodes `bytes` read from `path` (named in errors).
fn decode_bytes(path: &Path, bytes: &[u8], channels: u32) -> Result<Raster, FeatureError> {
    let corrupt = |message: String| FeatureError::bad(path, None, BadInputKind::CorruptImage, message);
    let format = image::guess_format(bytes).map_err(|e| corrupt(format!("not an image: {e}")))?;
    // The JPEG decoder fills a truncated scan with grey instead of failing;
    // a missing end-of-image marker is how a cut-off file shows.
    if format == image::ImageFormat::Jpeg && !ends_with_jpeg_eoi(bytes) {
        return Err(corrupt("truncated JPEG: no end-of-image marker".into()));
    }
    let image = image::load_from_memory_with_format(bytes, format)
        .map_err(|e| corrupt(format!("corrupt or truncated image: {e}")))?;
    let (width, height) = (image.width(), image.height());
    if width == 0 || height == 0 {
        return Err(corrupt("image has zero size".into()));
    }
    let pixels = match channels {
        1 => image.into_luma8().into_raw(),
        3 => image.into_rgb8().into_raw(),
        n => return Err(FeatureError::Config(format!("key `features.channels`: {n} must be 1 or 3"))),
    };
    Ok(Raster { width, height, channels, pixels })
}

/// EOI (FF D9) among the last bytes: encoders may pad after it, never before.
fn ends_with_jpeg_eoi(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(64)..];
    tail.windows(2).any(|w| w == [0xFF, 0xD9])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_paths_are_known_by_one_extension_list_in_any_case() {
        for name in ["a.jpg", "b.JPEG", "dir/c.Png", "d.bmp", "0--Parade/0_Parade_1.jpg"] {
            assert!(is_image_path(Path::new(name)), "{name}");
        }
        for name in ["e.txt", "f.jpg.txt", "g", "1", "12.5 30 40 50", "h.gif"] {
            assert!(!is_image_path(Path::new(name)), "{name}");
        }
    }

    #[test]
    fn listing_skips_non_images_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.png", "a.JPG", "notes.txt", "c.bmp.bak"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let names: Vec<String> = list_images(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.JPG", "b.png"]);
    }

    #[test]
    fn a_folder_without_images_is_an_empty_folder_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("readme.txt"), b"x").unwrap();
        let err = list_images(dir.path()).unwrap_err();
        assert!(matches!(err, FeatureError::BadInput { kind: BadInputKind::EmptyFolder, .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(&dir.path().display().to_string()), "{message}");
        assert!(message.contains(".jpg/.jpeg/.png/.bmp"), "{message}");
    }

    #[test]
    fn a_truncated_jpeg_is_corrupt() {
        let mut bytes = Vec::new();
        image::GrayImage::from_pixel(16, 16, image::Luma([90]))
            .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Jpeg)
            .unwrap();
        assert_eq!(decode_bytes(Path::new("ok.jpg"), &bytes, 1).unwrap().pixels.len(), 256);
        let err = decode_bytes(Path::new("cut.jpg"), &bytes[..bytes.len() / 2], 1).unwrap_err();
        assert!(matches!(err, FeatureError::BadInput { kind: BadInputKind::CorruptImage, .. }), "{err}");
        assert!(err.to_string().starts_with("cut.jpg:"), "{err}");
    }
}
