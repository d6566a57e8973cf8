//! `grin export`: a model file as an ONNX graph for OpenCV DNN, onnxruntime
//! and other runtimes (`grin_export`).

use anyhow::{bail, Result};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// A model file (`.grin`).
    #[arg(long, required_unless_present = "run", conflicts_with = "run")]
    pub model: Option<PathBuf>,
    /// A run folder (`runs/<name>`): exports its model.grin.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// What to write; `onnx` is the one format.
    #[arg(long, default_value = "onnx")]
    pub format: String,
    /// The file to write.
    #[arg(long, value_name = super::OUT)]
    pub out: PathBuf,
}

pub(crate) fn export(args: ExportArgs) -> Result<()> {
    // Checked here rather than by clap, so that the error is one line.
    if args.format != "onnx" {
        bail!("--format {}: unknown format; grin exports onnx", args.format);
    }
    let path = match (&args.model, &args.run) {
        (Some(model), _) => model.clone(),
        (None, Some(run)) => run.join("model.grin"),
        (None, None) => bail!("give --model FILE or --run runs/<name>"),
    };
    // A run folder is an input as a whole: its config and summary are as
    // much the run's as its model, whether named by --run or by its model.
    let run = args.run.as_deref().or_else(|| grin_train::run_of_model(&path));
    let inputs: Vec<&Path> = std::iter::once(path.as_path()).chain(run).collect();
    super::check_outputs(&[&args.out], &inputs)?;
    // An ONNX graph under a model file's name replaced a run's model.grin
    // (round 9 of issue 90), and under a photo's name the photo (round 16).
    super::check_kind("--out", &args.out, "an ONNX graph", "onnx")?;
    if args.run.as_ref().is_some_and(|run| run.is_dir()) && path.symlink_metadata().is_err() {
        // "No such file or directory" left the reason out (round 23).
        bail!("{}: missing: the run has not finished (grin train writes it at the end)", path.display());
    }
    let weights = grin_net::file::read(&path)?;
    let spec = &weights.spec;
    let bytes = grin_export::to_onnx(spec, &weights.folded());
    grin_output::write_file(&args.out, &inputs, &bytes)?;
    let params = spec.model.decode_params();
    outln!(
        "wrote {} ({} KiB, ONNX opset {}): input `{}` [batch, {}, height, width] in 0..1; outputs `{}` [batch, points, \
         6] and `{}` [batch, 6, points]",
        args.out.display(),
        bytes.len().div_ceil(1024),
        grin_export::OPSET,
        grin_export::INPUT,
        spec.channels,
        grin_export::DETECTIONS,
        grin_export::RAW,
    );
    outln!(
        "  from {}: run size {}x{}, score threshold {}, NMS IoU {}, nested {} of a box within {} of a better one's area, pyramid above {} px (in the file's metadata)",
        path.display(),
        spec.width,
        spec.height,
        params.score_threshold,
        params.nms_iou,
        params.nested_cover,
        params.nested_area,
        params.pyramid_above
    );
    Ok(())
}
