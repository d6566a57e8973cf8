use super::*;

const MAGIC: &[u8; 8] = b"GRINTST1";
const NAMES: [&str; 3] = ["state", "model", "empty"];

fn file() -> Vec<u8> {
    frame(MAGIC, &[b"{\"step\":3}", &[7u8; 100], &[]])
}

#[test]
fn parts_come_back_as_written() {
    let bytes = file();
    assert_eq!(&bytes[..8], MAGIC);
    assert_eq!(bytes.len(), 8 + 3 * 16 + 10 + 100);
    let parts = unframe(&bytes, &NAMES).unwrap();
    assert_eq!(parts, [&b"{\"step\":3}"[..], &[7u8; 100][..], &[][..]]);
    // A reader of an older version asks for fewer parts of its own file.
    let two = frame(MAGIC, &[b"a", b"b"]);
    assert_eq!(unframe(&two, &NAMES[..2]).unwrap(), [b"a", b"b"]);
}

#[test]
fn every_cut_names_the_part_it_falls_in() {
    let bytes = file();
    // Where each part's frame ends: magic, then 8 + len + 8 per part.
    let ends = [8 + 16 + 10, 8 + 16 + 10 + 16 + 100, bytes.len()];
    for cut in 0..bytes.len() {
        let e = unframe(&bytes[..cut], &NAMES).unwrap_err();
        let part = NAMES[ends.iter().position(|&end| cut < end).unwrap()];
        assert_eq!(e, PartError::Truncated(part), "cut at {cut}");
    }
}

#[test]
fn damage_is_named_by_part_and_extra_bytes_are_refused() {
    let bytes = file();
    let flipped = |at: usize| {
        let mut b = bytes.clone();
        b[at] ^= 0x20;
        unframe(&b, &NAMES).unwrap_err()
    };
    assert_eq!(flipped(8 + 8), PartError::Damaged("state"));
    assert_eq!(flipped(8 + 16 + 10 + 8 + 50).to_string(), "model: damaged (checksum mismatch)");
    // A checksum word itself damaged is the same damage.
    assert_eq!(flipped(bytes.len() - 1), PartError::Damaged("empty"));
    let mut long = bytes.clone();
    long.extend_from_slice(&[0; 4]);
    assert_eq!(unframe(&long, &NAMES).unwrap_err().to_string(), "4 bytes after the last part (damaged or appended to)");
    // A length past the end (or past memory) is a cut, not an allocation.
    let mut huge = bytes.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(unframe(&huge, &NAMES).unwrap_err(), PartError::Truncated("state"));
}
