//! The market the venue simulator serves, and who is subscribed to what.
//!
//! One [`State`] behind one mutex holds everything: the simulated market (`engine::sim::Sim`
//! stepping every pair), per (venue, pair) the true book, its sequence numbers and its candles
//! extended by its own trades, the WebSocket connections with their bounded outbound queues, and
//! the subscription table. The market task steps the simulation under the lock and fans each
//! message out with `try_send`; WebSocket handlers subscribe under the same lock and queue their
//! ack and snapshot on the same queue, so a subscriber always sees ack, snapshot, then updates,
//! and a REST snapshot (Binance `lastUpdateId`) always matches the stream. Nothing awaits while
//! the lock is held.
//!
//! Bounds: each connection's outbound queue holds `Config::queue_messages_max` messages; when a
//! message does not fit, the connection is a slow consumer: it is closed (OKX close code 4005
//! "Buffer is full, cannot write data", the others 1008) and counted, and nothing more is queued
//! for it. Books hold at most [`BOOK_LEVELS_MAX`] levels per side, candle rings [`BARS_MAX`]
//! bars, the recent-trade list of a Bitget book [`RECENT_TRADES_MAX`] trades (oldest dropped).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rampart_engine::book::{Book, Level, Side};
use rampart_engine::candle::{Candle, CandleSet, Timeframe};
use rampart_engine::fixed::SCALE;
use rampart_engine::instrument::{BookId, Registry};
use rampart_engine::market::{Tick, TickKind};
use rampart_engine::sim::{self, PairSpec, Rng, Sim, SimConfig};
use rampart_engine::sim_perp::PerpId;
use rampart_engine::Venue;
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Utf8Bytes;

use super::perp::Perps;
use super::text::decimals_of;
use super::Config;

/// Bars per timeframe ring: the history has at least 500 completed bars on every timeframe.
pub(crate) const BARS_MAX: usize = 512;
/// Levels per side of a true book. The simulated books hold 250; the bound leaves room for an
/// injected crossing level. At the bound the farthest level is dropped (`engine::book`).
pub(crate) const BOOK_LEVELS_MAX: usize = 512;
/// Pairs stepped per market round at most; the others stay due for the next round.
pub(crate) const PAIRS_PER_ROUND_MAX: usize = 256;
/// Trades a Bitget book remembers for the `trade` channel's first (snapshot) push; at the bound
/// the oldest is dropped.
pub(crate) const RECENT_TRADES_MAX: usize = 50;
/// `/sim/trade` accepts prices within this factor of the book's mid, either way.
pub(crate) const INJECTED_PRICE_FACTOR_MAX: i64 = 100;
/// Bybit `orderbook.1` re-sends its snapshot with the same `u` after this long without a change.
pub(crate) const BYBIT_DEPTH1_REPEAT_MS: i64 = 3_000;
/// Period of the slow timers: Binance `<sym>@depth` (without `@100ms`) aggregates diffs over
/// it, OKX heartbeats are checked and OKX and Bitget candle channels push at most once per it.
pub(crate) const SLOW_TIMERS_MS: i64 = 1_000;

/// The kinds of injected faults, as `/sim/fault` names them and `/sim/stats` counts them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FaultKind {
    /// A book message skips update ids or breaks the sequence chain.
    Gap,
    /// A Binance REST depth snapshot older than the stream.
    StaleSnapshot,
    /// An OKX or Bitget update with a wrong checksum.
    Checksum,
    /// A Bybit `u=1` snapshot or an OKX `seqId < prevSeqId` reset.
    Reset,
    /// Every WebSocket connection of the venue dropped.
    Disconnect,
    /// An OKX `notice` 64008 or a Binance `serverShutdown`.
    Notice,
    /// An update that crosses the book (then one that uncrosses it).
    Crossed,
    /// A pair delisted.
    Delist,
    /// An OKX idle heartbeat pushed on request.
    Heartbeat,
    /// The venue's connections carrying perpetual data dropped.
    PerpDisconnect,
    /// A perpetual's mark, OI and funding stopped.
    PerpStale,
}

impl FaultKind {
    /// Every kind, in the order of [`FaultKind::index`].
    pub(crate) const ALL: [FaultKind; 11] = [
        FaultKind::Gap,
        FaultKind::StaleSnapshot,
        FaultKind::Checksum,
        FaultKind::Reset,
        FaultKind::Disconnect,
        FaultKind::Notice,
        FaultKind::Crossed,
        FaultKind::Delist,
        FaultKind::Heartbeat,
        FaultKind::PerpDisconnect,
        FaultKind::PerpStale,
    ];

