//! One record's byte layout, and the copies between records and batches.

use grin_features::{HostBatch, SceneClass, LABEL_IGNORE, LABEL_PADDING, MAX_BOXES};
use serde::{Deserialize, Serialize};

/// Records start on this boundary so that every record's image begins
/// cache-line aligned inside the memory map.
pub(crate) const RECORD_ALIGN: u64 = 64;

/// Where each part of a record lies, in bytes from the record's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordLayout {
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub max_boxes: u32,
    /// `u8 [height][width][channels]`.
    pub pixels_offset: u64,
    /// `f32 little-endian [max_boxes][4]`: x0, y0, x1, y1 in pixels.
    pub boxes_offset: u64,
    /// `i8 [max_boxes]`: 0, 1, -1 (unknown smile), or -2 for an empty slot.
    pub labels_offset: u64,
    /// The record's stride; the bytes after the labels are zero.
    pub record_bytes: u64,
}

impl RecordLayout {
    pub fn new(width: u32, height: u32, channels: u32) -> RecordLayout {
        let image = width as u64 * height as u64 * channels as u64;
        let boxes_offset = image.next_multiple_of(8);
        let labels_offset = boxes_offset + MAX_BOXES as u64 * 16;
        let record_bytes = (labels_offset + MAX_BOXES as u64).next_multiple_of(RECORD_ALIGN);
        RecordLayout {
            width,
            height,
            channels,
            max_boxes: MAX_BOXES as u32,
            pixels_offset: 0,
            boxes_offset,
            labels_offset,
            record_bytes,
        }
    }

    pub(crate) fn image_bytes(&self) -> usize {
        self.width as usize * self.height as usize * self.channels as usize
    }

    /// Why a layout read from disk cannot be this build's layout, if it cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.width == 0 || self.height == 0 || !(self.channels == 1 || self.channels == 3) {
            return Some(format!("layout {}x{}x{} is not an image size", self.width, self.height, self.channels));
        }
        if self.max_boxes as usize != MAX_BOXES {
            return Some(format!("layout has max_boxes {}, this build uses {MAX_BOXES}", self.max_boxes));
        }
        // The first key that differs, named as in the manifest (round 11
        // printed both layouts as Rust's debug dumps).
        let expected = RecordLayout::new(self.width, self.height, self.channels);
        let keys = [
            ("pixels_offset", self.pixels_offset, expected.pixels_offset),
            ("boxes_offset", self.boxes_offset, expected.boxes_offset),
            ("labels_offset", self.labels_offset, expected.labels_offset),
            ("record_bytes", self.record_bytes, expected.record_bytes),
        ];
        keys.into_iter().find(|(_, got, want)| got != want).map(|(key, got, want)| {
            format!(
                "key `layout.{key}`: {got}, where a {}x{}x{} record has {want}",
                self.width, self.height, self.channels
            )
        })
    }

    /// Appends record `index` of `batch` to `out`, padding included.
    pub fn encode(&self, batch: &HostBatch, index: usize, out: &mut Vec<u8>) {
        let image = self.image_bytes();
        let start = out.len();
        out.extend_from_slice(&batch.pixels[index * image..(index + 1) * image]);
        out.resize(start + self.boxes_offset as usize, 0);
        for v in &batch.boxes[index * MAX_BOXES * 4..(index + 1) * MAX_BOXES * 4] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend(batch.labels[index * MAX_BOXES..(index + 1) * MAX_BOXES].iter().map(|&l| l as u8));
        out.resize(start + self.record_bytes as usize, 0);
    }

    /// Appends one record's bytes to `batch`: the only copy a read makes.
    pub fn decode_into(&self, record: &[u8], batch: &mut HostBatch) {
        let image = self.image_bytes();
        batch.pixels.extend_from_slice(&record[..image]);
        let boxes = &record[self.boxes_offset as usize..self.labels_offset as usize];
        batch.boxes.extend(boxes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        let labels = &record[self.labels_offset as usize..self.labels_offset as usize + MAX_BOXES];
        batch.labels.extend(labels.iter().map(|&b| b as i8));
        batch.len += 1;
    }

    /// What makes a record unusable for training, if anything: a label
    /// outside the known values, or a box coordinate that is not finite.
    pub(crate) fn record_problem(&self, record: &[u8]) -> Option<String> {
        let labels = &record[self.labels_offset as usize..self.labels_offset as usize + MAX_BOXES];
        let valid = |l: &i8| (-1..=1).contains(l) || *l == LABEL_PADDING || *l == LABEL_IGNORE;
        if let Some(l) = labels.iter().map(|&b| b as i8).find(|l| !valid(l)) {
            return Some(format!("label {l} is not 0, 1, -1, ignore {LABEL_IGNORE} or padding {LABEL_PADDING}"));
        }
        let boxes = &record[self.boxes_offset as usize..self.labels_offset as usize];
        if boxes.chunks_exact(4).any(|c| !f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()) {
            return Some("a box coordinate is not a finite number".into());
        }
        None
    }

    /// The scene class of a record, read from its labels alone (same rule as `Sample::class`).
    pub(crate) fn class_of(&self, record: &[u8]) -> SceneClass {
        let labels = &record[self.labels_offset as usize..self.labels_offset as usize + MAX_BOXES];
        class_of_labels(labels.iter().map(|&b| b as i8))
    }
}

pub(crate) fn class_of_labels(labels: impl IntoIterator<Item = i8>) -> SceneClass {
    let mut faces = false;
    for label in labels {
        if label == 1 {
            return SceneClass::Smiling;
        }
        faces |= label != LABEL_PADDING && label != LABEL_IGNORE;
    }
    if faces {
        SceneClass::NonSmiling
    } else {
        SceneClass::FaceFree
    }
}

/// One letter per record in the manifest's `classes` strings.
pub(crate) fn class_letter(class: SceneClass) -> char {
    match class {
        SceneClass::Smiling => 's',
        SceneClass::NonSmiling => 'n',
        SceneClass::FaceFree => 'f',
    }
}

pub(crate) fn class_from_letter(letter: char) -> Option<SceneClass> {
    match letter {
        's' => Some(SceneClass::Smiling),
        'n' => Some(SceneClass::NonSmiling),
        'f' => Some(SceneClass::FaceFree),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::RecordLayout;

    /// Round 11 of issue 90: a damaged offset printed both layouts as debug dumps.
    #[test]
    fn a_layout_that_differs_names_its_key() {
        let mut layout = RecordLayout::new(160, 120, 1);
        assert_eq!(layout.problem(), None);
        layout.labels_offset += 63;
        let expected = RecordLayout::new(160, 120, 1).labels_offset;
        let problem = layout.problem().unwrap();
        let want = format!("key `layout.labels_offset`: {}, where a 160x120x1 record has {expected}", expected + 63);
        assert_eq!(problem, want);
    }
}
