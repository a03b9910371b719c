//! `/v1/metrics/{symbol}`, `/v1/rankings/{category}` and `/v1/market` (decisions §9): query
//! validation and the JSON of answers read from the board snapshot.

use hyper::StatusCode;
use rampart_engine::{Timeframe, Venue};

use std::rc::Rc;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rampart_state::Command;

use super::answer::{
    answer_ok, clip, count_param, exchange_param, query_param, symbols_param, unprocessable, ApiError, Resp,
};
use super::bodies;
use super::books::Books;
use rampart_state::board::{Board, Category, Entry, Metric, Order};
use rampart_state::json::Json;
use rampart_state::pair_metrics::PairMetrics;

/// Most rows a ranking answers.
pub const RANKING_LIMIT_MAX: usize = 100;
/// Rows a ranking answers unless told.
pub const RANKING_LIMIT_DEFAULT: usize = 20;

/// `interval` (default `1d`).
pub(super) fn interval_param(query: Option<&str>) -> Result<Timeframe, ApiError> {
    match query_param(query, "interval") {
        None => Ok(Timeframe::D1),
        Some(s) => Timeframe::parse(&s).ok_or_else(|| {
            unprocessable(format!("invalid interval '{}'. Allowed: {}", clip(&s, 64), Timeframe::ALLOWED))
        }),
    }
}

fn metric(s: &str) -> Result<Metric, ApiError> {
    Metric::parse(s)
        .ok_or_else(|| unprocessable(format!("invalid metric '{}'. Allowed: {}", clip(s, 64), Metric::ALLOWED)))
}

