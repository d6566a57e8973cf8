//! TFRecord framing of events, both ways.

use crate::proto::{Event, Summary, Value};
use prost::Message;

/// A run's event file name: TensorBoard reads every file whose name holds
/// `tfevents`. One file per run, rewritten whole at each log interval (as
/// `metrics.csv` is), so a resumed run holds each step once.
pub const FILE_NAME: &str = "events.out.tfevents.grin";

/// The format the first record names, as TensorFlow's writers do.
const FILE_VERSION: &str = "brain.Event:2";

/// One step's scalars.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub step: u64,
    /// Seconds since the Unix epoch when the values were taken.
    pub wall_time: f64,
    /// (tag, value) pairs; TensorBoard groups tags by their prefix before `/`.
    pub scalars: Vec<(String, f32)>,
}

/// Why bytes are not an event file; `at` is the record's byte offset.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EventsError {
    #[error("record at byte {at}: truncated")]
    Truncated { at: usize },
    #[error("record at byte {at}: its {part} does not match its CRC32C")]
    Checksum { at: usize, part: &'static str },
    #[error("record at byte {at}: not a tensorflow.Event ({why})")]
    Decode { at: usize, why: String },
    #[error("the first record does not name the format ({FILE_VERSION})")]
    NoVersion,
}

/// CRC32C as TFRecord stores it: rotated and offset, so a checksum over
/// data that itself holds checksums does not degenerate.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn frame(out: &mut Vec<u8>, payload: &[u8]) {
    let len = (payload.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&masked_crc(payload).to_le_bytes());
}

/// The bytes of an event file holding `points`, after the version record
/// stamped with `started` (seconds since the epoch).
pub fn encode(started: f64, points: &[Point]) -> Vec<u8> {
    let mut out = Vec::new();
    let version = Event { wall_time: started, step: 0, file_version: Some(FILE_VERSION.into()), summary: None };
    frame(&mut out, &version.encode_to_vec());
    for point in points {
        let value = point.scalars.iter().map(|(tag, v)| Value { tag: tag.clone(), simple_value: Some(*v) }).collect();
        let event = Event {
            wall_time: point.wall_time,
            step: point.step as i64,
            file_version: None,
            summary: Some(Summary { value }),
        };
        frame(&mut out, &event.encode_to_vec());
    }
    out
}

/// The points of an event file (the version record checked and left out),
/// every checksum verified.
pub fn read(bytes: &[u8]) -> Result<Vec<Point>, EventsError> {
    let mut events = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let take = |from: usize, n: usize| bytes.get(from..from + n).ok_or(EventsError::Truncated { at });
        let len_bytes = take(at, 8)?;
        let crc = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        if masked_crc(len_bytes) != crc(take(at + 8, 4)?) {
            return Err(EventsError::Checksum { at, part: "length" });
        }
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        let len = usize::try_from(len).ok().filter(|l| *l <= bytes.len()).ok_or(EventsError::Truncated { at })?;
        let payload = take(at + 12, len)?;
        if masked_crc(payload) != crc(take(at + 12 + len, 4)?) {
            return Err(EventsError::Checksum { at, part: "payload" });
        }
        events.push(Event::decode(payload).map_err(|e| EventsError::Decode { at, why: e.to_string() })?);
        at += 12 + len + 4;
    }
    let mut events = events.into_iter();
    match events.next() {
        Some(Event { file_version: Some(v), .. }) if v == FILE_VERSION => {}
        _ => return Err(EventsError::NoVersion),
    }
    Ok(events
        .map(|e| Point {
            step: e.step.max(0) as u64,
            wall_time: e.wall_time,
            scalars: e
                .summary
                .map(|s| s.value.into_iter().filter_map(|v| Some((v.tag, v.simple_value?))).collect())
                .unwrap_or_default(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> Vec<Point> {
        vec![
            Point { step: 100, wall_time: 1.5e9, scalars: vec![("loss/total".into(), 2.5), ("lr".into(), 1e-3)] },
            Point { step: 200, wall_time: 1.5e9 + 10.0, scalars: vec![("loss/total".into(), 1.25)] },
        ]
    }

    #[test]
    fn points_read_back_as_written() {
        assert_eq!(read(&encode(1.5e9, &points())).unwrap(), points());
        assert_eq!(read(&encode(1.5e9, &[])).unwrap(), vec![]);
    }

    #[test]
    fn the_checksum_is_castagnolis() {
        // The CRC-32C check value (RFC 3720's polynomial), which TFRecord
        // uses; CRC-32 (zlib's) gives 0xCBF43926 here.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    /// Where each record of `bytes` starts.
    fn starts(bytes: &[u8]) -> Vec<usize> {
        let mut at = 0;
        let mut out = vec![];
        while at < bytes.len() {
            out.push(at);
            at += 16 + u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        }
        out
    }

    #[test]
    fn damaged_files_are_named_by_record_and_part() {
        let good = encode(1.5e9, &points());
        let at = starts(&good);
        assert_eq!(at.len(), 3);
        let mut bad = good.clone();
        bad[at[1] + 13] ^= 1;
        assert_eq!(read(&bad), Err(EventsError::Checksum { at: at[1], part: "payload" }));
        let mut bad = good.clone();
        bad[at[1]] ^= 1;
        assert_eq!(read(&bad), Err(EventsError::Checksum { at: at[1], part: "length" }));
        assert_eq!(read(&good[..good.len() - 1]), Err(EventsError::Truncated { at: at[2] }));
        assert_eq!(read(&[0; 8]), Err(EventsError::Truncated { at: 0 }));
        let mut huge = good.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let crc = masked_crc(&huge[..8]).to_le_bytes();
        huge[8..12].copy_from_slice(&crc);
        assert_eq!(read(&huge), Err(EventsError::Truncated { at: 0 }));
        assert_eq!(read(&good[at[1]..]), Err(EventsError::NoVersion));
    }
}
