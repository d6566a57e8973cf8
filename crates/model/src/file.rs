//! The `.grin` model file: a JSON header that says what the weights are,
//! then Burn's binary record.
//!
//! Layout: `GRINMDL3` magic, then two parts framed as every grin binary
//! file is ([`grin_output::parts`]: length, bytes, xxh3 each): the header
//! JSON and the record. The header carries the detector spec and every
//! parameter's shape, so a file from another architecture or a damaged
//! file is refused with a message before Burn ever decodes it; its sizes
//! are checked against [`MAX_SIDE`] before anything is allocated. Files
//! written before the one framing still load ([`legacy`]: `GRINMDL2`, and
//! `GRINMDL1` without a header checksum), with the same checks. A checksum
//! does not stop a crafted file: once decoded, every tensor's shape is
//! checked against the header's detector and every value for being finite,
//! and no more than `MAX_MODEL_BYTES` is ever read.

use crate::detector::{Detector, DetectorSpec};
use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{FullPrecisionSettings, Recorder, RecorderError};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use grin_output::parts;
use grin_terms::{MAX_SIDE, MIN_SIDE};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

mod legacy;

const MAGIC: &[u8; 8] = b"GRINMDL3";
const PARTS: [&str; 2] = ["header", "weights"];
/// Largest model file read: the widest detector a config may ask for
/// stays far below it, and `--model /dev/zero` stops here instead of at
/// the end of memory.
pub(crate) const MAX_MODEL_BYTES: u64 = 256 << 20;
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

struct Shapes(Vec<Vec<usize>>);

impl<B: Backend> ModuleVisitor<B> for Shapes {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0.push(param.dims().to_vec());
    }
}

fn shapes<B: Backend>(model: &Detector<B>) -> Vec<Vec<usize>> {
    let mut visitor = Shapes(Vec::new());
    model.visit(&mut visitor);
    visitor.0
}

thread_local! {
    /// Set while [`decoded`] runs Burn's decoder on this thread.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs Burn's record decoder, turning a panic inside it into None. Burn's
/// tensor deserializer allocates from the shape and type a record declares
/// before it checks them against the bytes, so a crafted record panics
/// there (capacity overflow; found by the `model_weights` fuzz target,
/// `fuzz/regressions/model_weights/`); the weights are the same bytes
/// whoever wrote them, so such a file is refused like any other bad one.
/// The panic message is kept off stderr while the flag is up; any other
/// panic goes to the hook that was there before.
fn decoded<T>(decode: impl FnOnce() -> T) -> Option<T> {
    static QUIET_WHILE_DECODING: std::sync::Once = std::sync::Once::new();
    QUIET_WHILE_DECODING.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(|d| d.get()) {
                previous(info);
            }
        }));
    });
    DECODING.with(|d| d.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode));
    DECODING.with(|d| d.set(false));
    result.ok()
}

/// Burn's `BinBytesRecorder`, byte for byte (bincode 2, its standard
/// configuration), except that weights that do not decode are an error:
/// Burn's unwraps the decoder's result, so a crafted file past its
/// checksums panicked there (found by the `model_weights` fuzz target,
/// `fuzz/regressions/model_weights/`).
#[derive(Debug, Default, Clone)]
struct Bytes;

impl<B: Backend> Recorder<B> for Bytes {
    type Settings = FullPrecisionSettings;
    type RecordArgs = ();
    type RecordOutput = Vec<u8>;
    type LoadArgs = Vec<u8>;

    fn save_item<I: Serialize>(&self, item: I, _: ()) -> Result<Vec<u8>, RecorderError> {
        bincode::serde::encode_to_vec(item, bincode::config::standard())
            .map_err(|e| RecorderError::Unknown(e.to_string()))
    }

    fn load_item<I: serde::de::DeserializeOwned>(&self, bytes: &mut Vec<u8>) -> Result<I, RecorderError> {
        bincode::serde::decode_from_slice(bytes, bincode::config::standard())
            .map(|(item, _)| item)
            .map_err(|e| RecorderError::Unknown(e.to_string()))
    }
}

