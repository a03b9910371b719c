//! One stream connection's state apart from its socket (sans-I/O; time is an argument): its
//! subscriptions, each channel's `seq`, the last state sent on each market channel (so only a
//! change is sent), the `alerts` cursor, the error answers of the last minute and when anything
//! was last sent (for heartbeats). It turns ops and published state into the exact text frames
//! of `decisions.md` §12; the front's connection task only moves them.

use std::collections::{BTreeMap, HashMap, VecDeque};

use rampart_engine::BookId;
use rampart_state::board::Numbers;
use rampart_state::json::Json;
use rampart_state::market_json::{write_board_numbers, write_density, write_level, write_levels, write_wall};
use rampart_state::shared::{DensitySnapshot, LevelSnapshot};

use super::ops::Channel;
use super::watch::{self, LevelsChange, LevelsSeen, WallEvent, WallsSeen};

/// Subscriptions one connection holds at most; a subscribe past it is refused whole.
pub const SUBSCRIPTIONS_MAX: usize = 500;
/// Error answers in any minute after which the connection is closed (1008).
pub const ERRORS_PER_MINUTE_MAX: usize = 10;
/// A heartbeat follows this long without any other message.
pub const HEARTBEAT_MS: i64 = 1_000;
/// A pair's price is sent at most once per this many milliseconds (conflated: the newest).
pub const PRICE_EVERY_MS: i64 = 100;
/// Inbox entries sent on an `alerts` subscribe with `since`, at most (the oldest first).
pub const BACKLOG_MAX: u32 = 1_000;

/// A subscription: its channel's `seq` so far, the last price sent and when, and per book the
/// levels and walls last sent (a `*` channel holds every pair of its venue).
#[derive(Debug, Default)]
struct Sub {
    seq: u64,
    price: Option<(i64, i64)>,
    price_sent_ms: i64,
    board_ts: i64,
    min_usd: Option<f64>,
    levels: HashMap<BookId, Option<LevelsSeen>>,
    walls: HashMap<BookId, Option<WallsSeen>>,
}

/// The trades a look saw on a book: its last price and the shard's trade watermarks (the
/// highest and lowest trade since the levels computed at `computed_ms`).
#[derive(Clone, Copy, Debug)]
pub struct Trades {
    /// Last price (fixed-point).
    pub price: i64,
    /// Its time, Unix milliseconds.
    pub price_ts: i64,
    /// Highest trade since the levels were computed (`i64::MIN`: none).
    pub high: i64,
    /// Lowest trade since then (`i64::MAX`: none).
    pub low: i64,
    /// When the levels were computed.
    pub computed_ms: i64,
}

/// What a connection has asked for and been sent.
#[derive(Debug)]
pub struct Session {
    subs: BTreeMap<Channel, Sub>,
    errors: VecDeque<i64>,
    last_sent_ms: i64,
    alerts_after: Option<i64>,
}

/// A subscribe that would pass [`SUBSCRIPTIONS_MAX`]: refused whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManySubscriptions {
    /// Subscriptions the connection holds.
    pub held: usize,
    /// New ones the subscribe asked for.
    pub asked: usize,
}

impl std::fmt::Display for TooManySubscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "too many subscriptions: {} held, {} more asked (max {SUBSCRIPTIONS_MAX} per connection)",
            self.held, self.asked
        )
    }
}

/// An error answer, and whether the connection must now close (1008: too many errors).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    /// The text frame to send.
    pub frame: String,
    /// The connection passed [`ERRORS_PER_MINUTE_MAX`]: close it after the frame.
    pub close: bool,
}

impl Session {
    /// A connection opened at `now_ms`, subscribed to nothing.
    pub fn new(now_ms: i64) -> Session {
        Session { subs: BTreeMap::new(), errors: VecDeque::new(), last_sent_ms: now_ms, alerts_after: None }
    }

