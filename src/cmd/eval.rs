//! `grin eval` (score a run on held-out scenes and photos) and `grin
//! calibrate` (pick the face threshold on the validation photos).

use anyhow::Result;
use clap::Args;
use grin_model::{file, DetectorSpec};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// A run folder (`runs/<name>`): uses its model.grin (the last step) and config.toml.
    #[arg(long, conflicts_with_all = ["model", "config"])]
    pub run: Option<PathBuf>,
    /// With --run: its best.grin instead, the step with the best validation
    /// score (`train.eval_every`).
    #[arg(long, requires = "run")]
    pub best: bool,
    /// A model file; needs --config for the held-out data.
    #[arg(long, requires = "config")]
    pub model: Option<PathBuf>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub set: super::SetArgs,
    /// Held-out scenes to score (default: `train.eval_samples`; 0 skips them).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Held-out real photos to score per source (default: `train.eval_photos`; 0 skips them).
    #[arg(long)]
    pub photos: Option<usize>,
    /// Folder for `pr_curve.svg`, `thresholds.svg` (P, R, F1 against the
    /// threshold), `smile_confusion.svg` and `photos.json`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Score photos at this size instead of the model's run size (e.g. `480x360`).
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    pub run_size: Option<(usize, usize)>,
    /// Score each photo at grin-detect's default for an image file instead:
    /// its own size at twice its pixels, at most 1920x1080 (one photo a pass).
    #[arg(long, conflicts_with = "run_size")]
    pub own_size: bool,
    /// Longest face (px) one pass keeps before the frame is halved for larger
    /// ones (default: the model's own; 0: one pass).
    #[arg(long, value_name = "PX")]
    pub pyramid_above: Option<f32>,
    /// Suppress a detection with at least this share of its area inside a
    /// better one (default: the model's own `nested_cover`; 0: off).
    #[arg(long, value_name = "SHARE")]
    pub nested_cover: Option<f32>,
    /// Look again at each detection scoring below this, on a close cut
    /// around it (default: the model's own `second_look.below`; 0: off).
    #[arg(long, value_name = "SCORE")]
    pub second_look_below: Option<f32>,
    /// The score a face found on that cut needs to keep the detection
    /// (default: the model's own `second_look.confirm`; 0: the threshold).
    #[arg(long, value_name = "SCORE")]
    pub second_look_confirm: Option<f32>,
    /// Search each cut's mirror image too and confirm on the mean of the two
    /// views' scores (default: the model's own `second_look.mirror`).
    #[arg(long)]
    pub second_look_mirror: bool,
    /// Face score a detection needs to count as shown (default: the model's
    /// own, from `grin calibrate`): detections per image, recall by size.
    #[arg(long)]
    pub threshold: Option<f32>,
    /// Which held-out scenes and photos: `test` (what is reported) or `val`
    /// (what settings are chosen on, so the test split stays unseen).
    #[arg(long, value_enum, default_value = "test")]
    pub split: grin_features::Split,
}

