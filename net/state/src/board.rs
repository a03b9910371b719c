//! The market board (decisions §9): every book's published metrics merged once per period into
//! one snapshot per venue, with every ranking sorted once and the board numbers counted, so
//! `/v1/metrics`, `/v1/rankings` and `/v1/market` answer from one consistent snapshot and no
//! request sorts.
//!
//! The board thread reads what shards publish (an atomic load per book) and never blocks one.

use std::sync::Arc;

use rampart_engine::metrics::INTERVALS;
use rampart_engine::{BookId, Timeframe, Venue};

use super::pair_metrics::{PairMetrics, METRICS_PERIOD_MS};
use super::Shared;

/// How often the board is rebuilt.
pub const BOARD_PERIOD_MS: i64 = METRICS_PERIOD_MS;
/// A pair is in the `new` universe while its history is shorter than this.
pub const NEW_LISTING_MS: i64 = 30 * rampart_engine::candle::DAY_MS;
/// `|distance| ≤ this` percent to a level counts a pair as at a level.
pub const AT_LEVEL_PCT: f64 = 0.5;
/// `change ≥ this` counts a pair as up 5 % (and `≤ −this` as down 5 %).
pub const MOVE_PCT: f64 = 5.0;

/// A metric of §9.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Metric {
    /// Percent from the window's open to the last price.
    Change,
    /// (high − low) / open over the window, percent.
    Volatility,
    /// Quote volume of the window.
    Volume,
    /// Trades in the window.
    Trades,
    /// Spread now, basis points.
    Spread,
    /// Resting value within ±1 % now.
    Depth,
    /// Current walls.
    Walls,
    /// Distances to the nearest levels.
    Levels,
    /// Liquidations in the window, long and short (§17).
    Liquidations,
    /// Open interest now (§17).
    Oi,
    /// Percent change of open interest over the window (§17).
    OiChange,
    /// Funding now (§17).
    Funding,
}

impl Metric {
    /// Every metric, in the order answers list them.
    pub const ALL: [Metric; 12] = [
        Metric::Change,
        Metric::Volatility,
        Metric::Volume,
        Metric::Trades,
        Metric::Spread,
        Metric::Depth,
        Metric::Walls,
        Metric::Levels,
        Metric::Liquidations,
        Metric::Oi,
        Metric::OiChange,
        Metric::Funding,
    ];
    /// The allowed names as a 422 message lists them.
    pub const ALLOWED: &'static str =
        "change, volatility, volume, trades, spread, depth, walls, levels, liquidations, oi, oiChange, funding";

    /// API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Change => "change",
            Metric::Volatility => "volatility",
            Metric::Volume => "volume",
            Metric::Trades => "trades",
            Metric::Spread => "spread",
            Metric::Depth => "depth",
            Metric::Walls => "walls",
            Metric::Levels => "levels",
            Metric::Liquidations => "liquidations",
            Metric::Oi => "oi",
            Metric::OiChange => "oiChange",
            Metric::Funding => "funding",
        }
    }

    /// Parses an API name.
    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Whether the metric is taken over an interval.
    pub fn uses_interval(self) -> bool {
        matches!(
            self,
            Metric::Change
                | Metric::Volatility
                | Metric::Volume
                | Metric::Trades
                | Metric::Liquidations
                | Metric::OiChange
        )
    }

    /// The order a ranking by this metric takes unless told: nearest levels and tightest
    /// spreads first, the largest first otherwise.
    pub fn default_order(self) -> Order {
        match self {
            Metric::Levels | Metric::Spread => Order::Asc,
            _ => Order::Desc,
        }
    }

    /// The number a ranking sorts by; `None` when the pair has no such data.
    pub fn rank_value(self, m: &PairMetrics, interval: Timeframe) -> Option<f64> {
        let w = m.windows[interval.index()];
        match self {
            Metric::Change => w.map(|w| w.change_pct()),
            Metric::Volatility => w.map(|w| w.volatility_pct()),
            Metric::Volume => w.map(|w| w.volume),
            Metric::Trades => w.and_then(|w| w.trades).map(|t| t as f64),
            Metric::Spread => m.spread_bps,
            Metric::Depth => m.depth.map(|d| d.bid_usd + d.ask_usd),
            Metric::Walls => m.walls.and_then(|w| w.usd),
            Metric::Levels => m.levels.and_then(|(s, r)| nearer(s, r)),
            // §17: liquidations by long + short, OI by USD, funding by its 8-hour rate.
            Metric::Liquidations => {
                m.perp.and_then(|p| p.liquidations[interval.index()]).map(|l| l.long_usd + l.short_usd)
            }
            Metric::Oi => m.perp.and_then(|p| p.oi).map(|(_, usd)| usd),
            Metric::OiChange => m.perp.and_then(|p| p.oi_change[interval.index()]),
            Metric::Funding => m.perp.and_then(|p| p.funding).map(|f| f.rate8h),
        }
    }

    /// Slot of this metric's ranking over `interval` in [`VenueBoard::ranked`].
    fn rank_slot(self, interval: Timeframe) -> usize {
        match self {
            Metric::Change => interval.index(),
            Metric::Volatility => 6 + interval.index(),
            Metric::Volume => 12 + interval.index(),
            Metric::Trades => 18 + interval.index(),
            Metric::Spread => 24,
            Metric::Depth => 25,
            Metric::Walls => 26,
            Metric::Levels => 27,
            Metric::Liquidations => 28 + interval.index(),
            Metric::OiChange => 34 + interval.index(),
            Metric::Oi => 40,
            Metric::Funding => 41,
        }
    }
}

