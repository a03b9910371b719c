//! Bitget v2 spot feed: the decoder against the frames documented in venues.md §4 (fixtures under
//! `tests/fixtures/bitget/`, one file per frame, plus variants and malformed frames), the checksum
//! against the worked example of venues.md §4.2, and the book sync against §4.2 and the Bitget
//! pitfalls of §6 (items 20 to 24) case by case.
//!
//! That decoding and syncing allocate nothing is proved in `no_alloc.rs`, beside the tick path.

use rampart_engine::feed::bitget::{
    Action, BitgetBookSync, BitgetDecoder, BitgetLevel, BitgetTrade, BookChannel, BookPush, Message, SyncOutcome,
    BOOKS_LEVELS_PER_SIDE_MAX, OUT_OF_ORDER_RUN_MAX, TRADES_PER_PUSH_MAX,
};
use rampart_engine::feed::checksum::{book_checksum, crc32, CHECKSUM_LEVELS};
use rampart_engine::feed::DecodeError;
use rampart_engine::fixed::ParseError;
use rampart_engine::{Book, BookId, Level, Price, Qty, Tick, TickKind};
use rampart_testkit::feed::{
    assert_fixtures_listed, assert_malformed_refused, assert_truncations_refused, mutate_valid_frames, read_fixture,
    Want,
};

// ---------------------------------------------------------------------------------------------
// Fixtures.

/// Frames that decode. The first group is verbatim from venues.md §4; the rest are built from
/// the documented shapes.
const VALID: &[&str] = &[
    "books5_doc.json",
    "books5_recorded.json",
    "trade_snapshot.json",
    "candle_update.json",
    "subscribe_ack.json",
    "subscribe_request.json",
    "pong.txt",
    // Built from the documented shapes.
    "error.json",
    "error_numeric_code.json",
    "login.json",
    "unsubscribe_ack.json",
    "ticker.json",
    "books_checksum_snapshot.json",
    "books_checksum_update.json",
    "books_shuffled.json",
    "books_unknown_keys.json",
    "books_snapshot.json",
    "books_update.json",
    "books1_no_action.json",
    "trade_update.json",
    "candle_snapshot.json",
];

const MALFORMED: &[(&str, Want)] = {
    use rampart_engine::feed::JsonErrorKind as J;
    use DecodeError as D;
    use Want::{Decode, Json};
    &[
        ("malformed_level_numbers.json", Decode(D::BadLevel("bids"))),
        ("malformed_level_short.json", Decode(D::BadLevel("asks"))),
        ("malformed_level_not_array.json", Decode(D::BadLevel("asks"))),
        ("malformed_price_not_decimal.json", Decode(D::BadDecimal { field: "asks", error: ParseError::BadByte })),
        ("malformed_price_zero.json", Decode(D::OutOfRange("bids"))),
        ("malformed_qty_negative.json", Decode(D::BadDecimal { field: "asks", error: ParseError::Negative })),
        ("malformed_level_text_too_long.json", Decode(D::OutOfRange("asks"))),
        ("malformed_missing_ts.json", Decode(D::MissingField("ts"))),
        ("malformed_missing_asks.json", Decode(D::MissingField("asks"))),
        ("malformed_missing_seq.json", Decode(D::MissingField("seq"))),
        ("malformed_ts_number.json", Decode(D::WrongType("ts"))),
        ("malformed_outer_ts_string.json", Decode(D::WrongType("ts"))),
        ("malformed_seq_string.json", Decode(D::WrongType("seq"))),
        ("malformed_seq_negative.json", Decode(D::OutOfRange("seq"))),
        ("malformed_seq_overflow.json", Decode(D::OutOfRange("seq"))),
        ("malformed_pseq_fraction.json", Decode(D::WrongType("pseq"))),
        ("malformed_checksum_fraction.json", Decode(D::WrongType("checksum"))),
        ("malformed_checksum_overflow.json", Decode(D::OutOfRange("checksum"))),
        ("malformed_duplicate_key.json", Decode(D::DuplicateField("seq"))),
        ("malformed_data_two.json", Decode(D::OutOfRange("data"))),
        ("malformed_data_empty.json", Decode(D::OutOfRange("data"))),
        ("malformed_data_not_array.json", Decode(D::WrongType("data"))),
        ("malformed_data_element_not_object.json", Decode(D::WrongType("data"))),
        ("malformed_missing_data.json", Decode(D::MissingField("data"))),
        ("malformed_action_unknown.json", Decode(D::OutOfRange("action"))),
        ("malformed_books_missing_action.json", Decode(D::MissingField("action"))),
        ("malformed_inst_escaped.json", Decode(D::Escaped("instId"))),
        ("malformed_missing_inst.json", Decode(D::MissingField("instId"))),
        ("malformed_missing_channel.json", Decode(D::MissingField("channel"))),
        ("malformed_arg_not_object.json", Decode(D::WrongType("arg"))),
        ("malformed_trade_side.json", Decode(D::OutOfRange("side"))),
        ("malformed_trade_id_number.json", Decode(D::WrongType("tradeId"))),
        ("malformed_trade_id_not_digits.json", Decode(D::WrongType("tradeId"))),
        ("malformed_trade_id_overflow.json", Decode(D::OutOfRange("tradeId"))),
        ("malformed_trade_missing_price.json", Decode(D::MissingField("price"))),
        ("malformed_trade_element_not_object.json", Decode(D::WrongType("data"))),
        ("malformed_candle_row_not_array.json", Decode(D::WrongType("data"))),
        ("malformed_candle_row_empty.json", Decode(D::WrongType("data"))),
        ("malformed_candle_start_number.json", Decode(D::WrongType("data"))),
        // The error reply exactly as venues.md §4.1 writes it, with placeholders for values.
        ("malformed_error_code_text.json", Decode(D::WrongType("code"))),
        ("malformed_error_missing_code.json", Decode(D::MissingField("code"))),
        ("malformed_subscribe_missing_arg.json", Decode(D::MissingField("arg"))),
        ("malformed_event_number.json", Decode(D::WrongType("event"))),
        ("malformed_trailing_garbage.json", Json(J::TrailingBytes)),
        ("malformed_truncated.json", Json(J::UnexpectedEnd)),
        ("malformed_array_top.json", Decode(D::NotAnObject)),
        ("malformed_ping.txt", Json(J::UnexpectedByte)),
        ("malformed_pong_json.json", Decode(D::NotAnObject)),
        ("malformed_pong_newline.txt", Json(J::UnexpectedByte)),
        ("malformed_empty.json", Json(J::UnexpectedEnd)),
        ("malformed_bad_escape.json", Json(J::BadEscape)),
        ("malformed_control_char.json", Json(J::ControlChar)),
        ("malformed_deep_nesting.json", Json(J::TooDeep)),
        ("malformed_non_utf8.json", Json(J::NotUtf8)),
    ]
};

