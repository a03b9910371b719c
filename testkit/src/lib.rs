//! What rampart's tests and benchmarks share, in one place instead of borrowed through `#[path]`:
//! the counting global allocator that proves a path allocates nothing ([`alloc`]), the seeded
//! generator of the fuzz and model tests ([`rng`]), the venue-feed fixture helpers of the
//! engine's decoder tests ([`feed`]), and throwaway servers: PostgreSQL for the storage tests
//! ([`pg`]) and NATS with JetStream for the cluster's ([`nats`]); and test TLS material ([`tls`]).
//!
//! Only tests and benchmarks depend on this crate (the runtime's crates as a dev-dependency, the
//! benchmarks, whose binary installs the allocator, as a dependency); no crate of the service does.

pub mod alloc;
mod daemon;
pub mod feed;
pub mod nats;
pub mod pg;
pub mod rng;
pub mod tls;
