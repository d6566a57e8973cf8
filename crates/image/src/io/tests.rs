use super::*;

#[test]
fn image_paths_are_known_by_one_extension_list_in_any_case() {
    for name in ["a.jpg", "b.JPEG", "dir/c.Png", "0--Parade/0_Parade_1.jpg"] {
        assert!(is_image_path(Path::new(name)), "{name}");
    }
    // Formats grin does not decode are not listed as images either.
    for name in ["e.txt", "f.jpg.txt", "g", "1", "12.5 30 40 50", "h.gif", "d.bmp", "i.tiff"] {
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
    assert!(matches!(err, InputError::BadInput { kind: BadInputKind::EmptyFolder, .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains(&dir.path().display().to_string()), "{message}");
    assert!(message.contains(".jpg/.jpeg/.png"), "{message}");
}

#[test]
fn a_bmp_or_tiff_is_named_as_a_format_grin_does_not_read() {
    // The first bytes are enough for the format to be recognised.
    let bmp = [b"BM".as_slice(), &[0; 64]].concat();
    let tiff = [b"II*\0".as_slice(), &[0; 64]].concat();
    let ppm = [b"P6\n4 4\n255\n".as_slice(), &[0; 48]].concat();
    for (bytes, name) in [(bmp, "BMP"), (tiff, "TIFF"), (ppm, "PNM (PBM, PGM, PPM)")] {
        let bound = ImageBound::new(DEFAULT_MAX_PIXELS, "--max-pixels").unwrap();
        let e = decode_image(&bytes, bound).unwrap_err();
        assert_eq!(e.message, format!("{name} images are not read (grin reads PNG and JPEG): convert it first"));
    }
}

/// Round 9 of issue 90: a JSONL saved with a byte-order mark failed at
/// `:1: expected value` (the TOML reader took it), and a file of any size
/// was read whole.
#[test]
fn annotation_text_drops_a_byte_order_mark() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.jsonl");
    std::fs::write(&path, "\u{feff}{\"image\": \"a.png\"}\n").unwrap();
    assert_eq!(read_text(&path).unwrap(), "{\"image\": \"a.png\"}\n");
    // A 3 GB sparse file was read whole before it was refused.
    let big = dir.path().join("big.jsonl");
    std::fs::File::create(&big).unwrap().set_len(MAX_TEXT_BYTES + 1).unwrap();
    let e = read_text(&big).unwrap_err().to_string();
    assert!(e.contains("big.jsonl") && e.contains("more than 256 MiB: not an annotation file"), "{e}");
    // Round 10: a NUL in a photo's name was printed raw where it was opened.
    std::fs::write(&path, "a.jpg 1 2 3 4 5 6 7 8\nb\0.jpg 1 2 3 4 5 6 7 8\n").unwrap();
    let e = read_text(&path).unwrap_err().to_string();
    assert!(e.contains("m.jsonl:2") && e.contains("holds a NUL byte"), "{e}");
}

#[test]
fn a_truncated_jpeg_is_corrupt() {
    let mut bytes = Vec::new();
    image::GrayImage::from_pixel(16, 16, image::Luma([90]))
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Jpeg)
        .unwrap();
    let bound = ImageBound { max_pixels: DEFAULT_MAX_PIXELS, knob: "test" };
    let dir = tempfile::tempdir().unwrap();
    let (ok, cut) = (dir.path().join("ok.jpg"), dir.path().join("cut.jpg"));
    std::fs::write(&ok, &bytes).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(decode(&ok, 1, bound).unwrap().pixels.len(), 256);
    let err = decode(&cut, 1, bound).unwrap_err();
    assert!(matches!(err, InputError::BadInput { kind: BadInputKind::CorruptImage, .. }), "{err}");
    assert!(err.to_string().starts_with(&format!("{}:", cut.display())), "{err}");
}

#[test]
fn bytes_after_the_end_marker_are_allowed_and_a_thumbnail_marker_is_not_the_end() {
    let mut jpeg = Vec::new();
    image::GrayImage::from_fn(32, 24, |x, y| image::Luma([(x * 7 + y * 3) as u8]))
        .write_to(&mut std::io::Cursor::new(&mut jpeg), image::ImageFormat::Jpeg)
        .unwrap();
    let bound = ImageBound { max_pixels: DEFAULT_MAX_PIXELS, knob: "test" };
    assert_eq!(jpeg_end(&jpeg), Some(jpeg.len()));
    // A motion photo: a video appended after the picture.
    let mut motion = jpeg.clone();
    motion.extend(std::iter::repeat_n(0xFFu8, 100).chain((0..100_000).map(|i| (i % 251) as u8)));
    let decoded = decode_image(&motion, bound).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (32, 24));
    // An APP1 segment holding a thumbnail's own SOI ... EOI, then the
    // picture cut in half: still truncated.
    let thumbnail: Vec<u8> = b"Exif\0\0".iter().copied().chain([0xFF, 0xD8, 1, 2, 3, 0xFF, 0xD9]).collect();
    let mut with_thumbnail = vec![0xFF, 0xD8, 0xFF, 0xE1];
    with_thumbnail.extend(((thumbnail.len() + 2) as u16).to_be_bytes());
    with_thumbnail.extend(&thumbnail);
    with_thumbnail.extend(&jpeg[2..]);
    assert_eq!(jpeg_end(&with_thumbnail), Some(with_thumbnail.len()));
    let cut = &with_thumbnail[..with_thumbnail.len() * 2 / 3];
    let e = decode_image(cut, bound).unwrap_err();
    assert_eq!(e.message, "truncated JPEG: no end-of-image marker");
}

