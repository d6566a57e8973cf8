//! Bad input and interrupted work through the real `grin` binary: no panic,
//! no silent loss. Each test names the issue item it covers.

use crate::common;
use grin_model::InitDetector;

use common::{tiny_config, GRIN};
use grin_train::checkpoint::{self, Checkpoint, LoopState};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn write_config(dir: &Path, extra: &str) -> PathBuf {
    let train = format!("steps = 6\nbatch_size = 2\nlog_every = 2\ncheckpoint_every = 2\neval_samples = 2\n{extra}");
    tiny_config(dir, "tiny.toml", &train)
}

fn grin(args: &[&str], config: &Path, runs: &Path) -> Output {
    Command::new(GRIN).args(args).arg("--config").arg(config).arg("--runs-dir").arg(runs).output().expect("run grin")
}

/// `grin precompute` of 8 samples of `config` (plus `sets`) into `store`.
fn precompute(config: &Path, store: &Path, sets: &[&str]) -> Output {
    let mut command = Command::new(GRIN);
    command.args(["precompute", "--config"]).arg(config).arg("--out").arg(store).args(["--samples", "8"]);
    for set in sets {
        command.args(["--set", set]);
    }
    command.output().expect("run grin precompute")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fake_checkpoint(run_dir: &Path, step: usize) {
    std::fs::create_dir_all(run_dir).unwrap();
    let state = LoopState {
        step,
        config_json: "{}".into(),
        history: vec![],
        wall_s: 1.0,
        watch: Default::default(),
        data: None,
    };
    let ck = Checkpoint { state, model: vec![1, 2, 3], optimizer: vec![4, 5, 6, 7], average: vec![8, 9] };
    checkpoint::save(&run_dir.join("checkpoint.ckpt"), &ck).unwrap();
}

#[test]
fn a_rerun_never_replaces_an_interrupted_run_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    fake_checkpoint(&runs.join("tiny"), 7);
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("interrupted run's checkpoint at step 7") && e.contains("--overwrite"), "{e}");
    assert!(runs.join("tiny/checkpoint.ckpt").exists(), "the checkpoint is untouched");
    // Round 17: a checkpoint that cannot be read was offered --resume.
    std::fs::write(runs.join("tiny/checkpoint.ckpt"), b"garbage").unwrap();
    let e = stderr(&grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs));
    assert!(e.contains("checkpoint that cannot be resumed (") && !e.contains("--resume"), "{e}");
    assert_eq!(std::fs::read(runs.join("tiny/checkpoint.ckpt")).unwrap(), b"garbage");

    let out = grin(&["train", "--backend", "cpu", "--quiet", "--overwrite"], &config, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(runs.join("tiny/model.grin").exists());
    assert!(!runs.join("tiny/checkpoint.ckpt").exists(), "a finished run keeps no checkpoint");
}

#[test]
fn resume_without_a_checkpoint_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--resume"], &config, &runs);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("--resume") && e.contains("checkpoint.ckpt does not exist"), "{e}");
    assert!(!runs.join("tiny/metrics.csv").exists(), "nothing was started");
}

#[test]
fn zero_steps_and_unbounded_sizes_are_refused_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    for (set, key) in [("train.steps=0", "train.steps"), ("train.batch_size=100000000", "train.batch_size")] {
        let config = write_config(dir.path(), "");
        let out = grin(&["train", "--backend", "cpu", "--quiet", "--set", set], &config, &runs);
        assert!(!out.status.success());
        let e = stderr(&out);
        assert!(e.contains(&format!("key `{key}`")), "{e}");
        assert!(!runs.join("tiny/model.grin").exists(), "no untrained model is written");
    }
    let config = write_config(dir.path(), "");
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--set", "model.width_mult=1000"], &config, &runs);
    assert!(stderr(&out).contains("key `model.width_mult`"), "{}", stderr(&out));
}

#[test]
fn an_endless_config_file_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let out = grin(&["train", "--backend", "cpu", "--quiet"], Path::new("/dev/zero"), &runs);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/dev/zero: cannot read config: not a regular file"), "{}", stderr(&out));
    // A plain file past the cap is read only up to it.
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; 2 << 20]).unwrap();
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &big, &runs);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("big.toml: config is larger than 1024 KiB"), "{}", stderr(&out));
}

#[test]
fn a_damaged_checkpoint_part_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    fake_checkpoint(dir.path(), 3);
    let path = dir.path().join("checkpoint.ckpt");
    let mut bytes = std::fs::read(&path).unwrap();
    // The averaged model is last: its 2 bytes sit just before the final
    // checksum, and the optimizer's 4 before its length and their checksum.
    let average_at = bytes.len() - 8 - 1;
    let optimizer_at = average_at - 1 - 8 - 8 - 1;
    for (at, part) in [(optimizer_at, "optimizer state"), (average_at, "averaged model")] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x40;
        std::fs::write(&path, &damaged).unwrap();
        let e = checkpoint::load(&path).err().expect("a flipped byte is caught").to_string();
        assert!(e.contains(&format!("checkpoint {part}: damaged (checksum mismatch)")), "{e}");
    }
    // A checkpoint from before `train.ema` (three parts) still loads.
    bytes.truncate(bytes.len() - 8 - 2 - 8);
    bytes[..8].copy_from_slice(b"GRINCKP2");
    std::fs::write(&path, &bytes).unwrap();
    let ck = checkpoint::load(&path).unwrap();
    assert_eq!((ck.state.step, ck.optimizer, ck.average), (3, vec![4, 5, 6, 7], vec![]));
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_at_checkpoint_time_names_the_file_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.ckpt");
    // Writes to /dev/full fail with ENOSPC, as on a full disk (a device is
    // written through, never replaced).
    std::os::unix::fs::symlink("/dev/full", &path).unwrap();
    let state = LoopState {
        step: 1,
        config_json: "{}".into(),
        history: vec![],
        wall_s: 0.0,
        watch: Default::default(),
        data: None,
    };
    let ck = Checkpoint { state, model: vec![0; 1 << 16], optimizer: vec![0; 16], average: vec![] };
    let e = format!("{:#}", checkpoint::save(&path, &ck).unwrap_err());
    assert!(
        e.contains("cannot write checkpoint") && e.contains("checkpoint.ckpt") && e.contains("No space left"),
        "{e}"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["checkpoint.ckpt"], "no partial file left");
}

/// A run folder whose validation photos are `manifest` (jsonl, every photo
/// in the validation split), with an untrained model.
/// A 128x96 grey texture (no face) saved at `path`: a photo the JSONL runs read.
fn textured_photo(path: &Path) {
    image::GrayImage::from_fn(128, 96, |x, y| image::Luma([((x * 3 + y * 5) % 256) as u8])).save(path).unwrap();
}

fn calibration_run(dir: &Path, manifest: &str) -> PathBuf {
    let run = dir.join("runs/cal");
    std::fs::create_dir_all(&run).unwrap();
    let manifest_path = dir.join("m.jsonl");
    std::fs::write(&manifest_path, manifest).unwrap();
    let text = format!(
        "name = \"cal\"\n[features]\nwidth = 64\nheight = 64\non_bad_sample = \"skip\"\n[features.split]\ntrain = 0.0\n\
         val = 1.0\ntest = 0.0\n[features.source]\nkind = \"jsonl\"\nmanifest = {:?}\n[model]\nwidth_mult = 0.5\n",
        manifest_path.display().to_string()
    );
    std::fs::write(run.join("config.toml"), &text).unwrap();
    let config = grin_train::parse_config(&text, "config.toml", &[]).unwrap();
    let spec = config.detector_spec();
    let device = Default::default();
    type N = burn_ndarray::NdArray<f32>;
    // Under grin's generator lock: the other tests of this binary draw too.
    grin_model::seeded::<N, _>(&device, 3, || {
        grin_model::file::save_model(&run.join("model.grin"), &spec, &spec.init::<N>(&device))
    })
    .unwrap();
    run
}

