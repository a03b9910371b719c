//! Live-feed ingest capacity of one shard core: WebSocket frames of Binance depth diffs and
//! trades, mixed as on the venue, through the codec, the venue session (decode, book sync), the
//! books and the alert check of `Market::apply`, as fast as one core goes, with alerts held.
//!
//! This is the per-core ceiling of the tick path without the socket; the end-to-end rate the
//! service sustains over loopback is measured by the harness (`rampart-harness burst`).

use std::time::Instant;

use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
use rampart_engine::book::Book;
use rampart_engine::level::{Formation, Level, Origin};
use rampart_engine::level_alert::{LevelCondition, LevelDirection, LevelEvent, TIMEFRAMES_ALL};
use rampart_engine::sim::Rng;
use rampart_engine::site_alert::WallSide;
use rampart_engine::wall_alert::{WallCondition, WallEvent};
use rampart_engine::{BookId, Market, Price, Tick, Timeframe, Venue};
use rampart_venue::session::{Count, Session, Sink};
use rampart_venue::ws::{Event, WsCodec};

use crate::{histogram, Summary};

struct MarketSink {
    market: Market,
    breaks: u64,
    messages: u64,
}

impl Sink for MarketSink {
    fn book(&mut self, id: BookId) -> Option<&mut Book> {
        self.market.get_mut(id).map(|s| &mut s.book)
    }
    fn set_live(&mut self, _id: BookId, _live: bool) {}
    fn trade(&mut self, tick: &Tick) {
        self.market.apply(tick);
        self.market.clear_firings();
    }
    fn decided(&mut self, _sent_us: i64) {}
    fn count(&mut self, _venue: Venue, what: Count) {
        match what {
            Count::Message => self.messages += 1,
            Count::Gap | Count::Crossed | Count::DecodeError | Count::StaleSnapshot => self.breaks += 1,
            _ => {}
        }
    }
}

