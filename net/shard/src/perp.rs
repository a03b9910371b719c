//! The perpetuals of one shard's books (decisions §17): on the simulated feed (`--feed sim`,
//! "The simulator") the shard's [`SimPerp`] stepped beside its spot `Sim`, each [`PerpTick`]
//! applied to the [`PerpBook`] of its spot book; on the live feed ([`ShardPerps::live`]) the
//! values the perpetual sessions decode, handed in by [`ShardPerps::take_liquidation`] and
//! [`ShardPerps::take_values`]. Either way each book's perpetual is published as a
//! [`PerpSnapshot`] in its `BookSlot::perp` with the book's metrics, once a second.
//!
//! Everything is allocated at start-up ([`ShardPerps::new`]): one `PerpBook` per book that has
//! a perpetual and the tick buffer, sized for [`PERP_CONTRACTS_PER_ROUND_MAX`] contracts' worst
//! step; a round reads the mids of the contracts due only, from the market. [`ShardPerps::step`] then
//! allocates nothing and takes no lock; [`ShardPerps::publish`] allocates one snapshot per book
//! per second, like the metrics.
//!
//! Choices, and why:
//! - No perpetual without a spot pair is simulated here (`SimPerpConfig::orphans` is false on
//!   every shard): its ticks carry no book, so nothing here would keep them; the venue simulator
//!   (`rampart sim-venue`) is where they show.
//! - A contract whose spot book the shard's `Market` does not hold (none, while the pairs given
//!   are the shard's own) is delisted in the `SimPerp` at start-up, so it costs no step.
//! - A spot delisting keeps nothing: the contract stops ticking and the slot is emptied; a
//!   relisting starts a fresh `PerpBook` (a command, not a tick: it may allocate), its windows
//!   watched from then.
//! - OI is handed in without a USD figure: the book's `oi × mark` (the newest mark) is the one
//!   every venue's answer then carries.

use std::sync::Arc;

use rampart_engine::alert::{AlertSpec, Condition};
use rampart_engine::firing::Firing;
use rampart_engine::metrics::INTERVALS;
use rampart_engine::perp_alert_book::{PerpAlertBook, PerpAlertSpec, PerpFiring};
use rampart_engine::perp_book::{Completeness, PerpBook, PerpInterval, PerpSpec};
use rampart_engine::sim::PairSpec;
use rampart_engine::sim_perp::{PerpId, PerpListing, PerpTick, PerpTickKind, SimPerp, SimPerpConfig};
use rampart_engine::{BookId, Market, Price, Registry, Venue};
use rampart_state::pair_metrics::PerpMetrics;
use rampart_state::perp::PerpSnapshot;
use rampart_state::BookSlot;

use crate::perp_alerts::{self, Update, PERP_ALERTS_PER_BOOK_MAX};

mod contracts;
pub use contracts::FeedChange;

/// Contracts stepped per loop round at most: bounds the tick buffer and the work between two
/// polls. Each contract is due once a second; the ones past the bound wait for the next round
/// (the `SimPerp` resumes after the last one stepped, so none starves).
pub const PERP_CONTRACTS_PER_ROUND_MAX: usize = 64;
/// Binance's OI poll interval the books are told (`binance_oi_poll_s`, decisions §17's default
/// of 30 s): its OI reads stale after three of them without a sample. No setting reaches the
/// shard yet.
pub const BINANCE_OI_POLL_MS: i64 = 30_000;

/// One book's perpetual.
struct Held {
    /// The simulated contract (`None` on the live feed).
    perp: Option<PerpId>,
    venue: Venue,
    book: Box<PerpBook>,
    /// False from the spot pair's delisting to its relisting.
    listed: bool,
    /// False from the perpetual's own delisting to its relisting, the spot pair listed meanwhile
    /// (`contracts`).
    contract_listed: bool,
    /// Its derivatives alerts, made at the first one (`None`: never had one).
    alerts: Option<Box<PerpAlertBook>>,
}

/// The perpetuals of one shard: see the module documentation.
pub struct ShardPerps {
    /// The simulated perpetuals (`None` on the live feed, whose sessions hand values in).
    sim: Option<SimPerp>,
    /// By [`BookId`] index (the registry's books): the book's perpetual, if it has one.
    held: Vec<Option<Held>>,
    /// Books with a perpetual.
    count: usize,
    /// One round's ticks; capacity [`PERP_CONTRACTS_PER_ROUND_MAX`] × the worst step.
    ticks: Vec<PerpTick>,
    /// One update's derivatives alert firings; room for the most alerts a book holds, reserved
    /// as they are inserted.
    fired: Vec<PerpFiring>,
    /// The time of the last step (what an alert inserted between steps is armed against).
    stepped_ms: i64,
    /// Binance's OI poll interval the books are told (their OI's staleness).
    binance_oi_poll_ms: i64,
    /// The live feed's part of the perpetuals' listing changes, for its loop to act on (new
    /// connections, the OI polls); always empty on the simulated feed.
    feed_changes: Vec<contracts::FeedChange>,
}