fn fixture_dir() -> String {
    format!("{}/tests/fixtures/bitget", env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    read_fixture(&fixture_dir(), name)
}

fn decoder() -> BitgetDecoder {
    BitgetDecoder::new(BOOKS_LEVELS_PER_SIDE_MAX, TRADES_PER_PUSH_MAX)
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

/// Levels as (price text, size text), read back through the push.
fn texts<'a>(push: &BookPush<'a>, levels: &[BitgetLevel]) -> Vec<(&'a str, &'a str)> {
    levels
        .iter()
        .map(|l| {
            let p = std::str::from_utf8(push.price_text(l)).expect("utf8");
            let s = std::str::from_utf8(push.size_text(l)).expect("utf8");
            assert_eq!(l.price, px(p), "parsed price matches its text");
            assert_eq!(l.qty, sz(s), "parsed size matches its text");
            (p, s)
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

#[test]
fn documented_books5_push_with_checksum_zero() {
    with_message("books5_doc.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
        assert_eq!(b.channel, BookChannel::Books5);
        assert_eq!(b.inst_id, b"BTCUSDT");
        assert_eq!(b.action, Some(Action::Snapshot));
        assert!(b.replaces_book());
        assert_eq!((b.ts_ms, b.push_ts_ms), (1_695_710_946_294, Some(1_695_710_946_294)));
        assert_eq!((b.checksum, b.seq, b.pseq), (Some(0), 123, None));
        // "26275.0" and "0.0500" keep their trailing zeros: the checksum needs the original text.
        assert_eq!(texts(&b, b.asks), [("26274.9", "0.0009"), ("26275.0", "0.0500")]);
        assert_eq!(texts(&b, b.bids), [("26274.8", "0.0009"), ("26274.7", "0.0027")]);
        assert_eq!(b.asks[1].price, Price(2_627_500_000_000));
        assert_eq!(b.asks[1].qty, Qty(5_000_000));
    });
}

#[test]
fn recorded_books5_push_has_seq_and_pseq_and_no_checksum() {
    with_message("books5_recorded.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
        assert_eq!(b.channel, BookChannel::Books5);
        assert_eq!((b.checksum, b.seq, b.pseq), (None, 711_330_212_481, Some(0)));
        assert_eq!((b.ts_ms, b.push_ts_ms), (1_786_538_865_366, Some(1_786_538_865_369)));
        assert_eq!(b.asks.len(), 5);
        assert_eq!(b.bids.len(), 5);
        assert_eq!(texts(&b, &b.asks[2..3]), [("64025", "0.02")]);
        assert_eq!(texts(&b, &b.bids[4..]), [("64022.3", "0.029133")]);
        assert_eq!(b.bids[0].qty, Qty(17_829_800));
    });
}

#[test]
fn documented_trade_snapshot() {
    with_message("trade_snapshot.json", |m| {
        assert_eq!(
            m,
            Message::Trades {
                inst_id: b"BTCUSDT",
                action: Some(Action::Snapshot),
                trades: &[BitgetTrade {
                    trade_id: 1_000_000_000,
                    price: px("26293.4"),
                    qty: sz("0.0013"),
                    taker_sell: false,
                    ts_ms: 1_695_709_835_822,
                }],
            }
        );
    });
}

#[test]
fn trades_come_out_oldest_first_with_ids_above_2_pow_53() {
    with_message("trade_update.json", |m| {
        let Message::Trades { inst_id, action, trades } = m else { panic!("not trades: {m:?}") };
        assert_eq!((inst_id, action), (&b"BTCUSDT"[..], Some(Action::Update)));
        // The message lists them newest first; equal times are ordered by id.
        let got: Vec<(i64, u64, bool)> = trades.iter().map(|t| (t.ts_ms, t.trade_id, t.taker_sell)).collect();
        assert_eq!(
            got,
            [
                (1_786_539_556_731, 1_471_419_036_958_703_616, false),
                (1_786_539_610_916, 1_471_423_022_176_681_984, true),
                (1_786_539_610_916, 1_471_423_022_176_681_986, false),
            ]
        );
        assert!(trades[2].trade_id > 1 << 53);
        assert_eq!((trades[1].price, trades[1].qty), (px("64124.6"), sz("0.5")));
        assert_eq!(
            trades[1].tick(BookId(7)),
            Tick {
                book: BookId(7),
                ts_ms: 1_786_539_610_916,
                kind: TickKind::Trade { price: px("64124.6"), qty: sz("0.5"), taker_sell: true },
            }
        );
    });
}

#[test]
fn candles_are_recognised_without_a_closed_flag() {
    with_message("candle_update.json", |m| {
        assert_eq!(
            m,
            Message::Candles {
                channel: b"candle1m",
                inst_id: b"BTCUSDT",
                action: Some(Action::Update),
                row_count: 1,
                newest_start_ms: Some(1_786_539_600_000),
            }
        );
    });
    with_message("candle_snapshot.json", |m| {
        let Message::Candles { channel, row_count, newest_start_ms, action, .. } = m else { panic!("{m:?}") };
        assert_eq!((channel, action), (&b"candle1H"[..], Some(Action::Snapshot)));
        assert_eq!((row_count, newest_start_ms), (2, Some(1_786_539_600_000)));
    });
}

#[test]
fn documented_events_and_pong() {
    with_message("subscribe_ack.json", |m| {
        assert_eq!(m, Message::Subscribed { subscribed: true, channel: b"candle1m", inst_id: b"BTCUSDT" });
    });
    with_message("unsubscribe_ack.json", |m| {
        assert_eq!(m, Message::Subscribed { subscribed: false, channel: b"books", inst_id: b"BTCUSDT" });
    });
    with_message("error.json", |m| {
        assert_eq!(m, Message::Error { code: 30005, msg: b"error", channel: None, inst_id: None });
    });
    with_message("error_numeric_code.json", |m| {
        let Message::Error { code, msg, channel, inst_id } = m else { panic!("not an error: {m:?}") };
        assert_eq!((code, channel, inst_id), (30001, Some(&b"books"[..]), Some(&b"BTCUSD"[..])));
        assert!(msg.ends_with(b"doesn't exist"));
    });
    with_message("pong.txt", |m| assert_eq!(m, Message::Pong));
    // Our own request echoed back, a login reply and a channel this decoder does not read are
    // values, not errors.
    with_message("subscribe_request.json", |m| assert_eq!(m, Message::Other { event: None, channel: None }));
    with_message("login.json", |m| assert_eq!(m, Message::Other { event: Some(b"login"), channel: None }));
    with_message("ticker.json", |m| assert_eq!(m, Message::Other { event: None, channel: Some(b"ticker") }));
}

fn assert_checksum_snapshot(m: Message<'_>) {
    let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
    assert_eq!(b.channel, BookChannel::Books);
    assert_eq!(b.inst_id, b"BTCUSDT");
    assert_eq!(b.action, Some(Action::Snapshot));
    assert_eq!((b.checksum, b.seq, b.pseq), (Some(-1_504_501_796), 1000, Some(0)));
    assert_eq!(texts(&b, b.bids), [("43231.1", "4"), ("43231", "6")]);
    assert_eq!(texts(&b, b.asks), [("43232.8", "9"), ("43232.9", "8")]);
}

#[test]
fn key_order_whitespace_unknown_keys_and_extra_cells_do_not_matter() {
    with_message("books_checksum_snapshot.json", assert_checksum_snapshot);
    with_message("books_shuffled.json", assert_checksum_snapshot);
    with_message("books_unknown_keys.json", assert_checksum_snapshot);
}

#[test]
fn fixed_depth_channels_replace_the_book_without_an_action() {
    with_message("books1_no_action.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
        assert_eq!((b.channel, b.action, b.push_ts_ms), (BookChannel::Books1, None, Some(1_786_538_865_369)));
        assert!(b.replaces_book());
        assert_eq!(texts(&b, b.bids), [("3366.1", "7")]);
    });
    with_message("books_update.json", |m| {
        let Message::Book(b) = m else { panic!("not a book push: {m:?}") };
        assert!(!b.replaces_book());
        assert_eq!((b.seq, b.pseq), (711_330_212_490, Some(711_330_212_481)));
    });
}

#[test]
fn the_level_and_trade_bounds_refuse_larger_messages() {
    let bytes = fixture("books_checksum_snapshot.json");
    assert_eq!(BitgetDecoder::new(2, 1).decode(&bytes).map(|_| ()), Ok(()));
    assert_eq!(BitgetDecoder::new(1, 1).decode(&bytes), Err(DecodeError::TooManyLevels("bids")));
    let bytes = fixture("trade_update.json");
    assert_eq!(BitgetDecoder::new(1, 3).decode(&bytes).map(|_| ()), Ok(()));
    assert_eq!(BitgetDecoder::new(1, 2).decode(&bytes), Err(DecodeError::TooManyLevels("data")));
}

#[test]
fn a_decoder_keeps_working_after_an_error() {
    let mut d = decoder();
    let good = fixture("books_update.json");
    for bad in MALFORMED {
        let _ = d.decode(&fixture(bad.0));
        let Ok(Message::Book(b)) = d.decode(&good) else { panic!("after {}", bad.0) };
        assert_eq!((b.bids.len(), b.asks.len()), (3, 2), "after {}", bad.0);
    }
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
    assert!(checked > 3_000, "only {checked} prefixes");
}

/// Cheap fuzz, part 2: random byte edits of valid frames never panic, and whatever decodes is
/// fed to a sync whose book keeps its invariants and is never left crossed. The seed can be set
/// with `RAMPART_FUZZ_SEED=<seed>` and is printed on failure.
#[test]
fn mutated_frames_never_panic() {
    let mut d = decoder();
    let mut sync = BitgetBookSync::new(CHECKSUM_LEVELS, true);
    let mut book = Book::new(64);
    let decoded = mutate_valid_frames(&fixture_dir(), VALID, 0x0B17_6E75, |bytes| {
        let ok = match d.decode(bytes) {
            Ok(Message::Book(p)) => {
                sync.on_book(&p, &mut book);
                true
            }
            Ok(_) => true,
            Err(_) => false,
        };
        assert!(book.check_invariants() && !book.is_crossed());
        ok
    });
    assert!(decoded > 100, "only {decoded} mutated frames decoded: the mutations are too destructive");
}

// ---------------------------------------------------------------------------------------------
// Checksum.

#[test]
fn checksum_worked_example_from_venues_md() {
    let s = "43231.1:4:43232.8:9:43231:6:43232.9:8";
    assert_eq!(crc32(s.as_bytes()), 2_790_465_500);
    assert_eq!(crc32(s.as_bytes()) as i32, -1_504_501_796);
    let bids: [(&[u8], &[u8]); 2] = [(b"43231.1", b"4"), (b"43231", b"6")];
    let asks: [(&[u8], &[u8]); 2] = [(b"43232.8", b"9"), (b"43232.9", b"8")];
    assert_eq!(book_checksum(bids, asks), -1_504_501_796);
    // The doc's second example: fewer than 25 levels on a side, missing entries skipped.
    let bids: [(&[u8], &[u8]); 1] = [(b"3366.1", b"7")];
    let asks: [(&[u8], &[u8]); 3] = [(b"3366.8", b"9"), (b"3368", b"8"), (b"3372", b"8")];
    assert_eq!(book_checksum(bids, asks), crc32(b"3366.1:7:3366.8:9:3368:8:3372:8") as i32);
}

// ---------------------------------------------------------------------------------------------
// Book sync.

/// A `books` push with these levels, as JSON text.
fn frame(
    action: &str,
    seq: u64,
    pseq: Option<i64>,
    checksum: Option<i32>,
    bids: &[(&str, &str)],
    asks: &[(&str, &str)],
) -> Vec<u8> {
    let levels = |v: &[(&str, &str)]| v.iter().map(|(p, s)| format!(r#"["{p}","{s}"]"#)).collect::<Vec<_>>().join(",");
    let checksum = checksum.map(|c| format!(r#","checksum":{c}"#)).unwrap_or_default();
    let pseq = pseq.map(|p| format!(r#","pseq":{p}"#)).unwrap_or_default();
    format!(
        r#"{{"action":"{action}","arg":{{"instType":"SPOT","channel":"books","instId":"BTCUSDT"}},"data":[{{"asks":[{}],"bids":[{}]{checksum},"seq":{seq}{pseq},"ts":"1"}}],"ts":2}}"#,
        levels(asks),
        levels(bids)
    )
    .into_bytes()
}

/// Decodes `bytes` (a book push) and hands it to the sync.
fn feed(s: &mut BitgetBookSync, book: &mut Book, bytes: &[u8]) -> SyncOutcome {
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

fn sync() -> (BitgetBookSync, Book) {
    (BitgetBookSync::new(400, true), Book::new(400))
}

#[test]
fn snapshot_then_update_with_verified_checksums() {
    let (mut s, mut book) = sync();
    assert!(!s.is_live());
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json")), SyncOutcome::Loaded { seq: 1000 });
    assert_eq!(s.checksum(), -1_504_501_796);
    // The update removes bid 43231 and adds ask 43233.5; seq jumps by 3 (not contiguous).
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::Applied { seq: 1003 });
    assert_eq!(s.checksum(), checksum_of("43231.1:4:43232.8:9:43232.9:8:43233.5:2"));
    assert_eq!(side(book.bids()), [(px("43231.1"), sz("4"))]);
    assert_eq!(side(book.asks()), [(px("43232.8"), sz("9")), (px("43232.9"), sz("8")), (px("43233.5"), sz("2"))]);
    assert_eq!(s.last_seq(), Some(1003));
    let c = s.counters();
    assert_eq!((c.snapshot_count, c.update_count, c.checksum_checked_count, c.checksum_mismatch_count), (1, 1, 2, 0));
}

#[test]
fn recorded_snapshot_and_update_chain() {
    let (mut s, mut book) = sync();
    let out = feed(&mut s, &mut book, &fixture("books_snapshot.json"));
    assert_eq!(out, SyncOutcome::Loaded { seq: 711_330_212_481 });
    let out = feed(&mut s, &mut book, &fixture("books_update.json"));
    assert_eq!(out, SyncOutcome::Applied { seq: 711_330_212_490 });
    assert_eq!(
        side(book.bids()),
        [(px("64024.37"), sz("0.2")), (px("64024.36"), sz("0.01")), (px("64020"), sz("1.25"))]
    );
    assert_eq!(
        side(book.asks()),
        [(px("64024.4"), sz("0.5")), (px("64024.44"), sz("0.01")), (px("64025"), sz("0.02"))]
    );
    assert_eq!(
        s.checksum(),
        checksum_of("64024.37:0.2:64024.4:0.5:64024.36:0.01:64024.44:0.01:64020:1.25:64025:0.02"),
        "the text store follows the book"
    );
    assert!(book.check_invariants());
}

#[test]
fn every_fixed_depth_push_replaces_the_book() {
    let (mut s, mut book) = sync();
    assert_eq!(feed(&mut s, &mut book, &fixture("books5_recorded.json")), SyncOutcome::Loaded { seq: 711_330_212_481 });
    assert_eq!(book.bids().len(), 5);
    // books5 with checksum 0, and a lower seq: still a full replacement.
    assert_eq!(feed(&mut s, &mut book, &fixture("books5_doc.json")), SyncOutcome::Loaded { seq: 123 });
    assert_eq!(side(book.bids()), [(px("26274.8"), sz("0.0009")), (px("26274.7"), sz("0.0027"))]);
    assert_eq!(side(book.asks()), [(px("26274.9"), sz("0.0009")), (px("26275"), sz("0.05"))]);
    assert_eq!(s.checksum(), checksum_of("26274.8:0.0009:26274.9:0.0009:26274.7:0.0027:26275.0:0.0500"));
    assert_eq!(feed(&mut s, &mut book, &fixture("books1_no_action.json")), SyncOutcome::Loaded { seq: 5 });
    assert_eq!(side(book.bids()), [(px("3366.1"), sz("7"))]);
    let c = s.counters();
    assert_eq!((c.snapshot_count, c.checksum_checked_count), (3, 0));
}

#[test]
fn a_later_snapshot_replaces_the_book_pitfall_21() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &frame("snapshot", 50, None, None, &[("100", "1"), ("99", "1")], &[("101", "1")]));
    let c = checksum_of("98:3:102:1");
    let out = feed(&mut s, &mut book, &frame("snapshot", 20, Some(0), Some(c), &[("98", "3")], &[("102", "1")]));
    assert_eq!(out, SyncOutcome::Loaded { seq: 20 });
    assert_eq!(side(book.bids()), [(px("98"), sz("3"))]);
    assert_eq!(side(book.asks()), [(px("102"), sz("1"))]);
    assert_eq!(s.last_seq(), Some(20));
    assert_eq!(s.counters().checksum_checked_count, 1);
}

#[test]
fn update_before_any_snapshot_asks_once_then_waits() {
    let (mut s, mut book) = sync();
    let update = frame("update", 10, Some(9), None, &[("1", "1")], &[]);
    let out = feed(&mut s, &mut book, &update);
    assert_eq!(out, SyncOutcome::UpdateBeforeSnapshot);
    assert!(out.wants_resubscribe());
    let out = feed(&mut s, &mut book, &frame("update", 11, Some(10), None, &[("2", "1")], &[]));
    assert_eq!(out, SyncOutcome::AwaitingSnapshot);
    assert!(!out.wants_resubscribe(), "one resubscribe per break");
    assert!(book.bids().is_empty() && !s.is_live());
    assert_eq!(s.counters().awaiting_count, 2);
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json")), SyncOutcome::Loaded { seq: 1000 });
}

#[test]
fn pseq_mismatch_is_a_gap_that_discards_the_book() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    let out = feed(&mut s, &mut book, &frame("update", 1005, Some(1002), None, &[("43231", "1")], &[]));
    assert_eq!(out, SyncOutcome::Gap { last_seq: 1000, pseq: 1002 });
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::AwaitingSnapshot);
    assert!(book.bids().is_empty());
    // A fresh snapshot (after resubscribing) brings the book back.
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json")), SyncOutcome::Loaded { seq: 1000 });
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::Applied { seq: 1003 });
    let c = s.counters();
    assert_eq!((c.gap_count, c.awaiting_count, c.snapshot_count, c.checksum_mismatch_count), (1, 1, 2, 0));
}

#[test]
fn zero_negative_or_absent_pseq_is_not_a_link() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &frame("snapshot", 10, Some(0), None, &[("100", "1")], &[("101", "1")]));
    for (seq, pseq) in [(12, None), (15, Some(0)), (16, Some(-1))] {
        let out = feed(&mut s, &mut book, &frame("update", seq, pseq, None, &[("99", "1")], &[]));
        assert_eq!(out, SyncOutcome::Applied { seq }, "pseq {pseq:?}");
    }
    assert_eq!(s.counters().gap_count, 0);
    // A positive pseq that chains is applied.
    let out = feed(&mut s, &mut book, &frame("update", 20, Some(16), None, &[("98", "1")], &[]));
    assert_eq!(out, SyncOutcome::Applied { seq: 20 });
}

