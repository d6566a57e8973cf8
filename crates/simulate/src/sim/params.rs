//! What is simulated: the loaders, the consumer and the queue, with the
//! bounds a simulation is refused outside, and the closed-form steady state
//! it is checked against.

use anyhow::{bail, Result};

/// Safety valve: a run asking for billions of events is a typo (say `--step-ms 0.0001`), not a plan.
const MAX_EVENTS: u64 = 200_000_000;
/// Most loader workers simulated (a large host has a few hundred cores).
const MAX_LOADERS: usize = 4096;
/// Most batches a queue may hold.
const MAX_QUEUE: usize = 1 << 20;
/// Shortest step simulated: a microsecond, far below any real step.
const MIN_STEP_MS: f64 = 1e-3;

#[derive(Debug, Clone, PartialEq)]
pub struct SimParams {
    /// Mean time for one loader to produce one batch.
    pub load_ms: f64,
    /// Standard deviation of the load time (normal, clipped below at `MIN_LOAD_FRACTION * load_ms`).
    pub load_jitter_ms: f64,
    pub loaders: usize,
    /// Consumer (GPU) time per batch.
    pub step_ms: f64,
    /// Simulated time span.
    pub seconds: f64,
    /// Queue capacity in batches (the batch in the consumer's hands is not counted).
    pub queue: usize,
    pub seed: u64,
    /// Only the first `timeline_ms` of the run are kept as intervals for drawing.
    pub timeline_ms: f64,
    /// Most intervals kept for drawing, over all rows together.
    pub max_intervals: usize,
}

impl SimParams {
    /// The defaults the CLI uses for everything but the measured figures.
    pub(crate) fn new(load_ms: f64, load_jitter_ms: f64, loaders: usize, step_ms: f64, seconds: f64) -> SimParams {
        SimParams {
            load_ms,
            load_jitter_ms,
            loaders,
            step_ms,
            seconds,
            queue: 2 * loaders.max(1),
            seed: 0,
            timeline_ms: 2000.0,
            max_intervals: 20_000,
        }
    }

    /// Each refusal names its flag (round 9: the quantity alone was named).
    pub(crate) fn validate(&self) -> Result<()> {
        self.validate_from(&|flag| format!("--{flag}"))
    }

    /// [`Self::validate`], each refusal naming where its value came from:
    /// `origin(flag)` is the flag, or the key of the run's summary that
    /// `--from-run` read (round 18 blamed flags the user never gave).
    pub(crate) fn validate_from(&self, origin: &dyn Fn(&'static str) -> String) -> Result<()> {
        let finite_non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !finite_non_negative(self.load_ms) {
            bail!("{}: load time {} ms must be a finite number >= 0", origin("load-ms"), self.load_ms);
        }
        if !finite_non_negative(self.load_jitter_ms) {
            bail!("{}: load jitter {} ms must be a finite number >= 0", origin("load-jitter-ms"), self.load_jitter_ms);
        }
        // Each loader is simulated (its clock, its row of intervals): a count
        // past any host's is a typo, and 10^8 of them exhausted memory.
        if self.loaders == 0 || self.loaders > MAX_LOADERS {
            bail!("{}: loaders {} must be within 1..={MAX_LOADERS}", origin("loaders"), self.loaders);
        }
        // A zero-time consumer fed by zero-time loaders would never advance the clock.
        // Below a microsecond no step runs: 1e-300 passed here and was then
        // blamed on --seconds (round 10).
        if !(self.step_ms.is_finite() && self.step_ms >= MIN_STEP_MS) {
            // `{:?}`: 1e-300 as such, not as 300 digits.
            bail!(
                "{}: step time {:?} ms must be at least {MIN_STEP_MS} ms (a microsecond)",
                origin("step-ms"),
                self.step_ms
            );
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            bail!("--seconds: simulated time {} s must be > 0", self.seconds);
        }
        if self.queue == 0 || self.queue > MAX_QUEUE {
            bail!("--queue: queue capacity {} must be within 1..={MAX_QUEUE} batches", self.queue);
        }
        let steps = self.seconds * 1000.0 / self.step_ms;
        // Each consumed batch costs about two events (one load, one step).
        if steps * 2.0 > MAX_EVENTS as f64 {
            bail!(
                "{:.0} steps of {} ms in {} s is more than this simulator handles ({} events); shorten --seconds or lengthen --step-ms",
                steps,
                self.step_ms,
                self.seconds,
                MAX_EVENTS
            );
        }
        Ok(())
    }

    /// Steady-state GPU-busy fraction when loads are exactly `load_ms`: the
    /// loaders deliver N/L batches per ms, the consumer takes 1/S.
    pub(crate) fn predicted_busy(&self) -> f64 {
        if self.load_ms <= 0.0 {
            return 1.0;
        }
        (self.loaders as f64 * self.step_ms / self.load_ms).min(1.0)
    }
}
