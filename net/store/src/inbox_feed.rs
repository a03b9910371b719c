//! The inbox entries this process's writer committed, handed to every front thread's stream
//! fan-out without a read of the database (issue #60): the writer publishes a commit's entries
//! here after the commit, and each front's inbox reader takes the entries that follow the last
//! one it handed out, so one commit costs no query however many front threads follow `alerts`.
//!
//! Why this cannot skip or reorder an entry: inbox ids are given in commit order without gaps
//! (`Store::write_inbox`, the `inbox_next` counter), so an entry's successor is always the id
//! after it. A reader takes only an unbroken run starting right after its last id
//! ([`Took::Run`]); when the feed does not hold that id (another writer committed it: the front's
//! storage thread, another process or node; or it fell out at the bound) it is told so
//! ([`Took::Gap`]) and reads the database, as it did before the feed.
//!
//! Bound: the newest [`INBOX_FEED_MAX`] entries; past it the oldest are dropped (a reader that far
//! behind reads the database).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Entries the feed holds at most.
pub const INBOX_FEED_MAX: usize = 8_192;

/// One committed inbox entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FedEntry {
    /// Its account.
    pub account_id: i64,
    /// Its id.
    pub id: i64,
    /// `alert.triggered`, `alert.paused`, ...
    pub kind: &'static str,
    /// Its JSON body.
    pub body: Arc<str>,
}

/// What a reader found after its last id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Took {
    /// The entries right after it, in id order (none: nothing newer here).
    Run(usize),
    /// Newer entries, but not the one right after it: read the database.
    Gap,
}

/// The newest committed entries, in id order.
#[derive(Debug, Default)]
pub struct InboxFeed {
    entries: Mutex<VecDeque<FedEntry>>,
}

impl InboxFeed {
    /// Adds one commit's entries (ascending, consecutive ids), kept in id order whatever order
    /// commits are published in.
    pub fn publish(&self, committed: Vec<FedEntry>) {
        debug_assert!(committed.windows(2).all(|w| w[1].id == w[0].id + 1), "one commit's ids follow each other");
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for e in committed {
            let at = entries.partition_point(|x| x.id < e.id);
            if entries.get(at).is_some_and(|x| x.id == e.id) {
                continue;
            }
            entries.insert(at, e);
        }
        while entries.len() > INBOX_FEED_MAX {
            entries.pop_front();
        }
        debug_assert!(entries.len() <= INBOX_FEED_MAX);
    }

    /// Appends to `out` the unbroken run of entries right after id `last`.
    pub fn after(&self, last: i64, out: &mut Vec<FedEntry>) -> Took {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = entries.partition_point(|x| x.id <= last);
        match entries.get(at) {
            None => Took::Run(0),
            Some(first) if first.id != last + 1 => Took::Gap,
            Some(_) => {
                let before = out.len();
                let run = (last + 1..).zip(entries.range(at..)).take_while(|(next, e)| e.id == *next);
                out.extend(run.map(|(_, e)| e.clone()));
                Took::Run(out.len() - before)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(ids: std::ops::RangeInclusive<i64>) -> Vec<FedEntry> {
        ids.map(|id| FedEntry { account_id: 1, id, kind: "alert.triggered", body: Arc::from(format!("{id}")) })
            .collect()
    }

    fn ids(out: &[FedEntry]) -> Vec<i64> {
        out.iter().map(|e| e.id).collect()
    }

    #[test]
    fn a_reader_takes_the_run_after_its_last_id_and_reads_the_database_at_a_gap() {
        let feed = InboxFeed::default();
        let mut out = Vec::new();
        assert_eq!(feed.after(0, &mut out), Took::Run(0), "empty");
        feed.publish(commit(3..=5));
        assert_eq!(feed.after(2, &mut out), Took::Run(3));
        assert_eq!(ids(&out), [3, 4, 5]);
        assert_eq!(feed.after(5, &mut out), Took::Run(0), "nothing newer");
        assert_eq!(feed.after(0, &mut out), Took::Gap, "1 and 2 were another writer's");
        // A commit published out of order (8 before 6-7) leaves a hole a reader must not jump.
        feed.publish(commit(8..=8));
        out.clear();
        assert_eq!(feed.after(5, &mut out), Took::Gap);
        feed.publish(commit(6..=7));
        assert_eq!(feed.after(5, &mut out), Took::Run(3));
        assert_eq!(ids(&out), [6, 7, 8]);
        // A run stops at a hole.
        feed.publish(commit(10..=11));
        out.clear();
        assert_eq!(feed.after(7, &mut out), Took::Run(1));
        assert_eq!(ids(&out), [8]);
    }

    #[test]
    fn past_the_bound_the_oldest_go_and_a_reader_that_far_behind_reads_the_database() {
        let feed = InboxFeed::default();
        let n = INBOX_FEED_MAX as i64;
        feed.publish(commit(1..=n + 10));
        let mut out = Vec::new();
        assert_eq!(feed.after(0, &mut out), Took::Gap, "1 to 10 dropped");
        assert_eq!(feed.after(10, &mut out), Took::Run(INBOX_FEED_MAX));
        assert_eq!(out.last().map(|e| e.id), Some(n + 10));
    }

    #[test]
    fn commits_published_in_any_order_are_read_once_each_in_id_order() {
        // Random interleavings of the publishes of consecutive commits and of a reader's takes:
        // what the reader hands out, with the database read at each gap, is every id once, in order.
        let mut seed = 7u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let feed = InboxFeed::default();
            let mut commits: Vec<Vec<FedEntry>> = Vec::new();
            let mut id = 0;
            for _ in 0..20 {
                let n = 1 + rand(4) as i64;
                commits.push(commit(id + 1..=id + n));
                id += n;
            }
            let total = id;
            let mut pending = commits.clone();
            let (mut last, mut handed, mut out) = (0i64, Vec::new(), Vec::new());
            while last < total {
                if !pending.is_empty() && rand(3) > 0 {
                    // Commits are published in any order, but only once committed: a commit is
                    // published at most a few places out of its order.
                    let k = rand(pending.len().min(3) as u64) as usize;
                    feed.publish(pending.remove(k));
                    continue;
                }
                out.clear();
                match feed.after(last, &mut out) {
                    Took::Run(_) => handed.extend(ids(&out)),
                    // The database has every committed id: the run of all of them after `last`.
                    Took::Gap => handed.extend(last + 1..=total),
                }
                last = handed.last().copied().unwrap_or(last);
            }
            assert_eq!(handed, (1..=total).collect::<Vec<_>>());
        }
    }
}
