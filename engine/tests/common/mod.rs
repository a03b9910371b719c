//! Shared by the engine's integration tests: a global allocator that counts the allocations made
//! on the current thread while `COUNTING` is on, to prove a path allocates nothing, and the
//! helpers the venue feed tests share.
#![allow(unsafe_code)]
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counting allocator; install it with `#[global_allocator]` in the test file.
pub struct Counting;

thread_local! {
    /// Counting is on for this thread.
    pub static COUNTING: Cell<bool> = const { Cell::new(false) };
}

/// Allocations counted so far.
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

fn note() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting has no effect
// on the memory handed out.
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

/// A book level from decimal strings.
pub fn lv(price: &str, qty: &str) -> rampart_engine::Level {
    rampart_engine::Level {
        price: rampart_engine::Price::parse(price.as_bytes()).expect("test price"),
        qty: rampart_engine::Qty::parse(qty.as_bytes()).expect("test qty"),
    }
}

/// Asserts that every file in the fixture directory `dir` is one of `valid` or `malformed`, and
/// that every listed fixture exists.
pub fn assert_fixtures_listed(dir: &str, valid: &[&str], malformed: &[&str]) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in &names {
        assert!(
            valid.contains(&n.as_str()) || malformed.contains(&n.as_str()),
            "fixture {n} is not listed in VALID or MALFORMED"
        );
    }
    assert_eq!(names.len(), valid.len() + malformed.len(), "a listed fixture is missing");
}
