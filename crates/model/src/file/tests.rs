use super::*;
use crate::config::ModelConfig;
use burn::backend::NdArray;

type B = NdArray<f32>;

fn spec() -> DetectorSpec {
    DetectorSpec {
        model: ModelConfig { width_mult: 0.25, ..ModelConfig::default() },
        width: 64,
        height: 48,
        channels: 1,
    }
}

fn saved() -> (Detector<B>, Vec<u8>) {
    let model = spec().init::<B>(&Default::default());
    let bytes = to_bytes(&spec(), &model);
    (model, bytes)
}

/// `assert!`, not `assert_eq!`: a failure would print every weight.
fn same_weights(a: &Detector<B>, b: &Detector<B>) -> bool {
    a.folded() == b.folded()
}

fn load(bytes: &[u8]) -> Result<(DetectorSpec, Detector<B>), String> {
    from_bytes::<B>(bytes, &Default::default())
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
fn a_fresh_model_loads_back_with_the_same_spec_and_weights() {
    let (model, bytes) = saved();
    assert_eq!(&bytes[..8], MAGIC);
    let (spec2, model2) = load(&bytes).unwrap();
    assert_eq!(spec2, spec());
    assert!(same_weights(&model2, &model));
    // Saved again, it is the same file byte for byte.
    assert_eq!(to_bytes(&spec2, &model2), bytes);
}

/// `bytes`' header with `other`'s weights, every checksum recomputed: a
/// crafted file the checksums cannot tell from a real one.
fn crafted(bytes: &[u8], other: &[u8]) -> Vec<u8> {
    let mut spliced = bytes[..record_start(bytes)].to_vec();
    spliced.extend_from_slice(&other[record_start(other)..]);
    resigned(&spliced).unwrap()
}

/// `model` with its first float tensor replaced by `f` of it.
fn with_first(model: Detector<B>, f: impl Fn(Tensor<B, 4>) -> Tensor<B, 4>) -> Detector<B> {
    use burn::module::ModuleMapper;
    struct First<F>(F, bool);
    impl<F: Fn(Tensor<B, 4>) -> Tensor<B, 4>> ModuleMapper<B> for First<F> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            if D != 4 || std::mem::replace(&mut self.1, true) {
                return param;
            }
            let (id, tensor, mapper) = param.consume();
            let changed = (self.0)(Tensor::<B, 4>::from_data(tensor.into_data(), &Default::default()));
            Param::from_mapped_value(id, Tensor::from_data(changed.into_data(), &Default::default()), mapper)
        }
    }
    model.map(&mut First(f, false))
}

#[test]
fn weights_that_do_not_fit_the_header_are_refused_under_matching_checksums() {
    let (model, bytes) = saved();
    // The first conv's [c, 1, 3, 3] stored as [c, 1, 9, 1]: the same byte count.
    let reshaped = with_first(model.clone(), |t| {
        let [c, i, _, _] = t.dims();
        t.reshape([c, i, 9, 1])
    });
    let e = load(&crafted(&bytes, &to_bytes(&spec(), &reshaped))).err().unwrap();
    assert!(e.contains("tensor 0 is stored as [") && e.contains(", 9, 1]"), "{e}");

    for bad in [f32::NAN, f32::INFINITY] {
        let poisoned = with_first(model.clone(), |t| t.slice_fill([0..1, 0..1, 0..1, 0..1], bad));
        let e = load(&crafted(&bytes, &to_bytes(&spec(), &poisoned))).err().unwrap();
        assert_eq!(e, "weights: tensor 0 holds NaN or infinite values");
    }
    // The crafting itself keeps a good file good.
    assert!(load(&crafted(&bytes, &bytes)).is_ok());
}

#[test]
fn a_model_file_past_the_size_bound_is_refused_without_reading_it_all() {
    let path = std::env::temp_dir().join(format!("grin-{}-huge.grin", std::process::id()));
    let (_, bytes) = saved();
    std::fs::write(&path, &bytes).unwrap();
    // Sparse: no disk is spent on the rest.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(MAX_MODEL_BYTES + 1).unwrap();
    let e = load_model::<B>(&path, &Default::default()).err().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(e.to_string().ends_with("huge.grin: more than 256 MiB: not a grin model file"), "{e}");
}

#[test]
fn files_written_before_the_one_framing_still_load() {
    let (model, bytes) = saved();
    let (header, record) = cut(&bytes);
    for checked in [true, false] {
        let mut file = older(&header, &record, checked);
        assert!(same_weights(&load(&file).unwrap().1, &model));
        // And resigned, they are current files with the same weights.
        assert!(same_weights(&load(&resigned(&file).unwrap()).unwrap().1, &model));
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
    let (model, _) = saved();
    let with_header = |edit: &dyn Fn(&mut serde_json::Value)| {
        let (mut header, record) = cut(&to_bytes(&spec(), &model));
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
}

#[test]
fn a_header_written_before_the_pyramid_gets_the_default() {
    let model = spec().init::<B>(&Default::default());
    let (mut header, record) = cut(&to_bytes(&spec(), &model));
    header["spec"]["model"].as_object_mut().unwrap().remove("pyramid_above");
    let file = older(&header, &record, false);
    let (loaded, _) = from_bytes::<B>(&file, &Default::default()).unwrap();
    assert_eq!(loaded.model.pyramid_above, ModelConfig::default().pyramid_above);
}
