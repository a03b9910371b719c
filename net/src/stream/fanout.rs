//! The stream fan-out (sans-I/O; time is an argument): which connections follow which book's
//! `price`, `levels` and `walls`, one look per book per round at what its shard published, and
//! each change encoded once and handed to every subscriber as the same shared bytes
//! (`decisions.md` §12, issue #34).
//!
//! A change is an [`Item`] in each subscriber's [`Outbox`]: its `data` (the message's `data`
//! object, shared) or a snapshot to take when the item is written. The connection wraps it in
//! its own envelope (channel name, `seq`, `ts`), so `seq` is per connection and channel while the
//! encoding is done once.
//!
//! Bounds: an outbox holds at most `outbox_bytes_max` bytes of events (`Bounds`, from the
//! configuration; [`OUTBOX_BYTES_MAX`] unless configured); the event that would
//! pass it conflates the outbox: every queued event becomes one snapshot marker per channel and
//! book, which is written as that book's newest state (a market channel's client never gets a
//! queue of stale states, and `seq` has no gap). Markers hold no bytes of their own; there is at
//! most one per subscription and book. A written batch drops the events of a channel and book it
//! writes a snapshot of (the snapshot is newer than all of them).

use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use rampart_engine::perp_book::Completeness;
use rampart_engine::{BookId, Venue};
use rampart_state::json::Json;
use rampart_state::liq_feed::LiqFeed;
use rampart_state::market_json::{write_density, write_level, write_levels, write_wall};
use rampart_state::perp::PerpSnapshot;
use rampart_state::shared::{DensitySnapshot, LevelSnapshot};
use rampart_state::wall_history::WallHistory;

use super::ops::Channel;
use super::perp_watch::{self, LiqChange, PerpSeen};
use super::watch::{self, LevelsChange, LevelsSeen, WallEvent, WallsSeen};

/// Bytes of queued events one connection's outbox holds at most unless configured; the event
/// that would pass it conflates the outbox into snapshot markers.
pub const OUTBOX_BYTES_MAX: usize = 1 << 20;
/// A pair's price is handed out at most once per this many milliseconds (the newest then).
pub const PRICE_EVERY_MS: i64 = 100;

/// The book a `liquidations:<venue>:*` subscription's items carry: its snapshot is the venue's
/// (one, not one per pair), so its events and snapshot share one key (a snapshot in a batch
/// supersedes the events before it).
pub const VENUE_WIDE: BookId = BookId(u32::MAX);

/// A connection, as the fan-out knows it.
pub type ConnId = u64;

/// One subscription of a connection: its channel and, for `walls`, its `minUsd`. Shared by the
/// connection's session and the fan-out; an item is written only while its subscription is
/// still the connection's (an unsubscribe drops what was queued for it).
#[derive(Debug, PartialEq)]
pub struct Target {
    /// The channel.
    pub channel: Channel,
    /// `walls` only: the smallest wall in USD.
    pub min_usd: Option<f64>,
}

/// What a connection is handed.
#[derive(Clone, Debug)]
pub enum Item {
    /// A change: the message's `type` and its `data`, encoded once for every subscriber.
    Event {
        /// The subscription.
        target: Rc<Target>,
        /// The book.
        book: BookId,
        /// `price`, `snapshot`, `level.broken`, `wall.appeared`, ...
        kind: &'static str,
        /// The `data` object.
        data: Rc<str>,
    },
    /// The book's newest state, taken when written ([`Fanout::snapshot`]).
    Snapshot {
        /// The subscription.
        target: Rc<Target>,
        /// The book.
        book: BookId,
    },
    /// An inbox entry of the connection's account for `alerts`: never conflated, never dropped.
    Alert {
        /// Its inbox id.
        id: i64,
        /// `alert.triggered`, `alert.delisted`, ...
        kind: Rc<str>,
        /// Its body (the webhook's, for a firing).
        body: Rc<str>,
    },
}

impl Item {
    /// The subscription and book of a market item (`None`: an `alerts` entry).
    fn key(&self) -> Option<(*const Target, BookId)> {
        match self {
            Item::Event { target, book, .. } | Item::Snapshot { target, book } => Some((Rc::as_ptr(target), *book)),
            Item::Alert { .. } => None,
        }
    }
}

/// One connection's queued items.
#[derive(Debug, Default)]
pub struct Outbox {
    items: VecDeque<Item>,
    bytes: usize,
    alert_bytes: usize,
    /// Its `alerts` entries passed the bound: the connection is to be closed 4008.
    overflowed: bool,
    /// Times the outbox was conflated (a slow client).
    pub conflations: u64,
}

impl Outbox {
    /// Queues an event; past `max` bytes the queue is conflated first (then `true`).
    fn push(&mut self, target: &Rc<Target>, book: BookId, kind: &'static str, data: &Rc<str>, max: usize) -> bool {
        let conflate = self.bytes + data.len() > max;
        if conflate {
            self.conflate();
        }
        self.bytes += data.len();
        self.items.push_back(Item::Event { target: target.clone(), book, kind, data: data.clone() });
        debug_assert!(self.bytes <= max.max(data.len()));
        conflate
    }

    /// Queues an `alerts` entry; past `max` bytes of them the outbox is marked overflowed and
    /// takes no more (the connection is closed 4008 at its next write and its client resumes
    /// with `since`, reading them from storage).
    fn push_alert(&mut self, id: i64, kind: &Rc<str>, body: &Rc<str>, max: usize) {
        if self.overflowed {
            return;
        }
        self.alert_bytes += body.len();
        self.overflowed = self.alert_bytes > max;
        self.items.push_back(Item::Alert { id, kind: kind.clone(), body: body.clone() });
    }

