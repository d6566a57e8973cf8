//! Held-out photos made for tests: face-free textures of chosen sizes.

use grin_features::{FeatureConfig, SourceConfig, Split, SplitConfig};
use grin_net::{DetectorSpec, ModelConfig};

/// Face-free images of the given sizes (`p0.png`, `p1.png`, ...), every one
/// in `split`, and a small untrained model that takes the config's frames.
pub(crate) fn face_free(sizes: &[(u32, u32)], split: Split) -> (tempfile::TempDir, FeatureConfig, DetectorSpec) {
    let dir = tempfile::tempdir().unwrap();
    for (k, &(w, h)) in sizes.iter().enumerate() {
        let texture = image::GrayImage::from_fn(w, h, |x, y| image::Luma([((x * 7 + y * 13) % 251) as u8]));
        texture.save(dir.path().join(format!("p{k}.png"))).unwrap();
    }
    let split = match split {
        Split::Train => SplitConfig { train: 1.0, val: 0.0, test: 0.0 },
        Split::Val => SplitConfig { train: 0.0, val: 1.0, test: 0.0 },
        Split::Test => SplitConfig { train: 0.0, val: 0.0, test: 1.0 },
    };
    let features = FeatureConfig {
        width: 64,
        height: 48,
        split,
        source: SourceConfig::Negatives { images: Some(dir.path().into()), mined: None, graphics: 0.0, zoom_in: 0.0 },
        ..FeatureConfig::default()
    };
    let model = ModelConfig { width_mult: 0.25, ..ModelConfig::default() };
    (dir, features, DetectorSpec { model, width: 64, height: 48, channels: 1 })
}
