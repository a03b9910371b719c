//! Binance spot feed: the decoder against the frames documented in venues.md §1 (fixtures under
//! `tests/fixtures/binance/`, one JSON file per frame, plus variants and malformed frames), and
//! the book sync state machine against venues.md §1.2, case by case and against a model.
//!
//! Also proves the per-message path allocates nothing, with a counting global allocator.

use std::collections::BTreeMap;

use rampart_engine::feed::binance::{
    BinanceBookSync, BinanceDecoder, DepthDiff, Frame, Message, RequestId, Snapshot, SyncOutcome, TimeUnit,
};
use rampart_engine::feed::{DecodeError, JsonError, JsonErrorKind};
use rampart_engine::fixed::ParseError;
use rampart_engine::{Book, BookId, Level, Price, Qty, Side, TickKind};
use rampart_testkit::alloc::{self, Counting};
use rampart_testkit::feed::{assert_fixtures_listed, lv};
use rampart_testkit::rng::Rng;

// ---------------------------------------------------------------------------------------------
// Fixtures.

/// Frames that decode. The first group is verbatim from venues.md; the rest are built from them.
const VALID: &[&str] = &[
    "depth_update.json",
    "snapshot_rest.json",
    "partial_depth.json",
    "book_ticker.json",
    "trade.json",
    "agg_trade.json",
    "kline.json",
    "server_shutdown.json",
    "subscribe_request.json",
    "response_subscribe.json",
    "response_list_subscriptions.json",
    "error_invalid_request.json",
    "error_invalid_json.json",
    // Built from the documented frames.
    "server_shutdown_combined.json",
    "depth_update_combined.json",
    "trade_combined.json",
    "partial_depth_combined.json",
    "depth_update_shuffled.json",
    "depth_update_unknown_keys.json",
    "depth_update_removal.json",
    "trade_microsecond.json",
    "trade_legacy_order_ids.json",
    "trade_utf8_symbol.json",
    "response_string_id.json",
    "error_with_id.json",
];

/// What a malformed frame must be refused with.
#[derive(Clone, Copy, Debug)]
enum Want {
    /// A JSON syntax error of this kind (offset not checked here).
    Json(JsonErrorKind),
    /// Exactly this error.
    Decode(DecodeError),
}

const MALFORMED: &[(&str, Want)] = {
    use DecodeError as D;
    use JsonErrorKind as J;
    use Want::{Decode, Json};
    &[
        // Verbatim from venues.md: the combined shutdown example has a literal `...` for `E`.
        ("server_shutdown_combined_doc.json", Json(J::UnexpectedByte)),
        ("malformed_wrong_type_first_id.json", Decode(D::WrongType("U"))),
        ("malformed_wrong_type_bids.json", Decode(D::WrongType("b"))),
        ("malformed_level_numbers.json", Decode(D::BadLevel("b"))),
        ("malformed_level_short.json", Decode(D::BadLevel("b"))),
        ("malformed_level_not_array.json", Decode(D::BadLevel("b"))),
        ("malformed_price_not_decimal.json", Decode(D::BadDecimal { field: "b", error: ParseError::BadByte })),
        ("malformed_price_exponent.json", Decode(D::BadDecimal { field: "p", error: ParseError::BadByte })),
        ("malformed_price_empty.json", Decode(D::BadDecimal { field: "p", error: ParseError::Empty })),
        ("malformed_price_zero.json", Decode(D::OutOfRange("p"))),
        ("malformed_price_escaped.json", Decode(D::BadDecimal { field: "b", error: ParseError::BadByte })),
        ("malformed_qty_negative.json", Decode(D::BadDecimal { field: "a", error: ParseError::Negative })),
        ("malformed_missing_final_id.json", Decode(D::MissingField("u"))),
        ("malformed_ids_reversed.json", Decode(D::UpdateIdsReversed { first: 161, last: 160 })),
        ("malformed_negative_id.json", Decode(D::OutOfRange("U"))),
        ("malformed_fraction_id.json", Decode(D::WrongType("t"))),
        ("malformed_id_overflow.json", Decode(D::OutOfRange("u"))),
        ("malformed_time_overflow.json", Decode(D::OutOfRange("E"))),
        ("malformed_bool_as_string.json", Decode(D::WrongType("m"))),
        ("malformed_duplicate_key.json", Decode(D::DuplicateField("u"))),
        ("malformed_symbol_escaped.json", Decode(D::Escaped("s"))),
        ("malformed_symbol_number.json", Decode(D::WrongType("s"))),
        ("malformed_event_type_number.json", Decode(D::WrongType("e"))),
        ("malformed_trailing_garbage.json", Json(J::TrailingBytes)),
        ("malformed_two_objects.json", Json(J::TrailingBytes)),
        ("malformed_trailing_comma.json", Json(J::UnexpectedByte)),
        ("malformed_unterminated_string.json", Json(J::UnexpectedEnd)),
        ("malformed_bad_escape.json", Json(J::BadEscape)),
        ("malformed_control_char.json", Json(J::ControlChar)),
        ("malformed_leading_zero.json", Json(J::UnexpectedByte)),
        ("malformed_number_plus.json", Json(J::UnexpectedByte)),
        ("malformed_nan.json", Json(J::UnexpectedByte)),
        ("malformed_single_quotes.json", Json(J::UnexpectedByte)),
        ("malformed_deep_nesting.json", Json(J::TooDeep)),
        ("malformed_deep_nesting_unclosed.json", Json(J::TooDeep)),
        ("malformed_array_top.json", Decode(D::NotAnObject)),
        ("malformed_pong.json", Json(J::UnexpectedByte)),
        ("malformed_empty.json", Json(J::UnexpectedEnd)),
        ("malformed_whitespace_only.json", Json(J::UnexpectedEnd)),
        ("malformed_combined_data_not_object.json", Decode(D::WrongType("data"))),
        ("malformed_combined_missing_data.json", Decode(D::MissingField("data"))),
        ("malformed_error_code_string.json", Decode(D::WrongType("code"))),
        ("malformed_response_missing_id.json", Decode(D::MissingField("id"))),
        ("malformed_snapshot_missing_asks.json", Decode(D::MissingField("asks"))),
        ("malformed_non_utf8_string.json", Json(J::NotUtf8)),
        ("malformed_non_utf8_overlong.json", Json(J::NotUtf8)),
        ("malformed_non_utf8_truncated_char.json", Json(J::NotUtf8)),
        ("malformed_non_utf8_outside_string.json", Json(J::UnexpectedByte)),
    ]
};