/// Rankings per venue: six interval metrics over six intervals and six metrics of now.
const RANK_SLOTS: usize = 42;

/// The absolute distance to the nearer of two levels.
fn nearer(support: Option<f64>, resistance: Option<f64>) -> Option<f64> {
    match (support.map(f64::abs), resistance.map(f64::abs)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A ranking's order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Order {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

impl Order {
    /// Parses `asc` / `desc`.
    pub fn parse(s: &str) -> Option<Order> {
        match s {
            "asc" => Some(Order::Asc),
            "desc" => Some(Order::Desc),
            _ => None,
        }
    }
}

/// A ranking universe (decisions §9): the venue's pairs, or those of one quote asset, or the
/// new listings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Category {
    /// Every pair.
    All,
    /// Quoted in USDT.
    Usdt,
    /// Quoted in USDC.
    Usdc,
    /// Quoted in BTC.
    Btc,
    /// Less than 30 days of history.
    New,
}

impl Category {
    /// Parses a path segment.
    pub fn parse(s: &str) -> Option<Category> {
        match s {
            "all" => Some(Category::All),
            "usdt" => Some(Category::Usdt),
            "usdc" => Some(Category::Usdc),
            "btc" => Some(Category::Btc),
            "new" => Some(Category::New),
            _ => None,
        }
    }

    /// Whether `e` belongs to this universe at `now_ms`.
    pub fn contains(self, e: &Entry, now_ms: i64) -> bool {
        match self {
            Category::All => true,
            Category::Usdt => e.quote == "USDT",
            Category::Usdc => e.quote == "USDC",
            Category::Btc => e.quote == "BTC",
            Category::New => e.metrics.history_start_ms.is_none_or(|s| now_ms - s < NEW_LISTING_MS),
        }
    }
}

/// One pair of a venue on the board.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The book.
    pub id: BookId,
    /// `BASEQUOTE`.
    pub symbol: String,
    /// Quote asset.
    pub quote: String,
    /// Its metrics as last published.
    pub metrics: Arc<PairMetrics>,
}

/// The board numbers of one venue over one interval.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct Numbers {
    /// Pairs with a change over the interval.
    pub pairs: u32,
    /// Of them, up.
    pub advancing: u32,
    /// Down.
    pub declining: u32,
    /// Flat.
    pub unchanged: u32,
    /// Up 5 % or more.
    pub up5: u32,
    /// Down 5 % or more.
    pub down5: u32,
    /// Current walls on all pairs.
    pub walls: u32,
    /// Pairs within 0.5 % of a level.
    pub at_level: u32,
    /// USD-volume-weighted share of advancing pairs × 100 (50 without volume).
    pub sentiment: f64,
    /// The derivatives numbers of §17 (pairs with a perpetual, liquidations, OI, funding).
    pub perp: PerpNumbers,
}

