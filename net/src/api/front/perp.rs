//! `GET /v1/perp/{symbol}`, `GET /v1/perp`, `GET /v1/liquidations/{symbol}` and
//! `GET /v1/liquidations` (`decisions.md` §17 "Data"): a pair's USDT perpetual, read from the
//! snapshot its shard publishes (`BookSlot::perp`, replaced each second), and its recent
//! liquidations, copied from the ring the shard writes (`BookSlot::liquidations`, the newest 128
//! taken), without asking the shard. The queries are validated as every `/v1` read validates them
//! (422 naming the value and what is allowed, before any 404); the bodies are `perp_json`'s.
//! `MarketApi` answers the routes (as it answers the wall history's), since these are the
//! market's published state of one pair or one venue.
//!
//! Choices where §17 is silent, and why:
//! - A pair whose slot holds no snapshot has no perpetual on that venue: 404 `no perpetual
//!   contract for '<SYMBOL>' on <exchange>` on the one-pair routes, left out of the venue's. A
//!   pair the venue does not list is the usual 404 first, so the two never mix.
//! - The lists cut at 24 h by the answer's clock, so a liquidation does not outlive its day.
//! - A list holds the ring's newest 128 as taken, ordered by the venue's time: an OKX push older
//!   than the 128 held still takes the oldest's place (it is among the newest taken).
//! - A list may show a liquidation the pair's `last` (`GET /v1/perp/{symbol}`) does not show yet:
//!   the ring is read as it is now, the snapshot is up to a second old.
//! - The venue-wide list ranks by the venue's time, newest first; ties go to the earlier pair in
//!   symbol order, then to the pair's own order.
//!
//! Bound: a list answer holds at most [`LIQUIDATIONS_PAIR_LIMIT_MAX`] (one pair) or [`LIQUIDATIONS_VENUE_LIMIT_MAX`] (a
//! venue) liquidations; the venue's keeps only the newest `limit` while it reads the pairs (a heap
//! of `limit`), so its memory does not grow with the venue.

use std::cmp::Reverse;
use std::sync::Arc;

use hyper::StatusCode;
use rampart_engine::perp_book::{Completeness, LiqFilter, Liquidation, PerpInterval};
use rampart_engine::{BookId, Timeframe, Venue};
use rampart_state::perp::PerpSnapshot;
use rampart_state::Command;

use super::answer::{clip, count_param, exchange_param, query_param, symbols_param, unprocessable, ApiError};
use super::books::Books;
use super::newest::Newest;
use super::perp_json::{self, ListHead};

/// Liquidations a one-pair list holds when `limit` is not given.
pub const LIQUIDATIONS_PAIR_LIMIT_DEFAULT: usize = 50;
/// Most liquidations a one-pair list holds (a pair keeps its newest 128); a larger `limit` is a 422.
pub const LIQUIDATIONS_PAIR_LIMIT_MAX: usize = rampart_engine::perp_book::RECENT_MAX;
/// Liquidations a venue's list holds when `limit` is not given.
pub const LIQUIDATIONS_VENUE_LIMIT_DEFAULT: usize = 100;
/// Most liquidations a venue's list holds; a larger `limit` is a 422.
pub const LIQUIDATIONS_VENUE_LIMIT_MAX: usize = 500;

/// `side`, `min_usd` and `limit` of a liquidations list, the limit in `1..=limit_max`.
pub(super) fn list_query(query: Option<&str>, limit_default: usize, limit_max: usize) -> Result<LiqFilter, ApiError> {
    let side = match query_param(query, "side") {
        None => None,
        Some(s) if s == "any" => None,
        Some(s) => Some(
            perp_json::side_of_text(&s)
                .ok_or_else(|| unprocessable(format!("invalid side '{}'. Allowed: long, short, any", clip(&s, 64))))?,
        ),
    };
    let min_usd = match query_param(query, "min_usd") {
        None => 0.0,
        Some(s) => s.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| {
            unprocessable(format!("invalid min_usd '{}'. Allowed: a number of USD from 0", clip(&s, 64)))
        })?,
    };
    let limit = count_param(query, "limit", limit_default, limit_max)?;
    Ok(LiqFilter { side, min_usd, limit })
}

