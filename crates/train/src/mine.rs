//! Hard-negative mining (`grin mine`), as detector trainers have bootstrapped
//! their negatives since Viola-Jones: run a model over training photos,
//! keep its confident detections that are no face, and write each with its
//! context as an image a `kind = "negatives"` source reads (`mined = DIR`).
//!
//! Caltech leaves faces unannotated in crowds, and a real face mined as a
//! negative would teach the model to miss faces: only photos with at most
//! two annotated faces are mined (the rule the face-free crops of training
//! follow), and a detection must keep clear of every annotated face and
//! ignore region by half that face's size. Portraits (CelebA) hold one
//! annotated face that fills the frame: there a detection may not reach a
//! tenth of its area into the face box ([`Clearance`]). Face-free image
//! sets have no faces: every detection there is false.

use crate::device_batch::upload;
use anyhow::{bail, Context, Result};
use grin_features::{FaceBox, FeatureConfig, HeldOutPhoto, HostBatch, Sample, Split};
use grin_image::{OnBadSample, LETTERBOX_FILL};
use grin_model::{detect, Detector, DetectorBackend};
use grin_net::{DecodeParams, Detection, DetectorSpec, SecondLook};
use std::path::{Path, PathBuf};

/// Photos with more annotated faces than this are not mined.
pub const MOST_FACES: usize = 2;

/// One JSON line per crop in the output folder: its file, the mined
/// detection's box in the crop's pixels and its score (what a later check,
/// such as `scripts/mine-negatives.sh`'s YuNet pass, reads).
pub(crate) const MANIFEST: &str = "mined.jsonl";

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
    /// Each photo at the photo default (`grin_terms::photo::own_size`, at
    /// most this many pixels), one at a time, instead of all at the model's
    /// size: where `grin-detect` meets a photo, so where its false
    /// detections are.
    pub own_size: Option<u64>,
    /// Each crop cut from the photo as this second look cuts it (its
    /// context around the detection, the detection at the look's scale),
    /// instead of from the frame at the scale found: the negatives that
    /// teach the look what it is asked.
    pub as_looked: Option<SecondLook>,
    pub out: PathBuf,
}

/// How far a mined detection keeps from a face, and what a crop paints over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Clearance {
    /// Each face box grown by this share of its size on every side.
    pub grow: f32,
    /// The share of the detection's area allowed inside a grown face box.
    pub inside: f32,
}

/// Photos: an unannotated neighbour may stand beside any face, so half a
/// face around it, and nothing of the detection inside.
pub(crate) const PHOTOS: Clearance = Clearance { grow: 0.5, inside: 0.0 };

/// Portraits: half a face around one that fills the frame leaves nothing to
/// mine, and their false detections sit right beside it (neck, collar,
/// hair, background blobs): the face box itself, a tenth of the detection
/// inside it at most.
pub(crate) const PORTRAITS: Clearance = Clearance { grow: 0.0, inside: 0.1 };

/// Photos in one batch at the model's size.
const PER_BATCH: usize = 16;

/// What one source gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Mined {
    pub source: String,
    pub photos: usize,
    /// Photos left out for holding more than [`MOST_FACES`] faces.
    pub crowded: usize,
    /// Photos that could not be read, skipped (`on_bad_sample = "skip"`).
    pub skipped: usize,
    pub crops: usize,
}

/// Makes the mining's folder and holds it for this mining alone: two at
/// once shared its mark and its list, each list replacing the other's
/// (issue 90, round 19). Its own two files are never written through a
/// link of their name (round 16: the mark went into a user's notes) nor
/// found to be a folder or a FIFO only after the mining (round 17).
fn hold_out_folder(out: &Path) -> Result<grin_output::HeldFolder> {
    let held = grin_output::hold_folder(out)?;
    for name in [grin_features::MINING_MARK, MANIFEST] {
        let path = out.join(name);
        match path.symlink_metadata() {
            Ok(m) if m.is_symlink() => {
                bail!("{}: is a link; grin mine writes its own {name} here: remove the link", path.display())
            }
            Ok(m) if !m.is_file() => {
                bail!("{}: is no plain file; grin mine writes its own {name} here: remove it", path.display())
            }
            _ => {}
        }
    }
    Ok(held)
}