/// The board's derivatives numbers over one interval (`decisions.md` §17 "Data"). A sum or mean
/// no pair has a value for is `None` (`null`): Bitget's liquidations, a window not yet watched in
/// full, no OI known.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct PerpNumbers {
    /// Pairs with a perpetual.
    pub perps: u32,
    /// Long positions liquidated over the window, USD.
    pub liq_long_usd: Option<f64>,
    /// Short positions liquidated over the window, USD.
    pub liq_short_usd: Option<f64>,
    /// Open interest now, summed, USD.
    pub oi_usd: Option<f64>,
    /// Percent change of the summed OI over the window (each pair's OI at the window's start
    /// valued at today's price: its base-unit change), over the pairs whose change is known.
    pub oi_change: Option<f64>,
    /// The OI-weighted mean of `rate8h`, percent.
    pub funding: Option<f64>,
    /// Pairs with `rate8h` ≥ [`FUNDING_HIGH_PCT`].
    pub funding_high: u32,
    /// Pairs with `rate8h` ≤ −[`FUNDING_HIGH_PCT`].
    pub funding_low: u32,
}

/// `rate8h` at or beyond which a pair counts in `fundingHigh` / `fundingLow` (§17).
pub const FUNDING_HIGH_PCT: f64 = 0.05;

/// [`PerpNumbers`] while the entries are read.
#[derive(Default)]
struct PerpCount {
    n: PerpNumbers,
    oi_known_usd: f64,
    oi_start_usd: f64,
    weighted_rate: f64,
    weight: f64,
}

impl PerpCount {
    fn add(&mut self, p: &super::pair_metrics::PerpMetrics, interval: Timeframe) {
        let add = |sum: &mut Option<f64>, v: f64| *sum = Some(sum.unwrap_or(0.0) + v);
        self.n.perps += 1;
        if let Some(l) = p.liquidations[interval.index()] {
            add(&mut self.n.liq_long_usd, l.long_usd);
            add(&mut self.n.liq_short_usd, l.short_usd);
        }
        let usd = p.oi.map(|(_, usd)| usd);
        if let Some(usd) = usd {
            add(&mut self.n.oi_usd, usd);
        }
        if let (Some(usd), Some(pct)) = (usd, p.oi_change[interval.index()]) {
            self.oi_known_usd += usd;
            self.oi_start_usd += usd / (1.0 + pct / 100.0);
        }
        if let Some(f) = p.funding {
            self.n.funding_high += u32::from(f.rate8h >= FUNDING_HIGH_PCT);
            self.n.funding_low += u32::from(f.rate8h <= -FUNDING_HIGH_PCT);
            if let Some(usd) = usd {
                self.weighted_rate += f.rate8h * usd;
                self.weight += usd;
            }
        }
    }

    fn finish(mut self) -> PerpNumbers {
        let start = self.oi_start_usd;
        self.n.oi_change = (start > 0.0 && start.is_finite()).then(|| (self.oi_known_usd - start) / start * 100.0);
        self.n.funding = (self.weight > 0.0).then(|| self.weighted_rate / self.weight);
        self.n
    }
}

/// One venue's board.
#[derive(Clone, Debug, Default)]
pub struct VenueBoard {
    /// Listed pairs, by symbol.
    pub entries: Vec<Entry>,
    /// Per ranking slot, entry indices sorted ascending by value (ties by symbol); pairs
    /// without the value left out. Descending order reads each group of ties from its start.
    ranked: Vec<Vec<u32>>,
    /// Per interval.
    pub numbers: [Numbers; 6],
}

/// Every venue's board at one time.
#[derive(Debug)]
pub struct Board {
    /// When built, Unix milliseconds; zero before the first build.
    pub ts_ms: i64,
    /// Built after every shard was ready (each had published every book's metrics).
    pub complete: bool,
    venues: Vec<VenueBoard>,
    /// `BookId` index → entry index in its venue's board (`u32::MAX`: not on the board).
    entry_of: Vec<u32>,
}

impl Board {
    /// A board with no pair (before the first build).
    pub fn empty() -> Board {
        Board { ts_ms: 0, complete: false, venues: vec![VenueBoard::default(); Venue::COUNT], entry_of: Vec::new() }
    }

    /// Builds the board from what the shards published, at `now_ms`.
    pub fn build(shared: &Shared, now_ms: i64) -> Board {
        let complete = shared.ready();
        let registry = shared.registry();
        let mut entry_of = vec![u32::MAX; registry.len()];
        let venues = Venue::ALL
            .map(|venue| {
                let mut entries: Vec<Entry> = registry
                    .venue_books(venue)
                    .iter()
                    .filter(|&&id| shared.listed(id))
                    .map(|&id| {
                        let ins = registry.get(id);
                        let metrics = shared.slots[id.index()].metrics.load_full();
                        Entry { id, symbol: ins.symbol.clone(), quote: ins.quote.clone(), metrics }
                    })
                    .collect();
                entries.sort_by(|a, b| a.symbol.cmp(&b.symbol));
                for (i, e) in entries.iter().enumerate() {
                    entry_of[e.id.index()] = i as u32;
                }
                let ranked = (0..RANK_SLOTS).map(|slot| rank(&entries, slot)).collect();
                let numbers = INTERVALS.map(|i| count(&entries, i));
                VenueBoard { entries, ranked, numbers }
            })
            .to_vec();
        Board { ts_ms: now_ms, complete, venues, entry_of }
    }