impl ShardPerps {
    /// The perpetuals of the pairs `pairs` (indices into `universe`, as the shard's spot `Sim`
    /// takes them) whose spot book `market` owns, from `listing` (built from the spot `Sim`'s seed
    /// and universe), their books watched from `now_ms`. Allocates everything the shard's life
    /// needs.
    pub fn new(
        seed: u64,
        universe: &[PairSpec],
        listing: &PerpListing,
        registry: &Registry,
        pairs: &[usize],
        market: &Market,
        now_ms: i64,
    ) -> ShardPerps {
        let config = SimPerpConfig { seed, orphans: false };
        let mut sim = SimPerp::new(&config, universe, listing, registry, pairs);
        let mut held: Vec<Option<Held>> = (0..registry.len()).map(|_| None).collect();
        let mut count = 0;
        let perps: Vec<PerpId> = sim.perps().collect();
        for perp in perps {
            let c = listing.get(perp);
            let book = c.spot_symbol.as_deref().and_then(|s| registry.find(c.venue, s));
            let owned = book.filter(|b| market.get(*b).is_some());
            let made = owned.map(|_| PerpBook::new(spec(c.venue, &c.symbol, c.multiplier), now_ms));
            match (owned, made) {
                (Some(b), Some(Ok(pb))) => {
                    held[b.index()] = Some(Held {
                        perp: Some(perp),
                        venue: c.venue,
                        book: pb,
                        listed: true,
                        contract_listed: true,
                        alerts: None,
                    });
                    count += 1;
                }
                (_, made) => {
                    if let Some(Err(e)) = made {
                        tracing::error!("perpetual {} not kept: {e}", c.symbol);
                    }
                    let _ = sim.set_listed(perp, false);
                }
            }
        }
        let ticks = Vec::with_capacity(PERP_CONTRACTS_PER_ROUND_MAX * sim.ticks_per_step_max());
        ShardPerps {
            sim: Some(sim),
            held,
            count,
            ticks,
            fired: Vec::new(),
            stepped_ms: now_ms,
            binance_oi_poll_ms: BINANCE_OI_POLL_MS,
            feed_changes: Vec::new(),
        }
    }

    /// The perpetuals of the live feed: `pairs` (a book and its contract, as the venue's listing
    /// matched it) of the books `market` owns, watched from `now_ms`; their values come from the
    /// perpetual sessions ([`ShardPerps::take_liquidation`], [`ShardPerps::take_values`]).
    pub fn live(
        registry: &Registry,
        pairs: &[(BookId, rampart_venue::perp_listing::PerpPair)],
        market: &Market,
        binance_oi_poll_ms: i64,
        now_ms: i64,
    ) -> ShardPerps {
        let mut held: Vec<Option<Held>> = (0..registry.len()).map(|_| None).collect();
        let mut count = 0;
        for (b, p) in pairs.iter().filter(|(b, _)| market.get(*b).is_some()) {
            let venue = registry.get(*b).venue;
            let spec = PerpSpec { venue, contract: &p.contract, multiplier: p.multiplier, binance_oi_poll_ms };
            match PerpBook::new(spec, now_ms) {
                Ok(book) => {
                    if let Some(slot) = held.get_mut(b.index()) {
                        *slot =
                            Some(Held { perp: None, venue, book, listed: true, contract_listed: true, alerts: None });
                        count += 1;
                    }
                }
                Err(e) => tracing::error!("perpetual {} not kept: {e}", p.contract),
            }
        }
        ShardPerps {
            sim: None,
            held,
            count,
            ticks: Vec::new(),
            fired: Vec::new(),
            stepped_ms: now_ms,
            binance_oi_poll_ms,
            feed_changes: Vec::new(),
        }
    }

