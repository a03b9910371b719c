//! The perpetual-frame decoders (decisions §17, venues.md §8) against the venues' documented
//! frames (fixtures under `tests/fixtures/perp/`, one file per frame, prefixed by venue, plus
//! variants and malformed frames): exact values, each venue's side convention and units, the
//! bound on items per message, every truncation and seeded mutations refused without a panic,
//! and a counting-allocator proof that decoding allocates nothing after construction.

use rampart_engine::feed::perp::binance::BinancePerpDecoder;
use rampart_engine::feed::perp::bitget::BitgetPerpDecoder;
use rampart_engine::feed::perp::bybit::BybitPerpDecoder;
use rampart_engine::feed::perp::okx::OkxPerpDecoder;
use rampart_engine::feed::perp::{
    Entry, Liquidation, PerpMessage, QtyUnit, Reply, Update, LIQUIDATIONS_PER_MESSAGE_MAX, UPDATES_PER_MESSAGE_MAX,
};
use rampart_engine::feed::{DecodeError, JsonErrorKind};
use rampart_engine::fixed::ParseError;
use rampart_engine::perp_window::PositionSide::{Long, Short};
use rampart_testkit::alloc::{self, Counting};
use rampart_testkit::feed::{
    assert_fixtures_listed, assert_malformed_refused, assert_truncations_refused, mutate_valid_frames, read_fixture,
    Want,
};

// The count is per thread, so the tests of this file may run side by side.
#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------------------------------------
// Fixtures.

const BINANCE: &[&str] = &[
    "binance_force_order.json",
    "binance_force_order_combined.json",
    "binance_mark_price.json",
    "binance_mark_price_arr.json",
    "binance_mark_price_arr_combined.json",
    "binance_open_interest.json",
    "binance_reply.json",
    "binance_error.json",
    "binance_error_object.json",
    "binance_other_event.json",
];

const BYBIT: &[&str] = &[
    "bybit_all_liquidation.json",
    "bybit_ticker_snapshot.json",
    "bybit_ticker_delta.json",
    "bybit_ticker_delta_no_symbol.json",
    "bybit_ticker_interval.json",
    "bybit_subscribe.json",
    "bybit_subscribe_error.json",
    "bybit_pong.json",
    "bybit_pong_op.json",
    "bybit_other_topic.json",
];

const OKX: &[&str] = &[
    "okx_liquidation_orders.json",
    "okx_liquidation_orders_two.json",
    "okx_open_interest.json",
    "okx_funding_rate.json",
    "okx_rest_funding_rate.json",
    "okx_rest_funding_rate_error.json",
    "okx_funding_rate_no_next.json",
    "okx_subscribe.json",
    "okx_error.json",
    "okx_notice.json",
    "okx_other_channel.json",
    "okx_pong.txt",
];

const BITGET: &[&str] = &[
    "bitget_ticker.json",
    "bitget_ticker_fallbacks.json",
    "bitget_spot_ticker.json",
    "bitget_subscribe.json",
    "bitget_error.json",
    "bitget_pong.txt",
];

const BINANCE_MALFORMED: &[(&str, Want)] = {
    use DecodeError as D;
    use JsonErrorKind as J;
    use Want::{Decode, Json};
    &[
        ("binance_malformed_side.json", Decode(D::OutOfRange("S"))),
        ("binance_malformed_price_number.json", Decode(D::WrongType("p"))),
        ("binance_malformed_missing_order.json", Decode(D::MissingField("o"))),
        ("binance_malformed_order_not_object.json", Decode(D::WrongType("o"))),
        ("binance_malformed_arr_other_event.json", Decode(D::OutOfRange("e"))),
        ("binance_malformed_arr_element_not_object.json", Decode(D::WrongType("data"))),
        ("binance_malformed_oi_negative.json", Decode(D::OutOfRange("openInterest"))),
        ("binance_malformed_time_string.json", Decode(D::WrongType("E"))),
        ("binance_malformed_duplicate.json", Decode(D::DuplicateField("s"))),
        ("binance_malformed_data_string.json", Decode(D::WrongType("data"))),
        ("binance_malformed_rate.json", Decode(D::BadDecimal { field: "r", error: ParseError::BadByte })),
        ("binance_malformed_missing_filled.json", Decode(D::MissingField("z"))),
        ("binance_malformed_symbol_escaped.json", Decode(D::Escaped("symbol"))),
        ("binance_malformed_truncated.json", Json(J::UnexpectedEnd)),
        ("binance_malformed_trailing.json", Json(J::TrailingBytes)),
        ("binance_malformed_garbage.txt", Json(J::UnexpectedByte)),
        ("binance_malformed_empty.json", Json(J::UnexpectedEnd)),
        ("binance_malformed_deep.json", Json(J::TooDeep)),
    ]
};

