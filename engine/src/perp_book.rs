//! The whole derivatives state of one (venue, pair) with a USDT perpetual, as its owning shard
//! holds it (`decisions.md` §17): the contract's facts, seven rolling windows of liquidations and
//! open interest, the newest liquidation of each side, OI now, the mark price and funding, with their
//! freshness. Sans-I/O: time is an argument; [`PerpBook::new`] allocates the book once, when the
//! pair gains a perpetual, and no update or read allocates after it (all of it is inline).
//!
//! The shard hands every venue update to an `on_*` entry point, which returns what changed (or a
//! [`PerpReject`] saying why nothing did), so it can evaluate the alerts of that kind; a value an
//! update returns is fresh by definition. Readers carry a `stale` flag instead: a stale value is
//! served, never handed to alerts (§17 "Freshness").
//!
//! Windows (§17 "Windows"): one [`PerpWindow`] per [`PerpInterval`] holds both the liquidations
//! and the OI of that window; the 1m window takes liquidations only (§17 has no 1m OI window) and
//! all seven are watched from the book's creation.
//!
//! Choices where §17 is silent, and why:
//! - Binance's "largest per second": the venue already sends at most one liquidation per contract
//!   per second, the largest (the simulator's control API does the same), so there is nothing to
//!   dedupe here; every liquidation handed in is counted. Its sums are a sample, which
//!   [`Completeness::LargestPerSecond`] says in every answer.
//! - "Nothing new came for 60 s" is measured on our clock (`now_ms` of the last update taken),
//!   not the venue's time, and a value exactly 60 s (Binance OI: 3 poll intervals) old is stale.
//! - An OI, funding or mark update stamped before the newest taken is refused
//!   ([`PerpReject::Older`]): pushes may cross and the value now is the venue's newest. An OI
//!   sample stamped after `now_ms` (a venue clock ahead of ours) is noted at `now_ms` in the
//!   windows, as a liquidation is clamped into its window.
//! - `oiUsd` is the venue's figure from the same sample when it sent one, else OI × the newest
//!   mark price (not the mark at the sample's time: Binance OI is polled every 30 s, the mark
//!   comes every second); `None` without either.
//! - The book keeps the newest liquidation of each side and of both by the venue's time (OKX
//!   pushes are not in order; of two with the same time the one taken later), for `last` and a
//!   test send. The newest [`RECENT_MAX`] the lists show are the ring the shard writes
//!   (`rampart_state::liq_feed`), not a copy here: one list a pair, not three (§17's memory).
//!   [`LiqFilter`] reads either the same way; a liquidation exactly 24 h old is still listed.
//!
//! Bounds: 7 windows of 60 slots, three liquidations, a contract name of 32 bytes; see
//! [`PERP_BOOK_BYTES`] for the memory of one pair.

use core::fmt;

use crate::candle::DAY_MS;
pub use crate::perp_interval::PerpInterval;
pub use crate::perp_liquidation::{Liquidation, RECENT_MAX};
use crate::perp_window::{LiqSums, PerpWindow, PositionSide};
use crate::Venue;