#[test]
fn out_of_order_seq_is_dropped_and_the_book_stays_live() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    feed(&mut s, &mut book, &fixture("books_checksum_update.json"));
    let before = (side(book.bids()), side(book.asks()), s.checksum());
    // A late packet (lower seq) and a duplicate (same seq, no pseq).
    for seq in [1001, 1003] {
        let out = feed(&mut s, &mut book, &frame("update", seq, Some(1000), None, &[("43231.1", "0")], &[]));
        assert_eq!(out, SyncOutcome::OutOfOrder { seq, last_seq: 1003 });
        assert!(!out.wants_resubscribe());
    }
    assert_eq!((side(book.bids()), side(book.asks()), s.checksum()), before, "nothing applied");
    assert!(s.is_live());
    assert_eq!(s.last_seq(), Some(1003));
    assert_eq!(s.counters().out_of_order_count, 2);
    let out = feed(&mut s, &mut book, &frame("update", 1004, Some(1003), None, &[("43231.1", "5")], &[]));
    assert_eq!(out, SyncOutcome::Applied { seq: 1004 });
    assert_eq!(side(book.bids()), [(px("43231.1"), sz("5"))]);
}

#[test]
fn a_run_of_lower_seqs_is_a_sequence_restart() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &frame("snapshot", 5000, None, None, &[("100", "1")], &[("101", "1")]));
    // After symbol maintenance the venue's seq starts again lower and keeps growing from there.
    let mut seq = 3;
    for _ in 1..OUT_OF_ORDER_RUN_MAX {
        let out = feed(&mut s, &mut book, &frame("update", seq, None, None, &[("99", "1")], &[]));
        assert_eq!(out, SyncOutcome::OutOfOrder { seq, last_seq: 5000 });
        seq += 1;
    }
    let out = feed(&mut s, &mut book, &frame("update", seq, None, None, &[("99", "1")], &[]));
    assert_eq!(out, SyncOutcome::SequenceRestart { last_seq: 5000, seq });
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty());
    // An applied update in between ends the run.
    feed(&mut s, &mut book, &frame("snapshot", 5000, None, None, &[("100", "1")], &[("101", "1")]));
    for round in 0..3 {
        for _ in 1..OUT_OF_ORDER_RUN_MAX {
            feed(&mut s, &mut book, &frame("update", 3, None, None, &[], &[]));
        }
        let out = feed(&mut s, &mut book, &frame("update", 5001 + round, None, None, &[], &[]));
        assert_eq!(out, SyncOutcome::Applied { seq: 5001 + round });
    }
    let c = s.counters();
    assert_eq!((c.sequence_restart_count, c.out_of_order_count), (1, u64::from(OUT_OF_ORDER_RUN_MAX) * 4 - 3));
}

