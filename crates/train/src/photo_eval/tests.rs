use super::*;
use grin_model::InitDetector;

/// A report of two photos whose curve has a sure hit (0.9) and a doubtful
/// one (0.4), for the tests of what is drawn and printed from reports.
pub(crate) fn report(source: &str, faces: usize, confusion: [[usize; 2]; 2]) -> PhotoReport {
    PhotoReport {
        source: source.into(),
        images: 2,
        skipped: 0,
        faces,
        ignored_faces: 0,
        face_ap: None,
        face_ap_loose: None,
        recall_by_size: vec![],
        recall: None,
        detections_per_image: 1.0,
        false_per_image: 0.0,
        unconfirmed_false_per_image: None,
        nested_per_image: 0.0,
        found: None,
        smile_accuracy: Some(0.75),
        smile_faces: confusion.iter().flatten().sum(),
        smile_confusion: confusion,
        curve: vec![
            PrPoint { score: 0.9, recall: 0.5, precision: 1.0 },
            PrPoint { score: 0.4, recall: 1.0, precision: 0.5 },
        ],
        face_hits: vec![],
    }
}

#[test]
fn the_calibration_table_reads_each_source_with_faces_off_its_curve() {
    let reports = [report("caltech", 2, [[0; 2]; 2]), report("face-free", 0, [[0; 2]; 2])];
    let table = calibration_table(&reports, 2.0, 0.5);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].contains("caltech P / R / F1 / F2"), "{table}");
    assert!(!table.contains("face-free"), "a face-free set has no precision or recall: {table}");
    assert_eq!(lines.len(), 1 + 9 + 2, "header, thresholds 0.10..0.90, recall by size: {table}");
    // At or below 0.4 both detections count (P 0.5, R 1); above it, only the sure one.
    assert!(
        lines[4].trim_start().starts_with("0.40") && lines[4].ends_with("0.500 / 1.000 / 0.667 / 0.833"),
        "{table}"
    );
    assert!(
        lines[5].trim_start().starts_with("0.50") && lines[5].ends_with("1.000 / 0.500 / 0.667 / 0.556"),
        "{table}"
    );
    assert_eq!(lines[10], "recall by face size at the chosen threshold 0.50:");
    assert!(lines[11].starts_with("  caltech"), "{table}");
}

#[test]
fn a_line_gives_the_false_detections_on_no_found_face_only_when_the_source_has_found_faces() {
    let mut r = report("caltech", 2, [[0; 2]; 2]);
    r.false_per_image = 0.5;
    assert!(describe(&r).contains("(0.50 false, 0.00 nested)"), "{}", describe(&r));
    r.unconfirmed_false_per_image = Some(0.25);
    assert!(describe(&r).contains("(0.50 false, 0.25 on no face YuNet found, 0.00 nested)"), "{}", describe(&r));
}

fn own_size_scoring() -> PhotoScoring {
    PhotoScoring { split: Split::Val, limit: 0, min_face: 10.0, own_size: Some(grin_terms::photo::PHOTO_MAX_PIXELS) }
}

#[test]
fn at_own_size_each_photo_is_scored_in_its_own_frame() {
    // Sizes no one batch could hold: each photo is a pass of its own.
    let (_photos, features, spec) = crate::test_photos::face_free(&[(200, 150), (90, 120)], Split::Val);
    let device = Default::default();
    let model = spec.init::<burn_ndarray::NdArray<f32>>(&device);
    let reports = evaluate_split(&model, &spec, &features, own_size_scoring(), &device).unwrap();
    assert_eq!((reports.len(), reports[0].images, reports[0].skipped), (1, 2, 0), "{reports:?}");
    let at_run_size = PhotoScoring { own_size: None, ..own_size_scoring() };
    let reports = evaluate_split(&model, &spec, &features, at_run_size, &device).unwrap();
    assert_eq!(reports[0].images, 2, "the same photos letterboxed to the run size");
}

#[test]
fn at_own_size_a_photo_that_cannot_be_read_is_named_or_skipped_and_counted() {
    let (photos, features, spec) = crate::test_photos::face_free(&[(80, 60)], Split::Val);
    std::fs::write(photos.path().join("broken.png"), b"not a png").unwrap();
    let device = Default::default();
    let model = spec.init::<burn_ndarray::NdArray<f32>>(&device);
    let e = evaluate_split(&model, &spec, &features, own_size_scoring(), &device).unwrap_err();
    assert!(format!("{e:#}").contains("broken.png"), "{e:#}");
    let features = FeatureConfig { on_bad_sample: OnBadSample::Skip, ..features };
    let reports = evaluate_split(&model, &spec, &features, own_size_scoring(), &device).unwrap();
    assert_eq!((reports[0].images, reports[0].skipped), (1, 1), "{reports:?}");
}