    /// Every queued market event becomes one snapshot marker per subscription and book; the
    /// `alerts` entries stay, in their order.
    fn conflate(&mut self) {
        let mut seen = HashSet::new();
        let old = std::mem::take(&mut self.items);
        for item in old {
            match item {
                Item::Alert { .. } => self.items.push_back(item),
                Item::Event { target, book, .. } | Item::Snapshot { target, book } => {
                    if seen.insert((Rc::as_ptr(&target), book)) {
                        self.items.push_back(Item::Snapshot { target, book });
                    }
                }
            }
        }
        self.bytes = 0;
        self.conflations += 1;
    }

    /// Everything queued, oldest first, without the events a snapshot in the batch supersedes.
    fn take(&mut self) -> Vec<Item> {
        let marked: HashSet<_> =
            self.items.iter().filter(|i| matches!(i, Item::Snapshot { .. })).filter_map(Item::key).collect();
        let mut written = HashSet::new();
        let items = std::mem::take(&mut self.items)
            .into_iter()
            .filter(|i| match (i, i.key()) {
                (Item::Event { .. }, Some(k)) => !marked.contains(&k),
                (Item::Snapshot { .. }, Some(k)) => written.insert(k),
                _ => true,
            })
            .collect();
        self.bytes = 0;
        self.alert_bytes = 0;
        items
    }

    /// Items queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The fan-out's figures (`Fanout::figures`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Connections open.
    pub connections: usize,
    /// Bytes of events queued, all outboxes.
    pub queued_bytes: usize,
    /// Outboxes conflated since start.
    pub conflations: u64,
    /// Changes handed to outboxes since start.
    pub handed: u64,
}

/// What a round saw of one book: its published state.
#[derive(Clone, Debug)]
pub struct View<'a> {
    /// Last price (fixed-point; 0: none yet).
    pub price: i64,
    /// Its time, Unix milliseconds.
    pub price_ts: i64,
    /// Highest trade since the levels were computed (`i64::MIN`: none).
    pub high: i64,
    /// Lowest trade since then (`i64::MAX`: none).
    pub low: i64,
    /// The levels as last computed.
    pub levels: Arc<LevelSnapshot>,
    /// The last wall scan.
    pub walls: Arc<DensitySnapshot>,
    /// The wall history, loaded after `walls` (the shard publishes it first): how walls went.
    pub history: Arc<WallHistory>,
    /// Its perpetual as last published (`None`: it has none).
    pub perp: Option<Arc<PerpSnapshot>>,
    /// Its liquidations as its shard takes them (`None`: it never had a perpetual).
    pub liq_feed: Option<&'a LiqFeed>,
}

/// What changes whenever a book publishes anything a stream shows (price and its time, the
/// trade watermarks, the levels' computation time, the wall scan's time, the perpetual's
/// publication time, the newest liquidation's number): a book whose stamp did not move since its
/// last look is not looked at again.
pub type Stamp = [i64; 8];

/// A subscriber of one book.
#[derive(Clone, Debug)]
struct Sub {
    conn: ConnId,
    target: Rc<Target>,
}

/// The walls last handed to the subscribers of one `minUsd`.
#[derive(Debug)]
struct WallsWatch {
    min_usd: Option<f64>,
    seen: Option<WallsSeen>,
    scan: Arc<DensitySnapshot>,
    /// The scan's snapshot `data` as last encoded (its scan time, the bytes).
    snap: Option<(i64, Rc<str>)>,
}

/// One book's subscribers (not those of a `*` channel) and what they were last handed.
#[derive(Debug, Default)]
struct Watch {
    venue: Option<Venue>,
    stamp: Option<Stamp>,
    subs: Vec<Sub>,
    price: Option<(i64, i64)>,
    price_sent_ms: i64,
    last: Option<(i64, i64)>,
    levels: Option<LevelsSeen>,
    /// Moves with every change of `levels` (a snapshot or a break).
    levels_gen: u64,
    walls: Vec<WallsWatch>,
    /// Snapshots' `data` as last encoded, shared by every connection that takes one until the
    /// state moves: the price's (keyed by price and time), the levels' (by `levels_gen` and
    /// price).
    price_snap: Option<((i64, i64), Rc<str>)>,
    levels_snap: Option<((u64, i64), Rc<str>)>,
    /// The pair's name as last looked at (a venue's `liquidations` snapshot names each pair).
    symbol: Option<Rc<str>>,
    /// Its perpetual as last handed (`liquidations`, `perp`).
    perp: PerpSeen,
}

/// Every connection's outbox and every followed book's subscribers.
#[derive(Debug)]
pub struct Fanout {
    outbox_bytes_max: usize,
    outboxes: HashMap<ConnId, Outbox>,
    books: HashMap<BookId, Watch>,
    /// `levels:<venue>:*`, `walls:<venue>:*`, `liquidations:<venue>:*` and `perp:<venue>:*`
    /// subscribers, per venue.
    stars: [Vec<Sub>; Venue::COUNT],
    /// `alerts` subscribers, per account.
    alerts: HashMap<i64, Vec<ConnId>>,
    next_conn: ConnId,
    woken: Vec<ConnId>,
    handed: u64,
    conflations: u64,
}

impl Fanout {
    /// No connection yet; each outbox will hold `outbox_bytes_max` bytes of events at most.
    pub fn new(outbox_bytes_max: usize) -> Fanout {
        assert!(outbox_bytes_max > 0);
        Fanout {
            outbox_bytes_max,
            outboxes: HashMap::new(),
            books: HashMap::new(),
            stars: Default::default(),
            alerts: HashMap::new(),
            next_conn: 0,
            woken: Vec::new(),
            handed: 0,
            conflations: 0,
        }
    }

