//! The decode + book path against a conventional baseline, on the same Binance frames in the same
//! run: rampart's engine path (`BinanceDecoder`, `BinanceBookSync` into a `Book`, trades through
//! `Market::apply` with alerts held) against serde_json into owned structs and a `BTreeMap` book,
//! the way a typical Rust client is written. Both must end with the same book (every level and
//! size), the same last price, the same newest candles and the same number of alert firings, or
//! [`compare`] panics: the figures are only worth reading if both did the same work.
//!
//! The frames are made here from a seed: a REST depth snapshot of about 320 levels a side around
//! 64 000 USDT, then a stream of combined-stream `depthUpdate` diffs (1–10 level changes near the
//! touch, contiguous update ids, the touch drifting by a few cents, levels that would cross or
//! leave a 400-cent band removed, so the book never crosses) and `trade`s at the touch, half of
//! each, prices and sizes in Binance's 8-decimal text. The snapshot is loaded before the clock
//! starts; every diff and trade is timed on its own (including ~20 ns of clock reads).
//!
//! The baseline, in detail (what "conventional" means here):
//! - `serde_json::from_slice` into `Combined { stream: String, data: Event }`, `Event` an
//!   internally tagged enum on `"e"` (`#[serde(tag = "e")]`), levels as `Vec<(String, String)>`,
//!   symbol, prices and sizes as `String`s;
//! - prices and sizes parsed with `str::parse::<f64>`; the book is two `BTreeMap<f64 key, f64>`
//!   (ordered by `f64::total_cmp`) in a `HashMap<String, _>` by symbol, bounded to the same depth
//!   as the engine's (the farthest level goes at the bound);
//! - Binance's update-id rules (a diff at or below the last id is ignored, one that starts past
//!   the next id is a gap), the crossed-book check, six candle timeframes in `VecDeque`s of
//!   512 bars, and the alerts as a `Vec` scanned on every trade with the engine's semantics
//!   (repeating price alerts, re-armed 0.1% back past their level).
//!
//! Rationale for the tagged enum: a client on a combined stream does not know a message's kind
//! before parsing it, and this is serde's idiomatic way to dispatch on `"e"`. The cost of parsing
//! alone, with the kind known, is measured separately by `rampart-bench parsers`.
//!
//! Why the books compare exactly: a price or size of at most 8 decimals below 2⁵³ × 10⁻⁸ is an
//! integer that `f64` holds exactly; dividing it by 10⁸ rounds once, to the same `f64` as parsing
//! the decimal text, so `Price(n)` → `n as f64 / 1e8` equals the baseline's parsed value.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::time::Instant;

use hdrhistogram::Histogram;
use rampart_engine::alert::{AlertSpec, Condition, Cross};
use rampart_engine::feed::binance::{BinanceBookSync, BinanceDecoder, Message, SyncOutcome, TimeUnit};
use rampart_engine::{sim, BookId, Market, Price, Timeframe};
use rampart_testkit::alloc;
use serde::Deserialize;

use super::histogram;

/// The one symbol of the stream.
const SYMBOL: &str = "BTCUSDT";
/// Where the touch starts, cents.
const MID_CENTS: i64 = 6_400_000;
/// Levels farther than this from the touch, cents, are removed by the stream.
const BAND_CENTS: i64 = 400;
/// Book depth per side, both paths (never reached by the stream: at most `BAND_CENTS` levels).
const DEPTH_LEVELS_MAX: usize = 1_000;
/// Bars per candle timeframe, both paths.
const BARS_MAX: usize = 512;
/// Diffs and levels the engine's sync machine may buffer (the service's bounds).
const SYNC_BUFFER_EVENTS_MAX: usize = 512;
const SYNC_BUFFER_LEVELS_MAX: usize = 8_192;
/// Alerts held on the book: above and below the touch at these distances (cents, plus half a
/// cent so no trade lands exactly on a level or a re-arm level).
const ALERT_OFFSETS_CENTS: [i64; 4] = [3, 8, 20, 60];
/// First event time of the stream, Unix ms.
const T0_MS: i64 = 1_795_183_387_000;
/// Seed of the stream.
const SEED: u64 = 20_261_121;

