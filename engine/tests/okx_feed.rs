//! OKX v5 feed: the decoder against the frames documented in venues.md §3 (fixtures under
//! `tests/fixtures/okx/`, one file per frame, plus variants and malformed frames), the checksum
//! against the worked examples of venues.md §3.3, and the `books` sync against §3.2 case by case.
//!
//! Also proves the per-message path (decode + sync) allocates nothing, with a counting global
//! allocator.

use rampart_engine::feed::okx::{
    book_checksum, crc32, BookAction, BookPush, CanonicalSymbol, Message, OkxBookSync, OkxDecoder, OkxLevel, OkxTrade,
    SyncOutcome, BOOKS_LEVELS_PER_SIDE_MAX, CHECKSUM_LEVELS,
};
use rampart_engine::feed::{DecodeError, JsonErrorKind};
use rampart_engine::fixed::ParseError;
use rampart_engine::{Book, Level, Price, Qty};
use rampart_testkit::alloc::{self, Counting};
use rampart_testkit::feed::{
    assert_fixtures_listed, assert_malformed_refused, assert_truncations_refused, mutate_valid_frames, read_fixture,
    Want,
};

// ---------------------------------------------------------------------------------------------
// Fixtures.

/// Frames that decode. The first group is verbatim from venues.md; the rest are built from them.
const VALID: &[&str] = &[
    "books_snapshot.json",
    "books5.json",
    "trades.json",
    "subscribe_request.json",
    "subscribe_ack.json",
    "error.json",
    "notice.json",
    "candle.json",
    "pong.txt",
    // Built from the documented frames.
    "trades_all.json",
    "trades_two.json",
    "unsubscribe_ack.json",
    "books_update.json",
    "books_heartbeat.json",
    "books_reset.json",
    "books_checksum_snapshot.json",
    "books_checksum_update.json",
    "books_shuffled.json",
    "books_unknown_keys.json",
    "books_two_cell_levels.json",
];

const MALFORMED: &[(&str, Want)] = {
    use DecodeError as D;
    use JsonErrorKind as J;
    use Want::{Decode, Json};
    &[
        ("malformed_level_numbers.json", Decode(D::BadLevel("bids"))),
        ("malformed_level_short.json", Decode(D::BadLevel("asks"))),
        ("malformed_level_not_array.json", Decode(D::BadLevel("asks"))),
        ("malformed_orders_not_number.json", Decode(D::BadLevel("bids"))),
        ("malformed_price_not_decimal.json", Decode(D::BadDecimal { field: "asks", error: ParseError::BadByte })),
        ("malformed_price_zero.json", Decode(D::OutOfRange("bids"))),
        ("malformed_qty_negative.json", Decode(D::BadDecimal { field: "asks", error: ParseError::Negative })),
        ("malformed_level_text_too_long.json", Decode(D::OutOfRange("asks"))),
        ("malformed_missing_ts.json", Decode(D::MissingField("ts"))),
        ("malformed_missing_asks.json", Decode(D::MissingField("asks"))),
        ("malformed_ts_number.json", Decode(D::WrongType("ts"))),
        ("malformed_seq_string.json", Decode(D::WrongType("seqId"))),
        ("malformed_seq_overflow.json", Decode(D::OutOfRange("seqId"))),
        ("malformed_checksum_overflow.json", Decode(D::OutOfRange("checksum"))),
        ("malformed_checksum_fraction.json", Decode(D::WrongType("checksum"))),
        ("malformed_duplicate_key.json", Decode(D::DuplicateField("seqId"))),
        ("malformed_data_two.json", Decode(D::OutOfRange("data"))),
        ("malformed_data_empty.json", Decode(D::OutOfRange("data"))),
        ("malformed_data_not_array.json", Decode(D::WrongType("data"))),
        ("malformed_data_element_not_object.json", Decode(D::WrongType("data"))),
        ("malformed_missing_data.json", Decode(D::MissingField("data"))),
        ("malformed_action_unknown.json", Decode(D::OutOfRange("action"))),
        ("malformed_inst_escaped.json", Decode(D::Escaped("instId"))),
        ("malformed_missing_inst.json", Decode(D::MissingField("instId"))),
        ("malformed_arg_not_object.json", Decode(D::WrongType("arg"))),
        ("malformed_trade_side.json", Decode(D::OutOfRange("side"))),
        ("malformed_trade_id_number.json", Decode(D::WrongType("tradeId"))),
        ("malformed_trade_missing_px.json", Decode(D::MissingField("px"))),
        ("malformed_error_missing_code.json", Decode(D::MissingField("code"))),
        ("malformed_error_code_text.json", Decode(D::WrongType("code"))),
        ("malformed_subscribe_missing_arg.json", Decode(D::MissingField("arg"))),
        ("malformed_event_number.json", Decode(D::WrongType("event"))),
        ("malformed_trailing_garbage.json", Json(J::TrailingBytes)),
        ("malformed_truncated.json", Json(J::UnexpectedEnd)),
        ("malformed_array_top.json", Decode(D::NotAnObject)),
        ("malformed_ping.txt", Json(J::UnexpectedByte)),
        ("malformed_pong_json.json", Decode(D::NotAnObject)),
        ("malformed_empty.json", Json(J::UnexpectedEnd)),
        ("malformed_bad_escape.json", Json(J::BadEscape)),
        ("malformed_control_char.json", Json(J::ControlChar)),
        ("malformed_deep_nesting.json", Json(J::TooDeep)),
        ("malformed_non_utf8.json", Json(J::NotUtf8)),
    ]
};

