//! The sender's settings and their defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::attempt::ATTEMPT_TIMEOUT;
use crate::metrics;
use crate::telegram::TelegramChannel;

/// Threads that make the attempts unless configured (`[webhooks] delivery_threads`): chosen by
/// the storm's measurement (`perf/README.md`, issue #59).
pub const DELIVERY_THREADS: usize = 2;

/// Attempts in flight at once unless configured (`[webhooks] in_flight_max`): the sender's
/// width, of which one account may borrow all but a quarter (issue #36's fairness).
pub const IN_FLIGHT_MAX: usize = 256;

/// The widths `[webhooks] in_flight_max` may take: at least 16 (a quarter kept for the other
/// accounts is then 4 slots), at most half of [`UNRECORDED_MAX`](crate::UNRECORDED_MAX) (the
/// outcomes of a full width always fit under the unrecorded bound twice over).
pub const IN_FLIGHT_RANGE: std::ops::RangeInclusive<usize> = 16..=crate::UNRECORDED_MAX / 2;

/// Delivery settings.
#[derive(Clone, Debug)]
pub struct DeliveryConfig {
    /// Permit private and loopback targets (`webhooks.allow_private`; local testing only).
    pub allow_private: bool,
    /// Attempts in flight at once, over all hosts.
    pub in_flight_max: usize,
    /// Attempts in flight at once for one account's alerts.
    pub per_account_max: usize,
    /// Attempts in flight at once to one host name or IP literal, whatever the port.
    pub per_address_max: usize,
    /// Attempts in flight at once to one host and port.
    pub per_host_max: usize,
    /// Threads that make the attempts (1 ..= [`LANES_MAX`](crate::LANES_MAX)); the bounds above are over all of
    /// them together (`lanes`).
    pub threads: usize,
    /// Time allowed per attempt.
    pub attempt_timeout: Duration,
    /// How often the outbox is checked when nothing wakes the sender.
    pub poll_interval: Duration,
    /// Root certificates (DER) trusted in addition to the bundled web roots, for receivers
    /// behind a private CA (and for tests).
    pub extra_roots_der: Vec<Vec<u8>>,
    /// Where recording outcomes is reported, for `/healthz` (`None`: not reported).
    pub health: Option<Arc<rampart_store::storage::StorageHealth>>,
    /// Attempt outcomes and durations, for `/metrics` (`None`: not measured).
    pub metrics: Option<metrics::WebhookMetrics>,
    /// The operator's Telegram bot (`None`: Telegram rows fail with "not configured").
    pub telegram: Option<TelegramChannel>,
}

impl Default for DeliveryConfig {
    fn default() -> DeliveryConfig {
        DeliveryConfig {
            allow_private: false,
            in_flight_max: IN_FLIGHT_MAX,
            per_account_max: 32,
            per_address_max: 128,
            per_host_max: 8,
            threads: DELIVERY_THREADS,
            attempt_timeout: ATTEMPT_TIMEOUT,
            poll_interval: Duration::from_millis(20),
            extra_roots_der: Vec::new(),
            health: None,
            metrics: None,
            telegram: None,
        }
    }
}
