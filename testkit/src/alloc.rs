//! A global allocator that counts the allocations a thread makes inside [`count`]: the tests use
//! it to prove a path allocates nothing, the benchmarks to report allocations per operation. A test
//! or benchmark binary installs it with `#[global_allocator]`; without it [`count`] reports `None`,
//! never a wrong figure.
//!
//! Rationale: the count is per thread, so tests running in parallel in one binary never see each
//! other's allocations; and while no thread counts, an allocation costs one relaxed atomic load
//! more, so the rest of a binary pays next to nothing for it.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The counting allocator: forwards everything to [`System`] and counts the `alloc`,
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

/// This thread's counting while [`count`] runs. Dropping it, also when the counted closure
/// panics, gives the enclosing [`count`] (if any) back its count plus this one's.
struct Scope {
    outer: Option<u64>,
}

impl Scope {
    fn enter() -> Scope {
        COUNTING_THREADS.fetch_add(1, Ordering::Relaxed);
        Scope { outer: COUNT.with(|c| c.replace(Some(0))) }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        COUNT.with(|c| {
            let inner = c.get().unwrap_or(0);
            c.set(self.outer.map(|o| o + inner));
        });
        COUNTING_THREADS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `f` and returns its result with the number of allocations (including reallocations) it
/// made on this thread, or `None` when [`Counting`] is not the global allocator. A test that
/// proves a path allocates nothing asserts `Some(0)`, which also proves the counter was there.
pub fn count<R>(f: impl FnOnce() -> R) -> (R, Option<u64>) {
    let scope = Scope::enter();
    let r = f();
    let n = COUNT.with(Cell::get).unwrap_or(0);
    drop(scope);
    (r, INSTALLED.load(Ordering::Relaxed).then_some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The unit tests of this crate run with the allocator installed, as the tests that use it do.
    #[global_allocator]
    static GLOBAL: Counting = Counting;

    fn one_allocation() {
        drop(std::hint::black_box(Vec::<u8>::with_capacity(16)));
    }

    #[test]
    fn counts_what_the_closure_allocates() {
        let (v, n) = count(|| 2 + 2);
        assert_eq!((v, n), (4, Some(0)));
        assert_eq!(count(one_allocation).1, Some(1));
        let mut v = Vec::<u64>::with_capacity(1);
        let ((), n) = count(|| v.extend([1, 2, 3]));
        assert_eq!(n, Some(1), "a reallocation counts");
    }

    #[test]
    fn other_threads_are_not_counted() {
        use std::sync::atomic::AtomicU8;
        // 0: wait, 1: allocate now, 2: done. The other thread allocates while this one counts.
        let step = AtomicU8::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                while step.load(Ordering::Acquire) == 0 {
                    std::hint::spin_loop();
                }
                (0..100).for_each(|_| one_allocation());
                step.store(2, Ordering::Release);
            });
            let ((), n) = count(|| {
                step.store(1, Ordering::Release);
                while step.load(Ordering::Acquire) != 2 {
                    std::hint::spin_loop();
                }
            });
            assert_eq!(n, Some(0));
        });
    }

    #[test]
    fn a_nested_count_adds_to_the_enclosing_one() {
        let (inner, outer) = count(|| {
            one_allocation();
            count(one_allocation).1
        });
        assert_eq!((inner, outer), (Some(1), Some(2)));
    }

    #[test]
    fn a_panic_inside_ends_the_count() {
        let caught = std::panic::catch_unwind(|| count(|| panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(COUNT.with(Cell::get), None, "this thread no longer counts");
        assert_eq!(count(one_allocation).1, Some(1));
    }
}
