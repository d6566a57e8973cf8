//! Letterboxing into the run size and mapping boxes back.

use grin_infer::Frame;
use grin_model::Detection;
use image::{DynamicImage, GrayImage, Luma, Rgb, RgbImage};

fn det(x0: f32, y0: f32, x1: f32, y1: f32) -> Detection {
    Detection { x0, y0, x1, y1, score: 0.9, smile: 0.2 }
}

#[test]
fn a_wide_image_is_scaled_to_fit_and_padded_below() {
    let img = DynamicImage::ImageLuma8(GrayImage::from_pixel(320, 120, Luma([255])));
    let f = Frame::new(&img, 1, 160, 120);
    assert_eq!((f.width, f.height, f.channels, f.pixels.len()), (160, 120, 1, 160 * 120));
    // 320x120 fits as 160x60: the top half is the image, the rest padding.
    assert!(f.pixels[..160 * 60].iter().all(|&v| (v - 1.0).abs() < 1e-6));
    assert!(f.pixels[160 * 60..].iter().all(|&v| (v - 0.5).abs() < 1e-6));
    let m = f.mapping();
    let back = m.to_source(det(10.0, 5.0, 50.0, 45.0)).unwrap();
    assert_eq!((back.x0, back.y0, back.x1, back.y1), (20.0, 10.0, 100.0, 90.0));
    assert_eq!((back.score, back.smile), (0.9, 0.2));
    // Clipped to the image, and dropped when it lies wholly in the padding.
    let clipped = m.to_source(det(100.0, 50.0, 170.0, 80.0)).unwrap();
    assert_eq!((clipped.x1, clipped.y1), (320.0, 120.0));
    assert!(m.to_source(det(10.0, 70.0, 50.0, 110.0)).is_none());
}

#[test]
fn same_size_images_are_copied_unscaled_and_rgb_becomes_planes() {
    let gray = GrayImage::from_fn(64, 48, |x, y| Luma([(x * 3 + y) as u8]));
    let f = Frame::new(&DynamicImage::ImageLuma8(gray.clone()), 1, 64, 48);
    for (i, p) in gray.pixels().enumerate() {
        assert_eq!(f.pixels[i], p.0[0] as f32 / 255.0);
    }
    assert_eq!((f.mapping().scale_x, f.mapping().scale_y), (1.0, 1.0));

    let rgb = RgbImage::from_pixel(64, 48, Rgb([255, 0, 51]));
    let f = Frame::new(&DynamicImage::ImageRgb8(rgb), 3, 64, 48);
    let plane = 64 * 48;
    assert!(f.pixels[..plane].iter().all(|&v| v == 1.0));
    assert!(f.pixels[plane..2 * plane].iter().all(|&v| v == 0.0));
    assert!(f.pixels[2 * plane..].iter().all(|&v| v == 0.2));
}

/// A JPEG of `image` whose EXIF block says to show it turned by `orientation`
/// (6: a quarter turn clockwise, as a phone held upright writes it).
fn jpeg_with_exif_orientation(image: &DynamicImage, orientation: u16) -> Vec<u8> {
    let mut jpeg = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut jpeg), image::ImageFormat::Jpeg).unwrap();
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

#[test]
fn a_photo_is_turned_as_its_exif_orientation_says() {
    // Bright left half, dark right half, 64x32 as stored.
    let stored = DynamicImage::ImageLuma8(GrayImage::from_fn(64, 32, |x, _| Luma([if x < 32 { 250 } else { 5 }])));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("phone.jpg");
    std::fs::write(&path, jpeg_with_exif_orientation(&stored, 6)).unwrap();
    let shown = grin_infer::load_image(&path).unwrap().into_luma8();
    // Turned a quarter clockwise: 32 wide, 64 tall, the bright half on top.
    assert_eq!(shown.dimensions(), (32, 64));
    assert!(shown.get_pixel(16, 8).0[0] > 200 && shown.get_pixel(16, 56).0[0] < 50);

    let plain = dir.path().join("plain.jpg");
    std::fs::write(&plain, jpeg_with_exif_orientation(&stored, 1)).unwrap();
    let plain = grin_infer::load_image(&plain).unwrap();
    assert_eq!((plain.width(), plain.height()), (64, 32));
}
