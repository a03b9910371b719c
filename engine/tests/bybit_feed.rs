//! Bybit v5 spot feed: the decoder against the frames documented in venues.md §2 (fixtures under
//! `tests/fixtures/bybit/`, one JSON file per frame, plus variants and malformed frames), and the
//! snapshot-plus-delta book sync of venues.md §2.2, case by case.
//!
//! Also proves the per-message path allocates nothing, with a counting global allocator.

use rampart_engine::feed::bybit::{
    BookKind, BookUpdate, BybitBookSync, BybitDecoder, Message, OpReply, SyncOutcome, Trade, BOOK_LEVELS_PER_SIDE_MAX,
    TRADES_PER_MESSAGE_MAX,
};
use rampart_engine::feed::{DecodeError, JsonError, JsonErrorKind};
use rampart_engine::fixed::ParseError;
use rampart_engine::{Book, BookId, Level, Price, Qty, TickKind};
use rampart_testkit::alloc::{self, Counting};
use rampart_testkit::feed::{assert_fixtures_listed, lv};

// ---------------------------------------------------------------------------------------------
// Fixtures.

/// Frames that decode. The first group is verbatim from venues.md §2; the rest are built from
/// them.
const VALID: &[&str] = &[
    "subscribe_request.json",
    "subscribe_ack.json",
    "ping_request.json",
    "pong_spot.json",
    "pong_option.json",
    "orderbook_snapshot.json",
    "orderbook_depth1_snapshot.json",
    "orderbook_rest.json",
    "public_trade.json",
    "kline.json",
    // Built from the documented frames.
    "orderbook_delta.json",
    "orderbook_delta_empty_side.json",
    "orderbook_reset.json",
    "orderbook_shuffled.json",
    "orderbook_unknown_keys.json",
    "orderbook_no_cts_no_seq.json",
    "public_trade_multi.json",
    "public_trade_empty.json",
    "pong_linear.json",
    "subscribe_failure.json",
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
        ("malformed_type_unknown.json", Decode(D::WrongType("type"))),
        ("malformed_type_missing.json", Decode(D::MissingField("type"))),
        ("malformed_missing_u.json", Decode(D::MissingField("u"))),
        ("malformed_missing_asks.json", Decode(D::MissingField("a"))),
        ("malformed_missing_data.json", Decode(D::MissingField("data"))),
        ("malformed_missing_ts.json", Decode(D::MissingField("ts"))),
        ("malformed_data_not_object.json", Decode(D::WrongType("data"))),
        ("malformed_trade_data_not_array.json", Decode(D::WrongType("data"))),
        ("malformed_trade_element_not_object.json", Decode(D::WrongType("data"))),
        ("malformed_trade_side.json", Decode(D::WrongType("S"))),
        ("malformed_trade_missing_price.json", Decode(D::MissingField("p"))),
        ("malformed_trade_price_number.json", Decode(D::WrongType("p"))),
        ("malformed_trade_price_not_decimal.json", Decode(D::BadDecimal { field: "p", error: ParseError::BadByte })),
        ("malformed_trade_bt_string.json", Decode(D::WrongType("BT"))),
        ("malformed_trade_id_escaped.json", Decode(D::Escaped("i"))),
        ("malformed_trade_duplicate_time.json", Decode(D::DuplicateField("T"))),
        ("malformed_level_numbers.json", Decode(D::BadLevel("b"))),
        ("malformed_level_short.json", Decode(D::BadLevel("a"))),
        ("malformed_level_not_array.json", Decode(D::BadLevel("b"))),
        ("malformed_bids_not_array.json", Decode(D::WrongType("b"))),
        ("malformed_price_zero.json", Decode(D::OutOfRange("b"))),
        ("malformed_qty_negative.json", Decode(D::BadDecimal { field: "a", error: ParseError::Negative })),
        ("malformed_price_empty.json", Decode(D::BadDecimal { field: "b", error: ParseError::Empty })),
        ("malformed_u_negative.json", Decode(D::OutOfRange("u"))),
        ("malformed_u_string.json", Decode(D::WrongType("u"))),
        ("malformed_u_overflow.json", Decode(D::OutOfRange("u"))),
        ("malformed_ts_fraction.json", Decode(D::WrongType("ts"))),
        ("malformed_cts_overflow.json", Decode(D::OutOfRange("cts"))),
        ("malformed_duplicate_u.json", Decode(D::DuplicateField("u"))),
        ("malformed_duplicate_topic.json", Decode(D::DuplicateField("topic"))),
        ("malformed_topic_number.json", Decode(D::WrongType("topic"))),
        ("malformed_symbol_escaped.json", Decode(D::Escaped("s"))),
        ("malformed_success_string.json", Decode(D::WrongType("success"))),
        ("malformed_op_number.json", Decode(D::WrongType("op"))),
        ("malformed_text_pong.json", Json(J::UnexpectedByte)),
        ("malformed_array_top.json", Decode(D::NotAnObject)),
        ("malformed_trailing_garbage.json", Json(J::TrailingBytes)),
        ("malformed_two_objects.json", Json(J::TrailingBytes)),
        ("malformed_trailing_comma.json", Json(J::UnexpectedByte)),
        ("malformed_single_quotes.json", Json(J::UnexpectedByte)),
        ("malformed_empty.json", Json(J::UnexpectedEnd)),
        ("malformed_bad_escape.json", Json(J::BadEscape)),
        ("malformed_deep_nesting.json", Json(J::TooDeep)),
        ("malformed_non_utf8.json", Json(J::NotUtf8)),
        ("malformed_control_char.json", Json(J::ControlChar)),
    ]
};

