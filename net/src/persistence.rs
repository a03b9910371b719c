//! Everything that writes durable state, off the tick path: the SQLite store (`store`), the
//! front's storage thread with group commit and the process-wide storage health (`storage`),
//! and the writer that drains the shards' event queues into SQLite (`writer`).

pub mod storage;
pub mod store;
pub mod writer;
