//! Real photographs as training scenes: Caltech WebFaces (five landmarks a
//! face) and CelebA's aligned portraits (the `Smiling` attribute), cut into
//! random crops around their faces the way SSD and YuNet sample WIDER FACE.
//!
//! A crop picks one face, draws the size that face will have in the output
//! (log-uniform), and places a window of the output's aspect around it.
//! Where the window leaves the photo, the letterbox grey fills in: that is
//! what a whole photo looks like once `grin-detect` letterboxes it. Faces
//! that the crop cuts off or shrinks below a learnable size become ignore
//! regions ([`Smile::Ignore`]) rather than background.
//!
//! Un-annotated faces: Caltech does not annotate every small or background
//! face. Crops are therefore centred on an annotated face, which keeps most
//! of each crop near the people the annotators looked at. Face-free crops
//! (`crops.background`, off by default) are cut only from photos with at most
//! two annotated faces, and keep clear of those faces by half a face: group
//! photos, where faces go un-annotated, never give background.

use crate::annotations::{
    bad_box, letterbox, malformed, numbered, parse_celeba_attr, read_text, resize, Annotated, AnnotatedSource, Entry,
    Problems, LETTERBOX_FILL,
};
use crate::config::{FeatureConfig, OnBadSample, PhotoCrops, SourceConfig, Split};
use crate::crops::{check_split, decode, split_of_path, Raster};
use crate::error::{FeatureError, SkipCounts};
use crate::sample::{FaceBox, Sample, Smile, MAX_BOXES};
use crate::source::{SampleRng, Source};
use rand::Rng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Side of the square face box per unit of eye distance (Caltech's SOURCE.md).
pub const SIDE_PER_EYE_DISTANCE: f32 = 2.2;

/// Caltech's rule: a square centred at x = the eyes' midpoint and y = the
/// mean of the eye level and the mouth's y, with a side of 2.2 eye distances.
/// Returns `[x0, y0, x1, y1]`.
pub fn landmarks_to_box(left_eye: [f32; 2], right_eye: [f32; 2], mouth: [f32; 2]) -> [f32; 4] {
    let cx = (left_eye[0] + right_eye[0]) / 2.0;
    let eye_y = (left_eye[1] + right_eye[1]) / 2.0;
    let cy = (eye_y + mouth[1]) / 2.0;
    let eyes = (right_eye[0] - left_eye[0]).hypot(right_eye[1] - left_eye[1]);
    let half = eyes * SIDE_PER_EYE_DISTANCE / 2.0;
    [cx - half, cy - half, cx + half, cy + half]
}

/// Where CelebA's alignment puts the landmarks, as fractions of the image:
/// the means of `list_landmarks_align_celeba.txt` (178x218 images: eyes at
/// (69, 111) and (108, 111), mouth corners at y 152). The box then follows
/// the same rule as Caltech's, so both sources teach one box convention.
pub const CELEBA_ALIGNED_LEFT_EYE: [f32; 2] = [69.0 / 178.0, 111.0 / 218.0];
pub const CELEBA_ALIGNED_RIGHT_EYE: [f32; 2] = [108.0 / 178.0, 111.0 / 218.0];
pub const CELEBA_ALIGNED_MOUTH: [f32; 2] = [88.5 / 178.0, 152.0 / 218.0];

/// The face box of an aligned CelebA image of `width` x `height`.
pub fn celeba_aligned_box(width: u32, height: u32) -> [f32; 4] {
    let at = |p: [f32; 2]| [p[0] * width as f32, p[1] * height as f32];
    landmarks_to_box(at(CELEBA_ALIGNED_LEFT_EYE), at(CELEBA_ALIGNED_RIGHT_EYE), at(CELEBA_ALIGNED_MOUTH))
}

/// `WebFaces_GroundThruth.txt`: one face a line,
/// `image Leye-x Leye-y Reye-x Reye-y nose-x nose-y mouth-x mouth-y`.
/// Faces of one image are gathered in file order; an image with a bad line
/// is left out whole under `skip` (dropping one face would make it background).
pub fn parse_caltech(
    text: &str,
    path: &Path,
    images: &Path,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Entry>, FeatureError> {
    let problems = Problems { on_bad, skips };
    let mut order: Vec<String> = Vec::new();
    let mut faces: HashMap<String, Vec<Annotated>> = HashMap::new();
    let mut bad: std::collections::HashSet<String> = Default::default();
    for (line, text) in numbered(text) {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let name = fields[0].to_string();
        if !faces.contains_key(&name) {
            order.push(name.clone());
            faces.insert(name.clone(), Vec::new());
        }
        match caltech_face(&fields, path, line) {
            Ok(face) => faces.get_mut(&name).expect("inserted above").push(Annotated { face, line }),
            Err(e) => {
                problems.report(e)?;
                bad.insert(name);
            }
        }
    }
    Ok(order
        .into_iter()
        .filter(|name| !bad.contains(name))
        .map(|name| {
            let faces = faces.remove(&name).unwrap_or_default();
            Entry { image: images.join(&name), faces }
        })
        .collect())
}

fn caltech_face(fields: &[&str], path: &Path, line: usize) -> Result<FaceBox, FeatureError> {
    if fields.len() != 9 {
        return Err(malformed(
            path,
            line,
            format!("expected `image` and 8 landmark coordinates, found {} fields", fields.len()),
        ));
    }
    let mut v = [0f32; 8];
    for (k, field) in fields[1..].iter().enumerate() {
        v[k] = match field.parse::<f32>() {
            Ok(x) if x.is_finite() => x,
            _ => return Err(malformed(path, line, format!("landmark coordinate {field:?} is not a finite number"))),
        };
    }
    let [x0, y0, x1, y1] = landmarks_to_box([v[0], v[1]], [v[2], v[3]], [v[6], v[7]]);
    if x1 - x0 < 1.0 {
        return Err(bad_box(path, line, "the eyes are less than half a pixel apart: no face box"));
    }
    Ok(FaceBox { x0, y0, x1, y1, smile: Smile::Unknown })
}

/// Every image of CelebA's attribute file, with its smile. Boxes are left
/// empty here: they depend on the decoded size ([`celeba_aligned_box`]).
fn parse_celeba_aligned(
    text: &str,
    path: &Path,
    images: &Path,
    problems: &Problems,
) -> Result<Vec<Entry>, FeatureError> {
    let smiles = parse_celeba_attr(text, path, problems)?;
    let mut names: Vec<(&String, &Smile)> = smiles.iter().collect();
    names.sort_by(|a, b| a.0.cmp(b.0));
    Ok(names
        .into_iter()
        .map(|(name, smile)| {
            let face = FaceBox { x0: 0.0, y0: 0.0, x1: 0.0, y1: 0.0, smile: *smile };
            Entry { image: images.join(name), faces: vec![Annotated { face, line: 0 }] }
        })
        .collect())
}

/// How a source's face boxes relate to the decoded image.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BoxRule {
    /// Boxes are in image pixels, as annotated.
    Annotated,
    /// One face where CelebA's alignment puts it.
    CelebaAligned,
}

/// A decoded photo, shrunk to `max_side`, with its faces in its pixels.
#[derive(Debug)]
struct Photo {
    image: Raster,
    faces: Vec<FaceBox>,
}

/// Random crops of real photos.
pub struct PhotoSource {
    name: &'static str,
    annotations: PathBuf,
    entries: Vec<Entry>,
    rule: BoxRule,
    crops: PhotoCrops,
    width: u32,
    height: u32,
    channels: u32,
    /// Each photo is decoded once, on first use, by whichever worker needs it.
    cache: Vec<OnceLock<Arc<Photo>>>,
    load_skips: SkipCounts,
}

impl std::fmt::Debug for PhotoSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhotoSource").field("name", &self.name).field("photos", &self.entries.len()).finish()
    }
}

