//! `grin features export-crops`: synthetic face crops in SMILEsmileD's
//! layout (`smile/N.png`, `no_smile/N.png`), written into a staging folder
//! and moved into place once all are written.

use anyhow::{Context, Result};
use clap::Args;
use grin_features::{FeatureConfig, Pipeline, Split};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct ExportCropsArgs {
    #[arg(long, value_name = crate::cmd::OUT_DIR)]
    pub out: PathBuf,
    /// Crops per folder.
    #[arg(long, default_value_t = 500, value_parser = crate::cmd::count::<usize>(crate::cmd::MAX_ITEMS))]
    pub count: usize,
}

pub(super) fn export_crops(args: ExportCropsArgs) -> Result<()> {
    use grin_features::{Smile, SyntheticParams, SyntheticSource};
    use grin_image::{resample_region, Raster};
    const SIDE: u32 = 64;
    let params = SyntheticParams {
        max_faces: 3,
        min_face: 48.0,
        max_face: 120.0,
        hard_negatives: 0.0,
        face_free: 0.0,
        occlusion: 0.0,
    };
    // Synthetic scenes read no file, but a run's or dataset's folder is
    // no place for crops (round 14 of issue 90 wrote them into a run's).
    crate::cmd::check_report_folder("--out", &args.out, &[], "crops")?;
    // Held to the end: a second export into it removed the first one's
    // unfinished crops, which then said it wrote them all (round 23).
    let _held = grin_output::hold_folder(&args.out)?;
    // Its crops are numbered from 0: a folder of earlier ones, or of the
    // user's, had them replaced (round 15).
    for folder in ["smile", "no_smile"] {
        let dir = args.out.join(folder);
        if std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some()) {
            anyhow::bail!("--out {}: {folder}/ already holds files: name a new folder", args.out.display());
        }
    }
    let source = SyntheticSource::with_params(320, 240, 1, params)?;
    let cfg = FeatureConfig { width: 320, height: 240, channels: 1, workers: 1, ..FeatureConfig::default() };
    let scenes = Pipeline::from_source(&cfg, Split::Train, Box::new(source))?;
    let mut written = [0usize; 2];
    // The crops are written in a staging folder and moved into place at the
    // end: an export stopped midway left folders of fewer crops that looked
    // whole (round 21 of issue 90). A staging folder a stopped export left
    // is removed here, said.
    let staging = args.out.join(CROPS_STAGING);
    if std::fs::symlink_metadata(&staging).is_ok() {
        only_crops_in(&staging)?;
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("{}: cannot remove an unfinished export's crops", staging.display()))?;
        outln!("removed {}: the crops of an export that was stopped", staging.display());
    }
    let left = format!("its crops so far are in {}, which the next export into it removes", staging.display());
    crate::cmd::quit_on_interrupt("export-crops", left)?;
    for folder in ["smile", "no_smile"] {
        let dir = staging.join(folder);
        std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create folder", dir.display()))?;
    }
    let mut stage = || -> Result<()> {
        let mut index = 0u64;
        while written.iter().any(|n| *n < args.count) {
            let (sample, _) = scenes.scene(index)?;
            index += 1;
            let raster = Raster { width: sample.width, height: sample.height, channels: 1, pixels: sample.pixels };
            for b in &sample.boxes {
                let (k, folder) = if b.smile == Smile::Yes { (0, "smile") } else { (1, "no_smile") };
                if written[k] >= args.count {
                    continue;
                }
                // The tight face box, like a SMILEsmileD crop.
                let region = [b.x0, b.y0, b.x1 - b.x0, b.y1 - b.y0];
                let pixels = resample_region(&raster, region, SIDE, SIDE);
                let path = staging.join(folder).join(format!("{}.png", written[k]));
                let mut png = std::io::Cursor::new(Vec::new());
                image::GrayImage::from_raw(SIDE, SIDE, pixels)
                    .context("crop size")?
                    .write_to(&mut png, image::ImageFormat::Png)?;
                // Synthetic scenes read no file: nothing to keep the crops off.
                grin_output::write_file(&path, &[], png.get_ref())?;
                written[k] += 1;
            }
        }
        Ok(())
    };
    if let Err(e) = stage() {
        // A full disk left the crops written so far filling it (round 23).
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    for folder in ["smile", "no_smile"] {
        // Onto an empty folder of that name, if one is there (checked above).
        let (from, to) = (staging.join(folder), args.out.join(folder));
        std::fs::rename(&from, &to).with_context(|| format!("{}: cannot move the crops into place", to.display()))?;
    }
    std::fs::remove_dir(&staging).with_context(|| format!("{}: cannot remove", staging.display()))?;
    outln!("wrote {} smiling and {} non-smiling crops under {}", written[0], written[1], args.out.display());
    Ok(())
}

/// Refuses a staging folder holding anything an export does not write
/// there (`smile/N.png`, `no_smile/N.png`, the writer's temporary files):
/// a user's folder under that name was removed whole (round 27 of issue 90).
fn only_crops_in(staging: &Path) -> Result<()> {
    let is_crop = |name: &str| name.strip_suffix(".png").is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
    let listed = |dir: &Path| -> Result<Vec<std::fs::DirEntry>> {
        Ok(std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?.flatten().collect())
    };
    for entry in listed(staging)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        let folder = entry.file_type().is_ok_and(|t| t.is_dir()) && (name == "smile" || name == "no_smile");
        let foreign = if folder {
            let crops = listed(&entry.path())?;
            crops.into_iter().map(|c| c.path()).find(|c| {
                let n = c.file_name().unwrap_or_default().to_string_lossy();
                !(is_crop(&n) || grin_output::is_temp_name(&n)) || !c.is_file()
            })
        } else {
            Some(entry.path())
        };
        if let Some(path) = foreign {
            anyhow::bail!(
                "{}: holds {}, which no export-crops writes: it is not a stopped export's; move it away",
                staging.display(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Where `export-crops` writes inside `--out` until every crop is written.
const CROPS_STAGING: &str = "export-crops.unfinished";
