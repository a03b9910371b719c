//! Issue #32's black-box tests in one binary, so their waits (a webhook schedule's minute, an
//! expiry, a rotated secret's end) overlap instead of adding up: expiry, the delivery log and
//! redelivery, signed webhooks, keys that take effect at once, and `Idempotency-Key`.

mod delivery_log;
mod expiry;
mod idempotency;
mod keys_at_once;
mod signing;
mod test_send;
