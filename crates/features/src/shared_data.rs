//! `../shared/data` beside the repository, for the tests that need real
//! photos (this crate's and grin-train's, which includes this file by path).

use std::path::{Path, PathBuf};

/// The data folder when this machine has Caltech WebFaces and CelebA there;
/// otherwise `None`, after saying the test skips.
pub(crate) fn shared_data() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let ok = dir.join("caltech-webfaces/WebFaces_GroundThruth.txt").exists()
        && dir.join("celeba-smile-10k/list_attr_celeba_000001-010000.txt").exists();
    if !ok {
        eprintln!("SKIPPED: no ../shared/data (caltech-webfaces, celeba-smile-10k) beside the repository");
    }
    ok.then_some(dir)
}
