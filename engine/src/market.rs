//! A shard's market state: the books, candles and last prices it owns, and the tick type.
//!
//! `Market::apply` is the hot path of one tick. It allocates nothing and takes no lock; time
//! arrives inside the event.

use crate::alert::{AlertBook, AlertSpec, Firing};
use crate::book::{Applied, Book, Side};
use crate::candle::CandleSet;
use crate::fixed::{Price, Qty};
use crate::instrument::BookId;
use crate::level::LevelSet;
use crate::wall::{Wall, WallTracker};
use crate::wall_life::WallLife;

/// What a tick carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TickKind {
    /// Absolute size at a price; zero removes the level.
    Book {
        /// Side of the level.
        side: Side,
        /// Level price.
        price: Price,
        /// New absolute size.
        qty: Qty,
    },
    /// A trade.
    Trade {
        /// Trade price.
        price: Price,
        /// Trade size.
        qty: Qty,
        /// True when the taker sold (the buyer was the maker).
        taker_sell: bool,
    },
}

/// One market event for one book.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tick {
    /// The book.
    pub book: BookId,
    /// Venue event time, Unix milliseconds.
    pub ts_ms: i64,
    /// Payload.
    pub kind: TickKind,
}

/// State of one book on its shard.
#[derive(Clone, Debug)]
pub struct BookState {
    /// Global id.
    pub id: BookId,
    /// Levels.
    pub book: Book,
    /// Candle rings.
    pub candles: CandleSet,
    /// Last trade price, zero before the first trade.
    pub last_price: Price,
    /// Time of the last trade.
    pub last_trade_ms: i64,
    /// True once the book has been seen crossed and not yet rebuilt.
    pub crossed: bool,
    /// Times the book was found crossed.
    pub crossed_count: u64,
    /// Support and resistance zones, recomputed every minute and consumed live by trades.
    pub levels: LevelSet,
    /// Walls seen at the last scan, for their ages.
    pub walls: WallTracker,
    /// The walls' lives: fed every trade here and every wall scan by the shard; the wall
    /// history and the walls that the last scan ended.
    pub wall_life: WallLife,
    /// Alerts on this book, evaluated on every trade.
    pub alerts: AlertBook,
    /// The venue no longer lists the pair: its ticks are ignored.
    pub delisted: bool,
    /// The live book is out of sync with the venue (gap, checksum failure, disconnection) and
    /// is being rebuilt: no wall is served from it until it is live again (alerts still fire on its
    /// trades, which do not depend on the depth book).
    /// Always false on the simulated feed.
    pub stale: bool,
}

/// What one tick changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// A level update.
    Level(Applied),
    /// A level update that left the book crossed (it was not before).
    Crossed,
    /// A trade moved the last price.
    Trade {
        /// The trade price.
        price: Price,
        /// Level zones the trade traded through (removed at once).
        levels_consumed: usize,
        /// The book's first trade since start (or since it was listed again): its levels were
        /// computed without a traded price and are due for a recompute.
        first: bool,
    },
    /// The book is not owned here (routing bug upstream); nothing changed.
    NotOwned,
    /// The book is delisted; nothing changed.
    Delisted,
}

/// The books of one shard.
#[derive(Debug)]
pub struct Market {
    books: Vec<BookState>,
    /// Firings of the last applied tick; room for the largest alert book is reserved.
    firings: Vec<Firing>,
    alerts: usize,
    /// BookId index → local index, `u32::MAX` when not owned.
    local_of: Vec<u32>,
}

impl Market {
    /// Owns `ids` out of up to `book_count` global books, preallocating each book and its rings.
    pub fn new(book_count: usize, ids: &[BookId], depth_levels_max: usize, bars_max: usize) -> Market {
        let mut m = Market {
            books: Vec::with_capacity(ids.len()),
            local_of: vec![u32::MAX; book_count],
            firings: Vec::new(),
            alerts: 0,
        };
        for &id in ids {
            assert!(m.add_book(id, depth_levels_max, bars_max), "book {id:?} out of range or twice");
        }
        m
    }