fn fixture_dir() -> String {
    format!("{}/tests/fixtures/okx", env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    read_fixture(&fixture_dir(), name)
}

fn decoder() -> OkxDecoder {
    OkxDecoder::new(BOOKS_LEVELS_PER_SIDE_MAX, 16)
}

/// Decodes a fixture and hands the message to `check`.
fn with_message(name: &str, check: impl FnOnce(Message<'_>)) {
    let bytes = fixture(name);
    let mut d = decoder();
    let m = d.decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    check(m);
}

fn px(s: &str) -> Price {
    Price::parse(s.as_bytes()).expect("test price")
}

fn sz(s: &str) -> Qty {
    Qty::parse(s.as_bytes()).expect("test qty")
}

/// A level as (price text, size text, orders), read back through the push.
fn texts<'a>(push: &BookPush<'a>, levels: &[OkxLevel]) -> Vec<(&'a str, &'a str, Option<u64>)> {
    levels
        .iter()
        .map(|l| {
            let p = std::str::from_utf8(push.price_text(l)).expect("utf8");
            let s = std::str::from_utf8(push.size_text(l)).expect("utf8");
            assert_eq!(l.price, px(p), "parsed price matches its text");
            assert_eq!(l.qty, sz(s), "parsed size matches its text");
            (p, s, l.orders)
        })
        .collect()
}

#[test]
fn every_fixture_file_is_used() {
    let malformed: Vec<&str> = MALFORMED.iter().map(|(m, _)| *m).collect();
    assert_fixtures_listed(&fixture_dir(), VALID, &malformed);
}

// ---------------------------------------------------------------------------------------------
// Documented frames, exact values.

fn assert_documented_snapshot(m: Message<'_>) {
    let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
    assert_eq!(b.channel, b"books");
    assert_eq!(b.inst_id, b"BTC-USDT");
    assert_eq!(b.action, Some(BookAction::Snapshot));
    assert_eq!(b.ts_ms, 1_597_026_383_085);
    assert_eq!(b.checksum, Some(-855_196_043));
    assert_eq!(b.prev_seq_id, Some(-1));
    assert_eq!(b.seq_id, Some(123_456));
    assert_eq!(texts(&b, b.asks), [("8476.98", "415", Some(13)), ("8477", "7", Some(2))]);
    assert_eq!(texts(&b, b.bids), [("8476.97", "256", Some(12)), ("8475.55", "101", Some(1))]);
    assert_eq!(b.asks[0].price, Price(847_698_000_000));
    assert_eq!(b.asks[0].qty, Qty(41_500_000_000));
}

#[test]
fn documented_books_snapshot() {
    with_message("books_snapshot.json", assert_documented_snapshot);
}

#[test]
fn key_order_whitespace_and_unknown_keys_do_not_matter() {
    with_message("books_shuffled.json", assert_documented_snapshot);
    with_message("books_unknown_keys.json", assert_documented_snapshot);
}

#[test]
fn documented_books5_has_no_action_checksum_or_prev_seq_id() {
    with_message("books5.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
        assert_eq!(b.channel, b"books5");
        assert_eq!(b.inst_id, b"BTC-USDT");
        assert_eq!((b.action, b.checksum, b.prev_seq_id), (None, None, None));
        assert_eq!(b.seq_id, Some(79_706_756_139));
        assert_eq!(b.ts_ms, 1_786_538_744_703);
        assert_eq!(b.asks.len(), 5);
        assert_eq!(b.bids.len(), 5);
        assert_eq!(texts(&b, &b.asks[..3])[2], ("64074", "0.0000102", Some(1)));
        assert_eq!(texts(&b, &b.bids[..1]), [("64073", "0.58849577", Some(44))]);
        assert_eq!(b.asks[2].qty, Qty(1020));
    });
}

