//! What rampart's tests and benchmarks share, in one place instead of borrowed through `#[path]`:
//! the counting global allocator that proves a path allocates nothing ([`alloc`]), the seeded
//! generator of the fuzz and model tests ([`rng`]), the venue-feed fixture helpers of the
//! engine's decoder tests ([`feed`]), and a throwaway PostgreSQL server for the storage tests
//! ([`pg`]).
//!
//! Only tests and benchmarks depend on this crate (the engine and `net` as a dev-dependency, the
//! benchmarks, whose binary installs the allocator, as a dependency); no crate of the service does.

pub mod alloc;
pub mod feed;
pub mod pg;
pub mod rng;
