//! `--draw`: the source image with each detection outlined, green when the
//! face smiles and orange when it does not.

use grin_net::Detection;
use image::{DynamicImage, Rgb, RgbImage};
use std::path::{Path, PathBuf};

const SMILING: Rgb<u8> = Rgb([40, 220, 60]);
const NOT_SMILING: Rgb<u8> = Rgb([255, 140, 0]);

pub(crate) fn draw(image: &DynamicImage, detections: &[Detection]) -> RgbImage {
    let mut out = image.to_rgb8();
    // Lines scale with the picture so they stay visible on large photos.
    let thickness = (out.width().min(out.height()) / 200).max(1);
    for d in detections {
        let colour = if d.smile >= 0.5 { SMILING } else { NOT_SMILING };
        outline(&mut out, d, thickness, colour);
    }
    out
}

fn outline(img: &mut RgbImage, d: &Detection, thickness: u32, colour: Rgb<u8>) {
    let (w, h) = (img.width(), img.height());
    if w == 0 || h == 0 {
        return;
    }
    let px = |v: f32, side: u32| (v.round().max(0.0) as u32).min(side - 1);
    let (x0, y0, x1, y1) = (px(d.x0, w), px(d.y0, h), px(d.x1, w), px(d.y1, h));
    for t in 0..thickness {
        for x in x0..=x1 {
            img.put_pixel(x, (y0 + t).min(h - 1), colour);
            img.put_pixel(x, y1.saturating_sub(t), colour);
        }
        for y in y0..=y1 {
            img.put_pixel((x0 + t).min(w - 1), y, colour);
            img.put_pixel(x1.saturating_sub(t), y, colour);
        }
    }
}

/// What `--draw` says once it has written `target`: where, and what the
/// colours mean (each face's box, score and smile are in the report).
pub(crate) fn wrote(target: &Path, detections: &[Detection]) -> String {
    let smiling = detections.iter().filter(|d| d.smile >= 0.5).count();
    format!(
        "wrote {}: {} face(s) outlined, {smiling} green (smiling), {} orange (not smiling)",
        target.display(),
        detections.len(),
        detections.len() - smiling
    )
}

/// Where image `index` (0-based) of `count` is drawn: `out` itself for a
/// single image, else `out` with `-1`, `-2`, ... before the extension.
pub(crate) fn output_path(out: &Path, index: usize, count: usize) -> PathBuf {
    if count == 1 {
        return out.to_path_buf();
    }
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match out.extension() {
        Some(ext) => format!("{stem}-{}.{}", index + 1, ext.to_string_lossy()),
        None => format!("{stem}-{}", index + 1),
    };
    out.with_file_name(name)
}

/// The format a drawing at `target` is written in, from its extension; a
/// folder, a missing folder or a format grin does not write is refused,
/// naming `--draw`. Checked before detection runs, and again when writing.
pub(crate) fn format_of(target: &Path) -> anyhow::Result<image::ImageFormat> {
    grin_image::picture_format(target, "--draw").map_err(anyhow::Error::msg)
}

/// Draws `detections` on `image` and writes the drawing in the format
/// `target`'s extension names, through `grin_output`: never over one of the
/// `inputs` (the photos). Its RGB copy and the encoding are asked for
/// first: a photo detection had room for aborted here (issue 90, round 9).
/// Every error names `target`.
pub(crate) fn save(
    image: &DynamicImage,
    detections: &[Detection],
    target: &Path,
    inputs: &[&Path],
) -> anyhow::Result<()> {
    let format = format_of(target)?;
    let size = (u64::from(image.width()), u64::from(image.height()));
    grin_image::check_picture(target, "--draw", format, size, 2).map_err(anyhow::Error::msg)?;
    let bytes = grin_image::encode_picture(&draw(image, detections), target, format).map_err(anyhow::Error::msg)?;
    grin_output::write_file(target, inputs, &bytes).map_err(|e| anyhow::anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_file_and_the_colours() {
        let d = |smile| Detection { x0: 0.0, y0: 0.0, x1: 9.0, y1: 9.0, score: 0.9, smile };
        let text = wrote(Path::new("out.png"), &[d(0.9), d(0.1), d(0.2)]);
        assert_eq!(text, "wrote out.png: 3 face(s) outlined, 1 green (smiling), 2 orange (not smiling)");
    }

    #[test]
    fn output_paths_are_numbered_only_for_several_images() {
        let out = Path::new("dir/out.png");
        assert_eq!(output_path(out, 0, 1), PathBuf::from("dir/out.png"));
        assert_eq!(output_path(out, 1, 3), PathBuf::from("dir/out-2.png"));
    }

    #[test]
    fn outline_colours_the_box_edges_only() {
        let img = DynamicImage::ImageRgb8(RgbImage::new(20, 20));
        let d = Detection { x0: 5.0, y0: 5.0, x1: 14.0, y1: 14.0, score: 0.9, smile: 0.9 };
        let out = draw(&img, &[d]);
        assert_eq!(*out.get_pixel(5, 10), SMILING);
        assert_eq!(*out.get_pixel(14, 5), SMILING);
        assert_eq!(*out.get_pixel(10, 10), Rgb([0, 0, 0]));
    }
}