/// The lists show liquidations at most this old (by the venue's time).
pub const RECENT_KEEP_MS: i64 = DAY_MS;
/// OI and funding are stale after this long without an update (§17 "Freshness").
pub const STALE_AFTER_MS: i64 = 60_000;
/// Binance OI (polled) is stale after this many poll intervals without a sample.
pub const BINANCE_OI_STALE_POLLS: i64 = 3;
/// Bytes of a contract name; a longer one is refused at construction.
pub const CONTRACT_LEN_MAX: usize = 32;
/// Funding intervals taken, hours (venues use 1 to 8); an interval outside is refused.
pub const FUNDING_INTERVAL_H_MAX: u32 = 24;
/// Memory of one pair's derivatives book: all inline (about 13.7 KiB: [`PerpWindow`]'s slot is 32
/// bytes, both sides' sums and counts and the OI at its end, the time it holds being the ring's,
/// where §17's estimate counted about 12 per side and 16 per OI slot). Beside it a pair holds the
/// ring of its newest [`RECENT_MAX`] liquidations (`rampart_state::liq_feed`, about 5 KiB) and its
/// published snapshot: §17's about 21 KiB is the whole's bound (`rampart-bench perp-memory`).
pub const PERP_BOOK_BYTES: usize = core::mem::size_of::<PerpBook>();
/// The most one pair's book may take: §17's about 21 KiB less the ring of [`RECENT_MAX`]
/// liquidations beside it (40 bytes an entry, 5 KiB) and 1 KiB for its published snapshot; a
/// layout over it does not compile.
pub const PERP_BOOK_BYTES_MAX: usize = 21 * 1024 - RECENT_MAX * 40 - 1024;
const _: () = assert!(PERP_BOOK_BYTES <= PERP_BOOK_BYTES_MAX, "a pair's perpetual state grew past its bound");

/// How much of a venue's liquidations its feed shows (§17 "Completeness of liquidations").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completeness {
    /// Binance: at most one order per contract per second, the largest.
    LargestPerSecond,
    /// Bybit `allLiquidation`: every one.
    All,
    /// OKX: "doesn't represent the total".
    Partial,
    /// Bitget: no liquidations published.
    Unpublished,
}

impl Completeness {
    /// The completeness of `venue`'s liquidation feed.
    pub fn of(venue: Venue) -> Completeness {
        match venue {
            Venue::Binance => Completeness::LargestPerSecond,
            Venue::Bybit => Completeness::All,
            Venue::Okx => Completeness::Partial,
            Venue::Bitget => Completeness::Unpublished,
        }
    }

    /// The API text.
    pub fn as_str(self) -> &'static str {
        match self {
            Completeness::LargestPerSecond => "largest_per_second",
            Completeness::All => "all",
            Completeness::Partial => "partial",
            Completeness::Unpublished => "none",
        }
    }
}

/// Which recent liquidations a list asks for (`GET /v1/liquidations/{symbol}`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiqFilter {
    /// Only this side (`None`: `any`).
    pub side: Option<PositionSide>,
    /// Only those worth this much or more, USD.
    pub min_usd: f64,
    /// At most this many (beyond [`RECENT_MAX`] the ring has no more).
    pub limit: usize,
}

impl LiqFilter {
    /// Whether `l` is of the last [`RECENT_KEEP_MS`] at `now_ms`, of this side and value (what
    /// [`LiqFilter::apply`] keeps, the limit aside).
    pub fn passes(&self, now_ms: i64, l: &Liquidation) -> bool {
        l.time_ms >= now_ms - RECENT_KEEP_MS && self.side.is_none_or(|s| s == l.side) && l.usd() >= self.min_usd
    }

    /// Newest first, `newest` filtered as a list answer shows it at `now_ms`: the last
    /// [`RECENT_KEEP_MS`], this side and value, at most `limit` (the ring's copy and a stream's
    /// list are read the same way).
    pub fn apply<'a>(
        self,
        now_ms: i64,
        newest: impl Iterator<Item = &'a Liquidation> + 'a,
    ) -> impl Iterator<Item = &'a Liquidation> + 'a {
        let oldest_ms = now_ms - RECENT_KEEP_MS;
        newest
            .take_while(move |l| l.time_ms >= oldest_ms)
            .filter(move |l| self.side.is_none_or(|s| s == l.side) && l.usd() >= self.min_usd)
            .take(self.limit)
    }
}

/// Open interest now (`GET /v1/perp/{symbol}`'s `oi`, the `oi` metric).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OiNow {
    /// Base units.
    pub base: f64,
    /// USD: the venue's figure, else `base ×` the mark price; `None` without either.
    pub usd: Option<f64>,
    /// The sample's venue time, Unix ms.
    pub time_ms: i64,
    /// No sample for [`STALE_AFTER_MS`] (Binance: 3 poll intervals).
    pub stale: bool,
}

