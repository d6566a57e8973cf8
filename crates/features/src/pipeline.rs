//! The feature pipeline: source -> (train only) augmentation -> optional
//! balancing, generated in parallel on a private thread pool.
//!
//! Every sample's randomness comes from one rng seeded by
//! `(seed, split, index)`, so a sample is the same whichever thread makes it
//! and whatever the worker count.

use crate::annotations::AnnotatedSource;
use crate::augment;
use crate::class_balance::ClassBalancer;
use crate::config::{check_size, check_workers, FeatureConfig, SourceConfig, Split};
use crate::crops::CropsSource;
use crate::mix::{check_weights, MixSource};
use crate::photos::PhotoSource;
use crate::sample::{HostBatch, Sample};
use crate::source::{SampleRng, Source};
use crate::synthetic::SyntheticSource;
use grin_image::{InputError, OnBadSample, SkipCounts};
use rand::SeedableRng;
use rayon::prelude::*;

/// The source `cfg.source` names, for `split`; a mix builds each part with
/// the rest of `cfg` unchanged.
pub(crate) fn build_source(cfg: &FeatureConfig, split: Split) -> Result<Box<dyn Source>, InputError> {
    Ok(match &cfg.source {
        SourceConfig::Synthetic { .. } => Box::new(SyntheticSource::new(cfg)?),
        SourceConfig::Crops { .. } => Box::new(CropsSource::new(cfg, split)?),
        SourceConfig::Wider { .. } => Box::new(AnnotatedSource::wider(cfg, split)?),
        SourceConfig::Celeba { .. } => Box::new(AnnotatedSource::celeba(cfg, split)?),
        SourceConfig::Jsonl { .. } => Box::new(AnnotatedSource::jsonl(cfg, split)?),
        SourceConfig::Caltech { .. } | SourceConfig::Fddb { .. } | SourceConfig::CelebaAligned { .. } => {
            Box::new(PhotoSource::new(cfg, split)?)
        }
        SourceConfig::Negatives { .. } => Box::new(crate::negatives::NegativesSource::new(cfg, split)?),
        SourceConfig::Mix { weights, parts } => {
            check_weights(weights, parts.len())?;
            let built = parts
                .iter()
                .map(|part| build_source(&FeatureConfig { source: part.clone(), ..cfg.clone() }, split))
                .collect::<Result<Vec<_>, _>>()?;
            Box::new(MixSource::new(built, weights)?)
        }
    })
}

/// Replacement candidates tried for one sample under `on_bad_sample = "skip"`
/// before giving up with the last error.
pub(crate) const MAX_SKIPS_PER_SAMPLE: u64 = 32;

pub struct Pipeline {
    cfg: FeatureConfig,
    split: Split,
    source: Box<dyn Source>,
    balancer: Option<ClassBalancer>,
    skips: SkipCounts,
    pool: rayon::ThreadPool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("source", &self.source.name())
            .field("split", &self.split)
            .field("workers", &self.workers())
            .finish()
    }
}

/// The threads a pool gets for `requested` workers (0: rayon's default,
/// all cores or `RAYON_NUM_THREADS`). More than the cores are clamped to
/// the cores, with a warning once per process: generation is CPU-bound
/// (photos are decoded once and kept in memory), so extra threads only
/// wait for a core, and output is bit-identical for any worker count, so
/// clamping changes no sample. It also keeps `grin balance`'s C the number
/// of workers that really run at once. Clamping rather than refusing keeps
/// a config that names 32 workers for a cluster node usable on a laptop.
fn worker_count(requested: usize) -> Result<usize, InputError> {
    check_workers(requested)?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if requested <= cores {
        return Ok(requested);
    }
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        eprintln!("warning: features.workers = {requested} is more than the {cores} cores here; using {cores}")
    });
    Ok(cores)
}

impl Pipeline {
    /// Builds the source named by `cfg.source` for `split`.
    pub fn new(cfg: &FeatureConfig, split: Split) -> Result<Pipeline, InputError> {
        check_size(cfg.width, cfg.height, cfg.channels)?;
        Self::from_source(cfg, split, build_source(cfg, split)?)
    }