const BYBIT_MALFORMED: &[(&str, Want)] = {
    use DecodeError as D;
    use Want::Decode;
    &[
        ("bybit_malformed_side.json", Decode(D::OutOfRange("S"))),
        ("bybit_malformed_size_number.json", Decode(D::WrongType("v"))),
        ("bybit_malformed_price_zero.json", Decode(D::OutOfRange("p"))),
        ("bybit_malformed_time_string.json", Decode(D::WrongType("T"))),
        ("bybit_malformed_liq_data_object.json", Decode(D::WrongType("data"))),
        ("bybit_malformed_ticker_missing_ts.json", Decode(D::MissingField("ts"))),
        ("bybit_malformed_ticker_data_array.json", Decode(D::WrongType("data"))),
        ("bybit_malformed_mark.json", Decode(D::BadDecimal { field: "markPrice", error: ParseError::BadByte })),
        ("bybit_malformed_next_number.json", Decode(D::WrongType("nextFundingTime"))),
        ("bybit_malformed_oi_negative.json", Decode(D::OutOfRange("openInterest"))),
        ("bybit_malformed_interval_zero.json", Decode(D::OutOfRange("fundingIntervalHour"))),
        ("bybit_malformed_success.json", Decode(D::WrongType("success"))),
        ("bybit_malformed_topic_number.json", Decode(D::WrongType("topic"))),
        ("bybit_malformed_missing_data.json", Decode(D::MissingField("data"))),
    ]
};

const OKX_MALFORMED: &[(&str, Want)] = {
    use DecodeError as D;
    use JsonErrorKind as J;
    use Want::{Decode, Json};
    &[
        ("okx_malformed_sz_number.json", Decode(D::WrongType("sz"))),
        ("okx_malformed_side.json", Decode(D::OutOfRange("side"))),
        ("okx_malformed_missing_details.json", Decode(D::MissingField("details"))),
        ("okx_malformed_funding_missing_ts.json", Decode(D::MissingField("ts"))),
        (
            "okx_malformed_funding_rate_empty.json",
            Decode(D::BadDecimal { field: "fundingRate", error: ParseError::Empty }),
        ),
        ("okx_malformed_arg_not_object.json", Decode(D::WrongType("arg"))),
        ("okx_malformed_missing_data.json", Decode(D::MissingField("data"))),
        ("okx_malformed_missing_channel.json", Decode(D::MissingField("channel"))),
        ("okx_malformed_oi_negative.json", Decode(D::OutOfRange("oi"))),
        ("okx_malformed_inst_escaped.json", Decode(D::Escaped("instId"))),
        ("okx_malformed_ts_number.json", Decode(D::WrongType("ts"))),
        ("okx_malformed_ping.txt", Json(J::UnexpectedByte)),
        ("okx_malformed_non_utf8.json", Json(J::NotUtf8)),
        ("okx_rest_malformed_missing_data.json", Decode(D::MissingField("data"))),
        ("okx_rest_malformed_row_without_ts.json", Decode(D::MissingField("ts"))),
        ("okx_rest_malformed_code_array.json", Decode(D::WrongType("code"))),
    ]
};

const BITGET_MALFORMED: &[(&str, Want)] = {
    use DecodeError as D;
    use Want::Decode;
    &[
        ("bitget_malformed_holding_number.json", Decode(D::WrongType("holdingAmount"))),
        ("bitget_malformed_mark_negative.json", Decode(D::OutOfRange("markPrice"))),
        ("bitget_malformed_missing_data.json", Decode(D::MissingField("data"))),
        ("bitget_malformed_element_not_object.json", Decode(D::WrongType("data"))),
        ("bitget_malformed_next_text.json", Decode(D::WrongType("nextFundingTime"))),
        ("bitget_malformed_no_ts.json", Decode(D::MissingField("ts"))),
        ("bitget_malformed_rate.json", Decode(D::BadDecimal { field: "fundingRate", error: ParseError::BadByte })),
        ("bitget_malformed_event_number.json", Decode(D::WrongType("event"))),
    ]
};