/// Mines `model` (run at `spec`'s size, or each photo's own with
/// `options.own_size`) over the training photos of every
/// real source in `features`, writing PNG crops into `options.out`.
pub fn mine<B: DetectorBackend>(
    model: &Detector<B>,
    spec: &DetectorSpec,
    features: &FeatureConfig,
    options: &MineOptions,
    device: &B::Device,
) -> Result<Vec<Mined>> {
    // The photos first: a refused mining leaves no empty folder behind (round 10).
    let sets = crate::photo_eval::photo_sets(features, Split::Train, options.photos)?;
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    if options.own_size.is_none() {
        crate::photo_eval::ask_for_frames(spec, (spec.width, spec.height), PER_BATCH)?;
    }
    let _held = hold_out_folder(&options.out)?;
    // Said in the folder until the last crop and the manifest are written.
    let mark = options.out.join(grin_features::MINING_MARK);
    let unfinished = "grin mine is writing crops here, or was stopped before it ended: run it again\n";
    grin_output::write_file(&mark, &[], unfinished.as_bytes())?;
    let (w, h, c) = (spec.width as u32, spec.height as u32, spec.channels as u32);
    let params = DecodeParams { score_threshold: options.score, ..spec.model.decode_params() };
    // The manifest lists this mining's crops only, written whole at the end:
    // appended to, mining twice into one folder listed each crop twice.
    let mut manifest = Vec::new();
    let mut report = Vec::new();
    for set in sets {
        let mut mined = Mined { source: set.name.to_string(), photos: 0, crowded: 0, skipped: 0, crops: 0 };
        let clearance = if set.portraits { PORTRAITS } else { PHOTOS };
        // A batch holds one frame size: the model's for every photo, or
        // each photo's own, one photo a batch.
        let per_batch = if options.own_size.is_some() { 1 } else { PER_BATCH };
        let indices: Vec<usize> = (0..set.len()).collect();
        for chunk in indices.chunks(per_batch) {
            let mut samples: Vec<(usize, HeldOutPhoto)> = Vec::new();
            for &i in chunk {
                // Faces a second detector found (`crops.unannotated`) count as
                // faces here: toward a crowd, kept clear of and painted over.
                match set.frame(i, (w, h), options.own_size).and_then(|(w, h)| set.letterboxed_with_found(i, w, h, c)) {
                    Ok(photo) if photo.sample.boxes.len() + photo.found.len() > MOST_FACES => mined.crowded += 1,
                    Ok(mut photo) => {
                        photo.sample.boxes.append(&mut photo.found);
                        samples.push((i, photo));
                    }
                    Err(e) if features.on_bad_sample == OnBadSample::Skip => {
                        eprintln!("mine: skipped {e:#}");
                        mined.skipped += 1;
                    }
                    Err(e) => return Err(e).with_context(|| format!("mining {} photos", set.name)),
                }
            }
            let Some((_, first)) = samples.first() else { continue };
            let (fw, fh) = (first.sample.width, first.sample.height);
            let mut batch = HostBatch::with_capacity(samples.len(), fw, fh, c);
            samples.iter().for_each(|(_, p)| batch.push(&p.sample));
            crate::photo_eval::ask_for_pass(spec, &batch)?;
            let found = detect(model, upload::<B>(&batch, device).images, &params);
            for ((i, photo), found) in samples.iter().zip(found) {
                let sample = &photo.sample;
                mined.photos += 1;
                let stem = set.image_path(*i).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let false_ones =
                    found.iter().filter(|d| d.score >= options.score && clear_of(d, &sample.boxes, clearance));
                for (k, d) in false_ones.take(options.per_photo).enumerate() {
                    // The photo's index in its set as well as its name: FDDB
                    // names photos `img_N` in each day's folder, and a second
                    // photo's crops replaced the first's (issue 90, round 10).
                    let name = format!("{}-{i}-{stem}-{fw}x{fh}-{k}.png", set.name);
                    let crop = match &options.as_looked {
                        Some(look) => as_looked(photo, d, look, options.crop),
                        None => frame_window(sample, d, options.crop),
                    };
                    let path = options.out.join(&name);
                    let [x0, y0, x1, y1] = write_crop(crop, sample, d, clearance, &path, set.image_path(*i))?;
                    manifest.push(serde_json::json!({"image": name, "box": [x0, y0, x1, y1], "score": d.score}));
                    mined.crops += 1;
                }
            }
        }
        report.push(mined);
    }
    grin_output::write_with(&options.out.join(MANIFEST), &[], |f| {
        manifest.iter().try_for_each(|line| writeln!(f, "{line}"))
    })?;
    std::fs::remove_file(&mark).with_context(|| format!("{}: cannot remove", mark.display()))?;
    Ok(report)
}

/// Face `f` grown by `grow` of its size on every side.
fn grown(f: &FaceBox, grow: f32) -> [f32; 4] {
    let (mx, my) = ((f.x1 - f.x0) * grow, (f.y1 - f.y0) * grow);
    [f.x0 - mx, f.y0 - my, f.x1 + mx, f.y1 + my]
}

/// Whether `d` keeps clear of every face box (ignore regions included) as
/// `c` asks.
fn clear_of(d: &Detection, faces: &[FaceBox], c: Clearance) -> bool {
    let area = (d.x1 - d.x0) * (d.y1 - d.y0);
    faces.iter().all(|f| {
        let [x0, y0, x1, y1] = grown(f, c.grow);
        let inside = (d.x1.min(x1) - d.x0.max(x0)).max(0.0) * (d.y1.min(y1) - d.y0.max(y0)).max(0.0);
        inside <= c.inside * area
    })
}

