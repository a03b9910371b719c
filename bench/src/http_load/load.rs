//! [`run`]: checks the caller's arguments, builds the [`Plan`], spreads the connections over the
//! threads and sums what the threads counted into a [`LoadResult`].

use std::net::SocketAddr;
use std::sync::Barrier;
use std::time::Duration;

use super::plan::{capped_secs, OpenLoop, Plan, Tally};
use super::result::{latency_histogram, LoadResult};
use super::worker::worker;

/// Most connections [`run`] opens; more is a caller bug and panics.
pub const LOAD_CONNECTIONS_MAX: usize = 1024;
/// Longest request [`run`] accepts, bytes; a longer one is a caller bug and panics.
pub const LOAD_REQUEST_BYTES_MAX: usize = 64 * 1024;
/// Longest run: a longer `duration` is cut to this.
pub const DURATION_MAX: Duration = Duration::from_secs(24 * 60 * 60);

/// Runs load against `addr` for `duration` and returns what was measured.
///
/// `requests` are complete request heads (with a body after the head if the method takes one),
/// each sent as is; connection `c` starts at request `c % requests.len()` and goes round-robin.
/// `connections` (1 ..= [`LOAD_CONNECTIONS_MAX`]) are spread over `threads` threads (at least one, at
/// most one per connection). `rate_per_s`: `None` for a closed loop, `Some(r)` for an open loop
/// offering `r` requests per second in all (see the `http_load` module docs).
///
/// Panics when `requests` is empty or holds an empty request or one longer than
/// [`LOAD_REQUEST_BYTES_MAX`], when `connections` is out of range, or when the rate is not a positive
/// finite number. Failures of the server or the network are counted, never panics.
pub fn run(
    addr: SocketAddr,
    requests: &[String],
    connections: usize,
    threads: usize,
    duration: Duration,
    rate_per_s: Option<f64>,
) -> LoadResult {
    assert!(!requests.is_empty(), "http_load::run needs at least one request");
    assert!(
        requests.iter().all(|r| !r.is_empty() && r.len() <= LOAD_REQUEST_BYTES_MAX),
        "every request must hold 1 ..= {LOAD_REQUEST_BYTES_MAX} bytes"
    );
    assert!((1..=LOAD_CONNECTIONS_MAX).contains(&connections), "connections must be in 1..={LOAD_CONNECTIONS_MAX}");
    if let Some(r) = rate_per_s {
        assert!(r.is_finite() && r > 0.0, "rate_per_s must be a positive finite number, not {r}");
    }
    let duration = duration.min(DURATION_MAX);
    let threads = threads.clamp(1, connections);
    // A connection sends at most one request more than fits in the duration; capping the
    // schedule's steps there keeps every `Instant` sum in range.
    let cap = duration + Duration::from_secs(1);
    let plan = Plan {
        addr,
        requests,
        head_only: requests.iter().map(|r| r.starts_with("HEAD ")).collect(),
        duration,
        open: rate_per_s.map(|r| OpenLoop { interval: capped_secs(connections as f64 / r, cap), rate_per_s: r }),
        cap,
    };
    let barrier = Barrier::new(threads);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let ids: Vec<usize> = (t..connections).step_by(threads).collect();
                let (plan, barrier) = (&plan, &barrier);
                s.spawn(move || worker(plan, &ids, barrier))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut latency_us = latency_histogram();
    let (mut requests_done, mut errors, mut non_2xx, mut elapsed) = (0, 0, 0, Duration::ZERO);
    for t in &tallies {
        requests_done += t.requests;
        errors += t.errors;
        non_2xx += t.non_2xx;
        elapsed = elapsed.max(t.elapsed);
        // Same bounds on both sides: adding cannot fail.
        let _ = latency_us.add(&t.latency_us);
    }
    let duration_s = elapsed.as_secs_f64();
    LoadResult {
        requests: requests_done,
        errors,
        non_2xx,
        duration_s,
        req_per_s: if duration_s > 0.0 { requests_done as f64 / duration_s } else { 0.0 },
        latency_us,
    }
}
