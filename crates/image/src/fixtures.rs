//! Image files that tests and demos write themselves: hostile headers and
//! EXIF orientation, made from a small real image with a patched header,
//! so a test needs no committed binary and no gigabyte of pixels.

use image::{DynamicImage, GrayImage, ImageFormat, Luma};

fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut bytes = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut bytes), format).expect("encoding into memory does not fail");
    bytes
}

fn small_grey() -> DynamicImage {
    DynamicImage::ImageLuma8(GrayImage::from_fn(16, 16, |x, y| Luma([(x * 13 + y * 7) as u8])))
}

/// A valid 16x16 baseline JPEG (about 300 bytes) whose frame header (SOF0)
/// claims `width` x `height`: what a decoder without a bound allocates
/// `width * height` bytes for before it finds the scan too short.
pub fn jpeg_claiming(width: u16, height: u16) -> Vec<u8> {
    let mut bytes = encoded(&small_grey(), ImageFormat::Jpeg);
    let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).expect("a baseline JPEG has SOF0");
    // FF C0, length (2), precision (1), height (2), width (2).
    bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    bytes
}

/// A 16x16 grey PNG whose header (IHDR, with its checksum redone) claims
/// `width` x `height`.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = encoded(&small_grey(), ImageFormat::Png);
    // Signature (8), IHDR length (4) and type (4), then width and height.
    assert_eq!(&bytes[12..16], b"IHDR");
    bytes[16..20].copy_from_slice(&width.to_be_bytes());
    bytes[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// A 16x16 grey PNG whose colour profile (iCCP chunk) inflates to
/// `profile_bytes` zero bytes: a few hundred KB of file for hundreds of MB
/// of profile, which a decoder bounded only by the pixels' budget inflates
/// whole (a "zlib bomb" in an ancillary chunk).
pub fn png_with_profile_of(profile_bytes: usize) -> Vec<u8> {
    use image::ImageEncoder;
    let image = small_grey();
    let mut bytes = Vec::new();
    let mut encoder = image::codecs::png::PngEncoder::new(&mut bytes);
    encoder.set_icc_profile(vec![0; profile_bytes]).expect("PNG carries a colour profile");
    encoder.write_image(image.as_bytes(), 16, 16, image::ExtendedColorType::L8).expect("encoding into memory");
    bytes
}

/// PNG's chunk checksum (CRC-32, polynomial 0xEDB88320).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A JPEG of `image` whose EXIF block says to show it turned by
/// `orientation` (6: a quarter turn clockwise, as a phone held upright
/// writes it; 1: as stored).
pub fn jpeg_with_exif_orientation(image: &DynamicImage, orientation: u16) -> Vec<u8> {
    let jpeg = encoded(image, ImageFormat::Jpeg);
    // TIFF, little-endian, one IFD with one entry: Orientation (0x0112), SHORT, 1 value.
    let mut tiff = vec![b'I', b'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0];
    tiff.extend(orientation.to_le_bytes());
    tiff.extend([0, 0, 0, 0, 0, 0]);
    let mut app1 = vec![0xFF, 0xE1];
    app1.extend(((2 + 6 + tiff.len()) as u16).to_be_bytes());
    app1.extend(b"Exif\0\0");
    app1.extend(tiff);
    [&jpeg[..2], &app1, &jpeg[2..]].concat()
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
    }
}
