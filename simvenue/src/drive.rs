//! The market's driving: each round steps the simulated pairs and hands every book step, trade,
//! timer, candle push and delisting to its venue's module (`binance`, `bybit`, `okx`,
//! `bitget`), which writes that venue's messages. A floor above the venues' modules, which take
//! the market's state from `market` below them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use rampart_engine::book::{Book, Side};
use rampart_engine::candle::Candle;
use rampart_engine::fixed::{Price, Qty};
use rampart_engine::instrument::BookId;
use rampart_engine::market::{Tick, TickKind};
use rampart_engine::sim::{Sim, SimConfig};
use rampart_engine::Venue;

use super::market::{
    bars, CandleMark, Change, FaultKind, Kill, State, Topic, TradeRec, BOOK_LEVELS_MAX, INJECTED_PRICE_FACTOR_MAX,
    PAIRS_PER_ROUND_MAX, RECENT_TRADES_MAX, SLOW_TIMERS_MS,
};
use super::{binance, bitget, bybit, okx};

impl State {
    /// One market round at `now`: steps the due pairs and emits their messages, then runs the
    /// timers (delistings, disconnects, slow depth, heartbeats, candle pushes, depth-1 repeats).
    pub(crate) fn round(&mut self, now: i64) {
        let mut ticks = std::mem::take(&mut self.ticks);
        ticks.clear();
        self.sim.step_due(now, PAIRS_PER_ROUND_MAX, &mut ticks);
        if !self.overrides.is_empty() {
            let books = &self.books;
            let overrides = &self.overrides;
            ticks.retain(|t| books.get(t.book.index()).is_none_or(|b| !overrides.contains_key(&b.pair)));
        }
        self.absorb(&ticks, now);
        let pairs: Vec<usize> = self.overrides.keys().copied().collect();
        for pair in pairs {
            ticks.clear();
            if let Some(sim) = self.overrides.get_mut(&pair) {
                sim.step_due(now, 1, &mut ticks);
            }
            self.absorb(&ticks, now);
        }
        ticks.clear();
        self.ticks = ticks;
        super::perp_drive::round(self, now);
        self.timers(now);
    }

    /// Emits the messages of a batch of ticks: per book, one book message with every level
    /// change of the step, then one message per trade.
    fn absorb(&mut self, ticks: &[Tick], now: i64) {
        let mut i = 0;
        while i < ticks.len() {
            let book = ticks[i].book;
            let mut j = i;
            while j < ticks.len() && ticks[j].book == book {
                j += 1;
            }
            let mut changes = std::mem::take(&mut self.changes);
            changes.clear();
            for t in &ticks[i..j] {
                if let TickKind::Book { side, price, qty } = t.kind {
                    changes.push(Change { side, price: price.0, qty: qty.0 });
                }
            }
            if !changes.is_empty() {
                self.book_step(book.index(), &mut changes, now);
            }
            self.changes = changes;
            for t in &ticks[i..j] {
                if let TickKind::Trade { price, qty, taker_sell } = t.kind {
                    self.trade(book.index(), price.0, qty.0, taker_sell, now);
                }
            }
            i = j;
        }
    }

    /// Applies one step's level changes to book `b` and emits its book message.
    pub(crate) fn book_step(&mut self, b: usize, changes: &mut Vec<Change>, now: i64) {
        dedupe(changes);
        let Some(book) = self.books.get_mut(b) else { return };
        for c in changes.iter() {
            book.truth.apply(c.side, Price(c.price), Qty(c.qty));
        }
        if !book.listed {
            return;
        }
        book.last_change_ms = now;
        let venue = book.venue;
        let v = venue.index();
        self.book_events[v] += 1;
        let n = self.book_events[v];
        let every = |k: u64| k > 0 && n.is_multiple_of(k);
        let gap = book.pending.gap || every(self.cfg.faults.gap_every);
        let checksum = book.pending.checksum || every(self.cfg.faults.checksum_every);
        let reset = book.pending.reset;
        book.pending.gap = false;
        book.pending.checksum = false;
        book.pending.reset = false;
        self.stats.venue(venue).book_messages.fetch_add(1, Ordering::Relaxed);
        if gap {
            self.stats.fault(venue, FaultKind::Gap);
        }
        if reset && matches!(venue, Venue::Bybit | Venue::Okx) {
            self.stats.fault(venue, FaultKind::Reset);
        }
        if checksum && matches!(venue, Venue::Okx | Venue::Bitget) {
            self.stats.fault(venue, FaultKind::Checksum);
        }
        match venue {
            Venue::Binance => binance::on_book_step(self, b, changes, now, gap),
            Venue::Bybit => bybit::on_book_step(self, b, now, gap, reset),
            Venue::Okx => okx::on_book_step(self, b, changes, now, gap, checksum, reset),
            Venue::Bitget => bitget::on_book_step(self, b, changes, now, gap, checksum),
        }
    }

