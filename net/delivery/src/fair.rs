//! A destination's bound shared fairly across accounts (issue #36), sans-I/O: the slots held at
//! each destination (a host name, or a host and port), in all and per account, and the rule
//! that decides whether one more attempt of an account may start there.
//!
//! The rule ([`fair_fits`]): an account that holds no slot at a destination may take any free
//! one; an account that already holds some may take another only while a quarter of the bound
//! (at least one slot) stays free, and while it holds less than an equal share of the other
//! three quarters among the accounts holding slots there. So one account's hanging receivers
//! (each attempt holds its slot until the 10 s cut) can never keep another account waiting at the
//! same destination: a newcomer finds a free slot at once, and the accounts already there are
//! held to their shares until their attempts end. The bound itself is never passed.

use std::collections::HashMap;
use std::hash::Hash;

/// The share of a destination's bound kept free for accounts holding nothing there (a
/// quarter, at least one slot).
pub const NEWCOMER_RESERVE_DIVISOR: usize = 4;

/// Whether one more attempt may start at a destination whose bound is `max`, where `held` are in
/// flight, `own` of them the account's, and `holders` accounts hold at least one (the module's
/// rule).
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

/// Slots held at each destination of one kind (`K`: a host name, or a host and port).
#[derive(Debug)]
pub struct Shares<K> {
    held: HashMap<K, usize>,
    own: HashMap<(i64, K), usize>,
    holders: HashMap<K, usize>,
}

impl<K> Default for Shares<K> {
    fn default() -> Shares<K> {
        Shares { held: HashMap::new(), own: HashMap::new(), holders: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone> Shares<K> {
    /// Whether `account` may start one more attempt at `key`, bounded by `max` ([`fair_fits`]).
    pub fn fits(&self, account: i64, key: &K, max: usize) -> bool {
        let held = self.held.get(key).copied().unwrap_or(0);
        let own = self.own.get(&(account, key.clone())).copied().unwrap_or(0);
        let holders = self.holders.get(key).copied().unwrap_or(0);
        fair_fits(max, held, own, holders)
    }

    /// Takes (`up`) or gives back one of `account`'s slots at `key`.
    pub fn hold(&mut self, account: i64, key: &K, up: bool) {
        let own = self.own.entry((account, key.clone())).or_insert(0);
        let before = *own;
        *own = if up { before + 1 } else { before.saturating_sub(1) };
        let after = *own;
        if after == 0 {
            self.own.remove(&(account, key.clone()));
        }
        debug_assert!(up || before > 0, "a slot given back that was not held");
        count(&mut self.held, key, up);
        if before == 0 && after == 1 {
            count(&mut self.holders, key, true);
        } else if before == 1 && after == 0 {
            count(&mut self.holders, key, false);
        }
    }

    /// Slots held at `key`, all accounts.
    pub fn held(&self, key: &K) -> usize {
        self.held.get(key).copied().unwrap_or(0)
    }

    /// Nothing held anywhere (every count back at zero is forgotten).
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.own.is_empty() && self.holders.is_empty()
    }
}

/// Counts one more (`up`) or one fewer slot under `key`; a count at zero is forgotten.
pub(crate) fn count<K: Hash + Eq + Clone>(map: &mut HashMap<K, usize>, key: &K, up: bool) {
    if up {
        *map.entry(key.clone()).or_insert(0) += 1;
        return;
    }
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
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