    /// A live liquidation of `book`'s perpetual at `now_ms`: taken by its book, fed to the
    /// stream's ring and handed to its alerts, each firing to `fired`. No allocation, no lock.
    pub fn take_liquidation(
        &mut self,
        book: BookId,
        liq: &rampart_venue::protocol::PerpLiq,
        now_ms: i64,
        market: &Market,
        slots: &[BookSlot],
        fired: &mut impl FnMut(BookId, Firing),
    ) {
        self.stepped_ms = now_ms;
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut).filter(|h| h.live()) else { return };
        let Ok(l) = h.book.on_liquidation(now_ms, liq.ts_ms, liq.side, liq.price, liq.qty) else { return };
        if let Some(feed) = slots.get(book.index()).and_then(|s| s.liquidations.get()) {
            feed.push(&l);
        }
        self.alerts_of(book, now_ms, liq.ts_ms, Update::Liquidation(l), market, fired);
    }

    /// Live values of `book`'s perpetual at `now_ms` (the mark first, so the OI's USD figure is
    /// at the new mark): taken by its book and handed to its alerts. A value the book refuses
    /// (older than the one held, invalid) is left out. No allocation, no lock.
    pub fn take_values(
        &mut self,
        book: BookId,
        v: &rampart_venue::protocol::PerpValues,
        now_ms: i64,
        market: &Market,
        fired: &mut impl FnMut(BookId, Firing),
    ) {
        self.stepped_ms = now_ms;
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut).filter(|h| h.live()) else { return };
        let ts = v.ts_ms;
        let mark = v.mark.map(|m| h.book.on_mark(now_ms, ts, m).is_ok());
        let oi = v.oi.map(|(base, usd)| h.book.on_oi(now_ms, ts, base, usd).is_ok());
        let funding = v.funding.map(|(rate, hours, next)| h.book.on_funding(now_ms, ts, rate, hours, next).is_ok());
        if [mark, oi, funding].contains(&Some(true)) {
            self.alerts_of(book, now_ms, ts, Update::Figures, market, fired);
        }
    }

    /// Hands `update` of `book` to its derivatives alerts; each firing to `fired`.
    fn alerts_of(
        &mut self,
        book: BookId,
        now_ms: i64,
        ts_ms: i64,
        update: Update,
        market: &Market,
        fired: &mut impl FnMut(BookId, Firing),
    ) {
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut) else { return };
        let Some(alerts) = h.alerts.as_deref_mut() else { return };
        self.fired.clear();
        perp_alerts::evaluate(&h.book, alerts, now_ms, ts_ms, update, &mut self.fired);
        debug_assert!(self.fired.len() <= self.fired.capacity(), "the firings buffer grew");
        let price = market.get(book).map_or(Price::ZERO, |s| s.last_price);
        for f in &self.fired {
            fired(book, perp_alerts::firing(&h.book, now_ms, price, f));
        }
    }

    /// Books with a perpetual here.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no book here has a perpetual.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The books with a perpetual here (listed or not).
    pub fn books(&self) -> impl Iterator<Item = BookId> + '_ {
        self.held.iter().enumerate().filter(|(_, h)| h.is_some()).map(|(k, _)| BookId(k as u32))
    }

    /// Makes the liquidation feed of each book with a perpetual in `slots` (at start-up: the
    /// rings' one allocation each), so [`ShardPerps::step`] feeds them without allocating.
    pub fn make_feeds(&self, slots: &[BookSlot]) {
        for b in self.books() {
            if let Some(slot) = slots.get(b.index()) {
                slot.liquidations.get_or_init(rampart_state::liq_feed::LiqFeed::new);
            }
        }
    }

    /// The perpetual of `book`, while its spot pair is listed.
    pub fn book(&self, book: BookId) -> Option<&PerpBook> {
        self.listed(book).map(|h| &*h.book)
    }

    fn listed(&self, book: BookId) -> Option<&Held> {
        self.held.get(book.index())?.as_ref().filter(|h| h.live())
    }

    /// Steps the contracts due at `now_ms` (at most [`PERP_CONTRACTS_PER_ROUND_MAX`]) at their
    /// spot books' mids in `market`, applies their ticks to the books and hands each update to the book's
    /// derivatives alerts; each firing goes to `fired` with its book, in order. Returns how many
    /// stepped. No allocation, no lock.
    pub fn step(
        &mut self,
        now_ms: i64,
        market: &Market,
        slots: &[BookSlot],
        fired: &mut impl FnMut(BookId, Firing),
    ) -> usize {
        self.stepped_ms = now_ms;
        self.ticks.clear();
        let mid = |book| market.get(book).and_then(|s| s.book.mid());
        let Some(sim) = self.sim.as_mut() else { return 0 };
        let stepped = sim.step_due_with(now_ms, mid, PERP_CONTRACTS_PER_ROUND_MAX, &mut self.ticks);
        debug_assert!(self.ticks.len() <= self.ticks.capacity());
        for k in 0..self.ticks.len() {
            let tick = self.ticks[k];
            let Some(b) = tick.book else { continue };
            let Some(h) = self.held.get_mut(b.index()).and_then(Option::as_mut) else { continue };
            if !h.live() {
                continue;
            }
            let update = apply(&mut h.book, now_ms, &tick);
            if let (Some(Update::Liquidation(l)), Some(feed)) =
                (&update, slots.get(b.index()).and_then(|s| s.liquidations.get()))
            {
                feed.push(l);
            }
            let (Some(alerts), Some(update)) = (h.alerts.as_deref_mut(), update) else { continue };
            self.fired.clear();
            perp_alerts::evaluate(&h.book, alerts, now_ms, tick.ts_ms, update, &mut self.fired);
            debug_assert!(self.fired.len() <= self.fired.capacity(), "the firings buffer grew");
            let price = market.get(b).map_or(Price::ZERO, |s| s.last_price);
            for f in &self.fired {
                fired(b, perp_alerts::firing(&h.book, now_ms, price, f));
            }
        }
        stepped
    }

    /// Puts derivatives alert `spec` on `book`'s perpetual, armed as if made now (a command, not a
    /// tick: it may allocate). True when held; false when the book has no perpetual here (or its
    /// pair is delisted) or the book holds [`crate::perp_alerts::PERP_ALERTS_PER_BOOK_MAX`] (logged).
    pub fn insert_alert(&mut self, book: BookId, spec: AlertSpec) -> bool {
        let now_ms = self.stepped_ms;
        let Condition::Perp(condition) = spec.condition else { return false };
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut).filter(|h| h.live()) else {
            return false;
        };
        let alerts = h.alerts.get_or_insert_with(|| Box::new(PerpAlertBook::new(PERP_ALERTS_PER_BOOK_MAX)));
        if alerts.is_empty() {
            perp_alerts::prime(&h.book, alerts, now_ms);
        }
        let perp = PerpAlertSpec { id: spec.id, condition, repeat: spec.repeat, cooldown_s: spec.cooldown_s };
        if let Err(e) = alerts.insert(perp) {
            tracing::error!("book {}: derivatives alert {} not held: {e}", book.0, spec.id);
            return false;
        }
        let room = alerts.firings_max();
        self.fired.reserve(room.saturating_sub(self.fired.len()));
        true
    }

    /// True when `book` has a perpetual here, watched and served (its pair and its contract
    /// listed).
    pub fn has_live(&self, book: BookId) -> bool {
        self.held.get(book.index()).and_then(Option::as_ref).is_some_and(Held::live)
    }

    /// Takes alert `id` off `book`'s perpetual; true if it was held there.
    pub fn remove_alert(&mut self, book: BookId, id: u64) -> bool {
        let held = self.held.get_mut(book.index()).and_then(Option::as_mut);
        held.and_then(|h| h.alerts.as_deref_mut()).is_some_and(|a| a.remove(id))
    }

    /// The simulated contract of `book`, if it has one (for the control hooks).
    pub fn perp_of(&self, book: BookId) -> Option<PerpId> {
        self.held.get(book.index())?.as_ref().and_then(|h| h.perp)
    }

    /// The simulator, for its control hooks (an injected liquidation, OI jump, funding change
    /// or delisting takes effect at the contract's next step).
    pub fn sim_mut(&mut self) -> Option<&mut SimPerp> {
        self.sim.as_mut()
    }

    /// Derivatives alerts held over all books (a `*` alert once per book).
    pub fn alert_count(&self) -> usize {
        self.held.iter().flatten().filter_map(|h| h.alerts.as_ref()).map(|a| a.len()).sum()
    }

    /// The most derivatives alerts one book holds (the firings one update can make).
    pub fn alerts_per_book_max(&self) -> usize {
        self.held.iter().flatten().filter_map(|h| h.alerts.as_ref()).map(|a| a.len()).max().unwrap_or(0)
    }

    /// Steps every contract due at `now_ms`, round after round (at start-up, so every perpetual
    /// has its values before the shard is ready; no alert is held yet). Returns how many stepped.
    pub fn step_all(&mut self, now_ms: i64, market: &Market, slots: &[BookSlot]) -> usize {
        let mut stepped = 0;
        // Ends: a contract stepped at `now_ms` is not due again at `now_ms`.
        loop {
            let n = self.step(now_ms, market, slots, &mut |_, _| {});
            stepped += n;
            if n < PERP_CONTRACTS_PER_ROUND_MAX {
                return stepped;
            }
        }
    }

    /// `book`'s perpetual as of `now_ms`, for the fronts; `None` without one (or while its spot
    /// pair is delisted). Allocates the snapshot (its name).
    pub fn snapshot(&self, book: BookId, now_ms: i64) -> Option<PerpSnapshot> {
        let b = &self.listed(book)?.book;
        Some(PerpSnapshot {
            contract: b.contract().to_owned(),
            multiplier: b.multiplier(),
            completeness: b.completeness(),
            mark: b.mark(),
            oi: b.oi(now_ms),
            funding: b.funding(now_ms),
            last: b.last_liquidation(),
            ts_ms: now_ms,
        })
    }

    /// `book`'s derivatives metrics at `now_ms` (§17 "Data"), `None` without a perpetual (or
    /// while its pair is delisted): each interval's liquidation sums and OI change as the book's
    /// windows hold them, OI and funding now unless stale.
    pub fn metrics(&self, book: BookId, now_ms: i64) -> Option<PerpMetrics> {
        let b = &self.listed(book)?.book;
        let window = PerpInterval::of;
        Some(PerpMetrics {
            liquidations: INTERVALS.map(|tf| b.liquidations(now_ms, window(tf))),
            oi: b.oi(now_ms).filter(|o| !o.stale).and_then(|o| Some((o.base, o.usd?))),
            oi_change: INTERVALS.map(|tf| b.oi_change(now_ms, window(tf)).map(|c| c.pct)),
            funding: b.funding(now_ms).filter(|f| !f.stale),
        })
    }

    /// Publishes `book`'s perpetual in its slot (the shard calls it with the book's metrics,
    /// once a second); a book without one publishes nothing. Not on the tick path: one
    /// snapshot allocated per call.
    pub fn publish(&self, book: BookId, now_ms: i64, slot: &BookSlot) {
        if let Some(s) = self.snapshot(book, now_ms) {
            slot.perp.store(Some(Arc::new(s)));
        }
    }

    /// The spot pair of `book` is delisted: its contract stops ticking, `slot` is emptied and its
    /// derivatives alerts leave it. Returns their ids (`*` alerts among them: the caller keeps
    /// those, as for the book's other alerts).
    pub fn delist(&mut self, book: BookId, slot: &BookSlot) -> Vec<u64> {
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut) else { return Vec::new() };
        h.listed = false;
        h.stop(self.sim.as_mut(), slot)
    }

    /// The spot pair of `book` is listed again: its contract ticks again from the next step,
    /// into a fresh book watched from `now_ms` (allocated here: a command, not a tick).
    pub fn relist(&mut self, book: BookId, now_ms: i64) {
        let poll_ms = self.binance_oi_poll_ms;
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut).filter(|h| !h.listed) else { return };
        h.renew(book, poll_ms, now_ms);
        h.listed = true;
        if let (Some(sim), Some(perp)) = (self.sim.as_mut(), h.perp) {
            let _ = sim.set_listed(perp, h.contract_listed);
        }
    }
}

