//! The simulated market's perpetuals (decisions §17, "The simulator"): which pairs have a
//! USDT-margined perpetual on which venue, and each perpetual's mark price, funding, open interest
//! and liquidations, moving with the spot pair. Sans-I/O and deterministic from the seed: time
//! and the spot mids are arguments, everything is allocated at construction, and stepping
//! allocates nothing.
//!
//! Two parts:
//! - [`listing`] is the perpetuals of a universe as data ([`PerpListing`], one [`PerpContract`]
//!   per venue and contract, spelled as the venue spells it), so the venue simulator's REST
//!   listings and the embedded feed read the same facts. It lives in [`crate::sim_perp_listing`]
//!   and is re-exported here.
//! - [`SimPerp`] steps the perpetuals of one shard's pairs once a second and writes
//!   [`PerpTick`]s (a liquidation, or the perpetual's mark, OI and funding) into a preallocated
//!   buffer, beside the spot [`crate::sim::Sim`]'s ticks. It reads each pair's mid from a slice
//!   indexed by [`BookId`] (the spot `Sim` keeps its prices private); [`SimPerp::read_mids`]
//!   fills that slice from a [`Market`] the spot ticks were applied to.
//!
//! The model, per contract:
//! - **Mark** = the pair's mid × (1 + premium); the premium is a mean-reverting random walk
//!   (relaxation time [`PREMIUM_RELAX_S`], stationary spread [`PREMIUM_STD`]) held within
//!   ±[`PREMIUM_MAX`].
//! - **Funding** = clamp(premium + [`FUNDING_INTEREST`], ±[`FUNDING_RATE_MAX`]) per interval, a
//!   fraction rounded to 8 decimals; `next_ms` the next UTC multiple of the interval.
//! - **OI** (base units of the spot pair): a log random walk slowly pulled back to its start
//!   (2 000–8 000 times the pair's typical level size, which also sets the spot simulator's
//!   volume), pushed up by |price move| ([`OI_MOVE_GAIN`]), lowered by each liquidation's size,
//!   with a jump of ±5–30 % about every [`OI_JUMP_MEAN_S`] seconds.
//! - **Liquidations**: Poisson arrivals at `LIQ_RATE_QUIET_PER_S + LIQ_RATE_MOVE_PER_S ×
//!   (move_1m / 1 %)²` per second, where `move_1m` is the log move of the mid over the last
//!   minute; each liquidates the side against the move (a drop liquidates longs), its size
//!   lognormal around [`LIQ_MEDIAN_OF_OI`] of the OI, its price the mark a little beyond it (the
//!   bankruptcy side).
//!
//! Choices where §17 is silent, and why:
//! - Quantities (`qty`, `oi`) are `f64` base units, not [`crate::Qty`]: a tiny-priced coin's
//!   open interest (PEPE: ~10^12 units) is beyond `Qty`'s 1.8·10^11, and the consumer
//!   ([`crate::perp_window`]) sums them as floats anyway. They are whole multiples of the
//!   contract's quantity step, so the wire's contract counts are exact.
//! - Ticks are in the spot pair's units (price per base unit, quantity in base units), which is
//!   what the consumer keeps; the wire converts with [`PerpContract::venue_price`] and
//!   [`PerpContract::venue_qty`] (×/÷ the multiplier, OKX ÷ `ctVal`).
//! - Bitget: liquidations happen in the model (they lower its OI) but are never emitted, and an
//!   injected one is refused ([`ControlError::NoLiquidations`]). Rationale: Bitget publishes
//!   none, so the embedded feed must see none, exactly as from the real venue; nothing
//!   downstream has to drop them.
//! - One perpetual without a spot pair on every venue (a perps-only coin, as HYPE was): each
//!   venue's listing parser is its own code to exercise. Its price follows its own walk; its
//!   ticks carry `book: None`, and only a [`SimPerp`] made with [`SimPerpConfig::orphans`]
//!   simulates it (one shard, or the venue simulator).
//! - Multiplier contracts (`1000PEPEUSDT`, base `1000PEPE`, multiplier 1000) on Binance, Bybit
//!   and Bitget; OKX spells the same contract `PEPE-USDT-SWAP` with a large `ctVal`, multiplier 1,
//!   as OKX does.
//! - OKX `ctVal` is the power of ten that makes one contract worth $100–$1 000 (BTC 0.01, ETH 0.1,
//!   PEPE 10^7), like OKX's own; other venues count in the contract's base (`ct_val` 1).
//! - A control event (injected liquidation, OI jump, funding change) takes effect at the next
//!   [`SimPerp::step_due`] call, whatever the contract's schedule: the contract steps at once.
//!   An injected funding rate holds (moving with the premium) until the settlement it is for,
//!   then the model's rate returns; a delisting stops the ticks at once and a relisting resumes
//!   them at the next call.
//! - Each contract draws from its own generator, seeded by the seed and its [`PerpId`], so how
//!   the pairs are split over shards changes no contract's path.
//! - The first call of `step_due` steps every contract (so every perpetual has a value at once);
//!   after that a contract steps every [`PERP_STEP_MS`] at its own seeded phase within the second.
//!
//! Bounds: at most [`LIQS_PER_STEP_MAX`] model liquidations and [`PENDING_LIQS_MAX`] injected
//! ones per contract and step, so a step emits at most [`SimPerp::ticks_per_step_max`] ticks; a
//! step covers at most [`STEP_GAP_MS_MAX`] of time (a longer gap is simulated as that).

