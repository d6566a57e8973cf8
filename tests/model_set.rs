//! `grin model-set`: a model's decision settings change in its file, its
//! weights do not, and a key the weights depend on is refused.

use std::path::Path;
use std::process::Command;

fn grin(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_grin")).args(args).output().expect("grin runs")
}

fn shipped() -> String {
    format!("{}/assets/default.grin", env!("CARGO_MANIFEST_DIR"))
}

/// A model file's `[model]` table and its weights, as plain numbers.
fn read(path: &Path) -> (grin_model::ModelConfig, grin_model::FoldedDetector) {
    let (spec, detector) = grin_model::load_model::<burn_ndarray::NdArray<f32>>(path, &Default::default()).unwrap();
    (spec.model, detector.folded())
}

#[test]
fn settings_change_and_weights_stay() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("looked.grin");
    let shipped = shipped();
    let set = grin(&[
        "model-set",
        "--model",
        &shipped,
        "--out",
        out.to_str().unwrap(),
        "--set",
        "model.second_look.below=0.61",
        "--set",
        "model.second_look.side=160",
        "--set",
        "model.score_threshold=0.45",
    ]);
    let stdout = String::from_utf8_lossy(&set.stdout);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    assert!(stdout.lines().any(|l| l == "* below = 0.61"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "  nms_iou = 0.4"), "unchanged keys unmarked: {stdout}");

    let ((before, weights_before), (after, weights_after)) = (read(Path::new(&shipped)), read(&out));
    assert_eq!(after.second_look.below, 0.61);
    assert_eq!(after.second_look.side, 160);
    assert_eq!(after.score_threshold, 0.45);
    let untouched = grin_model::ModelConfig {
        second_look: before.second_look,
        score_threshold: before.score_threshold,
        ..after.clone()
    };
    assert_eq!(untouched, before, "only the keys set change");
    assert!(weights_after == weights_before, "the weights are copied as they are");
}

#[test]
fn bad_keys_are_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.grin");
    std::fs::copy(shipped(), &model).unwrap();
    let original = std::fs::read(&model).unwrap();
    let path = model.to_str().unwrap();
    let cases = [
        ("model.width_mult=2", "key `model.width_mult`: shapes the weights"),
        ("model.fine_head=32", "key `model.fine_head`: shapes the weights"),
        ("train.lr=0.1", "a model file holds only `model.*` keys"),
        ("model.second_look.nope=1", "key `model.second_look.nope`: unknown field"),
        ("model.second_look.below=1.5", "key `model.second_look.below`: 1.5 must be a score in [0, 1]"),
        ("model.nms_iou=\"x\"", "key `model.nms_iou`: invalid type"),
    ];
    for (set, want) in cases {
        let run = grin(&["model-set", "--model", path, "--set", set]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{set}: {stderr}");
        assert!(stderr.contains(want) && stderr.contains(path), "{set}: {stderr}");
    }
    // The look's other keys on a model whose look is off would not be kept.
    let off = dir.path().join("off.grin");
    let off_set =
        grin(&["model-set", "--model", path, "--out", off.to_str().unwrap(), "--set", "model.second_look.below=0"]);
    assert!(off_set.status.success(), "{}", String::from_utf8_lossy(&off_set.stderr));
    let lost = grin(&["model-set", "--model", off.to_str().unwrap(), "--set", "model.second_look.mirror=false"]);
    assert_eq!(lost.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&lost.stderr).contains("key `model.second_look.mirror`: the second look is off"),
        "{}",
        String::from_utf8_lossy(&lost.stderr)
    );
    let none = grin(&["model-set", "--model", path]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("nothing to set"));
    assert_eq!(std::fs::read(&model).unwrap(), original, "a refused change leaves the file as it was");
}

#[test]
fn level_thresholds_fold_into_the_face_biases_and_bad_lists_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("levels.grin");
    let shipped = shipped();
    let run =
        grin(&["model-set", "--model", &shipped, "--out", out.to_str().unwrap(), "--level-thresholds", "0.6,0.5,0.4"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let ((before, weights_before), (after, weights_after)) = (read(Path::new(&shipped)), read(&out));
    assert_eq!(after.score_threshold, 0.5);
    assert_eq!(grin_model::ModelConfig { score_threshold: before.score_threshold, ..after }, before);
    // Each head's last conv: the face logit's bias moves by logit(0.5) - logit(T), the rest stays.
    for ((head_before, head_after), t) in weights_before.heads.iter().zip(&weights_after.heads).zip([0.6f32, 0.5, 0.4])
    {
        let (b0, b1) = (&head_before.convs.last().unwrap().bias, &head_after.convs.last().unwrap().bias);
        let face = grin_terms::output::FACE;
        let want = (1.0 - t).ln() - t.ln();
        assert!((b1[face] - b0[face] - want).abs() < 1e-5, "{t}: {} -> {}", b0[face], b1[face]);
        assert!(b0.iter().zip(b1).enumerate().all(|(i, (x, y))| i == face || x == y));
    }
    for (list, want) in
        [("0.5,0.4", "one threshold per level"), ("0.5,1.2,0.4", "`1.2` in `0.5,1.2,0.4` is not a face score")]
    {
        let bad = grin(&["model-set", "--model", &shipped, "--out", out.to_str().unwrap(), "--level-thresholds", list]);
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{list}: {stderr}");
        assert!(stderr.contains("--level-thresholds") && stderr.contains(want), "{list}: {stderr}");
    }
    let both = grin(&[
        "model-set",
        "--model",
        &shipped,
        "--out",
        out.to_str().unwrap(),
        "--level-thresholds",
        "0.5,0.5,0.5",
        "--set",
        "model.score_threshold=0.4",
    ]);
    assert!(String::from_utf8_lossy(&both.stderr).contains("leave model.score_threshold out"));
}

#[test]
fn a_box_scale_folds_into_the_distance_biases_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("reboxed.grin");
    let shipped = shipped();
    let run =
        grin(&["model-set", "--model", &shipped, "--out", out.to_str().unwrap(), "--box-scale", "1.1,2,1.1,1.25"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let ((before, weights_before), (after, weights_after)) = (read(Path::new(&shipped)), read(&out));
    assert_eq!(after, before, "the settings stay");
    let distance = grin_terms::output::DISTANCE;
    for (head_before, head_after) in weights_before.heads.iter().zip(&weights_after.heads) {
        let (b0, b1) = (&head_before.convs.last().unwrap().bias, &head_after.convs.last().unwrap().bias);
        for (i, (x, y)) in b0.iter().zip(b1).enumerate() {
            let want = match i.checked_sub(distance) {
                Some(k) if k < 4 => [1.1f32, 2.0, 1.1, 1.25][k].ln(),
                _ => 0.0,
            };
            assert!((y - x - want).abs() < 1e-5, "channel {i}: {x} -> {y}");
        }
    }
    let bad = grin(&["model-set", "--model", &shipped, "--out", out.to_str().unwrap(), "--box-scale", "1,9,1,1"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--box-scale") && stderr.contains("`9` in `1,9,1,1` is not a scale"), "{stderr}");
}
