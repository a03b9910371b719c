//! The slots an attempt holds and the bounds it is counted under (the single sender's and each
//! cluster delivery worker's, `rampart_cluster::worker`), sans-I/O: its account's, its host
//! name's, its host and port's, and the sender's whole width; and, when a delivery waits at a full
//! bound while another account holds more than its part there, which account gives a slot back
//! ([`Holdings::plan`], the rule in [`fair`]).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use rampart_outbound::ssrf::{self, Host};
use rampart_store::store::OutboxRow;

use crate::attempt::destination;
use crate::config::DeliveryConfig;
use crate::fair;
use crate::telegram::TelegramChannel;

/// The keys one attempt holds a slot under, freed together when it ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The alert's account.
    pub account: i64,
    /// Host name or IP literal, lower case, without the port.
    pub address: String,
    /// Host and port, lower case.
    pub authority: String,
}

impl Slot {
    /// The slot of `row` at its destination (for a Telegram row, the bot's base URL).
    pub fn of(row: &OutboxRow, telegram: Option<&TelegramChannel>) -> Slot {
        let url = destination(row, telegram).unwrap_or_default();
        match ssrf::parse(&url) {
            Ok(u) => {
                let authority = u.authority.to_ascii_lowercase();
                let address = match &u.host {
                    Host::Name(n) => n.to_ascii_lowercase(),
                    Host::Ip(ip) => ip.to_string(),
                };
                Slot { account: row.account_id, address, authority }
            }
            // Refused at the attempt; the empty keys still bound such rows together.
            Err(_) => Slot { account: row.account_id, address: String::new(), authority: String::new() },
        }
    }

    /// Whether an attempt holding `self` is counted under `bound` where `other` waits.
    pub fn shares(&self, other: &Slot, bound: Bound) -> bool {
        match bound {
            Bound::Host => self.authority == other.authority,
            Bound::Address => self.address == other.address,
            Bound::Width => true,
        }
    }
}

/// Slots held, counted under each bound's key: the sender's width (and in it each account's),
/// and each destination's, all shared fairly across accounts ([`fair`]).
#[derive(Debug, Default)]
pub struct Holdings {
    /// The sender's width; an account's own count there is its account bound's.
    all: fair::Shares<()>,
    /// At each host name.
    per_address: fair::Shares<String>,
    /// At each host and port.
    per_host: fair::Shares<String>,
}

/// Accounts with a delivery waiting for a slot this round, under each key: with the accounts
/// holding slots there, the demand that sets each account's part ([`fair::share`]).
#[derive(Debug, Default)]
pub struct Demand {
    all: HashSet<i64>,
    per_address: HashMap<String, HashSet<i64>>,
    per_host: HashMap<String, HashSet<i64>>,
}

impl Demand {
    /// Counts `slot`'s account as waiting under each of its keys.
    pub fn wait(&mut self, slot: &Slot) {
        self.all.insert(slot.account);
        self.per_address.entry(slot.address.clone()).or_default().insert(slot.account);
        self.per_host.entry(slot.authority.clone()).or_default().insert(slot.account);
    }
}

/// One of the bounds a delivery may wait at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Its host and port (`per_host_max`).
    Host,
    /// Its host name (`per_address_max`).
    Address,
    /// The sender's whole width (the single sender's `in_flight_max`, a worker thread's slots).
    Width,
}

/// The sender's whole width as the caller sees it: its bound, and whether its own admission
/// rule (room, the account bound and its borrowing) lets the delivery start now.
#[derive(Clone, Copy, Debug)]
pub struct Width {
    /// Attempts in flight at most.
    pub max: usize,
    /// The caller's rule admits the delivery under the width.
    pub admits: bool,
    /// A cut would let it start once the width has a free slot (the width is the only thing
    /// that refuses: not the account bound, not a backlog of unrecorded outcomes).
    pub cut_helps: bool,
}

/// What to do with a waiting delivery ([`Holdings::plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Every bound has room for it.
    Start,
    /// A bound is full and `account` holds more than its part there: cut one of its attempts
    /// under `bound` (one that has run [`fair::CUT_AFTER`]), then plan again.
    Cut {
        /// Where: the waiting delivery's host and port, host name, or the sender's width.
        bound: Bound,
        /// Whose attempt.
        account: i64,
    },
    /// It waits for an attempt to end.
    Wait,
}

