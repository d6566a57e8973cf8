//! Measured figures of a real training run (`runs/<name>/summary.json`),
//! and how they combine with command-line flags into simulation parameters.

use crate::sim::SimParams;
use anyhow::{anyhow, bail, Result};
use grin_terms::summary::{RunFigures, SUMMARY_FILE};
use std::path::{Path, PathBuf};

/// A run's figures (the trainer's `summary.json`, read through its one
/// reader in grin-terms) and the file they came from, which messages name.
#[derive(Debug, Clone, PartialEq)]
pub struct FromRun {
    pub summary: PathBuf,
    pub figures: RunFigures,
}

pub fn read_run(run_dir: &Path) -> Result<FromRun> {
    let figures = grin_terms::summary::read(run_dir)?;
    Ok(FromRun { summary: run_dir.join(SUMMARY_FILE), figures })
}

/// What the command line gave; `None` means "take it from the run".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flags {
    pub load_ms: Option<f64>,
    pub load_jitter_ms: Option<f64>,
    pub loaders: Option<usize>,
    pub step_ms: Option<f64>,
    pub seconds: f64,
    pub queue: Option<usize>,
    pub seed: u64,
    pub timeline_ms: f64,
}

/// Flags win over the run's figures; without a run every flag but the
/// jitter (default 0) is required.
pub fn resolve(flags: &Flags, run: Option<&FromRun>) -> Result<SimParams> {
    let figures = run.map(|r| &r.figures);
    let needed = |name: &str| anyhow!("--{name} is required (or --from-run runs/<name>)");
    let load_ms = flags.load_ms.or(figures.map(|f| f.load_ms_per_batch)).ok_or_else(|| needed("load-ms"))?;
    let loaders = flags.loaders.or(figures.map(|f| f.loaders)).ok_or_else(|| needed("loaders"))?;
    if let (0, Some(r)) = (loaders, run) {
        // An in-VRAM run: no queue to model, the cut precedes each step.
        let (step, cut) = (r.figures.step_ms, r.figures.load_ms_per_batch);
        let serial = if step + cut > 0.0 {
            format!(" (busy = step / (step + cut) = {:.1}%)", 100.0 * step / (step + cut))
        } else {
            String::new()
        };
        bail!(
            "{}: the run has no loaders: its batches are cut on the training thread before each step, so there is no queue to simulate{serial}; pass --loaders to simulate host loaders anyway",
            r.summary.display()
        );
    }
    let step_ms = flags.step_ms.or(figures.map(|f| f.step_ms)).ok_or_else(|| needed("step-ms"))?;
    let jitter = flags.load_jitter_ms.or(figures.map(|f| f.load_jitter_ms)).unwrap_or(0.0);
    let mut params = SimParams::new(load_ms, jitter, loaders, step_ms, flags.seconds);
    if let Some(q) = flags.queue {
        params.queue = q;
    }
    params.seed = flags.seed;
    params.timeline_ms = flags.timeline_ms;
    // A value the flags left to the run is the run summary's to answer for:
    // whether its flag was given, and its key in `summary.json`.
    let source = |flag: &str| match flag {
        "load-ms" => (flags.load_ms.is_some(), "load_ms_per_batch"),
        "load-jitter-ms" => (flags.load_jitter_ms.is_some(), "load_jitter_ms"),
        "loaders" => (flags.loaders.is_some(), "loaders"),
        "step-ms" => (flags.step_ms.is_some(), "step_ms"),
        _ => (true, ""),
    };
    params.validate_from(&|flag| match (run, source(flag)) {
        (Some(r), (false, key)) => format!("{}: key `{key}`", r.summary.display()),
        _ => format!("--{flag}"),
    })?;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_terms::Mode;

    fn figures(mode: Mode, loaders: usize) -> RunFigures {
        RunFigures { loaders, ..RunFigures::example(mode) }
    }

    fn write(dir: &Path, figures: &RunFigures) {
        std::fs::write(dir.join(SUMMARY_FILE), serde_json::to_string(figures).unwrap()).unwrap();
    }

    fn flags() -> Flags {
        Flags { seconds: 10.0, timeline_ms: 1000.0, ..Flags::default() }
    }

    #[test]
    fn reads_the_trainers_figures_and_flags_override() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &figures(Mode::OnTheFly, 4));
        let run = read_run(dir.path()).unwrap();
        assert_eq!(run.figures, figures(Mode::OnTheFly, 4));
        assert!(run.summary.ends_with("summary.json"));

        let p = resolve(&flags(), Some(&run)).unwrap();
        assert_eq!((p.load_ms, p.load_jitter_ms, p.loaders, p.step_ms, p.queue), (40.5, 3.0, 4, 12.0, 8));
        let p =
            resolve(&Flags { loaders: Some(2), step_ms: Some(5.0), queue: Some(3), ..flags() }, Some(&run)).unwrap();
        assert_eq!((p.load_ms, p.loaders, p.step_ms, p.queue), (40.5, 2, 5.0, 3));
    }

    /// Issue 90, round 18: a value the summary gave was blamed on its flag.
    #[test]
    fn a_value_out_of_range_is_blamed_on_where_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &RunFigures { step_ms: -1.0, load_jitter_ms: -5.0, ..figures(Mode::OnTheFly, 4) });
        let run = read_run(dir.path()).unwrap();
        let err = resolve(&flags(), Some(&run)).unwrap_err().to_string();
        assert!(err.contains("summary.json: key `load_jitter_ms`: load jitter -5 ms"), "{err}");
        let err = resolve(&Flags { load_jitter_ms: Some(1.0), ..flags() }, Some(&run)).unwrap_err().to_string();
        assert!(err.contains("summary.json: key `step_ms`: step time -1.0 ms"), "{err}");
        let err = resolve(&Flags { step_ms: Some(0.0), load_jitter_ms: Some(1.0), ..flags() }, Some(&run));
        assert!(err.unwrap_err().to_string().starts_with("--step-ms: "), "the flag given is named");
    }

    #[test]
    fn a_bad_summary_names_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SUMMARY_FILE), r#"{"mode":"in-vram","loaders":2.5}"#).unwrap();
        let err = format!("{:#}", read_run(dir.path()).unwrap_err());
        assert!(err.contains("summary.json") && err.contains("invalid type") && err.contains("2.5"), "{err}");
        std::fs::write(dir.path().join(SUMMARY_FILE), "{\"step_ms\": 1,").unwrap();
        let err = format!("{:#}", read_run(dir.path()).unwrap_err());
        assert!(err.contains("summary.json") && err.contains("not a run summary"), "{err}");
        let err = format!("{:#}", read_run(&dir.path().join("nope")).unwrap_err());
        assert!(err.contains("nope/summary.json"), "{err}");
    }

    #[test]
    fn without_a_run_the_flags_are_required() {
        let err = format!("{:#}", resolve(&Flags { load_ms: Some(10.0), ..flags() }, None).unwrap_err());
        assert!(err.contains("--loaders is required"), "{err}");
    }

    #[test]
    fn an_in_vram_run_has_no_loaders_to_simulate() {
        let dir = tempfile::tempdir().unwrap();
        let in_vram = RunFigures { load_ms_per_batch: 1.0, step_ms: 9.0, ..figures(Mode::InVram, 0) };
        write(dir.path(), &in_vram);
        let run = read_run(dir.path()).unwrap();
        let e = resolve(&flags(), Some(&run)).unwrap_err().to_string();
        assert!(e.contains("the run has no loaders") && e.contains("= 90.0%"), "{e}");
        let forced = resolve(&Flags { loaders: Some(2), ..flags() }, Some(&run)).unwrap();
        assert_eq!(forced.loaders, 2);
    }
}
