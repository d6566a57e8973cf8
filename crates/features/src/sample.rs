//! The one fixed-layout sample every training mode and the store consume.

/// Most boxes a sample carries. Extra faces are dropped (and counted) by the
/// sources, so that a record has a fixed size and targets a fixed shape.
pub const MAX_BOXES: usize = 16;

pub use grin_terms::label::{Smile, LABEL_IGNORE, LABEL_PADDING};

/// A face box in pixel coordinates of the sample image, `x0 < x1`, `y0 < y1`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FaceBox {
    pub x0: f32,
    pub y0: f32,
    pub x1: f32,
    pub y1: f32,
    pub smile: Smile,
}

impl FaceBox {
    /// Its corners `[x0, y0, x1, y1]`, as `grin_terms::boxes` takes a box.
    pub fn corners(&self) -> [f32; 4] {
        [self.x0, self.y0, self.x1, self.y1]
    }
}

/// The three scene classes batch balancing works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SceneClass {
    /// At least one smiling face.
    Smiling,
    /// Faces, none of them smiling.
    NonSmiling,
    /// No face at all.
    FaceFree,
}

impl SceneClass {
    pub const ALL: [SceneClass; 3] = [SceneClass::Smiling, SceneClass::NonSmiling, SceneClass::FaceFree];

    pub fn index(self) -> usize {
        self as usize
    }
}

/// As people read them, and as every report names them: `smiling`,
/// `non-smiling`, `face-free` (round 17: `store info` printed `NonSmiling`).
impl std::fmt::Display for SceneClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SceneClass::Smiling => "smiling",
            SceneClass::NonSmiling => "non-smiling",
            SceneClass::FaceFree => "face-free",
        })
    }
}

/// One generated sample: an 8-bit image (row-major, channels interleaved)
/// plus at most [`MAX_BOXES`] face boxes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub pixels: Vec<u8>,
    pub boxes: Vec<FaceBox>,
}

impl Sample {
    pub fn class(&self) -> SceneClass {
        if self.boxes.iter().any(|b| b.smile == Smile::Yes) {
            SceneClass::Smiling
        } else if self.boxes.iter().all(|b| b.smile == Smile::Ignore) {
            SceneClass::FaceFree
        } else {
            SceneClass::NonSmiling
        }
    }
}

/// A batch on the host, as flat arrays ready for one upload each:
/// `pixels` is `[len, height, width, channels]` u8, `boxes` is
/// `[len, MAX_BOXES, 4]` (x0, y0, x1, y1 in pixels) and `labels` is
/// `[len, MAX_BOXES]` (smile label, or [`LABEL_PADDING`] for an empty slot).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostBatch {
    pub len: usize,
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub pixels: Vec<u8>,
    pub boxes: Vec<f32>,
    pub labels: Vec<i8>,
}

impl HostBatch {
    pub fn with_capacity(capacity: usize, width: u32, height: u32, channels: u32) -> Self {
        let image = (width * height * channels) as usize;
        HostBatch {
            len: 0,
            width,
            height,
            channels,
            pixels: Vec::with_capacity(capacity * image),
            boxes: Vec::with_capacity(capacity * MAX_BOXES * 4),
            labels: Vec::with_capacity(capacity * MAX_BOXES),
        }
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.pixels.clear();
        self.boxes.clear();
        self.labels.clear();
    }

    /// Appends one sample; panics only on a programming error (size mismatch).
    pub fn push(&mut self, sample: &Sample) {
        assert_eq!(
            (sample.width, sample.height, sample.channels),
            (self.width, self.height, self.channels),
            "sample size differs from the batch's"
        );
        self.pixels.extend_from_slice(&sample.pixels);
        for slot in 0..MAX_BOXES {
            match sample.boxes.get(slot) {
                Some(b) => {
                    self.boxes.extend_from_slice(&[b.x0, b.y0, b.x1, b.y1]);
                    self.labels.push(b.smile.as_label());
                }
                None => {
                    self.boxes.extend_from_slice(&[0.0; 4]);
                    self.labels.push(LABEL_PADDING);
                }
            }
        }
        self.len += 1;
    }

    /// The sample at `index`, rebuilt from the flat arrays.
    pub fn sample(&self, index: usize) -> Sample {
        let image = (self.width * self.height * self.channels) as usize;
        let pixels = self.pixels[index * image..(index + 1) * image].to_vec();
        let boxes = (0..MAX_BOXES)
            .filter_map(|slot| {
                let k = index * MAX_BOXES + slot;
                let smile = Smile::from_label(self.labels[k])?;
                let b = &self.boxes[k * 4..k * 4 + 4];
                Some(FaceBox { x0: b[0], y0: b[1], x1: b[2], y1: b[3], smile })
            })
            .collect();
        Sample { width: self.width, height: self.height, channels: self.channels, pixels, boxes }
    }
}
