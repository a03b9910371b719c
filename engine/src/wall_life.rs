//! Wall lifecycles of one book: each wall scan opens, updates and ends walls, and the trades
//! between scans say how an ended wall went (`decisions.md` §12's rule: `filled` when a trade
//! reached its price since the scan before, `pulled` otherwise) and how much was traded at its
//! price while it stood. Feeds the wall history (`GET /v1/walls/{symbol}/history`, issue #48)
//! and, through [`WallLife::ended_last_scan`], the `pulled` and `filled` wall alerts.
//!
//! Sans-I/O: time is the scan's `now_ms`. Everything is allocated by [`WallLife::new`]; a scan
//! or a trade allocates nothing.
//!
//! Choices where the spec is silent, and why:
//! - A wall is its (side, price), as for its age in `wall`: a wall that moves by one tick is a
//!   new wall, and the old one ends.
//! - `first_seen_ms` is the first scan's time less the wall's age there, so it agrees with the
//!   `age` that `GET /v1/densities` shows.
//! - A trade reached a bid when it was at or below the bid's price, an ask at or above.
//! - The traded value counts the trades at exactly the wall's price from the scan that first saw
//!   it to the scan that finds it gone (those are the trades that may have filled it; before its
//!   first scan nothing says it stood there), in the quote asset, converted to USD at the quote's
//!   USD price of the latest scan (for an ended wall, the scan that ended it).
//! - `max_usd` is the largest USD value the wall had at a scan that saw it; `None` while the
//!   quote asset has no USD price.
//! - A wall the scan leaves out at its bound ([`WALLS_MAX`], the farthest dropped) ends as gone.
//!
//! Bounds: open walls are at most [`WALLS_MAX`] (what one scan reports). Ended walls go into a
//! ring of [`WALL_HISTORY_MAX`] per book; at the bound the oldest is dropped first, so a book
//! whose walls come and go quickly keeps less than [`WALL_HISTORY_MS`]. Readers show only the
//! walls last seen within [`WALL_HISTORY_MS`] ([`WallRecord::shown`]).

use crate::book::Side;
use crate::fixed::{Price, Qty};
use crate::wall::{usd_value, Wall, WALLS_MAX};

/// Ended walls kept per book; at the bound the oldest is dropped first.
///
/// Rationale: one ring of about 18 KiB per book, a tenth of its candle rings; 256 walls is more
/// than a day of walls on most pairs (a wall lasts at least one 2 s scan, most last minutes).
pub const WALL_HISTORY_MAX: usize = 256;
/// How far back the history shows: walls last seen within the last 24 h.
pub const WALL_HISTORY_MS: i64 = 24 * 3_600_000;

/// Why a wall ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Gone {
    /// A trade reached its price between the last scan that saw it and the scan that missed it.
    Filled,
    /// No trade reached it: it was cancelled (or moved).
    Pulled,
}

impl Gone {
    /// Its name in the API (a `wall.gone` event's and a wall alert's `reason`).
    pub fn as_str(self) -> &'static str {
        WallOutcome::from(self).as_str()
    }
}

/// Where a wall of the history stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WallOutcome {
    /// Seen at the last scan.
    Open,
    /// Ended, filled.
    Filled,
    /// Ended, pulled.
    Pulled,
}

impl WallOutcome {
    /// Every outcome, in the order the API lists them.
    pub const ALL: [WallOutcome; 3] = [WallOutcome::Open, WallOutcome::Filled, WallOutcome::Pulled];
    /// The values the API takes, for its 422 messages.
    pub const ALLOWED: &'static str = "open, filled, pulled";

