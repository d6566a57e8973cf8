//! Letterboxing into the run size and mapping boxes back.

use grin_image::LETTERBOX_FILL;
use grin_infer::Frame;
use grin_net::Detection;
use image::{DynamicImage, GrayImage, Luma, Rgb, RgbImage};

fn det(x0: f32, y0: f32, x1: f32, y1: f32) -> Detection {
    Detection { x0, y0, x1, y1, score: 0.9, smile: 0.2 }
}

#[test]
fn a_wide_image_is_scaled_to_fit_and_centred_on_grey() {
    let img = DynamicImage::ImageLuma8(GrayImage::from_pixel(320, 120, Luma([255])));
    let f = Frame::new(&img, 1, 160, 120).unwrap();
    assert_eq!((f.width, f.height, f.channels, f.pixels.len()), (160, 120, 1, 160 * 120));
    // 320x120 fits as 160x60, 30 rows down: grey bars above and below.
    let grey = LETTERBOX_FILL as f32 / 255.0;
    assert!(f.pixels[..160 * 30].iter().all(|&v| v == grey));
    assert!(f.pixels[160 * 30..160 * 90].iter().all(|&v| v == 1.0));
    assert!(f.pixels[160 * 90..].iter().all(|&v| v == grey));
    let m = f.mapping();
    let back = m.to_source(det(10.0, 35.0, 50.0, 75.0)).unwrap();
    assert_eq!((back.x0, back.y0, back.x1, back.y1), (20.0, 10.0, 100.0, 90.0));
    assert_eq!((back.score, back.smile), (0.9, 0.2));
    // Clipped to the image, and dropped when it lies wholly in a bar.
    let clipped = m.to_source(det(100.0, 80.0, 170.0, 110.0)).unwrap();
    assert_eq!((clipped.x1, clipped.y1), (320.0, 120.0));
    assert!(m.to_source(det(10.0, 95.0, 50.0, 115.0)).is_none());
    assert!(m.to_source(det(10.0, 2.0, 50.0, 29.0)).is_none());
}

#[test]
fn same_size_images_are_copied_unscaled_and_rgb_becomes_planes() {
    let gray = GrayImage::from_fn(64, 48, |x, y| Luma([(x * 3 + y) as u8]));
    let f = Frame::new(&DynamicImage::ImageLuma8(gray.clone()), 1, 64, 48).unwrap();
    for (i, p) in gray.pixels().enumerate() {
        assert_eq!(f.pixels[i], p.0[0] as f32 / 255.0);
    }
    assert_eq!(f.mapping().0.scale(), (1.0, 1.0));

    let rgb = RgbImage::from_pixel(64, 48, Rgb([255, 0, 51]));
    let f = Frame::new(&DynamicImage::ImageRgb8(rgb), 3, 64, 48).unwrap();
    let plane = 64 * 48;
    assert!(f.pixels[..plane].iter().all(|&v| v == 1.0));
    assert!(f.pixels[plane..2 * plane].iter().all(|&v| v == 0.0));
    assert!(f.pixels[2 * plane..].iter().all(|&v| v == 0.2));
}
