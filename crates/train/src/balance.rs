//! The balance check: measure T_g, T_i, T_s and the feeding overheads, then
//! predict each mode's device-busy share before a single training step.
//!
//! A host-fed run is data-bound when producing a batch, T_g/C*B, takes longer
//! than the step T_s. Queues only absorb jitter; the slower side sets the pace.

use crate::backend::BackendChoice;
use crate::config::DeviceAugment;
use crate::config::GrinConfig;
use crate::config::Mode;
use crate::config::TrainConfig;
use crate::device_batch::upload;
use crate::feed::in_vram::{fits_in_device, DeviceDataset};
use crate::feed::precomputed::open_store;
use crate::step::Stepper;
use anyhow::Result;
use burn::tensor::backend::Backend;
use grin_features::{bench::measure_tg, FeatureConfig, HostBatch, Pipeline, Split};
use grin_model::{DetectorSpec, TrainBackend};
use grin_terms::median;
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Figures {
    /// Per-sample feature time, one core (median).
    pub tg_s: f64,
    pub workers: usize,
    pub batch: usize,
    /// Forward time of one batch.
    pub ti_s: f64,
    /// Forward + backward + optimizer step.
    pub ts_s: f64,
    /// Host-to-device upload of one batch.
    pub tu_s: f64,
    /// Cutting and augmenting one batch from a device-resident dataset.
    pub tc_s: f64,
    /// Reading one batch of records: from the store when there is one,
    /// otherwise from the same records encoded in memory (the store's read
    /// path with the page cache already warm).
    pub tr_s: f64,
    /// Where `tr_s` was timed: "store" or "in-memory records".
    #[serde(skip_deserializing)]
    pub tr_from: &'static str,
    /// The step `ti_s` and `ts_s` timed: grin's CPU step or Burn autodiff.
    #[serde(skip_deserializing)]
    pub step_path: &'static str,
}

const WARMUP: usize = 2;
const REPEATS: usize = 5;

