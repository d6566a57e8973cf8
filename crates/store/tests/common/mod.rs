//! Hand-built samples and small datasets shared by the store tests.
#![allow(dead_code)]

use grin_features::{FaceBox, FeatureConfig, HostBatch, Sample, Smile};
use grin_image::InputError;
use grin_store::{write_dataset, Event, Plan, Summary};
use std::path::Path;

pub(crate) const W: u32 = 32;
pub(crate) const H: u32 = 32;

pub(crate) fn features() -> FeatureConfig {
    FeatureConfig { width: W, height: H, channels: 1, ..FeatureConfig::default() }
}

/// A deterministic sample: the class cycles smiling, non-smiling, face-free,
/// and pixels/boxes depend on the index so that every record is distinct.
pub(crate) fn sample(index: u64) -> Sample {
    let pixels = (0..W * H).map(|p| (index.wrapping_mul(31).wrapping_add(p as u64 * 7) % 251) as u8).collect();
    let x = (index % 8) as f32;
    let face = |smile| FaceBox { x0: x, y0: 1.0, x1: x + 10.5, y1: 12.25, smile };
    let boxes = match index % 3 {
        0 => vec![face(Smile::Yes), face(Smile::No)],
        1 => vec![face(Smile::No), face(Smile::Unknown)],
        _ => vec![],
    };
    Sample { width: W, height: H, channels: 1, pixels, boxes }
}

pub(crate) fn fill(indices: &[u64], out: &mut HostBatch) -> Result<(), InputError> {
    for &i in indices {
        out.push(&sample(i));
    }
    Ok(())
}

/// Record bytes of a 32x32x1 record: 1024 + 256 + 16 rounded up to 64.
pub(crate) const RECORD_BYTES: u64 = 1344;

/// `samples` records in shards of `per_shard` records.
pub(crate) fn plan(samples: u64, per_shard: u64) -> Plan {
    Plan::for_features(&features(), samples, per_shard * RECORD_BYTES).expect("plan")
}

pub(crate) fn write(dir: &Path, samples: u64, per_shard: u64) -> Summary {
    let plan = plan(samples, per_shard);
    let range = 0..plan.shard_count;
    write_dataset(dir, plan, range, &fill, &mut |_: Event| {}).expect("write dataset")
}

pub(crate) fn checksums(dir: &Path) -> Vec<String> {
    grin_store::Manifest::load(dir).expect("manifest").shards.iter().map(|s| s.xxh3.clone()).collect()
}
