//! The pictures of an evaluation on real photos (`grin eval --out`, and
//! the end of a run): precision against recall; precision, recall and F1
//! against the face-score threshold, with the deployed one marked (what
//! `grin calibrate` chooses from); and the smile confusion matrix.

use crate::photo_eval::{at_threshold, PhotoReport};
use anyhow::{Context, Result};
use grin_model::PrPoint;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

/// The files of a photo report, in the order they are drawn: three
/// pictures and the figures.
pub const PHOTO_REPORT_FILES: [&str; 4] = ["pr_curve.svg", "thresholds.svg", "smile_confusion.svg", "photos.json"];

/// Writes what `grin eval --out` keeps of a photo evaluation into `out`: the
/// three pictures (each when it has something to draw) and the reports as
/// `photos.json`. Returns the line that says what was written.
pub fn write_photo_report(out: &Path, reports: &[PhotoReport], deployed: f32) -> Result<String> {
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let [pr, thresholds, smiles, figures] = PHOTO_REPORT_FILES;
    let drawn = [
        (pr, plot_pr(reports)?),
        (thresholds, plot_thresholds(reports, deployed)?),
        (smiles, plot_smile_confusion(reports)?),
    ];
    let done = drawn.each_ref().map(|(name, svg)| (*name, svg.is_some()));
    let mut files: Vec<(PathBuf, Vec<u8>)> =
        drawn.into_iter().filter_map(|(name, svg)| Some((out.join(name), svg?.into_bytes()))).collect();
    files.push((out.join(figures), serde_json::to_string_pretty(reports)?.into_bytes()));
    // As one: a full disk midway replaced the first picture of an earlier
    // report and kept its others, two models' reports in one folder
    // (round 26 of issue 90).
    grin_output::write_files(&files, &[])?;
    let mut written: Vec<&str> = done.iter().filter(|(_, done)| *done).map(|(name, _)| *name).collect();
    written.push(figures);
    let skipped: Vec<&str> = done.iter().filter(|(_, done)| !*done).map(|(name, _)| *name).collect();
    // A picture an earlier evaluation left here would sit beside this
    // one's as if it were of this model (round 18: another model's smile
    // matrix stayed): it goes, and the line says so.
    let mut removed = Vec::new();
    for name in &skipped {
        let old = out.join(name);
        if old.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&old)
                .with_context(|| format!("{}: cannot remove the earlier picture", old.display()))?;
            removed.push(*name);
        }
    }
    let removed =
        if removed.is_empty() { String::new() } else { format!("; removed the earlier {}", removed.join(", ")) };
    let written = if skipped.is_empty() {
        written.join(", ")
    } else {
        format!("{} (nothing to draw in {}{removed})", written.join(", "), skipped.join(", "))
    };
    Ok(format!("wrote {}: {written}", out.display()))
}

/// At most about 500 points of a curve (it has one per detection), the last one always kept.
fn thinned(curve: &[PrPoint]) -> impl Iterator<Item = &PrPoint> {
    let step = curve.len().div_ceil(500).max(1);
    curve.iter().enumerate().filter(move |(i, _)| i % step == 0 || i + 1 == curve.len()).map(|(_, p)| p)
}

