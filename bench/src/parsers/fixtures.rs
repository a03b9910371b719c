//! The frames measured: the engine's fixtures (Binance, Bybit, OKX), the Bitget frames of
//! venues.md §4.2–4.3, and a synthetic deep Binance REST snapshot.

use rampart_engine::Venue;

use super::frame::FrameKind;

/// Levels per side of the synthetic deep snapshot.
pub const DEEP_SNAPSHOT_LEVELS: usize = 1_000;

/// One frame to decode.
#[derive(Clone, Debug)]
pub struct Case {
    /// The venue that sends it.
    pub venue: Venue,
    /// Its kind.
    pub kind: FrameKind,
    /// Where it comes from (fixture file or venues.md section).
    pub source: &'static str,
    /// The bytes of the WebSocket message (or REST body).
    pub bytes: Vec<u8>,
}

/// Bitget `books5` snapshot, the real recording of venues.md §4.2 (Aug 2026), on one line.
const BITGET_BOOKS5_RECORDED: &str = concat!(
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books5","instId":"BTCUSDT"},"#,
    r#""data":[{"asks":[["64024.38","1.753445"],["64024.44","0.01"],["64025","0.02"],"#,
    r#"["64025.58","0.058251"],["64026.18","0.069907"]],"#,
    r#""bids":[["64024.37","0.178298"],["64024.36","0.01"],["64022.95","0.004874"],"#,
    r#"["64022.67","0.007817"],["64022.3","0.029133"]],"#,
    r#""ts":"1786538865366","seq":711330212481,"pseq":0}],"ts":1786538865369}"#
);

/// Bitget book push, the documented shape of venues.md §4.2 (with `checksum`), on one line.
const BITGET_BOOKS5_DOC: &str = concat!(
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books5","instId":"BTCUSDT"},"#,
    r#""data":[{"asks":[["26274.9","0.0009"],["26275.0","0.0500"]],"#,
    r#""bids":[["26274.8","0.0009"],["26274.7","0.0027"]],"#,
    r#""checksum":0,"seq":123,"ts":"1695710946294"}],"ts":1695710946294}"#
);

/// Bitget `trade` push, venues.md §4.3.
const BITGET_TRADE_DOC: &str = concat!(
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"trade","instId":"BTCUSDT"},"#,
    r#""data":[{"ts":"1695709835822","price":"26293.4","size":"0.0013","side":"buy","tradeId":"1000000000"}],"#,
    r#""ts":1695711090682}"#
);

/// A Binance REST depth snapshot of `levels` levels a side, in Binance's format (8 decimals),
/// around 64 000: the shape of `snapshot_rest.json` at a realistic depth.
pub fn deep_binance_snapshot(levels: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut s = String::with_capacity(64 + levels * 2 * 34);
    s.push_str(r#"{"lastUpdateId":71823645012,"bids":["#);
    for side in 0..2 {
        for i in 0..levels {
            let cents = if side == 0 { 6_400_000 - i as u64 } else { 6_400_001 + i as u64 };
            let qty = 100_000 + (i as u64 * 7_919_131) % 900_000_000;
            let comma = if i + 1 < levels { "," } else { "" };
            let _ = write!(
                s,
                r#"["{}.{:02}000000","{}.{:08}"]{comma}"#,
                cents / 100,
                cents % 100,
                qty / 100_000_000,
                qty % 100_000_000
            );
        }
        s.push_str(if side == 0 { r#"],"asks":["# } else { "]}" });
    }
    s.into_bytes()
}

/// The frames measured: per venue a book diff, a book snapshot and a trade (Bitget documents no
/// `books` update frame: its two documented book pushes are both snapshots), plus one synthetic
/// deep Binance snapshot.
pub fn cases() -> Vec<Case> {
    macro_rules! fixture {
        ($venue:ident, $kind:ident, $file:literal) => {
            Case {
                venue: Venue::$venue,
                kind: FrameKind::$kind,
                source: $file,
                bytes: include_bytes!(concat!("../../../engine/tests/fixtures/", $file)).to_vec(),
            }
        };
    }
    vec![
        fixture!(Binance, BookDiff, "binance/depth_update_combined.json"),
        fixture!(Binance, BookSnapshot, "binance/snapshot_rest.json"),
        fixture!(Binance, Trade, "binance/trade_combined.json"),
        Case {
            venue: Venue::Binance,
            kind: FrameKind::BookSnapshot,
            source: "synthetic REST snapshot, 1000 levels a side",
            bytes: deep_binance_snapshot(DEEP_SNAPSHOT_LEVELS),
        },
        fixture!(Bybit, BookDiff, "bybit/orderbook_delta.json"),
        fixture!(Bybit, BookSnapshot, "bybit/orderbook_snapshot.json"),
        fixture!(Bybit, Trade, "bybit/public_trade.json"),
        fixture!(Okx, BookDiff, "okx/books_update.json"),
        fixture!(Okx, BookSnapshot, "okx/books_snapshot.json"),
        fixture!(Okx, Trade, "okx/trades.json"),
        Case {
            venue: Venue::Bitget,
            kind: FrameKind::BookSnapshot,
            source: "venues.md §4.2 books5 recording",
            bytes: BITGET_BOOKS5_RECORDED.as_bytes().to_vec(),
        },
        Case {
            venue: Venue::Bitget,
            kind: FrameKind::BookSnapshot,
            source: "venues.md §4.2 documented push",
            bytes: BITGET_BOOKS5_DOC.as_bytes().to_vec(),
        },
        Case {
            venue: Venue::Bitget,
            kind: FrameKind::Trade,
            source: "venues.md §4.3",
            bytes: BITGET_TRADE_DOC.as_bytes().to_vec(),
        },
    ]
}
