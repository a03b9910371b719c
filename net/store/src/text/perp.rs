//! The texts of a derivatives alert's firing (`decisions.md` §17, "Firing body", "Telegram and
//! templates"): the `trigger`'s `liquidation`, `liquidations`, `oi` or `funding` object, the
//! default sentence, and the values of `{{liq_usd}}`, `{{oi_change}}` and `{{funding}}`.
//!
//! Numbers as the data endpoints write them (`rampart_state::perp_json`): USD with 2 decimals,
//! base units with 8, rates with 6; `changePct` with 4 (§17's example). Choices where §17 is
//! silent: a sentence names the alert as every other type's does ("oi alert #7: …"), after the
//! pair and venue line every Telegram message starts with; `{{liq_usd}}` is the liquidation's
//! (or the sum's) value in words (`$5.2M`), `{{oi_change}}` the signed change with 2 decimals
//! (`+8.21%`), `{{funding}}` `rate8h` with 4 (`0.0750%`).

use rampart_engine::firing::PerpTrigger;
use rampart_engine::perp_alert::LiqDirection;
use rampart_engine::perp_book::Completeness;
use rampart_engine::Venue;
use rampart_state::json::Json;
use rampart_state::perp_json::{opt, side_text, write_liquidation, write_liquidation_open};
use rampart_state::perp_json::{BASE_DECIMALS, RATE_DECIMALS, USD_DECIMALS};

use super::words::usd_words;

/// Decimals of `changePct`.
const CHANGE_DECIMALS: usize = 4;

/// Writes `,"liquidation":{…}` (or `liquidations`, `oi`, `funding`) into a trigger left open.
pub fn write_trigger(j: &mut Json, venue: Venue, t: &PerpTrigger) {
    let completeness = Completeness::of(venue).as_str();
    match t {
        PerpTrigger::Order { liquidation, count } => {
            j.raw(",\"liquidation\":");
            write_liquidation_open(j, liquidation, None);
            j.raw(",\"count\":").int(i64::from(*count)).raw(",\"completeness\":").str(completeness).raw("}");
        }
        PerpTrigger::Sum { side, sum_usd, count, window, from_ms, last } => {
            j.raw(",\"liquidations\":{\"side\":").str(side.as_str());
            j.raw(",\"sumUsd\":").float(*sum_usd, USD_DECIMALS).raw(",\"count\":").int(i64::from(*count));
            j.raw(",\"window\":").str(window.as_str()).raw(",\"from\":").int(*from_ms);
            j.raw(",\"completeness\":").str(completeness).raw(",\"last\":");
            match last {
                Some(l) => write_liquidation(j, l, None),
                None => {
                    j.raw("null");
                }
            }
            j.raw("}");
        }
        PerpTrigger::Oi { base, usd, change_pct, window, from_base, from_ms } => {
            j.raw(",\"oi\":{\"base\":").float(*base, BASE_DECIMALS).raw(",\"usd\":");
            opt(j, *usd, USD_DECIMALS);
            j.raw(",\"changePct\":").float(*change_pct, CHANGE_DECIMALS);
            j.raw(",\"window\":").str(window.as_str()).raw(",\"fromBase\":").float(*from_base, BASE_DECIMALS);
            j.raw(",\"fromTime\":").int(*from_ms).raw("}");
        }
        PerpTrigger::Funding { rate, rate8h, interval_h, next_ms } => {
            j.raw(",\"funding\":{\"rate\":").float(*rate, RATE_DECIMALS);
            j.raw(",\"rate8h\":").float(*rate8h, RATE_DECIMALS).raw(",\"intervalH\":").int(i64::from(*interval_h));
            j.raw(",\"nextTime\":").int(*next_ms).raw("}");
        }
    }
}

