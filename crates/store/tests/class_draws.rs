//! Class-balanced batches from the per-class index.
use crate::common;

use common::*;
use grin_features::ClassBalanceConfig;
use grin_store::{BatchOrder, BatchReader, Draws, OrderOptions, Store};

fn balance([smiling, non_smiling, face_free]: [f32; 3]) -> ClassBalanceConfig {
    ClassBalanceConfig { smiling, non_smiling, face_free }
}

/// Records 0,3,6.. smiling, 1,4,7.. non-smiling, 2,5,8.. face-free.
fn thirds(dir: &std::path::Path) -> Store {
    write(dir, 300, 64);
    Store::open(dir).unwrap()
}

fn fractions(batches: &[Vec<u64>]) -> [f64; 3] {
    let mut counts = [0usize; 3];
    let mut total = 0;
    for batch in batches {
        for &i in batch {
            // `common::sample`'s classes cycle smiling, non-smiling, face-free.
            counts[(i % 3) as usize] += 1;
            total += 1;
        }
    }
    counts.map(|c| c as f64 / total as f64)
}

fn batches(store: &Store, options: &OrderOptions, n: usize) -> Vec<Vec<u64>> {
    let mut order = BatchOrder::new(store, options).unwrap();
    (0..n)
        .map(|_| {
            let mut b = Vec::new();
            order.next_batch(&mut b);
            b
        })
        .collect()
}

#[test]
fn balanced_batches_hit_the_target_fractions() {
    let dir = tempfile::tempdir().unwrap();
    let store = thirds(dir.path());
    let target = [0.6f32, 0.3, 0.1];
    let options =
        OrderOptions { batch_size: 32, seed: 4, draws: Draws::ClassFractions(balance(target)), start_batch: 0 };
    let drawn = batches(&store, &options, 200);
    let achieved = fractions(&drawn);
    for c in 0..3 {
        assert!((achieved[c] - target[c] as f64).abs() < 0.002, "class {c}: {achieved:?} vs {target:?}");
    }
    // Every single batch is within one record of its share.
    for batch in &drawn {
        let f = fractions(std::slice::from_ref(batch));
        for c in 0..3 {
            assert!((f[c] * 32.0 - target[c] as f64 * 32.0).abs() <= 1.0, "{f:?}");
        }
    }
    // Face-free records (100 of them, 10% of 6400 draws = 640) cycle through all of them.
    let face_free: std::collections::BTreeSet<u64> = drawn.iter().flatten().copied().filter(|i| i % 3 == 2).collect();
    assert_eq!(face_free.len(), 100);

    // Resuming at batch 50 continues the same sequence.
    let resumed = batches(&store, &OrderOptions { start_batch: 50, ..options.clone() }, 10);
    assert_eq!(resumed, drawn[50..60]);
}

#[test]
fn equal_balance_read_through_the_batch_reader() {
    let dir = tempfile::tempdir().unwrap();
    let store = thirds(dir.path());
    let draws = Draws::ClassFractions(balance([1.0, 1.0, 1.0]));
    let mut reader =
        BatchReader::new(&store, &OrderOptions { batch_size: 30, seed: 1, draws, start_batch: 0 }).unwrap();
    let mut batch = reader.empty_batch();
    let mut counts = [0usize; 3];
    for _ in 0..20 {
        reader.read_next(&mut batch).unwrap();
        for i in 0..batch.len {
            counts[batch.sample(i).class().index()] += 1;
        }
    }
    assert_eq!(counts, [200, 200, 200]);
}

#[test]
fn unbalanced_order_follows_the_dataset_mix() {
    let dir = tempfile::tempdir().unwrap();
    let store = thirds(dir.path());
    let options = OrderOptions { batch_size: 30, seed: 2, draws: Draws::Shuffled, start_batch: 0 };
    let f = fractions(&batches(&store, &options, 10));
    assert_eq!(f, [1.0 / 3.0; 3], "one epoch holds each record once");
    let bad = OrderOptions { draws: Draws::ClassFractions(balance([0.0, 0.0, 0.0])), ..options.clone() };
    assert!(BatchOrder::new(&store, &bad).is_err());
    let bad = OrderOptions { draws: Draws::ClassFractions(balance([f32::NAN, 1.0, 0.0])), ..options };
    assert!(BatchOrder::new(&store, &bad).is_err());
}
