//! Crash-safe checkpoints: model, optimizer state and loop position in one
//! file, written to a temporary name, synced, then renamed over the old one.
//!
//! Layout: `GRINCKP3`, then four parts (state JSON, model file, optimizer
//! record, the weights' moving average as a model file or nothing) framed
//! as every grin binary file is ([`grin_output::parts`]): a damaged part is
//! refused by name instead of resuming from it. A `GRINCKP2` file (the
//! first three parts, from before `train.ema`) still resumes.

use anyhow::{bail, Context, Result};
use grin_output::parts;
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
    let bytes = parts::frame(MAGIC, &[&state, &checkpoint.model, &checkpoint.optimizer, &checkpoint.average]);
    grin_output::write_file(path, &[], &bytes).context("cannot write checkpoint")
}

pub fn load(path: &Path) -> Result<Checkpoint> {
    // A plain file only: a FIFO as the checkpoint hung `grin train`.
    let mut bytes = Vec::new();
    grin_output::open_plain(path)
        .and_then(|mut file| std::io::Read::read_to_end(&mut file, &mut bytes))
        .with_context(|| format!("{}: cannot read checkpoint", path.display()))?;
    let names = match bytes.get(..parts::MAGIC_LEN) {
        Some(m) if m == MAGIC => &PARTS[..],
        Some(m) if m == MAGIC_BEFORE_EMA => &PARTS[..3],
        _ => bail!("{}: not a grin checkpoint (or one from an older grin)", path.display()),
    };
    let got = parts::unframe(&bytes, names)
        .map_err(|e| anyhow::anyhow!("{}: checkpoint {e}; it cannot be resumed", path.display()))?;
    let state =
        serde_json::from_slice(got[0]).with_context(|| format!("{}: malformed checkpoint state", path.display()))?;
    Ok(Checkpoint {
        state,
        model: got[1].to_vec(),
        optimizer: got[2].to_vec(),
        // A `GRINCKP2` file has no average.
        average: got.get(3).map_or_else(Vec::new, |a| a.to_vec()),
    })
}
