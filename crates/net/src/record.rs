//! The weights part of a model file: Burn's binary record of the
//! detector, byte for byte, read and written without Burn.
//!
//! Burn 0.21's byte recorder writes bincode 2 (standard configuration:
//! variable-length integers) of the record, its metadata first. A module's
//! record is its fields in declaration order; a parameter is its id string
//! and its tensor (the raw little-endian bytes, the shape, the element
//! type); a `Vec` of modules is its length then each; an `Option` a 0 or 1
//! byte; and every field that is not a parameter (a conv's stride, kernel,
//! dilation, groups and padding, BatchNorm's momentum and epsilon, the ReLU
//! flag) one 0 byte, its empty record. [`layout`] states that order for
//! the detector once, and both [`decode`] and [`encode`] walk it. grin-model
//! checks it against Burn's own recorder (`burn_writes_what_grin_net_writes`).

use crate::spec::{Architecture, Conv};
use crate::weights::Tensor;

/// The record's metadata: the element types, the recorder and Burn's
/// version. Written as Burn's recorder in grin-model wrote them; read and
/// not checked, since older files name other recorders.
const METADATA: [&str; 5] = ["f32", "i32", "grin_model::file::Bytes", "0.21.0", "FullPrecisionSettings"];

/// Burn's `DType::F32`, the one element type a grin model holds.
const F32: u64 = 1;

/// Longest parameter id read (Burn's are 13 characters).
const MAX_ID: u64 = 64;

/// Most dimensions a stored shape may claim.
const MAX_RANK: u64 = 8;

/// What walks the record: a reader or a writer.
trait Walk {
    fn metadata(&mut self) -> Result<(), String>;
    /// A field with no data.
    fn unit(&mut self) -> Result<(), String>;
    /// The length of a list of `n` modules.
    fn len(&mut self, n: usize) -> Result<(), String>;
    /// An `Option`'s tag: Some when `some`.
    fn tag(&mut self, some: bool) -> Result<(), String>;
    fn tensor(&mut self, shape: &[usize]) -> Result<(), String>;
}

/// The detector's record, as Burn's derive lays it out.
fn layout(walk: &mut impl Walk, arch: &Architecture, has_top_down_tag: bool) -> Result<(), String> {
    walk.metadata()?;
    conv(walk, &arch.stem)?;
    walk.len(arch.blocks.len())?;
    arch.blocks.iter().flatten().try_for_each(|c| conv(walk, c))?;
    walk.len(arch.heads.len())?;
    arch.heads.iter().flatten().try_for_each(|c| conv(walk, c))?;
    // Last: a layout-1 record ends before it (no fusion then).
    if has_top_down_tag {
        walk.tag(arch.top_down.is_some())?;
    }
    arch.top_down.iter().try_for_each(|c| conv(walk, c))
}

/// A conv's record (weight, bias, then its five settings), and with a
/// BatchNorm the norm's (four tensors, two settings) and the ReLU flag.
fn conv(walk: &mut impl Walk, conv: &Conv) -> Result<(), String> {
    walk.tensor(&conv.weight_shape())?;
    walk.tag(!conv.norm)?;
    if !conv.norm {
        walk.tensor(&[conv.output])?;
    }
    (0..5).try_for_each(|_| walk.unit())?;
    if conv.norm {
        (0..4).try_for_each(|_| walk.tensor(&[conv.output]))?;
        (0..3).try_for_each(|_| walk.unit())?;
    }
    Ok(())
}

/// The record of `tensors`, which are `arch`'s in file order.
pub(crate) fn encode(arch: &Architecture, tensors: &[Tensor]) -> Vec<u8> {
    let mut writer = Writer { out: Vec::new(), tensors: tensors.iter() };
    layout(&mut writer, arch, true).expect("writing cannot fail");
    debug_assert!(writer.tensors.next().is_none(), "one tensor for every place");
    writer.out
}

/// Every tensor of `arch`'s record in `bytes`, each checked against the
/// shape the architecture gives it and for finite values; layout 1 has no
/// fusion tag at the end.
pub(crate) fn decode(bytes: &[u8], arch: &Architecture, has_top_down_tag: bool) -> Result<Vec<Tensor>, String> {
    let mut reader = Reader { bytes, at: 0, tensors: Vec::new() };
    layout(&mut reader, arch, has_top_down_tag)?;
    let left = bytes.len() - reader.at;
    if left > 0 {
        return Err(format!("weights: {left} bytes after the last tensor (damaged or crafted)"));
    }
    Ok(reader.tensors)
}

struct Writer<'a> {
    out: Vec<u8>,
    tensors: std::slice::Iter<'a, Tensor>,
}

