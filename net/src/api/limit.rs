//! Request limits: the per-key burst window and daily quota, and the per-address limit on
//! requests without a valid key. Pure logic; `now_ms` is an argument.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use rampart_engine::candle::DAY_MS;

/// Length of the burst window.
pub const WINDOW_MS: i64 = 60_000;
/// Failed-auth requests admitted per address in any window before 429 (the default of
/// `limits.unauthenticated_per_min`).
pub const UNAUTH_PER_WINDOW: usize = 60;
/// The most `limits.unauthenticated_per_min` may be: with [`ADDRESSES_MAX`] addresses each at
/// the limit, the logs hold 65 536 × 1 000 × 8 B = 512 MiB at worst (31 MiB at the default).
pub const UNAUTH_PER_WINDOW_MAX: usize = 1_000;
/// Request times a window makes room for when created; it grows with use up to its limit, so a
/// plan with a huge burst limit costs memory only for requests actually made.
const WINDOW_PREALLOCATED: usize = 128;
/// Addresses tracked at once; at the bound, addresses with no request in the last window
/// are forgotten, and if none is, the new address is refused (429) until one expires.
pub const ADDRESSES_MAX: usize = 65_536;
/// Keys tracked at once; at the bound, idle keys are forgotten first (as for addresses).
pub const KEYS_MAX: usize = 1_000_000;

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Too many requests in the window.
    Burst {
        /// Whole seconds until a request would be admitted (at least 1).
        retry_after_s: i64,
    },
    /// Daily quota used up.
    Quota {
        /// Seconds until 00:00 UTC.
        retry_after_s: i64,
    },
}

/// Where a key stands once a request was admitted: the `X-RateLimit-*` headers
/// (`decisions.md` §13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// The burst limit, requests per window (`X-RateLimit-Limit`).
    pub limit: u32,
    /// Requests still admitted now: the fewer of the window's and the day's
    /// (`X-RateLimit-Remaining`).
    pub remaining: u64,
    /// Whole seconds until one more request is admitted: 0 while `remaining` is not (`X-RateLimit-Reset`).
    pub reset_s: i64,
}

/// A sliding window log of admitted request times, bounded by the limit itself.
#[derive(Debug)]
struct Window {
    times: VecDeque<i64>,
}

impl Window {
    fn new(limit: usize) -> Window {
        Window { times: VecDeque::with_capacity(limit.min(WINDOW_PREALLOCATED)) }
    }

    /// Admits and records a request at `now_ms`, or says how long to wait.
    fn admit(&mut self, now_ms: i64, limit: usize) -> Result<(), i64> {
        while self.times.front().is_some_and(|&t| t <= now_ms - WINDOW_MS) {
            self.times.pop_front();
        }
        if self.times.len() >= limit {
            let oldest = self.times.front().copied().unwrap_or(now_ms);
            let wait_ms = oldest + WINDOW_MS - now_ms;
            return Err(((wait_ms + 999) / 1000).max(1));
        }
        self.times.push_back(now_ms);
        Ok(())
    }

    /// Requests the window still admits at `now_ms` (after [`Window::admit`] dropped the old
    /// ones), and whole seconds until it admits one more when it admits none.
    fn room(&self, now_ms: i64, limit: usize) -> (u64, i64) {
        let left = limit.saturating_sub(self.times.len()) as u64;
        let wait_s = match (left, self.times.front()) {
            (0, Some(&oldest)) => ((oldest + WINDOW_MS - now_ms + 999) / 1000).max(1),
            _ => 0,
        };
        (left, wait_s)
    }

    fn idle(&self, now_ms: i64) -> bool {
        self.times.back().is_none_or(|&t| t <= now_ms - WINDOW_MS)
    }
}

#[derive(Debug)]
struct KeyUse {
    window: Window,
    day: i64,
    used_today: u64,
}

/// Limits for every key and address seen.
#[derive(Debug)]
pub struct Limiter {
    keys: HashMap<i64, KeyUse>,
    addrs: HashMap<IpAddr, Window>,
    unauth_per_window: usize,
}

impl Default for Limiter {
    fn default() -> Limiter {
        Limiter::new(UNAUTH_PER_WINDOW)
    }
}

impl Limiter {
    /// A limiter admitting `unauth_per_window` requests without a valid key per address in any
    /// window (clamped to 1..=[`UNAUTH_PER_WINDOW_MAX`]).
    pub fn new(unauth_per_window: usize) -> Limiter {
        Limiter {
            keys: HashMap::new(),
            addrs: HashMap::new(),
            unauth_per_window: unauth_per_window.clamp(1, UNAUTH_PER_WINDOW_MAX),
        }
    }

