//! Measured figures of a real training run (`runs/<name>/summary.json`),
//! and how they combine with command-line flags into simulation parameters.

use crate::sim::SimParams;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The keys the trainer writes for the simulator; any may be absent (null)
/// when the run could not measure it, and a flag must then supply it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFigures {
    pub summary: PathBuf,
    pub mode: Option<String>,
    pub load_ms: Option<f64>,
    pub load_jitter_ms: Option<f64>,
    pub loaders: Option<usize>,
    pub step_ms: Option<f64>,
    pub gpu_busy_pct: Option<f64>,
}

pub fn read_run(run_dir: &Path) -> Result<RunFigures> {
    let summary = run_dir.join("summary.json");
    let text = std::fs::read_to_string(&summary)
        .with_context(|| format!("{}: cannot read the run's summary", summary.display()))?;
    let json: Value = serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", summary.display()))?;
    let Value::Object(map) = json else { bail!("{}: expected a JSON object", summary.display()) };
    let number = |key: &str| -> Result<Option<f64>> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(v) if v.is_finite() => Ok(Some(v)),
                _ => bail!("{}: key `{key}`: {n} is not a finite number", summary.display()),
            },
            Some(other) => bail!("{}: key `{key}`: expected a number, found {other}", summary.display()),
        }
    };
    let loaders = match number("loaders")? {
        None => None,
        Some(v) if v >= 0.0 && v.fract() == 0.0 => Some(v as usize),
        Some(v) => bail!("{}: key `loaders`: {v} is not a whole number", summary.display()),
    };
    let mode = match map.get("mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => bail!("{}: key `mode`: expected a string, found {other}", summary.display()),
    };
    Ok(RunFigures {
        mode,
        load_ms: number("load_ms_per_batch")?,
        load_jitter_ms: number("load_jitter_ms")?,
        loaders,
        step_ms: number("step_ms")?,
        gpu_busy_pct: number("gpu_busy_pct")?,
        summary,
    })
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

/// Flags win over the run's figures; a value found in neither is an error
/// naming both the flag and the summary key. Jitter defaults to 0.
pub fn resolve(flags: &Flags, run: Option<&RunFigures>) -> Result<SimParams> {
    fn pick<T: Copy>(
        flag: Option<T>,
        measured: Option<T>,
        name: &str,
        key: &str,
        run: Option<&RunFigures>,
    ) -> Result<T> {
        if let Some(v) = flag.or(measured) {
            return Ok(v);
        }
        match run {
            Some(r) => bail!("{}: key `{key}` is missing or null; pass --{name}", r.summary.display()),
            None => bail!("--{name} is required (or --from-run runs/<name>)"),
        }
    }
    let load_ms = pick(flags.load_ms, run.and_then(|r| r.load_ms), "load-ms", "load_ms_per_batch", run)?;
    let loaders = pick(flags.loaders, run.and_then(|r| r.loaders), "loaders", "loaders", run)?;
    if let (0, Some(r)) = (loaders, run) {
        // An in-VRAM run: no queue to model, the cut precedes each step.
        let serial = match (r.step_ms, r.load_ms) {
            (Some(s), Some(l)) if s + l > 0.0 => format!(" (busy = step / (step + cut) = {:.1}%)", 100.0 * s / (s + l)),
            _ => String::new(),
        };
        bail!(
            "{}: the run has no loaders: its batches are cut on the training thread before each step, so there is no queue to simulate{serial}; pass --loaders to simulate host loaders anyway",
            r.summary.display()
        );
    }
    let step_ms = pick(flags.step_ms, run.and_then(|r| r.step_ms), "step-ms", "step_ms", run)?;
    let jitter = flags.load_jitter_ms.or(run.and_then(|r| r.load_jitter_ms)).unwrap_or(0.0);
    let mut params = SimParams::new(load_ms, jitter, loaders, step_ms, flags.seconds);
    if let Some(q) = flags.queue {
        params.queue = q;
    }
    params.seed = flags.seed;
    params.timeline_ms = flags.timeline_ms;
    params.validate()?;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) {
        std::fs::write(dir.join("summary.json"), text).unwrap();
    }

    fn flags() -> Flags {
        Flags { seconds: 10.0, timeline_ms: 1000.0, ..Flags::default() }
    }

    #[test]
    fn reads_the_trainer_keys_and_flags_override() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            r#"{"name":"r","mode":"on-the-fly","load_ms_per_batch":40.5,"load_jitter_ms":3,"loaders":4,
               "step_ms":12.0,"gpu_busy_pct":88.0,"face_ap":0.5}"#,
        );
        let run = read_run(dir.path()).unwrap();
        assert_eq!(run.mode.as_deref(), Some("on-the-fly"));
        assert_eq!((run.load_ms, run.load_jitter_ms, run.loaders), (Some(40.5), Some(3.0), Some(4)));
        assert_eq!((run.step_ms, run.gpu_busy_pct), (Some(12.0), Some(88.0)));

        let p = resolve(&flags(), Some(&run)).unwrap();
        assert_eq!((p.load_ms, p.load_jitter_ms, p.loaders, p.step_ms, p.queue), (40.5, 3.0, 4, 12.0, 8));
        let p =
            resolve(&Flags { loaders: Some(2), step_ms: Some(5.0), queue: Some(3), ..flags() }, Some(&run)).unwrap();
        assert_eq!((p.load_ms, p.loaders, p.step_ms, p.queue), (40.5, 2, 5.0, 3));
    }

    #[test]
    fn missing_and_wrong_keys_name_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), r#"{"mode":"in-vram","load_ms_per_batch":null,"loaders":1,"step_ms":4}"#);
        let run = read_run(dir.path()).unwrap();
        let err = format!("{:#}", resolve(&flags(), Some(&run)).unwrap_err());
        assert!(
            err.contains("summary.json") && err.contains("load_ms_per_batch") && err.contains("--load-ms"),
            "{err}"
        );
        assert!(resolve(&Flags { load_ms: Some(0.1), ..flags() }, Some(&run)).is_ok());

        write(dir.path(), r#"{"loaders":2.5}"#);
        let err = format!("{:#}", read_run(dir.path()).unwrap_err());
        assert!(err.contains("`loaders`") && err.contains("whole number"), "{err}");
        write(dir.path(), r#"{"step_ms":"fast"}"#);
        let err = format!("{:#}", read_run(dir.path()).unwrap_err());
        assert!(err.contains("`step_ms`"), "{err}");
        write(dir.path(), "{\"step_ms\": 1,");
        let err = format!("{:#}", read_run(dir.path()).unwrap_err());
        assert!(err.contains("summary.json") && err.contains("not valid JSON"), "{err}");
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
        write(
            dir.path(),
            r#"{"mode":"in-vram","load_ms_per_batch":1.0,"loaders":0,"step_ms":9.0,"gpu_busy_pct":90.0}"#,
        );
        let run = read_run(dir.path()).unwrap();
        let e = resolve(&flags(), Some(&run)).unwrap_err().to_string();
        assert!(e.contains("the run has no loaders") && e.contains("= 90.0%"), "{e}");
        let forced = resolve(&Flags { loaders: Some(2), ..flags() }, Some(&run)).unwrap();
        assert_eq!(forced.loaders, 2);
    }
}