/// `pr_curve.svg`: precision against recall, one line per source. None when
/// there is no photo report to draw.
pub(crate) fn plot_pr(reports: &[PhotoReport]) -> Result<Option<String>> {
    if reports.is_empty() {
        return Ok(None);
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("face precision-recall on held-out photos (IoU 0.5)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0f32..1f32, 0f32..1.02f32)?;
        chart.configure_mesh().x_desc("recall").y_desc("precision").draw()?;
        for (i, r) in reports.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let label =
                format!("{} (AP {})", r.source, r.face_ap.map(|a| format!("{a:.3}")).unwrap_or_else(|| "n/a".into()));
            chart
                .draw_series(LineSeries::new(
                    thinned(&r.curve).map(|p| (p.recall, p.precision)),
                    colour.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        }
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
        root.present()?;
    }
    Ok(Some(svg))
}

/// One of (precision, recall, F1).
type Pick = fn((f32, f32, f32)) -> f32;

/// Thresholds the threshold plot samples: the AP floor up, by 0.01.
fn thresholds() -> impl Iterator<Item = f32> {
    (5..=99).map(|k| k as f32 / 100.0)
}

/// `thresholds.svg`: one panel per source with faces: precision, recall and
/// F1 of the detections scoring at least each threshold, and a line at
/// `deployed`, the model's own threshold. None when no
/// source has faces.
pub(crate) fn plot_thresholds(reports: &[PhotoReport], deployed: f32) -> Result<Option<String>> {
    let drawn: Vec<&PhotoReport> = reports.iter().filter(|r| r.faces > 0).collect();
    if drawn.is_empty() {
        return Ok(None);
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 300 * drawn.len() as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        for (panel, r) in root.split_evenly((drawn.len(), 1)).iter().zip(&drawn) {
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("{}: face P / R / F1 against the threshold", r.source), ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(32)
                .y_label_area_size(44)
                .build_cartesian_2d(0f32..1f32, 0f32..1.02f32)?;
            chart.configure_mesh().x_desc("face score threshold").draw()?;
            let series: [(&str, Pick, RGBColor); 3] =
                [("precision", |m| m.0, BLUE), ("recall", |m| m.1, GREEN), ("F1", |m| m.2, RED)];
            for (name, pick, colour) in series {
                let points = thresholds().map(|t| (t, pick(at_threshold(&r.curve, t))));
                chart
                    .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
                    .label(name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
            }
            let (p, rc, f) = at_threshold(&r.curve, deployed);
            chart
                .draw_series(LineSeries::new([(deployed, 0.0), (deployed, 1.02)], BLACK.stroke_width(1)))?
                .label(format!("deployed {deployed:.2}: P {p:.3} R {rc:.3} F1 {f:.3}"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(1)));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerLeft)
                .border_style(BLACK)
                .background_style(WHITE.mix(0.8))
                .draw()?;
        }
        root.present()?;
    }
    Ok(Some(svg))
}

/// `smile_confusion.svg`: one 2x2 matrix per source with smile labels
/// (rows: the label, columns: the prediction), each cell's count and its
/// share of the row, shaded by that share. None when no
/// source matched a labelled face.
pub(crate) fn plot_smile_confusion(reports: &[PhotoReport]) -> Result<Option<String>> {
    let drawn: Vec<&PhotoReport> =
        reports.iter().filter(|r| r.smile_confusion.iter().flatten().sum::<usize>() > 0).collect();
    if drawn.is_empty() {
        return Ok(None);
    }
    const NAMES: [&str; 2] = ["not smiling", "smiling"];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (420 * drawn.len() as u32, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        for (panel, r) in root.split_evenly((1, drawn.len())).iter().zip(&drawn) {
            let accuracy = r.smile_accuracy.map(|a| format!("{a:.3}")).unwrap_or_else(|| "n/a".into());
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("{}: smile (accuracy {accuracy})", r.source), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(90)
                .build_cartesian_2d((0u32..1).into_segmented(), (0u32..1).into_segmented())?;
            let name = |v: &SegmentValue<u32>| match v {
                SegmentValue::CenterOf(k) if *k < 2 => NAMES[*k as usize].to_string(),
                _ => String::new(),
            };
            chart
                .configure_mesh()
                .disable_mesh()
                .x_label_formatter(&name)
                .y_label_formatter(&name)
                .x_desc("predicted")
                .y_desc("label")
                .draw()?;
            for truth in 0..2u32 {
                let row: usize = r.smile_confusion[truth as usize].iter().sum();
                for predicted in 0..2u32 {
                    let count = r.smile_confusion[truth as usize][predicted as usize];
                    let share = count as f32 / row.max(1) as f32;
                    let shade = RGBColor(255 - (share * 200.0) as u8, 255 - (share * 120.0) as u8, 255);
                    let cell = [
                        (SegmentValue::Exact(predicted), SegmentValue::Exact(truth)),
                        (SegmentValue::Exact(predicted + 1), SegmentValue::Exact(truth + 1)),
                    ];
                    chart.draw_series([Rectangle::new(cell, shade.filled())])?;
                    let text = format!("{count} ({:.0}%)", 100.0 * share);
                    let at = (SegmentValue::CenterOf(predicted), SegmentValue::CenterOf(truth));
                    let style = TextStyle::from(("sans-serif", 18)).pos(Pos::new(HPos::Center, VPos::Center));
                    chart.draw_series([Text::new(text, at, style)])?;
                }
            }
        }
        root.present()?;
    }
    Ok(Some(svg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::photo_eval::tests::report;

    #[test]
    fn threshold_and_confusion_plots_draw_what_there_is() {
        let reports = [report("caltech", 2, [[0; 2]; 2]), report("celeba-aligned", 2, [[30, 10], [5, 55]])];
        let svg = plot_thresholds(&reports, 0.55).unwrap().unwrap();
        assert!(svg.contains("caltech: face P / R / F1") && svg.contains("celeba-aligned: face P / R / F1"));
        // At 0.55 only the 0.9 detection counts: P 1, R 0.5, F1 0.667.
        assert!(svg.contains("deployed 0.55: P 1.000 R 0.500 F1 0.667"), "the deployed threshold is marked");
        let svg = plot_smile_confusion(&reports).unwrap().unwrap();
        assert!(!svg.contains("caltech"), "a source without smile labels gets no matrix");
        for cell in ["30 (75%)", "10 (25%)", "5 (8%)", "55 (92%)"] {
            assert!(svg.contains(cell), "{cell} missing");
        }
        // Nothing to draw: no picture.
        assert!(plot_thresholds(&[report("face-free", 0, [[0; 2]; 2])], 0.5).unwrap().is_none());
        assert!(plot_smile_confusion(&[report("caltech", 2, [[0; 2]; 2])]).unwrap().is_none());
    }

    /// Issue 90, round 18: a second `eval --out` into one folder left the
    /// first model's smile matrix beside its own report.
    #[test]
    fn a_picture_with_nothing_to_draw_removes_an_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        let smiles = [report("celeba-aligned", 2, [[30, 10], [5, 55]])];
        let line = write_photo_report(dir.path(), &smiles, 0.5).unwrap();
        assert!(line.contains("smile_confusion.svg") && !line.contains("nothing to draw"), "{line}");
        let line = write_photo_report(dir.path(), &[report("caltech", 2, [[0; 2]; 2])], 0.5).unwrap();
        assert!(
            line.ends_with("(nothing to draw in smile_confusion.svg; removed the earlier smile_confusion.svg)"),
            "{line}"
        );
        assert!(!dir.path().join("smile_confusion.svg").exists());
        let line = write_photo_report(dir.path(), &[report("caltech", 2, [[0; 2]; 2])], 0.5).unwrap();
        assert!(line.ends_with("(nothing to draw in smile_confusion.svg)"), "{line}");
    }
}