    /// Takes ownership of one more book (listed after start), allocating it and its rings: a
    /// command, not a tick. False when the id is beyond the `book_count` given at creation or
    /// already owned.
    pub fn add_book(&mut self, id: BookId, depth_levels_max: usize, bars_max: usize) -> bool {
        match self.local_of.get(id.index()) {
            Some(&u32::MAX) => {}
            _ => return false,
        }
        self.local_of[id.index()] = self.books.len() as u32;
        self.books.push(BookState {
            id,
            book: Book::new(depth_levels_max),
            candles: CandleSet::new(bars_max),
            last_price: Price::ZERO,
            last_trade_ms: 0,
            crossed: false,
            crossed_count: 0,
            levels: LevelSet::new(),
            walls: WallTracker::default(),
            wall_life: WallLife::new(),
            alerts: AlertBook::default(),
            delisted: false,
            stale: false,
        });
        true
    }

    /// The owned books.
    pub fn books(&self) -> &[BookState] {
        &self.books
    }

    /// The owned books, mutably (level recomputation, snapshots).
    pub fn books_mut(&mut self) -> &mut [BookState] {
        &mut self.books
    }

    /// One owned book.
    pub fn get(&self, id: BookId) -> Option<&BookState> {
        let i = *self.local_of.get(id.index())?;
        self.books.get(i as usize)
    }

    /// One owned book, mutably (history loading, snapshots).
    pub fn get_mut(&mut self, id: BookId) -> Option<&mut BookState> {
        let i = *self.local_of.get(id.index())?;
        self.books.get_mut(i as usize)
    }

    /// Adds an alert to an owned book (a command, not a tick: it may allocate). Returns false
    /// when the book is not owned here.
    pub fn insert_alert(&mut self, id: BookId, spec: AlertSpec) -> bool {
        self.put_alert(id, spec, false)
    }

    /// Adds a resumed alert to an owned book (`decisions.md` §16): as
    /// [`Market::insert_alert`], but a price alert whose price is past its level waits for the
    /// far side first ([`AlertBook::resume`]).
    pub fn resume_alert(&mut self, id: BookId, spec: AlertSpec) -> bool {
        self.put_alert(id, spec, true)
    }

    fn put_alert(&mut self, id: BookId, spec: AlertSpec, resumed: bool) -> bool {
        let Some(i) = self.local_of.get(id.index()).copied().filter(|&i| i != u32::MAX) else { return false };
        let state = &mut self.books[i as usize];
        let before = state.alerts.len();
        if resumed {
            state.alerts.resume(spec);
        } else {
            state.alerts.insert(spec);
        }
        self.alerts = self.alerts + state.alerts.len() - before;
        let want = state.alerts.firings_max();
        if self.firings.capacity() < want {
            self.firings.reserve(want - self.firings.len());
        }
        true
    }

    /// Removes an alert from an owned book; true if it was there.
    pub fn remove_alert(&mut self, id: BookId, alert: u64) -> bool {
        let Some(state) = self.get_mut(id) else { return false };
        let removed = state.alerts.remove(alert);
        if removed {
            self.alerts -= 1;
        }
        removed
    }

    /// Delists an owned book: its ticks are ignored from now on and its alerts are removed;
    /// returns their ids.
    pub fn delist(&mut self, id: BookId) -> Vec<u64> {
        let Some(state) = self.get_mut(id) else { return Vec::new() };
        state.delisted = true;
        let ids: Vec<u64> = state.alerts.ids().collect();
        state.alerts = AlertBook::default();
        self.alerts -= ids.len();
        ids
    }

    /// The venue lists the pair again: its ticks are applied again, starting from an empty
    /// book (the venue's next snapshot fills it) and no trade yet. Its alerts were removed at the
    /// delisting and stay removed. Returns false when the book is not owned or not delisted.
    pub fn relist(&mut self, id: BookId) -> bool {
        let Some(state) = self.get_mut(id).filter(|s| s.delisted) else { return false };
        state.delisted = false;
        state.book.clear();
        state.crossed = false;
        state.last_trade_ms = 0;
        true
    }

    /// Alerts held on all owned books.
    pub fn alert_count(&self) -> usize {
        self.alerts
    }

    /// Firings produced by the ticks applied since the last [`Market::clear_firings`].
    pub fn firings(&self) -> &[Firing] {
        &self.firings
    }

    /// Forgets the firings already taken (keeps the capacity).
    pub fn clear_firings(&mut self) {
        self.firings.clear();
    }

