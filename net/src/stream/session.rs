//! One stream connection's state apart from its socket (sans-I/O; time is an argument): its
//! subscriptions, each channel's `seq`, the board build last sent, the `alerts` cursor, the
//! error answers of the last minute and when anything was last sent (for heartbeats). It wraps
//! the fan-out's shared `data` (`super::fanout`) and its own board and inbox entries in the exact
//! text frames of `decisions.md` §12; the front's connection task only moves them.

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use rampart_state::board::Numbers;
use rampart_state::json::Json;
use rampart_state::market_json::write_board_numbers;

use super::fanout::Target;
use super::ops::Channel;

/// Subscriptions one connection holds at most unless configured (`Bounds::subscriptions_max`); a
/// subscribe past it is refused whole.
pub const SUBSCRIPTIONS_MAX: usize = 500;
/// Error answers in any minute after which the connection is closed (1008).
pub const ERRORS_PER_MINUTE_MAX: usize = 10;
/// A heartbeat follows this long without any other message.
pub const HEARTBEAT_MS: i64 = 1_000;
/// Inbox entries sent on an `alerts` subscribe with `since`, at most (the oldest first).
pub const BACKLOG_MAX: u32 = 1_000;

/// A subscription: its target (shared with the fan-out), its channel's `seq` so far and the
/// board build last sent.
#[derive(Debug)]
struct Sub {
    target: Rc<Target>,
    seq: u64,
    board_ts: i64,
}

/// What a connection has asked for and been sent.
#[derive(Debug)]
pub struct Session {
    subs: BTreeMap<Channel, Sub>,
    errors: VecDeque<i64>,
    last_sent_ms: i64,
    alerts_after: Option<i64>,
    subscriptions_max: usize,
}

/// A subscribe that would pass the connection's subscriptions bound: refused whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManySubscriptions {
    /// Subscriptions the connection holds.
    pub held: usize,
    /// New ones the subscribe asked for.
    pub asked: usize,
    /// The bound.
    pub max: usize,
}