/// What happened, in words, after "`kind` alert #`id`: " (`price`: the pair's last trade, as
/// the API writes it).
pub fn sentence(venue: Venue, t: &PerpTrigger, price: &str) -> String {
    match t {
        PerpTrigger::Order { liquidation, count } => format!(
            "{} {} liquidated at {} ({count} {}{}), price {price}",
            usd_words(liquidation.usd()),
            side_text(liquidation.side),
            trim(liquidation.price),
            if *count == 1 { "order" } else { "orders" },
            completeness_words(venue),
        ),
        PerpTrigger::Sum { side, sum_usd, count, window, .. } => {
            let whose = match side {
                LiqDirection::Long => "of longs ",
                LiqDirection::Short => "of shorts ",
                LiqDirection::Any => "",
            };
            format!(
                "{} {whose}liquidated in {} ({count} {}{}), price {price}",
                usd_words(*sum_usd),
                window.as_str(),
                if *count == 1 { "order" } else { "orders" },
                completeness_words(venue),
            )
        }
        PerpTrigger::Oi { usd, change_pct, window, .. } => {
            let to = usd.map(|u| format!(" to {}", usd_words(u))).unwrap_or_default();
            format!("open interest {change_pct:+.2} % in {}{to}, price {price}", window.as_str())
        }
        PerpTrigger::Funding { rate, rate8h, interval_h, next_ms } => {
            let per = if *interval_h == 8 { String::new() } else { format!(" ({rate:.4} % per {interval_h} h)") };
            let next = rampart_state::clock::iso8601(*next_ms);
            let at = next.get(11..16).unwrap_or("");
            format!("funding {rate8h:.4} % per 8 h{per}, next at {at} UTC, price {price}")
        }
    }
}

/// §17's note on what the venue leaves out.
fn completeness_words(venue: Venue) -> &'static str {
    match Completeness::of(venue) {
        Completeness::LargestPerSecond => ", venue sends the largest per second",
        Completeness::Partial => ", venue sends part of them",
        Completeness::All | Completeness::Unpublished => "",
    }
}

/// A price without trailing zeros (at most 8 decimals).
fn trim(v: f64) -> String {
    let s = format!("{v:.8}");
    let s = s.trim_end_matches('0');
    s.strip_suffix('.').unwrap_or(s).to_owned()
}

/// `{{liq_usd}}`: the liquidation's value (`order`) or the sum (`sum`) in words; empty for the
/// other types.
pub fn liq_usd(t: Option<&PerpTrigger>) -> String {
    match t {
        Some(PerpTrigger::Order { liquidation, .. }) => usd_words(liquidation.usd()),
        Some(PerpTrigger::Sum { sum_usd, .. }) => usd_words(*sum_usd),
        _ => String::new(),
    }
}

/// `{{oi_change}}`: `+8.21%`; empty but for `oi`.
pub fn oi_change(t: Option<&PerpTrigger>) -> String {
    match t {
        Some(PerpTrigger::Oi { change_pct, .. }) => format!("{change_pct:+.2}%"),
        _ => String::new(),
    }
}

