//! What a [`run`](super::run) measured: the counts and the latency histogram ([`LoadResult`]) and
//! its percentiles ([`LatencySummary`]).

use hdrhistogram::Histogram;

/// Largest latency the histogram holds, µs (60 s); longer latencies are recorded as this.
pub const LATENCY_US_MAX: u64 = 60_000_000;

/// What one [`run`](super::run) measured.
#[derive(Clone, Debug)]
pub struct LoadResult {
    /// Responses received in full (any status).
    pub requests: u64,
    /// Failed connects, I/O errors, malformed responses, connections closed mid-response, and
    /// requests still unanswered (or due and never sent) when the drain time ran out.
    pub errors: u64,
    /// Responses whose status was not 2xx (included in `requests`).
    pub non_2xx: u64,
    /// Wall time from the start of the measurement until the last thread finished, s (the
    /// requested duration plus the drain of the requests in flight).
    pub duration_s: f64,
    /// `requests / duration_s`.
    pub req_per_s: f64,
    /// Latency of every response, µs, to the last byte of the answer: from the request's queueing
    /// in a closed loop; in an open loop from its due time if it had to wait for its connection,
    /// else from its send (see the `http_load` module docs).
    pub latency_us: Histogram<u64>,
}

/// Latency percentiles of a [`LoadResult`], µs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LatencySummary {
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
}

impl std::fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {} µs, p90 {} µs, p99 {} µs, p99.9 {} µs, max {} µs",
            self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us
        )
    }
}

impl LoadResult {
    /// The latency percentiles, µs (all zero when nothing was answered).
    pub fn summary(&self) -> LatencySummary {
        let h = &self.latency_us;
        LatencySummary {
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

pub(super) fn latency_histogram() -> Histogram<u64> {
    // Constant, valid bounds: construction cannot fail.
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}