/// Issue 90, round 9: `eval` and `mine` at `--run-size 4096x4096` under a
/// memory limit aborted in the pass (exit 134); each is an error naming the
/// frames and the flag, before the pass.
#[test]
fn a_run_size_past_the_process_memory_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    // A batch of 16 photos: 16 frames' maps at once (16 files: a photo
    // named twice is one photo).
    let manifest: Vec<String> = (0..16)
        .map(|i| {
            textured_photo(&dir.path().join(format!("a{i}.png")));
            format!(r#"{{"image": "a{i}.png", "boxes": [[30, 20, 70, 70]]}}"#)
        })
        .collect();
    let run = calibration_run(dir.path(), &manifest.join("\n"));
    let (model, config) = (run.join("model.grin"), run.join("config.toml"));
    let train_split = dir.path().join("train.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace("train = 0.0\nval = 1.0", "train = 1.0\nval = 0.0");
    std::fs::write(&train_split, text).unwrap();
    let (m, c, t) = (model.display(), config.display(), train_split.display());
    let elsewhere = tempfile::tempdir().unwrap();
    let mined = elsewhere.path().join("mined");
    for command in [
        format!("eval --model {m} --config {c} --split val --samples 0 --run-size 4096x4096"),
        format!("mine --model {m} --config {t} --out {} --run-size 4096x4096", mined.display()),
    ] {
        let script = format!("ulimit -v 2000000; exec {GRIN} {command} --quiet");
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{command}: {e}");
        assert!(e.contains("frame(s) of 4096x4096: the pass needs") && e.contains("--run-size"), "{command}: {e}");
    }
}

/// Issue 90, round 10: `grin export --out` or `grin simulate --out` naming
/// another run's config, summary or plot (or a dataset's manifest or shard)
/// replaced it, exit 0, and the run no longer read. A new file there is
/// the user's to add.
#[test]
fn an_output_never_replaces_a_file_of_a_run_or_dataset_folder() {
    let dir = tempfile::tempdir().unwrap();
    let run = calibration_run(dir.path(), "");
    std::fs::write(run.join(grin_output::LOCK_FILE), "").unwrap();
    std::fs::write(run.join("summary.json"), "{}").unwrap();
    let before = std::fs::read(run.join("config.toml")).unwrap();
    let model = format!("{}/assets/default.grin", env!("CARGO_MANIFEST_DIR"));
    let export =
        |out: &Path| Command::new(GRIN).args(["export", "--model", &model, "--out"]).arg(out).output().unwrap();
    let simulate = |out: &Path| {
        let figures = ["simulate", "--load-ms", "5", "--loaders", "2", "--step-ms", "3", "--seconds", "1", "--out"];
        Command::new(GRIN).args(figures).arg(out).output().unwrap()
    };
    for out in [export(&run.join("config.toml")), simulate(&run.join("summary.json"))] {
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains("a grin run's or dataset's folder (it holds grin.lock)"), "{e}");
    }
    assert_eq!(std::fs::read(run.join("config.toml")).unwrap(), before);
    assert_eq!(std::fs::read_to_string(run.join("summary.json")).unwrap(), "{}");
    assert!(export(&run.join("new.onnx")).status.success(), "a new file in the folder");

    // Round 11: `model-set --out` went around the check (another run's
    // model, config, checkpoint, a dataset's manifest replaced), and a new
    // file under a run's file name (`best.grin`) was taken for the run's.
    let model_set = |out: &Path| {
        let set = ["model-set", "--set", "model.nms_iou=0.3", "--model", &model, "--out"];
        Command::new(GRIN).args(set).arg(out).output().unwrap()
    };
    // Round 14: a dataset's file names likewise (`manifest.json` where a
    // dataset's first write has none yet, a shard's sidecar).
    let writes = "is a file grin writes in a run's or dataset's folder, and this is one";
    for (out, why) in [
        (run.join("model.grin"), "a grin run's or dataset's folder (it holds grin.lock)"),
        (run.join("best.grin"), writes),
        (run.join("manifest.json"), writes),
        (run.join("shard-00009.json"), writes),
        // Round 15: bench modes' mark, which let it replace a trained run.
        (run.join("bench-modes.txt"), writes),
    ] {
        let refused = model_set(&out);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(stderr(&refused).contains(why), "{}", stderr(&refused));
    }
    assert!(!run.join("best.grin").exists() && !run.join("manifest.json").exists());
    // Round 14: a live run's model rewritten in place (the run writes its
    // models over the rewrite): refused while the run holds its folder.
    let live = grin_output::try_lock(&run.join(grin_output::LOCK_FILE), grin_output::LockMode::Exclusive).unwrap();
    assert!(matches!(live, grin_output::Locked::Held(_)));
    let kept = std::fs::read(run.join("model.grin")).unwrap();
    let in_place = ["model-set", "--set", "model.nms_iou=0.3", "--model"];
    for args in [&in_place[..], &["calibrate", "--run"]] {
        let target = if args[0] == "calibrate" { run.clone() } else { run.join("model.grin") };
        let out = Command::new(GRIN).args(args).arg(&target).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("in use by") && stderr(&out).contains("then change its model"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read(run.join("model.grin")).unwrap(), kept);
    drop(live);
    // Round 11: `eval --out` another run's folder replaced its pr_curve.svg.
    // (Outside `dir`, which holds the run's photo manifest: an input folder.)
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join(grin_output::LOCK_FILE), "").unwrap();
    std::fs::write(other.join("pr_curve.svg"), "<svg/>").unwrap();
    let eval = Command::new(GRIN).args(["eval", "--run"]).arg(&run).arg("--out").arg(&other).output().unwrap();
    assert_eq!(eval.status.code(), Some(2), "{}", stderr(&eval));
    let e = stderr(&eval);
    assert!(e.contains("(it holds grin.lock): name a new folder for the report, such as"), "{e}");
    assert_eq!(std::fs::read_to_string(other.join("pr_curve.svg")).unwrap(), "<svg/>");
    // Round 20: two evals into one folder at once both said they wrote it.
    let busy = elsewhere.path().join("busy");
    let held = grin_output::hold_folder(&busy).unwrap();
    let eval = Command::new(GRIN).args(["eval", "--run"]).arg(&run).arg("--out").arg(&busy).output().unwrap();
    assert_eq!(eval.status.code(), Some(2), "{}", stderr(&eval));
    assert!(stderr(&eval).contains("busy: another grin command is writing into this folder"), "{}", stderr(&eval));
    assert!(std::fs::read_dir(&busy).unwrap().next().is_none(), "nothing written");
    drop(held);
    // Round 14: crops written into a run's folder.
    let crops = Command::new(GRIN).args(["features", "export-crops", "--count", "1", "--out"]).arg(&other).output();
    let crops = crops.unwrap();
    assert_eq!(crops.status.code(), Some(2), "{}", stderr(&crops));
    // Round 18: named a folder "for the report".
    assert!(
        stderr(&crops).contains("folder (it holds grin.lock): name a new folder for the crops"),
        "{}",
        stderr(&crops)
    );
    assert!(!other.join("smile").exists());
    // Round 15: crops over earlier ones.
    let earlier = elsewhere.path().join("crops");
    std::fs::create_dir_all(earlier.join("smile")).unwrap();
    std::fs::write(earlier.join("smile/0.png"), "mine").unwrap();
    let crops = Command::new(GRIN).args(["features", "export-crops", "--count", "1", "--out"]).arg(&earlier).output();
    let crops = crops.unwrap();
    assert_eq!(crops.status.code(), Some(2), "{}", stderr(&crops));
    assert!(stderr(&crops).contains("smile/ already holds files"), "{}", stderr(&crops));
    assert_eq!(std::fs::read(earlier.join("smile/0.png")).unwrap(), b"mine");
    // Round 11: calibrate through a link into another run rewrote that run's model.
    std::fs::copy(run.join("config.toml"), other.join("config.toml")).unwrap();
    std::os::unix::fs::symlink(run.join("model.grin"), other.join("model.grin")).unwrap();
    let kept = std::fs::read(run.join("model.grin")).unwrap();
    let calibrate = Command::new(GRIN).args(["calibrate", "--run"]).arg(&other).output().unwrap();
    assert_eq!(calibrate.status.code(), Some(2));
    assert!(stderr(&calibrate).contains("outside the run; calibrate rewrites the run's own model"));
    assert_eq!(std::fs::read(run.join("model.grin")).unwrap(), kept);
}

#[test]
fn calibrate_refuses_to_guess_and_leaves_the_model_alone() {
    let dir = tempfile::tempdir().unwrap();
    textured_photo(&dir.path().join("a.png"));
    std::fs::write(dir.path().join("b.jpg"), b"not a picture").unwrap();
    let cases = [
        // An untrained model finds no face: F is 0 at every threshold.
        (r#"{"image": "a.png", "boxes": [[30, 20, 70, 70]]}"#, "F2 is 0 at every threshold"),
        // Every photo skipped (on_bad_sample = "skip"): nothing was scored.
        (r#"{"image": "b.jpg", "boxes": [[30, 20, 70, 70]]}"#, "no validation photo with a face was scored"),
    ];
    for (manifest, why) in cases {
        let run = calibration_run(dir.path(), manifest);
        let before = std::fs::read(run.join("model.grin")).unwrap();
        let out = Command::new(GRIN).args(["calibrate", "--run"]).arg(&run).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains("model.grin: not calibrated, left unchanged") && e.contains(why), "{e}");
        assert_eq!(std::fs::read(run.join("model.grin")).unwrap(), before, "model.grin untouched");
        let mut names: Vec<_> = std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["config.toml", "model.grin"], "nothing left behind");
        std::fs::remove_dir_all(&run).unwrap();
    }
    // A config whose channels differ from the model's: refused as `grin eval` refuses it.
    let run = calibration_run(dir.path(), cases[0].0);
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    std::fs::write(run.join("config.toml"), config.replace("[features]\n", "[features]\nchannels = 3\n")).unwrap();
    let out = Command::new(GRIN).args(["calibrate", "--run"]).arg(&run).output().unwrap();
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("model takes 1 channel(s), the config's features have 3"), "{e}");
}