    /// Its name in the API (`outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            WallOutcome::Open => "open",
            WallOutcome::Filled => "filled",
            WallOutcome::Pulled => "pulled",
        }
    }

    /// The outcome named `s` (exactly as the API spells it), if any.
    pub fn parse(s: &str) -> Option<WallOutcome> {
        WallOutcome::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl From<Gone> for WallOutcome {
    fn from(g: Gone) -> WallOutcome {
        match g {
            Gone::Filled => WallOutcome::Filled,
            Gone::Pulled => WallOutcome::Pulled,
        }
    }
}

/// One wall of the history: its life so far, or its whole life once ended.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct WallRecord {
    /// Book side.
    pub side: Side,
    /// Its price.
    pub price: Price,
    /// When it was first seen standing, Unix milliseconds.
    pub first_seen_ms: i64,
    /// The last scan that saw it, Unix milliseconds.
    pub last_seen_ms: i64,
    /// Its largest USD value at a scan; `None` without a USD price for the quote asset.
    pub max_usd: Option<f64>,
    /// Its largest ratio to the median level size at a scan.
    pub max_ratio: f64,
    /// The USD value traded at its price while it stood; `None` without a USD price.
    pub executed_usd: Option<f64>,
    /// Open, or how it ended.
    pub outcome: WallOutcome,
}

impl WallRecord {
    /// True when a reader at `now_ms` shows it: last seen within [`WALL_HISTORY_MS`].
    pub fn shown(&self, now_ms: i64) -> bool {
        self.last_seen_ms > now_ms - WALL_HISTORY_MS
    }
}

/// A wall that a scan found gone, for the wall alerts.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct WallEnded {
    /// The wall as the last scan that saw it reported it.
    pub wall: Wall,
    /// Its USD value at that scan.
    pub usd: Option<f64>,
    /// Why it ended.
    pub gone: Gone,
    /// How long it was seen standing: from first seen to the last scan that saw it, ms.
    pub lifetime_ms: i64,
    /// The scan that found it gone, Unix milliseconds.
    pub ended_ms: i64,
    /// Its history entry.
    pub record: WallRecord,
}

/// A wall seen at the last scan.
#[derive(Clone, Copy, Debug)]
struct Open {
    wall: Wall,
    usd: Option<f64>,
    record: WallRecord,
    /// Value traded at its price since its first scan, quote asset.
    executed_quote: f64,
}

/// The lowest and highest trade price since the last scan; `None` without a trade.
#[derive(Clone, Copy, Debug, Default)]
struct Reached(Option<(Price, Price)>);

impl Reached {
    fn note(&mut self, p: Price) {
        self.0 = Some(match self.0 {
            None => (p, p),
            Some((lo, hi)) => (lo.min(p), hi.max(p)),
        });
    }

    fn gone(self, side: Side, price: Price) -> Gone {
        let reached = match (self.0, side) {
            (None, _) => false,
            (Some((lo, _)), Side::Bid) => lo <= price,
            (Some((_, hi)), Side::Ask) => hi >= price,
        };
        if reached {
            Gone::Filled
        } else {
            Gone::Pulled
        }
    }
}

/// One book's walls through their lives, and the ring of those that ended.
#[derive(Clone, Debug)]
pub struct WallLife {
    open: Vec<Open>,
    /// Ended walls in the order they ended; once full, `ended_next` is the oldest.
    ended: Vec<WallRecord>,
    ended_next: usize,
    ended_total: u64,
    ended_now: Vec<WallEnded>,
    reached: Reached,
}

impl Default for WallLife {
    fn default() -> WallLife {
        WallLife::new()
    }
}

impl WallLife {
    /// Empty, with room for [`WALLS_MAX`] open walls and [`WALL_HISTORY_MAX`] ended ones.
    pub fn new() -> WallLife {
        WallLife {
            open: Vec::with_capacity(WALLS_MAX),
            ended: Vec::with_capacity(WALL_HISTORY_MAX),
            ended_next: 0,
            ended_total: 0,
            ended_now: Vec::with_capacity(WALLS_MAX),
            reached: Reached::default(),
        }
    }

    /// Takes one trade of the book: whether it reached a wall's price, and its value at an open
    /// wall's price. O(open walls); allocates nothing.
    pub fn on_trade(&mut self, price: Price, qty: Qty) {
        self.reached.note(price);
        for o in self.open.iter_mut().filter(|o| o.wall.price == price) {
            o.executed_quote += qty.to_f64() * price.to_f64();
        }
    }

