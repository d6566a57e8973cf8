//! Measuring generation cost: T_g per sample (median, p95) single-threaded,
//! per stage, and throughput with C workers. Plain structs out; callers
//! (`grin features bench`, the trainer's balance check) format them.

use crate::augment::{self, AugmentStage};
use crate::config::{AugmentConfig, FeatureConfig, Split};
use crate::pipeline::Pipeline;
use crate::sample::{HostBatch, SceneClass};
use crate::source::{SampleRng, Source};
use grin_image::{InputError, SkipCounts};
use rand::SeedableRng;
use std::time::Instant;

/// Order statistics of one timed quantity, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Timing {
    pub median_s: f64,
    pub p95_s: f64,
    pub mean_s: f64,
    pub min_s: f64,
    pub samples: usize,
}

impl Timing {
    pub(crate) fn from_durations(seconds: Vec<f64>) -> Timing {
        if seconds.is_empty() {
            return Timing { median_s: 0.0, p95_s: 0.0, mean_s: 0.0, min_s: 0.0, samples: 0 };
        }
        let n = seconds.len();
        Timing {
            median_s: grin_terms::median(&seconds),
            p95_s: grin_terms::percentile(&seconds, 0.95),
            mean_s: seconds.iter().sum::<f64>() / n as f64,
            min_s: seconds.iter().copied().fold(f64::INFINITY, f64::min),
            samples: n,
        }
    }
}

/// T_g: whole-sample generation time through [`Pipeline::sample`], one thread.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TgReport {
    pub median_s: f64,
    pub p95_s: f64,
    pub mean_s: f64,
    pub samples: usize,
    pub warmup: usize,
}

/// One stage's cost per application (its probability forced to 1).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageTiming {
    pub stage: String,
    /// The stage's configured probability (0 = off in this config).
    pub probability: f32,
    pub timing: Timing,
}

/// Samples/s with `workers` threads through [`Pipeline::fill_batch`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Throughput {
    pub workers: usize,
    pub samples: usize,
    pub wall_s: f64,
    pub samples_per_s: f64,
    pub per_core: f64,
    /// Achieved share of smiling / non-smiling / face-free scenes in the output.
    pub class_fractions: [f64; 3],
}

/// Warm-up samples excluded from timing: caches, allocator, lazy statics.
pub(crate) fn warmup_count(samples: usize) -> usize {
    (samples / 10).clamp(3, 50)
}

/// T_g over `samples` consecutive indices, after a warm-up that is not timed.
pub fn measure_tg(pipeline: &Pipeline, samples: usize) -> Result<TgReport, InputError> {
    let warmup = warmup_count(samples);
    for index in 0..warmup as u64 {
        pipeline.sample(index)?;
    }
    let mut seconds = Vec::with_capacity(samples);
    for index in warmup as u64..(warmup + samples) as u64 {
        let start = Instant::now();
        let sample = pipeline.sample(index)?;
        seconds.push(start.elapsed().as_secs_f64());
        std::hint::black_box(sample);
    }
    let t = Timing::from_durations(seconds);
    Ok(TgReport { median_s: t.median_s, p95_s: t.p95_s, mean_s: t.mean_s, samples, warmup })
}

/// A source built apart from a pipeline, with the inputs it skipped while
/// loading (the pipeline's own counts only cover scene-time skips).
pub struct OpenedSource {
    pub source: Box<dyn Source>,
    pub load_skips: SkipCounts,
}

/// The source `cfg.source` names, for timing it apart from augmentation and
/// for [`Pipeline::from_source`].
pub fn open_source(cfg: &FeatureConfig, split: Split) -> Result<OpenedSource, InputError> {
    let source = crate::pipeline::build_source(cfg, split)?;
    let load_skips = SkipCounts::default();
    if let Some(skips) = source.load_skips() {
        load_skips.absorb(skips);
    }
    Ok(OpenedSource { source, load_skips })
}

