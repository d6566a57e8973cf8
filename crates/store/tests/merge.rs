//! Disjoint shard ranges written separately, then merged.
use crate::common;

use burn_dataset::Dataset;
use common::*;
use grin_store::{merge, write_dataset, Manifest, Store, StoreError};

fn write_range(dir: &std::path::Path, range: std::ops::Range<u64>) -> std::path::PathBuf {
    write_dataset(dir, plan(100, 10), range, &fill, &mut |_| {}).unwrap().manifest
}

#[test]
fn shard_ranges_merge_into_the_same_dataset_as_one_run() {
    let whole = tempfile::tempdir().unwrap();
    write(whole.path(), 100, 10);
    let dir = tempfile::tempdir().unwrap();
    let part = write_range(dir.path(), 4..10);
    assert_eq!(part.file_name().unwrap(), "part-00004-00010.json");
    assert!(!dir.path().join("manifest.json").exists(), "a part alone is not a dataset");
    assert!(Store::open(dir.path()).is_err());
    write_range(dir.path(), 0..4);
    let merged = merge(dir.path()).unwrap();
    assert_eq!(merged, Manifest::load(whole.path()).unwrap());
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.get(57).unwrap(), sample(57));
    assert!(grin_store::verify(dir.path(), &mut |_| {}).unwrap().ok());
}

#[test]
fn missing_overlapping_and_disagreeing_parts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = merge(dir.path()).unwrap_err().to_string();
    assert!(err.contains("no part-*.json files"), "{err}");

    write_range(dir.path(), 0..3);
    write_range(dir.path(), 5..8);
    let err = merge(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Merge { .. }));
    assert!(err.to_string().contains("shards 3..5, 8..10 are in no part manifest"), "{err}");

    write_range(dir.path(), 2..5);
    write_range(dir.path(), 8..10);
    let err = merge(dir.path()).unwrap_err().to_string();
    assert!(err.contains("shard 2 is in both part-00000-00003.json and part-00002-00005.json"), "{err}");
    std::fs::remove_file(dir.path().join("part-00002-00005.json")).unwrap();
    write_range(dir.path(), 3..5);

    // A part from another config copied in by mistake.
    let mut features = features();
    features.augment.noise = 0.0;
    let other = tempfile::tempdir().unwrap();
    let plan = grin_store::Plan::for_features(&features, 100, 10 * RECORD_BYTES).unwrap();
    write_dataset(other.path(), plan, 9..10, &fill, &mut |_| {}).unwrap();
    std::fs::copy(other.path().join("part-00009-00010.json"), dir.path().join("part-00009-00010.json")).unwrap();
    let err = merge(dir.path()).unwrap_err().to_string();
    assert!(err.contains("part-00009-00010.json") && err.contains("features.augment.noise"), "{err}");
    std::fs::remove_file(dir.path().join("part-00009-00010.json")).unwrap();

    // A shard file cut short after its part was written.
    let shard = dir.path().join("shard-00006.bin");
    std::fs::OpenOptions::new().write(true).open(&shard).unwrap().set_len(10).unwrap();
    let err = merge(dir.path()).unwrap_err().to_string();
    assert!(err.contains("shard-00006.bin: 10 bytes"), "{err}");
    std::fs::remove_file(dir.path().join("part-00005-00008.json")).unwrap();
    write_range(dir.path(), 5..8);
    merge(dir.path()).unwrap();
    assert!(grin_store::verify(dir.path(), &mut |_| {}).unwrap().ok());
}
