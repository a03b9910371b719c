//! The wall history's query and answers (`GET /v1/walls/{symbol}/history` and `GET
//! /v1/walls/history`, issue #48): the parameters validated as every `/v1` read validates
//! them (422 naming the value and what is allowed), and the walls picked, newest first, from the
//! histories the shards publish (`rampart_state::wall_history`). `MarketApi` answers the routes.
//!
//! Bound: an answer holds at most [`WALL_HISTORY_LIMIT_MAX`] walls; the venue-wide answer keeps
//! only the newest `limit` while it reads the books (a heap of `limit`), so its memory does not
//! grow with the venue.

use std::cmp::Reverse;

use rampart_engine::wall_life::{WallOutcome, WallRecord};
use rampart_engine::Side;
use rampart_state::json::Json;
use rampart_state::market_json::write_wall_record;
use rampart_state::wall_history::WallHistory;

use super::answer::{clip, count_param, query_param, unprocessable, ApiError};
use super::newest::Newest;

/// Walls an answer holds when `limit` is not given.
pub const WALL_HISTORY_LIMIT_DEFAULT: usize = 100;
/// Most walls an answer holds (`limit`); a larger `limit` is a 422.
pub const WALL_HISTORY_LIMIT_MAX: usize = 500;

/// What a history request asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct HistoryQuery {
    side: Option<Side>,
    outcome: Option<WallOutcome>,
    min_usd: Option<f64>,
    limit: usize,
}

fn outcome_param(query: Option<&str>) -> Result<Option<WallOutcome>, ApiError> {
    let Some(s) = query_param(query, "outcome") else { return Ok(None) };
    WallOutcome::parse(&s)
        .map(Some)
        .ok_or_else(|| unprocessable(format!("invalid outcome '{}'. Allowed: {}", clip(&s, 64), WallOutcome::ALLOWED)))
}

/// `side`, `outcome` and `limit` of `GET /v1/walls/{symbol}/history`.
pub(super) fn pair_query(query: Option<&str>) -> Result<HistoryQuery, ApiError> {
    let side = match query_param(query, "side") {
        None => None,
        Some(s) => Some(
            Side::parse(&s)
                .ok_or_else(|| unprocessable(format!("invalid side '{}'. Allowed: {}", clip(&s, 64), Side::ALLOWED)))?,
        ),
    };
    let outcome = outcome_param(query)?;
    let limit = count_param(query, "limit", WALL_HISTORY_LIMIT_DEFAULT, WALL_HISTORY_LIMIT_MAX)?;
    Ok(HistoryQuery { side, outcome, min_usd: None, limit })
}

/// `outcome`, `min_usd` and `limit` of `GET /v1/walls/history`.
pub(super) fn venue_query(query: Option<&str>) -> Result<HistoryQuery, ApiError> {
    let outcome = outcome_param(query)?;
    let min_usd = match query_param(query, "min_usd") {
        None => None,
        Some(s) => Some(s.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| {
            unprocessable(format!("invalid min_usd '{}'. Allowed: a number of USD from 0", clip(&s, 64)))
        })?),
    };
    let limit = count_param(query, "limit", WALL_HISTORY_LIMIT_DEFAULT, WALL_HISTORY_LIMIT_MAX)?;
    Ok(HistoryQuery { side: None, outcome, min_usd, limit })
}

impl HistoryQuery {
    /// True when `r` is a wall the request asks for (a wall without a USD value never passes a
    /// `min_usd`).
    fn passes(&self, r: &WallRecord) -> bool {
        self.side.is_none_or(|s| s == r.side)
            && self.outcome.is_none_or(|o| o == r.outcome)
            && self.min_usd.is_none_or(|m| r.max_usd.is_some_and(|u| u >= m))
    }
}

