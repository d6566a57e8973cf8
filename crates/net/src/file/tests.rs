use super::*;
use crate::config::ModelConfig;
use crate::weights::tests::weights_of;

fn spec() -> DetectorSpec {
    DetectorSpec {
        model: ModelConfig { width_mult: 0.25, ..ModelConfig::default() },
        width: 64,
        height: 48,
        channels: 1,
    }
}

fn saved() -> (Weights, Vec<u8>) {
    let weights = weights_of(spec());
    let bytes = to_bytes(&weights);
    (weights, bytes)
}

fn load(bytes: &[u8]) -> Result<Weights, String> {
    from_bytes(bytes)
}

/// Where the record starts: magic, then the header's length, bytes and
/// checksum, then the record's length.
fn record_start(bytes: &[u8]) -> usize {
    16 + u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize + 8 + 8
}

/// A current file's header JSON and record.
fn cut(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let got = parts::unframe(bytes, &PARTS).unwrap();
    (serde_json::from_slice(got[0]).unwrap(), got[1].to_vec())
}

/// `header` and `record` as a `GRINMDL2` file (`checked`) or a `GRINMDL1`
/// file: the record's length and checksum in the header.
fn older(header: &serde_json::Value, record: &[u8], checked: bool) -> Vec<u8> {
    let mut header = header.clone();
    header["record_bytes"] = record.len().into();
    header["record_xxh3"] = xxhash_rust::xxh3::xxh3_64(record).into();
    let json = serde_json::to_vec(&header).unwrap();
    let sum = xxhash_rust::xxh3::xxh3_64(&json).to_le_bytes();
    let magic = if checked { b"GRINMDL2" } else { b"GRINMDL1" };
    [&magic[..], &(json.len() as u32).to_le_bytes(), &json, if checked { &sum[..] } else { &[] }, record].concat()
}

/// The error loading `bytes` with the byte at `at` flipped.
fn flipped(bytes: &[u8], at: usize) -> String {
    let mut b = bytes.to_vec();
    b[at] ^= 0x20;
    load(&b).expect_err("damaged file refused")
}

/// A current file rewritten as a `GRINMDL2` file.
fn as_v2(bytes: &[u8]) -> Vec<u8> {
    let (header, record) = cut(bytes);
    older(&header, &record, true)
}

#[test]
fn weights_load_back_the_same_and_write_the_same_file() {
    for top_down in [false, true] {
        let weights = weights_of(DetectorSpec { model: ModelConfig { top_down, ..spec().model }, ..spec() });
        let bytes = to_bytes(&weights);
        assert_eq!(&bytes[..8], MAGIC);
        let read = load(&bytes).unwrap();
        // `assert!`, not `assert_eq!`: a failure would print every weight.
        assert!(read == weights, "top_down {top_down}");
        assert_eq!(to_bytes(&read), bytes);
    }
}

/// The models in the tree (the shipped one, and the two older files the
/// stage-4 and header-edit commands start from) read, and a current file
/// writes back byte for byte.
#[test]
fn the_models_in_the_tree_read_and_write_back_the_same() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for name in ["assets/default.grin", "models/stage-3.grin", "models/fewer-false-33-raw.grin"] {
        let bytes = std::fs::read(root.join(name)).unwrap();
        let weights = load(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(weights.fit(), "{name}");
        if bytes.starts_with(MAGIC) {
            assert!(to_bytes(&weights) == bytes, "{name} written back differs");
        }
    }
}

/// `bytes` with `edit` made to its record, every checksum recomputed: a
/// crafted file the checksums cannot tell from a real one.
fn crafted(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let (header, mut record) = cut(bytes);
    edit(&mut record);
    parts::frame(MAGIC, &[&serde_json::to_vec(&header).unwrap(), &record])
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).position(|w| w == needle).expect("found")
}

#[test]
fn weights_that_do_not_fit_the_header_are_refused_under_matching_checksums() {
    let (weights, bytes) = saved();
    let c = weights.tensors[0].shape[0] as u8;
    // The first conv's [c, 1, 3, 3] stored as [c, 1, 9, 1]: the same byte
    // count (its rank, sides and element type follow its values).
    let reshaped = crafted(&bytes, |r| {
        let at = find(r, &[4, c, 1, 3, 3, 1]);
        r[at + 3..at + 5].copy_from_slice(&[9, 1]);
    });
    let e = load(&reshaped).err().unwrap();
    assert!(e.contains("tensor 0 is stored as [") && e.contains(", 9, 1]"), "{e}");
    let other_type = crafted(&bytes, |r| {
        let at = find(r, &[4, c, 1, 3, 3, 1]);
        r[at + 5] = 0;
    });
    assert_eq!(load(&other_type).err().unwrap(), "weights: tensor 0 is stored as element type 0, grin reads f32 (1)");
    let extra = crafted(&bytes, |r| r.push(0));
    assert_eq!(load(&extra).err().unwrap(), "weights: 1 bytes after the last tensor (damaged or crafted)");
    let short = crafted(&bytes, |r| {
        r.pop();
    });
    assert_eq!(load(&short).err().unwrap(), "cannot decode weights: the record ends early (damaged or crafted)");
    let no_bias = crafted(&bytes, |r| {
        // The first conv's bias tag: it has none (a BatchNorm follows), Some claimed.
        let at = find(r, &[4, c, 1, 3, 3, 1]);
        r[at + 6] = 1;
    });
    assert_eq!(
        load(&no_bias).err().unwrap(),
        "cannot decode weights: an option tag 1 where the detector has 0 (damaged or crafted)"
    );

    for bad in [f32::NAN, f32::INFINITY] {
        let mut poisoned = weights.clone();
        poisoned.tensors[0].values[0] = bad;
        let e = load(&to_bytes(&poisoned)).err().unwrap();
        assert_eq!(e, "weights: tensor 0 holds NaN or infinite values");
    }
    // The crafting itself keeps a good file good.
    assert!(load(&crafted(&bytes, |_| ())).is_ok());
}