/// `metric=a,b` of `/v1/metrics` (default: every metric), each once, in the order given. Every
/// entry must be a metric's name: an empty one (`metric=`, `a,,b`) is refused like any other.
fn metrics_param(query: Option<&str>) -> Result<Vec<Metric>, ApiError> {
    let Some(raw) = query_param(query, "metric") else { return Ok(Metric::ALL.to_vec()) };
    let mut out = Vec::with_capacity(Metric::ALL.len());
    for name in raw.split(',') {
        let m = metric(name)?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// The query of a ranking.
struct RankingQuery {
    metric: Metric,
    interval: Timeframe,
    order: Order,
    limit: usize,
}

fn ranking_query(query: Option<&str>) -> Result<RankingQuery, ApiError> {
    let metric = match query_param(query, "metric") {
        None => Metric::Change,
        Some(s) => metric(&s)?,
    };
    let interval = interval_param(query)?;
    let order = match query_param(query, "order") {
        None => metric.default_order(),
        Some(s) => Order::parse(&s)
            .ok_or_else(|| unprocessable(format!("invalid order '{}'. Allowed: asc, desc", clip(&s, 64))))?,
    };
    let limit = count_param(query, "limit", RANKING_LIMIT_DEFAULT, RANKING_LIMIT_MAX)?;
    Ok(RankingQuery { metric, interval, order, limit })
}

/// The validated query of `GET /v1/metrics/{symbol}`.
pub(super) struct MetricsQuery {
    interval: Timeframe,
    wanted: Vec<Metric>,
    /// `usd=true`: each pair also carries `quoteUsd`, its quote asset's USD price.
    usd: bool,
}

/// Validates `interval`, `metric` and `usd` of `GET /v1/metrics` and `/v1/metrics/{symbol}`.
pub(super) fn metrics_query(query: Option<&str>) -> Result<MetricsQuery, ApiError> {
    let usd = match query_param(query, "usd").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(unprocessable(format!("invalid usd '{}'. Allowed: true, false", clip(other, 64)))),
    };
    Ok(MetricsQuery { interval: interval_param(query)?, wanted: metrics_param(query)?, usd })
}

/// `,"quoteUsd":<price or null>` when the query asked for it: the USD price of the pair's quote
/// asset at its computation (`decisions.md` §8), what turns its quote volume, depth and walls
/// into dollars (a screener's "volume in USD" across USDT-, USDC- and BTC-quoted pairs).
fn write_quote_usd(j: &mut Json, entry: Option<&Entry>, q: &MetricsQuery) {
    if !q.usd {
        return;
    }
    j.raw(",\"quoteUsd\":");
    match entry.and_then(|e| e.metrics.quote_usd).filter(|v| v.is_finite()) {
        Some(v) => j.float(v, 6),
        None => j.raw("null"),
    };
}

/// The body of `GET /v1/metrics/{symbol}` for a book on the board (`None`: not on it yet, so
/// no metric has data).
pub(super) fn metrics_body(
    board: &Board,
    venue: Venue,
    symbol: &str,
    entry: Option<&Entry>,
    q: MetricsQuery,
) -> String {
    let mut j = Json::with_capacity(512);
    j.raw("{\"symbol\":").str(symbol).raw(",\"exchange\":").str(venue.as_str());
    j.raw(",\"interval\":").str(q.interval.as_str()).raw(",\"ts\":").int(board.ts_ms);
    j.raw(",\"computedAt\":").int(entry.map_or(0, |e| e.metrics.ts_ms));
    write_quote_usd(&mut j, entry, &q);
    j.raw(",\"data\":");
    write_metrics(&mut j, entry, &q);
    j.raw("}");
    j.finish()
}

/// `{<metric>: value, ...}` of the wanted metrics the pair has data for.
fn write_metrics(j: &mut Json, entry: Option<&Entry>, q: &MetricsQuery) {
    j.raw("{");
    if let Some(e) = entry {
        let mut first = true;
        for &m in &q.wanted {
            if has(&e.metrics, m, q.interval) {
                if !first {
                    j.raw(",");
                }
                first = false;
                j.raw("\"").raw(m.as_str()).raw("\":");
                write_metric(j, &e.metrics, m, q.interval);
            }
        }
    }
    j.raw("}");
}

/// The body of `GET /v1/metrics`: every pair on the venue's board (or those of `filter`,
/// unknown ones left out), by symbol, each with its price and computation time.
pub(super) fn metrics_bulk_body(board: &Board, venue: Venue, filter: Option<&[String]>, q: &MetricsQuery) -> String {
    let entries = &board.venue(venue).entries;
    let mut j = Json::with_capacity(256 + entries.len() * 400);
    j.raw("{\"exchange\":").str(venue.as_str()).raw(",\"interval\":").str(q.interval.as_str());
    j.raw(",\"ts\":").int(board.ts_ms).raw(",\"data\":[");
    let mut first = true;
    for e in entries.iter().filter(|e| filter.is_none_or(|f| f.contains(&e.symbol))) {
        if !first {
            j.raw(",");
        }
        first = false;
        j.raw("{\"symbol\":").str(&e.symbol).raw(",\"price\":").fixed(e.metrics.price);
        j.raw(",\"computedAt\":").int(e.metrics.ts_ms);
        write_quote_usd(&mut j, Some(e), q);
        j.raw(",\"data\":");
        write_metrics(&mut j, Some(e), q);
        j.raw("}");
    }
    j.raw("]}");
    j.finish()
}

/// The body of `GET /v1/candles/{symbol}`.
pub(super) fn candles_body(symbol: &str, venue: Venue, tf: Timeframe, bars: &[rampart_engine::Candle]) -> String {
    let mut j = Json::with_capacity(128 + bars.len() * 160);
    j.raw("{\"symbol\":").str(symbol).raw(",\"exchange\":").str(venue.as_str());
    j.raw(",\"interval\":").str(tf.as_str()).raw(",\"data\":[");
    for (i, b) in bars.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        j.raw("{\"openTime\":").int(b.open_ms).raw(",\"open\":").fixed(b.open.0);
        j.raw(",\"high\":").fixed(b.high.0).raw(",\"low\":").fixed(b.low.0).raw(",\"close\":").fixed(b.close.0);
        j.raw(",\"volume\":").float(b.volume, 8).raw(",\"trades\":");
        match b.trades {
            Some(n) => j.int(i64::from(n)),
            None => j.raw("null"),
        };
        j.raw("}");
    }
    j.raw("]}");
    j.finish()
}

