//! Two writers never mix their shards in one folder, no writer rewrites a
//! dataset a reader has open, and a reader refuses shards that no longer
//! hash to the manifest. Each "second process" is started from inside the
//! first writer's record source, so the two always overlap.
use crate::common;

use common::*;
use grin_features::{FeatureConfig, HostBatch};
use grin_image::InputError;
use grin_store::{write_dataset, Event, Plan, Store, StoreError};
use std::path::Path;
use std::sync::Mutex;

/// The same records as `common::plan`, but from another seed: another dataset.
fn other_plan(samples: u64, per_shard: u64) -> Plan {
    let features = FeatureConfig { seed: 99, ..features() };
    Plan::for_features(&features, samples, per_shard * RECORD_BYTES).unwrap()
}

/// Runs `during` once, while the writer of `range` of `plan` is generating
/// its first batch, and returns what `during` returned and the writer's result.
fn while_writing<T: Send>(
    dir: &Path,
    plan: Plan,
    range: std::ops::Range<u64>,
    during: impl FnOnce() -> T + Send,
) -> (T, Result<grin_store::Summary, StoreError>) {
    let during = Mutex::new(Some(during));
    let seen = Mutex::new(None);
    let source = |indices: &[u64], out: &mut HostBatch| -> Result<(), InputError> {
        if let Some(f) = during.lock().unwrap().take() {
            *seen.lock().unwrap() = Some(f());
        }
        fill(indices, out)
    };
    let result = write_dataset(dir, plan, range, &source, &mut |_: Event| {});
    (seen.into_inner().unwrap().expect("the source ran"), result)
}

#[test]
fn a_second_writer_is_refused_while_the_first_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (second, first) = while_writing(dir.path(), plan(40, 10), 0..4, || {
        write_dataset(dir.path(), other_plan(40, 10), 0..4, &fill, &mut |_: Event| {})
    });
    let e = second.unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: in use by another grin process", dir.path().display())), "{e}");
    first.unwrap();
    // The first writer's dataset, whole and of one seed.
    let report = grin_store::verify(dir.path(), &mut |_| {}).unwrap();
    assert!(report.ok(), "{:?}", report.bad);
    assert_eq!(report.manifest.fingerprint.hash, plan(40, 10).fingerprint.hash);

    // A part writer cannot start beside a whole-dataset writer either.
    let dir = tempfile::tempdir().unwrap();
    let (part, first) = while_writing(dir.path(), plan(40, 10), 0..4, || {
        write_dataset(dir.path(), plan(40, 10), 2..4, &fill, &mut |_: Event| {})
    });
    assert!(part.unwrap_err().to_string().contains("writing this whole dataset"));
    first.unwrap();
}

#[test]
fn part_writers_share_the_folder_but_never_one_shard() {
    let dir = tempfile::tempdir().unwrap();
    // A job array: disjoint ranges side by side, then the merge.
    let (other_part, first) = while_writing(dir.path(), plan(40, 10), 0..2, || {
        write_dataset(dir.path(), plan(40, 10), 2..4, &fill, &mut |_: Event| {})
    });
    other_part.unwrap();
    first.unwrap();
    grin_store::merge(dir.path()).unwrap();
    assert!(grin_store::verify(dir.path(), &mut |_| {}).unwrap().ok());

    // Overlapping ranges: the shard being written is refused to the other.
    let dir = tempfile::tempdir().unwrap();
    let (overlap, first) = while_writing(dir.path(), plan(40, 10), 0..2, || {
        write_dataset(dir.path(), plan(40, 10), 0..1, &fill, &mut |_: Event| {})
    });
    let e = overlap.unwrap_err().to_string();
    assert!(e.contains("shard-00000.bin.tmp: another grin precompute is writing this shard"), "{e}");
    first.unwrap();
}

#[test]
fn a_dataset_being_read_is_not_rewritten_and_one_being_written_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 40, 10);
    let store = Store::open(dir.path()).unwrap();
    let e = write_dataset(dir.path(), plan(40, 10), 0..4, &fill, &mut |_: Event| {}).unwrap_err().to_string();
    assert!(e.contains("in use by another grin process"), "{e}");
    // Two readers are fine.
    Store::open(dir.path()).unwrap();
    drop(store);
    write_dataset(dir.path(), plan(40, 10), 0..4, &fill, &mut |_: Event| {}).unwrap();

    // A rerun that rewrites a shard (its sidecar is gone) over the finished dataset.
    std::fs::remove_file(dir.path().join("shard-00000.json")).unwrap();
    let (reader, first) = while_writing(dir.path(), plan(40, 10), 0..4, || Store::open(dir.path()).map(|_| ()));
    let e = reader.unwrap_err().to_string();
    assert!(e.contains("a grin precompute or merge is writing this dataset"), "{e}");
    first.unwrap();
}

#[test]
fn overwritten_label_bytes_are_refused_by_the_checksum_check_naming_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 40, 10);
    Store::open(dir.path()).unwrap().check_checksums().unwrap();
    // Record 21 (shard 2) has a smiling and a non-smiling face: swapping
    // their labels leaves a valid record of the same class, so only the
    // checksum can tell.
    let shard = dir.path().join("shard-00002.bin");
    let mut bytes = std::fs::read(&shard).unwrap();
    let labels = (RECORD_BYTES + 1024 + 256) as usize;
    assert_eq!(bytes[labels..labels + 2], [1, 0]);
    bytes[labels..labels + 2].copy_from_slice(&[0, 1]);
    std::fs::write(&shard, bytes).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let e = store.check_checksums().unwrap_err();
    assert!(matches!(&e, StoreError::Checksum { path, .. } if *path == shard), "{e}");
    assert!(e.to_string().contains("shard-00002.bin: checksum ") && e.to_string().contains("grin verify"), "{e}");
}

/// Issue 90: a dataset being written was refused for the wrong reason: a
/// second writer, once the first had finished a shard, was told the folder
/// "was written for another config; ... delete this one", and a run was
/// told to build it with `grin precompute` while one was. Both now say the
/// folder is being written.
#[test]
fn a_dataset_being_written_is_refused_for_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let during = Mutex::new(Some(|| {
        let second = write_dataset(dir.path(), other_plan(40, 10), 0..4, &fill, &mut |_: Event| {});
        (second, grin_store::refuse_if_being_written(dir.path()))
    }));
    let seen = Mutex::new(None);
    // Once shard 0 and its sidecar are written: from record 10 on.
    let source = |indices: &[u64], out: &mut HostBatch| -> Result<(), InputError> {
        if indices[0] >= 10 {
            if let Some(f) = during.lock().unwrap().take() {
                *seen.lock().unwrap() = Some(f());
            }
        }
        fill(indices, out)
    };
    write_dataset(dir.path(), plan(40, 10), 0..4, &source, &mut |_: Event| {}).unwrap();
    let (second, probe) = seen.into_inner().unwrap().expect("the source ran past shard 0");
    let e = second.unwrap_err().to_string();
    assert!(e.contains("in use by another grin process") && !e.contains("another config"), "{e}");
    let e = probe.unwrap_err().to_string();
    assert!(e.contains("is writing this dataset now"), "{e}");
    grin_store::refuse_if_being_written(dir.path()).unwrap();
}