/// One row of the comparison: per-message latency of both paths, ns.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareRow {
    /// Which messages.
    pub name: String,
    /// Messages timed per path.
    pub samples: u64,
    /// Engine path: median.
    pub engine_p50_ns: u64,
    /// Engine path: 99th percentile.
    pub engine_p99_ns: u64,
    /// Engine path: 99.9th percentile.
    pub engine_p999_ns: u64,
    /// Engine path: largest.
    pub engine_max_ns: u64,
    /// Baseline: median.
    pub baseline_p50_ns: u64,
    /// Baseline: 99th percentile.
    pub baseline_p99_ns: u64,
    /// Baseline: 99.9th percentile.
    pub baseline_p999_ns: u64,
    /// Baseline: largest.
    pub baseline_max_ns: u64,
    /// `baseline_p50_ns / engine_p50_ns`.
    pub ratio_p50: f64,
}

impl CompareRow {
    fn new(name: String, engine: &Histogram<u64>, baseline: &Histogram<u64>) -> CompareRow {
        let (e50, b50) = (engine.value_at_quantile(0.5), baseline.value_at_quantile(0.5));
        CompareRow {
            name,
            samples: engine.len(),
            engine_p50_ns: e50,
            engine_p99_ns: engine.value_at_quantile(0.99),
            engine_p999_ns: engine.value_at_quantile(0.999),
            engine_max_ns: engine.max(),
            baseline_p50_ns: b50,
            baseline_p99_ns: baseline.value_at_quantile(0.99),
            baseline_p999_ns: baseline.value_at_quantile(0.999),
            baseline_max_ns: baseline.max(),
            ratio_p50: if e50 > 0 { b50 as f64 / e50 as f64 } else { 0.0 },
        }
    }
}

/// What [`compare`] measured: every diff and trade of every run, per path.
#[derive(Clone, Debug, PartialEq)]
pub struct BookCompare {
    /// Messages (diffs and trades) per run.
    pub frames: usize,
    /// Runs.
    pub runs: usize,
    /// Engine path, all messages of all runs: median per message, ns.
    pub engine_p50_ns: u64,
    /// Engine path: 99th percentile, ns.
    pub engine_p99_ns: u64,
    /// Baseline: median per message, ns.
    pub baseline_p50_ns: u64,
    /// Baseline: 99th percentile, ns.
    pub baseline_p99_ns: u64,
    /// `baseline_p50_ns / engine_p50_ns`.
    pub ratio_p50: f64,
    /// Allocations per message of the engine path, when the counting allocator is installed.
    pub engine_allocs_per_msg: Option<f64>,
    /// Allocations per message of the baseline, when the counting allocator is installed.
    pub baseline_allocs_per_msg: Option<f64>,
    /// Rows: all messages, diffs only, trades only, then all messages of each run.
    pub rows: Vec<CompareRow>,
    /// Bid and ask levels of the final book (equal on both paths).
    pub book_levels: (usize, usize),
    /// Alert firings per run (equal on both paths).
    pub firings: u64,
    /// Mean size of a depth diff and of a trade message, bytes.
    pub bytes_mean: (f64, f64),
}

impl BookCompare {
    /// The result as Markdown: a line on the workload, then one table row per [`CompareRow`].
    pub fn table(&self) -> String {
        let allocs = |a: Option<f64>| a.map_or_else(|| "-".to_owned(), |a| format!("{a:.2}"));
        let mut s = format!(
            "{} messages per run ({} runs; depth diffs {:.0} B, trades {:.0} B on average), final book {} bids / {} \
             asks, {} alert firings per run; books, last price, newest candles and firings identical on both paths \
             after every run. Allocations per message: engine {}, baseline {}.\n\n",
            self.frames,
            self.runs,
            self.bytes_mean.0,
            self.bytes_mean.1,
            self.book_levels.0,
            self.book_levels.1,
            self.firings,
            allocs(self.engine_allocs_per_msg),
            allocs(self.baseline_allocs_per_msg),
        );
        s.push_str(
            "| messages | samples | engine p50 ns | engine p99 ns | engine p99.9 ns | engine max ns \
             | baseline p50 ns | baseline p99 ns | baseline p99.9 ns | baseline max ns | p50 baseline / engine |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |",
                r.name,
                r.samples,
                r.engine_p50_ns,
                r.engine_p99_ns,
                r.engine_p999_ns,
                r.engine_max_ns,
                r.baseline_p50_ns,
                r.baseline_p99_ns,
                r.baseline_p999_ns,
                r.baseline_max_ns,
                r.ratio_p50
            );
        }
        s
    }
}

