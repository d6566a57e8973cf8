//! The deployment threshold from the validation photos' precision-recall
//! curves: reading a curve at a threshold, the F-beta that `grin calibrate`
//! maximises, and its table.

use super::PhotoReport;
use grin_model::PrPoint;

/// Precision, recall and F1 of detections scoring at least `threshold`,
/// read off a precision-recall curve.
pub(crate) fn at_threshold(curve: &[PrPoint], threshold: f32) -> (f32, f32, f32) {
    let (p, r) = precision_recall_at(curve, threshold);
    (p, r, f_beta(p, r, 1.0))
}

fn precision_recall_at(curve: &[PrPoint], threshold: f32) -> (f32, f32) {
    match curve.iter().take_while(|p| p.score >= threshold).last() {
        Some(p) => (p.precision, p.recall),
        None => (1.0, 0.0),
    }
}

/// F-beta: recall counts `beta` times as much as precision (F1 at 1).
fn f_beta(precision: f32, recall: f32, beta: f32) -> f32 {
    let b2 = beta * beta;
    if precision + recall > 0.0 {
        (1.0 + b2) * precision * recall / (b2 * precision + recall)
    } else {
        0.0
    }
}

/// Recall counts twice as much as precision when `grin calibrate` picks the
/// threshold. Precision on the validation photos is a lower bound: Caltech
/// leaves some small and background faces unannotated, and a detection of
/// one counts as false (with YuNet's confident detections taken as the
/// missing faces, 38% of the shipped model's false positives at 0.60 on 300
/// validation photos were such faces). And scores fall on photos unlike the
/// training ones (old grey prints found 0.85 of their large faces at 0.60
/// and 0.94 at 0.30), so a threshold chosen at the validation photos' best
/// F1 misses faces elsewhere; F2 puts it lower.
pub const CALIBRATION_BETA: f32 = 2.0;

/// The deployment threshold with the best F-beta, averaged over the
/// sources (each source counts once, whatever its size), from 0.05 to 0.95
/// in steps of 0.05. Ties go to the higher threshold (fewer detections).
pub fn best_threshold(reports: &[PhotoReport], beta: f32) -> Result<(f32, f32), String> {
    // A face-free set has no recall to weigh: it does not take part.
    let reports: Vec<&PhotoReport> = reports.iter().filter(|r| r.faces > 0).collect();
    if reports.is_empty() {
        return Err("no validation photo with a face was scored (none in the config's sources, or all skipped)".into());
    }
    let best = (1..20)
        .map(|k| k as f32 * 0.05)
        .map(|t| {
            let score = |r: &PhotoReport| {
                let (p, rc) = precision_recall_at(&r.curve, t);
                f_beta(p, rc, beta)
            };
            (t, reports.iter().map(|r| score(r)).sum::<f32>() / reports.len() as f32)
        })
        .fold(None, |best: Option<(f32, f32)>, (t, f)| match best {
            Some((_, bf)) if bf > f => best,
            _ => Some((t, f)),
        })
        .expect("19 thresholds");
    // F is 0 at every threshold (an untrained model): any choice would be a guess.
    if best.1.is_nan() || best.1 <= 0.0 {
        return Err(format!("F{beta} is 0 at every threshold: the model finds no validation face to calibrate on"));
    }
    Ok(best)
}

/// `grin calibrate`'s table: each source with faces, its precision, recall,
/// F1 and F-beta at thresholds 0.10 to 0.90, then its recall by face size at
/// the `chosen` threshold. Face-free sets have no precision or recall: their
/// false detections are in [`describe`]'s lines.
pub fn calibration_table(reports: &[PhotoReport], beta: f32, chosen: f32) -> String {
    let reports: Vec<&PhotoReport> = reports.iter().filter(|r| r.faces > 0).collect();
    let cell = |text: String| format!("{text:>36}");
    let mut table = format!(
        "threshold  {}\n",
        reports.iter().map(|r| cell(format!("{} P / R / F1 / F{beta}", r.source))).collect::<String>()
    );
    for k in (2..19).step_by(2) {
        let t = k as f32 * 0.05;
        let cells: String = reports
            .iter()
            .map(|r| {
                let (p, rc, f) = at_threshold(&r.curve, t);
                cell(format!("{p:.3} / {rc:.3} / {f:.3} / {:.3}", f_beta(p, rc, beta)))
            })
            .collect();
        table += &format!("{t:>9.2}  {cells}\n");
    }
    table += &format!("recall by face size at the chosen threshold {chosen:.2}:");
    for r in &reports {
        let sizes: Vec<String> = r
            .recall_by_size_at(chosen)
            .iter()
            .filter(|s| s.faces > 0)
            .map(|s| format!("{} {:.3} ({})", s.bucket, s.recall.unwrap_or(0.0), s.faces))
            .collect();
        table += &format!("\n  {:<15} {}", r.source, sizes.join(", "));
    }
    table
}