    /// A new connection's id and empty outbox.
    pub fn open(&mut self) -> ConnId {
        self.next_conn += 1;
        self.outboxes.insert(self.next_conn, Outbox::default());
        self.next_conn
    }

    /// Forgets a connection: its outbox and every subscription.
    pub fn close(&mut self, conn: ConnId) {
        self.outboxes.remove(&conn);
        self.drop_subs(|s| s.conn == conn);
        self.unsubscribe_alerts(conn);
    }

    /// Hands `account`'s new inbox entries to `conn` from now on.
    pub fn subscribe_alerts(&mut self, conn: ConnId, account: i64) {
        let conns = self.alerts.entry(account).or_default();
        if !conns.contains(&conn) {
            conns.push(conn);
        }
    }

    /// Stops handing inbox entries to `conn`.
    pub fn unsubscribe_alerts(&mut self, conn: ConnId) {
        self.alerts.retain(|_, conns| {
            conns.retain(|&c| c != conn);
            !conns.is_empty()
        });
    }

    /// Whether any connection follows `alerts`.
    pub fn wants_alerts(&self) -> bool {
        !self.alerts.is_empty()
    }

    /// Hands a new inbox entry of `account` to each of its `alerts` connections (the same
    /// bytes to each).
    pub fn hand_alert(&mut self, account: i64, id: i64, kind: &Rc<str>, body: &Rc<str>) {
        let Some(conns) = self.alerts.get(&account) else { return };
        for c in conns {
            if let Some(o) = self.outboxes.get_mut(c) {
                o.push_alert(id, kind, body, self.outbox_bytes_max);
                self.woken.push(*c);
            }
        }
    }

    /// Whether `conn`'s unsent `alerts` entries passed the bound (it is to be closed 4008, and
    /// its client resumes with `since`).
    pub fn overflowed(&self, conn: ConnId) -> bool {
        self.outboxes.get(&conn).is_some_and(|o| o.overflowed)
    }

    /// Follows `target` on `books` (a `*` channel: its venue's books, looked at while listed)
    /// and queues a snapshot of each. The caller then looks at each of `books`
    /// ([`Fanout::look`]), so the snapshot has a state to take.
    pub fn subscribe(&mut self, conn: ConnId, target: &Rc<Target>, books: &[BookId]) {
        let Some(outbox) = self.outboxes.get_mut(&conn) else { return };
        let sub = Sub { conn, target: target.clone() };
        match &target.channel {
            Channel::Levels { venue, symbol: None }
            | Channel::Walls { venue, symbol: None }
            | Channel::Liquidations { venue, symbol: None }
            | Channel::Perp { venue, symbol: None } => {
                self.stars[venue.index()].push(sub);
            }
            Channel::Price { .. }
            | Channel::Levels { .. }
            | Channel::Walls { .. }
            | Channel::Liquidations { .. }
            | Channel::Perp { .. } => {
                for &b in books {
                    self.books.entry(b).or_default().subs.push(sub.clone());
                }
            }
            Channel::Board { .. } | Channel::Alerts => return,
        }
        if matches!(target.channel, Channel::Liquidations { symbol: None, .. }) {
            outbox.items.push_back(Item::Snapshot { target: target.clone(), book: VENUE_WIDE });
        }
        for &book in books {
            if !matches!(target.channel, Channel::Liquidations { symbol: None, .. }) {
                outbox.items.push_back(Item::Snapshot { target: target.clone(), book });
            }
            // The next look sets up what the new subscription compares with.
            if let Some(w) = self.books.get_mut(&book) {
                w.stamp = None;
            }
        }
        self.woken.push(conn);
    }

    /// Stops following `target` (its queued items are dropped when written).
    pub fn unsubscribe(&mut self, conn: ConnId, target: &Rc<Target>) {
        self.drop_subs(|s| s.conn == conn && Rc::ptr_eq(&s.target, target));
    }

    /// Drops the subscriptions `gone` picks, then what no subscription needs any more (the
    /// state of a book a look would otherwise compare with later, when it is out of date).
    fn drop_subs(&mut self, gone: impl Fn(&Sub) -> bool) {
        for s in &mut self.stars {
            s.retain(|s| !gone(s));
        }
        let stars = &self.stars;
        self.books.retain(|_, w| {
            w.subs.retain(|s| !gone(s));
            let star = w.venue.map(|v| stars[v.index()].as_slice()).unwrap_or_default();
            let all = || w.subs.iter().chain(star);
            if !all().any(|s| matches!(s.target.channel, Channel::Levels { .. })) {
                w.levels = None;
            }
            let kept: Vec<Option<f64>> =
                all().filter(|s| matches!(s.target.channel, Channel::Walls { .. })).map(|s| s.target.min_usd).collect();
            w.walls.retain(|ww| kept.contains(&ww.min_usd));
            if !all().any(|s| matches!(s.target.channel, Channel::Liquidations { .. } | Channel::Perp { .. })) {
                w.perp = PerpSeen::default();
            }
            !w.subs.is_empty() || !star.is_empty()
        });
    }

    /// The books followed by their own channels (a `*` channel's are the caller's to add: its
    /// venue's listing, [`Fanout::star_venues`]).
    pub fn books(&self, out: &mut Vec<BookId>) {
        out.clear();
        out.extend(self.books.iter().filter(|(_, w)| !w.subs.is_empty()).map(|(b, _)| *b));
    }

