//! The cluster's messages on NATS, as compact little-endian binary: a market node's snapshots
//! of its books (for the api nodes' replicas), the api nodes' alert commands to the owning
//! market node, the queries a market node answers (`query`: candles, depth, a perpetual's
//! history and test trigger), and the webhook delivery a firing's message carries (`delivery`).
//!
//! Every message starts with [`WIRE_VERSION`]; books are named by venue and `BASEQUOTE` (never by
//! `BookId`, which is an index into one process's registry). Decoding never trusts a length: a
//! count is checked against the bytes left before anything is reserved, a string is at most
//! [`SYMBOL_MAX`] bytes, and every enum tag is checked, so malformed bytes are a [`WireError`],
//! never a panic or a large allocation (`fuzz/fuzz_targets/cluster_wire.rs`).

use rampart_engine::alert::AlertSpec;
use rampart_engine::level::{Formation, Origin};
use rampart_engine::metrics::Window;
use rampart_engine::{Price, Qty, Side, Venue};

use rampart_state::pair_metrics::{Depth, PairMetrics, WallsSummary};
mod condition;
mod delivery;
mod perp;
mod query;

pub use delivery::{delivery, read_delivery, Delivery, DELIVERY_BYTES_MAX};

pub use perp::LiqRelay;

pub use query::{
    candles, depth, perp_history, perp_trigger, query, read_candles, read_depth, read_perp_history, read_perp_trigger,
    read_query, Query,
};

use rampart_state::{AlertChange, AlertState, DensitySnapshot, LevelSnapshot, PublishedWall};

/// The format's version, first byte of every message; a message of another version is refused.
pub const WIRE_VERSION: u8 = 4;
/// Longest symbol on the wire, bytes.
pub const SYMBOL_MAX: usize = 64;

/// Bytes that are not a message of this format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The message ends inside a field.
    Truncated,
    /// Another version of the format.
    Version(u8),
    /// A field holds a value it cannot hold (an unknown tag, a bad string).
    Invalid(&'static str),
    /// Bytes are left after the message.
    Trailing,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Truncated => f.write_str("message truncated"),
            WireError::Version(v) => write!(f, "message of format version {v}, this node reads {WIRE_VERSION}"),
            WireError::Invalid(what) => write!(f, "invalid {what}"),
            WireError::Trailing => f.write_str("bytes after the message"),
        }
    }
}

impl std::error::Error for WireError {}

/// A book as named on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookName {
    /// Venue.
    pub venue: Venue,
    /// `BASEQUOTE`.
    pub symbol: String,
}

/// What a market node publishes about one book; `None` parts did not change since its last
/// message (a full snapshot carries every part).
#[derive(Clone, Debug, Default)]
pub struct BookUpdate {
    /// The last price, its time, the trade range since the level set, and the listing status.
    pub price: Option<PricePart>,
    /// The level set.
    pub levels: Option<LevelSnapshot>,
    /// The last wall scan.
    pub densities: Option<DensitySnapshot>,
    /// The last metrics.
    pub metrics: Option<PairMetrics>,
    /// The pair's perpetual as last published (`Some(None)`: it has none now).
    pub perp: Option<Option<rampart_state::perp::PerpSnapshot>>,
    /// The liquidations its feed took since the last round (every round that has any, and every
    /// full snapshot of a pair with a feed).
    pub liquidations: Option<LiqRelay>,
}

/// The price part of a [`BookUpdate`] (the slot's atomics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PricePart {
    /// Last price, fixed-point.
    pub price: i64,
    /// Its time, Unix ms.
    pub ts_ms: i64,
    /// Highest trade since the level set.
    pub trade_high: i64,
    /// Lowest trade since the level set.
    pub trade_low: i64,
    /// Listing status (`shard::STATUS_*`).
    pub status: u8,
}

/// The head of a snapshot message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHead {
    /// The sender's partition.
    pub partition: u16,
    /// Partitions of the cluster as the sender knows it.
    pub partitions: u16,
    /// Part of a full snapshot (every part of every owned book).
    pub full: bool,
    /// The last message of a full snapshot: the receiver now has all of the partition.
    pub last: bool,
    /// Ready: the sender's shards have their books and history.
    pub ready: bool,
    /// When sent, the sender's Unix ms.
    pub sent_ms: i64,
}

/// An alert command to the owning market node: one alert's state after a stored change, with
/// that change's version (`decisions.md` §16, "One order"), for the book it names (a `*` alert:
/// the venue and the symbol `*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertCommand {
    /// The alert's book.
    pub book: BookName,
    /// Its state after the change.
    pub change: AlertChange,
}

/// Writes a message.
#[derive(Default)]
pub struct Out(pub Vec<u8>);

