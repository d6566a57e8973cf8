//! Burn's side of the `.grin` model file, which grin-net reads, checks and
//! writes ([`grin_net::file`]): a [`Detector`] from a file, and a
//! detector's file.
//!
//! A file is read once, by grin-net; the detector is then built from the
//! weights it read, through their record as grin-net writes it, decoded by
//! Burn's own recorder (`Detector::load_record` needs Burn's record type).
//! That record cannot fail to decode: grin-net wrote it from weights it
//! checked, in the layout Burn writes (`tests::burn_writes_what_grin_net_writes`).

use crate::detector::{Detector, InitDetector};
use burn::module::Module;
use burn::record::{FullPrecisionSettings, Recorder, RecorderError};
use burn::tensor::backend::Backend;
use grin_net::{DetectorSpec, Weights};
use serde::Serialize;
use std::path::Path;

pub use grin_net::file::{resigned, ModelFileError, MAX_MODEL_BYTES};

/// Burn's `BinBytesRecorder`, byte for byte (bincode 2, its standard
/// configuration), except that a record that does not decode is an error
/// rather than a panic.
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

/// The detector holding `weights` (checked by grin-net: they fit their spec).
pub fn from_weights<B: Backend>(weights: &Weights, device: &B::Device) -> Detector<B> {
    let record =
        Bytes.load(grin_net::file::record(weights), device).expect("grin-net's record of checked weights decodes");
    weights.spec.init::<B>(device).load_record(record)
}

pub fn to_bytes<B: Backend>(spec: &DetectorSpec, model: &Detector<B>) -> Vec<u8> {
    grin_net::file::to_bytes(&model.weights(spec))
}

/// Writes through `grin_output`: a crash mid-write leaves the previous file
/// intact, and a read-only model file is refused.
pub fn save_model<B: Backend>(
    path: &Path,
    spec: &DetectorSpec,
    model: &Detector<B>,
) -> Result<(), grin_output::OutputError> {
    grin_net::file::write(path, &model.weights(spec))
}

pub fn load_model<B: Backend>(path: &Path, device: &B::Device) -> Result<(DetectorSpec, Detector<B>), ModelFileError> {
    let weights = grin_net::file::read(path)?;
    Ok((weights.spec.clone(), from_weights(&weights, device)))
}

pub fn from_bytes<B: Backend>(bytes: &[u8], device: &B::Device) -> Result<(DetectorSpec, Detector<B>), String> {
    let weights = grin_net::file::from_bytes(bytes)?;
    Ok((weights.spec.clone(), from_weights(&weights, device)))
}

#[cfg(test)]
mod tests;