#[test]
fn allow_stale_never_feeds_records_of_another_size() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let store = dir.path().join("store64");
    let out = precompute(&config, &store, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = dir.path().join("runs");
    for mode in ["precomputed", "in-vram"] {
        let store_set = format!("train.store={:?}", store.display().to_string());
        let args = [
            "train",
            "--backend",
            "cpu",
            "--quiet",
            "--allow-stale",
            "--mode",
            mode,
            "--set",
            "features.width=96",
            "--set",
            &store_set,
        ];
        let out = grin(&args, &config, &runs);
        assert_eq!(out.status.code(), Some(2), "a refusal (exit 2), not a panic (101): {}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains("records are 64x64x1, the config's features are 96x64x1"), "{mode}: {e}");
    }
}

#[test]
fn train_init_names_a_missing_or_mismatched_model_and_loads_a_matching_one() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let missing = dir.path().join("nope.grin");
    let config = write_config(dir.path(), &format!("init = {:?}\n", missing.display().to_string()));
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("key `train.init`") && e.contains("nope.grin"), "{e}");

    // A model of another width: refused, naming both architectures.
    let other = write_config(dir.path(), "");
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--set", "model.width_mult=0.25"], &other, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    let narrow = runs.join("tiny/model.grin");
    let config = write_config(dir.path(), &format!("init = {:?}\n", narrow.display().to_string()));
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--set", "name=wide"], &config, &runs);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("key `train.init`") && e.contains("widths"), "{e}");

    // The same architecture: the run starts from those weights.
    let out = grin(
        &["train", "--backend", "cpu", "--quiet", "--set", "name=tuned", "--set", "model.width_mult=0.25"],
        &config,
        &runs,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("starting from the weights of"), "{}", stderr(&out));
    assert!(runs.join("tuned/model.grin").exists());

    // Top-down fusion is added to a model without it (as a no-op to start
    // from), and never silently dropped from one with it.
    let fused = ["--set", "model.width_mult=0.25", "--set", "model.top_down=true"];
    let out =
        grin(&[&["train", "--backend", "cpu", "--quiet", "--set", "name=fused"][..], &fused].concat(), &config, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("adding top-down fusion"), "{}", stderr(&out));
    let fused_model = runs.join("fused/model.grin");
    let config = write_config(dir.path(), &format!("init = {:?}\n", fused_model.display().to_string()));
    let out = grin(
        &["train", "--backend", "cpu", "--quiet", "--set", "name=unfused", "--set", "model.width_mult=0.25"],
        &config,
        &runs,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("has top-down fusion"), "{}", stderr(&out));

    // A wider stride-8 head grows from a narrower one (its tap has 12
    // channels here); a narrower one is refused, naming both.
    let wide = [&fused[..], &["--set", "model.fine_head=20"]].concat();
    let out = grin(
        &[&["train", "--backend", "cpu", "--quiet", "--set", "name=wide-head"][..], &wide].concat(),
        &config,
        &runs,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("widening the stride-8 head"), "{}", stderr(&out));
    let wide_model = runs.join("wide-head/model.grin");
    let config = write_config(dir.path(), &format!("init = {:?}\n", wide_model.display().to_string()));
    let out = grin(
        &[&["train", "--backend", "cpu", "--quiet", "--set", "name=narrow-head"][..], &fused].concat(),
        &config,
        &runs,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("key `train.init`") && e.contains("of 12 -> 20 channels cannot widen into one of 12 -> 12"),
        "{e}"
    );

    // A grey model starts a colour one (its first conv split by the luma
    // shares); a colour one cannot start a grey one.
    let colour = [&fused[..], &["--set", "features.channels=3"]].concat();
    let out = grin(
        &[&["train", "--backend", "cpu", "--quiet", "--set", "name=colour"][..], &colour].concat(),
        &write_config(dir.path(), &format!("init = {:?}\n", fused_model.display().to_string())),
        &runs,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("reads grey; its first conv is split between R, G and B"), "{}", stderr(&out));
    let colour_model = runs.join("colour/model.grin");
    let config = write_config(dir.path(), &format!("init = {:?}\n", colour_model.display().to_string()));
    let out = grin(
        &[&["train", "--backend", "cpu", "--quiet", "--set", "name=grey-again"][..], &fused].concat(),
        &config,
        &runs,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("key `train.init`") && e.contains("has 3 channel(s)"), "{e}");
}

/// Issue 28, item 1: a finished run is never replaced by a rerun of its
/// name; `--overwrite` replaces it.
#[test]
fn a_finished_run_is_never_replaced_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    let model = std::fs::read(runs.join("tiny/model.grin")).unwrap();
    let summary = std::fs::read(runs.join("tiny/summary.json")).unwrap();

    // Any mode, even one that would first need a dataset: the run folder is
    // checked before anything slow.
    let store_set = format!("train.store={:?}", dir.path().join("data").display().to_string());
    for mode in ["on-the-fly", "precomputed", "auto"] {
        let args = ["train", "--backend", "cpu", "--quiet", "--mode", mode, "--name", "tiny", "--set", &store_set];
        let out = grin(&args, &config, &runs);
        assert_eq!(out.status.code(), Some(2), "{mode}: {}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.lines().filter(|l| l.starts_with("error")).count(), 1, "{e}");
        assert!(e.contains("runs/tiny holds a finished run (summary.json: 6 steps, held-out face AP@0.5 "), "{e}");
        assert!(e.contains("another name (--name), or add --overwrite"), "{e}");
    }
    assert_eq!(std::fs::read(runs.join("tiny/model.grin")).unwrap(), model, "the model is untouched");
    assert_eq!(std::fs::read(runs.join("tiny/summary.json")).unwrap(), summary);
    assert!(!dir.path().join("data").exists(), "no dataset was built for a refused run");

    let out =
        grin(&["train", "--backend", "cpu", "--quiet", "--overwrite", "--set", "features.seed=6"], &config, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(std::fs::read(runs.join("tiny/model.grin")).unwrap(), model, "--overwrite replaced the run");
}

/// Issue 28, item 2: out-of-range keys from `--set` (what a sweep passes)
/// are refused by name before anything is trained or written; the full
/// key-by-key check is `src/config.rs`'s `every_numeric_key_has_a_range`.
#[test]
fn out_of_range_keys_are_refused_before_a_run_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let cases = [
        ("model.nms_iou=nan", "model.nms_iou"),
        ("model.nms_iou=-1", "model.nms_iou"),
        ("model.score_threshold=inf", "model.score_threshold"),
        ("train.loss.box_weight=-1", "train.loss.box_weight"),
        ("train.loss.focal_gamma=inf", "train.loss.focal_gamma"),
        ("train.loss.smile_weight=nan", "train.loss.smile_weight"),
        ("train.weight_decay=-1", "train.weight_decay"),
        ("features.workers=100000", "features.workers"),
        ("features.source.max_face=inf", "features.source.min_face`/`max_face"),
    ];
    for (set, key) in cases {
        let out = grin(&["train", "--backend", "cpu", "--quiet", "--set", set], &config, &runs);
        assert_eq!(out.status.code(), Some(2), "{set}: {}", stderr(&out));
        let e = stderr(&out);
        assert_eq!(e.lines().count(), 1, "{e}");
        // The file alone is fine: the error names the --set that brought the value.
        assert!(
            e.contains(&format!("--set {set} (over ")) && e.contains("tiny.toml): key `") && e.contains(key),
            "{set}: {e}"
        );
        assert!(!runs.exists(), "{set}: nothing is written");
    }
}