impl Held {
    /// Both the spot pair and its perpetual are listed: the perpetual is watched and served.
    fn live(&self) -> bool {
        self.listed && self.contract_listed
    }

    /// No longer served (its pair or its contract delisted): the simulated contract silent, the
    /// slot emptied; the ids of the alerts that leave it.
    fn stop(&mut self, sim: Option<&mut SimPerp>, slot: &BookSlot) -> Vec<u64> {
        if let (Some(sim), Some(perp)) = (sim, self.perp) {
            let _ = sim.set_listed(perp, false);
        }
        slot.perp.store(None);
        if let Some(feed) = slot.liquidations.get() {
            feed.clear();
        }
        self.alerts.take().map(|a| a.ids().collect()).unwrap_or_default()
    }

    /// A fresh book for the same contract, watched from `now_ms` (a listing change: allocates).
    fn renew(&mut self, book: BookId, binance_oi_poll_ms: i64, now_ms: i64) {
        let spec = PerpSpec {
            venue: self.venue,
            contract: self.book.contract(),
            multiplier: self.book.multiplier(),
            binance_oi_poll_ms,
        };
        match PerpBook::new(spec, now_ms) {
            Ok(fresh) => self.book = fresh,
            // The same spec made the first book: this cannot fail.
            Err(e) => tracing::error!("book {}: perpetual not renewed: {e}", book.0),
        }
    }
}

/// A simulated contract's spec.
fn spec(venue: Venue, contract: &str, multiplier: u32) -> PerpSpec<'_> {
    PerpSpec { venue, contract, multiplier, binance_oi_poll_ms: BINANCE_OI_POLL_MS }
}

