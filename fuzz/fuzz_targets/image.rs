//! Image headers through the size bound: any bytes decode to a picture
//! within the bound, or are refused before a pixel buffer past it exists
//! (libFuzzer's -malloc_limit_mb in scripts/fuzz.sh catches one that is made).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::image(data));