fn fixture_dir() -> String {
    format!("{}/tests/fixtures/binance", env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/{name}", fixture_dir());
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn decoder() -> BinanceDecoder {
    BinanceDecoder::new(TimeUnit::Millisecond, 64)
}

/// Decodes a fixture and hands the frame to `check`.
fn with_frame(name: &str, unit: TimeUnit, check: impl FnOnce(Frame<'_>)) {
    let bytes = fixture(name);
    let mut d = BinanceDecoder::new(unit, 64);
    let frame = d.decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    check(frame);
}

#[test]
fn every_fixture_file_is_used() {
    let malformed: Vec<&str> = MALFORMED.iter().map(|(m, _)| *m).collect();
    assert_fixtures_listed(&fixture_dir(), VALID, &malformed);
}

// ---------------------------------------------------------------------------------------------
// Documented frames, exact values.

/// The documented diff: `U` 157, `u` 160, bid 0.0024 x 10, ask 0.0026 x 100.
fn assert_documented_diff(m: Message<'_>) {
    let Message::Depth(d) = m else { panic!("not a depth diff: {m:?}") };
    assert_eq!(d.symbol, b"BNBBTC");
    assert_eq!(d.event_ms, 1_672_515_782_136);
    assert_eq!(d.first_update_id, 157);
    assert_eq!(d.final_update_id, 160);
    assert_eq!(d.bids, [Level { price: Price(240_000), qty: Qty(1_000_000_000) }]);
    assert_eq!(d.asks, [Level { price: Price(260_000), qty: Qty(10_000_000_000) }]);
}

fn assert_documented_trade(m: Message<'_>) {
    let Message::Trade(t) = m else { panic!("not a trade: {m:?}") };
    assert_eq!(t.symbol, b"BNBBTC");
    assert_eq!(t.event_ms, 1_672_515_782_136);
    assert_eq!(t.trade_id, 12_345);
    assert_eq!(t.price, Price(100_000));
    assert_eq!(t.qty, Qty(10_000_000_000));
    assert_eq!(t.trade_ms, 1_672_515_782_136);
    assert!(t.buyer_is_maker);
    assert!(t.taker_sell(), "m=true means the taker sold");
}

#[test]
fn documented_depth_diff() {
    with_frame("depth_update.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, None);
        assert_documented_diff(f.message);
    });
}

#[test]
fn documented_rest_snapshot() {
    with_frame("snapshot_rest.json", TimeUnit::Millisecond, |f| {
        let want = Snapshot {
            last_update_id: 1_027_024,
            bids: &[Level { price: Price(400_000_000), qty: Qty(43_100_000_000) }],
            asks: &[Level { price: Price(400_000_200), qty: Qty(1_200_000_000) }],
        };
        assert_eq!(f, Frame { stream: None, message: Message::Snapshot(want) });
    });
}

#[test]
fn documented_partial_depth_is_a_snapshot() {
    with_frame("partial_depth.json", TimeUnit::Millisecond, |f| {
        let want = Snapshot { last_update_id: 160, bids: &[lv("0.0024", "10")], asks: &[lv("0.0026", "100")] };
        assert_eq!(f, Frame { stream: None, message: Message::Snapshot(want) });
    });
}

#[test]
fn documented_trade() {
    with_frame("trade.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, None);
        assert_documented_trade(f.message);
        let Message::Trade(t) = f.message else { return };
        let tick = t.tick(BookId(7));
        assert_eq!(tick.book, BookId(7));
        assert_eq!(tick.ts_ms, 1_672_515_782_136);
        assert_eq!(tick.kind, TickKind::Trade { price: Price(100_000), qty: Qty(10_000_000_000), taker_sell: true });
    });
}

#[test]
fn documented_server_shutdown() {
    with_frame("server_shutdown.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f, Frame { stream: None, message: Message::ServerShutdown { event_ms: 1_770_123_456_789 } });
    });
}

#[test]
fn documented_control_replies() {
    with_frame("response_subscribe.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.message, Message::Response { id: RequestId::Int(1), result: b"null" });
    });
    with_frame("response_list_subscriptions.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.message, Message::Response { id: RequestId::Int(3), result: br#"["btcusdt@aggTrade"]"# });
    });
    with_frame("error_invalid_request.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.message, Message::Error { code: 2, msg: b"Invalid request: ...", id: None });
    });
    with_frame("error_invalid_json.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.message, Message::Error { code: 3, msg: b"Invalid JSON: ...", id: None });
    });
    with_frame("response_string_id.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.message, Message::Response { id: RequestId::Str(b"req-42"), result: b"null" });
    });
    with_frame("error_with_id.json", TimeUnit::Millisecond, |f| {
        let msg: &[u8] = br#"Invalid symbol \"X\"."#;
        assert_eq!(f.message, Message::Error { code: -1121, msg, id: Some(RequestId::Int(7)) });
    });
}