#[test]
fn checksum_mismatch_discards_the_book() {
    let (mut s, mut book) = sync();
    let good = checksum_of("100:1:101:1");
    let out = feed(&mut s, &mut book, &frame("snapshot", 10, Some(0), Some(good), &[("100", "1")], &[("101", "1")]));
    assert_eq!(out, SyncOutcome::Loaded { seq: 10 });
    let wrong = checksum_of("100:2:101:1").wrapping_add(1);
    let out = feed(&mut s, &mut book, &frame("update", 11, Some(10), Some(wrong), &[("100", "2")], &[]));
    assert_eq!(out, SyncOutcome::ChecksumMismatch { expected: wrong, computed: checksum_of("100:2:101:1") });
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.counters().checksum_mismatch_count, 1);
    // The unsigned form of the right checksum is accepted.
    let (mut s, mut book) = sync();
    let unsigned = i64::from(good as u32);
    let text = String::from_utf8(frame("snapshot", 1, None, Some(good), &[("100", "1")], &[("101", "1")]))
        .expect("utf8")
        .replace(&good.to_string(), &unsigned.to_string());
    assert_eq!(feed(&mut s, &mut book, text.as_bytes()), SyncOutcome::Loaded { seq: 1 });
    assert_eq!(s.counters().checksum_checked_count, 1);
}