    /// The name `/sim/fault` takes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FaultKind::Gap => "gap",
            FaultKind::StaleSnapshot => "stale_snapshot",
            FaultKind::Checksum => "checksum",
            FaultKind::Reset => "reset",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Notice => "notice",
            FaultKind::Crossed => "crossed",
            FaultKind::Delist => "delist",
            FaultKind::Heartbeat => "heartbeat",
            FaultKind::PerpDisconnect => "perp_disconnect",
            FaultKind::PerpStale => "perp_stale",
        }
    }

    /// Parses a `/sim/fault` kind.
    pub(crate) fn parse(s: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters of one venue, readable without the state lock.
#[derive(Default)]
pub(crate) struct VenueStats {
    /// WebSocket connections open now.
    pub connections_open: AtomicU64,
    /// WebSocket connections accepted since start.
    pub connections_accepted: AtomicU64,
    /// Subscriptions held now (one per connection and topic).
    pub subscriptions: AtomicU64,
    /// Book messages produced (one per book and market step; per view on Bybit).
    pub book_messages: AtomicU64,
    /// Trades produced.
    pub trades: AtomicU64,
    /// Messages queued to connections.
    pub messages_sent: AtomicU64,
    /// Connections closed because their outbound queue was full.
    pub slow_consumer_closes: AtomicU64,
    /// Faults injected, by [`FaultKind::index`].
    pub faults: [AtomicU64; 11],
    /// Perpetual messages produced (one per message and topic with a subscriber).
    pub perp_messages: AtomicU64,
    /// Liquidations sent on the wire (after Binance's one a second and OKX's omissions).
    pub liquidations: AtomicU64,
    /// Liquidations past a Bybit batch's bound, not sent.
    pub liquidations_dropped: AtomicU64,
    /// REST requests by route.
    pub rest: Mutex<BTreeMap<&'static str, u64>>,
}

/// Counters of every venue.
#[derive(Default)]
pub(crate) struct Stats {
    venues: [VenueStats; Venue::COUNT],
}

impl Stats {
    /// The counters of one venue.
    pub(crate) fn venue(&self, v: Venue) -> &VenueStats {
        &self.venues[v.index()]
    }

    /// Counts an injected fault.
    pub(crate) fn fault(&self, v: Venue, kind: FaultKind) {
        self.venue(v).faults[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a REST request on `route`.
    pub(crate) fn rest(&self, v: Venue, route: &'static str) {
        let mut map = self.venue(v).rest.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry(route).or_insert(0) += 1;
    }

    /// The counters as the JSON object `/sim/stats` answers.
    pub(crate) fn to_json(&self, venues: &[Venue]) -> String {
        let mut out = String::from("{");
        for (i, &v) in venues.iter().enumerate() {
            let s = self.venue(v);
            let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "\"{v}\":{{\"connections_open\":{},\"connections_accepted\":{},\"subscriptions\":{},\
                 \"book_messages\":{},\"trades\":{},\"messages_sent\":{},\"slow_consumer_closes\":{},\
                 \"perp_messages\":{},\"liquidations\":{},\"liquidations_dropped\":{},\"faults\":{{",
                get(&s.connections_open),
                get(&s.connections_accepted),
                get(&s.subscriptions),
                get(&s.book_messages),
                get(&s.trades),
                get(&s.messages_sent),
                get(&s.slow_consumer_closes),
                get(&s.perp_messages),
                get(&s.liquidations),
                get(&s.liquidations_dropped),
            ));
            for (k, kind) in FaultKind::ALL.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(&format!("\"{}\":{}", kind.as_str(), get(&s.faults[kind.index()])));
            }
            out.push_str("},\"rest_requests\":{");
            let rest = s.rest.lock().unwrap_or_else(|e| e.into_inner());
            for (k, (route, n)) in rest.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(&format!("\"{route}\":{n}"));
            }
            out.push_str("}}");
        }
        out.push('}');
        out
    }
}

/// How a connection is ended from outside its task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kill {
    /// Send a close frame with this code and reason, then end.
    Close(u16, String),
    /// Drop the TCP connection without a close frame (a simulated network failure).
    Drop,
}

/// The outside's handle on a connection task: a kill request and its wake-up.
#[derive(Default)]
pub(crate) struct ConnCtl {
    kill: Mutex<Option<Kill>>,
    /// Woken once when a kill is requested.
    pub notify: Notify,
    dead: AtomicBool,
}

impl ConnCtl {
    /// Asks the connection to end; the first request wins.
    pub(crate) fn kill(&self, k: Kill) {
        if !self.dead.swap(true, Ordering::AcqRel) {
            *self.kill.lock().unwrap_or_else(|e| e.into_inner()) = Some(k);
            self.notify.notify_one();
        }
    }