/// Runs both paths over the same `frames` messages (after the same snapshot), `runs` times each
/// from a fresh state, alternating which goes first, after an untimed warm-up over a tenth of the
/// messages (where allocations are counted).
///
/// Panics if either path refuses a message or if the two end a run with different books, last
/// prices, newest candles or firing counts.
pub fn compare(frames: usize, runs: usize) -> BookCompare {
    let runs = runs.max(1);
    let stream = Stream::generate(frames.max(1), SEED);
    let warm = &stream.messages[..stream.messages.len().div_ceil(10)];
    let (_, engine_allocs) = {
        let mut e = EnginePath::new(&stream);
        alloc::count(|| warm.iter().for_each(|m| e.on_frame(&m.bytes)))
    };
    let (_, baseline_allocs) = {
        let mut b = BaselinePath::new(&stream);
        alloc::count(|| warm.iter().for_each(|m| b.on_frame(&m.bytes)))
    };
    let per_msg = |n: Option<u64>| n.map(|n| n as f64 / warm.len() as f64);
    let mean_bytes = |trade: bool| {
        let (n, bytes) = stream
            .messages
            .iter()
            .filter(|m| m.trade == trade)
            .fold((0usize, 0usize), |(n, b), m| (n + 1, b + m.bytes.len()));
        bytes as f64 / n.max(1) as f64
    };

    let mut engine_kind = [histogram(), histogram()];
    let mut baseline_kind = [histogram(), histogram()];
    let mut per_run = Vec::with_capacity(runs);
    let mut end = None;
    for run in 0..runs {
        let mut e_run = histogram();
        let mut b_run = histogram();
        let mut e = EnginePath::new(&stream);
        let mut b = BaselinePath::new(&stream);
        let mut engine_pass = || time_pass(&stream, |f| e.on_frame(f), &mut engine_kind, &mut e_run);
        let mut baseline_pass = || time_pass(&stream, |f| b.on_frame(f), &mut baseline_kind, &mut b_run);
        if run % 2 == 0 {
            engine_pass();
            baseline_pass();
        } else {
            baseline_pass();
            engine_pass();
        }
        end = Some(check_same(&e, &b, run));
        per_run.push(CompareRow::new(format!("all, run {}", run + 1), &e_run, &b_run));
    }
    let (book_levels, firings) = end.unwrap_or_default();
    let mut engine_all = histogram();
    let mut baseline_all = histogram();
    for h in &engine_kind {
        let _ = engine_all.add(h);
    }
    for h in &baseline_kind {
        let _ = baseline_all.add(h);
    }
    let all = CompareRow::new(format!("all (runs 1–{runs})"), &engine_all, &baseline_all);
    let mut rows = vec![
        all.clone(),
        CompareRow::new("depth diffs".to_owned(), &engine_kind[0], &baseline_kind[0]),
        CompareRow::new("trades".to_owned(), &engine_kind[1], &baseline_kind[1]),
    ];
    rows.extend(per_run);
    BookCompare {
        frames: stream.messages.len(),
        runs,
        engine_p50_ns: all.engine_p50_ns,
        engine_p99_ns: all.engine_p99_ns,
        baseline_p50_ns: all.baseline_p50_ns,
        baseline_p99_ns: all.baseline_p99_ns,
        ratio_p50: all.ratio_p50,
        engine_allocs_per_msg: per_msg(engine_allocs),
        baseline_allocs_per_msg: per_msg(baseline_allocs),
        rows,
        book_levels,
        firings,
        bytes_mean: (mean_bytes(false), mean_bytes(true)),
    }
}

