//! Config TOML and `--set` overrides: the first line of the input is a
//! `--set key=value`, the rest the file. Any text gives a config within
//! every key's range, or one line naming the file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::config(data));
