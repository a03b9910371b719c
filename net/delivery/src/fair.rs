//! A bound shared fairly across accounts (issue #36), sans-I/O: the slots held under each key
//! (a host name, a host and port, or a sender's whole width), in all and per account; the rule
//! that decides whether one more attempt of an account may start there; and, when accounts
//! contend for a full bound, which account's borrowed slot is taken back.
//!
//! Admission ([`fair_fits`]): an account that holds no slot under a key may take any free one;
//! an account that already holds some may take another only while a quarter of the bound (at
//! least one slot) stays free, and while it holds less than an equal share of the other three
//! quarters among the accounts holding slots there. A newcomer therefore finds a free slot at
//! once in the common case.
//!
//! Shares by demand ([`share`], [`under_share`], [`Shares::most_over`]): the quarter can run out
//! (three accounts' hanging attempts at a host and port whose bound is 8: 6, 1 and 1). So the
//! accounts with demand under a key (holding slots there, or with a delivery waiting for one)
//! each have an equal part of the bound, at least one slot. An account under its part may take a
//! free slot whatever the quarter says; when the bound is full, the sender cuts one attempt of
//! the account furthest over its part (an attempt that has run [`CUT_AFTER`] at least) and starts
//! the waiting one in its place. The cut attempt is not an attempt the delivery spends: its row
//! stays pending and is sent again when its account is back within its part (the receiver may see
//! it twice; delivery is at least once). With more accounts waiting than the bound has slots,
//! each holds one and the others wait for the first to end.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

/// The share of a bound kept free for accounts holding nothing under it (a quarter, at least
/// one slot).
pub const NEWCOMER_RESERVE_DIVISOR: usize = 4;

/// How long an attempt beyond its account's part runs before it may be cut for an account under
/// its part: a healthy receiver has answered by then (loopback and same-region receivers answer in
/// milliseconds), and the waiting delivery starts within it.
pub const CUT_AFTER: Duration = Duration::from_millis(100);

/// Whether one more attempt may start under a bound of `max`, where `held` are in flight, `own`
/// of them the account's, and `holders` accounts hold at least one (the module's admission rule).
pub fn fair_fits(max: usize, held: usize, own: usize, holders: usize) -> bool {
    if held >= max {
        return false;
    }
    if own == 0 {
        return true;
    }
    let reserve = (max / NEWCOMER_RESERVE_DIVISOR).max(1);
    let shared = max.saturating_sub(reserve);
    held < shared && own < shared.div_ceil(holders.max(1))
}

/// Each account's part of a bound of `max` when `demanders` accounts hold slots under it or
/// wait for one: an equal part, at least one slot.
pub fn share(max: usize, demanders: usize) -> usize {
    (max / demanders.max(1)).max(1)
}

/// Whether an account holding `own` slots under a contended bound (two accounts or more with
/// demand there) holds less than its part: it may take a free slot, or have a slot beyond
/// another account's part cut for it.
pub fn under_share(max: usize, own: usize, demanders: usize) -> bool {
    demanders >= 2 && own < share(max, demanders)
}

/// Whether one more attempt may start under a bound, knowing the demand there: the admission
/// rule, or a free slot for an account under its part.
pub fn fits_with_demand(max: usize, held: usize, own: usize, holders: usize, demanders: usize) -> bool {
    held < max && (fair_fits(max, held, own, holders) || under_share(max, own, demanders))
}

/// Slots held under one key.
#[derive(Debug, Default)]
struct Held {
    all: usize,
    by_account: HashMap<i64, usize>,
}

/// Slots held under each key of one kind (`K`: a host name, a host and port, or `()` for a
/// sender's whole width).
#[derive(Debug)]
pub struct Shares<K> {
    at: HashMap<K, Held>,
}

