//! `grin verify`: every shard's presence, size and checksum, and every
//! record's labels, reported per shard with its record range.

use crate::error::{Result, StoreError};
use crate::layout::class_from_letter;
use crate::manifest::{checksum_text, resolve, Manifest, MANIFEST_FILE};
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use xxhash_rust::xxh3::Xxh3;

#[derive(Debug, Clone, PartialEq)]
pub struct BadShard {
    pub file: String,
    /// The records affected: the whole shard for a checksum or size
    /// mismatch, a single record for bad labels or boxes.
    pub records: Range<u64>,
    pub problem: String,
}

impl std::fmt::Display for BadShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (records {}..{}): {}", self.file, self.records.start, self.records.end, self.problem)
    }
}

#[derive(Debug, Clone)]
pub struct VerifyReport {
    pub manifest: Manifest,
    pub shards: u64,
    pub bytes: u64,
    pub bad: Vec<BadShard>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.bad.is_empty()
    }
}

/// Checks the dataset in `dir`. Structural errors in the manifest (a foreign
/// file, a path escaping the folder, a wrong layout) are `Err`; damaged
/// shards are listed in the report so that every one of them is named.
pub fn verify(dir: &Path, progress: &mut dyn FnMut(u64)) -> Result<VerifyReport> {
    let manifest = Manifest::load(dir)?;
    // Read as a run reads it: refused while a precompute rewrites it (its
    // shards were reported bad, with "rerun grin precompute", round 11),
    // and an odd lock file is named.
    let _lock = crate::lock::lock_for_reading(dir)?;
    let manifest_path = dir.join(MANIFEST_FILE);
    let mut bad = Vec::new();
    let mut bytes = 0;
    for shard in &manifest.shards {
        let path = resolve(dir, &manifest_path, &shard.file)?;
        let whole = shard.record_range();
        let mut report = |problem: String, records: Range<u64>| {
            bad.push(BadShard { file: shard.file.clone(), records, problem });
        };
        let mut file = match grin_output::open_plain(&path) {
            Ok(f) => f,
            Err(e) => {
                report(format!("cannot open: {e}"), whole);
                continue;
            }
        };
        let actual = file.metadata().map_err(|e| StoreError::io(&path, e))?.len();
        if actual != shard.bytes {
            report(format!("{actual} bytes, expected {} (truncated or replaced)", shard.bytes), whole);
            continue;
        }
        let record_bytes = manifest.layout.record_bytes as usize;
        let per_read = ((8 << 20) / record_bytes).max(1);
        let mut buf = vec![0u8; per_read * record_bytes];
        let mut hasher = Xxh3::new();
        let mut record = shard.first_record;
        let mut classes = shard.classes.chars();
        let mut read_error = None;
        while record < whole.end {
            let n = (per_read as u64).min(whole.end - record) as usize;
            let chunk = &mut buf[..n * record_bytes];
            if let Err(e) = file.read_exact(chunk) {
                read_error = Some(e);
                break;
            }
            hasher.update(chunk);
            for bytes in chunk.chunks_exact(record_bytes) {
                let expected = classes.next().and_then(class_from_letter);
                if let Some(problem) = record_problem(&manifest, bytes, expected) {
                    report(problem, record..record + 1);
                }
                record += 1;
            }
            progress(chunk.len() as u64);
        }
        if let Some(e) = read_error {
            report(format!("read failed at record {record}: {e}"), whole);
            continue;
        }
        let checksum = checksum_text(hasher.digest());
        if checksum != shard.xxh3 {
            report(format!("checksum {checksum}, manifest says {}", shard.xxh3), whole);
        }
        bytes += shard.bytes;
    }
    Ok(VerifyReport { shards: manifest.shards.len() as u64, manifest, bytes, bad })
}

/// What is wrong with one record's labels and boxes, if anything.
fn record_problem(manifest: &Manifest, record: &[u8], expected: Option<grin_features::SceneClass>) -> Option<String> {
    let layout = &manifest.layout;
    if let Some(problem) = layout.record_problem(record) {
        return Some(problem);
    }
    let class = layout.class_of(record);
    if expected != Some(class) {
        // In the manifest's own letters (s, n, f), not Rust's debug text (round 12).
        let said = expected.map_or('?', crate::layout::class_letter);
        return Some(format!("labels say class `{}`, the manifest says `{said}`", crate::layout::class_letter(class)));
    }
    None
}
