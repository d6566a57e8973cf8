//! Crash-safe checkpoints: model, optimizer state and loop position in one
//! file, written to a temporary name, synced, then renamed over the old one.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 8] = b"GRINCKP1";

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
}

pub struct Checkpoint {
    pub state: LoopState,
    pub model: Vec<u8>,
    pub optimizer: Vec<u8>,
}

pub fn save(path: &Path, checkpoint: &Checkpoint) -> Result<()> {
    let state = serde_json::to_vec(&checkpoint.state)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("{}: cannot create", tmp.display()))?;
        f.write_all(MAGIC)?;
        for part in [&state, &checkpoint.model, &checkpoint.optimizer] {
            f.write_all(&(part.len() as u64).to_le_bytes())?;
            f.write_all(part)?;
        }
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot rename into place", path.display()))?;
    Ok(())
}

pub fn load(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read checkpoint", path.display()))?;
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        bail!("{}: not a grin checkpoint", path.display());
    }
    let mut parts = Vec::with_capacity(3);
    let mut at = 8usize;
    for _ in 0..3 {
        let len = bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
            .with_context(|| format!("{}: truncated checkpoint", path.display()))?;
        let part =
            bytes.get(at + 8..at + 8 + len).with_context(|| format!("{}: truncated checkpoint", path.display()))?;
        parts.push(part.to_vec());
        at += 8 + len;
    }
    let optimizer = parts.pop().expect("three parts");
    let model = parts.pop().expect("three parts");
    let state =
        serde_json::from_slice(&parts[0]).with_context(|| format!("{}: malformed checkpoint state", path.display()))?;
    Ok(Checkpoint { state, model, optimizer })
}
