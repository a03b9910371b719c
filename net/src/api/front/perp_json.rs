//! The bodies of the derivatives reads (`decisions.md` §17 "Data"): `GET /v1/perp/{symbol}`,
//! `GET /v1/perp`, `GET /v1/liquidations/{symbol}` and `GET /v1/liquidations`, written from the
//! [`PerpSnapshot`]s the shards publish. Pure: the snapshot, the names and the time come in, text
//! comes out; `perp_api` picks what goes in.
//!
//! Numbers and the Liquidation object as `rampart_state::perp_json` writes them (shared with the
//! alerts' firing bodies).

use rampart_engine::perp_book::{HistorySlot, Liquidation, PerpInterval};
use rampart_state::json::Json;
use rampart_state::perp::PerpSnapshot;

use rampart_state::perp_json::{opt, write_perp_fields, BASE_DECIMALS, USD_DECIMALS};
pub(super) use rampart_state::perp_json::{side_of_text, write_liquidation};

/// `,"perp":{"contract","multiplier"}` of a pair with a perpetual, `,"perp":null` without (the
/// symbol listings' field, `decisions.md` §17 "Data").
pub(super) fn write_perp_ref(j: &mut Json, p: Option<&PerpSnapshot>) {
    j.raw(",\"perp\":");
    match p {
        Some(p) => {
            j.raw("{\"contract\":").str(&p.contract).raw(",\"multiplier\":").int(i64::from(p.multiplier)).raw("}");
        }
        None => {
            j.raw("null");
        }
    }
}

/// `GET /v1/perp/{symbol}/history`: `{"symbol","exchange","interval","slotMs","data":[{"time",
/// "oiBase","oiUsd","longUsd","shortUsd","longCount","shortCount"}]}`, `null` where rampart had
/// not watched (`oiUsd` also without a spot price then: `HistorySlot::valued`).
pub(super) fn history_body(symbol: &str, exchange: &str, window: PerpInterval, slots: &[HistorySlot]) -> String {
    let mut j = Json::with_capacity(160 + slots.len() * 150);
    j.raw("{\"symbol\":").str(symbol).raw(",\"exchange\":").str(exchange);
    j.raw(",\"interval\":").str(window.as_str()).raw(",\"slotMs\":").int(window.duration_ms() / 60);
    j.raw(",\"data\":[");
    for (i, s) in slots.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        j.raw("{\"time\":").int(s.time_ms).raw(",\"oiBase\":");
        opt(&mut j, s.oi_base, BASE_DECIMALS).raw(",\"oiUsd\":");
        opt(&mut j, s.oi_usd, USD_DECIMALS).raw(",\"longUsd\":");
        let l = s.liquidations;
        opt(&mut j, l.map(|l| l.long_usd), USD_DECIMALS).raw(",\"shortUsd\":");
        opt(&mut j, l.map(|l| l.short_usd), USD_DECIMALS).raw(",\"longCount\":");
        match l {
            Some(l) => j.int(i64::from(l.long_count)).raw(",\"shortCount\":").int(i64::from(l.short_count)),
            None => j.raw("null,\"shortCount\":null"),
        };
        j.raw("}");
    }
    j.raw("]}");
    j.finish()
}

/// `GET /v1/perp/{symbol}`: `{"symbol","exchange","ts","data":{…}}`, `ts` the snapshot's time.
pub(super) fn perp_body(symbol: &str, exchange: &str, p: &PerpSnapshot) -> String {
    let mut j = Json::with_capacity(512);
    j.raw("{\"symbol\":").str(symbol).raw(",\"exchange\":").str(exchange);
    j.raw(",\"ts\":").int(p.ts_ms).raw(",\"data\":{");
    write_perp_fields(&mut j, p);
    j.raw("}}");
    j.finish()
}

/// `GET /v1/perp`: `{"exchange","ts","data":[{"symbol",…}]}` of `pairs` (symbol, snapshot), in
/// the order given; `ts` the answer's time.
pub(super) fn perp_bulk_body(exchange: &str, now_ms: i64, pairs: &[(&str, &PerpSnapshot)]) -> String {
    let mut j = Json::with_capacity(64 + pairs.len() * 480);
    j.raw("{\"exchange\":").str(exchange).raw(",\"ts\":").int(now_ms).raw(",\"data\":[");
    for (i, (symbol, p)) in pairs.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        j.raw("{\"symbol\":").str(symbol).raw(",");
        write_perp_fields(&mut j, p);
        j.raw("}");
    }
    j.raw("]}");
    j.finish()
}

