//! The simulated market: about 500 pairs on four venues, with history, moving prices, books
//! with walls that come and go, and trades. Deterministic from a seed; time is an argument.
//!
//! It is the embedded default feed (`--feed sim`) and the source the venue simulator serves.
//! Prices follow a log random walk with clustered volatility (a slowly mean-reverting
//! log-volatility state). Each venue's book is a contiguous grid of levels around its own mid
//! (a small per-venue basis); walls are large sizes placed on one level for seconds to
//! minutes. The simulator keeps each venue's true book and emits the ticks that change it, so
//! a consumer applying the ticks in order holds the same book.

use crate::book::{Book, Side};
use crate::candle::{Candle, CandleSet, Timeframe, DAY_MS};
use crate::fixed::{Price, Qty, SCALE};
use crate::instrument::{BookId, Instrument, Registry, Status};
use crate::market::{Tick, TickKind};
use crate::venue::Venue;

/// A small, fast, deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * core::f64::consts::PI * u2).cos()
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// One simulated pair and where it is listed.
#[derive(Clone, Debug)]
pub struct PairSpec {
    /// Base asset.
    pub base: String,
    /// Quote asset.
    pub quote: String,
    /// Price now (the end of the generated history).
    pub price: f64,
    /// Typical daily volatility, as a fraction.
    pub daily_vol: f64,
    /// Typical resting size of a level, in base units.
    pub level_qty: f64,
    /// Price increment.
    pub tick: Price,
    /// Quantity increment.
    pub lot: Qty,
    /// Listed on each venue (indexed by `Venue::index`).
    pub venues: [bool; 4],
    /// A new listing: its history is only the last [`YOUNG_HISTORY_BARS`] 5-minute bars, so it
    /// has no levels yet.
    pub young: bool,
}

/// 5-minute bars of history a young listing has.
pub const YOUNG_HISTORY_BARS: i64 = 8;
/// Young listings in a universe (the first synthetic pairs).
pub const YOUNG_PAIRS: usize = 2;

impl PairSpec {
    /// `BASEQUOTE`.
    pub fn symbol(&self) -> String {
        format!("{}{}", self.base, self.quote)
    }
}

const MAJORS: &[(&str, f64)] = &[
    ("BTC", 95_000.0),
    ("ETH", 3_200.0),
    ("SOL", 180.0),
    ("BNB", 650.0),
    ("XRP", 2.3),
    ("DOGE", 0.32),
    ("ADA", 0.9),
    ("TRX", 0.25),
    ("AVAX", 35.0),
    ("LINK", 18.0),
    ("DOT", 6.5),
    ("TON", 5.2),
    ("SHIB", 0.000_022),
    ("LTC", 95.0),
    ("BCH", 420.0),
    ("NEAR", 5.0),
    ("UNI", 11.0),
    ("APT", 9.0),
    ("PEPE", 0.000_018),
    ("ICP", 10.0),
    ("ETC", 27.0),
    ("SUI", 3.5),
    ("FIL", 5.5),
    ("ATOM", 6.8),
    ("ARB", 0.75),
    ("OP", 1.9),
    ("INJ", 24.0),
    ("HBAR", 0.28),
    ("VET", 0.045),
    ("MKR", 1_600.0),
    ("AAVE", 280.0),
    ("GRT", 0.22),
    ("ALGO", 0.35),
    ("SEI", 0.45),
    ("TIA", 5.5),
    ("RUNE", 4.8),
    ("FET", 1.3),
    ("WIF", 2.4),
    ("BONK", 0.000_035),
    ("FLOKI", 0.000_19),
];
const SYLLABLES: &[&str] = &[
    "ZA", "KO", "RI", "VE", "LU", "MO", "NA", "TE", "XI", "PO", "SU", "DA", "FE", "GO", "HA", "JU", "QE", "WY", "BE",
    "CI",
];

