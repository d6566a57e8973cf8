//! `grin mine`: a model's confident false detections on the training
//! photos, written with their context as hard negatives
//! (`grin_train::mine`), for a `kind = "negatives"` source to mix in.

use super::ConfigArgs;
use anyhow::{bail, Result};
use clap::Args;
use grin_model::file;
use grin_terms::photo::PHOTO_MAX_PIXELS;
use grin_train::{mine, MineOptions, MOST_FACES};
use std::path::PathBuf;

#[derive(Args)]
pub(crate) struct MineArgs {
    /// The model whose false detections to mine (`runs/<name>/model.grin`).
    #[arg(long)]
    pub model: PathBuf,
    /// The config whose sources' training photos are mined.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Folder the crops are written to (a negatives source's `mined`).
    #[arg(long, value_name = super::OUT_DIR)]
    pub out: PathBuf,
    /// Detections at least this confident are mined.
    #[arg(long, default_value_t = 0.3, value_parser = parse_score)]
    pub score: f32,
    /// At most this many per photo, the most confident first.
    #[arg(long, default_value_t = 4, value_parser = super::count::<usize>(super::MAX_ITEMS))]
    pub per_photo: usize,
    /// Training photos per source (0: all of them; at most a million).
    #[arg(long, default_value_t = 0, value_parser = super::count_or_zero::<usize>(grin_train::MAX_EVAL as u64))]
    pub photos: usize,
    /// Run the model at this size instead of its own (e.g. `640x480`: where
    /// small false detections appear).
    #[arg(long, value_name = "WxH", value_parser = grin_terms::parse_frame_size)]
    pub run_size: Option<(usize, usize)>,
    /// Run the model on each photo at grin-detect's photo default (twice its
    /// pixels, at most PHOTO_MAX_PIXELS), one photo at a time: the false
    /// detections a user of grin-detect meets on photos.
    #[arg(long, conflicts_with = "run_size")]
    pub own_size: bool,
    /// Cut each crop from the photo as the model's second look would
    /// (`[model.second_look]`'s context and side, or their defaults): the
    /// detection at the look's scale with its context, so that training
    /// teaches the look what it is asked.
    #[arg(long)]
    pub as_looked: bool,
}

fn parse_score(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(s) if (0.0..=1.0).contains(&s) => Ok(s),
        _ => Err(format!("`{text}`: expected a score in [0, 1]")),
    }
}

pub(crate) fn run(args: MineArgs) -> Result<()> {
    super::refuse_model_sets(&args.config.set.sets, "mine runs", "its own setting is --score")?;
    let loaded = args.config.load()?;
    let mut inputs = loaded.inputs();
    inputs.push(&args.model);
    grin_output::refuse_stdout_on_inputs(&inputs)?;
    super::check_report_folder("--out", &args.out, &inputs, "mined")?;
    let features = &loaded.config.features;
    let device = Default::default();
    let (mut spec, model) = file::load_model::<burn_ndarray::NdArray<f32>>(&args.model, &device)?;
    if spec.channels != features.channels as usize {
        bail!(
            "{}: model takes {} channel(s), the config's features have {}",
            args.model.display(),
            spec.channels,
            features.channels
        );
    }
    if let Some((w, h)) = args.run_size {
        (spec.width, spec.height) = (w, h);
    }
    let options = MineOptions {
        score: args.score,
        per_photo: args.per_photo,
        photos: args.photos,
        crop: (features.width, features.height),
        own_size: args.own_size.then_some(PHOTO_MAX_PIXELS),
        as_looked: args.as_looked.then_some(spec.model.second_look),
        out: args.out.clone(),
    };
    let size = if args.own_size {
        format!("twice each photo's pixels (at most {PHOTO_MAX_PIXELS})")
    } else {
        format!("{}x{}", spec.width, spec.height)
    };
    eprintln!(
        "mine: {} at {size}, detections >= {} clear of every face, photos with at most {MOST_FACES} faces",
        args.model.display(),
        args.score
    );
    let left = format!(
        "{} holds part of its crops, marked unfinished ({}): mine into it again",
        args.out.display(),
        grin_features::MINING_MARK
    );
    super::quit_on_interrupt("mine", left)?;
    let report = mine(&model, &spec, features, &options, &device)?;
    if report.is_empty() {
        bail!("{}: the config's source has no real photos to mine", loaded.path.display());
    }
    for m in &report {
        outln!(
            "mined {:<15} {} photos ({} with more than {MOST_FACES} faces left out, {} unreadable skipped): {} crops in {}",
            m.source,
            m.photos,
            m.crowded,
            m.skipped,
            m.crops,
            args.out.display()
        );
    }
    Ok(())
}