/// Hands one tick to its book; returns what the book took, for its alerts (`None`: refused).
/// The simulator's values are valid and in time order, so a book refuses none (checked in
/// debug builds).
fn apply(book: &mut PerpBook, now_ms: i64, tick: &PerpTick) -> Option<Update> {
    let ts = tick.ts_ms;
    match tick.kind {
        PerpTickKind::Liquidation { side, price, qty } => {
            let r = book.on_liquidation(now_ms, ts, side, price.to_f64(), qty);
            debug_assert!(r.is_ok() || book.completeness() == Completeness::Unpublished, "liquidation refused: {r:?}");
            r.ok().map(Update::Liquidation)
        }
        PerpTickKind::Perp { oi, mark, funding_rate, interval_h, next_ms } => {
            // The mark first, so the OI's USD figure is at the new mark.
            let m = book.on_mark(now_ms, ts, mark.to_f64());
            let o = book.on_oi(now_ms, ts, oi, None);
            // The simulator's rate is a fraction per interval; the book's is percent.
            let f = book.on_funding(now_ms, ts, funding_rate * 100.0, u32::from(interval_h), next_ms);
            debug_assert!(m.is_ok() && o.is_ok() && f.is_ok(), "perpetual update refused: {m:?} {o:?} {f:?}");
            Some(Update::Figures)
        }
    }
}

#[cfg(test)]
mod tests {
    //! The shard's wiring, driven round by round under simulated time as its loop drives it.

    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use crossbeam_queue::ArrayQueue;
    use rampart_engine::alert::{AlertSpec, Condition};
    use rampart_engine::firing::{Firing, PerpTrigger};
    use rampart_engine::perp_alert::{
        FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
    };
    use rampart_engine::perp_book::PerpInterval;
    use rampart_engine::perp_window::PositionSide;
    use rampart_engine::sim::{self, Sim, SimConfig};
    use rampart_engine::sim_perp::{listing, PerpListing};
    use rampart_engine::{BookId, Market, Registry, Timeframe, Venue};
    use rampart_state::clock::ManualClock;
    use rampart_state::perp::PerpSnapshot;
    use rampart_state::{AlertChange, Command, EventQueue, ShardEvent, Shared};

    use super::ShardPerps;
    use crate::{perp_alerts, Shard, ShardConfig, COMMANDS_MAX};

    /// 2026-01-01T00:00:00Z.
    const T0: i64 = 1_767_225_600_000;
    /// Simulated time per round.
    const ROUND_MS: i64 = 20;
    const SEED: u64 = 11;

    struct Rig {
        shard: Shard,
        registry: Arc<Registry>,
        listing: PerpListing,
        shared: Arc<Shared>,
        commands: Arc<ArrayQueue<Command>>,
        events: Arc<EventQueue>,
        now: i64,
    }

    /// One shard over every book of `pairs` pairs on every venue, its spot books loaded.
    fn rig(pairs: usize) -> Rig {
        let universe = sim::universe(SEED, pairs);
        let registry = Arc::new(Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("registry"));
        let shared = Arc::new(Shared::new(Arc::new(ArcSwap::new(registry.clone())), registry.len(), 1, false));
        let ids: Vec<BookId> = registry.ids().collect();
        let specs: Vec<usize> = (0..universe.len()).collect();
        let config = ShardConfig {
            shards: 1,
            depth_levels_max: 300,
            bars_max: 16,
            sim: SimConfig { seed: SEED, ..SimConfig::default() },
            poll_interval: std::time::Duration::from_millis(1),
            walls_min_ratio: 5.0,
            fault_hang_on_stop: false,
            events_max: 64,
            cpus: Vec::new(),
            clock: Arc::new(ManualClock::new(T0)),
            partition: Default::default(),
            spin_before_park: std::time::Duration::ZERO,
            derivatives: true,
        };
        let mut market = Market::new(shared.capacity, &ids, config.depth_levels_max, config.bars_max);
        let mut sim = Sim::new(config.sim.clone(), &universe, &registry, &specs);
        let mut ticks = Vec::new();
        for i in 0..sim.pair_count() {
            sim.start_pair(i, T0, &mut ticks);
        }
        for t in &ticks {
            market.apply(t);
        }
        let listing = listing(SEED, &universe);
        let perps = ShardPerps::new(SEED, &universe, &listing, &registry, &specs, &market, T0);
        let commands = Arc::new(ArrayQueue::new(COMMANDS_MAX));
        let events = Arc::new(EventQueue::new(config.events_max));
        let mut shard = Shard::new(0, config, market, Some(sim), commands.clone(), events.clone(), shared.clone());
        shard = shard.with_perps(perps);
        shard.levels_epoch_ms = T0;
        Rig { shard, registry, listing, shared, commands, events, now: T0 }
    }

    impl Rig {
        fn run_ms(&mut self, ms: i64) {
            let end = self.now + ms;
            while self.now < end {
                self.now += ROUND_MS;
                self.shard.sim_round(self.now);
            }
        }

        fn published(&self, book: BookId) -> Option<Arc<PerpSnapshot>> {
            self.shared.slots[book.index()].perp.load_full()
        }

        /// The listing's contract of `book`, if it has one.
        fn contract(&self, book: BookId) -> Option<&rampart_engine::sim_perp::PerpContract> {
            let ins = self.registry.get(book);
            self.listing
                .contracts()
                .iter()
                .find(|c| c.venue == ins.venue && c.spot_symbol.as_ref() == Some(&ins.symbol))
        }

        fn command(&mut self, cmd: Command) {
            assert!(self.commands.push(cmd).is_ok(), "the command queue is full");
            assert!(!self.shard.take_commands());
        }

