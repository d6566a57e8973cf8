//! The event loop: N loaders, one bounded queue, one consumer.
//!
//! Loaders hand a finished batch to the queue and start the next one at once;
//! when the queue is full a loader holds its batch (blocked) until the
//! consumer frees a slot, first-blocked first served. The consumer takes the
//! oldest batch whenever it is idle and works on it for `step_ms`.

use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

mod params;
pub use params::SimParams;

/// Load times never go below this fraction of the mean, so jitter larger than
/// the mean cannot produce free batches.
pub(crate) const MIN_LOAD_FRACTION: f64 = 0.05;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoaderState {
    Busy,
    Blocked,
}

/// One bar of the timeline, in ms from the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoaderInterval {
    pub loader: usize,
    pub state: LoaderState,
    pub start_ms: f64,
    pub end_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Length of the drawn window.
    pub window_ms: f64,
    pub loaders: Vec<LoaderInterval>,
    /// Consumer busy spans.
    pub gpu: Vec<(f64, f64)>,
    /// Queue length after each change: (time ms, length), starting at (0, 0).
    pub queue: Vec<(f64, usize)>,
    /// True when `max_intervals` cut the window's intervals short.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    pub params: SimParams,
    /// Steps finished within the simulated time.
    pub batches_consumed: u64,
    pub batches_loaded: u64,
    /// Consumer busy time within the simulated time / simulated time.
    pub gpu_busy: f64,
    /// Time-weighted mean queue length.
    pub mean_queue: f64,
    pub max_queue: usize,
    /// Blocked loader time / (loaders x simulated time).
    pub loader_blocked: f64,
    pub predicted_busy: f64,
    pub events: u64,
    pub timeline: Timeline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    LoadDone(usize),
    StepDone,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    at: f64,
    /// Insertion order: equal times resolve the same way every run.
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // BinaryHeap is a max-heap; reversed so the earliest event pops first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

/// Running sums plus the bounded window of intervals kept for the picture.
struct Recorder {
    end_ms: f64,
    window_ms: f64,
    max_intervals: usize,
    timeline: Timeline,
    gpu_busy_ms: f64,
    blocked_ms: f64,
    queue_area: f64,
    last_queue_change: f64,
}

impl Recorder {
    fn kept(&self) -> usize {
        self.timeline.loaders.len() + self.timeline.gpu.len() + self.timeline.queue.len()
    }

    fn room(&mut self, start_ms: f64) -> bool {
        if start_ms >= self.window_ms {
            return false;
        }
        if self.kept() >= self.max_intervals {
            self.timeline.truncated = true;
            return false;
        }
        true
    }

    fn loader(&mut self, loader: usize, state: LoaderState, start_ms: f64, end_ms: f64) {
        let end = end_ms.min(self.end_ms);
        if state == LoaderState::Blocked && end > start_ms {
            self.blocked_ms += end - start_ms;
        }
        if end > start_ms && self.room(start_ms) {
            self.timeline.loaders.push(LoaderInterval { loader, state, start_ms, end_ms: end.min(self.window_ms) });
        }
    }

    fn gpu(&mut self, start_ms: f64, end_ms: f64) {
        let end = end_ms.min(self.end_ms);
        if end > start_ms {
            self.gpu_busy_ms += end - start_ms;
            if self.room(start_ms) {
                self.timeline.gpu.push((start_ms, end.min(self.window_ms)));
            }
        }
    }

    /// Called before the queue length changes at `now`, with the old length.
    fn queue(&mut self, now: f64, old_len: usize, new_len: usize) {
        let now = now.min(self.end_ms);
        self.queue_area += old_len as f64 * (now - self.last_queue_change);
        self.last_queue_change = now;
        if self.room(now) {
            self.timeline.queue.push((now, new_len));
        }
    }
}

struct Sim<'a> {
    p: &'a SimParams,
    rng: Pcg64Mcg,
    heap: BinaryHeap<Event>,
    seq: u64,
    queue_len: usize,
    max_queue: usize,
    /// Loaders holding a finished batch, with the time they blocked, oldest first.
    blocked: VecDeque<(usize, f64)>,
    /// When each loader started its current load.
    load_started: Vec<f64>,
    gpu_busy_until: Option<f64>,
    consumed: u64,
    loaded: u64,
    rec: Recorder,
}

