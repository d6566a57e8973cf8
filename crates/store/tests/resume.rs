//! An interrupted write resumes, skips finished shards and ends with the
//! same bytes as an uninterrupted write. (The real `kill -9` of a `grin
//! precompute` process is covered by the root package's tests/store_resume.rs.)
use crate::common;

use common::*;
use grin_features::HostBatch;
use grin_image::{BadInputKind, InputError};
use grin_store::{write_dataset, Event, StoreError};

fn failing_at(limit: u64) -> impl Fn(&[u64], &mut HostBatch) -> Result<(), InputError> + Sync {
    move |indices: &[u64], out: &mut HostBatch| {
        if indices.iter().any(|&i| i >= limit) {
            return Err(InputError::bad("interrupted.jpg", None, BadInputKind::UnreadableFile, "simulated crash"));
        }
        fill(indices, out)
    }
}

#[test]
fn interrupted_write_resumes_to_identical_shards() {
    let reference = tempfile::tempdir().unwrap();
    write(reference.path(), 100, 10);

    let dir = tempfile::tempdir().unwrap();
    // Shard size 10 records, write batches of 64: failing at 45 stops inside shard 4.
    let err = write_dataset(dir.path(), plan(100, 10), 0..10, &failing_at(45), &mut |_| {}).unwrap_err();
    assert!(matches!(err, StoreError::Generate { first: 40, end: 50, .. }), "{err}");
    assert!(err.to_string().contains("interrupted.jpg"), "{err}");
    // Issue 90: a failed shard's temporary file is removed (a full disk left
    // one as large as what fit); a killed writer's is emptied by the rerun.
    assert!(!dir.path().join("shard-00004.bin.tmp").exists(), "no temporary file is left by an error");
    assert!(!dir.path().join("shard-00004.bin").exists());
    assert!(!dir.path().join("manifest.json").exists());

    // Damage what a crash could leave behind: a finished shard whose sidecar
    // never got written, and a shard file cut short after its sidecar.
    std::fs::remove_file(dir.path().join("shard-00001.json")).unwrap();
    let shard2 = dir.path().join("shard-00002.bin");
    let len = std::fs::metadata(&shard2).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&shard2).unwrap().set_len(len - 100).unwrap();

    let mut events = Vec::new();
    let summary = write_dataset(dir.path(), plan(100, 10), 0..10, &fill, &mut |e| events.push(e)).unwrap();
    assert_eq!(summary.reused_shards, 2, "shards 0 and 3 are reused");
    assert_eq!(summary.written_shards, 8);
    let redone: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Redo { file, .. } => Some(file.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(redone, ["shard-00001.bin", "shard-00002.bin"]);
    assert!(events.contains(&Event::Plan {
        reused_shards: 2,
        reused_records: 20,
        pending_shards: 8,
        pending_records: 80
    }));

    assert_eq!(checksums(dir.path()), checksums(reference.path()));
    for i in 0..10 {
        let name = format!("shard-{i:05}.bin");
        assert_eq!(
            std::fs::read(dir.path().join(&name)).unwrap(),
            std::fs::read(reference.path().join(&name)).unwrap()
        );
    }
    assert!(!dir.path().join("shard-00004.bin.tmp").exists());

    // A complete dataset rerun touches nothing.
    let again = write_dataset(dir.path(), plan(100, 10), 0..10, &fill, &mut |_| {}).unwrap();
    assert_eq!((again.reused_shards, again.written_shards), (10, 0));
}

#[test]
fn a_folder_of_another_config_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 30, 10);
    let mut features = features();
    features.augment.flip = 0.0;
    features.seed = 9;
    let other = grin_store::Plan::for_features(&features, 30, 10 * RECORD_BYTES).unwrap();
    // Refused before a record is made: `nothing` would fail the write.
    let nothing = |_: &[u64], _: &mut HostBatch| -> Result<(), InputError> { panic!("no record is made") };
    let err = write_dataset(dir.path(), other, 0..3, &nothing, &mut |_| {}).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Conflict { .. }), "{text}");
    assert!(text.contains("features.augment.flip") && text.contains("features.seed"), "{text}");
    assert!(text.contains(&dir.path().display().to_string()), "{text}");

    // Only sidecars left (manifest gone): still refused, naming the sidecar.
    std::fs::remove_file(dir.path().join("manifest.json")).unwrap();
    let other = grin_store::Plan::for_features(&features, 30, 10 * RECORD_BYTES).unwrap();
    let text = write_dataset(dir.path(), other, 0..3, &nothing, &mut |_| {}).unwrap_err().to_string();
    assert!(text.contains("shard-00000.json"), "{text}");

    // Same config, another shard size: refused too (shards would not line up).
    let text = write_dataset(dir.path(), plan(30, 7), 0..5, &nothing, &mut |_| {}).unwrap_err().to_string();
    assert!(text.contains("another config or source files, sample count or shard size"), "{text}");
}
