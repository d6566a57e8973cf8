//! Crash-safe checkpoints: model, optimizer state and loop position in one
//! file, written to a temporary name, synced, then renamed over the old one.
//!
//! Layout: `GRINCKP3`, then four parts (state JSON, model file, optimizer
//! record, the weights' moving average as a model file or nothing), each
//! as u64 LE length, bytes, u64 LE xxh3 of the bytes: a damaged part is
//! refused by name instead of resuming from it. A `GRINCKP2` file (the
//! first three parts, from before `train.ema`) still resumes.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

const MAGIC: &[u8; 8] = b"GRINCKP3";
const MAGIC_BEFORE_EMA: &[u8; 8] = b"GRINCKP2";
const PARTS: [&str; 4] = ["loop state", "model", "optimizer state", "averaged model"];

/// Where the loop stands; enough to continue with the same data order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoopState {
    /// Steps completed.
    pub step: usize,
    /// The config the run started with (resume refuses another).
    pub config_json: String,
    /// Metric rows so far, so the summary covers the whole run.
    pub history: Vec<crate::metrics::MetricRow>,
    pub wall_s: f64,
    /// The best validation score so far and the scores since it.
    #[serde(default)]
    pub watch: crate::best::Watch,
}

pub struct Checkpoint {
    pub state: LoopState,
    pub model: Vec<u8>,
    pub optimizer: Vec<u8>,
    /// The moving average's model file (`train.ema`); empty when it is off.
    pub average: Vec<u8>,
}

/// Writes `checkpoint` atomically. On failure (a full disk, say) the error
/// names the file and the partial temporary file is removed.
pub fn save(path: &Path, checkpoint: &Checkpoint) -> Result<()> {
    let state = serde_json::to_vec(&checkpoint.state)?;
    let parts = [&state, &checkpoint.model, &checkpoint.optimizer, &checkpoint.average];
    grin_output::write_with(path, &[], |f| {
        f.write_all(MAGIC)?;
        for part in parts {
            f.write_all(&(part.len() as u64).to_le_bytes())?;
            f.write_all(part)?;
            f.write_all(&xxhash_rust::xxh3::xxh3_64(part).to_le_bytes())?;
        }
        Ok(())
    })
    .context("cannot write checkpoint")
}

pub fn load(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read checkpoint", path.display()))?;
    let names = match bytes.get(..8) {
        Some(m) if m == MAGIC => &PARTS[..],
        Some(m) if m == MAGIC_BEFORE_EMA => &PARTS[..3],
        _ => bail!("{}: not a grin checkpoint (or one from an older grin)", path.display()),
    };
    let mut parts = Vec::with_capacity(PARTS.len());
    let mut at = 8usize;
    let word = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    for name in names {
        let truncated = || format!("{}: truncated checkpoint ({name})", path.display());
        let len = word(at).with_context(truncated)? as usize;
        let end = (at + 8).checked_add(len).with_context(truncated)?;
        let part = bytes.get(at + 8..end).with_context(truncated)?;
        let sum = word(end).with_context(truncated)?;
        if sum != xxhash_rust::xxh3::xxh3_64(part) {
            bail!("{}: checkpoint {name} is damaged (checksum mismatch); it cannot be resumed", path.display());
        }
        parts.push(part.to_vec());
        at = end + 8;
    }
    let average = if parts.len() == PARTS.len() { parts.pop().expect("four parts") } else { vec![] };
    let optimizer = parts.pop().expect("three parts");
    let model = parts.pop().expect("three parts");
    let state =
        serde_json::from_slice(&parts[0]).with_context(|| format!("{}: malformed checkpoint state", path.display()))?;
    Ok(Checkpoint { state, model, optimizer, average })
}
