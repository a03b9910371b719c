//! The derivatives alerts of one book (one venue pair with a perpetual), indexed so that an update
//! touches only the alerts it fires or re-arms and allocates nothing (`decisions.md` §17, "Decided
//! where the data is": O(log n + fired), in the sense the price alerts' heaps meet it).
//! The conditions and their arming rules are [`crate::perp_alert`]'s, one alert at a time; this
//! is the shard's index over many, and it decides exactly what those rules decide (a seeded test
//! drives both side by side).
//!
//! - `order` alerts (no state) sit in three lists sorted by `min_usd` (long, short, any). A venue
//!   message's largest liquidation of a side fires the prefix of its side's list (and of `any`'s)
//!   up to its value, found by binary search; each alert fires once per message, for the largest,
//!   with `count` = the message's liquidations of its side worth its `min_usd` or more.
//! - `sum`, `oi` and `funding` alerts (with state) sit per *group* — (window, side) for `sum`,
//!   (window, direction) for `oi`, the direction for `funding` — in two heaps: the armed ones by
//!   the value they fire at, the spent and waiting ones by the value they re-arm below. Every
//!   group's update is one number `v` (the group's sum in cents; the OI change in millionths of a
//!   percent, negated for `down`, its size for `any`; `rate8h` in millionths, negated for
//!   `below`), so one rule serves all: an armed alert fires when `v` reaches its key, a disarmed
//!   one re-arms when `v` is below its key. An update pops only what changes: O((1 + changed) ·
//!   log n), the price alerts' bound.
//! - `oi`'s `min_usd` gate: an alert whose `min_usd` is above the pair's `oiUsd` neither fires
//!   nor arms (§17), so it is taken out of its group's heaps into a per-window heap of gated
//!   alerts by `min_usd`, and put back when `oiUsd` reaches it; the gate moves only the alerts
//!   it changes.
//!
//! The heaps know where each alert sits, so removing, pausing or re-arming one costs O(log n);
//! an `order` alert is taken out of (put into) its sorted list by binary search and a shift of
//! the entries after it (a `memmove`, no allocation).
//!
//! "No firing at creation" (§17): an alert starts as if made now, from the last values the book
//! was handed: armed when its condition does not hold, else waiting until it no longer does; one
//! made before its value is known waits (`funding`: it arms on the first value on the near side).
//! [`PerpAlertBook::rearm`] puts an alert back in that state (a resume, or a cooled-down alert
//! "re-armed as if made").
//!
//! Choices where §17 is silent, and why:
//! - Cooldown, as the price alerts' ([`crate::alert`]): a firing within an alert's cooldown after
//!   its last one is not made, and the alert moves on as if it had fired (spent, re-arming by its
//!   rule). A one-shot alert (`repeat: false`) leaves the book at its firing.
//! - "Firings of one alert for one pair are at least 1 ms apart": a second firing of an alert in
//!   the millisecond of its last one is stamped the next millisecond, here, where the last is known.
//! - An `oiUsd` that is unknown, negative or not finite counts as 0 (only `min_usd` 0 qualifies);
//!   a window's value that is not finite counts as not known (no alert moves).
//! - The values the book keeps for "as if made" are the last ones handed, which the shard hands on
//!   every update and (for sums, which fall as the window moves) whenever a slot rolls, so that a
//!   sum that fell below `min_usd` between two liquidations is seen and re-arms its alerts.
//!
//! Bounds: at most `alerts_max` alerts (set at construction); an insert beyond is refused
//! ([`InsertError::Full`]). Only [`PerpAlertBook::insert`] allocates: it reserves, in every heap
//! and list the alert can move between, room for all of that group's alerts, and the scratch of
//! [`LIQS_PER_MESSAGE_MAX`] values an `order` update sorts; updates, removal, pause and re-arm
//! never allocate. A message of more than [`LIQS_PER_MESSAGE_MAX`] liquidations is still taken
//! whole, its counts by a scan per fired alert instead of a binary search.

use std::collections::HashMap;
use std::fmt;

