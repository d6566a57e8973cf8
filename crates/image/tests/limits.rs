//! The decoders' memory bound, measured: the largest single allocation made
//! while one image decodes, on this thread (decoding runs on the caller's
//! thread; other tests of this binary run on their own).

use grin_image::{decode_image, fixtures, ImageBound, DEFAULT_MAX_PIXELS};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Largest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed to the system allocator unchanged; the
// bookkeeping touches only a const-initialised thread-local, never the heap.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract for `realloc` is passed on as it is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// Issue 90, cause E: a 1.2 MB PNG whose colour profile (iCCP) is a zlib
/// bomb made the decoder reserve 1.1 GB, past a Pi's memory. Its profile
/// is now inflated under the 16 MiB bound for what is not pixels, and
/// dropped: the picture still decodes.
#[test]
fn a_colour_profile_that_inflates_past_the_metadata_bound_is_never_inflated_whole() {
    let profile = 128 << 20;
    let png = fixtures::png_with_profile_of(profile);
    assert!(png.len() < 2 << 20, "the fixture is small on disk: {} bytes", png.len());
    LARGEST.with(|l| l.set(0));
    let bound = ImageBound::new(DEFAULT_MAX_PIXELS, "--max-pixels").unwrap();
    let image = decode_image(&png, bound).expect("the pixels decode; the profile is dropped");
    assert_eq!((image.width(), image.height()), (16, 16));
    let largest = LARGEST.with(Cell::get);
    assert!(largest < 40 << 20, "largest allocation while decoding: {} MiB", largest >> 20);
}