use core::fmt;

use crate::fixed::{Price, SCALE};
use crate::instrument::{BookId, Registry};
use crate::market::Market;
use crate::perp_window::PositionSide;
use crate::sim::{PairSpec, Rng};
use crate::venue::Venue;

pub use crate::sim_perp_listing::{listing, PerpContract, PerpId, PerpListing};

/// Time between two steps of one contract: mark, OI and funding update every second.
pub const PERP_STEP_MS: i64 = 1_000;
/// Longest time one step simulates; a longer gap (a relisting, a stalled caller) is cut to it.
pub const STEP_GAP_MS_MAX: i64 = 60_000;
/// Relaxation time of the premium towards zero, in seconds (a slow walk).
pub const PREMIUM_RELAX_S: f64 = 600.0;
/// Stationary standard deviation of the premium (a fraction: 0.0002 = 0.02 %).
pub const PREMIUM_STD: f64 = 0.0002;
/// Bound of the premium (a fraction): it is clamped to ±0.05 %.
pub const PREMIUM_MAX: f64 = 0.0005;
/// The interest part of funding, added to the premium (0.01 % per interval).
pub const FUNDING_INTEREST: f64 = 0.0001;
/// Bound of the funding rate per interval (±0.75 %); an injected rate is clamped too.
pub const FUNDING_RATE_MAX: f64 = 0.0075;
/// Funding intervals a contract may have, in hours (an injected interval must be one of them).
pub const INTERVALS_H: [u8; 6] = [1, 2, 3, 4, 6, 8];
/// Liquidation rate of a quiet contract, per second.
pub const LIQ_RATE_QUIET_PER_S: f64 = 1.0 / 180.0;
/// Liquidation rate added by a 1 % move over the last minute, per second (it grows with the
/// square of the move).
pub const LIQ_RATE_MOVE_PER_S: f64 = 0.6;
/// Median liquidation size, as a fraction of the open interest.
pub const LIQ_MEDIAN_OF_OI: f64 = 2e-5;
/// Largest model liquidation, as a fraction of the open interest.
pub const LIQ_MAX_OF_OI: f64 = 0.01;
/// Model liquidations per contract and step at most; more arrivals in one step are dropped.
pub const LIQS_PER_STEP_MAX: usize = 8;
/// Injected liquidations waiting for one contract's next step at most; one more is refused
/// ([`ControlError::Full`]).
pub const PENDING_LIQS_MAX: usize = 8;
/// Log OI added per unit of |log price move| (a 1 % move adds 0.5 % OI).
pub const OI_MOVE_GAIN: f64 = 0.5;
/// Daily volatility of log OI.
pub const OI_DAILY_VOL: f64 = 0.03;
/// Mean time between two OI jumps of one contract, in seconds.
pub const OI_JUMP_MEAN_S: f64 = 4.0 * 3_600.0;
/// Window of the move that drives liquidations, in seconds.
pub const MOVE_WINDOW_S: i64 = 60;