impl Out {
    /// A message of this version.
    pub fn new(capacity: usize) -> Out {
        let mut v = Vec::with_capacity(capacity);
        v.push(WIRE_VERSION);
        Out(v)
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn opt_f64(&mut self, v: Option<f64>) {
        self.u8(v.is_some() as u8);
        self.f64(v.unwrap_or(0.0));
    }
    fn opt_i64(&mut self, v: Option<i64>) {
        self.u8(v.is_some() as u8);
        self.i64(v.unwrap_or(0));
    }
    fn book(&mut self, b: &BookName) {
        self.u8(b.venue.index() as u8);
        let s = &b.symbol.as_bytes()[..b.symbol.len().min(SYMBOL_MAX)];
        self.u8(s.len() as u8);
        self.0.extend_from_slice(s);
    }
    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when only the version is written.
    pub fn is_empty(&self) -> bool {
        self.0.len() <= 1
    }
}

/// Reads a message.
pub struct In<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> In<'a> {
    /// Starts reading `buf`, checking its version.
    pub fn new(buf: &'a [u8]) -> Result<In<'a>, WireError> {
        let mut r = In { buf, pos: 0 };
        match r.u8()? {
            WIRE_VERSION => Ok(r),
            v => Err(WireError::Version(v)),
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(WireError::Truncated)?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Invalid("flag")),
        }
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    fn f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_le_bytes(self.arr()?))
    }
    fn opt_f64(&mut self) -> Result<Option<f64>, WireError> {
        let some = self.bool()?;
        let v = self.f64()?;
        Ok(some.then_some(v))
    }
    fn opt_i64(&mut self) -> Result<Option<i64>, WireError> {
        let some = self.bool()?;
        let v = self.i64()?;
        Ok(some.then_some(v))
    }
    fn tag<T: Copy>(&mut self, all: &[T], what: &'static str) -> Result<T, WireError> {
        all.get(self.u8()? as usize).copied().ok_or(WireError::Invalid(what))
    }
    fn book(&mut self) -> Result<BookName, WireError> {
        let venue = self.tag(&Venue::ALL, "venue")?;
        let n = self.u8()? as usize;
        if n > SYMBOL_MAX {
            return Err(WireError::Invalid("symbol"));
        }
        let symbol = std::str::from_utf8(self.take(n)?).map_err(|_| WireError::Invalid("symbol"))?;
        Ok(BookName { venue, symbol: symbol.to_string() })
    }
    /// A count of items of at least `item_min` bytes each, checked against the bytes left.
    fn count(&mut self, item_min: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        match n.checked_mul(item_min) {
            Some(b) if b <= self.buf.len() - self.pos => Ok(n),
            _ => Err(WireError::Truncated),
        }
    }
    /// True when every byte was read.
    pub fn done(&self) -> bool {
        self.pos == self.buf.len()
    }
    fn end(self) -> Result<(), WireError> {
        match self.done() {
            true => Ok(()),
            false => Err(WireError::Trailing),
        }
    }
}

const FORMATIONS: [Formation; 2] = [Formation::High, Formation::Low];
const ORIGINS: [Origin; 6] = [Origin::M15, Origin::H1, Origin::H4, Origin::D1, Origin::W1, Origin::Dmax];
const SIDES: [Side; 2] = [Side::Bid, Side::Ask];

fn index_of<T: PartialEq>(all: &[T], v: &T) -> u8 {
    all.iter().position(|a| a == v).unwrap_or(0) as u8
}

/// Starts a snapshot message.
pub fn snapshot_head(out: &mut Out, head: &SnapshotHead) {
    out.u16(head.partition);
    out.u16(head.partitions);
    out.u8(head.full as u8 | (head.last as u8) << 1 | (head.ready as u8) << 2);
    out.i64(head.sent_ms);
}

const PART_PRICE: u8 = 1;
const PART_LEVELS: u8 = 2;
const PART_DENSITIES: u8 = 4;
const PART_METRICS: u8 = 8;
const PART_PERP: u8 = 16;
const PART_LIQUIDATIONS: u8 = 32;

