//! Every decision a run makes before its first step, made once: the
//! balance check (measured before every run unless `--no-balance`), `auto`'s
//! choice from its figures, a warning when the chosen mode starves the
//! device, building the precomputed
//! dataset when the chosen mode needs one, the in-VRAM fit check and its
//! fallback, and the run's spec. The CLI parses arguments into a
//! [`PlanRequest`], calls [`plan`], and hands the [`RunPlan`] to the trainer.

use crate::backend::BackendChoice;
use crate::balance::Prediction;
use crate::config::{GrinConfig, Mode};
use crate::feed::in_vram::fits_in_device;
use crate::feed::precomputed::open_store;
use crate::feed::FeedPlan;
use crate::run::RunSpec;
use crate::TrainBackend;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// What the user asked for on the command line, besides the config.
pub struct PlanRequest<'a> {
    pub config: &'a GrinConfig,
    /// The config file, named in messages that suggest a command.
    pub config_path: &'a Path,
    /// The `--set`s applied to it, which such a command needs too (round
    /// 15: a dataset built as advised, without them, was refused as stale).
    pub sets: &'a [String],
    pub backend: BackendChoice,
    pub device_index: usize,
    pub runs_dir: PathBuf,
    pub resume: bool,
    pub overwrite: bool,
    /// Train from a precomputed dataset built with other feature settings.
    pub allow_stale: bool,
    pub show_progress: bool,
    /// Measure the balance equation before the run (`--no-balance` skips it).
    pub balance: bool,
}

/// A run, resolved: what it is and how it is fed.
pub struct RunPlan {
    pub run: RunSpec,
    pub feed: FeedPlan,
}

/// Resolves `request` into the run that will happen, telling the user on
/// stderr what was decided and why.
pub fn plan<B: TrainBackend>(request: &PlanRequest, device: &B::Device) -> Result<RunPlan> {
    let c = request.config;
    let run_dir = request.runs_dir.join(&c.name);
    // Before anything slow: a refused run folder should not cost a store
    // build. A live run's folder is refused as such first.
    crate::run_folder::refuse_a_held_folder(&run_dir)?;
    crate::run_folder::check(&run_dir, request.resume, request.overwrite)?;
    // Held from here, so a second run into the folder is refused before
    // either writes anything (both used to exit 0 over one folder).
    let lock = std::sync::Arc::new(crate::run_folder::lock(&run_dir)?);
    let (feed, balance) = feed_plan::<B>(request, device)?;
    let mut run = RunSpec::new(c, feed.mode, request.backend, run_dir)?;
    run.balance = balance;
    run.data = Some(match feed.store.as_ref() {
        Some(store) => {
            let m = store.manifest();
            format!("{} samples (fingerprint {})", m.samples, m.fingerprint.hash)
        }
        None => crate::checkpoint::source_files_data(&c.features.source),
    });
    run.lock = Some(lock);
    run.resume = request.resume;
    run.overwrite = request.overwrite;
    run.show_progress = request.show_progress;
    Ok(RunPlan { run, feed })
}

fn feed_plan<B: TrainBackend>(request: &PlanRequest, device: &B::Device) -> Result<(FeedPlan, Option<Prediction>)> {
    let c = request.config;
    let dir = c.store_dir();
    let mut mode = c.train.mode;
    // A flag that cannot apply is refused by name (round 11: dropped).
    if request.allow_stale && mode == Mode::OnTheFly {
        bail!("--allow-stale: mode on-the-fly reads no precomputed dataset, stale or not");
    }
    let has_store = dir.join(grin_store::MANIFEST_FILE).exists();
    if !has_store && matches!(mode, Mode::Precomputed | Mode::InVram) {
        // Not missing but being written: said so ("build it with grin
        // precompute" while one was, issue 90).
        grin_store::refuse_if_being_written(&dir)?;
        let sets: String = request.sets.iter().map(|s| format!(" --set {}", shell_word(s))).collect();
        bail!(
            "{}: no precomputed dataset; build it with `grin precompute --config {}{sets} --out {}`",
            dir.display(),
            shell_word(&request.config_path.display().to_string()),
            shell_word(&dir.display().to_string())
        );
    }
    let mut check = if request.balance || mode == Mode::Auto {
        let reads_store = mode != Mode::OnTheFly;
        let check = crate::balance::check::<B>(
            c,
            request.backend,
            request.device_index,
            request.allow_stale,
            reads_store,
            device,
        )?;
        eprintln!("{}", check.figures.report(request.backend.name(), check.fits_in_device));
        Some(check)
    } else {
        eprintln!("balance check skipped (--no-balance)");
        None
    };
    // The dataset the check opened (and hashed): the run trains from this same handle.
    let mut checked_store = check.as_mut().and_then(|check| check.store.take());
    if mode == Mode::Auto {
        let check = check.as_ref().expect("measured for auto above");
        mode = check.figures.recommend(check.fits_in_device).0;
        eprintln!("auto: chose {}", mode.name());
    }
    let mut store = None;
    if mode != Mode::OnTheFly {
        if !dir.join(grin_store::MANIFEST_FILE).exists() {
            eprintln!("auto: building the precomputed dataset in {}", dir.display());
            crate::precompute::write_whole_store(&c.features, c.train.store_samples as u64, &dir)?;
        }
        let opened = match checked_store.take() {
            Some(opened) => opened,
            None => open_store(&dir, &c.features, request.allow_stale)?,
        };
        if mode == Mode::InVram {
            let fit = fits_in_device(&opened, request.backend, request.device_index);
            if let Some(note) = &fit.note {
                eprintln!("in-vram: {note}");
            }
            if !fit.fits {
                eprintln!(
                    "in-vram: the dataset needs {:.1} MB, device has {} free: falling back to precomputed",
                    fit.need as f64 / 1e6,
                    fit.free.map(|f| format!("{:.1} MB", f as f64 / 1e6)).unwrap_or_else(|| "unknown".into())
                );
                mode = Mode::Precomputed;
            } else {
                eprintln!("in-vram: uploading {} samples ({:.1} MB) once", opened.len(), fit.need as f64 / 1e6);
            }
        }
        store = Some(opened);
    }
    let prediction = check.map(|check| {
        let prediction = Prediction::new(check.figures, mode);
        eprintln!("{}", prediction.verdict(check.fits_in_device));
        prediction
    });
    Ok((FeedPlan::new(mode, &c.features, &c.train, store), prediction))
}

/// `word` as a shell reads it back: quoted when it holds anything but
/// plain characters.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.,=/:+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
