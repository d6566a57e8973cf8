//! Latency figures of `--bench`.

use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Latency {
    pub iterations: usize,
    pub median_ms: f64,
    /// Nearest-rank 95th percentile.
    pub p95_ms: f64,
    pub mean_ms: f64,
    /// Frames over the summed latency of the timed iterations.
    pub fps: f64,
}

/// `None` for no samples.
pub(crate) fn summarize(samples: &[Duration]) -> Option<Latency> {
    if samples.is_empty() {
        return None;
    }
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let n = ms.len();
    let total: f64 = ms.iter().sum();
    Some(Latency {
        iterations: n,
        median_ms: grin_terms::median(&ms),
        p95_ms: grin_terms::percentile(&ms, 0.95),
        mean_ms: total / n as f64,
        fps: n as f64 * 1e3 / total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_p95_and_fps_of_known_samples() {
        let samples: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
        let l = summarize(&samples).unwrap();
        assert!((l.median_ms - 10.5).abs() < 1e-9);
        assert!((l.p95_ms - 19.0).abs() < 1e-9);
        assert!((l.mean_ms - 10.5).abs() < 1e-9);
        assert!((l.fps - 1000.0 / 10.5).abs() < 1e-6);
        assert!(summarize(&[]).is_none());
    }
}