/// The simulated universe: `pairs` pairs, deterministic from `seed`.
///
/// Binance lists every pair; Bybit, OKX and Bitget each list a realistic subset (every major,
/// and about 70%, 60% and 65% of the rest). Most pairs quote USDT; some quote USDC, BTC or ETH,
/// so non-USD quotes (converted through `QUOTEUSDT`) are exercised.
pub fn universe(seed: u64, pairs: usize) -> Vec<PairSpec> {
    let mut rng = Rng::new(seed ^ 0x5EED);
    let mut bases: Vec<(String, f64)> = MAJORS.iter().map(|&(b, p)| (b.to_owned(), p)).collect();
    let mut seen: std::collections::HashSet<String> = bases.iter().map(|b| b.0.clone()).collect();
    let usdt_count = pairs * 84 / 100;
    while bases.len() < usdt_count.max(MAJORS.len()) {
        let n = 2 + rng.below(2) as usize;
        let mut name = String::new();
        for _ in 0..n {
            name.push_str(SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize]);
        }
        if name.len() > 6 {
            name.truncate(5);
        }
        if seen.insert(name.clone()) {
            let price = 10f64.powf(rng.range(-4.5, 3.0));
            bases.push((name, price));
        }
    }
    let mut out = Vec::with_capacity(pairs);
    let mut symbols = std::collections::HashSet::new();
    let mut push = |out: &mut Vec<PairSpec>, rng: &mut Rng, base: &str, quote: &str, price: f64, major: bool| {
        // Venues do not list pairs priced under ~1000 of the finest tick (1e-8).
        if out.len() >= pairs || price < 1e-5 || !symbols.insert(format!("{base}{quote}")) {
            return;
        }
        let (p_bybit, p_okx, p_bitget) = if quote == "USDT" { (0.7, 0.6, 0.65) } else { (0.4, 0.35, 0.3) };
        let venues = [true, major || rng.chance(p_bybit), major || rng.chance(p_okx), major || rng.chance(p_bitget)];
        let usd_price = match quote {
            "BTC" => price * 95_000.0,
            "ETH" => price * 3_200.0,
            _ => price,
        };
        let usd_per_level = if major { rng.range(20_000.0, 120_000.0) } else { rng.range(1_000.0, 25_000.0) };
        out.push(PairSpec {
            base: base.to_owned(),
            quote: quote.to_owned(),
            price,
            daily_vol: if major { rng.range(0.02, 0.05) } else { rng.range(0.03, 0.09) },
            level_qty: usd_per_level / usd_price,
            tick: tick_for(price),
            lot: lot_for(price),
            venues,
            young: false,
        });
    };
    for (i, (base, price)) in bases.iter().enumerate() {
        push(&mut out, &mut rng, base, "USDT", *price, i < MAJORS.len());
    }
    for spec in out.iter_mut().skip(MAJORS.len()).take(YOUNG_PAIRS) {
        spec.young = true;
    }
    // Secondary quotes for the majors and a few others.
    for (base, price) in bases.iter().take(60) {
        if base != "BTC" {
            push(&mut out, &mut rng, base, "BTC", price / 95_000.0, false);
        }
        push(&mut out, &mut rng, base, "USDC", *price, false);
        if base != "ETH" && base != "BTC" && rng.chance(0.3) {
            push(&mut out, &mut rng, base, "ETH", price / 3_200.0, false);
        }
    }
    out
}

/// About five significant digits, never finer than 1e-8.
pub(crate) fn tick_for(price: f64) -> Price {
    let exp = price.log10().floor() as i32 - 4;
    Price(((10f64.powi(exp) * SCALE as f64).round() as i64).max(1))
}

/// A lot worth about a tenth of a quote unit, between 1e-8 and 1.
pub(crate) fn lot_for(price: f64) -> Qty {
    let exp = (0.1 / price).log10().ceil() as i32;
    Qty(((10f64.powi(exp.min(0)) * SCALE as f64).round() as u64).max(1))
}

/// The instruments of `universe` on `venues`, ready for [`Registry::new`].
pub fn instruments(universe: &[PairSpec], venues: &[Venue]) -> Vec<Instrument> {
    let mut out = Vec::new();
    for &venue in venues {
        for spec in universe.iter().filter(|s| s.venues[venue.index()]) {
            out.push(Instrument {
                venue,
                symbol: spec.symbol(),
                base: spec.base.clone(),
                quote: spec.quote.clone(),
                tick: spec.tick,
                lot: spec.lot,
                status: Status::Trading,
            });
        }
    }
    out
}

/// Tuning of the simulated market.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Levels per book side.
    pub levels_per_side: usize,
    /// Mean time between two steps of one pair.
    pub step_interval_ms: i64,
    /// Mean wall lifetime.
    pub wall_life_ms_mean: i64,
    /// Probability that a free wall slot gets a wall in one step.
    pub wall_spawn_chance: f64,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 42,
            levels_per_side: 250,
            step_interval_ms: 500,
            wall_life_ms_mean: 60_000,
            wall_spawn_chance: 0.0004,
        }
    }
}

