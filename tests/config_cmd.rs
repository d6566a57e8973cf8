//! `grin config`: the resolved config, one value, every key; and the errors
//! a script reading it gets.

use std::process::Command;

fn grin(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_grin")).args(args).output().expect("grin runs")
}

fn demo() -> String {
    format!("{}/configs/demo.toml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn get_keys_and_full_toml_agree_with_the_overrides() {
    let demo = demo();
    let get = grin(&["config", "--config", &demo, "--set", "train.lr=0.01", "--get", "train.lr"]);
    assert!(get.status.success(), "{}", String::from_utf8_lossy(&get.stderr));
    assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "0.01");
    let name = grin(&["config", "--config", &demo, "--get", "name"]);
    assert_eq!(String::from_utf8_lossy(&name.stdout).trim(), "demo", "strings print bare");

    let keys = grin(&["config", "--config", &demo, "--keys"]);
    let keys = String::from_utf8_lossy(&keys.stdout).to_string();
    // Defaults the file does not name are filled in, f32s print as written.
    assert!(keys.lines().any(|l| l == "train.device_augment.flip = 0.5"), "{keys}");
    assert!(keys.lines().any(|l| l.starts_with("features.augment.blur_sigma = [")), "{keys}");
    // Keys a model file leaves out at their defaults are listed too.
    for key in ["model.second_look.side = 144", "model.fine_head = 0", "model.level_scale = 1.0"] {
        assert!(keys.lines().any(|l| l == key), "{key} in {keys}");
    }

    // The full TOML is itself a config grin loads to the same values.
    let full = grin(&["config", "--config", &demo, "--set", "train.steps=7"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resolved.toml");
    std::fs::write(&path, &full.stdout).unwrap();
    let again = grin(&["config", "--config", path.to_str().unwrap(), "--keys"]);
    let again = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(again.lines().any(|l| l == "train.steps = 7"), "{again}");
    assert_eq!(again.lines().count(), keys.lines().count());
}

#[test]
fn unknown_keys_and_out_of_range_values_are_named() {
    let demo = demo();
    let missing = grin(&["config", "--config", &demo, "--get", "train.nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("key `train.nope`: not a key of the resolved config"));
    // Round 25: `grin config --config d.toml >> d.toml` appended to it.
    let copy = tempfile::tempdir().unwrap();
    let own = copy.path().join("d.toml");
    std::fs::copy(&demo, &own).unwrap();
    let appended = std::fs::OpenOptions::new().append(true).open(&own).unwrap();
    let mut config = Command::new(env!("CARGO_BIN_EXE_grin"));
    config.args(["config", "--config"]).arg(&own).stdout(appended);
    let out = config.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("d.toml: is also standard output"));
    assert_eq!(std::fs::read(&own).unwrap(), std::fs::read(&demo).unwrap());
    // A key the config takes but leaves unset is no misspelling (round 21).
    let unset = grin(&["config", "--config", &demo, "--get", "train.init"]);
    assert_eq!(unset.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unset.stderr).contains("key `train.init` is not set, and has no default"));
    let flip = grin(&["config", "--config", &demo, "--set", "train.device_augment.flip=2"]);
    assert_eq!(flip.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&flip.stderr).contains("key `train.device_augment.flip`: 2 must be within 0..=1"));
    // Patience counts validation scores: without them it would never stop a run.
    let patience = grin(&["config", "--config", &demo, "--set", "train.patience=3"]);
    assert_eq!(patience.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&patience.stderr)
        .contains("key `train.patience`: 3 counts validation scores, so it needs train.eval_every > 0"));
    let pyramid = grin(&["config", "--config", &demo, "--set", "model.pyramid_above=-1"]);
    assert_eq!(pyramid.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&pyramid.stderr)
            .contains("key `model.pyramid_above`: -1 must be 0 (one pass) or a face side in 8..=4096 px"),
        "{}",
        String::from_utf8_lossy(&pyramid.stderr)
    );
}

#[test]
fn eval_names_a_pyramid_setting_it_cannot_use() {
    let model = format!("{}/assets/default.grin", env!("CARGO_MANIFEST_DIR"));
    let out = grin(&["eval", "--model", &model, "--config", &demo(), "--samples", "0", "--pyramid-above", "3"]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--pyramid-above") && err.contains("3 must be 0 (one pass) or a face side in 8..=4096 px"),
        "{err}"
    );
    for (flag, value, why) in [
        ("--threshold", "1.5", "1.5 must be a score in [0, 1]"),
        ("--nested-cover", "1.5", "1.5 must be a share in [0, 1]"),
        // The training split is not held out: clap offers only the two that are.
        ("--split", "train", "[possible values: val, test]"),
    ] {
        let out = grin(&["eval", "--model", &model, "--config", &demo(), "--samples", "0", flag, value]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.contains(why), "{err}");
    }
}

/// Issue 90, round 2: flags `grin eval` cannot apply were dropped, exit 0.
#[test]
fn eval_refuses_what_it_would_not_score() {
    let model = format!("{}/assets/default.grin", env!("CARGO_MANIFEST_DIR"));
    let config = demo();
    let base = ["eval", "--model", model.as_str(), "--config", config.as_str()];
    for (extra, why) in [
        (&["--best"][..], "--best"),
        (&["--samples", "0"], "nothing to score"),
        (
            &["--samples", "1", "--run-size", "320x240"],
            "--run-size: no photos are scored (the config's source holds no real photos)",
        ),
        (&["--samples", "1", "--own-size"], "--own-size: no photos are scored"),
        // Round 14: a second look's flags with no photo to cut from.
        (&["--samples", "1", "--second-look-confirm", "0.9"], "--second-look-confirm: no photos are scored"),
        (&["--samples", "1", "--second-look-below", "0.5"], "--second-look-below: no photos are scored"),
        // Round 21: the model's settings were taken from its file, the `--set` dropped.
        (&["--samples", "1", "--set", "model.score_threshold=0.05"], "eval scores the model as its file holds it"),
    ] {
        let out = grin(&[&base[..], extra].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(why), "{extra:?}: {err}");
    }
    // Round 25: mine dropped a `--set model.*` as eval did.
    let mine = ["mine", "--model", model.as_str(), "--config", config.as_str(), "--out", "unused"];
    let out = grin(&[&mine[..], &["--set", "model.nms_iou=0.05"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mine runs the model as its file holds it; its own setting"));
}

#[test]
fn eval_and_calibrate_name_a_run_that_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    let nope = dir.path().join("nope");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (run, why) in [(&nope, "no such run"), (&empty, "not a run folder: it holds no config.toml")] {
        for command in ["eval", "calibrate"] {
            let out = grin(&[command, "--run", run.to_str().unwrap()]);
            assert_ne!(out.status.code(), Some(0));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(&*run.to_string_lossy()) && err.contains(why), "{command}: {err}");
        }
    }
}

/// Issue 90, round 9: without `--config`, `grin model-info` dropped its
/// `--set`s (a budget for a model the user did not ask about, exit 0).
/// They apply over the built-in defaults, by the same rules.
#[test]
fn model_info_applies_set_over_the_built_in_defaults() {
    let info = grin(&["model-info", "--set", "model.width_mult=2", "--set", "features.width=160"]);
    let out = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    assert!(out.starts_with("grin detector, width_mult 2, input 160x240x1"), "{out}");
    let unknown = grin(&["model-info", "--set", "no.such=1"]);
    let e = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{e}");
    assert!(e.contains("--set no.such=1 (over the built-in defaults): key `no`: unknown field"), "{e}");
}