    /// The kill requested, if any.
    pub(crate) fn take(&self) -> Option<Kill> {
        self.kill.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// True once a kill was requested: nothing more is queued.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }
}

/// Which endpoint a connection came in on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Endpoint {
    /// Binance `/ws/...` (raw payloads unless `SET_PROPERTY combined`).
    BinanceRaw,
    /// Binance `/stream?streams=` (combined wrapper).
    BinanceCombined,
    /// Binance USDⓈ-M `/market/ws/...` (raw payloads unless `SET_PROPERTY combined`).
    BinanceFuturesRaw,
    /// Binance USDⓈ-M `/market/stream?streams=` (combined wrapper).
    BinanceFuturesCombined,
    /// Bybit `/v5/public/linear`.
    BybitLinear,
    /// Bybit `/v5/public/spot`.
    Bybit,
    /// OKX `/ws/v5/public`.
    OkxPublic,
    /// OKX `/ws/v5/business`.
    OkxBusiness,
    /// Bitget `/v2/ws/public`.
    Bitget,
}

impl Endpoint {
    /// The venue of the endpoint.
    pub(crate) fn venue(self) -> Venue {
        match self {
            Endpoint::BinanceRaw
            | Endpoint::BinanceCombined
            | Endpoint::BinanceFuturesRaw
            | Endpoint::BinanceFuturesCombined => Venue::Binance,
            Endpoint::Bybit | Endpoint::BybitLinear => Venue::Bybit,
            Endpoint::OkxPublic | Endpoint::OkxBusiness => Venue::Okx,
            Endpoint::Bitget => Venue::Bitget,
        }
    }
}

/// A subscription target: one channel of one book.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Topic {
    /// Binance `<sym>@depth@100ms` (`slow` false) or `<sym>@depth` (1000 ms, `slow` true).
    BinanceDepth {
        /// The book.
        book: BookId,
        /// The 1000 ms stream.
        slow: bool,
    },
    /// Binance `<sym>@trade`.
    BinanceTrade(BookId),
    /// Bybit `orderbook.{depth}.{SYM}`.
    BybitBook {
        /// The book.
        book: BookId,
        /// 1, 50, 200 or 1000.
        depth: u16,
    },
    /// Bybit `publicTrade.{SYM}`.
    BybitTrade(BookId),
    /// OKX `books`.
    OkxBooks(BookId),
    /// OKX `books5`.
    OkxBooks5(BookId),
    /// OKX `trades`.
    OkxTrades(BookId),
    /// OKX `candle{bar}` (business URL).
    OkxCandle(BookId, Timeframe),
    /// Bitget `books`.
    BitgetBooks(BookId),
    /// Bitget `trade`.
    BitgetTrade(BookId),
    /// Bitget `candle{bar}`.
    BitgetCandle(BookId, Timeframe),
    /// Binance `<sym>@forceOrder`.
    BinanceForceOrder(PerpId),
    /// Binance `!forceOrder@arr`.
    BinanceForceOrderAll,
    /// Binance `<sym>@markPrice@1s`.
    BinanceMarkPrice(PerpId),
    /// Binance `!markPrice@arr@1s`.
    BinanceMarkPriceAll,
    /// Bybit linear `tickers.{S}`.
    BybitTicker(PerpId),
    /// Bybit linear `allLiquidation.{S}`.
    BybitLiquidation(PerpId),
    /// OKX `liquidation-orders` of every swap.
    OkxLiquidations,
    /// OKX `open-interest`.
    OkxOpenInterest(PerpId),
    /// OKX `funding-rate`.
    OkxFunding(PerpId),
    /// Bitget `ticker` of a `USDT-FUTURES` contract.
    BitgetPerpTicker(PerpId),
}

impl Topic {
    /// True for a perpetual's topic.
    pub(crate) fn is_perp(&self) -> bool {
        matches!(
            self,
            Topic::BinanceForceOrder(_)
                | Topic::BinanceForceOrderAll
                | Topic::BinanceMarkPrice(_)
                | Topic::BinanceMarkPriceAll
                | Topic::BybitTicker(_)
                | Topic::BybitLiquidation(_)
                | Topic::OkxLiquidations
                | Topic::OkxOpenInterest(_)
                | Topic::OkxFunding(_)
                | Topic::BitgetPerpTicker(_)
        )
    }
}

