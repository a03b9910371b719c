//! Each venue's names for the candle timeframes (venues.md §1.3, §2.3, §3.3, §4.3): the REST
//! candle routes' `interval` (Binance, Bybit), `bar` (OKX) and `granularity` (Bitget), and the
//! WebSocket candle channels of OKX and Bitget. Written once, here, for the adapters that
//! ask for candles and for the simulator that answers them.
//!
//! Days and weeks are the venues' UTC-aligned ones (`1Dutc`, `1Wutc` on OKX and Bitget), as
//! rampart's buckets are.

use crate::candle::Timeframe;
use crate::Venue;

/// `venue`'s REST name for `tf`.
pub fn rest_name(venue: Venue, tf: Timeframe) -> &'static str {
    use Timeframe::{D1, H1, H4, M15, M5, W1};
    match (venue, tf) {
        (Venue::Binance, _) => tf.as_str(),
        (Venue::Bybit, M5) => "5",
        (Venue::Bybit, M15) => "15",
        (Venue::Bybit, H1) => "60",
        (Venue::Bybit, H4) => "240",
        (Venue::Bybit, D1) => "D",
        (Venue::Bybit, W1) => "W",
        (Venue::Okx, M5) => "5m",
        (Venue::Okx, M15) => "15m",
        (Venue::Okx, H1) => "1H",
        (Venue::Okx, H4) => "4H",
        (Venue::Okx, D1) => "1Dutc",
        (Venue::Okx, W1) => "1Wutc",
        (Venue::Bitget, M5) => "5min",
        (Venue::Bitget, M15) => "15min",
        (Venue::Bitget, H1) => "1h",
        (Venue::Bitget, H4) => "4h",
        (Venue::Bitget, D1) => "1Dutc",
        (Venue::Bitget, W1) => "1Wutc",
    }
}

/// The timeframe `venue` names `name` on its REST candle route, if any.
pub fn rest_timeframe(venue: Venue, name: &str) -> Option<Timeframe> {
    Timeframe::ALL.into_iter().find(|&tf| rest_name(venue, tf) == name)
}

/// The WebSocket candle channel for `tf` on OKX and Bitget, which name them alike: `candle` and
/// OKX's bar (`candle5m`, `candle1H`, `candle1Dutc`). rampart reads no candle channel of Binance
/// or Bybit.
pub fn ws_channel(tf: Timeframe) -> &'static str {
    match tf {
        Timeframe::M5 => "candle5m",
        Timeframe::M15 => "candle15m",
        Timeframe::H1 => "candle1H",
        Timeframe::H4 => "candle4H",
        Timeframe::D1 => "candle1Dutc",
        Timeframe::W1 => "candle1Wutc",
    }
}

/// The timeframe of the OKX or Bitget candle channel `channel`, if any.
pub fn ws_timeframe(channel: &str) -> Option<Timeframe> {
    Timeframe::ALL.into_iter().find(|&tf| ws_channel(tf) == channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_timeframe() {
        for venue in Venue::ALL {
            for tf in Timeframe::ALL {
                assert_eq!(rest_timeframe(venue, rest_name(venue, tf)), Some(tf), "{venue:?} {tf:?}");
            }
        }
        for tf in Timeframe::ALL {
            assert_eq!(ws_timeframe(ws_channel(tf)), Some(tf), "{tf:?}");
            assert_eq!(ws_channel(tf).strip_prefix("candle"), Some(rest_name(Venue::Okx, tf)), "OKX's bar");
        }
        assert_eq!(rest_timeframe(Venue::Okx, "1D"), None, "OKX's Hong Kong day is not rampart's");
        assert_eq!(ws_timeframe("candle1m"), None);
    }
}
