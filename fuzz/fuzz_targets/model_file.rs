//! A `.grin` model file's header and weights: any bytes load or are refused
//! with a message, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::model_file(data));