#[test]
fn documented_frames_of_other_kinds_are_values_not_errors() {
    for (name, event_type) in [
        ("book_ticker.json", None),
        ("agg_trade.json", Some(&b"aggTrade"[..])),
        ("kline.json", Some(&b"kline"[..])),
        ("subscribe_request.json", None),
    ] {
        with_frame(name, TimeUnit::Millisecond, |f| {
            assert_eq!(f, Frame { stream: None, message: Message::Other { event_type } }, "{name}");
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Variants: combined streams, key order, unknown keys, time unit, symbols.

#[test]
fn combined_stream_wrapping() {
    with_frame("depth_update_combined.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, Some(&b"bnbbtc@depth@100ms"[..]));
        assert_documented_diff(f.message);
    });
    with_frame("trade_combined.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, Some(&b"bnbbtc@trade"[..]));
        assert_documented_trade(f.message);
    });
    with_frame("partial_depth_combined.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, Some(&b"bnbbtc@depth5@100ms"[..]));
        let want = Snapshot { last_update_id: 160, bids: &[lv("0.0024", "10")], asks: &[lv("0.0026", "100")] };
        assert_eq!(f.message, Message::Snapshot(want));
    });
    with_frame("server_shutdown_combined.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, Some(&b"!serverShutdown"[..]));
        assert_eq!(f.message, Message::ServerShutdown { event_ms: 1_770_123_456_789 });
    });
}

#[test]
fn key_order_and_whitespace_do_not_matter() {
    with_frame("depth_update_shuffled.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, Some(&b"bnbbtc@depth@100ms"[..]));
        assert_documented_diff(f.message);
    });
}

#[test]
fn unknown_keys_of_every_type_are_skipped() {
    // Nested objects and arrays, escapes, UTF-8, exponents, literals, an extra level element,
    // and an escaped key spelling "U" (matched on raw bytes, so unknown, not a duplicate).
    with_frame("depth_update_unknown_keys.json", TimeUnit::Millisecond, |f| {
        assert_eq!(f.stream, None);
        assert_documented_diff(f.message);
    });
}

