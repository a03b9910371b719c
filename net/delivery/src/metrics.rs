//! The delivery side's Prometheus instruments, updated where attempts finish (the webhook
//! sender's thread or a `rampart deliver` worker) and registered by whoever serves `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The media type of a `/metrics` exposition (OpenMetrics text), on every listener that serves one.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A webhook attempt's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `delivered` (2xx), `rejected` (another status) or `error` (no full answer: timeout,
    /// refused address, connection error, truncated answer).
    pub outcome: &'static str,
}

/// Buckets for request and attempt durations, seconds: 50 µs to about 13 s.
pub fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_05, 2.0, 19)
}

/// The webhook sender's instruments (updated on the delivery thread, once per attempt).
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    attempts: Family<OutcomeLabels, Counter>,
    duration: Histogram,
    /// Telegram `sendMessage` attempts (same sender, same outcomes), by outcome.
    telegram: Family<OutcomeLabels, Counter>,
    /// Attempts cut to give their slot to an account under its part of a full bound.
    cuts: Counter,
}

impl Default for WebhookMetrics {
    fn default() -> WebhookMetrics {
        WebhookMetrics {
            attempts: Family::default(),
            duration: Histogram::new(duration_buckets()),
            telegram: Family::default(),
            cuts: Counter::default(),
        }
    }
}

impl WebhookMetrics {
    /// Registers the instruments (`rampart_webhook_attempts_total`,
    /// `rampart_webhook_attempt_duration_seconds`, `rampart_telegram_attempts_total`,
    /// `rampart_delivery_cuts_total`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register("webhook_attempts", "Webhook attempts finished, by outcome", self.attempts.clone());
        registry.register(
            "webhook_attempt_duration_seconds",
            "Time from sending a webhook to its outcome",
            self.duration.clone(),
        );
        registry.register(
            "telegram_attempts",
            "Telegram sendMessage attempts finished, by outcome",
            self.telegram.clone(),
        );
        registry.register(
            "delivery_cuts",
            "Attempts cut to give their slot to another account under its part of a full bound (not counted as attempts: the delivery is sent again)",
            self.cuts.clone(),
        );
    }

    /// Counts one attempt cut for another account ([`crate::fair`]).
    pub fn observe_cut(&self) {
        self.cuts.inc();
    }

    /// Counts one finished attempt.
    pub fn observe(&self, outcome: &'static str, seconds: f64) {
        self.attempts.get_or_create(&OutcomeLabels { outcome }).inc();
        self.duration.observe(seconds);
    }

    /// Counts one finished Telegram attempt.
    pub fn observe_telegram(&self, outcome: &'static str) {
        self.telegram.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}