impl Sim<'_> {
    fn push(&mut self, at: f64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Event { at, seq: self.seq, kind });
    }

    fn load_time(&mut self) -> f64 {
        let p = self.p;
        if p.load_jitter_ms == 0.0 {
            return p.load_ms;
        }
        // Box-Muller: one standard normal from two uniforms in (0, 1].
        let u1: f64 = 1.0 - self.rng.random::<f64>();
        let u2: f64 = self.rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        (p.load_ms + p.load_jitter_ms * z).max(MIN_LOAD_FRACTION * p.load_ms)
    }

    fn start_load(&mut self, loader: usize, now: f64) {
        self.load_started[loader] = now;
        let t = now + self.load_time();
        self.push(t, Kind::LoadDone(loader));
    }

    fn enqueue(&mut self, now: f64) {
        self.rec.queue(now, self.queue_len, self.queue_len + 1);
        self.queue_len += 1;
        self.max_queue = self.max_queue.max(self.queue_len);
        self.loaded += 1;
    }

    fn try_start_step(&mut self, now: f64) {
        if self.gpu_busy_until.is_some() || self.queue_len == 0 {
            return;
        }
        self.rec.queue(now, self.queue_len, self.queue_len - 1);
        self.queue_len -= 1;
        let done = now + self.p.step_ms;
        self.gpu_busy_until = Some(done);
        self.rec.gpu(now, done);
        self.push(done, Kind::StepDone);
        // The freed slot goes to the loader that has waited longest.
        if let Some((loader, since)) = self.blocked.pop_front() {
            self.rec.loader(loader, LoaderState::Blocked, since, now);
            self.enqueue(now);
            self.start_load(loader, now);
        }
    }

    fn on_load_done(&mut self, loader: usize, now: f64) {
        self.rec.loader(loader, LoaderState::Busy, self.load_started[loader], now);
        if self.queue_len < self.p.queue {
            self.enqueue(now);
            self.start_load(loader, now);
        } else {
            self.blocked.push_back((loader, now));
        }
        self.try_start_step(now);
    }

    fn on_step_done(&mut self, now: f64) {
        self.gpu_busy_until = None;
        self.consumed += 1;
        self.try_start_step(now);
    }
}

/// Runs the simulation. Deterministic for a given `SimParams` (seed included).
pub fn simulate(p: &SimParams) -> Result<SimResult> {
    p.validate()?;
    let end_ms = p.seconds * 1000.0;
    let window_ms = p.timeline_ms.clamp(0.0, end_ms);
    let mut sim = Sim {
        p,
        rng: Pcg64Mcg::seed_from_u64(p.seed),
        heap: BinaryHeap::new(),
        seq: 0,
        queue_len: 0,
        max_queue: 0,
        blocked: VecDeque::new(),
        load_started: vec![0.0; p.loaders],
        gpu_busy_until: None,
        consumed: 0,
        loaded: 0,
        rec: Recorder {
            end_ms,
            window_ms,
            max_intervals: p.max_intervals,
            timeline: Timeline { window_ms, queue: vec![(0.0, 0)], ..Timeline::default() },
            gpu_busy_ms: 0.0,
            blocked_ms: 0.0,
            queue_area: 0.0,
            last_queue_change: 0.0,
        },
    };
    for loader in 0..p.loaders {
        sim.start_load(loader, 0.0);
    }
    let mut events = 0u64;
    while let Some(event) = sim.heap.pop() {
        if event.at > end_ms {
            break;
        }
        events += 1;
        match event.kind {
            Kind::LoadDone(loader) => sim.on_load_done(loader, event.at),
            Kind::StepDone => sim.on_step_done(event.at),
        }
    }
    // Close what is still open at the end so the sums cover all of [0, end].
    for loader in 0..p.loaders {
        if !sim.blocked.iter().any(|&(l, _)| l == loader) {
            let started = sim.load_started[loader];
            sim.rec.loader(loader, LoaderState::Busy, started, end_ms);
        }
    }
    for (loader, since) in std::mem::take(&mut sim.blocked) {
        sim.rec.loader(loader, LoaderState::Blocked, since, end_ms);
    }
    let queue_len = sim.queue_len;
    sim.rec.queue(end_ms, queue_len, queue_len);

    let rec = sim.rec;
    Ok(SimResult {
        params: p.clone(),
        batches_consumed: sim.consumed,
        batches_loaded: sim.loaded,
        gpu_busy: rec.gpu_busy_ms / end_ms,
        mean_queue: rec.queue_area / end_ms,
        max_queue: sim.max_queue,
        loader_blocked: rec.blocked_ms / (end_ms * p.loaders as f64),
        predicted_busy: p.predicted_busy(),
        events,
        timeline: rec.timeline,
    })
}

#[cfg(test)]
mod tests;