/// Issue 28, item 5: training refuses a dataset whose shard no longer
/// hashes to the manifest (here: label bytes overwritten), naming the shard.
#[test]
fn training_refuses_a_shard_that_verify_would_reject() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let store = dir.path().join("store");
    let out = precompute(&config, &store, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let store_set = format!("train.store={:?}", store.display().to_string());
    let runs = dir.path().join("runs");
    let train = |name: &str| {
        let args =
            ["train", "--backend", "cpu", "--quiet", "--mode", "precomputed", "--set", &store_set, "--name", name];
        grin(&args, &config, &runs)
    };
    let out = train("before");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("1 shard(s), 0.00 GB, match their checksums"), "{}", stderr(&out));
    // `auto` measures balance on the dataset and then trains from it: hashed once, not twice.
    let args = ["train", "--backend", "cpu", "--quiet", "--mode", "auto", "--set", &store_set, "--name", "auto"];
    let out = grin(&args, &config, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("match their checksums").count(), 1, "{}", stderr(&out));

    // A 64x64x1 record: pixels, 16 boxes of 4 f32, then 16 label bytes.
    let shard = store.join("shard-00000.bin");
    let mut bytes = std::fs::read(&shard).unwrap();
    let labels = 64 * 64 + 16 * 16;
    bytes[labels..labels + 16].fill(0);
    std::fs::write(&shard, bytes).unwrap();
    let verify = Command::new(GRIN).arg("verify").arg(&store).output().unwrap();
    assert!(!verify.status.success(), "verify rejects the shard");
    let out = train("after");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("shard-00000.bin: checksum ") && e.contains("grin verify"), "{e}");
    assert!(!runs.join("after/model.grin").exists());

    // Issue 42: an on-the-fly run never reads the store, so a damaged one
    // does not stop it: a warning names it, and T_r is timed in memory.
    let args = ["train", "--backend", "cpu", "--quiet", "--mode", "on-the-fly", "--set", &store_set, "--name", "fly"];
    let out = grin(&args, &config, &runs);
    assert!(out.status.success(), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("warning: ") && e.contains("shard-00000.bin: checksum ") && e.contains("does not read it"),
        "{e}"
    );
    assert!(runs.join("fly/model.grin").exists());
}

/// Issue 42: a dataset made from another config is refused with its advice
/// said once (it said "rebuild it with `grin precompute`" twice).
#[test]
fn a_stale_dataset_is_refused_with_one_piece_of_advice() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let store = dir.path().join("store");
    let out = precompute(&config, &store, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let store_set = format!("train.store={:?}", store.display().to_string());
    let args = [
        "train",
        "--backend",
        "cpu",
        "--quiet",
        "--mode",
        "precomputed",
        "--set",
        &store_set,
        "--set",
        "features.seed=6",
    ];
    let out = grin(&args, &config, &dir.path().join("runs"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("features.seed"), "{e}");
    assert_eq!(e.matches("grin precompute").count(), 1, "{e}");
    assert_eq!(e.matches("--allow-stale").count(), 1, "{e}");
}

/// Issue 28, item 5: a dataset folder that another grin process holds is
/// refused, naming the folder. The lock is held here as a writer (or a
/// training run) would hold it: the OS's advisory lock on `grin.lock`.
#[test]
fn a_dataset_folder_in_use_is_refused_to_a_second_writer() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let lock = std::fs::File::create(store.join("grin.lock")).unwrap();
    for shared in [false, true] {
        if shared {
            lock.lock_shared().unwrap()
        } else {
            lock.lock().unwrap()
        }
        let out = precompute(&config, &store, &["features.seed=1"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains(&format!("{}: in use by another grin process", store.display())), "{e}");
        // The folder is at fault, not the config: its name does not lead the line.
        assert!(!e.contains("tiny.toml"), "{e}");
        lock.unlock().unwrap();
    }
    assert!(!store.join("manifest.json").exists() && !store.join("shard-00000.bin").exists());
    let out = precompute(&config, &store, &["features.seed=1"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A training run does not read a dataset that is being written.
    lock.lock().unwrap();
    let store_set = format!("train.store={:?}", store.display().to_string());
    let runs = dir.path().join("runs");
    let args = [
        "train",
        "--backend",
        "cpu",
        "--quiet",
        "--mode",
        "precomputed",
        "--set",
        &store_set,
        "--set",
        "features.seed=1",
    ];
    let out = grin(&args, &config, &runs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a grin precompute or merge is writing this dataset"), "{}", stderr(&out));
}

#[test]
fn grin_mine_refuses_bad_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let out_dir = dir.path().join("mined");
    let mine = |model: &Path, extra: &[&str]| {
        Command::new(GRIN)
            .args(["mine", "--model"])
            .arg(model)
            .arg("--config")
            .arg(&config)
            .arg("--out")
            .arg(&out_dir)
            .args(extra)
            .output()
            .unwrap()
    };
    // No such model file: named.
    let missing = dir.path().join("none.grin");
    let out = mine(&missing, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&format!("{}: cannot read model", missing.display())), "{}", stderr(&out));
    // A score that is not one: the flag is named.
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");
    let out = mine(&model, &["--score", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`2`: expected a score in [0, 1]"), "{}", stderr(&out));
    // Two frame sizes asked for at once: both flags named.
    let out = mine(&model, &["--own-size", "--run-size", "640x480"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("--own-size") && e.contains("--run-size") && e.contains("cannot be used with"), "{e}");
    // A config with no real photos has nothing to mine: said, not an empty folder and exit 0.
    let out = mine(&model, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("the config's source has no real photos to mine"), "{}", stderr(&out));
    // Round 10: the refusal left an empty --out folder.
    assert!(!out_dir.exists(), "a refused mining makes no folder");
    // Round 10: --out naming a file failed after the model loaded ("File exists").
    std::fs::write(&out_dir, b"notes").unwrap();
    let out = mine(&missing, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--out") && stderr(&out).contains("is not a folder"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&out_dir).unwrap(), b"notes");
}

#[test]
fn eval_out_with_no_photo_source_is_refused_and_nothing_written() {
    // A synthetic source has no photos: an empty photos.json was written,
    // exit 0 (issue 90, round 2); the report asked for cannot be made.
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let out_dir = dir.path().join("eval");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");
    let out = Command::new(GRIN)
        .args(["eval", "--samples", "2", "--model"])
        .arg(&model)
        .arg("--config")
        .arg(&config)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no photos are scored (the config's source holds no real photos)"),
        "{}",
        stderr(&out)
    );
    assert!(!out_dir.exists(), "nothing written");
    // --photos on such a config was dropped without a word (round 7).
    let out = Command::new(GRIN)
        .args(["eval", "--samples", "2", "--photos", "5", "--model"])
        .arg(&model)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--photos 5: the config's source holds no real photos"), "{}", stderr(&out));
}

#[test]
fn grin_eval_takes_one_frame_size() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");
    let out = Command::new(GRIN)
        .args(["eval", "--own-size", "--run-size", "640x480", "--model"])
        .arg(&model)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("--own-size") && e.contains("--run-size") && e.contains("cannot be used with"), "{e}");
}

/// Issue 77: the CPU step launches no kernels, so `--launches` there would
/// print a count of 0 as if it were a result.
#[test]
fn counting_launches_on_the_cpu_backend_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let store = dir.path().join("store");
    let out = Command::new(GRIN)
        .args(["bench", "step", "--backend", "cpu", "--launches", "--config"])
        .arg(&config)
        .arg("--store")
        .arg(&store)
        .output()
        .expect("run grin");
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("--launches counts CUDA and wgpu kernels; the cpu backend launches none"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!store.exists(), "refused before any store is written");
}

/// Issue 80, cause 7: `grin config --keys | true` panicked ("failed
/// printing to stdout: Broken pipe", exit 101). The reader is gone before
/// the first write here, so every write meets the closed pipe.
#[test]
fn a_closed_output_pipe_ends_a_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");
    let model = model.to_str().unwrap();
    let config_arg = config.to_str().unwrap();
    for args in [
        vec!["config", "--keys", "--config", config_arg],
        vec!["model-info", "--config", config_arg],
        vec!["eval", "--samples", "2", "--model", model, "--config", config_arg],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(GRIN).args(&args).stdout(writer).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {e}");
        assert!(e.is_empty() || !e.contains("panicked") && !e.contains("Broken pipe"), "{args:?}: {e}");
    }
}

/// Issue 80, causes 3 and 10: `grin store bench` wrote its order and JSON
/// over the store it measures (a truncated shard died of SIGBUS), and its
/// counts had no bounds (`--batches 0` blamed "batch size", 10^11 aborted).
#[test]
fn store_bench_never_writes_into_its_store_and_bounds_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let store = dir.path().join("store");
    assert!(precompute(&config, &store, &[]).status.success());
    let bench = |extra: &[&str]| {
        let mut command = Command::new(GRIN);
        command.args(["store", "bench", "--repeats", "1", "--dir"]).arg(&store).args(extra);
        command.output().unwrap()
    };
    let shard = store.join("shard-00000.bin");
    let manifest = store.join("manifest.json");
    for (flag, target) in [("--order-out", &shard), ("--json", &manifest), ("--json", &shard)] {
        let out = bench(&[flag, target.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{flag} {}: {}", target.display(), stderr(&out));
        assert!(stderr(&out).contains("is inside an input folder"), "{}", stderr(&out));
    }
    // Round 17: JSON figures under a config's or a photo's name replaced it.
    let config_copy = dir.path().join("c.toml");
    std::fs::copy(&config, &config_copy).unwrap();
    let out = bench(&["--json", config_copy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("JSON goes in a file named NAME.json"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&config_copy).unwrap(), std::fs::read(&config).unwrap());
    let verify = Command::new(GRIN).arg("verify").arg(&store).output().unwrap();
    assert!(verify.status.success(), "the store still opens: {}", stderr(&verify));
    for (args, named) in [
        (&["--batches", "0"][..], "--batches"),
        (&["--batch", "0"], "--batch"),
        (&["--repeats", "0"], "--repeats"),
        (&["--batches", "100000000000"], "--batches"),
    ] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named) && !stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
    let order = dir.path().join("order.bin");
    let out = bench(&["--batches", "2", "--batch", "4", "--order-out", order.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&order).unwrap().len(), 2 * 4 * 8);
    // Round 8: a batch past the store reserved batch x record bytes (19.5 GB
    // for 10^6, exit 134); two outputs on one path kept only the second.
    let out = bench(&["--batch", "1000000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("--batch 1000000:") && stderr(&out).contains("batches of 8"), "{}", stderr(&out));
    // Round 19: a new file named two ways (`x`, `/abs/./x`) was not seen as one.
    let fresh = dir.path().join("fresh.json");
    let twice = dir.path().join(".").join("fresh.json");
    for (order, json) in [(&order, &order), (&fresh, &twice)] {
        let out = bench(&["--order-out", order.to_str().unwrap(), "--json", json.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("name one file: give each output its own"), "{}", stderr(&out));
    }
    assert!(!fresh.exists(), "refused before the work");
}

/// Issue 90, round 8: what `grin train` writes in its run folder reached
/// its inputs (a `metrics.csv` linked to the config, a config named
/// `metrics.csv` in the run folder, `train.init` in the folder
/// `--overwrite` empties); a run killed before its first checkpoint left a
/// `best.grin` a fresh run kept; bench modes replaced a folder holding an
/// interrupted run. Each is refused before anything is written.
#[test]
fn a_run_never_writes_over_what_it_reads_and_keeps_no_stale_best_model() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let config = write_config(dir.path(), "");
    let original = std::fs::read(&config).unwrap();
    let run = runs.join("tiny");
    std::fs::create_dir_all(&run).unwrap();
    std::os::unix::fs::symlink(&config, run.join("metrics.csv")).unwrap();
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // Named as the link in the run folder that reaches the config.
    let e = stderr(&out);
    assert!(e.contains("holds a link") && e.contains("metrics.csv") && e.contains("tiny.toml"), "{e}");
    assert_eq!(std::fs::read(&config).unwrap(), original);
    std::fs::remove_dir_all(&run).unwrap();

    // The config inside the run folder, named as a run's file.
    std::fs::create_dir_all(&run).unwrap();
    let inside = run.join("metrics.csv");
    std::fs::copy(&config, &inside).unwrap();
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &inside, &runs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds an input"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&inside).unwrap(), original);
    std::fs::remove_dir_all(&run).unwrap();

    // train.init in the folder --overwrite empties.
    assert!(grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs).status.success());
    let init = run.join("model.grin");
    let train = format!("steps = 6\nbatch_size = 2\ninit = {:?}\n", init.display().to_string());
    let with_init = tiny_config(dir.path(), "init.toml", &train);
    let before = std::fs::read(&init).unwrap();
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--overwrite"], &with_init, &runs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds an input") && stderr(&out).contains("model.grin"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&init).unwrap(), before);

    // Only a best.grin (killed before the first checkpoint): not kept silently.
    std::fs::rename(run.join("model.grin"), run.join("best.grin")).unwrap();
    for name in ["summary.json", "config.toml"] {
        std::fs::remove_file(run.join(name)).unwrap();
    }
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds an earlier run's best.grin"), "{}", stderr(&out));
    assert!(grin(&["train", "--backend", "cpu", "--quiet", "--overwrite"], &config, &runs).status.success());

    // bench modes over a folder it did not write, finished or not.
    let bench_runs = dir.path().join("bench");
    std::fs::create_dir_all(bench_runs.join("on-the-fly")).unwrap();
    std::fs::write(bench_runs.join("on-the-fly/NOTES.txt"), "mine").unwrap();
    let bench = |steps: &str| {
        let mut command = Command::new(GRIN);
        command.args(["bench", "modes", "--backend", "cpu", "--steps", steps, "--modes", "on-the-fly", "--config"]);
        command.arg(&config).arg("--runs-dir").arg(&bench_runs);
        command
    };
    let out = bench("2").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds files that grin bench modes did not write"), "{}", stderr(&out));
    assert_eq!(std::fs::read(bench_runs.join("on-the-fly/NOTES.txt")).unwrap(), b"mine");

    // Round 14: a bench stopped mid-run left a folder the next one refused
    // as not its own (its mark was written after the run).
    std::fs::remove_dir_all(&bench_runs).unwrap();
    let quiet = std::process::Stdio::null;
    let mut child = bench("100000").stdout(quiet()).stderr(quiet()).spawn().unwrap();
    let mark = bench_runs.join("on-the-fly/bench-modes.txt");
    let started = std::time::Instant::now();
    while !mark.exists() && started.elapsed() < std::time::Duration::from_secs(120) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    child.wait().unwrap();
    assert!(mark.exists(), "the bench marks its run folder before it trains");
    let out = bench("2").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Issue 80, cause 2: two runs into one folder both exited 0, the second's
/// config beside the first's results; `--overwrite` replaced a live run.
/// The lock is held here as a live run holds it, with that run's PID.
#[test]
fn a_run_folder_in_use_is_refused_naming_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let run_dir = runs.join("tiny");
    std::fs::create_dir_all(&run_dir).unwrap();
    let lock = std::fs::File::create(run_dir.join("grin.lock")).unwrap();
    lock.lock().unwrap();
    std::fs::write(run_dir.join("grin.lock"), "4242").unwrap();
    for extra in [&[][..], &["--overwrite"]] {
        let args: Vec<&str> = ["train", "--backend", "cpu", "--quiet"].iter().chain(extra).copied().collect();
        let out = grin(&args, &config, &runs);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains(&format!("{}: in use by grin process 4242", run_dir.display())), "{e}");
        assert!(!run_dir.join("config.toml").exists(), "nothing written into the live run's folder");
    }
    drop(lock);
    let out = grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs);
    assert!(out.status.success(), "the holder is gone: {}", stderr(&out));
}

