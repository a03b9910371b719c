//! The perpetuals in the simulator (decisions §17 "The simulator"): the same [`SimPerp`] the
//! embedded feed runs, over every pair of the universe and the perpetuals without a spot pair,
//! and what each venue's wire keeps of them; `perp_drive` steps them with the market's rounds
//! against the true books' mids and hands each tick to its venue's wire (`perp_binance`,
//! `perp_bybit`, `perp_okx`, `perp_bitget`), which writes it in the venue's real format
//! (venues.md §8). The ground floor of those modules: data and number formats, no state lock.
//!
//! What each venue's wire keeps of a contract ([`Wire`]): the values last stepped (what REST
//! answers and a new subscription's first push carry), Binance's liquidation held for its
//! second, Bybit's liquidations waiting for their 500 ms batch, OKX's last open-interest push
//! and next funding push.
//!
//! Choices where §17 is silent, and why:
//! - **Binance's one liquidation per contract per second** holds the second's largest (by USD)
//!   and sends it in the first round after the second ends: the venue's snapshot rule, so a
//!   client sees at most one a second and the larger of two.
//! - **OKX omits a seeded share** ([`OKX_OMITTED_SHARE`]) of the model's liquidations and sends
//!   a step's several out of order at times; an injected one is never omitted, so a test that
//!   injects one sees it.
//! - **`perp_stale`** freezes a contract's pushed values (no mark, OI or funding push, REST
//!   answers the frozen values with their old times) until the perpetual is relisted through
//!   `POST /sim/perp`; liquidations continue.
//! - The index price is the spot mid at the step (the orphan perpetual's: its mark).
//!
//! Bounds: at most [`CONTRACTS_PER_ROUND_MAX`] contracts step per round (the rest wait, none
//! starves); Bybit holds at most [`BYBIT_BATCH_MAX`] liquidations of a contract per batch (more
//! are dropped and counted as `liquidations_dropped`).

use rampart_engine::fixed::{Price, SCALE};
use rampart_engine::perp_window::PositionSide;
use rampart_engine::sim::Rng;
use rampart_engine::sim_perp::{
    listing, PerpContract, PerpId, PerpListing, PerpTick, PerpView, SimPerp, SimPerpConfig,
};
use rampart_engine::Venue;

use super::text::{decimals_of, fixed};

/// Contracts stepped per market round at most.
pub(crate) const CONTRACTS_PER_ROUND_MAX: usize = 512;
/// Bybit sends a contract's liquidations in batches this far apart.
pub(crate) const BYBIT_BATCH_MS: i64 = 500;
/// Liquidations of one contract one Bybit batch holds at most.
pub(crate) const BYBIT_BATCH_MAX: usize = 64;
/// Share of the model's liquidations OKX leaves out (its feed is "not the total").
pub(crate) const OKX_OMITTED_SHARE: f64 = 0.2;

/// One liquidation as the wire sends it, in the spot pair's units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Liq {
    /// The side of the position liquidated.
    pub side: PositionSide,
    /// Price per spot base unit.
    pub price: Price,
    /// Size in spot base units.
    pub qty: f64,
    /// Time, Unix milliseconds.
    pub ts_ms: i64,
}

impl Liq {
    /// Its worth in USD.
    pub(crate) fn usd(&self) -> f64 {
        self.qty * self.price.to_f64()
    }
}

/// What the wire keeps of one contract.
#[derive(Clone, Debug, Default)]
pub(crate) struct Wire {
    /// The values of the last step pushed (frozen while stale).
    pub view: Option<PerpView>,
    /// The index price at that step.
    pub index: Price,
    /// `perp_stale`: no mark, OI or funding push.
    pub stale: bool,
    /// Binance: the largest liquidation of the second it fell in, not sent yet.
    pub binance_held: Option<Liq>,
    /// Liquidations waiting for their message: Bybit's next batch, OKX's end of the step.
    pub batch: Vec<Liq>,
    /// Bybit: the ticker values last sent (a delta carries what changed since).
    pub bybit_sent: Option<PerpView>,
    /// OKX: when open interest was last pushed, and its value then.
    pub okx_oi_pushed: (i64, f64),
    /// OKX: when funding is next pushed.
    pub okx_funding_due_ms: i64,
}