/// The change of OI over a window (the `oiChange` metric and an `oi` firing's numbers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OiChange {
    /// Percent change in base units from `from_base` to now.
    pub pct: f64,
    /// OI (base units) at the end of the window's first slot.
    pub from_base: f64,
    /// The start of the window's first slot, Unix ms.
    pub from_ms: i64,
}

/// Funding now (`GET /v1/perp/{symbol}`'s `funding`, the `funding` metric).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FundingNow {
    /// Percent per `interval_h` (`0.01` = 0.01 %).
    pub rate: f64,
    /// Percent per 8 h: `rate × 8 / interval_h`.
    pub rate8h: f64,
    /// The funding interval, hours.
    pub interval_h: u32,
    /// The next settlement, Unix ms.
    pub next_ms: i64,
    /// The update's venue time, Unix ms.
    pub time_ms: i64,
    /// No update for [`STALE_AFTER_MS`].
    pub stale: bool,
}

/// One slot of `GET /v1/perp/{symbol}/history`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HistorySlot {
    /// The slot's start, Unix ms.
    pub time_ms: i64,
    /// OI at its end, base units; `None` before the watch or before the first sample.
    pub oi_base: Option<f64>,
    /// OI at its end, USD: `oi_base` × the spot price then ([`HistorySlot::valued`]); `None`
    /// without either.
    pub oi_usd: Option<f64>,
    /// Its liquidations; `None` before the watch.
    pub liquidations: Option<LiqSums>,
}

impl HistorySlot {
    /// The slot with its OI valued in USD at `price_at` its end (`slot_ms` after its start, or
    /// `now_ms` for the slot in progress): the windows keep OI in base units only, and the price
    /// per base unit then is the spot pair's (`CandleSet::close_at`), not the mark's (§17 values
    /// OI now at the mark; past marks are not kept).
    pub fn valued(mut self, slot_ms: i64, now_ms: i64, price_at: impl Fn(i64) -> Option<f64>) -> HistorySlot {
        let at = (self.time_ms + slot_ms - 1).min(now_ms);
        self.oi_usd = self.oi_base.zip(price_at(at)).map(|(base, price)| base * price);
        self
    }
}

/// What a perpetual is, fixed when the pair gains it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerpSpec<'a> {
    /// The venue.
    pub venue: Venue,
    /// The contract's name on the venue (`BTCUSDT`, `BTC-USDT-SWAP`, `1000PEPEUSDT`).
    pub contract: &'a str,
    /// Base units of the spot pair per unit of the contract's base (`1000PEPE`: 1000).
    pub multiplier: u32,
    /// Binance's OI poll interval, ms (`binance_oi_poll_s`); read on Binance only.
    pub binance_oi_poll_ms: i64,
}

/// Why a perpetual cannot be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerpBookError {
    /// The contract name is empty, not ASCII or longer than [`CONTRACT_LEN_MAX`].
    Contract,
    /// The multiplier is zero.
    Multiplier,
    /// The Binance OI poll interval is not positive.
    PollInterval,
}

impl fmt::Display for PerpBookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PerpBookError::Contract => "contract name empty, not ASCII or over 32 bytes",
            PerpBookError::Multiplier => "contract multiplier is zero",
            PerpBookError::PollInterval => "OI poll interval is not positive",
        })
    }
}

impl std::error::Error for PerpBookError {}

/// Why an update changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerpReject {
    /// A number not finite, a price, quantity or mark not positive, an OI negative, or a funding
    /// interval outside 1 to [`FUNDING_INTERVAL_H_MAX`] hours.
    Invalid,
    /// Stamped before the newest of its kind taken.
    Older,
    /// A liquidation on a venue that publishes none.
    Unpublished,
}

