//! The text `grin simulate` prints: the simulated figures and, for
//! `--from-run`, the prediction against the run's measured device busy %.

use crate::run::FromRun;
use crate::sim::SimResult;
use std::fmt::Write;

/// The human-readable summary `grin simulate` prints.
pub fn report(r: &SimResult, run: Option<&FromRun>) -> String {
    let p = &r.params;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "simulated {:.1} s: {} loader{} x {:.3}±{:.3} ms per batch, queue {}, step {:.3} ms, seed {}",
        p.seconds,
        p.loaders,
        if p.loaders == 1 { "" } else { "s" },
        p.load_ms,
        p.load_jitter_ms,
        p.queue,
        p.step_ms,
        p.seed
    );
    let _ = writeln!(s, "  batches consumed   {}", r.batches_consumed);
    let _ = writeln!(
        s,
        "  device busy        {:.1}%   (steady-state prediction min(1, N*S/L) = {:.1}%)",
        100.0 * r.gpu_busy,
        100.0 * r.predicted_busy
    );
    let _ = writeln!(s, "  mean queue length  {:.2} of {}", r.mean_queue, p.queue);
    let _ = writeln!(s, "  loader blocked     {:.1}%", 100.0 * r.loader_blocked);
    if let Some(run) = run {
        let measured = run.figures.gpu_busy_pct;
        let _ = writeln!(
            s,
            "  run {} ({}): predicted {:.1}% vs measured {:.1}% device busy ({:+.1} points)",
            run.summary.display(),
            run.figures.mode.name(),
            100.0 * r.gpu_busy,
            measured,
            100.0 * r.gpu_busy - measured
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{simulate, SimParams};
    use grin_terms::summary::RunFigures;
    use grin_terms::Mode;

    #[test]
    fn report_shows_prediction_and_measurement() {
        let r = simulate(&SimParams::new(100.0, 0.0, 2, 10.0, 10.0)).unwrap();
        let figures = RunFigures { gpu_busy_pct: 25.0, ..RunFigures::example(Mode::Precomputed) };
        let run = FromRun { summary: "runs/r/summary.json".into(), figures };
        let text = report(&r, Some(&run));
        assert!(text.contains("prediction min(1, N*S/L) = 20.0%"), "{text}");
        assert!(text.contains("(precomputed): predicted 19.8% vs measured 25.0% device busy (-5.2 points)"), "{text}");
        assert!(text.contains("batches consumed   198"), "{text}");
    }
}
