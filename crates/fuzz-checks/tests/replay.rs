//! Every input that ever broke a fuzz target (`fuzz/regressions/TARGET/`),
//! and every seed (`fuzz/seeds/TARGET/`), through the target's checks.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for folder in ["regressions", "seeds"] {
        let Ok(files) = std::fs::read_dir(root.join(folder).join(target)) else { continue };
        for file in files {
            let path = file.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            eprintln!("{target}: {}", path.display());
            check(&bytes);
            replayed += 1;
        }
    }
    eprintln!("{target}: {replayed} inputs replayed");
}

#[test]
fn annotations() {
    replay("annotations", grin_fuzz_checks::annotations);
}

#[test]
fn config() {
    replay("config", grin_fuzz_checks::config);
}

#[test]
fn image() {
    replay("image", grin_fuzz_checks::image);
}

#[test]
fn model_file() {
    replay("model_file", grin_fuzz_checks::model_file);
}

/// The model file's seed is the shipped model; the replay checks its
/// re-signed copy loads and runs.
#[test]
fn model_weights() {
    let shipped = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/default.grin")).unwrap();
    let resigned = grin_model::file::resigned(&shipped).unwrap();
    let device = Default::default();
    grin_model::file::from_bytes::<burn_ndarray::NdArray<f32>>(&resigned, &device)
        .expect("a re-signed real file loads");
    grin_fuzz_checks::model_weights(&shipped);
    replay("model_weights", grin_fuzz_checks::model_weights);
}

#[test]
fn store() {
    replay("store", grin_fuzz_checks::store);
}

#[test]
fn stream_frames() {
    replay("stream_frames", grin_fuzz_checks::stream_frames);
}
