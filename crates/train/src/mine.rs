//! Hard-negative mining (`grin mine`), as detector trainers have bootstrapped
//! their negatives since Viola-Jones: run a model over training photos,
//! keep its confident detections that are no face, and write each with its
//! context as an image a `kind = "negatives"` source reads (`mined = DIR`).
//!
//! Caltech leaves faces unannotated in crowds, and a real face mined as a
//! negative would teach the model to miss faces: only photos with at most
//! two annotated faces are mined (the rule the face-free crops of training
//! follow), and a detection must keep clear of every annotated face and
//! ignore region by half that face's size. Face-free image sets have no
//! faces: every detection there is false.

use crate::device_batch::upload;
use anyhow::{Context, Result};
use grin_features::{photos_of_split, FaceBox, FeatureConfig, HostBatch, OnBadSample, Sample, Split, LETTERBOX_FILL};
use grin_model::{detect, DecodeParams, Detection, Detector, DetectorBackend, DetectorSpec};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Photos with more annotated faces than this are not mined.
pub const MOST_FACES: usize = 2;

/// One JSON line per crop in the output folder: its file, the mined
/// detection's box in the crop's pixels and its score (what a later check,
/// such as `scripts/mine-negatives.sh`'s YuNet pass, reads).
pub const MANIFEST: &str = "mined.jsonl";

#[derive(Debug, Clone)]
pub struct MineOptions {
    /// Detections at least this confident are mined.
    pub score: f32,
    /// At most this many per photo, the most confident first.
    pub per_photo: usize,
    /// Photos per source (0: the whole training split).
    pub photos: usize,
    /// Each crop: this size (the training input's) around the detection, so
    /// that a negatives scene shows it at about the scale it was found at.
    pub crop: (u32, u32),
    pub out: PathBuf,
}

/// What one source gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Mined {
    pub source: String,
    pub photos: usize,
    /// Photos left out for holding more than [`MOST_FACES`] faces.
    pub crowded: usize,
    pub crops: usize,
}

/// Mines `model` (run at `spec`'s size) over the training photos of every
/// real source in `features`, writing PNG crops into `options.out`.
pub fn mine<B: DetectorBackend>(
    model: &Detector<B>,
    spec: &DetectorSpec,
    features: &FeatureConfig,
    options: &MineOptions,
    device: &B::Device,
) -> Result<Vec<Mined>> {
    std::fs::create_dir_all(&options.out).with_context(|| format!("{}: cannot create", options.out.display()))?;
    let (w, h, c) = (spec.width as u32, spec.height as u32, spec.channels as u32);
    let params = DecodeParams { score_threshold: options.score, ..spec.model.decode_params() };
    let manifest_path = options.out.join(MANIFEST);
    let mut manifest = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&manifest_path)
        .with_context(|| format!("{}: cannot open", manifest_path.display()))?;
    let mut report = Vec::new();
    for set in photos_of_split(features, Split::Train, options.photos)? {
        let mut mined = Mined { source: set.name.to_string(), photos: 0, crowded: 0, crops: 0 };
        let indices: Vec<usize> = (0..set.len()).collect();
        let mut batch = HostBatch::with_capacity(16, w, h, c);
        for chunk in indices.chunks(16) {
            let mut samples: Vec<(usize, Sample)> = Vec::new();
            for &i in chunk {
                match set.letterboxed(i, w, h, c) {
                    Ok(sample) if sample.boxes.len() > MOST_FACES => mined.crowded += 1,
                    Ok(sample) => samples.push((i, sample)),
                    Err(e) if features.on_bad_sample == OnBadSample::Skip => eprintln!("mine: skipped {e}"),
                    Err(e) => return Err(e).with_context(|| format!("mining {} photos", set.name)),
                }
            }
            if samples.is_empty() {
                continue;
            }
            batch.clear();
            samples.iter().for_each(|(_, s)| batch.push(s));
            let found = detect(model, upload::<B>(&batch, device).images, &params);
            for ((i, sample), found) in samples.iter().zip(found) {
                mined.photos += 1;
                let stem = set.image_path(*i).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let false_ones = found.iter().filter(|d| d.score >= options.score && clear_of(d, &sample.boxes));
                for (k, d) in false_ones.take(options.per_photo).enumerate() {
                    let name = format!("{}-{stem}-{w}x{h}-{k}.png", set.name);
                    let [x0, y0, x1, y1] = write_crop(sample, d, options.crop, &options.out.join(&name))?;
                    let line = serde_json::json!({"image": name, "box": [x0, y0, x1, y1], "score": d.score});
                    writeln!(manifest, "{line}").with_context(|| format!("{}: cannot write", MANIFEST))?;
                    mined.crops += 1;
                }
            }
        }
        report.push(mined);
    }
    Ok(report)
}

/// Whether `d` keeps clear of every face box (ignore regions included) by
/// half that face's size.
fn clear_of(d: &Detection, faces: &[FaceBox]) -> bool {
    faces.iter().all(|f| {
        let (mx, my) = ((f.x1 - f.x0) / 2.0, (f.y1 - f.y0) / 2.0);
        d.x1 < f.x0 - mx || d.x0 > f.x1 + mx || d.y1 < f.y0 - my || d.y0 > f.y1 + my
    })
}