#[test]
fn a_photo_is_turned_as_its_exif_orientation_says() {
    use image::{DynamicImage, GrayImage, Luma};
    let bound = ImageBound { max_pixels: DEFAULT_MAX_PIXELS, knob: "test" };
    // Bright left half, dark right half, 64x32 as stored.
    let stored = DynamicImage::ImageLuma8(GrayImage::from_fn(64, 32, |x, _| Luma([if x < 32 { 250 } else { 5 }])));
    let turned = crate::fixtures::jpeg_with_exif_orientation(&stored, 6);
    let shown = decode_image(&turned, bound).unwrap().into_luma8();
    // Turned a quarter clockwise: 32 wide, 64 tall, the bright half on top.
    assert_eq!(shown.dimensions(), (32, 64));
    assert!(shown.get_pixel(16, 8).0[0] > 200 && shown.get_pixel(16, 56).0[0] < 50);
    let plain = decode_image(&crate::fixtures::jpeg_with_exif_orientation(&stored, 1), bound).unwrap();
    assert_eq!((plain.width(), plain.height()), (64, 32));
}

#[test]
fn the_bound_counts_pixels_and_sides_and_names_its_setting() {
    let bound = ImageBound::new(1000, "--max-pixels").unwrap();
    assert!(bound.check(40, 25).is_ok());
    let error = bound.check(40, 26).unwrap_err();
    assert_eq!(
        error,
        "40x26 (0.0 megapixels) is over the bound of 0.0 megapixels and 65535 px a side (--max-pixels raises it)"
    );
    let wide = ImageBound::new(MAX_IMAGE_SIDE as u64 * MAX_IMAGE_SIDE as u64, "k").unwrap();
    assert!(wide.check(65_536, 1).is_err(), "a PNG may claim a side no JPEG can");
    assert!(ImageBound::new(0, "k").is_err());
    // A 16x16 JPEG under a bound of 255 pixels, then 256.
    let jpeg = crate::fixtures::jpeg_claiming(16, 16);
    let error = decode_image(&jpeg, ImageBound { max_pixels: 255, knob: "k" }).unwrap_err();
    assert_eq!(error.kind, BadInputKind::ImageTooLarge);
    assert!(error.message.starts_with("image 16x16 "), "{}", error.message);
    assert!(decode_image(&jpeg, ImageBound { max_pixels: 256, knob: "k" }).is_ok());
}

#[test]
fn a_file_past_the_bound_is_not_read_whole() {
    // A (sparse) file larger than any image within the bound: refused
    // after the bound's bytes.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.png");
    std::fs::File::create(&big).unwrap().set_len(100 << 20).unwrap();
    let bound = ImageBound { max_pixels: 1, knob: "--max-pixels" };
    let err = read_image(&big, bound).unwrap_err();
    assert!(matches!(err, InputError::BadInput { kind: BadInputKind::ImageTooLarge, .. }), "{err}");
    assert!(err.to_string().contains("big.png: file is over 64 MiB"), "{err}");
    // /dev/zero never ends, and a device is no photo: refused before a byte is read.
    let err = read_image(Path::new("/dev/zero"), bound).unwrap_err();
    assert!(err.to_string().starts_with("/dev/zero: not a regular file"), "{err}");
}
