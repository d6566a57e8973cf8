//! The pipeline: seeding, parallel determinism, skips.

use crate::source::SampleRng;
use crate::{AugmentConfig, FeatureConfig, HostBatch, Pipeline, Sample, Source, Split};
use grin_image::{BadInputKind, InputError, OnBadSample};

fn small(workers: usize) -> FeatureConfig {
    FeatureConfig { width: 96, height: 72, workers, seed: 11, ..FeatureConfig::default() }
}

fn every_augmentation() -> AugmentConfig {
    AugmentConfig {
        flip: 0.5,
        crop: 0.5,
        rotate: 0.5,
        brightness: 0.5,
        contrast: 0.5,
        gamma: 0.5,
        blur: 0.5,
        noise: 0.5,
        jpeg: 0.3,
        ..AugmentConfig::default()
    }
}

#[test]
fn pipeline_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Pipeline>();
}

#[test]
fn same_seed_and_index_give_the_same_sample() {
    let a = Pipeline::new(&small(1), Split::Train).unwrap();
    let b = Pipeline::new(&small(2), Split::Train).unwrap();
    for i in 0..20 {
        assert_eq!(a.sample(i).unwrap(), b.sample(i).unwrap());
    }
    assert_ne!(a.sample(0).unwrap().pixels, a.sample(1).unwrap().pixels);
    let other_seed = Pipeline::new(&FeatureConfig { seed: 12, ..small(1) }, Split::Train).unwrap();
    assert_ne!(a.sample(0).unwrap().pixels, other_seed.sample(0).unwrap().pixels);
}

#[test]
fn fill_batch_is_bit_identical_for_any_worker_count() {
    for channels in [1, 3] {
        let cfg = |workers| FeatureConfig {
            channels,
            augment: every_augmentation(),
            balance: Some(crate::ClassBalanceConfig { smiling: 1.0, non_smiling: 1.0, face_free: 1.0 }),
            ..small(workers)
        };
        let one = Pipeline::new(&cfg(1), Split::Train).unwrap();
        let three = Pipeline::new(&cfg(3), Split::Train).unwrap();
        // Clamped to the cores on a smaller machine (CI has 2).
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(three.workers(), 3.min(cores));
        let indices: Vec<u64> = (100..164).rev().collect();
        let a = one.batch(&indices).unwrap();
        let mut b = HostBatch::default();
        three.fill_batch(&indices, &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len, 64);
        assert_eq!(a.pixels.len(), 64 * 96 * 72 * channels as usize);
        // In index order: slot k holds sample indices[k].
        assert_eq!(a.sample(5), one.sample(indices[5]).unwrap());
        // A reused batch is overwritten, not appended to.
        three.fill_batch(&indices[..3], &mut b).unwrap();
        assert_eq!(b.len, 3);
    }
}

#[test]
fn only_training_is_augmented() {
    let cfg =
        FeatureConfig { augment: AugmentConfig { flip: 1.0, noise: 1.0, ..AugmentConfig::default() }, ..small(1) };
    let val = Pipeline::new(&cfg, Split::Val).unwrap();
    for i in 0..5 {
        let (scene, _) = val.scene(i).unwrap();
        assert_eq!(val.sample(i).unwrap(), scene);
    }
    let train = Pipeline::new(&cfg, Split::Train).unwrap();
    let (scene, _) = train.scene(3).unwrap();
    assert_ne!(train.sample(3).unwrap().pixels, scene.pixels);
}

#[test]
fn samples_have_valid_boxes_at_any_worker_count() {
    let p =
        Pipeline::new(&FeatureConfig { workers: 0, augment: every_augmentation(), ..small(0) }, Split::Train).unwrap();
    assert!(p.workers() >= 1);
    let batch = p.batch(&(0..200).collect::<Vec<u64>>()).unwrap();
    for i in 0..batch.len {
        for b in batch.sample(i).boxes {
            assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= 96.0 && b.y1 <= 72.0, "{b:?}");
            assert!(b.x1 - b.x0 >= 2.0 && b.y1 - b.y0 >= 2.0, "{b:?}");
        }
    }
}