/// Per-stage timing, one thread: the source's scene, then each augmentation
/// stage in pipeline order on the scene the previous stages produced. Each
/// stage runs with its probability forced to 1, so the figure is its cost
/// per application; the first entry is the source (`source:<name>`).
pub fn measure_stages(
    source: &dyn Source,
    augment_cfg: &AugmentConfig,
    seed: u64,
    samples: usize,
) -> Result<Vec<StageTiming>, InputError> {
    let warmup = warmup_count(samples);
    let forced: Vec<(AugmentStage, f32, AugmentConfig)> = AugmentStage::ALL
        .into_iter()
        .map(|stage| {
            let mut cfg = augment_cfg.clone();
            *stage.probability_mut(&mut cfg) = 1.0;
            (stage, stage.probability(augment_cfg), cfg)
        })
        .collect();
    let mut scene_s = Vec::with_capacity(samples);
    let mut stage_s: Vec<Vec<f64>> = vec![Vec::with_capacity(samples); forced.len()];
    for i in 0..(warmup + samples) as u64 {
        let mut rng = SampleRng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let start = Instant::now();
        let mut sample = source.scene(i, &mut rng)?;
        let scene = start.elapsed().as_secs_f64();
        let timed = i >= warmup as u64;
        if timed {
            scene_s.push(scene);
        }
        for (k, (stage, _, cfg)) in forced.iter().enumerate() {
            let start = Instant::now();
            augment::apply_stage(*stage, &mut sample, cfg, &mut rng)?;
            if timed {
                stage_s[k].push(start.elapsed().as_secs_f64());
            }
        }
        std::hint::black_box(&sample);
    }
    let mut out = vec![StageTiming {
        stage: format!("source:{}", source.name()),
        probability: 1.0,
        timing: Timing::from_durations(scene_s),
    }];
    for ((stage, probability, _), seconds) in forced.into_iter().zip(stage_s) {
        out.push(StageTiming { stage: stage.to_string(), probability, timing: Timing::from_durations(seconds) });
    }
    Ok(out)
}

/// Throughput of [`Pipeline::fill_batch`] over `samples` consecutive indices
/// in batches of `batch`, after one untimed warm-up batch.
pub fn measure_throughput(pipeline: &Pipeline, samples: usize, batch: usize) -> Result<Throughput, InputError> {
    let shape = pipeline.sample(0)?;
    let (w, h, c) = (shape.width, shape.height, shape.channels);
    let batch = batch.max(1);
    let mut host = HostBatch::with_capacity(batch, w, h, c);
    let warm: Vec<u64> = (0..batch as u64).collect();
    host.clear();
    pipeline.fill_batch(&warm, &mut host)?;
    let mut classes = [0usize; 3];
    let mut done = 0;
    let start = Instant::now();
    while done < samples {
        let n = batch.min(samples - done);
        let first = (batch + done) as u64;
        let indices: Vec<u64> = (first..first + n as u64).collect();
        host.clear();
        pipeline.fill_batch(&indices, &mut host)?;
        for i in 0..host.len {
            classes[batch_class(&host, i).index()] += 1;
        }
        done += n;
    }
    let wall_s = start.elapsed().as_secs_f64();
    let workers = pipeline.workers();
    let samples_per_s = done as f64 / wall_s;
    let total = done.max(1) as f64;
    Ok(Throughput {
        workers,
        samples: done,
        wall_s,
        samples_per_s,
        per_core: samples_per_s / workers as f64,
        class_fractions: classes.map(|n| n as f64 / total),
    })
}

/// A batch slot's scene class from its labels, without rebuilding the sample.
fn batch_class(batch: &HostBatch, index: usize) -> SceneClass {
    let labels = &batch.labels[index * crate::MAX_BOXES..(index + 1) * crate::MAX_BOXES];
    if labels.contains(&1) {
        SceneClass::Smiling
    } else if labels.iter().any(|l| *l != crate::LABEL_PADDING) {
        SceneClass::NonSmiling
    } else {
        SceneClass::FaceFree
    }
}

#[cfg(test)]
mod tests;