#[test]
fn zero_or_absent_checksum_is_skipped_and_seq_still_checked() {
    let (mut s, mut book) = sync();
    let out = feed(&mut s, &mut book, &frame("snapshot", 1, Some(0), Some(0), &[("100", "1")], &[]));
    assert_eq!(out, SyncOutcome::Loaded { seq: 1 });
    let out = feed(&mut s, &mut book, &frame("update", 2, Some(1), None, &[("99", "1")], &[]));
    assert_eq!(out, SyncOutcome::Applied { seq: 2 });
    assert_eq!(s.counters().checksum_checked_count, 0);
    let out = feed(&mut s, &mut book, &frame("update", 2, Some(1), Some(0), &[], &[]));
    assert!(matches!(out, SyncOutcome::OutOfOrder { .. }));
    // With verification off, even a wrong non-zero checksum is skipped.
    let mut s = BitgetBookSync::new(CHECKSUM_LEVELS, false);
    let out = feed(&mut s, &mut book, &frame("snapshot", 1, None, Some(12345), &[("100", "1")], &[]));
    assert_eq!(out, SyncOutcome::Loaded { seq: 1 });
    assert_eq!(s.counters().checksum_checked_count, 0);
}

#[test]
fn checksum_uses_the_latest_text_received_for_a_level() {
    let (mut s, mut book) = sync();
    let c = checksum_of("0.5:6:0.6:8");
    feed(&mut s, &mut book, &frame("snapshot", 1, None, Some(c), &[("0.5", "6")], &[("0.6", "8")]));
    // Same price and size, different text: the checksum follows the venue's text ("0.5000").
    let c = checksum_of("0.5000:6.0:0.6:8");
    let out = feed(&mut s, &mut book, &frame("update", 2, Some(1), Some(c), &[("0.5000", "6.0")], &[]));
    assert_eq!(out, SyncOutcome::Applied { seq: 2 });
    assert_eq!(side(book.bids()), [(px("0.5"), sz("6"))]);
}