    /// Records and emits one trade of book `b`.
    pub(crate) fn trade(&mut self, b: usize, price: i64, qty: u64, taker_sell: bool, now: i64) {
        let Some(book) = self.books.get_mut(b) else { return };
        if !book.listed {
            return;
        }
        book.candles.trade(now, Price(price), rampart_engine::fixed::Qty(qty));
        book.last_trade_ms = now;
        book.trade_id += 1;
        book.trades_made += 1;
        let id = book.trade_id;
        let venue = book.venue;
        if venue == Venue::Bitget {
            if book.recent_trades.len() == RECENT_TRADES_MAX {
                book.recent_trades.pop_front();
            }
            book.recent_trades.push_back(TradeRec { id, price, qty, taker_sell, ts_ms: now });
        }
        self.stats.venue(venue).trades.fetch_add(1, Ordering::Relaxed);
        let t = TradeRec { id, price, qty, taker_sell, ts_ms: now };
        match venue {
            Venue::Binance => binance::on_trade(self, b, &t),
            Venue::Bybit => bybit::on_trade(self, b, &t),
            Venue::Okx => okx::on_trade(self, b, &t),
            Venue::Bitget => bitget::on_trade(self, b, &t),
        }
    }

    fn timers(&mut self, now: i64) {
        // Scheduled delistings.
        if self.delists.iter().any(|d| d.0 <= now) {
            let due: Vec<BookId> = self.delists.iter().filter(|d| d.0 <= now).map(|d| d.1).collect();
            self.delists.retain(|d| d.0 > now);
            for id in due {
                self.delist(id.index(), now);
            }
        }
        // Periodic disconnects.
        if self.next_disconnect_ms > 0 && now >= self.next_disconnect_ms {
            self.next_disconnect_ms = now + self.cfg.faults.disconnect_every_s as i64 * 1000;
            for v in self.cfg.venues.clone() {
                if self.kill_venue(v, &Kill::Drop) > 0 {
                    self.stats.fault(v, FaultKind::Disconnect);
                }
            }
        }
        bybit::repeat_depth1(self, now);
        if now - self.last_second_ms >= SLOW_TIMERS_MS {
            self.last_second_ms = now;
            binance::flush_slow(self, now);
            okx::heartbeats(self, now);
            self.push_candles(now);
        }
    }