impl fmt::Display for PerpReject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PerpReject::Invalid => "invalid value",
            PerpReject::Older => "older than the newest taken",
            PerpReject::Unpublished => "the venue publishes no liquidations",
        })
    }
}

impl std::error::Error for PerpReject {}

/// A value and when we took it.
#[derive(Clone, Copy, Debug)]
struct Taken<T> {
    value: T,
    /// The venue's time.
    ts_ms: i64,
    /// Our time.
    received_ms: i64,
}

#[derive(Clone, Copy, Debug)]
struct Oi {
    base: f64,
    venue_usd: Option<f64>,
}

#[derive(Clone, Copy, Debug)]
struct Funding {
    rate: f64,
    interval_h: u32,
    next_ms: i64,
}

/// One (venue, pair)'s perpetual: see the module documentation.
#[derive(Clone, Debug)]
pub struct PerpBook {
    contract: [u8; CONTRACT_LEN_MAX],
    contract_len: u8,
    multiplier: u32,
    completeness: Completeness,
    /// OI is stale this long after its last sample.
    oi_stale_ms: i64,
    windows: [PerpWindow; 7],
    /// The newest liquidation by the venue's time (`None` before the first).
    last: Option<Liquidation>,
    /// The newest of each side, long first.
    last_of_side: [Option<Liquidation>; 2],
    oi: Option<Taken<Oi>>,
    mark: Option<Taken<f64>>,
    funding: Option<Taken<Funding>>,
}

impl PerpBook {
    /// The state of a perpetual gained at `now_ms`, its windows watched from then; the one
    /// allocation of its life (about [`PERP_BOOK_BYTES`]).
    pub fn new(spec: PerpSpec<'_>, now_ms: i64) -> Result<Box<PerpBook>, PerpBookError> {
        let name = spec.contract.as_bytes();
        if name.is_empty() || name.len() > CONTRACT_LEN_MAX || !name.is_ascii() {
            return Err(PerpBookError::Contract);
        }
        if spec.multiplier == 0 {
            return Err(PerpBookError::Multiplier);
        }
        if spec.binance_oi_poll_ms <= 0 {
            return Err(PerpBookError::PollInterval);
        }
        let mut contract = [0; CONTRACT_LEN_MAX];
        contract[..name.len()].copy_from_slice(name);
        let oi_stale_ms = match spec.venue {
            Venue::Binance => BINANCE_OI_STALE_POLLS * spec.binance_oi_poll_ms,
            _ => STALE_AFTER_MS,
        };
        Ok(Box::new(PerpBook {
            contract,
            contract_len: name.len() as u8,
            multiplier: spec.multiplier,
            completeness: Completeness::of(spec.venue),
            oi_stale_ms,
            windows: PerpInterval::ALL.map(|i| PerpWindow::new(i.duration_ms(), now_ms)),
            last: None,
            last_of_side: [None; 2],
            oi: None,
            mark: None,
            funding: None,
        }))
    }

    /// Bytes this book takes: all inline, nothing on the heap besides it ([`PERP_BOOK_BYTES`]).
    pub fn bytes(&self) -> usize {
        core::mem::size_of_val(self)
    }

    /// The contract's name on the venue.
    pub fn contract(&self) -> &str {
        core::str::from_utf8(&self.contract[..usize::from(self.contract_len)]).unwrap_or_default()
    }

    /// Base units of the spot pair per unit of the contract's base.
    pub fn multiplier(&self) -> u32 {
        self.multiplier
    }

    /// How much of the venue's liquidations its feed shows.
    pub fn completeness(&self) -> Completeness {
        self.completeness
    }

    fn window(&self, interval: PerpInterval) -> &PerpWindow {
        &self.windows[interval.index()]
    }