/// The liquidations of `held` (a pair's, newest first) that `f` asks for at `now_ms`: the last
/// 24 h, newest first.
fn passing(held: &[Liquidation], f: LiqFilter, now_ms: i64) -> impl Iterator<Item = &Liquidation> + '_ {
    f.apply(now_ms, held.iter())
}

/// The newest `f.limit` liquidations of `pairs` (each pair's newest first, pairs in symbol order)
/// that pass `f`, newest first, each with the index of its pair. A pair's come newest first, so
/// once one is older than the oldest kept of a full answer, the rest of that pair is skipped.
pub(super) fn newest(pairs: &[Vec<Liquidation>], f: LiqFilter, now_ms: i64) -> Vec<(usize, Liquidation)> {
    // Newer is greater; ties go to the earlier pair, then the earlier in the pair's own order.
    let mut kept = Newest::new(f.limit);
    for (book, held) in pairs.iter().enumerate() {
        for (at, l) in passing(held, f, now_ms).enumerate() {
            if !kept.offer((l.time_ms, Reverse(book), Reverse(at)), *l) {
                break;
            }
        }
    }
    kept.newest_first().into_iter().map(|((_, Reverse(book), _), l)| (book, l)).collect()
}

/// The snapshot of `id`, if its pair has a perpetual.
fn snapshot(books: &Books, id: BookId) -> Option<Arc<PerpSnapshot>> {
    books.shared.slots[id.index()].perp.load_full()
}

/// The liquidations the ring of `id` holds that pass `f` at `now_ms` (the limit aside), newest
/// first (none before its ring is made).
fn held(books: &Books, id: BookId, f: LiqFilter, now_ms: i64) -> Vec<Liquidation> {
    let feed = books.shared.slots[id.index()].liquidations.get();
    feed.map(|feed| feed.held_where(|l| f.passes(now_ms, l)).into_iter().map(|(_, l)| l).collect()).unwrap_or_default()
}

/// The book of `symbol` on `venue` with its snapshot, or the 404: unknown (or delisted) pair,
/// then no perpetual.
fn pair(books: &Books, venue: Venue, symbol: &str) -> Result<(String, Arc<PerpSnapshot>), ApiError> {
    let id = books.book(venue, symbol)?;
    let name = books.shared.registry().get(id).symbol.clone();
    match snapshot(books, id) {
        Some(p) => Ok((name, p)),
        None => Err(ApiError::new(StatusCode::NOT_FOUND, format!("no perpetual contract for '{name}' on {venue}"))),
    }
}

/// The pairs of a venue-wide answer that have a perpetual, in symbol order, with their snapshots.
fn pairs(books: &Books, venue: Venue, filter: Option<&[String]>) -> Vec<(BookId, Arc<PerpSnapshot>)> {
    let ids = books.bulk_books(venue, filter);
    ids.into_iter().filter_map(|id| snapshot(books, id).map(|p| (id, p))).collect()
}

/// The body of `GET /v1/perp/{symbol}`, or its refusal.
pub(super) fn one(books: &Books, symbol: &str, query: Option<&str>) -> Result<String, ApiError> {
    let venue = exchange_param(query)?;
    let (name, p) = pair(books, venue, symbol)?;
    Ok(perp_json::perp_body(&name, venue.as_str(), &p))
}

/// The body of `GET /v1/perp/{symbol}/history`: the window of `interval` (`5m` … `1w`, default
/// `1h`) in its 60 slots, oldest first, copied by the shard that owns the pair (which waits at
/// most as `GET /v1/candles` does: 503 `busy; retry shortly`). A pair without a perpetual here is
/// the 404 of the other derivatives reads, before the shard is asked.
pub(super) async fn history(books: &Books, symbol: &str, query: Option<&str>) -> Result<String, ApiError> {
    let venue = exchange_param(query)?;
    let tf = match query_param(query, "interval") {
        None => Timeframe::H1,
        Some(s) => Timeframe::parse(&s).ok_or_else(|| {
            unprocessable(format!("invalid interval '{}'. Allowed: {}", clip(&s, 64), Timeframe::ALLOWED))
        })?,
    };
    let (name, _) = pair(books, venue, symbol)?;
    let book = books.book(venue, symbol)?;
    let window = PerpInterval::of(tf);
    let slots = books.ask_shard(book, |reply| Command::PerpHistory { book, window, reply }).await?;
    Ok(perp_json::history_body(&name, venue.as_str(), window, &slots))
}