    /// Adds `channels` (those held already stay as they are, `minUsd` too); the ones new to this
    /// connection, which each get their first message. Refused whole past [`SUBSCRIPTIONS_MAX`].
    pub fn subscribe(
        &mut self,
        channels: &[Channel],
        min_usd: Option<f64>,
    ) -> Result<Vec<Channel>, TooManySubscriptions> {
        let mut fresh: Vec<Channel> = Vec::with_capacity(channels.len());
        for c in channels {
            if !self.subs.contains_key(c) && !fresh.contains(c) {
                fresh.push(c.clone());
            }
        }
        if self.subs.len() + fresh.len() > SUBSCRIPTIONS_MAX {
            return Err(TooManySubscriptions { held: self.subs.len(), asked: fresh.len() });
        }
        for c in &fresh {
            let min_usd = min_usd.filter(|_| matches!(c, Channel::Walls { .. }));
            self.subs.insert(c.clone(), Sub { min_usd, ..Sub::default() });
        }
        Ok(fresh)
    }

    /// Removes `channels` (one not held is no error); a channel subscribed again starts at
    /// `seq` 1 with a new first message.
    pub fn unsubscribe(&mut self, channels: &[Channel]) {
        for c in channels {
            self.subs.remove(c);
            if *c == Channel::Alerts {
                self.alerts_after = None;
            }
        }
    }

    /// The price channels held, with the book they name.
    pub fn price_channels(&self) -> impl Iterator<Item = &Channel> {
        self.subs.keys().filter(|c| matches!(c, Channel::Price { .. }))
    }

    /// The levels and walls channels held.
    pub fn market_channels(&self) -> Vec<Channel> {
        self.subs.keys().filter(|c| matches!(c, Channel::Levels { .. } | Channel::Walls { .. })).cloned().collect()
    }

    /// A look at `book`'s levels for `channel` (its first: a `snapshot`; then `level.broken` for
    /// each level a trade went through, and a `snapshot` when a recompute changed the set).
    pub fn levels_look(
        &mut self,
        channel: &Channel,
        book: BookId,
        symbol: &str,
        snap: &LevelSnapshot,
        t: Trades,
        now_ms: i64,
    ) -> Vec<String> {
        let Some(sub) = self.subs.get_mut(channel) else { return Vec::new() };
        let seen = sub.levels.entry(book).or_default();
        let Some(change) = watch::look_levels(seen, snap, t.high, t.low) else { return Vec::new() };
        match change {
            LevelsChange::Snapshot(mut levels) => {
                let Some(mut j) = self.head(channel, "snapshot", now_ms) else { return Vec::new() };
                j.raw(",\"data\":{\"symbol\":").str(symbol).raw(",\"levels\":");
                write_levels(&mut j, &mut levels, t.price);
                j.raw("}}");
                vec![j.finish()]
            }
            LevelsChange::Broken(levels) => levels
                .iter()
                .filter_map(|l| {
                    let mut j = self.head(channel, "level.broken", now_ms)?;
                    j.raw(",\"data\":{\"symbol\":").str(symbol).raw(",\"level\":");
                    write_level(&mut j, l, t.price);
                    j.raw(",\"price\":").fixed(t.price).raw(",\"ts\":").int(t.price_ts).raw("}}");
                    Some(j.finish())
                })
                .collect(),
        }
    }

    /// A look at `book`'s walls for `channel`: notes the trades, then on a new scan (its first:
    /// a `snapshot`) `wall.appeared`, `wall.changed` and `wall.gone` with its `reason`.
    pub fn walls_look(
        &mut self,
        channel: &Channel,
        book: BookId,
        symbol: &str,
        snap: &DensitySnapshot,
        t: Trades,
        now_ms: i64,
    ) -> Vec<String> {
        let Some(sub) = self.subs.get_mut(channel) else { return Vec::new() };
        let min_usd = sub.min_usd;
        let seen = sub.walls.entry(book).or_default();
        let first = seen.is_none();
        if let Some(s) = seen.as_mut() {
            s.note_trades(t.price, t.high, t.low, t.computed_ms);
        }
        let Some(events) = watch::look_walls(seen, snap, min_usd) else { return Vec::new() };
        if first {
            let Some(mut j) = self.head(channel, "snapshot", now_ms) else { return Vec::new() };
            let kept = DensitySnapshot {
                walls: snap.walls.iter().filter(|w| watch::passes(w, min_usd)).copied().collect(),
                ..*snap
            };
            j.raw(",\"data\":{\"symbol\":").str(symbol).raw(",\"snapshot\":");
            write_density(&mut j, &kept);
            j.raw("}}");
            return vec![j.finish()];
        }
        events
            .iter()
            .filter_map(|e| {
                let (kind, w, reason) = match e {
                    WallEvent::Appeared(w) => ("wall.appeared", w, None),
                    WallEvent::Changed(w) => ("wall.changed", w, None),
                    WallEvent::Gone(w, why) => ("wall.gone", w, Some(why.as_str())),
                };
                let mut j = self.head(channel, kind, now_ms)?;
                j.raw(",\"data\":{\"symbol\":").str(symbol).raw(",\"wall\":");
                write_wall(&mut j, w);
                if let Some(r) = reason {
                    j.raw(",\"reason\":").str(r);
                }
                j.raw("}}");
                Some(j.finish())
            })
            .collect()
    }

