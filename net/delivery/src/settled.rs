//! Outcomes written while a scan of the outbox may not see them: the sender records outcomes on
//! one connection and reads due rows on another, each at its own pace, so a scan that started
//! before a record's commit may read that record's rows still pending. Each record that ends
//! well is counted; a scan carries the count at its start, and its rows written by a later record
//! are dropped (the next scan sees them written). Without this a delivered row could be sent
//! again.
//!
//! Bound: the ids of the records that ended while the one scan in flight ran (each record holds
//! at most `UNRECORDED_MAX` outcomes); forgotten when a scan started after them ends.

use std::collections::{HashSet, VecDeque};

/// The records that ended well, counted, and the ids of those a running scan may not have seen.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    /// Records that have ended well.
    done: u64,
    /// The ids each of them wrote, by its count, oldest first.
    written: VecDeque<(u64, Vec<i64>)>,
}

impl Settled {
    /// How many records have ended well: what a scan starting now carries.
    pub(crate) fn done(&self) -> u64 {
        self.done
    }

    /// A record that wrote the outcomes of `ids` has ended well (committed).
    pub(crate) fn wrote(&mut self, ids: Vec<i64>) {
        self.done += 1;
        self.written.push_back((self.done, ids));
    }

    /// The rows of a scan started when `seen` records had ended, less those a later record
    /// wrote; the ids of records every later scan sees are forgotten.
    pub(crate) fn fresh<T>(&mut self, due: Vec<T>, seen: u64, id: impl Fn(&T) -> i64) -> Vec<T> {
        debug_assert!(seen <= self.done, "a scan from the future");
        while self.written.front().is_some_and(|(n, _)| *n <= seen) {
            self.written.pop_front();
        }
        if self.written.is_empty() {
            return due;
        }
        let later: HashSet<i64> = self.written.iter().flat_map(|(_, ids)| ids.iter().copied()).collect();
        due.into_iter().filter(|row| !later.contains(&id(row))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_testkit::rng::Rng;
    use std::collections::BTreeSet;

    /// The sender's side and the outbox, one random step at a time: attempts end, records start
    /// and commit and are seen to end, scans start, read and are seen to end, in any order the
    /// two blocking threads and the loop allow. Every attempt succeeds, so a row started twice is
    /// a webhook sent twice. `filtered: false` leaves [`Settled::fresh`] out; the rows started
    /// twice in that run.
    fn run(seed: u64, steps: usize, filtered: bool) -> usize {
        const ROWS: i64 = 40;
        let mut rng = Rng::new(seed);
        let mut pending: BTreeSet<i64> = (0..ROWS).collect(); // the outbox's pending rows
        let (mut in_flight, mut unrecorded) = (BTreeSet::new(), Vec::<i64>::new());
        let mut settled = Settled::default();
        let mut record: Option<(usize, bool)> = None; // (outcomes in it, committed)
        let mut scan: Option<(u64, Option<Vec<i64>>)> = None; // (seen, rows read)
        let (mut started, mut twice) = (BTreeSet::new(), 0);
        for _ in 0..steps {
            match rng.below(7) {
                0 if !in_flight.is_empty() => {
                    let id = *in_flight.iter().nth(rng.below(in_flight.len())).expect("one");
                    in_flight.remove(&id);
                    unrecorded.push(id);
                }
                1 if record.is_none() && !unrecorded.is_empty() => record = Some((unrecorded.len(), false)),
                2 => {
                    if let Some((n, committed @ false)) = &mut record {
                        for id in &unrecorded[..*n] {
                            pending.remove(id);
                        }
                        *committed = true;
                    }
                }
                3 if record.is_some_and(|(_, c)| c) => {
                    let (n, _) = record.take().expect("a record");
                    settled.wrote(unrecorded.drain(..n).collect());
                }
                4 if scan.is_none() => scan = Some((settled.done(), None)),
                5 => {
                    if let Some((_, read @ None)) = &mut scan {
                        *read = Some(pending.iter().copied().collect());
                    }
                }
                6 if scan.as_ref().is_some_and(|(_, read)| read.is_some()) => {
                    let (seen, read) = scan.take().expect("a scan");
                    let due = read.expect("read");
                    let due = if filtered { settled.fresh(due, seen, |id| *id) } else { due };
                    for id in due {
                        if in_flight.contains(&id) || unrecorded.contains(&id) {
                            continue;
                        }
                        if !started.insert(id) {
                            twice += 1;
                        }
                        in_flight.insert(id);
                    }
                }
                _ => {}
            }
        }
        twice
    }

    #[test]
    fn a_written_row_read_pending_by_a_concurrent_scan_is_never_sent_again() {
        let seeds = rampart_testkit::rng::seed_from_env(1);
        for seed in seeds..seeds + 200 {
            assert_eq!(run(seed, 2_000, true), 0, "seed {seed}: a row started twice");
        }
        // The model finds what the filter prevents: without it rows are sent twice.
        let unfiltered: usize = (seeds..seeds + 200).map(|seed| run(seed, 2_000, false)).sum();
        assert!(unfiltered > 0, "the interleavings never raced a scan with a record");
    }

    #[test]
    fn a_scan_after_a_record_forgets_it() {
        let mut s = Settled::default();
        s.wrote(vec![1, 2]);
        assert_eq!(s.fresh(vec![1, 3], 0, |id| *id), [3], "started before the record");
        assert_eq!(s.fresh(vec![1, 3], 1, |id| *id), [1, 3], "started after it");
        assert!(s.written.is_empty(), "forgotten");
    }
}
