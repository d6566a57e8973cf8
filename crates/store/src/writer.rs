//! Writing a dataset: shards under temporary names, synced, renamed; a
//! sidecar per finished shard so reruns skip it; a manifest (or a part
//! manifest for `--shards A..B`) at the end; and merging parts.

use crate::error::{Result, StoreError};
use crate::fingerprint::Fingerprint;
use crate::layout::{class_letter, RecordLayout};
use crate::lock::{create_locked, lock_for_writing};
use crate::manifest::{
    hash_file, part_file_name, read_json, shard_file_name, shard_records, sidecar_file_name, sync_parent, tmp_path,
    write_json_atomic, ClassCounts, Manifest, ShardEntry, Sidecar, MANIFEST_FILE, MANIFEST_FORMAT, PART_FORMAT,
    SIDECAR_FORMAT, VERSION,
};
use grin_features::{FeatureConfig, HostBatch, SceneClass};
use grin_image::InputError;
use grin_output::LockMode;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// About 128 MB per shard: large enough that a dataset is a few files,
/// small enough that a resumed run loses little and shards spread over jobs.
pub const DEFAULT_SHARD_BYTES: u64 = 128 << 20;

/// Records generated and written per step; one batch of the pipeline.
const WRITE_BATCH: usize = 64;

/// The most samples one dataset holds (`--samples`, `train.store_samples`):
/// a billion records is past any dataset grin trains on (the default is
/// 20000; a 320x240 grey record is 77 KB, so a billion is 77 TB), and a
/// count past it (`--samples 1e11`) is a typo, refused before anything is
/// written rather than found when the disk fills.
pub const MAX_SAMPLES: u64 = 1_000_000_000;

/// What fills a batch with the samples at the given indices,
/// deterministically: the feature pipeline, or hand-built samples in tests.
pub(crate) type Fill<'a> = dyn Fn(&[u64], &mut HostBatch) -> Result<(), InputError> + Sync + 'a;

/// Writes every unfinished shard of `shards` of `plan` into `dir` (created if
/// absent), then the manifest (every shard) or a part manifest (a sub-range).
/// Refuses a folder that holds a dataset of another config or layout: mixing
/// shards would be silent corruption. Finished shards are reused, so a rerun
/// picks up where an interrupted one stopped.
pub fn write_dataset(
    dir: &Path,
    plan: Plan,
    shards: Range<u64>,
    source: &Fill<'_>,
    progress: &mut dyn FnMut(Event),
) -> Result<Summary> {
    let before = crate::lock::Before::note(dir)?;
    let result = Writer::create(dir, plan).and_then(|writer| writer.run(shards, source, progress));
    result.inspect_err(|_| before.restore_if_untouched(dir))
}

/// Everything that decides the dataset's bytes and file split.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub fingerprint: Fingerprint,
    pub layout: RecordLayout,
    pub samples: u64,
    pub records_per_shard: u64,
    pub shard_count: u64,
    /// Inputs the source skipped while it loaded, kept in the manifest.
    pub skipped_inputs: u64,
}

impl Plan {
    pub(crate) fn new(fingerprint: Fingerprint, layout: RecordLayout, samples: u64, shard_bytes: u64) -> Result<Plan> {
        if !(1..=MAX_SAMPLES).contains(&samples) {
            return Err(StoreError::Usage(format!("--samples {samples} must be within 1..={MAX_SAMPLES}")));
        }
        if let Some(problem) = layout.problem() {
            return Err(StoreError::Usage(problem));
        }
        let records_per_shard = (shard_bytes / layout.record_bytes).max(1);
        let shard_count = samples.div_ceil(records_per_shard);
        Ok(Plan { fingerprint, layout, samples, records_per_shard, shard_count, skipped_inputs: 0 })
    }

    /// The plan for `samples` training samples of `features`.
    pub fn for_features(features: &FeatureConfig, samples: u64, shard_bytes: u64) -> Result<Plan> {
        let layout = RecordLayout::new(features.width, features.height, features.channels);
        Plan::new(Fingerprint::new(features, samples)?, layout, samples, shard_bytes)
    }