    /// Runs the wall scan just made of owned book `id` (its walls; the quote asset's USD price;
    /// the book's price then) through the book's walls' lives and then its wall alerts, which see
    /// the walls standing and those the scan ended. Take [`Market::firings`] after it. Not a
    /// tick; allocates nothing.
    pub fn on_wall_scan(&mut self, id: BookId, now_ms: i64, price: Price, walls: &[Wall], quote_usd: Option<f64>) {
        let Some(i) = self.local_of.get(id.index()).copied().filter(|&i| i != u32::MAX) else { return };
        let state = &mut self.books[i as usize];
        let ended = state.wall_life.on_scan(now_ms, walls, quote_usd);
        state.alerts.on_scan(now_ms, price, walls, quote_usd, ended, &mut self.firings);
    }

    /// Applies one tick: a level update to the book, or a trade to the candles, last price,
    /// levels and alerts. Take [`Market::firings`] after each tick: the buffer has room for one
    /// tick's firings.
    pub fn apply(&mut self, tick: &Tick) -> Outcome {
        let Some(i) = self.local_of.get(tick.book.index()).copied().filter(|&i| i != u32::MAX) else {
            return Outcome::NotOwned;
        };
        let state = &mut self.books[i as usize];
        if state.delisted {
            return Outcome::Delisted;
        }
        match tick.kind {
            TickKind::Book { side, price, qty } => {
                let applied = state.book.apply(side, price, qty);
                let crossed = state.book.is_crossed();
                let newly = crossed && !state.crossed;
                if newly {
                    state.crossed_count += 1;
                }
                state.crossed = crossed;
                if newly {
                    Outcome::Crossed
                } else {
                    Outcome::Level(applied)
                }
            }
            TickKind::Trade { price, qty, .. } => {
                let first = state.last_trade_ms == 0;
                state.candles.trade(tick.ts_ms, price, qty);
                state.last_price = price;
                state.last_trade_ms = tick.ts_ms;
                let levels_consumed = state.levels.on_trade(price);
                state.wall_life.on_trade(price, qty);
                // Rationale: price and percent alerts depend on trades, which arrive on their own
                // stream and are right whatever the depth book's state. A crossed or stale book
                // governs walls and depth figures only, never whether an alert fires.
                state.alerts.on_trade(price, tick.ts_ms, &state.candles, &mut self.firings);
                Outcome::Trade { price, levels_consumed, first }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candle::Timeframe;

    #[test]
    fn routes_ticks_to_owned_books() {
        let mut m = Market::new(4, &[BookId(1), BookId(3)], 8, 8);
        let t = Tick {
            book: BookId(3),
            ts_ms: 1_000,
            kind: TickKind::Trade { price: Price(5), qty: Qty(1), taker_sell: false },
        };
        assert_eq!(m.apply(&t), Outcome::Trade { price: Price(5), levels_consumed: 0, first: true });
        let later = Tick { ts_ms: 2_000, ..t };
        assert_eq!(m.apply(&later), Outcome::Trade { price: Price(5), levels_consumed: 0, first: false });
        assert_eq!(m.get(BookId(3)).map(|b| b.last_price), Some(Price(5)));
        assert_eq!(
            m.get(BookId(3)).and_then(|b| b.candles.ring(Timeframe::M5).newest().map(|c| c.close)),
            Some(Price(5))
        );
        let t = Tick { book: BookId(0), ..t };
        assert_eq!(m.apply(&t), Outcome::NotOwned);
        let b =
            Tick { book: BookId(1), ts_ms: 1, kind: TickKind::Book { side: Side::Bid, price: Price(10), qty: Qty(1) } };
        assert_eq!(m.apply(&b), Outcome::Level(Applied::Inserted));
        let a = Tick { kind: TickKind::Book { side: Side::Ask, price: Price(9), qty: Qty(1) }, ..b };
        m.apply(&a);
        assert!(m.get(BookId(1)).is_some_and(|s| s.crossed && s.crossed_count == 1));
    }

    /// An alert fires on a trade whatever the depth book's state: crossed, stale, or both.
    #[test]
    fn alerts_fire_while_the_book_is_crossed_or_stale() {
        use crate::alert::{AlertSpec, Condition, Cross};
        for (crossed, stale) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut m = Market::new(2, &[BookId(1)], 8, 8);
            let spec = AlertSpec {
                id: 7,
                condition: Condition::Price { cross: Cross::Above, level: Price(100) },
                repeat: false,
                cooldown_s: 0,
            };
            assert!(m.insert_alert(BookId(1), spec));
            let book = m.get_mut(BookId(1)).expect("owned");
            book.crossed = crossed;
            book.stale = stale;
            let t = Tick {
                book: BookId(1),
                ts_ms: 1,
                kind: TickKind::Trade { price: Price(101), qty: Qty(1), taker_sell: false },
            };
            m.apply(&t);
            assert_eq!(m.firings().len(), 1, "crossed={crossed} stale={stale}: the alert must fire");
            assert_eq!(m.firings()[0].id, 7);
        }
    }

    /// A delisted book ignores ticks; listed again it applies them from an empty book, its next
    /// trade counts as the first, and its removed alerts stay removed.
    #[test]
    fn a_relisted_book_starts_over() {
        use crate::alert::{AlertSpec, Condition, Cross};
        let mut m = Market::new(2, &[BookId(1)], 8, 8);
        let spec = AlertSpec {
            id: 7,
            condition: Condition::Price { cross: Cross::Above, level: Price(100) },
            repeat: false,
            cooldown_s: 0,
        };
        assert!(m.insert_alert(BookId(1), spec));
        let bid =
            Tick { book: BookId(1), ts_ms: 1, kind: TickKind::Book { side: Side::Bid, price: Price(90), qty: Qty(1) } };
        let trade = |ts_ms| Tick {
            book: BookId(1),
            ts_ms,
            kind: TickKind::Trade { price: Price(95), qty: Qty(1), taker_sell: false },
        };
        m.apply(&bid);
        assert!(matches!(m.apply(&trade(2)), Outcome::Trade { first: true, .. }));
        assert!(!m.relist(BookId(1)), "a listed book cannot be listed again");
        assert_eq!(m.delist(BookId(1)), vec![7]);
        assert_eq!(m.apply(&trade(3)), Outcome::Delisted);
        assert!(m.relist(BookId(1)));
        let state = m.get(BookId(1)).expect("owned");
        assert!(!state.delisted && state.book.mid().is_none(), "the old levels are gone");
        assert!(matches!(m.apply(&trade(4)), Outcome::Trade { first: true, .. }));
        assert_eq!(m.alert_count(), 0, "alerts removed at the delisting stay removed");
        assert!(!m.relist(BookId(0)), "not owned");
    }

    /// Trades reach the book's walls' lives: a wall a trade reached is filled at the next scan,
    /// with the trade's value.
    #[test]
    fn trades_reach_the_walls_lives() {
        use crate::wall::Wall;
        use crate::wall_life::Gone;
        let mut m = Market::new(2, &[BookId(1)], 8, 8);
        let w = Wall { side: Side::Ask, price: Price(110), qty: Qty(50), ratio: 20.0, dist_pct: 10.0, age_ms: 0 };
        let state = m.get_mut(BookId(1)).expect("owned");
        assert!(state.wall_life.on_scan(0, &[w], Some(1.0)).is_empty());
        let kind = TickKind::Trade { price: Price(110), qty: Qty(5), taker_sell: false };
        m.apply(&Tick { book: BookId(1), ts_ms: 1, kind });
        let state = m.get_mut(BookId(1)).expect("owned");
        let ended = state.wall_life.on_scan(2_000, &[], Some(1.0));
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].gone, Gone::Filled);
        assert!(ended[0].record.executed_usd.is_some_and(|u| u > 0.0));
    }

    /// A book listed after start is added with its rings; ids beyond the capacity given at
    /// creation, or owned already, are refused.
    #[test]
    fn books_can_be_added_within_capacity() {
        let mut m = Market::new(4, &[BookId(1)], 8, 8);
        assert!(m.get(BookId(3)).is_none());
        assert!(m.add_book(BookId(3), 8, 8));
        assert!(!m.add_book(BookId(3), 8, 8), "owned already");
        assert!(!m.add_book(BookId(4), 8, 8), "beyond the capacity");
        let t = Tick {
            book: BookId(3),
            ts_ms: 5,
            kind: TickKind::Trade { price: Price(7), qty: Qty(1), taker_sell: false },
        };
        assert_eq!(m.apply(&t), Outcome::Trade { price: Price(7), levels_consumed: 0, first: true });
        assert_eq!(m.books().len(), 2);
    }
}