impl PhotoSource {
    pub fn new(cfg: &FeatureConfig, split: Split) -> Result<PhotoSource, FeatureError> {
        let skips = SkipCounts::default();
        let (name, annotations, entries, rule, crops) = parse_source(&cfg.source, cfg, &skips)?;
        check_crops(&crops)?;
        check_split(&cfg.split)?;
        let entries: Vec<Entry> =
            entries.into_iter().filter(|e| split_of_path(&e.image, &cfg.split) == split).collect();
        if entries.is_empty() {
            return Err(FeatureError::Config(format!(
                "{}: no annotated photos fall in the {split:?} split",
                annotations.display()
            )));
        }
        let cache = (0..entries.len()).map(|_| OnceLock::new()).collect();
        Ok(PhotoSource {
            name,
            annotations,
            entries,
            rule,
            crops,
            width: cfg.width,
            height: cfg.height,
            channels: cfg.channels,
            cache,
            load_skips: skips,
        })
    }

    fn photo(&self, index: usize) -> Result<Arc<Photo>, FeatureError> {
        if let Some(photo) = self.cache[index].get() {
            return Ok(photo.clone());
        }
        let photo =
            Arc::new(load_photo(&self.entries[index], self.rule, self.channels, &self.crops, &self.annotations)?);
        Ok(self.cache[index].get_or_init(|| photo).clone())
    }
}

