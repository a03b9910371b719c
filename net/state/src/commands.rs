//! The commands other threads send a shard (alerts added and removed, delistings, copies of
//! candles and depth), their answers, and the handle that routes a command to the book's owner.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use rampart_engine::alert::AlertSpec;
use rampart_engine::candle::Candle;
use rampart_engine::{BookId, Venue};

use super::Shared;

/// What a listing refresh changed of one pair's perpetual ([`Command::Perp`]).
#[derive(Clone, Debug, PartialEq)]
pub enum PerpListingChange {
    /// Its perpetual is delisted (confirmed): its derivatives data and alerts leave the pair.
    Delisted,
    /// A perpetual delisted before is listed again: watched afresh from now.
    Relisted,
    /// The pair gained a perpetual it did not have: watched from now, with the venue's `*`
    /// derivatives alerts.
    Added(PerpContract),
}

/// A perpetual contract as its venue's listing gives it, matched onto a spot pair (the venue
/// crate's `PerpPair` without the pair's symbol, which the book names).
#[derive(Clone, Debug, PartialEq)]
pub struct PerpContract {
    /// The venue's contract name (`BTCUSDT`, `BTC-USDT-SWAP`, `1000PEPEUSDT`).
    pub contract: String,
    /// Units of the spot base in one unit of the contract's base.
    pub multiplier: u32,
    /// Base units of one contract in the venue's quantities (OKX `ctVal`; 1 elsewhere).
    pub contract_size: f64,
    /// The funding interval in hours, where the listing gives it.
    pub interval_h: Option<u32>,
}

/// Commands a shard takes from its queue (capacity [`COMMANDS_MAX`]).
#[derive(Debug)]
pub enum Command {
    /// Answer at once with the shard's clock; measures the front→shard→front hop.
    Ping {
        /// Where the answer goes.
        reply: tokio::sync::oneshot::Sender<Pong>,
    },
    /// Bring one alert of a book this shard owns to the state storage gave it (`change`): held
    /// (as created, or resumed) or gone. Storage committed the change first; the shard applies it
    /// only when its version is newer than the last it applied for that alert
    /// ([`AlertChange`]).
    Alert {
        /// The book.
        book: BookId,
        /// The alert's state after a stored change, with that change's version.
        change: AlertChange,
    },
    /// The same for a `*` alert (`decisions.md` §15): on every book of `venue` this shard owns,
    /// and on each it takes later (listed after start, listed again); sent to every shard.
    Universe {
        /// The venue.
        venue: Venue,
        /// The alert's state after a stored change, with that change's version.
        change: AlertChange,
    },
    /// The venue delisted the pair: drop its alerts and report them.
    Delist {
        /// The book.
        book: BookId,
    },
    /// The venue lists a delisted pair again: serve it again (new book, history fetched again).
    Relist {
        /// The book.
        book: BookId,
    },
    /// A book added to the registry after start ([`Shared::grow`]) with its venue's own name:
    /// allocate it, subscribe it and fetch its history.
    AddBook {
        /// The book.
        book: BookId,
        /// The venue's name for it.
        native: String,
    },
    /// The venue's listing changed the pair's perpetual while the spot pair stays
    /// (`decisions.md` §17 "Listings"; the live feed's refresh).
    Perp {
        /// The book.
        book: BookId,
        /// What changed.
        change: PerpListingChange,
    },
    /// Copy the newest `limit` bars of one of a book's rings (oldest first), for
    /// `GET /v1/candles`. An unowned book answers no bar.
    Candles {
        /// The book.
        book: BookId,
        /// The ring.
        tf: rampart_engine::Timeframe,
        /// Bars at most.
        limit: usize,
        /// Where the bars go.
        reply: tokio::sync::oneshot::Sender<Vec<Candle>>,
    },
    /// Copy a book's best `limit` levels per side, for `GET /v1/book`.
    Depth {
        /// The book.
        book: BookId,
        /// Levels per side at most.
        limit: usize,
        /// Where the copy goes.
        reply: tokio::sync::oneshot::Sender<DepthView>,
    },
    /// Copy the 60 slots of one window of a book's perpetual (oldest first), for
    /// `GET /v1/perp/{symbol}/history` (`decisions.md` §17); a book without one answers none.
    PerpHistory {
        /// The book.
        book: BookId,
        /// The window.
        window: rampart_engine::perp_book::PerpInterval,
        /// Where the slots go.
        reply: tokio::sync::oneshot::Sender<Vec<rampart_engine::perp_book::HistorySlot>>,
    },
    /// The trigger object a derivatives alert of `condition` would carry on `book` now, for its
    /// test send (`POST /v1/alerts/{id}/test`); `None` without the value (or a perpetual).
    PerpTrigger {
        /// The book.
        book: BookId,
        /// The alert's condition.
        condition: rampart_engine::perp_alert::PerpCondition,
        /// Where the trigger goes.
        reply: tokio::sync::oneshot::Sender<Option<rampart_engine::firing::PerpTrigger>>,
    },
    /// Stop the shard's loop; the executor then exits.
    Stop,
}