/// Times `on_frame` on every message, into the histogram of its kind and the run's.
fn time_pass(
    stream: &Stream,
    mut on_frame: impl FnMut(&[u8]),
    by_kind: &mut [Histogram<u64>; 2],
    run: &mut Histogram<u64>,
) {
    for m in &stream.messages {
        let t0 = Instant::now();
        on_frame(std::hint::black_box(&m.bytes));
        let ns = t0.elapsed().as_nanos() as u64;
        let _ = by_kind[usize::from(m.trade)].record(ns);
        let _ = run.record(ns);
    }
}

/// Asserts both paths hold the same state; returns the book's level counts and the firings.
fn check_same(e: &EnginePath, b: &BaselinePath, run: usize) -> ((usize, usize), u64) {
    let state = e.market.get(e.book).expect("the engine owns its book");
    let naive = b.markets.get(SYMBOL).expect("the baseline holds its book");
    let fixed = |n: i64| n as f64 / 1e8;
    let engine_side = |levels: &[rampart_engine::Level]| -> Vec<(f64, f64)> {
        levels.iter().map(|l| (fixed(l.price.0), fixed(l.qty.0 as i64))).collect()
    };
    let bids: Vec<(f64, f64)> = naive.book.bids.iter().rev().map(|(p, q)| (p.0, *q)).collect();
    let asks: Vec<(f64, f64)> = naive.book.asks.iter().map(|(p, q)| (p.0, *q)).collect();
    assert!(e.sync.is_live(), "run {run}: the engine's book is not live");
    assert_eq!(engine_side(state.book.bids()), bids, "run {run}: bids differ");
    assert_eq!(engine_side(state.book.asks()), asks, "run {run}: asks differ");
    assert_eq!(fixed(state.last_price.0), naive.last_price, "run {run}: last price differs");
    assert_eq!(state.last_trade_ms, naive.last_trade_ms, "run {run}: last trade time differs");
    for (i, tf) in Timeframe::ALL.into_iter().enumerate() {
        let engine_bar = state
            .candles
            .ring(tf)
            .newest()
            .map(|c| (c.open_ms, fixed(c.open.0), fixed(c.high.0), fixed(c.low.0), fixed(c.close.0)));
        let naive_bar = naive.candles[i].back().map(|c| (c.open_ms, c.open, c.high, c.low, c.close));
        assert_eq!(engine_bar, naive_bar, "run {run}: newest {tf:?} candle differs");
    }
    assert_eq!(e.firings, naive.firing_count, "run {run}: alert firings differ");
    assert_eq!((naive.book.gaps, naive.book.crossed), (0, 0), "run {run}: the baseline saw gaps or a crossed book");
    assert!(!bids.is_empty() && !asks.is_empty(), "run {run}: empty book");
    ((bids.len(), asks.len()), e.firings)
}

// ---------------------------------------------------------------------------------------------
// The stream.

/// One message of the stream.
struct Msg {
    bytes: Vec<u8>,
    /// A trade (else a depth diff).
    trade: bool,
}

/// The REST snapshot, the timed messages, and the alert levels as text.
struct Stream {
    snapshot: Vec<u8>,
    messages: Vec<Msg>,
    /// `(id, level text, above)`.
    alerts: Vec<(u64, String, bool)>,
}

fn price_text(cents: i64) -> String {
    format!("{}.{:02}000000", cents / 100, cents % 100)
}

fn qty_text(units: u64) -> String {
    format!("{}.{:08}", units / 100_000_000, units % 100_000_000)
}

fn levels_json(out: &mut String, levels: &[(i64, u64)]) {
    out.push('[');
    for (i, &(cents, units)) in levels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, r#"["{}","{}"]"#, price_text(cents), qty_text(units));
    }
    out.push(']');
}