/// One WebSocket connection as the market sees it.
pub(crate) struct Conn {
    /// Where it came in.
    pub endpoint: Endpoint,
    /// Binance: payloads wrapped as `{"stream":..,"data":..}`.
    pub combined: bool,
    /// Binance `timeUnit=MICROSECOND`: time fields in microseconds.
    pub micros: bool,
    /// The bounded outbound queue.
    pub tx: mpsc::Sender<Utf8Bytes>,
    /// Kill switch.
    pub ctl: Arc<ConnCtl>,
    /// Topics registered.
    pub topics: Vec<Topic>,
    /// Binance: every stream name subscribed, as given (unknown symbols included), for
    /// `LIST_SUBSCRIPTIONS`.
    pub streams: Vec<String>,
    /// The id shown to the client (`connId`, `conn_id`).
    pub conn_id: String,
}

/// One level change of a market step, after de-duplication (the last size per price wins).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Change {
    /// Side.
    pub side: Side,
    /// Price, fixed-point.
    pub price: i64,
    /// New absolute size; zero removes.
    pub qty: u64,
}

/// A step's level changes split by side, each best first: `(price, size)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sides {
    /// Bid changes, highest price first.
    pub bids: Vec<(i64, u64)>,
    /// Ask changes, lowest price first.
    pub asks: Vec<(i64, u64)>,
}

impl Sides {
    /// Splits and orders `changes`.
    pub(crate) fn of(changes: &[Change]) -> Sides {
        let pick = |side: Side| -> Vec<(i64, u64)> {
            changes.iter().filter(|c| c.side == side).map(|c| (c.price, c.qty)).collect()
        };
        let mut out = Sides { bids: pick(Side::Bid), asks: pick(Side::Ask) };
        out.bids.sort_by_key(|l| std::cmp::Reverse(l.0));
        out.asks.sort_by_key(|l| l.0);
        out
    }
}

/// Faults asked for one book, applied to its next book message (or REST snapshot).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Pending {
    /// Skip ids / break the chain.
    pub gap: bool,
    /// Wrong checksum (OKX, Bitget).
    pub checksum: bool,
    /// Reset (Bybit `u=1`, OKX `seqId < prevSeqId`).
    pub reset: bool,
    /// Stale REST snapshot (Binance).
    pub stale: bool,
}

/// A Bybit depth-N view of a book: what its subscribers hold.
#[derive(Clone, Debug)]
pub(crate) struct BybitView {
    /// 1, 50, 200 or 1000.
    pub depth: u16,
    /// The view's update id.
    pub u: u64,
    /// The top `depth` bids as last sent.
    pub bids: Vec<Level>,
    /// The top `depth` asks as last sent.
    pub asks: Vec<Level>,
    /// When the view last sent a message.
    pub last_sent_ms: i64,
}

/// Diffs of Binance `<sym>@depth` (1000 ms) waiting for the next flush.
#[derive(Clone, Debug, Default)]
pub(crate) struct SlowDiff {
    /// `U` of the first diff aggregated.
    pub first: u64,
    /// `u` of the last diff aggregated.
    pub last: u64,
    /// The latest size per (side is bid, price).
    pub levels: BTreeMap<(bool, i64), u64>,
}

/// A trade remembered for a Bitget `trade` snapshot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TradeRec {
    /// Trade id.
    pub id: u64,
    /// Price.
    pub price: i64,
    /// Size.
    pub qty: u64,
    /// The taker sold.
    pub taker_sell: bool,
    /// Time.
    pub ts_ms: i64,
}

/// What a candle channel last pushed for one timeframe of a book.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CandleMark {
    /// Open time of the bar last pushed.
    pub open_ms: i64,
    /// When it was pushed.
    pub pushed_ms: i64,
}

