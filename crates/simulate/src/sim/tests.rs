use super::*;

fn params(load_ms: f64, jitter: f64, loaders: usize, step_ms: f64) -> SimParams {
    SimParams { seed: 7, ..SimParams::new(load_ms, jitter, loaders, step_ms, 60.0) }
}

#[test]
fn fast_loaders_keep_the_gpu_busy() {
    // L/N = 5 ms per batch against a 10 ms step: the loaders outrun the GPU.
    let r = simulate(&params(20.0, 4.0, 4, 10.0)).unwrap();
    assert!(r.gpu_busy > 0.99, "busy {}", r.gpu_busy);
    assert_eq!(r.predicted_busy, 1.0);
    // Only the first load (~20 ms) is idle time: 60 s / 10 ms = 6000 steps, minus about two.
    assert!((5990..=6000).contains(&r.batches_consumed), "consumed {}", r.batches_consumed);
    // Surplus loaders spend most of their time waiting for queue room.
    assert!(r.loader_blocked > 0.3, "blocked {}", r.loader_blocked);
    assert!(r.mean_queue > (r.params.queue as f64) - 1.5, "mean queue {}", r.mean_queue);
}

#[test]
fn slow_loaders_match_the_steady_state_prediction() {
    // L/N = 50 ms per batch against a 10 ms step: busy ~ N*S/L = 20%.
    let r = simulate(&params(100.0, 20.0, 2, 10.0)).unwrap();
    assert!((r.predicted_busy - 0.2).abs() < 1e-12);
    assert!((r.gpu_busy - 0.2).abs() < 0.03, "busy {} vs predicted 0.2", r.gpu_busy);
    assert!(r.loader_blocked < 0.01, "blocked {}", r.loader_blocked);
    assert!(r.mean_queue < 0.5, "mean queue {}", r.mean_queue);
}

#[test]
fn without_jitter_the_count_is_exact() {
    // One loader, 30 ms loads, 10 ms steps, 1 s: batches land at 30, 60, ..., 990 ms;
    // the last step finishes at 1000 ms, so all 33 count.
    let p = SimParams { seconds: 1.0, ..params(30.0, 0.0, 1, 10.0) };
    let r = simulate(&p).unwrap();
    assert_eq!(r.batches_consumed, 33);
    assert!((r.gpu_busy - 0.33).abs() < 1e-9, "busy {}", r.gpu_busy);
    assert_eq!(r.timeline.gpu.len(), 33);
}

#[test]
fn same_seed_same_run_other_seed_other_run() {
    let a = simulate(&params(40.0, 15.0, 3, 12.0)).unwrap();
    let b = simulate(&params(40.0, 15.0, 3, 12.0)).unwrap();
    assert_eq!(a, b);
    let c = simulate(&SimParams { seed: 8, ..params(40.0, 15.0, 3, 12.0) }).unwrap();
    assert_ne!(a.timeline, c.timeline);
}

#[test]
fn queue_never_exceeds_capacity() {
    for (loaders, queue) in [(8, 1), (8, 3), (2, 4)] {
        let p = SimParams { queue, ..params(5.0, 3.0, loaders, 10.0) };
        let r = simulate(&p).unwrap();
        assert!(r.max_queue <= queue, "max {} > capacity {}", r.max_queue, queue);
        assert_eq!(r.max_queue, queue, "fast loaders should fill the queue");
        assert!(r.timeline.queue.iter().all(|&(_, len)| len <= queue));
    }
}

#[test]
fn intervals_stay_inside_the_window_and_under_the_cap() {
    let p = SimParams { timeline_ms: 500.0, max_intervals: 100, ..params(20.0, 5.0, 4, 10.0) };
    let r = simulate(&p).unwrap();
    let t = &r.timeline;
    assert!(t.truncated);
    assert!(t.loaders.len() + t.gpu.len() + t.queue.len() <= 100);
    assert!(t.loaders.iter().all(|i| i.start_ms < 500.0 && i.end_ms <= 500.0 && i.start_ms < i.end_ms));
    assert!(t.gpu.iter().all(|&(s, e)| s < 500.0 && e <= 500.0));
}

#[test]
fn bad_parameters_are_errors() {
    assert!(simulate(&params(10.0, 0.0, 0, 10.0)).is_err());
    assert!(simulate(&params(10.0, 0.0, 1, 0.0)).is_err());
    assert!(simulate(&params(-1.0, 0.0, 1, 10.0)).is_err());
    assert!(simulate(&params(f64::NAN, 0.0, 1, 10.0)).is_err());
    assert!(simulate(&SimParams { queue: 0, ..params(10.0, 0.0, 1, 10.0) }).is_err());
    assert!(simulate(&SimParams { seconds: 1e9, ..params(10.0, 0.0, 1, 0.001) }).is_err());
}

#[test]
fn instant_loaders_only_fill_the_queue() {
    // In-VRAM runs report ~0 ms per batch: the queue stays full, busy is 100%.
    let r = simulate(&SimParams { seconds: 1.0, ..params(0.0, 0.0, 2, 10.0) }).unwrap();
    assert_eq!(r.batches_consumed, 100);
    assert!((r.gpu_busy - 1.0).abs() < 1e-9);
}