    /// Takes a liquidation of `side`, `qty_base` at `price`, stamped `ts_ms` by the venue, at
    /// `now_ms`: counted in every window, and the newest when it is. Returns it.
    /// Quantities here are in the spot pair's base units and prices per such unit: the feed has
    /// applied the contract size and the multiplier (§17 "Units").
    pub fn on_liquidation(
        &mut self,
        now_ms: i64,
        ts_ms: i64,
        side: PositionSide,
        price: f64,
        qty_base: f64,
    ) -> Result<Liquidation, PerpReject> {
        if self.completeness == Completeness::Unpublished {
            return Err(PerpReject::Unpublished);
        }
        if !(positive(price) && positive(qty_base)) {
            return Err(PerpReject::Invalid);
        }
        let l = Liquidation { side, price, qty: qty_base, time_ms: ts_ms };
        for w in &mut self.windows {
            w.add_liquidation(now_ms, ts_ms, side, l.usd());
        }
        let side_last = &mut self.last_of_side[usize::from(side == PositionSide::Short)];
        for newest in [&mut self.last, side_last] {
            if newest.is_none_or(|n| n.time_ms <= ts_ms) {
                *newest = Some(l);
            }
        }
        Ok(l)
    }

    /// Takes an OI sample of `base` units (with the venue's USD figure when it sends one),
    /// stamped `ts_ms`, at `now_ms`. Returns OI now.
    pub fn on_oi(&mut self, now_ms: i64, ts_ms: i64, base: f64, usd: Option<f64>) -> Result<OiNow, PerpReject> {
        let valid = |v: f64| v.is_finite() && v >= 0.0;
        if !valid(base) || usd.is_some_and(|u| !valid(u)) {
            return Err(PerpReject::Invalid);
        }
        check_order(self.oi.map(|t| t.ts_ms), ts_ms)?;
        for i in PerpInterval::OI {
            self.windows[i.index()].note_oi(ts_ms.min(now_ms), base);
        }
        let taken = Taken { value: Oi { base, venue_usd: usd }, ts_ms, received_ms: now_ms };
        self.oi = Some(taken);
        Ok(self.oi_now(taken, now_ms))
    }

    /// Takes a funding update: `rate` percent per `interval_h` hours, the next settlement at
    /// `next_ms`, stamped `ts_ms`, at `now_ms`. Returns funding now.
    pub fn on_funding(
        &mut self,
        now_ms: i64,
        ts_ms: i64,
        rate: f64,
        interval_h: u32,
        next_ms: i64,
    ) -> Result<FundingNow, PerpReject> {
        if !rate.is_finite() || !(1..=FUNDING_INTERVAL_H_MAX).contains(&interval_h) {
            return Err(PerpReject::Invalid);
        }
        check_order(self.funding.map(|t| t.ts_ms), ts_ms)?;
        let taken = Taken { value: Funding { rate, interval_h, next_ms }, ts_ms, received_ms: now_ms };
        self.funding = Some(taken);
        Ok(funding_now(taken, now_ms))
    }

    /// Takes a mark price stamped `ts_ms`, at `now_ms`. Returns it.
    pub fn on_mark(&mut self, now_ms: i64, ts_ms: i64, mark: f64) -> Result<f64, PerpReject> {
        if !positive(mark) {
            return Err(PerpReject::Invalid);
        }
        check_order(self.mark.map(|t| t.ts_ms), ts_ms)?;
        self.mark = Some(Taken { value: mark, ts_ms, received_ms: now_ms });
        Ok(mark)
    }

    /// The newest mark price, `None` before the first.
    pub fn mark(&self) -> Option<f64> {
        self.mark.map(|t| t.value)
    }

    /// The window's liquidation sums at `now_ms`; `None` when the window is not watched in full
    /// or the venue publishes no liquidations.
    pub fn liquidations(&self, now_ms: i64, interval: PerpInterval) -> Option<LiqSums> {
        if self.completeness == Completeness::Unpublished {
            return None;
        }
        self.window(interval).liquidations(now_ms)
    }