/// The body of `GET /v1/perp`: every pair of the venue with a perpetual (or those of `symbols`).
pub(super) fn bulk(books: &Books, query: Option<&str>, now_ms: i64) -> Result<String, ApiError> {
    let venue = exchange_param(query)?;
    let filter = symbols_param(query)?;
    let pairs = pairs(books, venue, filter.as_deref());
    let registry = books.shared.registry();
    let named: Vec<(&str, &PerpSnapshot)> =
        pairs.iter().map(|(id, p)| (registry.get(*id).symbol.as_str(), &**p)).collect();
    Ok(perp_json::perp_bulk_body(venue.as_str(), now_ms, &named))
}

/// The body of `GET /v1/liquidations/{symbol}`: the pair's of the last 24 h, newest first.
pub(super) fn liquidations_one(
    books: &Books,
    symbol: &str,
    query: Option<&str>,
    now_ms: i64,
) -> Result<String, ApiError> {
    let venue = exchange_param(query)?;
    let f = list_query(query, LIQUIDATIONS_PAIR_LIMIT_DEFAULT, LIQUIDATIONS_PAIR_LIMIT_MAX)?;
    let (name, p) = pair(books, venue, symbol)?;
    let held = held(books, books.book(venue, symbol)?, f, now_ms);
    let items: Vec<(usize, Liquidation)> = passing(&held, f, now_ms).map(|l| (0, *l)).collect();
    let head = ListHead {
        symbol: Some(&name),
        exchange: venue.as_str(),
        completeness: p.completeness.as_str(),
        ts_ms: now_ms,
    };
    Ok(perp_json::liquidations_body(&head, &items, |_| ""))
}