/// Seconds in a day.
const DAY_S: f64 = 86_400.0;
/// Slots of the ring of recent mids (a power of two above `MOVE_WINDOW_S`).
const MOVE_SLOTS: usize = 64;

/// What a perpetual tick carries.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum PerpTickKind {
    /// One forced liquidation.
    Liquidation {
        /// The side of the position liquidated (a drop liquidates longs).
        side: PositionSide,
        /// Its price per spot base unit (the bankruptcy side of the mark).
        price: Price,
        /// Its size in spot base units, a multiple of the contract's `lot`.
        qty: f64,
    },
    /// The perpetual's state after a step.
    Perp {
        /// Open interest in spot base units, a multiple of the contract's `lot`.
        oi: f64,
        /// Mark price per spot base unit.
        mark: Price,
        /// Funding rate for the next settlement, a fraction per interval with 8 decimals
        /// (0.0001 = 0.01 %), within ±[`FUNDING_RATE_MAX`].
        funding_rate: f64,
        /// Funding interval in hours.
        interval_h: u8,
        /// The next settlement, Unix milliseconds: a UTC multiple of the interval.
        next_ms: i64,
    },
}

/// One event of one perpetual.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PerpTick {
    /// The spot book the perpetual belongs to; `None` for the perpetual without a spot pair,
    /// which a consumer ignores.
    pub book: Option<BookId>,
    /// The contract, for the wire's symbol and units.
    pub perp: PerpId,
    /// Event time, Unix milliseconds.
    pub ts_ms: i64,
    /// Payload.
    pub kind: PerpTickKind,
}

/// Tuning of the simulated perpetuals.
#[derive(Clone, Debug)]
pub struct SimPerpConfig {
    /// Seed of every random choice (the spot simulator's seed is a fine choice).
    pub seed: u64,
    /// Also simulate the perpetuals without a spot pair: true on exactly one shard (or the
    /// venue simulator), so each is simulated once.
    pub orphans: bool,
}

impl Default for SimPerpConfig {
    fn default() -> SimPerpConfig {
        SimPerpConfig { seed: 42, orphans: true }
    }
}

/// Why a control event was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ControlError {
    /// The contract is not simulated here.
    NotHere,
    /// The contract is delisted (relist it first).
    Delisted,
    /// The venue publishes no liquidations (Bitget).
    NoLiquidations,
    /// [`PENDING_LIQS_MAX`] injected liquidations already wait for the next step.
    Full,
    /// A value out of range: a USD size not above 0, an OI change not above −100 %, a rate not
    /// finite, an interval not in [`INTERVALS_H`].
    OutOfRange,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ControlError::NotHere => "no such perpetual here",
            ControlError::Delisted => "the perpetual is delisted",
            ControlError::NoLiquidations => "the venue publishes no liquidations",
            ControlError::Full => "too many liquidations pending",
            ControlError::OutOfRange => "value out of range",
        })
    }
}

/// The state of one simulated perpetual, as the venue simulator serves it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PerpView {
    /// Still listed.
    pub listed: bool,
    /// Open interest in spot base units.
    pub oi: f64,
    /// Mark price per spot base unit.
    pub mark: Price,
    /// Funding rate, a fraction per interval.
    pub funding_rate: f64,
    /// Funding interval in hours.
    pub interval_h: u8,
    /// Next settlement, Unix milliseconds.
    pub next_ms: i64,
    /// Time of the last step.
    pub ts_ms: i64,
}

/// An injected funding change waiting for the next step.
#[derive(Clone, Copy, Debug)]
struct FundingChange {
    rate: f64,
    interval_h: Option<u8>,
}

