//! grin-store: precomputed datasets of fixed-size records in memory-mapped,
//! checksummed, fingerprinted shards.
//!
//! # Format (version 1)
//!
//! A dataset is one folder:
//!
//! ```text
//! data/<name>/
//!   manifest.json          the dataset (written last; its presence means "complete")
//!   shard-00000.bin        records 0 .. R
//!   shard-00000.json       sidecar: that shard's manifest entry, for resuming
//!   shard-00001.bin ...
//!   part-00000-00004.json  part manifest of `--shards 0..4` (scale-out only)
//!   grin.lock              advisory lock: writers and readers (`lock.rs`)
//! ```
//!
//! **Records.** Every record has the same size, so record `i` lies in shard
//! `i / records_per_shard` at byte offset `(i % records_per_shard) * record_bytes`.
//! Shard files have no header. One record, all integers little-endian:
//!
//! | offset          | type                         | content                                       |
//! |-----------------|------------------------------|-----------------------------------------------|
//! | `pixels_offset` (0) | `u8 [height][width][channels]` | the image, row-major, channels interleaved |
//! | `boxes_offset`  | `f32 [max_boxes][4]`         | x0, y0, x1, y1 in pixels; zeros in empty slots |
//! | `labels_offset` | `i8 [max_boxes]`             | smile 0 / 1, -1 unknown, -2 empty, -3 ignore   |
//! | … `record_bytes`| zero bytes                   | padding to a multiple of 64                    |
//!
//! `boxes_offset` is the image size rounded up to 8, `labels_offset =
//! boxes_offset + 16 * max_boxes`, and `record_bytes` is `labels_offset +
//! max_boxes` rounded up to 64 ([`RecordLayout::new`]). A reader rejects a
//! layout that differs from this rule.
//!
//! **Manifest** (`manifest.json`, JSON):
//!
//! - `format`: `"grin-store"` (`"grin-store-part"` in a part manifest), `version`: 1;
//! - `layout`: width, height, channels, max_boxes, the three offsets and `record_bytes`;
//! - `samples`, `records_per_shard`, `shard_count = ceil(samples / records_per_shard)`;
//! - `part`: `[A, B)` shard range, in part manifests only;
//! - `class_counts`: `smiling`, `non_smiling`, `face_free` record counts;
//! - `fingerprint`: `config` = `{"features": <the [features] table without
//!   "workers">, "samples": N, "split": "train", "generator":
//!   grin_features::GENERATOR_VERSION, "source_files": {<key>:
//!   {"files", "bytes", "hash"} | {"missing": true}}}` and `hash` = xxh3-64 (hex)
//!   of that value as canonical JSON (keys sorted, no spaces). `source_files`
//!   hashes each source path's (relative name, size, mtime) list; contents are
//!   not read. For a JSONL source only the manifest file itself is covered;
//! - `shards`: per shard `file` (a plain file name: absolute paths, `..` and
//!   separators are rejected), `first_record`, `records`, `bytes`, `xxh3`
//!   (xxh3-64 of the whole file, 16 hex digits) and `classes` (one letter per
//!   record: `s` smiling, `n` faces none smiling, `f` face-free: the per-class
//!   index that class draws (`Draws`) take records from).
//!
//! **Writing.** A shard is written as `shard-NNNNN.bin.tmp`, synced, renamed,
//! the folder synced, then its sidecar written the same way. A rerun reuses a
//! shard only if its sidecar matches the plan (fingerprint, layout, sample
//! count, shard size) and the file hashes to the sidecar's checksum; since
//! generation is deterministic, a resumed dataset is byte-identical to an
//! uninterrupted one. A writer refuses a folder that holds shards of another
//! config. `manifest.json` is written when every shard exists; a
//! `--shards A..B` run writes `part-A-B.json` instead, and [`merge`] joins parts.
//! Writers and readers hold `grin.lock` (exclusive for a whole dataset or
//! a merge, shared for a part or a reader), so two writers never mix their
//! shards and no writer rewrites a dataset a run is reading.
//!
//! **Reading.** [`Store::open`] checks each shard's size; [`Store::check_checksums`]
//! hashes every shard once against the manifest (what training does when it
//! opens a dataset), so a record `grin verify` would reject is never trained on.
//!
//! It depends on grin-output, grin-image and grin-features (a sample's
//! layout) and on Burn's `Dataset` trait only: never on the model or the trainer.

// Public as a module because the CLI calls it by path: `grin store info`'s
// canonical fingerprint.
pub mod fingerprint;

mod error;
mod layout;
mod lock;
mod manifest;
mod merge;
mod order;
mod reader;
mod verify;
mod writer;

pub use error::StoreError;
pub use fingerprint::{format_stale, Fingerprint};
pub use layout::RecordLayout;
pub use lock::refuse_if_being_written;
pub use manifest::{is_dataset_file_name, ClassCounts, Manifest, ShardEntry, MANIFEST_FILE};
pub use merge::merge;
pub use order::{BatchOrder, BatchReader, Draws, OrderOptions};
pub use reader::Store;
pub use verify::{verify, BadShard, VerifyReport};
pub use writer::{write_dataset, Event, Plan, Summary, DEFAULT_SHARD_BYTES, MAX_SAMPLES};
