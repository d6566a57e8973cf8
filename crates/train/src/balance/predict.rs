//! The balance equation: from the measured [`Figures`], each mode's
//! predicted device-busy share, the recommendation, the report, and the
//! [`Prediction`] a run records beside what it then measured.

use super::Figures;
use grin_terms::Mode;
use serde::{Deserialize, Serialize};

impl Figures {
    /// Time to produce one batch on the host with C workers.
    pub(crate) fn produce_s(&self) -> f64 {
        self.tg_s / self.workers as f64 * self.batch as f64
    }

    /// Predicted share of wall time the device computes, per mode, as the
    /// trainer accounts it. Host modes pay the upload on the training
    /// thread, and a slower producer sets the pace; in VRAM the cut runs on
    /// the training thread before each step.
    pub fn predicted_busy(&self) -> [(Mode, f64); 3] {
        let fed = self.ts_s + self.tu_s;
        [
            (Mode::OnTheFly, 100.0 * self.ts_s / fed.max(self.produce_s())),
            (Mode::Precomputed, 100.0 * self.ts_s / fed.max(self.tr_s)),
            (Mode::InVram, 100.0 * self.ts_s / (self.ts_s + self.tc_s)),
        ]
    }

    pub(crate) fn recommend(&self, fits_in_device: bool) -> (Mode, String) {
        let busy = self.predicted_busy();
        if busy[0].1 >= 95.0 {
            return (
                Mode::OnTheFly,
                "on-the-fly keeps the device fed; precompute only to reuse features across runs".into(),
            );
        }
        if fits_in_device {
            return (
                Mode::InVram,
                format!(
                    "generation is the bottleneck (device busy {:.0}% on-the-fly): precompute once and train in VRAM",
                    busy[0].1
                ),
            );
        }
        (Mode::Precomputed, "the dataset does not fit in device memory: precompute and stream from the store".into())
    }

    pub fn report(&self, backend: &str, fits_in_device: bool) -> String {
        let ms = |s: f64| s * 1e3;
        let produce = self.produce_s();
        let bound =
            if produce > self.ts_s { "DATA-BOUND: the device waits" } else { "device-bound: the host keeps up" };
        let busy = self.predicted_busy();
        let read = format!("{:.3} ms (measured, {})", ms(self.tr_s), self.tr_from);
        let (_, why) = self.recommend(fits_in_device);
        format!(
            "balance check on {backend}, timing {}\n\
             \x20 T_g  feature time per sample (median, 1 core)   {:>9.3} ms\n\
             \x20 C    generation workers                         {:>9}\n\
             \x20 B    batch size                                 {:>9}\n\
             \x20 T_i  forward                                    {:>9.3} ms\n\
             \x20 T_s  forward + backward + optimizer step        {:>9.3} ms   (seed form 2*T_i = {:.3} ms)\n\
             \x20 T_u  upload of one batch                        {:>9.3} ms\n\
             \x20 T_c  cut + augment one batch in device memory   {:>9.3} ms\n\
             \x20 T_r  store read of one batch                    {read}\n\
             \x20 T_g/C*B = {:.3} ms  vs  T_s = {:.3} ms  ->  {bound}\n\
             \x20 predicted device busy: on-the-fly {:.0}%, precomputed {:.0}%, in-vram {:.0}%\n\
             \x20 recommendation: {why}",
            self.step_path,
            ms(self.tg_s),
            self.workers,
            self.batch,
            ms(self.ti_s),
            ms(self.ts_s),
            2.0 * ms(self.ti_s),
            ms(self.tu_s),
            ms(self.tc_s),
            ms(produce),
            ms(self.ts_s),
            busy[0].1,
            busy[1].1,
            busy[2].1,
        )
    }
}

/// What the balance check predicted for the mode a run trains in: written
/// to `summary.json` beside the device-busy share the run then measured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Prediction {
    pub figures: Figures,
    pub mode: Mode,
    pub predicted_busy_pct: f64,
}

/// Below this predicted device-busy share the run is told which mode feeds
/// the device better.
const WARN_BELOW_PCT: f64 = 80.0;

impl Prediction {
    pub fn new(figures: Figures, mode: Mode) -> Prediction {
        let busy = figures.predicted_busy();
        let predicted_busy_pct = busy.iter().find(|(m, _)| *m == mode).map_or(100.0, |(_, b)| *b);
        Prediction { figures, mode, predicted_busy_pct }
    }

    /// One line on the chosen mode: a warning naming the best other mode
    /// when this one leaves the device idle more than a fifth of the time.
    pub(crate) fn verdict(&self, fits_in_device: bool) -> String {
        let name = Mode::name;
        if self.predicted_busy_pct >= WARN_BELOW_PCT {
            return format!(
                "balance: {} should keep the device busy {:.0}% of the time",
                name(self.mode),
                self.predicted_busy_pct
            );
        }
        let better = self
            .figures
            .predicted_busy()
            .into_iter()
            .filter(|(m, _)| *m != Mode::InVram || fits_in_device)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|(m, b)| *m != self.mode && *b > self.predicted_busy_pct);
        let advice = match better {
            Some((m, b)) => format!("; {} would reach {b:.0}% (--mode {})", name(m), name(m)),
            None => String::new(),
        };
        format!(
            "warning: {} keeps the device busy only {:.0}% of the time by the balance check{advice}",
            name(self.mode),
            self.predicted_busy_pct
        )
    }
}
