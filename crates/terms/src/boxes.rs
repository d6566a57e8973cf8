//! Box overlap, defined once: every crate matches, suppresses and places
//! boxes with these (and `scripts/peers/scoring.py` is their Python copy).
//! A box is its corners `[x0, y0, x1, y1]`, in pixels.

/// A box's area (0 or less for an empty one).
pub fn area(b: [f32; 4]) -> f32 {
    (b[2] - b[0]) * (b[3] - b[1])
}

/// The area two boxes share (0 when apart).
pub fn intersection(a: [f32; 4], b: [f32; 4]) -> f32 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    iw * ih
}

/// Intersection over union; 0 for two empty boxes.
pub fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let inter = intersection(a, b);
    let union = area(a) + area(b) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_overlapping_apart_and_empty_boxes() {
        assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [1.0, 0.0, 3.0, 2.0]), 2.0 / 6.0);
        assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]), 0.0);
        assert_eq!(iou([1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]), 0.0);
        assert_eq!(intersection([0.0, 0.0, 4.0, 4.0], [1.0, 1.0, 2.0, 3.0]), 2.0);
    }
}