use crate::cooldown::retune_cooldown;
pub use crate::perp_alert::PerpCondition;
use crate::perp_alert::{Arm, FundingDirection, FundingLevel, LiqDirection, LiqSum, OiDirection};
use crate::perp_alert_heap::{IxHeap, NOWHERE};
use crate::perp_alert_keys::{
    cents, fire_key, funding_group, funding_value, gate_heaps, gate_key, gate_window, group, liq_index, micro,
    oi_group, oi_value, order_key, rearm_key, side_index, side_matches, sum_group, GROUPS, HEAPS,
};
use crate::perp_book::{Liquidation, PerpInterval};
pub use crate::perp_interval::WINDOWS;
use crate::perp_window::LiqSums;

/// The liquidations of one venue message an `order` update sorts to count per alert in
/// O(log k); a longer message is counted by a scan per fired alert (slower, as exact).
pub const LIQS_PER_MESSAGE_MAX: usize = 256;

const LIQ_DIRECTIONS: [LiqDirection; 3] = [LiqDirection::Long, LiqDirection::Short, LiqDirection::Any];
const OI_DIRECTIONS: [OiDirection; 3] = [OiDirection::Up, OiDirection::Down, OiDirection::Any];

/// A derivatives alert as a shard holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerpAlertSpec {
    /// Alert id (the database row id).
    pub id: u64,
    /// Condition.
    pub condition: PerpCondition,
    /// Re-arms after firing instead of leaving.
    pub repeat: bool,
    /// The least time between two firings, seconds (§16); a firing decided sooner is not made
    /// and the alert moves on as if it had fired. 0: none.
    pub cooldown_s: u32,
}

/// What fired an alert.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PerpHit {
    /// An `order` alert: the largest liquidation of its side in the message.
    Order {
        /// Its place in the message's slice.
        index: usize,
        /// The liquidation.
        liquidation: Liquidation,
        /// How many of the message's liquidations of the alert's side were worth its `min_usd`.
        count: u32,
    },
    /// A `sum` alert: the window's sum of its side (`any`: long + short) after the update.
    Sum {
        /// The window.
        window: PerpInterval,
        /// The side summed (the alert's direction).
        side: LiqDirection,
        /// The sum, USD.
        sum_usd: f64,
    },
    /// An `oi` alert.
    Oi {
        /// The window.
        window: PerpInterval,
        /// `oiChange` over it, percent.
        change_pct: f64,
        /// The pair's `oiUsd` as taken (0 when not known).
        oi_usd: f64,
    },
    /// A `funding` alert.
    Funding {
        /// `rate8h`, percent per 8 h.
        rate8h: f64,
    },
}

/// One firing of a derivatives alert, as it leaves the shard.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerpFiring {
    /// Alert id.
    pub id: u64,
    /// The venue's time of what fired it (for `order`, the largest liquidation's), moved to the
    /// next millisecond when the alert fired in that one already.
    pub ts_ms: i64,
    /// True when the alert is done (not repeating) and has left the book.
    pub last: bool,
    /// What fired it.
    pub hit: PerpHit,
}

/// Why an alert was not inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The book holds `alerts_max` alerts already.
    Full {
        /// The bound.
        alerts_max: usize,
    },
    /// An `oi` alert over a window without OI (1m).
    Window(PerpInterval),
    /// An `oi` alert whose `pct` is not above zero (millionths of a percent).
    Pct(i64),
}

impl fmt::Display for InsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full { alerts_max } => write!(f, "the book holds its {alerts_max} derivatives alerts"),
            InsertError::Window(w) => write!(f, "no open interest is kept over {}", w.as_str()),
            InsertError::Pct(p) => write!(f, "an oi alert's pct must be above zero, not {p} millionths"),
        }
    }
}

impl std::error::Error for InsertError {}

/// One alert held.
#[derive(Clone, Copy, Debug)]
struct Slot {
    spec: PerpAlertSpec,
    live: bool,
    paused: bool,
    /// An `oi` alert whose `min_usd` is above the pair's `oiUsd`: in its window's gated heap, in
    /// no group heap; its arm stays as it was.
    gated: bool,
    arm: Arm,
    /// The group heap it sits in (`NOWHERE`: none).
    heap: u32,
    cooldown_ms: i64,
    /// No firing before this, Unix ms.
    quiet_until_ms: i64,
    /// Its last firing's time (`i64::MIN`: none).
    last_ms: i64,
    /// The next free slot while this one is free.
    next_free: u32,
}