/// Issue 80, cause 5: flags that cannot apply were silent no-ops.
#[test]
fn a_flag_that_cannot_apply_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--devices", "0,1"], &config, &runs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--devices [0, 1]: the cpu backend trains on one device"), "{}", stderr(&out));
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");
    let eval = |extra: &[&str]| {
        let mut command = Command::new(GRIN);
        command.args(["eval", "--samples", "1", "--model"]).arg(&model).arg("--config").arg(&config).args(extra);
        command.output().unwrap()
    };
    let out = eval(&["--photos", "0", "--out", dir.path().join("report").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no photos are scored"), "{}", stderr(&out));
    // On scenes alone no second look runs at all (round 14).
    let out = eval(&["--second-look-below", "0", "--second-look-mirror"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--second-look-below: no photos are scored"), "{}", stderr(&out));
}

/// Issue 90, cause C: a run folder's `grin.lock` that is a symbolic link
/// had the file it points to truncated and the PID written there (exit 0);
/// a dangling one made a file outside the run folder; a folder or a
/// read-only one was "cannot write the holder's PID: Invalid argument".
#[test]
fn an_odd_lock_file_is_refused_by_what_it_is_and_what_it_points_to_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let lock = runs.join("tiny").join("grin.lock");
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, "keep me").unwrap();
    let elsewhere = dir.path().join("elsewhere");
    type Make<'a> = &'a dyn Fn(&Path);
    // A folder of that name may hold anything: moved aside, not removed (round 6).
    // A hard link to a file: cut to the PID under --overwrite (round 9).
    let cases: [(Make<'_>, &str, &str); 4] = [
        (&|p| std::os::unix::fs::symlink(&precious, p).unwrap(), "is a symbolic link", "remove it"),
        (&|p| std::os::unix::fs::symlink(&elsewhere, p).unwrap(), "is a symbolic link", "remove it"),
        (&|p| std::fs::create_dir(p).unwrap(), "is a folder", "move it elsewhere"),
        (&|p| std::fs::hard_link(&precious, p).unwrap(), "is a hard link", "remove this name"),
    ];
    for (make, said, to_do) in cases {
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        make(&lock);
        let out = grin(&["train", "--backend", "cpu", "--quiet", "--no-balance", "--overwrite"], &config, &runs);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains(&lock.display().to_string()) && e.contains(said) && e.contains(to_do), "{e}");
        assert!(!e.contains("holder's PID"), "{e}");
        std::fs::remove_dir_all(lock.parent().unwrap()).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me", "the link's target is untouched");
    assert!(!elsewhere.exists(), "nothing made outside the run folder");
}

/// Issue 90, cause G: `grin calibrate` writes its threshold back only into
/// the model it chose it for; one held by another grin is refused at once.
#[test]
fn calibrate_refuses_a_model_another_grin_is_rewriting() {
    let dir = tempfile::tempdir().unwrap();
    textured_photo(&dir.path().join("a.png"));
    let run = calibration_run(dir.path(), r#"{"image": "a.png", "boxes": [[30, 20, 70, 70]]}"#);
    let before = std::fs::read(run.join("model.grin")).unwrap();
    let held = grin_output::hold(&run.join("model.grin")).unwrap();
    let out = Command::new(GRIN).args(["calibrate", "--run"]).arg(&run).output().unwrap();
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("model.grin: another grin process is rewriting it"), "{e}");
    drop(held);
    assert_eq!(std::fs::read(run.join("model.grin")).unwrap(), before);
}

/// Issue 90, causes D and E: flags that cannot apply (each a silent no-op)
/// and counts past their bound (`--samples 1e11` filled the disk) are
/// refused naming the flag, before anything is built or written.
#[test]
fn more_flags_that_cannot_apply_and_counts_past_their_bound_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let c = config.to_str().unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");
    let m = model.to_str().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        // The look turned off, its confirm score given (a model without a
        // look: `look.rs` tests, the same rule).
        (
            &[
                "eval",
                "--samples",
                "1",
                "--model",
                m,
                "--config",
                c,
                "--second-look-below",
                "0",
                "--second-look-confirm",
                "0.99",
            ],
            "--second-look-below: no photos are scored",
        ),
        (&["bench", "modes", "--backend", "cpu", "--config", c, "--modes", "auto"], "auto is what `grin train` asks"),
        (&["precompute", "--config", c, "--out", s, "--samples", "100000000000"], "--samples"),
        (&["bench", "step", "--backend", "cpu", "--config", c, "--store", s, "--samples", "100000000000"], "--samples"),
        (&["bench", "step", "--backend", "cpu", "--config", c, "--store", s, "--warmup", "1000000000000"], "--warmup"),
        (&["bench", "modes", "--backend", "cpu", "--config", c, "--steps", "1000000000000"], "--steps"),
        (&["eval", "--model", m, "--config", c, "--samples", "100000000000"], "--samples"),
        (&["features", "preview", "--config", c, "--out", "x.png", "--count", "100000"], "--count"),
        (&["mine", "--model", m, "--config", c, "--out", s, "--photos", "100000000000"], "--photos"),
    ];
    for (args, named) in cases {
        let out = Command::new(GRIN).args(args).current_dir(dir.path()).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(named) && !e.contains("panicked"), "{args:?}: {e}");
    }
    assert!(!store.exists(), "nothing built");
    // A photo size with no photo to score, a mode named twice, --samples for a store that holds another count.
    let built = dir.path().join("built");
    assert!(precompute(&config, &built, &[]).status.success());
    let b = built.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        // A store is built where it is missing: never over an input or a file ("File exists" before).
        (&["bench", "step", "--backend", "cpu", "--config", c, "--store", c], "is also an input"),
        (
            &["bench", "step", "--backend", "cpu", "--config", c, "--store", m],
            "is not a folder; --store names the folder",
        ),
        (
            &["eval", "--samples", "1", "--photos", "0", "--model", m, "--config", c, "--own-size"],
            "--own-size: no photos are scored",
        ),
        (
            &["eval", "--samples", "1", "--photos", "0", "--model", m, "--config", c, "--run-size", "640x480"],
            "--run-size: no photos are scored",
        ),
        (
            &["bench", "modes", "--backend", "cpu", "--config", c, "--modes", "in-vram,in-vram"],
            "--modes: in-vram is named twice",
        ),
        (&["bench", "step", "--backend", "cpu", "--config", c, "--store", b, "--samples", "9"], "--samples 9: "),
    ];
    for (args, named) in cases {
        let out = Command::new(GRIN).args(args).current_dir(dir.path()).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(named), "{args:?}: {e}");
    }
    // A run name past a folder name's bound (900 KB, in a config: an
    // argument that long is past the OS's bound): named by key, in one short line.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("name = \"tiny\"", &format!("name = {:?}", "n".repeat(900_000)));
    std::fs::write(&config, text).unwrap();
    let out = Command::new(GRIN).args(["train", "--backend", "cpu", "--config", c]).output().unwrap();
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}", &e[..300.min(e.len())]);
    assert!(e.contains("key `name`") && e.contains("at most 255") && e.len() < 600, "{}", &e[..300.min(e.len())]);
}

