//! WIDER, CelebA and JSONL annotation files and Caltech's landmarks: the
//! first byte picks the parser and whether bad lines are errors or skips.
//! Any text parses, or fails naming the file and line; every box that
//! comes out is finite with a positive size.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::annotations(data));