/// One alert's state after a change storage committed, and the version storage gave that
/// change (`alerts.version`, one more at every write of the alert's row). An alert's commands
/// may reach its shard in another order than storage applied them (two front threads, two api
/// nodes, the writer and the front): the shard applies a change only when its version is above
/// the last it applied for that alert, so the state it ends with is the newest stored one
/// whatever the order (`decisions.md` §16, "One order").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlertChange {
    /// The alert's id.
    pub id: u64,
    /// The version of the stored change (1 at creation).
    pub version: u64,
    /// What the shards must hold after it.
    pub state: AlertState,
}

/// What the shards hold of an alert after a stored change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertState {
    /// Evaluated as `spec` says (created, loaded, or changed while running: a held alert keeps
    /// its state and takes the new cooldown).
    Held(AlertSpec),
    /// Evaluated again after a pause (`decisions.md` §16): a price alert past its level waits
    /// for the far side first (`engine::alert::AlertBook::resume`).
    Resumed(AlertSpec),
    /// Not evaluated: paused, ended, expired or deleted.
    Gone,
}

impl AlertChange {
    /// The alert held as `spec` at `version`.
    pub fn held(spec: AlertSpec, version: u64) -> AlertChange {
        AlertChange { id: spec.id, version, state: AlertState::Held(spec) }
    }

    /// The alert `id` gone at `version`.
    pub fn gone(id: u64, version: u64) -> AlertChange {
        AlertChange { id, version, state: AlertState::Gone }
    }

    /// The spec the shards hold after the change; `None` when the alert is gone.
    pub fn spec(&self) -> Option<AlertSpec> {
        match self.state {
            AlertState::Held(spec) | AlertState::Resumed(spec) => Some(spec),
            AlertState::Gone => None,
        }
    }
}

/// A copy of a book's best levels ([`Command::Depth`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DepthView {
    /// When copied, Unix milliseconds.
    pub ts_ms: i64,
    /// Bids, best first.
    pub bids: Vec<rampart_engine::Level>,
    /// Asks, best first.
    pub asks: Vec<rampart_engine::Level>,
    /// False while the book is out of sync with its venue or crossed: its levels are not
    /// served as the market's (metrics and walls leave it out too).
    pub in_sync: bool,
}

/// A shard's answer to [`Command::Ping`].
#[derive(Clone, Copy, Debug)]
pub struct Pong {
    /// Shard index.
    pub shard: usize,
    /// Ticks applied so far.
    pub ticks: u64,
}

/// Capacity of each shard's command queue. At the bound the sender gets its command back
/// (backpressure: the front answers 503 and the client retries).
pub const COMMANDS_MAX: usize = 1024;

/// A handle for sending commands to the shard that owns a book.
#[derive(Clone)]
pub struct Commands {
    queues: Vec<Arc<ArrayQueue<Command>>>,
    shared: Arc<Shared>,
    /// Woken after each command queued, when the queues' reader waits for it (a cluster's
    /// command forwarder); shards poll their queue instead.
    wake: Option<Arc<tokio::sync::Notify>>,
}

impl Commands {
    /// Commands over `queues`, routed by each book's `shard` in `shared`.
    pub fn new(queues: Vec<Arc<ArrayQueue<Command>>>, shared: Arc<Shared>) -> Commands {
        Commands { queues, shared, wake: None }
    }

    /// The same, waking `wake` after each command queued.
    pub fn with_wake(mut self, wake: Arc<tokio::sync::Notify>) -> Commands {
        self.wake = Some(wake);
        self
    }

    /// Queues `cmd` for the shard owning `book`; at the bound the command is handed back.
    pub fn send(&self, book: BookId, cmd: Command) -> Result<(), Command> {
        let shard = self.shared.slots.get(book.index()).map_or(0, |s| s.shard.load(Ordering::Acquire) as usize);
        self.queues[shard].push(cmd)?;
        if let Some(w) = &self.wake {
            w.notify_one();
        }
        Ok(())
    }

    /// Queues `change` of the alert on `symbol` of `venue` for the shards that evaluate it: its
    /// book's, or every shard for a `*` alert ([`crate::partition::UNIVERSE`]). An alert on a
    /// pair not served now needs no command (it is loaded once its venue lists the pair): `Ok`.
    /// At a full queue the command is handed back (for a `*` alert, see [`Commands::broadcast`]).
    pub fn alert(&self, venue: Venue, symbol: &str, change: AlertChange) -> Result<(), Command> {
        if symbol == crate::partition::UNIVERSE {
            return self.broadcast(|| Command::Universe { venue, change });
        }
        match self.shared.registry().find(venue, symbol) {
            Some(book) => self.send(book, Command::Alert { book, change }),
            None => Ok(()),
        }
    }

    /// Queues the command `make` builds on every shard's queue (a `*` alert's). When a queue
    /// has no room none is sent (`Err`): the queues are looked at before sending, and their one
    /// reader only takes from them, so a command that finds room in each is queued in each
    /// unless another sender fills one in between (then it is missing there, the caller is told,
    /// and a remove sent to every queue undoes the rest).
    pub fn broadcast(&self, make: impl Fn() -> Command) -> Result<(), Command> {
        if self.queues.iter().any(|q| q.is_full()) {
            return Err(make());
        }
        for q in &self.queues {
            q.push(make())?;
        }
        if let Some(w) = &self.wake {
            w.notify_one();
        }
        Ok(())
    }
}