    /// The venues some connection follows with a `*` channel.
    pub fn star_venues(&self) -> impl Iterator<Item = Venue> + '_ {
        Venue::ALL.into_iter().filter(|v| !self.stars[v.index()].is_empty())
    }

    /// Whether `book` was looked at with this `stamp` and nothing of that look waits (a price
    /// held back by [`PRICE_EVERY_MS`]).
    pub fn unchanged(&self, book: BookId, stamp: &Stamp) -> bool {
        self.books.get(&book).is_some_and(|w| w.stamp.as_ref() == Some(stamp))
    }

    /// Looks at one book's published state (`stamp`: [`Stamp`] of it): every change since the
    /// last look is encoded once and queued for each subscriber (`symbol`: the pair's name in
    /// `data`).
    pub fn look(&mut self, book: BookId, venue: Venue, symbol: &str, v: &View<'_>, stamp: Stamp, now_ms: i64) {
        let stars = &self.stars[venue.index()];
        let watch = self.books.entry(book).or_default();
        watch.venue = Some(venue);
        if watch.symbol.as_deref() != Some(symbol) {
            watch.symbol = Some(symbol.into());
        }
        let first = watch.last.is_none();
        watch.last = Some((v.price, v.price_ts));
        let mut subs: Vec<&Sub> = watch.subs.iter().collect();
        subs.extend(stars.iter());
        let out = &mut self.outboxes;
        let max = self.outbox_bytes_max;
        let (handed, conflations) = (&mut self.handed, &mut self.conflations);
        // Data `MARK` hands a snapshot marker instead of an event (a look that lost its place).
        let mut hand = |kind: &'static str, data: Rc<str>, want: &dyn Fn(&Target) -> bool| {
            for s in subs.iter().filter(|s| want(&s.target)) {
                let key = if matches!(s.target.channel, Channel::Liquidations { symbol: None, .. }) {
                    VENUE_WIDE
                } else {
                    book
                };
                if let Some(o) = out.get_mut(&s.conn) {
                    if data.is_empty() {
                        o.items.push_back(Item::Snapshot { target: s.target.clone(), book: key });
                    } else {
                        *conflations += u64::from(o.push(&s.target, key, kind, &data, max));
                        *handed += 1;
                    }
                    self.woken.push(s.conn);
                }
            }
        };
        // Prices: at most one per `PRICE_EVERY_MS`, the newest.
        let is_price = |t: &Target| matches!(t.channel, Channel::Price { .. });
        if watch.price != Some((v.price, v.price_ts)) && (first || now_ms - watch.price_sent_ms >= PRICE_EVERY_MS) {
            let sent = !first && watch.price.is_some();
            watch.price = Some((v.price, v.price_ts));
            watch.price_sent_ms = now_ms;
            if sent {
                hand("price", price_data(v.price, v.price_ts).into(), &is_price);
            }
        }
        let is_levels = |t: &Target| matches!(t.channel, Channel::Levels { .. });
        if subs_want(&watch.subs, stars, is_levels) {
            let fresh = watch.levels.is_none();
            let change = watch::look_levels(&mut watch.levels, &v.levels, v.high, v.low);
            watch.levels_gen += u64::from(change.is_some());
            match change {
                Some(LevelsChange::Snapshot(mut levels)) if !fresh => {
                    hand("snapshot", levels_data(symbol, &mut levels, v.price).into(), &is_levels);
                }
                Some(LevelsChange::Broken(levels)) => {
                    for l in &levels {
                        hand("level.broken", broken_data(symbol, l, v).into(), &is_levels);
                    }
                }
                _ => {}
            }
        }
        look_walls(&mut watch.walls, &watch.subs, stars, symbol, v, &mut hand);
        look_perp(&mut watch.perp, &watch.subs, stars, symbol, v, now_ms, &mut hand);
        watch.stamp = (watch.price == Some((v.price, v.price_ts))).then_some(stamp);
    }

    /// The newest state of `book` for `target` as a snapshot's `data` (`None`: not looked at),
    /// encoded once for every connection that takes it before the state moves.
    pub fn snapshot(&mut self, target: &Target, book: BookId, symbol: &str) -> Option<Rc<str>> {
        if book == VENUE_WIDE {
            return self.venue_liquidations(target);
        }
        let w = self.books.get_mut(&book)?;
        let last = w.last?;
        match &target.channel {
            Channel::Price { .. } => Some(cached(&mut w.price_snap, last, || price_data(last.0, last.1))),
            Channel::Levels { .. } => {
                let alive = w.levels.as_ref()?.alive();
                let key = (w.levels_gen, last.0);
                Some(cached(&mut w.levels_snap, key, || levels_data(symbol, &mut alive.to_vec(), last.0)))
            }
            Channel::Walls { .. } => {
                let ww = w.walls.iter_mut().find(|ww| ww.min_usd == target.min_usd)?;
                let scan = ww.scan.clone();
                Some(cached(&mut ww.snap, scan.ts_ms, || walls_data(symbol, &scan, target.min_usd)))
            }
            Channel::Perp { .. } => w.perp.perp_data(),
            Channel::Liquidations { venue, .. } => {
                w.perp.perp_data()?;
                let f = perp_watch::snapshot_filter(target.min_usd);
                let items = f.apply(w.perp.looked_ms(), w.perp.recent()).map(|l| (symbol, l));
                Some(perp_watch::liquidations_snapshot(symbol, Completeness::of(*venue), items).into())
            }
            Channel::Board { .. } | Channel::Alerts => None,
        }
    }

    /// A `liquidations:<venue>:*` snapshot: the newest of the venue's books looked at.
    fn venue_liquidations(&self, target: &Target) -> Option<Rc<str>> {
        let Channel::Liquidations { venue, symbol: None } = &target.channel else { return None };
        let books = self.books.values().filter(|w| w.venue == Some(*venue) && w.perp.perp_data().is_some());
        let now_ms = books.clone().map(|w| w.perp.looked_ms()).max().unwrap_or(0);
        let named = books.filter_map(|w| w.symbol.as_deref().map(|s| (s, &w.perp)));
        let items = perp_watch::venue_newest(named, perp_watch::snapshot_filter(target.min_usd), now_ms);
        Some(perp_watch::liquidations_snapshot("*", Completeness::of(*venue), items.into_iter()).into())
    }

    /// Everything queued for `conn`, oldest first (see [`Outbox`]).
    pub fn take(&mut self, conn: ConnId) -> Vec<Item> {
        self.outboxes.get_mut(&conn).map(Outbox::take).unwrap_or_default()
    }

    /// The connections handed something since the last call (each once).
    pub fn woken(&mut self, out: &mut Vec<ConnId>) {
        out.clear();
        self.woken.sort_unstable();
        self.woken.dedup();
        out.append(&mut self.woken);
    }

    /// Figures for `/metrics`: connections, bytes queued, and since start the conflations and
    /// the changes handed out.
    pub fn figures(&self) -> Figures {
        Figures {
            connections: self.outboxes.len(),
            queued_bytes: self.outboxes.values().map(|o| o.bytes).sum(),
            conflations: self.conflations,
            handed: self.handed,
        }
    }

    /// A connection's outbox (tests and figures).
    pub fn outbox(&self, conn: ConnId) -> Option<&Outbox> {
        self.outboxes.get(&conn)
    }
}