    /// The board channels held.
    pub fn board_channels(&self) -> Vec<Channel> {
        self.subs.keys().filter(|c| matches!(c, Channel::Board { .. })).cloned().collect()
    }

    /// The venue's board built at `board_ts` as its channel's next message: a `snapshot` first,
    /// then `board` at each new build (once a second); `data` is `{"ts","intervals":{"5m":…}}`,
    /// each interval's numbers as `GET /v1/market` answers them. `None` when nothing is new.
    pub fn board(&mut self, channel: &Channel, board_ts: i64, numbers: &[Numbers], now_ms: i64) -> Option<String> {
        let sub = self.subs.get_mut(channel)?;
        let first = sub.seq == 0;
        if !first && sub.board_ts == board_ts {
            return None;
        }
        sub.board_ts = board_ts;
        let mut j = self.head(channel, if first { "snapshot" } else { "board" }, now_ms)?;
        j.raw(",\"data\":{\"ts\":").int(board_ts).raw(",\"intervals\":{");
        for (i, (tf, n)) in rampart_engine::Timeframe::ALL.iter().zip(numbers).enumerate() {
            if i > 0 {
                j.raw(",");
            }
            j.str(tf.as_str()).raw(":");
            write_board_numbers(&mut j, n);
        }
        j.raw("}}}");
        Some(j.finish())
    }

    /// The inbox id after which `alerts` sends next; `None` when not subscribed (or not started).
    pub fn alerts_after(&self) -> Option<i64> {
        self.alerts_after.filter(|_| self.subs.contains_key(&Channel::Alerts))
    }

    /// Starts (or moves) the `alerts` cursor: entries above `after` are sent next.
    pub fn start_alerts(&mut self, after: i64) {
        self.alerts_after = Some(after);
    }

    /// `{"type":"ack","id":N}`.
    pub fn ack(&mut self, id: u64, now_ms: i64) -> String {
        self.last_sent_ms = now_ms;
        format!("{{\"type\":\"ack\",\"id\":{id}}}")
    }

    /// `{"type":"error","id":N|null,"error":"..."}`, counted against the minute's errors.
    pub fn error(&mut self, id: Option<u64>, message: &str, now_ms: i64) -> Refused {
        while self.errors.front().is_some_and(|&t| now_ms - t >= 60_000) {
            self.errors.pop_front();
        }
        self.errors.push_back(now_ms);
        self.last_sent_ms = now_ms;
        let mut j = Json::with_capacity(64 + message.len());
        j.raw("{\"type\":\"error\",\"id\":");
        match id {
            Some(id) => j.raw(&id.to_string()),
            None => j.raw("null"),
        };
        j.raw(",\"error\":").str(message).raw("}");
        Refused { frame: j.finish(), close: self.errors.len() > ERRORS_PER_MINUTE_MAX }
    }

    /// The channel's next message head, up to `"data":`; `None` when not subscribed.
    fn head(&mut self, channel: &Channel, kind: &str, now_ms: i64) -> Option<Json> {
        let sub = self.subs.get_mut(channel)?;
        sub.seq += 1;
        self.last_sent_ms = now_ms;
        let mut j = Json::with_capacity(160);
        j.raw("{\"channel\":").str(&channel.name()).raw(",\"type\":").str(kind);
        j.raw(",\"seq\":").int(sub.seq as i64).raw(",\"ts\":").int(now_ms);
        Some(j)
    }

