//! The `crops` table of a real-photo source (`caltech`, `fddb`, `celeba_aligned`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How random crops of real photos are cut (the SSD / YuNet way): pick a
/// face, draw its size in the output, and place a window around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PhotoCrops {
    /// Side of the chosen face in the output, drawn log-uniformly (px).
    pub min_face: f32,
    pub max_face: f32,
    /// Largest enlargement of a photo; past it the face comes out smaller.
    pub max_upscale: f32,
    /// Most a photo is shrunk below the size that just fills the output
    /// (1 = never smaller than filling it): a robot's frame has no grey
    /// bars, so small faces should come from photos that hold small faces,
    /// not from big faces in a tiny photo amid grey. Past it the face comes
    /// out larger.
    pub max_zoom_out: f32,
    /// A face with less of its box inside the crop becomes an ignore region.
    pub min_visible: f32,
    /// A face smaller than this (px, in the output) becomes an ignore region.
    pub min_learnable: f32,
    /// Photos are shrunk on load so that their longer side is at most this (px).
    pub max_side: u32,
    /// Share of crops cut clear of every face (face-free scenes of real
    /// backgrounds), from photos with at most two faces, annotated or found
    /// (`unannotated`).
    pub background: f32,
    /// Share of crops cut closer than `max_face` allows: the chosen face
    /// comes out larger than `max_face` (an ignore region, as every face
    /// that large in such a crop) and what surrounds it is upscaled up to
    /// `zoom_in_upscale`. A small photo run at a large size (an 89x109
    /// portrait at 640x480 is scaled up 4.4 times) shows the detector
    /// blurred, upscaled background that ordinary crops never do.
    pub zoom_in: f32,
    /// Largest enlargement of a photo in a zoomed-in crop.
    pub zoom_in_upscale: f32,
    /// Share of crops whose edge cuts the chosen face: the window is moved
    /// so that a share of the face's extent, drawn in 0.3..1 along one
    /// axis, stays inside (a face at the frame's edge, as news photos and a
    /// robot's camera show them). The label follows the one rule of every
    /// crop: a face with `min_visible` of its box inside is a face, its box
    /// cut to the frame; less is an ignore region. Absent from serialised
    /// configs when 0, so that earlier stores keep their fingerprint.
    #[serde(skip_serializing_if = "super::is_zero")]
    pub cut: f32,
    /// Share of scenes that are a 2x2 mosaic of four crops at half the
    /// size, each from a photo of its own, their faces drawn from half of
    /// `min_face..max_face` (at least `min_learnable`): four times the faces
    /// a scene shows, at the small sizes of crowds (Ultralytics' mosaic).
    /// Absent from serialised configs when 0.
    #[serde(skip_serializing_if = "super::is_zero")]
    pub mosaic: f32,
    /// Faces a second detector found that the annotations lack (grin-detect's
    /// JSON lines, `scripts/unannotated-faces.sh`): ignore regions in every
    /// training crop, and no face-free crop is cut near one
    /// (`photos/unannotated.rs`). Held-out scoring keeps the annotations
    /// alone, and reports the false detections that lie on no such face too.
    /// Absent from serialised configs when unset, so that stores written
    /// before it existed keep their fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unannotated: Option<PathBuf>,
}

impl Default for PhotoCrops {
    fn default() -> Self {
        PhotoCrops {
            min_face: 10.0,
            max_face: 110.0,
            max_upscale: 3.0,
            max_zoom_out: 1.0,
            min_visible: 0.6,
            min_learnable: 8.0,
            max_side: 1024,
            background: 0.0,
            zoom_in: 0.0,
            zoom_in_upscale: 5.0,
            cut: 0.0,
            mosaic: 0.0,
            unannotated: None,
        }
    }
}