/// What a liquidations answer is about: one pair (`symbol`) or a venue (`None`).
pub(super) struct ListHead<'a> {
    pub(super) symbol: Option<&'a str>,
    pub(super) exchange: &'a str,
    /// The venue's completeness text (`Completeness::as_str`).
    pub(super) completeness: &'a str,
    pub(super) ts_ms: i64,
}

/// `GET /v1/liquidations/{symbol}` (`{"symbol","exchange","completeness","ts","data":[…]}`) and
/// `GET /v1/liquidations` (no `symbol`; each entry with its own): `items` as given, each with
/// the symbol `symbol_of` names when the answer is a venue's.
pub(super) fn liquidations_body<'a>(
    head: &ListHead<'_>,
    items: &[(usize, Liquidation)],
    symbol_of: impl Fn(usize) -> &'a str,
) -> String {
    let mut j = Json::with_capacity(128 + items.len() * 110);
    j.raw("{");
    if let Some(s) = head.symbol {
        j.raw("\"symbol\":").str(s).raw(",");
    }
    j.raw("\"exchange\":").str(head.exchange).raw(",\"completeness\":").str(head.completeness);
    j.raw(",\"ts\":").int(head.ts_ms).raw(",\"data\":[");
    for (i, (book, l)) in items.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        let symbol = head.symbol.is_none().then(|| symbol_of(*book));
        write_liquidation(&mut j, l, symbol);
    }
    j.raw("]}");
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::perp_book::{Completeness, FundingNow, OiNow};
    use rampart_engine::perp_window::PositionSide;
    use rampart_state::perp_json::side_text;

    fn liquidation(side: PositionSide, price: f64, qty: f64, time_ms: i64) -> Liquidation {
        Liquidation { side, price, qty, time_ms }
    }

    fn bare() -> PerpSnapshot {
        PerpSnapshot {
            contract: "1000PEPEUSDT".into(),
            multiplier: 1000,
            completeness: Completeness::LargestPerSecond,
            mark: None,
            oi: None,
            funding: None,
            last: None,
            ts_ms: 1_763_650_000_000,
        }
    }

    fn full() -> PerpSnapshot {
        PerpSnapshot {
            contract: "BTCUSDT".into(),
            multiplier: 1,
            completeness: Completeness::All,
            mark: Some(94_210.123_456_789),
            oi: Some(OiNow {
                base: 81_234.123_456_789,
                usd: Some(7_653_000_123.456),
                time_ms: 1_763_649_999_000,
                stale: false,
            }),
            funding: Some(FundingNow {
                rate: 0.037_512_345,
                rate8h: 0.075_024_69,
                interval_h: 4,
                next_ms: 1_763_654_400_000,
                time_ms: 1_763_649_999_500,
                stale: true,
            }),
            last: Some(liquidation(PositionSide::Long, 94_210.0, 0.5, 1_763_650_000_123)),
            ts_ms: 1_763_650_000_200,
        }
    }

    #[test]
    fn a_pair_not_yet_known_answers_nulls() {
        assert_eq!(
            perp_body("PEPEUSDT", "binance", &bare()),
            concat!(
                r#"{"symbol":"PEPEUSDT","exchange":"binance","ts":1763650000000,"data":{"contract":"1000PEPEUSDT","#,
                r#""multiplier":1000,"markPrice":null,"oi":null,"funding":null,"#,
                r#""liquidations":{"completeness":"largest_per_second","last":null}}}"#
            )
        );
    }

    #[test]
    fn a_known_pair_answers_every_field_with_its_decimals() {
        assert_eq!(
            perp_body("BTCUSDT", "bybit", &full()),
            concat!(
                r#"{"symbol":"BTCUSDT","exchange":"bybit","ts":1763650000200,"data":{"contract":"BTCUSDT","#,
                r#""multiplier":1,"markPrice":94210.12345679,"#,
                r#""oi":{"base":81234.12345679,"usd":7653000123.46,"time":1763649999000,"stale":false},"#,
                r#""funding":{"rate":0.037512,"rate8h":0.075025,"intervalH":4,"nextTime":1763654400000,"#,
                r#""time":1763649999500,"stale":true},"#,
                r#""liquidations":{"completeness":"all","#,
                r#""last":{"side":"long","price":94210,"qty":0.5,"usd":47105,"time":1763650000123}}}}"#
            )
        );
    }

    #[test]
    fn oi_without_a_usd_figure_is_null_there() {
        let mut p = bare();
        p.oi = Some(OiNow { base: 12.5, usd: None, time_ms: 7, stale: true });
        let body = perp_body("PEPEUSDT", "okx", &p);
        assert!(body.contains(r#""oi":{"base":12.5,"usd":null,"time":7,"stale":true}"#), "{body}");
    }

    #[test]
    fn the_venue_answer_flattens_each_pair_after_its_symbol() {
        let (a, b) = (full(), bare());
        let body = perp_bulk_body("binance", 42, &[("BTCUSDT", &a), ("PEPEUSDT", &b)]);
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!((&v["exchange"], &v["ts"]), (&serde_json::json!("binance"), &serde_json::json!(42)));
        assert_eq!(v["data"][0]["symbol"], "BTCUSDT");
        assert_eq!(v["data"][0]["liquidations"]["last"]["side"], "long");
        assert_eq!(v["data"][1]["contract"], "1000PEPEUSDT");
        assert!(body.ends_with(r#""liquidations":{"completeness":"largest_per_second","last":null}}]}"#), "{body}");
        assert_eq!(perp_bulk_body("okx", 1, &[]), r#"{"exchange":"okx","ts":1,"data":[]}"#);
    }

    #[test]
    fn liquidation_lists_name_the_pair_once_or_each_entry() {
        let held = [
            liquidation(PositionSide::Long, 94_210.0, 0.5, 1_763_650_000_123),
            liquidation(PositionSide::Short, 94_300.0, 0.25, 1_763_649_990_000),
        ];
        let items: Vec<(usize, Liquidation)> = held.iter().map(|l| (0, *l)).collect();
        let head = ListHead { symbol: Some("BTCUSDT"), exchange: "bybit", completeness: "all", ts_ms: 9 };
        assert_eq!(
            liquidations_body(&head, &items, |_| "unused"),
            concat!(
                r#"{"symbol":"BTCUSDT","exchange":"bybit","completeness":"all","ts":9,"data":["#,
                r#"{"side":"long","price":94210,"qty":0.5,"usd":47105,"time":1763650000123},"#,
                r#"{"side":"short","price":94300,"qty":0.25,"usd":23575,"time":1763649990000}]}"#
            )
        );
        let head = ListHead { symbol: None, exchange: "bybit", completeness: "all", ts_ms: 9 };
        let mixed = [(1, items[0].1), (0, items[1].1)];
        assert_eq!(
            liquidations_body(&head, &mixed, |k| ["AUSDT", "BUSDT"][k]),
            concat!(
                r#"{"exchange":"bybit","completeness":"all","ts":9,"data":["#,
                r#"{"symbol":"BUSDT","side":"long","price":94210,"qty":0.5,"usd":47105,"time":1763650000123},"#,
                r#"{"symbol":"AUSDT","side":"short","price":94300,"qty":0.25,"usd":23575,"time":1763649990000}]}"#
            )
        );
        let bitget = ListHead { symbol: Some("BTCUSDT"), exchange: "bitget", completeness: "none", ts_ms: 3 };
        assert_eq!(
            liquidations_body(&bitget, &[], |_| "unused"),
            r#"{"symbol":"BTCUSDT","exchange":"bitget","completeness":"none","ts":3,"data":[]}"#
        );
    }

    #[test]
    fn sides_have_one_text_each_way() {
        for s in [PositionSide::Long, PositionSide::Short] {
            assert_eq!(side_of_text(side_text(s)), Some(s));
        }
        assert_eq!((side_of_text("any"), side_of_text("LONG"), side_of_text("")), (None, None, None));
    }
}