/// `{{funding}}`: `rate8h`, `0.0750%`; empty but for `funding`.
pub fn funding(t: Option<&PerpTrigger>) -> String {
    match t {
        Some(PerpTrigger::Funding { rate8h, .. }) => format!("{rate8h:.4}%"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::perp_book::{Liquidation, PerpInterval};
    use rampart_engine::perp_window::PositionSide;

    const LAST: Liquidation =
        Liquidation { side: PositionSide::Long, price: 94_210.0, qty: 0.5, time_ms: 1_763_650_000_123 };

    fn trigger(venue: Venue, t: &PerpTrigger) -> String {
        let mut j = Json::with_capacity(256);
        j.raw("{\"x\":1");
        write_trigger(&mut j, venue, t);
        j.raw("}");
        j.finish()
    }

    #[test]
    fn the_four_objects_read_as_section_17_writes_them() {
        let window = PerpInterval::parse("5m").expect("5m");
        let sum = PerpTrigger::Sum {
            side: LiqDirection::Long,
            sum_usd: 5_210_400.0,
            count: 37,
            window,
            from_ms: 1_763_649_705_000,
            last: Some(LAST),
        };
        assert_eq!(
            trigger(Venue::Binance, &sum),
            r#"{"x":1,"liquidations":{"side":"long","sumUsd":5210400,"count":37,"window":"5m","from":1763649705000,"completeness":"largest_per_second","last":{"side":"long","price":94210,"qty":0.5,"usd":47105,"time":1763650000123}}}"#
        );
        let order = PerpTrigger::Order { liquidation: LAST, count: 2 };
        assert_eq!(
            trigger(Venue::Okx, &order),
            r#"{"x":1,"liquidation":{"side":"long","price":94210,"qty":0.5,"usd":47105,"time":1763650000123,"count":2,"completeness":"partial"}}"#
        );
        let oi = PerpTrigger::Oi {
            base: 2_275_400.0,
            usd: Some(412_302_480.0),
            change_pct: 8.2104,
            window: PerpInterval::parse("1h").expect("1h"),
            from_base: 2_102_749.0,
            from_ms: 1_763_646_450_000,
        };
        assert_eq!(
            trigger(Venue::Okx, &oi),
            r#"{"x":1,"oi":{"base":2275400,"usd":412302480,"changePct":8.2104,"window":"1h","fromBase":2102749,"fromTime":1763646450000}}"#
        );
        let f = PerpTrigger::Funding { rate: 0.0375, rate8h: 0.075, interval_h: 4, next_ms: 1_763_654_400_000 };
        assert_eq!(
            trigger(Venue::Bybit, &f),
            r#"{"x":1,"funding":{"rate":0.0375,"rate8h":0.075,"intervalH":4,"nextTime":1763654400000}}"#
        );
        let v: serde_json::Value = serde_json::from_str(&trigger(Venue::Binance, &sum)).expect("JSON");
        assert_eq!(v["liquidations"]["last"]["usd"], 47105.0);
    }

    #[test]
    fn the_default_sentences_name_the_amounts_and_what_the_venue_leaves_out() {
        let sum = PerpTrigger::Sum {
            side: LiqDirection::Long,
            sum_usd: 5_210_400.0,
            count: 37,
            window: PerpInterval::parse("5m").expect("5m"),
            from_ms: 0,
            last: None,
        };
        assert_eq!(
            sentence(Venue::Binance, &sum, "94180"),
            "$5.2M of longs liquidated in 5m (37 orders, venue sends the largest per second), price 94180"
        );
        let oi = PerpTrigger::Oi {
            base: 1.0,
            usd: Some(412_302_480.0),
            change_pct: 8.2104,
            window: PerpInterval::parse("1h").expect("1h"),
            from_base: 1.0,
            from_ms: 0,
        };
        assert_eq!(sentence(Venue::Okx, &oi, "181.2"), "open interest +8.21 % in 1h to $412.3M, price 181.2");
        let f = PerpTrigger::Funding { rate: 0.0375, rate8h: 0.075, interval_h: 4, next_ms: 1_763_654_400_000 };
        assert_eq!(
            sentence(Venue::Bybit, &f, "3210.4"),
            "funding 0.0750 % per 8 h (0.0375 % per 4 h), next at 16:00 UTC, price 3210.4"
        );
        let order = PerpTrigger::Order { liquidation: LAST, count: 1 };
        assert_eq!(sentence(Venue::Bybit, &order, "94180"), "$47K long liquidated at 94210 (1 order), price 94180");
        assert_eq!(
            (liq_usd(Some(&sum)), oi_change(Some(&oi)), funding(Some(&f))),
            ("$5.2M".into(), "+8.21%".into(), "0.0750%".into())
        );
        assert_eq!(
            (liq_usd(Some(&f)), oi_change(None), funding(Some(&oi))),
            (String::new(), String::new(), String::new())
        );
    }
}