#[test]
fn crossed_book_is_discarded() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    let out = feed(&mut s, &mut book, &frame("update", 1001, Some(1000), None, &[("43232.8", "1")], &[]));
    assert_eq!(out, SyncOutcome::Crossed);
    assert!(out.wants_resubscribe());
    assert!(!s.is_live() && book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.counters().crossed_count, 1);
    // A crossed snapshot too.
    let out = feed(&mut s, &mut book, &frame("snapshot", 1, None, None, &[("101", "1")], &[("100", "1")]));
    assert_eq!(out, SyncOutcome::Crossed);
}

#[test]
fn deleting_an_absent_level_is_a_no_op() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    let c = checksum_of("43231.1:4:43232.8:9:43231:6:43232.9:8");
    let out =
        feed(&mut s, &mut book, &frame("update", 1001, Some(1000), Some(c), &[("43000", "0")], &[("44000", "0")]));
    assert_eq!(out, SyncOutcome::Applied { seq: 1001 });
    assert_eq!((book.bids().len(), book.asks().len()), (2, 2));
    assert_eq!(s.counters().checksum_mismatch_count, 0);
}

#[test]
fn reset_on_reconnect_drops_the_book_and_its_text_pitfall_20() {
    let (mut s, mut book) = sync();
    feed(&mut s, &mut book, &fixture("books_checksum_snapshot.json"));
    feed(&mut s, &mut book, &fixture("books_checksum_update.json"));
    s.reset(&mut book);
    assert!(!s.is_live() && s.last_seq().is_none());
    assert!(book.bids().is_empty() && book.asks().is_empty());
    assert_eq!(s.checksum(), 0, "no text kept across the reconnect");
    // The old connection's updates are refused; the new connection's snapshot starts afresh,
    // and its checksum verifies against its own levels only.
    assert_eq!(feed(&mut s, &mut book, &fixture("books_checksum_update.json")), SyncOutcome::UpdateBeforeSnapshot);
    let c = checksum_of("100:1:101:1");
    let out = feed(&mut s, &mut book, &frame("snapshot", 7, Some(0), Some(c), &[("100", "1")], &[("101", "1")]));
    assert_eq!(out, SyncOutcome::Loaded { seq: 7 });
    assert_eq!(side(book.bids()), [(px("100"), sz("1"))]);
}