/// The derivatives alerts of one book.
#[derive(Clone, Debug)]
pub struct PerpAlertBook {
    alerts_max: usize,
    slots: Vec<Slot>,
    /// Each slot's place in its group heap, and in its window's gate heap.
    pos: Vec<u32>,
    gate_pos: Vec<u32>,
    free: u32,
    ids: HashMap<u64, u32>,
    heaps: Vec<IxHeap>,
    /// Alerts held per group, per window's gate (those with a `min_usd`), per `order` list.
    group_len: [usize; GROUPS],
    gate_len: [usize; WINDOWS],
    order_len: [usize; 3],
    /// `order` alerts per direction (long, short, any): (least value in cents, slot), sorted.
    orders: [Vec<(i64, u32)>; 3],
    /// A message's long and short values in cents, sorted, to count per alert.
    scratch: [Vec<i64>; 2],
    /// The last values handed (what "as if made" reads).
    sums: [Option<LiqSums>; WINDOWS],
    oi_usd: [f64; WINDOWS],
    oi_change_micro: [Option<i64>; WINDOWS],
    rate8h: Option<f64>,
    visits: u64,
}

impl PerpAlertBook {
    /// An empty book that holds at most `alerts_max` alerts. Allocates its heaps' headers only.
    pub fn new(alerts_max: usize) -> PerpAlertBook {
        PerpAlertBook {
            alerts_max,
            slots: Vec::new(),
            pos: Vec::new(),
            gate_pos: Vec::new(),
            free: NOWHERE,
            ids: HashMap::new(),
            heaps: (0..HEAPS).map(|_| IxHeap::default()).collect(),
            group_len: [0; GROUPS],
            gate_len: [0; WINDOWS],
            order_len: [0; 3],
            orders: Default::default(),
            scratch: Default::default(),
            sums: [None; WINDOWS],
            oi_usd: [0.0; WINDOWS],
            oi_change_micro: [None; WINDOWS],
            rate8h: None,
            visits: 0,
        }
    }

    /// The bound on alerts held.
    pub fn alerts_max(&self) -> usize {
        self.alerts_max
    }

    /// Alerts held (paused ones included).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The most firings one update can make (each alert fires at most once per update): the
    /// room the caller keeps in the firing buffer.
    pub fn firings_max(&self) -> usize {
        self.ids.len()
    }