    /// A venue's board.
    pub fn venue(&self, venue: Venue) -> &VenueBoard {
        &self.venues[venue.index()]
    }

    /// A book's entry, when it is on the board.
    pub fn entry(&self, venue: Venue, id: BookId) -> Option<&Entry> {
        let i = *self.entry_of.get(id.index())?;
        self.venue(venue).entries.get(i as usize)
    }
}

impl VenueBoard {
    /// The entries of a ranking, best first, in `order`: at most `limit` of `category`.
    pub fn ranking(
        &self,
        metric: Metric,
        interval: Timeframe,
        order: Order,
        category: Category,
        now_ms: i64,
        limit: usize,
    ) -> Vec<(&Entry, f64)> {
        let Some(sorted) = self.ranked.get(metric.rank_slot(interval)) else { return Vec::new() };
        let value = |&i: &u32| {
            let e = &self.entries[i as usize];
            metric.rank_value(&e.metrics, interval).map(|v| (e, v))
        };
        let keep = |(e, _): &(&Entry, f64)| category.contains(e, now_ms);
        match order {
            Order::Asc => sorted.iter().filter_map(value).filter(keep).take(limit).collect(),
            Order::Desc => {
                // Largest first; equal values keep their symbol order.
                let mut out = Vec::with_capacity(limit);
                let mut end = sorted.len();
                while end > 0 && out.len() < limit {
                    let v = value(&sorted[end - 1]).map(|(_, v)| v);
                    let mut start = end - 1;
                    while start > 0 && value(&sorted[start - 1]).map(|(_, v)| v) == v {
                        start -= 1;
                    }
                    out.extend(sorted[start..end].iter().filter_map(value).filter(keep).take(limit - out.len()));
                    end = start;
                }
                out
            }
        }
    }
}

/// Entry indices with a value in `slot`'s ranking, ascending by value then symbol.
fn rank(entries: &[Entry], slot: usize) -> Vec<u32> {
    let (metric, interval) = slot_key(slot);
    let mut keyed: Vec<(f64, u32)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| metric.rank_value(&e.metrics, interval).filter(|v| v.is_finite()).map(|v| (v, i as u32)))
        .collect();
    // Entries are in symbol order, so the index breaks ties by symbol.
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// The (metric, interval) of a ranking slot (the inverse of [`Metric::rank_slot`]).
fn slot_key(slot: usize) -> (Metric, Timeframe) {
    match slot {
        0..24 => (Metric::ALL[slot / 6], INTERVALS[slot % 6]),
        24..28 => (Metric::ALL[4 + (slot - 24)], Timeframe::D1),
        28..34 => (Metric::Liquidations, INTERVALS[slot - 28]),
        34..40 => (Metric::OiChange, INTERVALS[slot - 34]),
        40 => (Metric::Oi, Timeframe::D1),
        _ => (Metric::Funding, Timeframe::D1),
    }
}

/// The board numbers of a venue's entries over `interval`.
fn count(entries: &[Entry], interval: Timeframe) -> Numbers {
    let mut n = Numbers::default();
    let (mut up_usd, mut all_usd) = (0.0, 0.0);
    let mut perp = PerpCount::default();
    for e in entries {
        let m = &e.metrics;
        if let Some(p) = &m.perp {
            perp.add(p, interval);
        }
        n.walls += m.walls.map_or(0, |w| w.count);
        if m.levels.and_then(|(s, r)| nearer(s, r)).is_some_and(|d| d <= AT_LEVEL_PCT) {
            n.at_level += 1;
        }
        let Some(w) = m.windows[interval.index()] else { continue };
        let change = w.change_pct();
        n.pairs += 1;
        match change.partial_cmp(&0.0) {
            Some(std::cmp::Ordering::Greater) => n.advancing += 1,
            Some(std::cmp::Ordering::Less) => n.declining += 1,
            _ => n.unchanged += 1,
        }
        n.up5 += u32::from(change >= MOVE_PCT);
        n.down5 += u32::from(change <= -MOVE_PCT);
        if let Some(q) = m.quote_usd {
            let usd = w.volume * q;
            all_usd += usd;
            if change > 0.0 {
                up_usd += usd;
            }
        }
    }
    n.sentiment = if all_usd > 0.0 { (up_usd / all_usd * 1000.0).round() / 10.0 } else { 50.0 };
    n.perp = perp.finish();
    n
}