/// Appends one book's update to a snapshot message.
pub fn book_update(out: &mut Out, book: &BookName, u: &BookUpdate) {
    out.book(book);
    let mask = u.price.map_or(0, |_| PART_PRICE)
        | u.levels.as_ref().map_or(0, |_| PART_LEVELS)
        | u.densities.as_ref().map_or(0, |_| PART_DENSITIES)
        | u.metrics.as_ref().map_or(0, |_| PART_METRICS)
        | u.perp.as_ref().map_or(0, |_| PART_PERP)
        | u.liquidations.as_ref().map_or(0, |_| PART_LIQUIDATIONS);
    out.u8(mask);
    if let Some(p) = &u.price {
        out.i64(p.price);
        out.i64(p.ts_ms);
        out.i64(p.trade_high);
        out.i64(p.trade_low);
        out.u8(p.status);
    }
    if let Some(l) = &u.levels {
        put_levels(out, l);
    }
    if let Some(d) = &u.densities {
        put_densities(out, d);
    }
    if let Some(m) = &u.metrics {
        put_metrics(out, m);
    }
    if let Some(p) = &u.perp {
        perp::put_perp(out, p.as_ref());
    }
    if let Some(l) = &u.liquidations {
        perp::put_relay(out, l);
    }
}

fn put_levels(out: &mut Out, l: &LevelSnapshot) {
    out.i64(l.computed_ms);
    out.count(l.levels.len());
    for z in &l.levels {
        out.i64(z.price.0);
        out.u8(index_of(&FORMATIONS, &z.side));
        out.u8(index_of(&ORIGINS, &z.origin));
        out.i64(z.time_ms);
        out.u32(z.strength);
    }
}

fn put_densities(out: &mut Out, d: &DensitySnapshot) {
    out.i64(d.ts_ms);
    out.i64(d.price);
    out.count(d.walls.len());
    for w in &d.walls {
        out.u8(index_of(&SIDES, &w.wall.side));
        out.i64(w.wall.price.0);
        out.i64(w.wall.qty.0 as i64);
        out.f64(w.wall.ratio);
        out.f64(w.wall.dist_pct);
        out.i64(w.wall.age_ms);
        out.opt_f64(w.usd);
    }
}

fn put_metrics(out: &mut Out, m: &PairMetrics) {
    out.i64(m.ts_ms);
    out.i64(m.price);
    out.opt_f64(m.quote_usd);
    for w in &m.windows {
        out.u8(w.is_some() as u8);
        if let Some(w) = w {
            for p in [w.open, w.high, w.low, w.last] {
                out.i64(p.0);
            }
            out.f64(w.volume);
            out.opt_i64(w.trades.map(|t| t as i64));
        }
    }
    out.opt_f64(m.spread_bps);
    out.u8(m.depth.is_some() as u8);
    if let Some(d) = m.depth {
        out.f64(d.bid_usd);
        out.f64(d.ask_usd);
    }
    out.u8(m.walls.is_some() as u8);
    if let Some(w) = m.walls {
        out.u32(w.count);
        out.opt_f64(w.usd);
    }
    out.u8(m.levels.is_some() as u8);
    if let Some((s, r)) = m.levels {
        out.opt_f64(s);
        out.opt_f64(r);
    }
    out.opt_i64(m.history_start_ms);
    perp::put_perp_metrics(out, m.perp.as_ref());
}

/// Reads a snapshot message: its head and every book's update.
pub fn read_snapshot(buf: &[u8]) -> Result<(SnapshotHead, Vec<(BookName, BookUpdate)>), WireError> {
    let mut r = In::new(buf)?;
    let (partition, partitions, flags, sent_ms) = (r.u16()?, r.u16()?, r.u8()?, r.i64()?);
    if flags > 7 || partitions == 0 || partition >= partitions {
        return Err(WireError::Invalid("snapshot head"));
    }
    let head = SnapshotHead {
        partition,
        partitions,
        full: flags & 1 != 0,
        last: flags & 2 != 0,
        ready: flags & 4 != 0,
        sent_ms,
    };
    let mut books = Vec::new();
    while !r.done() {
        let book = r.book()?;
        let mask = r.u8()?;
        if mask > 63 {
            return Err(WireError::Invalid("part mask"));
        }
        let mut u = BookUpdate::default();
        if mask & PART_PRICE != 0 {
            let (price, ts_ms, trade_high, trade_low) = (r.i64()?, r.i64()?, r.i64()?, r.i64()?);
            let status = r.u8()?;
            if status > rampart_state::STATUS_DELISTED {
                return Err(WireError::Invalid("status"));
            }
            u.price = Some(PricePart { price, ts_ms, trade_high, trade_low, status });
        }
        if mask & PART_LEVELS != 0 {
            u.levels = Some(read_levels(&mut r)?);
        }
        if mask & PART_DENSITIES != 0 {
            u.densities = Some(read_densities(&mut r)?);
        }
        if mask & PART_METRICS != 0 {
            u.metrics = Some(read_metrics(&mut r)?);
        }
        if mask & PART_PERP != 0 {
            u.perp = Some(perp::read_perp(&mut r)?);
        }
        if mask & PART_LIQUIDATIONS != 0 {
            u.liquidations = Some(perp::read_relay(&mut r)?);
        }
        books.push((book, u));
    }
    Ok((head, books))
}

