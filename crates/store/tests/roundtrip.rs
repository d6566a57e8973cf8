//! Write then read: records, the Dataset trait, and the loader's epochs.
use crate::common;

use burn_dataset::Dataset;
use common::*;
use grin_features::{ClassBalanceConfig, HostBatch, SceneClass};
use grin_store::{BatchOrder, BatchReader, Draws, OrderOptions, Store};
use std::collections::BTreeSet;

#[test]
fn every_record_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let summary = write(dir.path(), 50, 8);
    assert_eq!(summary.written_shards, 7);
    assert_eq!(summary.reused_shards, 0);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.len(), 50);
    assert_eq!(store.layout().record_bytes, RECORD_BYTES);
    assert_eq!(store.manifest().shards.len(), 7);
    assert_eq!(store.manifest().shards[6].records, 2);
    let counts = store.manifest().class_counts;
    assert_eq!((counts.smiling, counts.non_smiling, counts.face_free), (17, 17, 16));

    let mut batch = HostBatch::default();
    for i in [49u64, 0, 8, 7, 33] {
        store.read_into(i, &mut batch).unwrap();
    }
    assert_eq!((batch.len, batch.width, batch.height, batch.channels), (5, W, H, 1));
    for (slot, i) in [49u64, 0, 8, 7, 33].into_iter().enumerate() {
        assert_eq!(batch.sample(slot), sample(i), "record {i}");
    }
    assert!(matches!(store.read_into(50, &mut batch), Err(grin_store::StoreError::Index { index: 50, len: 50 })));
    let mut other = HostBatch::with_capacity(1, 64, 64, 1);
    other.push(&grin_features::Sample { width: 64, height: 64, channels: 1, pixels: vec![0; 4096], boxes: vec![] });
    let err = store.read_into(0, &mut other).unwrap_err();
    assert!(err.to_string().contains("(64, 64, 1)"), "{err}");
}

#[test]
fn store_is_a_burn_dataset() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 20, 6);
    let store = Store::open(dir.path()).unwrap();
    fn items<D: Dataset<grin_features::Sample>>(d: &D) -> Vec<grin_features::Sample> {
        d.iter().collect()
    }
    assert_eq!(Dataset::len(&store), 20);
    assert_eq!(Dataset::get(&store, 13), Some(sample(13)));
    assert_eq!(Dataset::get(&store, 20), None);
    let all = items(&store);
    assert_eq!(all, (0..20).map(sample).collect::<Vec<_>>());
    // Burn's own dataset adapters take it too.
    let shuffled = burn_dataset::transform::ShuffledDataset::new(store.clone(), 7u64);
    let mut got: Vec<_> = shuffled.iter().map(|s| s.pixels[0]).collect();
    let mut want: Vec<_> = all.iter().map(|s| s.pixels[0]).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn each_epoch_is_a_fresh_permutation_of_every_record() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 40, 9);
    let store = Store::open(dir.path()).unwrap();
    let options = OrderOptions { batch_size: 8, seed: 5, draws: Draws::Shuffled, start_batch: 0 };
    let mut order = BatchOrder::new(&store, &options).unwrap();
    let mut epochs: Vec<Vec<u64>> = Vec::new();
    let mut indices = Vec::new();
    for _ in 0..3 {
        let mut epoch = Vec::new();
        for _ in 0..5 {
            order.next_batch(&mut indices);
            epoch.extend_from_slice(&indices);
        }
        assert_eq!(epoch.iter().copied().collect::<BTreeSet<_>>().len(), 40, "every record once per epoch");
        epochs.push(epoch);
    }
    assert_ne!(epochs[0], epochs[1]);
    assert_ne!(epochs[1], epochs[2]);
    assert_ne!(epochs[0], (0..40).collect::<Vec<_>>(), "shuffled, not record order");

    // The reader training runs yields exactly these batches, with the right contents.
    let mut reader = BatchReader::new(&store, &options).unwrap();
    let mut batch = reader.empty_batch();
    let flat: Vec<u64> = epochs.concat();
    for b in 0..15 {
        reader.read_next(&mut batch).unwrap();
        assert_eq!(batch.len, 8);
        for slot in 0..8 {
            assert_eq!(batch.sample(slot), sample(flat[b * 8 + slot]));
        }
    }

    // Another seed, another order; a resumed order continues where it stopped.
    let other = BatchOrder::new(&store, &OrderOptions { seed: 6, ..options.clone() }).unwrap();
    let mut other = other;
    other.next_batch(&mut indices);
    assert_ne!(indices, flat[..8]);
    let mut resumed = BatchOrder::new(&store, &OrderOptions { start_batch: 7, ..options.clone() }).unwrap();
    resumed.next_batch(&mut indices);
    assert_eq!(indices, flat[56..64]);
}

#[test]
fn batches_span_epoch_boundaries_when_the_size_does_not_divide() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 10, 4);
    let store = Store::open(dir.path()).unwrap();
    let options = OrderOptions { batch_size: 4, seed: 1, draws: Draws::Shuffled, start_batch: 0 };
    let mut order = BatchOrder::new(&store, &options).unwrap();
    let mut all = Vec::new();
    let mut indices = Vec::new();
    for _ in 0..5 {
        order.next_batch(&mut indices);
        assert_eq!(indices.len(), 4);
        all.extend_from_slice(&indices);
    }
    assert_eq!(all[..10].iter().copied().collect::<BTreeSet<_>>().len(), 10);
    assert_eq!(all[10..20].iter().copied().collect::<BTreeSet<_>>().len(), 10);
    let mut resumed = BatchOrder::new(&store, &OrderOptions { start_batch: 3, ..options }).unwrap();
    resumed.next_batch(&mut indices);
    assert_eq!(indices, all[12..16]);
}

#[test]
fn class_draws_take_each_class_from_the_manifests_index() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 12, 5);
    let store = Store::open(dir.path()).unwrap();
    let only = |class: usize| {
        let mut fractions = [0.0f32; 3];
        fractions[class] = 1.0;
        let [smiling, non_smiling, face_free] = fractions;
        let draws = Draws::ClassFractions(ClassBalanceConfig { smiling, non_smiling, face_free });
        let mut order =
            BatchOrder::new(&store, &OrderOptions { batch_size: 3, seed: 1, draws, start_batch: 0 }).unwrap();
        let mut drawn = BTreeSet::new();
        let mut indices = Vec::new();
        for _ in 0..8 {
            order.next_batch(&mut indices);
            drawn.extend(indices.iter().copied());
        }
        drawn.into_iter().collect::<Vec<u64>>()
    };
    assert_eq!(only(SceneClass::Smiling.index()), [0, 3, 6, 9]);
    assert_eq!(only(SceneClass::NonSmiling.index()), [1, 4, 7, 10]);
    assert_eq!(only(SceneClass::FaceFree.index()), [2, 5, 8, 11]);
    let options = OrderOptions { batch_size: 0, seed: 1, draws: Draws::Shuffled, start_batch: 0 };
    assert!(BatchReader::new(&store, &options).is_err(), "batch size 0 is refused");
}