/// A history bar's synthetic quote volume and trade count: about 20 trades per 5 minutes,
/// each a fifth of a typical level, at the bar's middle price.
fn bar_volume(rng: &mut Rng, spec: &PairSpec, tf: Timeframe, mid: f64) -> (f64, u32) {
    let bars_5m = (tf.duration_ms() / Timeframe::M5.duration_ms()).max(1) as u64;
    let trades = 1 + rng.below(40 * bars_5m);
    let volume = trades as f64 * 0.2 * spec.level_qty * rng.range(0.5, 1.5) * mid;
    (volume, u32::try_from(trades).unwrap_or(u32::MAX))
}

/// Wall slots per book.
const WALLS_MAX: usize = 2;
/// Chance that a wall slot holds a wall when a pair starts (about the steady-state occupancy).
const INITIAL_WALL_CHANCE: f64 = 0.05;
/// Relative size of a grid step (the distance between two simulated levels).
const GRID_STEP_FRACTION: f64 = 0.0004;

#[derive(Clone, Copy, Debug, Default)]
struct Wall {
    active: bool,
    side_bid: bool,
    price: i64,
    until_ms: i64,
}

#[derive(Clone, Debug)]
struct VenueBook {
    id: BookId,
    truth: Book,
    basis: f64,
    walls: [Wall; WALLS_MAX],
}

/// One pair's simulation state.
#[derive(Clone, Debug)]
struct SimPair {
    spec_index: usize,
    rng: Rng,
    ln_price: f64,
    ln_vol: f64,
    step: i64,
    books: Vec<VenueBook>,
    next_due_ms: i64,
    last_ms: i64,
}

/// The simulation of a set of pairs (one shard's share).
#[derive(Debug)]
pub struct Sim {
    config: SimConfig,
    specs: Vec<PairSpec>,
    pairs: Vec<SimPair>,
    scratch: Vec<i64>,
}

impl Sim {
    /// Simulates the pairs `pair_specs` (indices into `universe`), whose books are found in
    /// `registry`. Nothing is emitted until [`Sim::start_pair`].
    pub fn new(config: SimConfig, universe: &[PairSpec], registry: &Registry, pair_specs: &[usize]) -> Sim {
        let mut pairs = Vec::with_capacity(pair_specs.len());
        for &si in pair_specs {
            let spec = &universe[si];
            let mut rng = Rng::new(config.seed.wrapping_mul(31).wrapping_add(si as u64));
            let mut books = Vec::new();
            for venue in Venue::ALL {
                if let Some(id) = registry.find(venue, &spec.symbol()) {
                    books.push(VenueBook {
                        id,
                        truth: Book::new(config.levels_per_side),
                        basis: if venue == Venue::Binance { 0.0 } else { rng.range(-0.0004, 0.0004) },
                        walls: [Wall::default(); WALLS_MAX],
                    });
                }
            }
            let step = ((spec.price * GRID_STEP_FRACTION * SCALE as f64 / spec.tick.0 as f64).round() as i64).max(1)
                * spec.tick.0;
            pairs.push(SimPair {
                spec_index: si,
                rng,
                ln_price: spec.price.ln(),
                ln_vol: 0.0,
                step,
                books,
                next_due_ms: 0,
                last_ms: 0,
            });
        }
        Sim { scratch: Vec::with_capacity(config.levels_per_side * 2), config, specs: universe.to_vec(), pairs }
    }

    /// Sets the mean time between two steps of one pair (the message rate); pairs pick it up at
    /// their next step.
    pub fn set_step_interval_ms(&mut self, ms: i64) {
        self.config.step_interval_ms = ms.max(1);
    }

    /// Number of pairs simulated here.
    pub fn pair_count(&self) -> usize {
        self.pairs.len()
    }

