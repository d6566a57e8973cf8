//! The store's values on a command line: a shard range and a shard size,
//! parsed once here for `grin precompute`.

use crate::error::{Result, StoreError};
use std::ops::Range;

/// `A..B` (half-open, like Rust ranges), `A..` or `A` over `shard_count` shards.
pub fn parse_shard_range(text: &str, shard_count: u64) -> Result<Range<u64>> {
    let bad = || StoreError::Usage(format!("--shards {text}: expected A..B with A < B <= {shard_count}"));
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