/// The attempt to cut for `plan`'s `Plan::Cut { bound, account }` where `waiting` waits: among
/// `flights` (each one's key, slot and start), the youngest of `account`'s under `bound` that
/// has run [`fair::CUT_AFTER`] (the single sender's and each cluster worker thread's choice).
pub fn victim<'a, T: Copy + 'a>(
    flights: impl Iterator<Item = (T, &'a Slot, std::time::Instant)>,
    waiting: &Slot,
    bound: Bound,
    account: i64,
) -> Option<T> {
    flights
        .filter(|(_, slot, started)| {
            slot.account == account && slot.shares(waiting, bound) && started.elapsed() >= fair::CUT_AFTER
        })
        .max_by_key(|(_, _, started)| *started)
        .map(|(key, _, _)| key)
}

/// How many accounts have demand at `key`: those holding slots there and those waiting for one.
fn demanders<K: Hash + Eq + Clone>(shares: &fair::Shares<K>, key: &K, waiting: Option<&HashSet<i64>>) -> usize {
    let newcomers = waiting.map_or(0, |w| w.iter().filter(|&&a| !shares.holds(a, key)).count());
    shares.holders(key) + newcomers
}

/// The plan at one destination bound: room, a cut of the account furthest over its part, or wait.
fn plan_at<K: Hash + Eq + Clone>(
    shares: &fair::Shares<K>,
    key: &K,
    max: usize,
    account: i64,
    waiting: Option<&HashSet<i64>>,
    bound: Bound,
) -> Plan {
    let (held, own, d) = (shares.held(key), shares.own(account, key), demanders(shares, key, waiting));
    if fair::fits_with_demand(max, held, own, shares.holders(key), d) {
        return Plan::Start;
    }
    if held < max || !fair::under_share(max, own, d) {
        return Plan::Wait;
    }
    match shares.most_over(key, fair::share(max, d), account) {
        Some(over) => Plan::Cut { bound, account: over },
        None => Plan::Wait,
    }
}

impl Holdings {
    /// Whether `slot` fits under its account's bound.
    pub fn account_fits(&self, slot: &Slot, c: &DeliveryConfig) -> bool {
        self.all.own(slot.account, &()) < c.per_account_max
    }

    /// Whether `slot` fits under its destination's bounds, the host name's and the host and
    /// port's, each shared fairly across accounts ([`fair::fair_fits`]): an account holding
    /// nothing there finds any free slot, one holding some is kept to its share and leaves a
    /// quarter free, so one account's hanging receivers never hold another account's delivery
    /// to the same host (a relay shared by accounts; loopback in tests) until the 10 s cut.
    pub fn destination_fits(&self, slot: &Slot, c: &DeliveryConfig) -> bool {
        self.destination_refusal(slot, c).is_none()
    }

    /// Which of `slot`'s destination bounds refuses it ([`Holdings::destination_fits`]), the
    /// host name's looked at first: `Bound::Address` or `Bound::Host`; `None` when both fit.
    pub fn destination_refusal(&self, slot: &Slot, c: &DeliveryConfig) -> Option<Bound> {
        if !self.per_address.fits(slot.account, &slot.address, c.per_address_max) {
            return Some(Bound::Address);
        }
        if !self.per_host.fits(slot.account, &slot.authority, c.per_host_max) {
            return Some(Bound::Host);
        }
        None
    }

    /// Whether `slot`'s account may take one of `max` width slots by the admission rule
    /// ([`fair::fair_fits`]; a cluster worker thread's slots).
    pub fn width_fits(&self, slot: &Slot, max: usize) -> bool {
        self.all.fits(slot.account, &(), max)
    }

    /// Attempts in flight, all accounts.
    pub fn in_flight(&self) -> usize {
        self.all.held(&())
    }

    /// Whether more than one account has demand: holds slots, or is among `waiting` (the
    /// accounts of deliveries waiting). Only then can [`Holdings::plan`] share anything, so a
    /// caller skips it otherwise (one account's storm costs nothing more).
    pub fn contended(&self, waiting: impl Iterator<Item = i64>) -> bool {
        let mut accounts = self.all.accounts(&());
        let mut seen = accounts.next();
        if accounts.next().is_some() {
            return true;
        }
        for a in waiting {
            match seen {
                Some(s) if s != a => return true,
                _ => seen = Some(a),
            }
        }
        false
    }

    /// Takes (`up`) or frees `slot`'s counts.
    pub fn hold(&mut self, slot: &Slot, up: bool) {
        self.all.hold(slot.account, &(), up);
        self.per_address.hold(slot.account, &slot.address, up);
        self.per_host.hold(slot.account, &slot.authority, up);
    }

    /// What to do with `slot`, waiting this round beside the deliveries counted in `demand`
    /// (its own included), when the plain rules ([`Holdings::destination_fits`], the width's)
    /// held it back: start it if a bound has room for an account under its part there; if a full
    /// bound is all that holds it back and another account holds more than its part there, cut
    /// one of that account's attempts; else wait. Bounds are looked at narrowest first (a cut
    /// there frees a slot under the wider ones too).
    pub fn plan(&self, slot: &Slot, demand: &Demand, c: &DeliveryConfig, width: Width) -> Plan {
        let a = slot.account;
        let destinations = [
            (&self.per_host, &slot.authority, c.per_host_max, &demand.per_host, Bound::Host),
            (&self.per_address, &slot.address, c.per_address_max, &demand.per_address, Bound::Address),
        ];
        for (shares, key, max, waiting, bound) in destinations {
            let plan = plan_at(shares, key, max, a, waiting.get(key), bound);
            if plan != Plan::Start {
                return plan;
            }
        }
        if width.admits {
            return Plan::Start;
        }
        if !width.cut_helps {
            return Plan::Wait;
        }
        match plan_at(&self.all, &(), width.max, a, Some(&demand.all), Bound::Width) {
            // The width has room by its shares, but the caller's own rule refused: wait.
            Plan::Start => Plan::Wait,
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_store::store::Channel;

    fn slot(account: i64, host: &str, port: u16) -> Slot {
        Slot { account, address: host.to_owned(), authority: format!("{host}:{port}") }
    }

    /// Holds `slot`s for `account` on `host`, one per port, until the destination bound says no.
    fn fill(held: &mut Holdings, c: &DeliveryConfig, account: i64, host: &str) -> usize {
        let mut n = 0;
        for port in 1..=u16::MAX {
            let s = slot(account, host, port);
            if !held.destination_fits(&s, c) {
                break;
            }
            held.hold(&s, true);
            n += 1;
        }
        n
    }

    #[test]
    fn hanging_accounts_leave_a_host_to_a_newcomer() {
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        let own = fill(&mut held, &c, 1, "127.0.0.1");
        assert_eq!(own, c.per_address_max - c.per_address_max / fair::NEWCOMER_RESERVE_DIVISOR);
        assert!(held.destination_fits(&slot(2, "127.0.0.1", 1), &c), "another account finds room at once");
        assert!(held.destination_fits(&slot(1, "example.com", 1), &c), "the same account, another host");
        assert_eq!(fill(&mut held, &c, 2, "127.0.0.1"), 1, "one slot, then its share of a full part");
        assert_eq!(fill(&mut held, &c, 3, "127.0.0.1"), 1);
        assert!(held.destination_fits(&slot(4, "127.0.0.1", 1), &c), "a fourth account still finds room");
        for port in 1..=own as u16 {
            held.hold(&slot(1, "127.0.0.1", port), false);
        }
        assert!(held.destination_fits(&slot(3, "127.0.0.1", 9), &c), "freed slots are shared again");
    }

    #[test]
    fn the_host_and_port_bound_and_counts_back_to_zero() {
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        let s = slot(1, "h", 80);
        let own = c.per_host_max - c.per_host_max / fair::NEWCOMER_RESERVE_DIVISOR;
        for _ in 0..own {
            assert!(held.destination_fits(&s, &c));
            held.hold(&s, true);
        }
        assert!(!held.destination_fits(&s, &c), "per host and port: all but the newcomers' quarter");
        assert!(held.destination_fits(&slot(2, "h", 80), &c), "another account there");
        assert!(held.destination_fits(&slot(1, "h", 81), &c), "another port of the same host");
        for _ in 0..own {
            held.hold(&s, false);
        }
        assert!(held.all.is_empty() && held.per_address.is_empty(), "keys at zero are forgotten");
        assert!(held.per_host.is_empty());
    }

    /// A Telegram message of `account` to chat `chat`, as the outbox holds it.
    fn telegram_row(account: i64, chat: &str) -> OutboxRow {
        OutboxRow {
            id: account,
            alert_id: account,
            url: chat.to_owned(),
            body: "{}".to_owned(),
            state: "pending".to_owned(),
            attempts: 0,
            first_failure_ms: None,
            next_attempt_ms: 0,
            last_status: None,
            last_error: None,
            account_id: account,
            channel: Channel::Telegram,
            trigger_ms: 0,
        }
    }

    #[test]
    fn telegram_messages_of_every_account_share_the_bots_host_fairly() {
        let bot = TelegramChannel::new(Some("https://api.telegram.org"), "123:abc").expect("a bot");
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        // Every account's messages go to the one bot host, whatever the chat.
        let slots: Vec<Slot> = (1..=4).map(|a| Slot::of(&telegram_row(a, &format!("@chat{a}")), Some(&bot))).collect();
        assert!(
            slots.iter().all(|s| s.address == "api.telegram.org" && s.authority == slots[0].authority),
            "{slots:?}"
        );
        // One account's flood of messages (a noisy repeating alert) takes its share of the host and
        // port's 8 slots, all but the newcomers' quarter...
        let mut flood = 0;
        while held.destination_fits(&slots[0], &c) {
            held.hold(&slots[0], true);
            flood += 1;
        }
        assert_eq!(flood, c.per_host_max - c.per_host_max / fair::NEWCOMER_RESERVE_DIVISOR);
        // ...and the other accounts' messages find the two left at once. The host and port is
        // then full: a fourth account's message has one of the flood's attempts cut for it.
        for s in &slots[1..3] {
            assert!(held.destination_fits(s, &c), "another account's message waits behind the flood");
            held.hold(s, true);
        }
        assert!(!held.destination_fits(&slots[3], &c), "the host and port's bound holds");
        let waiting: Vec<&Slot> = slots.iter().collect();
        assert_eq!(plan(&held, &c, &slots[3], &waiting), Plan::Cut { bound: Bound::Host, account: 1 });
    }

    #[test]
    fn a_bound_of_one_still_admits_one() {
        let c = DeliveryConfig { per_address_max: 1, ..DeliveryConfig::default() };
        let mut held = Holdings::default();
        assert_eq!(fill(&mut held, &c, 1, "h"), 1);
    }

    /// The plan for `s` waiting beside `waiting` (its own account included), the width open.
    fn plan(held: &Holdings, c: &DeliveryConfig, s: &Slot, waiting: &[&Slot]) -> Plan {
        let mut demand = Demand::default();
        waiting.iter().for_each(|w| demand.wait(w));
        demand.wait(s);
        held.plan(s, &demand, c, Width { max: c.in_flight_max, admits: true, cut_helps: true })
    }

    #[test]
    fn a_fourth_account_at_a_full_host_and_port_gets_a_slot_cut_from_the_account_furthest_over_its_part() {
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        let (a, b, cc, d) = (slot(1, "h", 443), slot(2, "h", 443), slot(3, "h", 443), slot(4, "h", 443));
        // Account 1's hanging attempts came first (6 of 8), then one each of 2 and 3: full.
        while held.destination_fits(&a, &c) {
            held.hold(&a, true);
        }
        held.hold(&b, true);
        held.hold(&cc, true);
        assert!(!held.destination_fits(&d, &c), "the plain rule keeps account 4 waiting: the gap of issue #36");
        // Four accounts with demand: a part of 2 each; account 1 holds 6.
        let cut = Plan::Cut { bound: Bound::Host, account: 1 };
        assert_eq!(plan(&held, &c, &d, &[&a, &b, &cc]), cut);
        held.hold(&a, false);
        assert_eq!(plan(&held, &c, &d, &[&a, &b, &cc]), Plan::Start, "the cut slot is account 4's");
        held.hold(&d, true);
        assert_eq!(plan(&held, &c, &d, &[&a, &b, &cc]), cut, "account 4 is still under its part");
        held.hold(&a, false);
        held.hold(&d, true);
        assert_eq!(plan(&held, &c, &d, &[&a, &b, &cc]), Plan::Wait, "at its part (2): it waits");
        assert_eq!(plan(&held, &c, &a, &[&b, &cc, &d]), Plan::Wait, "account 1, over its part, waits");
        assert_eq!(plan(&held, &c, &b, &[&a, &cc, &d]), Plan::Cut { bound: Bound::Host, account: 1 });
        // Account 1 is back to 4; with the others content it is no longer cut for anyone at its part.
        held.hold(&a, false);
        held.hold(&a, false);
        held.hold(&b, true);
        held.hold(&cc, true);
        assert_eq!(plan(&held, &c, &d, &[&a, &b, &cc]), Plan::Wait, "every account at its part: wait");
    }

    #[test]
    fn more_accounts_than_slots_each_hold_one_and_the_rest_wait() {
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        for account in 1..=8 {
            held.hold(&slot(account, "h", 443), true);
        }
        let ninth = slot(9, "h", 443);
        let others: Vec<Slot> = (1..=8).map(|a| slot(a, "h", 443)).collect();
        let others: Vec<&Slot> = others.iter().collect();
        assert_eq!(plan(&held, &c, &ninth, &others), Plan::Wait, "nobody holds more than one slot: nothing to cut");
    }

    #[test]
    fn an_account_alone_is_never_cut_and_another_host_is_not_touched() {
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        let a = slot(1, "h", 443);
        while held.destination_fits(&a, &c) {
            held.hold(&a, true);
        }
        assert_eq!(plan(&held, &c, &a, &[]), Plan::Wait, "alone: the plain rule's 6 of 8");
        assert_eq!(plan(&held, &c, &slot(2, "h", 443), &[&a]), Plan::Start, "a newcomer finds the quarter");
        assert_eq!(plan(&held, &c, &slot(2, "other", 443), &[&a]), Plan::Start);
    }

    #[test]
    fn a_full_width_is_shared_by_demand_and_a_refusal_the_cut_cannot_mend_waits() {
        let c = DeliveryConfig::default();
        let mut held = Holdings::default();
        // Account 1 holds 3 of a width of 4 (other hosts each), account 2 holds 1: full.
        for port in 1..=3 {
            held.hold(&slot(1, "a", port), true);
        }
        held.hold(&slot(2, "b", 1), true);
        let s = slot(3, "c", 1);
        let mut demand = Demand::default();
        demand.wait(&s);
        let full = Width { max: 4, admits: false, cut_helps: true };
        assert_eq!(held.plan(&s, &demand, &c, full), Plan::Cut { bound: Bound::Width, account: 1 });
        assert!(slot(1, "a", 1).shares(&s, Bound::Width) && !slot(1, "a", 1).shares(&s, Bound::Host));
        let refused = Width { cut_helps: false, ..full };
        assert_eq!(held.plan(&s, &demand, &c, refused), Plan::Wait, "its account bound refuses: no cut");
    }

    #[test]
    fn one_accounts_storm_is_not_contended() {
        let mut held = Holdings::default();
        assert!(!held.contended([1, 1, 1].into_iter()), "nothing held, one account waiting");
        held.hold(&slot(1, "h", 1), true);
        assert!(!held.contended([1, 1].into_iter()), "the same account holds and waits");
        assert!(held.contended([1, 2].into_iter()), "another account waits");
        assert!(held.contended([2].into_iter()));
        held.hold(&slot(3, "h", 1), true);
        assert!(held.contended(std::iter::empty()), "two accounts hold slots");
    }
}