    /// Takes the book's wall scan at `now_ms` (`walls` as `wall::scan` reports them, at most
    /// [`WALLS_MAX`]; `quote_usd`, the quote asset's USD price): ends the walls seen before and
    /// missing now, into the ring, updates those still there and opens the new ones. Returns the
    /// walls it ended. Allocates nothing.
    pub fn on_scan(&mut self, now_ms: i64, walls: &[Wall], quote_usd: Option<f64>) -> &[WallEnded] {
        debug_assert!(walls.len() <= WALLS_MAX, "a scan reports at most WALLS_MAX walls");
        self.ended_now.clear();
        let mut i = 0;
        while i < self.open.len() {
            let o = self.open[i];
            if walls.iter().any(|w| w.side == o.wall.side && w.price == o.wall.price) {
                i += 1;
                continue;
            }
            self.open.swap_remove(i);
            self.end(o, now_ms, quote_usd);
        }
        for w in walls.iter().take(WALLS_MAX) {
            let usd = quote_usd.map(|q| usd_value(w.qty, w.price, q));
            match self.open.iter_mut().find(|o| o.wall.side == w.side && o.wall.price == w.price) {
                Some(o) => o.seen(*w, usd, quote_usd, now_ms),
                None => self.open.push(Open::first(*w, usd, now_ms)),
            }
        }
        self.reached = Reached::default();
        &self.ended_now
    }

    /// Ends `o` at the scan of `now_ms`: its traded value counts the trades up to this scan.
    fn end(&mut self, o: Open, now_ms: i64, quote_usd: Option<f64>) {
        let gone = self.reached.gone(o.wall.side, o.wall.price);
        let executed_usd = quote_usd.map(|q| o.executed_quote * q).or(o.record.executed_usd);
        let record = WallRecord { outcome: gone.into(), executed_usd, ..o.record };
        self.push_ended(record);
        let lifetime_ms = record.last_seen_ms - record.first_seen_ms;
        // Room for WALLS_MAX: at most every open wall ends at one scan.
        debug_assert!(self.ended_now.len() < self.ended_now.capacity());
        self.ended_now.push(WallEnded { wall: o.wall, usd: o.usd, gone, lifetime_ms, ended_ms: now_ms, record });
    }

    fn push_ended(&mut self, record: WallRecord) {
        if self.ended.len() < WALL_HISTORY_MAX {
            self.ended.push(record);
        } else {
            self.ended[self.ended_next] = record;
            self.ended_next = (self.ended_next + 1) % WALL_HISTORY_MAX;
        }
        self.ended_total += 1;
    }

    /// The walls the last scan ended (the wall alerts' `pulled` and `filled`).
    pub fn ended_last_scan(&self) -> &[WallEnded] {
        &self.ended_now
    }

    /// True when no wall is open.
    pub fn is_quiet(&self) -> bool {
        self.open.is_empty()
    }

    /// The open walls as of the last scan, in no particular order.
    pub fn open(&self) -> impl Iterator<Item = WallRecord> + '_ {
        self.open.iter().map(|o| o.record)
    }

    /// The ended walls kept, the last ended first (so by last seen, newest first).
    pub fn ended(&self) -> impl Iterator<Item = &WallRecord> + '_ {
        // Once the ring is full, `ended_next` is the oldest: oldest to newest is `[next..]` then
        // `[..next]` (before it is full, `next` is 0).
        let (recent, oldest) = self.ended.split_at(self.ended_next);
        oldest.iter().chain(recent).rev()
    }

    /// Walls ended since creation: moves exactly when [`WallLife::ended`] changes.
    pub fn ended_total(&self) -> u64 {
        self.ended_total
    }
}

impl Open {
    fn first(wall: Wall, usd: Option<f64>, now_ms: i64) -> Open {
        let record = WallRecord {
            side: wall.side,
            price: wall.price,
            first_seen_ms: now_ms - wall.age_ms.max(0),
            last_seen_ms: now_ms,
            max_usd: usd,
            max_ratio: wall.ratio,
            executed_usd: usd.map(|_| 0.0),
            outcome: WallOutcome::Open,
        };
        Open { wall, usd, record, executed_quote: 0.0 }
    }

