//! Per-interval metrics: the CSV row, and the SVG plots drawn from them.

use crate::feed::FeedTiming;
use anyhow::Result;
use grin_terms::median;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// What one log interval accumulates between its device syncs: wall time,
/// the time the training thread waited for data, and each batch's produce
/// time. The rest of the wall time is compute.
pub(crate) struct Interval {
    start: Instant,
    wait: Duration,
    steps: usize,
    produce_ms: Vec<f64>,
}

impl Interval {
    pub(crate) fn new() -> Interval {
        Interval { start: Instant::now(), wait: Duration::ZERO, steps: 0, produce_ms: Vec::new() }
    }

    /// One step's feed timing.
    pub(crate) fn add(&mut self, timing: &FeedTiming) {
        self.wait += timing.wait;
        self.produce_ms.push(timing.produce.as_secs_f64() * 1e3);
        self.steps += 1;
    }

    /// The interval's row at `step` (called after the device sync), with
    /// the losses `[total, face, box, smile]`. The caller starts the next
    /// interval once the row is scored and written, so neither counts as compute.
    pub(crate) fn close(&self, step: usize, losses: [f32; 4], lr: f64, batch_size: usize) -> MetricRow {
        let wall = self.start.elapsed().as_secs_f64();
        let wait = self.wait.as_secs_f64().min(wall);
        let steps = self.steps.max(1) as f64;
        let [loss, face_loss, box_loss, smile_loss] = losses;
        MetricRow {
            step,
            loss,
            face_loss,
            box_loss,
            smile_loss,
            lr,
            samples_per_s: steps * batch_size as f64 / wall,
            gpu_busy_pct: 100.0 * (wall - wait) / wall,
            wait_ms: 1e3 * wait / steps,
            compute_ms: 1e3 * (wall - wait) / steps,
            produce_ms: median(&self.produce_ms),
            val_face_ap: None,
            val_smile_accuracy: None,
            unix_time: unix_now(),
        }
    }
}

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
    /// Smile accuracy on the same validation scenes, when they hold a face
    /// with a known smile label.
    #[serde(default)]
    pub val_smile_accuracy: Option<f32>,
    /// Seconds since the Unix epoch at the end of the interval: the event
    /// file's wall time (not a CSV column).
    #[serde(default)]
    pub unix_time: f64,
}

pub(crate) const CSV_HEADER: &str = "step,loss,face_loss,box_loss,smile_loss,lr,samples_per_s,gpu_busy_pct,wait_ms,compute_ms,produce_ms,val_face_ap,val_smile_accuracy";

impl MetricRow {
    pub(crate) fn csv(&self) -> String {
        format!(
            "{},{:.6},{:.6},{:.6},{:.6},{:.6e},{:.2},{:.2},{:.3},{:.3},{:.3},{},{}",
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
            self.val_face_ap.map(|ap| format!("{ap:.4}")).unwrap_or_default(),
            self.val_smile_accuracy.map(|a| format!("{a:.4}")).unwrap_or_default()
        )
    }

    /// The row as TensorBoard scalars, tagged by group (`loss/`, `time/`,
    /// `device/`, `val/`); `predicted_busy_pct` is the balance check's
    /// figure, drawn beside the measured one.
    fn scalars(&self, predicted_busy_pct: Option<f64>) -> Vec<(String, f32)> {
        let mut out: Vec<(&str, f64)> = vec![
            ("loss/total", self.loss as f64),
            ("loss/face", self.face_loss as f64),
            ("loss/box", self.box_loss as f64),
            ("loss/smile", self.smile_loss as f64),
            ("train/lr", self.lr),
            ("train/samples_per_s", self.samples_per_s),
            ("time/data_wait_ms_per_step", self.wait_ms),
            ("time/compute_ms_per_step", self.compute_ms),
            ("time/produce_ms_per_batch", self.produce_ms),
            ("device/busy_pct", self.gpu_busy_pct),
        ];
        out.extend(predicted_busy_pct.map(|p| ("device/predicted_busy_pct", p)));
        out.extend(self.val_face_ap.map(|ap| ("val/face_ap", ap as f64)));
        out.extend(self.val_smile_accuracy.map(|a| ("val/smile_accuracy", a as f64)));
        out.into_iter().map(|(tag, v)| (tag.to_string(), v as f32)).collect()
    }
}

/// Rewrites the run's TensorBoard event file from every row so far, as
/// [`write_csv`] rewrites the CSV: one file, each step once, also after
/// `--resume`.
pub(crate) fn write_events(run_dir: &Path, rows: &[MetricRow], predicted_busy_pct: Option<f64>) -> Result<()> {
    let points: Vec<grin_events::Point> = rows
        .iter()
        .map(|r| grin_events::Point {
            step: r.step as u64,
            wall_time: r.unix_time,
            scalars: r.scalars(predicted_busy_pct),
        })
        .collect();
    let started = rows.first().map_or(0.0, |r| r.unix_time);
    grin_output::write_file(&run_dir.join(grin_events::FILE_NAME), &[], &grin_events::encode(started, &points))?;
    Ok(())
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Rewrites the whole CSV: a resumed run then holds exactly one row per interval.
pub(crate) fn write_csv(path: &Path, rows: &[MetricRow]) -> Result<()> {
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
pub(crate) fn plot(path: &Path, rows: &[MetricRow]) -> Result<()> {
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
            val_smile_accuracy: None,
            unix_time: 1.7e9 + step as f64,
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

    #[test]
    fn the_event_file_holds_each_row_with_its_tags() {
        let dir = tempfile::tempdir().unwrap();
        let rows = [row(10, None), row(20, Some(0.42))];
        write_events(dir.path(), &rows, Some(97.0)).unwrap();
        let points = grin_events::read(&std::fs::read(dir.path().join(grin_events::FILE_NAME)).unwrap()).unwrap();
        assert_eq!(points.iter().map(|p| p.step).collect::<Vec<_>>(), [10, 20]);
        assert_eq!(points[1].wall_time, 1.7e9 + 20.0);
        let tags = |i: usize| points[i].scalars.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>();
        assert!(tags(0).contains(&"loss/total") && !tags(0).contains(&"val/face_ap"));
        assert!(points[1].scalars.contains(&("val/face_ap".to_string(), 0.42)));
        assert!(points[0].scalars.contains(&("device/predicted_busy_pct".to_string(), 97.0)));
        assert!(points[0].scalars.contains(&("loss/total".to_string(), 0.1)));
    }
}
