//! Batch order (a fresh seeded permutation per epoch, or class-balanced
//! draws), and the reader that fills batches in that order (training's
//! precomputed feed runs it on its producer thread).

use crate::error::{Result, StoreError};
use crate::reader::Store;
use grin_features::{ClassBalanceConfig, HostBatch, SceneClass};
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// How a batch's records are drawn from the store.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Draws {
    /// Every record once per epoch, in a fresh random order.
    Shuffled,
    /// Target fractions of the scene classes (`[features.balance]`),
    /// normalised over the classes the dataset holds.
    ClassFractions(ClassBalanceConfig),
}

/// What decides a [`BatchOrder`]: the same options give the same batches.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderOptions {
    pub batch_size: usize,
    pub seed: u64,
    pub draws: Draws,
    /// Batches to skip, so a resumed run continues the same data order.
    pub start_batch: u64,
}

type Rng = rand_pcg::Pcg64Mcg;

const EPOCH_TAG: u64 = 1;
const CLASS_TAG: u64 = 2;
const BATCH_TAG: u64 = 3;

fn rng(seed: u64, tag: u64, a: u64, b: u64) -> Rng {
    let mut bytes = [0u8; 24];
    bytes[..8].copy_from_slice(&tag.to_le_bytes());
    bytes[8..16].copy_from_slice(&a.to_le_bytes());
    bytes[16..].copy_from_slice(&b.to_le_bytes());
    Rng::seed_from_u64(xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, seed))
}

/// One class's records, reshuffled each time they are used up.
struct ClassStream {
    class: u64,
    records: Vec<u64>,
    order: Vec<u64>,
    round: u64,
    pos: usize,
    shuffled_round: Option<u64>,
}

impl ClassStream {
    fn advance(&mut self, n: usize) {
        let total = self.pos as u64 + n as u64;
        self.round += total / self.records.len() as u64;
        self.pos = (total % self.records.len() as u64) as usize;
    }

    fn take(&mut self, seed: u64, out: &mut Vec<u64>) {
        if self.shuffled_round != Some(self.round) {
            self.order.clone_from(&self.records);
            self.order.shuffle(&mut rng(seed, CLASS_TAG, self.class, self.round));
            self.shuffled_round = Some(self.round);
        }
        out.push(self.order[self.pos]);
        self.advance(1);
    }
}

enum Kind {
    Shuffled { len: u64, epoch: u64, pos: u64, perm: Vec<u64>, perm_epoch: Option<u64> },
    Balanced { streams: Vec<ClassStream>, fractions: Vec<f64>, drawn: Vec<u64> },
}

/// The record indices of each batch, deterministic for (seed, options).
pub struct BatchOrder {
    seed: u64,
    batch_size: usize,
    batch: u64,
    kind: Kind,
}

impl BatchOrder {
    pub fn new(store: &Store, options: &OrderOptions) -> Result<BatchOrder> {
        let classes: [Vec<u64>; 3] = SceneClass::ALL.map(|c| store.class_index(c).to_vec());
        BatchOrder::from_classes(store.len(), classes, options)
    }

    /// From the record count and per-class record indices alone.
    pub(crate) fn from_classes(len: u64, classes: [Vec<u64>; 3], options: &OrderOptions) -> Result<BatchOrder> {
        if options.batch_size == 0 {
            return Err(StoreError::Usage("batch size must be at least 1".into()));
        }
        if len == 0 {
            return Err(StoreError::Usage("the dataset holds no records".into()));
        }
        let targets: Option<[f32; 3]> = match options.draws {
            Draws::Shuffled => None,
            Draws::ClassFractions(balance) => {
                let f = balance.fractions();
                if f.iter().any(|x| !x.is_finite() || *x < 0.0) {
                    return Err(StoreError::Usage(format!("class fractions {f:?} must be finite and non-negative")));
                }
                Some(f)
            }
        };
        let kind = match targets {
            None => Kind::Shuffled { len, epoch: 0, pos: 0, perm: Vec::new(), perm_epoch: None },
            Some(targets) => {
                let (mut streams, mut fractions) = (Vec::new(), Vec::new());
                for (class, records) in classes.into_iter().enumerate() {
                    if !records.is_empty() && targets[class] > 0.0 {
                        fractions.push(targets[class] as f64);
                        streams.push(ClassStream {
                            class: class as u64,
                            records,
                            order: Vec::new(),
                            round: 0,
                            pos: 0,
                            shuffled_round: None,
                        });
                    }
                }
                let sum: f64 = fractions.iter().sum();
                if streams.is_empty() || sum <= 0.0 {
                    return Err(StoreError::Usage(format!(
                        "class fractions {targets:?} select no scene class present in the dataset"
                    )));
                }
                fractions.iter_mut().for_each(|f| *f /= sum);
                let drawn = vec![0; streams.len()];
                Kind::Balanced { streams, fractions, drawn }
            }
        };
        let mut order = BatchOrder { seed: options.seed, batch_size: options.batch_size, batch: 0, kind };
        order.skip(options.start_batch);
        Ok(order)
    }

