//! The folded detector as an ONNX graph: the trunk and heads conv by conv,
//! in the order [`grin_net::Weights::folded`] walks them, then each
//! level's outputs decoded in the graph (sigmoid scores, boxes from the
//! distances around the cell centres, smile probability), finest level
//! first, as [`grin_net::Points`] orders them.
//!
//! Only shape-preserving operators touch the decoded values: OpenCV 4's
//! ONNX importer cannot evaluate `Shape` on a dynamic input (so the cell
//! centres come from `CumSum` over a map of ones, not `Range`), and it
//! infers wrong import-time shapes for an element-wise op between two
//! dynamic tensors or against a broadcast constant (so scaling, offsets and
//! `centre ± distance` are 1x1 convs). Each is exact: a stride is a power of
//! two, and each box coordinate sums two non-zero terms.

use crate::graph::{int_attr, ints_attr, Dim, Graph};
use crate::pb::{ModelProto, OperatorSetIdProto, StringStringEntryProto};
use grin_image::LETTERBOX_FILL;
use grin_net::{
    DetectorSpec, FoldedConv, FoldedDetector, FoldedFuse, FoldedHead, CONFIRM_IOU, LOG_DISTANCE_RANGE, MIN_PASS_SIDE,
    MIRROR_FLOOR, OUTPUTS, SEAM,
};
use grin_terms::output::{DISTANCE, FACE, SMILE};

/// The graph's input: `[batch, channels, height, width]`, values in 0..1.
pub const INPUT: &str = "image";
/// Per point, before any threshold: `[batch, points, 6]` rows of
/// `x0, y0, x1, y1, face score, smile probability`, boxes in input pixels.
pub const DETECTIONS: &str = "detections";
/// The network's raw outputs, `[batch, 6, points]`: face logit,
/// log(distance / stride) left, top, right, bottom, smile logit.
pub const RAW: &str = "raw";
/// The operator set the graph uses: opset 13 is read by OpenCV 4.x,
/// onnxruntime and tract alike.
pub const OPSET: i64 = 13;
/// The IR version that goes with [`OPSET`].
const IR_VERSION: i64 = 7;

/// Columns of a [`DETECTIONS`] row.
const DECODED: usize = 6;

/// The detector as a serialised ONNX model (`ModelProto` bytes).
pub fn to_onnx(spec: &DetectorSpec, folded: &FoldedDetector) -> Vec<u8> {
    prost::Message::encode_to_vec(&model(spec, folded))
}