#[test]
fn a_model_file_past_the_size_bound_is_refused_without_reading_it_all() {
    let path = std::env::temp_dir().join(format!("grin-{}-huge.grin", std::process::id()));
    let (_, bytes) = saved();
    std::fs::write(&path, &bytes).unwrap();
    // Sparse: no disk is spent on the rest.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(MAX_MODEL_BYTES + 1).unwrap();
    let e = read(&path).err().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(e.to_string().ends_with("huge.grin: more than 256 MiB: not a grin model file"), "{e}");
}

/// A layout-1 record ends before the fusion's tag: a header with fusion
/// and that layout is refused for what it is (round 6 of issue 90).
#[test]
fn a_layout_1_header_with_fusion_is_refused_for_it() {
    let fused = weights_of(DetectorSpec { model: ModelConfig { top_down: true, ..spec().model }, ..spec() });
    let (mut header, record) = cut(&to_bytes(&fused));
    header["record_layout"] = 1.into();
    let e = load(&parts::frame(MAGIC, &[&serde_json::to_vec(&header).unwrap(), &record])).err().unwrap();
    assert_eq!(e, "header: a record of layout 1 holds no top-down fusion, and the header's model has it");
}

/// Issue 90, round 6: a FIFO with no writer hung every command that reads
/// a model; a device or a folder is no model either.
#[test]
fn a_fifo_a_device_or_a_folder_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.grin");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let e = read(&fifo).err().unwrap().to_string();
    assert!(e.ends_with("model.grin: cannot read model: not a regular file (a FIFO, device or socket)"), "{e}");
    let e = read(Path::new("/dev/zero")).err().unwrap().to_string();
    assert!(e.ends_with("not a regular file (a FIFO, device or socket)"), "{e}");
    let e = read(dir.path()).err().unwrap().to_string();
    assert!(e.ends_with("cannot read model: is a folder, not a file"), "{e}");
}

#[test]
fn files_written_before_the_one_framing_still_load() {
    let (weights, bytes) = saved();
    let (header, record) = cut(&bytes);
    for checked in [true, false] {
        let mut file = older(&header, &record, checked);
        assert!(load(&file).unwrap() == weights);
        // And resigned, they are current files with the same weights.
        assert!(load(&resigned(&file).unwrap()).unwrap() == weights);
        file[0] = b'X';
        assert_eq!(load(&file).err().unwrap(), "not a grin model file (bad magic)");
    }
}

#[test]
fn an_older_file_cut_damaged_or_appended_to_is_refused_by_its_own_checks() {
    let (_, bytes) = saved();
    let v2 = as_v2(&bytes);
    let start = 12 + u32::from_le_bytes(v2[8..12].try_into().unwrap()) as usize + 8;
    for cut in [11, 12, 40, start - 9, start - 8, start - 1, start, start + 1, v2.len() - 1] {
        assert!(load(&v2[..cut]).is_err(), "loaded a version-2 file cut at {cut} of {}", v2.len());
    }
    let short = load(&v2[..v2.len() - 1]).err().unwrap();
    assert_eq!(short, format!("truncated weights: {} of {} bytes", v2.len() - 1 - start, v2.len() - start));
    // Issue 42: extra bytes at the end are not "truncated".
    let long = [&v2[..], &[0; 4]].concat();
    assert_eq!(
        load(&long).err().unwrap(),
        format!("4 bytes after the {} bytes of weights the header gives (damaged or appended to)", v2.len() - start)
    );
    assert_eq!(flipped(&v2, 20), "header checksum mismatch (file damaged)");
    assert_eq!(flipped(&v2, start + 100), "weights checksum mismatch (file damaged)");
    let mut b = v2.clone();
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(load(&b).err().unwrap(), "truncated model header");
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let (_, bytes) = saved();
    let start = record_start(&bytes);
    let cuts = [0, 7, 8, 15, 16, 40, start - 17, start - 16, start - 9, start - 1, start, start + 1, bytes.len() - 1];
    for cut in cuts {
        assert!(load(&bytes[..cut]).is_err(), "loaded a file cut at {cut} of {}", bytes.len());
    }
    assert_eq!(load(&bytes[..40]).err().unwrap(), "header: truncated");
    assert_eq!(load(&bytes[..bytes.len() - 1]).err().unwrap(), "weights: truncated");
    // Issue 42: extra bytes at the end are not "truncated".
    let long = [&bytes[..], &[0; 4]].concat();
    assert_eq!(load(&long).err().unwrap(), "4 bytes after the last part (damaged or appended to)");
}

