//! One venue's REST budget (`rest::Ctx` holds one per venue), sans-I/O: time is an argument, and
//! the rule answers when a request may go; the REST thread only sleeps until then.
//!
//! Requests are paced by weight (`weight / rate` seconds each, one after another). A rate-limit
//! answer pauses the venue for its `Retry-After`, at most `most` (the venue's
//! `retry_after_max_s`) and never past [`RETRY_AFTER_MAX`]; a 429 or 403 pause longer
//! than [`PROBE_EVERY`] is probed instead of waited out: one request goes every
//! step, and the first one answered ends the pause. A 418 (a ban) is waited out.

use std::time::{Duration, Instant};

/// Longest `Retry-After` read from an answer; the venue's `retry_after_max_s` (default 300 s)
/// then bounds the pause (Binance's own bans can be longer: the venue answers 418 again and the
/// pause is renewed).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(86_400);
/// During a longer 429 or 403 pause, one request goes every this often; the first answered
/// ends the pause. A recovered venue's books are rebuilt within this plus one request.
pub const PROBE_EVERY: Duration = Duration::from_secs(10);

/// One venue's pacing state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pacer {
    /// When the next request may go (`None`: at once).
    next: Option<Instant>,
    /// The end of a rate-limit pause being probed.
    limited: Option<Instant>,
}

impl Pacer {
    /// Takes the slot of a request of `weight` at `rate` (weight per second) asked at `now`:
    /// when it may go (at `now` or later). While a pause is probed this request is the probe,
    /// and the next waits a step.
    pub fn reserve(&mut self, now: Instant, weight: f64, rate: f64) -> Instant {
        let slot = self.next.map_or(now, |t| t.max(now));
        let probing = self.limited.is_some_and(|t| t > slot);
        let step = if probing { PROBE_EVERY } else { Duration::from_secs_f64(weight / rate.max(0.001)) };
        self.next = Some(slot + step);
        slot
    }

    /// A rate-limit answer at `now` asked for a pause of `d`: paused for at most `most` (and
    /// [`RETRY_AFTER_MAX`]); with `probe` (a 429 or 403) a pause longer than [`PROBE_EVERY`]
    /// is probed after one step instead of waited out.
    pub fn pause(&mut self, now: Instant, d: Duration, most: Duration, probe: bool) {
        let wait = d.min(most).min(RETRY_AFTER_MAX);
        let until = now.checked_add(wait).unwrap_or(now);
        let until = if probe && wait > PROBE_EVERY {
            self.limited = Some(until);
            now + PROBE_EVERY
        } else {
            until
        };
        self.next = Some(self.next.map_or(until, |t| t.max(until)));
    }

    /// The venue answered at `now`: a probed pause is over, and the next request need not wait
    /// for it.
    pub fn answered(&mut self, now: Instant) {
        if self.limited.take().is_some() {
            self.next = Some(now);
        }
    }

    /// True while a rate-limit pause holds the venue, or its budget is spent for more than
    /// `slack` from `now`: optional requests (Binance's open-interest polls) then stay home
    /// rather than queue behind the spot feed's.
    pub fn is_busy(&self, now: Instant, slack: Duration) -> bool {
        self.limited.is_some() || self.next.is_some_and(|t| t > now + slack)
    }

    /// When the next request may go, if it must wait for anything.
    pub fn next(&self) -> Option<Instant> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn requests_are_paced_by_weight_one_after_another() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert_eq!(p.reserve(t0, 2.0, 4.0), t0, "the first goes at once");
        assert_eq!(p.reserve(t0, 2.0, 4.0), t0 + S / 2, "weight 2 at 4 a second: half a second later");
        assert_eq!(p.reserve(t0 + 10 * S, 1.0, 4.0), t0 + 10 * S, "a budget unused is not saved up");
    }

    /// `Retry-After: 18446744073709551615` once panicked the task ("overflow when adding
    /// duration to instant"); any duration is now cut to the venue's bound.
    #[test]
    fn a_pause_is_bounded_whatever_the_venue_says() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.pause(t0, Duration::from_secs(u64::MAX), 7 * S, false);
        p.pause(t0, Duration::MAX, 7 * S, true);
        assert_eq!(p.next(), Some(t0 + 7 * S), "cut to retry_after_max_s");
        let mut q = Pacer::default();
        q.pause(t0, Duration::MAX, Duration::MAX, false);
        assert_eq!(q.next(), Some(t0 + RETRY_AFTER_MAX), "and to the hard bound");
    }

    /// A long 429 pause is probed: one request after [`PROBE_EVERY`], the next a step later,
    /// and an answer ends the pause; a 418 (a ban) is waited out.
    #[test]
    fn a_long_rate_limit_pause_is_probed_and_an_answer_ends_it() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.pause(t0, Duration::from_secs(u64::MAX), 300 * S, true);
        assert_eq!(p.next(), Some(t0 + PROBE_EVERY), "a probe after a step");
        let probe = p.reserve(t0 + PROBE_EVERY, 1.0, 10.0);
        assert_eq!(probe, t0 + PROBE_EVERY, "this request is the probe");
        assert_eq!(p.reserve(probe, 1.0, 10.0), probe + PROBE_EVERY, "the next waits another step");
        p.answered(probe + S);
        assert_eq!(p.next(), Some(probe + S), "an answer ends the pause");
        let after = p.reserve(probe + S, 1.0, 10.0);
        assert_eq!(p.reserve(after, 1.0, 10.0), after + S / 10, "paced by weight again");
        p.pause(after, 120 * S, 300 * S, false);
        assert_eq!(p.next(), Some(after + 120 * S), "a ban is waited out");
        p.answered(after + S);
        assert_eq!(p.next(), Some(after + 120 * S), "an answer does not end a ban");
    }
}
