//! The ONNX export run by tract (a pure-Rust ONNX runtime) against
//! grin-detect's own CPU path on the test scene: the same raw outputs
//! (within 1e-4) and, through grin's NMS, the same detections, at two run
//! sizes, with one model loaded once (the height and width axes are
//! dynamic). Also: the metadata a consumer decodes with, and a detector
//! with a fourth, stride-4 level, decoded by grin's own decoder.

use grin_image::{read_image, ImageBound, DEFAULT_MAX_PIXELS};
use grin_infer::{ModelSource, Runner, DEFAULT_MODEL};
use grin_model::InitDetector;

/// Plain f32 ndarray: the models exported here are drawn and read by Burn, as training does.
type CpuBackend = burn_ndarray::NdArray<f32>;
use grin_net::{DecodeParams, Detection, DetectorSpec, FoldedConv, FoldedDetector, FoldedHead, Points, OUTPUTS};
use std::path::Path;
use tract_onnx::prelude::*;

const TOLERANCE: f32 = 1e-4;

type Plan = Arc<TypedRunnableModel>;

/// The export loaded as it is: no input shape fixed beyond the file's own.
fn load(onnx: &[u8]) -> Plan {
    tract_onnx::onnx()
        .model_for_read(&mut std::io::Cursor::new(onnx))
        .expect("tract reads the export")
        .into_optimized()
        .expect("tract optimises the export")
        .into_runnable()
        .expect("tract plans the export")
}

/// `(detections [points, 6], raw [6, points])` for one frame.
fn run(plan: &Plan, channels: usize, width: usize, height: usize, pixels: Vec<f32>) -> (Vec<f32>, Vec<f32>) {
    let input = Tensor::from_shape(&[1, channels, height, width], &pixels).unwrap();
    let out = plan.run(tvec!(input.into())).expect("the export runs");
    let values = |t: &TValue| t.to_plain_array_view::<f32>().unwrap().iter().copied().collect::<Vec<_>>();
    assert_eq!(out[0].shape()[2], 6, "detections are rows of 6");
    (values(&out[0]), values(&out[1]))
}

/// What a consumer of the export does, in grin's order: threshold on the
/// face score, boxes clipped to the frame, then grin's NMS.
fn consume(rows: &[f32], width: usize, height: usize, params: &DecodeParams) -> Vec<Detection> {
    let (w, h) = (width as f32, height as f32);
    let found = rows
        .chunks_exact(6)
        .filter(|r| r[4] > params.score_threshold)
        .map(|r| Detection {
            x0: r[0].clamp(0.0, w),
            y0: r[1].clamp(0.0, h),
            x1: r[2].clamp(0.0, w),
            y1: r[3].clamp(0.0, h),
            score: r[4],
            smile: r[5],
        })
        .collect();
    grin_net::nms(found, params)
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= TOLERANCE * a.abs().max(1.0)
}

fn assert_same_detections(onnx: &[Detection], grin: &[Detection], what: &str) {
    assert!(!grin.is_empty(), "{what}: nothing to compare");
    assert_eq!(onnx.len(), grin.len(), "{what}: detection counts");
    // Matched as sets: two scores equal to the last bit may sort either way.
    for g in grin {
        let same = |o: &&Detection| {
            let pairs =
                [(o.x0, g.x0), (o.y0, g.y0), (o.x1, g.x1), (o.y1, g.y1), (o.score, g.score), (o.smile, g.smile)];
            pairs.iter().all(|&(a, b)| close(a, b))
        };
        assert!(onnx.iter().any(|o| same(&o)), "{what}: grin's {g:?} has no counterpart in the export's");
    }
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "output sizes");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn shipped() -> (DetectorSpec, grin_model::Detector<CpuBackend>) {
    grin_model::file::from_bytes::<CpuBackend>(DEFAULT_MODEL, &Default::default()).unwrap()
}