/// Issue 90: a run writes its resolved config as RUN/config.toml; given
/// that file as its --config, it wrote over its own input. Refused unless
/// the run would write it back unchanged (a resume from the saved config).
#[test]
fn a_run_never_rewrites_the_config_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(runs.join("tiny")).unwrap();
    let config = write_config(&runs.join("tiny"), "");
    let own = runs.join("tiny/config.toml");
    std::fs::rename(&config, &own).unwrap();
    let before = std::fs::read(&own).unwrap();
    let out = grin(&["train", "--backend", "cpu", "--quiet", "--no-balance"], &own, &runs);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("is the run's own config.toml") && e.contains("copy it elsewhere"), "{e}");
    assert_eq!(std::fs::read(&own).unwrap(), before);
}

/// Issue 90, round 9: a folder holding no run, only files a run writes (a
/// config.toml of the user's, a metrics.csv and a training.svg), had them
/// replaced without a word. Each is now refused without --overwrite.
#[test]
fn files_a_run_writes_in_a_folder_holding_no_run_need_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let folder = runs.join("tiny");
    for name in ["config.toml", "metrics.csv", "training.svg"] {
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(name), "the user's").unwrap();
        let out = grin(&["train", "--backend", "cpu", "--quiet", "--no-balance"], &config, &runs);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains(&format!("holds {name}, a file a run writes")) && e.contains("--overwrite"), "{e}");
        assert_eq!(std::fs::read_to_string(folder.join(name)).unwrap(), "the user's", "{name} kept");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// `grin` with `args`, given 30 s: a hang is a failure, not a stuck suite.