/// One (venue, pair) book and everything served about it.
pub(crate) struct BookState {
    /// Registry id.
    pub id: BookId,
    /// Venue.
    pub venue: Venue,
    /// `BASEQUOTE`.
    pub symbol: String,
    /// Base asset.
    pub base: String,
    /// Quote asset.
    pub quote: String,
    /// Index of the pair in the universe (and in the `Sim`).
    pub pair: usize,
    /// Price step, fixed-point.
    pub tick: i64,
    /// Quantity step, fixed-point.
    pub lot: i64,
    /// Decimals of prices.
    pub px_dec: u32,
    /// Decimals of quantities.
    pub qty_dec: u32,
    /// Typical level size in base units (synthetic volumes scale with it).
    pub level_qty: f64,
    /// The true book.
    pub truth: Book,
    /// Candles, the history extended by this book's trades.
    pub candles: CandleSet,
    /// Still listed on the venue.
    pub listed: bool,
    /// Binance `lastUpdateId`, OKX `seqId`, Bitget `seq`, Bybit cross `seq`.
    pub seq: i64,
    /// `seq` when the simulator started (a stale Binance snapshot answers with it).
    pub initial_seq: i64,
    /// Faults asked for the next message.
    pub pending: Pending,
    /// When the book last changed (OKX heartbeat).
    pub last_change_ms: i64,
    /// When an OKX heartbeat was last pushed.
    pub last_heartbeat_ms: i64,
    /// When the book last traded.
    pub last_trade_ms: i64,
    /// Last trade id.
    pub trade_id: u64,
    /// Trades made while listed (sent to the trade channel's subscribers).
    pub trades_made: u64,
    /// Bybit views with subscribers.
    pub views: Vec<BybitView>,
    /// OKX `books5`: the top five as last pushed (bids, asks).
    pub top5: (Vec<Level>, Vec<Level>),
    /// Binance `<sym>@depth` aggregation.
    pub slow: Option<SlowDiff>,
    /// Bitget recent trades, newest last.
    pub recent_trades: VecDeque<TradeRec>,
    /// Candle channel marks, by timeframe index.
    pub candle_marks: [CandleMark; 6],
}

impl BookState {
    /// The top `n` levels of each side of the true book.
    pub(crate) fn top(&self, n: usize) -> (&[Level], &[Level]) {
        let b = self.truth.bids();
        let a = self.truth.asks();
        (&b[..n.min(b.len())], &a[..n.min(a.len())])
    }
}

/// Everything the simulator serves, behind one lock.
pub(crate) struct State {
    /// The run's settings.
    pub cfg: Config,
    /// Counters.
    pub stats: Arc<Stats>,
    /// The instruments of the enabled venues.
    pub registry: Registry,
    /// The simulated pairs.
    pub universe: Vec<PairSpec>,
    pub(crate) sim: Sim,
    /// Books by `BookId` index.
    pub books: Vec<BookState>,
    /// Venues up (`/sim/venue`), by index.
    pub venue_up: [bool; Venue::COUNT],
    /// Book messages per venue, for the every-N faults.
    pub(crate) book_events: [u64; Venue::COUNT],
    /// Binance REST depth requests, for `--fault-stale-snapshot-every`.
    pub depth_requests: u64,
    /// Open connections by id.
    pub conns: HashMap<u64, Conn>,
    /// Subscribers by topic.
    pub subs: HashMap<Topic, Vec<u64>>,
    next_conn: u64,
    /// Randomness of sequence steps and ids.
    pub rng: Rng,
    pub(crate) ticks: Vec<Tick>,
    pub(crate) changes: Vec<Change>,
    /// Pairs restarted at an injected price (`/sim/trade`): each runs on its own one-pair `Sim`
    /// from that price on, and the main `Sim`'s ticks for it are dropped.
    pub(crate) overrides: HashMap<usize, Sim>,
    /// Scheduled delistings: (due time, book).
    pub(crate) delists: Vec<(i64, BookId)>,
    pub(crate) next_disconnect_ms: i64,
    pub(crate) last_second_ms: i64,
    /// Pairs restarted so far (varies the seed of each restart).
    pub(crate) restarts: u64,
    /// The perpetuals and their wire state.
    pub(crate) perps: Perps,
}

