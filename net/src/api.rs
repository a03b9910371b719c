//! What clients and operators talk to: the HTTP front (routing, authentication, cached bodies),
//! the alert API's validation and JSON, the request limits, the in-memory key table, and the
//! Prometheus metrics.

pub mod alerts;
pub mod board;
pub mod front;
pub mod keys;
pub mod limit;
pub mod metrics;
