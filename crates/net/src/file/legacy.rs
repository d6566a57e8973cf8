//! Model files written before grin's binary files shared one framing:
//! `GRINMDL2` (u32 LE header length, header JSON, u64 LE xxh3 of the
//! header JSON, record bytes; the record's length and xxh3 in the header)
//! and `GRINMDL1` (the same without the header's checksum). Shipped and
//! committed models are such files: they load with the checks they had,
//! and nothing writes them any more.

use serde::Deserialize;

const MAGIC_V2: &[u8; 8] = b"GRINMDL2";
const MAGIC_V1: &[u8; 8] = b"GRINMDL1";

/// What an older header holds beyond the current one: the record's length
/// and checksum, which the framing now carries.
#[derive(Deserialize)]
struct RecordSums {
    record_bytes: u64,
    record_xxh3: u64,
}

/// The header JSON and the record of an older file, its checksums checked
/// as its version did.
pub(super) fn parts(bytes: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let checked = bytes.get(..8).and_then(checked).ok_or("not a grin model file (bad magic)")?;
    let (json, sum, record) = split(bytes, checked).ok_or("truncated model header")?;
    if sum.is_some_and(|sum| sum != xxhash_rust::xxh3::xxh3_64(json)) {
        return Err("header checksum mismatch (file damaged)".into());
    }
    let sums: RecordSums = super::parse_header(json)?;
    let (have, want) = (record.len() as u64, sums.record_bytes);
    if have < want {
        return Err(format!("truncated weights: {have} of {want} bytes"));
    }
    if have > want {
        return Err(format!(
            "{} bytes after the {want} bytes of weights the header gives (damaged or appended to)",
            have - want
        ));
    }
    if xxhash_rust::xxh3::xxh3_64(record) != sums.record_xxh3 {
        return Err("weights checksum mismatch (file damaged)".into());
    }
    Ok((json, record))
}

/// An older file's header JSON and record, unchecked (what
/// [`super::resigned`] frames anew); None for another magic or a header
/// that does not fit.
pub(super) fn cut(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (json, _, record) = split(bytes, checked(bytes.get(..8)?)?)?;
    Some((json, record))
}

/// Whether a file with this magic has a header checksum; None when it is
/// no older model file.
fn checked(magic: &[u8]) -> Option<bool> {
    match magic {
        m if m == MAGIC_V2 => Some(true),
        m if m == MAGIC_V1 => Some(false),
        _ => None,
    }
}

/// Header JSON, its checksum (version 2) and the record; None when the
/// header runs past the end.
fn split(bytes: &[u8], checked: bool) -> Option<(&[u8], Option<u64>, &[u8])> {
    let header_len = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?) as usize;
    let header_end = 12usize.checked_add(header_len)?;
    let json = bytes.get(12..header_end)?;
    if !checked {
        return Some((json, None, &bytes[header_end..]));
    }
    let sum = u64::from_le_bytes(bytes.get(header_end..header_end + 8)?.try_into().ok()?);
    Some((json, Some(sum), &bytes[header_end + 8..]))
}