    /// Every alert id held, in no order.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.ids.keys().copied()
    }

    /// True when alert `id` is held.
    pub fn contains(&self, id: u64) -> bool {
        self.ids.contains_key(&id)
    }

    /// The alert `id` as held.
    pub fn spec(&self, id: u64) -> Option<PerpAlertSpec> {
        self.slot(id).map(|s| s.spec)
    }

    /// Where alert `id` stands: `None` when not held or an `order` alert (which has no state).
    pub fn arm(&self, id: u64) -> Option<Arm> {
        self.slot(id).filter(|s| !matches!(s.spec.condition, PerpCondition::Order(_))).map(|s| s.arm)
    }

    /// True when alert `id` is held and paused.
    pub fn is_paused(&self, id: u64) -> bool {
        self.slot(id).is_some_and(|s| s.paused)
    }

    /// Entries the updates have visited since construction: each taken from a heap or read from
    /// a sorted list (the work an update did beyond its binary searches and heap tops).
    pub fn visits(&self) -> u64 {
        self.visits
    }

    /// True when a one-pair `funding` alert may be made now (§17): funding not known yet (it
    /// will arm on the first value on the near side), or its level on the far side of `rate8h`
    /// ([`FundingLevel::on_far_side`]). False is the caller's 422.
    pub fn funding_may_create(&self, level: &FundingLevel) -> bool {
        self.rate8h.is_none_or(|r| level.on_far_side(r))
    }

    fn slot(&self, id: u64) -> Option<&Slot> {
        self.ids.get(&id).map(|&s| &self.slots[s as usize])
    }

    /// Adds an alert, armed as if made now (no firing at creation). An alert already held with
    /// the same condition and repeat flag only gets the new cooldown, counted from its last
    /// firing (§16's `PATCH`; a cluster's market node may be told of one alert twice); one held
    /// with another spec is replaced. Not the update path: it may allocate (see the bounds).
    pub fn insert(&mut self, spec: PerpAlertSpec) -> Result<(), InsertError> {
        if let PerpCondition::Oi { window, change } = spec.condition {
            if !window.has_oi() {
                return Err(InsertError::Window(window));
            }
            if change.pct_micro <= 0 {
                return Err(InsertError::Pct(change.pct_micro));
            }
        }
        if let Some(&s) = self.ids.get(&spec.id) {
            let held = &mut self.slots[s as usize];
            if held.spec.condition == spec.condition && held.spec.repeat == spec.repeat {
                retune_cooldown(&mut held.cooldown_ms, &mut held.quiet_until_ms, spec.cooldown_s);
                held.spec.cooldown_s = spec.cooldown_s;
                return Ok(());
            }
            self.remove(spec.id);
        }
        if self.ids.len() >= self.alerts_max {
            return Err(InsertError::Full { alerts_max: self.alerts_max });
        }
        let s = self.take_slot(spec);
        self.reserve_for(&spec.condition);
        let (arm, gated) = self.as_if_made(&spec.condition);
        let slot = &mut self.slots[s as usize];
        (slot.arm, slot.gated) = (arm, gated);
        self.place(s);
        Ok(())
    }

    /// Removes alert `id`; true if it was held. O(log n) (an `order` alert: a binary search and
    /// a shift of its list).
    pub fn remove(&mut self, id: u64) -> bool {
        let Some(&s) = self.ids.get(&id) else { return false };
        self.detach(s);
        self.release(s);
        true
    }

    /// Pauses alert `id` (§16: not evaluated, fires nothing) until [`PerpAlertBook::rearm`];
    /// true if it is held. Costs as [`PerpAlertBook::remove`].
    pub fn pause(&mut self, id: u64) -> bool {
        let Some(&s) = self.ids.get(&id) else { return false };
        self.detach(s);
        self.slots[s as usize].paused = true;
        true
    }

    /// Puts alert `id` back as if made now, paused or not (§16's resume; §17's "a cooled-down
    /// firing re-arms as if made"): armed when its condition does not hold on the last values
    /// handed, else waiting until it no longer does. True if it is held. Costs as
    /// [`PerpAlertBook::remove`]; allocates nothing.
    pub fn rearm(&mut self, id: u64) -> bool {
        let Some(&s) = self.ids.get(&id) else { return false };
        self.detach(s);
        let (arm, gated) = self.as_if_made(&self.slots[s as usize].spec.condition);
        let slot = &mut self.slots[s as usize];
        (slot.arm, slot.gated, slot.paused) = (arm, gated, false);
        self.place(s);
        true
    }

    /// Takes one venue message's liquidations for the `order` alerts: each alert whose side has
    /// a liquidation worth its `min_usd` or more fires once, for the largest (the first of equal
    /// ones), with the count of those that qualified. Firings go to `out`, which must have room
    /// for [`PerpAlertBook::firings_max`] more. O(k log k + log n + fired); allocates nothing.
    pub fn on_liquidations(&mut self, liqs: &[Liquidation], out: &mut Vec<PerpFiring>) {
        if self.orders.iter().all(Vec::is_empty) || liqs.is_empty() {
            return;
        }
        let sorted = liqs.len() <= LIQS_PER_MESSAGE_MAX;
        let mut largest: [Option<(i64, usize)>; 2] = [None; 2];
        for s in &mut self.scratch {
            s.clear();
        }
        for (i, l) in liqs.iter().enumerate() {
            let (side, c) = (side_index(l.side), cents(l.usd()));
            if largest[side].is_none_or(|(top, _)| c > top) {
                largest[side] = Some((c, i));
            }
            if sorted {
                debug_assert!(self.scratch[side].len() < self.scratch[side].capacity(), "reserved at insert");
                self.scratch[side].push(c);
            }
        }
        if sorted {
            for s in &mut self.scratch {
                s.sort_unstable();
            }
        }
        for d in LIQ_DIRECTIONS {
            let top = match d {
                LiqDirection::Long => largest[0],
                LiqDirection::Short => largest[1],
                LiqDirection::Any => match (largest[0], largest[1]) {
                    (Some(l), Some(s)) => Some(if s.0 > l.0 || (s.0 == l.0 && s.1 < l.1) { s } else { l }),
                    (l, s) => l.or(s),
                },
            };
            let Some((top_cents, index)) = top else { continue };
            self.fire_orders(d, top_cents, index, liqs, sorted, out);
        }
    }

    /// Fires the `order` alerts of direction `d` that the message's largest liquidation of that
    /// side (`index`, worth `top_cents`) reaches: a prefix of its sorted list. One-shot alerts
    /// that fired leave the list in one shift.
    fn fire_orders(
        &mut self,
        d: LiqDirection,
        top_cents: i64,
        index: usize,
        liqs: &[Liquidation],
        sorted: bool,
        out: &mut Vec<PerpFiring>,
    ) {
        let di = liq_index(d);
        let reached = self.orders[di].partition_point(|e| e.0 <= top_cents);
        let liquidation = liqs[index];
        let mut kept = 0;
        for j in 0..reached {
            let (key, s) = self.orders[di][j];
            self.visits += 1;
            let count = if sorted {
                let at_least = |v: &Vec<i64>| v.len() - v.partition_point(|c| *c < key);
                match d {
                    LiqDirection::Long => at_least(&self.scratch[0]),
                    LiqDirection::Short => at_least(&self.scratch[1]),
                    LiqDirection::Any => at_least(&self.scratch[0]) + at_least(&self.scratch[1]),
                }
            } else {
                liqs.iter().filter(|l| side_matches(d, l.side) && cents(l.usd()) >= key).count()
            };
            let count = u32::try_from(count).unwrap_or(u32::MAX);
            let hit = PerpHit::Order { index, liquidation, count };
            if self.fire(s, liquidation.time_ms, hit, out) {
                self.orders[di][kept] = (key, s);
                kept += 1;
            }
        }
        if kept < reached {
            self.orders[di].drain(kept..reached);
        }
    }

    /// Takes window `window`'s liquidation sums after an update at `ts_ms` (a liquidation, or the
    /// window moving; `None`: not known) for the `sum` alerts over it. Firings go to `out` as
    /// [`PerpAlertBook::on_liquidations`]'. O((1 + changed) · log n); allocates nothing.
    pub fn on_sums(&mut self, window: PerpInterval, ts_ms: i64, sums: Option<LiqSums>, out: &mut Vec<PerpFiring>) {
        let w = window.index();
        let sums = sums.filter(|s| s.long_usd.is_finite() && s.short_usd.is_finite());
        self.sums[w] = sums;
        let Some(sums) = sums else { return };
        for d in LIQ_DIRECTIONS {
            let g = sum_group(w, d);
            if self.group_len[g] == 0 {
                continue;
            }
            let sum_usd = LiqSum { direction: d, min_usd_cents: 0 }.sum(sums.long_usd, sums.short_usd);
            self.step_group(g, cents(sum_usd), ts_ms, PerpHit::Sum { window, side: d, sum_usd }, out);
        }
    }

    /// Takes an OI update at `ts_ms`: window `window`'s `oiChange` (percent; `None`: not known)
    /// and the pair's `oiUsd`, for the `oi` alerts over that window. The `min_usd` gate moves
    /// first, then the alerts that qualify fire and re-arm. Firings go to `out` as
    /// [`PerpAlertBook::on_liquidations`]'. O((1 + changed) · log n); allocates nothing.
    pub fn on_oi(
        &mut self,
        window: PerpInterval,
        ts_ms: i64,
        change_pct: Option<f64>,
        oi_usd: Option<f64>,
        out: &mut Vec<PerpFiring>,
    ) {
        let w = window.index();
        let usd = oi_usd.filter(|u| u.is_finite()).unwrap_or(0.0).max(0.0);
        let change_pct = change_pct.filter(|c| c.is_finite());
        self.oi_usd[w] = usd;
        self.oi_change_micro[w] = change_pct.map(micro);
        if self.gate_len[w] > 0 {
            self.gate(w, usd);
        }
        let Some(change_pct) = change_pct else { return };
        let change = micro(change_pct);
        for d in OI_DIRECTIONS {
            let g = oi_group(w, d);
            if self.group_len[g] == 0 {
                continue;
            }
            self.step_group(g, oi_value(d, change), ts_ms, PerpHit::Oi { window, change_pct, oi_usd: usd }, out);
        }
    }

    /// Takes a funding update at `ts_ms` (`rate8h`, percent per 8 h) for the `funding` alerts.
    /// Firings go to `out` as [`PerpAlertBook::on_liquidations`]'. O((1 + changed) · log n);
    /// allocates nothing. A value that is not finite is left out.
    pub fn on_funding(&mut self, ts_ms: i64, rate8h: f64, out: &mut Vec<PerpFiring>) {
        if !rate8h.is_finite() {
            return;
        }
        self.rate8h = Some(rate8h);
        let rate = micro(rate8h);
        for d in [FundingDirection::Above, FundingDirection::Below] {
            let g = funding_group(d);
            if self.group_len[g] > 0 {
                self.step_group(g, funding_value(d, rate), ts_ms, PerpHit::Funding { rate8h }, out);
            }
        }
    }

    /// One update of group `g` at value `v`: the disarmed alerts whose re-arm key is above `v`
    /// arm, then the armed ones whose key `v` reaches fire (a re-armed one never does: its
    /// re-arm key is at most its firing key).
    fn step_group(&mut self, g: usize, v: i64, ts_ms: i64, hit: PerpHit, out: &mut Vec<PerpFiring>) {
        let (armed, disarmed) = (2 * g, 2 * g + 1);
        // A disarmed alert's key is minus its re-arm bound: it re-arms when v < bound.
        let floor = v.saturating_neg();
        while let Some((key, s)) = self.heaps[disarmed].peek() {
            if key >= floor {
                break;
            }
            self.heaps[disarmed].pop(&mut self.pos);
            self.visits += 1;
            let slot = &mut self.slots[s as usize];
            (slot.arm, slot.heap) = (Arm::Armed, NOWHERE);
            self.push_group(s);
        }
        while let Some((key, s)) = self.heaps[armed].peek() {
            if key > v {
                break;
            }
            self.heaps[armed].pop(&mut self.pos);
            self.visits += 1;
            self.slots[s as usize].heap = NOWHERE;
            if self.fire(s, ts_ms, hit, out) {
                self.slots[s as usize].arm = Arm::Spent;
                self.push_group(s);
            }
        }
    }

    /// Moves window `w`'s `oi` alerts across the `min_usd` gate at `oiUsd` = `usd`: out go the
    /// qualifying ones whose `min_usd` is above it (largest first), in come the gated ones it
    /// reaches (smallest first). Their arm is kept.
    fn gate(&mut self, w: usize, usd: f64) {
        let (gated, qualifying) = gate_heaps(w);
        while let Some((key, s)) = self.heaps[qualifying].peek() {
            let min = key.saturating_neg();
            if usd >= min as f64 {
                break;
            }
            self.heaps[qualifying].pop(&mut self.gate_pos);
            self.visits += 1;
            self.leave_group(s);
            self.slots[s as usize].gated = true;
            self.heaps[gated].push(min, s, &mut self.gate_pos);
        }
        while let Some((min, s)) = self.heaps[gated].peek() {
            if usd < min as f64 {
                break;
            }
            self.heaps[gated].pop(&mut self.gate_pos);
            self.visits += 1;
            self.slots[s as usize].gated = false;
            self.heaps[qualifying].push(min.saturating_neg(), s, &mut self.gate_pos);
            self.push_group(s);
        }
    }

    /// Records a firing of slot `s` at `ts_ms` (unless within its cooldown); true when the alert
    /// stays (repeating), false when it left the book.
    fn fire(&mut self, s: u32, ts_ms: i64, hit: PerpHit, out: &mut Vec<PerpFiring>) -> bool {
        let slot = &mut self.slots[s as usize];
        let ts_ms = if slot.last_ms == i64::MIN { ts_ms } else { ts_ms.max(slot.last_ms.saturating_add(1)) };
        let repeat = slot.spec.repeat;
        if ts_ms >= slot.quiet_until_ms {
            slot.quiet_until_ms = ts_ms.saturating_add(slot.cooldown_ms);
            slot.last_ms = ts_ms;
            debug_assert!(out.len() < out.capacity(), "the firing buffer must be reserved (firings_max)");
            out.push(PerpFiring { id: slot.spec.id, ts_ms, last: !repeat, hit });
        } else {
            debug_assert!(repeat, "a one-shot alert fires once: it has no cooldown to be in");
        }
        if !repeat {
            // Taken out of its heap or list by the caller already.
            if let Some(w) = gate_window(&slot.spec.condition) {
                let h = if slot.gated { gate_heaps(w).0 } else { gate_heaps(w).1 };
                let i = self.gate_pos[s as usize] as usize;
                self.heaps[h].remove_at(i, &mut self.gate_pos);
            }
            self.release(s);
        }
        repeat
    }

    /// A slot for a new alert, and its id.
    fn take_slot(&mut self, spec: PerpAlertSpec) -> u32 {
        let slot = Slot {
            spec,
            live: true,
            paused: false,
            gated: false,
            arm: Arm::Waiting,
            heap: NOWHERE,
            cooldown_ms: i64::from(spec.cooldown_s) * 1_000,
            quiet_until_ms: i64::MIN,
            last_ms: i64::MIN,
            next_free: NOWHERE,
        };
        let s = if self.free != NOWHERE {
            let s = self.free;
            self.free = self.slots[s as usize].next_free;
            self.slots[s as usize] = slot;
            s
        } else {
            let s = u32::try_from(self.slots.len()).unwrap_or(NOWHERE);
            assert!(s != NOWHERE, "slot index overflow");
            self.slots.push(slot);
            self.pos.push(NOWHERE);
            self.gate_pos.push(NOWHERE);
            s
        };
        self.ids.insert(spec.id, s);
        s
    }

    /// Counts a new alert of `condition` and reserves room for all of its group in every heap or
    /// list it can move between, so that no update, pause or re-arm ever grows one.
    fn reserve_for(&mut self, condition: &PerpCondition) {
        match *condition {
            PerpCondition::Order(o) => {
                let d = liq_index(o.direction);
                self.order_len[d] += 1;
                let room = self.order_len[d].saturating_sub(self.orders[d].len());
                self.orders[d].reserve(room);
                for s in &mut self.scratch {
                    s.reserve(LIQS_PER_MESSAGE_MAX);
                }
            }
            c => {
                let g = group(&c);
                self.group_len[g] += 1;
                let n = self.group_len[g];
                self.heaps[2 * g].reserve_total(n);
                self.heaps[2 * g + 1].reserve_total(n);
                if let Some(w) = gate_window(&c) {
                    self.gate_len[w] += 1;
                    let (gated, qualifying) = gate_heaps(w);
                    self.heaps[gated].reserve_total(self.gate_len[w]);
                    self.heaps[qualifying].reserve_total(self.gate_len[w]);
                }
            }
        }
    }

    /// Frees slot `s` (already out of every heap and list): its id leaves, its counts drop.
    fn release(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        debug_assert!(slot.live && slot.heap == NOWHERE, "a released alert is out of its heaps");
        slot.live = false;
        slot.next_free = self.free;
        let condition = slot.spec.condition;
        self.ids.remove(&slot.spec.id);
        self.free = s;
        match condition {
            PerpCondition::Order(o) => self.order_len[liq_index(o.direction)] -= 1,
            c => {
                self.group_len[group(&c)] -= 1;
                if let Some(w) = gate_window(&c) {
                    self.gate_len[w] -= 1;
                }
            }
        }
    }

    /// Takes slot `s` out of every heap and list it is in (none when paused).
    fn detach(&mut self, s: u32) {
        let slot = self.slots[s as usize];
        if slot.paused {
            return;
        }
        match slot.spec.condition {
            PerpCondition::Order(o) => {
                let list = &mut self.orders[liq_index(o.direction)];
                let key = order_key(&o);
                let from = list.partition_point(|e| e.0 < key);
                let at = list[from..].iter().take_while(|e| e.0 == key).position(|e| e.1 == s);
                debug_assert!(at.is_some(), "a placed order alert is in its list");
                if let Some(at) = at {
                    list.remove(from + at);
                }
            }
            c => {
                self.leave_group(s);
                if let Some(w) = gate_window(&c) {
                    let h = if slot.gated { gate_heaps(w).0 } else { gate_heaps(w).1 };
                    let i = self.gate_pos[s as usize] as usize;
                    self.heaps[h].remove_at(i, &mut self.gate_pos);
                }
            }
        }
    }

    /// Takes slot `s` out of its group heap, if it is in one.
    fn leave_group(&mut self, s: u32) {
        let h = self.slots[s as usize].heap;
        if h != NOWHERE {
            let i = self.pos[s as usize] as usize;
            self.heaps[h as usize].remove_at(i, &mut self.pos);
            self.slots[s as usize].heap = NOWHERE;
        }
    }

    /// Puts slot `s` (not paused, out of everything) where its state says.
    fn place(&mut self, s: u32) {
        let slot = self.slots[s as usize];
        debug_assert!(!slot.paused && slot.heap == NOWHERE);
        match slot.spec.condition {
            PerpCondition::Order(o) => {
                let list = &mut self.orders[liq_index(o.direction)];
                let key = order_key(&o);
                let at = list.partition_point(|e| e.0 <= key);
                debug_assert!(list.len() < list.capacity(), "reserved at insert");
                list.insert(at, (key, s));
            }
            c => {
                if let Some(w) = gate_window(&c) {
                    let min = gate_key(&c);
                    let (gated, qualifying) = gate_heaps(w);
                    if slot.gated {
                        self.heaps[gated].push(min, s, &mut self.gate_pos);
                    } else {
                        self.heaps[qualifying].push(min.saturating_neg(), s, &mut self.gate_pos);
                    }
                }
                if !slot.gated {
                    self.push_group(s);
                }
            }
        }
    }

    /// Puts slot `s` in its group's heap for its arm: armed by the value it fires at, disarmed by
    /// minus the value it re-arms below.
    fn push_group(&mut self, s: u32) {
        let slot = self.slots[s as usize];
        let g = group(&slot.spec.condition);
        let fire = fire_key(&slot.spec.condition);
        let (h, key) = match slot.arm {
            Arm::Armed => (2 * g, fire),
            arm => (2 * g + 1, rearm_key(&slot.spec.condition, fire, arm).saturating_neg()),
        };
        self.heaps[h].push(key, s, &mut self.pos);
        self.slots[s as usize].heap = h as u32;
    }

    /// The arm and gate of an alert made now, from the last values handed: armed when its
    /// condition does not hold, waiting when it holds or is not known; an `oi` alert whose
    /// `min_usd` the pair's `oiUsd` is under is gated and waiting.
    fn as_if_made(&self, condition: &PerpCondition) -> (Arm, bool) {
        let armed_below = |v: Option<i64>, fire: i64| match v {
            Some(v) if v < fire => Arm::Armed,
            _ => Arm::Waiting,
        };
        match *condition {
            PerpCondition::Order(_) => (Arm::Armed, false),
            PerpCondition::Sum { window, sum } => {
                let v = self.sums[window.index()].map(|s| cents(sum.sum(s.long_usd, s.short_usd)));
                (armed_below(v, fire_key(condition)), false)
            }
            PerpCondition::Oi { window, change } => {
                let w = window.index();
                if change.min_usd > 0 && self.oi_usd[w] < change.min_usd as f64 {
                    return (Arm::Waiting, true);
                }
                let v = self.oi_change_micro[w].map(|c| oi_value(change.direction, c));
                (armed_below(v, change.pct_micro), false)
            }
            PerpCondition::Funding(f) => {
                let v = self.rate8h.map(|r| funding_value(f.direction, micro(r)));
                (armed_below(v, fire_key(condition)), false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perp_alert::OiChange;

    #[test]
    fn the_heaps_stay_sound_through_every_operation() {
        let mut book = PerpAlertBook::new(64);
        let mut out = Vec::with_capacity(64);
        for id in 0..48u64 {
            let window = PerpInterval::OI[id as usize % 3];
            let change = OiChange {
                direction: OI_DIRECTIONS[id as usize % 3],
                pct_micro: 1_000_000 + (id as i64 % 7) * 1_000_000,
                min_usd: (id % 4) * 1_000,
            };
            let spec = PerpAlertSpec {
                id,
                condition: PerpCondition::Oi { window, change },
                repeat: id % 5 != 0,
                cooldown_s: 0,
            };
            book.insert(spec).expect("room");
        }
        let sound = |b: &PerpAlertBook| {
            b.heaps.iter().enumerate().all(|(h, x)| x.is_sound(if h < 2 * GROUPS { &b.pos } else { &b.gate_pos }))
        };
        for (k, change) in [3.0, 9.0, -7.5, 0.5, 12.0, -12.0, 2.0].into_iter().enumerate() {
            for w in &PerpInterval::OI[..3] {
                out.clear();
                book.on_oi(*w, k as i64, Some(change), Some(k as f64 * 700.0), &mut out);
                assert!(sound(&book), "after {change} on {w:?}");
            }
            book.pause(k as u64 * 3);
            book.rearm(k as u64 * 3 + 1);
            book.remove(k as u64 * 3 + 2);
            assert!(sound(&book));
        }
    }
}