impl Source for PhotoSource {
    fn name(&self) -> &'static str {
        self.name
    }

    fn len(&self) -> Option<usize> {
        Some(self.entries.len())
    }

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, FeatureError> {
        // Photos are drawn at random, not by index, so that every worker sees
        // every photo early (the cache fills evenly) and a run of steps is
        // not one photo's.
        let pick = rng.random_range(0..self.entries.len());
        let photo = self.photo(pick)?;
        Ok(crop_scene(&photo.image, &photo.faces, self.width, self.height, &self.crops, rng))
    }

    fn load_skips(&self) -> Option<&SkipCounts> {
        Some(&self.load_skips)
    }
}

type Parsed = (&'static str, PathBuf, Vec<Entry>, BoxRule, PhotoCrops);

fn parse_source(source: &SourceConfig, cfg: &FeatureConfig, skips: &SkipCounts) -> Result<Parsed, FeatureError> {
    let problems = Problems { on_bad: cfg.on_bad_sample, skips };
    match source {
        SourceConfig::Caltech { root, crops } => {
            let path = root.join("WebFaces_GroundThruth.txt");
            let entries = parse_caltech(&read_text(&path)?, &path, &root.join("images"), cfg.on_bad_sample, skips)?;
            Ok(("caltech", path, entries, BoxRule::Annotated, crops.clone()))
        }
        SourceConfig::CelebaAligned { images, attr, crops } => {
            let entries = parse_celeba_aligned(&read_text(attr)?, attr, images, &problems)?;
            Ok(("celeba-aligned", attr.clone(), entries, BoxRule::CelebaAligned, crops.clone()))
        }
        _ => Err(FeatureError::Config(
            "PhotoSource needs `features.source.kind = \"caltech\"` or `\"celeba_aligned\"`".into(),
        )),
    }
}

fn check_crops(c: &PhotoCrops) -> Result<(), FeatureError> {
    let bad = |key: &str, why: String| FeatureError::Config(format!("key `features.source.crops.{key}`: {why}"));
    if !(c.min_face >= 2.0 && c.min_face <= c.max_face && c.max_face <= 4096.0) {
        return Err(bad(
            "min_face",
            format!("need 2 <= min_face <= max_face <= 4096, got {}..{}", c.min_face, c.max_face),
        ));
    }
    if !(c.max_upscale.is_finite() && (0.1..=16.0).contains(&c.max_upscale)) {
        return Err(bad("max_upscale", format!("{} must be within 0.1..=16", c.max_upscale)));
    }
    if !(c.max_zoom_out.is_finite() && (1.0..=64.0).contains(&c.max_zoom_out)) {
        return Err(bad("max_zoom_out", format!("{} must be within 1..=64", c.max_zoom_out)));
    }
    if !(0.0..=1.0).contains(&c.min_visible) {
        return Err(bad("min_visible", format!("{} must be within 0..=1", c.min_visible)));
    }
    if !(c.min_learnable.is_finite() && (0.0..=1024.0).contains(&c.min_learnable)) {
        return Err(bad("min_learnable", format!("{} must be within 0..=1024", c.min_learnable)));
    }
    if !(0.0..=1.0).contains(&c.background) {
        return Err(bad("background", format!("{} must be a probability in 0..=1", c.background)));
    }
    if !(64..=16384).contains(&c.max_side) {
        return Err(bad("max_side", format!("{} must be within 64..=16384", c.max_side)));
    }
    Ok(())
}

/// Decodes one photo, shrinks it to `max_side`, and places its faces. A face
/// whose centre lies outside the photo is an error naming its annotation line.
fn load_photo(
    entry: &Entry,
    rule: BoxRule,
    channels: u32,
    crops: &PhotoCrops,
    annotations: &Path,
) -> Result<Photo, FeatureError> {
    let image = decode(&entry.image, channels)?;
    let faces = faces_in(entry, rule, &image, annotations)?;
    let longest = image.width.max(image.height);
    if longest <= crops.max_side {
        return Ok(Photo { image, faces });
    }
    let s = crops.max_side as f32 / longest as f32;
    let (w, h) = (((image.width as f32 * s).round() as u32).max(1), ((image.height as f32 * s).round() as u32).max(1));
    let pixels = resize(&image, w, h);
    let (sx, sy) = (w as f32 / image.width as f32, h as f32 / image.height as f32);
    let faces =
        faces.iter().map(|f| FaceBox { x0: f.x0 * sx, y0: f.y0 * sy, x1: f.x1 * sx, y1: f.y1 * sy, ..*f }).collect();
    Ok(Photo { image: Raster { width: w, height: h, channels, pixels }, faces })
}

fn faces_in(entry: &Entry, rule: BoxRule, image: &Raster, annotations: &Path) -> Result<Vec<FaceBox>, FeatureError> {
    let (w, h) = (image.width as f32, image.height as f32);
    entry
        .faces
        .iter()
        .map(|a| match rule {
            BoxRule::CelebaAligned => {
                let [x0, y0, x1, y1] = celeba_aligned_box(image.width, image.height);
                Ok(FaceBox { x0, y0, x1, y1, smile: a.face.smile })
            }
            BoxRule::Annotated => {
                let f = a.face;
                let (cx, cy) = ((f.x0 + f.x1) / 2.0, (f.y0 + f.y1) / 2.0);
                if !(0.0..=w).contains(&cx) || !(0.0..=h).contains(&cy) {
                    return Err(bad_box(
                        annotations,
                        a.line,
                        format!(
                            "face centred at ({cx:.1}, {cy:.1}) lies outside {} ({}x{})",
                            entry.image.display(),
                            image.width,
                            image.height
                        ),
                    ));
                }
                // Caltech's squares overhang photo edges; what a crop can cut
                // off is measured against the part inside the photo.
                Ok(FaceBox { x0: f.x0.max(0.0), y0: f.y0.max(0.0), x1: f.x1.min(w), y1: f.y1.min(h), ..f })
            }
        })
        .collect()
}

/// One random crop of `image` around one of `faces`, at `width` x `height`.
pub fn crop_scene(
    image: &Raster,
    faces: &[FaceBox],
    width: u32,
    height: u32,
    crops: &PhotoCrops,
    rng: &mut SampleRng,
) -> Sample {
    let (iw, ih) = (image.width as f32, image.height as f32);
    if crops.background > 0.0 && rng.random::<f32>() < crops.background {
        if let Some(window) = background_window(image, faces, width, height, crops, rng) {
            let scale = width as f32 / window[2];
            let pixels = render_window(image, window, width, height);
            let boxes = crop_boxes(faces, [window[0], window[1]], scale, width, height, crops);
            return Sample { width, height, channels: image.channels, pixels, boxes };
        }
    }
    let learnable: Vec<&FaceBox> = faces.iter().filter(|f| f.smile.is_face()).collect();
    // The scale that gives the chosen face its drawn size; a photo with no
    // face is shown whole at a random size.
    let (scale, target) = match learnable.get(rng.random_range(0..learnable.len().max(1))) {
        Some(face) => {
            let side = (face.x1 - face.x0).max(face.y1 - face.y0).max(1.0);
            let want = log_uniform(rng, crops.min_face, crops.max_face);
            let fill = (width as f32 / iw).min(height as f32 / ih);
            let scale = (want / side).max(fill / crops.max_zoom_out).min(crops.max_upscale);
            (scale, Some(**face))
        }
        None => ((width as f32 / iw).min(height as f32 / ih) * (0.5 + 0.5 * rng.random::<f32>()), None),
    };
    let (ww, wh) = (width as f32 / scale, height as f32 / scale);
    let wx = place(target.map(|f| (f.x0.max(0.0), f.x1.min(iw))), ww, iw, rng.random());
    let wy = place(target.map(|f| (f.y0.max(0.0), f.y1.min(ih))), wh, ih, rng.random());
    let pixels = render_window(image, [wx, wy, ww, wh], width, height);
    let boxes = crop_boxes(faces, [wx, wy], scale, width, height, crops);
    Sample { width, height, channels: image.channels, pixels, boxes }
}

/// Most annotated faces a photo may have for a face-free crop to be cut from
/// it: group photos are where faces go un-annotated.
const BACKGROUND_MAX_FACES: usize = 2;

/// A window of the output's aspect inside the photo that keeps well clear of
/// every annotated face (each grown by half its side), or `None`.
fn background_window(
    image: &Raster,
    faces: &[FaceBox],
    width: u32,
    height: u32,
    crops: &PhotoCrops,
    rng: &mut SampleRng,
) -> Option<[f32; 4]> {
    if faces.len() > BACKGROUND_MAX_FACES {
        return None;
    }
    let (iw, ih) = (image.width as f32, image.height as f32);
    let aspect = width as f32 / height as f32;
    let (full_w, full_h) = if iw / ih > aspect { (ih * aspect, ih) } else { (iw, iw / aspect) };
    for _ in 0..8 {
        let f = 0.2 + 0.6 * rng.random::<f32>();
        let (ww, wh) = (full_w * f, full_h * f);
        if width as f32 / ww > crops.max_upscale {
            continue;
        }
        let (wx, wy) = (rng.random::<f32>() * (iw - ww), rng.random::<f32>() * (ih - wh));
        let clear = faces.iter().all(|b| {
            let grow = 0.5 * (b.x1 - b.x0).max(b.y1 - b.y0);
            b.x1 + grow <= wx || b.x0 - grow >= wx + ww || b.y1 + grow <= wy || b.y0 - grow >= wy + wh
        });
        if clear {
            return Some([wx, wy, ww, wh]);
        }
    }
    None
}

/// Where a window of length `window` starts on an axis of length `extent`:
/// on the photo as much as it can be, with the face span `face` inside it,
/// at position `u` (0..1) of the range that allows.
fn place(face: Option<(f32, f32)>, window: f32, extent: f32, u: f32) -> f32 {
    let (mut lo, mut hi) = if window <= extent { (0.0, extent - window) } else { (extent - window, 0.0) };
    if let Some((f0, f1)) = face {
        let (face_lo, face_hi) = (f1 - window, f0);
        if face_lo > face_hi {
            // A face wider than the window: centre it.
            return (f0 + f1 - window) / 2.0;
        }
        lo = lo.max(face_lo);
        hi = hi.min(face_hi);
        if lo > hi {
            (lo, hi) = (face_lo, face_hi);
        }
    }
    lo + (hi - lo) * u
}

/// The window `[x, y, w, h]` of `image` (photo pixels) resampled to
/// `width` x `height`, letterbox grey where it leaves the photo.
fn render_window(image: &Raster, window: [f32; 4], width: u32, height: u32) -> Vec<u8> {
    let [wx, wy, ww, wh] = window;
    let (sx, sy) = (width as f32 / ww, height as f32 / wh);
    let c = image.channels as usize;
    let mut out = vec![LETTERBOX_FILL; (width * height) as usize * c];
    // The photo's whole-pixel part inside the window, and where it lands.
    let x0 = wx.max(0.0).floor() as u32;
    let y0 = wy.max(0.0).floor() as u32;
    let x1 = ((wx + ww).min(image.width as f32).ceil() as u32).min(image.width);
    let y1 = ((wy + wh).min(image.height as f32).ceil() as u32).min(image.height);
    if x1 <= x0 || y1 <= y0 {
        return out;
    }
    let dx0 = ((x0 as f32 - wx) * sx).round() as i64;
    let dy0 = ((y0 as f32 - wy) * sy).round() as i64;
    let dw = (((x1 - x0) as f32 * sx).round() as u32).max(1);
    let dh = (((y1 - y0) as f32 * sy).round() as u32).max(1);
    let sub = sub_raster(image, x0, y0, x1 - x0, y1 - y0);
    let resized = resize(&sub, dw, dh);
    let row = dw as usize * c;
    for y in 0..dh as i64 {
        let ty = dy0 + y;
        if !(0..height as i64).contains(&ty) {
            continue;
        }
        // Columns of this row that land inside the output.
        let start = (-dx0).max(0) as usize;
        let end = ((width as i64 - dx0).min(dw as i64)).max(0) as usize;
        if start >= end {
            continue;
        }
        let src = &resized[y as usize * row + start * c..y as usize * row + end * c];
        let at = (ty as usize * width as usize + (dx0 + start as i64) as usize) * c;
        out[at..at + src.len()].copy_from_slice(src);
    }
    out
}

fn sub_raster(image: &Raster, x: u32, y: u32, w: u32, h: u32) -> Raster {
    if (x, y, w, h) == (0, 0, image.width, image.height) {
        return image.clone();
    }
    let c = image.channels as usize;
    let mut pixels = Vec::with_capacity((w * h) as usize * c);
    for row in y..y + h {
        let at = (row as usize * image.width as usize + x as usize) * c;
        pixels.extend_from_slice(&image.pixels[at..at + w as usize * c]);
    }
    Raster { width: w, height: h, channels: image.channels, pixels }
}

/// Faces moved into the crop: kept when enough of the box is inside and it
/// is big enough to learn, an ignore region when it is cut off or tiny,
/// dropped when it is outside. Learnable faces come first, largest first,
/// so that [`MAX_BOXES`] keeps the ones that matter.
fn crop_boxes(
    faces: &[FaceBox],
    origin: [f32; 2],
    scale: f32,
    width: u32,
    height: u32,
    crops: &PhotoCrops,
) -> Vec<FaceBox> {
    let (w, h) = (width as f32, height as f32);
    let mut out: Vec<FaceBox> = Vec::new();
    for f in faces {
        let moved = [
            (f.x0 - origin[0]) * scale,
            (f.y0 - origin[1]) * scale,
            (f.x1 - origin[0]) * scale,
            (f.y1 - origin[1]) * scale,
        ];
        let clipped = [moved[0].max(0.0), moved[1].max(0.0), moved[2].min(w), moved[3].min(h)];
        let (cw, ch) = (clipped[2] - clipped[0], clipped[3] - clipped[1]);
        if cw < 1.0 || ch < 1.0 {
            continue;
        }
        let visible = (cw * ch) / ((moved[2] - moved[0]) * (moved[3] - moved[1])).max(1e-6);
        let learnable = f.smile.is_face() && visible >= crops.min_visible && cw.max(ch) >= crops.min_learnable;
        let smile = if learnable { f.smile } else { Smile::Ignore };
        out.push(FaceBox { x0: clipped[0], y0: clipped[1], x1: clipped[2], y1: clipped[3], smile });
    }
    let area = |b: &FaceBox| (b.x1 - b.x0) * (b.y1 - b.y0);
    out.sort_by(|a, b| b.smile.is_face().cmp(&a.smile.is_face()).then(area(b).total_cmp(&area(a))));
    out.truncate(MAX_BOXES);
    out
}

fn log_uniform(rng: &mut SampleRng, lo: f32, hi: f32) -> f32 {
    (lo.ln() + (hi.ln() - lo.ln()) * rng.random::<f32>()).exp()
}

/// One source's held-out (test split) photos, for scoring a model on whole
/// real images the way `grin-detect` sees them.
#[derive(Debug)]
pub struct HeldOutPhotos {
    /// `caltech`, `celeba-aligned`, `wider`, ...
    pub name: &'static str,
    /// Portraits hold one face each (CelebA): "found" and detections per
    /// portrait are reported for them.
    pub portraits: bool,
    entries: Vec<Entry>,
    rule: BoxRule,
    annotations: PathBuf,
}

impl HeldOutPhotos {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn image_path(&self, index: usize) -> &Path {
        &self.entries[index].image
    }

    /// Photo `index` letterboxed to `width` x `height` in `channels`, with
    /// its faces in the letterboxed pixels (ignore regions included).
    pub fn letterboxed(&self, index: usize, width: u32, height: u32, channels: u32) -> Result<Sample, FeatureError> {
        let entry = &self.entries[index];
        let image = decode(&entry.image, channels)?;
        let faces = faces_in(entry, self.rule, &image, &self.annotations)?;
        let annotated: Vec<Annotated> = faces.into_iter().map(|face| Annotated { face, line: 0 }).collect();
        Ok(letterbox(&image, &annotated, width, height))
    }
}

/// The held-out photos of every real-photo source in `cfg.source` (looking
/// inside a mix), at most `limit` per source (0 = all), in a fixed order:
/// the test split, which reports are made on.
pub fn held_out_photos(cfg: &FeatureConfig, limit: usize) -> Result<Vec<HeldOutPhotos>, FeatureError> {
    photos_of_split(cfg, Split::Test, limit)
}

/// As [`held_out_photos`], for any split (the validation split is where a
/// deployment threshold is chosen, so the test split stays unseen).
pub fn photos_of_split(cfg: &FeatureConfig, split: Split, limit: usize) -> Result<Vec<HeldOutPhotos>, FeatureError> {
    let mut out = Vec::new();
    collect_held_out(&cfg.source, cfg, split, limit, &mut out)?;
    Ok(out)
}

fn collect_held_out(
    source: &SourceConfig,
    cfg: &FeatureConfig,
    split: Split,
    limit: usize,
    out: &mut Vec<HeldOutPhotos>,
) -> Result<(), FeatureError> {
    let skips = SkipCounts::default();
    let (name, annotations, entries, rule, portraits) = match source {
        SourceConfig::Mix { parts, .. } => {
            for part in parts {
                collect_held_out(part, cfg, split, limit, out)?;
            }
            return Ok(());
        }
        SourceConfig::Caltech { .. } | SourceConfig::CelebaAligned { .. } => {
            let (name, annotations, entries, rule, _) = parse_source(source, cfg, &skips)?;
            let portraits = rule == BoxRule::CelebaAligned;
            let entries = entries.into_iter().filter(|e| split_of_path(&e.image, &cfg.split) == split).collect();
            (name, annotations, entries, rule, portraits)
        }
        SourceConfig::Wider { .. } | SourceConfig::Celeba { .. } | SourceConfig::Jsonl { .. } => {
            let part = FeatureConfig { source: source.clone(), ..cfg.clone() };
            let annotated = match source {
                SourceConfig::Wider { annotations, .. } => (AnnotatedSource::wider(&part, split)?, annotations.clone()),
                SourceConfig::Celeba { bbox, .. } => (AnnotatedSource::celeba(&part, split)?, bbox.clone()),
                SourceConfig::Jsonl { manifest } => (AnnotatedSource::jsonl(&part, split)?, manifest.clone()),
                _ => unreachable!("matched above"),
            };
            let (src, annotations) = annotated;
            let portraits = matches!(source, SourceConfig::Celeba { .. });
            (src.name(), annotations, src.entries().to_vec(), BoxRule::Annotated, portraits)
        }
        SourceConfig::Synthetic { .. } | SourceConfig::Crops { .. } => return Ok(()),
    };
    let mut entries: Vec<Entry> = entries;
    if limit > 0 && entries.len() > limit {
        // An even spread over the split rather than its first photos.
        let step = entries.len() as f64 / limit as f64;
        entries = (0..limit).map(|i| entries[(i as f64 * step) as usize].clone()).collect();
    }
    out.push(HeldOutPhotos { name, portraits, entries, rule, annotations });
    Ok(())
}