/// Times `f` with a device sync inside each timed region, warm-up excluded.
/// What `f` returns lives until after the sync: a lazy backend (Burn's
/// fusion) need not compute a tensor dropped unread.
fn timed<B: Backend, R>(device: &B::Device, mut f: impl FnMut() -> R) -> f64 {
    let mut times = Vec::with_capacity(REPEATS);
    for i in 0..WARMUP + REPEATS {
        let _ = B::sync(device);
        let t = Instant::now();
        let out = f();
        let _ = B::sync(device);
        drop(out);
        if i >= WARMUP {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    median(&times)
}

/// The balance figures for a config, measured, and whether its precomputed
/// dataset (when one exists) fits in device memory.
pub struct Check {
    pub figures: Figures,
    pub fits_in_device: bool,
    /// The precomputed dataset, opened (and its shards hashed) once: `auto`
    /// trains from this same handle rather than hashing every shard again.
    pub store: Option<grin_store::Store>,
}

/// Measures a config's balance figures, with the store's read time and the
/// in-device fit when its precomputed dataset exists. A run that will not
/// read the store (`store_required` false: on-the-fly) is not refused for a
/// damaged or stale one: it is named in a warning and `T_r` is timed on
/// records in memory instead.
pub fn check<B: TrainBackend>(
    c: &GrinConfig,
    backend: BackendChoice,
    device_index: usize,
    allow_stale: bool,
    store_required: bool,
    device: &B::Device,
) -> Result<Check> {
    let dir = c.store_dir();
    let store = if !dir.join("manifest.json").exists() {
        None
    } else if store_required {
        Some(open_store(&dir, &c.features, allow_stale)?)
    } else {
        match open_store(&dir, &c.features, allow_stale) {
            Ok(store) => Some(store),
            Err(e) => {
                eprintln!("warning: {e:#} (this run does not read it: the store read is timed on records in memory)");
                None
            }
        }
    };
    let fits_in_device = store.as_ref().is_none_or(|s| fits_in_device(s, backend, device_index).fits);
    let figures =
        measure::<B>(&c.features, &c.detector_spec(), &c.train, store.as_ref(), &c.train.device_augment, device)?;
    Ok(Check { figures, fits_in_device, store })
}

pub fn measure<B: TrainBackend>(
    features: &FeatureConfig,
    spec: &DetectorSpec,
    train: &TrainConfig,
    store: Option<&grin_store::Store>,
    augment: &DeviceAugment,
    device: &B::Device,
) -> Result<Figures> {
    let batch = train.batch_size;
    crate::progress::note(&format!(
        "balance check: timing T_g on {} scenes, then upload, step and store read (a few seconds)",
        64.max(batch)
    ));
    let pipeline = Pipeline::new(features, Split::Train)?;
    let tg = measure_tg(&pipeline, 64.max(batch))?;
    let host: HostBatch = pipeline.batch(&(0..batch as u64).collect::<Vec<_>>())?;

    let mut model = spec.init_seeded::<B>(features.seed, device);
    let mut optim = crate::step::optimizer::<B>(train);
    let mut stepper = Stepper::<B>::new(spec, train.loss, std::slice::from_ref(device));
    let on_device = upload::<B>(&host, device);

    let tu_s = timed::<B, _>(device, || upload::<B>(&host, device));
    // T_i and T_s on the trainer's own step (`step.rs`): the same ops,
    // optimizer, weight decay and clipping as every training step.
    let mut failed = None;
    let ti_s = timed::<B, _>(device, || {
        if let Err(e) = stepper.forward(&model, &on_device) {
            failed.get_or_insert(e);
        }
    });
    let ts_s = timed::<B, _>(device, || match stepper.step(model.clone(), &mut optim, 1e-4, on_device.clone(), None) {
        Ok((next, _)) => model = next,
        Err(e) => {
            failed.get_or_insert(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let resident = DeviceDataset::<B>::upload(&host, device, B::HOST_MEMORY);
    let indices: Vec<u64> = (0..batch as u64).collect();
    let tc_s = timed::<B, _>(device, || resident.batch(&indices, augment, (augment.translate as i64, 0)));
    let mut b = HostBatch::default();
    let (tr_s, tr_from) = match store {
        Some(store) if !store.is_empty() => {
            let n = store.len();
            let t = timed::<B, _>(device, || {
                b.clear();
                for i in 0..batch as u64 {
                    // A stride that visits records out of order, like a shuffle.
                    let _ = store.read_into((i * 7919) % n, &mut b);
                }
            });
            (t, "store")
        }
        _ => {
            let layout = grin_store::RecordLayout::new(host.width, host.height, host.channels);
            let stride = layout.record_bytes as usize;
            // Eight batches of records, so the reads are not all cache hits.
            let n = 8 * batch;
            let mut records = vec![0u8; n * stride];
            let mut one = Vec::with_capacity(stride);
            for r in 0..n {
                one.clear();
                layout.encode(&host, r % host.len, &mut one);
                records[r * stride..r * stride + one.len()].copy_from_slice(&one);
            }
            let t = timed::<B, _>(device, || {
                b.clear();
                for i in 0..batch {
                    let r = (i * 7919) % n;
                    layout.decode_into(&records[r * stride..(r + 1) * stride], &mut b);
                }
            });
            (t, "in-memory records")
        }
    };
    let step_path = crate::step::engine_name::<B>();
    Ok(Figures {
        tg_s: tg.median_s,
        workers: pipeline.workers(),
        batch,
        ti_s,
        ts_s,
        tu_s,
        tc_s,
        tr_s,
        tr_from,
        step_path,
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A host too slow for its step: 28 ms a sample on 4 cores at batch 32
    /// against a 10.4 ms step (the brief's example), and a store read a
    /// little slower than the step.
    fn starved() -> Figures {
        Figures {
            tg_s: 0.028,
            workers: 4,
            batch: 32,
            ti_s: 0.0052,
            ts_s: 0.0104,
            tu_s: 0.0002,
            tc_s: 0.0003,
            tr_s: 0.012,
            tr_from: "store",
            step_path: "a test's",
        }
    }

    #[test]
    fn a_starved_mode_is_warned_about_and_the_best_mode_that_fits_named() {
        let f = starved();
        let on_the_fly = Prediction::new(f, Mode::OnTheFly);
        // 10.4 / 224 ms: the device computes under 5% of the time.
        assert!(on_the_fly.predicted_busy_pct < 5.0, "{}", on_the_fly.predicted_busy_pct);
        let warning = on_the_fly.verdict(true);
        assert!(warning.starts_with("warning: on-the-fly keeps the device busy only 5%"), "{warning}");
        assert!(warning.contains("in-vram would reach 97% (--mode in-vram)"), "{warning}");
        // Without room on the device, the store is the way.
        let warning = on_the_fly.verdict(false);
        assert!(warning.contains("precomputed would reach 87% (--mode precomputed)"), "{warning}");
    }

    /// T_i and T_s are timed on the trainer's own `Stepper` (step.rs), the
    /// function the loop and the data-parallel split call: the balance
    /// check runs exactly its warm-up and timed repetitions through it.
    #[test]
    fn the_balance_check_times_the_trainers_step() {
        // The default source: synthetic scenes, no files needed.
        let features = FeatureConfig { width: 64, height: 64, workers: 1, ..FeatureConfig::default() };
        let spec =
            crate::config::detector_spec(&grin_model::ModelConfig { width_mult: 0.5, ..Default::default() }, &features);
        let train = TrainConfig { batch_size: 2, ..TrainConfig::default() };
        let device = Default::default();
        let before = crate::step::calls_on_this_thread();
        let f =
            measure::<crate::backend::Cpu>(&features, &spec, &train, None, &DeviceAugment::default(), &device).unwrap();
        let after = crate::step::calls_on_this_thread();
        assert_eq!(after.0 - before.0, WARMUP + REPEATS, "T_s: steps through Stepper::step");
        assert_eq!(after.1 - before.1, WARMUP + REPEATS, "T_i: forwards through Stepper::forward");
        assert_eq!(f.step_path, crate::step::engine_name::<crate::backend::Cpu>());
        assert!(f.ti_s > 0.0 && f.ts_s > 0.0);
        assert!(f.report("cpu", true).contains(f.step_path));
    }

    #[test]
    fn a_mode_that_keeps_the_device_busy_gets_its_figure_and_no_warning() {
        let busy = Prediction::new(starved(), Mode::InVram);
        assert_eq!(busy.verdict(true), "balance: in-vram should keep the device busy 97% of the time");
    }
}