/// `{"symbol":..,"data":[wall…]}`: the pair's walls shown at `now_ms` that pass `q`, newest first.
pub(super) fn pair_body(symbol: &str, history: &WallHistory, q: &HistoryQuery, now_ms: i64) -> String {
    let mut j = Json::with_capacity(64 + q.limit.min(history.open.len() + history.ended.len()) * 180);
    j.raw("{\"symbol\":").str(symbol).raw(",\"data\":[");
    for (i, r) in history.newest_first(now_ms).filter(|r| q.passes(r)).take(q.limit).enumerate() {
        if i > 0 {
            j.raw(",");
        }
        write_wall_record(&mut j, r, None);
    }
    j.raw("]}");
    j.finish()
}

/// The newest `q.limit` walls of `histories` (one per book, in symbol order) that pass `q`,
/// newest first, each with the index of its book. A book's walls come newest first, so once one
/// is older than the oldest kept of a full answer, the rest of that book is skipped.
pub(super) fn newest(histories: &[&WallHistory], q: &HistoryQuery, now_ms: i64) -> Vec<(usize, WallRecord)> {
    // Newer (last seen, then first seen) is greater; ties go to the earlier book in symbol
    // order, then the lower price.
    let mut kept = Newest::new(q.limit);
    for (book, h) in histories.iter().enumerate() {
        for r in h.newest_first(now_ms).filter(|r| q.passes(r)) {
            if kept.floor().is_some_and(|lowest: &(i64, i64, Reverse<usize>, Reverse<i64>)| r.last_seen_ms < lowest.0) {
                break;
            }
            kept.offer((r.last_seen_ms, r.first_seen_ms, Reverse(book), Reverse(r.price.0)), (book, *r));
        }
    }
    kept.newest_first().into_iter().map(|(_, item)| item).collect()
}