impl std::fmt::Display for TooManySubscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "too many subscriptions: {} held, {} more asked (max {} per connection)",
            self.held, self.asked, self.max
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
    /// A connection opened at `now_ms`, subscribed to nothing, holding `subscriptions_max` at most.
    pub fn new(now_ms: i64, subscriptions_max: usize) -> Session {
        Session {
            subs: BTreeMap::new(),
            errors: VecDeque::new(),
            last_sent_ms: now_ms,
            alerts_after: None,
            subscriptions_max,
        }
    }

    /// Adds `channels` (those held already stay as they are, `minUsd` too); the subscriptions
    /// new to this connection, which each get their first message. Refused whole past
    /// the connection's bound.
    pub fn subscribe(
        &mut self,
        channels: &[Channel],
        min_usd: Option<f64>,
    ) -> Result<Vec<Rc<Target>>, TooManySubscriptions> {
        let mut fresh: Vec<&Channel> = Vec::with_capacity(channels.len());
        for c in channels {
            if !self.subs.contains_key(c) && !fresh.contains(&c) {
                fresh.push(c);
            }
        }
        if self.subs.len() + fresh.len() > self.subscriptions_max {
            let max = self.subscriptions_max;
            return Err(TooManySubscriptions { held: self.subs.len(), asked: fresh.len(), max });
        }
        let targets: Vec<Rc<Target>> = fresh
            .into_iter()
            .map(|c| {
                let min_usd = min_usd.filter(|_| c.takes_min_usd());
                Rc::new(Target { channel: c.clone(), min_usd })
            })
            .collect();
        for t in &targets {
            self.subs.insert(t.channel.clone(), Sub { target: t.clone(), seq: 0, board_ts: 0 });
        }
        Ok(targets)
    }

    /// Removes `channels` (one not held is no error), returning the subscriptions ended; a
    /// channel subscribed again starts at `seq` 1 with a new first message.
    pub fn unsubscribe(&mut self, channels: &[Channel]) -> Vec<Rc<Target>> {
        let mut ended = Vec::new();
        for c in channels {
            if let Some(sub) = self.subs.remove(c) {
                ended.push(sub.target);
            }
            if *c == Channel::Alerts {
                self.alerts_after = None;
            }
        }
        ended
    }

    /// A market channel's message around the fan-out's `data`; `None` when `target` is no
    /// longer this connection's subscription (unsubscribed since it was queued).
    pub fn message(&mut self, target: &Rc<Target>, kind: &str, data: &str, now_ms: i64) -> Option<String> {
        if !self.subs.get(&target.channel).is_some_and(|s| Rc::ptr_eq(&s.target, target)) {
            return None;
        }
        let mut j = self.head(&target.channel, kind, now_ms)?;
        j.raw(",\"data\":").raw(data).raw("}");
        Some(j.finish())
    }

    /// Subscriptions held.
    pub fn subscriptions(&self) -> usize {
        self.subs.len()
    }

    /// The board channels held.
    pub fn board_channels(&self) -> Vec<Channel> {
        // The board channels sort together (after every market channel): a range, not a walk of
        // every subscription at every tick.
        let (first, last) =
            (rampart_engine::Venue::ALL[0], rampart_engine::Venue::ALL[rampart_engine::Venue::COUNT - 1]);
        let boards = Channel::Board { venue: first }..=Channel::Board { venue: last };
        self.subs.range(boards).map(|(c, _)| c.clone()).collect()
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
        let mut j = Json::with_capacity(160 + 32);
        j.raw("{\"channel\":").str(&channel.name()).raw(",\"type\":").str(kind);
        j.raw(",\"seq\":").int(sub.seq as i64).raw(",\"ts\":").int(now_ms);
        Some(j)
    }

    /// An inbox entry of the account as the `alerts` channel's next message (`type` its kind,
    /// `id` the entry's inbox id to resume after, `data` its body: the webhook's for a firing);
    /// moves the cursor past it. `None` when not subscribed, or sent already (at or below the
    /// cursor).
    pub fn alert_entry(&mut self, inbox_id: i64, kind: &str, body: &str, now_ms: i64) -> Option<String> {
        // An entry at or below the cursor was sent already (read from storage and handed by the
        // inbox reader both).
        if inbox_id <= self.alerts_after()? {
            return None;
        }
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
    fn messages_wrap_shared_data_with_seq_rising_by_one_per_subscription() {
        let mut s = Session::new(0, SUBSCRIPTIONS_MAX);
        let t = s.subscribe(&[btc(), btc()], None).expect("fits");
        assert_eq!(t.len(), 1, "one subscription for a channel named twice");
        let first = json(&s.message(&t[0], "snapshot", "{\"price\":1.5,\"ts\":10}", 20).expect("held"));
        assert_eq!(
            (first["channel"].as_str(), first["type"].as_str(), first["seq"].as_u64()),
            (Some("price:binance:BTCUSDT"), Some("snapshot"), Some(1))
        );
        assert_eq!((first["data"]["price"].as_f64(), first["ts"].as_i64()), (Some(1.5), Some(20)));
        let next = json(&s.message(&t[0], "price", "{}", 120).expect("held"));
        assert_eq!((next["type"].as_str(), next["seq"].as_u64()), (Some("price"), Some(2)));
        assert_eq!(s.unsubscribe(&[btc()]).len(), 1);
        assert_eq!(s.message(&t[0], "price", "{}", 130), None, "not subscribed");
        let again = s.subscribe(&[btc()], None).expect("again");
        assert_eq!(s.message(&t[0], "price", "{}", 140), None, "queued for the old subscription");
        let m = json(&s.message(&again[0], "snapshot", "{}", 150).expect("held"));
        assert_eq!((m["type"].as_str(), m["seq"].as_u64()), (Some("snapshot"), Some(1)));
        let walls = Channel::Walls { venue: Venue::Okx, symbol: None };
        let w = s.subscribe(&[walls, btc()], Some(1e6)).expect("fits");
        assert_eq!((w.len(), w[0].min_usd), (1, Some(1e6)), "minUsd kept for walls only");
    }

    #[test]
    fn alerts_move_their_cursor_and_carry_the_body() {
        let mut s = Session::new(0, SUBSCRIPTIONS_MAX);
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
        assert_eq!(s.alert_entry(5, "alert.triggered", "{}", 10), None, "sent already");
        assert_eq!(s.alert_entry(3, "alert.triggered", "{}", 10), None, "below the cursor");
        s.unsubscribe(&[Channel::Alerts]);
        assert_eq!(s.alerts_after(), None);
    }

    #[test]
    fn subscriptions_are_bounded_and_refused_whole() {
        let mut s = Session::new(0, SUBSCRIPTIONS_MAX);
        let names: Vec<Channel> =
            (0..SUBSCRIPTIONS_MAX).map(|i| Channel::Price { venue: Venue::Okx, symbol: format!("P{i}") }).collect();
        s.subscribe(&names, None).expect("exactly the bound");
        s.subscribe(&names[..3], None).expect("held already: nothing new");
        let e = s.subscribe(&[Channel::Alerts, btc()], None).expect_err("past the bound");
        assert_eq!(e, TooManySubscriptions { held: SUBSCRIPTIONS_MAX, asked: 2, max: SUBSCRIPTIONS_MAX });
        assert!(e.to_string().contains("max 500"), "{e}");
        assert_eq!(s.alerts_after(), None);
        assert_eq!(s.subscriptions(), SUBSCRIPTIONS_MAX);
    }

    #[test]
    fn the_eleventh_error_in_a_minute_closes() {
        let mut s = Session::new(0, SUBSCRIPTIONS_MAX);
        for i in 0..ERRORS_PER_MINUTE_MAX as i64 {
            let r = s.error(Some(1), "bad \"op\"", i * 1_000);
            assert!(!r.close);
            assert_eq!(json(&r.frame)["error"], "bad \"op\"");
        }
        assert!(s.error(None, "one more", 30_000).close);
        let mut later = Session::new(0, SUBSCRIPTIONS_MAX);
        for i in 0..=ERRORS_PER_MINUTE_MAX as i64 {
            assert!(!later.error(None, "spread out", i * 7_000).close, "at most ten in any minute");
        }
    }

    #[test]
    fn a_board_channel_sends_each_build_once() {
        let mut s = Session::new(0, SUBSCRIPTIONS_MAX);
        let okx = Channel::Board { venue: Venue::Okx };
        let bitget = Channel::Board { venue: Venue::Bitget };
        let others = [btc(), Channel::Alerts, Channel::Walls { venue: Venue::Bitget, symbol: None }];
        s.subscribe(&[others.as_slice(), &[okx.clone(), bitget.clone()]].concat(), None).expect("fits");
        assert_eq!(s.board_channels(), [okx.clone(), bitget], "the board channels, in venue order");
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
        let mut s = Session::new(0, SUBSCRIPTIONS_MAX);
        assert_eq!(s.heartbeat(999), None);
        assert_eq!(json(&s.heartbeat(1_000).expect("due"))["type"], "heartbeat");
        assert_eq!(s.heartbeat(1_500), None);
        s.ack(1, 1_900);
        assert_eq!(s.heartbeat(2_500), None, "the ack was a message");
        assert!(s.heartbeat(2_900).is_some());
    }
}