/// The bytes kept under `key`, or `encode()`'s, kept from now on.
fn cached<K: PartialEq + Copy>(slot: &mut Option<(K, Rc<str>)>, key: K, encode: impl FnOnce() -> String) -> Rc<str> {
    match slot {
        Some((k, data)) if *k == key => data.clone(),
        _ => {
            let data: Rc<str> = encode().into();
            *slot = Some((key, data.clone()));
            data
        }
    }
}

fn subs_want(subs: &[Sub], stars: &[Sub], want: impl Fn(&Target) -> bool) -> bool {
    subs.iter().chain(stars).any(|s| want(&s.target))
}

/// `{"price":P|null,"ts":T}`.
fn price_data(price: i64, ts: i64) -> String {
    let mut j = Json::with_capacity(48);
    j.raw("{\"price\":");
    if price > 0 {
        j.fixed(price);
    } else {
        j.raw("null");
    }
    j.raw(",\"ts\":").int(ts).raw("}");
    j.finish()
}

/// `{"symbol","levels":[...]}`.
fn levels_data(symbol: &str, levels: &mut [rampart_engine::level::Level], price: i64) -> String {
    let mut j = Json::with_capacity(64 + 96 * levels.len());
    j.raw("{\"symbol\":").str(symbol).raw(",\"levels\":");
    write_levels(&mut j, levels, price);
    j.raw("}");
    j.finish()
}

/// `{"symbol","level","price","ts"}`.
fn broken_data(symbol: &str, l: &rampart_engine::level::Level, v: &View) -> String {
    let mut j = Json::with_capacity(160);
    j.raw("{\"symbol\":").str(symbol).raw(",\"level\":");
    write_level(&mut j, l, v.price);
    j.raw(",\"price\":").fixed(v.price).raw(",\"ts\":").int(v.price_ts).raw("}");
    j.finish()
}

/// Hands a look's encoded change to the subscribers its target filter wants.
type Hand<'h> = dyn FnMut(&'static str, Rc<str>, &dyn Fn(&Target) -> bool) + 'h;

/// The wall events of one look at a book, once per distinct `minUsd` its subscribers (`subs`,
/// and the venue's `*` ones) ask for, each handed to the subscribers of that `minUsd`.
fn look_walls(walls: &mut Vec<WallsWatch>, subs: &[Sub], stars: &[Sub], symbol: &str, v: &View, hand: &mut Hand<'_>) {
    let mut min_usds: Vec<Option<f64>> = Vec::new();
    for s in subs.iter().chain(stars) {
        if matches!(s.target.channel, Channel::Walls { .. }) && !min_usds.contains(&s.target.min_usd) {
            min_usds.push(s.target.min_usd);
        }
    }
    for m in min_usds {
        let at = match walls.iter().position(|w| w.min_usd == m) {
            Some(i) => i,
            None => {
                walls.push(WallsWatch { min_usd: m, seen: None, scan: v.walls.clone(), snap: None });
                walls.len() - 1
            }
        };
        let ww = &mut walls[at];
        let fresh = ww.seen.is_none();
        let Some(events) = watch::look_walls(&mut ww.seen, &v.walls, &v.history, m) else { continue };
        ww.scan = v.walls.clone();
        if fresh {
            continue;
        }
        let is_walls = |t: &Target| matches!(t.channel, Channel::Walls { .. }) && t.min_usd == m;
        for e in &events {
            let (kind, data) = wall_data(symbol, e);
            hand(kind, data.into(), &is_walls);
        }
    }
}

/// The derivatives of one look at a book, when some subscriber wants them: each liquidation
/// fed since (to the `liquidations` subscribers whose `minUsd` it passes; a look that lost its
/// place hands them a snapshot instead), and the perpetual's values when they changed (`perp`).
fn look_perp(
    seen: &mut PerpSeen,
    subs: &[Sub],
    stars: &[Sub],
    symbol: &str,
    v: &View<'_>,
    now_ms: i64,
    hand: &mut Hand<'_>,
) {
    let is_liq = |t: &Target| matches!(t.channel, Channel::Liquidations { .. });
    let is_perp = |t: &Target| matches!(t.channel, Channel::Perp { .. });
    if subs_want(subs, stars, is_liq) {
        match seen.look_liquidations(v.perp.as_deref(), v.liq_feed, now_ms) {
            LiqChange::Nothing => {}
            LiqChange::Restarted => hand("snapshot", "".into(), &is_liq),
            LiqChange::New(new) => {
                for l in &new {
                    let passes = |t: &Target| is_liq(t) && t.min_usd.is_none_or(|m| l.usd() >= m);
                    hand("liquidation", perp_watch::liquidation_data(symbol, l).into(), &passes);
                }
            }
        }
    }
    if subs_want(subs, stars, is_perp) || subs_want(subs, stars, is_liq) {
        if let Some(data) = seen.look_perp(v.perp.as_ref(), symbol) {
            hand("perp", data, &is_perp);
        }
    }
}