/// A number of the market board a market alert watches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BoardNumber {
    /// Volume-weighted share of advancing pairs × 100.
    Sentiment,
    /// Pairs up over the interval.
    Advancing,
    /// Pairs down.
    Declining,
    /// Pairs up 5 % or more.
    Up5,
    /// Pairs down 5 % or more.
    Down5,
    /// Current walls.
    Walls,
    /// Pairs within 0.5 % of a level.
    AtLevel,
    /// Pairs with a perpetual (§17; [`PerpNumbers`], as the rest below).
    Perps,
    /// Long positions liquidated over the interval, USD.
    LiqLongUsd,
    /// Short positions liquidated over the interval, USD.
    LiqShortUsd,
    /// Open interest now, summed, USD.
    OiUsd,
    /// Percent change of the summed open interest over the interval.
    OiChange,
    /// The OI-weighted mean funding rate per 8 h, percent.
    Funding,
    /// Pairs whose funding per 8 h is 0.05 % or more.
    FundingHigh,
    /// Pairs whose funding per 8 h is −0.05 % or less.
    FundingLow,
}

impl BoardNumber {
    /// Every number, in the order messages list them.
    pub const ALL: [BoardNumber; 15] = [
        BoardNumber::Sentiment,
        BoardNumber::Advancing,
        BoardNumber::Declining,
        BoardNumber::Up5,
        BoardNumber::Down5,
        BoardNumber::Walls,
        BoardNumber::AtLevel,
        BoardNumber::Perps,
        BoardNumber::LiqLongUsd,
        BoardNumber::LiqShortUsd,
        BoardNumber::OiUsd,
        BoardNumber::OiChange,
        BoardNumber::Funding,
        BoardNumber::FundingHigh,
        BoardNumber::FundingLow,
    ];
    /// The allowed names as a 422 lists them.
    pub const ALLOWED: &'static str =
        "sentiment, advancing, declining, up5, down5, walls, atLevel, perps, liqLongUsd, \
                                       liqShortUsd, oiUsd, oiChange, funding, fundingHigh, fundingLow";

