//! Writing a precomputed dataset: the feature pipeline's samples into a
//! store's shards, with a progress bar. `grin precompute` and the planner
//! (`auto` without a dataset) both come here, and `grin precompute`'s shard
//! range and shard size are parsed here once.

use anyhow::{Context, Result};
use grin_features::{FeatureConfig, HostBatch, Pipeline, Split};
use grin_store::{write_dataset, Event, Plan};
use indicatif::{ProgressBar, ProgressStyle};
use std::ops::Range;
use std::path::Path;

/// Writes `shards` of `plan` into `out` (finished shards are reused, so an
/// interrupted run picks up where it stopped).
pub fn write_store(
    features: &FeatureConfig,
    mut plan: Plan,
    shards: Range<u64>,
    out: &Path,
) -> Result<grin_store::Summary> {
    // A store holds the generator's samples before class balance: the
    // store modes apply `[features.balance]` once, when they draw records
    // (`grin_store::BatchOrder`), as on-the-fly applies it once when it
    // generates.
    let unbalanced = FeatureConfig { balance: None, ..features.clone() };
    let pipeline = Pipeline::new(&unbalanced, Split::Train).context("features")?;
    // Said and kept: `grin train` says it skipped these, and a dataset made
    // without them said nothing (issue 80).
    let load_skips = pipeline.source().load_skips();
    plan.skipped_inputs = load_skips.map_or(0, |s| s.total());
    if let Some(skips) = load_skips.and_then(|s| s.summary()) {
        eprintln!("{skips} while the source loaded (kept in the manifest as skipped_inputs)");
    }
    let mut bar: Option<ProgressBar> = None;
    let mut progress = |event: Event| match event {
        Event::Plan { reused_shards, reused_records, pending_records, .. } => {
            if reused_shards > 0 {
                eprintln!("reusing {reused_shards} finished shards ({reused_records} samples)");
            }
            let b = ProgressBar::new(pending_records);
            b.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{wide_bar}] {pos}/{len} samples  {per_sec}  ETA {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar = Some(b);
        }
        Event::Redo { file, reason } => eprintln!("rewriting {file}: {reason}"),
        Event::Records(n) => {
            if let Some(b) = &bar {
                b.inc(n);
            }
        }
    };
    let fill = |indices: &[u64], batch: &mut HostBatch| pipeline.fill_batch(indices, batch);
    let summary = write_dataset(out, plan, shards, &fill, &mut progress);
    if let Some(b) = &bar {
        b.finish();
    }
    let summary = summary?;
    if let Some(skips) = pipeline.skips().summary() {
        eprintln!("{skips}");
    }
    Ok(summary)
}

/// A whole dataset of `samples` for `features` in `out`, default shard size.
pub fn write_whole_store(features: &FeatureConfig, samples: u64, out: &Path) -> Result<grin_store::Summary> {
    let plan = Plan::for_features(features, samples, grin_store::DEFAULT_SHARD_BYTES)?;
    let shards = 0..plan.shard_count;
    write_store(features, plan, shards, out)
}

/// `A..B` (half-open, like Rust ranges), `A..` or `A` over `shard_count` shards.
pub fn parse_shard_range(text: &str, shard_count: u64) -> Result<Range<u64>> {
    let bad = || anyhow::anyhow!("--shards {text}: expected A..B with A < B <= {shard_count}");
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => {
            let a = if a.is_empty() { 0 } else { a.trim().parse().map_err(|_| bad())? };
            let b = if b.is_empty() { shard_count } else { b.trim().parse().map_err(|_| bad())? };
            (a, b)
        }
        None => {
            let a: u64 = text.trim().parse().map_err(|_| bad())?;
            (a, a + 1)
        }
    };
    if a >= b || b > shard_count {
        return Err(bad());
    }
    Ok(a..b)
}

/// `128M`, `64k`, `1G`, `4096`: a shard size in bytes, binary multiples.
pub fn parse_shard_bytes(text: &str) -> std::result::Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &lower[digits.len()..];
    let scale = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("unknown size unit {unit:?} (use K, M or G)")),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is not a size like 128M"))?;
    match n.checked_mul(scale) {
        Some(bytes) if bytes > 0 => Ok(bytes),
        _ => Err(format!("{text:?} must be positive and fit in 64 bits")),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_shard_bytes, parse_shard_range};
    use grin_features::{FeatureConfig, SourceConfig};
    use grin_image::OnBadSample;

    /// Issue 80, cause 8: precompute skipped corrupt photos without a word
    /// where `grin train` on the same config said "skipped 2 inputs".
    #[test]
    fn the_inputs_a_source_skipped_are_kept_in_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let mined = dir.path().join("mined");
        std::fs::create_dir_all(&mined).unwrap();
        for k in 0..4u8 {
            image::GrayImage::from_fn(32, 32, |x, y| image::Luma([(x * 7 + y * 3) as u8 ^ k]))
                .save(mined.join(format!("crop-{k}.png")))
                .unwrap();
        }
        std::fs::write(mined.join("broken-1.png"), b"not a png").unwrap();
        std::fs::write(mined.join("broken-2.jpg"), b"not a jpeg").unwrap();
        let features = FeatureConfig {
            width: 32,
            height: 32,
            on_bad_sample: OnBadSample::Skip,
            source: SourceConfig::Negatives { images: None, mined: Some(mined), graphics: 0.0, zoom_in: 0.0 },
            ..FeatureConfig::default()
        };
        let store = dir.path().join("store");
        super::write_whole_store(&features, 8, &store).unwrap();
        assert_eq!(grin_store::Store::open(&store).unwrap().manifest().skipped_inputs, 2);
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_shard_bytes("128M"), Ok(128 << 20));
        assert_eq!(parse_shard_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_shard_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_shard_bytes("4096"), Ok(4096));
        assert!(parse_shard_bytes("0").is_err());
        assert!(parse_shard_bytes("12X").unwrap_err().contains("unknown size unit"));
        assert!(parse_shard_bytes("M").is_err());
        assert!(parse_shard_bytes("99999999999G").is_err());
    }

    #[test]
    fn shard_ranges_are_half_open_and_bounded() {
        assert_eq!(parse_shard_range("0..4", 8).unwrap(), 0..4);
        assert_eq!(parse_shard_range("6..", 8).unwrap(), 6..8);
        assert_eq!(parse_shard_range("3", 8).unwrap(), 3..4);
        for bad in ["4..4", "5..3", "0..9", "8", "a..b"] {
            assert!(parse_shard_range(bad, 8).is_err(), "{bad}");
        }
    }
}