fn grin_within(args: &[&std::ffi::OsStr]) -> Output {
    let mut child = Command::new(GRIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("grin {args:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Issue 90, round 7: a FIFO as a run's checkpoint, as a finished run's
/// summary or as `--config` hung every command that read it. Each is one
/// line naming the file, at once.
#[test]
fn a_fifo_for_a_checkpoint_a_summary_or_a_config_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let config = write_config(dir.path(), "");
    let os = |s: &str| std::ffi::OsString::from(s);
    let train = |extra: &[&str]| {
        let mut args = vec![os("train"), os("--backend"), os("cpu"), os("--quiet"), os("--config")];
        args.push(config.clone().into_os_string());
        args.push(os("--runs-dir"));
        args.push(runs.clone().into_os_string());
        args.extend(extra.iter().map(|s| os(s)));
        args
    };
    let refs = |v: &[std::ffi::OsString]| grin_within(&v.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());

    // The checkpoint, with and without --resume.
    let run = runs.join("tiny");
    std::fs::create_dir_all(&run).unwrap();
    mkfifo(&run.join("checkpoint.ckpt"));
    for extra in [&[][..], &["--resume"][..]] {
        let out = refs(&train(extra));
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("checkpoint.ckpt") && stderr(&out).contains("not a regular file"),
            "{}",
            stderr(&out)
        );
    }
    std::fs::remove_dir_all(&run).unwrap();

    // A finished run's summary: a rerun of its name, and simulate --from-run.
    assert!(refs(&train(&[])).status.success());
    std::fs::remove_file(run.join("summary.json")).unwrap();
    mkfifo(&run.join("summary.json"));
    let out = refs(&train(&[]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let svg = dir.path().join("t.svg");
    let out =
        refs(&[os("simulate"), os("--from-run"), run.clone().into_os_string(), os("--out"), svg.into_os_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("summary.json") && stderr(&out).contains("not a regular file"), "{}", stderr(&out));

    // A --name that is no folder name is named as the flag (round 7), a
    // newline in it too (round 8).
    let out = refs(&train(&["--name", "../x"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("error: --name \"../x\" must be a plain folder name"), "{}", stderr(&out));
    let out = refs(&train(&["--name", "x\ny"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("must be a plain folder name"), "{}", stderr(&out));
    // A blank one made a folder named " " (round 9).
    let out = refs(&train(&["--name", " "]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("\" \" must be a plain folder name"), "{}", stderr(&out));

    // A run's model that is a FIFO is named so, not "not finished" (round 8).
    std::fs::remove_file(run.join("model.grin")).unwrap();
    mkfifo(&run.join("model.grin"));
    let out = refs(&[os("eval"), os("--samples"), os("2"), os("--run"), run.clone().into_os_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("model.grin: not a regular file"), "{}", stderr(&out));

    // The config itself.
    let fifo = dir.path().join("c.toml");
    mkfifo(&fifo);
    for command in [&["config", "--config"][..], &["train", "--backend", "cpu", "--config"][..]] {
        let mut args: Vec<_> = command.iter().map(|s| os(s)).collect();
        args.push(fifo.clone().into_os_string());
        let out = refs(&args);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("c.toml") && stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    }
}

/// Issue 90, round 7: outputs landed on inputs by way of a folder. A
/// command writing into a folder that holds its config (eval's report,
/// precompute's shards), an output in the run folder of the model read
/// (export, model-set), and bench modes over a `grin train` run each
/// replaced what was there, exit 0. Each is refused now, nothing changed.
#[test]
fn an_output_never_lands_on_a_config_a_run_record_or_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let config = write_config(dir.path(), "");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin");

    // A config inside the folder eval and precompute write into.
    let folder = dir.path().join("out");
    std::fs::create_dir(&folder).unwrap();
    let inside = folder.join("photos.json");
    std::fs::copy(&config, &inside).unwrap();
    let eval = Command::new(GRIN)
        .args(["eval", "--samples", "2", "--model"])
        .arg(&model)
        .arg("--config")
        .arg(&inside)
        .arg("--out")
        .arg(&folder)
        .output()
        .unwrap();
    let pre = precompute(&inside, &folder, &[]);
    for out in [eval, pre] {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("holds an input") && stderr(&out).contains("photos.json"), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read(&inside).unwrap(), std::fs::read(&config).unwrap());
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1, "nothing written");

    // A finished run: its record is no output of export or model-set.
    assert!(grin(&["train", "--backend", "cpu", "--quiet"], &config, &runs).status.success());
    let run = runs.join("tiny");
    let run_model = run.join("model.grin");
    let record: Vec<Vec<u8>> =
        ["config.toml", "summary.json"].iter().map(|f| std::fs::read(run.join(f)).unwrap()).collect();
    let cases: [&[&str]; 2] = [
        &["export", "--out", "R/config.toml", "--model", "M"],
        &["model-set", "--set", "model.score_threshold=0.4", "--out", "R/summary.json", "--model", "M"],
    ];
    for case in cases {
        let args: Vec<String> = case
            .iter()
            .map(|a| a.replace("R/", &format!("{}/", run.display())).replace('M', &run_model.display().to_string()))
            .collect();
        let out = Command::new(GRIN).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("inside an input folder"), "{}", stderr(&out));
    }
    for (f, was) in ["config.toml", "summary.json"].iter().zip(&record) {
        assert_eq!(&std::fs::read(run.join(f)).unwrap(), was, "{f} unchanged");
    }

    // bench modes over that run (its folder named as a mode's).
    std::fs::rename(&run, runs.join("on-the-fly")).unwrap();
    let out = Command::new(GRIN)
        .args(["bench", "modes", "--backend", "cpu", "--steps", "2", "--modes", "on-the-fly", "--config"])
        .arg(&config)
        .arg("--runs-dir")
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds a finished run that grin bench modes did not write"), "{}", stderr(&out));
    assert_eq!(std::fs::read(runs.join("on-the-fly/summary.json")).unwrap(), record[1]);
}

/// Issue 90, round 11's borderlines: a run and a dataset shared one folder
/// without a word; `--allow-stale` with no dataset to read was dropped;
/// `--shard-size -5M` was "unexpected argument"; `grin verify` read a
/// dataset a precompute was rewriting and called its shards bad.
#[test]
fn a_run_and_a_dataset_never_share_a_folder_and_odd_flags_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let runs = dir.path().join("runs");
    let store = dir.path().join("store");
    assert!(precompute(&config, &store, &[]).status.success());
    // A run into the dataset's folder, --overwrite or not.
    for extra in [&[][..], &["--overwrite"][..]] {
        let args = [&["train", "--backend", "cpu", "--no-balance", "--name", "store"], extra].concat();
        let out = Command::new(GRIN).args(args).arg("--config").arg(&config).arg("--runs-dir").arg(dir.path()).output();
        let out = out.unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("is a precomputed dataset's folder (it holds manifest.json)"),
            "{}",
            stderr(&out)
        );
    }
    // A dataset into a run's folder.
    std::fs::create_dir_all(runs.join("r")).unwrap();
    std::fs::write(runs.join("r/metrics.csv"), "step\n").unwrap();
    let out = precompute(&config, &runs.join("r"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("holds metrics.csv, a grin run's file: a dataset needs a folder of its own"));
    assert!(!runs.join("r/manifest.json").exists());
    // Round 23: `bench step --store` built its dataset in a run's folder.
    let mut bench = Command::new(GRIN);
    bench.args(["bench", "step", "--backend", "cpu", "--samples", "8", "--config"]).arg(&config);
    let out = bench.arg("--store").arg(runs.join("r")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--store") && stderr(&out).contains("a dataset needs a folder"), "{}", stderr(&out));
    assert!(!runs.join("r/manifest.json").exists());
    // Round 15: a shard-named file of the user's, in a folder no grin
    // writer held, was replaced as left by a stopped run.
    let stray = dir.path().join("stray");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("shard-00000.bin"), "user data").unwrap();
    let out = precompute(&config, &stray, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("holds shard-00000.bin, which no grin writer made there"), "{}", stderr(&out));
    assert_eq!(std::fs::read(stray.join("shard-00000.bin")).unwrap(), b"user data");
    // Round 16: refused for a foreign manifest, it left its lock, and the
    // check above then took the folder for grin's.
    std::fs::write(stray.join("manifest.json"), r#"{"a": 1}"#).unwrap();
    let out = precompute(&config, &stray, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stray.join(grin_output::LOCK_FILE).exists(), "a refused precompute leaves no lock");
    std::fs::remove_file(stray.join("manifest.json")).unwrap();
    assert_eq!(precompute(&config, &stray, &[]).status.code(), Some(2));
    assert_eq!(std::fs::read(stray.join("shard-00000.bin")).unwrap(), b"user data");
    // Round 17: the benches build their dataset by the same writer, and a
    // user file under a shard's temporary name was deleted.
    let bench = Command::new(GRIN)
        .args(["bench", "step", "--backend", "cpu", "--steps", "1", "--repeats", "1", "--samples", "8", "--config"])
        .arg(&config)
        .arg("--store")
        .arg(&stray)
        .output()
        .unwrap();
    assert_eq!(bench.status.code(), Some(2), "{}", stderr(&bench));
    assert!(stderr(&bench).contains("which no grin writer made there"), "{}", stderr(&bench));
    let temporary = dir.path().join("temporary");
    std::fs::create_dir_all(&temporary).unwrap();
    std::fs::write(temporary.join("shard-00000.bin.tmp"), "user data").unwrap();
    assert_eq!(precompute(&config, &temporary, &[]).status.code(), Some(2));
    assert_eq!(std::fs::read(temporary.join("shard-00000.bin.tmp")).unwrap(), b"user data");
    assert_eq!(std::fs::read(stray.join("shard-00000.bin")).unwrap(), b"user data");
    // Flags that cannot apply, or whose value looks like a flag.
    let stale =
        grin(&["train", "--backend", "cpu", "--mode", "on-the-fly", "--allow-stale", "--name", "s"], &config, &runs);
    assert_eq!(stale.status.code(), Some(2));
    assert!(stderr(&stale).contains("--allow-stale: mode on-the-fly reads no precomputed dataset"));
    // Round 23: --no-balance in mode auto, which picks by the check, was dropped.
    let auto = grin(&["train", "--backend", "cpu", "--mode", "auto", "--no-balance", "--name", "a"], &config, &runs);
    assert_eq!(auto.status.code(), Some(2));
    assert!(stderr(&auto).contains("--no-balance: mode auto picks the mode by the balance check"), "{}", stderr(&auto));
    // Round 15: the advice to build a missing dataset left out the --sets
    // that shape it (built as advised, it was refused as stale).
    let missing = dir.path().join("missing");
    let elsewhere = format!("train.store={}", missing.display());
    let seed = ["--set", "features.seed=11", "--set", elsewhere.as_str()];
    let out = grin(
        &[&["train", "--backend", "cpu", "--mode", "precomputed", "--name", "m"][..], &seed].concat(),
        &config,
        &runs,
    );
    assert_eq!(out.status.code(), Some(2));
    let advice = format!("--set features.seed=11 --set {elsewhere} --out {}`", missing.display());
    assert!(stderr(&out).contains(&advice), "{}", stderr(&out));
    let out =
        Command::new(GRIN).args(["precompute", "--plan", "--shard-size", "-5M", "--config"]).arg(&config).output();
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"-5M\" is not a size like 128M"), "{}", stderr(&out));
    // A flag `--merge` or `--plan` would drop (rounds 13 and 14).
    for (flags, named) in [
        (&["--merge", "d", "--shard-size", "4M"][..], "'--shard-size <SHARD_SIZE>'"),
        (&["--merge", "d", "--set", "train.lr=0.1"][..], "'--set <KEY=VALUE>'"),
        (&["--plan", "--shards", "0..1", "--config", "c.toml"][..], "'--shards <A..B>'"),
    ] {
        let out = Command::new(GRIN).arg("precompute").args(flags).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("cannot be used with") && stderr(&out).contains(named), "{}", stderr(&out));
    }
    // Verify while a writer holds the dataset: refused as such.
    let lock = grin_output::try_lock(&store.join(grin_output::LOCK_FILE), grin_output::LockMode::Exclusive).unwrap();
    assert!(matches!(lock, grin_output::Locked::Held(_)));
    let out = Command::new(GRIN).arg("verify").arg(&store).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("a grin precompute or merge is writing this dataset"), "{}", stderr(&out));
    // Round 13: a first write, no manifest yet, was "manifest.json: missing".
    let first = dir.path().join("first");
    std::fs::create_dir(&first).unwrap();
    let _writing = grin_output::try_lock(&first.join(grin_output::LOCK_FILE), grin_output::LockMode::Exclusive);
    for command in [&["verify"][..], &["store", "info"][..]] {
        let out = Command::new(GRIN).args(command).arg(&first).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("writing this dataset now"), "{command:?}: {}", stderr(&out));
    }
    // Round 17: a file or a missing folder was named in the OS's words, and
    // `store bench` blamed `--order-out` inside a missing `--dir`.
    let file = config.clone();
    let missing = dir.path().join("missing");
    for (at, why) in [(&file, "is a file, not a dataset's folder"), (&missing, "no such folder")] {
        let order = at.join("o.bin");
        for command in [&["verify"][..], &["store", "info"][..]] {
            let out = Command::new(GRIN).args(command).arg(at).output().unwrap();
            assert!(stderr(&out).contains(&format!("{}: {why}", at.display())), "{command:?}: {}", stderr(&out));
        }
        let out = Command::new(GRIN).args(["store", "bench", "--dir"]).arg(at).arg("--order-out").arg(&order).output();
        let out = out.unwrap();
        assert!(stderr(&out).contains(&format!("{}: {why}", at.display())), "bench: {}", stderr(&out));
    }
}

/// Issue 90, round 12: a photo the annotations name outside the source's
/// folder (`../`, or a link in it) was replaced by `features preview --out`.
#[test]
fn a_preview_never_replaces_a_photo_its_source_names_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("set");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let photo = elsewhere.join("p.png");
    textured_photo(&photo);
    let before = std::fs::read(&photo).unwrap();
    std::fs::write(set.join("m.jsonl"), r#"{"image": "../elsewhere/p.png", "boxes": [[10, 10, 40, 50]]}"#).unwrap();
    let config = dir.path().join("c.toml");
    let text = format!(
        "name = \"p\"\n[features]\nwidth = 64\nheight = 64\n[features.split]\ntrain = 1.0\nval = 0.0\ntest = 0.0\n\
         [features.source]\nkind = \"jsonl\"\nmanifest = {:?}\n",
        set.join("m.jsonl").display().to_string()
    );
    std::fs::write(&config, text).unwrap();
    let out = Command::new(GRIN)
        .args(["features", "preview", "--count", "2", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&photo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is also an input (") && stderr(&out).contains("p.png"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&photo).unwrap(), before);
    // Round 13: `mine --out` (and `eval --out`) into the folder holding such
    // a photo could write a crop over it.
    let model = format!("{}/assets/default.grin", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(GRIN)
        .args(["mine", "--model", &model, "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&elsewhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds an input (") && stderr(&out).contains("p.png"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&photo).unwrap(), before);
    // Round 14: a run whose folder holds such a photo, which `--overwrite`
    // empties, is refused the same way.
    let out = Command::new(GRIN)
        .args(["train", "--backend", "cpu", "--quiet", "--no-balance", "--name", "elsewhere", "--overwrite"])
        .arg("--config")
        .arg(&config)
        .arg("--runs-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("p.png"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&photo).unwrap(), before);
}

/// Round 21 of issue 90: an `export-crops` stopped midway left folders of
/// fewer crops that looked whole. Crops are staged and moved into place at
/// the end; a staging folder a stopped export left is removed, said.
#[test]
fn an_export_of_crops_is_whole_or_absent() {
    let dir = tempfile::tempdir().unwrap();
    let stopped = dir.path().join("export-crops.unfinished/smile");
    std::fs::create_dir_all(&stopped).unwrap();
    std::fs::write(stopped.join("0.png"), "half").unwrap();
    let out = Command::new(GRIN).args(["features", "export-crops", "--count", "2", "--out"]).arg(dir.path()).output();
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("the crops of an export that was stopped"));
    for folder in ["smile", "no_smile"] {
        assert_eq!(std::fs::read_dir(dir.path().join(folder)).unwrap().count(), 2, "{folder}");
    }
    assert!(!dir.path().join("export-crops.unfinished").exists());
    // Round 23: a second export into a folder one is writing removed the
    // first one's crops. The folder is held.
    let busy = dir.path().join("busy");
    let held = grin_output::hold_folder(&busy).unwrap();
    let out = Command::new(GRIN).args(["features", "export-crops", "--count", "2", "--out"]).arg(&busy).output();
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("another grin command is writing into this folder"), "{}", stderr(&out));
    drop(held);
    // Round 27: a user's folder under the staging name was removed whole.
    let mine = dir.path().join("user/export-crops.unfinished/mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "userdata").unwrap();
    let user = dir.path().join("user");
    let out = Command::new(GRIN).args(["features", "export-crops", "--count", "2", "--out"]).arg(&user).output();
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("which no export-crops writes"), "{}", stderr(&out));
    assert_eq!(std::fs::read(mine.join("notes.txt")).unwrap(), b"userdata");
}

/// Round 23 of issue 90: `export --run` and `simulate --from-run` of a run
/// that has not finished said only "No such file or directory".
#[test]
fn a_run_not_finished_is_said_so_by_export_and_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("config.toml"), "name = \"r\"\n").unwrap();
    std::fs::write(run.join("checkpoint.ckpt"), "").unwrap();
    let mut export = Command::new(GRIN);
    export.args(["export", "--run"]).arg(&run).arg("--out").arg(dir.path().join("m.onnx"));
    let out = export.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("model.grin: missing: the run has not finished"), "{}", stderr(&out));
    let mut simulate = Command::new(GRIN);
    simulate.args(["simulate", "--from-run"]).arg(&run).arg("--out").arg(dir.path().join("t.svg"));
    let out = simulate.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("summary.json: missing: the run has not finished"), "{}", stderr(&out));
}

/// Round 23 of issue 90: `export-crops` onto a full disk named the crop it
/// could not write and left its staging folder filling the disk.
#[test]
fn an_export_of_crops_onto_a_full_disk_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"]).arg(&small).output();
    if !mounted.as_ref().is_ok_and(|o| o.status.success()) {
        return eprintln!("SKIPPED: a small tmpfs cannot be mounted here: {mounted:?}");
    }
    let mut export = Command::new(GRIN);
    export.args(["features", "export-crops", "--count", "500", "--out"]).arg(small.join("x"));
    let out = export.output().unwrap();
    let left: Vec<_> = std::fs::read_dir(&small).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    let _ = Command::new("umount").arg(&small).status();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("No space left on device"), "{}", stderr(&out));
    assert!(left.is_empty(), "the staged crops and the folder are gone: {left:?}");
}