#[test]
fn damage_anywhere_is_named() {
    let (_, bytes) = saved();
    let start = record_start(&bytes);
    assert_eq!(flipped(&bytes, 20), "header: damaged (checksum mismatch)");
    assert_eq!(flipped(&bytes, start + 100), "weights: damaged (checksum mismatch)");
    // A header length past the end of the file.
    let mut b = bytes.clone();
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(load(&b).err().unwrap(), "header: truncated");
}

#[test]
fn a_header_naming_another_architecture_or_size_is_refused_before_the_weights() {
    let (_, bytes) = saved();
    let with_header = |edit: &dyn Fn(&mut serde_json::Value)| {
        let (mut header, record) = cut(&bytes);
        edit(&mut header);
        let json = serde_json::to_vec(&header).unwrap();
        load(&parts::frame(MAGIC, &[&json[..], &record[..]])).err().unwrap()
    };
    let other = with_header(&|h| h["architecture"] = "yolo".into());
    assert_eq!(other, "model architecture `yolo`, this build runs `grin-detector-v1`");
    let huge = with_header(&|h| h["spec"]["width"] = 100_000.into());
    assert!(huge.starts_with("header says the model runs at 100000x48"), "{huge}");
    let wide = with_header(&|h| h["spec"]["model"]["width_mult"] = 0.5.into());
    assert_eq!(wide, "weights do not fit the detector the header describes");
    let pyramid = with_header(&|h| h["spec"]["model"]["pyramid_above"] = (-3.0).into());
    assert_eq!(pyramid, "header: key `model.pyramid_above`: -3 must be 0 (one pass) or a face side in 8..=4096 px");
    let iou = with_header(&|h| h["spec"]["model"]["nms_iou"] = (-1.0).into());
    assert_eq!(iou, "header: key `model.nms_iou`: -1 must be an IoU in (0, 1]");
    let nested = with_header(&|h| h["spec"]["model"]["nested_cover"] = 1.5.into());
    assert_eq!(nested, "header: key `model.nested_cover`: 1.5 must be a share in [0, 1] (0: off)");
    let nested_area = with_header(&|h| h["spec"]["model"]["nested_area"] = 0.0.into());
    assert_eq!(nested_area, "header: key `model.nested_area`: 0 must be a share in (0, 1]");
    let threshold = with_header(&|h| h["spec"]["model"]["score_threshold"] = 1.5.into());
    assert_eq!(threshold, "header: key `model.score_threshold`: 1.5 must be a score in [0, 1]");
    let fine = with_header(&|h| h["spec"]["model"]["fine_head"] = 6.into());
    assert_eq!(fine, "header: key `model.fine_head`: 6 must be 0 (the tap's width) or a multiple of 4 up to 1024");
    // A wider stride-8 head than the weights hold.
    let wider = with_header(&|h| h["spec"]["model"]["fine_head"] = 64.into());
    assert_eq!(wider, "weights do not fit the detector the header describes");
    let kept = with_header(&|h| h["spec"]["model"]["max_detections"] = 1_000_000_000.into());
    assert_eq!(kept, "header: key `model.max_detections`: 1000000000 must be within 1..=1000");
    // serde_json writes a NaN as null: the key is named, not just "malformed".
    let nan = with_header(&|h| h["spec"]["model"]["nms_iou"] = serde_json::Value::Null);
    assert!(nan.starts_with("malformed model header: key `spec.model.nms_iou`: invalid type: null"), "{nan}");
    // Round 7 of issue 90: an unknown key under `spec`, and bytes after the
    // header's object, were read past.
    let unknown = with_header(&|h| h["spec"]["depth"] = 3.into());
    assert!(unknown.starts_with("malformed model header: key `spec.depth`: unknown field `depth`"), "{unknown}");
    let (header, record) = cut(&bytes);
    let mut json = serde_json::to_vec(&header).unwrap();
    json.extend_from_slice(b" xx");
    let trailing = load(&parts::frame(MAGIC, &[&json[..], &record[..]])).err().unwrap();
    assert!(trailing.starts_with("malformed model header: trailing characters"), "{trailing}");
}

#[test]
fn a_header_written_before_the_pyramid_gets_the_default() {
    let (_, bytes) = saved();
    let (mut header, record) = cut(&bytes);
    header["spec"]["model"].as_object_mut().unwrap().remove("pyramid_above");
    let file = older(&header, &record, false);
    assert_eq!(load(&file).unwrap().spec.model.pyramid_above, ModelConfig::default().pyramid_above);
}