/// A `crop`-sized window of `sample` centred on `d` (moved inside the frame
/// where it would leave it), every face in it (ignore regions included,
/// each grown by half its size) painted over with the letterbox grey, so a
/// negative scene never shows a face as background. Written as a PNG; the
/// detection's box in the crop's pixels is returned.
fn write_crop(sample: &Sample, d: &Detection, crop: (u32, u32), path: &Path) -> Result<[f32; 4]> {
    let (fw, fh, c) = (sample.width, sample.height, sample.channels as usize);
    let (cw, ch) = (crop.0.min(fw), crop.1.min(fh));
    let left = (((d.x0 + d.x1) / 2.0 - cw as f32 / 2.0).max(0.0) as u32).min(fw - cw);
    let top = (((d.y0 + d.y1) / 2.0 - ch as f32 / 2.0).max(0.0) as u32).min(fh - ch);
    let mut pixels = Vec::with_capacity((cw * ch) as usize * c);
    for y in top..top + ch {
        let row = (y * fw + left) as usize * c;
        pixels.extend_from_slice(&sample.pixels[row..row + cw as usize * c]);
    }
    for f in &sample.boxes {
        let (mx, my) = ((f.x1 - f.x0) / 2.0, (f.y1 - f.y0) / 2.0);
        let to_crop = |v: f32, origin: u32, side: u32| (v - origin as f32).clamp(0.0, side as f32) as usize;
        let (x0, x1) = (to_crop(f.x0 - mx, left, cw), to_crop(f.x1 + mx, left, cw));
        let (y0, y1) = (to_crop(f.y0 - my, top, ch), to_crop(f.y1 + my, top, ch));
        for y in y0..y1 {
            let row = (y * cw as usize + x0) * c;
            pixels[row..(y * cw as usize + x1) * c].fill(LETTERBOX_FILL);
        }
    }
    let color = if c == 1 { image::ExtendedColorType::L8 } else { image::ExtendedColorType::Rgb8 };
    image::save_buffer(path, &pixels, cw, ch, color).with_context(|| format!("{}: cannot write", path.display()))?;
    let (l, t) = (left as f32, top as f32);
    Ok([d.x0 - l, d.y0 - t, d.x1 - l, d.y1 - t])
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_features::Smile;

    fn face(x0: f32, y0: f32, x1: f32, y1: f32) -> FaceBox {
        FaceBox { x0, y0, x1, y1, smile: Smile::Unknown }
    }

    fn det(x0: f32, y0: f32, x1: f32, y1: f32) -> Detection {
        Detection { x0, y0, x1, y1, score: 0.9, smile: 0.5 }
    }

    #[test]
    fn a_detection_near_a_face_is_never_mined() {
        let faces = [face(100.0, 100.0, 140.0, 150.0)];
        assert!(!clear_of(&det(100.0, 100.0, 140.0, 150.0), &faces), "the face itself");
        assert!(!clear_of(&det(145.0, 110.0, 160.0, 125.0), &faces), "within half a face of it");
        assert!(clear_of(&det(170.0, 110.0, 185.0, 125.0), &faces), "well clear of it");
        assert!(clear_of(&det(10.0, 10.0, 20.0, 20.0), &[]), "no face at all");
    }

    #[test]
    fn a_crop_stays_inside_the_frame_and_has_the_asked_size() {
        let sample = Sample {
            width: 64,
            height: 48,
            channels: 1,
            pixels: (0..64 * 48).map(|i| i as u8).collect(),
            boxes: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.png");
        let b = write_crop(&sample, &det(0.0, 0.0, 6.0, 6.0), (32, 24), &path).unwrap();
        let img = image::open(&path).unwrap().to_luma8();
        assert_eq!(img.dimensions(), (32, 24));
        assert_eq!(img.get_pixel(0, 0).0[0], 0, "moved inside: it starts at the frame's corner");
        assert_eq!(b, [0.0, 0.0, 6.0, 6.0]);
    }

    #[test]
    fn faces_in_a_crop_are_painted_over() {
        let face = FaceBox { x0: 40.0, y0: 10.0, x1: 50.0, y1: 20.0, smile: Smile::No };
        let sample = Sample { width: 64, height: 48, channels: 1, pixels: vec![7; 64 * 48], boxes: vec![face] };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.png");
        write_crop(&sample, &det(10.0, 20.0, 16.0, 26.0), (64, 48), &path).unwrap();
        let img = image::open(&path).unwrap().to_luma8();
        assert_eq!(img.get_pixel(45, 15).0[0], LETTERBOX_FILL, "the face");
        assert_eq!(img.get_pixel(37, 8).0[0], LETTERBOX_FILL, "half a face around it");
        assert_eq!(img.get_pixel(12, 22).0[0], 7, "the mined detection stays");
    }
}