pub(crate) fn model(spec: &DetectorSpec, folded: &FoldedDetector) -> ModelProto {
    let mut g = Graph::default();
    let mut decoded = Vec::new();
    let mut raw = Vec::new();
    let mut x = INPUT.to_string();
    // Each trunk layer's output and its stride (pixels of input per cell).
    let mut trunk: Vec<(String, usize)> = Vec::with_capacity(folded.trunk.len());
    let mut stride = 1;
    let ready = |h: &FoldedHead| h.fuse.as_ref().map_or(h.after, |f| h.after.max(f.from));
    for (i, conv) in folded.trunk.iter().enumerate() {
        x = conv_node(&mut g, &format!("trunk.{i}"), conv, &x);
        stride *= conv.stride;
        trunk.push((x.clone(), stride));
        // Levels in order: a fused level waits for its coarser input.
        while raw.len() < folded.heads.len() && ready(&folded.heads[raw.len()]) == i {
            let level = raw.len();
            let head = &folded.heads[level];
            let (mut y, mut s) = trunk[head.after].clone();
            if let Some(fuse) = &head.fuse {
                y = fuse_node(&mut g, level, fuse, &y, &trunk[fuse.from].0);
            }
            for (j, conv) in head.convs.iter().enumerate() {
                y = conv_node(&mut g, &format!("level{level}.head.{j}"), conv, &y);
                s *= conv.stride;
            }
            assert_eq!(head.convs.last().map(|c| c.out_channels), Some(OUTPUTS), "a head ends in the outputs");
            let flat = g.ints(&[0, OUTPUTS as i64, -1]);
            raw.push(g.op("Reshape", format!("level{level}.raw"), &[&y, &flat], vec![]));
            decoded.push(decode_level(&mut g, level, &y, s as f32));
        }
    }
    assert_eq!(raw.len(), folded.heads.len(), "every head reads trunk layers, in level order");
    g.op("Concat", RAW, &names(&raw), vec![int_attr("axis", 2)]);
    let all = g.op("Concat", "decoded", &names(&decoded), vec![int_attr("axis", 2)]);
    g.op("Transpose", DETECTIONS, &[&all], vec![ints_attr("perm", &[0, 2, 1])]);

    let (batch, points) = (Dim::Named("batch"), Dim::Named("points"));
    let image = [batch, Dim::Fixed(spec.channels), Dim::Named("height"), Dim::Named("width")];
    let graph = g.finish(
        "grin-detector",
        &[(INPUT, &image, "frame, [batch, channels, height, width], values in 0..1 (grey: luma; colour: RGB)")],
        &[
            (
                DETECTIONS,
                &[batch, points, Dim::Fixed(DECODED)],
                "per point: x0, y0, x1, y1 (input pixels, not clipped to the frame), face score, smile probability",
            ),
            (RAW, &[batch, Dim::Fixed(OUTPUTS), points], "face logit, log(distance / stride) l, t, r, b, smile logit"),
        ],
    );
    ModelProto {
        ir_version: Some(IR_VERSION),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(OPSET) }],
        producer_name: Some("grin".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        doc_string: Some(doc()),
        graph: Some(graph),
        metadata_props: metadata(spec, &level_strides(folded)),
        ..Default::default()
    }
}

/// How to decode as grin does, in words: the settings are the metadata's
/// keys, and the constants come from where grin defines them.
fn doc() -> String {
    format!("grin face + smile detector. Threshold `detections` on the face score (column 4), clip the \
boxes to the frame, then greedy NMS at the metadata's nms_iou, also suppressing a box whose intersection with a \
kept one covers at least nested_cover of its area when it is at most nested_area of that box's (0: off); grin also sets each kept face's smile to the \
score-weighted mean, in logits, of its own and of the boxes it suppressed that score at least smile_vote_floor. \
Faces larger than pyramid_above px are found by running the frame again at half size (2x2 means). \
With second_look_below above 0, each kept box scoring below it is looked at again: a square of second_look_context \
times its longer side around it, cut from the picture (grey {LETTERBOX_FILL} outside it), scaled to second_look_side px and \
searched the same way (in one pass when second_look_side / second_look_context is at most pyramid_above) at \
second_look_confirm (0: the threshold); the box stays only if a face found there overlaps \
the cut's centre square of side / context at IoU {CONFIRM_IOU}. With second_look_mirror true, the cut and its mirror image are \
each searched down to second_look_mirror_floor, each scores its best face overlapping that square (0: none), and the \
box stays when the mean of the two reaches second_look_confirm (0: the threshold).")
}

fn names(tensors: &[String]) -> Vec<&str> {
    tensors.iter().map(String::as_str).collect()
}

/// What a consumer needs to decode as grin does, and the size it was
/// trained for.
fn metadata(spec: &DetectorSpec, strides: &[usize]) -> Vec<StringStringEntryProto> {
    let (p, look) = (spec.model.decode_params(), spec.model.second_look);
    let strides: Vec<String> = strides.iter().map(|s| s.to_string()).collect();
    [
        ("score_threshold", p.score_threshold.to_string()),
        ("nms_iou", p.nms_iou.to_string()),
        ("nested_cover", p.nested_cover.to_string()),
        ("nested_area", p.nested_area.to_string()),
        ("max_detections", p.max_detections.to_string()),
        ("smile_vote_floor", p.smile_vote_floor.to_string()),
        ("pyramid_above", p.pyramid_above.to_string()),
        ("pyramid_min_side", MIN_PASS_SIDE.to_string()),
        ("pyramid_seam", SEAM.to_string()),
        ("second_look_below", look.below.to_string()),
        ("second_look_context", look.context.to_string()),
        ("second_look_side", look.side.to_string()),
        ("second_look_confirm", look.confirm.to_string()),
        ("second_look_mirror", look.mirror.to_string()),
        ("second_look_mirror_floor", MIRROR_FLOOR.to_string()),
        ("run_width", spec.width.to_string()),
        ("run_height", spec.height.to_string()),
        ("channels", spec.channels.to_string()),
        ("strides", strides.join(",")),
    ]
    .into_iter()
    .map(|(k, v)| StringStringEntryProto { key: Some(k.into()), value: Some(v) })
    .collect()
}

