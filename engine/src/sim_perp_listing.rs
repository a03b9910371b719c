//! The simulated perpetual listing (decisions §17, "The simulator"): which USDT-margined
//! linear perpetuals each venue lists for a simulated universe, as data. A [`PerpListing`] holds
//! one [`PerpContract`] per venue and contract, spelled as the venue spells it (symbol, base,
//! multiplier, OKX `ctVal`, funding interval at listing, price and quantity steps) and tied to
//! its spot pair, or to none for the one perpetual without a spot pair per venue; a [`PerpId`]
//! is a contract's dense index. [`listing`] builds it deterministically from the seed and the
//! universe: the same seed and universe give the same listing, so the venue simulator's REST
//! listings and the embedded feed read the same facts. The model that moves these contracts is
//! [`crate::sim_perp`].

use crate::fixed::{Price, Qty, SCALE};
use crate::sim::{lot_for, tick_for, PairSpec, Rng};
use crate::venue::Venue;

/// Bases listed as multiplier contracts when the seed picks them (tiny prices).
const MULTIPLIER_CANDIDATES: [&str; 4] = ["PEPE", "SHIB", "BONK", "FLOKI"];
/// The multiplier of a multiplier contract.
const MULTIPLIER: u32 = 1_000;
/// Perps-only bases, one picked by the seed for the perpetual without a spot pair.
const ORPHAN_BASES: [&str; 4] = ["HYPE", "BTCDOM", "FARTCOIN", "VIRTUAL"];
/// Share of the eligible USDT pairs of a venue left without a perpetual.
const NO_PERP_SHARE: f64 = 0.03;

/// Dense identifier of one contract of a [`PerpListing`] (its index).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct PerpId(pub u32);

impl PerpId {
    /// As an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One USDT-margined linear perpetual on one venue, as the venue lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct PerpContract {
    /// Venue.
    pub venue: Venue,
    /// The contract's symbol as the venue spells it: `BTCUSDT`, `1000PEPEUSDT`, OKX
    /// `BTC-USDT-SWAP`.
    pub symbol: String,
    /// The contract's base as the venue spells it (`1000PEPE` on a multiplier contract).
    pub base: String,
    /// Quote and settlement asset: always `USDT`.
    pub quote: String,
    /// Units of the spot base per unit of the contract's base: 1, or 1000 for `1000PEPE`.
    pub multiplier: u32,
    /// OKX `ctVal`: the contract's base per contract; 1 on the other venues.
    pub ct_val: Qty,
    /// Funding interval at listing, in hours (8, 4 or 1).
    pub funding_interval_h: u8,
    /// The spot pair it belongs to (`BASEQUOTE` of the unprefixed base); `None` for the
    /// perpetual without a spot pair, which a consumer must ignore.
    pub spot_symbol: Option<String>,
    /// Index of that pair in the universe; `None` for the perpetual without a spot pair.
    pub spec: Option<usize>,
    /// Price step of the mark and liquidation prices, per unit of the spot base: a hundredth of
    /// the spot pair's tick (at least 10^-8), fine enough to show the premium.
    pub tick: Price,
    /// Quantity step in units of the spot base: every liquidation and OI is a multiple.
    pub lot: Qty,
}

impl PerpContract {
    /// A price per spot base unit as the venue quotes the contract (× the multiplier).
    pub fn venue_price(&self, price: Price) -> Price {
        Price(price.0.saturating_mul(i64::from(self.multiplier)))
    }

    /// A quantity in spot base units as the venue counts it: in the contract's base (÷ the
    /// multiplier), on OKX in contracts (÷ `ctVal`).
    pub fn venue_qty(&self, qty_base: f64) -> f64 {
        qty_base / f64::from(self.multiplier) / (self.ct_val.0 as f64 / SCALE as f64)
    }
}

/// Every perpetual of a simulated universe, venue by venue (data, fixed at start-up).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerpListing {
    contracts: Vec<PerpContract>,
}

impl PerpListing {
    /// Every contract, in [`PerpId`] order: venue by venue, each in universe order with the
    /// perpetual without a spot pair last.
    pub fn contracts(&self) -> &[PerpContract] {
        &self.contracts
    }

    /// Number of contracts.
    pub fn len(&self) -> usize {
        self.contracts.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.contracts.is_empty()
    }

    /// The contract `id`.
    pub fn get(&self, id: PerpId) -> &PerpContract {
        &self.contracts[id.index()]
    }

    /// The contracts of one venue, with their ids.
    pub fn venue(&self, venue: Venue) -> impl Iterator<Item = (PerpId, &PerpContract)> + '_ {
        self.contracts.iter().enumerate().filter(move |(_, c)| c.venue == venue).map(|(i, c)| (PerpId(i as u32), c))
    }

    /// The contract of `venue` named `symbol`, either as the venue spells the contract or as its
    /// spot pair, case-insensitively. A linear scan: for control routes, not the tick path.
    pub fn find(&self, venue: Venue, symbol: &str) -> Option<PerpId> {
        self.contracts
            .iter()
            .position(|c| {
                c.venue == venue
                    && (c.symbol.eq_ignore_ascii_case(symbol)
                        || c.spot_symbol.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(symbol)))
            })
            .map(|i| PerpId(i as u32))
    }

    /// The contract of the spot pair `spec` (a universe index) on `venue`, if it has one.
    pub fn of_spec(&self, venue: Venue, spec: usize) -> Option<PerpId> {
        self.contracts.iter().position(|c| c.venue == venue && c.spec == Some(spec)).map(|i| PerpId(i as u32))
    }
}