#[test]
fn two_cell_levels_have_no_order_count() {
    with_message("books_two_cell_levels.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
        assert_eq!(texts(&b, b.asks), [("8477", "8", None)]);
        assert!(b.bids.is_empty());
        assert_eq!(b.checksum, None);
    });
}

#[test]
fn documented_trades() {
    with_message("trades.json", |m| {
        let Message::Trades { channel, inst_id, trades } = m else { panic!("not trades: {m:?}") };
        assert_eq!((channel, inst_id), (&b"trades"[..], &b"BTC-USDT"[..]));
        assert_eq!(
            trades,
            [OkxTrade {
                trade_id: 1_040_968_613,
                price: px("64040.2"),
                qty: sz("0.00240857"),
                taker_sell: false,
                ts_ms: 1_786_538_760_218,
                count: Some(2),
                seq_id: Some(79_706_765_242),
            }]
        );
    });
    with_message("trades_all.json", |m| {
        let Message::Trades { channel, trades, .. } = m else { panic!("not trades: {m:?}") };
        assert_eq!(channel, b"trades-all");
        assert_eq!(trades.len(), 1);
        assert_eq!((trades[0].trade_id, trades[0].count, trades[0].seq_id), (130_639_474, None, None));
        assert_eq!(trades[0].price, px("42219.9"));
    });
    with_message("trades_two.json", |m| {
        let Message::Trades { inst_id, trades, .. } = m else { panic!("not trades: {m:?}") };
        assert_eq!(inst_id, b"ETH-USDT");
        assert_eq!(trades.iter().map(|t| (t.trade_id, t.taker_sell)).collect::<Vec<_>>(), [(7, true), (9, false)]);
        assert_eq!(trades[1].qty, sz("1.25"));
    });
}

#[test]
fn documented_events_and_pong() {
    with_message("subscribe_ack.json", |m| {
        assert_eq!(m, Message::Subscribed { subscribed: true, channel: b"books", inst_id: b"BTC-USDT" });
    });
    with_message("unsubscribe_ack.json", |m| {
        assert_eq!(m, Message::Subscribed { subscribed: false, channel: b"books", inst_id: b"BTC-USDT" });
    });
    with_message("error.json", |m| {
        assert_eq!(m, Message::Error { code: 60012, msg: b"Invalid request: ..." });
        assert!(!m.is_upgrade_notice());
    });
    with_message("notice.json", |m| {
        let Message::Notice { code, msg } = m else { panic!("not a notice: {m:?}") };
        assert_eq!(code, 64008);
        assert!(msg.starts_with(b"The connection will soon be closed"));
        assert!(m.is_upgrade_notice());
    });
    with_message("pong.txt", |m| assert_eq!(m, Message::Pong));
    assert_eq!(decoder().decode(b" pong\r\n"), Ok(Message::Pong));
    // Our own request echoed back, and a candle push (business URL) are values, not errors.
    with_message("subscribe_request.json", |m| assert_eq!(m, Message::Other { event: None, channel: None }));
    with_message("candle.json", |m| assert_eq!(m, Message::Other { event: None, channel: Some(b"candle1D") }));
    assert_eq!(
        decoder().decode(br#"{"event":"login","code":"0","msg":""}"#),
        Ok(Message::Other { event: Some(b"login"), channel: None })
    );
}

#[test]
fn inst_ids_normalise_to_base_quote() {
    with_message("books_snapshot.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push") };
        let s = CanonicalSymbol::from_inst_id(b.inst_id).expect("spot instId");
        assert_eq!(s.as_bytes(), b"BTCUSDT");
    });
    assert_eq!(CanonicalSymbol::from_inst_id(b"ETH-BTC").map(|s| s.as_bytes().to_vec()), Some(b"ETHBTC".to_vec()));
    assert_eq!(CanonicalSymbol::from_inst_id(b"BTC-USDT-SWAP"), None);
    assert_eq!(CanonicalSymbol::from_inst_id(b"BTCUSDT"), None);
}

