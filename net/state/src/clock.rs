//! The process's clock: one [`Clock`] made at start and handed to every part that reads the
//! time (shards, live feed, writer, delivery, front, storage probe), so tests can drive time.
//!
//! The wall clock is read only here ([`SystemClock`]); the engine gets the time as an argument.
//! Monotonic `Instant`s remain where the runtime sets an I/O deadline (socket timeouts, the
//! shutdown grace, pool idle limits): those measure waiting, not market time.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of "now".
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> i64;

    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64 {
        self.now_us().div_euclid(1000)
    }
}

/// The clock every part of one process shares.
pub type SharedClock = Arc<dyn Clock>;

/// The wall clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        wall_us()
    }

    fn now_ms(&self) -> i64 {
        wall_ms()
    }
}

/// A clock that moves only when told (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    us: AtomicI64,
}

impl ManualClock {
    /// A clock at `ms`.
    pub fn new(ms: i64) -> ManualClock {
        ManualClock { us: AtomicI64::new(ms * 1000) }
    }

    /// Sets the time to `ms`.
    pub fn set(&self, ms: i64) {
        self.us.store(ms * 1000, Ordering::SeqCst);
    }

    /// Moves the time on by `ms`.
    pub fn advance(&self, ms: i64) {
        self.us.fetch_add(ms * 1000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> i64 {
        self.us.load(Ordering::SeqCst)
    }
}

/// Milliseconds since the Unix epoch, from the wall clock. For the service, use its [`Clock`];
/// this is for tools outside it (the command line, the harness).
pub fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Microseconds since the Unix epoch, from the wall clock (see [`wall_ms`]).
pub fn wall_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Formats Unix milliseconds as ISO 8601 UTC with offset, e.g. `2026-11-20T14:03:07.123+00:00`.
pub fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}+00:00", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's method).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_000);
        assert_eq!((c.now_ms(), c.now_us()), (1_000, 1_000_000));
        c.advance(250);
        assert_eq!(c.now_ms(), 1_250);
        c.set(5);
        assert_eq!(c.now_us(), 5_000);
        let wall = SystemClock.now_ms();
        assert!((wall - wall_ms()).abs() < 60_000, "the system clock is the wall clock");
    }

    #[test]
    fn formats_iso8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000+00:00");
        assert_eq!(iso8601(1_795_183_387_123), "2026-11-20T14:03:07.123+00:00");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000+00:00");
    }
}