/// The body of `GET /v1/book/{symbol}`: `[price, qty]` pairs, best first.
pub(super) fn book_body(symbol: &str, venue: Venue, view: &rampart_state::DepthView) -> String {
    let mut j = Json::with_capacity(192 + (view.bids.len() + view.asks.len()) * 48);
    j.raw("{\"symbol\":").str(symbol).raw(",\"exchange\":").str(venue.as_str());
    j.raw(",\"ts\":").int(view.ts_ms).raw(",\"inSync\":").bool(view.in_sync);
    for (name, side) in [("bids", &view.bids), ("asks", &view.asks)] {
        j.raw(",\"").raw(name).raw("\":[");
        for (i, l) in side.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            j.raw("[").fixed(l.price.0).raw(",").fixed(i64::try_from(l.qty.0).unwrap_or(i64::MAX)).raw("]");
        }
        j.raw("]");
    }
    j.raw("}");
    j.finish()
}

/// Whether a pair has data for `m` over `interval`.
fn has(p: &PairMetrics, m: Metric, interval: Timeframe) -> bool {
    match m {
        Metric::Depth => p.depth.is_some(),
        Metric::Walls => p.walls.is_some(),
        Metric::Levels => p.levels.is_some(),
        _ => m.rank_value(p, interval).is_some(),
    }
}

/// One metric's value as answers write it (`has` must hold).
fn write_metric(j: &mut Json, p: &PairMetrics, m: Metric, interval: Timeframe) {
    match m {
        Metric::Depth => {
            let d = p.depth.unwrap_or(rampart_state::pair_metrics::Depth { bid_usd: 0.0, ask_usd: 0.0 });
            j.raw("{\"bidUsd\":").float(d.bid_usd, 2).raw(",\"askUsd\":").float(d.ask_usd, 2);
            j.raw(",\"imbalance\":").float(d.imbalance(), 4).raw("}");
        }
        Metric::Walls => {
            let w = p.walls.unwrap_or(rampart_state::pair_metrics::WallsSummary { count: 0, usd: None });
            j.raw("{\"count\":").int(i64::from(w.count)).raw(",\"usd\":");
            opt(j, w.usd, 2).raw("}");
        }
        Metric::Levels => {
            let (s, r) = p.levels.unwrap_or((None, None));
            j.raw("{\"support\":");
            opt(j, s, 4).raw(",\"resistance\":");
            opt(j, r, 4).raw("}");
        }
        Metric::Liquidations | Metric::Oi | Metric::Funding => write_perp_metric(j, p, m, interval),
        _ => {
            j.float(m.rank_value(p, interval).unwrap_or(f64::NAN), decimals(m));
        }
    }
}

/// A derivatives metric's object (§17): `liquidations` `{"longUsd","shortUsd","longCount",
/// "shortCount"}`, `oi` `{"base","usd"}`, `funding` `{"rate","rate8h","intervalH","nextTime"}`
/// (`has` must hold).
fn write_perp_metric(j: &mut Json, p: &PairMetrics, m: Metric, interval: Timeframe) {
    use rampart_state::perp_json::{BASE_DECIMALS, RATE_DECIMALS, USD_DECIMALS};
    let perp = p.perp.unwrap_or_default();
    match m {
        Metric::Liquidations => {
            let l = perp.liquidations[interval.index()].unwrap_or_default();
            j.raw("{\"longUsd\":")
                .float(l.long_usd, USD_DECIMALS)
                .raw(",\"shortUsd\":")
                .float(l.short_usd, USD_DECIMALS);
            j.raw(",\"longCount\":").int(i64::from(l.long_count));
            j.raw(",\"shortCount\":").int(i64::from(l.short_count)).raw("}");
        }
        Metric::Oi => {
            let (base, usd) = perp.oi.unwrap_or((0.0, 0.0));
            j.raw("{\"base\":").float(base, BASE_DECIMALS).raw(",\"usd\":").float(usd, USD_DECIMALS).raw("}");
        }
        _ => {
            let Some(f) = perp.funding else { return };
            j.raw("{\"rate\":").float(f.rate, RATE_DECIMALS).raw(",\"rate8h\":").float(f.rate8h, RATE_DECIMALS);
            j.raw(",\"intervalH\":").int(i64::from(f.interval_h)).raw(",\"nextTime\":").int(f.next_ms).raw("}");
        }
    }
}