#[test]
fn the_level_and_trade_bounds_refuse_larger_messages() {
    let bytes = fixture("books_snapshot.json");
    assert_eq!(OkxDecoder::new(2, 1).decode(&bytes).map(|_| ()), Ok(()));
    assert_eq!(OkxDecoder::new(1, 1).decode(&bytes), Err(DecodeError::TooManyLevels("bids")));
    let bytes = fixture("trades_two.json");
    assert_eq!(OkxDecoder::new(1, 2).decode(&bytes).map(|_| ()), Ok(()));
    assert_eq!(OkxDecoder::new(1, 1).decode(&bytes), Err(DecodeError::TooManyLevels("data")));
}

// ---------------------------------------------------------------------------------------------
// Malformed input.

#[test]
fn malformed_fixtures_are_refused_with_the_right_error() {
    let mut d = decoder();
    assert_malformed_refused(&fixture_dir(), MALFORMED, |bytes| d.decode(bytes).map(|_| ()));
}

/// Cheap fuzz, part 1: every strict prefix of every valid frame is refused, without panicking;
/// for JSON frames, as truncated at the end of the input.
#[test]
fn every_truncation_of_every_valid_frame_is_an_error() {
    let mut d = decoder();
    let checked = assert_truncations_refused(&fixture_dir(), VALID, |bytes| d.decode(bytes).map(|_| ()));
    assert!(checked > 2_000, "only {checked} prefixes");
}

/// Cheap fuzz, part 2: random byte edits of valid frames never panic. The seed can be set with
/// `RAMPART_FUZZ_SEED=<seed>` and is printed on failure.
#[test]
fn mutated_frames_never_panic() {
    let mut d = decoder();
    let mut sync = OkxBookSync::new(CHECKSUM_LEVELS, true);
    let mut book = Book::new(64);
    mutate_valid_frames(&fixture_dir(), VALID, 0x0DC5_EED5, |bytes| {
        if let Ok(Message::Book(p)) = d.decode(bytes) {
            sync.on_book(&p, &mut book);
        }
        true
    });
}

// ---------------------------------------------------------------------------------------------
// Checksum.

#[test]
fn checksum_worked_examples_from_venues_md() {
    let s1 = "3366.1:7:3366.8:9:3366:6:3368:8";
    assert_eq!(crc32(s1.as_bytes()), 2_413_953_002);
    assert_eq!(crc32(s1.as_bytes()) as i32, -1_881_014_294);
    let bids: [(&[u8], &[u8]); 2] = [(b"3366.1", b"7"), (b"3366", b"6")];
    let asks: [(&[u8], &[u8]); 2] = [(b"3366.8", b"9"), (b"3368", b"8")];
    assert_eq!(book_checksum(bids, asks), -1_881_014_294);
    // Fewer bids than asks: missing entries are skipped.
    let bids: [(&[u8], &[u8]); 1] = [(b"3366.1", b"7")];
    let asks: [(&[u8], &[u8]); 3] = [(b"3366.8", b"9"), (b"3368", b"8"), (b"3372", b"8")];
    assert_eq!(crc32(b"3366.1:7:3366.8:9:3368:8:3372:8"), 831_078_360);
    assert_eq!(book_checksum(bids, asks), 831_078_360);
    // An empty book hashes the empty string.
    assert_eq!(book_checksum(std::iter::empty(), std::iter::empty()), 0);
}