/// `{"symbol","snapshot":{...}}`, the scan's walls that pass `min_usd`.
fn walls_data(symbol: &str, scan: &DensitySnapshot, min_usd: Option<f64>) -> String {
    let kept =
        DensitySnapshot { walls: scan.walls.iter().filter(|w| watch::passes(w, min_usd)).copied().collect(), ..*scan };
    let mut j = Json::with_capacity(96 + 160 * kept.walls.len());
    j.raw("{\"symbol\":").str(symbol).raw(",\"snapshot\":");
    write_density(&mut j, &kept);
    j.raw("}");
    j.finish()
}

/// A wall event's `type` and `{"symbol","wall",["reason","lifetimeS"]}`.
fn wall_data(symbol: &str, e: &WallEvent) -> (&'static str, String) {
    let (kind, w, reason) = match e {
        WallEvent::Appeared(w) => ("wall.appeared", w, None),
        WallEvent::Changed(w) => ("wall.changed", w, None),
        WallEvent::Gone(w, why, life_ms) => ("wall.gone", w, Some((why.as_str(), life_ms))),
    };
    let mut j = Json::with_capacity(200);
    j.raw("{\"symbol\":").str(symbol).raw(",\"wall\":");
    write_wall(&mut j, w);
    if let Some((r, life_ms)) = reason {
        j.raw(",\"reason\":").str(r).raw(",\"lifetimeS\":").int(life_ms / 1000);
    }
    j.raw("}");
    (kind, j.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::level::{Formation, Level, Origin};
    use rampart_engine::wall::Wall;
    use rampart_engine::{Price, Qty, Side};
    use rampart_state::shared::PublishedWall;

    const BOOK: BookId = BookId(7);

    fn target(channel: Channel, min_usd: Option<f64>) -> Rc<Target> {
        Rc::new(Target { channel, min_usd })
    }

    fn levels(symbol: Option<&str>) -> Channel {
        Channel::Levels { venue: Venue::Binance, symbol: symbol.map(str::to_owned) }
    }

    fn view(price: i64, ts: i64, high: i64, walls: Vec<PublishedWall>, scan_ms: i64) -> View<'static> {
        let level = |p, side| Level { price: Price(p), side, origin: Origin::H1, time_ms: 1, strength: 1 };
        View {
            price,
            price_ts: ts,
            high,
            low: i64::MAX,
            levels: Arc::new(LevelSnapshot {
                computed_ms: 60_000,
                levels: vec![level(110, Formation::High), level(90, Formation::Low)],
            }),
            walls: Arc::new(DensitySnapshot { ts_ms: scan_ms, price, walls }),
            history: Arc::new(WallHistory::default()),
            perp: None,
            liq_feed: None,
        }
    }

    fn wall(price: i64, usd: f64) -> PublishedWall {
        let wall = Wall { side: Side::Ask, price: Price(price), qty: Qty(1_000), ratio: 5.0, dist_pct: 1.0, age_ms: 0 };
        PublishedWall { wall, usd: Some(usd) }
    }

    fn kinds(items: &[Item]) -> Vec<&'static str> {
        items
            .iter()
            .map(|i| match i {
                Item::Event { kind, .. } => *kind,
                Item::Snapshot { .. } => "(snapshot)",
                Item::Alert { .. } => "(alert)",
            })
            .collect()
    }

    #[test]
    fn a_change_is_encoded_once_and_shared_by_every_subscriber() {
        let mut f = Fanout::new(OUTBOX_BYTES_MAX);
        let (a, b) = (f.open(), f.open());
        let (ta, tb) = (target(levels(Some("BTCUSDT")), None), target(levels(None), None));
        f.subscribe(a, &ta, &[BOOK]);
        f.subscribe(b, &tb, &[BOOK]);
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(100, 1, i64::MIN, vec![], 0), [0; 8], 10);
        assert_eq!((kinds(&f.take(a)), kinds(&f.take(b))), (vec!["(snapshot)"], vec!["(snapshot)"]));
        let snap = f.snapshot(&ta, BOOK, "BTCUSDT").expect("looked at");
        assert!(snap.contains("\"levels\":[") && snap.contains("BTCUSDT"), "{snap}");
        let again = f.snapshot(&tb, BOOK, "BTCUSDT").expect("looked at");
        assert!(Rc::ptr_eq(&snap, &again), "encoded once while nothing moved");
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(111, 2, 111, vec![], 0), [0; 8], 20);
        let (ia, ib) = (f.take(a), f.take(b));
        let (Some(Item::Event { data: da, kind: "level.broken", .. }), Some(Item::Event { data: db, .. })) =
            (ia.first(), ib.first())
        else {
            panic!("a level.broken for both: {:?} {:?}", kinds(&ia), kinds(&ib));
        };
        assert!(Rc::ptr_eq(da, db), "the same bytes");
        let mut woken = Vec::new();
        f.woken(&mut woken);
        assert_eq!(woken, [a, b]);
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(112, 3, 112, vec![], 0), [0; 8], 30);
        assert!(f.take(a).is_empty(), "broken once");
    }

    #[test]
    fn prices_go_at_most_once_per_100_ms_and_the_newest() {
        let mut f = Fanout::new(OUTBOX_BYTES_MAX);
        let c = f.open();
        let t = target(Channel::Price { venue: Venue::Okx, symbol: "ETHUSDT".into() }, None);
        f.subscribe(c, &t, &[BOOK]);
        f.look(BOOK, Venue::Okx, "ETHUSDT", &view(100, 1, i64::MIN, vec![], 0), [0; 8], 0);
        assert_eq!(kinds(&f.take(c)), ["(snapshot)"]);
        assert!(f.unchanged(BOOK, &[0; 8]), "looked at with this stamp, nothing waits");
        f.look(BOOK, Venue::Okx, "ETHUSDT", &view(101, 2, i64::MIN, vec![], 0), [1; 8], 50);
        assert!(f.take(c).is_empty(), "within 100 ms of the snapshot's look");
        assert!(!f.unchanged(BOOK, &[1; 8]), "a price waits: looked at again");
        let other = f.open();
        f.subscribe(other, &t, &[BOOK]);
        assert!(!f.unchanged(BOOK, &[0; 8]), "a new subscription: looked at again");
        f.look(BOOK, Venue::Okx, "ETHUSDT", &view(102, 3, i64::MIN, vec![], 0), [0; 8], 100);
        let items = f.take(c);
        let Some(Item::Event { kind: "price", data, .. }) = items.first() else { panic!("{:?}", kinds(&items)) };
        assert!(data.contains("\"ts\":3"), "the newest: {data}");
        f.look(BOOK, Venue::Okx, "ETHUSDT", &view(102, 3, i64::MIN, vec![], 0), [0; 8], 300);
        assert!(f.take(c).is_empty(), "nothing new");
    }

    #[test]
    fn walls_are_looked_at_per_min_usd() {
        let mut f = Fanout::new(OUTBOX_BYTES_MAX);
        let (all, big) = (f.open(), f.open());
        let walls = Channel::Walls { venue: Venue::Binance, symbol: Some("BTCUSDT".into()) };
        let (t_all, t_big) = (target(walls.clone(), None), target(walls, Some(1e6)));
        f.subscribe(all, &t_all, &[BOOK]);
        f.subscribe(big, &t_big, &[BOOK]);
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(100, 1, i64::MIN, vec![], 2_000), [0; 8], 0);
        f.take(all);
        f.take(big);
        let scan = vec![wall(120, 5e5), wall(130, 2e6)];
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(100, 1, i64::MIN, scan, 4_000), [0; 8], 10);
        assert_eq!(kinds(&f.take(all)), ["wall.appeared", "wall.appeared"]);
        assert_eq!(kinds(&f.take(big)), ["wall.appeared"]);
        let snap = f.snapshot(&t_big, BOOK, "BTCUSDT").expect("scanned");
        assert!(snap.contains("\"usd\":2000000") && !snap.contains("\"usd\":500000"), "{snap}");
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(100, 1, i64::MIN, vec![], 6_000), [0; 8], 20);
        let gone = f.take(big);
        let Some(Item::Event { kind: "wall.gone", data, .. }) = gone.first() else { panic!("{:?}", kinds(&gone)) };
        assert!(data.contains("\"reason\":\"pulled\",\"lifetimeS\":0}"), "{data}");
    }

    #[test]
    fn a_full_outbox_conflates_into_one_snapshot_per_channel_and_book() {
        let mut f = Fanout::new(OUTBOX_BYTES_MAX);
        let c = f.open();
        let t = target(Channel::Price { venue: Venue::Okx, symbol: "ETHUSDT".into() }, None);
        f.subscribe(c, &t, &[BOOK]);
        let mut now = 0;
        // Each price is ~30 bytes of data: far more than the bound's worth.
        for i in 0..(OUTBOX_BYTES_MAX as i64 / 8) {
            now += PRICE_EVERY_MS;
            f.look(BOOK, Venue::Okx, "ETHUSDT", &view(100 + i, i, i64::MIN, vec![], 0), [0; 8], now);
            let o = f.outbox(c).expect("open");
            assert!(o.bytes <= OUTBOX_BYTES_MAX, "the bound holds");
        }
        assert!(f.outbox(c).expect("open").conflations > 0);
        let items = f.take(c);
        assert_eq!(kinds(&items[..1]), ["(snapshot)"], "a snapshot bridges what was dropped");
        assert!(
            items.iter().all(|i| matches!(i, Item::Snapshot { .. })),
            "the events after the snapshot in the same batch are older than what it will show"
        );
        assert_eq!(items.len(), 1);
        assert!(f.take(c).is_empty());
    }

    #[test]
    fn alerts_entries_go_to_their_account_are_never_conflated_and_overflow_closes() {
        let mut f = Fanout::new(1_000);
        let (mine, theirs, market) = (f.open(), f.open(), f.open());
        f.subscribe_alerts(mine, 1);
        f.subscribe_alerts(theirs, 2);
        let (kind, body): (Rc<str>, Rc<str>) = ("alert.triggered".into(), "{\"x\":1}".into());
        f.hand_alert(1, 10, &kind, &body);
        assert!(f.take(theirs).is_empty(), "another account's entry");
        let t = target(Channel::Price { venue: Venue::Okx, symbol: "ETHUSDT".into() }, None);
        f.subscribe(mine, &t, &[BOOK]);
        f.subscribe(market, &t, &[BOOK]);
        f.look(BOOK, Venue::Okx, "ETHUSDT", &view(100, 1, i64::MIN, vec![], 0), [0; 8], 0);
        // Enough prices to conflate twice: the alert entry stays, in its place.
        for i in 1..200 {
            f.look(BOOK, Venue::Okx, "ETHUSDT", &view(100 + i, i, i64::MIN, vec![], 0), [0; 8], i * 100);
        }
        assert!(f.figures().conflations >= 2);
        assert_eq!(kinds(&f.take(mine)), ["(alert)", "(snapshot)"]);
        assert!(!f.overflowed(mine));
        for id in 11..200 {
            f.hand_alert(1, id, &kind, &body);
        }
        assert!(f.overflowed(mine), "past the bound: closed 4008, resumed with since");
        let taken = f.take(mine);
        assert!((142..=143).contains(&taken.len()), "the entries up to the bound: {}", taken.len());
        f.unsubscribe_alerts(mine);
        f.hand_alert(1, 300, &kind, &body);
        assert!(f.take(mine).is_empty() && f.wants_alerts(), "the other account still follows");
        f.close(theirs);
        assert!(!f.wants_alerts());
    }

    #[test]
    fn unsubscribe_and_close_forget_the_book_state() {
        let mut f = Fanout::new(OUTBOX_BYTES_MAX);
        let c = f.open();
        let t = target(levels(Some("BTCUSDT")), None);
        f.subscribe(c, &t, &[BOOK]);
        f.look(BOOK, Venue::Binance, "BTCUSDT", &view(100, 1, i64::MIN, vec![], 0), [0; 8], 10);
        let mut books = Vec::new();
        f.books(&mut books);
        assert_eq!(books, [BOOK]);
        f.unsubscribe(c, &t);
        f.books(&mut books);
        assert!(books.is_empty());
        assert_eq!(f.snapshot(&t, BOOK, "BTCUSDT"), None, "nothing kept");
        let star = target(levels(None), None);
        f.subscribe(c, &star, &[BOOK]);
        assert_eq!(f.star_venues().collect::<Vec<_>>(), [Venue::Binance]);
        f.close(c);
        assert_eq!(f.star_venues().count(), 0);
        assert!(f.take(c).is_empty() && f.outbox(c).is_none());
    }

    #[test]
    fn liquidations_go_once_past_min_usd_and_a_venue_has_one_snapshot() {
        use rampart_engine::perp_book::{Completeness, Liquidation};
        use rampart_engine::perp_window::PositionSide;
        let liq = |usd: f64, time_ms| Liquidation { side: PositionSide::Short, price: 10.0, qty: usd / 10.0, time_ms };
        let feed = LiqFeed::new();
        feed.push(&liq(500.0, 1));
        let snap = Arc::new(PerpSnapshot {
            contract: "BTCUSDT".into(),
            multiplier: 1,
            completeness: Completeness::All,
            mark: Some(10.0),
            oi: None,
            funding: None,
            last: Some(liq(500.0, 1)),
            ts_ms: 1_000,
        });
        let at = |ts| View { perp: Some(snap.clone()), liq_feed: Some(&feed), ..view(100, ts, i64::MIN, vec![], 0) };
        let mut f = Fanout::new(OUTBOX_BYTES_MAX);
        let (one, big, star) = (f.open(), f.open(), f.open());
        let pair = Channel::Liquidations { venue: Venue::Bybit, symbol: Some("BTCUSDT".into()) };
        let (t_one, t_big) = (target(pair.clone(), None), target(pair, Some(1e6)));
        let t_star = target(Channel::Liquidations { venue: Venue::Bybit, symbol: None }, None);
        f.subscribe(one, &t_one, &[BOOK]);
        f.subscribe(big, &t_big, &[BOOK]);
        f.subscribe(star, &t_star, &[BOOK, BookId(8)]);
        f.look(BOOK, Venue::Bybit, "BTCUSDT", &at(1), [0; 8], 10);
        assert_eq!(kinds(&f.take(star)), ["(snapshot)"], "one snapshot for the venue");
        let venue = f.snapshot(&t_star, VENUE_WIDE, "*").expect("the venue's");
        assert!(
            venue.starts_with("{\"symbol\":\"*\",\"completeness\":\"all\",\"liquidations\":[{\"symbol\":\"BTCUSDT\""),
            "{venue}"
        );
        f.take(one);
        assert_eq!(kinds(&f.take(big)), ["(snapshot)"]);
        let small = f.snapshot(&t_big, BOOK, "BTCUSDT").expect("looked at");
        assert!(small.ends_with("\"liquidations\":[]}"), "below minUsd: {small}");
        feed.push(&liq(2e6, 2));
        feed.push(&liq(900.0, 3));
        f.look(BOOK, Venue::Bybit, "BTCUSDT", &at(2), [1; 8], 20);
        assert_eq!(kinds(&f.take(one)), ["liquidation", "liquidation"]);
        assert_eq!(kinds(&f.take(big)), ["liquidation"], "the $2M one only");
        let items = f.take(star);
        let Some(Item::Event { book, data, .. }) = items.first() else { panic!("{:?}", kinds(&items)) };
        assert_eq!((*book, items.len()), (VENUE_WIDE, 2));
        assert!(data.starts_with("{\"symbol\":\"BTCUSDT\",\"liquidation\":{\"side\":\"short\""), "{data}");
        f.look(BOOK, Venue::Bybit, "BTCUSDT", &at(3), [2; 8], 30);
        assert!(f.take(one).is_empty(), "each once");
        // Further behind than the ring: a snapshot instead, holding the newest.
        for k in 0..(rampart_state::liq_feed::LIQ_FEED_LEN as i64 + 2) {
            feed.push(&liq(1.0, 10 + k));
        }
        f.look(BOOK, Venue::Bybit, "BTCUSDT", &at(4), [3; 8], 40);
        assert_eq!(kinds(&f.take(one)), ["(snapshot)"]);
        let newest = f.snapshot(&t_one, BOOK, "BTCUSDT").expect("looked at");
        assert_eq!(newest.matches("\"side\"").count(), perp_watch::LIQ_SNAPSHOT_MAX, "{newest}");
    }
}