/// Each level's stride, finest first, from the walk's own conv strides.
fn level_strides(folded: &FoldedDetector) -> Vec<usize> {
    let mut at = Vec::with_capacity(folded.trunk.len());
    let mut stride = 1;
    for conv in &folded.trunk {
        stride *= conv.stride;
        at.push(stride);
    }
    folded.heads.iter().map(|h| h.convs.iter().fold(at[h.after], |s, c| s * c.stride)).collect()
}

/// A folded conv (BatchNorm already in its weights and bias), then its ReLU.
fn conv_node(g: &mut Graph, name: &str, conv: &FoldedConv, x: &str) -> String {
    let groups = if conv.depthwise { conv.in_channels } else { 1 };
    let (k, s, pad) = (conv.kernel as i64, conv.stride as i64, (conv.kernel / 2) as i64);
    let w = g.floats(
        format!("{name}.weight"),
        &[conv.out_channels, conv.in_channels / groups, conv.kernel, conv.kernel],
        &conv.weight,
    );
    let b = g.floats(format!("{name}.bias"), &[conv.out_channels], &conv.bias);
    let attributes = vec![
        ints_attr("kernel_shape", &[k, k]),
        ints_attr("strides", &[s, s]),
        ints_attr("pads", &[pad; 4]),
        int_attr("group", groups as i64),
    ];
    let y = g.op("Conv", name, &[x, &w, &b], attributes);
    if conv.relu {
        g.op("Relu", format!("{name}.relu"), &[&y], vec![])
    } else {
        y
    }
}

/// Top-down fusion (`grin_net::FoldedFuse`): `coarse` through the lateral
/// conv, each value repeated over a 2x2 block and cut to `fine`'s size (its
/// side is odd when the coarse one rounded up), and added, the add written
/// as a 1x1 conv over both maps side by side (OpenCV's importer mis-shapes
/// an element-wise op between two dynamic tensors).
///
/// The repeat and the cut are one `Gather` along rows and one along
/// columns, at `i / 2` for each row and column `i` of `fine`: indices
/// counted by `CumSum` over a map of ones at `fine`'s size, as the decode
/// counts cell centres. Cutting an upsampled map to `fine`'s size took
/// `Shape` of a dynamic tensor, which OpenCV's importer refuses ("dynamic
/// 'zero' shapes are not supported"), so OpenCV could not load a model with
/// top-down fusion (issue 79).
fn fuse_node(g: &mut Graph, level: usize, fuse: &FoldedFuse, fine: &str, coarse: &str) -> String {
    let name = format!("level{level}.fuse");
    let lateral = conv_node(g, &format!("{name}.lateral"), &fuse.lateral, coarse);
    let c = fuse.lateral.out_channels;
    let ones = pointwise(g, format!("{name}.ones"), fine, (&[1, c], &vec![0.0; c]), Some(&[1.0]), 1);
    let mut up = lateral;
    for (axis, what) in [(2, "rows"), (3, "cols")] {
        let axis_name = g.int(axis);
        let counted = g.op("CumSum", format!("{name}.{what}_plus_1"), &[&ones, &axis_name], vec![]);
        // (i + 1 - 1) / 2 then floored: exact for every side an f32 counts.
        let half = pointwise(g, format!("{name}.{what}_halved"), &counted, (&[1, 1], &[0.5]), Some(&[-0.5]), 1);
        let floored = g.op("Floor", format!("{name}.{what}_floored"), &[&half], vec![]);
        let others: Vec<i64> = (0..4).filter(|&a| a != axis).collect();
        let reduce = vec![ints_attr("axes", &others), int_attr("keepdims", 0)];
        let line = g.op("ReduceMax", format!("{name}.{what}_line"), &[&floored], reduce);
        let cast = vec![int_attr("to", crate::pb::tensor_proto::DataType::Int64 as i64)];
        let index = g.op("Cast", format!("{name}.{what}_index"), &[&line], cast);
        up = g.op("Gather", format!("{name}.up_{what}"), &[&up, &index], vec![int_attr("axis", axis)]);
    }
    let both = g.op("Concat", format!("{name}.both"), &[fine, &up], vec![int_attr("axis", 1)]);
    // [out c, in 2c]: output channel k sums input k and input c + k.
    let mut sum = vec![0.0; c * 2 * c];
    for k in 0..c {
        sum[k * 2 * c + k] = 1.0;
        sum[k * 2 * c + c + k] = 1.0;
    }
    pointwise(g, format!("{name}.add"), &both, (&[c, 2 * c], &sum), None, 1)
}

