//! `grin-detect --stream`'s frame cutter (MJPEG and raw frames) and frame
//! decoder: the first bytes pick the format and the frame size, the rest
//! is the stream. Every frame is cut and decoded or refused as a bad frame;
//! the stream always ends; a decoded frame is within the size bound.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| grin_fuzz_checks::stream_frames(data));