/// Decimals a metric's number is written with.
pub fn decimals(m: Metric) -> usize {
    match m {
        Metric::Trades => 0,
        Metric::Volume | Metric::Spread | Metric::Depth | Metric::Walls | Metric::Liquidations | Metric::Oi => 2,
        Metric::Change | Metric::Volatility | Metric::Levels | Metric::OiChange => 4,
        Metric::Funding => 6,
    }
}

fn opt(j: &mut Json, v: Option<f64>, decimals: usize) -> &mut Json {
    match v {
        Some(v) => j.float(v, decimals),
        None => j.raw("null"),
    }
}

/// The body of `GET /v1/rankings/{category}`.
pub(super) fn rankings_body(
    board: &Board,
    venue: Venue,
    category: &str,
    query: Option<&str>,
) -> Result<String, ApiError> {
    let cat =
        Category::parse(category).ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown ranking category"))?;
    let q = ranking_query(query)?;
    let rows = board.venue(venue).ranking(q.metric, q.interval, q.order, cat, board.ts_ms, q.limit);
    let mut j = Json::with_capacity(256 + rows.len() * 96);
    j.raw("{\"category\":").str(category).raw(",\"exchange\":").str(venue.as_str());
    j.raw(",\"metric\":").str(q.metric.as_str()).raw(",\"interval\":").str(q.interval.as_str());
    j.raw(",\"order\":").str(if q.order == Order::Asc { "asc" } else { "desc" });
    j.raw(",\"ts\":").int(board.ts_ms).raw(",\"data\":[");
    for (i, (e, v)) in rows.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        j.raw("{\"rank\":").int(i as i64 + 1).raw(",\"symbol\":").str(&e.symbol);
        j.raw(",\"value\":").float(*v, decimals(q.metric)).raw(",\"price\":").fixed(e.metrics.price).raw("}");
    }
    j.raw("]}");
    Ok(j.finish())
}

/// The body of `GET /v1/market`.
pub(super) fn market_body(board: &Board, venue: Venue, query: Option<&str>) -> Result<String, ApiError> {
    let interval = interval_param(query)?;
    let n = board.venue(venue).numbers[interval.index()];
    let mut j = Json::with_capacity(256);
    j.raw("{\"exchange\":").str(venue.as_str()).raw(",\"interval\":").str(interval.as_str());
    j.raw(",\"ts\":").int(board.ts_ms).raw(",\"data\":");
    rampart_state::market_json::write_board_numbers(&mut j, &n);
    j.raw("}");
    Ok(j.finish())
}
/// Metrics, rankings and the board's numbers as the board thread last built them, and the
/// candles and book depth the owning shard copies on request.
pub struct BoardApi {
    books: Rc<Books>,
    /// Metrics, rankings and board numbers, rebuilt by the board thread.
    board: Arc<ArcSwap<Board>>,
    /// Answers read from the board, kept until it is rebuilt.
    bodies: bodies::BoardBodies,
}

impl BoardApi {
    /// Answers from `board` (and the shards of `books`).
    pub(super) fn new(books: Rc<Books>, board: Arc<ArcSwap<Board>>) -> BoardApi {
        BoardApi { books, board, bodies: bodies::BoardBodies::default() }
    }

