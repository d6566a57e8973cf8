//! Per-interval metrics: the CSV row, and the SVG plots drawn from them.

use anyhow::Result;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricRow {
    pub step: usize,
    pub loss: f32,
    pub face_loss: f32,
    pub box_loss: f32,
    pub smile_loss: f32,
    pub lr: f64,
    pub samples_per_s: f64,
    pub gpu_busy_pct: f64,
    /// Mean per step over the interval.
    pub wait_ms: f64,
    pub compute_ms: f64,
    /// Median producer time for one batch over the interval (host modes).
    pub produce_ms: f64,
    /// Face AP on the validation scenes, on the intervals `train.eval_every`
    /// scores (empty in the CSV otherwise). Absent from older checkpoints.
    #[serde(default)]
    pub val_face_ap: Option<f32>,
}

pub const CSV_HEADER: &str =
    "step,loss,face_loss,box_loss,smile_loss,lr,samples_per_s,gpu_busy_pct,wait_ms,compute_ms,produce_ms,val_face_ap";

impl MetricRow {
    pub fn csv(&self) -> String {
        format!(
            "{},{:.6},{:.6},{:.6},{:.6},{:.6e},{:.2},{:.2},{:.3},{:.3},{:.3},{}",
            self.step,
            self.loss,
            self.face_loss,
            self.box_loss,
            self.smile_loss,
            self.lr,
            self.samples_per_s,
            self.gpu_busy_pct,
            self.wait_ms,
            self.compute_ms,
            self.produce_ms,
            self.val_face_ap.map(|ap| format!("{ap:.4}")).unwrap_or_default()
        )
    }
}

/// Rewrites the whole CSV: a resumed run then holds exactly one row per interval.
pub fn write_csv(path: &Path, rows: &[MetricRow]) -> Result<()> {
    grin_output::write_with(path, &[], |f| {
        writeln!(f, "{CSV_HEADER}")?;
        for row in rows {
            writeln!(f, "{}", row.csv())?;
        }
        Ok(())
    })?;
    Ok(())
}

/// A panel: its title, the value it plots, its colour.
type Series = (&'static str, fn(&MetricRow) -> f64, RGBColor);

/// `training.svg`: loss, device-busy % and throughput against the step, and
/// the validation face AP (`train.eval_every`) when the run measured it.
pub fn plot(path: &Path, rows: &[MetricRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let validated: Vec<(f64, f64)> =
        rows.iter().filter_map(|r| r.val_face_ap.map(|ap| (r.step as f64, ap as f64))).collect();
    let count = if validated.is_empty() { 3 } else { 4 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 260 * count as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((count, 1));
        let last = rows.last().map(|r| r.step).unwrap_or(1).max(1) as f64;
        let series: [Series; 3] = [
            ("loss", |r| r.loss as f64, BLUE),
            ("device busy %", |r| r.gpu_busy_pct, RED),
            ("samples/s", |r| r.samples_per_s, GREEN),
        ];
        for (panel, (name, value, color)) in panels.iter().zip(series) {
            let top = rows.iter().map(&value).fold(0.0f64, f64::max).max(1e-9) * 1.1;
            let mut chart = ChartBuilder::on(panel)
                .caption(name, ("sans-serif", 18))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(56)
                .build_cartesian_2d(0.0..last, 0.0..top)?;
            chart.configure_mesh().x_desc("step").draw()?;
            chart
                .draw_series(LineSeries::new(rows.iter().map(|r| (r.step as f64, value(r))), color.stroke_width(2)))?;
        }
        if let Some(panel) = panels.get(3) {
            let mut chart = ChartBuilder::on(panel)
                .caption("validation face AP@0.5 (scenes, train.eval_every)", ("sans-serif", 18))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(56)
                .build_cartesian_2d(0.0..last, 0.0..1.0)?;
            chart.configure_mesh().x_desc("step").draw()?;
            chart.draw_series(LineSeries::new(validated.iter().copied(), MAGENTA.stroke_width(2)))?;
            chart.draw_series(validated.iter().map(|&p| Circle::new(p, 3, MAGENTA.filled())))?;
        }
        root.present()?;
    }
    grin_output::write_file(path, &[], svg.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(step: usize, val_face_ap: Option<f32>) -> MetricRow {
        MetricRow {
            step,
            loss: 1.0 / step as f32,
            face_loss: 0.0,
            box_loss: 0.0,
            smile_loss: 0.0,
            lr: 1e-3,
            samples_per_s: 100.0,
            gpu_busy_pct: 90.0,
            wait_ms: 0.1,
            compute_ms: 1.0,
            produce_ms: 0.5,
            val_face_ap,
        }
    }

    #[test]
    fn the_plot_shows_validation_ap_only_when_it_was_measured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("training.svg");
        plot(&path, &[row(10, None), row(20, Some(0.42)), row(30, None), row(40, Some(0.61))]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("validation face AP@0.5") && svg.contains("<circle"), "a fourth panel with its points");
        plot(&path, &[row(10, None), row(20, None)]).unwrap();
        assert!(!std::fs::read_to_string(&path).unwrap().contains("validation face AP"));
    }
}