/// Server frames for `messages` messages over `pairs` Binance pairs: two depth diffs (one to
/// three levels each, within 50 ticks of the touch, a quarter of them removals) for every trade,
/// contiguous update ids per pair, prices in bands so books never cross.
fn frames(pairs: usize, messages: usize, rng: &mut Rng) -> (Vec<u8>, Vec<usize>) {
    let mut wire = Vec::with_capacity(messages * 200);
    let mut ends = Vec::with_capacity(messages);
    let mut ids = vec![0u64; pairs];
    for k in 0..messages {
        let p = rng.below(pairs as u64) as usize;
        let payload = if k % 3 == 2 {
            let px = 99_950 + rng.below(100);
            format!(
                r#"{{"stream":"p{p}usdt@trade","data":{{"e":"trade","E":1,"s":"P{p}USDT","t":{k},"p":"{}.{:02}","q":"0.25","T":1,"m":{},"M":true}}}}"#,
                px / 100,
                px % 100,
                rng.chance(0.5)
            )
        } else {
            ids[p] += 1;
            let u = ids[p];
            let mut bids = String::new();
            let mut asks = String::new();
            for i in 0..1 + rng.below(3) {
                if i > 0 {
                    bids.push(',');
                    asks.push(',');
                }
                // Near the touch, as most diff levels are: 50 ticks deep, a quarter removals.
                let size =
                    |rng: &mut Rng| if rng.chance(0.25) { "0".to_owned() } else { format!("{}.5", rng.below(50)) };
                let b = 99_900 - rng.below(50);
                let a = 100_100 + rng.below(50);
                bids.push_str(&format!(r#"["{}.{:02}","{}"]"#, b / 100, b % 100, size(rng)));
                asks.push_str(&format!(r#"["{}.{:02}","{}"]"#, a / 100, a % 100, size(rng)));
            }
            format!(
                r#"{{"stream":"p{p}usdt@depth@100ms","data":{{"e":"depthUpdate","E":1,"s":"P{p}USDT","U":{u},"u":{u},"b":[{bids}],"a":[{asks}]}}}}"#
            )
        };
        let b = payload.as_bytes();
        wire.push(0x81);
        if b.len() < 126 {
            wire.push(b.len() as u8);
        } else {
            wire.push(126);
            wire.extend_from_slice(&(b.len() as u16).to_be_bytes());
        }
        wire.extend_from_slice(b);
        ends.push(wire.len());
    }
    (wire, ends)
}

/// Feeds `messages` mixed messages over `pairs` Binance books (with `alerts` price alerts held
/// that never fire) through the live path on this thread. Returns the per-message latency
/// (timed one frame at a time) with the throughput of an untimed pass as the rate.
pub fn live_ingest(pairs: usize, messages: usize, alerts: usize) -> Summary {
    live_ingest_with_levels(pairs, messages, alerts, 0, 0)
}

/// Sixteen levels per book, 1 % to 8 % above and below the trades (999.50 to 1000.49), strength
/// 1 to 3, timeframes spread: what a recompute would leave, none within reach of the trades.
fn synthetic_levels() -> Vec<Level> {
    (1..=8i64)
        .flat_map(|k| {
            let origin = Origin::ALL[k as usize % Origin::ALL.len()];
            let at = |pct: i64, side| Level {
                price: Price::from_f64(1_000.0 * (100 + pct) as f64 / 100.0),
                side,
                origin,
                time_ms: 0,
                strength: 1 + (k % 3) as u32,
            };
            [at(k, Formation::High), at(-k, Formation::Low)]
        })
        .collect()
}

/// [`live_ingest`] with `level_alerts` level alerts more, of every event and side, spread over the
/// books, each book holding the `synthetic_levels` (issue #48: ingest with 100 000 level alerts
/// within 5 % of the figure without them). The alerts wait: none of their thresholds is reached,
/// as for most alerts most of the time.
///
/// With `universe_alerts`, that many `*` alerts more (`decisions.md` §15), each on every book
/// as the shard puts it there: a third each pct (a move no trade reaches), level (as above) and
/// wall (decided on the scan, so held but not evaluated per trade).
pub fn live_ingest_with_levels(
    pairs: usize,
    messages: usize,
    alerts: usize,
    level_alerts: usize,
    universe_alerts: usize,
) -> Summary {
    let books: Vec<BookId> = (0..pairs as u32).map(BookId).collect();
    let mut market = Market::new(pairs, &books, 1_000, 64);
    let levels = synthetic_levels();
    for &b in &books {
        if let Some(state) = market.get_mut(b) {
            state.alerts.on_levels(&levels, Price::from_f64(1_000.0));
        }
    }
    let events = [LevelEvent::Approach, LevelEvent::Touch, LevelEvent::Break];
    let directions = [LevelDirection::Above, LevelDirection::Below, LevelDirection::Any];
    for i in 0..level_alerts as u64 {
        let book = books[(i % pairs as u64) as usize];
        let event = events[(i % 3) as usize];
        let c = LevelCondition {
            event,
            direction: directions[(i / 3 % 3) as usize],
            within_millionths: if event == LevelEvent::Approach { 500_000 } else { 0 },
            min_strength: 1,
            timeframes: TIMEFRAMES_ALL,
        };
        let id = 10_000_000 + i;
        market.insert_alert(book, AlertSpec { id, condition: Condition::Level(c), repeat: true, cooldown_s: 0 });
    }
    for i in 0..universe_alerts as u64 {
        let spec = AlertSpec { id: 20_000_000 + i, condition: universe_condition(i), repeat: true, cooldown_s: 900 };
        for &book in &books {
            market.insert_alert(book, spec);
        }
    }
    for i in 0..alerts as u64 {
        let book = books[(i % pairs as u64) as usize];
        let (cross, level) = if i % 2 == 0 { (Cross::Above, 5_000.0 + i as f64) } else { (Cross::Below, 1.0) };
        market.insert_alert(
            book,
            AlertSpec {
                id: i + 1,
                condition: Condition::Price { cross, level: Price::from_f64(level) },
                repeat: false,
                cooldown_s: 0,
            },
        );
    }
    let mut sink = MarketSink { market, breaks: 0, messages: 0 };
    let natives: Vec<String> = (0..pairs).map(|p| format!("P{p}USDT")).collect();
    let mut session = Session::new(Venue::Binance, books.clone(), natives, true);
    session.handle_connected(0, &mut sink);
    for &b in &books {
        session.handle_snapshot(
            b,
            br#"{"lastUpdateId":0,"bids":[["998.50","3"]],"asks":[["1001.50","3"]]}"#,
            0,
            &mut sink,
        );
    }
    let mut rng = Rng::new(7);
    let mut codec = WsCodec::new(1 << 20, 3);
    let feed = |codec: &mut WsCodec, session: &mut Session, sink: &mut MarketSink, frame: &[u8]| {
        let space = codec.read_space();
        space[..frame.len()].copy_from_slice(frame);
        codec.filled(frame.len());
        while let Ok(Some(ev)) = codec.next_event() {
            if let Event::Text(t) = ev {
                session.handle_text(1, t, sink);
            }
        }
    };
    // One stream (update ids run on), in two halves: untimed for throughput, then timed.
    let (wire, ends) = frames(pairs, 2 * messages, &mut rng);
    let started = Instant::now();
    let mut start = 0;
    for &end in &ends[..messages] {
        feed(&mut codec, &mut session, &mut sink, &wire[start..end]);
        start = end;
    }
    let rate = messages as f64 / started.elapsed().as_secs_f64();
    // Timed pass: one frame at a time (the clock reads add about 20 ns each).
    let mut h = histogram();
    for &end in &ends[messages..] {
        let t = Instant::now();
        feed(&mut codec, &mut session, &mut sink, &wire[start..end]);
        let _ = h.record(t.elapsed().as_nanos() as u64);
        start = end;
    }
    assert_eq!(sink.breaks, 0, "a clean stream breaks no book");
    assert_eq!(sink.messages as usize, 2 * messages, "every message applied");
    let mut held = if level_alerts > 0 { format!(" + {level_alerts} level alerts") } else { String::new() };
    if universe_alerts > 0 {
        held.push_str(&format!(" + {universe_alerts} * alerts"));
    }
    Summary::from_hist(
        &format!("live ingest: frame→decode→book/alerts ({pairs} pairs, {alerts} alerts{held})"),
        &h,
        Some(rate),
    )
}

/// The condition of the `i`th `*` alert of the ingest figure: pct, level and wall in turn.
fn universe_condition(i: u64) -> Condition {
    match i % 3 {
        0 => Condition::Pct { dir: Move::Any, millionths: 50_000_000, window: Timeframe::ALL[(i / 3 % 6) as usize] },
        1 => Condition::Level(LevelCondition {
            event: [LevelEvent::Approach, LevelEvent::Touch, LevelEvent::Break][(i / 3 % 3) as usize],
            direction: LevelDirection::Any,
            within_millionths: 500_000,
            min_strength: 1,
            timeframes: TIMEFRAMES_ALL,
        }),
        _ => Condition::Wall(WallCondition {
            event: WallEvent::Pulled,
            side: WallSide::Any,
            min_usd_cents: 100_000_000,
            min_ratio_hundredths: 0,
            max_dist_hundredths: 500,
            min_age_s: 0,
        }),
    }
}