    /// Pushes the current bar of every subscribed OKX and Bitget candle channel whose bar changed
    /// since its last push (and, when a bar closed, the closed bar first).
    fn push_candles(&mut self, now: i64) {
        let topics: Vec<Topic> =
            self.subs.keys().filter(|t| matches!(t, Topic::OkxCandle(..) | Topic::BitgetCandle(..))).copied().collect();
        for topic in topics {
            let (Topic::OkxCandle(id, tf) | Topic::BitgetCandle(id, tf)) = topic else { continue };
            let b = id.index();
            let Some(book) = self.books.get(b) else { continue };
            if !book.listed {
                continue;
            }
            let bars = bars(book, tf, now);
            let Some(&current) = bars.last() else { continue };
            let mark = book.candle_marks[tf.index()];
            let mut rows: Vec<(Candle, bool)> = Vec::new();
            if mark.open_ms != 0 && current.open_ms > mark.open_ms {
                if let Some(closed) = bars.iter().rev().find(|c| c.open_ms == mark.open_ms) {
                    rows.push((*closed, true));
                }
            }
            if current.open_ms != mark.open_ms || book.last_trade_ms > mark.pushed_ms {
                rows.push((current, false));
            }
            if rows.is_empty() {
                continue;
            }
            for (bar, confirmed) in rows {
                let text = match topic {
                    Topic::OkxCandle(..) => okx::candle_push(book, tf, &bar, confirmed),
                    _ => bitget::candle_push(book, tf, &[bar], false, now),
                };
                self.publish(&topic, text);
            }
            if let Some(book) = self.books.get_mut(b) {
                book.candle_marks[tf.index()] = CandleMark { open_ms: current.open_ms, pushed_ms: now };
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Control.

    /// Delists book `b` now: it leaves the venue's listing and its streams stop (Bybit first
    /// sends `u=1` with empty sides on every depth view).
    pub(crate) fn delist(&mut self, b: usize, now: i64) {
        let Some(book) = self.books.get_mut(b) else { return };
        if !book.listed {
            return;
        }
        book.listed = false;
        let venue = book.venue;
        self.stats.fault(venue, FaultKind::Delist);
        if venue == Venue::Bybit {
            bybit::on_delist(self, b, now);
        }
        eprintln!("sim-venue: {} delisted on {venue}", self.books[b].symbol);
    }

    /// Lists delisted book `b` again: its streams resume from its true book.
    pub(crate) fn relist(&mut self, b: usize) {
        let Some(book) = self.books.get_mut(b) else { return };
        book.listed = true;
        eprintln!("sim-venue: {} listed again on {}", book.symbol, book.venue);
    }

    /// A trade on book `b` at `price` (rounded to the tick) of `qty` (rounded to the lot, at
    /// least one lot) now; the pair's simulated price moves there so the market continues from
    /// it. The taker buys at or above the mid, sells below. A price outside
    /// [`INJECTED_PRICE_FACTOR_MAX`] times the mid either way is refused (an error message).
    /// Emits a trade at `price` (rounded to the tick) now and moves the pair there; returns the
    /// traded price as the venue's text and the wall-clock microsecond at which the trade was
    /// published (queued for the subscribers' connections, after the pair's restart: the latency
    /// harness measures a probe's webhook from it).
    pub(crate) fn inject_trade(
        &mut self,
        b: usize,
        price: i64,
        qty: Option<u64>,
        now: i64,
    ) -> Result<(String, i64), String> {
        let Some(book) = self.books.get(b) else { return Err("no such book".into()) };
        let mid = book.truth.mid().map_or(book.tick.max(1) * 1000, |m| m.0);
        if price < mid / INJECTED_PRICE_FACTOR_MAX || price > mid.saturating_mul(INJECTED_PRICE_FACTOR_MAX) {
            return Err(format!(
                "price must be within {INJECTED_PRICE_FACTOR_MAX} times the book's mid ({}) either way",
                super::text::fixed(mid, book.px_dec)
            ));
        }
        let tick = book.tick.max(1);
        let lot = book.lot.max(1) as u64;
        let price = ((price + tick / 2) / tick).max(1) * tick;
        let qty = match qty {
            Some(q) => (q / lot).max(1) * lot,
            None => lot * 10,
        };
        let taker_sell = book.truth.mid().is_some_and(|m| price < m.0);
        let pair = book.pair;
        let text = super::text::fixed(price, book.px_dec);
        self.restart_pair(pair, price, now);
        let published_us = crate::now_us();
        self.trade(b, price, qty, taker_sell, now);
        Ok((text, published_us))
    }

    /// Restarts pair `pair`'s walk at `price`: a one-pair `Sim` whose pair is priced there takes
    /// over, and each venue book of the pair gets one book message that turns the true book into
    /// the new simulation's book (levels it does not hold removed, its levels set).
    ///
    /// Rationale: `engine::sim::Sim` has no way to move a pair's price; starting a fresh
    /// simulation of the pair at the new price keeps the engine untouched and the books
    /// consistent (every subscriber's book equals the true book after the message).
    fn restart_pair(&mut self, pair: usize, price: i64, now: i64) {
        self.restarts += 1;
        let mut universe = self.universe.clone();
        if let Some(spec) = universe.get_mut(pair) {
            spec.price = Price(price).to_f64();
            spec.young = false;
        }
        let seed = self.cfg.seed ^ self.restarts.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut sim = Sim::new(SimConfig { seed, ..SimConfig::default() }, &universe, &self.registry, &[pair]);
        // `history` leaves the pair's walk at the spec's price; the bars themselves are not used.
        sim.history(0, now, 2);
        let mut ticks = Vec::with_capacity(sim.ticks_per_step_max());
        sim.start_pair(0, now, &mut ticks);
        let ids: Vec<BookId> = sim.pair_books(0).collect();
        for id in ids {
            let mut fresh = Book::new(BOOK_LEVELS_MAX);
            for t in ticks.iter().filter(|t| t.book == id) {
                if let TickKind::Book { side, price, qty } = t.kind {
                    fresh.apply(side, price, qty);
                }
            }
            let Some(book) = self.books.get(id.index()) else { continue };
            let mut changes = Vec::new();
            for (side, old, new) in
                [(Side::Bid, book.truth.bids(), fresh.bids()), (Side::Ask, book.truth.asks(), fresh.asks())]
            {
                for l in old.iter().filter(|l| !new.iter().any(|n| n.price == l.price)) {
                    changes.push(Change { side, price: l.price.0, qty: 0 });
                }
                for l in new.iter().filter(|n| !old.contains(n)) {
                    changes.push(Change { side, price: l.price.0, qty: l.qty.0 });
                }
            }
            if !changes.is_empty() {
                self.book_step(id.index(), &mut changes, now);
            }
        }
        self.overrides.insert(pair, sim);
    }

    /// Sets one level of book `b` and emits it: at `price`, or strictly between the true book's
    /// `depth`-th and next level of `side` (a price off the simulated grid). Returns the price
    /// as the venue's text.
    pub(crate) fn place_level(
        &mut self,
        b: usize,
        side: Side,
        price: Option<i64>,
        depth: Option<usize>,
        qty: u64,
        now: i64,
    ) -> Result<String, String> {
        let Some(book) = self.books.get(b) else { return Err("no such book".into()) };
        let tick = book.tick.max(1);
        let price = match (price, depth) {
            (Some(p), _) => p,
            (None, Some(d)) => {
                let levels = match side {
                    Side::Bid => book.truth.bids(),
                    Side::Ask => book.truth.asks(),
                };
                let (Some(a), Some(c)) = (levels.get(d), levels.get(d + 1)) else {
                    return Err(format!("the book has fewer than {} levels on that side", d + 2));
                };
                let (a, c) = (a.price.0, c.price.0);
                // The first tick past the deeper level, if it is still short of the shallower.
                let p = match side {
                    Side::Bid => c + tick,
                    Side::Ask => c - tick,
                };
                if (p - a).abs() < tick || (side == Side::Bid && p >= a) || (side == Side::Ask && p <= a) {
                    return Err("no free price between those levels".into());
                }
                p
            }
            (None, None) => return Err("give 'price' or 'depth'".into()),
        };
        if price % tick != 0 {
            return Err("the price is not a multiple of the tick".into());
        }
        let text = crate::text::fixed(price, book.px_dec);
        let mut changes = vec![Change { side, price, qty }];
        self.book_step(b, &mut changes, now);
        Ok(text)
    }

    /// Sends an update that crosses book `b` (a bid at the best ask), then one that removes
    /// that bid again. False when the book has no ask.
    pub(crate) fn cross(&mut self, b: usize, now: i64) -> bool {
        let Some(book) = self.books.get(b) else { return false };
        let Some(ask) = book.truth.best_ask() else { return false };
        let qty = (book.lot.max(1) as u64) * 10;
        let venue = book.venue;
        let mut changes = vec![Change { side: Side::Bid, price: ask.price.0, qty }];
        self.book_step(b, &mut changes, now);
        let mut changes = vec![Change { side: Side::Bid, price: ask.price.0, qty: 0 }];
        self.book_step(b, &mut changes, now);
        self.stats.fault(venue, FaultKind::Crossed);
        true
    }
}

/// Keeps the last change per (side, price), in first-seen order of the keys.
fn dedupe(changes: &mut Vec<Change>) {
    if changes.len() < 2 {
        return;
    }
    let mut last: HashMap<(bool, i64), usize> = HashMap::with_capacity(changes.len());
    for (i, c) in changes.iter().enumerate() {
        last.insert((c.side == Side::Bid, c.price), i);
    }
    let mut i = 0;
    changes.retain(|c| {
        let keep = last.get(&(c.side == Side::Bid, c.price)) == Some(&i);
        i += 1;
        keep
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedupe_keeps_the_last_size_per_level() {
        let c = |bid: bool, price: i64, qty: u64| Change { side: if bid { Side::Bid } else { Side::Ask }, price, qty };
        let mut v = vec![c(true, 10, 1), c(false, 10, 2), c(true, 10, 0), c(true, 9, 5)];
        dedupe(&mut v);
        assert_eq!(v, vec![c(false, 10, 2), c(true, 10, 0), c(true, 9, 5)]);
    }
}