/// The perpetuals of the simulated market and their wire state.
pub(crate) struct Perps {
    /// Every perpetual of the universe, on every venue.
    pub listing: PerpListing,
    /// Their simulation (the contracts of the venues served).
    pub sim: SimPerp,
    /// By [`PerpId`] index.
    pub wire: Vec<Wire>,
    pub(crate) ticks: Vec<PerpTick>,
    /// OKX's omissions and reorderings.
    pub rng: Rng,
    /// When Bybit's batches were last sent.
    pub bybit_batch_ms: i64,
    /// The second (Unix seconds) the once-a-second timers last ran in.
    pub second: i64,
}

impl Perps {
    /// The perpetuals of `universe` on the venues of `registry`.
    pub(crate) fn new(
        seed: u64,
        universe: &[rampart_engine::sim::PairSpec],
        registry: &rampart_engine::Registry,
    ) -> Perps {
        let listing = listing(seed, universe);
        let specs: Vec<usize> = (0..universe.len()).collect();
        let sim = SimPerp::new(&SimPerpConfig { seed, orphans: true }, universe, &listing, registry, &specs);
        let ticks = Vec::with_capacity(CONTRACTS_PER_ROUND_MAX * sim.ticks_per_step_max());
        let wire = vec![Wire::default(); listing.len()];
        Perps { listing, sim, wire, ticks, rng: Rng::new(seed ^ 0x0BE7_0C5A), bybit_batch_ms: 0, second: 0 }
    }

    /// The contract `perp`.
    pub(crate) fn contract(&self, perp: PerpId) -> &PerpContract {
        self.listing.get(perp)
    }

    /// The contracts of `venue` simulated here (listed or not), with their ids.
    pub(crate) fn of_venue(&self, venue: Venue) -> Vec<PerpId> {
        self.listing.venue(venue).map(|(id, _)| id).filter(|&id| self.sim.is_listed(id).is_some()).collect()
    }

    /// The contracts of `venue` simulated here, or only the one spelt `symbol` when given;
    /// `None` when that one does not exist (a REST query's `symbol`/`instId`).
    pub(crate) fn named(&self, venue: Venue, symbol: Option<&str>) -> Option<Vec<PerpId>> {
        let all = self.of_venue(venue);
        match symbol {
            None => Some(all),
            Some(s) => all.into_iter().find(|&p| self.contract(p).symbol == s).map(|p| vec![p]),
        }
    }

    /// `row` of each listed contract of `perps` that has one.
    pub(crate) fn listed_rows(&self, perps: &[PerpId], row: impl Fn(PerpId) -> Option<String>) -> Vec<String> {
        perps.iter().filter(|&&p| self.listed(p)).filter_map(|&p| row(p)).collect()
    }

    /// The listed contract of `venue` spelt `symbol` as the venue spells it (exact case).
    pub(crate) fn find_listed(&self, venue: Venue, symbol: &str) -> Option<PerpId> {
        let id = self.listing.venue(venue).find(|(_, c)| c.symbol == symbol).map(|(id, _)| id)?;
        (self.sim.is_listed(id) == Some(true)).then_some(id)
    }

    /// Whether contract `perp` is simulated here and listed.
    pub(crate) fn listed(&self, perp: PerpId) -> bool {
        self.sim.is_listed(perp) == Some(true)
    }
}

/// A price per spot base unit as the venue quotes contract `c`, with the contract's decimals.
pub(crate) fn px(c: &PerpContract, p: Price) -> String {
    fixed(c.venue_price(p).0, decimals_of(c.venue_price(c.tick).0))
}

/// A quantity in spot base units as the venue counts contract `c` (its base, OKX contracts),
/// with the decimals of the contract's quantity step.
pub(crate) fn qty(c: &PerpContract, q: f64) -> String {
    let step = c.venue_qty(c.lot.0 as f64 / SCALE as f64);
    let dec =
        (0..=8usize).find(|&d| ((step * 10f64.powi(d as i32)).round() - step * 10f64.powi(d as i32)).abs() < 1e-6);
    format!("{:.*}", dec.unwrap_or(8), c.venue_qty(q))
}

/// The quantity step of contract `c` in the venue's units, as text.
pub(crate) fn lot_text(c: &PerpContract) -> String {
    qty(c, c.lot.0 as f64 / SCALE as f64)
}

/// A funding rate (a fraction per interval) as the venues write it.
pub(crate) fn rate(r: f64) -> String {
    format!("{r:.8}")
}

/// A USD amount with cents.
pub(crate) fn usd(x: f64) -> String {
    format!("{x:.2}")
}
