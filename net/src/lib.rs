//! rampart's runtime: shards on pinned glommio executors, the HTTP front, storage and config.
//!
//! Everything that touches threads, sockets, clocks or disk lives here; the market logic it
//! drives lives in `rampart-engine`. The folders are floors (ARCHITECTURE.md, "Floors of the
//! runtime"): a module imports only from the floors below it.

pub mod alerts;
pub mod api;
pub mod board;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod json;
pub mod outbound;
pub mod persistence;
pub mod request;
pub mod shard;
pub mod shutdown;
pub mod site_alerts;
pub mod state;
pub mod text;
pub mod venue;
