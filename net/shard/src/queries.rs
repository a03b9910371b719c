//! The shard's answers to the fronts' queries (`GET /v1/candles`, `GET /v1/book`,
//! `GET /v1/perp/{symbol}/history`, a derivatives alert's test send): a copy of what it holds, sent on the query's reply channel.
//! A command, not a tick: it allocates the copy.

use rampart_state::{Command, DepthView};

use crate::Shard;

impl Shard {
    /// Answers a query command with a copy of what the shard holds (an unowned book: nothing).
    pub(crate) fn answer(&self, cmd: Command) {
        match cmd {
            Command::Candles { book, tf, limit, reply } => {
                let bars = self.market.get(book).map_or_else(Vec::new, |s| {
                    let ring = s.candles.ring(tf);
                    ring.iter().skip(ring.len().saturating_sub(limit)).copied().collect()
                });
                let _ = reply.send(bars);
            }
            Command::Depth { book, limit, reply } => {
                let now = self.config.clock.now_ms();
                let view = self.market.get(book).map_or_else(DepthView::default, |s| DepthView {
                    ts_ms: now,
                    bids: s.book.bids().iter().take(limit).copied().collect(),
                    asks: s.book.asks().iter().take(limit).copied().collect(),
                    in_sync: !s.stale && !s.crossed,
                });
                let _ = reply.send(view);
            }
            Command::PerpHistory { book, window, reply } => {
                let now = self.config.clock.now_ms();
                let perp = self.perps.as_ref().and_then(|p| p.book(book));
                let candles = self.market.get(book).map(|s| &s.candles);
                let price_at = |t: i64| candles.and_then(|c| c.close_at(t)).map(|p| p.to_f64());
                let slot_ms = window.duration_ms() / rampart_engine::perp_window::SLOTS as i64;
                let slots = perp.map_or_else(Vec::new, |b| {
                    b.history(now, window).map(|s| s.valued(slot_ms, now, price_at)).collect()
                });
                let _ = reply.send(slots);
            }
            Command::PerpTrigger { book, condition, reply } => {
                let now = self.config.clock.now_ms();
                let perp = self.perps.as_ref().and_then(|p| p.book(book));
                let _ = reply.send(perp.and_then(|b| crate::perp_alerts::test_trigger(b, &condition, now)));
            }
            other => debug_assert!(false, "not a query: {other:?}"),
        }
    }
}