/// The string of venues.md §3.3 built the naive way from every level given (the caller takes
/// the top 25), for comparison.
fn naive_checksum(bids: &[(String, String)], asks: &[(String, String)]) -> i32 {
    let mut parts = Vec::new();
    for i in 0..bids.len().max(asks.len()) {
        for side in [bids, asks] {
            if let Some((p, s)) = side.get(i) {
                parts.push(format!("{p}:{s}"));
            }
        }
    }
    crc32(parts.join(":").as_bytes()) as i32
}

fn ladder(start: u32, step: i32, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("{}.{}", start as i64 + step as i64 * i as i64, i % 10), format!("0.{:03}00", i + 1)))
        .collect()
}

fn as_bytes(v: &[(String, String)]) -> Vec<(&[u8], &[u8])> {
    v.iter().map(|(p, s)| (p.as_bytes(), s.as_bytes())).collect()
}

fn pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(p, s)| (p.as_str(), s.as_str())).collect()
}

#[test]
fn checksum_uses_only_the_best_25_levels_of_each_side() {
    let bids = ladder(5000, -1, 30);
    let asks = ladder(5001, 1, 7);
    let got = book_checksum(as_bytes(&bids), as_bytes(&asks));
    assert_eq!(got, naive_checksum(&bids[..25], &asks));
    assert_ne!(got, naive_checksum(&bids[..26], &asks), "the 26th level must not count");
}

// ---------------------------------------------------------------------------------------------
// Book sync.

/// A `books` push with these levels, as JSON text.
fn frame(
    action: &str,
    prev: i64,
    seq: i64,
    checksum: Option<i32>,
    bids: &[(&str, &str)],
    asks: &[(&str, &str)],
) -> Vec<u8> {
    let levels =
        |v: &[(&str, &str)]| v.iter().map(|(p, s)| format!(r#"["{p}","{s}","0","1"]"#)).collect::<Vec<_>>().join(",");
    let checksum = checksum.map(|c| format!(r#","checksum":{c}"#)).unwrap_or_default();
    format!(
        r#"{{"arg":{{"channel":"books","instId":"BTC-USDT"}},"action":"{action}","data":[{{"asks":[{}],"bids":[{}],"ts":"1"{checksum},"prevSeqId":{prev},"seqId":{seq}}}]}}"#,
        levels(asks),
        levels(bids)
    )
    .into_bytes()
}

/// Decodes `bytes` (a book push) and hands it to the sync.
fn feed(s: &mut OkxBookSync, book: &mut Book, bytes: &[u8]) -> SyncOutcome {
    let mut d = decoder();
    match d.decode(bytes) {
        Ok(Message::Book(push)) => s.on_book(&push, book),
        other => panic!("not a book push: {other:?}"),
    }
}

fn side(levels: &[Level]) -> Vec<(Price, Qty)> {
    levels.iter().map(|l| (l.price, l.qty)).collect()
}

fn checksum_of(s: &str) -> i32 {
    crc32(s.as_bytes()) as i32
}

#[test]
fn snapshot_then_update_with_verified_checksums() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(BOOKS_LEVELS_PER_SIDE_MAX);
    assert!(!s.is_live());
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json")), SyncOutcome::Loaded { seq_id: 10 });
    assert_eq!(s.checksum(), -1_881_014_294);
    // The update removes bid 3366 and adds ask 3372: the second worked example.
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::Applied { seq_id: 15 });
    assert_eq!(s.checksum(), 831_078_360);
    assert_eq!(side(book.bids()), [(px("3366.1"), sz("7"))]);
    assert_eq!(side(book.asks()), [(px("3366.8"), sz("9")), (px("3368"), sz("8")), (px("3372"), sz("8"))]);
    assert!(s.is_live());
    assert_eq!(s.last_seq_id(), Some(15));
    let c = s.counters();
    assert_eq!((c.snapshot_count, c.update_count, c.checksum_checked_count, c.checksum_mismatch_count), (1, 1, 2, 0));
}

#[test]
fn documented_chain_snapshot_update_heartbeat_reset() {
    // The doc example's checksum is illustrative (it does not match its book): verify off here.
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, false);
    let mut book = Book::new(BOOKS_LEVELS_PER_SIDE_MAX);
    assert_eq!(feed(&mut s, &mut book, &fixture("books_snapshot.json")), SyncOutcome::Loaded { seq_id: 123_456 });
    assert_eq!(side(book.bids()), [(px("8476.97"), sz("256")), (px("8475.55"), sz("101"))]);
    assert_eq!(s.checksum(), checksum_of("8476.97:256:8476.98:415:8475.55:101:8477:7"));
    assert_eq!(feed(&mut s, &mut book, &fixture("books_update.json")), SyncOutcome::Applied { seq_id: 123_460 });
    assert_eq!(side(book.bids()), [(px("8476.97"), sz("200")), (px("8470"), sz("5"))]);
    assert_eq!(side(book.asks()), [(px("8477"), sz("7")), (px("8478.1"), sz("3"))]);
    assert_eq!(s.checksum(), checksum_of("8476.97:200:8477:7:8470:5:8478.1:3"));
    let before = (side(book.bids()), side(book.asks()));
    assert_eq!(feed(&mut s, &mut book, &fixture("books_heartbeat.json")), SyncOutcome::Heartbeat { seq_id: 123_460 });
    assert_eq!((side(book.bids()), side(book.asks())), before, "a heartbeat changes nothing");
    assert_eq!(
        feed(&mut s, &mut book, &fixture("books_reset.json")),
        SyncOutcome::Reset { prev_seq_id: 123_460, seq_id: 3 }
    );
    assert_eq!(s.last_seq_id(), Some(3));
    assert_eq!(side(book.bids()), [(px("8476.97"), sz("200")), (px("8470"), sz("6"))]);
    // After the reset the chain continues from the new value.
    assert_eq!(feed(&mut s, &mut book, &frame("update", 3, 5, None, &[], &[])), SyncOutcome::Applied { seq_id: 5 });
    let c = s.counters();
    assert_eq!((c.heartbeat_count, c.reset_count, c.gap_count, c.checksum_checked_count), (1, 1, 0, 0));
}

#[test]
fn documented_example_checksum_is_a_mismatch_when_verified() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    let computed = checksum_of("8476.97:256:8476.98:415:8475.55:101:8477:7");
    assert_eq!(
        feed(&mut s, &mut book, &fixture("books_snapshot.json")),
        SyncOutcome::ChecksumMismatch { expected: -855_196_043, computed }
    );
    assert!(SyncOutcome::ChecksumMismatch { expected: 0, computed: 0 }.wants_resubscribe());
    assert!(!s.is_live());
    assert!(book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.counters().checksum_mismatch_count, 1);
    // Updates are ignored until a new snapshot.
    assert_eq!(feed(&mut s, &mut book, &fixture("books_update.json")), SyncOutcome::AwaitingSnapshot);
}

