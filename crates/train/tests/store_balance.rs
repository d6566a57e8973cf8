//! Class balance is applied once in the store modes: a store holds the
//! generator's samples before it, and the reader's class draws apply
//! `[features.balance]` (tested in grin-store's `class_draws.rs`). So the
//! setting changes neither a store's records nor its freshness.

use grin_features::{ClassBalanceConfig, FeatureConfig};
use grin_store::{Plan, DEFAULT_SHARD_BYTES};
use grin_train::write_whole_store;
use std::path::Path;

fn shards(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("shard-"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_store_holds_the_samples_before_class_balance() {
    let dir = tempfile::tempdir().unwrap();
    let plain = FeatureConfig { width: 32, height: 32, seed: 5, ..FeatureConfig::default() };
    // Only face-free scenes: written through the balancer, the store would
    // hold nothing else.
    let face_free = ClassBalanceConfig { smiling: 0.0, non_smiling: 0.0, face_free: 1.0 };
    let balanced = FeatureConfig { balance: Some(face_free), ..plain.clone() };
    write_whole_store(&plain, 48, &dir.path().join("plain")).unwrap();
    write_whole_store(&balanced, 48, &dir.path().join("balanced")).unwrap();

    let (a, b) = (shards(&dir.path().join("plain")), shards(&dir.path().join("balanced")));
    assert!(!a.is_empty());
    assert_eq!(a, b, "the same records, byte for byte");
    let fingerprint = |features| Plan::for_features(features, 48, DEFAULT_SHARD_BYTES).unwrap().fingerprint;
    assert_eq!(fingerprint(&plain), fingerprint(&balanced), "a store stays fresh when [features.balance] changes");
}