    /// The start of the window's first slot at `now_ms` (a `sum` firing's `from`).
    pub fn window_from_ms(&self, now_ms: i64, interval: PerpInterval) -> i64 {
        // The window's own first slot, so that the alignment has one home (`PerpWindow`).
        self.window(interval).slots(now_ms).next().map_or(now_ms, |s| s.start_ms)
    }

    /// OI now, `None` before the first sample.
    pub fn oi(&self, now_ms: i64) -> Option<OiNow> {
        self.oi.map(|t| self.oi_now(t, now_ms))
    }

    fn oi_now(&self, t: Taken<Oi>, now_ms: i64) -> OiNow {
        let usd = t.value.venue_usd.or_else(|| self.mark().map(|m| m * t.value.base));
        let stale = now_ms - t.received_ms >= self.oi_stale_ms;
        OiNow { base: t.value.base, usd, time_ms: t.ts_ms, stale }
    }

    /// The change of OI in base units over the window at `now_ms`; `None` for 1m, when the
    /// window is not watched in full, an end is not known or OI was zero at its start. It is read
    /// from the samples held, stale or not: [`PerpBook::oi`] says which.
    pub fn oi_change(&self, now_ms: i64, interval: PerpInterval) -> Option<OiChange> {
        if !interval.has_oi() {
            return None;
        }
        let w = self.window(interval);
        let pct = w.oi_change_pct(now_ms)?;
        let first = w.slots(now_ms).next()?;
        Some(OiChange { pct, from_base: first.oi_base?, from_ms: first.start_ms })
    }

    /// Funding now, `None` before the first update.
    pub fn funding(&self, now_ms: i64) -> Option<FundingNow> {
        self.funding.map(|t| funding_now(t, now_ms))
    }

    /// The window's 60 slots at `now_ms`, oldest first (`GET /v1/perp/{symbol}/history`); the 1m
    /// window's have no OI.
    pub fn history(&self, now_ms: i64, interval: PerpInterval) -> impl Iterator<Item = HistorySlot> + '_ {
        let published = self.completeness != Completeness::Unpublished;
        self.window(interval).slots(now_ms).map(move |s| HistorySlot {
            time_ms: s.start_ms,
            oi_base: s.oi_base,
            oi_usd: None,
            liquidations: s.liquidations.filter(|_| published),
        })
    }

    /// The newest liquidation taken (`GET /v1/perp/{symbol}`'s `last`), however old.
    pub fn last_liquidation(&self) -> Option<Liquidation> {
        self.last
    }

    /// The newest liquidation of `side` (`None`: either) if it is of the last [`RECENT_KEEP_MS`]
    /// at `now_ms` (a test send of an `order` alert).
    pub fn newest_of(&self, side: Option<PositionSide>, now_ms: i64) -> Option<Liquidation> {
        let newest = match side {
            None => self.last,
            Some(s) => self.last_of_side[usize::from(s == PositionSide::Short)],
        };
        newest.filter(|l| l.time_ms >= now_ms - RECENT_KEEP_MS)
    }
}

/// Funding as read at `now_ms`, with `rate8h` and its freshness.
fn funding_now(t: Taken<Funding>, now_ms: i64) -> FundingNow {
    let Funding { rate, interval_h, next_ms } = t.value;
    let rate8h = rate * 8.0 / f64::from(interval_h);
    let stale = now_ms - t.received_ms >= STALE_AFTER_MS;
    FundingNow { rate, rate8h, interval_h, next_ms, time_ms: t.ts_ms, stale }
}

fn positive(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// Refuses an update stamped before the newest of its kind (`newest_ms`).
fn check_order(newest_ms: Option<i64>, ts_ms: i64) -> Result<(), PerpReject> {
    match newest_ms {
        Some(t) if ts_ms < t => Err(PerpReject::Older),
        _ => Ok(()),
    }
}
