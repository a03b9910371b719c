//! Market alerts, evaluated where the board is built (the board thread): after each complete
//! build every alert reads its venue's number over its interval. An alert takes its starting
//! side from the first board it sees (one created past its threshold waits for the number to
//! come back, `rampart_engine::site_alert::MarketAlert`). Firings go to the persistence
//! writer on this thread's own event queue, numbered like a shard's.
//!
//! Bound: the alerts held are the active market alerts (plan caps). While the writer's queue
//! is full (storage failing for long) firings wait in a backlog, in order, that grows by at most
//! one firing per repeating alert per two builds (a firing needs a crossing back first); the
//! board is still built and published meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rampart_engine::site_alert::{MarketAlert, MarketOutcome};
use rampart_engine::{Timeframe, Venue};

use rampart_state::board::BoardNumber;
use rampart_state::board::{Board, Numbers};
use rampart_state::site_alerts::SiteAlertSet;
use rampart_state::{EventQueue, EventSender, ShardEvent};

/// The number `n` of a venue's board numbers; NaN while it has none (a perpetuals' sum or mean
/// no pair has a value for: an alert neither fires nor takes its side from it).
pub fn value(numbers: &Numbers, n: BoardNumber) -> f64 {
    let perp = &numbers.perp;
    match n {
        BoardNumber::Sentiment => numbers.sentiment,
        BoardNumber::Advancing => f64::from(numbers.advancing),
        BoardNumber::Declining => f64::from(numbers.declining),
        BoardNumber::Up5 => f64::from(numbers.up5),
        BoardNumber::Down5 => f64::from(numbers.down5),
        BoardNumber::Walls => f64::from(numbers.walls),
        BoardNumber::AtLevel => f64::from(numbers.at_level),
        BoardNumber::Perps => f64::from(perp.perps),
        BoardNumber::LiqLongUsd => perp.liq_long_usd.unwrap_or(f64::NAN),
        BoardNumber::LiqShortUsd => perp.liq_short_usd.unwrap_or(f64::NAN),
        BoardNumber::OiUsd => perp.oi_usd.unwrap_or(f64::NAN),
        BoardNumber::OiChange => perp.oi_change.unwrap_or(f64::NAN),
        BoardNumber::Funding => perp.funding.unwrap_or(f64::NAN),
        BoardNumber::FundingHigh => f64::from(perp.funding_high),
        BoardNumber::FundingLow => f64::from(perp.funding_low),
    }
}

struct Watched {
    venue: Venue,
    number: BoardNumber,
    interval: Timeframe,
    alert: MarketAlert,
}

/// The market alerts and the queue their firings leave on.
pub struct MarketAlerts {
    version: i64,
    alerts: Vec<Watched>,
    events: EventSender,
    /// Evaluates only while set (see [`MarketAlerts::with_gate`]).
    gate: Option<Arc<AtomicBool>>,
}

impl MarketAlerts {
    /// None yet; firings will go to `events` (drained by the writer).
    pub fn new(events: Arc<EventQueue>) -> MarketAlerts {
        MarketAlerts { version: 0, alerts: Vec::new(), events: EventSender::new(events, 0), gate: None }
    }

    /// Evaluates only while `gate` is set: a cluster's api nodes build the same board, and only
    /// the one holding the market-alerts lock may fire. While the gate is down no alert state is
    /// kept, so a node that takes over starts each alert from the first board it sees (a crossing
    /// during the hand-over is not fired; none is fired twice).
    pub fn with_gate(mut self, gate: Arc<AtomicBool>) -> MarketAlerts {
        self.gate = Some(gate);
        self
    }

    /// Alerts held.
    pub fn len(&self) -> usize {
        self.alerts.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.alerts.is_empty()
    }

    /// Takes the newest `set`, then runs a complete `board` through every alert.
    pub fn run(&mut self, set: &SiteAlertSet, board: &Board) {
        self.events.flush();
        if self.gate.as_ref().is_some_and(|g| !g.load(Ordering::Acquire)) {
            self.alerts.clear();
            self.version = -1;
            return;
        }
        if !board.complete {
            return;
        }
        self.sync(set, board);
        let mut fired = false;
        for w in &mut self.alerts {
            let v = value(&board.venue(w.venue).numbers[w.interval.index()], w.number);
            if let MarketOutcome::Fired { last } = w.alert.on_value(v) {
                let event = ShardEvent::MarketFired { id: w.alert.spec().id, value: v, ts_ms: board.ts_ms, last };
                self.events.enqueue(event);
                fired = true;
            }
        }
        if fired {
            self.events.wake();
        }
    }

    /// Alerts still in `set` keep their state; new ones start from `board`'s value.
    fn sync(&mut self, set: &SiteAlertSet, board: &Board) {
        if set.version == self.version {
            return;
        }
        let mut old = std::mem::take(&mut self.alerts);
        for e in &set.market {
            let same = |w: &Watched| {
                w.alert.spec() == &e.spec && (w.venue, w.number, w.interval) == (e.venue, e.number, e.interval)
            };
            let alert = match old.iter().position(same) {
                Some(i) => old.swap_remove(i).alert,
                None => MarketAlert::new(e.spec, value(&board.venue(e.venue).numbers[e.interval.index()], e.number)),
            };
            self.alerts.push(Watched { venue: e.venue, number: e.number, interval: e.interval, alert });
        }
        self.version = set.version;
    }
}