    /// The pair's price at `price_ts` as its channel's next message: a `snapshot` first, then a
    /// `price` only when it changed and [`PRICE_EVERY_MS`] have passed since the last one (a
    /// change within them waits for the next look, which sends the newest); `None` when nothing
    /// is to be sent.
    pub fn price(&mut self, channel: &Channel, price: i64, price_ts: i64, now_ms: i64) -> Option<String> {
        let sub = self.subs.get_mut(channel)?;
        let first = sub.price.is_none();
        if sub.price == Some((price, price_ts)) || (!first && now_ms - sub.price_sent_ms < PRICE_EVERY_MS) {
            return None;
        }
        sub.price = Some((price, price_ts));
        sub.price_sent_ms = now_ms;
        let mut j = self.head(channel, if first { "snapshot" } else { "price" }, now_ms)?;
        j.raw(",\"data\":{\"price\":");
        if price > 0 {
            j.fixed(price);
        } else {
            j.raw("null");
        }
        j.raw(",\"ts\":").int(price_ts).raw("}}");
        Some(j.finish())
    }

    /// An inbox entry of the account as the `alerts` channel's next message (`type` its kind,
    /// `id` the entry's inbox id to resume after, `data` its body: the webhook's for a firing);
    /// moves the cursor past it. `None` when not subscribed.
    pub fn alert_entry(&mut self, inbox_id: i64, kind: &str, body: &str, now_ms: i64) -> Option<String> {
        self.alerts_after()?;
        let mut j = self.head(&Channel::Alerts, kind, now_ms)?;
        j.raw(",\"id\":").int(inbox_id).raw(",\"data\":").raw(body).raw("}");
        self.alerts_after = Some(inbox_id);
        Some(j.finish())
    }

