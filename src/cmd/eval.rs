//! `grin eval` (score a run on held-out scenes and photos) and `grin
//! calibrate` (pick the face threshold on the validation photos).

use anyhow::Result;
use clap::Args;
use grin_model::file;
use grin_net::DetectorSpec;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// A run folder (`runs/<name>`): uses its model.grin (the last step) and config.toml.
    #[arg(long, conflicts_with_all = ["model", "config"])]
    pub run: Option<PathBuf>,
    /// With --run: its best.grin instead, the step with the best validation
    /// score (`train.eval_every`).
    // `conflicts_with` too: clap skips `requires` when the required arg
    // conflicts with one given (`--run` with `--model`), and --best was dropped.
    #[arg(long, requires = "run", conflicts_with = "model")]
    pub best: bool,
    /// A model file; needs --config for the held-out data.
    #[arg(long, requires = "config")]
    pub model: Option<PathBuf>,
    /// `--config` goes with `--model`; a `--run` brings its own.
    #[command(flatten)]
    pub config: super::OptionalConfigArgs,
    /// Held-out scenes to score (default: `train.eval_samples`; 0 skips them; at most a million).
    #[arg(long, value_parser = super::count_or_zero::<usize>(grin_train::MAX_EVAL as u64))]
    pub samples: Option<usize>,
    /// Held-out real photos to score per source (default: `train.eval_photos`; 0 skips them; at most a million).
    #[arg(long, value_parser = super::count_or_zero::<usize>(grin_train::MAX_EVAL as u64))]
    pub photos: Option<usize>,
    /// Folder for `pr_curve.svg`, `thresholds.svg` (P, R, F1 against the
    /// threshold), `smile_confusion.svg` and `photos.json`.
    #[arg(long, value_name = super::OUT_DIR)]
    pub out: Option<PathBuf>,
    /// Score photos at this size instead of the model's run size (e.g. `480x360`).
    #[arg(long, value_name = "WxH", value_parser = grin_terms::parse_frame_size)]
    pub run_size: Option<(usize, usize)>,
    /// Score each photo at grin-detect's default for an image file instead:
    /// its own size at twice its pixels, at most 1920x1080 (one photo a pass).
    #[arg(long, conflicts_with = "run_size")]
    pub own_size: bool,
    #[command(flatten)]
    pub decode: grin_net::DecodeFlags,
    /// Which held-out scenes and photos: `test` (what is reported) or `val`
    /// (what settings are chosen on, so the test split stays unseen).
    #[arg(long, value_enum, default_value = "test")]
    pub split: HeldOut,
}

/// The splits a model is scored on: the training split is not held out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HeldOut {
    Val,
    Test,
}

impl HeldOut {
    /// How the report names the split it scored.
    fn label(self) -> &'static str {
        match self {
            HeldOut::Val => "validation",
            HeldOut::Test => "test",
        }
    }
}

impl From<HeldOut> for grin_features::Split {
    fn from(split: HeldOut) -> Self {
        match split {
            HeldOut::Val => grin_features::Split::Val,
            HeldOut::Test => grin_features::Split::Test,
        }
    }
}

/// `WxH` as two pixel counts (the bounds `train.run_size` has).
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

/// The `--out` folder, checked before the scoring, not at the end of it,
/// and held through the scoring to the report's last file: two evals into
/// one folder both said they wrote it, one report lost (round 20). Its
/// files too: one that cannot be written whole fails now (round 27).
fn hold_report_folder(out: &Path, loaded: &grin_train::LoadedConfig, model: &Path) -> Result<grin_output::HeldFolder> {
    let mut inputs = loaded.inputs();
    inputs.push(model);
    super::check_report_folder("--out", out, &inputs, "report")?;
    let held = grin_output::hold_folder(out)?;
    grin_output::check_files(&grin_train::photos::PHOTO_REPORT_FILES.map(|name| out.join(name)), &inputs)?;
    Ok(held)
}