    /// The stored and answered spelling (the field name in `GET /v1/market`).
    pub fn as_str(self) -> &'static str {
        match self {
            BoardNumber::Sentiment => "sentiment",
            BoardNumber::Advancing => "advancing",
            BoardNumber::Declining => "declining",
            BoardNumber::Up5 => "up5",
            BoardNumber::Down5 => "down5",
            BoardNumber::Walls => "walls",
            BoardNumber::AtLevel => "atLevel",
            BoardNumber::Perps => "perps",
            BoardNumber::LiqLongUsd => "liqLongUsd",
            BoardNumber::LiqShortUsd => "liqShortUsd",
            BoardNumber::OiUsd => "oiUsd",
            BoardNumber::OiChange => "oiChange",
            BoardNumber::Funding => "funding",
            BoardNumber::FundingHigh => "fundingHigh",
            BoardNumber::FundingLow => "fundingLow",
        }
    }

    /// The number spelled `s` (exactly).
    pub fn parse(s: &str) -> Option<BoardNumber> {
        BoardNumber::ALL.into_iter().find(|n| n.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::metrics::Window;
    use rampart_engine::Price;

    fn entry(symbol: &str, quote: &str, change: Option<f64>, volume: f64) -> Entry {
        let mut m = PairMetrics { ts_ms: 1, price: 100, quote_usd: Some(1.0), ..PairMetrics::default() };
        m.windows[Timeframe::D1.index()] = change.map(|c| Window {
            open: Price(1_000_000),
            high: Price(2_000_000),
            low: Price(1),
            last: Price((1_000_000.0 * (1.0 + c / 100.0)).round() as i64),
            volume,
            trades: Some(1),
        });
        Entry { id: BookId(0), symbol: symbol.into(), quote: quote.into(), metrics: Arc::new(m) }
    }

    fn board(entries: Vec<Entry>) -> VenueBoard {
        let ranked = (0..RANK_SLOTS).map(|slot| rank(&entries, slot)).collect();
        let numbers = INTERVALS.map(|i| count(&entries, i));
        VenueBoard { entries, ranked, numbers }
    }

    #[test]
    fn rankings_sort_once_and_break_ties_by_symbol_in_both_orders() {
        let b = board(vec![
            entry("AAAUSDT", "USDT", Some(1.0), 10.0),
            entry("BBBBTC", "BTC", Some(3.0), 10.0),
            entry("CCCUSDT", "USDT", Some(3.0), 10.0),
            entry("DDDUSDT", "USDT", None, 10.0),
            entry("EEEUSDT", "USDT", Some(-2.0), 10.0),
        ]);
        let names = |order, category, limit| -> Vec<String> {
            b.ranking(Metric::Change, Timeframe::D1, order, category, 0, limit)
                .into_iter()
                .map(|(e, _)| e.symbol.clone())
                .collect()
        };
        assert_eq!(names(Order::Desc, Category::All, 10), ["BBBBTC", "CCCUSDT", "AAAUSDT", "EEEUSDT"]);
        assert_eq!(names(Order::Asc, Category::All, 10), ["EEEUSDT", "AAAUSDT", "BBBBTC", "CCCUSDT"]);
        assert_eq!(names(Order::Desc, Category::Usdt, 2), ["CCCUSDT", "AAAUSDT"]);
        assert_eq!(names(Order::Desc, Category::Btc, 10), ["BBBBTC"]);
        assert!(names(Order::Desc, Category::Usdc, 10).is_empty());
        assert_eq!(names(Order::Desc, Category::All, 1), ["BBBBTC"]);
    }

    #[test]
    fn board_numbers_count_the_pairs_with_a_change() {
        let b = board(vec![
            entry("A", "USDT", Some(6.0), 30.0),
            entry("B", "USDT", Some(-5.0), 10.0),
            entry("C", "USDT", Some(0.0), 60.0),
            entry("D", "USDT", None, 1000.0),
        ]);
        let n = b.numbers[Timeframe::D1.index()];
        assert_eq!((n.pairs, n.advancing, n.declining, n.unchanged, n.up5, n.down5), (4 - 1, 1, 1, 1, 1, 1));
        assert_eq!(n.sentiment, 30.0, "30 of 100 USD traded on advancing pairs");
        assert_eq!(b.numbers[Timeframe::H1.index()].sentiment, 50.0, "no volume: 50");
    }

    #[test]
    fn derivatives_numbers_sum_weight_and_count() {
        use crate::pair_metrics::PerpMetrics;
        use rampart_engine::perp_book::FundingNow;
        use rampart_engine::perp_window::LiqSums;
        let funding = |rate8h| FundingNow { rate: rate8h, rate8h, interval_h: 8, next_ms: 0, time_ms: 0, stale: false };
        let h1 = Timeframe::H1;
        let mut a = PerpMetrics { oi: Some((10.0, 1_000.0)), funding: Some(funding(0.1)), ..PerpMetrics::default() };
        a.liquidations[h1.index()] = Some(LiqSums { long_usd: 5.0, short_usd: 1.0, long_count: 1, short_count: 1 });
        a.oi_change[h1.index()] = Some(25.0);
        let b = PerpMetrics { oi: Some((1.0, 3_000.0)), funding: Some(funding(-0.05)), ..PerpMetrics::default() };
        let mut c = PerpCount::default();
        c.add(&a, h1);
        c.add(&b, h1);
        c.add(&PerpMetrics::default(), h1);
        let n = c.finish();
        assert_eq!((n.perps, n.funding_high, n.funding_low), (3, 1, 1));
        assert_eq!((n.liq_long_usd, n.liq_short_usd, n.oi_usd), (Some(5.0), Some(1.0), Some(4_000.0)));
        // Only `a`'s change is known: 800 USD at the start, 1 000 now.
        assert_eq!(n.oi_change, Some(25.0));
        let mean = n.funding.expect("OI known");
        assert!((mean - (0.1 * 1_000.0 - 0.05 * 3_000.0) / 4_000.0).abs() < 1e-12, "{mean}");
        let none = PerpCount::default().finish();
        assert_eq!((none.liq_long_usd, none.oi_usd, none.oi_change, none.funding), (None, None, None, None));
    }

    #[test]
    fn slot_keys_invert_rank_slots() {
        for m in Metric::ALL {
            for i in INTERVALS {
                let (km, ki) = slot_key(m.rank_slot(i));
                assert_eq!(km, m);
                if m.uses_interval() {
                    assert_eq!(ki, i);
                }
            }
        }
    }
}