fn read_levels(r: &mut In<'_>) -> Result<LevelSnapshot, WireError> {
    let computed_ms = r.i64()?;
    let n = r.count(22)?;
    let mut levels = Vec::with_capacity(n);
    for _ in 0..n {
        let price = Price(r.i64()?);
        let side = r.tag(&FORMATIONS, "formation")?;
        let origin = r.tag(&ORIGINS, "origin")?;
        levels.push(rampart_engine::level::Level { price, side, origin, time_ms: r.i64()?, strength: r.u32()? });
    }
    Ok(LevelSnapshot { computed_ms, levels })
}

fn read_densities(r: &mut In<'_>) -> Result<DensitySnapshot, WireError> {
    let (ts_ms, price) = (r.i64()?, r.i64()?);
    let n = r.count(50)?;
    let mut walls = Vec::with_capacity(n);
    for _ in 0..n {
        let side = r.tag(&SIDES, "side")?;
        let (price, qty) = (Price(r.i64()?), r.i64()?);
        let qty = Qty(u64::try_from(qty).map_err(|_| WireError::Invalid("quantity"))?);
        let (ratio, dist_pct, age_ms) = (r.f64()?, r.f64()?, r.i64()?);
        let wall = rampart_engine::wall::Wall { side, price, qty, ratio, dist_pct, age_ms };
        walls.push(PublishedWall { wall, usd: r.opt_f64()? });
    }
    Ok(DensitySnapshot { ts_ms, price, walls })
}

fn read_metrics(r: &mut In<'_>) -> Result<PairMetrics, WireError> {
    let (ts_ms, price, quote_usd) = (r.i64()?, r.i64()?, r.opt_f64()?);
    let mut windows = [None; 6];
    for w in &mut windows {
        if r.bool()? {
            let (open, high, low, last) = (Price(r.i64()?), Price(r.i64()?), Price(r.i64()?), Price(r.i64()?));
            let volume = r.f64()?;
            let trades = r.opt_i64()?.map(|t| t as u64);
            *w = Some(Window { open, high, low, last, volume, trades });
        }
    }
    let spread_bps = r.opt_f64()?;
    let depth = match r.bool()? {
        true => Some(Depth { bid_usd: r.f64()?, ask_usd: r.f64()? }),
        false => None,
    };
    let walls = match r.bool()? {
        true => Some(WallsSummary { count: r.u32()?, usd: r.opt_f64()? }),
        false => None,
    };
    let levels = match r.bool()? {
        true => Some((r.opt_f64()?, r.opt_f64()?)),
        false => None,
    };
    let history_start_ms = r.opt_i64()?;
    let perp = perp::read_perp_metrics(r)?;
    Ok(PairMetrics { ts_ms, price, quote_usd, windows, spread_bps, depth, walls, levels, history_start_ms, perp })
}

/// An alert command's bytes: a tag for the state (3 held, 4 gone, 5 resumed), the book, the
/// alert's id and the change's version, then for a held or resumed alert its spec.
///
/// Rationale: tags 0 to 2 were the commands of the release before versions (add, remove,
/// resume, with no version); they are still read, as version 0 (applied only to an alert the
/// shard has applied nothing for), so that a cluster upgraded one node at a time keeps its
/// snapshots, which share this format's version byte.
pub fn alert_command(c: &AlertCommand) -> Vec<u8> {
    let mut out = Out::new(96);
    let (tag, spec) = match c.change.state {
        AlertState::Held(spec) => (3, Some(spec)),
        AlertState::Gone => (4, None),
        AlertState::Resumed(spec) => (5, Some(spec)),
    };
    out.u8(tag);
    out.book(&c.book);
    out.i64(c.change.id as i64);
    out.i64(c.change.version as i64);
    if let Some(spec) = spec {
        out.u8(spec.repeat as u8);
        condition::condition(&mut out, &spec.condition);
        out.u32(spec.cooldown_s);
    }
    out.0
}