/// 1x1 conv of `x` (`weight` is `[out, in / groups]`).
fn pointwise(
    g: &mut Graph,
    name: String,
    x: &str,
    weight: (&[usize; 2], &[f32]),
    bias: Option<&[f32]>,
    groups: usize,
) -> String {
    let ([out, per_group], values) = (*weight.0, weight.1);
    let w = g.floats(format!("{name}.weight"), &[out, per_group, 1, 1], values);
    let mut inputs = vec![x, w.as_str()];
    let b = bias.map(|b| g.floats(format!("{name}.bias"), &[out], b));
    inputs.extend(b.as_deref());
    let attributes = vec![ints_attr("kernel_shape", &[1, 1]), int_attr("group", groups as i64)];
    g.op("Conv", name, &inputs, attributes)
}

/// One level's raw head output `y` (`[batch, 6, rows, cols]`) decoded as
/// `grin_net::decode` does before its threshold, flattened to
/// `[batch, 6, rows * cols]`: x0, y0, x1, y1, face score, smile probability.
fn decode_level(g: &mut Graph, level: usize, y: &str, stride: f32) -> String {
    let p = format!("level{level}");
    let axis1 = g.ints(&[1]);
    let channels = |g: &mut Graph, what: &str, from: i64, to: i64| {
        let (start, end) = (g.ints(&[from]), g.ints(&[to]));
        g.op("Slice", format!("{p}.{what}"), &[y, &start, &end, &axis1], vec![])
    };
    let at = |c: usize| c as i64;
    let face = channels(g, "face_logit", at(FACE), at(FACE + 1));
    let distances = channels(g, "log_distances", at(DISTANCE), at(DISTANCE + 4));
    let smile = channels(g, "smile_logit", at(SMILE), at(SMILE + 1));
    let score = g.op("Sigmoid", format!("{p}.score"), &[&face], vec![]);
    let smile = g.op("Sigmoid", format!("{p}.smile"), &[&smile], vec![]);
    let (lo, hi) = LOG_DISTANCE_RANGE;
    let (lo, hi) = (g.floats("log_distance.min", &[], &[lo]), g.floats("log_distance.max", &[], &[hi]));
    let clipped = g.op("Clip", format!("{p}.clipped"), &[&distances, &lo, &hi], vec![]);
    let scaled = g.op("Exp", format!("{p}.distances_per_stride"), &[&clipped], vec![]);

    // Cell centres: a map of ones, counted along rows and along columns,
    // gives each cell's (col + 1, row + 1); times the stride, less half.
    let ones = pointwise(g, format!("{p}.ones"), &face, (&[1, 1], &[0.0]), Some(&[1.0]), 1);
    let (rows, cols) = (g.int(2), g.int(3));
    let col = g.op("CumSum", format!("{p}.col_plus_1"), &[&ones, &cols], vec![]);
    let row = g.op("CumSum", format!("{p}.row_plus_1"), &[&ones, &rows], vec![]);
    let cells = g.op("Concat", format!("{p}.cells"), &[&col, &row], vec![int_attr("axis", 1)]);
    let half = -stride / 2.0;
    let centres = pointwise(g, format!("{p}.centres"), &cells, (&[2, 1], &[stride; 2]), Some(&[half; 2]), 2);

    // From (cx, cy, l, t, r, b per stride): x0 = cx - l * stride, y0 = cy -
    // t * stride, x1 = cx + r * stride, y1 = cy + b * stride.
    let parts = g.op("Concat", format!("{p}.parts"), &[&centres, &scaled], vec![int_attr("axis", 1)]);
    let s = stride;
    #[rustfmt::skip]
    let corners = [
        1.0, 0.0, -s, 0.0, 0.0, 0.0,
        0.0, 1.0, 0.0, -s, 0.0, 0.0,
        1.0, 0.0, 0.0, 0.0, s, 0.0,
        0.0, 1.0, 0.0, 0.0, 0.0, s,
    ];
    let boxes = pointwise(g, format!("{p}.boxes"), &parts, (&[4, 6], &corners), None, 1);
    let rows_of_level = g.op("Concat", format!("{p}.decoded"), &[&boxes, &score, &smile], vec![int_attr("axis", 1)]);
    let flat = g.ints(&[0, DECODED as i64, -1]);
    g.op("Reshape", format!("{p}.decoded_flat"), &[&rows_of_level, &flat], vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_model::InitDetector;
    use grin_net::ModelConfig;
    use std::collections::HashSet;

    fn exported(channels: usize) -> (DetectorSpec, FoldedDetector, ModelProto) {
        let spec = DetectorSpec { model: ModelConfig::default(), width: 96, height: 64, channels };
        let folded = spec.init::<burn_ndarray::NdArray<f32>>(&Default::default()).folded(&spec);
        let model = model(&spec, &folded);
        (spec, folded, model)
    }

    #[test]
    fn every_tensor_is_defined_once_before_it_is_read() {
        let (_, folded, model) = exported(3);
        let graph = model.graph.as_ref().unwrap();
        let mut defined: HashSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
        assert_eq!(defined.len(), graph.initializer.len(), "each constant stored once");
        assert!(defined.insert(INPUT));
        for node in &graph.node {
            for input in &node.input {
                assert!(defined.contains(input.as_str()), "{} reads {input} before it exists", node.name());
            }
            for output in &node.output {
                assert!(defined.insert(output), "{output} is written twice");
            }
        }
        for output in &graph.output {
            assert!(defined.contains(output.name()), "output {} is never written", output.name());
        }
        let convs = graph.node.iter().filter(|n| n.op_type() == "Conv").count();
        let network = folded.trunk.len() + folded.heads.iter().map(|h| h.convs.len()).sum::<usize>();
        // Each level decodes with three 1x1 convs: ones, centres, boxes.
        assert_eq!(convs, network + 3 * folded.heads.len());
    }

    #[test]
    fn the_model_declares_opset_13_its_input_and_the_level_strides() {
        let (spec, folded, model) = exported(1);
        assert_eq!(model.opset_import[0].version(), OPSET);
        assert_eq!(level_strides(&folded), [8, 16, 32]);
        let graph = model.graph.as_ref().unwrap();
        let input = &graph.input[0];
        assert_eq!(input.name(), INPUT);
        let Some(crate::pb::type_proto::Value::TensorType(tensor)) = &input.r#type.as_ref().unwrap().value else {
            panic!("the input is a tensor")
        };
        let dims: Vec<_> = tensor.shape.as_ref().unwrap().dim.iter().map(|d| d.value.clone().unwrap()).collect();
        use crate::pb::tensor_shape_proto::dimension::Value::{DimParam, DimValue};
        assert_eq!(
            dims,
            [
                DimParam("batch".into()),
                DimValue(spec.channels as i64),
                DimParam("height".into()),
                DimParam("width".into())
            ]
        );
        let bytes = to_onnx(&spec, &folded);
        assert_eq!(<ModelProto as prost::Message>::decode(bytes.as_slice()).unwrap(), model, "the bytes are the model");
    }
}