    /// A pipeline over any source (tests, benches, custom sources).
    pub fn from_source(cfg: &FeatureConfig, split: Split, source: Box<dyn Source>) -> Result<Pipeline, InputError> {
        check_size(cfg.width, cfg.height, cfg.channels)?;
        augment::validate(&cfg.augment)?;
        let balancer = cfg.balance.as_ref().map(|b| ClassBalancer::new(b, cfg.seed)).transpose()?;
        let workers = worker_count(cfg.workers)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("grin-features-{i}"))
            .build()
            .map_err(|e| InputError::Config(format!("key `features.workers`: cannot start {workers} threads: {e}")))?;
        Ok(Pipeline { cfg: cfg.clone(), split, source, balancer, skips: SkipCounts::default(), pool })
    }

    pub fn config(&self) -> &FeatureConfig {
        &self.cfg
    }

    /// Worker threads actually running (all cores when the config says 0).
    pub fn workers(&self) -> usize {
        self.pool.current_num_threads()
    }

    pub fn source(&self) -> &dyn Source {
        self.source.as_ref()
    }

    /// Bad samples replaced so far under `on_bad_sample = "skip"`.
    pub fn skips(&self) -> &SkipCounts {
        &self.skips
    }

    pub fn balancer(&self) -> Option<&ClassBalancer> {
        self.balancer.as_ref()
    }

    /// The rng of source index `index`: distinct streams per seed and split.
    pub(crate) fn rng_for(&self, index: u64) -> SampleRng {
        let split = match self.split {
            Split::Train => 0u8,
            Split::Val => 1,
            Split::Test => 2,
        };
        let mut bytes = [0u8; 17];
        bytes[..8].copy_from_slice(&self.cfg.seed.to_le_bytes());
        bytes[8] = split;
        bytes[9..].copy_from_slice(&index.to_le_bytes());
        let h = xxhash_rust::xxh3::xxh3_128(&bytes);
        SampleRng::from_seed(h.to_le_bytes())
    }

    /// Sample `index` of this split: the finished, possibly augmented and
    /// balanced sample that training sees.
    pub fn sample(&self, index: u64) -> Result<Sample, InputError> {
        let Some(balancer) = &self.balancer else {
            let (mut sample, mut rng) = self.scene(index)?;
            self.augment(&mut sample, &mut rng)?;
            return Ok(sample);
        };
        let wanted = balancer.wanted(index);
        let mut last = None;
        for attempt in 0..crate::class_balance::MAX_ATTEMPTS {
            let (mut sample, mut rng) = self.scene(ClassBalancer::candidate(index, attempt))?;
            // Rejecting on the raw scene first skips augmenting most rejects;
            // the class is checked again after augmentation because a crop
            // can remove faces, and that is the class the model sees.
            if sample.class() != wanted {
                last = Some((sample, rng, false));
                continue;
            }
            self.augment(&mut sample, &mut rng)?;
            if sample.class() == wanted {
                balancer.record(wanted, true);
                return Ok(sample);
            }
            last = Some((sample, rng, true));
        }
        let (mut sample, mut rng, augmented) = last.expect("MAX_ATTEMPTS > 0");
        if !augmented {
            self.augment(&mut sample, &mut rng)?;
        }
        balancer.record(sample.class(), false);
        Ok(sample)
    }

    /// The raw scene of source index `index` and the rng that made it (to be
    /// continued by augmentation). Under `on_bad_sample = "skip"` a bad input
    /// is counted and replaced by a candidate derived from `index`.
    pub fn scene(&self, index: u64) -> Result<(Sample, SampleRng), InputError> {
        let mut candidate = index;
        let mut skipped = 0;
        loop {
            let mut rng = self.rng_for(candidate);
            match self.source.scene(candidate, &mut rng) {
                Ok(sample) => return Ok((sample, rng)),
                Err(InputError::BadInput { path, line, kind, message })
                    if self.cfg.on_bad_sample == OnBadSample::Skip =>
                {
                    self.skips.record(kind);
                    skipped += 1;
                    if skipped >= MAX_SKIPS_PER_SAMPLE {
                        return Err(InputError::BadInput {
                            path,
                            line,
                            kind,
                            message: format!("{message} (and {skipped} replacement candidates were bad too)"),
                        });
                    }
                    candidate = crate::class_balance::splitmix64(index ^ crate::class_balance::splitmix64(skipped));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn augment(&self, sample: &mut Sample, rng: &mut SampleRng) -> Result<(), InputError> {
        if self.split == Split::Train {
            augment::augment(sample, &self.cfg.augment, rng)?;
        }
        Ok(())
    }

    /// Generates `indices` on the worker pool and replaces `out`'s contents
    /// with them, in index order. Identical bytes for any worker count. On
    /// error, returns the error of the first failing index in order.
    pub fn fill_batch(&self, indices: &[u64], out: &mut HostBatch) -> Result<(), InputError> {
        let samples: Vec<Result<Sample, InputError>> =
            self.pool.install(|| indices.par_iter().map(|&i| self.sample(i)).collect());
        let (w, h, c) = (self.cfg.width, self.cfg.height, self.cfg.channels);
        if (out.width, out.height, out.channels) != (w, h, c) {
            *out = HostBatch::with_capacity(indices.len(), w, h, c);
        }
        out.clear();
        for sample in samples {
            out.push(&sample?);
        }
        Ok(())
    }

    /// A fresh batch of `indices`.
    pub fn batch(&self, indices: &[u64]) -> Result<HostBatch, InputError> {
        let mut out = HostBatch::with_capacity(indices.len(), self.cfg.width, self.cfg.height, self.cfg.channels);
        self.fill_batch(indices, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