fn pairs(v: &[(String, String)]) -> Vec<(&[u8], &[u8])> {
    v.iter().map(|(p, s)| (p.as_bytes(), s.as_bytes())).collect()
}

fn strs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(p, s)| (p.as_str(), s.as_str())).collect()
}

#[test]
fn deep_books_check_the_top_25_and_a_small_text_store_says_when_it_cannot() {
    let bids: Vec<(String, String)> =
        (0..30).map(|i| (format!("{}.5", 5000 - i), format!("0.{:03}0", i + 1))).collect();
    let asks: Vec<(String, String)> = (0..30).map(|i| (format!("{}.5", 5001 + i), format!("1.{:03}", i + 1))).collect();
    let (b, a) = (strs(&bids), strs(&asks));
    let snapshot = frame("snapshot", 1, None, Some(book_checksum(pairs(&bids), pairs(&asks))), &b, &a);
    let removed: Vec<(&str, &str)> = b[..10].iter().map(|&(p, _)| (p, "0")).collect();
    let update = frame("update", 2, Some(1), Some(book_checksum(pairs(&bids[10..]), pairs(&asks))), &removed, &[]);

    // Enough text slots: every checksum is checked.
    let (mut s, mut book) = sync();
    assert_eq!(feed(&mut s, &mut book, &snapshot), SyncOutcome::Loaded { seq: 1 });
    assert_eq!(feed(&mut s, &mut book, &update), SyncOutcome::Applied { seq: 2 });
    assert_eq!(s.counters().checksum_checked_count, 2);

    // Only 25 text slots: after the deletions the deeper levels are unknown, so the check is
    // skipped and counted rather than reported as a mismatch.
    let mut s = BitgetBookSync::new(CHECKSUM_LEVELS, true);
    let mut book = Book::new(400);
    assert_eq!(feed(&mut s, &mut book, &snapshot), SyncOutcome::Loaded { seq: 1 });
    assert_eq!(feed(&mut s, &mut book, &update), SyncOutcome::Applied { seq: 2 });
    let c = s.counters();
    assert_eq!((c.checksum_checked_count, c.checksum_unverifiable_count), (1, 1));
    assert_eq!(book.bids().len(), 20, "the book itself keeps its own depth");
}
