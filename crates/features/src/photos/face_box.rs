//! The face box grin learns, defined once: **forehead to chin, ear to
//! ear**, as annotators of real photos mark a face. FDDB draws that as an
//! ellipse; its exact bounding box is the definition ([`ellipse_box`]).
//! Sources that mark a face another way are mapped onto it here:
//!
//! - five landmarks (Caltech WebFaces, and CelebA's alignment): a box
//!   [`LANDMARK_BOX`] of eye distances around the eyes and mouth
//!   ([`landmarks_to_box`]), fitted so that a box centred on a face agrees
//!   with FDDB's ellipse boxes (docs/design.md, "The face box");
//! - boxes as annotated (WIDER FACE, CelebA's `list_bbox`, a JSONL manifest)
//!   are taken as they are.

/// The landmark box in units of the eye distance `e`: `width` e wide,
/// `height` e tall, its centre `lift` e above the point halfway between the
/// eyes' level and the mouth's.
///
/// Fitted through two detectors that each saw both kinds of annotation
/// (the stage-4 model and YuNet, on 400 training photos of Caltech and 400
/// of FDDB): against the older landmark box, a square of 2.2 e centred
/// halfway between eyes and mouth, FDDB's ellipse box is 1.10 squares wide
/// (1.10 by grin, 1.10 by YuNet), 1.63 tall (1.66, 1.60) and its centre
/// 0.22 squares higher (0.22, 0.22). In eye distances: 2.42 by 3.59, 0.48
/// up (docs/design.md, "The face box").
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LandmarkBox {
    pub width: f32,
    pub height: f32,
    pub lift: f32,
}

pub(crate) const LANDMARK_BOX: LandmarkBox = LandmarkBox { width: 2.42, height: 3.59, lift: 0.48 };

/// The exact bounding box `[x0, y0, x1, y1]` of an ellipse with radii
/// `major` and `minor`, its major axis at `angle` radians from the x axis,
/// centred at `centre`: half-width √((a·cos t)² + (b·sin t)²), half-height
/// √((a·sin t)² + (b·cos t)²).
pub(crate) fn ellipse_box(major: f32, minor: f32, angle: f32, centre: [f32; 2]) -> [f32; 4] {
    let (sin, cos) = angle.sin_cos();
    let half_w = (major * cos).hypot(minor * sin);
    let half_h = (major * sin).hypot(minor * cos);
    [centre[0] - half_w, centre[1] - half_h, centre[0] + half_w, centre[1] + half_h]
}

/// The face box of five landmarks' eyes and mouth ([`LANDMARK_BOX`]).
/// Returns `[x0, y0, x1, y1]`.
pub(crate) fn landmarks_to_box(left_eye: [f32; 2], right_eye: [f32; 2], mouth: [f32; 2]) -> [f32; 4] {
    let cx = (left_eye[0] + right_eye[0]) / 2.0;
    let eye_y = (left_eye[1] + right_eye[1]) / 2.0;
    let e = (right_eye[0] - left_eye[0]).hypot(right_eye[1] - left_eye[1]);
    let LandmarkBox { width, height, lift } = LANDMARK_BOX;
    let cy = (eye_y + mouth[1]) / 2.0 - lift * e;
    let (half_w, half_h) = (width * e / 2.0, height * e / 2.0);
    [cx - half_w, cy - half_h, cx + half_w, cy + half_h]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upright_ellipse_is_taller_than_wide() {
        // Major axis vertical (angle pi/2): the box is 2b wide and 2a tall.
        let [x0, y0, x1, y1] = ellipse_box(60.0, 40.0, std::f32::consts::FRAC_PI_2, [100.0, 100.0]);
        assert!((x1 - x0 - 80.0).abs() < 1e-3 && (y1 - y0 - 120.0).abs() < 1e-3, "{x0} {y0} {x1} {y1}");
        // A tilted one is wider than its minor axis and shorter than its major.
        let [x0, y0, x1, y1] = ellipse_box(60.0, 40.0, 1.2, [100.0, 100.0]);
        assert!(x1 - x0 > 80.0 && y1 - y0 < 120.0 && y1 - y0 > x1 - x0);
        assert!(((x0 + x1) / 2.0 - 100.0).abs() < 1e-3 && ((y0 + y1) / 2.0 - 100.0).abs() < 1e-3);
    }

    #[test]
    fn a_landmark_box_runs_from_above_the_eyes_to_below_the_mouth() {
        let [x0, y0, x1, y1] = landmarks_to_box([40.0, 50.0], [60.0, 50.0], [50.0, 70.0]);
        assert!(y0 < 50.0 - 20.0 && y1 > 70.0, "forehead above the eyes, chin below the mouth: {y0} {y1}");
        assert!(y1 - y0 > x1 - x0, "taller than wide");
        assert!(((x0 + x1) / 2.0 - 50.0).abs() < 1e-4, "centred between the eyes");
    }
}