/// `WxH` as two pixel counts (the bounds `train.run_size` has).
pub(crate) fn parse_size(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{text}`: expected WxH, for example 320x240");
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (usize, usize) = (w.trim().parse().map_err(|_| bad())?, h.trim().parse().map_err(|_| bad())?);
    let (lo, hi) = (grin_terms::MIN_SIDE, grin_terms::MAX_SIDE);
    if !(lo..=hi).contains(&w) || !(lo..=hi).contains(&h) {
        return Err(format!("`{text}`: each side must be between {lo} and {hi} pixels"));
    }
    Ok((w, h))
}

/// The photos are read with the config's channels, which the model must take.
fn check_channels(model_path: &Path, spec: &DetectorSpec, features: &grin_features::FeatureConfig) -> Result<()> {
    if spec.channels != features.channels as usize {
        anyhow::bail!(
            "{}: model takes {} channel(s), the config's features have {}",
            model_path.display(),
            spec.channels,
            features.channels
        );
    }
    Ok(())
}

pub(crate) fn eval(args: EvalArgs) -> Result<()> {
    let (model_path, config_path) = match (&args.run, &args.model, &args.config) {
        (Some(run), _, _) => (grin_train::run_model(run, args.best), run.join("config.toml")),
        (None, Some(m), Some(c)) => (m.clone(), c.clone()),
        _ => anyhow::bail!("give --run runs/<name>, or --model FILE --config FILE"),
    };
    let split = args.split;
    if split == grin_features::Split::Train {
        anyhow::bail!("--split train: training scenes and photos are not held out; give val or test");
    }
    let loaded = grin_train::load_config(&config_path, &args.set.sets)?;
    let c = &loaded.config;
    let photos = args.photos.unwrap_or(c.train.eval_photos);
    if let (0, Some(out)) = (photos, &args.out) {
        anyhow::bail!("--out {}: no photos are scored (--photos 0 or train.eval_photos = 0), so there is no photo report to write", out.display());
    }
    let device = Default::default();
    let (mut run_spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&model_path, &device)?;
    if let Some((w, h)) = args.run_size {
        (run_spec.width, run_spec.height) = (w, h);
    }
    if let Some(above) = args.pyramid_above {
        grin_model::config::check_pyramid_above(above).map_err(|e| anyhow::anyhow!("--pyramid-above {e}"))?;
        run_spec.model.pyramid_above = above;
    }
    if let Some(cover) = args.nested_cover {
        if !(0.0..=1.0).contains(&cover) {
            anyhow::bail!("--nested-cover {cover}: must be a share in [0, 1] (0: off)");
        }
        run_spec.model.nested_cover = cover;
    }
    run_spec.model.second_look = run_spec
        .model
        .second_look
        .with_flags(args.second_look_below, args.second_look_confirm, args.second_look_mirror)
        .map_err(anyhow::Error::msg)?;
    if let Some(t) = args.threshold {
        if !(0.0..=1.0).contains(&t) {
            anyhow::bail!("--threshold {t}: must be a score in [0, 1]");
        }
        run_spec.model.score_threshold = t;
    }
    check_channels(&model_path, &run_spec, &c.features)?;
    // Scenes are scored at the features' size, photos at the size the model runs at.
    let scene_spec =
        DetectorSpec { width: c.features.width as usize, height: c.features.height as usize, ..run_spec.clone() };
    let samples = args.samples.unwrap_or(c.train.eval_samples);
    if samples > 0 {
        let r = grin_train::eval::evaluate_split(&model, &scene_spec, &c.features, split, samples, &device)?;
        let ap = r.face_ap.map(|a| format!("{a:.3}")).unwrap_or_else(|| "undefined (no faces in the split)".into());
        let smile =
            r.smile_accuracy.map(|a| format!("{a:.3}")).unwrap_or_else(|| "n/a (no labelled smiles matched)".into());
        outln!("held-out scenes: {} images, {} faces: face AP@0.5 {ap}  smile accuracy {smile}", r.images, r.faces);
    }
    if photos > 0 {
        let own_size = args.own_size.then_some(grin_terms::photo::PHOTO_MAX_PIXELS);
        let scoring =
            grin_train::photo_eval::PhotoScoring { split, limit: photos, min_face: c.train.eval_min_face, own_size };
        let reports = grin_train::photo_eval::evaluate_split(&model, &run_spec, &c.features, scoring, &device)?;
        let frame = scoring.frame(&run_spec);
        if reports.is_empty() {
            outln!("held-out photos: none (the config's source has no real photos)");
        }
        for r in &reports {
            outln!("held-out photos at {frame}: {}", grin_train::photo_eval::describe(r));
        }
        if let Some(out) = &args.out {
            let threshold = run_spec.model.score_threshold;
            outln!("{}", grin_train::photo_plots::write_photo_report(out, &reports, threshold)?);
        }
    }
    Ok(())
}

#[derive(Args)]
pub(crate) struct CalibrateArgs {
    /// A run folder (`runs/<name>`): its model.grin is rewritten with the chosen threshold.
    #[arg(long)]
    pub run: PathBuf,
    /// Calibrate the run's best.grin (best validation score) instead of model.grin.
    #[arg(long)]
    pub best: bool,
    /// Validation photos per real source (default: all of them).
    #[arg(long, default_value_t = 0)]
    pub photos: usize,
    /// How many times recall counts as much as precision (F-beta; 1 is F1).
    #[arg(long, default_value_t = grin_train::photo_eval::CALIBRATION_BETA, value_parser = parse_beta)]
    pub beta: f32,
}

fn parse_beta(text: &str) -> Result<f32, String> {
    match text.trim().parse::<f32>() {
        Ok(b) if (0.1..=10.0).contains(&b) => Ok(b),
        _ => Err(format!("`{text}` is not a beta in 0.1..=10")),
    }
}

/// Picks the face-score threshold with the best mean F-beta over the real
/// sources' *validation* photos (the test split stays unseen, so the
/// reported figures are not tuned on), and writes it into the run's model
/// file (model.grin, or best.grin with --best).
pub(crate) fn calibrate(args: CalibrateArgs) -> Result<()> {
    use grin_train::photo_eval::{best_threshold, evaluate_split, PhotoScoring};
    let model_path = grin_train::run_model(&args.run, args.best);
    let loaded = grin_train::load_config(&args.run.join("config.toml"), &[])?;
    let c = &loaded.config;
    let device = Default::default();
    let (mut spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&model_path, &device)?;
    check_channels(&model_path, &spec, &c.features)?;
    // At the run size, the frame the threshold is deployed at.
    let scoring = PhotoScoring {
        split: grin_features::Split::Val,
        limit: args.photos,
        min_face: c.train.eval_min_face,
        own_size: None,
    };
    let reports = evaluate_split(&model, &spec, &c.features, scoring, &device)?;
    let (threshold, score) = best_threshold(&reports, args.beta)
        .map_err(|why| anyhow::anyhow!("{}: not calibrated, left unchanged: {why}", model_path.display()))?;
    outln!("validation photos at {}x{}:", spec.width, spec.height);
    for r in &reports {
        outln!("  {}", grin_train::photo_eval::describe(r));
    }
    outln!("{}", grin_train::photo_eval::calibration_table(&reports, args.beta, threshold));
    let before = spec.model.score_threshold;
    spec.model.score_threshold = threshold;
    file::save_model(&model_path, &spec, &model)?;
    outln!(
        "{}: score_threshold {before:.2} -> {threshold:.2} (mean F{} {score:.3} on validation photos)",
        model_path.display(),
        args.beta
    );
    Ok(())
}