impl State {
    /// Builds the universe, the registry, the history of every pair and the initial books.
    // Long: the simulator's start-up in order; a test double, not runtime code on a hot path.
    pub(crate) fn new(cfg: Config, stats: Arc<Stats>, now: i64) -> Result<State, String> {
        let universe = sim::universe(cfg.seed, cfg.sim_pairs);
        let registry = Registry::new(sim::instruments(&universe, &cfg.venues)).map_err(|e| format!("{e:?}"))?;
        let pair_of: HashMap<String, usize> = universe.iter().enumerate().map(|(i, p)| (p.symbol(), i)).collect();
        let specs: Vec<usize> = (0..universe.len()).collect();
        let step_interval_ms = cfg.step_ms.unwrap_or(SimConfig::default().step_interval_ms);
        let mut sim = Sim::new(
            SimConfig { seed: cfg.seed, step_interval_ms, ..SimConfig::default() },
            &universe,
            &registry,
            &specs,
        );
        let mut rng = Rng::new(cfg.seed ^ 0x51_4D56);
        let mut books = Vec::with_capacity(registry.len());
        for id in registry.ids() {
            let ins = registry.get(id);
            let pair =
                pair_of.get(&ins.symbol).copied().ok_or_else(|| format!("{} not in the universe", ins.symbol))?;
            let seq = match ins.venue {
                Venue::Binance => 1_000_000_000 + rng.below(1_000_000_000),
                Venue::Bybit => 7_000_000_000 + rng.below(1_000_000_000),
                Venue::Okx => 10_000_000_000 + rng.below(10_000_000_000),
                Venue::Bitget => 700_000_000_000 + rng.below(10_000_000_000),
            } as i64;
            books.push(BookState {
                id,
                venue: ins.venue,
                symbol: ins.symbol.clone(),
                base: ins.base.clone(),
                quote: ins.quote.clone(),
                pair,
                tick: ins.tick.0,
                lot: ins.lot.0 as i64,
                px_dec: decimals_of(ins.tick.0),
                qty_dec: decimals_of(ins.lot.0 as i64),
                level_qty: universe[pair].level_qty,
                truth: Book::new(BOOK_LEVELS_MAX),
                candles: CandleSet::new(2),
                listed: true,
                seq,
                initial_seq: seq,
                pending: Pending::default(),
                last_change_ms: now,
                last_heartbeat_ms: now,
                last_trade_ms: 0,
                trade_id: match ins.venue {
                    Venue::Bitget => 1_471_423_022_176_681_986 + rng.below(1 << 40),
                    _ => 100_000_000 + rng.below(1_000_000_000),
                },
                trades_made: 0,
                views: Vec::new(),
                top5: (Vec::new(), Vec::new()),
                slow: None,
                recent_trades: VecDeque::with_capacity(RECENT_TRADES_MAX),
                candle_marks: [CandleMark::default(); 6],
            });
        }
        let mut ticks = Vec::with_capacity(sim.ticks_per_step_max());
        for i in 0..sim.pair_count() {
            let history = sim.history(i, now, BARS_MAX);
            for id in sim.pair_books(i).collect::<Vec<_>>() {
                if let Some(b) = books.get_mut(id.index()) {
                    b.candles = history.clone();
                }
            }
            ticks.clear();
            sim.start_pair(i, now, &mut ticks);
            for t in &ticks {
                if let (TickKind::Book { side, price, qty }, Some(b)) = (t.kind, books.get_mut(t.book.index())) {
                    b.truth.apply(side, price, qty);
                }
            }
        }
        let mut delists = Vec::new();
        for plan in &cfg.delist {
            let venues: Vec<Venue> = match plan.venue {
                Some(v) => vec![v],
                None => cfg.venues.clone(),
            };
            let mut found = false;
            for v in venues {
                if let Some(id) = registry.find(v, &plan.symbol) {
                    delists.push((now + plan.after_s as i64 * 1000, id));
                    found = true;
                }
            }
            if !found {
                return Err(format!("--delist: {} is not listed on the venues served", plan.symbol));
            }
        }
        let next_disconnect_ms = match cfg.faults.disconnect_every_s {
            0 => 0,
            s => now + s as i64 * 1000,
        };
        ticks.clear();
        let perps = Perps::new(cfg.seed, &universe, &registry);
        Ok(State {
            perps,
            stats,
            registry,
            universe,
            sim,
            books,
            venue_up: [true; Venue::COUNT],
            book_events: [0; Venue::COUNT],
            depth_requests: 0,
            conns: HashMap::new(),
            subs: HashMap::new(),
            next_conn: 1,
            rng,
            ticks,
            changes: Vec::new(),
            overrides: HashMap::new(),
            delists,
            next_disconnect_ms,
            last_second_ms: now,
            restarts: 0,
            cfg,
        })
    }

    /// The book of `venue` and `symbol` (case-insensitive `BASEQUOTE`), listed or not.
    pub(crate) fn find(&self, venue: Venue, symbol: &str) -> Option<usize> {
        self.registry.find(venue, symbol).map(|id| id.index())
    }

    /// The listed book of `venue` and `symbol`.
    pub(crate) fn find_listed(&self, venue: Venue, symbol: &str) -> Option<usize> {
        self.find(venue, symbol).filter(|&b| self.books[b].listed)
    }

    // -----------------------------------------------------------------------------------------
    // Connections and subscriptions.

    /// Registers a new connection; returns its id.
    pub(crate) fn register(
        &mut self,
        endpoint: Endpoint,
        tx: mpsc::Sender<Utf8Bytes>,
        ctl: Arc<ConnCtl>,
        micros: bool,
    ) -> u64 {
        let id = self.next_conn;
        self.next_conn += 1;
        let conn_id = format!("{:08x}{:04x}", self.rng.next_u64() as u32, id & 0xFFFF);
        let combined = matches!(endpoint, Endpoint::BinanceCombined | Endpoint::BinanceFuturesCombined);
        self.conns
            .insert(id, Conn { endpoint, combined, micros, tx, ctl, topics: Vec::new(), streams: Vec::new(), conn_id });
        let s = self.stats.venue(endpoint.venue());
        s.connections_accepted.fetch_add(1, Ordering::Relaxed);
        s.connections_open.fetch_add(1, Ordering::Relaxed);
        id
    }

