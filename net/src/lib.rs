//! rampart's runtime: shards on pinned glommio executors, the HTTP front, storage and config.
//!
//! Everything that touches threads, sockets, clocks or disk lives here; the market logic it
//! drives lives in `rampart-engine`. The folders follow the roles: `venue` (ingest: the venues'
//! protocols, sessions, connections, REST), `shard` (the executors that own the books),
//! `api` (the HTTP front and what it serves), `persistence` (SQLite or PostgreSQL and the
//! threads that write it), `delivery` (webhooks and the SSRF guard), `cluster` (a cluster's
//! nodes on NATS: partitions, snapshots, alert commands, the firings stream); `clock`, `config`, `json` and `shutdown` serve them all.

pub mod api;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod json;
pub mod persistence;
pub mod shard;
pub mod shutdown;
pub mod site;
pub mod venue;
