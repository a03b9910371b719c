//! The version of each alert's state a shard last applied (`decisions.md` §16, "One order"):
//! storage numbers every write of an alert's row, and a change reaches the shard with that
//! number ([`rampart_state::AlertChange`]). Two front threads, two api nodes, the writer and the
//! front may hand a shard one alert's changes in another order than storage applied them; the
//! shard applies a change only when its version is above the last one it applied for that alert,
//! so whatever the order it ends holding the newest stored state.
//!
//! An alert that left the shard (paused, ended, deleted) is remembered as gone at its version,
//! so that an older change still on its way (the `Held` of a resume overtaken by a later pause)
//! cannot put it back. Sans I/O: a table, no clock.

use std::collections::{HashMap, VecDeque};

/// How many alerts a shard remembers as gone (with the version they left at). At the bound the
/// oldest is forgotten: a change older than that alert's removal, arriving after this many later
/// removals on the same shard, would be applied (in a process, a change waits microseconds
/// between its commit and the shard's queue; on a cluster's wire, milliseconds). What such a
/// change could put back fires nothing that storage records: storage records no firing of a
/// paused, ended or deleted alert.
pub const GONE_REMEMBERED_MAX: usize = 16_384;

/// The last version applied per alert.
#[derive(Debug)]
pub struct AlertVersions {
    /// Per alert id: the version of the last change applied, and whether it left the alert held.
    last: HashMap<u64, (u64, bool)>,
    /// The alerts whose last change applied was a removal, oldest first, with that version.
    /// Capacity [`GONE_REMEMBERED_MAX`], reserved at start.
    gone: VecDeque<(u64, u64)>,
}

impl Default for AlertVersions {
    fn default() -> AlertVersions {
        AlertVersions { last: HashMap::new(), gone: VecDeque::with_capacity(GONE_REMEMBERED_MAX) }
    }
}

impl AlertVersions {
    /// Takes a change of alert `id` at `version` that leaves it held (`held`) or gone: true when
    /// it is newer than every change applied for `id` (recorded: apply it), false when it is the
    /// same or older (drop it).
    pub fn admit(&mut self, id: u64, version: u64, held: bool) -> bool {
        if self.last.get(&id).is_some_and(|&(applied, _)| applied >= version) {
            return false;
        }
        self.last.insert(id, (version, held));
        if !held {
            self.remember_gone(id, version);
        }
        true
    }

    /// The shard took alert `id` off by itself (its pair was delisted): remembered as gone at the
    /// version it held, so an older change cannot put it back on the book.
    pub fn left(&mut self, id: u64) {
        if let Some(&(version, true)) = self.last.get(&id) {
            self.last.insert(id, (version, false));
            self.remember_gone(id, version);
        }
    }

    /// The version last applied for `id`, and whether it left the alert held.
    pub fn last(&self, id: u64) -> Option<(u64, bool)> {
        self.last.get(&id).copied()
    }

    fn remember_gone(&mut self, id: u64, version: u64) {
        if self.gone.len() == GONE_REMEMBERED_MAX {
            if let Some((old, at)) = self.gone.pop_front() {
                // Forgotten only if nothing newer was applied for it since.
                if self.last.get(&old) == Some(&(at, false)) {
                    self.last.remove(&old);
                }
            }
        }
        debug_assert!(self.gone.len() < self.gone.capacity(), "the ring's room was reserved at start");
        self.gone.push_back((id, version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_applied_only_when_newer_than_the_last_applied() {
        let mut v = AlertVersions::default();
        assert!(v.admit(7, 1, true), "the first");
        assert!(!v.admit(7, 1, true), "the same again (a reload)");
        assert!(v.admit(7, 3, false), "a pause");
        assert!(!v.admit(7, 2, true), "a resume overtaken by the pause it preceded");
        assert_eq!(v.last(7), Some((3, false)));
        assert!(v.admit(7, 4, true), "the next resume");
        assert!(!v.admit(7, 3, false), "a stale pause");
        assert_eq!(v.last(7), Some((4, true)));
        assert!(v.admit(8, 5, true), "another alert is its own line");
    }

    #[test]
    fn an_alert_its_shard_took_off_stays_off_against_older_changes() {
        let mut v = AlertVersions::default();
        assert!(v.admit(1, 2, true));
        v.left(1);
        assert_eq!(v.last(1), Some((2, false)));
        assert!(!v.admit(1, 2, true), "its own add again");
        v.left(9);
        assert_eq!(v.last(9), None, "never held: nothing to remember");
    }

    #[test]
    fn at_the_bound_the_oldest_gone_alert_is_forgotten_and_nothing_newer() {
        let mut v = AlertVersions::default();
        let room = v.gone.capacity();
        for id in 0..GONE_REMEMBERED_MAX as u64 {
            assert!(v.admit(id, 2, false));
        }
        // Alert 1 is held again since its removal: its newer state must not be forgotten.
        assert!(v.admit(1, 3, true));
        assert!(v.admit(1_000_000, 2, false), "one past the bound");
        assert_eq!(v.last(0), None, "the oldest removal is forgotten");
        assert!(v.admit(1_000_001, 2, false), "another");
        assert_eq!(v.last(1), Some((3, true)), "a held alert stays");
        assert_eq!(v.gone.len(), GONE_REMEMBERED_MAX);
        assert_eq!(v.gone.capacity(), room, "the ring never grew");
    }
}
