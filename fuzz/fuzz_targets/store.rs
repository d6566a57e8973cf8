//! A precomputed dataset's manifest and shard: the input is a 2-byte
//! manifest length, `manifest.json`, then `shard-00000.bin`. Opening either
//! refuses it with a message or gives records that all read back.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::store(data));
