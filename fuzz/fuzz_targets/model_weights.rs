//! A `.grin` model file past its checksums: they are recomputed over
//! whatever the fuzzer made of the file, so mutated shapes and weights reach
//! the loader's own checks and the runner. Refused with a message or run,
//! never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::model_weights(data));
