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
    /// The dataset a precomputed or in-VRAM run trains from, or the
    /// identity of an on-the-fly run's source files
    /// ([`RunSpec::data`](crate::RunSpec::data)): resume refuses another.
    /// Absent in checkpoints written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

/// What [`LoopState::config_json`] holds: a run's three sections, in this
/// order, as a JSON array.
const SECTIONS: [&str; 3] = ["features", "model", "train"];

/// Refuses to resume over another dataset than the checkpoint's: the
/// batch order is drawn from the dataset, so "the same data order" no
/// longer holds (round 11: a dataset rebuilt at 3,000 samples under a run
/// of 20,000 resumed without a word).
pub(crate) fn same_data(path: &Path, then: Option<&str>, now: Option<&str>) -> Result<()> {
    match (then, now) {
        (Some(then), Some(now)) if then != now && (then.starts_with(SOURCE_FILES) || now.starts_with(SOURCE_FILES)) => {
            bail!(
                "{}: checkpoint was written training from {then}; the source now holds {now}: the rest of the run \
                 would train on other data. Put the source's files back as they were, or start again with --overwrite",
                path.display()
            )
        }
        (Some(then), Some(now)) if then != now => bail!(
            "{}: checkpoint was written training from a dataset of {then}; the dataset now holds {now}: rebuild it \
             as it was (grin precompute with the same --samples), or start again with --overwrite",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// How an on-the-fly run's checkpoint names its data: the identity of the
/// source's files (names, sizes, times), so a resume over changed files is
/// refused (round 20 of issue 90 resumed over other labels, exit 0).
const SOURCE_FILES: &str = "source files of fingerprint ";

/// [`LoopState::data`] of an on-the-fly run from `source`.
pub(crate) fn source_files_data(source: &grin_features::SourceConfig) -> String {
    format!("{SOURCE_FILES}{}", grin_store::fingerprint::source_identity(source))
}

/// [`LoopState::config_json`] of a run's config sections.
pub(crate) fn config_json(
    features: &grin_features::FeatureConfig,
    model: &grin_net::ModelConfig,
    train: &crate::TrainConfig,
) -> Result<String> {
    Ok(serde_json::to_string(&(features, model, train))?)
}

/// Refuses to resume the checkpoint at `path`, written with the config
/// `then`, under another config `now`, naming the first key that changed.
pub(crate) fn same_config(path: &Path, then: &str, now: &str) -> Result<()> {
    if then == now {
        return Ok(());
    }
    let key = changed_key(then, now).map_or_else(String::new, |key| format!(" (key {key})"));
    bail!(
        "{}: checkpoint was written with a different config{key}; resume with the config it was written with (the \
         run's config.toml), or start again with --overwrite or another run name",
        path.display()
    )
}

/// The first key whose value differs between two [`config_json`]s, dotted
/// as a config names it, with both values when they are short: what a
/// refused `--resume` says changed (round 9 of issue 90: it named nothing).
fn changed_key(then: &str, now: &str) -> Option<String> {
    use serde_json::Value;
    fn differs(key: String, a: &Value, b: &Value) -> Option<String> {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                let at = |o: &serde_json::Map<String, Value>, k: &String| o.get(k).cloned().unwrap_or(Value::Null);
                keys.into_iter().find_map(|k| differs(format!("{key}.{k}"), &at(a, k), &at(b, k)))
            }
            _ if a == b => None,
            _ if a.to_string().len() + b.to_string().len() <= 80 => Some(format!("`{key}`: {a} then, {b} now")),
            _ => Some(format!("`{key}`")),
        }
    }
    let (Value::Array(then), Value::Array(now)) = (serde_json::from_str(then).ok()?, serde_json::from_str(now).ok()?)
    else {
        return None;
    };
    SECTIONS.iter().zip(then.iter().zip(&now)).find_map(|(name, (a, b))| differs(name.to_string(), a, b))
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
    let bytes = grin_output::read_plain(path, u64::MAX)
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