pub(crate) fn eval(args: EvalArgs) -> Result<()> {
    let (model_path, config_path) = match (&args.run, &args.model, &args.config.config) {
        (Some(run), _, _) => grin_train::run_model(run, args.best)?,
        (None, Some(m), Some(c)) => (m.clone(), c.clone()),
        _ => anyhow::bail!("give --run runs/<name>, or --model FILE --config FILE"),
    };
    // The model, and the run folder it may come from, are inputs too.
    grin_output::refuse_stdout_on_inputs(
        &[model_path.as_path()].into_iter().chain(args.run.as_deref()).collect::<Vec<_>>(),
    )?;
    let split = grin_features::Split::from(args.split);
    let label = args.split.label();
    let own = "its decision settings are eval's own flags (--threshold, --pyramid-above, --nested-cover, \
               --second-look-*)";
    super::refuse_model_sets(&args.config.set.sets, "eval scores", own)?;
    let loaded = super::load_config(&config_path, &args.config.set.sets)?;
    let _held = args.out.as_deref().map(|out| hold_report_folder(out, &loaded, &model_path)).transpose()?;
    let c = &loaded.config;
    // A config whose source holds no photos scores none, whatever --photos says.
    let (photos, none_because) = if grin_features::has_held_out_photos(&c.features.source) {
        (args.photos.unwrap_or(c.train.eval_photos), "--photos 0 or train.eval_photos = 0")
    } else if let Some(asked @ 1..) = args.photos {
        // Asked for, not dropped: --out, --run-size and --own-size are refused alike.
        anyhow::bail!("--photos {asked}: the config's source holds no real photos to score");
    } else {
        (0, "the config's source holds no real photos")
    };
    let samples = args.samples.unwrap_or(c.train.eval_samples);
    if samples == 0 && photos == 0 {
        anyhow::bail!("nothing to score: no held-out scenes (--samples 0 or train.eval_samples = 0) and no photos ({none_because})");
    }
    if let (0, Some(out)) = (photos, &args.out) {
        anyhow::bail!(
            "--out {}: no photos are scored ({none_because}), so there is no photo report to write",
            out.display()
        );
    }
    // Scenes are scored at the features' size, with no second look: a
    // photo size or a second look with no photo to score would change
    // nothing (round 14: the second look's flags were dropped).
    let photo_size = if args.own_size { Some("--own-size") } else { args.run_size.map(|_| "--run-size") };
    if let (0, Some(flag)) = (photos, photo_size) {
        anyhow::bail!(
            "{flag}: no photos are scored ({none_because}), and scenes are scored at the features' size, so the \
             flag would change nothing"
        );
    }
    if let (0, Some(flag)) = (photos, args.decode.second_look_flag()) {
        anyhow::bail!(
            "{flag}: no photos are scored ({none_because}), and a second look cuts from a whole photo, so the flag \
             would change nothing"
        );
    }
    let left = match &args.out {
        Some(out) => format!(
            "the figures printed are what it scored; the report into {} is written after the scoring",
            out.display()
        ),
        None => "the figures printed are what it scored".to_string(),
    };
    super::quit_on_interrupt("eval", left)?;
    let device = Default::default();
    let (mut run_spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&model_path, &device)?;
    if let Some((w, h)) = args.run_size {
        (run_spec.width, run_spec.height) = (w, h);
    }
    run_spec.model = args.decode.apply(&run_spec.model).map_err(anyhow::Error::msg)?;
    check_channels(&model_path, &run_spec, &c.features)?;
    // Scenes are scored at the features' size, photos at the size the model runs at.
    let scene_spec = grin_train::detector_spec(&run_spec.model, &c.features);
    if samples > 0 {
        let r = grin_train::scenes::evaluate_split(&model, &scene_spec, &c.features, split, samples, &device)?;
        let ap = r.face_ap.map(|a| format!("{a:.3}")).unwrap_or_else(|| "undefined (no faces in the split)".into());
        let smile =
            r.smile_accuracy.map(|a| format!("{a:.3}")).unwrap_or_else(|| "n/a (no labelled smiles matched)".into());
        outln!("{label} scenes: {} images, {} faces: face AP@0.5 {ap}  smile accuracy {smile}", r.images, r.faces);
    }
    if photos > 0 {
        let own_size = args.own_size.then_some(grin_terms::photo::PHOTO_MAX_PIXELS);
        let scoring =
            grin_train::photos::PhotoScoring { split, limit: photos, min_face: c.train.eval_min_face, own_size };
        let reports = grin_train::photos::evaluate_split(&model, &run_spec, &c.features, scoring, &device)?;
        let frame = scoring.frame(&run_spec);
        if reports.is_empty() {
            outln!("{label} photos: none (the config's source has no real photos)");
        }
        for r in &reports {
            outln!("{label} photos at {frame}: {}", grin_train::photos::describe(r));
        }
        if let Some(out) = &args.out {
            let threshold = run_spec.model.score_threshold;
            outln!("{}", grin_train::photos::write_photo_report(out, &reports, threshold)?);
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
    /// Validation photos per real source (default, 0: all of them; at most a million).
    #[arg(long, default_value_t = 0, value_parser = super::count_or_zero::<usize>(grin_train::MAX_EVAL as u64))]
    pub photos: usize,
    /// How many times recall counts as much as precision (F-beta; 1 is F1).
    #[arg(long, default_value_t = grin_train::photos::CALIBRATION_BETA, value_parser = parse_beta)]
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
    use grin_train::photos::{best_threshold, evaluate_split, PhotoScoring};
    let (model_path, config_path) = grin_train::run_model(&args.run, args.best)?;
    // The run's own file: through a link into another run's folder, that
    // run's model was rewritten (round 11).
    if let (Ok(real), Ok(run)) = (model_path.canonicalize(), args.run.canonicalize()) {
        if real.parent() != Some(run.as_path()) {
            anyhow::bail!(
                "{}: is a link to {}, outside the run; calibrate rewrites the run's own model: copy it in",
                model_path.display(),
                real.display()
            );
        }
    }
    // Held (locked, its content noted) for the whole run: the threshold is
    // written back only into the model it was chosen for (a model replaced
    // during calibration was overwritten with the old one, issue 90).
    grin_output::refuse_stdout_on_inputs(&[&args.run])?;
    let held = grin_output::hold(&model_path)?;
    let _run = grin_train::hold_run_of_model(&model_path)?;
    let loaded = super::load_config(&config_path, &[])?;
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
        outln!("  {}", grin_train::photos::describe(r));
    }
    outln!("{}", grin_train::photos::calibration_table(&reports, args.beta, threshold));
    let before = spec.model.score_threshold;
    spec.model.score_threshold = threshold;
    held.write_back(&file::to_bytes(&spec, &model))?;
    outln!(
        "{}: score_threshold {before:.2} -> {threshold:.2} (mean F{} {score:.3} on validation photos)",
        model_path.display(),
        args.beta
    );
    Ok(())
}
