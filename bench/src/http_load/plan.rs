//! What every load thread reads ([`Plan`], with its open-loop schedule) and what each one counts
//! ([`Tally`]).

use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::result::LATENCY_US_MAX;

/// The open-loop schedule.
pub(super) struct OpenLoop {
    /// Time between two requests of one connection.
    pub(super) interval: Duration,
    pub(super) rate_per_s: f64,
}

/// What every thread reads.
pub(super) struct Plan<'a> {
    pub(super) addr: SocketAddr,
    pub(super) requests: &'a [String],
    /// Per request: it is a `HEAD` (its answer has no body).
    pub(super) head_only: Vec<bool>,
    pub(super) duration: Duration,
    pub(super) open: Option<OpenLoop>,
    /// Longest step of a schedule: the duration plus a second.
    pub(super) cap: Duration,
}

/// `s` seconds, at most `cap` (also for infinite or out-of-range `s`).
pub(super) fn capped_secs(s: f64, cap: Duration) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(cap).min(cap)
}

/// One thread's counts.
pub(super) struct Tally {
    pub(super) requests: u64,
    pub(super) errors: u64,
    pub(super) non_2xx: u64,
    pub(super) latency_us: Histogram<u64>,
    pub(super) elapsed: Duration,
}

impl Tally {
    pub(super) fn record(&mut self, latency: Duration, status: u16) {
        self.requests += 1;
        if !(200..300).contains(&status) {
            self.non_2xx += 1;
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).clamp(1, LATENCY_US_MAX);
        self.latency_us.saturating_record(us);
    }
}
