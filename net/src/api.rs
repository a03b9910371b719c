//! What clients and operators talk to: the route table (`route`, the one dispatch), the HTTP
//! front (authentication, cached bodies, one module per resource), the request limits, the
//! in-memory key table, and the Prometheus metrics.

pub mod front;
pub mod keys;
pub mod limit;
pub mod metrics;
pub mod route;