/// The body of `GET /v1/liquidations`: the venue's newest across its pairs, each with its
/// `symbol`.
pub(super) fn liquidations_bulk(books: &Books, query: Option<&str>, now_ms: i64) -> Result<String, ApiError> {
    let venue = exchange_param(query)?;
    let f = list_query(query, LIQUIDATIONS_VENUE_LIMIT_DEFAULT, LIQUIDATIONS_VENUE_LIMIT_MAX)?;
    let pairs = pairs(books, venue, None);
    let lists: Vec<Vec<Liquidation>> = pairs.iter().map(|(id, _)| held(books, *id, f, now_ms)).collect();
    let items = newest(&lists, f, now_ms);
    let registry = books.shared.registry();
    let completeness = Completeness::of(venue).as_str();
    let head = ListHead { symbol: None, exchange: venue.as_str(), completeness, ts_ms: now_ms };
    Ok(perp_json::liquidations_body(&head, &items, |k| registry.get(pairs[k].0).symbol.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::perp_window::PositionSide;

    fn err(r: Result<LiqFilter, ApiError>) -> (u16, String) {
        let e = r.expect_err("refused");
        (e.status.as_u16(), e.message)
    }

    fn pair_query(q: &str) -> Result<LiqFilter, ApiError> {
        list_query(Some(q), LIQUIDATIONS_PAIR_LIMIT_DEFAULT, LIQUIDATIONS_PAIR_LIMIT_MAX)
    }

    fn list(recent: Vec<(PositionSide, f64, i64)>) -> Vec<Liquidation> {
        recent.into_iter().map(|(side, usd, time_ms)| Liquidation { side, price: usd, qty: 1.0, time_ms }).collect()
    }

    #[test]
    fn parameters_are_validated_with_what_is_allowed() {
        let d = list_query(None, LIQUIDATIONS_PAIR_LIMIT_DEFAULT, LIQUIDATIONS_PAIR_LIMIT_MAX).expect("defaults");
        assert_eq!(d, LiqFilter { side: None, min_usd: 0.0, limit: 50 });
        let v = list_query(None, LIQUIDATIONS_VENUE_LIMIT_DEFAULT, LIQUIDATIONS_VENUE_LIMIT_MAX).expect("defaults");
        assert_eq!(v.limit, 100);
        let q = pair_query("side=short&min_usd=2500.5&limit=128").expect("valid");
        assert_eq!(q, LiqFilter { side: Some(PositionSide::Short), min_usd: 2_500.5, limit: 128 });
        assert_eq!(pair_query("side=any").expect("any").side, None);
        assert_eq!(pair_query("side=long").expect("long").side, Some(PositionSide::Long));
        for bad in ["buy", "LONG", ""] {
            let message = format!("invalid side '{bad}'. Allowed: long, short, any");
            assert_eq!(err(pair_query(&format!("side={bad}"))), (422, message));
        }
        for bad in ["-1", "x", "inf", "NaN", ""] {
            let message = format!("invalid min_usd '{bad}'. Allowed: a number of USD from 0");
            assert_eq!(err(pair_query(&format!("min_usd={bad}"))), (422, message));
        }
        for bad in ["0", "129", "x", "-1"] {
            let message = format!("invalid limit '{bad}'. Allowed: 1 to 128");
            assert_eq!(err(pair_query(&format!("limit={bad}"))), (422, message));
        }
        let venue = list_query(Some("limit=501"), LIQUIDATIONS_VENUE_LIMIT_DEFAULT, LIQUIDATIONS_VENUE_LIMIT_MAX);
        assert_eq!(err(venue), (422, "invalid limit '501'. Allowed: 1 to 500".into()));
    }

    #[test]
    fn a_pair_list_filters_and_cuts_at_a_day() {
        let day = rampart_engine::perp_book::RECENT_KEEP_MS;
        let p = list(vec![
            (PositionSide::Long, 500.0, day + 3_000),
            (PositionSide::Short, 5_000.0, day + 2_000),
            (PositionSide::Long, 9_000.0, 1_000),
            (PositionSide::Long, 9_000.0, 999),
        ]);
        let times = |q: &str| -> Vec<i64> {
            passing(&p, pair_query(q).expect("valid"), day + 1_000).map(|l| l.time_ms).collect()
        };
        assert_eq!(times(""), [day + 3_000, day + 2_000, 1_000], "exactly a day old is kept, older is not");
        assert_eq!(times("side=long"), [day + 3_000, 1_000]);
        assert_eq!(times("min_usd=5000"), [day + 2_000, 1_000]);
        assert_eq!(times("side=short&min_usd=5000.01"), Vec::<i64>::new());
        assert_eq!(times("limit=1"), [day + 3_000]);
    }

    #[test]
    fn the_venue_list_keeps_the_newest_across_pairs() {
        let a = list(vec![(PositionSide::Long, 100.0, 50), (PositionSide::Short, 200.0, 30)]);
        let b = list(vec![
            (PositionSide::Short, 300.0, 60),
            (PositionSide::Long, 400.0, 50),
            (PositionSide::Long, 500.0, 10),
        ]);
        let f = |q: &str| {
            list_query(Some(q), LIQUIDATIONS_VENUE_LIMIT_DEFAULT, LIQUIDATIONS_VENUE_LIMIT_MAX).expect("valid")
        };
        let got = |q: &str| -> Vec<(usize, i64)> {
            newest(&[a.clone(), b.clone()], f(q), 100).iter().map(|(k, l)| (*k, l.time_ms)).collect()
        };
        assert_eq!(got(""), [(1, 60), (0, 50), (1, 50), (0, 30), (1, 10)], "ties: the earlier pair first");
        assert_eq!(got("limit=3"), [(1, 60), (0, 50), (1, 50)]);
        assert_eq!(got("side=long&limit=2"), [(0, 50), (1, 50)]);
        assert_eq!(got("min_usd=250"), [(1, 60), (1, 50), (1, 10)]);
        assert!(newest(&[], f(""), 100).is_empty());
    }
}