        /// The firings the shard sent since the last call, in order (the backlog flushed first).
        fn firings(&mut self) -> Vec<(BookId, Firing)> {
            let mut out = Vec::new();
            loop {
                self.shard.flush_backlog();
                let mut any = false;
                while let Some(ev) = self.events.pop() {
                    any = true;
                    if let ShardEvent::Fired { book, firing, .. } = ev.event {
                        out.push((book, firing));
                    }
                }
                if !any && !self.shard.has_backlog() {
                    return out;
                }
            }
        }

        fn alert(&mut self, book: BookId, id: u64, condition: PerpCondition, repeat: bool) {
            let spec = AlertSpec { id, condition: Condition::Perp(condition), repeat, cooldown_s: 0 };
            self.command(Command::Alert { book, change: AlertChange::held(spec, 1) });
        }

        fn inject(&mut self, book: BookId, side: PositionSide, usd: f64) {
            let perps = self.shard.perps.as_mut().expect("perpetuals");
            let perp = perps.perp_of(book).expect("a perpetual");
            perps.sim_mut().expect("simulated").inject_liquidation(perp, side, usd).expect("injected");
        }
    }

    #[test]
    fn an_order_alert_fires_once_on_a_million_dollar_long_and_not_on_less() {
        let mut rig = rig(12);
        rig.run_ms(2_000);
        let book = rig.registry.find(Venue::Bybit, "BTCUSDT").expect("BTCUSDT on Bybit");
        let order = LiqOrder { direction: LiqDirection::Long, min_usd_cents: 100_000_000 };
        rig.alert(book, 7, PerpCondition::Order(order), true);
        let _ = rig.firings();
        rig.inject(book, PositionSide::Long, 999_000.0);
        rig.inject(book, PositionSide::Short, 5_000_000.0);
        rig.run_ms(2_000);
        let fired: Vec<_> = rig.firings().into_iter().filter(|(_, f)| f.id == 7).collect();
        assert!(fired.is_empty(), "$999 999 long and a short fired: {fired:?}");
        rig.inject(book, PositionSide::Long, 1_000_000.0);
        rig.run_ms(2_000);
        let fired: Vec<_> = rig.firings().into_iter().filter(|(_, f)| f.id == 7).collect();
        assert_eq!(fired.len(), 1, "{fired:?}");
        let (b, f) = fired[0];
        assert_eq!(b, book);
        let Some(PerpTrigger::Order { liquidation, count }) = f.perp() else { panic!("{f:?}") };
        assert_eq!((liquidation.side, count), (PositionSide::Long, 1));
        assert!(liquidation.usd() >= 1_000_000.0 && liquidation.usd() < 1_000_100.0, "{liquidation:?}");
        let spot = f.price.to_f64();
        assert!((spot / liquidation.price - 1.0).abs() < 0.01, "the spot pair's last trade {spot}: {liquidation:?}");
        assert!(!f.last, "a repeating alert stays");
    }

    #[test]
    fn a_one_shot_funding_alert_fires_once_and_leaves() {
        let mut rig = rig(12);
        rig.run_ms(2_000);
        let book = rig.registry.find(Venue::Binance, "ETHUSDT").expect("ETHUSDT on Binance");
        let now = rig.published(book).and_then(|p| p.funding).expect("funding").rate8h;
        // 0.5 % per 8 h above today's rate: the simulator's funding then set past it.
        let level = ((now + 0.5) * 1e6).round() as i64;
        let funding = FundingLevel { direction: FundingDirection::Above, pct_micro: level };
        rig.alert(book, 9, PerpCondition::Funding(funding), false);
        rig.run_ms(2_000);
        assert!(rig.firings().iter().all(|(_, f)| f.id != 9), "fired at creation");
        let perps = rig.shard.perps.as_mut().expect("perpetuals");
        let perp = perps.perp_of(book).expect("a perpetual");
        // A fraction per interval: 0.02 = 2 % per interval, far above the level in any interval.
        perps.sim_mut().expect("simulated").set_funding(perp, 0.02, Some(8)).expect("set");
        rig.run_ms(3_000);
        let fired: Vec<_> = rig.firings().into_iter().filter(|(_, f)| f.id == 9).collect();
        assert_eq!(fired.len(), 1, "{fired:?}");
        let Some(PerpTrigger::Funding { rate8h, interval_h, .. }) = fired[0].1.perp() else { panic!("{fired:?}") };
        assert!(rate8h * 1e6 >= level as f64 && interval_h == 8, "rate8h {rate8h}");
        assert!(fired[0].1.last, "a one-shot alert is done");
        rig.run_ms(3_000);
        assert!(rig.firings().iter().all(|(_, f)| f.id != 9), "fired again after leaving");
    }