pub fn to_bytes<B: Backend>(spec: &DetectorSpec, model: &Detector<B>) -> Vec<u8> {
    // A clone of a Burn parameter not yet drawn draws its own random
    // values: without this, a fresh model's file would hold other weights
    // than the model it was written from goes on to use.
    crate::seeded::draw_now(model);
    let record = Bytes.record(model.clone().into_record(), ()).expect("in-memory records cannot fail");
    let header = Header {
        architecture: ARCHITECTURE.into(),
        spec: spec.clone(),
        shapes: shapes(model),
        record_layout: RECORD_LAYOUT,
    };
    let json = serde_json::to_vec(&header).expect("header serialises");
    parts::frame(MAGIC, &[&json, &record])
}

/// Writes through `grin_output`: a crash mid-write leaves the previous file
/// intact, and a read-only model file is refused.
pub fn save_model<B: Backend>(
    path: &Path,
    spec: &DetectorSpec,
    model: &Detector<B>,
) -> Result<(), grin_output::OutputError> {
    grin_output::write_file(path, &[], &to_bytes(spec, model))
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

pub fn load_model<B: Backend>(path: &Path, device: &B::Device) -> Result<(DetectorSpec, Detector<B>), ModelFileError> {
    use std::io::Read;
    let fail = |message: String| ModelFileError { path: path.to_path_buf(), message };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_MODEL_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| fail(format!("cannot read model: {e}")))?;
    if bytes.len() as u64 > MAX_MODEL_BYTES {
        return Err(fail(format!("more than {} MiB: not a grin model file", MAX_MODEL_BYTES >> 20)));
    }
    from_bytes(&bytes, device).map_err(fail)
}

pub fn from_bytes<B: Backend>(bytes: &[u8], device: &B::Device) -> Result<(DetectorSpec, Detector<B>), String> {
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
    let model = header.spec.init::<B>(device);
    if shapes(&model) != header.shapes {
        return Err("weights do not fit the detector the header describes".into());
    }
    let mut record = record.to_vec();
    match header.record_layout {
        1 if !header.spec.model.top_down => record.push(0),
        RECORD_LAYOUT => {}
        other => return Err(format!("header: record layout {other}, this build reads 1 and {RECORD_LAYOUT}")),
    }
    let record = decoded(|| Bytes.load(record, device))
        .ok_or("cannot decode weights: a tensor's stored data does not fit its shape (damaged or crafted)")?
        .map_err(|e| format!("cannot decode weights: {e}"))?;
    let model = model.load_record(record);
    // The checksum says the bytes are the ones written, not that they fit:
    // a crafted file can carry other shapes (the same byte count) or values
    // no trained model has, and each would panic or mislead far from here.
    let loaded = shapes(&model);
    if let Some((i, (got, want))) = loaded.iter().zip(&header.shapes).enumerate().find(|(_, (g, w))| g != w) {
        return Err(format!(
            "weights: tensor {i} is stored as {got:?}, the detector the header describes has {want:?}"
        ));
    }
    let mut finite = Finite { seen: 0, first_bad: None };
    model.visit(&mut finite);
    if let Some(i) = finite.first_bad {
        return Err(format!("weights: tensor {i} holds NaN or infinite values"));
    }
    Ok((header.spec, model))
}

/// The index of the first float tensor with a value that is not finite.
struct Finite {
    seen: usize,
    first_bad: Option<usize>,
}

impl<B: Backend> ModuleVisitor<B> for Finite {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let all_finite = param.val().into_data().iter::<f32>().all(f32::is_finite);
        if !all_finite && self.first_bad.is_none() {
            self.first_bad = Some(self.seen);
        }
        self.seen += 1;
    }
}

/// The header's fields; the path names the key at fault (NaN is written as
/// `null`, which no f32 reads back as).
fn parse_header<T: serde::de::DeserializeOwned>(json: &[u8]) -> Result<T, String> {
    serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(json))
        .map_err(|e| format!("malformed model header: key `{}`: {}", e.path(), e.inner()))
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