    /// `GET /v1/metrics/{symbol}`: 422 for a bad parameter, then 404 for an unknown symbol.
    pub(super) fn metrics_one(&self, symbol: &str, query: Option<&str>) -> Resp {
        let asked = exchange_param(query).and_then(|v| Ok((v, metrics_query(query)?)));
        let (venue, q) = match asked {
            Ok(x) => x,
            Err(e) => return e.into_response(),
        };
        let id = match self.books.book(venue, symbol) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        let board = self.board.load_full();
        let target = format!("metrics/{}?{}", id.0, query.unwrap_or(""));
        let body = self.bodies.get_or_build(&board, &target, || {
            let registry = self.books.shared.registry();
            let name = &registry.get(id).symbol;
            Ok::<_, ApiError>(metrics_body(&board, venue, name, board.entry(venue, id), q))
        });
        answer_ok(body)
    }

    /// `GET /v1/metrics`: every listed pair's metrics (or those of `symbols`) from one board.
    pub(super) fn metrics_bulk(&self, query: Option<&str>) -> Resp {
        let asked = exchange_param(query).and_then(|v| Ok((v, symbols_param(query)?, metrics_query(query)?)));
        let (venue, filter, q) = match asked {
            Ok(x) => x,
            Err(e) => return e.into_response(),
        };
        let board = self.board.load_full();
        let target = format!("metrics?{}", query.unwrap_or(""));
        let body = self.bodies.get_or_build(&board, &target, || {
            Ok::<_, ApiError>(metrics_bulk_body(&board, venue, filter.as_deref(), &q))
        });
        answer_ok(body)
    }

    /// `GET /v1/candles/{symbol}`: the newest bars of one timeframe, oldest first, copied by
    /// the owning shard.
    pub(super) async fn candles(&self, symbol: &str, query: Option<&str>) -> Resp {
        let answer = async {
            let venue = exchange_param(query)?;
            let tf = interval_param(query)?;
            let limit = count_param(query, "limit", 200, 1_000)?;
            let book = self.books.book(venue, symbol)?;
            let bars = self.books.ask_shard(book, |reply| Command::Candles { book, tf, limit, reply }).await?;
            let registry = self.books.shared.registry();
            Ok::<_, ApiError>(candles_body(&registry.get(book).symbol, venue, tf, &bars))
        };
        answer_ok(answer.await)
    }

    /// `GET /v1/book/{symbol}`: the best levels per side, copied by the owning shard.
    pub(super) async fn depth(&self, symbol: &str, query: Option<&str>) -> Resp {
        let answer = async {
            let venue = exchange_param(query)?;
            let limit = count_param(query, "limit", 100, 1_000)?;
            let book = self.books.book(venue, symbol)?;
            let view = self.books.ask_shard(book, |reply| Command::Depth { book, limit, reply }).await?;
            let registry = self.books.shared.registry();
            Ok::<_, ApiError>(book_body(&registry.get(book).symbol, venue, &view))
        };
        answer_ok(answer.await)
    }

    /// `GET /v1/rankings/{category}`, written once per board and query.
    pub(super) fn rankings(&self, category: &str, query: Option<&str>) -> Resp {
        let board = self.board.load_full();
        let target = format!("rankings/{category}?{}", query.unwrap_or(""));
        let body = self.bodies.get_or_build(&board, &target, || {
            exchange_param(query).and_then(|venue| rankings_body(&board, venue, category, query))
        });
        answer_ok(body)
    }

    /// `GET /v1/market`, written once per board and query.
    pub(super) fn market(&self, query: Option<&str>) -> Resp {
        let board = self.board.load_full();
        let target = format!("market?{}", query.unwrap_or(""));
        let body = self.bodies.get_or_build(&board, &target, || {
            exchange_param(query).and_then(|venue| market_body(&board, venue, query))
        });
        answer_ok(body)
    }
}