impl Writer<'_> {
    /// bincode's variable-length integer.
    fn varint(&mut self, v: u64) {
        match v {
            0..=250 => self.out.push(v as u8),
            251..=0xffff => {
                self.out.push(251);
                self.out.extend((v as u16).to_le_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.out.push(252);
                self.out.extend((v as u32).to_le_bytes());
            }
            _ => {
                self.out.push(253);
                self.out.extend(v.to_le_bytes());
            }
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.varint(bytes.len() as u64);
        self.out.extend_from_slice(bytes);
    }
}

impl Walk for Writer<'_> {
    fn metadata(&mut self) -> Result<(), String> {
        METADATA.iter().for_each(|s| self.bytes(s.as_bytes()));
        Ok(())
    }

    fn unit(&mut self) -> Result<(), String> {
        self.out.push(0);
        Ok(())
    }

    fn len(&mut self, n: usize) -> Result<(), String> {
        self.varint(n as u64);
        Ok(())
    }

    fn tag(&mut self, some: bool) -> Result<(), String> {
        self.out.push(some.into());
        Ok(())
    }

    fn tensor(&mut self, shape: &[usize]) -> Result<(), String> {
        let tensor = self.tensors.next().expect("a tensor for every place");
        debug_assert_eq!(tensor.shape, shape, "tensors in file order");
        self.bytes(tensor.id.as_bytes());
        let values: Vec<u8> = tensor.values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.bytes(&values);
        self.varint(shape.len() as u64);
        shape.iter().for_each(|&d| self.varint(d as u64));
        self.varint(F32);
        Ok(())
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    tensors: Vec<Tensor>,
}

/// What every read past the end says.
const ENDS_EARLY: &str = "cannot decode weights: the record ends early (damaged or crafted)";

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let taken = self.at.checked_add(n).and_then(|end| self.bytes.get(self.at..end)).ok_or(ENDS_EARLY)?;
        self.at += n;
        Ok(taken)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, &byte| v << 8 | u64::from(byte));
        match self.take(1)?[0] {
            small @ 0..=250 => Ok(small.into()),
            251 => Ok(le(self.take(2)?)),
            252 => Ok(le(self.take(4)?)),
            253 => Ok(le(self.take(8)?)),
            other => Err(format!("cannot decode weights: byte {other} where a length belongs (damaged or crafted)")),
        }
    }

    /// A length-prefixed run of bytes, at most `max` long.
    fn bytes(&mut self, max: u64, what: &str) -> Result<&'a [u8], String> {
        let n = self.varint()?;
        if n > max {
            return Err(format!("cannot decode weights: {what} of {n} bytes (damaged or crafted)"));
        }
        self.take(n as usize)
    }

    fn expect(&mut self, want: u64, what: &str) -> Result<(), String> {
        match self.varint()? {
            got if got == want => Ok(()),
            got => {
                Err(format!("cannot decode weights: {what} {got} where the detector has {want} (damaged or crafted)"))
            }
        }
    }
}

impl Walk for Reader<'_> {
    fn metadata(&mut self) -> Result<(), String> {
        METADATA.iter().try_for_each(|_| self.bytes(MAX_ID * 4, "a metadata string").map(drop))
    }

    fn unit(&mut self) -> Result<(), String> {
        self.expect(0, "a setting's byte")
    }

    fn len(&mut self, n: usize) -> Result<(), String> {
        self.expect(n as u64, "a list of")
    }

    fn tag(&mut self, some: bool) -> Result<(), String> {
        self.expect(some.into(), "an option tag")
    }

    fn tensor(&mut self, shape: &[usize]) -> Result<(), String> {
        let i = self.tensors.len();
        let id = self.bytes(MAX_ID, "a parameter id")?;
        let id = std::str::from_utf8(id).map_err(|_| format!("weights: tensor {i}'s id is not UTF-8"))?.to_owned();
        let data = self.bytes(self.bytes.len() as u64, "a tensor")?;
        let rank = self.varint()?;
        if rank > MAX_RANK {
            return Err(format!("weights: tensor {i} claims {rank} dimensions (damaged or crafted)"));
        }
        let stored = (0..rank).map(|_| self.varint().map(|d| d as usize)).collect::<Result<Vec<_>, _>>()?;
        if stored != shape {
            return Err(format!(
                "weights: tensor {i} is stored as {stored:?}, the detector the header describes has {shape:?}"
            ));
        }
        let dtype = self.varint()?;
        if dtype != F32 {
            return Err(format!("weights: tensor {i} is stored as element type {dtype}, grin reads f32 (1)"));
        }
        let want = shape.iter().product::<usize>() * 4;
        if data.len() != want {
            return Err(format!("weights: tensor {i} holds {} bytes, its shape {shape:?} needs {want}", data.len()));
        }
        let values: Vec<f32> =
            data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
        if !values.iter().all(|v| v.is_finite()) {
            return Err(format!("weights: tensor {i} holds NaN or infinite values"));
        }
        self.tensors.push(Tensor { id, shape: shape.to_vec(), values });
        Ok(())
    }
}
