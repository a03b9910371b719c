//! A book's metrics as its shard publishes them (decisions §9): computed from the book's
//! candles, depth book, level set and last wall scan, once per [`METRICS_PERIOD_MS`].

use rampart_engine::market::BookState;
use rampart_engine::metrics::{self, Window, INTERVALS};
use rampart_engine::Price;

use super::DensitySnapshot;

/// Every book's metrics are recomputed once per period, the books spread evenly over it; the
/// board merges them once per period too, so a served figure is at most two periods old.
pub const METRICS_PERIOD_MS: i64 = 1_000;
/// Metric computations per loop round at most; a shard that falls behind catches up over the
/// following rounds.
pub const METRICS_PER_ROUND_MAX: usize = 32;

/// Resting value within ±1 % of the mid, in USD.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Depth {
    /// Bids.
    pub bid_usd: f64,
    /// Asks.
    pub ask_usd: f64,
}

impl Depth {
    /// (bid − ask) / (bid + ask); zero on an empty band.
    pub fn imbalance(&self) -> f64 {
        metrics::imbalance(self.bid_usd, self.ask_usd)
    }
}

/// The book's current walls.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct WallsSummary {
    /// How many.
    pub count: u32,
    /// Their summed USD value; `None` when the quote asset has no USD price.
    pub usd: Option<f64>,
}

/// One book's metrics. A field that is `None` has no data yet (a young listing, an empty or
/// out-of-sync book) and is left out of answers.
#[derive(Clone, Debug, Default)]
pub struct PairMetrics {
    /// When computed, Unix milliseconds; zero before the first computation.
    pub ts_ms: i64,
    /// The price the metrics were measured against (fixed-point).
    pub price: i64,
    /// The quote asset's USD price at that time (`None`: unknown).
    pub quote_usd: Option<f64>,
    /// One window per interval, in [`INTERVALS`] order.
    pub windows: [Option<Window>; 6],
    /// Spread, basis points.
    pub spread_bps: Option<f64>,
    /// Depth within ±1 %.
    pub depth: Option<Depth>,
    /// Walls of the last scan.
    pub walls: Option<WallsSummary>,
    /// Signed percent distances to the nearest support and resistance; `None` when the book
    /// has no level at all.
    pub levels: Option<(Option<f64>, Option<f64>)>,
    /// Open time of the oldest bar held: how far the pair's history goes back.
    pub history_start_ms: Option<i64>,
    /// The pair's perpetual's figures (`decisions.md` §17 "Data"); `None` without a perpetual.
    pub perp: Option<PerpMetrics>,
}

/// A pair's derivatives metrics (§17): the `liquidations`, `oi`, `oiChange` and `funding` rows
/// of §9's table. A value not known now is `None` and left out of answers: a window not yet
/// watched in full, Bitget's liquidations, and an OI or funding gone stale (a stale value is not
/// the value now; `GET /v1/perp/{symbol}` shows it with `stale`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerpMetrics {
    /// Liquidation sums per interval, in [`INTERVALS`] order.
    pub liquidations: [Option<rampart_engine::perp_window::LiqSums>; 6],
    /// Open interest now: base units and USD.
    pub oi: Option<(f64, f64)>,
    /// Percent change of OI in base units per interval, in [`INTERVALS`] order.
    pub oi_change: [Option<f64>; 6],
    /// Funding now.
    pub funding: Option<rampart_engine::perp_book::FundingNow>,
}

impl PairMetrics {
    /// Computes a book's metrics at `now_ms` against `price` (its reference price; zero when
    /// none is known), with its last published wall scan and its quote's USD price.
    pub fn compute(
        state: &BookState,
        price: Price,
        now_ms: i64,
        walls: &DensitySnapshot,
        quote_usd: Option<f64>,
    ) -> PairMetrics {
        let windows = INTERVALS.map(|i| metrics::window(&state.candles, i, now_ms, state.last_price));
        // Depth figures come from a book that is in sync and not crossed, like walls.
        let book_ok = !state.stale && !state.crossed;
        let depth = book_ok
            .then(|| metrics::depth_quote(&state.book))
            .flatten()
            .and_then(|(bid, ask)| quote_usd.map(|q| Depth { bid_usd: bid * q, ask_usd: ask * q }));
        let walls_summary = (book_ok && state.book.mid().is_some()).then(|| WallsSummary {
            count: walls.walls.len() as u32,
            usd: walls.walls.iter().map(|w| w.usd).sum::<Option<f64>>(),
        });
        let levels = state.levels.levels();
        let levels = (price.0 > 0 && !levels.is_empty()).then(|| metrics::level_distances(levels, price));
        PairMetrics {
            ts_ms: now_ms,
            price: price.0,
            quote_usd,
            windows,
            spread_bps: if book_ok { metrics::spread_bps(&state.book) } else { None },
            depth,
            walls: walls_summary,
            levels,
            history_start_ms: state.candles.history_start_ms(),
            perp: None,
        }
    }
}
