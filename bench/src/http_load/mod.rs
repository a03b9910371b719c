//! An HTTP/1.1 keep-alive load generator over plain non-blocking TCP sockets, so rampart's front and
//! its baselines can be measured by the same client in the same run; and [`wrk`], which runs the
//! `wrk` tool for a second opinion.
//!
//! [`run`] drives `connections` keep-alive connections from `threads` threads, one request in
//! flight per connection, in one of two modes:
//! - closed loop (`rate_per_s = None`): each connection sends its next request as soon as the
//!   previous answer is complete; latency is measured from the moment the request was queued;
//! - open loop (`rate_per_s = Some(r)`): request `k` of connection `c` is due at
//!   `start + c / r + k × connections / r`, so the whole run offers `r` requests per second evenly
//!   spaced. A request that could not be sent on time because its connection was still waiting
//!   for the previous answer is sent as soon as the connection is free, and its latency is
//!   measured from the time it was due: a server stall shows in full instead of being hidden by
//!   the client waiting (coordinated omission). A request whose connection was free when it fell
//!   due is measured from its actual send: the lateness of the client's own timer (below a
//!   millisecond, more if the machine does not run the client thread) is not the server's.
//!
//! Responses are parsed for real: status line, `Content-Length` or chunked bodies (trailers
//! included), a body delimited by the close of the connection, interim `1xx` answers, `HEAD`,
//! `204` and `304` without bodies, `Connection: close` and HTTP/1.0 keep-alive rules. A
//! connection the server closes is opened again. A request sent on a reused keep-alive
//! connection that the server closed before answering a single byte is sent again once on a new
//! connection (as HTTP clients do for idempotent requests), its latency still counted from the
//! first attempt.
//!
//! Rationale for `mio` rather than blocking sockets: one thread can then serve many connections
//! and see each answer the moment it arrives, without a thread per connection or a busy loop.
//! The sockets are plain TCP sockets; everything HTTP is here.
//!
//! The modules, lowest first (each imports only from those above it):
//! - `response`: HTTP/1.1 response parsing, sans-I/O;
//! - `result`: what a run measured ([`LoadResult`], [`LatencySummary`]);
//! - `plan`: what every thread reads and what each counts;
//! - `conn`: one connection and its request in flight;
//! - `worker`: one thread's poll loop over its connections;
//! - `load`: [`run`];
//! - `wrk_tool`: [`wrk`], on its own.

mod conn;
mod load;
mod plan;
mod response;
mod result;
mod worker;
mod wrk_tool;

pub use conn::READ_BUFFER_BYTES;
pub use load::{run, DURATION_MAX, LOAD_CONNECTIONS_MAX, LOAD_REQUEST_BYTES_MAX};
pub use result::{LatencySummary, LoadResult, LATENCY_US_MAX};
pub use worker::DRAIN_MAX;
pub use wrk_tool::{wrk, WrkResult};