fn fixture_dir() -> String {
    format!("{}/tests/fixtures/bybit", env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/{name}", fixture_dir());
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn decoder() -> BybitDecoder {
    BybitDecoder::new(64, 64)
}

/// Decodes a fixture and hands the message to `check`.
fn with_message(name: &str, check: impl FnOnce(Message<'_>)) {
    let bytes = fixture(name);
    let mut d = decoder();
    let m = d.decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    check(m);
}

#[test]
fn every_fixture_file_is_used() {
    let malformed: Vec<&str> = MALFORMED.iter().map(|(m, _)| *m).collect();
    assert_fixtures_listed(&fixture_dir(), VALID, &malformed);
}

// ---------------------------------------------------------------------------------------------
// Documented frames, exact values.

/// The documented depth-50 snapshot: `u` 18521288, two levels per side.
fn assert_documented_snapshot(m: Message<'_>) {
    let Message::Book(b) = m else { panic!("not a book message: {m:?}") };
    let want = BookUpdate {
        topic: b"orderbook.50.BTCUSDT",
        depth: Some(50),
        kind: BookKind::Snapshot,
        ts_ms: 1_672_304_484_978,
        cts_ms: Some(1_672_304_484_976),
        symbol: b"BTCUSDT",
        update_id: 18_521_288,
        seq: Some(7_961_638_724),
        bids: &[
            Level { price: Price(1_649_350_000_000), qty: Qty(600_000) },
            Level { price: Price(1_649_300_000_000), qty: Qty(10_000_000) },
        ],
        asks: &[
            Level { price: Price(1_661_100_000_000), qty: Qty(2_900_000) },
            Level { price: Price(1_661_200_000_000), qty: Qty(21_300_000) },
        ],
    };
    assert_eq!(b, want);
    assert!(b.replaces_book());
}

#[test]
fn documented_book_snapshot() {
    with_message("orderbook_snapshot.json", assert_documented_snapshot);
}

#[test]
fn documented_depth1_recording_with_ts_before_type() {
    with_message("orderbook_depth1_snapshot.json", |m| {
        let want = BookUpdate {
            topic: b"orderbook.1.BTCUSDT",
            depth: Some(1),
            kind: BookKind::Snapshot,
            ts_ms: 1_786_613_159_749,
            cts_ms: Some(1_786_613_159_748),
            symbol: b"BTCUSDT",
            update_id: 72_212_457,
            seq: Some(112_603_120_278),
            bids: &[lv("63705.3", "2.045546")],
            asks: &[lv("63705.4", "2.334566")],
        };
        assert_eq!(m, Message::Book(want));
    });
}

#[test]
fn documented_trade() {
    with_message("public_trade.json", |m| {
        let Message::Trades(t) = m else { panic!("not trades: {m:?}") };
        assert_eq!(t.topic, b"publicTrade.BTCUSDT");
        assert_eq!(t.ts_ms, 1_672_304_486_868);
        assert_eq!(t.len(), 1);
        assert!(!t.is_empty());
        let want = Trade {
            symbol: b"BTCUSDT",
            trade_id: b"20f43950-d8dd-5b31-9112-a178eb6023af",
            trade_ms: 1_672_304_486_865,
            price: Price(1_657_850_000_000),
            qty: Qty(100_000),
            taker_sell: false,
            block_trade: false,
            rpi: false,
            seq: Some(1_783_284_617),
        };
        assert_eq!(t.get(0), Some(want));
        assert_eq!(t.get(1), None);
        assert_eq!(t.iter().collect::<Vec<_>>(), [want]);
        let tick = want.tick(BookId(3));
        assert_eq!(tick.book, BookId(3));
        assert_eq!(tick.ts_ms, 1_672_304_486_865);
        assert_eq!(
            tick.kind,
            TickKind::Trade { price: Price(1_657_850_000_000), qty: Qty(100_000), taker_sell: false }
        );
    });
}

#[test]
fn documented_op_replies() {
    with_message("subscribe_ack.json", |m| {
        let want = OpReply {
            op: b"subscribe",
            success: Some(true),
            ret_msg: Some(b"subscribe"),
            conn_id: Some(b"d9avsh3fo0jvsls9d82g-5m9jh"),
            req_id: Some(b"1"),
        };
        assert_eq!(m, Message::OpReply(want));
        assert!(!want.is_pong() && !want.is_failure());
    });
    with_message("pong_spot.json", |m| {
        let want = OpReply {
            op: b"ping",
            success: Some(true),
            ret_msg: Some(b"pong"),
            conn_id: Some(b"0970e817-..."),
            req_id: None,
        };
        assert_eq!(m, Message::OpReply(want));
        assert!(want.is_pong());
    });
    with_message("pong_option.json", |m| {
        let want = OpReply { op: b"pong", success: None, ret_msg: None, conn_id: None, req_id: None };
        assert_eq!(m, Message::OpReply(want));
        assert!(want.is_pong());
    });
    with_message("pong_linear.json", |m| {
        let Message::OpReply(r) = m else { panic!("not an op reply: {m:?}") };
        assert!(r.is_pong());
        assert_eq!(r.req_id, Some(&b""[..]));
    });
    with_message("subscribe_failure.json", |m| {
        let Message::OpReply(r) = m else { panic!("not an op reply: {m:?}") };
        assert!(r.is_failure() && !r.is_pong());
        assert_eq!(r.ret_msg, Some(&b"error:handler not found,topic:orderbook.5.BTCUSDT"[..]));
        assert_eq!(r.req_id, Some(&b"2"[..]));
    });
    // The client's own requests (echoed by a simulator, say) decode the same way.
    with_message("subscribe_request.json", |m| {
        let want = OpReply { op: b"subscribe", success: None, ret_msg: None, conn_id: None, req_id: Some(b"test") };
        assert_eq!(m, Message::OpReply(want));
    });
    with_message("ping_request.json", |m| {
        let want = OpReply { op: b"ping", success: None, ret_msg: None, conn_id: None, req_id: Some(b"100001") };
        assert_eq!(m, Message::OpReply(want));
        assert!(!want.is_pong(), "the request is not its own reply");
    });
}

#[test]
fn documented_frames_of_other_kinds_are_values_not_errors() {
    with_message("kline.json", |m| assert_eq!(m, Message::Other { topic: Some(b"kline.5.BTCUSDT") }));
    with_message("orderbook_rest.json", |m| assert_eq!(m, Message::Other { topic: None }));
}

// ---------------------------------------------------------------------------------------------
// Variants.

#[test]
fn delta_decodes_with_removals() {
    with_message("orderbook_delta.json", |m| {
        let Message::Book(b) = m else { panic!("not a book message: {m:?}") };
        assert_eq!(b.kind, BookKind::Delta);
        assert!(!b.replaces_book());
        assert_eq!(b.update_id, 18_521_289);
        assert_eq!(b.seq, Some(7_961_638_730));
        assert_eq!(b.cts_ms, Some(1_672_304_484_998));
        assert_eq!(b.bids, [lv("16493.50", "0"), lv("16494.00", "1.5")]);
        assert_eq!(b.asks, [lv("16611.00", "0.030")]);
    });
    with_message("orderbook_delta_empty_side.json", |m| {
        let Message::Book(b) = m else { panic!("not a book message: {m:?}") };
        assert!(b.bids.is_empty());
        assert_eq!(b.asks, [lv("16612.00", "0"), lv("16700.00", "0")]);
    });
    with_message("orderbook_reset.json", |m| {
        let Message::Book(b) = m else { panic!("not a book message: {m:?}") };
        assert_eq!((b.kind, b.update_id), (BookKind::Delta, 1));
        assert!(b.replaces_book(), "u = 1 replaces the book whatever its type");
    });
}

#[test]
fn key_order_and_whitespace_do_not_matter() {
    with_message("orderbook_shuffled.json", assert_documented_snapshot);
}

#[test]
fn unknown_keys_of_every_type_are_skipped() {
    // Nested values, escapes, UTF-8 keys, exponents, literals, an extra level element, and an
    // escaped key spelling "u" (matched on raw bytes, so unknown, not a duplicate).
    with_message("orderbook_unknown_keys.json", assert_documented_snapshot);
}

#[test]
fn unconfirmed_optional_fields_are_tolerated() {
    with_message("orderbook_no_cts_no_seq.json", |m| {
        let Message::Book(b) = m else { panic!("not a book message: {m:?}") };
        assert_eq!((b.depth, b.cts_ms, b.seq, b.update_id), (Some(200), None, None, 42));
    });
    with_message("public_trade_multi.json", |m| {
        let Message::Trades(t) = m else { panic!("not trades: {m:?}") };
        assert_eq!(t.topic, b"publicTrade.ETHUSDT");
        let got: Vec<Trade<'_>> = t.iter().collect();
        let want = [
            Trade {
                symbol: b"ETHUSDT",
                trade_id: b"2290000000012345",
                trade_ms: 1_672_304_486_890,
                price: lv("1200.1", "1").price,
                qty: lv("1", "1.25").qty,
                taker_sell: true,
                block_trade: false,
                rpi: true,
                seq: Some(1_783_284_620),
            },
            Trade {
                symbol: b"ETHUSDT",
                trade_id: b"2290000000012346",
                trade_ms: 1_672_304_486_891,
                price: lv("1200.2", "1").price,
                qty: lv("1", "0.5").qty,
                taker_sell: false,
                block_trade: false,
                rpi: false,
                seq: None,
            },
        ];
        assert_eq!(got, want);
        assert!(t
            .get(0)
            .is_some_and(|t| t.tick(BookId(1)).kind
                == TickKind::Trade { price: want[0].price, qty: want[0].qty, taker_sell: true }));
    });
    with_message("public_trade_empty.json", |m| {
        let Message::Trades(t) = m else { panic!("not trades: {m:?}") };
        assert!(t.is_empty());
        assert_eq!(t.iter().count(), 0);
    });
}

#[test]
fn the_bounds_refuse_larger_messages() {
    let mut d = BybitDecoder::new(1, 1);
    assert_eq!((d.levels_max(), d.trades_max()), (1, 1));
    let book = fixture("orderbook_snapshot.json");
    assert_eq!(d.decode(&book), Err(DecodeError::TooManyLevels("b")));
    let trades = fixture("public_trade_multi.json");
    assert_eq!(d.decode(&trades), Err(DecodeError::TooManyLevels("data")));
    // The decoder is reusable after a refusal.
    let ok = fixture("orderbook_depth1_snapshot.json");
    assert!(matches!(d.decode(&ok), Ok(Message::Book(_))));
    let big = BybitDecoder::new(BOOK_LEVELS_PER_SIDE_MAX, TRADES_PER_MESSAGE_MAX);
    assert_eq!((big.levels_max(), big.trades_max()), (1000, 1024));
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
    let bytes = fixture("malformed_non_utf8.json");
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
}

#[test]
fn trailing_whitespace_is_accepted() {
    let mut bytes = fixture("orderbook_snapshot.json");
    bytes.extend_from_slice(b" \r\n\t\n");
    let mut d = decoder();
    assert_documented_snapshot(d.decode(&bytes).expect("trailing whitespace is fine"));
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

/// Cheap fuzz, part 2: single-byte substitutions at every position of every valid frame, and
/// every single-byte deletion. Nothing panics; what decodes stays within the bounds.
#[test]
fn mutated_frames_never_panic() {
    const SUBSTITUTES: &[u8] = b"\x00\x1f \"\\{}[],:-.0e9tfnu\x7f\x80\xc3\xff";
    let mut d = BybitDecoder::new(8, 8);
    let mut decoded = 0u64;
    for name in VALID {
        let bytes = fixture(name);
        let mut check = |m: &[u8]| {
            if let Ok(msg) = d.decode(m) {
                decoded += 1;
                match msg {
                    Message::Book(b) => {
                        assert!(b.bids.len() <= 8 && b.asks.len() <= 8);
                        assert!(b.bids.iter().chain(b.asks).all(|l| l.price.0 > 0));
                    }
                    Message::Trades(t) => assert!(t.len() <= 8 && t.iter().all(|t| t.price.0 > 0)),
                    _ => {}
                }
            }
        };
        let mut m = bytes.clone();
        for i in 0..m.len() {
            let original = m[i];
            for &s in SUBSTITUTES {
                m[i] = s;
                check(&m);
            }
            m[i] = original;
            let mut cut = bytes.clone();
            cut.remove(i);
            check(&cut);
        }
    }
    assert!(decoded > 0, "some mutations (digits in numbers, say) must still decode");
}

// ---------------------------------------------------------------------------------------------
// Book sync, case by case (venues.md §2.2).

fn l(price: i64, qty: u64) -> Level {
    Level { price: Price(price), qty: Qty(qty) }
}

fn update<'a>(kind: BookKind, u: u64, bids: &'a [Level], asks: &'a [Level]) -> BookUpdate<'a> {
    BookUpdate {
        topic: b"orderbook.50.BTCUSDT",
        depth: Some(50),
        kind,
        ts_ms: 0,
        cts_ms: None,
        symbol: b"BTCUSDT",
        update_id: u,
        seq: None,
        bids,
        asks,
    }
}

fn snapshot<'a>(u: u64, bids: &'a [Level], asks: &'a [Level]) -> BookUpdate<'a> {
    update(BookKind::Snapshot, u, bids, asks)
}

fn delta<'a>(u: u64, bids: &'a [Level], asks: &'a [Level]) -> BookUpdate<'a> {
    update(BookKind::Delta, u, bids, asks)
}

fn prices(levels: &[Level]) -> Vec<(i64, u64)> {
    levels.iter().map(|l| (l.price.0, l.qty.0)).collect()
}

/// A sync live at `u` 100 with bids 99/98 and asks 101/102.
fn live_at_100() -> (BybitBookSync, Book) {
    let mut s = BybitBookSync::new();
    let mut book = Book::new(64);
    let out = s.on_book(&snapshot(100, &[l(99, 1), l(98, 2)], &[l(101, 1), l(102, 2)]), &mut book);
    assert_eq!(out, SyncOutcome::Snapshot { update_id: 100 });
    (s, book)
}

#[test]
fn snapshot_then_deltas() {
    let mut s = BybitBookSync::new();
    let mut book = Book::new(64);
    assert!(!s.is_live());
    // Rule 2: a delta before any snapshot is dropped.
    assert_eq!(s.on_book(&delta(99, &[l(97, 1)], &[]), &mut book), SyncOutcome::Dropped);
    assert!(book.bids().is_empty());
    let out = s.on_book(&snapshot(100, &[l(99, 1), l(98, 2)], &[l(101, 1), l(102, 2)]), &mut book);
    assert_eq!(out, SyncOutcome::Snapshot { update_id: 100 });
    assert!(!out.wants_resubscribe());
    assert_eq!((s.is_live(), s.local_id()), (true, Some(100)));
    // Size 0 deletes, unknown price inserts, known price replaces.
    let out = s.on_book(&delta(101, &[l(99, 0), l(100, 5)], &[l(102, 7)]), &mut book);
    assert_eq!(out, SyncOutcome::Applied { update_id: 101 });
    assert_eq!(prices(book.bids()), [(100, 5), (98, 2)]);
    assert_eq!(prices(book.asks()), [(101, 1), (102, 7)]);
    assert_eq!(s.on_book(&delta(102, &[], &[l(101, 0)]), &mut book), SyncOutcome::Applied { update_id: 102 });
    assert_eq!(prices(book.asks()), [(102, 7)]);
    assert_eq!(s.local_id(), Some(102));
    let c = *s.counters();
    assert_eq!((c.snapshot_count, c.applied_count, c.dropped_count, c.gap_count), (1, 2, 1, 0));
    assert!(book.check_invariants());
}

#[test]
fn a_new_snapshot_replaces_the_book_whatever_its_u() {
    let (mut s, mut book) = live_at_100();
    s.on_book(&delta(101, &[l(90, 1)], &[]), &mut book);
    // Depth 1 re-sends its snapshot with the same `u`: not a gap, not stale, just a reload.
    let out = s.on_book(&snapshot(101, &[l(97, 3)], &[l(103, 3)]), &mut book);
    assert_eq!(out, SyncOutcome::Snapshot { update_id: 101 });
    assert_eq!(prices(book.bids()), [(97, 3)]);
    assert_eq!(prices(book.asks()), [(103, 3)]);
    // An older `u` too: the venue's snapshot is authoritative.
    assert_eq!(s.on_book(&snapshot(50, &[l(96, 1)], &[l(104, 1)]), &mut book), SyncOutcome::Snapshot { update_id: 50 });
    assert_eq!(prices(book.bids()), [(96, 1)]);
    assert_eq!(s.local_id(), Some(50));
    assert_eq!(s.on_book(&delta(51, &[], &[]), &mut book), SyncOutcome::Applied { update_id: 51 });
    assert_eq!(s.counters().gap_count, 0);
}

#[test]
fn gap_clears_the_book_and_asks_to_resubscribe() {
    let (mut s, mut book) = live_at_100();
    let out = s.on_book(&delta(102, &[l(97, 3)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::Gap { expected_id: 101, update_id: 102 });
    assert!(out.wants_resubscribe());
    assert!(!s.is_live());
    assert!(book.bids().is_empty() && book.asks().is_empty(), "a book not live is empty");
    // Until the new snapshot arrives, deltas are dropped; they ask nothing more.
    let out = s.on_book(&delta(103, &[l(97, 3)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::Dropped);
    assert!(!out.wants_resubscribe());
    assert!(book.bids().is_empty());
    // The resubscription's snapshot makes it live again.
    assert_eq!(
        s.on_book(&snapshot(200, &[l(99, 1)], &[l(101, 1)]), &mut book),
        SyncOutcome::Snapshot { update_id: 200 }
    );
    assert_eq!(s.on_book(&delta(201, &[l(100, 1)], &[]), &mut book), SyncOutcome::Applied { update_id: 201 });
    let c = *s.counters();
    assert_eq!((c.gap_count, c.dropped_count, c.snapshot_count), (1, 1, 2));
}

#[test]
fn u_equal_to_one_resets_the_book() {
    let (mut s, mut book) = live_at_100();
    // A delta with u = 1: the venue restarted; it is snapshot data, not a stale delta.
    let out = s.on_book(&delta(1, &[l(80, 1)], &[l(120, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Reset);
    assert!(!out.wants_resubscribe());
    assert_eq!(prices(book.bids()), [(80, 1)]);
    assert_eq!(prices(book.asks()), [(120, 1)]);
    assert_eq!(s.local_id(), Some(1));
    assert_eq!(s.on_book(&delta(2, &[l(81, 1)], &[]), &mut book), SyncOutcome::Applied { update_id: 2 });
    // A u = 1 snapshot is a reset too, and so is a u = 1 delta before any snapshot.
    assert_eq!(s.on_book(&snapshot(1, &[l(70, 1)], &[]), &mut book), SyncOutcome::Reset);
    assert_eq!(prices(book.bids()), [(70, 1)]);
    let mut fresh = BybitBookSync::new();
    let mut book2 = Book::new(8);
    assert_eq!(fresh.on_book(&delta(1, &[l(10, 1)], &[l(11, 1)]), &mut book2), SyncOutcome::Reset);
    assert!(fresh.is_live());
    // The venue's delist signal: u = 1 with empty sides leaves an empty, live book.
    assert_eq!(s.on_book(&delta(1, &[], &[]), &mut book), SyncOutcome::Reset);
    assert!(book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.counters().reset_count, 3);
}

#[test]
fn stale_and_out_of_order_deltas_are_ignored() {
    let (mut s, mut book) = live_at_100();
    let before = (prices(book.bids()), prices(book.asks()));
    // A duplicate (u == local) and an older one (u < local) change nothing.
    let out = s.on_book(&delta(100, &[l(99, 0)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::IgnoredStale { update_id: 100, local_id: 100 });
    assert_eq!(
        s.on_book(&delta(42, &[], &[l(101, 9)]), &mut book),
        SyncOutcome::IgnoredStale { update_id: 42, local_id: 100 }
    );
    assert_eq!((prices(book.bids()), prices(book.asks())), before);
    // Swapped pair: 102 first is a gap, then 101 is dropped (not live).
    assert_eq!(s.on_book(&delta(102, &[], &[]), &mut book), SyncOutcome::Gap { expected_id: 101, update_id: 102 });
    assert_eq!(s.on_book(&delta(101, &[], &[]), &mut book), SyncOutcome::Dropped);
    assert_eq!(s.counters().stale_count, 2);
}

#[test]
fn removal_of_an_absent_level_is_ignored() {
    let (mut s, mut book) = live_at_100();
    assert_eq!(s.on_book(&delta(101, &[l(50, 0)], &[l(150, 0)]), &mut book), SyncOutcome::Applied { update_id: 101 });
    assert_eq!(prices(book.bids()), [(99, 1), (98, 2)]);
    assert_eq!(prices(book.asks()), [(101, 1), (102, 2)]);
    assert!(s.is_live());
    // Zero-size levels in a snapshot are removals of absent levels too.
    assert_eq!(
        s.on_book(&snapshot(110, &[l(99, 0), l(98, 1)], &[l(101, 1)]), &mut book),
        SyncOutcome::Snapshot { update_id: 110 }
    );
    assert_eq!(prices(book.bids()), [(98, 1)]);
}

#[test]
fn crossed_book_is_corrupt_and_not_live() {
    // Both sides moving in one delta may cross mid-message: only the end state counts.
    let (mut s, mut book) = live_at_100();
    let out = s.on_book(&delta(101, &[l(101, 1), l(100, 1)], &[l(101, 0), l(102, 0), l(103, 1)]), &mut book);
    assert_eq!(out, SyncOutcome::Applied { update_id: 101 });
    // A bid at the best ask after the message: corrupt.
    let out = s.on_book(&delta(102, &[l(103, 1)], &[]), &mut book);
    assert_eq!(out, SyncOutcome::Crossed);
    assert!(out.wants_resubscribe());
    assert!(!s.is_live());
    assert!(book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.on_book(&delta(103, &[], &[]), &mut book), SyncOutcome::Dropped);
    // A crossed snapshot is corrupt too.
    assert_eq!(s.on_book(&snapshot(200, &[l(105, 1)], &[l(104, 1)]), &mut book), SyncOutcome::Crossed);
    assert!(!s.is_live() && book.bids().is_empty());
    assert_eq!(
        s.on_book(&snapshot(201, &[l(99, 1)], &[l(104, 1)]), &mut book),
        SyncOutcome::Snapshot { update_id: 201 }
    );
    assert_eq!(s.counters().crossed_count, 2);
}

#[test]
fn reset_starts_over() {
    let (mut s, mut book) = live_at_100();
    s.reset(&mut book);
    assert!(!s.is_live());
    assert!(book.bids().is_empty());
    assert_eq!(s.on_book(&delta(101, &[], &[]), &mut book), SyncOutcome::Dropped);
}

#[test]
fn decoded_fixtures_drive_the_sync() {
    let mut d = decoder();
    let mut s = BybitBookSync::new();
    let mut book = Book::new(50);
    for (name, want) in [
        ("orderbook_delta.json", SyncOutcome::Dropped),
        ("orderbook_snapshot.json", SyncOutcome::Snapshot { update_id: 18_521_288 }),
        ("orderbook_delta.json", SyncOutcome::Applied { update_id: 18_521_289 }),
        ("orderbook_delta_empty_side.json", SyncOutcome::Applied { update_id: 18_521_290 }),
    ] {
        let bytes = fixture(name);
        let Ok(Message::Book(b)) = d.decode(&bytes) else { panic!("{name}") };
        assert_eq!(s.on_book(&b, &mut book), want, "{name}");
    }
    // 16493.50 removed, 16494.00 added, 16611.00 resized, 16612.00 removed, 16700.00 absent.
    assert_eq!(book.bids(), [lv("16494.00", "1.5"), lv("16493.00", "0.100")]);
    assert_eq!(book.asks(), [lv("16611.00", "0.030")]);
    let bytes = fixture("orderbook_reset.json");
    let Ok(Message::Book(b)) = d.decode(&bytes) else { panic!("reset") };
    assert_eq!(s.on_book(&b, &mut book), SyncOutcome::Reset);
    assert_eq!(book.bids(), [lv("16400.00", "1")]);
    // Replaying the documented snapshot's successor delta after the reset is a gap.
    let bytes = fixture("orderbook_delta_empty_side.json");
    let Ok(Message::Book(b)) = d.decode(&bytes) else { panic!("delta") };
    assert_eq!(s.on_book(&b, &mut book), SyncOutcome::Gap { expected_id: 2, update_id: 18_521_290 });
}

// ---------------------------------------------------------------------------------------------
// No allocation on the per-message path.

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decoding_and_syncing_allocate_nothing() {
    let frames: Vec<Vec<u8>> = VALID.iter().chain(MALFORMED.iter().map(|(n, _)| n)).map(|n| fixture(n)).collect();
    let mut d = BybitDecoder::new(64, 64);
    let mut s = BybitBookSync::new();
    let mut book = Book::new(64);
    let bids = [l(99, 1), l(98, 1)];
    let asks = [l(101, 1), l(102, 1)];
    let crossing = [l(101, 1)];
    let ((ok, trades), allocations) = alloc::count(|| {
        let mut ok = 0;
        let mut trades = 0;
        for _ in 0..50 {
            for f in &frames {
                match d.decode(f) {
                    Ok(Message::Book(b)) => {
                        s.on_book(&b, &mut book);
                        ok += 1;
                    }
                    Ok(Message::Trades(t)) => {
                        trades += t.iter().map(|t| t.tick(BookId(0)).ts_ms).filter(|&ts| ts > 0).count();
                        ok += 1;
                    }
                    Ok(_) => ok += 1,
                    Err(_) => {}
                }
            }
            // A snapshot, deltas, a gap, a reset, a crossed book.
            s.reset(&mut book);
            s.on_book(&snapshot(10, &bids, &asks), &mut book);
            s.on_book(&delta(11, &bids, &asks), &mut book);
            s.on_book(&delta(13, &bids, &[]), &mut book);
            s.on_book(&delta(1, &bids, &asks), &mut book);
            s.on_book(&delta(2, &crossing, &[]), &mut book);
        }
        (ok, trades)
    });
    assert!(ok > 500, "only {ok} frames decoded");
    assert!(trades > 0);
    let c = s.counters();
    assert!(c.gap_count > 0 && c.crossed_count > 0 && c.reset_count > 0 && c.snapshot_count > 0);
    assert_eq!(allocations, Some(0), "allocations while decoding and syncing");
    // The counter itself works.
    let ((), one) = alloc::count(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(one, Some(1));
}
