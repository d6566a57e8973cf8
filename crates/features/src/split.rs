//! The deterministic train/val/test split: a file belongs to a split by a
//! hash of its name, so every source that reads files splits the same way.

use crate::config::{Split, SplitConfig};
use grin_image::InputError;
use std::path::Path;

/// The split a file belongs to: xxh3 of its file name (not its folder, so a
/// moved dataset keeps its split) mapped onto the configured ratios.
pub(crate) fn split_of_name(name: &str, split: &SplitConfig) -> Split {
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
    let u = (hash >> 11) as f64 / (1u64 << 53) as f64;
    let total = (split.train + split.val + split.test) as f64;
    if u < split.train as f64 / total {
        Split::Train
    } else if u < (split.train + split.val) as f64 / total {
        Split::Val
    } else {
        Split::Test
    }
}

pub(crate) fn split_of_path(path: &Path, split: &SplitConfig) -> Split {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    split_of_name(&name, split)
}

/// The items whose image (`path_of`) falls in `split`, in their order.
pub(crate) fn keep_split<T>(
    items: Vec<T>,
    path_of: impl Fn(&T) -> &Path,
    ratios: &SplitConfig,
    split: Split,
) -> Vec<T> {
    items.into_iter().filter(|item| split_of_path(path_of(item), ratios) == split).collect()
}

pub(crate) fn check_split(split: &SplitConfig) -> Result<(), InputError> {
    let parts = [split.train, split.val, split.test];
    if parts.iter().any(|p| !p.is_finite() || *p < 0.0) || parts.iter().sum::<f32>() <= 0.0 {
        return Err(InputError::Config(format!(
            "key `features.split`: train/val/test = {}/{}/{} must be non-negative with a positive sum",
            split.train, split.val, split.test
        )));
    }
    Ok(())
}
