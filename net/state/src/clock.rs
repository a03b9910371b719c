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

/// Unix milliseconds of an ISO 8601 date-time with its offset, as clients send them:
/// `YYYY-MM-DDTHH:MM:SS`, optional fraction (up to 9 digits, cut to milliseconds), then `Z` or
/// `±HH:MM`. `None` for anything else (no offset, an impossible date, years outside 1970–9999).
pub fn parse_iso8601(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() > 35 || !b.is_ascii() {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let fixed = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if fixed.iter().any(|&(i, c)| b[i] != c && !(i == 10 && b[i] == b't')) {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0, 4)?, num(5, 2)?, num(8, 2)?, num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let days_in_month = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return None,
    };
    if !(1970..=9999).contains(&y) || d < 1 || d > days_in_month || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if b[i] == b'.' {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        millis = num(i + 1, digits.min(3))? * 10_i64.pow(3 - digits.min(3) as u32);
        i += 1 + digits;
    }
    let offset_s = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            (oh * 3600 + om * 60) * if *sign == b'-' { -1 } else { 1 }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    Some(secs * 1000 + millis)
}

/// (year, month, day) to days since 1970-01-01, proleptic Gregorian (the inverse of
/// [`civil_from_days`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    fn iso8601_is_read_back_exactly_with_its_offset() {
        for ms in [0, 1_795_183_387_123, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(parse_iso8601(&iso8601(ms)), Some(ms), "{}", iso8601(ms));
        }
        assert_eq!(parse_iso8601("2026-11-20T14:03:07Z"), Some(1_795_183_387_000));
        assert_eq!(parse_iso8601("2026-11-20T16:03:07.5+02:00"), Some(1_795_183_387_500));
        assert_eq!(parse_iso8601("2026-11-20T09:03:07.123456789-05:00"), Some(1_795_183_387_123));
        assert_eq!(parse_iso8601("2024-02-29T00:00:00Z"), Some(1_709_164_800_000), "a leap day");
    }

    #[test]
    fn malformed_date_times_are_refused() {
        for bad in [
            "",
            "2026-11-20",
            "2026-11-20T14:03:07",
            "2026-11-20 14:03:07Z",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-11-20T24:00:00Z",
            "2026-11-20T14:60:00Z",
            "2026-11-20T14:03:61Z",
            "2026-11-20T14:03:07.Z",
            "2026-11-20T14:03:07.1234567890Z",
            "2026-11-20T14:03:07+2:00",
            "2026-11-20T14:03:07+24:00",
            "1969-12-31T23:59:59Z",
            "+2026-11-20T14:03:07Z",
            "2026-11-20T14:03:07Zjunk",
            "２０２６-11-20T14:03:07Z",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad:?}");
        }
    }

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