    /// Batches handed out so far (including skipped ones).
    pub fn batches(&self) -> u64 {
        self.batch
    }

    fn skip(&mut self, batches: u64) {
        let bs = self.batch_size as u64;
        match &mut self.kind {
            Kind::Shuffled { len, epoch, pos, .. } => {
                let at = batches * bs;
                *epoch = at / *len;
                *pos = at % *len;
            }
            Kind::Balanced { streams, fractions, drawn } => {
                for k in 0..batches {
                    let quotas = quotas(k, self.batch_size, fractions, drawn);
                    for (stream, q) in streams.iter_mut().zip(quotas) {
                        stream.advance(q);
                    }
                }
            }
        }
        self.batch = batches;
    }

    /// Replaces `out` with the next batch's record indices.
    pub fn next_batch(&mut self, out: &mut Vec<u64>) {
        out.clear();
        let seed = self.seed;
        match &mut self.kind {
            Kind::Shuffled { len, epoch, pos, perm, perm_epoch } => {
                while out.len() < self.batch_size {
                    if *perm_epoch != Some(*epoch) {
                        perm.clear();
                        perm.extend(0..*len);
                        perm.shuffle(&mut rng(seed, EPOCH_TAG, *epoch, 0));
                        *perm_epoch = Some(*epoch);
                    }
                    let take = (self.batch_size - out.len()).min((*len - *pos) as usize);
                    out.extend_from_slice(&perm[*pos as usize..*pos as usize + take]);
                    *pos += take as u64;
                    if *pos == *len {
                        *pos = 0;
                        *epoch += 1;
                    }
                }
            }
            Kind::Balanced { streams, fractions, drawn } => {
                let quotas = quotas(self.batch, self.batch_size, fractions, drawn);
                for (stream, q) in streams.iter_mut().zip(quotas) {
                    for _ in 0..q {
                        stream.take(seed, out);
                    }
                }
                // Classes were drawn in blocks; mix them within the batch.
                out.shuffle(&mut rng(seed, BATCH_TAG, self.batch, 0));
            }
        }
        self.batch += 1;
    }
}

/// Records per class in batch `k`: the floor of each share, then the
/// remaining slots to the classes furthest behind their running target, so
/// the achieved fractions track the targets batch by batch.
fn quotas(k: u64, batch_size: usize, fractions: &[f64], drawn: &mut [u64]) -> Vec<usize> {
    let mut q: Vec<usize> = fractions.iter().map(|f| (batch_size as f64 * f).floor() as usize).collect();
    let target = |c: usize| (k + 1) as f64 * batch_size as f64 * fractions[c];
    let mut left = batch_size - q.iter().sum::<usize>();
    while left > 0 {
        let behind = (0..q.len())
            .max_by(|&a, &b| {
                let da = target(a) - (drawn[a] + q[a] as u64) as f64;
                let db = target(b) - (drawn[b] + q[b] as u64) as f64;
                da.total_cmp(&db).then(b.cmp(&a))
            })
            .expect("at least one class");
        q[behind] += 1;
        left -= 1;
    }
    for (d, n) in drawn.iter_mut().zip(&q) {
        *d += *n as u64;
    }
    q
}

/// Reads the batches of a [`BatchOrder`] from a store: what training's
/// precomputed feed runs on its producer thread.
pub struct BatchReader {
    store: Store,
    order: BatchOrder,
    indices: Vec<u64>,
    batch_size: usize,
}

impl BatchReader {
    pub fn new(store: &Store, options: &OrderOptions) -> Result<BatchReader> {
        let order = BatchOrder::new(store, options)?;
        let batch_size = options.batch_size;
        Ok(BatchReader { store: store.clone(), order, indices: Vec::with_capacity(batch_size), batch_size })
    }

    /// An empty batch of the store's layout, sized for this reader.
    pub fn empty_batch(&self) -> HostBatch {
        let l = self.store.layout();
        HostBatch::with_capacity(self.batch_size, l.width, l.height, l.channels)
    }

    /// Replaces `batch` with the next batch's records.
    pub fn read_next(&mut self, batch: &mut HostBatch) -> Result<()> {
        self.order.next_batch(&mut self.indices);
        batch.clear();
        self.indices.iter().try_for_each(|&index| self.store.read_into(index, batch))
    }
}