    fn seen(&mut self, wall: Wall, usd: Option<f64>, quote_usd: Option<f64>, now_ms: i64) {
        let r = &mut self.record;
        r.last_seen_ms = now_ms;
        r.max_ratio = r.max_ratio.max(wall.ratio);
        r.max_usd = match (r.max_usd, usd) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(q) = quote_usd {
            r.executed_usd = Some(self.executed_quote * q);
        }
        self.wall = wall;
        self.usd = usd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: i64 = 100_000_000;

    fn wall(side: Side, price: i64, qty: u64, ratio: f64, age_ms: i64) -> Wall {
        Wall { side, price: Price(price * P), qty: Qty(qty * 100_000_000), ratio, dist_pct: 1.0, age_ms }
    }

    fn bid(age_ms: i64) -> Wall {
        wall(Side::Bid, 90, 1_000, 20.0, age_ms)
    }

    fn ask(age_ms: i64) -> Wall {
        wall(Side::Ask, 110, 500, 12.0, age_ms)
    }

    #[test]
    fn a_wall_placed_aged_and_pulled() {
        let mut l = WallLife::new();
        assert!(l.on_scan(10_000, &[bid(0)], Some(1.0)).is_empty());
        assert!(l.on_scan(12_000, &[bid(2_000)], Some(1.0)).is_empty());
        let open: Vec<WallRecord> = l.open().collect();
        assert_eq!(open.len(), 1);
        assert_eq!((open[0].first_seen_ms, open[0].last_seen_ms, open[0].outcome), (10_000, 12_000, WallOutcome::Open));
        // A trade far above the bid reaches nothing: the bid is pulled.
        l.on_trade(Price(100 * P), Qty(P as u64));
        let ended = l.on_scan(14_000, &[], Some(1.0));
        assert_eq!(ended.len(), 1);
        let e = ended[0];
        assert_eq!((e.gone, e.lifetime_ms, e.ended_ms), (Gone::Pulled, 2_000, 14_000));
        assert_eq!(e.wall, bid(2_000), "the wall as last seen");
        assert_eq!((e.record.outcome, e.record.last_seen_ms), (WallOutcome::Pulled, 12_000));
        assert!(l.is_quiet());
        assert_eq!(l.ended().copied().collect::<Vec<_>>(), [e.record]);
        assert_eq!(l.ended_total(), 1);
        assert!(l.on_scan(16_000, &[], Some(1.0)).is_empty(), "ended once");
    }

    #[test]
    fn a_wall_traded_at_then_gone_is_filled_with_its_traded_value() {
        let mut l = WallLife::new();
        l.on_scan(10_000, &[ask(4_000), bid(0)], Some(1.0));
        // Two trades at the ask's price (2 and 3 units at 110), one below it.
        l.on_trade(Price(110 * P), Qty(2 * P as u64));
        l.on_trade(Price(105 * P), Qty(P as u64));
        l.on_scan(12_000, &[ask(6_000), bid(2_000)], Some(1.0));
        l.on_trade(Price(110 * P), Qty(3 * P as u64));
        let ended = l.on_scan(14_000, &[bid(4_000)], Some(1.0)).to_vec();
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].gone, Gone::Filled);
        let r = ended[0].record;
        assert_eq!(
            (r.side, r.price, r.first_seen_ms, r.outcome),
            (Side::Ask, Price(110 * P), 6_000, WallOutcome::Filled)
        );
        // 2 and 3 units at 110, before and after the last scan that saw it; not the one at 105.
        assert_eq!(r.executed_usd, Some(550.0));
        assert_eq!(r.max_usd, Some(500.0 * 110.0));
        assert_eq!(r.max_ratio, 12.0);
        // The bid: nothing traded at or below 90.
        let open: Vec<WallRecord> = l.open().collect();
        assert_eq!((open[0].executed_usd, open[0].outcome), (Some(0.0), WallOutcome::Open));
    }

    #[test]
    fn a_bid_is_reached_at_or_below_an_ask_at_or_above() {
        for (side, trade, gone) in [
            (Side::Bid, 90, Gone::Filled),
            (Side::Bid, 89, Gone::Filled),
            (Side::Bid, 91, Gone::Pulled),
            (Side::Ask, 110, Gone::Filled),
            (Side::Ask, 111, Gone::Filled),
            (Side::Ask, 109, Gone::Pulled),
        ] {
            let mut l = WallLife::new();
            let w = if side == Side::Bid { bid(0) } else { ask(0) };
            l.on_scan(0, &[w], Some(1.0));
            l.on_trade(Price(trade * P), Qty(1));
            assert_eq!(l.on_scan(2_000, &[], Some(1.0))[0].gone, gone, "{side:?} traded at {trade}");
        }
        // A trade before the scan that last saw it does not fill it.
        let mut l = WallLife::new();
        l.on_scan(0, &[bid(0)], Some(1.0));
        l.on_trade(Price(80 * P), Qty(1));
        l.on_scan(2_000, &[bid(2_000)], Some(1.0));
        assert_eq!(l.on_scan(4_000, &[], Some(1.0))[0].gone, Gone::Pulled);
    }

    #[test]
    fn maxima_are_kept_and_a_quote_without_usd_price_has_no_value() {
        let mut l = WallLife::new();
        l.on_scan(0, &[wall(Side::Bid, 90, 1_000, 20.0, 0)], None);
        l.on_scan(2_000, &[wall(Side::Bid, 90, 3_000, 40.0, 2_000)], None);
        l.on_scan(4_000, &[wall(Side::Bid, 90, 2_000, 30.0, 4_000)], None);
        let r: Vec<WallRecord> = l.open().collect();
        assert_eq!((r[0].max_usd, r[0].max_ratio, r[0].executed_usd), (None, 40.0, None));
        l.on_scan(6_000, &[wall(Side::Bid, 90, 2_000, 30.0, 6_000)], Some(2.0));
        let r: Vec<WallRecord> = l.open().collect();
        assert_eq!(
            (r[0].max_usd, r[0].max_ratio),
            (Some(2_000.0 * 90.0 * 2.0), 40.0),
            "valued from the first USD price"
        );
        assert_eq!(r[0].executed_usd, Some(0.0));
    }

    #[test]
    fn the_ring_keeps_the_newest_within_its_bound() {
        let mut l = WallLife::new();
        let n = WALL_HISTORY_MAX as i64 + 10;
        for k in 0..n {
            let t = k * 4_000;
            l.on_scan(t, &[wall(Side::Ask, 200 + k, 500, 12.0, 0)], Some(1.0));
            l.on_scan(t + 2_000, &[], Some(1.0));
        }
        assert_eq!(l.ended_total(), n as u64);
        let kept: Vec<i64> = l.ended().map(|r| r.price.0 / P).collect();
        assert_eq!(kept.len(), WALL_HISTORY_MAX);
        assert_eq!(kept[0], 200 + n - 1, "newest first");
        assert_eq!(*kept.last().unwrap_or(&0), 200 + 10, "the 10 oldest were dropped");
        assert!(kept.windows(2).all(|w| w[0] > w[1]));
        let seen: Vec<i64> = l.ended().map(|r| r.last_seen_ms).collect();
        assert!(seen.windows(2).all(|w| w[0] >= w[1]), "by last seen, newest first");
    }

    #[test]
    fn only_the_last_day_is_shown() {
        let mut l = WallLife::new();
        l.on_scan(0, &[bid(0)], Some(1.0));
        l.on_scan(2_000, &[], Some(1.0));
        let r = *l.ended().next().expect("ended");
        assert!(r.shown(WALL_HISTORY_MS - 1));
        assert!(!r.shown(WALL_HISTORY_MS));
        assert!(!r.shown(WALL_HISTORY_MS + 10_000));
    }

    #[test]
    fn a_wall_moved_by_a_tick_ends_and_another_opens() {
        let mut l = WallLife::new();
        l.on_scan(0, &[bid(0)], Some(1.0));
        let moved = Wall { price: Price(90 * P - 1), ..bid(0) };
        let ended = l.on_scan(2_000, &[moved], Some(1.0));
        assert_eq!((ended.len(), ended[0].gone), (1, Gone::Pulled));
        assert_eq!(l.open().map(|r| r.price).collect::<Vec<_>>(), [Price(90 * P - 1)]);
    }

    #[test]
    fn outcomes_have_one_spelling() {
        for o in WallOutcome::ALL {
            assert_eq!(WallOutcome::parse(o.as_str()), Some(o));
            assert!(WallOutcome::ALLOWED.contains(o.as_str()));
        }
        assert_eq!(WallOutcome::parse("Filled"), None);
        assert_eq!(WallOutcome::from(Gone::Pulled), WallOutcome::Pulled);
    }
}