#[test]
fn checksum_mismatch_on_an_update_discards_the_book() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    let good = checksum_of("100:1:101:1");
    assert_eq!(
        feed(&mut s, &mut book, &frame("snapshot", -1, 10, Some(good), &[("100", "1")], &[("101", "1")])),
        SyncOutcome::Loaded { seq_id: 10 }
    );
    let wrong = checksum_of("100:2:101:1").wrapping_add(1);
    let out = feed(&mut s, &mut book, &frame("update", 10, 11, Some(wrong), &[("100", "2")], &[]));
    assert_eq!(out, SyncOutcome::ChecksumMismatch { expected: wrong, computed: checksum_of("100:2:101:1") });
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty());
}

#[test]
fn zero_or_absent_checksum_is_skipped_and_the_chain_still_checked() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    assert_eq!(
        feed(&mut s, &mut book, &frame("snapshot", -1, 1, Some(0), &[("100", "1")], &[])),
        SyncOutcome::Loaded { seq_id: 1 }
    );
    assert_eq!(
        feed(&mut s, &mut book, &frame("update", 1, 2, None, &[("99", "1")], &[])),
        SyncOutcome::Applied { seq_id: 2 }
    );
    assert_eq!(s.counters().checksum_checked_count, 0);
    assert!(matches!(feed(&mut s, &mut book, &frame("update", 1, 3, Some(0), &[], &[])), SyncOutcome::Gap { .. }));
}