/// Reads an alert command (the release before versions' too, as version 0).
pub fn read_alert_command(buf: &[u8]) -> Result<AlertCommand, WireError> {
    let mut r = In::new(buf)?;
    let tag = r.u8()?;
    if tag > 5 {
        return Err(WireError::Invalid("command"));
    }
    let book = r.book()?;
    let id = r.i64()? as u64;
    let versioned = tag >= 3;
    let version = if versioned { r.i64()? as u64 } else { 0 };
    let state = match tag {
        1 | 4 => AlertState::Gone,
        _ => {
            let repeat = r.bool()?;
            let condition = condition::read_condition(&mut r)?;
            // Before versions the cooldown trailed the condition only when set.
            let cooldown_s = if !versioned && r.done() { 0 } else { r.u32()? };
            let spec = AlertSpec { id, condition, repeat, cooldown_s };
            match tag {
                0 | 3 => AlertState::Held(spec),
                _ => AlertState::Resumed(spec),
            }
        }
    };
    r.end()?;
    Ok(AlertCommand { book, change: AlertChange { id, version, state } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::alert::{Condition, Cross, Move};
    use rampart_engine::level_alert::{LevelCondition, LevelDirection, LevelEvent};
    use rampart_engine::perp_alert::{
        FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
    };
    use rampart_engine::perp_book::PerpInterval;
    use rampart_engine::site_alert::WallSide;
    use rampart_engine::wall_alert::{WallCondition, WallEvent};
    use rampart_engine::{Candle, Timeframe};
    use rampart_state::DepthView;

    use super::perp::samples::{perp_metrics, perp_snapshot};

    fn name(symbol: &str) -> BookName {
        BookName { venue: Venue::Okx, symbol: symbol.into() }
    }

    fn full_update() -> BookUpdate {
        let level = rampart_engine::level::Level {
            price: Price(123),
            side: Formation::Low,
            origin: Origin::W1,
            time_ms: 77,
            strength: 3,
        };
        let wall = rampart_engine::wall::Wall {
            side: Side::Ask,
            price: Price(456),
            qty: Qty(9),
            ratio: 6.5,
            dist_pct: -1.25,
            age_ms: 30_000,
        };
        let window =
            Window { open: Price(1), high: Price(3), low: Price(1), last: Price(2), volume: 10.5, trades: None };
        BookUpdate {
            price: Some(PricePart { price: 100, ts_ms: 5, trade_high: i64::MIN, trade_low: i64::MAX, status: 2 }),
            levels: Some(LevelSnapshot { computed_ms: 9, levels: vec![level; 3] }),
            densities: Some(DensitySnapshot {
                ts_ms: 8,
                price: 99,
                walls: vec![PublishedWall { wall, usd: Some(1.5) }],
            }),
            metrics: Some(PairMetrics {
                ts_ms: 4,
                price: 98,
                quote_usd: None,
                windows: [Some(window), None, None, None, None, Some(window)],
                spread_bps: Some(2.5),
                depth: Some(Depth { bid_usd: 1.0, ask_usd: 2.0 }),
                walls: Some(WallsSummary { count: 1, usd: None }),
                levels: Some((None, Some(1.5))),
                history_start_ms: Some(3),
                perp: Some(perp_metrics()),
            }),
            perp: Some(Some(perp_snapshot())),
            liquidations: Some(relay()),
        }
    }

    fn relay() -> LiqRelay {
        use rampart_engine::perp_book::Liquidation;
        use rampart_engine::perp_window::PositionSide;
        let l = |side, time_ms| Liquidation { side, price: 94_000.5, qty: 0.25, time_ms };
        LiqRelay {
            origin: u64::MAX - 3,
            head: 44,
            entries: vec![(41, l(PositionSide::Long, 1_000)), (43, l(PositionSide::Short, 1_001))],
        }
    }

    fn snapshot_bytes() -> Vec<u8> {
        let mut out = Out::new(256);
        let head = SnapshotHead { partition: 1, partitions: 2, full: true, last: false, ready: true, sent_ms: 42 };
        snapshot_head(&mut out, &head);
        book_update(&mut out, &name("BTCUSDT"), &full_update());
        book_update(&mut out, &name("ETHUSDT"), &BookUpdate { perp: Some(None), ..BookUpdate::default() });
        out.0
    }

    #[test]
    fn a_snapshot_reads_back_as_written() {
        let (head, books) = read_snapshot(&snapshot_bytes()).expect("decodes");
        assert_eq!(
            head,
            SnapshotHead { partition: 1, partitions: 2, full: true, last: false, ready: true, sent_ms: 42 }
        );
        assert_eq!(books.len(), 2);
        let (b, u) = &books[0];
        let want = full_update();
        assert_eq!(b, &name("BTCUSDT"));
        assert_eq!(u.price, want.price);
        let (l, wl) = (u.levels.as_ref().expect("levels"), want.levels.as_ref().expect("levels"));
        assert_eq!((l.computed_ms, &l.levels), (wl.computed_ms, &wl.levels));
        let d = u.densities.as_ref().expect("densities");
        assert_eq!(
            (d.ts_ms, d.price, d.walls.len(), d.walls[0].wall, d.walls[0].usd),
            (8, 99, 1, want.densities.as_ref().expect("d").walls[0].wall, Some(1.5))
        );
        let (m, wm) = (u.metrics.as_ref().expect("metrics"), want.metrics.as_ref().expect("metrics"));
        assert_eq!(
            (m.ts_ms, m.price, m.quote_usd, m.spread_bps, m.depth, m.walls),
            (wm.ts_ms, wm.price, wm.quote_usd, wm.spread_bps, wm.depth, wm.walls)
        );
        assert_eq!(
            (m.levels, m.history_start_ms, m.windows.map(|w| w.map(|w| (w.open, w.last, w.volume, w.trades)))),
            (wm.levels, wm.history_start_ms, wm.windows.map(|w| w.map(|w| (w.open, w.last, w.volume, w.trades))))
        );
        assert_eq!(m.perp, wm.perp, "the derivatives metrics");
        assert_eq!(u.perp, want.perp, "the perpetual, every field");
        assert_eq!(u.liquidations, Some(relay()), "the relayed liquidations, every field");
        let (b, u) = &books[1];
        assert_eq!(b, &name("ETHUSDT"));
        assert!(u.price.is_none() && u.levels.is_none() && u.densities.is_none() && u.metrics.is_none());
        assert_eq!(u.perp, Some(None), "a book without a perpetual says so");
        assert_eq!(u.liquidations, None);
    }

    #[test]
    fn relayed_liquidations_out_of_order_or_too_many_are_refused() {
        let message = |relay: &LiqRelay| {
            let mut out = Out::new(256);
            let head = SnapshotHead { partition: 0, partitions: 1, full: false, last: false, ready: true, sent_ms: 1 };
            snapshot_head(&mut out, &head);
            book_update(
                &mut out,
                &name("BTCUSDT"),
                &BookUpdate { liquidations: Some(relay.clone()), ..Default::default() },
            );
            out.0
        };
        let mut back = relay();
        back.entries.reverse();
        assert_eq!(
            read_snapshot(&message(&back)).map(|_| ()),
            Err(WireError::Invalid("liquidation numbers not rising"))
        );
        let mut twice = relay();
        twice.entries[1].0 = twice.entries[0].0;
        assert_eq!(
            read_snapshot(&message(&twice)).map(|_| ()),
            Err(WireError::Invalid("liquidation numbers not rising"))
        );
        let one = relay().entries[0].1;
        let many = LiqRelay {
            origin: 1,
            head: rampart_state::liq_feed::LIQ_FEED_LEN as u64 + 1,
            entries: (1..=rampart_state::liq_feed::LIQ_FEED_LEN as u64 + 1).map(|n| (n, one)).collect(),
        };
        assert_eq!(read_snapshot(&message(&many)).map(|_| ()), Err(WireError::Invalid("relayed liquidations")));
        let mut past = relay();
        past.head = past.entries[1].0 - 1;
        assert_eq!(
            read_snapshot(&message(&past)).map(|_| ()),
            Err(WireError::Invalid("liquidation numbers past the head"))
        );
        let mut bad_side = message(&relay());
        let at = bad_side.len() - 3 * 8 - 1;
        bad_side[at] = 2;
        assert_eq!(read_snapshot(&bad_side).map(|_| ()), Err(WireError::Invalid("side")));
    }

    #[test]
    fn commands_queries_and_answers_read_back_as_written() {
        let spec = |condition| AlertSpec { id: 7, condition, repeat: true, cooldown_s: 0 };
        let held = |book: &str, spec: AlertSpec, version| AlertCommand {
            book: name(book),
            change: AlertChange { id: spec.id, version, state: AlertState::Held(spec) },
        };
        let commands = [
            held("A", spec(Condition::Price { cross: Cross::Below, level: Price(-3) }), 1),
            held("B", spec(Condition::Pct { dir: Move::Any, millionths: 5, window: Timeframe::ALL[5] }), 2),
            AlertCommand { book: name("C"), change: AlertChange::gone(u64::MAX, u64::MAX) },
            AlertCommand {
                book: name("C"),
                change: AlertChange {
                    id: 7,
                    version: 9,
                    state: AlertState::Resumed(spec(Condition::Price { cross: Cross::Above, level: Price(9) })),
                },
            },
            held(
                "C",
                AlertSpec {
                    cooldown_s: 900,
                    ..spec(Condition::Pct { dir: Move::Up, millionths: 5, window: Timeframe::ALL[1] })
                },
                3,
            ),
            held(
                "D",
                spec(Condition::Level(LevelCondition {
                    event: LevelEvent::Touch,
                    direction: LevelDirection::Below,
                    within_millionths: 0,
                    min_strength: 3,
                    timeframes: 0b1_0100,
                })),
                4,
            ),
            held(
                "E",
                spec(Condition::Wall(WallCondition {
                    event: WallEvent::Filled,
                    side: WallSide::Ask,
                    min_usd_cents: 250_000_000,
                    min_ratio_hundredths: 1_500,
                    max_dist_hundredths: 300,
                    min_age_s: 60,
                })),
                5,
            ),
        ];
        let h1 = PerpInterval::parse("1h").expect("1h");
        let derivatives = [
            PerpCondition::Order(LiqOrder { direction: LiqDirection::Short, min_usd_cents: 100_000_000 }),
            PerpCondition::Sum { window: h1, sum: LiqSum { direction: LiqDirection::Any, min_usd_cents: 12_345 } },
            PerpCondition::Oi {
                window: h1,
                change: OiChange { direction: OiDirection::Down, pct_micro: 7_500_000, min_usd: 2_000_000 },
            },
            PerpCondition::Funding(FundingLevel { direction: FundingDirection::Below, pct_micro: -12_345 }),
        ];
        let commands =
            commands.into_iter().chain(derivatives.into_iter().map(|c| held("F", spec(Condition::Perp(c)), 6)));
        for c in commands {
            assert_eq!(read_alert_command(&alert_command(&c)), Ok(c));
        }
        for q in [Query::Candles(name("D"), Timeframe::ALL[2], 1_000), Query::Depth(name("E"), 50)] {
            assert_eq!(read_query(&query(&q)), Ok(q));
        }
        let bars = vec![Candle::flat(60_000, Price(5)), Candle { trades: None, ..Candle::flat(0, Price(1)) }];
        assert_eq!(read_candles(&candles(&bars)), Ok(bars));
        let level = rampart_engine::Level { price: Price(10), qty: Qty(2) };
        let view = DepthView { ts_ms: 3, bids: vec![level; 2], asks: vec![level], in_sync: true };
        assert_eq!(read_depth(&depth(&view)), Ok(view));
    }

    /// The commands of the release before versions (tags 0 to 2, the cooldown only when set)
    /// still read, as version 0: a cluster upgraded one node at a time keeps working.
    #[test]
    fn commands_written_before_versions_read_as_version_zero() {
        let venue = name("BTCUSDT").venue.index() as u8;
        let mut add = vec![WIRE_VERSION, 0, venue, 7];
        add.extend_from_slice(b"BTCUSDT");
        add.extend_from_slice(&7i64.to_le_bytes());
        add.push(1);
        add.extend_from_slice(&[0, 0]);
        add.extend_from_slice(&5i64.to_le_bytes());
        let spec = AlertSpec {
            id: 7,
            condition: Condition::Price { cross: Cross::Above, level: Price(5) },
            repeat: true,
            cooldown_s: 0,
        };
        let want = AlertCommand {
            book: name("BTCUSDT"),
            change: AlertChange { id: 7, version: 0, state: AlertState::Held(spec) },
        };
        assert_eq!(read_alert_command(&add), Ok(want));
        let mut resumed = add.clone();
        resumed[1] = 2;
        resumed.extend_from_slice(&900u32.to_le_bytes());
        let spec = AlertSpec { cooldown_s: 900, ..spec };
        let c = read_alert_command(&resumed).expect("resume");
        assert_eq!(c.change.state, AlertState::Resumed(spec));
        let mut remove = vec![WIRE_VERSION, 1, venue, 7];
        remove.extend_from_slice(b"BTCUSDT");
        remove.extend_from_slice(&7i64.to_le_bytes());
        assert_eq!(read_alert_command(&remove).map(|c| c.change), Ok(AlertChange::gone(7, 0)));
    }

    #[test]
    fn every_truncation_and_every_extension_of_a_message_is_an_error() {
        let command = alert_command(&AlertCommand { book: name("BTCUSDT"), change: AlertChange::gone(1, 2) });
        let q = query(&Query::Depth(name("BTCUSDT"), 5));
        let bars = candles(&[Candle::flat(0, Price(1))]);
        let view =
            depth(&DepthView { ts_ms: 1, bids: vec![rampart_engine::Level::default()], asks: vec![], in_sync: false });
        for cut in 0..command.len() {
            assert!(read_alert_command(&command[..cut]).is_err(), "command cut at {cut}");
        }
        for cut in 0..q.len() {
            assert!(read_query(&q[..cut]).is_err(), "query cut at {cut}");
        }
        for cut in 0..bars.len() {
            assert!(read_candles(&bars[..cut]).is_err(), "candles cut at {cut}");
        }
        for cut in 0..view.len() {
            assert!(read_depth(&view[..cut]).is_err(), "depth cut at {cut}");
        }
        assert_eq!(read_alert_command(&[command.as_slice(), &[0]].concat()), Err(WireError::Trailing));
        assert_eq!(read_depth(&[view.as_slice(), &[0]].concat()), Err(WireError::Trailing));
        // A snapshot is a sequence of books: a cut inside a book is an error, a cut between two
        // is a shorter snapshot.
        let snapshot = snapshot_bytes();
        let whole = read_snapshot(&snapshot).expect("whole").1.len();
        for cut in 0..snapshot.len() {
            if let Ok((_, books)) = read_snapshot(&snapshot[..cut]) {
                assert!(books.len() < whole && cut >= 14, "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_perpetual_with_and_without_its_last_liquidation_and_bad_parts_refused() {
        let mut out = Out::new(256);
        let head = SnapshotHead { partition: 0, partitions: 1, full: false, last: false, ready: true, sent_ms: 1 };
        snapshot_head(&mut out, &head);
        let with = BookUpdate { perp: Some(Some(perp_snapshot())), ..BookUpdate::default() };
        book_update(&mut out, &name("BTCUSDT"), &with);
        let none_yet = rampart_state::perp::PerpSnapshot { last: None, ..perp_snapshot() };
        book_update(
            &mut out,
            &name("ETHUSDT"),
            &BookUpdate { perp: Some(Some(none_yet.clone())), ..Default::default() },
        );
        let (_, books) = read_snapshot(&out.0).expect("decodes");
        assert_eq!(books[0].1.perp, Some(Some(perp_snapshot())), "every field, `last` among them");
        assert_eq!(books[1].1.perp, Some(Some(none_yet)), "no liquidation yet");
        // A bad tag or contract name in the part is refused, the message whole.
        // The first book's contract name, after its length byte; the multiplier (4 bytes) and the
        // completeness tag follow it.
        let at = out.0.windows(13).position(|w| w == b"BTC-USDT-SWAP").expect("the name");
        let mut bad = out.0.clone();
        bad[at - 1] = 0;
        assert_eq!(read_snapshot(&bad).map(|_| ()), Err(WireError::Invalid("contract")));
        let mut bad = out.0.clone();
        bad[at + 13 + 4] = 9;
        assert_eq!(read_snapshot(&bad).map(|_| ()), Err(WireError::Invalid("completeness")));
    }

    #[test]
    fn bad_tags_versions_and_counts_are_refused_without_allocating_for_them() {
        let mut command = alert_command(&AlertCommand { book: name("BTCUSDT"), change: AlertChange::gone(1, 2) });
        command[0] = WIRE_VERSION + 1;
        assert_eq!(read_alert_command(&command), Err(WireError::Version(WIRE_VERSION + 1)));
        command[0] = 1;
        assert_eq!(read_alert_command(&command), Err(WireError::Version(1)), "the format before the perpetuals");
        command[0] = WIRE_VERSION;
        command[1] = 9;
        assert_eq!(read_alert_command(&command), Err(WireError::Invalid("command")));
        command[1] = 1;
        command[2] = 4;
        assert_eq!(read_alert_command(&command), Err(WireError::Invalid("venue")));
        // A count of 4 billion bars in a 10-byte message.
        let mut huge = vec![WIRE_VERSION];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0; 5]);
        assert_eq!(read_candles(&huge), Err(WireError::Truncated));
        // A symbol longer than any, or not UTF-8.
        let mut q = vec![WIRE_VERSION, 1, 0, 65];
        q.extend_from_slice(&[b'A'; 65]);
        q.extend_from_slice(&5u32.to_le_bytes());
        assert_eq!(read_query(&q), Err(WireError::Invalid("symbol")));
        let bad_utf8 = [WIRE_VERSION, 1, 0, 2, 0xff, 0xfe, 5, 0, 0, 0];
        assert_eq!(read_query(&bad_utf8), Err(WireError::Invalid("symbol")));
        // A snapshot head naming a partition past the count, or unknown flags.
        let mut s = snapshot_bytes();
        s[1] = 2;
        assert_eq!(read_snapshot(&s).err(), Some(WireError::Invalid("snapshot head")));
        let mut s = snapshot_bytes();
        s[5] = 8;
        assert_eq!(read_snapshot(&s).err(), Some(WireError::Invalid("snapshot head")));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..2_000 {
            let bytes: Vec<u8> = (0..len % 97)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let mut bytes = bytes;
            if let Some(b) = bytes.first_mut() {
                *b = WIRE_VERSION;
            }
            let _ = (read_snapshot(&bytes), read_alert_command(&bytes), read_query(&bytes));
            let _ = (read_candles(&bytes), read_depth(&bytes));
        }
    }
}