/// One contract's simulation state.
#[derive(Clone, Debug)]
struct PerpSim {
    perp: PerpId,
    book: Option<BookId>,
    venue: Venue,
    tick: i64,
    lot: f64,
    interval_h: u8,
    rng: Rng,
    listed: bool,
    started: bool,
    due_now: bool,
    phase_ms: i64,
    next_due_ms: i64,
    last_ms: i64,
    /// Own log price walk, for the perpetual without a spot pair.
    own_ln_mid: Option<f64>,
    ln_mid: f64,
    /// Recent (second, log mid), indexed by second modulo `MOVE_SLOTS`.
    moves: [(i64, f64); MOVE_SLOTS],
    premium: f64,
    funding_bias: f64,
    funding_bias_until_ms: i64,
    oi: f64,
    ln_oi_home: f64,
    mark: Price,
    funding: f64,
    next_ms: i64,
    pending_liqs: [(PositionSide, f64); PENDING_LIQS_MAX],
    pending_len: usize,
    pending_oi_factor: f64,
    pending_funding: Option<FundingChange>,
}

/// The perpetuals of a set of pairs (one shard's share, like [`crate::sim::Sim`]).
#[derive(Debug)]
pub struct SimPerp {
    contracts: Vec<PerpSim>,
    /// [`PerpId`] index → local index, `u32::MAX` when not simulated here.
    local_of: Vec<u32>,
    /// Where the next `step_due` starts looking, so a bounded call does not starve the tail.
    cursor: usize,
}

impl SimPerp {
    /// Simulates the contracts of `listing` that belong to the pairs `pair_specs` (indices into
    /// `universe`) and whose spot book is in `registry`, and the perpetuals without a spot pair
    /// when `config.orphans`. Allocates everything; nothing is emitted until
    /// [`SimPerp::step_due`].
    pub fn new(
        config: &SimPerpConfig,
        universe: &[PairSpec],
        listing: &PerpListing,
        registry: &Registry,
        pair_specs: &[usize],
    ) -> SimPerp {
        let mut wanted = vec![false; universe.len()];
        for &s in pair_specs {
            wanted[s] = true;
        }
        let mut contracts = Vec::new();
        let mut local_of = vec![u32::MAX; listing.len()];
        for (i, c) in listing.contracts().iter().enumerate() {
            let id = PerpId(i as u32);
            let mut rng = Rng::new(config.seed.wrapping_mul(0x9E37_79B9).wrapping_add(0xC0DE_0000 + i as u64));
            let (book, price, level_qty, own) = match c.spec {
                Some(s) if wanted[s] => match c.spot_symbol.as_deref().and_then(|sym| registry.find(c.venue, sym)) {
                    Some(book) => (Some(book), universe[s].price, universe[s].level_qty, None),
                    None => continue,
                },
                Some(_) => continue,
                None if config.orphans => {
                    let price = 10f64.powf(rng.range(0.0, 2.0));
                    (None, price, rng.range(1_000.0, 25_000.0) / price, Some(price.ln()))
                }
                None => continue,
            };
            let lot = c.lot.0 as f64 / SCALE as f64;
            let oi = round_to(level_qty * rng.range(2_000.0, 8_000.0), lot).max(lot);
            local_of[i] = contracts.len() as u32;
            contracts.push(PerpSim {
                perp: id,
                book,
                venue: c.venue,
                tick: c.tick.0.max(1),
                lot,
                interval_h: c.funding_interval_h,
                phase_ms: rng.below(PERP_STEP_MS as u64) as i64,
                premium: PREMIUM_STD * rng.normal().clamp(-2.0, 2.0),
                rng,
                listed: true,
                started: false,
                due_now: true,
                next_due_ms: i64::MIN,
                last_ms: 0,
                own_ln_mid: own,
                ln_mid: price.ln(),
                moves: [(i64::MIN, 0.0); MOVE_SLOTS],
                funding_bias: 0.0,
                funding_bias_until_ms: i64::MIN,
                oi,
                ln_oi_home: oi.ln(),
                mark: Price::ZERO,
                funding: 0.0,
                next_ms: 0,
                pending_liqs: [(PositionSide::Long, 0.0); PENDING_LIQS_MAX],
                pending_len: 0,
                pending_oi_factor: 1.0,
                pending_funding: None,
            });
        }
        SimPerp { contracts, local_of, cursor: 0 }
    }

