//! Buffers a forward pass gives back for the next one to take.
//!
//! A pass's maps and band scratch are hundreds of kilobytes each. Taken
//! from malloc and freed frame after frame, glibc handed that memory back
//! to the kernel (mmap above its threshold, a trimmed heap top below it),
//! so every frame faulted its pages in and zeroed them again: 39% of a
//! 320x240 pass's time was the kernel's (`perf record`, 2026-11-28), and
//! the pass took 4.0 ms instead of 2.6. Kept per thread, so that a band's
//! scratch on a pool thread needs no lock.

use super::{Group, Map};
use grin_kernels::lines::LineLayout;
use std::cell::RefCell;

/// Buffers one thread keeps at most: a pass holds a handful at once (the
/// map read, the map written, the maps a later head reads, a band's
/// scratch), and a few sizes alternate when the pyramid runs.
const KEPT: usize = 24;

thread_local! {
    static FREE: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// A vector with room for `len` floats, as it was given back: the smallest
/// kept one that has the room (frame after frame at one size, one of
/// exactly that size), or a new one.
fn kept(len: usize) -> Vec<f32> {
    let kept = FREE
        .try_with(|free| {
            let mut free = free.borrow_mut();
            let best = (0..free.len()).filter(|&i| free[i].capacity() >= len).min_by_key(|&i| free[i].capacity());
            best.map(|i| free.swap_remove(i))
        })
        .ok()
        .flatten();
    let mut v = kept.unwrap_or_default();
    v.reserve_exact(len.saturating_sub(v.len()));
    v
}

/// An empty vector with room for `len` floats.
pub(super) fn take(len: usize) -> Vec<f32> {
    let mut v = kept(len);
    v.clear();
    v
}

/// `len` floats holding whatever the buffer last held (zeros past that):
/// for memory that every reader writes before it reads.
pub(super) fn reused(len: usize) -> Vec<f32> {
    let mut v = kept(len);
    v.truncate(len);
    v.resize(len, 0.0);
    v
}

/// `len` zeros, in a kept vector when there is one.
pub(super) fn zeroed(len: usize) -> Vec<f32> {
    let mut v = take(len);
    v.resize(len, 0.0);
    v
}

/// Keeps `v` for this thread's next [`take`]; past [`KEPT`] buffers, the
/// smallest goes back to the allocator.
pub(super) fn give(v: Vec<f32>) {
    if v.capacity() == 0 {
        return;
    }
    // A thread being torn down has no pool left: `v` is simply freed.
    let _ = FREE.try_with(|free| {
        let mut free = free.borrow_mut();
        free.push(v);
        if free.len() > KEPT {
            let smallest = (0..free.len()).min_by_key(|&i| free[i].capacity()).expect("over KEPT, so not empty");
            free.swap_remove(smallest);
        }
    });
}

/// One band's buffers, reused band after band on one thread, and taken
/// from and given back to the pool.
pub(super) struct Scratch {
    /// The 3x3 conv's padded input lines (zero where no row writes).
    pub lines: Vec<f32>,
    /// Two buffers the group's layers write to and read from in turn.
    pub between: [Vec<f32>; 2],
}

impl Scratch {
    pub(super) fn new(group: &Group, layout: Option<LineLayout>, rows: usize, width: usize) -> Scratch {
        let lines = group.line_floats(layout, rows);
        let widest = group
            .conv3x3
            .iter()
            .map(|c| c.out_channels)
            .chain(group.pointwise.iter().map(|p| p.out_channels))
            .max()
            .unwrap_or(0);
        // Every layer writes its rows whole before the next reads them, so
        // what these held before needs no zeroing.
        let between = || reused(widest * rows * width);
        Scratch { lines: zeroed(lines), between: [between(), between()] }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let [a, b] = &mut self.between;
        for v in [&mut self.lines, a, b] {
            give(std::mem::take(v));
        }
    }
}

impl Clone for Map {
    fn clone(&self) -> Map {
        let mut data = take(self.data.len());
        data.extend_from_slice(&self.data);
        Map { data, ..*self }
    }
}

impl Map {
    /// Frees the map's memory to the allocator, not the pool: for the
    /// caller's frame, which the pool did not hand out. Kept, a frame of
    /// each pass's size would push out the buffers the next pass asks for
    /// (at 640x480: 45% more page faults, and the pass 5% slower), while
    /// the allocator hands the same memory to the next frame.
    pub(super) fn free(mut self) {
        drop(std::mem::take(&mut self.data));
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_taken_again_and_the_pool_stays_bounded() {
        let v = take(1000);
        assert!(v.is_empty() && v.capacity() >= 1000);
        let ptr = v.as_ptr();
        give(v);
        // The same memory comes back for a size it holds, emptied.
        let again = take(500);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        give(again);
        // A larger size gets other memory, zeroed when asked.
        let large = zeroed(5000);
        assert_eq!(large.len(), 5000);
        assert!(large.iter().all(|&x| x == 0.0));
        give(large);
        for n in 1..=2 * KEPT {
            give(Vec::with_capacity(n));
        }
        assert_eq!(FREE.with_borrow(Vec::len), KEPT);
        // The largest were kept: the two large ones and 27..=48.
        let smallest = FREE.with_borrow(|f| f.iter().map(Vec::capacity).min());
        assert_eq!(smallest, Some(2 * KEPT - (KEPT - 2) + 1));
    }

    #[test]
    fn a_dropped_map_is_kept_and_a_freed_one_is_not() {
        let map = |len: usize| Map { channels: 1, height: 1, width: len, data: vec![1.0; len] };
        drop(map(100));
        assert_eq!(FREE.with_borrow(|f| f.iter().map(Vec::capacity).collect::<Vec<_>>()), [100]);
        map(300).free();
        assert_eq!(FREE.with_borrow(Vec::len), 1);
        // A clone's memory comes from the pool.
        let a = map(50);
        let b = a.clone();
        assert_eq!((b.data.capacity(), &b.data), (100, &a.data));
    }
}