/// Fails on every third index, like a folder with corrupt files.
struct Flaky;

impl Source for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn len(&self) -> Option<usize> {
        Some(30)
    }
    fn scene(&self, index: u64, _rng: &mut SampleRng) -> Result<Sample, InputError> {
        if index.is_multiple_of(3) {
            return Err(InputError::bad(
                format!("faces/{}.jpg", index % 30),
                None,
                BadInputKind::CorruptImage,
                "truncated JPEG",
            ));
        }
        Ok(Sample { width: 32, height: 32, channels: 1, pixels: vec![(index % 30) as u8; 1024], boxes: vec![] })
    }
}

#[test]
fn bad_samples_are_skipped_deterministically_or_reported() {
    let cfg = FeatureConfig { width: 32, height: 32, on_bad_sample: OnBadSample::Skip, ..small(2) };
    let p = Pipeline::from_source(&cfg, Split::Val, Box::new(Flaky)).unwrap();
    let indices: Vec<u64> = (0..30).collect();
    let a = p.batch(&indices).unwrap();
    assert_eq!(a.len, 30);
    assert_eq!(p.skips().get(BadInputKind::CorruptImage), p.skips().total());
    assert!(p.skips().total() >= 10, "{:?}", p.skips().summary());
    assert!(p.skips().summary().unwrap().contains("corrupt or truncated image"));
    let q = Pipeline::from_source(&FeatureConfig { workers: 1, ..cfg.clone() }, Split::Val, Box::new(Flaky)).unwrap();
    assert_eq!(q.batch(&indices).unwrap(), a);
    assert_eq!(q.skips().total(), p.skips().total());
    // Replacements are good samples, never the bad index itself.
    for i in (0..30).step_by(3) {
        assert_ne!(a.sample(i).pixels[0] % 3, 0);
    }

    let strict =
        Pipeline::from_source(&FeatureConfig { on_bad_sample: OnBadSample::Error, ..cfg }, Split::Val, Box::new(Flaky))
            .unwrap();
    let err = strict.batch(&[1, 2, 3, 6]).unwrap_err().to_string();
    assert!(err.contains("faces/3.jpg") && err.contains("truncated JPEG"), "{err}");
    assert_eq!(strict.skips().total(), 0);
}

#[test]
fn bad_configs_are_rejected_with_the_key() {
    let err = Pipeline::new(&FeatureConfig { channels: 4, ..small(1) }, Split::Train).unwrap_err();
    assert!(err.to_string().contains("features.channels"), "{err}");
    let bad_aug = AugmentConfig { noise: -0.1, ..AugmentConfig::default() };
    let err = Pipeline::new(&FeatureConfig { augment: bad_aug, ..small(1) }, Split::Train).unwrap_err();
    assert!(err.to_string().contains("features.augment.noise"), "{err}");
}

/// Issue 28: 1024 workers on a 2-core machine took 146 s for 0.2 s of work.
/// More workers than cores are clamped to the cores (output is the same for
/// any count); past the hard cap the key is refused, even from a caller
/// that never loaded a config file.
#[test]
fn workers_past_the_cores_are_clamped_and_past_the_cap_refused() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let many = Pipeline::new(&small(cores + 3), Split::Train).unwrap();
    assert_eq!(many.workers(), cores);
    let one = Pipeline::new(&small(1), Split::Train).unwrap();
    let (mut a, mut b) = (HostBatch::with_capacity(8, 96, 72, 1), HostBatch::with_capacity(8, 96, 72, 1));
    let indices: Vec<u64> = (0..8).collect();
    many.fill_batch(&indices, &mut a).unwrap();
    one.fill_batch(&indices, &mut b).unwrap();
    assert_eq!(a.pixels, b.pixels, "a clamped pool makes the same samples");

    let err = Pipeline::new(&small(100_000), Split::Train).unwrap_err().to_string();
    assert_eq!(err, "key `features.workers`: 100000 must be within 0..=1024 (0 = all cores)");
    assert_eq!(small(100_000).validate().unwrap_err().to_string(), err);
}