/// The perpetuals of `universe`, deterministic from `seed`.
///
/// Every USDT pair listed on a venue has a perpetual there, except about 3 % of each venue's
/// (never BTC or ETH, at least one per venue when there are candidates); one or two of PEPE,
/// SHIB, BONK and FLOKI (those in the universe) are multiplier contracts; each venue lists one
/// perpetual without a spot pair. Funding is every 8 h, every 4 h for about 8 % and every hour
/// for about 4 % (at least one of each per venue when it has two contracts besides BTC, ETH and
/// the multiplier contracts).
pub fn listing(seed: u64, universe: &[PairSpec]) -> PerpListing {
    let mut rng = Rng::new(seed ^ 0x0BE7_9E2F_5EED_0017);
    let multiplied = pick_multiplied(&mut rng, universe);
    let orphan = pick_orphan(&mut rng, universe);
    let mut contracts = Vec::new();
    for venue in Venue::ALL {
        let first = contracts.len();
        let eligible: Vec<usize> =
            (0..universe.len()).filter(|&i| universe[i].quote == "USDT" && universe[i].venues[venue.index()]).collect();
        let mut skip = vec![false; universe.len()];
        let free: Vec<usize> = eligible.iter().copied().filter(|&i| i >= 2 && !multiplied.contains(&i)).collect();
        for &i in &free {
            skip[i] = rng.chance(NO_PERP_SHARE);
        }
        if !free.is_empty() && !free.iter().any(|&i| skip[i]) {
            skip[free[rng.below(free.len() as u64) as usize]] = true;
        }
        for &i in eligible.iter().filter(|&&i| !skip[i]) {
            let spec = &universe[i];
            let x = rng.unit();
            let interval_h = if i < 2 {
                8
            } else if x < 0.04 {
                1
            } else if x < 0.12 {
                4
            } else {
                8
            };
            let multiplier = if multiplied.contains(&i) && venue != Venue::Okx { MULTIPLIER } else { 1 };
            contracts.push(contract(
                venue,
                &spec.base,
                multiplier,
                interval_h,
                Some(i),
                spec.price,
                spec.tick,
                spec.lot,
            ));
        }
        ensure_intervals(&mut rng, &mut contracts[first..]);
        let price = 10f64.powf(rng.range(0.0, 2.0));
        contracts.push(contract(venue, orphan, 1, 8, None, price, tick_for(price), lot_for(price)));
    }
    PerpListing { contracts }
}

/// The universe indices of the multiplier contracts: one or two of the tiny-priced USDT pairs.
fn pick_multiplied(rng: &mut Rng, universe: &[PairSpec]) -> Vec<usize> {
    let mut candidates: Vec<usize> = (0..universe.len())
        .filter(|&i| universe[i].quote == "USDT" && MULTIPLIER_CANDIDATES.contains(&universe[i].base.as_str()))
        .collect();
    let n = (1 + rng.below(2) as usize).min(candidates.len());
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(candidates.swap_remove(rng.below(candidates.len() as u64) as usize));
    }
    out
}

/// The base of the perpetual without a spot pair: a perps-only name no pair of the universe uses.
fn pick_orphan(rng: &mut Rng, universe: &[PairSpec]) -> &'static str {
    let start = rng.below(ORPHAN_BASES.len() as u64) as usize;
    (0..ORPHAN_BASES.len())
        .map(|k| ORPHAN_BASES[(start + k) % ORPHAN_BASES.len()])
        .find(|b| universe.iter().all(|s| s.base != *b))
        .unwrap_or("PERPONLYX")
}

/// Gives one venue's contracts at least one 4 h and one 1 h funding interval, changing 8 h
/// contracts other than BTC and ETH (universe indices 0 and 1) and the multiplier contracts.
fn ensure_intervals(rng: &mut Rng, contracts: &mut [PerpContract]) {
    for want in [4u8, 1] {
        if contracts.iter().any(|c| c.funding_interval_h == want) {
            continue;
        }
        let free: Vec<usize> = (0..contracts.len())
            .filter(|&k| {
                let c = &contracts[k];
                c.funding_interval_h == 8 && c.spec.is_some_and(|s| s >= 2) && c.multiplier == 1
            })
            .collect();
        if !free.is_empty() {
            contracts[free[rng.below(free.len() as u64) as usize]].funding_interval_h = want;
        }
    }
}

/// One contract of `base` (unprefixed) on `venue`.
// Rationale: eight plain facts of one contract, called from one place; a struct for them would
// only repeat `PerpContract`.
#[allow(clippy::too_many_arguments)]
fn contract(
    venue: Venue,
    base: &str,
    multiplier: u32,
    funding_interval_h: u8,
    spec: Option<usize>,
    price: f64,
    tick: Price,
    lot: Qty,
) -> PerpContract {
    let venue_base = if multiplier == 1 { base.to_owned() } else { format!("{multiplier}{base}") };
    let symbol = match venue {
        Venue::Okx => format!("{venue_base}-USDT-SWAP"),
        _ => format!("{venue_base}USDT"),
    };
    // OKX: the power of ten that makes one contract worth $100–$1 000.
    let ct_val = match venue {
        Venue::Okx => Qty((10f64.powi(2 - price.log10().floor() as i32) * SCALE as f64).round() as u64),
        _ => Qty(SCALE as u64),
    };
    let step = match venue {
        Venue::Okx => ct_val.0,
        _ => lot.0.max(1) * u64::from(multiplier),
    };
    PerpContract {
        venue,
        symbol,
        base: venue_base,
        quote: "USDT".to_owned(),
        multiplier,
        ct_val,
        funding_interval_h,
        spot_symbol: spec.map(|_| format!("{base}USDT")),
        spec,
        tick: Price((tick.0 / 100).max(1)),
        lot: Qty(step),
    }
}