    /// Removes a connection and every subscription it held.
    pub(crate) fn unregister(&mut self, id: u64) {
        let Some(conn) = self.conns.remove(&id) else { return };
        let venue = conn.endpoint.venue();
        for topic in conn.topics {
            self.remove_sub(topic, id, venue);
        }
        self.stats.venue(venue).connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Adds `topic` to connection `id`; false if it already had it (or is gone).
    pub(crate) fn subscribe(&mut self, id: u64, topic: Topic) -> bool {
        let Some(conn) = self.conns.get_mut(&id) else { return false };
        if conn.topics.contains(&topic) {
            return false;
        }
        conn.topics.push(topic);
        let venue = conn.endpoint.venue();
        self.subs.entry(topic).or_default().push(id);
        self.stats.venue(venue).subscriptions.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Removes `topic` from connection `id`; false if it did not have it.
    pub(crate) fn unsubscribe(&mut self, id: u64, topic: Topic) -> bool {
        let Some(conn) = self.conns.get_mut(&id) else { return false };
        let Some(pos) = conn.topics.iter().position(|t| *t == topic) else { return false };
        conn.topics.swap_remove(pos);
        let venue = conn.endpoint.venue();
        self.remove_sub(topic, id, venue);
        true
    }

    fn remove_sub(&mut self, topic: Topic, id: u64, venue: Venue) {
        let mut empty = false;
        if let Some(list) = self.subs.get_mut(&topic) {
            if let Some(p) = list.iter().position(|&c| c == id) {
                list.swap_remove(p);
                self.stats.venue(venue).subscriptions.fetch_sub(1, Ordering::Relaxed);
            }
            empty = list.is_empty();
        }
        if empty {
            self.subs.remove(&topic);
            if let Topic::BybitBook { book, depth } = topic {
                if let Some(b) = self.books.get_mut(book.index()) {
                    b.views.retain(|v| v.depth != depth);
                }
            }
        }
    }

    /// True when `topic` has a subscriber.
    pub(crate) fn has_subs(&self, topic: &Topic) -> bool {
        self.subs.contains_key(topic)
    }

    /// Queues `text` on connection `conn`. A full queue makes it a slow consumer: it is closed
    /// and counted, and false is returned.
    fn send_conn(&self, conn: &Conn, text: Utf8Bytes) -> bool {
        if conn.ctl.is_dead() {
            return false;
        }
        let venue = conn.endpoint.venue();
        match conn.tx.try_send(text) {
            Ok(()) => {
                self.stats.venue(venue).messages_sent.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.stats.venue(venue).slow_consumer_closes.fetch_add(1, Ordering::Relaxed);
                let kill = match venue {
                    Venue::Okx => Kill::Close(4005, "Buffer is full, cannot write data".into()),
                    _ => Kill::Close(1008, "slow consumer: outbound queue full".into()),
                };
                conn.ctl.kill(kill);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Queues `text` on connection `id`.
    pub(crate) fn send_to(&self, id: u64, text: impl Into<Utf8Bytes>) -> bool {
        match self.conns.get(&id) {
            Some(conn) => self.send_conn(conn, text.into()),
            None => false,
        }
    }

    /// Queues `text` on every subscriber of `topic`.
    pub(crate) fn publish(&self, topic: &Topic, text: impl Into<Utf8Bytes>) {
        let Some(list) = self.subs.get(topic) else { return };
        let text = text.into();
        for id in list {
            if let Some(conn) = self.conns.get(id) {
                self.send_conn(conn, text.clone());
            }
        }
    }

    /// Queues a Binance payload on every subscriber of `topic`: raw, or `wrap`ped (Binance's
    /// `{"stream":..,"data":..}`) for combined connections; `make(micros)` builds the payload
    /// with time fields in milliseconds or, for `timeUnit=MICROSECOND` connections, in
    /// microseconds (each form built once).
    pub(crate) fn publish_binance(&self, topic: &Topic, wrap: impl Fn(&str) -> String, make: impl Fn(bool) -> String) {
        let Some(list) = self.subs.get(topic) else { return };
        let mut forms: [Option<Utf8Bytes>; 4] = Default::default();
        let mut raws: [Option<String>; 2] = Default::default();
        for id in list {
            let Some(conn) = self.conns.get(id) else { continue };
            let k = usize::from(conn.micros) * 2 + usize::from(conn.combined);
            let raw = raws[usize::from(conn.micros)].get_or_insert_with(|| make(conn.micros)).clone();
            let text =
                forms[k].get_or_insert_with(|| if conn.combined { wrap(&raw).into() } else { raw.into() }).clone();
            self.send_conn(conn, text);
        }
    }

    /// Queues a perpetual message on every subscriber of `topic`, counted as a perp message of
    /// `venue` when someone got it.
    pub(crate) fn publish_perp(&self, venue: Venue, topic: &Topic, text: String) {
        if self.has_subs(topic) {
            self.stats.venue(venue).perp_messages.fetch_add(1, Ordering::Relaxed);
            self.publish(topic, text);
        }
    }

    /// Counts one liquidation sent on `venue`'s wire.
    pub(crate) fn count_liquidation(&self, venue: Venue) {
        self.stats.venue(venue).liquidations.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends every WebSocket connection of `venue` with `kill`; returns how many.
    pub(crate) fn kill_venue(&self, venue: Venue, kill: &Kill) -> usize {
        let mut n = 0;
        for conn in self.conns.values().filter(|c| c.endpoint.venue() == venue) {
            conn.ctl.kill(kill.clone());
            n += 1;
        }
        n
    }

    /// Queues `text` (built per connection by `make`) on every connection of `venue`.
    pub(crate) fn broadcast(&self, venue: Venue, make: impl Fn(&Conn) -> String) {
        for conn in self.conns.values().filter(|c| c.endpoint.venue() == venue) {
            self.send_conn(conn, make(conn).into());
        }
    }

    /// Sets the mean step interval of every pair (the message rate), from now on.
    pub(crate) fn set_step_ms(&mut self, ms: i64) {
        self.sim.set_step_interval_ms(ms);
        for sim in self.overrides.values_mut() {
            sim.set_step_interval_ms(ms);
        }
    }
}

/// The bars of `tf` of book `b`, oldest first, ending with the bucket of `now` (buckets with no
/// trade yet are flat bars at the previous close, as the venues show them).
pub(crate) fn bars(book: &BookState, tf: Timeframe, now: i64) -> Vec<Candle> {
    let ring = book.candles.ring(tf);
    let mut out: Vec<Candle> = ring.iter().copied().collect();
    let current = tf.bucket_start(now);
    let d = tf.duration_ms();
    let mut fill = 0;
    while let Some(&last) = out.last() {
        if last.open_ms >= current || fill >= BARS_MAX {
            break;
        }
        let next = if tf == Timeframe::W1 { tf.bucket_start(last.open_ms + d) } else { last.open_ms + d };
        out.push(Candle::flat(next, last.close));
        fill += 1;
    }
    if out.len() > BARS_MAX {
        let extra = out.len() - BARS_MAX;
        out.drain(..extra);
    }
    out
}

/// Synthetic volume figures of one bar (the simulated market has no volumes): deterministic
/// from the book, timeframe and open time, scaled by the pair's level size and bar length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BarVolume {
    /// Base volume, fixed-point, a multiple of the lot.
    pub base: u64,
    /// Quote volume, fixed-point.
    pub quote: i64,
    /// Number of trades.
    pub trades: u64,
    /// Taker-buy base volume, fixed-point.
    pub taker_base: u64,
    /// Taker-buy quote volume, fixed-point.
    pub taker_quote: i64,
}

/// The synthetic volumes of `bar`.
pub(crate) fn bar_volume(book: &BookState, tf: Timeframe, bar: &Candle) -> BarVolume {
    let mut rng = Rng::new((book.id.0 as u64) << 40 ^ (tf.index() as u64) << 56 ^ bar.open_ms as u64);
    let bars_5m = (tf.duration_ms() / Timeframe::M5.duration_ms()).max(1) as f64;
    let lot = book.lot.max(1) as u64;
    let raw = book.level_qty * rng.range(0.5, 3.0) * bars_5m.powf(0.9) * SCALE as f64;
    let base = ((raw as u64) / lot).max(1) * lot;
    let mid = (bar.high.0 as i128 + bar.low.0 as i128) / 2;
    let quote = i64::try_from(base as i128 * mid / SCALE as i128).unwrap_or(i64::MAX);
    let share = rng.range(0.3, 0.7);
    let taker_base = (((base as f64 * share) as u64) / lot) * lot;
    let taker_quote = i64::try_from(taker_base as i128 * mid / SCALE as i128).unwrap_or(i64::MAX);
    BarVolume { base, quote, trades: 1 + rng.below(40 * bars_5m as u64), taker_base, taker_quote }
}