    #[test]
    fn a_universe_sum_alert_fires_per_pair_and_a_delisting_takes_the_one_pair_ones() {
        let mut rig = rig(12);
        rig.run_ms(61_000);
        let sum = LiqSum { direction: LiqDirection::Short, min_usd_cents: 5_000_000_000 };
        let window = PerpInterval::parse("1m").expect("1m");
        let spec = AlertSpec {
            id: 11,
            condition: Condition::Perp(PerpCondition::Sum { window, sum }),
            repeat: true,
            cooldown_s: 0,
        };
        rig.command(Command::Universe { venue: Venue::Okx, change: AlertChange::held(spec, 1) });
        let a = rig.registry.find(Venue::Okx, "BTCUSDT").expect("BTCUSDT on OKX");
        let b = rig.registry.find(Venue::Okx, "ETHUSDT").expect("ETHUSDT on OKX");
        let _ = rig.firings();
        rig.inject(a, PositionSide::Short, 30_000_000.0);
        rig.inject(a, PositionSide::Short, 30_000_000.0);
        rig.inject(b, PositionSide::Short, 60_000_000.0);
        rig.run_ms(2_000);
        let fired: Vec<_> = rig.firings().into_iter().filter(|(_, f)| f.id == 11).collect();
        let books: Vec<BookId> = fired.iter().map(|(b, _)| *b).collect();
        assert!(books.contains(&a) && books.contains(&b) && fired.len() == 2, "{fired:?}");
        for (_, f) in &fired {
            let Some(PerpTrigger::Sum { side, sum_usd, window: w, last, .. }) = f.perp() else { panic!("{f:?}") };
            assert!(side == LiqDirection::Short && sum_usd >= 50_000_000.0 && w == window && last.is_some(), "{f:?}");
        }
        rig.alert(a, 12, PerpCondition::Order(LiqOrder { direction: LiqDirection::Any, min_usd_cents: 10_000 }), true);
        rig.command(Command::Delist { book: a });
        let perps = rig.shard.perps.as_ref().expect("perpetuals");
        assert!(perps.book(a).is_none() && perps.alert_count() > 0, "the `*` alert stays on the venue's other books");
        let delisted: Vec<u64> = std::iter::from_fn(|| rig.events.pop())
            .filter_map(|e| match e.event {
                ShardEvent::Delisted { ids, .. } => Some(ids),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(delisted, vec![12], "the one-pair alert left with its pair; the `*` one is not reported");
    }

    #[test]
    fn books_with_a_perpetual_publish_it_each_second_and_the_others_none() {
        let mut rig = rig(40);
        rig.run_ms(10_000);
        let (mut with, mut without, mut rates, mut liquidations) = (0, 0, 0.0, 0);
        for book in rig.registry.ids() {
            let ins = rig.registry.get(book);
            let (Some(c), Some(p)) = (rig.contract(book), rig.published(book)) else {
                assert!(
                    rig.contract(book).is_none(),
                    "{} {}: a perpetual not published",
                    ins.venue.as_str(),
                    ins.symbol
                );
                assert!(
                    rig.published(book).is_none(),
                    "{} {}: published without a perpetual",
                    ins.venue.as_str(),
                    ins.symbol
                );
                without += 1;
                continue;
            };
            with += 1;
            let what = format!("{} {} ({})", ins.venue.as_str(), ins.symbol, c.symbol);
            assert_eq!(p.contract, c.symbol, "{what}");
            assert_eq!(p.multiplier, c.multiplier, "{what}");
            if ins.venue == Venue::Okx {
                assert!(p.contract.ends_with("-USDT-SWAP"), "{what}");
            }
            assert!(rig.now - p.ts_ms <= 1_000, "{what}: published at {}, now {}", p.ts_ms, rig.now);
            let mark = p.mark.expect("a mark");
            let mid = rig.shard.market.get(book).and_then(|s| s.book.mid()).expect("a mid").to_f64();
            assert!((mark / mid - 1.0).abs() < 0.01, "{what}: mark {mark} against the spot mid {mid}");
            let oi = p.oi.expect("an OI");
            assert!(oi.base > 0.0 && !oi.stale, "{what}: {oi:?}");
            let usd = oi.usd.expect("OI in USD");
            assert!((usd / (oi.base * mark) - 1.0).abs() < 1e-9, "{what}: {oi:?}, mark {mark}");
            let f = p.funding.expect("funding");
            assert!(!f.stale && f.rate.abs() <= 0.75 && f.next_ms > rig.now, "{what}: {f:?}");
            rates += f.rate.abs();
            let held = rig.shared.slots[book.index()].liquidations.get().map(|f| f.held()).unwrap_or_default();
            assert!(held.windows(2).all(|w| w[0].1.time_ms >= w[1].1.time_ms), "{what}: not newest first");
            assert_eq!(p.last.is_some(), !held.is_empty(), "{what}: `last` with the ring");
            liquidations += held.len();
            // The metrics published with it: OI and funding now, windows not yet watched left out.
            let m = rig.shared.slots[book.index()].metrics.load().perp.expect("derivatives metrics");
            let (base, usd) = m.oi.expect("oi");
            assert!(base > 0.0 && usd > 0.0, "{what}: {m:?}");
            assert_eq!(m.funding.map(|f| (f.interval_h, f.next_ms)), Some((f.interval_h, f.next_ms)), "{what}");
            assert_eq!(m.liquidations, [None; 6], "{what}: no window watched in full after 10 s");
        }
        assert!(with > 100 && without > 0, "{with} books with a perpetual, {without} without");
        // Percent per interval: the interest alone is 0.01 %; a fraction would be 100 times less.
        assert!(rates / f64::from(with) > 0.002, "mean |funding| {} %", rates / f64::from(with));
        assert!(liquidations > 0, "no liquidation in 10 s over {with} contracts");
    }

    #[test]
    fn a_watched_window_gives_the_liquidation_and_oi_metrics() {
        let mut rig = rig(6);
        rig.run_ms(301_000);
        let (mut sums, mut changes) = (0, 0);
        for book in rig.registry.ids() {
            let Some(p) = rig.published(book) else {
                assert!(rig.shared.slots[book.index()].metrics.load().perp.is_none(), "no perpetual: none");
                continue;
            };
            let m = rig.shared.slots[book.index()].metrics.load().perp.expect("derivatives metrics");
            let m5 = Timeframe::M5.index();
            let liq = m.liquidations[m5];
            let venue = rig.registry.get(book).venue;
            assert_eq!(liq.is_none(), venue == Venue::Bitget, "5m watched; Bitget publishes none: {m:?}");
            assert_eq!(m.liquidations[Timeframe::D1.index()], None, "a day is not watched yet");
            if let Some(l) = liq {
                // The pair's ring over the 4 minutes before the metrics is within the window's sums
                // (the ring is read now, up to a second after them).
                let held = rig.shared.slots[book.index()].liquidations.get().map(|f| f.held()).unwrap_or_default();
                let before = |t: i64| (0..240_000).contains(&(p.ts_ms - t));
                let recent: f64 = held.iter().filter(|(_, l)| before(l.time_ms)).map(|(_, l)| l.usd()).sum();
                assert!(l.long_usd + l.short_usd + 1e-6 >= recent, "{l:?} against {recent}");
                sums += 1;
            }
            changes += usize::from(m.oi_change[m5].is_some());
        }
        assert!(sums > 0 && changes > 0, "{sums} liquidation sums, {changes} OI changes over 5m");
        // A test send's trigger objects, read from the same book.
        let m5 = PerpInterval::parse("5m").expect("5m");
        let oi =
            PerpCondition::Oi { window: m5, change: OiChange { direction: OiDirection::Up, pct_micro: 1, min_usd: 0 } };
        let funding = PerpCondition::Funding(FundingLevel { direction: FundingDirection::Above, pct_micro: 0 });
        let (mut ois, mut fundings) = (0, 0);
        for book in rig.registry.ids() {
            let Some(b) = rig.shard.perps.as_ref().and_then(|p| p.book(book)) else { continue };
            if let Some(PerpTrigger::Oi { change_pct, .. }) = perp_alerts::test_trigger(b, &oi, rig.now) {
                assert_eq!(Some(change_pct), b.oi_change(rig.now, m5).map(|c| c.pct));
                ois += 1;
            }
            if let Some(PerpTrigger::Funding { rate8h, .. }) = perp_alerts::test_trigger(b, &funding, rig.now) {
                assert_eq!(Some(rate8h), b.funding(rig.now).map(|f| f.rate8h));
                fundings += 1;
            }
        }
        assert!(ois > 0 && fundings > 0, "{ois} OI and {fundings} funding triggers");
    }

    #[test]
    fn a_one_pair_alert_of_a_pair_without_a_perpetual_waits_for_the_one_it_gains() {
        use rampart_state::{PerpContract, PerpListingChange};
        let mut rig = rig(12);
        rig.run_ms(1_000);
        let mut bare = rig.registry.ids().filter(|&b| rig.contract(b).is_none());
        let (book, other) = (bare.next().expect("a pair without a perpetual"), bare.next().expect("another"));
        let order = PerpCondition::Order(LiqOrder { direction: LiqDirection::Long, min_usd_cents: 100 });
        // Stored alerts of pairs whose perpetual the venue's listing did not give at start.
        rig.alert(book, 21, order, true);
        rig.alert(other, 22, order, true);
        rig.command(Command::Alert { book: other, change: AlertChange::gone(22, 2) });
        let count = |rig: &Rig| rig.shard.perps.as_ref().map_or(0, ShardPerps::alert_count);
        assert_eq!(count(&rig), 0, "held without a perpetual");
        let contract = |name: &str| PerpContract {
            contract: name.to_string(),
            multiplier: 1,
            contract_size: 1.0,
            interval_h: Some(8),
        };
        rig.command(Command::Perp { book, change: PerpListingChange::Added(contract("GAINEDUSDT")) });
        assert_eq!(count(&rig), 1, "the waiting alert is on the perpetual gained");
        rig.command(Command::Perp { book: other, change: PerpListingChange::Added(contract("OTHERUSDT")) });
        assert_eq!(count(&rig), 1, "an alert removed while it waited stays removed");
        rig.command(Command::Perp { book, change: PerpListingChange::Delisted });
        assert_eq!(count(&rig), 0);
    }

    #[test]
    fn a_delisted_pair_keeps_no_perpetual_and_a_relisted_one_starts_afresh() {
        let mut rig = rig(12);
        rig.run_ms(3_000);
        let book = rig.registry.find(Venue::Binance, "BTCUSDT").expect("BTCUSDT on Binance");
        let before = rig.published(book).expect("BTCUSDT's perpetual");
        rig.command(Command::Delist { book });
        assert!(rig.published(book).is_none(), "the slot is emptied at the delisting");
        assert!(rig.shard.perps.as_ref().and_then(|p| p.book(book)).is_none());
        rig.run_ms(3_000);
        assert!(rig.published(book).is_none(), "nothing published while delisted");
        let other = rig.registry.find(Venue::Bybit, "BTCUSDT").expect("BTCUSDT on Bybit");
        assert!(rig.published(other).is_some_and(|p| p.ts_ms > before.ts_ms), "the other venues go on");
        rig.command(Command::Relist { book });
        rig.run_ms(2_000);
        let after = rig.published(book).expect("published again after the relisting");
        assert_eq!(after.contract, before.contract);
        // The relisted spot book starts empty (the venue's next snapshot fills it; the simulator
        // sends none), so the contract steps again only once the book has a mid: whatever the
        // fresh book holds came after the relisting.
        let relisted_ms = rig.now - 2_000;
        let fresh = |t: Option<i64>| t.is_none_or(|t| t >= relisted_ms);
        assert!(fresh(after.oi.map(|o| o.time_ms)) && fresh(after.funding.map(|f| f.time_ms)), "{after:?}");
        assert!(after.last.is_none_or(|l| l.time_ms >= relisted_ms), "the fresh book holds nothing from before");
        let held = rig.shared.slots[book.index()].liquidations.get().map(|f| f.held()).unwrap_or_default();
        assert!(held.iter().all(|(_, l)| l.time_ms >= relisted_ms), "nor does its ring: {held:?}");
    }
}
