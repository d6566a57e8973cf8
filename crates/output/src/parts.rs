//! The one framing of grin's binary files (the `.grin` model file, the
//! training checkpoint): an 8-byte magic, then parts, each as u64 LE
//! length, bytes, u64 LE xxh3 of the bytes.
//!
//! Each part carries its own length and checksum, so a reader names the
//! part that is cut short or damaged instead of decoding bytes that are not
//! the ones written, and bytes after the last part are refused (a file
//! appended to, or two files run together). The magic says which file and
//! which version it is; its reader checks it and knows its parts' names.

use std::fmt;

/// The magic's length: the parts start after it.
pub const MAGIC_LEN: usize = 8;

/// `magic`, then each of `parts` framed.
pub fn frame(magic: &[u8; MAGIC_LEN], parts: &[&[u8]]) -> Vec<u8> {
    let len = MAGIC_LEN + parts.iter().map(|p| 16 + p.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(magic);
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_le_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(part).to_le_bytes());
    }
    out
}

/// Why a framed file was refused: the part is named by its reader's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartError {
    /// The file ends inside this part (or before it).
    Truncated(&'static str),
    /// This part's bytes are not the ones its checksum was taken of.
    Damaged(&'static str),
    /// This many bytes follow the last part.
    Trailing(usize),
}

impl fmt::Display for PartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartError::Truncated(part) => write!(f, "{part}: truncated"),
            PartError::Damaged(part) => write!(f, "{part}: damaged (checksum mismatch)"),
            PartError::Trailing(n) => write!(f, "{n} bytes after the last part (damaged or appended to)"),
        }
    }
}

impl std::error::Error for PartError {}

/// The parts `names` of `bytes`, whose magic the caller has checked: one
/// slice per name, in order, each checked against its checksum.
pub fn unframe<'a>(bytes: &'a [u8], names: &[&'static str]) -> Result<Vec<&'a [u8]>, PartError> {
    let word =
        |at: usize| bytes.get(at..at.checked_add(8)?).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let mut at = MAGIC_LEN;
    let mut parts = Vec::with_capacity(names.len());
    for &name in names {
        let truncated = PartError::Truncated(name);
        let len = usize::try_from(word(at).ok_or(truncated)?).map_err(|_| truncated)?;
        let start = at + 8;
        // A length past the end is refused before anything is sliced or allocated.
        let end = start.checked_add(len).filter(|&end| end <= bytes.len()).ok_or(truncated)?;
        let sum = word(end).ok_or(truncated)?;
        let part = &bytes[start..end];
        if sum != xxhash_rust::xxh3::xxh3_64(part) {
            return Err(PartError::Damaged(name));
        }
        parts.push(part);
        at = end + 8;
    }
    match bytes.len() - at {
        0 => Ok(parts),
        extra => Err(PartError::Trailing(extra)),
    }
}

#[cfg(test)]
mod tests;
