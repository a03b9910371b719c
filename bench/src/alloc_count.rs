//! A global allocator that counts the allocations made on the current thread while counting is
//! on, so a benchmark can report allocations per operation. The `rampart-bench` binary and the
//! cheap tests install it with `#[global_allocator]`; without it [`count`] reports nothing.
//!
//! Rationale: one relaxed atomic load per allocation while no thread counts, so the other
//! benchmarks in the binary pay next to nothing for it.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The counting allocator: forwards everything to [`System`] and counts `alloc`,
/// `alloc_zeroed` and `realloc` calls made by a thread inside [`count`].
pub struct Counting;

/// True once an allocation went through [`Counting`], i.e. it is the global allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Threads inside [`count`] right now; zero keeps the fast path to one load.
static COUNTING_THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocations counted on this thread, `None` while this thread does not count.
    static COUNT: Cell<Option<u64>> = const { Cell::new(None) };
}

fn note() {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
    if COUNTING_THREADS.load(Ordering::Relaxed) == 0 {
        return;
    }
    // `try_with`: the thread-local may already be gone while a thread shuts down.
    let _ = COUNT.try_with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n + 1));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches no memory
// handed out and allocates nothing itself (the thread-local has a const initialiser).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the number of allocations (including reallocations) it
/// made on this thread, or `None` when [`Counting`] is not the global allocator.
pub fn count<R>(f: impl FnOnce() -> R) -> (R, Option<u64>) {
    COUNTING_THREADS.fetch_add(1, Ordering::Relaxed);
    COUNT.with(|c| c.set(Some(0)));
    let r = f();
    let n = COUNT.with(|c| c.replace(None)).unwrap_or(0);
    COUNTING_THREADS.fetch_sub(1, Ordering::Relaxed);
    (r, INSTALLED.load(Ordering::Relaxed).then_some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nothing_for_no_allocation() {
        // The unit tests do not install the allocator: the count is unknown, never wrong.
        let (v, n) = count(|| 2 + 2);
        assert_eq!(v, 4);
        assert!(n.is_none() || n == Some(0));
    }
}