    /// Admits a request by key `key_id` on a plan with `burst` per window and `quota` per day,
    /// and says where the key stands after it. A refused request is not counted.
    pub fn admit_key(&mut self, key_id: i64, burst: u32, quota: u64, now_ms: i64) -> Result<Usage, Refusal> {
        if self.keys.len() >= KEYS_MAX && !self.keys.contains_key(&key_id) {
            self.keys.retain(|_, k| !k.window.idle(now_ms));
        }
        let day = now_ms.div_euclid(DAY_MS);
        let k = self.keys.entry(key_id).or_insert_with(|| KeyUse {
            window: Window::new(burst as usize),
            day,
            used_today: 0,
        });
        if k.day != day {
            k.day = day;
            k.used_today = 0;
        }
        if k.used_today >= quota {
            let next_midnight = (day + 1) * DAY_MS;
            return Err(Refusal::Quota { retry_after_s: ((next_midnight - now_ms + 999) / 1000).max(1) });
        }
        k.window.admit(now_ms, burst as usize).map_err(|s| Refusal::Burst { retry_after_s: s })?;
        k.used_today += 1;
        let (window_left, window_wait_s) = k.window.room(now_ms, burst as usize);
        let quota_left = quota.saturating_sub(k.used_today);
        let reset_s = match (window_left, quota_left) {
            (_, 0) => (((day + 1) * DAY_MS - now_ms + 999) / 1000).max(1),
            (0, _) => window_wait_s,
            _ => 0,
        };
        Ok(Usage { limit: burst, remaining: window_left.min(quota_left), reset_s })
    }

    /// True when `addr` has sent its limit of requests without a valid key in the window: its
    /// next one is refused (429) whatever it carries, so it earns no storage lookup.
    pub fn unauthenticated_spent(&self, addr: IpAddr, now_ms: i64) -> bool {
        self.addrs
            .get(&addr)
            .is_some_and(|w| w.times.iter().filter(|&&t| t > now_ms - WINDOW_MS).count() >= self.unauth_per_window)
    }

    /// Records a request from `addr` that had no valid key; refuses once the address has sent
    /// its limit (default [`UNAUTH_PER_WINDOW`]) of them in the window.
    pub fn admit_unauthenticated(&mut self, addr: IpAddr, now_ms: i64) -> Result<(), Refusal> {
        if self.addrs.len() >= ADDRESSES_MAX && !self.addrs.contains_key(&addr) {
            self.addrs.retain(|_, w| !w.idle(now_ms));
            if self.addrs.len() >= ADDRESSES_MAX {
                return Err(Refusal::Burst { retry_after_s: 60 });
            }
        }
        let limit = self.unauth_per_window;
        let w = self.addrs.entry(addr).or_insert_with(|| Window::new(limit));
        w.admit(now_ms, limit).map_err(|s| Refusal::Burst { retry_after_s: s })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_795_183_387_000;

    #[test]
    fn burst_admits_120_in_any_minute() {
        let mut l = Limiter::default();
        for i in 0..120 {
            assert!(l.admit_key(1, 120, 100_000, T0 + i * 100).is_ok());
        }
        // The 121st, 12 s after the first: wait until the first leaves the window.
        assert_eq!(l.admit_key(1, 120, 100_000, T0 + 12_000), Err(Refusal::Burst { retry_after_s: 48 }));
        assert!(l.admit_key(2, 120, 100_000, T0 + 12_000).is_ok(), "other keys unaffected");
        assert_eq!(l.admit_key(1, 120, 100_000, T0 + 59_999), Err(Refusal::Burst { retry_after_s: 1 }));
        assert!(l.admit_key(1, 120, 100_000, T0 + 60_000).is_ok());
    }

    #[test]
    fn usage_counts_down_to_the_refusal_and_says_when_one_more_is_admitted() {
        let mut l = Limiter::default();
        for i in 0..5u64 {
            let u = l.admit_key(1, 5, 100, T0 + i as i64 * 1_000).expect("admitted");
            assert_eq!(u, Usage { limit: 5, remaining: 4 - i, reset_s: if i == 4 { 56 } else { 0 } });
        }
        // The refusal's Retry-After is the last answer's Reset, a moment later.
        assert_eq!(l.admit_key(1, 5, 100, T0 + 4_000), Err(Refusal::Burst { retry_after_s: 56 }));
        // The day's quota binds when it is the smaller.
        let midnight = (T0.div_euclid(DAY_MS) + 1) * DAY_MS;
        let u = l.admit_key(2, 120, 1, midnight - 10_000).expect("admitted");
        assert_eq!(u, Usage { limit: 120, remaining: 0, reset_s: 10 });
    }

    #[test]
    fn quota_resets_at_utc_midnight() {
        let mut l = Limiter::default();
        let midnight = (T0.div_euclid(DAY_MS) + 1) * DAY_MS;
        let t = midnight - 3_600_000;
        for i in 0..3 {
            assert!(l.admit_key(7, 120, 3, t + i).is_ok());
        }
        assert_eq!(l.admit_key(7, 120, 3, t + 10), Err(Refusal::Quota { retry_after_s: 3600 }));
        assert!(l.admit_key(7, 120, 3, midnight).is_ok());
    }

    #[test]
    fn unauthenticated_limit_is_per_address() {
        let mut l = Limiter::default();
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        for i in 0..UNAUTH_PER_WINDOW as i64 {
            assert_eq!(l.admit_unauthenticated(a, T0 + i), Ok(()));
        }
        assert!(matches!(l.admit_unauthenticated(a, T0 + 100), Err(Refusal::Burst { .. })));
        assert_eq!(l.admit_unauthenticated(b, T0 + 100), Ok(()));
    }
}