/// A crop's pixels and where it lies in the frame: a frame point `v`
/// lands at `(v - origin) * scale` in the crop.
struct Crop {
    pixels: Vec<u8>,
    width: u32,
    height: u32,
    channels: u32,
    origin: [f32; 2],
    scale: f32,
}

impl Crop {
    fn to_crop(&self, [x0, y0, x1, y1]: [f32; 4]) -> [f32; 4] {
        let [ox, oy] = self.origin;
        let s = self.scale;
        [(x0 - ox) * s, (y0 - oy) * s, (x1 - ox) * s, (y1 - oy) * s]
    }
}

/// A `crop`-sized window of `sample` centred on `d` (moved inside the frame
/// where it would leave it), at the scale `d` was found.
fn frame_window(sample: &Sample, d: &Detection, crop: (u32, u32)) -> Crop {
    let (fw, fh, c) = (sample.width, sample.height, sample.channels as usize);
    let (cw, ch) = (crop.0.min(fw), crop.1.min(fh));
    let left = (((d.x0 + d.x1) / 2.0 - cw as f32 / 2.0).max(0.0) as u32).min(fw - cw);
    let top = (((d.y0 + d.y1) / 2.0 - ch as f32 / 2.0).max(0.0) as u32).min(fh - ch);
    let pixels = window_of(&sample.pixels, fw, c, [left, top, cw, ch]);
    Crop { pixels, width: cw, height: ch, channels: sample.channels, origin: [left as f32, top as f32], scale: 1.0 }
}

/// A `crop`-sized cut of `photo`'s picture around `d` at the scale `look`
/// sees it (`d`'s longer side becomes `look.side / look.context` px): the
/// look's window, grown to the crop's longer side, cut as the look cuts
/// (`Letterbox::cut`), its middle kept.
fn as_looked(photo: &HeldOutPhoto, d: &Detection, look: &SecondLook, crop: (u32, u32)) -> Crop {
    let side = crop.0.max(crop.1);
    let [x0, y0, x1, y1] = look.window(d);
    let grow = 0.5 * (x1 - x0) * (side as f32 / look.side as f32 - 1.0);
    let window = [x0 - grow, y0 - grow, x1 + grow, y1 + grow];
    let cut = photo.placement.cut(&photo.source, window, side, false);
    let (left, top) = ((side - crop.0) / 2, (side - crop.1) / 2);
    let pixels = window_of(&cut.pixels, side, cut.channels as usize, [left, top, crop.0, crop.1]);
    // At least a pixel wide, so a degenerate box cannot make the scale infinite.
    let scale = side as f32 / (window[2] - window[0]).max(1.0);
    let origin = [window[0] + left as f32 / scale, window[1] + top as f32 / scale];
    Crop { pixels, width: crop.0, height: crop.1, channels: cut.channels, origin, scale }
}

/// The `[left, top, width, height]` window of an image `image_width` px
/// wide with `c` interleaved channels; it must lie inside.
fn window_of(pixels: &[u8], image_width: u32, c: usize, [left, top, width, height]: [u32; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity((width * height) as usize * c);
    for y in top..top + height {
        let row = (y * image_width + left) as usize * c;
        out.extend_from_slice(&pixels[row..row + width as usize * c]);
    }
    out
}

/// `crop` with every face of `sample` in it (ignore regions included, each
/// grown as `clearance` says) painted over with the letterbox grey, so a
/// negative scene never shows a face as background. Written as a PNG; the
/// detection's box in the crop's pixels is returned. Never over `photo`,
/// the photo it was cut from.
fn write_crop(
    mut crop: Crop,
    sample: &Sample,
    d: &Detection,
    clearance: Clearance,
    path: &Path,
    photo: &Path,
) -> Result<[f32; 4]> {
    let (cw, c) = (crop.width as usize, crop.channels as usize);
    for f in &sample.boxes {
        let [gx0, gy0, gx1, gy1] = crop.to_crop(grown(f, clearance.grow));
        let (x0, x1) = (gx0.clamp(0.0, cw as f32) as usize, gx1.clamp(0.0, cw as f32) as usize);
        let (y0, y1) = (gy0.clamp(0.0, crop.height as f32) as usize, gy1.clamp(0.0, crop.height as f32) as usize);
        for y in y0..y1 {
            crop.pixels[(y * cw + x0) * c..(y * cw + x1) * c].fill(LETTERBOX_FILL);
        }
    }
    let color = if c == 1 { image::ExtendedColorType::L8 } else { image::ExtendedColorType::Rgb8 };
    let mut png = std::io::Cursor::new(Vec::new());
    image::write_buffer_with_format(&mut png, &crop.pixels, crop.width, crop.height, color, image::ImageFormat::Png)
        .with_context(|| format!("{}: cannot encode", path.display()))?;
    grin_output::write_file(path, &[photo], png.get_ref())?;
    Ok(crop.to_crop(d.corners()))
}

#[cfg(test)]
mod tests;