#[test]
fn checksum_uses_the_latest_text_received_for_a_level() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    let c = checksum_of("3366:6:3368:8");
    assert_eq!(
        feed(&mut s, &mut book, &frame("snapshot", -1, 1, Some(c), &[("3366", "6")], &[("3368", "8")])),
        SyncOutcome::Loaded { seq_id: 1 }
    );
    // Same price and size, different text: the checksum follows the venue's text.
    let c = checksum_of("3366:6:3368.0:8.000");
    assert_eq!(
        feed(&mut s, &mut book, &frame("update", 1, 2, Some(c), &[], &[("3368.0", "8.000")])),
        SyncOutcome::Applied { seq_id: 2 }
    );
    assert_eq!(side(book.asks()), [(px("3368"), sz("8"))]);
}

#[test]
fn gap_discards_the_book_until_the_next_snapshot() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    let out = feed(&mut s, &mut book, &frame("update", 12, 15, None, &[("3366", "1")], &[]));
    assert_eq!(out, SyncOutcome::Gap { expected_prev_seq_id: 10, prev_seq_id: 12 });
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::AwaitingSnapshot);
    assert!(book.bids().is_empty());
    // A fresh snapshot (after resubscribing) brings the book back.
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json")), SyncOutcome::Loaded { seq_id: 10 });
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::Applied { seq_id: 15 });
    let c = s.counters();
    assert_eq!((c.gap_count, c.awaiting_count, c.snapshot_count), (1, 1, 2));
}

#[test]
fn update_before_any_snapshot_is_ignored_and_minus_one_is_not_zero() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    assert_eq!(
        feed(&mut s, &mut book, &frame("update", -1, 1, None, &[("1", "1")], &[])),
        SyncOutcome::AwaitingSnapshot
    );
    assert!(book.bids().is_empty());
    feed(&mut s, &mut book, &frame("snapshot", -1, 0, None, &[("1", "1")], &[]));
    assert_eq!(s.last_seq_id(), Some(0));
    // prevSeqId -1 on an update is not "0" and not a snapshot: a gap.
    assert_eq!(
        feed(&mut s, &mut book, &frame("update", -1, 1, None, &[], &[])),
        SyncOutcome::Gap { expected_prev_seq_id: 0, prev_seq_id: -1 }
    );
}

#[test]
fn a_later_snapshot_replaces_the_book() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    feed(&mut s, &mut book, &frame("snapshot", -1, 5, None, &[("100", "1"), ("99", "1")], &[("101", "1")]));
    feed(&mut s, &mut book, &frame("snapshot", -1, 2, None, &[("98", "3")], &[("102", "1")]));
    assert_eq!(side(book.bids()), [(px("98"), sz("3"))]);
    assert_eq!(side(book.asks()), [(px("102"), sz("1"))]);
    assert_eq!(s.checksum(), checksum_of("98:3:102:1"));
    assert_eq!(s.last_seq_id(), Some(2));
}

#[test]
fn removal_of_an_absent_level_is_a_no_op() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    let c = checksum_of("3366.1:7:3366.8:9:3366:6:3368:8");
    let out = feed(&mut s, &mut book, &frame("update", 10, 11, Some(c), &[("3000", "0")], &[("4000", "0")]));
    assert_eq!(out, SyncOutcome::Applied { seq_id: 11 });
    assert_eq!(book.bids().len(), 2);
    assert_eq!(book.asks().len(), 2);
}

#[test]
fn crossed_book_is_discarded() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    let out = feed(&mut s, &mut book, &frame("update", 10, 11, None, &[("3366.8", "1")], &[]));
    assert_eq!(out, SyncOutcome::Crossed);
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.counters().crossed_count, 1);
    // A crossed snapshot too.
    assert_eq!(
        feed(&mut s, &mut book, &frame("snapshot", -1, 1, None, &[("101", "1")], &[("100", "1")])),
        SyncOutcome::Crossed
    );
}

#[test]
fn unsequenced_pushes_are_refused_without_touching_the_book() {
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(64);
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    assert_eq!(feed(&mut s, &mut book, &fixture("books5.json")), SyncOutcome::Unsequenced);
    assert_eq!(book.bids().len(), 2);
    assert_eq!(s.last_seq_id(), Some(10));
    assert_eq!(s.counters().unsequenced_count, 1);
}

