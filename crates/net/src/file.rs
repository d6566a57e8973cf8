//! The `.grin` model file: a JSON header that says what the weights are,
//! then Burn's binary record of them ([`crate::record`], read and written
//! here without Burn).
//!
//! Layout: `GRINMDL3` magic, then two parts framed as every grin binary
//! file is ([`grin_output::parts`]: length, bytes, xxh3 each): the header
//! JSON and the record. The header carries the detector spec and every
//! parameter's shape, so a file from another architecture or a damaged
//! file is refused with a message before a weight is read; its sizes
//! are checked against [`MAX_SIDE`] before anything is allocated. Files
//! written before the one framing still load ([`legacy`]: `GRINMDL2`, and
//! `GRINMDL1` without a header checksum), with the same checks. A checksum
//! does not stop a crafted file: once decoded, every tensor's shape is
//! checked against the header's detector and every value for being finite,
//! and no more than `MAX_MODEL_BYTES` is ever read.

use crate::record;
use crate::spec::DetectorSpec;
use crate::weights::Weights;
use grin_output::parts;
use grin_terms::{MAX_SIDE, MIN_SIDE};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

mod legacy;

const MAGIC: &[u8; 8] = b"GRINMDL3";
const PARTS: [&str; 2] = ["header", "weights"];
/// Largest model file read: the widest detector a config may ask for
/// stays far below it, and a huge file stops here instead of at the end
/// of memory.
pub const MAX_MODEL_BYTES: u64 = 256 << 20;
const ARCHITECTURE: &str = "grin-detector-v1";

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    architecture: String,
    spec: DetectorSpec,
    shapes: Vec<Vec<usize>>,
    /// [`RECORD_LAYOUT`] when written; files from before it have none.
    #[serde(default = "first_layout")]
    record_layout: u32,
}

/// 2: the detector's record ends with its `top_down` option (fusion). A
/// layout-1 record has no such field: it is read as `None` (no fusion),
/// which Burn's binary record spells as one zero byte at the end.
const RECORD_LAYOUT: u32 = 2;

fn first_layout() -> u32 {
    1
}

#[derive(Debug)]
pub struct ModelFileError {
    pub path: PathBuf,
    pub message: String,
}

impl std::fmt::Display for ModelFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for ModelFileError {}

/// The file of `weights`.
pub fn to_bytes(weights: &Weights) -> Vec<u8> {
    let arch = weights.spec.architecture();
    let header = Header {
        architecture: ARCHITECTURE.into(),
        spec: weights.spec.clone(),
        shapes: arch.tensor_shapes(),
        record_layout: RECORD_LAYOUT,
    };
    let json = serde_json::to_vec(&header).expect("header serialises");
    parts::frame(MAGIC, &[&json, &record::encode(&arch, &weights.tensors)])
}

/// The weights part of `weights`' file: Burn's binary record of them,
/// which grin-model hands to Burn's recorder to build its `Detector`.
pub fn record(weights: &Weights) -> Vec<u8> {
    record::encode(&weights.spec.architecture(), &weights.tensors)
}

/// Writes through `grin_output`: a crash mid-write leaves the previous file
/// intact, and a read-only model file is refused.
pub fn write(path: &Path, weights: &Weights) -> Result<(), grin_output::OutputError> {
    grin_output::write_file(path, &[], &to_bytes(weights))
}

/// The header and weights `bytes` hold (in any version's layout), framed
/// anew with their checksums recomputed: what a crafted file looks like to
/// the loader. For tests and the fuzzer, which must reach the checks behind
/// the checksums. None when no header can be cut from the bytes.
pub fn resigned(bytes: &[u8]) -> Option<Vec<u8>> {
    let (header, record) = match bytes.get(..8)? {
        m if m == MAGIC => {
            let len = usize::try_from(u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?)).ok()?;
            let header = bytes.get(16..16usize.checked_add(len)?)?;
            // The weights: what follows their length word, less their checksum.
            let record = bytes.get(16 + len + 16..).unwrap_or_default();
            (header, &record[..record.len().saturating_sub(8)])
        }
        _ => legacy::cut(bytes)?,
    };
    Some(parts::frame(MAGIC, &[header, record]))
}

pub fn read(path: &Path) -> Result<Weights, ModelFileError> {
    let fail = |message: String| ModelFileError { path: path.to_path_buf(), message };
    // A plain file only, opened without waiting: a FIFO with no writer hung
    // every command that reads a model (issue 90, round 6).
    let bytes = grin_output::read_plain(path, MAX_MODEL_BYTES).map_err(|e| fail(format!("cannot read model: {e}")))?;
    if bytes.len() as u64 > MAX_MODEL_BYTES {
        return Err(fail(format!("more than {} MiB: not a grin model file", MAX_MODEL_BYTES >> 20)));
    }
    from_bytes(&bytes).map_err(fail)
}

pub fn from_bytes(bytes: &[u8]) -> Result<Weights, String> {
    let (json, record) = if bytes.get(..8) == Some(&MAGIC[..]) {
        let got = parts::unframe(bytes, &PARTS).map_err(|e| e.to_string())?;
        (got[0], got[1])
    } else {
        legacy::parts(bytes)?
    };
    let header: Header = parse_header(json)?;
    if header.architecture != ARCHITECTURE {
        return Err(format!("model architecture `{}`, this build runs `{ARCHITECTURE}`", header.architecture));
    }
    check_spec(&header.spec)?;
    let arch = header.spec.architecture();
    if arch.tensor_shapes() != header.shapes {
        return Err("weights do not fit the detector the header describes".into());
    }
    // The checksum says the bytes are the ones written, not that they fit:
    // a crafted file can carry other shapes (the same byte count) or values
    // no trained model has; the record's reader checks both.
    let tensors = match header.record_layout {
        1 if !header.spec.model.top_down => record::decode(record, &arch, false)?,
        1 => return Err("header: a record of layout 1 holds no top-down fusion, and the header's model has it".into()),
        RECORD_LAYOUT => record::decode(record, &arch, true)?,
        other => return Err(format!("header: record layout {other}, this build reads 1 and {RECORD_LAYOUT}")),
    };
    Ok(Weights { spec: header.spec, tensors })
}

/// The header's fields; the path names the key at fault (NaN is written as
/// `null`, which no f32 reads back as).
fn parse_header<T: serde::de::DeserializeOwned>(json: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| format!("malformed model header: key `{}`: {}", e.path(), e.inner()))?;
    // Nothing but whitespace after the object (round 7 of issue 90: `{…} xx`
    // was read as the object alone).
    de.end().map_err(|e| format!("malformed model header: {e}"))?;
    Ok(value)
}

/// Sizes and settings a header may name: anything else would panic or
/// allocate without bound before the weights are even read, or decode
/// nothing (`nms_iou` NaN).
fn check_spec(spec: &DetectorSpec) -> Result<(), String> {
    let (w, h, c) = (spec.width, spec.height, spec.channels);
    if !(MIN_SIDE..=MAX_SIDE).contains(&w) || !(MIN_SIDE..=MAX_SIDE).contains(&h) {
        return Err(format!("header says the model runs at {w}x{h}; sides must be {MIN_SIDE}..={MAX_SIDE}"));
    }
    if c != 1 && c != 3 {
        return Err(format!("header says {c} channels; must be 1 or 3"));
    }
    // The same ranges a config is held to: a file is as untrusted as a config.
    spec.model.validate().map_err(|e| format!("header: {e}"))
}

#[cfg(test)]
mod tests;