/// `{"exchange":..,"ts":..,"data":[wall with "symbol"…]}` of `walls` (as [`newest`] picked them),
/// `symbol_of` naming each one's book.
pub(super) fn venue_body<'a>(
    exchange: &str,
    walls: &[(usize, WallRecord)],
    symbol_of: impl Fn(usize) -> &'a str,
    now_ms: i64,
) -> String {
    let mut j = Json::with_capacity(64 + walls.len() * 200);
    j.raw("{\"exchange\":").str(exchange).raw(",\"ts\":").int(now_ms).raw(",\"data\":[");
    for (i, (book, r)) in walls.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        write_wall_record(&mut j, r, Some(symbol_of(*book)));
    }
    j.raw("]}");
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::Price;
    use std::sync::Arc;

    fn record(side: Side, price: i64, first: i64, last: i64, outcome: WallOutcome, usd: Option<f64>) -> WallRecord {
        WallRecord {
            side,
            price: Price(price),
            first_seen_ms: first,
            last_seen_ms: last,
            max_usd: usd,
            max_ratio: 12.5,
            executed_usd: usd.map(|_| 0.0),
            outcome,
        }
    }

    fn history(open: Vec<WallRecord>, ended: Vec<WallRecord>) -> WallHistory {
        WallHistory { ts_ms: 0, open, ended: Arc::from(ended), ended_total: 0 }
    }

    fn err(r: Result<HistoryQuery, ApiError>) -> (u16, String) {
        let e = r.expect_err("refused");
        (e.status.as_u16(), e.message)
    }

    #[test]
    fn parameters_are_validated_with_what_is_allowed() {
        let q = pair_query(None).expect("defaults");
        assert_eq!(q, HistoryQuery { side: None, outcome: None, min_usd: None, limit: 100 });
        let q = pair_query(Some("side=ask&outcome=filled&limit=500")).expect("valid");
        assert_eq!((q.side, q.outcome, q.limit), (Some(Side::Ask), Some(WallOutcome::Filled), 500));
        assert_eq!(err(pair_query(Some("side=buy"))), (422, "invalid side 'buy'. Allowed: bid, ask".into()));
        assert_eq!(
            err(pair_query(Some("outcome=gone"))),
            (422, "invalid outcome 'gone'. Allowed: open, filled, pulled".into())
        );
        for bad in ["0", "501", "x", "-1"] {
            let message = format!("invalid limit '{bad}'. Allowed: 1 to 500");
            assert_eq!(err(pair_query(Some(&format!("limit={bad}")))), (422, message));
        }
        let q = venue_query(Some("min_usd=2500.5&outcome=open")).expect("valid");
        assert_eq!((q.min_usd, q.outcome), (Some(2_500.5), Some(WallOutcome::Open)));
        for bad in ["-1", "x", "inf", "NaN"] {
            let message = format!("invalid min_usd '{bad}'. Allowed: a number of USD from 0");
            assert_eq!(err(venue_query(Some(&format!("min_usd={bad}")))), (422, message));
        }
    }

    #[test]
    fn a_pair_answer_filters_and_cuts_at_the_limit() {
        let h = history(
            vec![record(Side::Bid, 90, 5_000, 10_000, WallOutcome::Open, Some(1_000.0))],
            vec![
                record(Side::Ask, 110, 4_000, 8_000, WallOutcome::Filled, Some(2_000.0)),
                record(Side::Bid, 80, 1_000, 6_000, WallOutcome::Pulled, None),
            ],
        );
        let q = |s| pair_query(Some(s)).expect("valid");
        let body: serde_json::Value =
            serde_json::from_str(&pair_body("BTCUSDT", &h, &q("limit=100"), 10_000)).expect("json");
        assert_eq!(body["symbol"], "BTCUSDT");
        let outcomes: Vec<&str> =
            body["data"].as_array().into_iter().flatten().filter_map(|w| w["outcome"].as_str()).collect();
        assert_eq!(outcomes, ["open", "filled", "pulled"]);
        assert_eq!(body["data"][2]["maxUsd"], serde_json::Value::Null);
        let text = pair_body("BTCUSDT", &h, &q("side=bid&limit=1"), 10_000);
        assert!(text.contains("\"outcome\":\"open\"") && !text.contains("pulled"), "{text}");
        let text = pair_body("BTCUSDT", &h, &q("outcome=filled"), 10_000);
        assert!(text.contains("\"side\":\"ask\"") && !text.contains("\"bid\""), "{text}");
    }

    #[test]
    fn the_venue_answer_keeps_the_newest_across_books() {
        let a = history(
            vec![record(Side::Bid, 90, 9_000, 20_000, WallOutcome::Open, Some(5_000.0))],
            vec![
                record(Side::Ask, 110, 4_000, 12_000, WallOutcome::Filled, Some(9_000.0)),
                record(Side::Ask, 111, 1_000, 2_000, WallOutcome::Pulled, Some(9_000.0)),
            ],
        );
        let b = history(
            vec![record(Side::Ask, 300, 15_000, 20_000, WallOutcome::Open, Some(100.0))],
            vec![record(Side::Bid, 250, 3_000, 14_000, WallOutcome::Pulled, Some(8_000.0))],
        );
        let all = venue_query(Some("limit=3")).expect("valid");
        let got: Vec<(usize, i64)> = newest(&[&a, &b], &all, 20_000).iter().map(|(k, r)| (*k, r.price.0)).collect();
        assert_eq!(got, [(1, 300), (0, 90), (1, 250)], "by last seen, then first seen");
        let rich = venue_query(Some("min_usd=6000")).expect("valid");
        let got: Vec<(usize, i64)> = newest(&[&a, &b], &rich, 20_000).iter().map(|(k, r)| (*k, r.price.0)).collect();
        assert_eq!(got, [(1, 250), (0, 110), (0, 111)]);
        let pulled = venue_query(Some("outcome=pulled&limit=1")).expect("valid");
        let got = newest(&[&a, &b], &pulled, 20_000);
        assert_eq!(got.len(), 1);
        let body: serde_json::Value =
            serde_json::from_str(&venue_body("binance", &got, |k| ["AUSDT", "BUSDT"][k], 20_000)).expect("json");
        assert_eq!((&body["exchange"], &body["ts"]), (&serde_json::json!("binance"), &serde_json::json!(20_000)));
        assert_eq!(
            (&body["data"][0]["symbol"], &body["data"][0]["side"]),
            (&serde_json::json!("BUSDT"), &serde_json::json!("bid"))
        );
        assert_eq!(body["data"][0]["outcome"], "pulled");
    }
}
