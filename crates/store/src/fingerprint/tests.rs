//! What a fingerprint holds and how two of them differ: the parts that need
//! its constructors (integration tests see only `Store::check_fingerprint`).

use super::{canonical, Fingerprint};
use grin_features::{FeatureConfig, SourceConfig};
use std::time::{Duration, SystemTime};

fn features() -> FeatureConfig {
    FeatureConfig { width: 32, height: 32, channels: 1, ..FeatureConfig::default() }
}

#[test]
fn source_files_are_part_of_the_fingerprint() {
    let data = tempfile::tempdir().unwrap();
    for (folder, name) in [("smile", "a.jpg"), ("smile", "b.jpg"), ("no_smile", "c.jpg")] {
        std::fs::create_dir_all(data.path().join(folder)).unwrap();
        std::fs::write(data.path().join(folder).join(name), name.repeat(10)).unwrap();
    }
    let mut config = features();
    config.source = SourceConfig::Crops {
        root: data.path().to_path_buf(),
        max_faces: 4,
        min_face: 16.0,
        max_face: 160.0,
        rotation_deg: 15.0,
        backgrounds: None,
    };
    let stored = Fingerprint::new(&config, 100).unwrap();
    assert_eq!(stored.config["source_files"]["root"]["files"], 3);
    assert_eq!(stored.config["source_files"]["root"]["bytes"], 150);
    assert_eq!(stored, Fingerprint::new(&config, 100).unwrap(), "stable for unchanged files");

    // A file added, then one rewritten with a new mtime: both are noticed.
    std::fs::write(data.path().join("smile/d.jpg"), b"new").unwrap();
    let now = Fingerprint::new(&config, 100).unwrap();
    assert_eq!(
        stored.differing_keys(&now),
        ["source_files.root.bytes", "source_files.root.files", "source_files.root.hash"]
    );
    std::fs::remove_file(data.path().join("smile/d.jpg")).unwrap();
    let file = std::fs::File::options().write(true).open(data.path().join("smile/a.jpg")).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(60)).unwrap();
    let now = Fingerprint::new(&config, 100).unwrap();
    assert_eq!(stored.differing_keys(&now), ["source_files.root.hash"]);

    // Training from a copy of the dataset on a machine without the crops:
    // the files cannot be compared, so they are not reported as changed.
    let moved = data.path().join("gone");
    let mut elsewhere = config.clone();
    if let SourceConfig::Crops { root, .. } = &mut elsewhere.source {
        *root = moved.clone();
    }
    let now = Fingerprint::new(&elsewhere, 100).unwrap();
    assert_eq!(now.config["source_files"]["root"]["missing"], true);
    assert_eq!(stored.differing_keys(&now), ["features.source.root"]);
}

#[test]
fn the_hash_is_of_canonical_json() {
    let a = Fingerprint::from_config(serde_json::json!({"b": 1, "a": {"y": [1, 2], "x": 0.5}}));
    let b = Fingerprint::from_config(serde_json::json!({"a": {"x": 0.5, "y": [1, 2]}, "b": 1}));
    assert_eq!(a.hash, b.hash);
    assert_eq!(canonical(&a.config), r#"{"a":{"x":0.5,"y":[1,2]},"b":1}"#);
    assert_eq!(a.hash.len(), 16);
}

#[test]
fn a_dataset_from_an_older_generator_is_stale() {
    let now = Fingerprint::new(&features(), 30).unwrap();
    assert_eq!(now.config["generator"], grin_features::GENERATOR_VERSION);
    // What a store written before the generator version existed recorded.
    let mut older = now.config.clone();
    older.as_object_mut().unwrap().remove("generator");
    assert_eq!(Fingerprint::from_config(older).differing_keys(&now), ["generator"]);
    let mut previous = now.config.clone();
    previous["generator"] = (grin_features::GENERATOR_VERSION - 1).into();
    assert_eq!(Fingerprint::from_config(previous).differing_keys(&now), ["generator"]);
}

#[test]
fn a_photo_sources_file_of_found_faces_is_part_of_the_fingerprint() {
    let data = tempfile::tempdir().unwrap();
    let found = data.path().join("found.jsonl");
    std::fs::write(&found, "{}\n").unwrap();
    let mut config = features();
    let crops = grin_features::PhotoCrops { unannotated: Some(found.clone()), ..Default::default() };
    config.source = SourceConfig::Caltech { root: data.path().join("caltech"), crops };
    let stored = Fingerprint::new(&config, 100).unwrap();
    assert_eq!(stored.config["source_files"]["crops.unannotated"]["files"], 1);
    // Unset, the key is not written: stores made before it existed stay fresh.
    let mut plain = config.clone();
    plain.source = SourceConfig::Caltech { root: data.path().join("caltech"), crops: Default::default() };
    assert!(!Fingerprint::new(&plain, 100).unwrap().config.to_string().contains("unannotated"));
    // Rerunning the detector rewrites the file: the dataset is stale.
    std::fs::write(&found, "{}\n{}\n").unwrap();
    let now = Fingerprint::new(&config, 100).unwrap();
    assert!(stored.differing_keys(&now).iter().any(|k| k.starts_with("source_files.crops.unannotated")));
}