    /// The books of local pair `i`.
    pub fn pair_books(&self, i: usize) -> impl Iterator<Item = BookId> + '_ {
        self.pairs[i].books.iter().map(|b| b.id)
    }

    /// The largest number of ticks one call of [`Sim::step_pair`] or [`Sim::start_pair`] emits.
    pub fn ticks_per_step_max(&self) -> usize {
        4 * (4 * self.config.levels_per_side + 2 * WALLS_MAX + 8)
    }

    /// Generates local pair `i`'s history up to `now_ms` (the current 5-minute bucket stays
    /// open): at least `bars_max` completed bars on every timeframe, finest where the ring of
    /// that timeframe reaches, each coarser bar aggregated from the finer ones it covers.
    /// The history ends at the pair's configured price, where the live walk then starts.
    pub fn history(&mut self, i: usize, now_ms: i64, bars_max: usize) -> CandleSet {
        let pair = &mut self.pairs[i];
        let spec = &self.specs[pair.spec_index];
        let mut rng = Rng::new(self.config.seed ^ (pair.spec_index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let end = Timeframe::M5.bucket_start(now_ms);
        // Regime starts, finest first: each timeframe is generated directly only where no finer
        // ring reaches, so every ring is consistent with the finer rings it overlaps.
        let n = bars_max as i64;
        let mut starts = [0i64; 6];
        let mut t = end;
        for (k, tf) in Timeframe::ALL.into_iter().enumerate() {
            let raw = t - n * tf.duration_ms();
            t = match Timeframe::ALL.get(k + 1) {
                Some(coarser) => coarser.bucket_start(raw),
                None => tf.bucket_start(raw),
            };
            starts[k] = t;
        }
        if spec.young {
            // Only the M5 regime, and only its last few bars.
            starts = [end - YOUNG_HISTORY_BARS * Timeframe::M5.duration_ms(); 6];
        }
        let mut bars: Vec<(Timeframe, i64, [f64; 4])> = Vec::with_capacity(8 * bars_max);
        let mut x = 0.0f64;
        let mut lv = 0.0f64;
        for k in (0..6).rev() {
            let tf = Timeframe::ALL[k];
            let stop = if k == 0 { end } else { starts[k - 1] };
            if spec.young && k > 0 {
                continue;
            }
            let d = tf.duration_ms();
            let mut ts = starts[k];
            while ts < stop {
                lv = 0.97 * lv + 0.12 * rng.normal();
                // Long horizons mean-revert somewhat: damp the weekly-regime volatility so ten
                // years of history span a realistic range.
                let damp = if tf == Timeframe::W1 { 0.7 } else { 1.0 };
                let s = damp * spec.daily_vol * lv.exp() * (d as f64 / DAY_MS as f64).sqrt();
                let o = x;
                let c = x + s * rng.normal();
                let h = o.max(c) + 0.4 * s * rng.normal().abs();
                let l = o.min(c) - 0.4 * s * rng.normal().abs();
                bars.push((tf, ts, [o, h, l, c]));
                x = c;
                ts += d;
            }
        }
        let shift = spec.price.ln() - x;
        let tick = spec.tick.0;
        let round = |v: f64| -> i64 { (((v + shift).exp() * SCALE as f64 / tick as f64).round() as i64).max(1) * tick };
        let mut set = CandleSet::new(bars_max);
        // Volumes and trade counts draw from their own generator, so the price paths do not
        // depend on them.
        let mut volumes = Rng::new(rng.next_u64());
        for &(tf, ts, [o, h, l, c]) in &bars {
            let (o, c) = (round(o), round(c));
            let h = round(h).max(o).max(c);
            let l = round(l).min(o).min(c);
            let (volume, trades) = bar_volume(&mut volumes, spec, tf, (h + l) as f64 / 2.0 / SCALE as f64);
            let bar =
                Candle { volume, trades: Some(trades), ..Candle::prices(ts, Price(o), Price(h), Price(l), Price(c)) };
            set.absorb(tf, bar);
        }
        pair.ln_price = spec.price.ln();
        pair.ln_vol = lv;
        set
    }

    /// Starts local pair `i` at `now_ms`: emits every level of each venue's initial book.
    pub fn start_pair(&mut self, i: usize, now_ms: i64, out: &mut Vec<Tick>) {
        let interval = self.config.step_interval_ms;
        let pair = &mut self.pairs[i];
        pair.last_ms = now_ms;
        pair.next_due_ms = now_ms + pair.rng.below(interval.max(1) as u64) as i64;
        let spec = &self.specs[pair.spec_index];
        for b in 0..pair.books.len() {
            reposition(pair, spec, b, now_ms, self.config.levels_per_side, &mut self.scratch, out);
            // Start near the steady state: some books already carry a wall.
            for w in 0..WALLS_MAX {
                if pair.rng.chance(INITIAL_WALL_CHANCE) {
                    spawn_wall(pair, spec, b, w, now_ms, &self.config, out);
                }
            }
        }
    }

    /// Steps every local pair that is due at `now_ms`; returns how many stepped. At most
    /// `pairs_max` pairs step per call (the rest stay due), bounding the ticks emitted to
    /// `pairs_max * ticks_per_step_max()`.
    pub fn step_due(&mut self, now_ms: i64, pairs_max: usize, out: &mut Vec<Tick>) -> usize {
        let mut stepped = 0;
        for i in 0..self.pairs.len() {
            if stepped == pairs_max {
                break;
            }
            if self.pairs[i].next_due_ms <= now_ms {
                self.step_pair(i, now_ms, out);
                stepped += 1;
            }
        }
        stepped
    }

    /// Advances local pair `i` to `now_ms` and emits the ticks of that step.
    pub fn step_pair(&mut self, i: usize, now_ms: i64, out: &mut Vec<Tick>) {
        let cfg = &self.config;
        let pair = &mut self.pairs[i];
        let spec = &self.specs[pair.spec_index];
        let dt = (now_ms - pair.last_ms).clamp(0, 60_000);
        pair.last_ms = now_ms;
        let jitter = pair.rng.range(0.6, 1.4);
        pair.next_due_ms = now_ms + (cfg.step_interval_ms as f64 * jitter) as i64;
        pair.ln_vol = 0.999 * pair.ln_vol + 0.03 * pair.rng.normal();
        let sigma = spec.daily_vol * pair.ln_vol.exp() * (dt as f64 / DAY_MS as f64).sqrt();
        let r = sigma * pair.rng.normal();
        pair.ln_price += r;
        let level_qty = spec.level_qty;
        let lot = spec.lot.0 as i64;
        for b in 0..pair.books.len() {
            reposition(pair, spec, b, now_ms, cfg.levels_per_side, &mut self.scratch, out);
            let id = pair.books[b].id;
            // Ordinary churn near the touch.
            for _ in 0..1 + pair.rng.below(2) {
                let bid = pair.rng.chance(0.5);
                let depth = pair.rng.below(20) as usize;
                let book = &pair.books[b];
                let level = if bid { book.truth.bids().get(depth) } else { book.truth.asks().get(depth) };
                let Some(level) = level.copied() else {
                    continue;
                };
                if book.walls.iter().any(|w| w.active && w.price == level.price.0) {
                    continue;
                }
                let qty = level_size(&mut pair.rng, level_qty, lot);
                emit(&mut pair.books[b], id, now_ms, bid, level.price.0, qty, out);
            }
            // Walls: expire, then maybe spawn.
            for w in 0..WALLS_MAX {
                let wall = pair.books[b].walls[w];
                if wall.active {
                    let held = find_level(&pair.books[b].truth, wall.side_bid, wall.price);
                    if now_ms >= wall.until_ms || held.is_none() {
                        pair.books[b].walls[w].active = false;
                        if held.is_some() {
                            let qty = level_size(&mut pair.rng, level_qty, lot);
                            emit(&mut pair.books[b], id, now_ms, wall.side_bid, wall.price, qty, out);
                        }
                    }
                } else if pair.rng.chance(cfg.wall_spawn_chance) {
                    spawn_wall(pair, spec, b, w, now_ms, cfg, out);
                }
            }
            // Trades at the touch, leaning with the move.
            for _ in 0..1 + u64::from(pair.rng.chance(0.2)) {
                let buy = pair.rng.chance(if r > 0.0 {
                    0.7
                } else if r < 0.0 {
                    0.3
                } else {
                    0.5
                });
                let book = &pair.books[b].truth;
                let touch = if buy { book.best_ask() } else { book.best_bid() };
                let Some(touch) = touch else { continue };
                let qty = ((level_qty * pair.rng.range(0.01, 0.5) * SCALE as f64) as i64 / lot).max(1) * lot;
                out.push(Tick {
                    book: id,
                    ts_ms: now_ms,
                    kind: TickKind::Trade { price: touch.price, qty: Qty(qty as u64), taker_sell: !buy },
                });
            }
        }
    }
}

/// Places a wall in slot `w` of venue book `b`: 15 to 80 times the typical level size on a level
/// 3 to ~80 steps from the touch, for an exponentially distributed life (5 s to 10 min).
fn spawn_wall(
    pair: &mut SimPair,
    spec: &PairSpec,
    b: usize,
    w: usize,
    now_ms: i64,
    cfg: &SimConfig,
    out: &mut Vec<Tick>,
) {
    let id = pair.books[b].id;
    let lot = spec.lot.0 as i64;
    let bid = pair.rng.chance(0.5);
    let depth = 3 + pair.rng.below((cfg.levels_per_side / 3).max(4) as u64) as usize;
    let book = &pair.books[b];
    let level = if bid { book.truth.bids().get(depth) } else { book.truth.asks().get(depth) };
    let Some(level) = level.copied() else { return };
    if book.walls.iter().any(|x| x.active && x.price == level.price.0) {
        return;
    }
    let life = (cfg.wall_life_ms_mean as f64 * -pair.rng.unit().max(1e-9).ln()).clamp(5_000.0, 600_000.0);
    pair.books[b].walls[w] = Wall { active: true, side_bid: bid, price: level.price.0, until_ms: now_ms + life as i64 };
    let qty = ((spec.level_qty * pair.rng.range(15.0, 80.0) * SCALE as f64) as i64 / lot).max(1) * lot;
    emit(&mut pair.books[b], id, now_ms, bid, level.price.0, qty, out);
}

fn find_level(book: &Book, bid: bool, price: i64) -> Option<usize> {
    if bid {
        book.bids().binary_search_by(|l| price.cmp(&l.price.0)).ok()
    } else {
        book.asks().binary_search_by(|l| l.price.0.cmp(&price)).ok()
    }
}

fn level_size(rng: &mut Rng, level_qty: f64, lot: i64) -> i64 {
    let q = level_qty * (0.5 * rng.normal()).exp() * SCALE as f64;
    ((q as i64) / lot).max(1) * lot
}

fn emit(book: &mut VenueBook, id: BookId, now_ms: i64, bid: bool, price: i64, qty: i64, out: &mut Vec<Tick>) {
    let side = if bid { Side::Bid } else { Side::Ask };
    let (price, qty) = (Price(price), Qty(qty.max(0) as u64));
    book.truth.apply(side, price, qty);
    out.push(Tick { book: id, ts_ms: now_ms, kind: TickKind::Book { side, price, qty } });
}

/// Moves venue book `b` of `pair` to the pair's current price: removes levels now on the wrong
/// side or beyond the depth first (so the book never crosses), then fills the grid.
fn reposition(
    pair: &mut SimPair,
    spec: &PairSpec,
    b: usize,
    now_ms: i64,
    n: usize,
    scratch: &mut Vec<i64>,
    out: &mut Vec<Tick>,
) {
    let step = pair.step;
    let mid = pair.ln_price.exp() * (1.0 + pair.books[b].basis) * SCALE as f64;
    let top_bid = ((mid / step as f64).floor() as i64).max(n as i64 + 1);
    let top_ask = top_bid + 1;
    let n = n as i64;
    let id = pair.books[b].id;
    let lot = spec.lot.0 as i64;
    // Removals.
    for bid in [true, false] {
        scratch.clear();
        let vb = &pair.books[b];
        let levels = if bid { vb.truth.bids() } else { vb.truth.asks() };
        for l in levels {
            let g = l.price.0 / step;
            let keep = if bid { g <= top_bid && g > top_bid - n } else { g >= top_ask && g < top_ask + n };
            if !keep {
                scratch.push(l.price.0);
            }
        }
        for &p in scratch.iter() {
            emit(&mut pair.books[b], id, now_ms, bid, p, 0, out);
        }
    }
    // Additions: the held levels are a contiguous run of the grid; fill around it.
    for bid in [true, false] {
        let vb = &pair.books[b];
        let levels = if bid { vb.truth.bids() } else { vb.truth.asks() };
        let (lo, hi) = if bid { (top_bid - n + 1, top_bid) } else { (top_ask, top_ask + n - 1) };
        let held = match (levels.first(), levels.last()) {
            (Some(f), Some(l)) => {
                let (a, z) = (f.price.0 / step, l.price.0 / step);
                Some((a.min(z), a.max(z)))
            }
            _ => None,
        };
        for g in lo..=hi {
            if held.is_some_and(|(a, z)| g >= a && g <= z) {
                continue;
            }
            let qty = level_size(&mut pair.rng, spec.level_qty, lot);
            emit(&mut pair.books[b], id, now_ms, bid, g * step, qty, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::Market;

    const NOW: i64 = 1_795_200_000_000;

    fn setup(pairs: usize) -> (Vec<PairSpec>, Registry) {
        let u = universe(7, pairs);
        let r = Registry::new(instruments(&u, &Venue::ALL)).expect("registry");
        (u, r)
    }

    #[test]
    fn universe_is_realistic_and_deterministic() {
        let (u, r) = setup(500);
        assert_eq!(u.len(), 500);
        assert_eq!(r.venue_books(Venue::Binance).len(), 500);
        for v in [Venue::Bybit, Venue::Okx, Venue::Bitget] {
            let n = r.venue_books(v).len();
            assert!((200..450).contains(&n), "{v}: {n}");
        }
        assert!(r.find(Venue::Binance, "BTCUSDT").is_some());
        assert!(r.find(Venue::Binance, "ETHBTC").is_some());
        assert_eq!(u.iter().filter(|p| p.young).count(), YOUNG_PAIRS);
        let again = universe(7, 500);
        assert!(u.iter().zip(&again).all(|(a, b)| a.symbol() == b.symbol() && a.price == b.price));
    }

    #[test]
    fn history_fills_every_timeframe_consistently() {
        let (u, r) = setup(60);
        let mut sim = Sim::new(SimConfig::default(), &u, &r, &[0]);
        let set = sim.history(0, NOW, 512);
        for tf in Timeframe::ALL {
            let ring = set.ring(tf);
            assert_eq!(ring.len(), 512, "{tf:?}");
            let completed = ring.iter().filter(|c| c.open_ms + tf.duration_ms() <= NOW).count();
            assert!(completed >= 500, "{tf:?}: {completed}");
            for w in ring.iter().collect::<Vec<_>>().windows(2) {
                assert_eq!(w[1].open_ms - w[0].open_ms, tf.duration_ms());
                assert!(w[0].low <= w[0].open && w[0].open <= w[0].high && w[0].low.0 > 0);
            }
        }
        // Every 1h bar whose four 15m bars are all held equals their aggregate.
        let m15: Vec<_> = set.ring(Timeframe::M15).iter().copied().collect();
        let mut checked = 0;
        for h in set.ring(Timeframe::H1).iter() {
            let parts: Vec<_> = m15.iter().filter(|c| Timeframe::H1.bucket_start(c.open_ms) == h.open_ms).collect();
            if parts.len() == 4 {
                assert_eq!(h.open, parts[0].open);
                assert_eq!(h.close, parts[3].close);
                assert_eq!(h.high, parts.iter().map(|c| c.high).max().expect("4"));
                assert_eq!(h.low, parts.iter().map(|c| c.low).min().expect("4"));
                checked += 1;
            }
        }
        assert!(checked > 100);
        let last = set.ring(Timeframe::M5).newest().expect("bar");
        assert!((last.close.to_f64() / u[0].price - 1.0).abs() < 0.001);
    }

    #[test]
    fn ticks_rebuild_the_same_uncrossed_books() {
        let (u, r) = setup(40);
        let ids: Vec<BookId> = r.ids().collect();
        let mut m = Market::new(r.len(), &ids, 512, 16);
        let mut sim = Sim::new(
            SimConfig { wall_spawn_chance: 0.05, ..SimConfig::default() },
            &u,
            &r,
            &(0..40).collect::<Vec<_>>(),
        );
        let mut out = Vec::new();
        for i in 0..sim.pair_count() {
            sim.history(i, NOW, 16);
            sim.start_pair(i, NOW, &mut out);
        }
        let mut trades = 0;
        for step in 0..400 {
            let now = NOW + step * 100;
            sim.step_due(now, usize::MAX, &mut out);
            for t in &out {
                m.apply(t);
                if matches!(t.kind, TickKind::Trade { .. }) {
                    trades += 1;
                }
            }
            out.clear();
        }
        assert!(trades > 100);
        for p in &sim.pairs {
            for vb in &p.books {
                let s = m.get(vb.id).expect("owned");
                assert_eq!(s.book.bids(), vb.truth.bids());
                assert_eq!(s.book.asks(), vb.truth.asks());
                assert_eq!(s.crossed_count, 0);
                assert_eq!(s.book.bids().len(), 250);
                assert!(s.book.check_invariants());
            }
        }
    }
}