/// Round 24 of issue 90: eval, calibrate and mine scored fewer photos than
/// the annotations list, under `on_bad_sample = "skip"`, without a word.
#[test]
fn eval_says_the_annotation_lines_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    textured_photo(&dir.path().join("a.png"));
    let run = calibration_run(dir.path(), "{\"image\": \"a.png\", \"boxes\": [[30, 20, 70, 70]]}\n{\"image\": 1}\n");
    let out = Command::new(GRIN).args(["eval", "--run"]).arg(&run).args(["--samples", "0", "--split", "val"]).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let said = "jsonl: skipped 1 inputs: 1 malformed annotation line while its annotations were read";
    assert!(stderr(&out).contains(said), "{}", stderr(&out));
}

/// Round 24 of issue 90: `eval --out O`, where `O/photos.json` was a link
/// to another run's `summary.json`, wrote the report through it (exit 0).
#[test]
fn a_report_folder_with_a_link_into_a_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = calibration_run(dir.path(), "");
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join(grin_output::LOCK_FILE), "").unwrap();
    std::fs::write(other.join("summary.json"), "{}").unwrap();
    let report = elsewhere.path().join("O");
    std::fs::create_dir_all(&report).unwrap();
    std::os::unix::fs::symlink(other.join("summary.json"), report.join("photos.json")).unwrap();
    let out = Command::new(GRIN).args(["eval", "--run"]).arg(&run).arg("--out").arg(&report).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("photos.json: is a file of") && stderr(&out).contains("grin run's"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(other.join("summary.json")).unwrap(), b"{}");
}
