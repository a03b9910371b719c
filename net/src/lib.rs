//! rampart's runtime: shards on pinned glommio executors, the HTTP front, storage and config.
//!
//! Everything that touches threads, sockets, clocks or disk lives here; the market logic it
//! drives lives in `rampart-engine`.

pub mod alert_api;
pub mod clock;
pub mod config;
pub mod delivery;
pub mod front;
pub mod json;
pub mod keys;
pub mod limit;
pub mod metrics;
pub mod shard;
pub mod shutdown;
pub mod ssrf;
pub mod storage;
pub mod store;
pub mod venue;
pub mod venue_watch;
pub mod writer;