    fn agrees(&self, hash: &str, layout: &RecordLayout, samples: u64, records_per_shard: u64) -> bool {
        self.fingerprint.hash == hash
            && self.layout == *layout
            && self.samples == samples
            && self.records_per_shard == records_per_shard
    }
}

/// What [`write_dataset`] reports while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Before any generation: finished shards found and records still to make.
    Plan { reused_shards: u64, reused_records: u64, pending_shards: u64, pending_records: u64 },
    /// A shard present on disk that is rewritten, and why.
    Redo { file: String, reason: String },
    /// More records written.
    Records(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// `manifest.json`, or the part manifest for a shard range.
    pub manifest: PathBuf,
    pub reused_shards: u64,
    pub written_shards: u64,
    pub class_counts: ClassCounts,
}

enum ShardState {
    Complete(ShardEntry),
    Absent,
    Redo(String),
}

#[derive(Debug)]
struct Writer {
    dir: PathBuf,
    plan: Plan,
}

impl Writer {
    /// Opens (creating) `dir` for `plan`. What it holds is checked in
    /// [`Writer::run`], once the folder's lock is held: a folder another
    /// grin is writing or reading is refused for that, not for its
    /// half-written shards looking like another config's (issue 90).
    fn create(dir: &Path, plan: Plan) -> Result<Writer> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        Ok(Writer { dir: dir.to_path_buf(), plan })
    }

    fn check_existing(&self) -> Result<()> {
        let conflict = |path: &Path, what: &str| StoreError::Conflict {
            dir: self.dir.clone(),
            message: format!(
                "{} was written for {what}; use another --out folder or delete this one",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
        };
        let manifest_path = self.dir.join(MANIFEST_FILE);
        if manifest_path.exists() {
            let m: Manifest = read_json(&manifest_path, MANIFEST_FORMAT)?;
            if !self.plan.agrees(&m.fingerprint.hash, &m.layout, m.samples, m.records_per_shard) {
                let keys = m.fingerprint.differing_keys(&self.plan.fingerprint);
                let what = if keys.is_empty() {
                    "another shard size".to_string()
                } else {
                    format!("another config ({} differ)", keys.join(", "))
                };
                return Err(conflict(&manifest_path, &what));
            }
        }
        for path in self.listing()? {
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let (hash, layout, samples, rps) = if name.starts_with("part-") {
                let m: Manifest = read_json(&path, PART_FORMAT)?;
                (m.fingerprint.hash, m.layout, m.samples, m.records_per_shard)
            } else {
                let s: Sidecar = read_json(&path, SIDECAR_FORMAT)?;
                (s.fingerprint_hash, s.layout, s.samples, s.records_per_shard)
            };
            if !self.plan.agrees(&hash, &layout, samples, rps) {
                // The fingerprint holds the source's files too (round 19
                // named only the config, the count and the size).
                return Err(conflict(&path, "another config or source files, sample count or shard size"));
            }
        }
        Ok(())
    }

    /// Sidecars and part manifests in the folder (temporary files excluded).
    fn listing(&self) -> Result<Vec<PathBuf>> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        let mut paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&self.dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if (name.starts_with("shard-") || name.starts_with("part-")) && name.ends_with(".json") {
                paths.push(entry.path());
            }
        }
        paths.sort();
        Ok(paths)
    }

    fn run(&self, range: Range<u64>, source: &Fill<'_>, progress: &mut dyn FnMut(Event)) -> Result<Summary> {
        if range.start >= range.end || range.end > self.plan.shard_count {
            return Err(StoreError::Usage(format!(
                "shard range {}..{} is empty or beyond the {} shards",
                range.start, range.end, self.plan.shard_count
            )));
        }
        let whole = range == (0..self.plan.shard_count);
        let _lock = lock_for_writing(&self.dir, if whole { LockMode::Exclusive } else { LockMode::Shared })?;
        // Refuses a folder that holds a dataset of another config or layout
        // (mixing shards would be silent corruption); under the lock, so no
        // other writer is changing what it holds.
        self.check_existing()?;
        let mut entries: Vec<Option<ShardEntry>> = Vec::new();
        let (mut reused_records, mut pending_shards, mut pending_records) = (0, 0, 0);
        for index in range.clone() {
            match self.shard_state(index)? {
                ShardState::Complete(entry) => {
                    reused_records += entry.records;
                    entries.push(Some(entry));
                }
                state => {
                    if let ShardState::Redo(reason) = state {
                        progress(Event::Redo { file: shard_file_name(index), reason });
                    }
                    pending_shards += 1;
                    pending_records += self.records(index).end - self.records(index).start;
                    entries.push(None);
                }
            }
        }
        let reused_shards = range.end - range.start - pending_shards;
        progress(Event::Plan { reused_shards, reused_records, pending_shards, pending_records });
        let mut done = Vec::with_capacity(entries.len());
        for (index, entry) in range.clone().zip(entries) {
            done.push(match entry {
                Some(entry) => entry,
                None => self.write_shard(index, source, progress)?,
            });
        }
        let manifest = self.manifest(&range, done);
        let path =
            if manifest.is_part() { self.dir.join(part_file_name(&range)) } else { self.dir.join(MANIFEST_FILE) };
        manifest.check(&path)?;
        write_json_atomic(&path, &manifest)?;
        Ok(Summary {
            manifest: path,
            reused_shards,
            written_shards: pending_shards,
            class_counts: manifest.class_counts,
        })
    }

    fn records(&self, index: u64) -> Range<u64> {
        shard_records(self.plan.samples, self.plan.records_per_shard, index)
    }

    fn manifest(&self, range: &Range<u64>, shards: Vec<ShardEntry>) -> Manifest {
        let whole = *range == (0..self.plan.shard_count);
        let mut class_counts = ClassCounts::default();
        for shard in &shards {
            let c = ClassCounts::of_classes(&shard.classes);
            for class in SceneClass::ALL {
                class_counts.add(class, c.get(class));
            }
        }
        Manifest {
            format: if whole { MANIFEST_FORMAT } else { PART_FORMAT }.into(),
            version: VERSION,
            layout: self.plan.layout,
            samples: self.plan.samples,
            records_per_shard: self.plan.records_per_shard,
            shard_count: self.plan.shard_count,
            part: (!whole).then_some([range.start, range.end]),
            class_counts,
            skipped_inputs: self.plan.skipped_inputs,
            fingerprint: self.plan.fingerprint.clone(),
            shards,
        }
    }

    /// A shard counts as finished only if its sidecar matches this plan and
    /// the file's bytes hash to the sidecar's checksum.
    fn shard_state(&self, index: u64) -> Result<ShardState> {
        let sidecar_path = self.dir.join(sidecar_file_name(index));
        let shard_path = self.dir.join(shard_file_name(index));
        if !sidecar_path.exists() {
            return Ok(if shard_path.exists() {
                ShardState::Redo("no sidecar: the previous run stopped before finishing it".into())
            } else {
                ShardState::Absent
            });
        }
        let sidecar: Sidecar = read_json(&sidecar_path, SIDECAR_FORMAT)?;
        let entry = sidecar.shard;
        if entry.file != shard_file_name(index) || entry.record_range() != self.records(index) {
            return Ok(ShardState::Redo(format!(
                "sidecar describes {} records {:?}",
                entry.file,
                entry.record_range()
            )));
        }
        let actual = match std::fs::metadata(&shard_path) {
            Ok(meta) => meta.len(),
            Err(_) => return Ok(ShardState::Redo("shard file missing".into())),
        };
        if actual != entry.bytes {
            return Ok(ShardState::Redo(format!("{actual} bytes, expected {}", entry.bytes)));
        }
        let checksum = hash_file(&shard_path)?;
        if checksum != entry.xxh3 {
            return Ok(ShardState::Redo(format!("checksum {checksum}, sidecar says {}", entry.xxh3)));
        }
        Ok(ShardState::Complete(entry))
    }

    fn write_shard(&self, index: u64, source: &Fill<'_>, progress: &mut dyn FnMut(Event)) -> Result<ShardEntry> {
        let layout = self.plan.layout;
        let records = self.records(index);
        let path = self.dir.join(shard_file_name(index));
        let sidecar_path = self.dir.join(sidecar_file_name(index));
        // A sidecar must never outlive the bytes it describes.
        if sidecar_path.exists() {
            std::fs::remove_file(&sidecar_path).map_err(|e| StoreError::io(&sidecar_path, e))?;
        }
        let tmp = tmp_path(&path);
        let file = create_locked(&tmp)?;
        // A failed shard (a full disk, a source error) leaves no temporary
        // file the size of what it wrote (`--samples 1e11` left one that
        // filled the disk); the lock is held until it is gone.
        let written = self.fill_shard(index, &tmp, &file, source, progress);
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        let (hasher, classes) = written?;
        std::fs::rename(&tmp, &path).map_err(|e| StoreError::io(&path, e))?;
        drop(file);
        sync_parent(&path)?;
        let entry = ShardEntry {
            file: shard_file_name(index),
            first_record: records.start,
            records: records.end - records.start,
            bytes: (records.end - records.start) * layout.record_bytes,
            xxh3: format!("{:016x}", hasher.digest()),
            classes,
        };
        let sidecar = Sidecar {
            format: SIDECAR_FORMAT.into(),
            version: VERSION,
            fingerprint_hash: self.plan.fingerprint.hash.clone(),
            layout,
            samples: self.plan.samples,
            records_per_shard: self.plan.records_per_shard,
            shard: entry.clone(),
        };
        write_json_atomic(&sidecar_path, &sidecar)?;
        Ok(entry)
    }

    /// Generates shard `index`'s records into `file` (its temporary file,
    /// `tmp`) and syncs it; returns its hash and class letters.
    fn fill_shard(
        &self,
        index: u64,
        tmp: &Path,
        file: &std::fs::File,
        source: &Fill<'_>,
        progress: &mut dyn FnMut(Event),
    ) -> Result<(Xxh3, String)> {
        let layout = self.plan.layout;
        let records = self.records(index);
        let mut out = std::io::BufWriter::with_capacity(4 << 20, file);
        let mut hasher = Xxh3::new();
        let mut classes = String::with_capacity((records.end - records.start) as usize);
        let mut batch = HostBatch::with_capacity(WRITE_BATCH, layout.width, layout.height, layout.channels);
        let mut bytes = Vec::with_capacity(WRITE_BATCH * layout.record_bytes as usize);
        let mut first = records.start;
        while first < records.end {
            let end = (first + WRITE_BATCH as u64).min(records.end);
            let indices: Vec<u64> = (first..end).collect();
            batch.clear();
            source(&indices, &mut batch).map_err(|error| StoreError::Generate { first, end, error })?;
            let shape = (batch.width, batch.height, batch.channels);
            if batch.len != indices.len() || shape != (layout.width, layout.height, layout.channels) {
                return Err(StoreError::Usage(format!(
                    "the feature source returned {} samples of {shape:?} for {} requested of {:?}",
                    batch.len,
                    indices.len(),
                    (layout.width, layout.height, layout.channels)
                )));
            }
            bytes.clear();
            for i in 0..batch.len {
                let at = bytes.len();
                layout.encode(&batch, i, &mut bytes);
                classes.push(class_letter(layout.class_of(&bytes[at..])));
            }
            out.write_all(&bytes).map_err(|e| StoreError::io(tmp, e))?;
            hasher.update(&bytes);
            progress(Event::Records(end - first));
            first = end;
        }
        let file = out.into_inner().map_err(|e| StoreError::io(tmp, e.into_error()))?;
        file.sync_all().map_err(|e| StoreError::io(tmp, e))?;
        Ok((hasher, classes))
    }
}
