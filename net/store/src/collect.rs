//! A `*` alert's firings collected into bodies (`decisions.md` §15): the writer holds each
//! alert's firings for [`COLLECT_MS`] from the first, then records them as one body of at most
//! [`TRIGGERS_PER_BODY_MAX`] (`triggers`, oldest first); what is left waits for the next body,
//! [`COLLECT_MS`] later. So a market-wide move makes one delivery per alert per second, not one
//! per pair. Sans-I/O: time is an argument.
//!
//! Bounds: an alert holds at most [`TRIGGERS_WAITING_MAX`] firings; at the bound its next
//! body leaves at once (more than one body a second, nothing dropped). Firings held here and
//! not yet recorded are lost if the process dies (at most [`COLLECT_MS`] of them); the shard's
//! per-pair cooldown has moved on as if they had been delivered.

use std::collections::HashMap;

use crate::store::FiringRecord;

/// How long a `*` alert's first firing waits for others to share its body, ms.
pub const COLLECT_MS: i64 = 1_000;
/// Firings one body carries at most.
pub const TRIGGERS_PER_BODY_MAX: usize = 100;
/// Firings one alert holds at most; at the bound a body leaves at once.
pub const TRIGGERS_WAITING_MAX: usize = 10 * TRIGGERS_PER_BODY_MAX;

/// One alert's firings waiting for their body.
#[derive(Debug)]
struct Waiting {
    /// When the next body leaves, Unix ms (the writer's clock).
    due_ms: i64,
    firings: Vec<FiringRecord>,
}

/// The `*` alerts' firings waiting for their bodies, by alert id.
#[derive(Debug, Default)]
pub struct Collector {
    waiting: HashMap<i64, Waiting>,
}

impl Collector {
    /// Holds `firing` (of a `*` alert, with its `symbol`), taken at `now_ms`.
    pub fn add(&mut self, firing: FiringRecord, now_ms: i64) {
        debug_assert!(firing.symbol.is_some() && firing.triggers.is_empty(), "one pair's firing");
        let w = self
            .waiting
            .entry(firing.alert_id)
            .or_insert_with(|| Waiting { due_ms: now_ms + COLLECT_MS, firings: Vec::new() });
        w.firings.push(firing);
        if w.firings.len() >= TRIGGERS_WAITING_MAX {
            w.due_ms = w.due_ms.min(now_ms);
        }
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Puts into `out` the bodies due at `now_ms` (at most `room`), each of at most
    /// [`TRIGGERS_PER_BODY_MAX`] firings, oldest first; an alert with more left waits
    /// [`COLLECT_MS`] for its next body. With `all`, every body now (the writer stopping).
    pub fn take_due(&mut self, now_ms: i64, all: bool, room: usize, out: &mut Vec<FiringRecord>) {
        let mut emptied = Vec::new();
        for (&id, w) in &mut self.waiting {
            while out.len() < room && (all || w.due_ms <= now_ms) && !w.firings.is_empty() {
                let n = w.firings.len().min(TRIGGERS_PER_BODY_MAX);
                let body: Vec<FiringRecord> = w.firings.drain(..n).collect();
                out.push(FiringRecord::collected(body));
                w.due_ms = if w.firings.len() >= TRIGGERS_WAITING_MAX { now_ms } else { now_ms + COLLECT_MS };
                if !all {
                    break;
                }
            }
            if w.firings.is_empty() {
                emptied.push(id);
            }
        }
        for id in emptied {
            self.waiting.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firing(alert: i64, symbol: &str, ts_ms: i64) -> FiringRecord {
        FiringRecord { symbol: Some(symbol.to_owned()), ..FiringRecord::at_price(alert, 100, ts_ms, false) }
    }

    fn symbols(body: &FiringRecord) -> Vec<&str> {
        body.triggers.iter().map(|t| t.symbol.as_deref().unwrap_or_default()).collect()
    }

    #[test]
    fn firings_of_one_second_share_one_body() {
        let mut c = Collector::default();
        c.add(firing(7, "BTCUSDT", 1_000), 10_000);
        c.add(firing(7, "ETHUSDT", 1_200), 10_400);
        c.add(firing(8, "SOLUSDT", 1_300), 10_500);
        let mut out = Vec::new();
        c.take_due(10_999, false, 100, &mut out);
        assert!(out.is_empty(), "not before a second has passed since the first");
        c.take_due(11_000, false, 100, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].alert_id, out[0].ts_ms, out[0].last), (7, 1_000, false), "trigger = the first");
        assert_eq!(symbols(&out[0]), ["BTCUSDT", "ETHUSDT"]);
        c.take_due(11_500, false, 100, &mut out);
        assert_eq!((out.len(), out[1].alert_id), (2, 8));
        assert!(c.is_empty());
    }

    #[test]
    fn more_than_a_body_holds_waits_a_second_for_the_next() {
        let mut c = Collector::default();
        for i in 0..250 {
            c.add(firing(1, &format!("P{i}"), i), 0);
        }
        let mut out = Vec::new();
        c.take_due(1_000, false, 100, &mut out);
        assert_eq!((out.len(), out[0].triggers.len(), out[0].ts_ms), (1, 100, 0));
        c.take_due(1_999, false, 100, &mut out);
        assert_eq!(out.len(), 1, "one body per second");
        c.take_due(2_000, false, 100, &mut out);
        c.take_due(3_000, false, 100, &mut out);
        let sizes: Vec<usize> = out.iter().map(|b| b.triggers.len()).collect();
        assert_eq!(sizes, [100, 100, 50]);
        assert_eq!(out[2].triggers[0].ts_ms, 200, "oldest first, none lost");
        assert!(c.is_empty());
    }

    #[test]
    fn at_the_bound_bodies_leave_at_once_and_stopping_takes_all() {
        let mut c = Collector::default();
        for i in 0..TRIGGERS_WAITING_MAX as i64 {
            c.add(firing(3, "BTCUSDT", i), 0);
        }
        let mut out = Vec::new();
        c.take_due(1, false, 100, &mut out);
        assert_eq!(out.len(), 1, "a full alert's body leaves before its second");
        c.add(firing(4, "ETHUSDT", 5), 1);
        c.take_due(2, true, 100, &mut out);
        let total: usize = out.iter().map(|b| b.triggers.len()).sum();
        assert_eq!(total, TRIGGERS_WAITING_MAX + 1, "every firing in a body");
        assert!(c.is_empty());
    }

    #[test]
    fn room_is_respected() {
        let mut c = Collector::default();
        for a in 0..5 {
            c.add(firing(a, "BTCUSDT", 0), 0);
        }
        let mut out = Vec::new();
        c.take_due(1_000, false, 3, &mut out);
        assert_eq!(out.len(), 3);
        out.clear();
        c.take_due(1_000, false, 3, &mut out);
        assert_eq!(out.len(), 2);
    }
}