#[test]
fn deep_books_check_the_top_25_and_a_small_text_store_says_when_it_cannot() {
    let bids = ladder(5000, -1, 30);
    let asks = ladder(5001, 1, 30);
    let (b, a) = (pairs(&bids), pairs(&asks));
    let snapshot = frame("snapshot", -1, 1, Some(naive_checksum(&bids[..25], &asks[..25])), &b, &a);

    // Enough text slots: every checksum is checked.
    let mut s = OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true);
    let mut book = Book::new(BOOKS_LEVELS_PER_SIDE_MAX);
    assert_eq!(feed(&mut s, &mut book, &snapshot), SyncOutcome::Loaded { seq_id: 1 });
    // Delete the best 10 bids: levels 26..30 move into the checksum window.
    let removed: Vec<(&str, &str)> = b[..10].iter().map(|&(p, _)| (p, "0")).collect();
    let c = naive_checksum(&bids[10..], &asks[..25]);
    assert_eq!(
        feed(&mut s, &mut book, &frame("update", 1, 2, Some(c), &removed, &[])),
        SyncOutcome::Applied { seq_id: 2 }
    );
    assert_eq!(s.counters().checksum_checked_count, 2);

    // Only 25 text slots: the snapshot checks, but after the deletions the deeper levels are
    // unknown, so the check is skipped and counted rather than reported as a mismatch.
    let mut s = OkxBookSync::new(CHECKSUM_LEVELS, true);
    let mut book = Book::new(BOOKS_LEVELS_PER_SIDE_MAX);
    assert_eq!(feed(&mut s, &mut book, &snapshot), SyncOutcome::Loaded { seq_id: 1 });
    assert_eq!(
        feed(&mut s, &mut book, &frame("update", 1, 2, Some(c), &removed, &[])),
        SyncOutcome::Applied { seq_id: 2 }
    );
    let counters = s.counters();
    assert_eq!((counters.checksum_checked_count, counters.checksum_unverifiable_count), (1, 1));
    assert_eq!(book.bids().len(), 20, "the book itself keeps its own depth");
}

// ---------------------------------------------------------------------------------------------
// No allocation on the per-message path.

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decoding_and_syncing_allocate_nothing() {
    let frames: Vec<Vec<u8>> = VALID.iter().chain(MALFORMED.iter().map(|(n, _)| n)).map(|n| fixture(n)).collect();
    // After the fixtures: a gap, then snapshot, update and a crossing update.
    let extra = [
        frame("update", 99, 100, None, &[], &[]),
        fixture("books_checksum_snapshot.json"),
        fixture("books_checksum_update.json"),
        frame("update", 15, 16, None, &[("9999", "1")], &[]),
    ];
    let mut d = decoder();
    // One sync verifies checksums (the documented example then mismatches), one does not (the
    // documented chain then runs through heartbeat and reset).
    let mut syncs =
        [OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, true), OkxBookSync::new(BOOKS_LEVELS_PER_SIDE_MAX, false)];
    let mut book = Book::new(BOOKS_LEVELS_PER_SIDE_MAX);
    let (ok, allocations) = alloc::count(|| {
        let mut ok = 0;
        for _ in 0..50 {
            for s in &mut syncs {
                for f in frames.iter().chain(&extra) {
                    match d.decode(f) {
                        Ok(Message::Book(push)) => {
                            s.on_book(&push, &mut book);
                            ok += 1;
                        }
                        Ok(_) => ok += 1,
                        Err(_) => {}
                    }
                }
                s.reset(&mut book);
            }
        }
        ok
    });
    assert!(ok > 1_000, "only {ok} frames decoded");
    let (v, u) = (syncs[0].counters(), syncs[1].counters());
    assert!(v.snapshot_count > 0 && v.update_count > 0 && v.crossed_count > 0);
    assert!(v.checksum_mismatch_count > 0 && v.checksum_checked_count > v.checksum_mismatch_count);
    assert!(u.heartbeat_count > 0 && u.reset_count > 0 && u.gap_count > 0);
    assert_eq!(allocations, Some(0), "allocations while decoding and syncing");
    // The counter itself works.
    let ((), one) = alloc::count(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(one, Some(1));
}
