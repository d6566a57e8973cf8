//! A dataset knows what it was made from and lists what changed since.
use crate::common;

use common::*;
use grin_features::SourceConfig;
use grin_store::{format_stale, Store};

#[test]
fn matching_config_passes_and_workers_do_not_matter() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 30, 10);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.check_fingerprint(&features(), 30), Ok(()));
    let mut more_workers = features();
    more_workers.workers = 7;
    assert_eq!(store.check_fingerprint(&more_workers, 30), Ok(()), "worker count never changes a sample");
}

#[test]
fn stale_fingerprint_lists_the_differing_keys() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 30, 10);
    let store = Store::open(dir.path()).unwrap();
    let mut changed = features();
    changed.augment.flip = 0.0;
    changed.augment.crop_scale = (0.5, 1.0);
    changed.seed = 3;
    let keys = store.check_fingerprint(&changed, 31).unwrap_err();
    assert_eq!(keys, ["features.augment.crop_scale", "features.augment.flip", "features.seed", "samples"]);

    let mut other_source = features();
    other_source.source =
        SourceConfig::Synthetic { max_faces: 2, min_face: 16.0, max_face: 160.0, hard_negatives: 1.0 };
    assert_eq!(store.check_fingerprint(&other_source, 30).unwrap_err(), ["features.source.max_faces"]);

    let message = format_stale(&keys);
    assert!(message.contains("features.augment.flip, features.seed, samples differ"), "{message}");
    assert!(message.contains("--allow-stale"), "{message}");
    assert!(format_stale(&["samples".to_string()]).contains("samples differs"));
}
