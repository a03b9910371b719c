//! Everything that writes durable state, off the tick path: the store on SQLite or PostgreSQL
//! (`store`, over one connection type for both, `db`), the front's storage thread with group
//! commit and the process-wide storage health (`storage`), and the writer that drains the
//! shards' event queues into the store (`writer`), collecting a `*` alert's firings into bodies
//! (`collect`); the flood guard's rule, sans-I/O (`flood_guard`); the writer's committed inbox
//! entries for the stream fronts (`inbox_feed`); a market node's committed webhook deliveries for its
//! publisher (`handoff`).

pub mod collect;
pub mod db;
pub mod flood_guard;
pub mod handoff;
pub mod inbox_feed;
pub mod storage;
pub mod store;
pub mod text;
pub mod writer;