impl Stream {
    fn generate(frames: usize, seed: u64) -> Stream {
        let mut rng = sim::Rng::new(seed);
        let mut bids: BTreeMap<i64, u64> = BTreeMap::new();
        let mut asks: BTreeMap<i64, u64> = BTreeMap::new();
        let size = |rng: &mut sim::Rng| 10_000 + rng.below(500_000_000);
        for off in 1..=BAND_CENTS {
            if rng.chance(0.8) {
                bids.insert(MID_CENTS - off, size(&mut rng));
            }
            if rng.chance(0.8) {
                asks.insert(MID_CENTS + off, size(&mut rng));
            }
        }
        let mut update_id: u64 = 71_823_645_012;
        let mut snapshot = format!(r#"{{"lastUpdateId":{update_id},"bids":"#);
        levels_json(&mut snapshot, &bids.iter().rev().map(|(&p, &q)| (p, q)).collect::<Vec<_>>());
        snapshot.push_str(r#","asks":"#);
        levels_json(&mut snapshot, &asks.iter().map(|(&p, &q)| (p, q)).collect::<Vec<_>>());
        snapshot.push('}');

        let mut mid = MID_CENTS;
        let mut t_ms = T0_MS;
        let mut trade_id: u64 = 3_912_000_000;
        let mut messages = Vec::with_capacity(frames);
        let (mut b, mut a) = (Vec::new(), Vec::new());
        for _ in 0..frames {
            t_ms += 1 + rng.below(10) as i64;
            let mut text = String::with_capacity(256);
            if rng.chance(0.5) {
                trade_id += 1;
                let sell = rng.chance(0.5);
                let cents = if sell {
                    bids.keys().next_back().copied().unwrap_or(mid - 1)
                } else {
                    asks.keys().next().copied().unwrap_or(mid + 1)
                };
                let _ = write!(
                    text,
                    r#"{{"stream":"btcusdt@trade","data":{{"e":"trade","E":{t_ms},"s":"{SYMBOL}","t":{trade_id},"p":"{}","q":"{}","T":{t_ms},"m":{sell},"M":true}}}}"#,
                    price_text(cents),
                    qty_text(size(&mut rng)),
                );
                messages.push(Msg { bytes: text.into_bytes(), trade: true });
                continue;
            }
            b.clear();
            a.clear();
            if rng.chance(0.3) {
                mid += rng.below(11) as i64 - 5;
            }
            // Levels that would cross the new touch, or left the band, go.
            let gone_bids: Vec<i64> = bids.keys().copied().filter(|&p| p >= mid || p < mid - BAND_CENTS).collect();
            let gone_asks: Vec<i64> = asks.keys().copied().filter(|&p| p <= mid || p > mid + BAND_CENTS).collect();
            for p in gone_bids {
                bids.remove(&p);
                b.push((p, 0));
            }
            for p in gone_asks {
                asks.remove(&p);
                a.push((p, 0));
            }
            for _ in 0..1 + rng.below(10) {
                let off = (1 + (rng.normal().abs() * 15.0) as i64).min(BAND_CENTS);
                let units = if rng.chance(0.25) { 0 } else { size(&mut rng) };
                let (side, out, cents) =
                    if rng.chance(0.5) { (&mut bids, &mut b, mid - off) } else { (&mut asks, &mut a, mid + off) };
                if units == 0 {
                    side.remove(&cents);
                } else {
                    side.insert(cents, units);
                }
                out.push((cents, units));
            }
            let first = update_id + 1;
            update_id = first + rng.below(3);
            let _ = write!(
                text,
                r#"{{"stream":"btcusdt@depth@100ms","data":{{"e":"depthUpdate","E":{t_ms},"s":"{SYMBOL}","U":{first},"u":{update_id},"b":"#
            );
            levels_json(&mut text, &b);
            text.push_str(r#","a":"#);
            levels_json(&mut text, &a);
            text.push_str("}}");
            messages.push(Msg { bytes: text.into_bytes(), trade: false });
        }
        let mut alerts = Vec::new();
        for (k, off) in ALERT_OFFSETS_CENTS.into_iter().enumerate() {
            let k = k as u64 * 2;
            alerts.push((k + 1, format!("{}.{:02}5", (MID_CENTS + off) / 100, (MID_CENTS + off) % 100), true));
            alerts.push((k + 2, format!("{}.{:02}5", (MID_CENTS - off - 1) / 100, (MID_CENTS - off - 1) % 100), false));
        }
        Stream { snapshot: snapshot.into_bytes(), messages, alerts }
    }
}

// ---------------------------------------------------------------------------------------------
// The engine path.

/// What the live session does per Binance message, minus the I/O.
struct EnginePath {
    decoder: BinanceDecoder,
    sync: BinanceBookSync,
    market: Market,
    /// Books by symbol bytes, as the session finds them.
    index: HashMap<Vec<u8>, BookId>,
    book: BookId,
    firings: u64,
}

impl EnginePath {
    fn new(stream: &Stream) -> EnginePath {
        let book = BookId(0);
        let mut p = EnginePath {
            decoder: BinanceDecoder::new(TimeUnit::Millisecond, DEPTH_LEVELS_MAX),
            sync: BinanceBookSync::new(SYNC_BUFFER_EVENTS_MAX, SYNC_BUFFER_LEVELS_MAX),
            market: Market::new(1, &[book], DEPTH_LEVELS_MAX, BARS_MAX),
            index: HashMap::from([(SYMBOL.as_bytes().to_vec(), book)]),
            book,
            firings: 0,
        };
        for (id, level, above) in &stream.alerts {
            let level = Price::parse(level.as_bytes()).expect("alert levels are decimals");
            let cross = if *above { Cross::Above } else { Cross::Below };
            p.market.insert_alert(
                book,
                AlertSpec { id: *id, condition: Condition::Price { cross, level }, repeat: true, cooldown_s: 0 },
            );
        }
        p.on_frame(&stream.snapshot);
        p
    }

    fn on_frame(&mut self, frame: &[u8]) {
        let EnginePath { decoder, sync, market, index, firings, .. } = self;
        let decoded = decoder.decode(frame).expect("the engine decodes every frame of the stream");
        match decoded.message {
            Message::Depth(d) => {
                let id = *index.get(d.symbol).expect("known symbol");
                let state = market.get_mut(id).expect("owned book");
                let outcome = sync.on_diff(&d, &mut state.book);
                assert_eq!(outcome, SyncOutcome::Applied, "engine diff");
            }
            Message::Trade(t) => {
                let id = *index.get(t.symbol).expect("known symbol");
                market.apply(&t.tick(id));
                *firings += market.firings().len() as u64;
                market.clear_firings();
            }
            Message::Snapshot(s) => {
                let id = *index.get(SYMBOL.as_bytes()).expect("known symbol");
                let state = market.get_mut(id).expect("owned book");
                let outcome = sync.on_snapshot(&s, &mut state.book);
                assert!(matches!(outcome, SyncOutcome::Synced { .. }), "engine snapshot: {outcome:?}");
            }
            other => panic!("unexpected message {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The baseline.

#[derive(Deserialize)]
struct Combined {
    /// Read and owned like the rest, though only `data` is used.
    #[allow(dead_code)]
    stream: String,
    data: Event,
}

#[derive(Deserialize)]
#[serde(tag = "e")]
enum Event {
    #[serde(rename = "depthUpdate")]
    Depth(DepthUpdate),
    #[serde(rename = "trade")]
    Trade(TradeEvent),
}

#[derive(Deserialize)]
struct DepthUpdate {
    /// Owned like the rest; the baseline keeps no event time.
    #[allow(dead_code)]
    #[serde(rename = "E")]
    event_time: i64,
    s: String,
    #[serde(rename = "U")]
    first_update_id: u64,
    #[serde(rename = "u")]
    final_update_id: u64,
    b: Vec<(String, String)>,
    a: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct TradeEvent {
    /// Owned like the rest; candles use the trade time.
    #[allow(dead_code)]
    #[serde(rename = "E")]
    event_time: i64,
    s: String,
    /// Owned like the rest; the baseline keeps no trade list.
    #[allow(dead_code)]
    t: u64,
    p: String,
    q: String,
    #[serde(rename = "T")]
    trade_time: i64,
    /// Owned like the rest; no alert here depends on the side.
    #[allow(dead_code)]
    m: bool,
}

#[derive(Deserialize)]
struct RestSnapshot {
    #[serde(rename = "lastUpdateId")]
    last_update_id: u64,
    bids: Vec<(String, String)>,
    asks: Vec<(String, String)>,
}

/// An `f64` price ordered by `total_cmp`, as a `BTreeMap` key.
#[derive(Clone, Copy, Debug)]
struct Px(f64);

impl PartialEq for Px {
    fn eq(&self, other: &Px) -> bool {
        self.0.total_cmp(&other.0) == Ordering::Equal
    }
}
impl Eq for Px {}
impl PartialOrd for Px {
    fn partial_cmp(&self, other: &Px) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Px {
    fn cmp(&self, other: &Px) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The baseline's book: sorted maps, Binance's update-id rules.
#[derive(Default)]
struct NaiveBook {
    bids: BTreeMap<Px, f64>,
    asks: BTreeMap<Px, f64>,
    last_update_id: Option<u64>,
    gaps: u64,
    crossed: u64,
}

impl NaiveBook {
    fn set(&mut self, bid: bool, price: &str, qty: &str) -> Result<(), &'static str> {
        let p: f64 = price.parse().map_err(|_| "price is not a number")?;
        let q: f64 = qty.parse().map_err(|_| "quantity is not a number")?;
        if !(p > 0.0 && q >= 0.0 && p.is_finite() && q.is_finite()) {
            return Err("price or quantity out of range");
        }
        let side = if bid { &mut self.bids } else { &mut self.asks };
        if q == 0.0 {
            side.remove(&Px(p));
            return Ok(());
        }
        side.insert(Px(p), q);
        if side.len() > DEPTH_LEVELS_MAX {
            // The farthest level goes, as in the engine's bounded book.
            if bid {
                side.pop_first();
            } else {
                side.pop_last();
            }
        }
        Ok(())
    }

    fn is_crossed(&self) -> bool {
        match (self.bids.last_key_value(), self.asks.first_key_value()) {
            (Some((b, _)), Some((a, _))) => b.0 >= a.0,
            _ => false,
        }
    }

    fn load(&mut self, s: &RestSnapshot) -> Result<(), &'static str> {
        self.bids.clear();
        self.asks.clear();
        for (p, q) in &s.bids {
            self.set(true, p, q)?;
        }
        for (p, q) in &s.asks {
            self.set(false, p, q)?;
        }
        self.last_update_id = Some(s.last_update_id);
        Ok(())
    }

    fn on_diff(&mut self, d: &DepthUpdate) -> Result<(), &'static str> {
        let Some(last) = self.last_update_id else { return Err("no snapshot") };
        if d.final_update_id <= last {
            return Ok(());
        }
        if d.first_update_id > last + 1 {
            // A real client would drop the book and fetch a snapshot.
            self.gaps += 1;
        }
        for (p, q) in &d.b {
            self.set(true, p, q)?;
        }
        for (p, q) in &d.a {
            self.set(false, p, q)?;
        }
        self.last_update_id = Some(d.final_update_id);
        if self.is_crossed() {
            self.crossed += 1;
        }
        Ok(())
    }
}

/// One bar of the baseline's candles.
#[derive(Clone, Copy, Debug)]
struct NaiveCandle {
    open_ms: i64,
    open: f64,
    high: f64,
    low: f64,
    close: f64,
}

/// A repeating price alert.
struct NaiveAlert {
    id: u64,
    level: f64,
    above: bool,
    armed: bool,
    rearm: f64,
}

/// The baseline's state of one symbol.
struct NaiveMarket {
    book: NaiveBook,
    last_price: f64,
    last_trade_ms: i64,
    candles: Vec<VecDeque<NaiveCandle>>,
    alerts: Vec<NaiveAlert>,
    /// `(alert id, price, time)` of the last trade's firings.
    fired: Vec<(u64, f64, i64)>,
    firing_count: u64,
}

impl NaiveMarket {
    fn on_trade(&mut self, t: &TradeEvent) -> Result<(), &'static str> {
        let p: f64 = t.p.parse().map_err(|_| "price is not a number")?;
        let _q: f64 = t.q.parse().map_err(|_| "quantity is not a number")?;
        if !(p > 0.0 && p.is_finite()) {
            return Err("price out of range");
        }
        self.last_price = p;
        self.last_trade_ms = t.trade_time;
        for (ring, tf) in self.candles.iter_mut().zip(Timeframe::ALL) {
            let bucket = tf.bucket_start(t.trade_time);
            match ring.back_mut() {
                Some(c) if c.open_ms == bucket => {
                    c.high = c.high.max(p);
                    c.low = c.low.min(p);
                    c.close = p;
                }
                Some(c) if c.open_ms > bucket => {}
                _ => {
                    if ring.len() == BARS_MAX {
                        ring.pop_front();
                    }
                    ring.push_back(NaiveCandle { open_ms: bucket, open: p, high: p, low: p, close: p });
                }
            }
        }
        self.fired.clear();
        for a in &mut self.alerts {
            if !a.armed && ((a.above && p <= a.rearm) || (!a.above && p >= a.rearm)) {
                a.armed = true;
            }
            if a.armed && ((a.above && p >= a.level) || (!a.above && p <= a.level)) {
                a.armed = false;
                self.fired.push((a.id, p, t.trade_time));
            }
        }
        self.firing_count += self.fired.len() as u64;
        Ok(())
    }
}

/// The baseline path: parse, find the symbol, apply.
struct BaselinePath {
    markets: HashMap<String, NaiveMarket>,
}

impl BaselinePath {
    fn new(stream: &Stream) -> BaselinePath {
        let alerts: Vec<NaiveAlert> = stream
            .alerts
            .iter()
            .map(|(id, level, above)| {
                let level: f64 = level.parse().expect("alert levels are decimals");
                let rearm = if *above { level * 0.999 } else { level * 1.001 };
                NaiveAlert { id: *id, level, above: *above, armed: true, rearm }
            })
            .collect();
        let mut market = NaiveMarket {
            book: NaiveBook::default(),
            last_price: 0.0,
            last_trade_ms: 0,
            candles: (0..Timeframe::ALL.len()).map(|_| VecDeque::with_capacity(BARS_MAX)).collect(),
            fired: Vec::with_capacity(alerts.len()),
            alerts,
            firing_count: 0,
        };
        let snapshot: RestSnapshot = serde_json::from_slice(&stream.snapshot).expect("the snapshot parses");
        market.book.load(&snapshot).expect("the snapshot loads");
        BaselinePath { markets: HashMap::from([(SYMBOL.to_owned(), market)]) }
    }

    fn on_frame(&mut self, frame: &[u8]) {
        self.try_frame(frame).expect("the baseline takes every frame of the stream");
    }

    fn try_frame(&mut self, frame: &[u8]) -> Result<(), &'static str> {
        let msg: Combined = serde_json::from_slice(frame).map_err(|_| "not a combined-stream event")?;
        match msg.data {
            Event::Depth(d) => self.markets.get_mut(&d.s).ok_or("unknown symbol")?.book.on_diff(&d),
            Event::Trade(t) => self.markets.get_mut(&t.s).ok_or("unknown symbol")?.on_trade(&t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_deterministic_and_well_formed() {
        let a = Stream::generate(200, 1);
        let b = Stream::generate(200, 1);
        assert!(a.messages.iter().zip(&b.messages).all(|(x, y)| x.bytes == y.bytes));
        assert!(a.messages.iter().any(|m| m.trade) && a.messages.iter().any(|m| !m.trade));
        for m in &a.messages {
            assert!(serde_json::from_slice::<serde_json::Value>(&m.bytes).is_ok());
        }
        assert_eq!(a.alerts.len(), 2 * ALERT_OFFSETS_CENTS.len());
    }

    #[test]
    fn price_keys_order_like_numbers() {
        let mut m = BTreeMap::new();
        for p in [64000.5, 63999.99, 64000.01] {
            m.insert(Px(p), 1.0);
        }
        assert_eq!(m.keys().map(|k| k.0).collect::<Vec<_>>(), [63999.99, 64000.01, 64000.5]);
    }
}
