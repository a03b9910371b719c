//! Webhook deliveries handed in memory from a market node's writer to its publisher (issue #59,
//! docs/design/cluster.md step (a)): the publisher sends a row its own writer committed with the
//! whole delivery in its message, so a worker sends the first delivery without reading the row.
//!
//! A delivery is handed once and taken at most once: the publisher takes it the first time it
//! publishes the row, so a row published again (a retry, a stream made again) goes as its id
//! alone and the worker reads the row, as before. It is taken only within [`FRESH_MS`] of its
//! commit, sooner than another node's publisher hands over the row (5 s,
//! `rampart_cluster::publisher::OTHERS_AFTER`, with 2 s for the nodes' clocks): so a message
//! carrying a delivery is the row's first publish, or (a deposed owner's publisher still sending
//! while its standby publishes the same rows) within the stream's two-minute duplicate window of
//! the other, which the stream drops; either way never a second first delivery of a firing.
//!
//! Bound: [`HANDOFF_MAX`] deliveries held; at the bound, those older than [`FRESH_MS`] are
//! dropped, then new ones are not held (their rows go as ids alone: slower, nothing lost).

use std::collections::HashMap;
use std::sync::Mutex;

/// Deliveries held at most (four of the writer's batches of 4 096; ~16 MiB of bodies at 1 KiB).
pub const HANDOFF_MAX: usize = 16_384;

/// How long after its commit a delivery may be taken: less than the 5 s after which another
/// node's publisher takes the row (see the module's note). In a storm on the 2-core VM the
/// publisher hands rows over 0.5–1.5 s after their commit; one later goes as its id alone.
pub const FRESH_MS: i64 = 3_000;

/// A webhook delivery as its writer committed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handed {
    /// The alert's account.
    pub account_id: i64,
    /// The alert.
    pub alert_id: i64,
    /// The firing's time (with `alert_id`, the firing's identity).
    pub trigger_ms: i64,
    /// The webhook URL.
    pub url: String,
    /// The body sent (the event body, or the chat format's).
    pub body: String,
}

/// The deliveries of the writer's commits not yet taken by the publisher.
#[derive(Debug, Default)]
pub struct Handoff {
    held: Mutex<HashMap<(i64, i64), (i64, Handed)>>,
}

impl Handoff {
    /// Holds a commit's deliveries, committed at `now_ms`. How many were not held (the bound).
    pub fn put(&self, deliveries: Vec<Handed>, now_ms: i64) -> usize {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.len() + deliveries.len() > HANDOFF_MAX {
            held.retain(|_, (at, _)| now_ms - *at < FRESH_MS);
        }
        let mut dropped = 0;
        for d in deliveries {
            if held.len() >= HANDOFF_MAX {
                dropped += 1;
                continue;
            }
            held.insert((d.alert_id, d.trigger_ms), (now_ms, d));
        }
        debug_assert!(held.len() <= HANDOFF_MAX, "the handoff stays within its bound");
        dropped
    }

    /// The delivery of the firing `(alert_id, trigger_ms)`, taken: `None` when it was never
    /// handed, was taken already, or was committed [`FRESH_MS`] or more before `now_ms`.
    pub fn take(&self, alert_id: i64, trigger_ms: i64, now_ms: i64) -> Option<Handed> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let (at, d) = held.remove(&(alert_id, trigger_ms))?;
        (now_ms - at < FRESH_MS).then_some(d)
    }

    /// Deliveries held now.
    pub fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handed(alert_id: i64, trigger_ms: i64) -> Handed {
        Handed { account_id: 1, alert_id, trigger_ms, url: "https://example.com/h".into(), body: "{}".into() }
    }

    #[test]
    fn a_delivery_is_taken_once() {
        let h = Handoff::default();
        assert_eq!(h.put(vec![handed(7, 1_000), handed(8, 1_000)], 5_000), 0);
        assert_eq!(h.take(7, 1_000, 5_001), Some(handed(7, 1_000)));
        assert_eq!(h.take(7, 1_000, 5_002), None, "taken already");
        assert_eq!(h.take(7, 1_001, 5_002), None, "another firing of the alert");
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn a_stale_delivery_is_not_taken() {
        let h = Handoff::default();
        h.put(vec![handed(7, 1_000), handed(8, 1_000)], 5_000);
        assert_eq!(h.take(7, 1_000, 5_000 + FRESH_MS - 1).map(|d| d.alert_id), Some(7));
        assert_eq!(h.take(8, 1_000, 5_000 + FRESH_MS), None, "too old: the row goes as its id");
        assert!(h.is_empty(), "and it is gone");
    }

    #[test]
    fn at_the_bound_stale_ones_go_then_new_ones_are_not_held() {
        let h = Handoff::default();
        let old: Vec<Handed> = (0..HANDOFF_MAX as i64 - 10).map(|i| handed(i, 1)).collect();
        assert_eq!(h.put(old, 0), 0);
        assert_eq!(h.put((0..20).map(|i| handed(i, 2)).collect(), 1_000), 10, "ten past the bound");
        assert_eq!(h.len(), HANDOFF_MAX);
        assert_eq!(h.put(vec![handed(1, 3)], FRESH_MS), 0, "the stale ones made room");
        assert_eq!(h.len(), 11);
        assert_eq!(h.take(1, 3, FRESH_MS), Some(handed(1, 3)));
    }
}
