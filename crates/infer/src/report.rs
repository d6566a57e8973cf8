//! What `grin-detect` prints. Values are rounded (boxes to 0.1 px,
//! probabilities to 3 decimals) so that builds for different CPUs, whose
//! floats may differ in the last bits, print identical JSON.

use grin_net::Detection;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ImageReport {
    pub image: String,
    pub width: u32,
    pub height: u32,
    pub detections: Vec<DetectionReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DetectionReport {
    #[serde(rename = "box")]
    pub bbox: [f64; 4],
    pub score: f64,
    pub smile: f64,
}

pub(crate) fn round_px(v: f32) -> f64 {
    (v as f64 * 10.0).round() / 10.0
}

pub(crate) fn round_probability(v: f32) -> f64 {
    (v as f64 * 1000.0).round() / 1000.0
}

impl DetectionReport {
    pub(crate) fn new(d: &Detection) -> DetectionReport {
        DetectionReport {
            bbox: d.corners().map(round_px),
            score: round_probability(d.score),
            smile: round_probability(d.smile),
        }
    }
}

impl ImageReport {
    pub(crate) fn new(image: String, width: u32, height: u32, detections: &[Detection]) -> ImageReport {
        ImageReport { image, width, height, detections: detections.iter().map(DetectionReport::new).collect() }
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain numbers and strings serialise")
    }

    /// Several lines for a person: a header, then one line per face.
    pub(crate) fn to_text(&self) -> String {
        let faces = self.detections.len();
        let mut out = format!(
            "{} ({}x{}): {faces} face{}",
            self.image,
            self.width,
            self.height,
            if faces == 1 { "" } else { "s" }
        );
        for d in &self.detections {
            let [x0, y0, x1, y1] = d.bbox;
            let label = if d.smile >= 0.5 { "smiling" } else { "not smiling" };
            out.push_str(&format!(
                "\n  [{x0:.1}, {y0:.1}, {x1:.1}, {y1:.1}]  face {:.3}  smile {:.3} ({label})",
                d.score, d.smile
            ));
        }
        out
    }
}
