use super::*;
use image::{DynamicImage, GrayImage};

const BOUND: ImageBound = ImageBound { max_pixels: grin_image::DEFAULT_MAX_PIXELS, knob: "--max-pixels" };

/// A busy picture, so most of the file is scan data (where the tests cut).
fn jpeg(w: u32, h: u32, value: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let pixel = |x: u32, y: u32| image::Luma([((x * 37 + y * y * 11 + x * y) as u8).wrapping_add(value)]);
    DynamicImage::ImageLuma8(GrayImage::from_fn(w, h, pixel))
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Jpeg)
        .unwrap();
    out
}

fn frames(bytes: &[u8], format: InputFormat, size: Option<(usize, usize)>) -> Vec<Result<Vec<u8>, BadFrame>> {
    let mut reader = FrameReader::new(bytes, format, size, BOUND).unwrap();
    std::iter::from_fn(|| reader.next_frame()).collect()
}

#[test]
fn raw_frames_are_cut_by_size_and_a_short_tail_is_truncated() {
    let bytes: Vec<u8> = (0..(2 * 12 + 5)).map(|i| i as u8).collect();
    let got = frames(&bytes, InputFormat::Gray8, Some((4, 3)));
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].as_ref().unwrap(), &(0..12).collect::<Vec<u8>>());
    assert_eq!(got[1].as_ref().unwrap(), &(12..24).collect::<Vec<u8>>());
    assert_eq!(got[2], Err(BadFrame::Truncated { got: 5, expected: Some(12) }));
    assert_eq!(InputFormat::Yuv420.frame_bytes(4, 2), Some(8 + 2 + 2));
}

#[test]
fn mjpeg_frames_are_cut_at_their_end_markers() {
    let (a, b) = (jpeg(16, 8, 40), jpeg(16, 8, 200));
    let stream = [a.clone(), b.clone()].concat();
    let got = frames(&stream, InputFormat::Mjpeg, None);
    assert_eq!(got, vec![Ok(a), Ok(b)]);
}

#[test]
fn stray_bytes_cut_frames_and_a_missing_end_are_reported_and_skipped() {
    let (a, b) = (jpeg(64, 48, 40), jpeg(64, 48, 200));
    // Past the headers, inside the scan data.
    let cut = &a[..a.len() - a.len() / 4];
    let stream = [b"junk".to_vec(), cut.to_vec(), b.clone(), a[..a.len() - 3].to_vec()].concat();
    let got = frames(&stream, InputFormat::Mjpeg, None);
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[0], Err(BadFrame::StrayBytes(4)));
    assert!(matches!(got[1], Err(BadFrame::BrokenJpeg(_))), "{:?}", got[1]);
    assert_eq!(got[2], Ok(b));
    assert!(matches!(got[3], Err(BadFrame::Truncated { expected: None, .. })), "{:?}", got[3]);
}

#[test]
fn decode_checks_the_declared_size_and_reads_luma_from_yuv() {
    let a = jpeg(16, 8, 40);
    assert!(decode(a.clone(), InputFormat::Mjpeg, Some((16, 8)), 1, BOUND).is_ok());
    assert_eq!(
        decode(a.clone(), InputFormat::Mjpeg, Some((32, 8)), 1, BOUND).unwrap_err(),
        BadFrame::WrongSize { width: 16, height: 8, expected: (32, 8) }
    );
    assert!(matches!(decode(a[..20].to_vec(), InputFormat::Mjpeg, None, 1, BOUND), Err(BadFrame::Undecodable(_))));
    let yuv: Vec<u8> = [vec![100u8; 8], vec![128u8; 4]].concat();
    let grey = decode(yuv.clone(), InputFormat::Yuv420, Some((4, 2)), 1, BOUND).unwrap().into_luma8();
    assert!(grey.pixels().all(|p| p.0[0] == 100));
    let rgb = decode(yuv, InputFormat::Yuv420, Some((4, 2)), 3, BOUND).unwrap().into_rgb8();
    assert!(rgb.pixels().all(|p| p.0[0] == p.0[1] && p.0[1] == p.0[2]), "neutral chroma is grey");
}

/// Gives its bytes, then fails: a camera unplugged, a disk error.
struct Failing(std::io::Cursor<Vec<u8>>);

impl Read for Failing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.read(buf)? {
            0 => Err(std::io::Error::other("device gone")),
            n => Ok(n),
        }
    }
}

#[test]
fn a_read_error_is_the_last_bad_frame_not_a_silent_end() {
    let a = jpeg(16, 8, 40);
    for (format, size, bytes) in
        [(InputFormat::Mjpeg, None, a.clone()), (InputFormat::Gray8, Some((16, 8)), vec![7u8; 16 * 8])]
    {
        let mut reader = FrameReader::new(Failing(std::io::Cursor::new(bytes.clone())), format, size, BOUND).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| reader.next_frame()).collect();
        assert_eq!(got, vec![Ok(bytes), Err(BadFrame::ReadError("device gone".into()))], "{format:?}");
    }
}

#[test]
fn frame_sizes_are_checked_before_reading() {
    let new = |size| FrameReader::new(&b""[..], InputFormat::Gray8, Some(size), BOUND).err();
    assert_eq!(new((0, 0)).unwrap(), "--input-size 0x0: a frame has at least one pixel a side");
    assert!(new((100_000, 100_000)).unwrap().contains("over the bound"));
    assert!(new((8000, 8000)).is_none(), "64 megapixels is within the default bound");
}