    /// Number of contracts simulated here.
    pub fn contract_count(&self) -> usize {
        self.contracts.len()
    }

    /// The contracts simulated here, in listing order.
    pub fn perps(&self) -> impl Iterator<Item = PerpId> + '_ {
        self.contracts.iter().map(|c| c.perp)
    }

    /// The largest number of ticks one contract's step emits.
    pub fn ticks_per_step_max(&self) -> usize {
        1 + LIQS_PER_STEP_MAX + PENDING_LIQS_MAX
    }

    /// Writes the mid of every spot book this simulator reads into `mids` (indexed by
    /// [`BookId`]), from `market`; `Price::ZERO` where the market has no mid. Allocates nothing.
    pub fn read_mids(&self, market: &Market, mids: &mut [Price]) {
        for book in self.contracts.iter().filter_map(|c| c.book) {
            if let Some(slot) = mids.get_mut(book.index()) {
                *slot = market.get(book).and_then(|s| s.book.mid()).unwrap_or(Price::ZERO);
            }
        }
    }

    /// Steps every listed contract due at `now_ms` and appends its ticks to `out`; returns how
    /// many stepped. A contract's mid is `mids[book]` (a price per spot base unit); one whose
    /// mid is missing or zero does not step and stays due. At most `contracts_max` contracts
    /// step per call (the rest stay due, and the next call starts after the last one stepped),
    /// so at most `contracts_max * ticks_per_step_max()` ticks are appended; with that much
    /// spare capacity in `out`, a call allocates nothing.
    pub fn step_due(&mut self, now_ms: i64, mids: &[Price], contracts_max: usize, out: &mut Vec<PerpTick>) -> usize {
        self.step_due_with(now_ms, |book| mids.get(book.index()).copied(), contracts_max, out)
    }

    /// [`SimPerp::step_due`], each due contract's mid asked of `mid` (`None` or zero: it does
    /// not step and stays due): only the contracts that step read a mid, so a caller that holds
    /// the market need not copy every mid each round (the shard's loop runs a round every few
    /// milliseconds, and a contract is due once a second).
    pub fn step_due_with(
        &mut self,
        now_ms: i64,
        mut mid: impl FnMut(BookId) -> Option<Price>,
        contracts_max: usize,
        out: &mut Vec<PerpTick>,
    ) -> usize {
        let n = self.contracts.len();
        let mut stepped = 0;
        for k in 0..n {
            if stepped == contracts_max {
                break;
            }
            let i = (self.cursor + k) % n;
            let c = &mut self.contracts[i];
            if !c.listed || !(c.due_now || c.next_due_ms <= now_ms) {
                continue;
            }
            let mid = match (c.own_ln_mid, c.book) {
                (Some(_), _) => 1.0,
                (None, Some(book)) => match mid(book) {
                    Some(p) if p.0 > 0 => p.to_f64(),
                    _ => continue,
                },
                (None, None) => continue,
            };
            step_contract(c, now_ms, mid, out);
            stepped += 1;
            if stepped == contracts_max {
                self.cursor = (i + 1) % n;
            }
        }
        stepped
    }

    /// The state of contract `perp` after its last step; `None` when it is not simulated here or
    /// has not stepped yet.
    pub fn view(&self, perp: PerpId) -> Option<PerpView> {
        let c = self.local(perp)?;
        c.started.then_some(PerpView {
            listed: c.listed,
            oi: c.oi,
            mark: c.mark,
            funding_rate: c.funding,
            interval_h: c.interval_h,
            next_ms: c.next_ms,
            ts_ms: c.last_ms,
        })
    }

    /// Whether contract `perp` is listed; `None` when it is not simulated here.
    pub fn is_listed(&self, perp: PerpId) -> Option<bool> {
        self.local(perp).map(|c| c.listed)
    }

    /// Control: one liquidation of `side` worth `usd` at the mark of the contract's next step
    /// (the next [`SimPerp::step_due`] call steps it). Refused on Bitget, which publishes none.
    pub fn inject_liquidation(&mut self, perp: PerpId, side: PositionSide, usd: f64) -> Result<(), ControlError> {
        if !(usd.is_finite() && usd > 0.0) {
            return Err(ControlError::OutOfRange);
        }
        let c = self.control(perp)?;
        if c.venue == Venue::Bitget {
            return Err(ControlError::NoLiquidations);
        }
        if c.pending_len == PENDING_LIQS_MAX {
            return Err(ControlError::Full);
        }
        c.pending_liqs[c.pending_len] = (side, usd);
        c.pending_len += 1;
        c.due_now = true;
        Ok(())
    }

    /// Control: one liquidation of `side` worth `usd` on every listed contract of `venue`
    /// simulated here, in the same step (`"symbol":"*"`); returns how many took it (a contract
    /// whose pending queue is full is skipped). Refused on Bitget.
    pub fn inject_liquidation_all(
        &mut self,
        venue: Venue,
        side: PositionSide,
        usd: f64,
    ) -> Result<usize, ControlError> {
        if venue == Venue::Bitget {
            return Err(ControlError::NoLiquidations);
        }
        let mut n = 0;
        for k in 0..self.contracts.len() {
            let (perp, here) = (self.contracts[k].perp, self.contracts[k].venue == venue && self.contracts[k].listed);
            if here && self.inject_liquidation(perp, side, usd).is_ok() {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Control: the open interest jumps by `pct` percent (−50 halves it) at the next step.
    pub fn inject_oi_jump(&mut self, perp: PerpId, pct: f64) -> Result<(), ControlError> {
        if !(pct.is_finite() && pct > -100.0) {
            return Err(ControlError::OutOfRange);
        }
        let c = self.control(perp)?;
        c.pending_oi_factor *= 1.0 + pct / 100.0;
        c.due_now = true;
        Ok(())
    }

    /// Control: from the next step the funding rate is `rate` (a fraction per interval, as
    /// venues send it: 0.0001 = 0.01 %; clamped to ±[`FUNDING_RATE_MAX`]), moving with the
    /// premium until the settlement it is for; with `interval_h`, the interval changes too.
    pub fn set_funding(&mut self, perp: PerpId, rate: f64, interval_h: Option<u8>) -> Result<(), ControlError> {
        if !rate.is_finite() || interval_h.is_some_and(|h| !INTERVALS_H.contains(&h)) {
            return Err(ControlError::OutOfRange);
        }
        let c = self.control(perp)?;
        c.pending_funding = Some(FundingChange { rate, interval_h });
        c.due_now = true;
        Ok(())
    }

    /// Control: delists (`false`: no tick from now on) or relists (`true`: ticks again from the
    /// next call) the perpetual only; the spot pair is untouched. Pending control events of a
    /// delisted contract are dropped.
    pub fn set_listed(&mut self, perp: PerpId, listed: bool) -> Result<(), ControlError> {
        let i = self.local_index(perp).ok_or(ControlError::NotHere)?;
        let c = &mut self.contracts[i];
        if c.listed == listed {
            return Ok(());
        }
        c.listed = listed;
        if listed {
            // The walk resumes from the mid it finds; the gap is not a move.
            c.started = false;
            c.due_now = true;
        } else {
            c.pending_len = 0;
            c.pending_oi_factor = 1.0;
            c.pending_funding = None;
        }
        Ok(())
    }

    fn local_index(&self, perp: PerpId) -> Option<usize> {
        match self.local_of.get(perp.index()) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    fn local(&self, perp: PerpId) -> Option<&PerpSim> {
        self.local_index(perp).map(|i| &self.contracts[i])
    }

    /// The listed contract `perp`, for a control event.
    fn control(&mut self, perp: PerpId) -> Result<&mut PerpSim, ControlError> {
        let i = self.local_index(perp).ok_or(ControlError::NotHere)?;
        let c = &mut self.contracts[i];
        if c.listed {
            Ok(c)
        } else {
            Err(ControlError::Delisted)
        }
    }
}

/// `x` rounded to a whole multiple of `step`.
fn round_to(x: f64, step: f64) -> f64 {
    (x / step).round() * step
}

/// A Poisson draw of mean `lambda` (Knuth's method), at most `max`.
fn poisson(rng: &mut Rng, lambda: f64, max: usize) -> usize {
    let limit = (-lambda).exp();
    let mut p = rng.unit();
    let mut k = 0;
    while p > limit && k < max {
        k += 1;
        p *= rng.unit();
    }
    k
}

/// Advances contract `c` to `now_ms` at spot mid `mid` (ignored for a contract with its own walk)
/// and appends its ticks.
fn step_contract(c: &mut PerpSim, now_ms: i64, mid: f64, out: &mut Vec<PerpTick>) {
    let dt_ms = if c.started { (now_ms - c.last_ms).clamp(0, STEP_GAP_MS_MAX) } else { 0 };
    let dt = dt_ms as f64 / 1_000.0;
    if !c.started {
        c.moves = [(i64::MIN, 0.0); MOVE_SLOTS];
    }
    let ln_mid = match c.own_ln_mid.as_mut() {
        Some(own) => {
            *own += 0.05 * (dt / DAY_S).sqrt() * c.rng.normal();
            *own
        }
        None => mid.ln(),
    };
    let r = if c.started { ln_mid - c.ln_mid } else { 0.0 };
    c.ln_mid = ln_mid;
    let move_1m = note_move(c, now_ms, ln_mid);
    c.started = true;
    c.last_ms = now_ms;
    c.due_now = false;
    c.next_due_ms = now_ms - (now_ms - c.phase_ms).rem_euclid(PERP_STEP_MS) + PERP_STEP_MS;

    // Premium and mark.
    let sigma = PREMIUM_STD * (2.0 / PREMIUM_RELAX_S).sqrt();
    c.premium = (c.premium * (1.0 - dt / PREMIUM_RELAX_S).max(0.0) + sigma * dt.sqrt() * c.rng.normal())
        .clamp(-PREMIUM_MAX, PREMIUM_MAX);
    let mark_f = ln_mid.exp() * (1.0 + c.premium);
    c.mark = Price(((mark_f * SCALE as f64 / c.tick as f64).round() as i64).max(1) * c.tick);

    update_funding(c, now_ms);
    update_oi(c, dt, r);
    liquidate(c, now_ms, dt, move_1m, mark_f, out);

    out.push(PerpTick {
        book: c.book,
        perp: c.perp,
        ts_ms: now_ms,
        kind: PerpTickKind::Perp {
            oi: c.oi,
            mark: c.mark,
            funding_rate: c.funding,
            interval_h: c.interval_h,
            next_ms: c.next_ms,
        },
    });
}

/// Records the log mid of this second and returns the log move since about a minute ago (the
/// oldest mid held within [`MOVE_WINDOW_S`]; 0 when there is none).
fn note_move(c: &mut PerpSim, now_ms: i64, ln_mid: f64) -> f64 {
    let sec = now_ms.div_euclid(1_000);
    c.moves[sec.rem_euclid(MOVE_SLOTS as i64) as usize] = (sec, ln_mid);
    let mut oldest = (sec, ln_mid);
    for &(s, v) in &c.moves {
        if s >= sec - MOVE_WINDOW_S && s < oldest.0 {
            oldest = (s, v);
        }
    }
    ln_mid - oldest.1
}

/// Funding: the model's rate (premium + interest) plus an injected bias until the settlement it
/// is for, clamped and rounded to 8 decimals; the next settlement on the interval's UTC grid.
fn update_funding(c: &mut PerpSim, now_ms: i64) {
    if let Some(change) = c.pending_funding.take() {
        if let Some(h) = change.interval_h {
            c.interval_h = h;
        }
        c.funding_bias = change.rate - (c.premium + FUNDING_INTEREST);
        c.funding_bias_until_ms = next_settlement(now_ms, c.interval_h);
    }
    if now_ms >= c.funding_bias_until_ms {
        c.funding_bias = 0.0;
    }
    c.next_ms = next_settlement(now_ms, c.interval_h);
    let rate = (c.premium + FUNDING_INTEREST + c.funding_bias).clamp(-FUNDING_RATE_MAX, FUNDING_RATE_MAX);
    c.funding = (rate * 1e8).round() / 1e8;
}

/// The first UTC multiple of `interval_h` hours after `now_ms`.
fn next_settlement(now_ms: i64, interval_h: u8) -> i64 {
    let iv = i64::from(interval_h) * 3_600_000;
    (now_ms.div_euclid(iv) + 1) * iv
}

/// OI: a log walk pulled back to its home over a day, up with |move|, occasional jumps, and an
/// injected jump.
fn update_oi(c: &mut PerpSim, dt: f64, r: f64) {
    let mut ln_oi = c.oi.ln();
    ln_oi += -(ln_oi - c.ln_oi_home) * (dt / DAY_S) + OI_DAILY_VOL * (dt / DAY_S).sqrt() * c.rng.normal();
    ln_oi += OI_MOVE_GAIN * r.abs();
    if c.rng.chance(dt / OI_JUMP_MEAN_S) {
        let size = c.rng.range(0.05, 0.30);
        ln_oi += if c.rng.chance(0.5) { (1.0 + size).ln() } else { (1.0 - size).ln() };
    }
    let mut oi = ln_oi.exp() * c.pending_oi_factor;
    c.pending_oi_factor = 1.0;
    oi = oi.max(c.ln_oi_home.exp() * 0.01);
    c.oi = round_to(oi, c.lot).max(c.lot);
}

/// The model's liquidations of this step, then the injected ones; each lowers the OI. Emitted
/// except on Bitget.
fn liquidate(c: &mut PerpSim, now_ms: i64, dt: f64, move_1m: f64, mark: f64, out: &mut Vec<PerpTick>) {
    let m = move_1m / 0.01;
    let lambda = (LIQ_RATE_QUIET_PER_S + LIQ_RATE_MOVE_PER_S * m * m) * dt;
    let n = poisson(&mut c.rng, lambda, LIQS_PER_STEP_MAX);
    let p_long = 0.5 - 0.5 * (move_1m / 0.002).tanh();
    for _ in 0..n {
        let side = if c.rng.chance(p_long) { PositionSide::Long } else { PositionSide::Short };
        let qty = (c.oi * LIQ_MEDIAN_OF_OI * c.rng.normal().exp()).min(c.oi * LIQ_MAX_OF_OI);
        let beyond = c.rng.range(0.0, 0.003);
        push_liquidation(c, now_ms, side, qty, mark, beyond, out);
    }
    for k in 0..c.pending_len {
        let (side, usd) = c.pending_liqs[k];
        // Worth at least `usd` at the price it is sent at (the mark on the tick): rounded up to
        // the lot, so an injected $1M is not $999 990 after rounding.
        let price = (mark * SCALE as f64 / c.tick as f64).round().max(1.0) * c.tick as f64 / SCALE as f64;
        let qty = (usd / price / c.lot).ceil() * c.lot;
        push_liquidation(c, now_ms, side, qty, mark, 0.0, out);
    }
    c.pending_len = 0;
}

/// One liquidation of `qty` (rounded to the lot, at least one) at `beyond` past the mark on the
/// bankruptcy side.
fn push_liquidation(
    c: &mut PerpSim,
    now_ms: i64,
    side: PositionSide,
    qty: f64,
    mark: f64,
    beyond: f64,
    out: &mut Vec<PerpTick>,
) {
    let qty = round_to(qty, c.lot).max(c.lot);
    c.oi = round_to((c.oi - qty).max(c.lot), c.lot);
    if c.venue == Venue::Bitget {
        return;
    }
    let px = match side {
        PositionSide::Long => mark * (1.0 - beyond),
        PositionSide::Short => mark * (1.0 + beyond),
    };
    let price = Price(((px * SCALE as f64 / c.tick as f64).round() as i64).max(1) * c.tick);
    out.push(PerpTick {
        book: c.book,
        perp: c.perp,
        ts_ms: now_ms,
        kind: PerpTickKind::Liquidation { side, price, qty },
    });
}