#[test]
fn microsecond_time_unit_converts_to_milliseconds() {
    with_frame("trade_microsecond.json", TimeUnit::Microsecond, |f| {
        let Message::Trade(t) = f.message else { panic!("not a trade: {f:?}") };
        assert_eq!(t.event_ms, 1_672_515_782_136);
        assert_eq!(t.trade_ms, 1_672_515_782_136);
        assert!(!t.taker_sell());
    });
    // The same wire values read as milliseconds are a thousand times larger: the flag matters.
    with_frame("trade_microsecond.json", TimeUnit::Millisecond, |f| {
        let Message::Trade(t) = f.message else { panic!("not a trade: {f:?}") };
        assert_eq!(t.event_ms, 1_672_515_782_136_123);
    });
    let mut d = BinanceDecoder::new(TimeUnit::Microsecond, 4);
    assert_eq!(d.time_unit(), TimeUnit::Microsecond);
    let m = d.decode(br#"{"e":"serverShutdown","E":1770123456789999}"#).map(|f| f.message);
    assert_eq!(m, Ok(Message::ServerShutdown { event_ms: 1_770_123_456_789 }));
}

#[test]
fn trades_without_and_with_legacy_order_ids_decode() {
    with_frame("trade_legacy_order_ids.json", TimeUnit::Millisecond, |f| assert_documented_trade(f.message));
}

#[test]
fn symbols_are_borrowed_verbatim_including_utf8() {
    with_frame("trade_utf8_symbol.json", TimeUnit::Millisecond, |f| {
        let Message::Trade(t) = f.message else { panic!("not a trade: {f:?}") };
        assert_eq!(t.symbol, "币安USDT".as_bytes());
        assert_eq!(t.price, Price(150_000_000));
    });
}

#[test]
fn removal_levels_decode_as_zero_quantity() {
    with_frame("depth_update_removal.json", TimeUnit::Millisecond, |f| {
        let Message::Depth(d) = f.message else { panic!("not a diff: {f:?}") };
        assert_eq!((d.first_update_id, d.final_update_id), (161, 163));
        assert_eq!(d.bids, [lv("0.0024", "0"), lv("0.0023", "5.5")]);
        assert!(d.asks.is_empty());
    });
}

#[test]
fn the_level_bound_refuses_larger_messages() {
    let bytes = fixture("depth_update_removal.json");
    let mut d = BinanceDecoder::new(TimeUnit::Millisecond, 1);
    assert_eq!(d.levels_max(), 1);
    assert_eq!(d.decode(&bytes), Err(DecodeError::TooManyLevels("b")));
    // The decoder is reusable after a refusal.
    let ok = fixture("depth_update.json");
    assert!(matches!(d.decode(&ok), Ok(Frame { message: Message::Depth(_), .. })));
}

// ---------------------------------------------------------------------------------------------
// Malformed input.

#[test]
fn malformed_fixtures_are_refused_with_the_right_error() {
    let mut d = decoder();
    for &(name, want) in MALFORMED {
        let bytes = fixture(name);
        let got = d.decode(&bytes);
        match (want, got) {
            (Want::Json(kind), Err(DecodeError::Json(e))) => assert_eq!(e.kind, kind, "{name}: {e}"),
            (Want::Decode(w), Err(e)) => assert_eq!(e, w, "{name}"),
            (_, got) => panic!("{name}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn json_errors_point_at_the_offending_byte() {
    let bytes = fixture("malformed_non_utf8_string.json");
    let at = bytes.iter().position(|&b| b == 0xff).expect("0xff in fixture");
    assert_eq!(
        decoder().decode(&bytes),
        Err(DecodeError::Json(JsonError { kind: JsonErrorKind::NotUtf8, offset: at }))
    );
    let bytes = fixture("malformed_trailing_garbage.json");
    let at = bytes.len() - 1;
    assert_eq!(
        decoder().decode(&bytes),
        Err(DecodeError::Json(JsonError { kind: JsonErrorKind::TrailingBytes, offset: at }))
    );
    // Errors print a message naming the place.
    let e = decoder().decode(b"{\"e\":tru}").expect_err("bad literal");
    assert_eq!(e.to_string(), "malformed JSON: unexpected byte at byte 8");
    assert_eq!(DecodeError::MissingField("u").to_string(), "missing field `u`");
}

#[test]
fn trailing_whitespace_is_accepted() {
    let mut bytes = fixture("trade.json");
    bytes.extend_from_slice(b" \r\n\t\n");
    let mut d = decoder();
    let frame = d.decode(&bytes).expect("trailing whitespace is fine");
    assert_documented_trade(frame.message);
}

/// Cheap fuzz, part 1: every strict prefix of every valid frame is refused as truncated, at the
/// end of the input, without panicking.
#[test]
fn every_truncation_of_every_valid_frame_is_an_error() {
    let mut d = decoder();
    let mut checked = 0;
    for name in VALID {
        let bytes = fixture(name);
        assert!(d.decode(&bytes).is_ok(), "{name} must decode whole");
        for n in 0..bytes.len() {
            let want = Err(DecodeError::Json(JsonError { kind: JsonErrorKind::UnexpectedEnd, offset: n }));
            assert_eq!(d.decode(&bytes[..n]).map(|_| ()), want, "{name} cut at {n}");
            checked += 1;
        }
    }
    assert!(checked > 2_000, "only {checked} prefixes");
}

/// Cheap fuzz, part 2: single-byte substitutions at every position, then random multi-byte
/// edits, of every valid frame. Nothing panics; what decodes stays within the bounds.
#[test]
fn mutated_frames_never_panic() {
    const SUBSTITUTES: &[u8] = b"\x00\x1f \"\\{}[],:-.0e9tfnu\x7f\x80\xc3\xff";
    let mut d = BinanceDecoder::new(TimeUnit::Millisecond, 8);
    let frames: Vec<Vec<u8>> = VALID.iter().map(|n| fixture(n)).collect();
    let mut decoded = 0u64;
    let mut check = |d: &mut BinanceDecoder, bytes: &[u8]| {
        if let Ok(f) = d.decode(bytes) {
            decoded += 1;
            if let Message::Depth(DepthDiff { bids, asks, .. }) | Message::Snapshot(Snapshot { bids, asks, .. }) =
                f.message
            {
                assert!(bids.len() <= 8 && asks.len() <= 8);
                assert!(bids.iter().chain(asks).all(|l| l.price.0 > 0));
            }
        }
    };
    for bytes in &frames {
        let mut m = bytes.clone();
        for i in 0..m.len() {
            let original = m[i];
            for &s in SUBSTITUTES {
                m[i] = s;
                check(&mut d, &m);
            }
            m[i] = original;
        }
    }
    let mut rng = Rng::from_env(0x5eed_b1a2_cafe_0001);
    for _ in 0..30_000 {
        let mut m = frames[rng.below(frames.len())].clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(m.len().max(1));
            match rng.below(4) {
                0 if !m.is_empty() => m[i] = SUBSTITUTES[rng.below(SUBSTITUTES.len())],
                1 if !m.is_empty() => {
                    m.remove(i);
                }
                2 => m.insert(i.min(m.len()), SUBSTITUTES[rng.below(SUBSTITUTES.len())]),
                _ => {
                    // Splice a copy of another stretch in (duplicated keys, nested brackets).
                    let a = rng.below(m.len().max(1));
                    let b = (a + rng.below(16)).min(m.len());
                    let piece: Vec<u8> = m[a..b].to_vec();
                    let at = i.min(m.len());
                    m.splice(at..at, piece);
                }
            }
        }
        check(&mut d, &m);
    }
    assert!(decoded > 0, "some mutations (digits in numbers, say) must still decode");
}

#[test]
fn pathological_nesting_is_refused_quickly() {
    let mut deep = b"{\"x\":".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 1 << 20));
    let mut d = decoder();
    let got = d.decode(&deep);
    assert!(matches!(got, Err(DecodeError::Json(JsonError { kind: JsonErrorKind::TooDeep, .. }))), "{got:?}");
    let mut wide = b"{\"x\":[".to_vec();
    for _ in 0..100_000 {
        wide.extend_from_slice(b"[[]],");
    }
    wide.extend_from_slice(b"0],\"e\":\"serverShutdown\",\"E\":1}");
    assert_eq!(decoder().decode(&wide).map(|f| f.message), Ok(Message::ServerShutdown { event_ms: 1 }));
}

// ---------------------------------------------------------------------------------------------
// Book sync, case by case (venues.md §1.2).

fn p(v: i64) -> Price {
    Price(v)
}

fn l(price: i64, qty: u64) -> Level {
    Level { price: Price(price), qty: Qty(qty) }
}

fn diff<'a>(first: u64, last: u64, bids: &'a [Level], asks: &'a [Level]) -> DepthDiff<'a> {
    DepthDiff { symbol: b"BTCUSDT", event_ms: 0, first_update_id: first, final_update_id: last, bids, asks }
}

fn snap<'a>(last_update_id: u64, bids: &'a [Level], asks: &'a [Level]) -> Snapshot<'a> {
    Snapshot { last_update_id, bids, asks }
}

fn prices(levels: &[Level]) -> Vec<(i64, u64)> {
    levels.iter().map(|l| (l.price.0, l.qty.0)).collect()
}

/// A sync that went live from snapshot 110 with bids 98/99 and asks 101/102.
fn live_at_110() -> (BinanceBookSync, Book) {
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    let out = s.on_snapshot(&snap(110, &[l(99, 1), l(98, 2)], &[l(101, 1), l(102, 2)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 110, replayed: 0 });
    (s, book)
}

#[test]
fn happy_path_buffered_diffs_then_snapshot() {
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    assert!(!s.is_live());
    // Step 1: buffer; the first diff asks for a snapshot, once.
    let out = s.on_diff(&diff(100, 105, &[l(90, 9)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::NeedSnapshot);
    assert!(out.wants_snapshot());
    assert_eq!(s.on_diff(&diff(106, 110, &[l(99, 5)], &[l(101, 0)]), &mut book), SyncOutcome::Buffered);
    assert_eq!(s.on_diff(&diff(111, 112, &[], &[l(103, 7)]), &mut book), SyncOutcome::Buffered);
    assert_eq!(s.buffered_len(), 3);
    assert_eq!(s.first_buffered_id(), Some(100));
    assert!(book.bids().is_empty(), "nothing reaches the book before the snapshot");
    // Steps 3–6: snapshot 107 drops 100..105 (u <= 107), applies 106..110 (holds 108) and 111..112.
    let out = s.on_snapshot(&snap(107, &[l(99, 1), l(98, 2)], &[l(101, 1), l(102, 2)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 112, replayed: 2 });
    assert!(!out.wants_snapshot());
    assert!(s.is_live());
    assert_eq!(s.local_id(), Some(112));
    assert_eq!(s.buffered_len(), 0);
    assert_eq!(prices(book.bids()), [(99, 5), (98, 2)], "90 came from a discarded diff");
    assert_eq!(prices(book.asks()), [(102, 2), (103, 7)]);
    // Live diffs.
    assert_eq!(s.on_diff(&diff(113, 115, &[l(100, 4)], &[]), &mut book), SyncOutcome::Applied);
    assert_eq!(s.local_id(), Some(115));
    assert_eq!(book.best_bid(), Some(l(100, 4)));
    assert_eq!(s.counters().sync_count, 1);
    assert_eq!(s.counters().gap_count, 0);
    assert!(book.check_invariants());
}

#[test]
fn stale_snapshot_is_refused_and_the_buffer_kept() {
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    s.on_diff(&diff(100, 105, &[l(99, 1)], &[]), &mut book);
    // lastUpdateId < first buffered U: too old (step 3).
    let out = s.on_snapshot(&snap(90, &[l(97, 1)], &[l(103, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::StaleSnapshot { last_update_id: 90, first_buffered_id: 100 });
    assert!(out.wants_snapshot());
    // The literal rule also refuses lastUpdateId == U - 1 (the one-short case).
    let out = s.on_snapshot(&snap(99, &[l(97, 1)], &[l(103, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::StaleSnapshot { last_update_id: 99, first_buffered_id: 100 });
    assert!(!s.is_live());
    assert!(book.bids().is_empty() && book.asks().is_empty(), "a refused snapshot is not loaded");
    assert_eq!(s.buffered_len(), 1, "buffering survives snapshot retries (venues.md §6 item 2)");
    // While the refetch is out, diffs just buffer.
    assert_eq!(s.on_diff(&diff(106, 108, &[], &[l(104, 1)]), &mut book), SyncOutcome::Buffered);
    // lastUpdateId == first U is fresh enough: the first diff holds lastUpdateId + 1.
    let out = s.on_snapshot(&snap(100, &[l(97, 1)], &[l(103, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 108, replayed: 2 });
    assert_eq!(prices(book.bids()), [(99, 1), (97, 1)]);
    assert_eq!(prices(book.asks()), [(103, 1), (104, 1)]);
    assert_eq!(s.counters().stale_snapshot_count, 2);
}

#[test]
fn boundary_event_containing_last_update_id_plus_one_is_applied() {
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    s.on_diff(&diff(100, 105, &[l(95, 1)], &[]), &mut book);
    s.on_diff(&diff(106, 110, &[l(96, 1)], &[]), &mut book);
    // 108 lies inside [106; 110]: 100..105 is dropped, 106..110 applied.
    let out = s.on_snapshot(&snap(107, &[l(99, 1)], &[l(101, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 110, replayed: 1 });
    assert_eq!(prices(book.bids()), [(99, 1), (96, 1)]);
}

#[test]
fn event_starting_exactly_at_last_update_id_plus_one_is_applied() {
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    s.on_diff(&diff(100, 105, &[l(95, 1)], &[]), &mut book);
    s.on_diff(&diff(106, 110, &[l(96, 1)], &[]), &mut book);
    // u == lastUpdateId is discarded (step 4); U == lastUpdateId + 1 follows on.
    let out = s.on_snapshot(&snap(105, &[l(99, 1)], &[l(101, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 110, replayed: 1 });
    assert_eq!(prices(book.bids()), [(99, 1), (96, 1)]);
    // Live, the same: U == local + 1.
    assert_eq!(s.on_diff(&diff(111, 111, &[l(97, 1)], &[]), &mut book), SyncOutcome::Applied);
    assert_eq!(s.local_id(), Some(111));
}

#[test]
fn gap_while_live_discards_the_book_and_restarts_from_the_gap_event() {
    let (mut s, mut book) = live_at_110();
    let out = s.on_diff(&diff(112, 115, &[l(97, 3)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::Gap { expected_first_id: 111, first_id: 112 });
    assert!(out.wants_snapshot());
    assert!(!s.is_live());
    assert!(book.bids().is_empty() && book.asks().is_empty(), "the book is discarded");
    assert_eq!(s.first_buffered_id(), Some(112), "the gap event starts the new buffer");
    assert_eq!(s.on_diff(&diff(116, 117, &[], &[l(104, 1)]), &mut book), SyncOutcome::Buffered);
    let out = s.on_snapshot(&snap(113, &[l(99, 1)], &[l(101, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 117, replayed: 2 });
    assert_eq!(prices(book.bids()), [(99, 1), (97, 3)]);
    assert_eq!(prices(book.asks()), [(101, 1), (104, 1)]);
    let c = s.counters();
    assert_eq!((c.gap_count, c.resync_count, c.sync_count), (1, 1, 2));
}

#[test]
fn gap_inside_the_buffer_is_found_during_replay() {
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    s.on_diff(&diff(100, 105, &[l(95, 1)], &[]), &mut book);
    s.on_diff(&diff(110, 112, &[l(96, 1)], &[]), &mut book);
    let out = s.on_snapshot(&snap(103, &[l(99, 1)], &[l(101, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Gap { expected_first_id: 106, first_id: 110 });
    assert!(!s.is_live());
    assert!(book.bids().is_empty());
    assert_eq!((s.buffered_len(), s.first_buffered_id()), (1, Some(110)));
    let out = s.on_snapshot(&snap(111, &[l(99, 1)], &[l(101, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 112, replayed: 1 });
}

#[test]
fn stale_and_out_of_order_events_are_ignored() {
    let (mut s, mut book) = live_at_110();
    let before = (prices(book.bids()), prices(book.asks()));
    // u < local: ignored, whatever it carries.
    assert_eq!(s.on_diff(&diff(100, 109, &[l(99, 0)], &[l(100, 1)]), &mut book), SyncOutcome::IgnoredStale);
    assert_eq!((prices(book.bids()), prices(book.asks())), before);
    assert_eq!(s.local_id(), Some(110));
    // u == local is not below it: applied again (sizes are absolute, so it is idempotent).
    assert_eq!(s.on_diff(&diff(108, 110, &[l(99, 1)], &[]), &mut book), SyncOutcome::Applied);
    assert_eq!((prices(book.bids()), prices(book.asks())), before);
    // A diff overlapping the local id is applied and moves it to its u.
    assert_eq!(s.on_diff(&diff(109, 112, &[l(99, 4)], &[]), &mut book), SyncOutcome::Applied);
    assert_eq!(s.local_id(), Some(112));
    // While buffering, a diff older than the last buffered one is ignored too.
    let mut s = BinanceBookSync::new(16, 256);
    s.on_diff(&diff(100, 105, &[], &[]), &mut book);
    assert_eq!(s.on_diff(&diff(90, 95, &[], &[]), &mut book), SyncOutcome::IgnoredStale);
    assert_eq!(s.buffered_len(), 1);
    assert_eq!(s.counters().stale_event_count, 1);
}

#[test]
fn removal_of_an_absent_level_is_ignored() {
    let (mut s, mut book) = live_at_110();
    assert_eq!(s.on_diff(&diff(111, 111, &[l(50, 0)], &[l(150, 0)]), &mut book), SyncOutcome::Applied);
    assert_eq!(prices(book.bids()), [(99, 1), (98, 2)]);
    assert_eq!(prices(book.asks()), [(101, 1), (102, 2)]);
    assert_eq!(s.on_diff(&diff(112, 112, &[l(99, 0)], &[]), &mut book), SyncOutcome::Applied);
    assert_eq!(prices(book.bids()), [(98, 2)]);
    assert!(s.is_live());
}

#[test]
fn crossed_book_is_discarded_and_resynced() {
    // A diff moving both sides at once crosses only in the middle of the event: fine.
    let (mut s, mut book) = live_at_110();
    let out = s.on_diff(&diff(111, 111, &[l(101, 1), l(100, 1)], &[l(101, 0), l(102, 0), l(103, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Applied);
    assert_eq!(book.best_bid().map(|l| l.price), Some(p(101)));
    // A bid at or above the best ask after the whole event: corrupt.
    let out = s.on_diff(&diff(112, 112, &[l(103, 1)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::Crossed);
    assert!(out.wants_snapshot());
    assert!(!s.is_live());
    assert!(book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.buffered_len(), 0, "the offending diff is not kept");
    assert_eq!(s.on_diff(&diff(113, 114, &[l(100, 1)], &[]), &mut book), SyncOutcome::Buffered);
    // A crossed snapshot is corrupt too; the buffer survives it.
    let out = s.on_snapshot(&snap(113, &[l(105, 1)], &[l(104, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Crossed);
    assert!(book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.buffered_len(), 1);
    // Crossing during replay: the rest of the buffer is kept.
    assert_eq!(s.on_diff(&diff(115, 116, &[l(101, 1)], &[]), &mut book), SyncOutcome::Buffered);
    let out = s.on_snapshot(&snap(113, &[l(99, 1)], &[l(100, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Crossed, "113..114 puts a bid at 100 = best ask");
    assert_eq!((s.buffered_len(), s.first_buffered_id()), (1, Some(115)));
    let out = s.on_snapshot(&snap(115, &[l(99, 1)], &[l(102, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 116, replayed: 1 });
    assert_eq!(prices(book.bids()), [(101, 1), (99, 1)]);
    let c = s.counters();
    assert_eq!((c.crossed_count, c.resync_count), (3, 3));
}

#[test]
fn buffer_bound_drops_the_oldest_diffs() {
    let mut s = BinanceBookSync::new(3, 100);
    let mut book = Book::new(64);
    for id in 1..=4 {
        s.on_diff(&diff(id, id, &[l(90 + id as i64, 1)], &[]), &mut book);
    }
    assert_eq!((s.buffered_len(), s.first_buffered_id()), (3, Some(2)));
    assert_eq!(s.counters().buffer_dropped_count, 1);
    // Diff 1 is gone, so a snapshot at 1 is now too old.
    let out = s.on_snapshot(&snap(1, &[l(80, 1)], &[l(100, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::StaleSnapshot { last_update_id: 1, first_buffered_id: 2 });
    let out = s.on_snapshot(&snap(2, &[l(80, 1)], &[l(100, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 4, replayed: 2 });
    assert_eq!(prices(book.bids()), [(94, 1), (93, 1), (80, 1)]);

    // The level bound drops the oldest too.
    let mut s = BinanceBookSync::new(10, 4);
    s.on_diff(&diff(1, 1, &[l(91, 1), l(92, 1), l(93, 1)], &[]), &mut book);
    s.on_diff(&diff(2, 2, &[l(94, 1)], &[l(100, 1)]), &mut book);
    assert_eq!((s.buffered_len(), s.first_buffered_id()), (1, Some(2)));
    // One diff larger than the whole buffer empties it and is dropped.
    s.on_diff(&diff(3, 3, &[l(91, 1), l(92, 1), l(93, 1)], &[l(101, 1), l(102, 1)]), &mut book);
    assert_eq!(s.buffered_len(), 0);
    assert_eq!(s.counters().buffer_dropped_count, 3);
    // With nothing buffered the snapshot loads, and the per-event rule catches what was lost.
    let out = s.on_snapshot(&snap(2, &[l(80, 1)], &[l(100, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 2, replayed: 0 });
    let out = s.on_diff(&diff(4, 4, &[], &[]), &mut book);
    assert_eq!(out, SyncOutcome::Gap { expected_first_id: 3, first_id: 4 });
}

#[test]
fn snapshot_with_nothing_buffered_loads_and_the_next_diff_is_checked() {
    let mut s = BinanceBookSync::new(4, 16);
    let mut book = Book::new(8);
    let out = s.on_snapshot(&snap(50, &[l(99, 1)], &[l(101, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 50, replayed: 0 });
    assert_eq!(s.on_diff(&diff(45, 49, &[], &[]), &mut book), SyncOutcome::IgnoredStale);
    assert_eq!(s.on_diff(&diff(48, 52, &[l(98, 1)], &[]), &mut book), SyncOutcome::Applied);
    assert_eq!(s.local_id(), Some(52));
}

#[test]
fn snapshots_while_live_reload_only_when_newer() {
    let (mut s, mut book) = live_at_110();
    let out = s.on_snapshot(&snap(110, &[l(50, 1)], &[l(150, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::IgnoredStale);
    assert_eq!(prices(book.bids()), [(99, 1), (98, 2)]);
    let out = s.on_snapshot(&snap(120, &[l(97, 1)], &[l(103, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Synced { update_id: 120, replayed: 0 });
    assert_eq!(prices(book.bids()), [(97, 1)]);
    assert_eq!(prices(book.asks()), [(103, 1)]);
    assert_eq!(s.on_diff(&diff(115, 121, &[l(96, 1)], &[]), &mut book), SyncOutcome::Applied);
}

#[test]
fn reset_starts_over() {
    let (mut s, mut book) = live_at_110();
    s.reset(&mut book);
    assert!(!s.is_live());
    assert!(book.bids().is_empty());
    assert_eq!(s.on_diff(&diff(500, 501, &[], &[]), &mut book), SyncOutcome::NeedSnapshot);
    assert_eq!(s.on_diff(&diff(502, 502, &[], &[]), &mut book), SyncOutcome::Buffered);
}

#[test]
fn decoded_fixtures_drive_the_sync() {
    let mut d = decoder();
    let mut s = BinanceBookSync::new(16, 256);
    let mut book = Book::new(64);
    for (name, want) in
        [("depth_update.json", SyncOutcome::NeedSnapshot), ("depth_update_removal.json", SyncOutcome::Buffered)]
    {
        let bytes = fixture(name);
        let Ok(Frame { message: Message::Depth(diff), .. }) = d.decode(&bytes) else { panic!("{name}") };
        assert_eq!(s.on_diff(&diff, &mut book), want, "{name}");
    }
    // The partial-depth example (lastUpdateId 160) as the snapshot: 157..160 is dropped,
    // 161..163 removes bid 0.0024 (held) and adds 0.0023.
    let bytes = fixture("partial_depth.json");
    let Ok(Frame { message: Message::Snapshot(snapshot), .. }) = d.decode(&bytes) else { panic!("snapshot") };
    assert_eq!(s.on_snapshot(&snapshot, &mut book), SyncOutcome::Synced { update_id: 163, replayed: 1 });
    assert_eq!(book.bids(), [lv("0.0023", "5.5")]);
    assert_eq!(book.asks(), [lv("0.0026", "100")]);
}

// ---------------------------------------------------------------------------------------------
// Book sync against a model: a true book evolves by contiguous diffs; the stream the machine
// sees drops, repeats and swaps diffs, and snapshots arrive late and lag the stream. Whenever
// the machine is live its book must equal the true book at its local id.

type Sides = (BTreeMap<i64, u64>, BTreeMap<i64, u64>);

/// A diff the model produced: ids and levels.
#[derive(Clone)]
struct ModelDiff {
    first: u64,
    last: u64,
    bids: Vec<Level>,
    asks: Vec<Level>,
}

fn levels_of(side: &BTreeMap<i64, u64>, bids: bool) -> Vec<Level> {
    let mut v: Vec<Level> = side.iter().map(|(&p, &q)| l(p, q)).collect();
    if bids {
        v.reverse();
    }
    v
}

/// The true book after update id `id`, which must end a diff.
fn state_at<'h>(ids: &[u64], history: &'h [Sides], id: u64) -> &'h Sides {
    let i = ids.partition_point(|&x| x < id);
    assert_eq!(ids.get(i), Some(&id), "local id {id} is not a diff boundary");
    &history[i]
}

#[test]
fn sync_tracks_a_model_book_through_a_lossy_stream() {
    let mut rng = Rng::from_env(0x0b00_c5ed_0000_0002);
    let base_id = 1_000u64;
    // Truth: bids in 90..100, asks in 101..111, never crossed. `history[i]` is the state after
    // update id `ids[i]`.
    let mut truth: Sides = Default::default();
    let mut diffs: Vec<ModelDiff> = Vec::new();
    let mut ids = vec![base_id];
    let mut history: Vec<Sides> = vec![truth.clone()];
    let mut next_id = base_id + 1;
    for _ in 0..3_000 {
        let span = 1 + rng.below(3) as u64;
        let (mut bids, mut asks) = (Vec::new(), Vec::new());
        for _ in 0..1 + rng.below(4) {
            let qty = if rng.chance(30) { 0 } else { 1 + rng.below(50) as u64 };
            if rng.chance(50) {
                let price = 90 + rng.below(10) as i64;
                bids.push(l(price, qty));
                if qty == 0 {
                    truth.0.remove(&price);
                } else {
                    truth.0.insert(price, qty);
                }
            } else {
                let price = 101 + rng.below(10) as i64;
                asks.push(l(price, qty));
                if qty == 0 {
                    truth.1.remove(&price);
                } else {
                    truth.1.insert(price, qty);
                }
            }
        }
        // Within one diff a price appears once per side on the wire: keep the last write.
        for side in [&mut bids, &mut asks] {
            let mut seen = std::collections::HashSet::new();
            side.reverse();
            side.retain(|lv| seen.insert(lv.price));
            side.reverse();
        }
        diffs.push(ModelDiff { first: next_id, last: next_id + span - 1, bids, asks });
        next_id += span;
        ids.push(next_id - 1);
        history.push(truth.clone());
    }

    let mut s = BinanceBookSync::new(32, 512);
    let mut book = Book::new(64);
    // Pending snapshot: (deliver when this many more diffs were seen, index into history).
    let mut pending: Option<(usize, usize)> = None;
    let mut live_checks = 0;
    let mut i = 0;
    while i < diffs.len() {
        // The stream: 3% lost, 3% repeated, 3% swapped with the next.
        let mut batch: Vec<&ModelDiff> = Vec::new();
        match rng.below(100) {
            0..=2 => {}
            3..=5 => batch.extend([&diffs[i], &diffs[i]]),
            6..=8 if i + 1 < diffs.len() => {
                batch.extend([&diffs[i + 1], &diffs[i]]);
                i += 1;
            }
            _ => batch.push(&diffs[i]),
        }
        let seen_upto = i; // history index of the newest diff sent so far (i + 1 in history)
        i += 1;
        for m in batch {
            let out = s.on_diff(&diff(m.first, m.last, &m.bids, &m.asks), &mut book);
            if out.wants_snapshot() {
                // The REST snapshot reflects the venue a little before or after what the
                // stream has delivered so far.
                let at = (seen_upto + 3).saturating_sub(rng.below(6)).min(history.len() - 1);
                pending = Some((rng.below(8), at));
            }
        }
        if let Some((wait, at)) = pending {
            if wait == 0 {
                pending = None;
                let (b, a) = &history[at];
                let (bids, asks) = (levels_of(b, true), levels_of(a, false));
                let out = s.on_snapshot(&snap(ids[at], &bids, &asks), &mut book);
                if out.wants_snapshot() {
                    pending = Some((rng.below(8), (seen_upto + 1).saturating_sub(rng.below(3))));
                }
            } else {
                pending = Some((wait - 1, at));
            }
        }
        assert!(book.check_invariants());
        match s.local_id() {
            Some(id) => {
                let (b, a) = state_at(&ids, &history, id);
                assert_eq!(book.bids(), levels_of(b, true).as_slice(), "bids at {id}");
                assert_eq!(book.asks(), levels_of(a, false).as_slice(), "asks at {id}");
                assert!(!book.is_crossed());
                live_checks += 1;
            }
            None => assert!(book.bids().is_empty() && book.asks().is_empty(), "a book not live is empty"),
        }
    }
    let c = *s.counters();
    eprintln!("model run: {c:?}, {live_checks} live checks");
    assert!(live_checks > 1_000, "the machine was rarely live: {c:?}");
    assert!(c.gap_count > 10 && c.stale_event_count > 10 && c.sync_count > 10, "{c:?}");
}

// ---------------------------------------------------------------------------------------------
// No allocation on the per-message path.

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decoding_and_syncing_allocate_nothing() {
    let frames: Vec<Vec<u8>> = VALID.iter().chain(MALFORMED.iter().map(|(n, _)| n)).map(|n| fixture(n)).collect();
    let mut d = BinanceDecoder::new(TimeUnit::Millisecond, 64);
    let mut s = BinanceBookSync::new(8, 64);
    let mut book = Book::new(64);
    let bids = [l(99, 1), l(98, 1)];
    let asks = [l(101, 1), l(102, 1)];
    let bid_up = [l(100, 1)];
    let crossing = [l(101, 1)];
    let (ok, allocations) = alloc::count(|| {
        let mut ok = 0;
        for _ in 0..50 {
            for f in &frames {
                match d.decode(f) {
                    Ok(Frame { message: Message::Depth(diff), .. }) => {
                        s.on_diff(&diff, &mut book);
                        ok += 1;
                    }
                    Ok(Frame { message: Message::Snapshot(snapshot), .. }) => {
                        s.on_snapshot(&snapshot, &mut book);
                        ok += 1;
                    }
                    Ok(_) => ok += 1,
                    Err(_) => {}
                }
            }
            // Buffering past the bound, a snapshot with replay, live diffs, a gap, a crossed book.
            s.reset(&mut book);
            for id in 1..=12 {
                s.on_diff(&diff(id, id, &bid_up, &[]), &mut book);
            }
            s.on_snapshot(&snap(5, &bids, &asks), &mut book);
            s.on_diff(&diff(13, 13, &bids, &asks), &mut book);
            s.on_diff(&diff(15, 15, &bids, &[]), &mut book);
            s.on_snapshot(&snap(15, &bids, &asks), &mut book);
            s.on_diff(&diff(16, 16, &crossing, &[]), &mut book);
        }
        ok
    });
    assert!(ok > 1_000, "only {ok} frames decoded");
    assert!(s.counters().gap_count > 0 && s.counters().crossed_count > 0 && s.counters().sync_count > 0);
    assert_eq!(allocations, Some(0), "allocations while decoding and syncing");
    // The counter itself works.
    let ((), one) = alloc::count(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(one, Some(1));
}

#[test]
fn sides_are_applied_to_the_right_side_of_the_book() {
    let (mut s, mut book) = live_at_110();
    s.on_diff(&diff(111, 111, &[l(97, 7)], &[l(104, 4)]), &mut book);
    assert!(book.bids().iter().any(|x| x.price == p(97)));
    assert!(book.asks().iter().any(|x| x.price == p(104)));
    assert_eq!(book.apply(Side::Bid, p(97), Qty(0)), rampart_engine::Applied::Removed);
}