#[test]
fn the_export_matches_the_fast_path_on_the_test_scene_at_two_sizes() {
    let (spec, model) = shipped();
    let plan = load(&grin_export::to_onnx(&spec, &model.folded(&spec)));
    let bound = ImageBound::new(DEFAULT_MAX_PIXELS, "test").unwrap();
    let scene = read_image(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/test-scene.png"), bound).unwrap();
    let mut runner = Runner::load(ModelSource::Embedded).unwrap();
    let deployed = spec.model.decode_params();
    // Many more boxes than the deployed threshold keeps, so that NMS and the
    // smile votes have real work.
    let loose = DecodeParams { score_threshold: 0.05, smile_vote_floor: 0.05, ..deployed };
    for (w, h) in [(spec.width, spec.height), (173, 97)] {
        runner.set_run_size(w, h).unwrap();
        let frame = runner.frame(&scene).unwrap();
        let (rows, raw) = run(&plan, frame.channels, w, h, frame.pixels.clone());
        let fast = runner.raw(frame);
        let worst = max_difference(&raw, &fast);
        assert!(worst <= TOLERANCE, "{w}x{h}: raw outputs differ by {worst}");
        for params in [deployed, loose] {
            let what = format!("{w}x{h} at threshold {}", params.score_threshold);
            let grin = grin_net::decode(&fast, runner.points(), &params);
            assert_same_detections(&consume(&rows, w, h, &params), &grin, &what);
        }
    }
}

#[test]
fn the_metadata_holds_what_decoding_needs() {
    let (spec, model) = shipped();
    let onnx = grin_export::to_onnx(&spec, &model.folded(&spec));
    let parsed = tract_onnx::onnx().model_for_read(&mut std::io::Cursor::new(&onnx)).unwrap();
    let prop = |key: &str| {
        let value = parsed.properties.get(&format!("onnx.metadata_props.{key}")).unwrap_or_else(|| panic!("no {key}"));
        value.try_as_plain_ram().unwrap().to_scalar::<String>().unwrap().clone()
    };
    let p = spec.model.decode_params();
    assert_eq!(prop("score_threshold").parse::<f32>().unwrap(), p.score_threshold);
    assert_eq!(prop("nms_iou").parse::<f32>().unwrap(), p.nms_iou);
    assert_eq!(prop("smile_vote_floor").parse::<f32>().unwrap(), p.smile_vote_floor);
    assert_eq!(prop("max_detections").parse::<usize>().unwrap(), p.max_detections);
    assert_eq!(prop("pyramid_above").parse::<f32>().unwrap(), p.pyramid_above);
    assert_eq!(prop("pyramid_min_side").parse::<usize>().unwrap(), grin_net::MIN_PASS_SIDE);
    assert_eq!(prop("pyramid_seam").parse::<f32>().unwrap(), grin_net::SEAM);
    assert_eq!((prop("run_width"), prop("run_height")), (spec.width.to_string(), spec.height.to_string()));
    assert_eq!(prop("channels"), spec.channels.to_string());
    assert_eq!(prop("strides"), "8,16,32");
    let look = spec.model.second_look;
    assert_eq!(prop("second_look_below").parse::<f32>().unwrap(), look.below);
    assert_eq!(prop("second_look_context").parse::<f32>().unwrap(), look.context);
    assert_eq!(prop("second_look_side").parse::<usize>().unwrap(), look.side);
    assert_eq!(prop("second_look_confirm").parse::<f32>().unwrap(), look.confirm);
    assert_eq!(prop("second_look_mirror").parse::<bool>().unwrap(), look.mirror);
    assert_eq!(prop("second_look_mirror_floor").parse::<f32>().unwrap(), grin_net::MIRROR_FLOOR);
    let ir = *parsed.properties.get("onnx.ir_version").unwrap().try_as_plain_ram().unwrap().to_scalar::<i64>().unwrap();
    assert_eq!(ir, 7, "the IR version of opset 13");
}

/// A 1x1 conv of `inputs` to `outputs` channels with small weights that
/// depend on their place, so that every output differs.
fn pointwise(inputs: usize, outputs: usize, relu: bool, seed: f32) -> FoldedConv {
    FoldedConv {
        in_channels: inputs,
        out_channels: outputs,
        kernel: 1,
        stride: 1,
        depthwise: false,
        weight: (0..inputs * outputs).map(|i| ((i as f32 * 0.37 + seed).sin()) * 0.2).collect(),
        bias: (0..outputs).map(|o| (o as f32 + seed).cos() * 0.1).collect(),
        relu,
    }
}

#[test]
fn a_fourth_level_at_stride_4_is_exported_finest_first_and_decodes_as_grin_decodes() {
    let (spec, model) = shipped();
    let three = model.folded(&spec);
    // Trunk layer 4 ends the stride-4 stage (stem, then depthwise and
    // pointwise of two blocks). A head there, as a finer architecture would have.
    let after = 4;
    assert_eq!(three.trunk[..=after].iter().map(|c| c.stride).product::<usize>(), 4);
    let channels = three.trunk[after].out_channels;
    let head = FoldedHead {
        after,
        fuse: None,
        convs: vec![pointwise(channels, channels, true, 1.0), pointwise(channels, OUTPUTS, false, 2.0)],
    };
    let four = FoldedDetector { trunk: three.trunk.clone(), heads: [vec![head], three.heads.clone()].concat() };
    let plan = load(&grin_export::to_onnx(&spec, &four));
    let plan_three = load(&grin_export::to_onnx(&spec, &three));

    let (w, h) = (100, 70);
    let pixels: Vec<f32> = (0..w * h).map(|i| ((i * 7919) % 256) as f32 / 255.0).collect();
    let (rows, raw) = run(&plan, 1, w, h, pixels.clone());
    let (_, raw_three) = run(&plan_three, 1, w, h, pixels);
    // The stride-4 level is 25 x 18 cells; the three levels after it are the
    // three-level model's, unchanged.
    let fine = w.div_ceil(4) * h.div_ceil(4);
    let (points, points_three) = (raw.len() / OUTPUTS, raw_three.len() / OUTPUTS);
    assert_eq!(points, fine + points_three);
    for k in 0..OUTPUTS {
        let after_fine = &raw[k * points + fine..(k + 1) * points];
        assert!(max_difference(after_fine, &raw_three[k * points_three..(k + 1) * points_three]) == 0.0);
    }
    // grin's decoder, handed the four levels' points, finds what a consumer
    // of the graph's decoded rows finds.
    let mut levels = vec![(4, h.div_ceil(4), w.div_ceil(4))];
    let mut side = (h.div_ceil(4), w.div_ceil(4));
    for stride in [8, 16, 32] {
        side = (side.0.div_ceil(2), side.1.div_ceil(2));
        levels.push((stride, side.0, side.1));
    }
    let params = DecodeParams { score_threshold: 0.02, smile_vote_floor: 0.02, ..spec.model.decode_params() };
    let grin = grin_net::decode(&raw, &points_of(&levels, w, h), &params);
    assert_same_detections(&consume(&rows, w, h, &params), &grin, "four levels");
}

/// Points of any levels `(stride, rows, cols)`, finest first, as
/// `Points::new` lays out grin's own three.
fn points_of(levels: &[(usize, usize, usize)], width: usize, height: usize) -> Points {
    let mut p = Points::new(width, height);
    (p.cx, p.cy, p.stride) = (vec![], vec![], vec![]);
    for &(stride, rows, cols) in levels {
        for row in 0..rows {
            for col in 0..cols {
                p.cx.push((col as f32 + 0.5) * stride as f32);
                p.cy.push((row as f32 + 0.5) * stride as f32);
                p.stride.push(stride as f32);
            }
        }
    }
    p
}

#[test]
fn a_model_with_top_down_fusion_and_a_wider_fine_head_exports_both_at_odd_sizes() {
    // The stride-8 head mixes into 40 channels from its tap's 24.
    let spec = DetectorSpec {
        model: grin_net::ModelConfig { width_mult: 0.5, top_down: true, fine_head: 40, ..Default::default() },
        width: 96,
        height: 64,
        channels: 1,
    };
    let model = grin_model::fixtures::with_live_fusion(spec.init::<CpuBackend>(&Default::default()));
    let plan = load(&grin_export::to_onnx(&spec, &model.folded(&spec)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fused.grin");
    grin_model::file::save_model(&path, &spec, &model).unwrap();
    let mut runner = Runner::load(ModelSource::File(path)).unwrap();
    let bound = ImageBound::new(DEFAULT_MAX_PIXELS, "test").unwrap();
    let scene = read_image(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/test-scene.png"), bound).unwrap();
    // 100x70 has an odd stride-8 map (13x9): the upsampled map is cut.
    for (w, h) in [(96, 64), (100, 70)] {
        runner.set_run_size(w, h).unwrap();
        let frame = runner.frame(&scene).unwrap();
        let (_, raw) = run(&plan, 1, w, h, frame.pixels.clone());
        let worst = max_difference(&raw, &runner.raw(frame));
        assert!(worst <= TOLERANCE, "{w}x{h}: raw outputs differ by {worst}");
    }
}