impl<K> Default for Shares<K> {
    fn default() -> Shares<K> {
        Shares { at: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone> Shares<K> {
    /// Whether `account` may start one more attempt at `key`, bounded by `max` ([`fair_fits`]).
    pub fn fits(&self, account: i64, key: &K, max: usize) -> bool {
        fair_fits(max, self.held(key), self.own(account, key), self.holders(key))
    }

    /// Takes (`up`) or gives back one of `account`'s slots at `key`.
    pub fn hold(&mut self, account: i64, key: &K, up: bool) {
        let held = self.at.entry(key.clone()).or_default();
        let own = held.by_account.entry(account).or_insert(0);
        debug_assert!(up || *own > 0, "a slot given back that was not held");
        if up {
            *own += 1;
            held.all += 1;
        } else if *own > 0 {
            *own -= 1;
            held.all -= 1;
        }
        if *own == 0 {
            held.by_account.remove(&account);
        }
        debug_assert_eq!(held.all, held.by_account.values().sum::<usize>(), "the total is the accounts' sum");
        if held.all == 0 {
            self.at.remove(key);
        }
    }

    /// Slots held at `key`, all accounts.
    pub fn held(&self, key: &K) -> usize {
        self.at.get(key).map_or(0, |h| h.all)
    }

    /// Slots `account` holds at `key`.
    pub fn own(&self, account: i64, key: &K) -> usize {
        self.at.get(key).and_then(|h| h.by_account.get(&account)).copied().unwrap_or(0)
    }

    /// Accounts holding at least one slot at `key`.
    pub fn holders(&self, key: &K) -> usize {
        self.at.get(key).map_or(0, |h| h.by_account.len())
    }

    /// The accounts holding slots at `key`.
    pub fn accounts<'a>(&'a self, key: &K) -> impl Iterator<Item = i64> + 'a {
        self.at.get(key).into_iter().flat_map(|h| h.by_account.keys().copied())
    }

    /// Whether `account` holds a slot at `key`.
    pub fn holds(&self, account: i64, key: &K) -> bool {
        self.own(account, key) > 0
    }

    /// The account holding the most slots at `key` beyond `share`, other than `except` (ties:
    /// the lowest id, so the choice is deterministic).
    pub fn most_over(&self, key: &K, share: usize, except: i64) -> Option<i64> {
        let held = self.at.get(key)?;
        held.by_account
            .iter()
            .filter(|(&a, &n)| a != except && n > share)
            .max_by_key(|(&a, &n)| (n, std::cmp::Reverse(a)))
            .map(|(&a, _)| a)
    }

    /// Nothing held anywhere (every count back at zero is forgotten).
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes slots for `account` at `key` until the rule says no; how many it took.
    fn fill(s: &mut Shares<&'static str>, account: i64, key: &'static str, max: usize) -> usize {
        let mut n = 0;
        while s.fits(account, &key, max) {
            s.hold(account, &key, true);
            n += 1;
        }
        n
    }

    #[test]
    fn hanging_accounts_leave_room_for_a_newcomer_and_are_held_to_their_shares() {
        let mut s = Shares::default();
        // Three accounts whose receivers hang, one after the other, then a healthy one.
        assert_eq!(fill(&mut s, 1, "h", 128), 96, "alone: all but the newcomers' quarter");
        assert_eq!(fill(&mut s, 2, "h", 128), 1, "a newcomer gets a slot; then the shared part is full");
        assert_eq!(fill(&mut s, 3, "h", 128), 1);
        assert!(s.fits(4, &"h", 128), "the healthy account finds room at once");
        assert_eq!(s.held(&"h"), 98);
        // Account 1's attempts end: it may not take back more than its share while 2 and 3 hold.
        for _ in 0..96 {
            s.hold(1, &"h", false);
        }
        assert_eq!(fill(&mut s, 2, "h", 128), 47, "up to an equal share of 96 between the two holding");
        assert_eq!(fill(&mut s, 3, "h", 128), 47);
        assert_eq!(fill(&mut s, 1, "h", 128), 1, "a newcomer again: one slot, the shared part is full");
        assert!(s.fits(5, &"h", 128) && !s.fits(1, &"h", 128));
        assert!(s.fits(1, &"other", 128), "another destination is counted apart");
    }

    #[test]
    fn the_bound_holds_and_counts_go_back_to_zero() {
        let mut s = Shares::default();
        for account in 0..200 {
            if s.fits(account, &"h", 8) {
                s.hold(account, &"h", true);
            }
        }
        assert_eq!(s.held(&"h"), 8, "eight accounts with one slot each: the bound");
        assert!(!s.fits(500, &"h", 8), "full: even a newcomer waits");
        for account in 0..8 {
            s.hold(account, &"h", false);
        }
        assert!(s.is_empty(), "keys at zero are forgotten");
        assert_eq!(fill(&mut s, 1, "h", 1), 1, "a bound of one still admits one");
        assert_eq!(fill(&mut s, 1, "h2", 8), 6);
    }
}
