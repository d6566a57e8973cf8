use super::*;
use grin_terms::Mode;

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
        crate::config::detector_spec(&grin_net::ModelConfig { width_mult: 0.5, ..Default::default() }, &features);
    let train = TrainConfig { batch_size: 2, ..TrainConfig::default() };
    let device = Default::default();
    let before = crate::step::calls_on_this_thread();
    let f = measure::<crate::backend::Cpu>(&features, &spec, &train, None, &DeviceAugment::default(), &device).unwrap();
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