    /// `{"type":"heartbeat","ts":...}` when nothing was sent for [`HEARTBEAT_MS`].
    pub fn heartbeat(&mut self, now_ms: i64) -> Option<String> {
        if now_ms - self.last_sent_ms < HEARTBEAT_MS {
            return None;
        }
        self.last_sent_ms = now_ms;
        Some(format!("{{\"type\":\"heartbeat\",\"ts\":{now_ms}}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::Venue;

    fn btc() -> Channel {
        Channel::Price { venue: Venue::Binance, symbol: "BTCUSDT".into() }
    }

    fn json(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("valid JSON")
    }

    #[test]
    fn a_price_channel_sends_a_snapshot_then_changes_with_seq_rising_by_one() {
        let mut s = Session::new(0);
        assert_eq!(s.subscribe(&[btc(), btc()], None).expect("fits"), [btc()]);
        let first = json(&s.price(&btc(), 6_512_345_000_000, 10, 20).expect("snapshot"));
        assert_eq!(
            (first["channel"].as_str(), first["type"].as_str(), first["seq"].as_u64()),
            (Some("price:binance:BTCUSDT"), Some("snapshot"), Some(1))
        );
        assert_eq!(
            (first["data"]["price"].as_f64(), first["data"]["ts"].as_i64(), first["ts"].as_i64()),
            (Some(65_123.45), Some(10), Some(20))
        );
        assert_eq!(s.price(&btc(), 6_512_345_000_000, 10, 120), None, "nothing changed");
        assert_eq!(s.price(&btc(), 6_512_346_000_000, 11, 119), None, "within 100 ms of the last");
        let next = json(&s.price(&btc(), 6_512_346_000_000, 11, 220).expect("a change"));
        assert_eq!((next["type"].as_str(), next["seq"].as_u64()), (Some("price"), Some(2)));
        s.unsubscribe(&[btc()]);
        assert_eq!(s.price(&btc(), 1, 12, 300), None, "not subscribed");
        s.subscribe(&[btc()], None).expect("again");
        let again = json(&s.price(&btc(), 1, 12, 300).expect("snapshot"));
        assert_eq!((again["type"].as_str(), again["seq"].as_u64()), (Some("snapshot"), Some(1)));
        let none = json(&s.price(&btc(), 0, 13, 400).expect("no price"));
        assert!(none["data"]["price"].is_null());
    }

    #[test]
    fn alerts_move_their_cursor_and_carry_the_body() {
        let mut s = Session::new(0);
        assert_eq!(s.alert_entry(5, "alert.triggered", "{}", 1), None, "not subscribed");
        s.subscribe(&[Channel::Alerts], None).expect("fits");
        assert_eq!(s.alerts_after(), None, "not started");
        s.start_alerts(4);
        let m = json(&s.alert_entry(5, "alert.triggered", "{\"event\":\"alert.triggered\"}", 9).expect("sent"));
        assert_eq!(
            (m["channel"].as_str(), m["type"].as_str(), m["seq"].as_u64(), m["id"].as_i64()),
            (Some("alerts"), Some("alert.triggered"), Some(1), Some(5))
        );
        assert_eq!(m["data"]["event"], "alert.triggered");
        assert_eq!(s.alerts_after(), Some(5));
        s.unsubscribe(&[Channel::Alerts]);
        assert_eq!(s.alerts_after(), None);
    }

    #[test]
    fn subscriptions_are_bounded_and_refused_whole() {
        let mut s = Session::new(0);
        let names: Vec<Channel> =
            (0..SUBSCRIPTIONS_MAX).map(|i| Channel::Price { venue: Venue::Okx, symbol: format!("P{i}") }).collect();
        s.subscribe(&names, None).expect("exactly the bound");
        s.subscribe(&names[..3], None).expect("held already: nothing new");
        let e = s.subscribe(&[Channel::Alerts, btc()], None).expect_err("past the bound");
        assert_eq!(e, TooManySubscriptions { held: SUBSCRIPTIONS_MAX, asked: 2 });
        assert!(e.to_string().contains("max 500"), "{e}");
        assert_eq!(s.alerts_after(), None);
        assert_eq!(s.price_channels().count(), SUBSCRIPTIONS_MAX);
    }

    #[test]
    fn the_eleventh_error_in_a_minute_closes() {
        let mut s = Session::new(0);
        for i in 0..ERRORS_PER_MINUTE_MAX as i64 {
            let r = s.error(Some(1), "bad \"op\"", i * 1_000);
            assert!(!r.close);
            assert_eq!(json(&r.frame)["error"], "bad \"op\"");
        }
        assert!(s.error(None, "one more", 30_000).close);
        let mut later = Session::new(0);
        for i in 0..=ERRORS_PER_MINUTE_MAX as i64 {
            assert!(!later.error(None, "spread out", i * 7_000).close, "at most ten in any minute");
        }
    }

    #[test]
    fn a_board_channel_sends_each_build_once() {
        let mut s = Session::new(0);
        let okx = Channel::Board { venue: Venue::Okx };
        s.subscribe(std::slice::from_ref(&okx), None).expect("fits");
        let numbers = [Numbers { pairs: 3, advancing: 2, ..Numbers::default() }; 6];
        let first = json(&s.board(&okx, 1_000, &numbers, 1_010).expect("snapshot"));
        assert_eq!(
            (first["channel"].as_str(), first["type"].as_str(), first["seq"].as_u64()),
            (Some("board:okx"), Some("snapshot"), Some(1))
        );
        assert_eq!(
            (first["data"]["ts"].as_i64(), first["data"]["intervals"]["1h"]["advancing"].as_u64()),
            (Some(1_000), Some(2))
        );
        assert_eq!(first["data"]["intervals"].as_object().map(|o| o.len()), Some(6));
        assert_eq!(s.board(&okx, 1_000, &numbers, 1_500), None, "the same build");
        let next = json(&s.board(&okx, 2_000, &numbers, 2_010).expect("the next build"));
        assert_eq!((next["type"].as_str(), next["seq"].as_u64()), (Some("board"), Some(2)));
    }

    #[test]
    fn heartbeats_follow_a_second_of_silence() {
        let mut s = Session::new(0);
        assert_eq!(s.heartbeat(999), None);
        assert_eq!(json(&s.heartbeat(1_000).expect("due"))["type"], "heartbeat");
        assert_eq!(s.heartbeat(1_500), None);
        s.ack(1, 1_900);
        assert_eq!(s.heartbeat(2_500), None, "the ack was a message");
        assert!(s.heartbeat(2_900).is_some());
    }
}
