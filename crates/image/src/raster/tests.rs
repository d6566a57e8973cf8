use super::*;

/// `image`'s triangle filter, the resizer grin used before: the reference.
fn reference(image: &Raster, width: u32, height: u32) -> Vec<u8> {
    use image::imageops::{resize, FilterType};
    let (w, h) = (image.width, image.height);
    if image.channels == 1 {
        let buf = image::GrayImage::from_raw(w, h, image.pixels.clone()).unwrap();
        resize(&buf, width, height, FilterType::Triangle).into_raw()
    } else {
        let buf = image::RgbImage::from_raw(w, h, image.pixels.clone()).unwrap();
        resize(&buf, width, height, FilterType::Triangle).into_raw()
    }
}

/// A textured test picture: gradients, a checkerboard and hashed noise.
fn picture(width: u32, height: u32, channels: u32) -> Raster {
    let mut pixels = Vec::with_capacity((width * height * channels) as usize);
    for y in 0..height {
        for x in 0..width {
            for k in 0..channels {
                let noise = (x.wrapping_mul(73_856_093) ^ y.wrapping_mul(19_349_663) ^ k.wrapping_mul(83_492_791)) % 64;
                let check = if (x / 7 + y / 5) % 2 == 0 { 60 } else { 0 };
                pixels.push(((x * 255 / width + y * 97 / height) / 2 + check + noise).min(255) as u8);
            }
        }
    }
    Raster { width, height, channels, pixels }
}

#[test]
fn rgb_luma_is_within_a_level_of_image_crates_own() {
    // A lattice over the colour cube, corners included.
    let levels: Vec<u8> = (0..=255).step_by(5).chain([254, 255]).collect();
    let mut pixels = Vec::new();
    for &r in &levels {
        for &g in &levels {
            for &b in &levels {
                pixels.extend([r, g, b]);
            }
        }
    }
    let n = pixels.len() / 3;
    let image = image::DynamicImage::ImageRgb8(image::RgbImage::from_raw(n as u32, 1, pixels).unwrap());
    let (ours, theirs) = (Raster::from_image(&image, 1).unwrap().pixels, image.to_luma8().into_raw());
    let apart: Vec<i32> = ours.iter().zip(&theirs).map(|(a, b)| (*a as i32 - *b as i32).abs()).collect();
    assert!(apart.iter().all(|d| *d <= 1), "more than one level apart");
    let equal = apart.iter().filter(|d| **d == 0).count() as f64 / n as f64;
    assert!(equal > 0.99, "equal for {equal:.4} of colours");
}

#[test]
fn the_simd_luma_is_the_plain_loops_at_every_length() {
    for n in (0..70).chain([640 * 480 + 5]) {
        let rgb: Vec<u8> = (0..3 * n as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut plain = vec![0u8; n];
        luma_into(&rgb, &mut plain);
        assert_eq!(luma_of_rgb(&rgb).unwrap(), plain, "{n} pixels");
    }
}

#[test]
fn the_simd_resizer_matches_the_triangle_filter_within_a_level() {
    for (w, h, c, ow, oh) in [
        (640, 480, 1, 320, 240),
        (640, 480, 3, 320, 240),
        // Exact halves of one plane take `halve_grey`, edges and all.
        (64, 48, 1, 32, 24),
        (6, 4, 1, 3, 2),
        (4, 2, 1, 2, 1),
        (2, 2, 1, 1, 1),
        (600, 440, 1, 320, 235),
        (89, 109, 1, 196, 240),
        (1024, 768, 1, 160, 120),
        (320, 240, 3, 640, 480),
    ] {
        let image = picture(w, h, c);
        let (new, old) = (resize(&image, ow, oh), reference(&image, ow, oh));
        assert_eq!(new.len(), old.len());
        let diffs: Vec<i32> = new.iter().zip(&old).map(|(a, b)| (*a as i32 - *b as i32).abs()).collect();
        let max = diffs.iter().max().copied().unwrap_or(0);
        let mean = diffs.iter().sum::<i32>() as f64 / diffs.len() as f64;
        // Integer coefficients against image's f32 ones: at most one grey level apart.
        assert!(max <= 1 && mean <= 0.35, "{w}x{h}x{c} -> {ow}x{oh}: max {max}, mean {mean:.3}");
    }
}

/// Issue 90, round 7: a buffer the process cannot have is an error naming
/// its size, not an abort (the conversion of a frame that was read).
#[test]
fn a_buffer_past_the_memory_left_is_an_error() {
    let e = zeroed(isize::MAX as usize).unwrap_err();
    assert_eq!(e, OutOfMemory { bytes: isize::MAX as usize });
    assert!(e.to_string().contains("past the memory this process may take"), "{e}");
    assert_eq!(zeroed(3).unwrap(), [0, 0, 0]);
}