fn dir() -> String {
    format!("{}/tests/fixtures/perp", env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    read_fixture(&dir(), name)
}

/// The decoders as production sizes them.
struct Decoders {
    binance: BinancePerpDecoder,
    bybit: BybitPerpDecoder,
    okx: OkxPerpDecoder,
    bitget: BitgetPerpDecoder,
}

impl Decoders {
    fn new() -> Decoders {
        let (l, u) = (LIQUIDATIONS_PER_MESSAGE_MAX, UPDATES_PER_MESSAGE_MAX);
        Decoders {
            binance: BinancePerpDecoder::new(l, u),
            bybit: BybitPerpDecoder::new(l, u),
            okx: OkxPerpDecoder::new(l, u),
            bitget: BitgetPerpDecoder::new(u),
        }
    }

    /// The decoder of the venue a fixture's name starts with, reduced to accept or refuse.
    fn check(&mut self, name: &str, bytes: &[u8]) -> Result<(), DecodeError> {
        match name.split('_').next() {
            Some("binance") => self.binance.decode(bytes).map(drop),
            Some("bybit") => self.bybit.decode(bytes).map(drop),
            Some("okx") if name.starts_with("okx_rest") => self.okx.decode_funding_rest(bytes).map(drop),
            Some("okx") => self.okx.decode(bytes).map(drop),
            Some("bitget") => self.bitget.decode(bytes).map(drop),
            _ => panic!("{name}: no venue prefix"),
        }
    }
}

/// A symbol as text.
fn sym(e: &Entry<'_, impl Copy>) -> String {
    String::from_utf8(e.symbol.to_vec()).expect("utf8 symbol")
}

fn liquidations(m: PerpMessage<'_>) -> Vec<(String, Liquidation)> {
    let PerpMessage::Liquidations(b) = m else { panic!("not liquidations: {m:?}") };
    assert_eq!(b.dropped(), 0);
    b.iter().map(|e| (sym(&e), e.value)).collect()
}

fn updates(m: PerpMessage<'_>) -> Vec<(String, Update)> {
    let PerpMessage::Updates(b) = m else { panic!("not updates: {m:?}") };
    assert_eq!(b.dropped(), 0);
    b.iter().map(|e| (sym(&e), e.value)).collect()
}

fn reply(m: PerpMessage<'_>) -> (bool, Option<String>, Option<i64>, Option<String>) {
    let PerpMessage::Reply(Reply { ok, op, code, msg }) = m else { panic!("not a reply: {m:?}") };
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    (ok, text(op), code, text(msg))
}

fn binance(name: &str) -> PerpMessage<'static> {
    let bytes: &'static [u8] = fixture(name).leak();
    let d: &'static mut BinancePerpDecoder = Box::leak(Box::new(BinancePerpDecoder::new(8, 8)));
    d.decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bybit(name: &str) -> PerpMessage<'static> {
    let bytes: &'static [u8] = fixture(name).leak();
    let d: &'static mut BybitPerpDecoder = Box::leak(Box::new(BybitPerpDecoder::new(8, 8)));
    d.decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn okx(name: &str) -> PerpMessage<'static> {
    let bytes: &'static [u8] = fixture(name).leak();
    let d: &'static mut OkxPerpDecoder = Box::leak(Box::new(OkxPerpDecoder::new(8, 8)));
    d.decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bitget(name: &str) -> PerpMessage<'static> {
    let bytes: &'static [u8] = fixture(name).leak();
    let d: &'static mut BitgetPerpDecoder = Box::leak(Box::new(BitgetPerpDecoder::new(8)));
    d.decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_fixture_file_is_used() {
    let valid: Vec<&str> = [BINANCE, BYBIT, OKX, BITGET].concat();
    let malformed: Vec<&str> = [BINANCE_MALFORMED, BYBIT_MALFORMED, OKX_MALFORMED, BITGET_MALFORMED]
        .concat()
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_fixtures_listed(&dir(), &valid, &malformed);
}

// ---------------------------------------------------------------------------------------------
// Binance.

#[test]
fn binance_force_order_is_a_long_liquidated_at_the_fill() {
    let l = Liquidation { side: Long, price: 9910.0, qty: 0.014, qty_unit: QtyUnit::Base, ts_ms: 1_568_014_460_893 };
    assert_eq!(liquidations(binance("binance_force_order.json")), [("BTCUSDT".into(), l)]);
}

#[test]
fn binance_combined_force_order_buy_is_a_short() {
    let l = Liquidation { side: Short, price: 2512.35, qty: 1.5, qty_unit: QtyUnit::Base, ts_ms: 1_568_014_460_899 };
    assert_eq!(liquidations(binance("binance_force_order_combined.json")), [("ETHUSDT".into(), l)]);
}

#[test]
fn binance_unfilled_order_falls_back_to_its_price_and_quantity() {
    let frame =
        br#"{"e":"forceOrder","E":1,"o":{"s":"BTCUSDT","S":"BUY","q":"0.5","p":"9900","ap":"0","z":"0","T":2}}"#;
    let mut d = BinancePerpDecoder::new(1, 1);
    let got = liquidations(d.decode(frame).expect("decodes"));
    assert_eq!((got[0].1.side, got[0].1.price, got[0].1.qty, got[0].1.ts_ms), (Short, 9900.0, 0.5, 2));
}

fn btc_mark() -> Update {
    Update {
        mark: Some(11794.15),
        index: Some(11784.62659091),
        funding_rate: Some(0.00038167),
        next_funding_ms: Some(1_562_306_400_000),
        ..Update::at(1_562_305_380_000)
    }
}

#[test]
fn binance_mark_price_update() {
    assert_eq!(updates(binance("binance_mark_price.json")), [("BTCUSDT".into(), btc_mark())]);
}

#[test]
fn binance_mark_price_array_raw_and_combined() {
    let eth = Update {
        mark: Some(2510.1),
        index: Some(2509.9),
        funding_rate: Some(-0.000125),
        next_funding_ms: Some(1_562_306_400_000),
        ..Update::at(1_562_305_380_000)
    };
    // A delivery contract: `r: ""` and `T: 0`, no funding.
    let delivery = Update { mark: Some(11900.0), index: Some(11784.62659091), ..Update::at(1_562_305_380_000) };
    let want: Vec<(String, Update)> =
        vec![("BTCUSDT".into(), btc_mark()), ("ETHUSDT".into(), eth), ("BTCUSDT_260327".into(), delivery)];
    assert_eq!(updates(binance("binance_mark_price_arr.json")), want);
    assert_eq!(updates(binance("binance_mark_price_arr_combined.json")), want);
}

#[test]
fn binance_open_interest_body() {
    let u = Update { oi_base: Some(10659.509), ..Update::at(1_589_437_530_011) };
    assert_eq!(updates(binance("binance_open_interest.json")), [("BTCUSDT".into(), u)]);
}

#[test]
fn binance_replies_and_other_events() {
    assert_eq!(reply(binance("binance_reply.json")), (true, None, None, None));
    let msg = Some("Invalid request: unknown variable".to_string());
    assert_eq!(reply(binance("binance_error.json")), (false, None, Some(2), msg));
    assert!(matches!(reply(binance("binance_error_object.json")), (false, None, Some(2), Some(_))));
    assert!(matches!(binance("binance_other_event.json"), PerpMessage::Other));
}

// ---------------------------------------------------------------------------------------------
// Bybit.

#[test]
fn bybit_all_liquidation_buy_is_a_long() {
    let got = liquidations(bybit("bybit_all_liquidation.json"));
    let long =
        Liquidation { side: Long, price: 43511.7, qty: 0.003, qty_unit: QtyUnit::Base, ts_ms: 1_739_502_302_929 };
    let short =
        Liquidation { side: Short, price: 43620.1, qty: 0.25, qty_unit: QtyUnit::Base, ts_ms: 1_739_502_303_001 };
    assert_eq!(got, [("BTCUSDT".into(), long), ("BTCUSDT".into(), short)]);
}

#[test]
fn bybit_ticker_snapshot_carries_everything() {
    let u = Update {
        mark: Some(17217.33),
        index: Some(17227.36),
        funding_rate: Some(-0.000212),
        next_funding_ms: Some(1_673_280_000_000),
        oi_base: Some(68744.761),
        oi_usd: Some(1_183_601_235.91),
        ..Update::at(1_673_272_861_686)
    };
    assert_eq!(updates(bybit("bybit_ticker_snapshot.json")), [("BTCUSDT".into(), u)]);
}

#[test]
fn bybit_ticker_delta_leaves_missing_fields_none() {
    let u = Update { mark: Some(17217.4), oi_base: Some(68745.1), ..Update::at(1_673_272_861_786) };
    assert_eq!(updates(bybit("bybit_ticker_delta.json")), [("BTCUSDT".into(), u)]);
    // No `symbol`: the topic names the contract.
    let u = Update { funding_rate: Some(0.0001), ..Update::at(1_673_272_861_886) };
    assert_eq!(updates(bybit("bybit_ticker_delta_no_symbol.json")), [("ETHUSDT".into(), u)]);
}

#[test]
fn bybit_ticker_funding_interval_hours() {
    let got = updates(bybit("bybit_ticker_interval.json"));
    assert_eq!(got[0].0, "1000PEPEUSDT", "the data's symbol wins over the topic");
    assert_eq!(got[0].1.funding_interval_ms, Some(4 * 3_600_000));
    assert_eq!(got[0].1.oi_base, Some(80_123_456_789.0), "beyond the fixed-point range");
    assert_eq!(got[0].1.mark, Some(0.009123));
}

#[test]
fn bybit_op_replies_and_pongs() {
    assert_eq!(reply(bybit("bybit_subscribe.json")), (true, Some("subscribe".into()), None, Some(String::new())));
    let (ok, op, _, msg) = reply(bybit("bybit_subscribe_error.json"));
    assert_eq!((ok, op.as_deref()), (false, Some("subscribe")));
    assert!(msg.is_some_and(|m| m.starts_with("error:handler not found")));
    assert!(matches!(bybit("bybit_pong.json"), PerpMessage::Pong));
    assert!(matches!(bybit("bybit_pong_op.json"), PerpMessage::Pong));
    assert!(matches!(bybit("bybit_other_topic.json"), PerpMessage::Other));
}

// ---------------------------------------------------------------------------------------------
// OKX.

#[test]
fn okx_liquidations_are_in_contracts_and_sell_is_a_long() {
    let got = liquidations(okx("okx_liquidation_orders.json"));
    let l =
        Liquidation { side: Short, price: 0.007831, qty: 13.0, qty_unit: QtyUnit::Contracts, ts_ms: 1_692_266_434_010 };
    assert_eq!(got, [("IOST-USDT-SWAP".into(), l)]);

    let got = liquidations(okx("okx_liquidation_orders_two.json"));
    let sides: Vec<_> = got.iter().map(|(s, l)| (s.as_str(), l.side, l.qty, l.qty_unit, l.ts_ms)).collect();
    assert_eq!(
        sides,
        [
            ("BTC-USDT-SWAP", Long, 50.0, QtyUnit::Contracts, 1_763_650_000_123),
            ("BTC-USDT-SWAP", Long, 3.0, QtyUnit::Contracts, 1_763_650_000_100),
            ("ETH-USDT-SWAP", Short, 7.0, QtyUnit::Contracts, 1_763_650_000_200),
        ]
    );
    assert_eq!(got[0].1.price, 94210.5);
}

#[test]
fn okx_open_interest_in_three_units() {
    let u = Update {
        oi_contracts: Some(2_216_113.01),
        oi_base: Some(22161.1301),
        oi_usd: Some(2_087_453_281.69),
        ..Update::at(1_763_650_003_000)
    };
    assert_eq!(updates(okx("okx_open_interest.json")), [("BTC-USDT-SWAP".into(), u)]);
}

#[test]
fn okx_funding_time_is_the_next_settlement_and_the_interval_is_derived() {
    let u = Update {
        funding_rate: Some(0.000069181086383),
        next_funding_ms: Some(1_703_088_000_000),
        funding_interval_ms: Some(8 * 3_600_000),
        ..Update::at(1_703_070_685_309)
    };
    assert_eq!(updates(okx("okx_funding_rate.json")), [("BTC-USDT-SWAP".into(), u)]);
    let u = Update {
        funding_rate: Some(-0.00031),
        next_funding_ms: Some(1_703_088_000_000),
        ..Update::at(1_703_070_685_309)
    };
    assert_eq!(updates(okx("okx_funding_rate_no_next.json")), [("DOGE-USDT-SWAP".into(), u)]);
}

/// The REST funding-rate body (`instId=ANY`: every swap), polled so OKX funding stays fresh
/// between the pushes of 30 to 90 s.
#[test]
fn okx_rest_funding_rows_read_as_the_push_and_a_refusal_as_a_reply() {
    let bytes: &'static [u8] = fixture("okx_rest_funding_rate.json").leak();
    let d: &'static mut OkxPerpDecoder = Box::leak(Box::new(OkxPerpDecoder::new(8, 8)));
    let got = updates(d.decode_funding_rest(bytes).expect("decodes"));
    let btc = Update {
        funding_rate: Some(0.000079238688534),
        next_funding_ms: Some(1_703_088_000_000),
        funding_interval_ms: Some(8 * 3_600_000),
        ..Update::at(1_703_070_685_309)
    };
    let doge = Update {
        funding_rate: Some(-0.00015),
        next_funding_ms: Some(1_703_084_400_000),
        funding_interval_ms: Some(4 * 3_600_000),
        ..Update::at(1_703_070_685_309)
    };
    assert_eq!(got, [("BTC-USDT-SWAP".into(), btc), ("DOGE-USDT-SWAP".into(), doge)]);
    let refused = fixture("okx_rest_funding_rate_error.json");
    let (ok, op, code, msg) = reply(d.decode_funding_rest(refused.leak()).expect("decodes"));
    assert_eq!((ok, op, code, msg.as_deref()), (false, None, Some(50014), Some("Parameter instId can not be empty.")));
    let one = OkxPerpDecoder::new(8, 1).decode_funding_rest(bytes).map(|m| match m {
        PerpMessage::Updates(b) => (b.len(), b.dropped()),
        _ => (0, 0),
    });
    assert_eq!(one, Ok((1, 1)), "rows past the bound are counted, not kept");
}

#[test]
fn okx_events_and_pong() {
    assert_eq!(reply(okx("okx_subscribe.json")), (true, Some("subscribe".into()), None, None));
    let (ok, op, code, msg) = reply(okx("okx_error.json"));
    assert_eq!((ok, op.as_deref(), code), (false, Some("error"), Some(60012)));
    assert_eq!(msg.as_deref(), Some(r#"Invalid request: {\"op\": \"subscribe\"}"#), "raw, escapes kept");
    let (ok, op, code, _) = reply(okx("okx_notice.json"));
    assert_eq!((ok, op.as_deref(), code), (true, Some("notice"), Some(64008)));
    assert!(matches!(okx("okx_pong.txt"), PerpMessage::Pong));
    assert!(matches!(okx("okx_other_channel.json"), PerpMessage::Other));
}

// ---------------------------------------------------------------------------------------------
// Bitget.

#[test]
fn bitget_futures_ticker() {
    let u = Update {
        mark: Some(27000.0),
        index: Some(25702.4),
        funding_rate: Some(0.00001),
        next_funding_ms: Some(1_695_722_400_000),
        oi_base: Some(3495.139),
        ..Update::at(1_695_715_383_021)
    };
    assert_eq!(updates(bitget("bitget_ticker.json")), [("BTCUSDT".into(), u)]);
}

#[test]
fn bitget_ticker_falls_back_to_the_arg_and_the_message_time() {
    let got = updates(bitget("bitget_ticker_fallbacks.json"));
    assert_eq!(got[0].0, "ETHUSDT");
    assert_eq!(got[0].1.ts_ms, 1_695_715_383_039);
    assert_eq!(got[0].1.funding_rate, Some(-0.00005));
}

#[test]
fn bitget_spot_ticker_events_and_pong() {
    assert!(matches!(bitget("bitget_spot_ticker.json"), PerpMessage::Other), "not a perpetual");
    assert_eq!(reply(bitget("bitget_subscribe.json")), (true, Some("subscribe".into()), None, None));
    let (ok, op, code, _) = reply(bitget("bitget_error.json"));
    assert_eq!((ok, op.as_deref(), code), (false, Some("error"), Some(30001)));
    assert!(matches!(bitget("bitget_pong.txt"), PerpMessage::Pong));
}

// ---------------------------------------------------------------------------------------------
// Malformed frames, truncations, mutations.

#[test]
fn malformed_frames_are_refused_with_their_error() {
    let mut d = Decoders::new();
    for list in [BINANCE_MALFORMED, BYBIT_MALFORMED, OKX_MALFORMED, BITGET_MALFORMED] {
        for &(name, want) in list {
            assert_malformed_refused(&dir(), &[(name, want)], |b| d.check(name, b));
        }
    }
}

#[test]
fn every_truncation_of_every_valid_frame_is_refused() {
    let mut d = Decoders::new();
    let mut checked = 0;
    for list in [BINANCE, BYBIT, OKX, BITGET] {
        for &name in list {
            checked += assert_truncations_refused(&dir(), &[name], |b| d.check(name, b));
        }
    }
    assert!(checked > 5_000, "{checked}");
}

#[test]
fn mutated_frames_never_panic() {
    let mut d = Decoders::new();
    for list in [BINANCE, BYBIT, OKX, BITGET] {
        for &name in list {
            mutate_valid_frames(&dir(), &[name], 0x9e59, |b| d.check(name, b).is_ok());
        }
    }
}

#[test]
fn every_decoder_refuses_what_is_not_its_json() {
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let deep_obj = "{\"data\":".repeat(100);
    for input in [&b""[..], b"   ", b"null", b"7", b"\"x\"", b"{", b"}", b"{\"a\":}", b"\xff\xfe", deep.as_bytes()] {
        let mut d = Decoders::new();
        for venue in ["binance", "bybit", "okx", "bitget"] {
            let got = d.check(venue, input);
            assert!(got.is_err(), "{venue} accepted {:?}", String::from_utf8_lossy(input));
        }
    }
    let mut d = Decoders::new();
    for venue in ["binance", "bybit", "okx", "bitget"] {
        let got = d.check(venue, deep_obj.as_bytes());
        assert!(matches!(got, Err(DecodeError::Json(e)) if e.kind == JsonErrorKind::TooDeep), "{venue}: {got:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The bound on items per message.

/// A Bybit `allLiquidation` push of `n` liquidations, prices 1, 2, ..., with `tail` appended
/// inside `data`.
fn bybit_push(n: usize, tail: &str) -> String {
    let items: Vec<String> =
        (1..=n).map(|i| format!(r#"{{"T":{i},"s":"BTCUSDT","S":"Buy","v":"1","p":"{i}"}}"#)).collect();
    format!(r#"{{"topic":"allLiquidation.BTCUSDT","type":"snapshot","ts":1,"data":[{}{tail}]}}"#, items.join(","))
}

#[test]
fn at_the_bound_the_first_items_are_kept_and_the_rest_counted() {
    let mut d = BybitPerpDecoder::new(2, 1);
    let frame = bybit_push(5, "");
    let Ok(PerpMessage::Liquidations(b)) = d.decode(frame.as_bytes()) else { panic!("not liquidations") };
    assert_eq!((b.len(), b.dropped()), (2, 3));
    assert_eq!(b.iter().map(|e| e.value.price).collect::<Vec<_>>(), [1.0, 2.0], "message order");
    assert!(b.get(2).is_none());
    // Exactly at the bound nothing is dropped.
    let frame = bybit_push(2, "");
    let Ok(PerpMessage::Liquidations(b)) = d.decode(frame.as_bytes()) else { panic!("not liquidations") };
    assert_eq!((b.len(), b.dropped()), (2, 0));
    // An item past the bound is still validated: the message is refused as a whole.
    let frame = bybit_push(5, r#",{"T":9,"s":"BTCUSDT","S":"Up","v":"1","p":"1"}"#);
    assert_eq!(d.decode(frame.as_bytes()).map(drop), Err(DecodeError::OutOfRange("S")));
}

#[test]
fn a_mark_price_array_beyond_the_bound_keeps_the_first() {
    let mut d = BinancePerpDecoder::new(1, 2);
    let frame = fixture("binance_mark_price_arr.json");
    let Ok(PerpMessage::Updates(b)) = d.decode(&frame) else { panic!("not updates") };
    assert_eq!((b.len(), b.dropped()), (2, 1));
    assert_eq!(b.iter().map(|e| e.symbol).collect::<Vec<_>>(), [&b"BTCUSDT"[..], b"ETHUSDT"]);
}

#[test]
fn okx_details_of_several_contracts_share_the_bound() {
    let mut d = OkxPerpDecoder::new(2, 1);
    let frame = fixture("okx_liquidation_orders_two.json");
    let Ok(PerpMessage::Liquidations(b)) = d.decode(&frame) else { panic!("not liquidations") };
    assert_eq!((b.len(), b.dropped()), (2, 1));
}

// ---------------------------------------------------------------------------------------------
// No allocation per message.

#[test]
fn decoding_allocates_nothing_after_construction() {
    let frames: Vec<(&str, Vec<u8>)> =
        [BINANCE, BYBIT, OKX, BITGET].concat().into_iter().map(|n| (n, fixture(n))).collect();
    let big = bybit_push(LIQUIDATIONS_PER_MESSAGE_MAX + 10, "");
    let mut d = Decoders::new();
    let ((), one) = alloc::count(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(one, Some(1), "the counting allocator is installed");
    let (decoded, allocations) = alloc::count(|| {
        let mut decoded = 0;
        for _ in 0..50 {
            for (name, bytes) in &frames {
                decoded += usize::from(d.check(name, bytes).is_ok());
            }
            decoded += usize::from(d.check("bybit", big.as_bytes()).is_ok());
            // Refusals allocate nothing either.
            decoded += usize::from(d.check("okx", b"{\"arg\":").is_ok());
        }
        decoded
    });
    assert_eq!(decoded, 50 * (frames.len() + 1));
    assert_eq!(allocations, Some(0));
}

// ---------------------------------------------------------------------------------------------
// Side conventions, side by side, and edge values.

#[test]
fn each_venue_names_the_position_liquidated() {
    let binance_frame = |s: &str| {
        format!(r#"{{"e":"forceOrder","E":1,"o":{{"s":"X","S":"{s}","q":"1","p":"1","ap":"1","z":"1","T":1}}}}"#)
    };
    let bybit_frame = |s: &str| {
        format!(r#"{{"topic":"allLiquidation.X","ts":1,"data":[{{"T":1,"s":"X","S":"{s}","v":"1","p":"1"}}]}}"#)
    };
    let okx_frame = |s: &str| {
        format!(
            r#"{{"arg":{{"channel":"liquidation-orders"}},"data":[{{"instId":"X","details":[{{"side":"{s}","bkPx":"1","sz":"1","ts":"1"}}]}}]}}"#
        )
    };
    let side = |m: Result<PerpMessage<'_>, DecodeError>| match m {
        Ok(PerpMessage::Liquidations(b)) => b.get(0).map(|e| e.value.side),
        other => panic!("not liquidations: {other:?}"),
    };
    let (mut bn, mut by, mut ok) =
        (BinancePerpDecoder::new(1, 1), BybitPerpDecoder::new(1, 1), OkxPerpDecoder::new(1, 1));
    assert_eq!(side(bn.decode(binance_frame("SELL").as_bytes())), Some(Long), "Binance: the forced order sold");
    assert_eq!(side(bn.decode(binance_frame("BUY").as_bytes())), Some(Short));
    assert_eq!(side(by.decode(bybit_frame("Buy").as_bytes())), Some(Long), "Bybit: the position's side");
    assert_eq!(side(by.decode(bybit_frame("Sell").as_bytes())), Some(Short));
    assert_eq!(side(ok.decode(okx_frame("sell").as_bytes())), Some(Long), "OKX: the order sold");
    assert_eq!(side(ok.decode(okx_frame("buy").as_bytes())), Some(Short));
    // Each venue's spelling only: another venue's is refused.
    assert_eq!(bn.decode(binance_frame("Sell").as_bytes()).map(drop), Err(DecodeError::OutOfRange("S")));
    assert_eq!(by.decode(bybit_frame("SELL").as_bytes()).map(drop), Err(DecodeError::OutOfRange("S")));
    assert_eq!(ok.decode(okx_frame("Sell").as_bytes()).map(drop), Err(DecodeError::OutOfRange("side")));
}

#[test]
fn an_empty_contract_id_is_refused() {
    let mut d = BinancePerpDecoder::new(1, 1);
    let frame = br#"{"openInterest":"1","symbol":"","time":1}"#;
    assert_eq!(d.decode(frame).map(drop), Err(DecodeError::OutOfRange("symbol")));
    let mut d = BybitPerpDecoder::new(1, 1);
    let frame = br#"{"topic":"tickers.","type":"delta","data":{"markPrice":"1"},"ts":1}"#;
    assert_eq!(d.decode(frame).map(drop), Err(DecodeError::OutOfRange("topic")));
}

#[test]
fn bybit_deprecated_liquidation_topic_is_not_read() {
    let frame = br#"{"topic":"liquidation.BTCUSDT","type":"snapshot","ts":1,"data":{"updatedTime":1,"symbol":"BTCUSDT","side":"Sell","size":"0.003","price":"43511.70"}}"#;
    let mut d = BybitPerpDecoder::new(1, 1);
    assert!(matches!(d.decode(frame), Ok(PerpMessage::Other)));
}

#[test]
fn numbers_in_exponent_form_and_huge_values() {
    let mut d = OkxPerpDecoder::new(1, 1);
    let frame = br#"{"arg":{"channel":"open-interest"},"data":[{"instId":"PEPE-USDT-SWAP","oi":"5e7","oiCcy":"5000000000000","oiUsd":"1.2E8","ts":"1"}]}"#;
    let got = updates(d.decode(frame).expect("decodes"));
    assert_eq!((got[0].1.oi_contracts, got[0].1.oi_base, got[0].1.oi_usd), (Some(5e7), Some(5e12), Some(1.2e8)));
    let frame = br#"{"arg":{"channel":"open-interest"},"data":[{"instId":"X","oi":"1e400","ts":"1"}]}"#;
    assert_eq!(d.decode(frame).map(drop), Err(DecodeError::OutOfRange("oi")));
}
